//! DeleteAcls (key 31), v1–3: no authorizer, so every filter is refused with
//! `SECURITY_DISABLED` (54), one result per filter, as Kafka answers without
//! `authorizer.class.name`.

use super::describe_acls::NO_AUTHORIZER;
use super::wire::str_bytes;
use crate::errors::code;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::delete_acls_response::DeleteAclsFilterResult;
use net::kafka_protocol::messages::{DeleteAclsRequest, DeleteAclsResponse};

pub fn handle(req: &DeleteAclsRequest) -> DeleteAclsResponse {
    let mut response = DeleteAclsResponse::default();
    response.filter_results = req
        .filters
        .iter()
        .map(|_| {
            let mut r = DeleteAclsFilterResult::default();
            r.error_code = code(ResponseError::SecurityDisabled);
            r.error_message = Some(str_bytes(NO_AUTHORIZER));
            r
        })
        .collect();
    response
}
