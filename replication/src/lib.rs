//! Leader/follower log replication: the partition (log, replica set, ISR, leader epoch, high
//! watermark and its waiters), the controller quorum on raft-rs ([`raft`]) and the runtime
//! seam they reach the world through, plus the deterministic simulation that drives them in
//! tests.
//!
//! Depends on `storage` only; the broker implements the seam on glommio.

mod partition;
pub mod raft;
pub mod runtime;
pub mod sim;

pub use partition::{
    Acks, Appended, Isolation, ListedOffset, OffsetSpec, Partition, PartitionError, PartitionStore,
    Read, WaitOutcome,
};
