//! OffsetFetch (key 9), v1–8: a group's committed offsets; -1 (with empty metadata) for a
//! partition or group with none. From v2 a null topic list means every committed partition;
//! v8 (KIP-709) asks for several groups at once. v7+ `require_stable` (KIP-447): a partition
//! with a transaction's offset commit pending (TxnOffsetCommit, until its marker) answers
//! UNSTABLE_OFFSET_COMMIT; without it, the last committed offset (pending ones never show).

use super::offset_commit::group_by_topic;
use super::wire::{str_bytes, topic_name};
use crate::authz::{self, AclOperation};
use crate::errors::code;
use crate::groups::offsets_log::CommittedOffset;
use crate::groups::{GroupOp, GroupReply};
use crate::session::Session;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use net::kafka_protocol::messages::{GroupId, OffsetFetchRequest, OffsetFetchResponse};
use std::rc::Rc;

/// One partition's answer: its committed offset (or none), or its error code.
type PartitionOffset = Result<Option<CommittedOffset>, i16>;

/// One group's answer: a group-level error code and per-partition committed offsets.
type GroupOffsets = (i16, Vec<(String, i32, PartitionOffset)>);

pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: OffsetFetchRequest,
    version: i16,
) -> OffsetFetchResponse {
    let mut response = OffsetFetchResponse::default();
    if version >= 8 {
        for g in &req.groups {
            let wanted = g.topics.as_ref().map(|ts| {
                ts.iter()
                    .map(|t| (t.name.0.to_string(), t.partition_indexes.clone()))
                    .collect()
            });
            let (error, offsets) =
                fetch(shard, session, &g.group_id.0, wanted, req.require_stable).await;
            let mut group = OffsetFetchResponseGroup::default();
            group.group_id = GroupId(g.group_id.0.clone());
            group.error_code = error;
            group.topics = group_by_topic(offsets)
                .into_iter()
                .map(|(name, ps)| {
                    let mut t = OffsetFetchResponseTopics::default();
                    t.name = topic_name(&name);
                    t.partitions = ps
                        .into_iter()
                        .map(|(index, c)| {
                            let mut p = OffsetFetchResponsePartitions::default();
                            p.partition_index = index;
                            p.error_code = c.as_ref().err().copied().unwrap_or(0);
                            (p.committed_offset, p.committed_leader_epoch, p.metadata) =
                                committed_fields(c.unwrap_or(None));
                            p
                        })
                        .collect();
                    t
                })
                .collect();
            response.groups.push(group);
        }
        return response;
    }
    let wanted = req.topics.as_ref().map(|ts| {
        ts.iter()
            .map(|t| (t.name.0.to_string(), t.partition_indexes.clone()))
            .collect()
    });
    let (error, offsets) = fetch(shard, session, &req.group_id.0, wanted, req.require_stable).await;
    // v1 has no group-level error: it goes on every partition.
    let partition_error = if version < 2 { error } else { 0 };
    response.error_code = if version >= 2 { error } else { 0 };
    response.topics = group_by_topic(offsets)
        .into_iter()
        .map(|(name, ps)| {
            let mut t = OffsetFetchResponseTopic::default();
            t.name = topic_name(&name);
            t.partitions = ps
                .into_iter()
                .map(|(index, c)| {
                    let mut p = OffsetFetchResponsePartition::default();
                    p.partition_index = index;
                    p.error_code = c.as_ref().err().copied().unwrap_or(partition_error);
                    (p.committed_offset, p.committed_leader_epoch, p.metadata) =
                        committed_fields(c.unwrap_or(None));
                    p
                })
                .collect();
            t
        })
        .collect();
    response
}

/// The group's committed offsets of `wanted` (`None`: all). With `require_stable` (v7+,
/// KIP-447) a partition with a transaction's offset commit pending answers
/// UNSTABLE_OFFSET_COMMIT (and offset -1). Kafka's `handleOffsetFetchRequest`: DESCRIBE on
/// the group, else GROUP_AUTHORIZATION_FAILED; when every partition is asked for, those of
/// topics the principal may not DESCRIBE are left out.
async fn fetch(
    shard: &Rc<Shard>,
    session: &Session,
    group_id: &str,
    wanted: Option<Vec<(String, Vec<i32>)>>,
    require_stable: bool,
) -> GroupOffsets {
    let unanswered = |wanted: &Option<Vec<(String, Vec<i32>)>>| {
        wanted
            .iter()
            .flatten()
            .flat_map(|(t, ps)| ps.iter().map(move |p| (t.clone(), *p, Ok(None))))
            .collect::<Vec<_>>()
    };
    if !authz::group(shard, session, AclOperation::Describe, group_id) {
        return (
            code(ResponseError::GroupAuthorizationFailed),
            unanswered(&wanted),
        );
    }
    if group_id.is_empty() {
        return (code(ResponseError::InvalidGroupId), unanswered(&wanted));
    }
    let every_partition = wanted.is_none();
    let op = GroupOp::FetchOffsets {
        partitions: wanted.clone(),
        require_stable,
    };
    match crate::groups::service::call(shard, group_id, op).await {
        GroupReply::Offsets(offsets) => (
            0,
            offsets
                .into_iter()
                .filter(|(topic, ..)| {
                    !every_partition || authz::topic(shard, session, AclOperation::Describe, topic)
                })
                .map(|(t, p, c)| (t, p, c.map_err(crate::errors::group_error_code)))
                .collect(),
        ),
        GroupReply::Error(e) => (crate::errors::group_error_code(e), unanswered(&wanted)),
        other => {
            tracing::error!(?other, "unexpected reply to OffsetFetch");
            (code(ResponseError::UnknownServerError), unanswered(&wanted))
        }
    }
}

/// (offset, leader epoch, metadata) as the response carries them: -1, -1, "" when none.
fn committed_fields(
    c: Option<CommittedOffset>,
) -> (i64, i32, Option<net::kafka_protocol::protocol::StrBytes>) {
    match c {
        Some(c) => (c.offset, c.leader_epoch, Some(str_bytes(c.metadata))),
        None => (-1, -1, Some(str_bytes(""))),
    }
}
