//! OffsetCommit (key 8), v2–8: committed offsets are appended to the group's
//! `__consumer_offsets` partition and flushed before the answer (so an acknowledged commit
//! survives a crash); partitions that do not exist get `UNKNOWN_TOPIC_OR_PARTITION`. Members commit with their generation; a generation of -1 into an
//! empty group is a "simple" commit (manual assignment, admin tools). v7+ carries
//! `group.instance.id`.

use super::wire::topic_name;
use crate::authz::{self, AclOperation};
use crate::errors::code;
use crate::groups::{GroupOp, GroupReply, OffsetCommitEntry};
use crate::session::Session;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use net::kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};
use std::rc::Rc;

pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: OffsetCommitRequest,
) -> OffsetCommitResponse {
    let offsets = requested_offsets(&req);
    let group_id = req.group_id.0.to_string();
    // Kafka's `handleOffsetCommitRequest`: READ on the group, else every partition answers
    // GROUP_AUTHORIZATION_FAILED; then READ on each topic, else TOPIC_AUTHORIZATION_FAILED.
    if !authz::group(shard, session, AclOperation::Read, &group_id) {
        let error = code(ResponseError::GroupAuthorizationFailed);
        let results = offsets.into_iter().map(|o| (o.topic, o.partition, error));
        return respond(results.collect());
    }
    let results = partition_results(shard, session, &group_id, offsets, |offsets| {
        commit(shard, &req, &group_id, offsets)
    })
    .await;
    respond(results)
}

/// (topic, partition, error code) of each of `offsets` committed to `group_id` (OffsetCommit
/// and TxnOffsetCommit alike, once the group-wide checks passed): TOPIC_AUTHORIZATION_FAILED
/// for a topic the session may not READ, UNKNOWN_TOPIC_OR_PARTITION for a partition the
/// cluster does not have (hosted by this broker or not: the coordinator stores offsets of any
/// partition), INVALID_GROUP_ID for all with an empty group id, else what `commit` answers.
pub(super) async fn partition_results<F, Fut>(
    shard: &Shard,
    session: &Session,
    group_id: &str,
    offsets: Vec<OffsetCommitEntry>,
    commit: F,
) -> Vec<(String, i32, i16)>
where
    F: FnOnce(Vec<OffsetCommitEntry>) -> Fut,
    Fut: std::future::Future<Output = Vec<(String, i32, i16)>>,
{
    let (offsets, denied): (Vec<_>, Vec<_>) = offsets
        .into_iter()
        .partition(|o| authz::topic(shard, session, AclOperation::Read, &o.topic));
    let (offsets, unknown): (Vec<_>, Vec<_>) = {
        let metadata = shard.metadata();
        offsets
            .into_iter()
            .partition(|o| metadata.partition(&o.topic, o.partition).is_some())
    };
    let mut results: Vec<(String, i32, i16)> = if group_id.is_empty() {
        let error = code(ResponseError::InvalidGroupId);
        offsets
            .iter()
            .map(|o| (o.topic.clone(), o.partition, error))
            .collect()
    } else {
        commit(offsets).await
    };
    let unknown_error = code(ResponseError::UnknownTopicOrPartition);
    results.extend(
        unknown
            .into_iter()
            .map(|o| (o.topic, o.partition, unknown_error)),
    );
    let denied_error = code(ResponseError::TopicAuthorizationFailed);
    results.extend(
        denied
            .into_iter()
            .map(|o| (o.topic, o.partition, denied_error)),
    );
    results
}

/// The response carrying `results` (topic, partition, error code), grouped by topic.
fn respond(results: Vec<(String, i32, i16)>) -> OffsetCommitResponse {
    let mut response = OffsetCommitResponse::default();
    response.topics = group_by_topic(results)
        .into_iter()
        .map(|(name, partitions)| topic_response(&name, partitions))
        .collect();
    response
}

/// Every partition's offset in the request, in request order.
fn requested_offsets(req: &OffsetCommitRequest) -> Vec<OffsetCommitEntry> {
    req.topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| OffsetCommitEntry {
                topic: t.name.0.to_string(),
                partition: p.partition_index,
                offset: p.committed_offset,
                leader_epoch: p.committed_leader_epoch,
                metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
            })
        })
        .collect()
}

/// Commits `offsets` to group `group_id` through its coordinator; returns (topic, partition,
/// error code) for each, the group's error for all when the commit as a whole fails.
async fn commit(
    shard: &Rc<Shard>,
    req: &OffsetCommitRequest,
    group_id: &str,
    offsets: Vec<OffsetCommitEntry>,
) -> Vec<(String, i32, i16)> {
    let fallback: Vec<(String, i32)> = offsets
        .iter()
        .map(|o| (o.topic.clone(), o.partition))
        .collect();
    let op = GroupOp::Commit {
        member_id: req.member_id.to_string(),
        group_instance_id: req.group_instance_id.as_ref().map(|i| i.to_string()),
        generation: req.generation_id_or_member_epoch,
        offsets,
    };
    match crate::groups::service::call(shard, group_id, op).await {
        GroupReply::PartitionErrors(results) => results
            .into_iter()
            .map(|(t, p, r)| (t, p, crate::errors::group_result_code(r)))
            .collect(),
        GroupReply::Error(e) => {
            let e = crate::errors::group_error_code(e);
            fallback.into_iter().map(|(t, p)| (t, p, e)).collect()
        }
        other => {
            tracing::error!(?other, "unexpected reply to OffsetCommit");
            let e = code(ResponseError::UnknownServerError);
            fallback.into_iter().map(|(t, p)| (t, p, e)).collect()
        }
    }
}

/// One topic's answer: (partition index, error code) of each of its partitions.
fn topic_response(name: &str, partitions: Vec<(i32, i16)>) -> OffsetCommitResponseTopic {
    let mut t = OffsetCommitResponseTopic::default();
    t.name = topic_name(name);
    t.partitions = partitions
        .into_iter()
        .map(|(index, error)| {
            let mut p = OffsetCommitResponsePartition::default();
            p.partition_index = index;
            p.error_code = error;
            p
        })
        .collect();
    t
}

/// `(topic, partition, x)` triples grouped by topic, topics in first-seen order.
pub fn group_by_topic<T>(items: Vec<(String, i32, T)>) -> Vec<(String, Vec<(i32, T)>)> {
    let mut out: Vec<(String, Vec<(i32, T)>)> = Vec::new();
    let mut index: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (topic, partition, x) in items {
        match index.get(&topic) {
            Some(&i) => out[i].1.push((partition, x)),
            None => {
                index.insert(topic.clone(), out.len());
                out.push((topic, vec![(partition, x)]));
            }
        }
    }
    out
}
