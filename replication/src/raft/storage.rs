//! Durable Raft state behind [`RaftStorage`], and [`LogCache`], the in-memory copy raft-rs
//! reads through its `Storage` trait.
//!
//! Durability contract (Raft's own requirement, DESIGN.md §9): a [`RaftStorage`] call
//! resolves `Ok` only once what it was given survives a crash (fsynced). The driver sends a
//! vote or an append response only after the [`RaftStorage::persist`] that covers it resolved,
//! and updates the [`LogCache`] only then, so raft-rs never reads an entry that a crash could
//! still lose.
//!
//! Invariants of the cache (and of what a storage recovers), cited at the asserts:
//! 1. entries are contiguous and start right after the snapshot's index;
//! 2. the hard state's commit index is at most the last entry's index (or the snapshot's).

use bytes::Bytes;
use raft::eraftpb::{ConfState, Entry, HardState, Snapshot};
use raft::{GetEntriesContext, RaftState};
use std::cell::RefCell;
use std::rc::Rc;

/// What a [`RaftStorage`] holds after a start or a crash.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Recovered {
    /// Term, vote and commit index.
    pub hard_state: HardState,
    /// The voters (empty: a fresh store, never bootstrapped).
    pub conf_state: ConfState,
    /// The latest snapshot (index 0: none), with the state machine's bytes.
    pub snapshot: Snapshot,
    /// The entries after the snapshot, contiguous.
    pub entries: Vec<Entry>,
}

/// One durable step of the driver, applied in this order: `snapshot` replaces the whole log
/// (a snapshot received from the leader), `entries` replace every stored entry from the
/// first one's index on, then `hard_state` and `conf_state` are overwritten when given.
#[derive(Clone, Copy, Debug, Default)]
pub struct Persist<'a> {
    /// A snapshot from the leader: the log is replaced by it.
    pub snapshot: Option<&'a Snapshot>,
    /// New entries (possibly overwriting a conflicting suffix).
    pub entries: &'a [Entry],
    /// The new hard state.
    pub hard_state: Option<&'a HardState>,
    /// The voters, written once when a fresh store is bootstrapped.
    pub conf_state: Option<&'a ConfState>,
}

/// Why a storage call failed; the node stops on any of them.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum RaftStorageError {
    /// The process holding the storage crashed (simulation) or it was closed.
    #[error("the Raft storage was closed (crashed)")]
    Closed,
    /// What was read back is not a valid Raft state.
    #[error("the Raft storage is corrupt: {reason}")]
    Corrupt { reason: String },
    /// The device failed (`operation` names the call).
    #[error("Raft storage I/O failed in {operation}: {reason}")]
    Io {
        operation: &'static str,
        reason: String,
    },
}

/// Durable Raft state: entries, hard state, conf state and the latest snapshot. Every call
/// resolves `Ok` only once its effect survives a crash.
#[allow(async_fn_in_trait)] // Used generically on one thread: the futures need not be `Send`.
pub trait RaftStorage {
    /// Reads back what survived. Errors: [`RaftStorageError`].
    async fn recover(&mut self) -> Result<Recovered, RaftStorageError>;
    /// Makes `step` durable (see [`Persist`] for the order). Errors: [`RaftStorageError`]; on
    /// an error nothing of `step` may be relied on.
    async fn persist(&mut self, step: Persist<'_>) -> Result<(), RaftStorageError>;
    /// Stores `snapshot` (taken from this node's state machine at an applied index) and drops
    /// every entry up to its index; entries after it stay. The stored configuration becomes
    /// the snapshot's (configuration entries after it are re-applied at a restart). Errors:
    /// [`RaftStorageError`].
    async fn compact(&mut self, snapshot: &Snapshot) -> Result<(), RaftStorageError>;
}

/// Checks invariants 1 and 2 on a recovered state. Errors: [`RaftStorageError::Corrupt`].
pub fn check_recovered(state: &Recovered) -> Result<(), RaftStorageError> {
    let corrupt = |reason: String| Err(RaftStorageError::Corrupt { reason });
    let snapshot_index = state.snapshot.get_metadata().index;
    let mut expect = snapshot_index + 1;
    for entry in &state.entries {
        if entry.index != expect {
            return corrupt(format!(
                "entry {} where {expect} was expected (snapshot at {snapshot_index})",
                entry.index
            ));
        }
        expect += 1;
    }
    let last = expect - 1;
    if state.hard_state.commit > last {
        return corrupt(format!(
            "commit index {} beyond the last entry {last}",
            state.hard_state.commit
        ));
    }
    Ok(())
}

#[derive(Default)]
struct CacheState {
    hard_state: HardState,
    conf_state: ConfState,
    snapshot: Snapshot,
    /// Invariant 1: `entries[i].index == snapshot index + 1 + i`.
    entries: Vec<Entry>,
    /// Set when raft-rs asked for a snapshot for a node `snapshot` does not name.
    snapshot_wanted: bool,
}

impl CacheState {
    fn snapshot_index(&self) -> u64 {
        self.snapshot.get_metadata().index
    }
    fn first_index(&self) -> u64 {
        self.snapshot_index() + 1
    }
    fn last_index(&self) -> u64 {
        self.snapshot_index() + self.entries.len() as u64
    }
    fn position(&self, index: u64) -> Option<usize> {
        index
            .checked_sub(self.first_index())
            .and_then(|p| usize::try_from(p).ok())
            .filter(|p| *p < self.entries.len())
    }
}

/// The in-memory copy of the durable state that raft-rs reads (cheap to clone: a handle).
/// The driver changes it only after the matching [`RaftStorage`] call resolved.
#[derive(Clone, Default)]
pub struct LogCache {
    state: Rc<RefCell<CacheState>>,
}

impl LogCache {
    /// A cache holding `recovered` (checked with [`check_recovered`] first).
    pub fn new(recovered: Recovered) -> LogCache {
        let cache = LogCache::default();
        {
            let mut st = cache.state.borrow_mut();
            st.hard_state = recovered.hard_state;
            st.conf_state = recovered.conf_state;
            st.snapshot = recovered.snapshot;
            st.entries = recovered.entries;
        }
        cache
    }

    /// Mirrors a [`RaftStorage::persist`] that resolved.
    pub fn persisted(&self, step: Persist<'_>) {
        let mut st = self.state.borrow_mut();
        if let Some(snapshot) = step.snapshot {
            st.snapshot = snapshot.clone();
            st.entries.clear();
            st.conf_state = snapshot.get_metadata().get_conf_state().clone();
        }
        if let Some(first) = step.entries.first() {
            // Invariant 1: raft-rs appends right after, or overwrites inside, the log.
            assert!(
                first.index > st.snapshot_index(),
                "append below the snapshot"
            );
            assert!(first.index <= st.last_index() + 1, "append leaves a gap");
            let keep = usize::try_from(first.index - st.first_index()).unwrap_or(usize::MAX);
            st.entries.truncate(keep);
            st.entries.extend_from_slice(step.entries);
        }
        if let Some(hard_state) = step.hard_state {
            st.hard_state = hard_state.clone();
        }
        if let Some(conf_state) = step.conf_state {
            st.conf_state = conf_state.clone();
        }
    }

    /// Records a commit index raft-rs reported after an advance (kept in memory; the next
    /// [`RaftStorage::persist`] with a hard state makes it durable, and a lost commit index
    /// is learned again from the leader).
    pub fn set_commit(&self, commit: u64) {
        self.state.borrow_mut().hard_state.commit = commit;
    }

    /// Mirrors a [`RaftStorage::compact`] that resolved.
    pub fn compacted(&self, snapshot: &Snapshot) {
        let mut st = self.state.borrow_mut();
        let index = snapshot.get_metadata().index;
        assert!(index >= st.snapshot_index(), "a compaction moves forward");
        assert!(index <= st.last_index(), "a compaction within the log");
        let compacted = usize::try_from(index - st.snapshot_index())
            .unwrap_or(usize::MAX)
            .min(st.entries.len());
        st.entries.drain(..compacted);
        st.snapshot = snapshot.clone();
    }

    /// The latest snapshot's index (0: none yet).
    pub fn snapshot_index(&self) -> u64 {
        self.state.borrow().snapshot_index()
    }

    /// The term of the entry at `index` (or of the snapshot at it); `None` when compacted away
    /// or not in the log.
    pub fn term_of(&self, index: u64) -> Option<u64> {
        let st = self.state.borrow();
        if index == st.snapshot_index() {
            return Some(st.snapshot.get_metadata().term);
        }
        st.position(index).map(|p| st.entries[p].term)
    }

    /// Records the configuration an applied configuration entry put in force (kept in
    /// memory: the next snapshot makes it durable, and a restart re-applies the entries after
    /// the last one).
    pub fn set_conf_state(&self, conf_state: ConfState) {
        self.state.borrow_mut().conf_state = conf_state;
    }

    /// Whether raft-rs asked for a snapshot for a node the latest one does not name (a node
    /// added since it was taken, which would refuse it) since the last call; the driver then
    /// takes a new one.
    pub fn take_snapshot_wanted(&self) -> bool {
        std::mem::take(&mut self.state.borrow_mut().snapshot_wanted)
    }

    /// The conf state now in force.
    pub fn conf_state(&self) -> ConfState {
        self.state.borrow().conf_state.clone()
    }

    /// The snapshot's state-machine bytes.
    pub fn snapshot_data(&self) -> Bytes {
        self.state.borrow().snapshot.data.clone()
    }
}

impl raft::Storage for LogCache {
    fn initial_state(&self) -> raft::Result<RaftState> {
        let st = self.state.borrow();
        Ok(RaftState::new(st.hard_state.clone(), st.conf_state.clone()))
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        let st = self.state.borrow();
        if low < st.first_index() {
            return Err(raft::Error::Store(raft::StorageError::Compacted));
        }
        if high > st.last_index() + 1 || low > high {
            return Err(raft::Error::Store(raft::StorageError::Unavailable));
        }
        let lo = usize::try_from(low - st.first_index()).unwrap_or(usize::MAX);
        let hi = usize::try_from(high - st.first_index()).unwrap_or(usize::MAX);
        let mut entries = st
            .entries
            .get(lo..hi)
            .ok_or(raft::Error::Store(raft::StorageError::Unavailable))?
            .to_vec();
        raft::util::limit_size(&mut entries, max_size.into());
        Ok(entries)
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        let st = self.state.borrow();
        if idx == st.snapshot_index() {
            return Ok(st.snapshot.get_metadata().term);
        }
        if idx < st.first_index() {
            return Err(raft::Error::Store(raft::StorageError::Compacted));
        }
        st.position(idx)
            .map(|p| st.entries[p].term)
            .ok_or(raft::Error::Store(raft::StorageError::Unavailable))
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.state.borrow().first_index())
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.state.borrow().last_index())
    }

    fn snapshot(&self, request_index: u64, to: u64) -> raft::Result<raft::eraftpb::Snapshot> {
        let mut st = self.state.borrow_mut();
        let unavailable = Err(raft::Error::Store(
            raft::StorageError::SnapshotTemporarilyUnavailable,
        ));
        // Index 0: no snapshot was taken yet; raft-rs asks only once entries were compacted.
        if st.snapshot_index() == 0 || st.snapshot_index() < request_index {
            return unavailable;
        }
        let conf = st.snapshot.get_metadata().get_conf_state();
        if !conf.voters.contains(&to) && !conf.learners.contains(&to) {
            st.snapshot_wanted = true;
            return unavailable;
        }
        Ok(st.snapshot.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use raft::Storage as _;

    fn entry(index: u64, term: u64) -> Entry {
        Entry {
            index,
            term,
            data: Bytes::from(vec![1u8; 10]),
            ..Entry::default()
        }
    }

    fn snapshot(index: u64, term: u64) -> Snapshot {
        let mut s = Snapshot::default();
        s.mut_metadata().index = index;
        s.mut_metadata().term = term;
        s.mut_metadata().mut_conf_state().voters = vec![1, 2, 3];
        s.data = Bytes::from_static(b"state");
        s
    }

    #[test]
    fn appends_overwrite_a_suffix_and_compaction_keeps_the_tail() {
        let cache = LogCache::default();
        let first: Vec<Entry> = (1..=5).map(|i| entry(i, 1)).collect();
        cache.persisted(Persist {
            entries: &first,
            ..Persist::default()
        });
        let second = [entry(4, 2), entry(5, 2), entry(6, 2)];
        cache.persisted(Persist {
            entries: &second,
            ..Persist::default()
        });
        assert_eq!(cache.last_index().ok(), Some(6));
        assert_eq!(cache.term(3).ok(), Some(1));
        assert_eq!(cache.term(4).ok(), Some(2));
        cache.compacted(&snapshot(4, 2));
        assert_eq!(cache.first_index().ok(), Some(5));
        assert_eq!(cache.term(4).ok(), Some(2));
        assert_eq!(
            cache.term(3),
            Err(raft::Error::Store(raft::StorageError::Compacted))
        );
        let got = cache
            .entries(5, 7, None, GetEntriesContext::empty(false))
            .expect("in range");
        assert_eq!(got.iter().map(|e| e.index).collect::<Vec<_>>(), [5, 6]);
        assert!(cache
            .entries(5, 9, None, GetEntriesContext::empty(false))
            .is_err());
        assert_eq!(
            cache.snapshot(0, 2).map(|s| s.data).ok(),
            Some(Bytes::from_static(b"state"))
        );
        assert!(!cache.take_snapshot_wanted());
        // A node the snapshot does not name would refuse it: a newer one is asked for.
        assert_eq!(
            cache.snapshot(0, 4).map(|s| s.data),
            Err(raft::Error::Store(
                raft::StorageError::SnapshotTemporarilyUnavailable
            ))
        );
        assert!(cache.take_snapshot_wanted());
        assert!(!cache.take_snapshot_wanted());
    }

    #[test]
    fn a_received_snapshot_replaces_the_log() {
        let cache = LogCache::default();
        let first: Vec<Entry> = (1..=3).map(|i| entry(i, 1)).collect();
        cache.persisted(Persist {
            entries: &first,
            ..Persist::default()
        });
        cache.persisted(Persist {
            snapshot: Some(&snapshot(10, 3)),
            ..Persist::default()
        });
        assert_eq!(cache.first_index().ok(), Some(11));
        assert_eq!(cache.last_index().ok(), Some(10));
        assert_eq!(cache.term_of(10), Some(3));
    }

    #[test]
    fn recovery_checks_contiguity_and_commit() {
        let mut state = Recovered {
            entries: vec![entry(1, 1), entry(2, 1)],
            ..Recovered::default()
        };
        state.hard_state.commit = 2;
        assert_eq!(check_recovered(&state), Ok(()));
        state.hard_state.commit = 3;
        assert!(check_recovered(&state).is_err());
        state.hard_state.commit = 1;
        state.entries.push(entry(4, 1));
        assert!(check_recovered(&state).is_err());
    }
}
