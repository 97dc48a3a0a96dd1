//! DeleteGroups (key 42), v0–2: deletes empty groups and their committed offsets (tombstones
//! in `__consumer_offsets`, so the deletion survives restarts). `NON_EMPTY_GROUP` while the
//! group has members, `GROUP_ID_NOT_FOUND` for an unknown group.

use crate::authz::{self, AclOperation};
use crate::errors::code;
use crate::groups::{GroupOp, GroupReply};
use crate::session::Session;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use net::kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse, GroupId};
use std::rc::Rc;

pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: DeleteGroupsRequest,
) -> DeleteGroupsResponse {
    let mut response = DeleteGroupsResponse::default();
    for group_id in &req.groups_names {
        let mut result = DeletableGroupResult::default();
        result.group_id = GroupId(group_id.0.clone());
        result.error_code = if !authz::group(shard, session, AclOperation::Delete, &group_id.0) {
            code(ResponseError::GroupAuthorizationFailed)
        } else if group_id.0.is_empty() {
            code(ResponseError::InvalidGroupId)
        } else {
            match crate::groups::service::call(shard, &group_id.0, GroupOp::Delete).await {
                GroupReply::Done => 0,
                GroupReply::Error(e) => crate::errors::group_error_code(e),
                other => {
                    tracing::error!(?other, "unexpected reply to DeleteGroups");
                    code(ResponseError::UnknownServerError)
                }
            }
        };
        response.results.push(result);
    }
    response
}
