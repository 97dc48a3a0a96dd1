//! ISR expansion (Kafka's `Partition.maybeExpandIsr` and `AlterPartitionManager`): when a
//! follower's fetch makes it an expansion candidate — its LEO reached the high watermark and
//! the leader epoch's start offset — the leader's [`replication::Partition`] proposes the ISR
//! plus that follower, and a task on the owning shard sends the proposal to the active
//! controller as [`ControllerOp::AlterPartition`] and applies the answer. Only one change is
//! pending per partition (the state machine refuses a second), so at most one such task runs
//! per partition. A retriable refusal is sent again, at most [`ALTER_ATTEMPTS_MAX`] times,
//! [`ALTER_RETRY_MS`] apart; the refusals that keep the change pending are settled by the
//! next metadata image (`Shard::apply_role`).

use crate::shard::{LocalPartition, Shard};
use replication::metadata::{ControllerAnswer, ControllerOp};
use replication::runtime::NodeId;
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
    let Some(proposal) = partition.propose_isr_expansion(candidate) else {
        return;
    };
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
            Ok(ControllerAnswer::AlterPartition {
                partition_epoch, ..
            }) => Ok((partition_epoch, proposal.new_isr.clone())),
            Ok(other) => {
                tracing::warn!(%tp, ?other, "unexpected answer to AlterPartition");
                Err(AlterRefusal::Retriable)
            }
            Err(e) => Err(AlterRefusal::from_controller_error(&e)),
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
