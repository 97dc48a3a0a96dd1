//! A coordinator's log: the partition of its internal topic that this shard owns and this
//! broker leads. Writes are `acks=all` appends answered once the ISR has them and they are on
//! this broker's disk (DESIGN.md §3's acknowledgement rule; Kafka's coordinators append with
//! `required.acks = -1`); a load replays the partition from its log start to its log end.

use crate::partitions::{PartitionOp, PartitionOpError, PartitionReply};
use crate::shard::Shard;
use bytes::Bytes;
use std::time::Duration;
use storage::{Offset, TopicPartition};

/// Bytes read per step while replaying a coordinator partition.
pub const REPLAY_READ_BYTES: usize = 1 << 20;

/// Appends `batch` to `tp` (which this shard owns and leads) with `acks=all` — answered once
/// the ISR has it, which is what lets the coordinator's state outlive this broker — within
/// `timeout`, and waits until it is on this broker's disk; returns the batch's base offset.
/// The coordinator's origin: a transactional batch's producer epoch is checked, its sequence
/// not (Kafka's `AppendOrigin.COORDINATOR`). Errors: the partition's refusal
/// (not the leader any more, too few replicas, the timeout, …), or the flush's storage error
/// as [`PartitionOpError::Partition`]; each coordinator maps them to its Kafka errors (Kafka's
/// `CoordinatorOperationExceptionHelper`).
pub async fn append(
    shard: &Shard,
    tp: &TopicPartition,
    batch: Bytes,
    timeout: Duration,
) -> Result<i64, PartitionOpError> {
    let base_offset = match crate::partitions::service::run_here(
        shard,
        tp,
        PartitionOp::Produce {
            records: batch,
            acks: replication::Acks::All,
            timeout,
            origin: storage::AppendOrigin::Coordinator,
            verification: None,
        },
    )
    .await
    {
        PartitionReply::Produced { base_offset, .. } => base_offset,
        PartitionReply::Error(e) => return Err(e),
        other => {
            tracing::error!(%tp, ?other, "unexpected reply to a coordinator append");
            return Err(PartitionOpError::ShardUnavailable);
        }
    };
    let owned = crate::partitions::service::owned_partition(shard, tp).await?;
    owned
        .log()
        .flush_to(owned.log().log_end_offset())
        .await
        .map(|_| base_offset)
        .map_err(|e| PartitionOpError::Partition(replication::PartitionError::Storage(e)))
}

/// Hands every stored batch of `tp` (which this shard owns), read from its log start to its
/// log end, to `apply` in log order. Errors: the partition cannot be opened or read.
pub async fn replay(
    shard: &Shard,
    tp: &TopicPartition,
    apply: &mut dyn FnMut(&[u8]),
) -> Result<(), PartitionOpError> {
    let owned = crate::partitions::service::owned_partition(shard, tp).await?;
    let log = owned.log();
    let end = log.log_end_offset();
    let mut at = log.log_start_offset();
    while at < end {
        let batches = log
            .read(at, REPLAY_READ_BYTES, end)
            .await
            .map_err(|e| PartitionOpError::Partition(replication::PartitionError::Storage(e)))?;
        let Some(last) = batches.last() else {
            break;
        };
        let next: Offset = last.header().last_offset().plus(1);
        for batch in batches {
            apply(&batch.to_vec());
        }
        at = next;
    }
    Ok(())
}
