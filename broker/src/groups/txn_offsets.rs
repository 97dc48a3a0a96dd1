//! A group's transactional offset commits (KIP-98, TxnOffsetCommit) until their transaction
//! ends: Kafka's `GroupMetadata.pendingTransactionalOffsetCommits` (and the new coordinator's
//! `OffsetMetadataManager.pendingTransactionalOffsets`). Pure state, owned by the group (on
//! the shard coordinating it); no I/O.
//!
//! A TxnOffsetCommit's records are written to the group's `__consumer_offsets` partition as a
//! transactional batch of the producer, and stay *pending* here: OffsetFetch does not return
//! them (with `require_stable` it answers UNSTABLE_OFFSET_COMMIT for their partitions). The
//! producer's transaction marker on that partition ends them: a commit materialises each one
//! unless the group's committed offset for the partition was written later in the log (its
//! record offset is higher: Kafka keeps the most recent record, so compaction of the log
//! cannot change which one wins); an abort discards them. A tombstone for a partition
//! removes its pending offsets too (Kafka's replay of a tombstone). The same rules apply on
//! replay, where a transaction whose marker is not in the log yet stays pending.
//!
//! Invariant: no producer is kept with an empty map of pending offsets.

use super::offsets_log::CommittedOffset;
use std::collections::BTreeMap;
use storage::TxnResult;

/// A committed offset's key: (topic, partition).
pub type OffsetKey = (String, i32);

/// One group's pending transactional offsets, by producer id (module doc).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PendingTxnOffsets {
    by_producer: BTreeMap<i64, BTreeMap<OffsetKey, CommittedOffset>>,
}

impl PendingTxnOffsets {
    /// Records `offset` (its `record_offset` set: where its record is in the log) committed by
    /// `producer_id`'s open transaction; a later one for the same key replaces it.
    pub fn add(&mut self, producer_id: i64, key: OffsetKey, offset: CommittedOffset) {
        assert!(producer_id >= 0, "a transactional commit has a producer id");
        self.by_producer
            .entry(producer_id)
            .or_default()
            .insert(key, offset);
    }

    /// Whether a transaction's offset for `key` is pending (OffsetFetch's
    /// UNSTABLE_OFFSET_COMMIT with `require_stable`).
    pub fn has_pending(&self, key: &OffsetKey) -> bool {
        self.by_producer.values().any(|o| o.contains_key(key))
    }

    /// Whether nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.by_producer.is_empty()
    }

    /// Whether `producer_id` has pending offsets here.
    pub fn has_producer(&self, producer_id: i64) -> bool {
        self.by_producer.contains_key(&producer_id)
    }

    /// A tombstone for `key` was written: every producer's pending offset for it goes.
    pub fn remove_key(&mut self, key: &OffsetKey) {
        for offsets in self.by_producer.values_mut() {
            offsets.remove(key);
        }
        self.by_producer.retain(|_, o| !o.is_empty());
    }

    /// `producer_id`'s transaction ended with `end` (its marker's result): its pending
    /// offsets leave this set, and
    /// on a commit each one is materialised into `committed` unless `committed` holds, for its
    /// key, an offset whose record is later in the log. Returns how many were materialised.
    pub fn complete(
        &mut self,
        producer_id: i64,
        end: TxnResult,
        committed: &mut BTreeMap<OffsetKey, CommittedOffset>,
    ) -> usize {
        let Some(pending) = self.by_producer.remove(&producer_id) else {
            return 0;
        };
        if end == TxnResult::Abort {
            return 0;
        }
        let mut materialised = 0;
        for (key, offset) in pending {
            let newer_committed = committed
                .get(&key)
                .is_some_and(|c| c.record_offset > offset.record_offset);
            if !newer_committed {
                committed.insert(key, offset);
                materialised += 1;
            }
        }
        materialised
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offset(offset: i64, record_offset: i64) -> CommittedOffset {
        CommittedOffset {
            offset,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp_ms: 0,
            record_offset,
        }
    }

    fn key(p: i32) -> OffsetKey {
        ("t".to_string(), p)
    }

    #[test]
    fn a_commit_materialises_pending_offsets_and_an_abort_discards_them() {
        let mut pending = PendingTxnOffsets::default();
        let mut committed = BTreeMap::new();
        pending.add(1, key(0), offset(10, 100));
        pending.add(1, key(0), offset(12, 101)); // the same transaction again: replaces
        pending.add(1, key(1), offset(5, 101));
        pending.add(2, key(2), offset(7, 102));
        assert!(pending.has_pending(&key(0)) && pending.has_pending(&key(2)));
        assert!(!pending.has_pending(&key(3)));
        // Another producer's marker, or an unknown one, changes nothing of producer 1's.
        assert_eq!(pending.complete(9, TxnResult::Commit, &mut committed), 0);
        assert_eq!(pending.complete(2, TxnResult::Abort, &mut committed), 0);
        assert!(committed.is_empty());
        assert!(!pending.has_pending(&key(2)));
        assert_eq!(pending.complete(1, TxnResult::Commit, &mut committed), 2);
        assert_eq!(committed[&key(0)], offset(12, 101));
        assert_eq!(committed[&key(1)], offset(5, 101));
        assert!(pending.is_empty());
        // A second marker for the same transaction (a coordinator's retry) changes nothing.
        assert_eq!(pending.complete(1, TxnResult::Commit, &mut committed), 0);
        assert_eq!(committed.len(), 2);
    }

    #[test]
    fn a_later_regular_commit_wins_over_a_transaction_committed_after_it() {
        let mut pending = PendingTxnOffsets::default();
        let mut committed = BTreeMap::new();
        pending.add(1, key(0), offset(10, 100));
        pending.add(1, key(1), offset(20, 100));
        // A regular commit written after the transactional record, before the marker.
        committed.insert(key(0), offset(15, 105));
        // One written before it.
        committed.insert(key(1), offset(3, 50));
        assert_eq!(pending.complete(1, TxnResult::Commit, &mut committed), 1);
        assert_eq!(committed[&key(0)].offset, 15, "the later record wins");
        assert_eq!(committed[&key(1)].offset, 20);
    }

    #[test]
    fn a_tombstone_removes_every_pending_offset_of_its_partition() {
        let mut pending = PendingTxnOffsets::default();
        let mut committed = BTreeMap::new();
        pending.add(1, key(0), offset(10, 100));
        pending.add(2, key(0), offset(11, 101));
        pending.add(2, key(1), offset(12, 101));
        pending.remove_key(&key(0));
        assert!(!pending.has_pending(&key(0)));
        assert!(!pending.has_producer(1), "no producer is kept empty");
        assert_eq!(pending.complete(2, TxnResult::Commit, &mut committed), 1);
        assert!(!committed.contains_key(&key(0)));
    }
}
