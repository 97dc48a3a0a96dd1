//! ISR changes of the partitions this shard leads, both directions of Kafka's
//! `Partition.maybeExpandIsr` / `maybeShrinkIsr` with its `AlterPartitionManager`:
//!
//! - **Expansion**: when a follower's fetch makes it an expansion candidate — its LEO reached
//!   the high watermark and the leader epoch's start offset — the leader's
//!   [`replication::Partition`] proposes the ISR plus that follower ([`maybe_expand`]).
//! - **Shrink**: every `replica.lag.time.max.ms / 2` ([`isr_expiration_loop`], Kafka's
//!   `ReplicaManager` `isr-expiration` task), each partition this shard leads proposes the ISR
//!   without its followers that have not caught up with the leader's log end offset for
//!   `replica.lag.time.max.ms` ([`replication::Partition::propose_isr_shrink`]). One timer per
//!   shard, not per partition; a pass is one look at each partition the shard owns.
//!
//! Either proposal goes through the same send path: a task on the owning shard's background
//! queue sends it to the active controller as [`ControllerOp::AlterPartition`] and applies the
//! answer. Only one change is pending per partition (the state machine refuses a second, and
//! proposes no shrink while one is pending), so at most one such task runs per partition. A
//! retriable refusal is sent again, at most [`ALTER_ATTEMPTS_MAX`] times, [`ALTER_RETRY_MS`]
//! apart; the refusals that keep the change pending are settled by the next metadata image
//! (`partition_lifecycle::apply_role`). An expansion that completes a partition reassignment
//! (KIP-455) is answered with a new leader or leader epoch: it stays pending in the same way
//! (Kafka's NEW_LEADER_ELECTED). The expiration loop and the send tasks end at shutdown.

use crate::shard::{LocalPartition, Shard};
use replication::metadata::{ControllerAnswer, ControllerError, ControllerOp};
use replication::runtime::{Clock, MonotonicTime, NodeId};
use replication::{AlterPartitionProposal, AlterRefusal};
use std::rc::Rc;
use std::time::Duration;
use storage::TopicPartition;

/// Most sends of one proposal (the first and its retries).
const ALTER_ATTEMPTS_MAX: u32 = 10;
/// Wait between two sends of a proposal the controller asked to retry (ms).
const ALTER_RETRY_MS: u64 = 1_000;

/// Proposes `candidate` into `partition`'s ISR when the partition's state allows it, and
/// sends the change to the controller in a task of its own; returns at once.
pub fn maybe_expand(
    shard: &Rc<Shard>,
    tp: &TopicPartition,
    partition: &Rc<LocalPartition>,
    candidate: NodeId,
) {
    if let Some(proposal) = partition.propose_isr_expansion(candidate) {
        spawn_send(shard, tp, partition, proposal);
    }
}

/// Kafka's `isr-expiration` task: every `replica.lag.time.max.ms / 2` (at least 1 ms), until
/// shutdown, [`maybe_shrink`] at the time of the pass.
pub async fn isr_expiration_loop(shard: &Rc<Shard>) {
    let interval = (shard.config.replica_lag_time_max() / 2).max(Duration::from_millis(1));
    while !shard.sleep_unless_stopped(interval).await {
        maybe_shrink(shard, crate::seam::ShardRuntime.now());
    }
}

/// Kafka's `ReplicaManager.maybeShrinkIsr`: every partition this shard leads whose ISR holds a
/// follower out of sync at `now` proposes the ISR without it, and the change is sent to the
/// controller in a task of its own; returns at once.
pub fn maybe_shrink(shard: &Rc<Shard>, now: MonotonicTime) {
    // Spawning does not run the task, so the map stays borrowed only for this loop.
    for (tp, partition) in shard.partitions.borrow().iter() {
        if let Some(proposal) = partition.propose_isr_shrink(now) {
            tracing::info!(%tp, new_isr = ?proposal.new_isr, "shrinking the ISR: followers out of sync for replica.lag.time.max.ms");
            spawn_send(shard, tp, partition, proposal);
        }
    }
}

/// Sends `proposal`, made by `partition`, in a task on the shard's background queue.
fn spawn_send(
    shard: &Rc<Shard>,
    tp: &TopicPartition,
    partition: &Rc<LocalPartition>,
    proposal: AlterPartitionProposal,
) {
    let (shard, tp, partition) = (shard.clone(), tp.clone(), partition.clone());
    crate::shard::spawn_into(Some(shard.queues.background), async move {
        send(&shard, &tp, &partition, proposal).await;
    });
}
async fn send(
    shard: &Rc<Shard>,
    tp: &TopicPartition,
    partition: &LocalPartition,
    mut proposal: AlterPartitionProposal,
) {
    for attempt in 1..=ALTER_ATTEMPTS_MAX {
        let node = shard.config.node_id;
        let broker_epoch = shard.metadata().registered_broker_epoch(node).unwrap_or(-1);
        let op = ControllerOp::AlterPartition {
            broker_id: node,
            broker_epoch,
            topic: tp.topic.clone(),
            partition: tp.partition,
            leader_epoch: proposal.leader_epoch.0,
            partition_epoch: proposal.partition_epoch,
            new_isr: proposal.new_isr.iter().map(|n| n.0).collect(),
        };
        let answer = match crate::controller::call_answer(shard, op).await {
            // The change completed a reassignment (KIP-455) that moved the leadership or
            // fenced removed replicas with a new leader epoch: Kafka's NEW_LEADER_ELECTED —
            // the change stays pending until the image brings the new state.
            Ok(ControllerAnswer::AlterPartition {
                leader,
                leader_epoch,
                ..
            }) if leader != node || leader_epoch != proposal.leader_epoch.0 => {
                Err(AlterRefusal::NewLeaderElected)
            }
            Ok(ControllerAnswer::AlterPartition {
                partition_epoch, ..
            }) => Ok((partition_epoch, proposal.new_isr.clone())),
            Ok(other) => {
                tracing::warn!(%tp, ?other, "unexpected answer to AlterPartition");
                Err(AlterRefusal::Retriable)
            }
            Err(e) => Err(alter_refusal(&e)),
        };
        tracing::debug!(%tp, ?answer, attempt, "AlterPartition answered");
        match partition.on_alter_answer(proposal.proposal_id, answer) {
            Some(again) if attempt < ALTER_ATTEMPTS_MAX => {
                proposal = again;
                if shard
                    .sleep_unless_stopped(Duration::from_millis(ALTER_RETRY_MS))
                    .await
                {
                    return;
                }
            }
            _ => return,
        }
    }
}

/// How the leader acts on the controller's refusal `e` of its AlterPartition (Kafka's
/// `Partition.handleAlterPartitionError`), by the Kafka code the edge gives `e`
/// (`crate::errors::controller_error`): mapped here, in the broker, so the partition's ISR
/// state (`replication::partition::isr`) knows no controller error. Exhaustive, so a new
/// refusal forces a decision.
fn alter_refusal(e: &ControllerError) -> AlterRefusal {
    match e {
        ControllerError::IneligibleReplica { .. } => AlterRefusal::IneligibleReplica,
        ControllerError::UnknownTopic { .. } | ControllerError::UnknownPartition { .. } => {
            AlterRefusal::UnknownTopicOrPartition
        }
        ControllerError::FencedLeaderEpoch { .. } => AlterRefusal::FencedLeaderEpoch,
        ControllerError::InvalidUpdateVersion { .. } => AlterRefusal::InvalidUpdateVersion,
        ControllerError::NotPartitionLeader { .. }
        | ControllerError::InvalidIsr { .. }
        | ControllerError::ChangeTooLarge { .. }
        | ControllerError::NotForwardable { .. }
        | ControllerError::FeatureUpdateRefused { .. }
        | ControllerError::VoterChangeRefused { .. } => AlterRefusal::InvalidRequest,
        // NOT_CONTROLLER, STALE_BROKER_EPOCH and the rest: Kafka's default, send again.
        ControllerError::AlterPartitionEpochAhead { .. }
        | ControllerError::NotController { .. }
        | ControllerError::NotCommitted { .. }
        | ControllerError::Unavailable
        | ControllerError::VoterNotFound { .. }
        | ControllerError::DuplicateVoter { .. }
        | ControllerError::VoterChangeFailed { .. }
        | ControllerError::StaleBrokerEpoch { .. }
        | ControllerError::UnknownBroker { .. }
        | ControllerError::InvalidTopicName { .. }
        | ControllerError::TopicAlreadyExists { .. }
        | ControllerError::PartitionCountOutOfRange { .. }
        | ControllerError::PartitionCountNotIncreased { .. }
        | ControllerError::InvalidConfig { .. }
        | ControllerError::InternalTopic { .. }
        | ControllerError::InvalidBrokerConfig { .. }
        | ControllerError::TopicIdTaken { .. }
        | ControllerError::ProducerIdsExhausted { .. }
        | ControllerError::TooManyAclRecords
        | ControllerError::InvalidReplicationFactor { .. }
        | ControllerError::DuplicateBrokerRegistration { .. }
        | ControllerError::Apply(_)
        | ControllerError::InvalidReplicaAssignment { .. } => AlterRefusal::Retriable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controller_refusals_map_to_kafkas_leader_actions() {
        let t = || "t".to_string();
        let cases = [
            (
                ControllerError::IneligibleReplica {
                    topic: t(),
                    partition: 0,
                    broker_id: 2,
                    reason: "fenced".into(),
                },
                AlterRefusal::IneligibleReplica,
            ),
            (
                ControllerError::FencedLeaderEpoch {
                    topic: t(),
                    partition: 0,
                    leader_epoch: 1,
                    current: 2,
                },
                AlterRefusal::FencedLeaderEpoch,
            ),
            (
                ControllerError::InvalidUpdateVersion {
                    topic: t(),
                    partition: 0,
                    partition_epoch: 1,
                    current: 2,
                },
                AlterRefusal::InvalidUpdateVersion,
            ),
            (
                ControllerError::UnknownPartition {
                    topic: t(),
                    partition: 3,
                },
                AlterRefusal::UnknownTopicOrPartition,
            ),
            (
                ControllerError::NotPartitionLeader {
                    topic: t(),
                    partition: 0,
                    broker_id: 2,
                    leader: 1,
                },
                AlterRefusal::InvalidRequest,
            ),
            (
                ControllerError::NotController { active: None },
                AlterRefusal::Retriable,
            ),
        ];
        for (e, refusal) in cases {
            assert_eq!(alter_refusal(&e), refusal, "{e}");
        }
    }
}
