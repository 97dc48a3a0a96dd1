//! The leader-epoch cache (KIP-101): for each leader epoch that wrote to this partition, the
//! offset of its first record — what `OffsetForLeaderEpoch` and a Fetch's diverging epoch
//! (KIP-320/KIP-595) answer from, and what a follower truncates by. Pure: no I/O; the
//! [`crate::PartitionLog`] owning it keeps it in the `leader-epoch-checkpoint` file
//! (`docs/storage-format.md`).
//!
//! The rules are those of Kafka's `LeaderEpochFileCache`, read from its source:
//!
//! Invariant: entries are strictly ascending in epoch *and* in start offset. [`LeaderEpochCache::assign`]
//! keeps it by removing, before it adds an entry, every entry that conflicts with it (an epoch
//! not below the new one, or a start offset not below the new one), as Kafka does.
//!
//! Owned by the shard that owns the partition, like the rest of the log.

use crate::types::{LeaderEpoch, Offset};

/// The requested epoch `OffsetForLeaderEpoch` answers as undefined (Kafka's `UNDEFINED_EPOCH`).
const UNDEFINED_EPOCH: LeaderEpoch = LeaderEpoch(-1);

/// One entry: `epoch` wrote its first record at `start_offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EpochEntry {
    pub epoch: LeaderEpoch,
    pub start_offset: Offset,
}

/// The leader-epoch cache of one partition (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeaderEpochCache {
    /// Ascending in epoch and in start offset (the module's invariant).
    entries: Vec<EpochEntry>,
}

impl LeaderEpochCache {
    /// An empty cache.
    pub fn new() -> LeaderEpochCache {
        LeaderEpochCache::default()
    }

    /// The entries, ascending.
    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    /// The newest entry.
    pub fn latest(&self) -> Option<EpochEntry> {
        self.entries.last().copied()
    }

    /// The oldest entry.
    pub fn earliest(&self) -> Option<EpochEntry> {
        self.entries.first().copied()
    }

    /// The newest epoch that wrote to the log (or was assigned), if any.
    pub fn latest_epoch(&self) -> Option<LeaderEpoch> {
        self.latest().map(|e| e.epoch)
    }

    /// Records that `epoch` starts at `start_offset`, with Kafka's rules: nothing changes when
    /// `epoch` is the latest epoch and `start_offset` is not below its start (an epoch, once
    /// assigned, keeps its start offset); otherwise every entry whose epoch is ≥ `epoch` or
    /// whose start offset is ≥ `start_offset` is removed (they conflict with the new entry:
    /// the log was truncated below them, or a leader's entry wrote nothing), and the entry
    /// is added. So a newer epoch at a higher offset is appended; the same epoch at a lower
    /// offset replaces the latest; an older epoch drops the entries after it.
    /// Returns whether the cache changed (and so must be written).
    ///
    /// Panics if `epoch` or `start_offset` is negative (Kafka throws): callers hand over only
    /// checked values ([`crate::PartitionLog`] refuses or skips batches without an epoch).
    pub fn assign(&mut self, epoch: LeaderEpoch, start_offset: Offset) -> bool {
        assert!(epoch.0 >= 0, "leader epoch {} is negative", epoch.0);
        assert!(
            start_offset.0 >= 0,
            "start offset {start_offset} is negative"
        );
        let needed = self
            .latest()
            .is_none_or(|l| l.epoch != epoch || start_offset < l.start_offset);
        if !needed {
            return false;
        }
        while self
            .entries
            .last()
            .is_some_and(|l| l.epoch >= epoch || l.start_offset >= start_offset)
        {
            let removed = self.entries.pop();
            if let Some(r) = removed.filter(|r| r.start_offset != start_offset) {
                // Kafka warns only on removals that lose data's epoch (not the expected case
                // of an entry at the same offset, which wrote nothing).
                tracing::warn!(
                    epoch = epoch.0,
                    %start_offset,
                    removed_epoch = r.epoch.0,
                    removed_start = %r.start_offset,
                    "new leader epoch entry removes a conflicting one"
                );
            }
        }
        self.entries.push(EpochEntry {
            epoch,
            start_offset,
        });
        self.check_invariant();
        true
    }

    /// The epoch and end offset answering `OffsetForLeaderEpoch` for `requested`, as Kafka's
    /// `endOffsetFor`; `None` is Kafka's `(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)`:
    /// - `requested` is the latest epoch: `(latest, log_end_offset)` (the current epoch runs
    ///   up to the log end);
    /// - `requested` is -1 (Kafka's `UNDEFINED_EPOCH`), the cache is empty, or `requested`
    ///   is above every epoch: `None`;
    /// - `requested` is below the earliest epoch (another negative value too, as in Kafka):
    ///   `(requested, earliest start offset)` —
    ///   Kafka's answer: the data of older epochs is gone, so a follower is sent to where the
    ///   log's known epochs begin;
    /// - otherwise `(the largest epoch ≤ requested, the start offset of the next epoch)`.
    pub fn end_offset_for(
        &self,
        requested: LeaderEpoch,
        log_end_offset: Offset,
    ) -> Option<(LeaderEpoch, Offset)> {
        if requested == UNDEFINED_EPOCH {
            return None;
        }
        if self.latest_epoch() == Some(requested) {
            return Some((requested, log_end_offset));
        }
        // The first entry with an epoch above the requested one.
        let higher = self.entries.partition_point(|e| e.epoch <= requested);
        let next = self.entries.get(higher)?;
        match higher.checked_sub(1).and_then(|i| self.entries.get(i)) {
            Some(floor) => Some((floor.epoch, next.start_offset)),
            None => Some((requested, next.start_offset)),
        }
    }

    /// The epoch of the record at `offset`: that of the last entry starting at or before it.
    pub fn epoch_for_offset(&self, offset: Offset) -> Option<LeaderEpoch> {
        let at = self.entries.partition_point(|e| e.start_offset <= offset);
        at.checked_sub(1).map(|i| self.entries[i].epoch)
    }

    /// Removes every entry starting at or after `end_offset` (a log truncated to end there),
    /// as Kafka's `truncateFromEnd`. A negative `end_offset` changes nothing. Returns whether
    /// the cache changed.
    pub fn truncate_from_end(&mut self, end_offset: Offset) -> bool {
        if end_offset.0 < 0 {
            return false;
        }
        let keep = self
            .entries
            .partition_point(|e| e.start_offset < end_offset);
        let changed = keep < self.entries.len();
        self.entries.truncate(keep);
        changed
    }

    /// Removes the entries of epochs that end at or before `start_offset` (the log start moved
    /// there), as Kafka's `truncateFromStart`: every entry starting at or before `start_offset`
    /// goes, and the last of them comes back starting at `start_offset` (so an entry starting
    /// exactly at `start_offset` stays). Returns whether the cache changed.
    pub fn truncate_from_start(&mut self, start_offset: Offset) -> bool {
        let removed = self
            .entries
            .partition_point(|e| e.start_offset <= start_offset);
        if removed == 0 {
            return false;
        }
        let last_removed = self.entries[removed - 1];
        self.entries.drain(..removed - 1);
        self.entries[0] = EpochEntry {
            epoch: last_removed.epoch,
            start_offset,
        };
        self.check_invariant();
        // Kafka reports a change whenever an entry was removed, even one rewritten unchanged.
        true
    }

    /// The checkpoint file's values: the entry count, then epoch and start offset of each entry.
    pub(crate) fn encode(&self) -> Vec<i64> {
        let mut values = Vec::with_capacity(1 + 2 * self.entries.len());
        values.push(i64::try_from(self.entries.len()).unwrap_or(i64::MAX));
        for e in &self.entries {
            values.push(i64::from(e.epoch.0));
            values.push(e.start_offset.0);
        }
        values
    }

    /// Parses [`LeaderEpochCache::encode`]'s values; `None` unless the count matches and the
    /// entries are non-negative and strictly ascending in both epoch and start offset.
    pub(crate) fn decode(values: &[i64]) -> Option<LeaderEpochCache> {
        let (count, pairs) = values.split_first()?;
        if usize::try_from(*count).ok()? != pairs.len() / 2 || pairs.len() % 2 != 0 {
            return None;
        }
        let mut entries = Vec::with_capacity(pairs.len() / 2);
        for pair in pairs.chunks_exact(2) {
            let epoch = LeaderEpoch(i32::try_from(pair[0]).ok()?);
            let start_offset = Offset(pair[1]);
            if epoch.0 < 0 || start_offset.0 < 0 {
                return None;
            }
            if let Some(prev) = entries.last().copied() {
                let EpochEntry {
                    epoch: prev_epoch,
                    start_offset: prev_start,
                } = prev;
                if epoch <= prev_epoch || start_offset <= prev_start {
                    return None;
                }
            }
            entries.push(EpochEntry {
                epoch,
                start_offset,
            });
        }
        Some(LeaderEpochCache { entries })
    }

    fn check_invariant(&self) {
        debug_assert!(
            self.entries
                .windows(2)
                .all(|w| w[0].epoch < w[1].epoch && w[0].start_offset < w[1].start_offset),
            "epoch entries ascend in both epoch and start offset: {:?}",
            self.entries
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cache(entries: &[(i32, i64)]) -> LeaderEpochCache {
        let mut c = LeaderEpochCache::new();
        for &(e, o) in entries {
            c.assign(LeaderEpoch(e), Offset(o));
        }
        c
    }

    fn pairs(c: &LeaderEpochCache) -> Vec<(i32, i64)> {
        c.entries()
            .iter()
            .map(|e| (e.epoch.0, e.start_offset.0))
            .collect()
    }

    fn end(c: &LeaderEpochCache, requested: i32, leo: i64) -> Option<(i32, i64)> {
        c.end_offset_for(LeaderEpoch(requested), Offset(leo))
            .map(|(e, o)| (e.0, o.0))
    }

    // The cases below are those of Kafka's LeaderEpochFileCacheTest, restated.

    #[test]
    fn latest_epoch_requested_answers_the_log_end() {
        let c = cache(&[(2, 10)]);
        assert_eq!(c.latest_epoch(), Some(LeaderEpoch(2)));
        assert_eq!(end(&c, 2, 11), Some((2, 11)));
        let c = cache(&[(2, 11), (2, 12)]);
        assert_eq!(end(&c, 2, 14), Some((2, 14)));
    }

    #[test]
    fn undefined_empty_and_unknown_newer_epochs_answer_undefined() {
        let c = cache(&[(2, 11), (3, 12)]);
        assert_eq!(end(&c, -1, 0), None);
        assert_eq!(end(&LeaderEpochCache::new(), 0, 0), None);
        assert_eq!(end(&cache(&[(2, 100)]), 3, 100), None);
    }

    #[test]
    fn an_assigned_epoch_keeps_its_start_offset() {
        let mut c = cache(&[(2, 9)]);
        assert!(!c.assign(LeaderEpoch(2), Offset(10)));
        assert_eq!(pairs(&c), [(2, 9)]);
        let mut c = cache(&[(2, 6)]);
        assert!(!c.assign(LeaderEpoch(2), Offset(7)));
        assert_eq!(pairs(&c), [(2, 6)]);
    }

    #[test]
    fn a_newer_epoch_at_the_same_offset_replaces_the_entry() {
        assert_eq!(pairs(&cache(&[(2, 9), (3, 9)])), [(3, 9)]);
    }

    #[test]
    fn requested_below_the_earliest_epoch_answers_the_earliest_start() {
        let c = cache(&[(5, 11), (6, 12), (7, 13)]);
        assert_eq!(end(&c, 4, 0), Some((4, 11)));
        // Only -1 is undefined: another negative epoch is below the earliest one.
        assert_eq!(end(&c, -5, 0), Some((-5, 11)));
    }

    #[test]
    fn the_latest_epoch_at_an_earlier_offset_truncates_what_follows() {
        let c = cache(&[(5, 11), (6, 12), (7, 13), (7, 12)]);
        assert_eq!(pairs(&c), [(5, 11), (7, 12)]);
        assert_eq!(end(&c, 5, 0), Some((5, 12)));
        assert_eq!(end(&c, 6, 0), Some((5, 12)));
    }

    #[test]
    fn a_previous_epoch_ends_where_the_next_starts() {
        let c = cache(&[(1, 11), (1, 12), (2, 13), (2, 14), (3, 15), (3, 16)]);
        assert_eq!(end(&c, 2, 17), Some((2, 15)));
        let c = cache(&[(0, 10), (2, 13), (4, 17)]);
        assert_eq!(end(&c, 1, 0), Some((0, 13)));
        assert_eq!(end(&c, 2, 0), Some((2, 17)));
        assert_eq!(end(&c, 3, 0), Some((2, 17)));
    }

    #[test]
    fn an_older_epoch_drops_the_newer_entries() {
        let mut c = cache(&[(1, 5), (2, 6)]);
        assert!(c.assign(LeaderEpoch(1), Offset(7)));
        assert_eq!(c.latest_epoch(), Some(LeaderEpoch(1)));
        assert_eq!(end(&c, 1, 8), Some((1, 8)));
        assert_eq!(end(&c, 2, 8), None);
        assert_eq!(pairs(&c), [(1, 7)]);
    }

    #[test]
    fn an_offset_going_backwards_drops_the_conflicting_entry() {
        assert_eq!(pairs(&cache(&[(2, 6), (3, 5)])), [(3, 5)]);
    }

    #[test]
    fn epochs_change_many_times() {
        let mut c = cache(&[(0, 0), (1, 0)]);
        assert_eq!(c.latest_epoch(), Some(LeaderEpoch(1)));
        assert_eq!(end(&c, 1, 0), Some((1, 0)));
        assert_eq!(end(&c, 0, 0), Some((0, 0)));
        assert_eq!(end(&c, 1, 5), Some((1, 5)));
        c.assign(LeaderEpoch(2), Offset(5));
        assert_eq!(end(&c, 2, 10), Some((2, 10)));
        assert_eq!(end(&c, 1, 10), Some((1, 5)));
        assert_eq!(end(&c, 0, 10), Some((0, 0)));
    }

    #[test]
    fn truncate_from_end_removes_entries_starting_at_or_after() {
        let base = cache(&[(2, 6), (3, 8), (4, 11)]);
        let mut c = base.clone();
        assert!(c.truncate_from_end(Offset(8)));
        assert_eq!(pairs(&c), [(2, 6)]);
        let mut c = base.clone();
        assert!(c.truncate_from_end(Offset(9)));
        assert_eq!(pairs(&c), [(2, 6), (3, 8)]);
        let mut c = base.clone();
        assert!(!c.truncate_from_end(Offset(12)));
        assert!(!c.truncate_from_end(Offset(-1)));
        assert_eq!(c, base);
        let mut c = base.clone();
        assert!(c.truncate_from_end(Offset(0)));
        assert!(c.entries().is_empty());
        assert_eq!(end(&c, 7, 0), None);
    }

    #[test]
    fn truncate_from_start_moves_the_first_entry() {
        let base = cache(&[(2, 6), (3, 8), (4, 11)]);
        let mut c = base.clone();
        assert!(c.truncate_from_start(Offset(8)));
        assert_eq!(pairs(&c), [(3, 8), (4, 11)]);
        let mut c = base.clone();
        assert!(c.truncate_from_start(Offset(9)));
        assert_eq!(pairs(&c), [(3, 9), (4, 11)]);
        let mut c = base.clone();
        assert!(!c.truncate_from_start(Offset(5)));
        assert_eq!(c, base);
        let mut c = base.clone();
        assert!(c.truncate_from_start(Offset(6)));
        assert_eq!(c, base);
        let mut c = base.clone();
        assert!(c.truncate_from_start(Offset(11)));
        assert_eq!(pairs(&c), [(4, 11)]);
        let mut c = base;
        assert!(c.truncate_from_start(Offset(15)));
        assert_eq!(pairs(&c), [(4, 15)]);
    }

    #[test]
    fn epoch_for_offset_finds_the_covering_entry() {
        let c = cache(&[(1, 10), (2, 20), (5, 30)]);
        assert_eq!(c.epoch_for_offset(Offset(5)), None);
        assert_eq!(c.epoch_for_offset(Offset(20)), Some(LeaderEpoch(2)));
        assert_eq!(c.epoch_for_offset(Offset(25)), Some(LeaderEpoch(2)));
        assert_eq!(c.epoch_for_offset(Offset(50)), Some(LeaderEpoch(5)));
    }

    #[test]
    fn encode_decode_round_trip_and_refusals() {
        let c = cache(&[(0, 0), (3, 7), (9, 100)]);
        assert_eq!(c.encode(), vec![3, 0, 0, 3, 7, 9, 100]);
        assert_eq!(LeaderEpochCache::decode(&c.encode()), Some(c));
        assert_eq!(
            LeaderEpochCache::decode(&[0]),
            Some(LeaderEpochCache::new())
        );
        assert_eq!(LeaderEpochCache::decode(&[]), None);
        assert_eq!(LeaderEpochCache::decode(&[2, 0, 0]), None);
        assert_eq!(LeaderEpochCache::decode(&[1, 0, 0, 5]), None);
        assert_eq!(LeaderEpochCache::decode(&[2, 3, 0, 3, 5]), None);
        assert_eq!(LeaderEpochCache::decode(&[2, 3, 5, 4, 5]), None);
        assert_eq!(LeaderEpochCache::decode(&[1, -1, 0]), None);
        assert_eq!(LeaderEpochCache::decode(&[1, 1 << 40, 0]), None);
    }

    /// The model: Kafka's TreeMap<epoch, startOffset> with its operations written the
    /// plainest way.
    #[derive(Default)]
    struct Model(std::collections::BTreeMap<i32, i64>);

    impl Model {
        fn assign(&mut self, epoch: i32, start: i64) {
            if let Some((&le, &ls)) = self.0.last_key_value() {
                if le == epoch && start >= ls {
                    return;
                }
            }
            self.0.retain(|&e, &mut s| e < epoch && s < start);
            self.0.insert(epoch, start);
        }
        fn end_offset_for(&self, requested: i32, leo: i64) -> Option<(i32, i64)> {
            if requested == -1 {
                return None;
            }
            if self.0.last_key_value().map(|(e, _)| *e) == Some(requested) {
                return Some((requested, leo));
            }
            let (_, &higher_start) = self.0.range(requested + 1..).next()?;
            match self.0.range(..=requested).next_back() {
                Some((&floor, _)) => Some((floor, higher_start)),
                None => Some((requested, higher_start)),
            }
        }
        fn truncate_from_end(&mut self, end: i64) {
            if end >= 0 {
                self.0.retain(|_, s| *s < end);
            }
        }
        fn truncate_from_start(&mut self, start: i64) {
            let removed: Vec<i32> = self
                .0
                .iter()
                .filter(|(_, s)| **s <= start)
                .map(|(e, _)| *e)
                .collect();
            if let Some(&last) = removed.last() {
                for e in &removed {
                    self.0.remove(e);
                }
                self.0.insert(last, start);
            }
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        Assign(i32, i64),
        TruncateEnd(i64),
        TruncateStart(i64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0..12i32, 0..60i64).prop_map(|(e, o)| Op::Assign(e, o)),
            1 => (-1..60i64).prop_map(Op::TruncateEnd),
            1 => (0..60i64).prop_map(Op::TruncateStart),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn cache_matches_model(ops in proptest::collection::vec(op(), 1..40), leo in 0..80i64) {
            let mut c = LeaderEpochCache::new();
            let mut m = Model::default();
            for op in &ops {
                match *op {
                    Op::Assign(e, o) => { c.assign(LeaderEpoch(e), Offset(o)); m.assign(e, o); }
                    Op::TruncateEnd(o) => { c.truncate_from_end(Offset(o)); m.truncate_from_end(o); }
                    Op::TruncateStart(o) => { c.truncate_from_start(Offset(o)); m.truncate_from_start(o); }
                }
                let got: Vec<(i32, i64)> = pairs(&c);
                let want: Vec<(i32, i64)> = m.0.iter().map(|(e, s)| (*e, *s)).collect();
                prop_assert_eq!(&got, &want, "after {:?}", op);
                prop_assert!(got.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1));
                for requested in -3..14 {
                    prop_assert_eq!(end(&c, requested, leo), m.end_offset_for(requested, leo));
                }
                prop_assert_eq!(LeaderEpochCache::decode(&c.encode()), Some(c.clone()));
            }
        }
    }
}
