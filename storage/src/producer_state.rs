//! Idempotent-producer state of one partition (KIP-98): per producer id, its epoch and the
//! sequence ranges and offsets of its last [`BATCHES_KEPT`] batches, so a retried batch is
//! answered with its original offsets instead of being appended twice, a gap is refused, and
//! an old epoch is fenced. Snapshotted at every roll and clean close (`<offset>.snapshot`, a
//! CRC-guarded checkpoint) and rebuilt on open from the newest snapshot plus the batches after
//! it.

use crate::batch::BatchHeader;
use crate::types::Offset;
use std::collections::{HashMap, VecDeque};

/// Batches remembered per producer (Kafka keeps 5, matching
/// `max.in.flight.requests.per.connection` ≤ 5 for idempotent producers).
pub const BATCHES_KEPT: usize = 5;

/// One remembered batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchMeta {
    pub first_seq: i32,
    pub last_seq: i32,
    pub base_offset: Offset,
    pub last_offset: Offset,
}

/// One producer id's state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProducerEntry {
    pub epoch: i16,
    pub batches: VecDeque<BatchMeta>,
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
}

/// Producer states of one partition.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProducerState {
    producers: HashMap<i64, ProducerEntry>,
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
    /// Checks `header` (producer id −1: not idempotent) against the state.
    pub fn check(&self, header: &BatchHeader) -> SequenceCheck {
        if header.producer_id < 0 {
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

    /// The base offset of every producer's last batch in the log: the batches the cleaner
    /// keeps, empty if need be, so sequence state survives compaction (Kafka's rule).
    pub fn last_batch_bases(&self) -> std::collections::BTreeMap<i64, Offset> {
        self.producers
            .iter()
            .filter_map(|(id, entry)| Some((*id, entry.batches.back()?.base_offset)))
            .collect()
    }

    /// Records an appended batch (with its assigned offsets).
    pub fn record(&mut self, header: &BatchHeader) {
        if header.producer_id < 0 {
            return;
        }
        let entry = self.producers.entry(header.producer_id).or_default();
        if header.producer_epoch != entry.epoch {
            entry.epoch = header.producer_epoch;
            entry.batches.clear();
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
    }

    /// Encodes the state as checkpoint values: producer count, then per producer
    /// `id, epoch, batches, (first_seq, last_seq, base_offset, last_offset)*`.
    pub fn encode(&self) -> Vec<i64> {
        let mut out = vec![i64::try_from(self.producers.len()).unwrap_or(0)];
        let mut ids: Vec<&i64> = self.producers.keys().collect();
        ids.sort();
        for id in ids {
            let e = &self.producers[id];
            out.extend([
                *id,
                i64::from(e.epoch),
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

    /// Decodes [`ProducerState::encode`]'s values; `None` when they are malformed.
    pub fn decode(values: &[i64]) -> Option<ProducerState> {
        let mut it = values.iter().copied();
        let count = usize::try_from(it.next()?).ok()?;
        let mut producers = HashMap::new();
        for _ in 0..count {
            let id = it.next()?;
            let epoch = i16::try_from(it.next()?).ok()?;
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
            producers.insert(id, ProducerEntry { epoch, batches });
        }
        it.next().is_none().then_some(ProducerState { producers })
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
        s.record(&first);
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
        s.record(&second);
        // A new epoch starts at 0; an old one is fenced.
        let bumped = header(7, 1, 0, 1, 15);
        assert_eq!(s.check(&bumped), SequenceCheck::Append);
        s.record(&bumped);
        assert!(matches!(
            s.check(&header(7, 0, 5, 1, 0)),
            SequenceCheck::StaleEpoch { current: 1, got: 0 }
        ));
        let back = ProducerState::decode(&s.encode()).expect("round trip");
        assert_eq!(back, s);
        assert!(ProducerState::decode(&[1, 7]).is_none());
        // Only the last five batches are remembered.
        for i in 1..8 {
            s.record(&header(7, 1, i, 1, 15 + i64::from(i)));
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
}
