//! OffsetDelete (key 47), v0 (KIP-496): deletes a group's committed offsets of some
//! partitions; refused per partition with `GROUP_SUBSCRIBED_TO_TOPIC` while the group's
//! members consume that topic, and as a whole with `GROUP_ID_NOT_FOUND`.

use super::offset_commit::group_by_topic;
use super::wire::topic_name;
use crate::authz::{self, AclOperation};
use crate::errors::code;
use crate::groups::{GroupOp, GroupReply};
use crate::session::Session;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use net::kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse};
use std::rc::Rc;

pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: OffsetDeleteRequest,
) -> OffsetDeleteResponse {
    let mut response = OffsetDeleteResponse::default();
    if !authz::group(shard, session, AclOperation::Delete, &req.group_id.0) {
        response.error_code = code(ResponseError::GroupAuthorizationFailed);
        return response;
    }
    if req.group_id.0.is_empty() {
        response.error_code = code(ResponseError::InvalidGroupId);
        return response;
    }
    let partitions = req
        .topics
        .iter()
        .map(|t| {
            let ps = t.partitions.iter().map(|p| p.partition_index).collect();
            (t.name.0.to_string(), ps)
        })
        .collect();
    let results = match crate::groups::service::call(
        shard,
        &req.group_id.0,
        GroupOp::DeleteOffsets { partitions },
    )
    .await
    {
        GroupReply::PartitionErrors(results) => results
            .into_iter()
            .map(|(t, p, r)| (t, p, crate::errors::group_result_code(r)))
            .collect::<Vec<_>>(),
        GroupReply::Error(e) => {
            response.error_code = crate::errors::group_error_code(e);
            return response;
        }
        other => {
            tracing::error!(?other, "unexpected reply to OffsetDelete");
            response.error_code = code(ResponseError::UnknownServerError);
            return response;
        }
    };
    response.topics = group_by_topic(results)
        .into_iter()
        .map(|(name, ps)| {
            let mut t = OffsetDeleteResponseTopic::default();
            t.name = topic_name(&name);
            t.partitions = ps
                .into_iter()
                .map(|(index, error)| {
                    let mut p = OffsetDeleteResponsePartition::default();
                    p.partition_index = index;
                    p.error_code = error;
                    p
                })
                .collect();
            t
        })
        .collect();
    response
}
