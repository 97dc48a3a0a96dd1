//! The quorum's vocabulary: log positions, terms, and what it replicates into.

use super::membership::AppliedVoterChange;
use crate::runtime::NodeId;
use bytes::Bytes;

/// A position in the Raft log (1 is the first entry; 0: before any).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RaftIndex(pub u64);

/// A Raft term: each election starts a new one, and a term has at most one leader.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RaftTerm(pub u64);

/// What the quorum replicates into: applies committed entries in log order and snapshots
/// itself for log compaction (the metadata image implements it, as KRaft's listener).
pub trait StateMachine {
    /// Why [`StateMachine::restore`] refused a snapshot.
    type RestoreError: std::error::Error;
    /// Applies the committed, non-empty entry at `index`. Entries arrive in index order,
    /// each once per process incarnation, after the snapshot (if any) that covers the ones
    /// before.
    fn apply(&mut self, index: RaftIndex, entry: &[u8]);
    /// The state after the last applied entry, as bytes [`StateMachine::restore`] reads
    /// (at most [`super::codec::SNAPSHOT_BYTES_MAX`]).
    fn snapshot(&self) -> Bytes;
    /// Replaces the state by `snapshot`, the state after the entry at `index` (read from
    /// this node's storage, or received from the leader). Errors: `RestoreError`; the node
    /// stops.
    fn restore(&mut self, index: RaftIndex, snapshot: Bytes) -> Result<(), Self::RestoreError>;
    /// Applies the committed configuration entry at `index` (KIP-853: a voter added or
    /// removed), in log order with [`StateMachine::apply`]: record the endpoint of an added
    /// node so that snapshots carry it. The default ignores it.
    fn voters_changed(&mut self, index: RaftIndex, change: &AppliedVoterChange) {
        let _ = (index, change);
    }
    /// The leader of `term` as this node now knows it (`None`: no leader known), called at
    /// every change of either; `leader` is this node when it became the active controller.
    fn leader_changed(&mut self, leader: Option<NodeId>, term: RaftTerm);
}
