//! CreateAcls (key 30), v1–3, as Kafka's `AclApis.handleCreateAcls`: ALTER on the cluster is
//! required (else every result is CLUSTER_AUTHORIZATION_FAILED); without
//! `authorizer.class.name` every creation is refused with `SECURITY_DISABLED` (54). Otherwise
//! the active controller stores the valid ones as `AccessControlEntryRecord`s
//! (`ControllerOp::CreateAcls`; a broker that is not the controller forwards) and each
//! creation gets its own result: INVALID_REQUEST with Kafka's message for a refused one.

use super::acl_wire;
use super::wire::str_bytes;
use crate::authz::{self, AclOperation};
use crate::errors::{code, controller_error};
use crate::session::Session;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::create_acls_response::AclCreationResult;
use net::kafka_protocol::messages::{CreateAclsRequest, CreateAclsResponse};
use replication::metadata::acl::{validate_new, AclBinding, InvalidAcl};
use replication::metadata::{ControllerAnswer, ControllerOp};
use std::rc::Rc;

/// Kafka's message for CreateAcls and DeleteAcls without an authorizer.
pub const NO_AUTHORIZER: &str = "No Authorizer is configured.";

pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: &CreateAclsRequest,
) -> CreateAclsResponse {
    if !authz::cluster(shard, session, AclOperation::Alter) {
        return all_failed(req, code(ResponseError::ClusterAuthorizationFailed), None);
    }
    if !shard.config.authorizer_enabled {
        let e = code(ResponseError::SecurityDisabled);
        return all_failed(req, e, Some(NO_AUTHORIZER));
    }
    let bindings: Vec<AclBinding> = req.creations.iter().map(acl_wire::binding).collect();
    let valid: Vec<AclBinding> = bindings
        .iter()
        .filter(|b| validate_new(b).is_ok())
        .cloned()
        .collect();
    let stored = if valid.is_empty() {
        Ok(())
    } else {
        match crate::controller::call_answer(shard, ControllerOp::CreateAcls { creations: valid })
            .await
        {
            Ok(ControllerAnswer::CreateAcls { .. }) => Ok(()),
            Ok(other) => {
                tracing::warn!(answer = ?other, "CreateAcls: unexpected controller answer");
                Err((
                    code(ResponseError::UnknownServerError),
                    format!("{other:?}"),
                ))
            }
            Err(e) => Err(controller_error(&e)),
        }
    };
    let mut response = CreateAclsResponse::default();
    response.results = bindings
        .iter()
        .map(|b| {
            let mut r = AclCreationResult::default();
            let outcome: Result<(), (i16, String)> = match validate_new(b) {
                Err(InvalidAcl(m)) => Err((code(ResponseError::InvalidRequest), m)),
                Ok(()) => stored.clone(),
            };
            if let Err((error_code, message)) = outcome {
                r.error_code = error_code;
                r.error_message = Some(str_bytes(&message));
            }
            r
        })
        .collect();
    response
}

fn all_failed(
    req: &CreateAclsRequest,
    error_code: i16,
    message: Option<&str>,
) -> CreateAclsResponse {
    let mut response = CreateAclsResponse::default();
    response.results = req
        .creations
        .iter()
        .map(|_| {
            let mut r = AclCreationResult::default();
            r.error_code = error_code;
            r.error_message = message.map(str_bytes);
            r
        })
        .collect();
    response
}
