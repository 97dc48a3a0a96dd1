//! ListGroups (key 16), v0–4: every shard's groups; v4 (KIP-518) filters by state. While an
//! offsets partition this broker leads is loading, the whole answer is
//! `COORDINATOR_LOAD_IN_PROGRESS`, as in Kafka.

use super::wire::str_bytes;
use crate::authz::{self, AclOperation};
use crate::session::Session;
use crate::shard::Shard;
use net::kafka_protocol::messages::list_groups_response::ListedGroup;
use net::kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};
use std::rc::Rc;

pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: ListGroupsRequest,
    version: i16,
) -> ListGroupsResponse {
    let states: Vec<String> = req
        .states_filter
        .iter()
        .map(|s| s.to_ascii_lowercase())
        .collect();
    let describe_all = authz::cluster(shard, session, AclOperation::Describe);
    let mut response = ListGroupsResponse::default();
    let mut groups = match crate::groups::service::list_all(shard).await {
        Ok(groups) => groups,
        Err(error) => {
            response.error_code = crate::errors::group_error_code(error);
            return response;
        }
    };
    groups.sort_by(|a, b| a.group_id.cmp(&b.group_id));
    response.groups = groups
        .into_iter()
        .filter(|g| states.is_empty() || states.contains(&g.state.to_ascii_lowercase()))
        // Kafka: DESCRIBE on the cluster lists every group, else those the principal may
        // DESCRIBE.
        .filter(|g| {
            describe_all || authz::group(shard, session, AclOperation::Describe, &g.group_id)
        })
        .map(|g| {
            let mut listed = ListedGroup::default();
            listed.group_id = GroupId(str_bytes(g.group_id));
            listed.protocol_type = str_bytes(g.protocol_type);
            if version >= 4 {
                listed.group_state = str_bytes(g.state);
            }
            listed
        })
        .collect();
    response
}
