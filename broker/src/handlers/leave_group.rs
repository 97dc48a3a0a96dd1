//! LeaveGroup (key 13), v0–5: members leave at once instead of timing out; the rest
//! rebalance. v0–2 name one member; v3+ (KIP-345) a batch, by member id or
//! `group.instance.id`, with an error per member.

use super::wire::str_bytes;
use crate::authz::{self, AclOperation};
use crate::errors::code;
use crate::groups::{GroupOp, GroupReply};
use crate::session::Session;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::leave_group_response::MemberResponse;
use net::kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse};
use std::rc::Rc;

pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: LeaveGroupRequest,
    version: i16,
) -> LeaveGroupResponse {
    let mut response = LeaveGroupResponse::default();
    let group_id = req.group_id.0.to_string();
    if !authz::group(shard, session, AclOperation::Read, &group_id) {
        response.error_code = code(ResponseError::GroupAuthorizationFailed);
        return response;
    }
    if group_id.is_empty() {
        response.error_code = code(ResponseError::InvalidGroupId);
        return response;
    }
    let members: Vec<(String, Option<String>)> = if version >= 3 {
        req.members
            .iter()
            .map(|m| {
                let instance = m.group_instance_id.as_ref().map(|i| i.to_string());
                (m.member_id.to_string(), instance)
            })
            .collect()
    } else {
        vec![(req.member_id.to_string(), None)]
    };
    let errors = match crate::groups::service::call(
        shard,
        &group_id,
        GroupOp::Leave {
            members: members.clone(),
        },
    )
    .await
    {
        GroupReply::Leave(results) => results
            .into_iter()
            .map(crate::errors::group_result_code)
            .collect::<Vec<_>>(),
        GroupReply::Error(e) => {
            response.error_code = crate::errors::group_error_code(e);
            return response;
        }
        other => {
            tracing::error!(?other, "unexpected reply to LeaveGroup");
            response.error_code = code(ResponseError::UnknownServerError);
            return response;
        }
    };
    if version >= 3 {
        response.members = members
            .into_iter()
            .zip(errors)
            .map(|((member_id, instance), error)| {
                let mut m = MemberResponse::default();
                m.member_id = str_bytes(member_id);
                m.group_instance_id = instance.map(str_bytes);
                m.error_code = error;
                m
            })
            .collect();
    } else {
        response.error_code = errors.first().copied().unwrap_or(0);
    }
    response
}
