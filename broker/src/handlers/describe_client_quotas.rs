//! DescribeClientQuotas (key 48), v0–1 (KIP-546), as Kafka's `ClientQuotasImage.describe`:
//! DESCRIBE_CONFIGS on the cluster is required (else CLUSTER_AUTHORIZATION_FAILED); the
//! quotas of this broker's metadata whose entity the filter selects
//! (`replication::metadata::quotas::describe`). `kafka-configs.sh --describe --entity-type
//! users|clients` sends it.

use super::wire::str_bytes;
use crate::authz::{self, AclOperation};
use crate::errors::code;
use crate::session::Session;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::describe_client_quotas_response::{
    EntityData, EntryData, ValueData,
};
use net::kafka_protocol::messages::{DescribeClientQuotasRequest, DescribeClientQuotasResponse};
use replication::metadata::quotas::{describe, FilterError};

pub fn handle(
    shard: &Shard,
    session: &Session,
    req: &DescribeClientQuotasRequest,
) -> DescribeClientQuotasResponse {
    let mut response = DescribeClientQuotasResponse::default();
    if !authz::cluster(shard, session, AclOperation::DescribeConfigs) {
        response.error_code = code(ResponseError::ClusterAuthorizationFailed);
        return response;
    }
    let components: Vec<(String, i8, Option<String>)> = req
        .components
        .iter()
        .map(|c| {
            let name = c._match.as_ref().map(|m| m.to_string());
            (c.entity_type.to_string(), c.match_type, name)
        })
        .collect();
    let metadata = shard.metadata.borrow().clone();
    match describe(&metadata.client_quotas, &components, req.strict) {
        Ok(found) => {
            response.entries = Some(
                found
                    .into_iter()
                    .map(|(entity, values)| {
                        let mut e = EntryData::default();
                        e.entity = entity
                            .iter()
                            .map(|(kind, name)| {
                                let mut d = EntityData::default();
                                d.entity_type = str_bytes(kind);
                                d.entity_name = name.as_deref().map(str_bytes);
                                d
                            })
                            .collect();
                        e.values = values
                            .iter()
                            .map(|(key, value)| {
                                let mut v = ValueData::default();
                                v.key = str_bytes(key);
                                v.value = value.0;
                                v
                            })
                            .collect();
                        e
                    })
                    .collect(),
            );
        }
        Err(e) => {
            let (error, message) = match e {
                FilterError::Invalid(m) => (ResponseError::InvalidRequest, m),
                FilterError::UnsupportedEntityType(m) => (ResponseError::UnsupportedVersion, m),
            };
            response.error_code = code(error);
            response.error_message = Some(str_bytes(&message));
        }
    }
    response
}
