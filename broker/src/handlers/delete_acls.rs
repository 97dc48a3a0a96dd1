//! DeleteAcls (key 31), v1–3, as Kafka's `AclApis.handleDeleteAcls`: ALTER on the cluster is
//! required (else every filter's result is CLUSTER_AUTHORIZATION_FAILED); without
//! `authorizer.class.name` every filter is refused with `SECURITY_DISABLED` (54). Otherwise
//! the active controller removes every ACL a valid filter matches
//! (`ControllerOp::DeleteAcls`) and each filter lists the bindings it matched; an unknown
//! filter is INVALID_REQUEST.

use super::acl_wire;
use super::create_acls::NO_AUTHORIZER;
use super::wire::str_bytes;
use crate::authz::{self, AclOperation};
use crate::errors::{code, controller_error};
use crate::session::Session;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use net::kafka_protocol::messages::{DeleteAclsRequest, DeleteAclsResponse};
use replication::metadata::acl::AclBindingFilter;
use replication::metadata::{ControllerAnswer, ControllerOp};
use std::rc::Rc;

pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: &DeleteAclsRequest,
) -> DeleteAclsResponse {
    if !authz::cluster(shard, session, AclOperation::Alter) {
        return all_failed(req, code(ResponseError::ClusterAuthorizationFailed), None);
    }
    if !shard.config.authorizer_enabled {
        let e = code(ResponseError::SecurityDisabled);
        return all_failed(req, e, Some(NO_AUTHORIZER));
    }
    let filters: Vec<AclBindingFilter> = req
        .filters
        .iter()
        .map(|f| {
            acl_wire::filter(
                (
                    f.resource_type_filter,
                    f.resource_name_filter.as_ref(),
                    f.pattern_type_filter,
                ),
                f.principal_filter.as_ref(),
                f.host_filter.as_ref(),
                f.operation,
                f.permission_type,
            )
        })
        .collect();
    let results =
        match crate::controller::call_answer(shard, ControllerOp::DeleteAcls { filters }).await {
            Ok(ControllerAnswer::DeleteAcls { results }) => results,
            Ok(other) => {
                tracing::warn!(answer = ?other, "DeleteAcls: unexpected controller answer");
                return all_failed(req, code(ResponseError::UnknownServerError), None);
            }
            Err(e) => {
                let (error_code, message) = controller_error(&e);
                return all_failed(req, error_code, Some(&message));
            }
        };
    let mut response = DeleteAclsResponse::default();
    response.filter_results = results
        .into_iter()
        .map(|result| {
            let mut r = DeleteAclsFilterResult::default();
            match result {
                Err(e) => {
                    r.error_code = code(ResponseError::InvalidRequest);
                    r.error_message = Some(str_bytes(&e.0));
                }
                Ok(bindings) => {
                    r.matching_acls = bindings
                        .iter()
                        .map(|b| {
                            let mut m = DeleteAclsMatchingAcl::default();
                            m.resource_type = b.resource_type;
                            m.pattern_type = b.pattern_type;
                            (m.resource_name, m.principal, m.host) = acl_wire::strings(b);
                            m.operation = b.operation.code();
                            m.permission_type = b.permission_type;
                            m
                        })
                        .collect();
                }
            }
            r
        })
        .collect();
    response
}

fn all_failed(
    req: &DeleteAclsRequest,
    error_code: i16,
    message: Option<&str>,
) -> DeleteAclsResponse {
    let mut response = DeleteAclsResponse::default();
    response.filter_results = req
        .filters
        .iter()
        .map(|_| {
            let mut r = DeleteAclsFilterResult::default();
            r.error_code = error_code;
            r.error_message = message.map(str_bytes);
            r
        })
        .collect();
    response
}
