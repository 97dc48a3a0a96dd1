//! The leader-side epoch answers (KIP-320), run on the partition's owning shard: ListOffsets
//! with its leader epochs and its OFFSET_NOT_AVAILABLE window after an election
//! ([`list_offsets`]), and OffsetForLeaderEpoch's end offsets ([`offset_for_leader_epoch`]).
//! The check of a request's current leader epoch before routing is [`super::epoch_check`].
//!
//! The current leader epoch is the metadata image's (every shard holds a snapshot); the
//! start offset of an epoch is the partition log's leader-epoch cache entry for it.

use super::ops::{PartitionOpError, PartitionReply};
use crate::shard::{LocalPartition, Shard};
use replication::{list_offsets_leader_epoch, Isolation, OffsetSpec};
use storage::{LeaderEpoch, TopicPartition};

/// The image's current leader epoch of `tp` on this shard (`None`: not in the image).
fn current_leader_epoch(shard: &Shard, tp: &TopicPartition) -> Option<LeaderEpoch> {
    shard
        .metadata()
        .partition(&tp.topic, tp.partition)
        .map(|p| LeaderEpoch(p.leader_epoch))
}

/// ListOffsets on the owning shard, as Kafka's `Partition.fetchOffsetForTimestamp`: the
/// log's answer below the high watermark (a client) or the log end offset (a replica,
/// `isolation` [`Isolation::LogEnd`]) with its leader epoch
/// ([`replication::list_offsets_leader_epoch`]: latest the current epoch, the others the
/// epoch of their record), or, for a client only (as Kafka, which checks only requests with
/// an isolation level), [`PartitionOpError::OffsetNotAvailable`] while the high watermark is
/// below the current epoch's start offset (a new leader not caught up).
pub async fn list_offsets(
    shard: &Shard,
    tp: &TopicPartition,
    partition: &LocalPartition,
    spec: OffsetSpec,
    isolation: Isolation,
) -> Result<PartitionReply, PartitionOpError> {
    let listed = partition.list_offsets(spec, isolation).await?;
    let log = partition.log();
    let current = current_leader_epoch(shard, tp);
    let epoch_start = match isolation {
        Isolation::HighWatermark | Isolation::LastStable => {
            current.and_then(|e| log.leader_epoch_start_offset(e))
        }
        Isolation::LogEnd => None,
    };
    let leader_epoch = list_offsets_leader_epoch(
        spec,
        listed,
        current,
        partition.high_watermark(),
        epoch_start,
        |offset| log.leader_epoch_for_offset(offset),
    )?;
    Ok(PartitionReply::Offset {
        offset: listed.offset.map_or(-1, |o| o.0),
        timestamp: listed.timestamp.map_or(-1, |t| t.0),
        leader_epoch: leader_epoch.map_or(-1, |e| e.0),
    })
}

/// OffsetForLeaderEpoch on the owning shard, as Kafka's `Partition.lastOffsetForLeaderEpoch`:
/// the largest epoch ≤ `leader_epoch` in the log's leader-epoch cache and its end offset (the
/// next epoch's start, or the log end offset for the latest epoch); -1/-1 when undefined
/// (epoch -1, an empty cache, or an epoch above every epoch).
pub fn offset_for_leader_epoch(
    partition: &LocalPartition,
    leader_epoch: LeaderEpoch,
) -> PartitionReply {
    match partition.log().end_offset_for_leader_epoch(leader_epoch) {
        Some((epoch, end_offset)) => PartitionReply::EpochEndOffset {
            leader_epoch: epoch.0,
            end_offset: end_offset.0,
        },
        None => PartitionReply::EpochEndOffset {
            leader_epoch: -1,
            end_offset: -1,
        },
    }
}
