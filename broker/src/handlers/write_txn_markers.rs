//! WriteTxnMarkers (key 27, v1 — Kafka 4 serves only v1, KIP-896): the transaction
//! coordinator asks each partition leader to end a producer's transaction with a commit or
//! abort marker (KIP-98). Each partition's marker goes to its owning shard
//! ([`PartitionOp::WriteTxnMarker`]), all partitions of all markers concurrently, and is
//! answered once the high watermark passes it: Kafka appends markers with `acks=all`
//! (`ReplicaManager.appendRecords`, required acks -1, origin COORDINATOR, internal topics
//! allowed) and times out after `request.timeout.ms` (30 s, Kafka's default), so a leader
//! whose ISR is below `min.insync.replicas` answers NOT_ENOUGH_REPLICAS.
//!
//! Per-partition errors, as Kafka's `KafkaApis.handleWriteTxnMarkersRequest`: a partition the
//! image does not know answers UNKNOWN_TOPIC_OR_PARTITION, one this broker does not lead
//! NOT_LEADER_OR_FOLLOWER, a producer epoch older than the partition's INVALID_PRODUCER_EPOCH,
//! a coordinator epoch older than the producer's last marker's TRANSACTION_COORDINATOR_FENCED,
//! a full or failed disk KAFKA_STORAGE_ERROR, and a partition whose owning shard is stopping
//! NOT_LEADER_OR_FOLLOWER (the coordinator retries it).
//!
//! A marker written to a `__consumer_offsets` partition then ends the producer's pending
//! transactional offset commits there (TxnOffsetCommit): the shard coordinating that
//! partition's groups is told, with the commit or abort, before the answer; a coordinator
//! that is loading or gone answers NOT_LEADER_OR_FOLLOWER (Kafka maps its coordinator errors
//! so), and the transaction coordinator retries.
//!
//! The transaction coordinator (`crate::txn`) sends these to other brokers; its own
//! partitions' markers it writes through the partition service directly. Kafka authorizes this
//! inter-broker API with CLUSTER_ACTION on the cluster, as here.

use super::wire::topic_name;
use crate::authz::{self, AclOperation};
use crate::errors::{code, partition_op_error_code};
use crate::groups::service::on_txn_marker;
use crate::groups::{GroupError, OFFSETS_TOPIC};
use crate::partitions::{PartitionOp, PartitionOpError, PartitionReply};
use crate::session::Session;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use net::kafka_protocol::messages::{WriteTxnMarkersRequest, WriteTxnMarkersResponse};
use std::rc::Rc;
use std::time::Duration;
use storage::{TopicPartition, TxnMarker, TxnResult};

/// How long a marker waits for the ISR (Kafka's `request.timeout.ms` default).
const MARKER_TIMEOUT: Duration = Duration::from_secs(30);

pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: WriteTxnMarkersRequest,
) -> WriteTxnMarkersResponse {
    // Kafka: CLUSTER_ACTION on the cluster, else every partition answers
    // CLUSTER_AUTHORIZATION_FAILED (`crate::authz`).
    let cluster_action = authz::cluster(shard, session, AclOperation::ClusterAction);
    let metadata = shard.metadata();
    let mut writes = Vec::new();
    // Per partition, in response order: the offsets partition and the marker's producer and
    // result when the partition is one of `__consumer_offsets` (its groups are told).
    let mut offsets_targets: Vec<Option<(i32, i64, TxnResult)>> = Vec::new();
    let mut response = WriteTxnMarkersResponse::default();
    for m in &req.markers {
        let marker = TxnMarker {
            producer_id: m.producer_id.0,
            producer_epoch: m.producer_epoch,
            result: if m.transaction_result {
                TxnResult::Commit
            } else {
                TxnResult::Abort
            },
            coordinator_epoch: m.coordinator_epoch,
        };
        let mut result = WritableTxnMarkerResult::default();
        result.producer_id = m.producer_id;
        for topic in &m.topics {
            let name: &str = &topic.name.0;
            let image = metadata.topics.get(name);
            let mut topic_result = WritableTxnMarkerTopicResult::default();
            topic_result.name = topic_name(name);
            for &index in &topic.partition_indexes {
                let mut p = WritableTxnMarkerPartitionResult::default();
                p.partition_index = index;
                topic_result.partitions.push(p);
                let tp = TopicPartition {
                    topic: name.to_owned(),
                    partition: index,
                };
                // Refused: routed nowhere (a placement of none), answered below.
                let placement = image
                    .filter(|_| cluster_action)
                    .and_then(|t| metadata.placement(t, index));
                let op = PartitionOp::WriteTxnMarker {
                    marker,
                    timeout: MARKER_TIMEOUT,
                };
                offsets_targets.push((name == OFFSETS_TOPIC).then_some((
                    index,
                    marker.producer_id,
                    marker.result,
                )));
                writes.push(crate::partitions::service::call_placed(
                    shard, tp, placement, op,
                ));
            }
            result.topics.push(topic_result);
        }
        response.markers.push(result);
    }
    drop(metadata);
    let replies = futures_util::future::join_all(writes).await;
    let slots = response
        .markers
        .iter_mut()
        .flat_map(|m| &mut m.topics)
        .flat_map(|t| &mut t.partitions);
    for ((slot, reply), target) in slots.zip(replies).zip(offsets_targets) {
        if !cluster_action {
            slot.error_code = code(ResponseError::ClusterAuthorizationFailed);
            continue;
        }
        slot.error_code = marker_error_code(reply);
        if let (0, Some((partition, producer_id, end))) = (slot.error_code, target) {
            let completed = on_txn_marker(shard, partition, producer_id, end).await;
            slot.error_code = completion_error_code(completed);
        }
    }
    response
}

/// The code of a marker written to an offsets partition once its groups were told (Kafka's
/// `KafkaApis.handleWriteTxnMarkersRequest` after `GroupCoordinator.completeTransaction`): a
/// coordinator that is loading, moved or unavailable answers NOT_LEADER_OR_FOLLOWER, so the
/// transaction coordinator sends the marker again (a second marker ends nothing more in the
/// log, and its notification completes the groups' pending offsets then).
fn completion_error_code(completed: Result<(), GroupError>) -> i16 {
    match completed {
        Ok(()) => 0,
        Err(
            GroupError::NotCoordinator
            | GroupError::CoordinatorLoadInProgress
            | GroupError::CoordinatorNotAvailable,
        ) => code(ResponseError::NotLeaderOrFollower),
        Err(e) => crate::errors::group_error_code(e),
    }
}

/// The per-partition error code of one marker's reply. A partition whose owning shard is
/// stopping or unreachable answers NOT_LEADER_OR_FOLLOWER, as one this broker does not lead:
/// Kafka's coordinator (`TransactionMarkerRequestCompletionHandler`) retries that, after a
/// metadata refresh, while an unexpected code such as UNKNOWN_SERVER_ERROR makes it give up on
/// the marker.
fn marker_error_code(reply: PartitionReply) -> i16 {
    match reply {
        PartitionReply::MarkerWritten { offset } => {
            tracing::debug!(offset, "transaction marker written");
            0
        }
        PartitionReply::Error(PartitionOpError::ShardUnavailable) => {
            code(ResponseError::NotLeaderOrFollower)
        }
        PartitionReply::Error(e) => partition_op_error_code(&e),
        other => {
            tracing::error!(?other, "unexpected reply to a transaction marker");
            code(ResponseError::UnknownServerError)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unavailable_or_unled_partition_answers_not_leader_or_follower() {
        let not_leader = code(ResponseError::NotLeaderOrFollower);
        for e in [
            PartitionOpError::ShardUnavailable,
            PartitionOpError::NotLeaderOrFollower,
        ] {
            assert_eq!(marker_error_code(PartitionReply::Error(e)), not_leader);
        }
        assert_eq!(
            marker_error_code(PartitionReply::MarkerWritten { offset: 3 }),
            0
        );
        assert_eq!(
            marker_error_code(PartitionReply::Error(
                PartitionOpError::UnknownTopicOrPartition
            )),
            code(ResponseError::UnknownTopicOrPartition)
        );
    }

    #[test]
    fn a_group_coordinator_not_ready_for_the_marker_answers_not_leader_or_follower() {
        assert_eq!(completion_error_code(Ok(())), 0);
        for e in [
            GroupError::NotCoordinator,
            GroupError::CoordinatorLoadInProgress,
            GroupError::CoordinatorNotAvailable,
        ] {
            assert_eq!(
                completion_error_code(Err(e)),
                code(ResponseError::NotLeaderOrFollower)
            );
        }
    }
}
