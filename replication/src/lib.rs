//! Leader/follower log replication and the controller's metadata state machine.
//!
//! - the partition (log, replica set, ISR, leader epoch, high watermark and its waiters), and
//!   [`LeaderIsr`], the leader's pure ISR state machine (follower fetch state, maximal ISR,
//!   high watermark, AlterPartition proposals, `acks=all` checks);
//! - `metadata`: the cluster metadata image, its KRaft-shaped records, the pure `apply`, the
//!   proposer (topics, configs, the broker lifecycle, replica placement), the controller's
//!   broker heartbeat tracker, and the record log + snapshot that persist it;
//! - `raft`: the controller quorum on raft-rs, which replicates opaque entries among the
//!   voters and applies the committed ones to a state machine;
//! - `runtime`: the seam both reach time, timers, tasks and peers through, and `sim`, the
//!   deterministic simulation that drives them in tests (compiled only for this crate's tests
//!   and with the `sim` feature, which dependents enable from their dev-dependencies).
//!
//! Depends on `storage` only; the broker implements the seam on glommio.

pub mod metadata;
mod partition;
pub mod raft;
pub mod runtime;
#[cfg(any(test, feature = "sim"))]
pub mod sim;

pub use partition::{
    check_current_leader_epoch, check_follower_broker_epoch, fetch_requested_leader_epoch,
    list_offsets_leader_epoch, requested_leader_epoch, AckState, Acks, AlterOutcome,
    AlterPartitionProposal, AlterRefusal, Appended, FetchOutcome, FollowerState, Isolation,
    IsrConfig, IsrError, LeaderEpochError, LeaderIsr, Leadership, ListedOffset, OffsetNotAvailable,
    OffsetSpec, Partition, PartitionError, PartitionStore, Read, ReplicaRead, WaitOutcome,
    NO_LEADER_EPOCH, REPLICA_LAG_TIME_MAX_MS_DEFAULT,
};
