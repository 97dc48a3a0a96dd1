//! Idempotent- and transactional-producer state of one partition (KIP-98): per producer id,
//! its epoch and the sequence ranges and offsets of its last [`BATCHES_KEPT`] batches, so a
//! retried batch is answered with its original offsets instead of being appended twice, a gap
//! is refused, and an old epoch is fenced; and for transactions (Kafka's
//! `ProducerStateManager`), the producer's open transaction (the offset of its first
//! transactional batch since its last marker) and the coordinator epoch of its last marker.
//! The open transactions, ordered by first offset, give the last stable offset.
//! Snapshotted at every roll and clean close (`<offset>.snapshot`, a CRC-guarded checkpoint)
//! and rebuilt on open from the newest snapshot plus the batches (markers included) after it.
//!
//! Invariant: `ongoing` holds exactly the producers whose `current_txn_first_offset` is set,
//! keyed by that offset.
//!
//! A completed transaction stays *unreplicated* (Kafka's `unreplicatedTxns`) from its marker's
//! append until the high watermark passes the marker: until then the last stable offset stays
//! at or below its first offset, since a leader change could still cut the marker off. Not
//! snapshotted (as Kafka): a rebuild knows those whose markers it replays.

use crate::batch::BatchHeader;
use crate::txn::{AbortedTxnEntry, TxnMarker, TxnResult};
use crate::types::Offset;
use std::collections::{BTreeMap, HashMap, VecDeque};

/// Batches remembered per producer (Kafka keeps 5, matching
/// `max.in.flight.requests.per.connection` ≤ 5 for idempotent producers).
pub const BATCHES_KEPT: usize = 5;

/// First value of a version-1 snapshot encoding (a version-0 encoding starts with the
/// producer count, never negative).
const SNAPSHOT_V1: i64 = -1;
/// First value of a version-2 snapshot encoding (version 1 plus each producer's last
/// timestamp).
const SNAPSHOT_V2: i64 = -2;
/// A producer's last timestamp before one is known (a version-0 or 1 snapshot's producers).
const NO_TIMESTAMP: i64 = -1;
/// Kafka's "no coordinator epoch yet" (`RecordBatch.NO_PARTITION_LEADER_EPOCH`).
const NO_COORDINATOR_EPOCH: i32 = -1;

/// One remembered batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchMeta {
    pub first_seq: i32,
    pub last_seq: i32,
    pub base_offset: Offset,
    pub last_offset: Offset,
}

/// One producer id's state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerEntry {
    pub epoch: i16,
    pub batches: VecDeque<BatchMeta>,
    /// Coordinator epoch of the producer's last marker ([`NO_COORDINATOR_EPOCH`] before one):
    /// a marker from an older coordinator is fenced (KIP-98).
    pub coordinator_epoch: i32,
    /// First offset of the producer's open transaction in this partition, if one is open.
    pub current_txn_first_offset: Option<Offset>,
    /// Max timestamp of the producer's last batch, data or marker (Kafka's
    /// `ProducerStateEntry.lastTimestamp`), ms; [`NO_TIMESTAMP`] while unknown.
    pub last_timestamp_ms: i64,
}

impl Default for ProducerEntry {
    fn default() -> Self {
        ProducerEntry {
            epoch: 0,
            batches: VecDeque::new(),
            coordinator_epoch: NO_COORDINATOR_EPOCH,
            current_txn_first_offset: None,
            last_timestamp_ms: NO_TIMESTAMP,
        }
    }
}

/// One producer as `PartitionLog::active_producers` describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducerSummary {
    pub producer_id: i64,
    pub epoch: i16,
    /// The last sequence of its last remembered batch; -1 when none is remembered.
    pub last_sequence: i32,
    /// The base offset of its last remembered batch (its timestamp is read from the log).
    pub last_batch_base: Option<Offset>,
    /// The coordinator epoch of its last marker; -1 before one.
    pub coordinator_epoch: i32,
    /// The first offset of its open transaction here, if one is open.
    pub current_txn_first_offset: Option<Offset>,
    /// The max timestamp of its last batch, data or marker, ms; -1 when unknown (a producer
    /// restored from a snapshot written before this was kept).
    pub last_timestamp_ms: i64,
}

/// How an incoming batch relates to its producer's state.
#[derive(Debug, PartialEq, Eq)]
pub enum SequenceCheck {
    /// Not idempotent, or the next expected sequence: append it.
    Append,
    /// A retry of a remembered batch: answer with its offsets, append nothing.
    Duplicate(BatchMeta),
    /// The sequence does not follow the last one (a gap, or an unknown producer not at 0).
    OutOfOrder { expected: i32, got: i32 },
    /// The producer epoch is older than the one already seen.
    StaleEpoch { current: i16, got: i16 },
    /// A transactional batch without a producer id, or a non-transactional batch from a
    /// producer whose transaction is open (Kafka's `InvalidTxnStateException`).
    InvalidTxnState(&'static str),
    /// A marker from a transaction coordinator older than the last one seen for the producer
    /// (Kafka's `TransactionCoordinatorFencedException`).
    CoordinatorFenced { current: i32, got: i32 },
}

/// A transaction a marker ended, as [`ProducerState::record`] reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompletedTxn {
    pub producer_id: i64,
    pub first_offset: Offset,
    /// The marker's offset.
    pub last_offset: Offset,
    pub result: TxnResult,
    /// The last stable offset once this transaction is complete: the first offset of the
    /// oldest transaction still open, else the marker's offset + 1 (Kafka's
    /// `ProducerStateManager.lastStableOffset(CompletedTxn)`).
    pub last_stable_offset: Offset,
}

impl CompletedTxn {
    /// The `.txnindex` entry of an aborted transaction; `None` for a committed one.
    pub fn aborted_entry(&self) -> Option<AbortedTxnEntry> {
        (self.result == TxnResult::Abort).then_some(AbortedTxnEntry {
            producer_id: self.producer_id,
            first_offset: self.first_offset,
            last_offset: self.last_offset,
            last_stable_offset: self.last_stable_offset,
        })
    }
}

/// Producer states of one partition.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProducerState {
    producers: HashMap<i64, ProducerEntry>,
    /// Open transactions: first offset → producer id (see the module's invariant).
    ongoing: BTreeMap<Offset, i64>,
    /// Completed transactions whose marker may not be below the high watermark yet: first
    /// offset → marker offset (see the module doc).
    unreplicated: BTreeMap<Offset, Offset>,
}

/// Sequence after `seq`, wrapping at `i32::MAX` as Kafka does.
fn next_seq(seq: i32) -> i32 {
    if seq == i32::MAX {
        0
    } else {
        seq + 1
    }
}

/// Last sequence of a batch, wrapping as Kafka does.
fn last_seq(header: &BatchHeader) -> i32 {
    let last = i64::from(header.base_sequence) + i64::from(header.last_offset_delta);
    i32::try_from(last % (i64::from(i32::MAX) + 1)).unwrap_or(0)
}

impl ProducerState {
    /// Checks a data batch's `header` (producer id −1: not idempotent) against the state.
    /// Markers are checked by [`ProducerState::check_marker`].
    pub fn check(&self, header: &BatchHeader) -> SequenceCheck {
        debug_assert!(!header.is_control(), "markers go through check_marker");
        if header.producer_id < 0 {
            if header.is_transactional() {
                return SequenceCheck::InvalidTxnState(
                    "a transactional batch without a producer id",
                );
            }
            return SequenceCheck::Append;
        }
        let first = header.base_sequence;
        let Some(entry) = self.producers.get(&header.producer_id) else {
            return if first == 0 {
                SequenceCheck::Append
            } else {
                SequenceCheck::OutOfOrder {
                    expected: 0,
                    got: first,
                }
            };
        };
        if header.producer_epoch < entry.epoch {
            return SequenceCheck::StaleEpoch {
                current: entry.epoch,
                got: header.producer_epoch,
            };
        }
        if !header.is_transactional() && entry.current_txn_first_offset.is_some() {
            return SequenceCheck::InvalidTxnState(
                "a non-transactional batch while the producer's transaction is open",
            );
        }
        if header.producer_epoch > entry.epoch {
            return if first == 0 {
                SequenceCheck::Append
            } else {
                SequenceCheck::OutOfOrder {
                    expected: 0,
                    got: first,
                }
            };
        }
        let last = last_seq(header);
        if let Some(b) = entry
            .batches
            .iter()
            .find(|b| b.first_seq == first && b.last_seq == last)
        {
            return SequenceCheck::Duplicate(*b);
        }
        let expected = entry.batches.back().map_or(0, |b| next_seq(b.last_seq));
        if first == expected {
            SequenceCheck::Append
        } else {
            SequenceCheck::OutOfOrder {
                expected,
                got: first,
            }
        }
    }

    /// Checks a data batch a coordinator appends to its own log (Kafka's
    /// `AppendOrigin.COORDINATOR`, e.g. TxnOffsetCommit's records): only the producer epoch,
    /// an older one than the producer's being [`SequenceCheck::StaleEpoch`]; sequences are a
    /// client's, so none is checked and no retry is detected.
    pub fn check_epoch(&self, header: &BatchHeader) -> SequenceCheck {
        match self.producers.get(&header.producer_id) {
            Some(entry) if header.producer_id >= 0 && header.producer_epoch < entry.epoch => {
                SequenceCheck::StaleEpoch {
                    current: entry.epoch,
                    got: header.producer_epoch,
                }
            }
            _ => SequenceCheck::Append,
        }
    }

    /// Checks a marker a leader is asked to append (Kafka's `ProducerAppendInfo
    /// .appendEndTxnMarker` for a coordinator's write): an epoch older than the producer's is
    /// [`SequenceCheck::StaleEpoch`] (INVALID_PRODUCER_EPOCH), a coordinator epoch older than
    /// the producer's last marker's is [`SequenceCheck::CoordinatorFenced`]
    /// (TRANSACTION_COORDINATOR_FENCED); otherwise [`SequenceCheck::Append`]. A marker with no
    /// open transaction is appended too (Kafka: it changes neither the LSO nor the index).
    pub fn check_marker(&self, marker: &TxnMarker) -> SequenceCheck {
        let Some(entry) = self.producers.get(&marker.producer_id) else {
            return SequenceCheck::Append;
        };
        if marker.producer_epoch < entry.epoch {
            return SequenceCheck::StaleEpoch {
                current: entry.epoch,
                got: marker.producer_epoch,
            };
        }
        if marker.coordinator_epoch < entry.coordinator_epoch {
            return SequenceCheck::CoordinatorFenced {
                current: entry.coordinator_epoch,
                got: marker.coordinator_epoch,
            };
        }
        SequenceCheck::Append
    }

    /// The base offset of every producer's last batch in the log: the batches the cleaner
    /// keeps, empty if need be, so sequence state survives compaction (Kafka's rule).
    pub fn last_batch_bases(&self) -> BTreeMap<i64, Offset> {
        self.producers
            .iter()
            .filter_map(|(id, entry)| Some((*id, entry.batches.back()?.base_offset)))
            .collect()
    }

    /// Every producer's id and state, in no particular order (DescribeProducers).
    pub fn entries(&self) -> impl Iterator<Item = (i64, &ProducerEntry)> {
        self.producers.iter().map(|(id, entry)| (*id, entry))
    }

    /// Whether `producer_id`'s transaction at `producer_epoch` is open in this partition
    /// (Kafka's `UnifiedLog.hasOngoingTransaction`). The epoch matters with transaction
    /// version 2 (KIP-890 part 2): each transaction has its own epoch, so a batch of the next
    /// transaction, arriving before the previous one's marker, is not part of the open one.
    pub fn has_ongoing_transaction(&self, producer_id: i64, producer_epoch: i16) -> bool {
        self.producers
            .get(&producer_id)
            .is_some_and(|e| e.current_txn_first_offset.is_some() && e.epoch == producer_epoch)
    }

    /// First offset of the oldest open transaction (Kafka's `firstUnstableOffset`).
    pub fn first_unstable_offset(&self) -> Option<Offset> {
        self.ongoing.keys().next().copied()
    }

    /// First offset of the oldest transaction that is open, or completed by a marker at or
    /// above `high_watermark` (Kafka's `firstUndecidedOffset`): the last stable offset is at
    /// most this.
    pub fn first_undecided_offset(&self, high_watermark: Offset) -> Option<Offset> {
        let unreplicated = self
            .unreplicated
            .iter()
            .find(|(_, marker)| **marker >= high_watermark)
            .map(|(first, _)| *first);
        match (self.first_unstable_offset(), unreplicated) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The last stable offset (KIP-98) of a log starting at `log_start` with `high_watermark`:
    /// the first offset of the oldest transaction that is open or whose marker is not yet
    /// below the high watermark ([`ProducerState::first_undecided_offset`], at least
    /// `log_start`), or the high watermark if that is lower or no such transaction exists.
    /// Invariant: `log_start ≤ result ≤ high_watermark` when `log_start ≤ high_watermark`.
    pub fn last_stable_offset(&self, high_watermark: Offset, log_start: Offset) -> Offset {
        let undecided = self
            .first_undecided_offset(high_watermark)
            .map(|o| o.max(log_start));
        undecided.map_or(high_watermark, |o| o.min(high_watermark))
    }

    /// Forgets the completed transactions whose marker is below `high_watermark` (Kafka's
    /// `onHighWatermarkUpdated`): they no longer bound the last stable offset.
    pub fn on_high_watermark_updated(&mut self, high_watermark: Offset) {
        self.unreplicated
            .retain(|_, marker| *marker >= high_watermark);
    }

    /// The open transactions as (producer id, first offset), oldest first.
    pub fn ongoing_transactions(&self) -> Vec<(i64, Offset)> {
        self.ongoing.iter().map(|(o, p)| (*p, *o)).collect()
    }

    /// Records an appended batch (with its assigned offsets). `marker` is the parsed marker
    /// of a control batch and `None` for a data batch or a control batch compaction emptied
    /// (its transaction is gone: nothing changes, as Kafka). A transactional data batch opens
    /// its producer's transaction if none is open; a marker closes it and returns it (`None`
    /// when no transaction was open: Kafka's empty transaction, which changes nothing).
    ///
    /// # Panics
    /// When `marker` does not match `header` (control bit, producer id): the caller parsed
    /// the marker out of this very batch.
    pub fn record(
        &mut self,
        header: &BatchHeader,
        marker: Option<&TxnMarker>,
    ) -> Option<CompletedTxn> {
        assert!(
            marker.is_none() || header.is_control(),
            "a marker comes from a control batch"
        );
        if header.producer_id < 0 || (header.is_control() && marker.is_none()) {
            return None;
        }
        let entry = self.producers.entry(header.producer_id).or_default();
        if header.producer_epoch != entry.epoch {
            entry.epoch = header.producer_epoch;
            entry.batches.clear();
        }
        entry.last_timestamp_ms = header.max_timestamp.0;
        if let Some(marker) = marker {
            assert_eq!(
                marker.producer_id, header.producer_id,
                "marker of this batch"
            );
            entry.coordinator_epoch = marker.coordinator_epoch;
            let first = entry.current_txn_first_offset.take()?;
            let removed = self.ongoing.remove(&first);
            assert_eq!(
                removed,
                Some(header.producer_id),
                "ongoing mirrors the entries"
            );
            let last_offset = header.base_offset;
            let clash = self.unreplicated.insert(first, last_offset);
            assert!(clash.is_none(), "one transaction starts at an offset");
            let last_stable_offset = self.first_unstable_offset().unwrap_or(last_offset.plus(1));
            return Some(CompletedTxn {
                producer_id: header.producer_id,
                first_offset: first,
                last_offset,
                result: marker.result,
                last_stable_offset,
            });
        }
        entry.batches.push_back(BatchMeta {
            first_seq: header.base_sequence,
            last_seq: last_seq(header),
            base_offset: header.base_offset,
            last_offset: header.last_offset(),
        });
        while entry.batches.len() > BATCHES_KEPT {
            entry.batches.pop_front();
        }
        if header.is_transactional() && entry.current_txn_first_offset.is_none() {
            entry.current_txn_first_offset = Some(header.base_offset);
            let clash = self.ongoing.insert(header.base_offset, header.producer_id);
            assert!(clash.is_none(), "one transaction starts at an offset");
        }
        None
    }

    /// Encodes the state as checkpoint values, version 2: `-2`, producer count, then per
    /// producer `id, epoch, coordinator epoch, open transaction's first offset (-1: none),
    /// last timestamp (ms, -1: unknown), batches, (first_seq, last_seq, base_offset,
    /// last_offset)*`.
    pub fn encode(&self) -> Vec<i64> {
        let mut out = vec![
            SNAPSHOT_V2,
            i64::try_from(self.producers.len()).unwrap_or(0),
        ];
        let mut ids: Vec<&i64> = self.producers.keys().collect();
        ids.sort();
        for id in ids {
            let e = &self.producers[id];
            out.extend([
                *id,
                i64::from(e.epoch),
                i64::from(e.coordinator_epoch),
                e.current_txn_first_offset.map_or(-1, |o| o.0),
                e.last_timestamp_ms,
                i64::try_from(e.batches.len()).unwrap_or(0),
            ]);
            for b in &e.batches {
                out.extend([
                    i64::from(b.first_seq),
                    i64::from(b.last_seq),
                    b.base_offset.0,
                    b.last_offset.0,
                ]);
            }
        }
        out
    }

    /// Decodes [`ProducerState::encode`]'s values, version 2, 1 (no last timestamps), or 0
    /// (no transaction fields either: written before transactions existed, so none was open);
    /// `None` when they are malformed.
    pub fn decode(values: &[i64]) -> Option<ProducerState> {
        let mut it = values.iter().copied().peekable();
        let v2 = it.next_if_eq(&SNAPSHOT_V2).is_some();
        let v1 = v2 || it.next_if_eq(&SNAPSHOT_V1).is_some();
        let count = usize::try_from(it.next()?).ok()?;
        let mut state = ProducerState::default();
        for _ in 0..count {
            let id = it.next()?;
            let epoch = i16::try_from(it.next()?).ok()?;
            let (coordinator_epoch, txn_first) = if v1 {
                (i32::try_from(it.next()?).ok()?, it.next()?)
            } else {
                (NO_COORDINATOR_EPOCH, -1)
            };
            let last_timestamp_ms = if v2 { it.next()? } else { NO_TIMESTAMP };
            let n = usize::try_from(it.next()?).ok()?;
            if n > BATCHES_KEPT {
                return None;
            }
            let mut batches = VecDeque::with_capacity(n);
            for _ in 0..n {
                batches.push_back(BatchMeta {
                    first_seq: i32::try_from(it.next()?).ok()?,
                    last_seq: i32::try_from(it.next()?).ok()?,
                    base_offset: Offset(it.next()?),
                    last_offset: Offset(it.next()?),
                });
            }
            let current_txn_first_offset = (txn_first >= 0).then_some(Offset(txn_first));
            if let Some(first) = current_txn_first_offset {
                if state.ongoing.insert(first, id).is_some() {
                    return None;
                }
            }
            let entry = ProducerEntry {
                epoch,
                batches,
                coordinator_epoch,
                current_txn_first_offset,
                last_timestamp_ms,
            };
            if state.producers.insert(id, entry).is_some() {
                return None;
            }
        }
        it.next().is_none().then_some(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{LeaderEpoch, TimestampMs};

    fn header(pid: i64, epoch: i16, seq: i32, records: i32, base: i64) -> BatchHeader {
        BatchHeader {
            base_offset: Offset(base),
            batch_length: 100,
            partition_leader_epoch: LeaderEpoch(0),
            magic: 2,
            crc: 0,
            attributes: 0,
            last_offset_delta: records - 1,
            base_timestamp: TimestampMs(0),
            max_timestamp: TimestampMs(0),
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
            records_count: records,
        }
    }

    #[test]
    fn sequences_deduplicate_fence_and_refuse_gaps() {
        let mut s = ProducerState::default();
        assert_eq!(s.check(&header(-1, -1, -1, 3, 0)), SequenceCheck::Append);
        assert!(matches!(
            s.check(&header(7, 0, 5, 1, 0)),
            SequenceCheck::OutOfOrder {
                expected: 0,
                got: 5
            }
        ));
        let first = header(7, 0, 0, 3, 10);
        assert_eq!(s.check(&first), SequenceCheck::Append);
        s.record(&first, None);
        assert!(
            matches!(s.check(&header(7, 0, 0, 3, 99)), SequenceCheck::Duplicate(b) if b.base_offset == Offset(10))
        );
        assert!(matches!(
            s.check(&header(7, 0, 4, 1, 0)),
            SequenceCheck::OutOfOrder {
                expected: 3,
                got: 4
            }
        ));
        let second = header(7, 0, 3, 2, 13);
        assert_eq!(s.check(&second), SequenceCheck::Append);
        s.record(&second, None);
        // A new epoch starts at 0; an old one is fenced.
        let bumped = header(7, 1, 0, 1, 15);
        assert_eq!(s.check(&bumped), SequenceCheck::Append);
        s.record(&bumped, None);
        assert!(matches!(
            s.check(&header(7, 0, 5, 1, 0)),
            SequenceCheck::StaleEpoch { current: 1, got: 0 }
        ));
        let back = ProducerState::decode(&s.encode()).expect("round trip");
        assert_eq!(back, s);
        assert!(ProducerState::decode(&[1, 7]).is_none());
        // Only the last five batches are remembered.
        for i in 1..8 {
            s.record(&header(7, 1, i, 1, 15 + i64::from(i)), None);
        }
        assert!(matches!(
            s.check(&header(7, 1, 0, 1, 0)),
            SequenceCheck::OutOfOrder { .. }
        ));
        assert!(matches!(
            s.check(&header(7, 1, 7, 1, 0)),
            SequenceCheck::Duplicate(_)
        ));
    }

    fn txn(pid: i64, epoch: i16, seq: i32, records: i32, base: i64) -> BatchHeader {
        BatchHeader {
            attributes: crate::batch::TRANSACTIONAL_BIT,
            ..header(pid, epoch, seq, records, base)
        }
    }

    fn marker_header(pid: i64, epoch: i16, base: i64) -> BatchHeader {
        BatchHeader {
            attributes: crate::batch::TRANSACTIONAL_BIT | crate::batch::CONTROL_BIT,
            base_sequence: -1,
            ..header(pid, epoch, -1, 1, base)
        }
    }

    #[test]
    fn transactions_open_close_order_and_fence() {
        let mut s = ProducerState::default();
        let m = |pid, epoch, result, coordinator_epoch| TxnMarker {
            producer_id: pid,
            producer_epoch: epoch,
            result,
            coordinator_epoch,
        };
        assert_eq!(s.record(&txn(1, 0, 0, 2, 10), None), None);
        assert_eq!(s.record(&txn(2, 0, 0, 1, 12), None), None);
        assert_eq!(s.record(&txn(1, 0, 2, 1, 13), None), None);
        assert_eq!(s.first_unstable_offset(), Some(Offset(10)));
        assert_eq!(
            s.ongoing_transactions(),
            vec![(1, Offset(10)), (2, Offset(12))]
        );
        assert!(matches!(
            s.check(&header(1, 0, 3, 1, 0)),
            SequenceCheck::InvalidTxnState(_)
        ));
        assert!(matches!(
            s.check(&txn(-1, -1, -1, 1, 0)),
            SequenceCheck::InvalidTxnState(_)
        ));
        // Snapshot round trip keeps the open transactions.
        assert_eq!(ProducerState::decode(&s.encode()).as_ref(), Some(&s));
        let abort = m(1, 0, TxnResult::Abort, 5);
        assert_eq!(s.check_marker(&abort), SequenceCheck::Append);
        let done = s
            .record(&marker_header(1, 0, 14), Some(&abort))
            .expect("closed");
        assert_eq!(
            done.aborted_entry(),
            Some(AbortedTxnEntry {
                producer_id: 1,
                first_offset: Offset(10),
                last_offset: Offset(14),
                last_stable_offset: Offset(12),
            })
        );
        assert_eq!(s.first_unstable_offset(), Some(Offset(12)));
        assert!(matches!(
            s.check_marker(&m(1, 0, TxnResult::Commit, 4)),
            SequenceCheck::CoordinatorFenced { current: 5, got: 4 }
        ));
        let commit = m(2, 0, TxnResult::Commit, 0);
        let done = s
            .record(&marker_header(2, 0, 15), Some(&commit))
            .expect("closed");
        assert_eq!(
            (done.aborted_entry(), done.last_stable_offset),
            (None, Offset(16))
        );
        assert_eq!(s.first_unstable_offset(), None);
        // An epoch bump fences markers of the old epoch; an empty transaction's marker
        // completes nothing.
        s.record(&txn(2, 1, 0, 1, 16), None);
        assert!(matches!(
            s.check_marker(&m(2, 0, TxnResult::Abort, 1)),
            SequenceCheck::StaleEpoch { current: 1, got: 0 }
        ));
        assert_eq!(
            s.record(
                &marker_header(3, 0, 17),
                Some(&m(3, 0, TxnResult::Abort, 0))
            ),
            None
        );
        // A marker's timestamp is its producer's last (Kafka's lastTimestamp); a snapshot
        // keeps it (version 2); a version-1 one does not know it.
        let mut late = marker_header(2, 1, 18);
        late.max_timestamp = TimestampMs(777);
        s.record(&late, Some(&m(2, 1, TxnResult::Commit, 1)));
        let last = |s: &ProducerState, pid| {
            s.entries()
                .find(|(id, _)| *id == pid)
                .map(|(_, e)| e.last_timestamp_ms)
        };
        assert_eq!(last(&s, 2), Some(777));
        let back = ProducerState::decode(&s.encode()).expect("v2");
        assert_eq!(last(&back, 2), Some(777));
        let v1 = [-1, 1, 7, 0, -1, -1, 0];
        assert_eq!(last(&ProducerState::decode(&v1).expect("v1"), 7), Some(-1));
        // Version 0 snapshots (no transaction fields) still decode.
        let v0 = [1, 7, 0, 1, 0, 2, 10, 12];
        let old = ProducerState::decode(&v0).expect("v0");
        assert_eq!(old.first_unstable_offset(), None);
        assert_eq!(old.last_batch_bases().get(&7), Some(&Offset(10)));
    }
}
