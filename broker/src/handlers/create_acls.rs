//! CreateAcls (key 30), v1–3: no authorizer, so every creation is refused with
//! `SECURITY_DISABLED` (54), one result per requested ACL, as Kafka answers without
//! `authorizer.class.name`.

use super::describe_acls::NO_AUTHORIZER;
use super::wire::str_bytes;
use crate::errors::code;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::create_acls_response::AclCreationResult;
use net::kafka_protocol::messages::{CreateAclsRequest, CreateAclsResponse};

pub fn handle(req: &CreateAclsRequest) -> CreateAclsResponse {
    let mut response = CreateAclsResponse::default();
    response.results = req
        .creations
        .iter()
        .map(|_| {
            let mut r = AclCreationResult::default();
            r.error_code = code(ResponseError::SecurityDisabled);
            r.error_message = Some(str_bytes(NO_AUTHORIZER));
            r
        })
        .collect();
    response
}
