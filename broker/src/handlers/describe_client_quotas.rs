//! DescribeClientQuotas (key 48), v0–1 (KIP-546): Sluice enforces no client quotas and none can
//! be set (AlterClientQuotas is not served), so every filter matches nothing: the answer is an
//! empty entry list, as Kafka answers when no quota is configured. `kafka-configs --describe
//! --entity-type clients|users` then prints nothing.

use net::kafka_protocol::messages::DescribeClientQuotasResponse;

pub fn handle() -> DescribeClientQuotasResponse {
    let mut response = DescribeClientQuotasResponse::default();
    response.entries = Some(Vec::new());
    response
}
