//! Transactions in the partition log (KIP-98, issue #28): the leader's append of a transaction
//! marker, the last stable offset, and the aborted transactions a read_committed Fetch lists.
//!
//! What the log keeps (owned by the partition's shard, like everything in `State`):
//! - producers' open transactions (`ProducerState`), ordered by first offset: the oldest one
//!   bounds the last stable offset (LSO);
//! - per segment, `.txnindex`: one entry per aborted transaction whose abort marker is in the
//!   segment (Kafka's `TransactionIndex`), written whole at roll, clean close and truncation,
//!   loaded lazily for closed segments and rebuilt for the active one by recovery's replay.
//!
//! Invariants:
//! 1. `log_start ≤ last_stable_offset ≤ high_watermark`, and the last stable offset is at most
//!    the first offset of every transaction whose marker is not below the high watermark.
//! 2. A transaction is open from its first transactional batch until its producer's next
//!    marker, in this partition; a marker's abort entry lands in the segment holding the marker.

use super::append::Origin;
use super::{blocking_dir_op, sync_dir, AppendInfo, PartitionLog};
use crate::batch::BatchHeader;
use crate::error::Result;
use crate::io::remove_file;
use crate::producer_state::ProducerSummary;
use crate::segment::Segment;
use crate::txn::{build_marker_batch, collect_aborted, AbortedTxn, AbortedTxnEntry, TxnMarker};
use crate::txn_verification::VerificationGuard;
use crate::types::{LeaderEpoch, Offset, TimestampMs};
use std::rc::Rc;

impl PartitionLog {
    /// Appends the marker ending `marker.producer_id`'s transaction as a control batch (what a
    /// partition leader does for `WriteTxnMarkers`), stamped with `leader_epoch` like
    /// [`PartitionLog::append`], and returns where it went. Completes the producer's open
    /// transaction, if any: the last stable offset moves past it, and an abort adds an entry
    /// to the active segment's `.txnindex`. As for `append`, await
    /// [`PartitionLog::wait_written`] before answering. Errors (nothing appended):
    /// [`crate::StorageError::InvalidProducerEpoch`] for a producer epoch older than the
    /// producer's; [`crate::StorageError::TransactionCoordinatorFenced`] for a coordinator
    /// epoch older than the producer's last marker's; as `append` for disk, write errors and a
    /// closed log.
    pub async fn append_txn_marker(
        &self,
        marker: TxnMarker,
        leader_epoch: LeaderEpoch,
    ) -> Result<AppendInfo> {
        let bytes = build_marker_batch(&marker, wall_clock_ms());
        let header = BatchHeader::parse(&bytes)?;
        assert!(header.is_control(), "a marker is a control batch");
        assert_eq!(header.producer_id, marker.producer_id, "marker's producer");
        self.append_batches(vec![(header, bytes)], Origin::Leader(leader_epoch), None)
            .await
    }

    /// Starts KIP-890 part 1's verification of `producer_id`'s transactional batch at
    /// `sequence` and `epoch` (Kafka's `UnifiedLog.maybeStartTransactionVerification`): the
    /// [`VerificationGuard`] the append must carry once the transaction coordinator has said
    /// the partition is in the producer's transaction, or [`VerificationGuard::SENTINEL`]
    /// when its transaction is open here already (nothing to verify).
    pub fn start_txn_verification(
        &self,
        producer_id: i64,
        sequence: i32,
        epoch: i16,
    ) -> VerificationGuard {
        let st = &mut *self.shared.state.borrow_mut();
        if st.producers.has_ongoing_transaction(producer_id, epoch) {
            return VerificationGuard::SENTINEL;
        }
        st.verifications.start(producer_id, sequence, epoch)
    }

    /// First offset of the oldest open transaction, at least the log start offset (Kafka's
    /// `firstUnstableOffset`); `None` when no transaction is open.
    pub fn first_unstable_offset(&self) -> Option<Offset> {
        let st = self.shared.state.borrow();
        st.producers
            .first_unstable_offset()
            .map(|o| o.max(st.log_start))
    }

    /// The last stable offset (KIP-98): the first offset of the oldest transaction that is
    /// open or whose marker is not yet below the high watermark (Kafka's
    /// `firstUndecidedOffset`: a marker the leader appended may still be cut off by a leader
    /// change), or the high watermark if that is lower or no such transaction exists. A
    /// read_committed Fetch reads below it; ListOffsets read_committed answers it.
    pub fn last_stable_offset(&self) -> Offset {
        let (hw, lso) = {
            let st = self.shared.state.borrow();
            let hw = st.high_watermark;
            (hw, st.producers.last_stable_offset(hw, st.log_start))
        };
        // Invariant 1.
        assert!(lso <= hw, "the LSO never passes the high watermark");
        assert!(lso >= self.log_start_offset(), "the LSO is in the log");
        lso
    }

    /// The open transactions as (producer id, first offset), oldest first
    /// (DescribeProducers' `current_txn_start_offset`).
    pub fn ongoing_transactions(&self) -> Vec<(i64, Offset)> {
        self.shared.state.borrow().producers.ongoing_transactions()
    }

    /// The producers the log knows, by producer id (DescribeProducers, Kafka's
    /// `UnifiedLog.activeProducers`).
    pub fn active_producers(&self) -> Vec<ProducerSummary> {
        let st = self.shared.state.borrow();
        let mut out: Vec<ProducerSummary> = st
            .producers
            .entries()
            .map(|(producer_id, entry)| ProducerSummary {
                producer_id,
                epoch: entry.epoch,
                last_sequence: entry.batches.back().map_or(-1, |b| b.last_seq),
                last_batch_base: entry.batches.back().map(|b| b.base_offset),
                coordinator_epoch: entry.coordinator_epoch,
                current_txn_first_offset: entry.current_txn_first_offset,
                last_timestamp_ms: entry.last_timestamp_ms,
            })
            .collect();
        out.sort_unstable_by_key(|p| p.producer_id);
        out
    }

    /// The aborted transactions that may have records in `[from, upto)` — an abort marker at
    /// or after `from`, a first offset before `upto` — as a read_committed Fetch (v4+) lists
    /// them (Kafka's `UnifiedLog.collectAbortedTransactions`): the `.txnindex` of the segment
    /// holding `from` and of later segments, until an entry's last stable offset reaches
    /// `upto`. Ordered by abort marker offset. Loads closed segments' `.txnindex` files on
    /// first use. Errors: I/O.
    pub async fn aborted_transactions(
        &self,
        from: Offset,
        upto: Offset,
    ) -> Result<Vec<AbortedTxn>> {
        let mut out = Vec::new();
        if from >= upto {
            return Ok(out);
        }
        let segments: Vec<Rc<Segment>> = {
            let st = self.shared.state.borrow();
            let first = st
                .segments
                .range(..=from)
                .next_back()
                .map_or(Offset(i64::MIN), |(base, _)| *base);
            st.segments.range(first..).map(|(_, s)| s.clone()).collect()
        };
        for segment in segments {
            segment.ensure_txn_index().await?;
            let entries = segment.aborted_entries().unwrap_or_default();
            if collect_aborted(&entries, from, upto, &mut out) {
                break;
            }
        }
        Ok(out)
    }
}

impl PartitionLog {
    /// Every `.txnindex` entry of the log whose transaction may have batches in
    /// `[from, upto)` (marker at or after `from`, first offset before `upto`), from every
    /// segment: what the cleaner's [`crate::clean::txn::AbortedTxnWalk`] needs over a section.
    /// Errors: I/O loading a closed segment's file.
    pub(super) async fn aborted_entries_overlapping(
        &self,
        from: Offset,
        upto: Offset,
    ) -> Result<Vec<AbortedTxnEntry>> {
        let segments: Vec<Rc<Segment>> = self
            .shared
            .state
            .borrow()
            .segments
            .values()
            .cloned()
            .collect();
        let mut out = Vec::new();
        for segment in segments {
            segment.ensure_txn_index().await?;
            out.extend(
                segment
                    .aborted_entries()
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|e| e.last_offset >= from && e.first_offset < upto),
            );
        }
        Ok(out)
    }
}

/// Marker file: a compaction swap's `.txnindex` writes may be incomplete (created durably
/// before a swap of segments holding aborted transactions, removed durably after its
/// `.txnindex` files are written; docs/storage-format.md §6.8).
pub(super) const TXN_INDEX_REPAIR_FILE: &str = "txnindex-repair";

impl PartitionLog {
    /// Whether the log holds, at `entry.last_offset`, its producer's marker.
    async fn has_marker_at(&self, entry: &AbortedTxnEntry) -> Result<bool> {
        let (start, end) = (self.log_start_offset(), self.log_end_offset());
        if entry.last_offset < start || entry.last_offset >= end {
            return Ok(false);
        }
        let batches = self.read(entry.last_offset, 1, end).await?;
        Ok(batches.first().is_some_and(|b| {
            let h = b.header();
            h.base_offset == entry.last_offset
                && h.is_control()
                && h.producer_id == entry.producer_id
        }))
    }

    /// The entries of `entries` whose marker is in the log.
    async fn entries_with_markers(
        &self,
        entries: Vec<AbortedTxnEntry>,
    ) -> Result<Vec<AbortedTxnEntry>> {
        let mut kept = Vec::with_capacity(entries.len());
        for entry in entries {
            if self.has_marker_at(&entry).await? {
                kept.push(entry);
            }
        }
        Ok(kept)
    }

    /// At open, before producer state is rebuilt: finishes what a crash left of a compaction
    /// swap's `.txnindex` work. Every `.txnindex` whose segment is gone (`listing` holds it,
    /// the segment map does not) is merged into the segment covering its base, or removed
    /// when none does; and when [`TXN_INDEX_REPAIR_FILE`] exists, every segment's entries are
    /// checked against the log. Merged and checked entries are kept only where their marker
    /// is in the log (a clean may have removed it). Durable before it returns. Errors: I/O.
    pub(super) async fn repair_txn_indexes(&self, listing: &[String]) -> Result<()> {
        let dir = self.shared.dir.clone();
        let repair = listing.iter().any(|n| n == TXN_INDEX_REPAIR_FILE);
        let mut changed = false;
        for name in listing {
            let Some(base) = name
                .strip_suffix(".txnindex")
                .and_then(|stem| stem.parse::<i64>().ok())
                .map(Offset)
            else {
                continue;
            };
            let owner = {
                let st = self.shared.state.borrow();
                if st.segments.contains_key(&base) {
                    continue;
                }
                st.segments
                    .range(..base)
                    .next_back()
                    .map(|(_, s)| s.clone())
            };
            let path = dir.join(name);
            if let Some(owner) = owner {
                let entries = crate::segment::read_txn_index(&path).await?;
                let kept = self.entries_with_markers(entries).await?;
                owner.ensure_txn_index().await?;
                owner.merge_aborted(kept);
                owner.save_txn_index().await?;
            }
            remove_file(&path).await?;
            changed = true;
        }
        if repair {
            let segments: Vec<Rc<Segment>> = self
                .shared
                .state
                .borrow()
                .segments
                .values()
                .cloned()
                .collect();
            for segment in segments {
                segment.ensure_txn_index().await?;
                let entries = segment.aborted_entries().unwrap_or_default();
                let count = entries.len();
                let kept = self.entries_with_markers(entries).await?;
                if kept.len() != count {
                    segment.set_aborted(kept);
                    segment.save_txn_index().await?;
                }
            }
            remove_file(&dir.join(TXN_INDEX_REPAIR_FILE)).await?;
            changed = true;
        }
        if changed {
            blocking_dir_op(&dir, "syncing", sync_dir).await?;
        }
        Ok(())
    }
}

/// Milliseconds since the Unix epoch, now: the marker's timestamp (Kafka stamps the
/// coordinator's clock; the broker's serves the same purpose, retention by time).
fn wall_clock_ms() -> TimestampMs {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    TimestampMs(i64::try_from(since.as_millis()).unwrap_or(i64::MAX))
}
