//! A shard's transaction coordinator state: the transactional ids of the
//! `__transaction_state` partitions this broker leads and this shard owns, and where each of
//! those partitions stands (the shared runtime's [`CoordinatedPartitions`]). Pure state; the
//! service ([`super::service`]) runs the ops, the writes, the loads and the markers.
//!
//! Invariant: `txns` holds only ids of active partitions (a load's ids are built apart and
//! installed when it finishes; a resignation removes them, and the marker tasks of their
//! transactions stop at their next step, seeing the partition resigned).

use super::state::TxnMetadata;
use crate::coordinator_runtime::{partition_for, CoordinatedPartitions, LoadId, LoadQueue};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;
use storage::Notify;

/// The transaction coordinator's settings (Kafka's names).
#[derive(Clone, Copy, Debug)]
pub struct TxnConfig {
    /// `transaction.max.timeout.ms`: the largest `transaction.timeout.ms` a producer may ask
    /// for, ms. Default 900000.
    pub max_timeout_ms: i32,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`: how often open
    /// transactions past their timeout are looked for. Default 10 s.
    pub abort_timed_out_interval: Duration,
    /// `transactional.id.expiration.ms`: how long an id without a transaction is kept after
    /// its last update, ms. Default 604800000 (7 days).
    pub id_expiration_ms: i64,
    /// `transaction.remove.expired.transaction.cleanup.interval.ms`: how often expired ids are
    /// removed. Default 1 h.
    pub remove_expired_interval: Duration,
}

/// Per-shard coordinator state (module doc).
pub struct TxnCoordinator {
    /// The ids of active partitions only (module invariant).
    pub(super) txns: RefCell<HashMap<String, TxnMetadata>>,
    pub(super) partitions: RefCell<CoordinatedPartitions>,
    loads: LoadQueue,
    pub(super) config: TxnConfig,
    /// This shard's KIP-890 verification questions to other brokers' coordinators.
    pub(super) verifier: super::verify_queue::Verifier,
    /// Notified whenever a transaction of this shard is written CompleteCommit or
    /// CompleteAbort (held AddPartitionsToTxn requests wait on it).
    pub(super) completed: Rc<Notify>,
    /// AddPartitionsToTxn requests held now (at most `ADD_PARTITIONS_HELD_MAX`).
    pub(super) held_adds: Cell<usize>,
}

impl TxnCoordinator {
    pub fn new(config: TxnConfig) -> TxnCoordinator {
        TxnCoordinator {
            txns: RefCell::new(HashMap::new()),
            partitions: RefCell::new(CoordinatedPartitions::default()),
            loads: LoadQueue::default(),
            config,
            verifier: super::verify_queue::Verifier::default(),
            completed: Rc::new(Notify::default()),
            held_adds: Cell::new(0),
        }
    }

    /// This broker became the leader of `__transaction_state` `partition` with
    /// `leader_epoch` (Kafka's `TransactionCoordinator.onElection`; the coordinator epoch is
    /// the leader epoch): unless it already coordinates it, a load of its log is queued.
    pub fn on_election(&self, partition: i32, leader_epoch: i32) {
        if let Some(load) = self.partitions.borrow_mut().elect(partition, leader_epoch) {
            tracing::info!(partition, leader_epoch, "loading transactional ids");
            self.loads.push(partition, load);
        }
    }

    /// This broker no longer leads `partition` from `leader_epoch` on (`None`: it is gone)
    /// (Kafka's `onResignation`): its ids — those whose partition among `txn_partitions` is
    /// `partition` — are unloaded, and their marker tasks stop.
    pub fn on_resignation(&self, partition: i32, leader_epoch: Option<i32>, txn_partitions: usize) {
        if !self.partitions.borrow_mut().resign(partition, leader_epoch) {
            return;
        }
        self.loads.cancel(partition);
        let mut txns = self.txns.borrow_mut();
        let before = txns.len();
        txns.retain(|id, _| partition_for(id, txn_partitions) != partition);
        let ids = before - txns.len();
        if ids > 0 {
            tracing::info!(partition, ?leader_epoch, ids, "unloaded transactional ids");
        } else {
            tracing::debug!(
                partition,
                ?leader_epoch,
                "resigned an empty transaction partition"
            );
        }
    }

    /// Waits for queued loads ([`LoadQueue::next`]).
    pub(super) async fn next_loads(&self) -> Option<Vec<(i32, LoadId)>> {
        self.loads.next().await
    }

    /// The broker is stopping: the load loop ends.
    pub(super) fn stop_loads(&self) {
        self.loads.stop();
    }
}
