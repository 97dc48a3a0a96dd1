//! The leader side of KIP-320's epoch rules, pure: a request that names the partition's
//! current leader epoch is fenced when that epoch is older than the partition's and refused
//! when it is newer ([`check_current_leader_epoch`], Kafka's `Partition.checkCurrentLeaderEpoch`),
//! and right after an election, while the high watermark is still below the start offset of
//! the current leader epoch, a leader hands out no offsets from ListOffsets
//! ([`high_watermark_lagging`], Kafka's `Partition.fetchOffsetForTimestamp`): the old leader's
//! high watermark may have been higher, and a client told a lower "latest" would go back.

use super::offsets::{ListedOffset, OffsetSpec};
use storage::{LeaderEpoch, Offset};

/// The wire's `current_leader_epoch` that asks for no check (Kafka's
/// `RecordBatch.NO_PARTITION_LEADER_EPOCH`).
pub const NO_LEADER_EPOCH: i32 = -1;

/// Why a request's current leader epoch was refused (KIP-320).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LeaderEpochError {
    /// The request's epoch is older than the partition's: the sender's metadata is stale
    /// (Kafka's FENCED_LEADER_EPOCH; the client refreshes its metadata).
    #[error("leader epoch {} is older than the partition's {}", requested.0, current.0)]
    Fenced {
        requested: LeaderEpoch,
        current: LeaderEpoch,
    },
    /// The request's epoch is newer than the partition's: this broker has not caught up with
    /// the metadata yet (Kafka's UNKNOWN_LEADER_EPOCH; the client retries).
    #[error("leader epoch {} is newer than the partition's {}", requested.0, current.0)]
    Unknown {
        requested: LeaderEpoch,
        current: LeaderEpoch,
    },
}

/// The epoch a request asks to be checked against: `None` for [`NO_LEADER_EPOCH`] (no
/// check). Any other value is checked, negative ones too, as Kafka does (they are older
/// than every epoch, so fenced).
pub fn requested_leader_epoch(wire: i32) -> Option<LeaderEpoch> {
    (wire != NO_LEADER_EPOCH).then_some(LeaderEpoch(wire))
}

/// The epoch a Fetch asks to be checked against: `None` for any negative value, as Kafka's
/// `FetchRequest` reads `current_leader_epoch` (unlike ListOffsets and OffsetForLeaderEpoch,
/// where only [`NO_LEADER_EPOCH`] means no check).
pub fn fetch_requested_leader_epoch(wire: i32) -> Option<LeaderEpoch> {
    (wire >= 0).then_some(LeaderEpoch(wire))
}

/// KIP-320's check of a request's current leader epoch (`None`: no check) against the
/// partition's `current` one: equal passes, older is [`LeaderEpochError::Fenced`], newer is
/// [`LeaderEpochError::Unknown`].
pub fn check_current_leader_epoch(
    requested: Option<LeaderEpoch>,
    current: LeaderEpoch,
) -> Result<(), LeaderEpochError> {
    match requested {
        None => Ok(()),
        Some(requested) if requested < current => {
            Err(LeaderEpochError::Fenced { requested, current })
        }
        Some(requested) if requested > current => {
            Err(LeaderEpochError::Unknown { requested, current })
        }
        Some(_) => Ok(()),
    }
}

/// ListOffsets refused right after an election (Kafka's OFFSET_NOT_AVAILABLE): the high
/// watermark is still below the start offset of the current leader epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("high watermark {high_watermark} below the leader epoch's start offset {epoch_start}")]
pub struct OffsetNotAvailable {
    pub high_watermark: Offset,
    pub epoch_start: Offset,
}

/// The leader epoch ListOffsets answers with `listed` (what the log found for `spec`), as
/// Kafka's `Partition.fetchOffsetForTimestamp` and `UnifiedLog.fetchOffsetByTimestamp`:
/// latest gets `current` (the partition's current leader epoch); every other answer the epoch
/// of the record at its offset (`epoch_of`), `None` when no record matched. While the high
/// watermark is below `epoch_start` (the current epoch's start offset), latest and a
/// timestamp or max-timestamp lookup that found nothing below the high watermark are refused
/// ([`OffsetNotAvailable`]); earliest still answers.
pub fn list_offsets_leader_epoch(
    spec: OffsetSpec,
    listed: ListedOffset,
    current: Option<LeaderEpoch>,
    high_watermark: Offset,
    epoch_start: Option<Offset>,
    epoch_of: impl FnOnce(Offset) -> Option<LeaderEpoch>,
) -> Result<Option<LeaderEpoch>, OffsetNotAvailable> {
    let lagging = epoch_start
        .filter(|&start| high_watermark_lagging(high_watermark, Some(start)))
        .map(|epoch_start| OffsetNotAvailable {
            high_watermark,
            epoch_start,
        });
    match (spec, listed.offset, lagging) {
        (OffsetSpec::Latest, _, Some(refused)) => Err(refused),
        (OffsetSpec::Latest, _, None) => Ok(current),
        (OffsetSpec::MaxTimestamp | OffsetSpec::Timestamp(_), None, Some(refused)) => Err(refused),
        (_, Some(offset), _) => Ok(epoch_of(offset)),
        (_, None, _) => Ok(None),
    }
}

/// Whether the high watermark is still below `epoch_start`, the start offset of the current
/// leader epoch (`None`: the epoch has no entry in the leader-epoch cache, so nothing to wait
/// for): a new leader's state until the high watermark reaches what it took over, in which
/// Kafka answers ListOffsets with OFFSET_NOT_AVAILABLE.
pub fn high_watermark_lagging(high_watermark: Offset, epoch_start: Option<Offset>) -> bool {
    epoch_start.is_some_and(|start| start > high_watermark)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_check_asked_passes_whatever_the_epoch() {
        assert_eq!(requested_leader_epoch(NO_LEADER_EPOCH), None);
        assert_eq!(check_current_leader_epoch(None, LeaderEpoch(7)), Ok(()));
    }

    #[test]
    fn equal_epoch_passes_older_is_fenced_newer_is_unknown() {
        let current = LeaderEpoch(3);
        assert_eq!(check_current_leader_epoch(Some(current), current), Ok(()));
        assert_eq!(
            check_current_leader_epoch(Some(LeaderEpoch(2)), current),
            Err(LeaderEpochError::Fenced {
                requested: LeaderEpoch(2),
                current
            })
        );
        assert_eq!(
            check_current_leader_epoch(Some(LeaderEpoch(4)), current),
            Err(LeaderEpochError::Unknown {
                requested: LeaderEpoch(4),
                current
            })
        );
    }

    #[test]
    fn negative_epochs_other_than_none_are_checked_and_fenced() {
        let requested = requested_leader_epoch(-2);
        assert_eq!(requested, Some(LeaderEpoch(-2)));
        assert!(matches!(
            check_current_leader_epoch(requested, LeaderEpoch(0)),
            Err(LeaderEpochError::Fenced { .. })
        ));
    }

    fn listed(offset: Option<i64>) -> ListedOffset {
        ListedOffset {
            offset: offset.map(Offset),
            timestamp: offset.map(|_| storage::TimestampMs(1000)),
        }
    }

    /// ListOffsets' epoch for `spec` with the log answering `found`, at high watermark 10,
    /// current epoch 4 starting at `start`; records below offset 6 are epoch 2, the rest 4.
    fn answer(
        spec: OffsetSpec,
        found: Option<i64>,
        start: Option<i64>,
    ) -> Result<Option<i32>, OffsetNotAvailable> {
        let epoch_of = |o: Offset| Some(LeaderEpoch(if o.0 < 6 { 2 } else { 4 }));
        list_offsets_leader_epoch(
            spec,
            listed(found),
            Some(LeaderEpoch(4)),
            Offset(10),
            start.map(Offset),
            epoch_of,
        )
        .map(|e| e.map(|e| e.0))
    }

    #[test]
    fn list_offsets_answers_the_epoch_of_its_offset_and_latest_the_current_one() {
        let at = OffsetSpec::Timestamp(storage::TimestampMs(500));
        for start in [None, Some(6), Some(10)] {
            assert_eq!(answer(OffsetSpec::Latest, Some(10), start), Ok(Some(4)));
            assert_eq!(answer(OffsetSpec::Earliest, Some(0), start), Ok(Some(2)));
            assert_eq!(answer(at, Some(7), start), Ok(Some(4)));
            assert_eq!(
                answer(OffsetSpec::MaxTimestamp, Some(3), start),
                Ok(Some(2))
            );
            assert_eq!(answer(at, None, start), Ok(None), "nothing found: no epoch");
        }
    }

    #[test]
    fn a_lagging_high_watermark_refuses_latest_and_empty_lookups_but_not_earliest() {
        let refused = Err(OffsetNotAvailable {
            high_watermark: Offset(10),
            epoch_start: Offset(12),
        });
        let at = OffsetSpec::Timestamp(storage::TimestampMs(500));
        assert_eq!(answer(OffsetSpec::Latest, Some(10), Some(12)), refused);
        assert_eq!(answer(at, None, Some(12)), refused);
        assert_eq!(answer(OffsetSpec::MaxTimestamp, None, Some(12)), refused);
        // What was found below the high watermark is handed out, as Kafka does.
        assert_eq!(answer(at, Some(7), Some(12)), Ok(Some(4)));
        assert_eq!(answer(OffsetSpec::Earliest, Some(0), Some(12)), Ok(Some(2)));
    }

    #[test]
    fn a_fetch_checks_only_non_negative_epochs() {
        assert_eq!(fetch_requested_leader_epoch(-1), None);
        assert_eq!(fetch_requested_leader_epoch(-2), None);
        assert_eq!(fetch_requested_leader_epoch(0), Some(LeaderEpoch(0)));
    }

    #[test]
    fn high_watermark_lags_only_below_a_known_epoch_start() {
        assert!(!high_watermark_lagging(Offset(5), None));
        assert!(high_watermark_lagging(Offset(5), Some(Offset(6))));
        assert!(!high_watermark_lagging(Offset(6), Some(Offset(6))));
        assert!(!high_watermark_lagging(Offset(9), Some(Offset(6))));
    }
}
