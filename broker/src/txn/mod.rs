//! The transaction coordinator (KIP-98; Kafka's `TransactionCoordinator`,
//! `TransactionStateManager`, `TransactionMarkerChannelManager`), transaction versions 1 and
//! 2 (KIP-890).
//!
//! A transactional id lives on the shard that owns its partition of the internal
//! `__transaction_state` topic — `abs(javaHashCode(id)) % partitions`, as Kafka places it —
//! and every request about it is a typed [`TxnOp`] run there ([`service::call`]). Its state
//! is a pure state machine ([`state`]); each transition is written to that partition
//! ([`log`] holds Kafka's record format) with `acks=all` and flushed before it is applied and
//! answered. The coordinator of a partition's ids moves with the partition's leadership,
//! through the runtime it shares with the group coordinator (`crate::coordinator_runtime`):
//! the new leader replays the log before it serves them (`COORDINATOR_LOAD_IN_PROGRESS`
//! meanwhile), and resumes the markers of every transaction it finds prepared.
//!
//! EndTxn writes PrepareCommit or PrepareAbort and answers; the markers are then written to
//! every partition of the transaction by its leader ([`markers`]: WriteTxnMarkers, on this
//! broker directly, to others over their Kafka listener), retried until each has one, and
//! the transaction is written CompleteCommit or CompleteAbort; an AddPartitionsToTxn that
//! arrives meanwhile is held until then (at most [`ADD_PARTITIONS_HOLD`]) instead of being
//! answered CONCURRENT_TRANSACTIONS at once, as Kafka does. Open transactions older than
//! their timeout are aborted with an epoch bump, and ids idle past
//! `transactional.id.expiration.ms` are removed ([`service::timeout_loop`]).
//!
//! DescribeTransactions and ListTransactions read the same state (`service::list_all` asks
//! every shard).
//!
//! `sim_tests` runs the state machine, the log's records, the marker retry rule and the
//! partitions' producer state under the deterministic simulation (`replication::sim`).
//!
//! KIP-890 part 1: a partition leader's question before a transaction's first batch there
//! ([`verification`]: in-process when this broker coordinates the id, else AddPartitionsToTxn
//! v5 `verify_only`, batched per coordinator node).
//!
//! KIP-890 part 2, transaction version 2 (`transaction.version` 2, finalized on a new
//! cluster as Kafka 4.4 does): which rules apply is the request's version — EndTxn v5 bumps
//! the producer epoch at every end and answers it ([`state`]), Produce v12 and TxnOffsetCommit
//! v5 make the leader add the partition to the transaction (the same question with
//! `verify_only` false). The transactions the coordinator ends itself (fences, timeouts)
//! follow the cluster's finalized level. Kafka 4.4 advertises the same API versions at every
//! level; a client picks the requests of the finalized one.

mod coordinator;
pub mod log;
mod markers;
pub mod ops;
pub mod service;
#[cfg(test)]
mod sim_tests;
pub mod state;
mod store;
pub mod verification;
mod verify_queue;

use std::time::Duration;

pub use coordinator::{TxnConfig, TxnCoordinator};
pub use ops::{TxnOp, TxnReply};
pub use state::TxnError;

/// The internal topic holding transaction state (Kafka's name).
pub const TXN_TOPIC: &str = "__transaction_state";

/// Preallocation step of `__transaction_state` segments, bytes (small records, many
/// partitions, as `__consumer_offsets`).
pub const TXN_PREALLOCATE_STEP_BYTES: u64 = 1 << 20;

/// How long a write of the transaction log may wait for the ISR (Kafka's
/// `request.timeout.ms` default, which `TransactionStateManager` appends with).
pub(crate) const TXN_WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest an AddPartitionsToTxn waits for the producer's previous transaction to
/// complete before it is answered CONCURRENT_TRANSACTIONS (below the clients' 20 ms backoff).
pub(crate) const ADD_PARTITIONS_HOLD: Duration = Duration::from_millis(10);
/// The most AddPartitionsToTxn requests one shard holds at once ([`ADD_PARTITIONS_HOLD`]).
pub(crate) const ADD_PARTITIONS_HELD_MAX: usize = 1024;

/// First and largest pause between two rounds of markers for partitions that did not take
/// theirs yet (no leader, a leader that moved, too few replicas).
pub(crate) const MARKER_RETRY_BACKOFF_MIN: Duration = Duration::from_millis(50);
/// See [`MARKER_RETRY_BACKOFF_MIN`].
pub(crate) const MARKER_RETRY_BACKOFF_MAX: Duration = Duration::from_secs(1);
