//! The group coordinator (DESIGN.md §2): consumer groups and their committed offsets.
//!
//! A group lives on the shard that owns its partition of the internal `__consumer_offsets`
//! topic — partition `abs(javaHashCode(group_id)) % partitions`, as Kafka places it — so every
//! group operation is a typed [`GroupOp`] run there ([`service::call`]). Commits and
//! membership changes are ordinary appends to that partition's log ([`offsets_log`] holds
//! Kafka's record formats), `acks=all` and flushed before they are acknowledged. The
//! coordinator of a partition's groups moves with the partition's leadership: the new leader
//! replays its replica of the log before it serves them ([`coordinator`]), so committed
//! offsets survive restarts and the loss of the coordinator's broker.
//!
//! The ops, the load and the deadline check are `engine`'s, over a host trait
//! (`engine::GroupsHost`): the shard in production ([`service`]), the deterministic
//! simulation in `coordinator_sim_tests`.

pub mod coordinator;
#[cfg(test)]
mod coordinator_sim_tests;
mod engine;
pub mod error;
pub mod expiry;
pub mod group;
pub mod offsets_log;
pub mod ops;
mod placement;
pub mod service;
pub mod txn_offsets;

use std::time::Duration;

pub use coordinator::GroupCoordinator;
pub use error::GroupError;
pub use ops::{CommittedStatus, GroupOp, GroupReply, ListedGroup, OffsetCommitEntry, TxnProducer};
pub use placement::partition_for;

/// The internal topic holding committed offsets and group metadata (Kafka's name).
pub const OFFSETS_TOPIC: &str = replication::metadata::CONSUMER_OFFSETS_TOPIC;

/// Largest committed-offset metadata string, bytes (Kafka `offset.metadata.max.bytes`).
pub const OFFSET_METADATA_MAX_BYTES: usize = 4096;

/// Preallocation step of `__consumer_offsets` segments, bytes: its records are small and it
/// has many partitions, so it does not take the data topics' 64 MiB steps.
pub const OFFSETS_PREALLOCATE_STEP_BYTES: u64 = 1 << 20;

/// How often deadlines (sessions, rebalance and initial-delay timeouts) are checked: the
/// resolution of Kafka's timing wheel for these, which are seconds long.
pub(crate) const DEADLINE_CHECK_INTERVAL: Duration = Duration::from_millis(100);

/// Longest wait for an offsets append to be written (Kafka's `offsets.commit.timeout.ms`
/// default); past it the commit fails with `COORDINATOR_NOT_AVAILABLE`.
pub(crate) const OFFSET_COMMIT_TIMEOUT: Duration = Duration::from_secs(5);
