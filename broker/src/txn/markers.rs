//! The markers of a prepared transaction (Kafka's `TransactionMarkerChannelManager` and
//! `TransactionMarkerRequestCompletionHandler`): WriteTxnMarkers to the leader of each of its
//! partitions — this broker's through the partition service, another broker's over its Kafka
//! listener — retried with a bounded backoff until every partition has its marker, then the
//! transaction is written CompleteCommit or CompleteAbort.
//!
//! Per partition, as Kafka's completion handler: written → done; the topic is gone → done
//! (nothing to mark); no leader, a leader that moved, too few replicas, a timeout or an
//! unreachable broker → retried; `INVALID_PRODUCER_EPOCH` or `TRANSACTION_COORDINATOR_FENCED`
//! → this coordinator is stale: sending stops, the transaction is left to the newer one.
//!
//! The task stops as soon as this shard no longer coordinates the transaction's partition at
//! the coordinator epoch it started with (resigned, or re-elected and reloaded — the load
//! resumes the markers itself), and at shutdown.

use super::state::{TxnError, TxnState};
use super::{MARKER_RETRY_BACKOFF_MAX, MARKER_RETRY_BACKOFF_MIN, TXN_WRITE_TIMEOUT};
use crate::partitions::{PartitionOp, PartitionReply};
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use net::kafka_protocol::messages::{
    ApiKey, ProducerId, TopicName, WriteTxnMarkersRequest, WriteTxnMarkersResponse,
};
use net::kafka_protocol::protocol::StrBytes;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use storage::{TopicPartition, TxnMarker, TxnResult};

/// WriteTxnMarkers' only version (Kafka 4 serves v1, KIP-896).
const WRITE_TXN_MARKERS_VERSION: i16 = 1;

/// What became of one partition's marker in one round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    Written,
    Retry,
    /// This coordinator's epoch or the producer's is stale: stop sending.
    Fenced,
}

/// What the sender of a prepared transaction's markers does after a round
/// ([`MarkerProgress::record`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum NextRound {
    /// Every partition sent this round took its marker: look at what is left.
    Now,
    /// Some partition must be retried: pause this long first.
    After(std::time::Duration),
    /// A newer coordinator or producer epoch: stop, the transaction is left to the newer one.
    Stop,
}

/// The retry rule of one prepared transaction's markers, free of I/O: which partitions have
/// their marker, and the pause before the next round (from [`MARKER_RETRY_BACKOFF_MIN`],
/// doubling after each round with a retry, up to [`MARKER_RETRY_BACKOFF_MAX`]).
pub(super) struct MarkerProgress {
    done: BTreeSet<TopicPartition>,
    backoff: std::time::Duration,
}

impl MarkerProgress {
    /// No marker written yet.
    pub(super) fn new() -> MarkerProgress {
        MarkerProgress {
            done: BTreeSet::new(),
            backoff: MARKER_RETRY_BACKOFF_MIN,
        }
    }

    /// The partitions of `partitions` (the transaction's) still without their marker.
    pub(super) fn left(&self, partitions: &BTreeSet<TopicPartition>) -> Vec<TopicPartition> {
        partitions.difference(&self.done).cloned().collect()
    }

    /// Takes one round's outcomes (one per partition sent) and says what comes next.
    pub(super) fn record(&mut self, outcomes: Vec<(TopicPartition, Outcome)>) -> NextRound {
        if outcomes.iter().any(|(_, o)| *o == Outcome::Fenced) {
            return NextRound::Stop;
        }
        let mut all_written = true;
        for (tp, outcome) in outcomes {
            if outcome == Outcome::Written {
                self.done.insert(tp);
            } else {
                all_written = false;
            }
        }
        if all_written {
            return NextRound::Now;
        }
        let pause = self.backoff;
        self.backoff = (self.backoff * 2).min(MARKER_RETRY_BACKOFF_MAX);
        NextRound::After(pause)
    }
}

/// Starts completing the prepared transaction of `transactional_id` (coordinated on
/// `partition` at `coordinator_epoch`) in a task of its own.
pub(super) fn spawn_completion(
    shard: &Rc<Shard>,
    partition: i32,
    coordinator_epoch: i32,
    transactional_id: String,
) {
    let shard = Rc::clone(shard);
    crate::shard::spawn_into(None, async move {
        complete(&shard, partition, coordinator_epoch, &transactional_id).await;
    });
}

/// Whether this shard still coordinates `partition` at `coordinator_epoch`.
fn current(shard: &Shard, partition: i32, coordinator_epoch: i32) -> bool {
    let partitions = shard.txns.partitions.borrow();
    partitions.check(partition).is_ok() && partitions.epoch(partition) == Some(coordinator_epoch)
}

async fn complete(shard: &Rc<Shard>, partition: i32, coordinator_epoch: i32, id: &str) {
    let mut progress = MarkerProgress::new();
    loop {
        if !current(shard, partition, coordinator_epoch) {
            return;
        }
        let (marker, left) = {
            let txns = shard.txns.txns.borrow();
            let Some(m) = txns.get(id) else { return };
            let result = match m.state {
                TxnState::PrepareCommit => TxnResult::Commit,
                TxnState::PrepareAbort => TxnResult::Abort,
                _ => return,
            };
            let marker = TxnMarker {
                producer_id: m.producer_id,
                producer_epoch: m.producer_epoch,
                result,
                coordinator_epoch,
            };
            (marker, progress.left(&m.partitions))
        };
        if left.is_empty() {
            break;
        }
        let outcomes = send_round(shard, marker, &left).await;
        match progress.record(outcomes) {
            NextRound::Now => {}
            NextRound::After(pause) => {
                if shard.sleep_unless_stopped(pause).await {
                    return;
                }
            }
            NextRound::Stop => {
                tracing::warn!(
                    transactional_id = id,
                    "markers fenced: a newer coordinator or producer epoch"
                );
                return;
            }
        }
    }
    write_complete(shard, partition, coordinator_epoch, id).await;
}

/// Every marker is written: CompleteCommit or CompleteAbort, retried while this shard
/// coordinates the partition and the log is only unavailable.
async fn write_complete(shard: &Rc<Shard>, partition: i32, coordinator_epoch: i32, id: &str) {
    let mut backoff = MARKER_RETRY_BACKOFF_MIN;
    loop {
        if !current(shard, partition, coordinator_epoch) {
            return;
        }
        let prepared = {
            let mut txns = shard.txns.txns.borrow_mut();
            let Some(m) = txns.get_mut(id) else { return };
            m.prepare_complete(super::store::epoch_ms())
        };
        let error = match prepared {
            Ok(t) => {
                let state = t.state;
                match super::store::write(shard, partition, id, t).await {
                    Ok(()) => {
                        tracing::debug!(
                            transactional_id = id,
                            state = state.name(),
                            "transaction completed"
                        );
                        shard.txns.completed.notify_all();
                        return;
                    }
                    Err(e) => e,
                }
            }
            Err(e) => e,
        };
        match error {
            TxnError::CoordinatorNotAvailable | TxnError::ConcurrentTransactions => {}
            other => {
                tracing::warn!(transactional_id = id, error = %other, "cannot complete a transaction");
                return;
            }
        }
        if shard.sleep_unless_stopped(backoff).await {
            return;
        }
        backoff = (backoff * 2).min(MARKER_RETRY_BACKOFF_MAX);
    }
}

/// One round: each partition's marker to its leader, all leaders concurrently.
async fn send_round(
    shard: &Rc<Shard>,
    marker: TxnMarker,
    partitions: &[TopicPartition],
) -> Vec<(TopicPartition, Outcome)> {
    let node = shard.config.node_id;
    let meta = shard.metadata();
    let mut by_leader: BTreeMap<i32, Vec<TopicPartition>> = BTreeMap::new();
    let mut out = Vec::new();
    for tp in partitions {
        if !meta.topics.contains_key(&tp.topic) {
            // The topic was deleted: nothing left to mark (Kafka drops it too).
            out.push((tp.clone(), Outcome::Written));
            continue;
        }
        match meta.partition(&tp.topic, tp.partition) {
            Some(image) if image.leader >= 0 => {
                by_leader.entry(image.leader).or_default().push(tp.clone());
            }
            Some(_) => out.push((tp.clone(), Outcome::Retry)),
            None => out.push((tp.clone(), Outcome::Written)),
        }
    }
    drop(meta);
    let rounds = by_leader.into_iter().map(|(leader, tps)| async move {
        if leader == node {
            send_local(shard, marker, tps).await
        } else {
            send_remote(shard, leader, marker, tps).await
        }
    });
    for outcomes in futures_util::future::join_all(rounds).await {
        out.extend(outcomes);
    }
    out
}

/// The markers of partitions this broker leads, through the partition service.
async fn send_local(
    shard: &Rc<Shard>,
    marker: TxnMarker,
    tps: Vec<TopicPartition>,
) -> Vec<(TopicPartition, Outcome)> {
    let writes = tps.iter().map(|tp| {
        crate::partitions::service::call(
            shard,
            tp.clone(),
            PartitionOp::WriteTxnMarker {
                marker,
                timeout: TXN_WRITE_TIMEOUT,
            },
        )
    });
    let replies = futures_util::future::join_all(writes).await;
    let mut out = Vec::with_capacity(tps.len());
    for (tp, reply) in tps.into_iter().zip(replies) {
        let outcome = match reply {
            // On `__consumer_offsets` the groups coordinated there end the producer's pending
            // offsets (TxnOffsetCommit) before the marker counts as written, as the
            // WriteTxnMarkers handler does for another broker's coordinator; a coordinator
            // that is loading or gone is retried.
            PartitionReply::MarkerWritten { .. } if tp.topic == crate::groups::OFFSETS_TOPIC => {
                let ended = crate::groups::service::on_txn_marker(
                    shard,
                    tp.partition,
                    marker.producer_id,
                    marker.result,
                )
                .await;
                if ended.is_ok() {
                    Outcome::Written
                } else {
                    Outcome::Retry
                }
            }
            PartitionReply::MarkerWritten { .. } => Outcome::Written,
            PartitionReply::Error(e) => outcome_of(crate::errors::partition_op_error_code(&e)),
            _ => Outcome::Retry,
        };
        out.push((tp, outcome));
    }
    out
}

/// The markers of partitions `leader` leads, in one WriteTxnMarkers request to its listener.
async fn send_remote(
    shard: &Rc<Shard>,
    leader: i32,
    marker: TxnMarker,
    tps: Vec<TopicPartition>,
) -> Vec<(TopicPartition, Outcome)> {
    let retry_all =
        |tps: &[TopicPartition]| tps.iter().map(|tp| (tp.clone(), Outcome::Retry)).collect();
    let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in &tps {
        topics.entry(&tp.topic).or_default().push(tp.partition);
    }
    let request =
        WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
            .with_producer_id(ProducerId(marker.producer_id))
            .with_producer_epoch(marker.producer_epoch)
            .with_transaction_result(marker.result == TxnResult::Commit)
            .with_coordinator_epoch(marker.coordinator_epoch)
            .with_topics(
                topics
                    .iter()
                    .map(|(topic, ps)| {
                        WritableTxnMarkerTopic::default()
                            .with_name(TopicName(StrBytes::from_string((*topic).to_string())))
                            .with_partition_indexes(ps.clone())
                    })
                    .collect(),
            )]);
    use crate::replica_fetcher::fetcher::{frame, round_trip, unframe};
    let correlation_id = 1;
    let exchange = async {
        let bytes = frame(
            ApiKey::WriteTxnMarkers,
            "WriteTxnMarkers",
            WRITE_TXN_MARKERS_VERSION,
            correlation_id,
            &request,
        )?;
        let mut connection = None;
        let body = round_trip(shard, leader, &mut connection, &bytes).await?;
        unframe::<WriteTxnMarkersResponse>(
            leader,
            ApiKey::WriteTxnMarkers,
            "WriteTxnMarkers",
            WRITE_TXN_MARKERS_VERSION,
            body,
            correlation_id,
        )
    };
    let response = match exchange.await {
        Ok(r) => r,
        Err(error) => {
            tracing::info!(leader, %error, "transaction markers not sent; retrying");
            return retry_all(&tps);
        }
    };
    let mut codes: BTreeMap<(String, i32), i16> = BTreeMap::new();
    for m in &response.markers {
        for t in &m.topics {
            for p in &t.partitions {
                codes.insert((t.name.0.to_string(), p.partition_index), p.error_code);
            }
        }
    }
    tps.into_iter()
        .map(|tp| {
            let outcome = codes
                .get(&(tp.topic.clone(), tp.partition))
                .map_or(Outcome::Retry, |c| outcome_of(*c));
            (tp, outcome)
        })
        .collect()
}

/// A partition's WriteTxnMarkers error code as Kafka's completion handler takes it.
pub(super) fn outcome_of(code: i16) -> Outcome {
    if code == 0 {
        return Outcome::Written;
    }
    let fenced = [
        ResponseError::InvalidProducerEpoch,
        ResponseError::TransactionCoordinatorFenced,
        ResponseError::ProducerFenced,
    ];
    if fenced.iter().any(|e| e.code() == code) {
        Outcome::Fenced
    } else {
        Outcome::Retry
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_errors_are_retried_unless_the_coordinator_or_producer_is_stale() {
        assert_eq!(outcome_of(0), Outcome::Written);
        for retried in [
            ResponseError::NotLeaderOrFollower,
            ResponseError::UnknownTopicOrPartition,
            ResponseError::NotEnoughReplicas,
            ResponseError::NotEnoughReplicasAfterAppend,
            ResponseError::RequestTimedOut,
            ResponseError::KafkaStorageError,
        ] {
            assert_eq!(outcome_of(retried.code()), Outcome::Retry, "{retried:?}");
        }
        for fenced in [
            ResponseError::InvalidProducerEpoch,
            ResponseError::TransactionCoordinatorFenced,
        ] {
            assert_eq!(outcome_of(fenced.code()), Outcome::Fenced, "{fenced:?}");
        }
    }
}
