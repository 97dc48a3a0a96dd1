//! The cleaner's view of transactions (KIP-98; Kafka's `CleanedTransactionMetadata`): walking
//! a section's batches in offset order, which data batches belong to an aborted transaction.
//! Their records are neither put in the offset map (an aborted value must never shadow a
//! committed one) nor kept by the clean (read_committed consumers skip them anyway; read_uncommitted
//! ones lose nothing Kafka's cleaner would keep).
//!
//! A marker is kept while a batch of its transaction was met in the same walk (the clean may
//! drop them, but the next pass must still know they were aborted); once none is, the clean
//! sets its delete horizon and a later clean past it removes the marker with its `.txnindex`
//! entry (`filter::clean_marker`, KIP-534 for control batches).

use crate::batch::BatchHeader;
use crate::txn::AbortedTxnEntry;
use std::collections::{HashMap, HashSet, VecDeque};

/// What a batch is to the walk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnRole {
    /// A data batch outside any aborted transaction.
    Data,
    /// A data batch of an aborted transaction.
    AbortedData,
    /// A marker; `batches_seen`: a data batch of the transaction it ends was met in this walk.
    Marker { batches_seen: bool },
}

/// Aborted transactions met while walking batches in offset order.
#[derive(Debug, Default)]
pub struct AbortedTxnWalk {
    /// Aborted transactions not reached yet, ascending by first offset.
    pending: VecDeque<AbortedTxnEntry>,
    /// Producers whose aborted transaction the walk is inside: producer id → its entry, and
    /// whether a batch of it was met.
    inside: HashMap<i64, (AbortedTxnEntry, bool)>,
    /// Producers with a (not aborted) transactional data batch met since their last marker.
    committed_seen: HashSet<i64>,
}

impl AbortedTxnWalk {
    /// A walk over `aborted`: every aborted transaction that may have batches in the section
    /// to be walked (marker at or after its start, first offset at or before its end).
    pub fn new(mut aborted: Vec<AbortedTxnEntry>) -> AbortedTxnWalk {
        aborted.sort_by_key(|e| (e.first_offset, e.last_offset));
        AbortedTxnWalk {
            pending: aborted.into(),
            inside: HashMap::new(),
            committed_seen: HashSet::new(),
        }
    }

    /// Whether the batch `header` (the next one in offset order) holds records of an aborted
    /// transaction: [`AbortedTxnWalk::next`] is [`TxnRole::AbortedData`].
    pub fn is_aborted(&mut self, header: &BatchHeader) -> bool {
        self.next(header) == TxnRole::AbortedData
    }

    /// The role of the batch `header`, the next one in offset order (Kafka's
    /// `CleanedTransactionMetadata.onBatchRead`): a transactional data batch of a producer
    /// inside an aborted transaction is aborted data; a control batch is its producer's
    /// marker, ending its transaction.
    pub fn next(&mut self, header: &BatchHeader) -> TxnRole {
        while self
            .pending
            .front()
            .is_some_and(|e| e.first_offset <= header.last_offset())
        {
            let entry = self.pending.pop_front().expect("front checked");
            // A transaction whose marker lies before this batch ended before the walk got
            // here (the section started after it).
            if entry.last_offset >= header.base_offset {
                self.inside.insert(entry.producer_id, (entry, false));
            }
        }
        let pid = header.producer_id;
        if pid < 0 {
            return TxnRole::Data;
        }
        if header.is_control() {
            // The producer's next marker after an aborted transaction's first batch is its
            // abort marker (at the entry's last offset).
            let batches_seen = match self.inside.remove(&pid) {
                Some((_, seen)) => seen,
                None => self.committed_seen.remove(&pid),
            };
            return TxnRole::Marker { batches_seen };
        }
        if !header.is_transactional() {
            return TxnRole::Data;
        }
        match self.inside.get_mut(&pid) {
            Some((_, seen)) => {
                *seen = true;
                TxnRole::AbortedData
            }
            None => {
                self.committed_seen.insert(pid);
                TxnRole::Data
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{CONTROL_BIT, TRANSACTIONAL_BIT};
    use crate::types::{LeaderEpoch, Offset, TimestampMs};

    fn header(pid: i64, base: i64, attributes: i16) -> BatchHeader {
        BatchHeader {
            base_offset: Offset(base),
            batch_length: 100,
            partition_leader_epoch: LeaderEpoch(0),
            magic: 2,
            crc: 0,
            attributes,
            last_offset_delta: 0,
            base_timestamp: TimestampMs(0),
            max_timestamp: TimestampMs(0),
            producer_id: pid,
            producer_epoch: 0,
            base_sequence: 0,
            records_count: 1,
        }
    }

    #[test]
    fn only_batches_of_aborted_transactions_are_aborted() {
        let entry = |pid, first, last| AbortedTxnEntry {
            producer_id: pid,
            first_offset: Offset(first),
            last_offset: Offset(last),
            last_stable_offset: Offset(last + 1),
        };
        // Producer 1 aborts [2, 5]; producer 2 commits [3, 6]; producer 1 aborts again [8, 9].
        let mut walk = AbortedTxnWalk::new(vec![entry(1, 8, 9), entry(1, 2, 5)]);
        let txn = TRANSACTIONAL_BIT;
        let marker = TRANSACTIONAL_BIT | CONTROL_BIT;
        assert!(!walk.is_aborted(&header(-1, 1, 0)));
        assert!(walk.is_aborted(&header(1, 2, txn)));
        assert!(!walk.is_aborted(&header(2, 3, txn)));
        assert!(walk.is_aborted(&header(1, 4, txn)));
        assert!(!walk.is_aborted(&header(1, 5, marker)));
        assert!(!walk.is_aborted(&header(2, 6, marker)));
        assert!(!walk.is_aborted(&header(1, 7, 0)), "not transactional");
        assert!(walk.is_aborted(&header(1, 8, txn)));
        assert!(!walk.is_aborted(&header(1, 9, marker)));
        assert!(!walk.is_aborted(&header(1, 10, txn)), "a later transaction");
        // Markers say whether their transaction still had batches in the walk.
        let mut walk = AbortedTxnWalk::new(vec![entry(1, 2, 5)]);
        assert_eq!(
            walk.next(&header(1, 0, marker)),
            TxnRole::Marker {
                batches_seen: false
            }
        );
        assert_eq!(walk.next(&header(2, 1, txn)), TxnRole::Data);
        assert_eq!(
            walk.next(&header(1, 5, marker)),
            TxnRole::Marker {
                batches_seen: false
            }
        );
        assert_eq!(
            walk.next(&header(2, 6, marker)),
            TxnRole::Marker { batches_seen: true }
        );
        let mut walk = AbortedTxnWalk::new(vec![entry(1, 2, 5)]);
        assert_eq!(walk.next(&header(1, 2, txn)), TxnRole::AbortedData);
        assert_eq!(
            walk.next(&header(1, 5, marker)),
            TxnRole::Marker { batches_seen: true }
        );
    }
}
