//! DescribeGroups (key 15), v0–5: state, protocol and members of each group. An unknown
//! group is reported Dead with no error, as Kafka does. v4+ shows `group.instance.id`. A group
//! the principal may not DESCRIBE answers GROUP_AUTHORIZATION_FAILED (`crate::authz`).

use super::authorized_operations;
use super::wire::str_bytes;
use crate::authz::{self, AclOperation};
use crate::errors::code;
use crate::groups::{GroupOp, GroupReply};
use crate::session::Session;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::describe_groups_response::{
    DescribedGroup, DescribedGroupMember,
};
use net::kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse, GroupId};
use std::rc::Rc;

pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: DescribeGroupsRequest,
    version: i16,
) -> DescribeGroupsResponse {
    let mut response = DescribeGroupsResponse::default();
    for group_id in &req.groups {
        let mut described = DescribedGroup::default();
        described.group_id = GroupId(group_id.0.clone());
        described.authorized_operations = authorized_operations::reported(
            req.include_authorized_operations,
            shard,
            session,
            &authorized_operations::GROUP,
            &group_id.0,
        );
        if !authz::group(shard, session, AclOperation::Describe, &group_id.0) {
            described.error_code = code(ResponseError::GroupAuthorizationFailed);
            response.groups.push(described);
            continue;
        }
        if group_id.0.is_empty() {
            described.error_code = code(ResponseError::InvalidGroupId);
            response.groups.push(described);
            continue;
        }
        match crate::groups::service::call(shard, &group_id.0, GroupOp::Describe).await {
            GroupReply::Described(d) => {
                described.group_state = str_bytes(d.state);
                described.protocol_type = str_bytes(d.protocol_type);
                described.protocol_data = str_bytes(d.protocol);
                described.members = d
                    .members
                    .into_iter()
                    .map(|m| {
                        let mut member = DescribedGroupMember::default();
                        member.member_id = str_bytes(m.member_id);
                        if version >= 4 {
                            member.group_instance_id = m.group_instance_id.map(str_bytes);
                        }
                        member.client_id = str_bytes(m.client_id);
                        member.client_host = str_bytes(m.client_host);
                        member.member_metadata = m.metadata;
                        member.member_assignment = m.assignment;
                        member
                    })
                    .collect();
            }
            GroupReply::Error(e) => described.error_code = crate::errors::group_error_code(e),
            other => {
                tracing::error!(?other, "unexpected reply to DescribeGroups");
                described.error_code = code(ResponseError::UnknownServerError);
            }
        }
        response.groups.push(described);
    }
    response
}
