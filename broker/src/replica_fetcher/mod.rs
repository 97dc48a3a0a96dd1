//! The follower side of replication (Kafka's `ReplicaFetcherThread` over
//! `AbstractFetcherThread`): one replica fetcher per leader broker this broker follows
//! partitions of, each one task on shard [`FETCHER_SHARD`], holding one Kafka-protocol TCP
//! connection to the leader's Kafka listener.
//!
//! A fetcher's partitions are those the installed metadata image says this broker is a
//! replica of and its leader leads, so a partition that moves to another leader, becomes led
//! here or is deleted leaves its fetcher with the next image; [`fetcher::reconcile`] starts a
//! fetcher for each new leader and ends those left without partitions. Each round:
//! 1. a partition new to the fetcher (or back after an error) asks its owning shard for its
//!    position (`PartitionOp::FollowerPosition`: the written offset, the latest epoch);
//! 2. one FetchRequest v16 (`replica_id` = this `node.id`, `max_wait_ms` 500, `min_bytes` 1:
//!    Kafka's `replica.fetch.wait.max.ms` / `replica.fetch.min.bytes` defaults) with each
//!    partition's fetch offset, `last_fetched_epoch` and `current_leader_epoch`; while a
//!    partition is in back-off, `max_wait_ms` ends when its back-off does (unlike Kafka), so
//!    it is not left out of a fetch parked on partitions with nothing new;
//! 3. each answered partition goes to its owning shard: `PartitionOp::AppendAsFollower` (the
//!    batches, then the follower high watermark and log start offset), or on a diverging epoch (KIP-320)
//!    `PartitionOp::TruncateToDivergingEpoch`; the reply is the next position.
//!
//! 4. a partition the leader answered OFFSET_OUT_OF_RANGE (its fetch offset below the leader's
//!    log start, or above its log end) asks the leader its log end and log start offsets
//!    (ListOffsets latest and earliest with this `node.id` as `replica_id`, Kafka's
//!    `fetchOffsetAndTruncate`) and hands them to its owning shard
//!    (`PartitionOp::HandleOutOfRange`: truncate to the leader's end, or fully to start at
//!    the leader's log start); the reply is the next position.
//!
//! Each fetch carries the follower's log start offset, and each answer's leader log start
//! offset moves the follower's up (Kafka's `maybeIncrementLogStartOffset`).
//!
//! A partition error drops the partition's position (asked again) and delays that partition
//! alone ([`fetcher::BACKOFF_MIN`] doubling to [`fetcher::BACKOFF_MAX`], Kafka's
//! `delayPartitions`) until an image gives it a new leader epoch; a connection error closes
//! the connection, backs off the same way and looks the leader's endpoint up again in the
//! metadata. Nothing here runs for a partition
//! with one replica: it has no fetcher.
//!
//! Replication throttle (KIP-73, [`quota`]): while the bytes fetched for the replicas a topic
//! lists in `follower.replication.throttled.replicas` (out of the ISR) go faster than
//! `follower.replication.throttled.rate`, those partitions are left out of the fetches.
//! Not yet: the leader's side (`leader.replication.throttled.*`).
//!
//! Limits: full fetches only (no KIP-227 fetch session); the partitions of a response are
//! handed to their shards one after the other.

pub mod fetcher;
mod session;

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

/// The shard every replica fetcher of this broker runs on.
pub const FETCHER_SHARD: usize = 0;

/// The replica fetchers of this broker, by leader `node.id` (on [`FETCHER_SHARD`] only).
pub struct ReplicaFetchers {
    /// Dropping a fetcher's task ends it.
    running: RefCell<HashMap<i32, crate::rt::Task<()>>>,
    /// The follower's replication throttle, shared by the fetchers.
    throttle: RefCell<crate::replication_quota::ReplicationQuota>,
    /// The origin of the throttle's clock.
    created: Instant,
    /// Notified after each image the shards installed ([`fetcher::reconcile`]): a fetcher
    /// parked on a fetch looks whether it has new partitions to follow.
    installed: std::rc::Rc<storage::Notify>,
}

impl Default for ReplicaFetchers {
    fn default() -> Self {
        ReplicaFetchers {
            running: RefCell::default(),
            throttle: RefCell::default(),
            created: Instant::now(),
            installed: std::rc::Rc::default(),
        }
    }
}

impl ReplicaFetchers {
    /// Milliseconds since these fetchers were created: the throttle's clock.
    fn now_ms(&self) -> u64 {
        u64::try_from(self.created.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Whether the throttled fetches went faster than `limit_bytes_per_s` lately.
    pub fn throttle_exceeded(&self, limit_bytes_per_s: u64) -> bool {
        self.throttle
            .borrow()
            .is_exceeded(self.now_ms(), limit_bytes_per_s)
    }

    /// Counts `bytes` fetched for throttled replicas.
    pub fn record_throttled(&self, bytes: u64) {
        let now_ms = self.now_ms();
        self.throttle.borrow_mut().record(bytes, now_ms);
    }

    /// Resolves at the next image installed after this call.
    pub async fn image_installed(&self) {
        self.installed.notified().await;
    }

    /// Ends the fetchers of leaders not in `leaders`.
    pub fn retain(&self, leaders: &BTreeSet<i32>) {
        self.running
            .borrow_mut()
            .retain(|leader, _| leaders.contains(leader));
    }

    /// Starts the fetcher of `leader` with `start` unless one runs.
    pub fn start_if_absent(&self, leader: i32, start: impl FnOnce() -> crate::rt::Task<()>) {
        self.running
            .borrow_mut()
            .entry(leader)
            .or_insert_with(start);
    }

    /// Ends every fetcher (at shutdown).
    pub fn stop_all(&self) {
        self.running.borrow_mut().clear();
    }
}
