//! The cleaner's view of transactions (KIP-98; Kafka's `CleanedTransactionMetadata`): walking
//! a section's batches in offset order, which data batches belong to an aborted transaction.
//! Their records are neither put in the offset map (an aborted value must never shadow a
//! committed one) nor kept by the clean (read_committed consumers skip them anyway; read_uncommitted
//! ones lose nothing Kafka's cleaner would keep).
//!
//! Markers are always kept here, with their `.txnindex` entries: Kafka also removes a marker
//! once no batch of its transaction is left and its delete horizon has passed — not done yet
//! (`docs/storage-format.md` §6.8).

use crate::batch::BatchHeader;
use crate::txn::AbortedTxnEntry;
use std::collections::{HashMap, VecDeque};

/// Aborted transactions met while walking batches in offset order.
#[derive(Debug, Default)]
pub struct AbortedTxnWalk {
    /// Aborted transactions not reached yet, ascending by first offset.
    pending: VecDeque<AbortedTxnEntry>,
    /// Producers whose aborted transaction the walk is inside: producer id → its entry.
    inside: HashMap<i64, AbortedTxnEntry>,
}

impl AbortedTxnWalk {
    /// A walk over `aborted`: every aborted transaction that may have batches in the section
    /// to be walked (marker at or after its start, first offset at or before its end).
    pub fn new(mut aborted: Vec<AbortedTxnEntry>) -> AbortedTxnWalk {
        aborted.sort_by_key(|e| (e.first_offset, e.last_offset));
        AbortedTxnWalk {
            pending: aborted.into(),
            inside: HashMap::new(),
        }
    }

    /// Whether the batch `header` (the next one in offset order) holds records of an aborted
    /// transaction: a transactional data batch of a producer inside one. A control batch of
    /// such a producer is its abort marker and ends it (kept: see the module doc).
    pub fn is_aborted(&mut self, header: &BatchHeader) -> bool {
        while self
            .pending
            .front()
            .is_some_and(|e| e.first_offset <= header.last_offset())
        {
            let entry = self.pending.pop_front().expect("front checked");
            // A transaction whose marker lies before this batch ended before the walk got
            // here (the section started after it).
            if entry.last_offset >= header.base_offset {
                self.inside.insert(entry.producer_id, entry);
            }
        }
        if header.producer_id < 0 {
            return false;
        }
        if header.is_control() {
            // The producer's next marker after an aborted transaction's first batch is its
            // abort marker (at the entry's last offset).
            self.inside.remove(&header.producer_id);
            return false;
        }
        header.is_transactional() && self.inside.contains_key(&header.producer_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn::{CONTROL_BIT, TRANSACTIONAL_BIT};
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
    }
}
