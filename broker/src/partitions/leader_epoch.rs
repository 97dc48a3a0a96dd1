//! The leader-side epoch answers (KIP-320), run on the partition's owning shard: ListOffsets
//! with its leader epochs and its OFFSET_NOT_AVAILABLE window after an election
//! ([`list_offsets`]), and OffsetForLeaderEpoch's end offsets ([`offset_for_leader_epoch`]).
//! The check of a request's current leader epoch before routing is [`super::epoch_check`].
//!
//! The current leader epoch is the metadata image's (every shard holds a snapshot); the
//! start offset of an epoch is the partition log's leader-epoch cache entry for it.

use super::ops::{PartitionOpError, PartitionReply};
use crate::shard::{LocalPartition, Shard};
use replication::{high_watermark_lagging, OffsetSpec};
use storage::{LeaderEpoch, Offset, TopicPartition};

/// The image's current leader epoch of `tp` on this shard (`None`: not in the image).
fn current_leader_epoch(shard: &Shard, tp: &TopicPartition) -> Option<LeaderEpoch> {
    shard
        .metadata()
        .partition(&tp.topic, tp.partition)
        .map(|p| LeaderEpoch(p.leader_epoch))
}

/// ListOffsets on the owning shard, as Kafka's `Partition.fetchOffsetForTimestamp`: latest is
/// the high watermark with the current leader epoch; earliest the log start offset with the
/// epoch of its record; a timestamp or max-timestamp lookup the offset found with the epoch of
/// its record (-1 when unknown). While the high watermark is below the current epoch's start
/// offset (a new leader not caught up), latest and a lookup that finds nothing below the high
/// watermark fail with [`PartitionOpError::OffsetNotAvailable`]; earliest still answers.
pub async fn list_offsets(
    shard: &Shard,
    tp: &TopicPartition,
    partition: &LocalPartition,
    spec: OffsetSpec,
) -> Result<PartitionReply, PartitionOpError> {
    let listed = partition.list_offsets(spec).await?;
    let log = partition.log();
    let current = current_leader_epoch(shard, tp);
    let high_watermark = partition.high_watermark();
    // The current epoch's start offset while the high watermark is below it.
    let lagging_start = current
        .and_then(|e| log.leader_epoch_start_offset(e))
        .filter(|&start| high_watermark_lagging(high_watermark, Some(start)));
    let not_available = |epoch_start: Offset| PartitionOpError::OffsetNotAvailable {
        high_watermark,
        epoch_start,
    };
    let leader_epoch = match (spec, listed.offset, lagging_start) {
        (OffsetSpec::Latest, _, Some(start)) => return Err(not_available(start)),
        (OffsetSpec::Latest, _, None) => current,
        (OffsetSpec::MaxTimestamp | OffsetSpec::Timestamp(_), None, Some(start)) => {
            return Err(not_available(start))
        }
        (_, Some(offset), _) => log.leader_epoch_for_offset(offset),
        (_, None, _) => None,
    };
    Ok(PartitionReply::Offset {
        offset: listed.offset.map_or(-1, |o| o.0),
        timestamp: listed.timestamp.map_or(-1, |t| t.0),
        leader_epoch: leader_epoch.map_or(-1, |e| e.0),
    })
}

/// OffsetForLeaderEpoch on the owning shard, as Kafka's `Partition.lastOffsetForLeaderEpoch`:
/// the largest epoch ≤ `leader_epoch` in the log's leader-epoch cache and its end offset (the
/// next epoch's start, or the log end offset for the latest epoch); -1/-1 when undefined (a
/// negative epoch, an empty cache, or one above every epoch).
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
