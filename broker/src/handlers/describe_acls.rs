//! DescribeAcls (key 29), v1–3: Sluice has no authorizer, so — as Kafka answers when no
//! `authorizer.class.name` is configured — the request is refused with `SECURITY_DISABLED`
//! (54), "No Authorizer is configured on the broker" (Kafka's `AuthHelper.handleDescribeAcls`).
//! Served so that `kafka-acls --list` and admin clients report Kafka's error instead of an
//! unsupported API.

use super::wire::str_bytes;
use crate::errors::code;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::DescribeAclsResponse;

/// Kafka's message for every ACL API without an authorizer.
pub const NO_AUTHORIZER: &str = "No Authorizer is configured on the broker";

pub fn handle() -> DescribeAclsResponse {
    let mut response = DescribeAclsResponse::default();
    response.error_code = code(ResponseError::SecurityDisabled);
    response.error_message = Some(str_bytes(NO_AUTHORIZER));
    response
}
