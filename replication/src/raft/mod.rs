//! The controller quorum: a KRaft-style metadata log replicated over raft-rs (tikv `raft`
//! 0.7, DESIGN.md §9) among the nodes of `controller.quorum.voters`.
//!
//! - [`QuorumNode`] drives one voter's `RawNode` as one task on the runtime seam (timer
//!   ticks, messages from the [`crate::runtime::Transport`], durable `Ready` handling,
//!   proposals with a bounded queue and a completion each);
//! - [`RaftStorage`] is its durable state (entries, hard state, conf state, snapshot):
//!   [`FileRaftStorage`] keeps it as a CRC-checked record file in a [`DurableDir`], and the
//!   simulation (tests and the `sim` feature) has `SimRaftDisk` (the state itself) and
//!   `SimDir` (a directory with torn writes);
//! - [`codec`] frames the messages between quorum members (versioned, CRC-32C);
//! - `membership` carries out voter changes (KIP-853) as Raft single-server changes;
//! - the entries are opaque bytes: a [`StateMachine`] (the metadata image, later) applies
//!   the committed ones and snapshots itself for log compaction.
//!
//! Owned by one shard (the driver and its handles are `!Send`). Limits: one voter change at a
//! time, proposals on the leader only; see [`node`] for the driver's invariants.

pub mod codec;
mod file_storage;
mod membership;
mod node;
#[cfg(any(test, feature = "sim"))]
mod sim_storage;
#[cfg(test)]
pub(crate) mod sim_tests;
mod storage;
mod types;

pub use file_storage::{replay, DurableDir, FileRaftStorage, LOG_FILE, RECORD_BYTES_MAX};
pub use membership::{
    configuration_entry, sole_voter, AppliedVoterChange, ChangeKind, VoterChange,
};
pub use node::{
    Committed, Proposal, ProposeError, QuorumConfig, QuorumNode, QuorumStatus, Role, StartError,
    StopReason, VoterProgress, APPENDS_IN_FLIGHT_MAX, APPEND_BYTES_MAX, MESSAGES_PER_TURN_MAX,
    UNCOMMITTED_BYTES_MAX,
};
#[cfg(any(test, feature = "sim"))]
pub use sim_storage::{CrashSwitch, SimDir, SimDirDisk, SimRaftDisk, SimRaftStorage};
pub use storage::{check_recovered, LogCache, Persist, RaftStorage, RaftStorageError, Recovered};
pub use types::{RaftIndex, RaftTerm, StateMachine};
