//! SyncGroup (key 14), v0–5: the leader hands over the assignment of its generation, which
//! is stored in `__consumer_offsets` before anyone gets theirs; the others wait for it.
//! v5 checks the protocol type and name.

use super::wire::str_bytes;
use crate::authz::{self, AclOperation};
use crate::errors::code;
use crate::groups::group::SyncParams;
use crate::groups::{GroupOp, GroupReply};
use crate::session::Session;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::{SyncGroupRequest, SyncGroupResponse};
use std::rc::Rc;

pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: SyncGroupRequest,
    version: i16,
) -> SyncGroupResponse {
    let mut response = SyncGroupResponse::default();
    let group_id = req.group_id.0.to_string();
    if !authz::group(shard, session, AclOperation::Read, &group_id) {
        response.error_code = code(ResponseError::GroupAuthorizationFailed);
        return response;
    }
    if group_id.is_empty() {
        response.error_code = code(ResponseError::InvalidGroupId);
        return response;
    }
    let params = SyncParams {
        generation: req.generation_id,
        member_id: req.member_id.to_string(),
        group_instance_id: req.group_instance_id.as_ref().map(|i| i.to_string()),
        protocol_type: req.protocol_type.as_ref().map(|p| p.to_string()),
        protocol_name: req.protocol_name.as_ref().map(|p| p.to_string()),
        assignments: req
            .assignments
            .iter()
            .map(|a| (a.member_id.to_string(), a.assignment.clone()))
            .collect(),
    };
    match crate::groups::service::call(shard, &group_id, GroupOp::Sync(params)).await {
        GroupReply::Sync(r) => {
            response.error_code = r.error.map_or(0, crate::errors::group_error_code);
            response.assignment = r.assignment;
            if version >= 5 {
                response.protocol_type = r.protocol_type.map(str_bytes);
                response.protocol_name = r.protocol_name.map(str_bytes);
            }
        }
        GroupReply::Error(e) => response.error_code = crate::errors::group_error_code(e),
        other => {
            tracing::error!(?other, "unexpected reply to SyncGroup");
            response.error_code = code(ResponseError::UnknownServerError);
        }
    }
    response
}
