//! Heartbeat (key 12), v0–4: keeps a member's session alive; `REBALANCE_IN_PROGRESS` tells it
//! to rejoin, `ILLEGAL_GENERATION` / `UNKNOWN_MEMBER_ID` that it is out of date or out.

use crate::authz::{self, AclOperation};
use crate::errors::code;
use crate::groups::{GroupError, GroupOp, GroupReply};
use crate::session::Session;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};
use std::rc::Rc;

pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: HeartbeatRequest,
) -> HeartbeatResponse {
    let mut response = HeartbeatResponse::default();
    let group_id = req.group_id.0.to_string();
    if !authz::group(shard, session, AclOperation::Read, &group_id) {
        response.error_code = code(ResponseError::GroupAuthorizationFailed);
        return response;
    }
    if group_id.is_empty() {
        response.error_code = code(ResponseError::InvalidGroupId);
        return response;
    }
    let op = GroupOp::Heartbeat {
        member_id: req.member_id.to_string(),
        group_instance_id: req.group_instance_id.as_ref().map(|i| i.to_string()),
        generation: req.generation_id,
    };
    response.error_code = match crate::groups::service::call(shard, &group_id, op).await {
        GroupReply::Done => 0,
        // The group is still loading: Kafka answers such a heartbeat blindly with no error
        // (GroupCoordinatorService.heartbeat), so members do not log it or back off.
        GroupReply::Error(GroupError::CoordinatorLoadInProgress) => 0,
        GroupReply::Error(e) => crate::errors::group_error_code(e),
        other => {
            tracing::error!(?other, "unexpected reply to Heartbeat");
            code(ResponseError::UnknownServerError)
        }
    };
    response
}
