//! The controller quorum: a KRaft-style metadata log replicated over raft-rs (tikv `raft`
//! 0.7, DESIGN.md §9) among the nodes of `controller.quorum.voters`.
//!
//! - [`QuorumNode`] drives one voter's `RawNode` as one task on the runtime seam (timer
//!   ticks, messages from the [`crate::runtime::Transport`], durable `Ready` handling,
//!   proposals with a bounded queue and a completion each);
//! - [`RaftStorage`] is its durable state (entries, hard state, conf state, snapshot):
//!   [`FileRaftStorage`] keeps it as a CRC-checked record file in a [`DurableDir`], and the
//!   simulation has [`SimRaftDisk`] (the state itself) and [`SimDir`] (a directory with torn
//!   writes);
//! - [`codec`] frames the messages between voters (versioned, CRC-32C) and accepts them only
//!   from configured voters;
//! - the entries are opaque bytes: a [`StateMachine`] (the metadata image, later) applies
//!   the committed ones and snapshots itself for log compaction.
//!
//! Owned by one shard (the driver and its handles are `!Send`). Limits: a fixed voter set,
//! proposals on the leader only; see [`node`] for the driver's invariants.

pub mod codec;
mod file_storage;
mod node;
mod sim_storage;
#[cfg(test)]
pub(crate) mod sim_test;
mod storage;

use crate::runtime::NodeId;
use bytes::Bytes;

pub use file_storage::{replay, DurableDir, FileRaftStorage, LOG_FILE, RECORD_BYTES_MAX};
pub use node::{
    Committed, Proposal, ProposeError, QuorumConfig, QuorumNode, QuorumStatus, Role, StartError,
    StopReason, APPENDS_IN_FLIGHT_MAX, APPEND_BYTES_MAX, MESSAGES_PER_TURN_MAX,
    UNCOMMITTED_BYTES_MAX,
};
pub use sim_storage::{CrashSwitch, SimDir, SimDirDisk, SimRaftDisk, SimRaftStorage};
pub use storage::{check_recovered, LogCache, Persist, RaftStorage, RaftStorageError, Recovered};

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
    /// (at most [`codec::SNAPSHOT_BYTES_MAX`]).
    fn snapshot(&self) -> Bytes;
    /// Replaces the state by `snapshot`, the state after the entry at `index` (read from
    /// this node's storage, or received from the leader). Errors: `RestoreError`; the node
    /// stops.
    fn restore(&mut self, index: RaftIndex, snapshot: Bytes) -> Result<(), Self::RestoreError>;
    /// The leader of `term` as this node now knows it (`None`: no leader known), called at
    /// every change of either; `leader` is this node when it became the active controller.
    fn leader_changed(&mut self, leader: Option<NodeId>, term: RaftTerm);
}
