//! One shard's context: its id, its senders to every other shard, its copy of the cluster
//! metadata, the partitions it has open (their logs, high watermarks and parked fetches) with
//! their topic configs, its batch cache, config, metrics and task queues, and each service's
//! per-core state (the controller on shard 0, the group coordinator, the replica fetchers).
//! Everything here lives on one shard executor: `Rc`/`RefCell`, no locks.
//!
//! A partition operation runs on the owning shard (`crate::partitions::service::call`): here
//! when this shard owns the partition, else over the mesh. The partition itself (its
//! replication policy, high watermark and waiters) is [`replication::Partition`]; which
//! partitions are open, in which role, is the partition lifecycle's
//! (`crate::partition_lifecycle`), which alone adds to [`Shard::partitions`].

use crate::messages::ShardMsg;
use crate::metadata::ClusterMetadata;
use crate::metrics::{PartitionStatus, ShardMetrics, ShardSnapshot};
use crate::rt::Senders;
use crate::rt::{Latency, Shares, TaskQueueHandle};
use futures_channel::oneshot;
use futures_util::future::LocalBoxFuture;
use futures_util::StreamExt;
use net::kafka_protocol::messages::ApiKey;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use storage::{BatchCache, PartitionLog, StorageError, TimestampMs, TopicPartition};
use tuning::config::{BrokerConfig, ShardSettings, TopicConfig};

/// Opens partition `tp`'s log on `shard` and applies its role: the partition lifecycle's
/// open, which the runtime hands [`Shard::new`]. The data-plane services below the lifecycle
/// reopen a log that failed to open earlier through it, without naming the lifecycle (it
/// tells the group coordinator, above them, of the role it applied).
pub type OpenPartition = for<'a> fn(
    &'a Shard,
    &'a TopicPartition,
    TopicConfig,
)
    -> LocalBoxFuture<'a, Result<Rc<LocalPartition>, StorageError>>;

/// Partition logs a shard opens at once when it installs metadata, whose high-watermark
/// checkpoint it writes at once, or that it closes at once at shutdown: each waits on file
/// system calls and fsyncs (a checkpoint's file and directory; a close's producer snapshot
/// and clean-shutdown marker too), which the blocking pool's threads overlap. One at a time,
/// 10,000 partitions took 34 s to close, and a checkpoint pass waited on up to two fsyncs per
/// partition one after another.
pub(crate) const LOGS_IN_FLIGHT: usize = 16;

/// State of one shard.
pub struct Shard {
    pub id: usize,
    pub shards: usize,
    pub config: Rc<BrokerConfig>,
    pub metadata: RefCell<Arc<ClusterMetadata>>,
    /// The partitions this shard has open (added only by the partition lifecycle).
    pub partitions: RefCell<HashMap<TopicPartition, Rc<LocalPartition>>>,
    /// The topic config of each open partition (for the produce checks and config changes).
    pub(crate) topic_configs: RefCell<HashMap<TopicPartition, TopicConfig>>,
    pub cache: BatchCache,
    senders: Senders<ShardMsg>,
    /// Shard 0 only, once started: this node's controller quorum voter and service.
    pub controller: std::cell::OnceCell<crate::controller::state::Controller>,
    /// Shutdown state and open connections.
    pub stop: Rc<crate::shutdown::ShardStop>,
    /// The log directory's state, shared by every shard (see [`crate::log_dir`]).
    pub log_dir: Arc<crate::log_dir::LogDir>,
    pub metrics: ShardMetrics,
    /// The incremental fetch sessions (KIP-227) of the fetches this shard serves.
    pub(crate) fetch_sessions: RefCell<crate::fetch_sessions::FetchSessionCache>,
    pub queues: TaskQueues,
    /// The consumer groups of the `__consumer_offsets` partitions this shard owns.
    pub groups: crate::groups::GroupCoordinator,
    /// The transactional ids of the `__transaction_state` partitions this shard owns.
    pub txns: crate::txn::TxnCoordinator,
    /// Shard [`crate::replica_fetcher::FETCHER_SHARD`] only: this broker's replica fetchers.
    pub replica_fetchers: crate::replica_fetcher::ReplicaFetchers,
    /// How this broker secures its connections to other brokers' inter-broker listener
    /// (replica fetcher, transaction markers and verification, controller forwarding).
    pub inter_broker: crate::peer::PeerSecurity,
    /// The produce and fetch byte rates and request times of the clients this shard serves,
    /// with the other shards' reported ones (client quotas, metered per broker).
    pub(crate) quota_meters: crate::quotas::QuotaMeters,
    /// The leader's replication throttle of the follower fetches this shard serves (KIP-73,
    /// against `leader.replication.throttled.rate / shards`; see [`crate::replication_quota`]).
    pub(crate) leader_throttle: RefCell<crate::replication_quota::ReplicationQuota>,
    /// The partitions whose log a task is opening or waits to open: opens of one partition
    /// take turns, so a log is never opened twice; opens of different partitions overlap
    /// (see `partition_lifecycle::open_partition`).
    pub(crate) opening: crate::keyed_turns::KeyedTurns<TopicPartition>,
    /// The partition lifecycle's open (see [`OpenPartition`]).
    pub(crate) open_partition: OpenPartition,
    /// This shard's own `Rc`, set by [`Shard::into_rc`], for the tasks a partition operation
    /// starts (an ISR change sent to the controller).
    this: std::cell::OnceCell<std::rc::Weak<Shard>>,
}

/// A partition this shard owns, over its storage log.
pub type LocalPartition = replication::Partition<PartitionLog>;

/// The shard's task queues, with the CPU shares of its `[[shard]]` section: produce
/// work, fetch work, and background work (retention).
#[derive(Clone, Copy)]
pub struct TaskQueues {
    pub produce: TaskQueueHandle,
    pub fetch: TaskQueueHandle,
    pub background: TaskQueueHandle,
}

impl TaskQueues {
    /// Creates the queues on the current executor.
    pub fn create(settings: &ShardSettings) -> anyhow::Result<TaskQueues> {
        let make = |shares: usize, name: &str| {
            crate::rt::create_task_queue(Shares::Static(shares), Latency::NotImportant, name)
        };
        Ok(TaskQueues {
            produce: make(settings.produce_shares, "produce"),
            fetch: make(settings.fetch_shares, "fetch"),
            background: make(settings.background_shares, "background"),
        })
    }

    /// The queue a request of `api_key` runs in (produce, fetch, or the executor's default).
    pub fn for_api(&self, api_key: ApiKey) -> Option<TaskQueueHandle> {
        match api_key {
            ApiKey::Produce => Some(self.produce),
            ApiKey::Fetch => Some(self.fetch),
            _ => None,
        }
    }
}

/// The transaction coordinator's settings from the broker config.
fn txn_config(config: &BrokerConfig) -> crate::txn::TxnConfig {
    crate::txn::TxnConfig {
        max_timeout_ms: config.transaction_max_timeout_ms,
        abort_timed_out_interval: std::time::Duration::from_millis(
            config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
        ),
        id_expiration_ms: config.transactional_id_expiration_ms,
        remove_expired_interval: std::time::Duration::from_millis(
            config.transaction_remove_expired_transaction_cleanup_interval_ms,
        ),
    }
}

/// The group coordinator's settings from the broker config.
fn group_config(config: &BrokerConfig) -> crate::groups::group::GroupConfig {
    crate::groups::group::GroupConfig {
        min_session_timeout_ms: config.group_min_session_timeout_ms,
        max_session_timeout_ms: config.group_max_session_timeout_ms,
        initial_rebalance_delay_ms: config.group_initial_rebalance_delay_ms,
        offsets_retention_ms: i64::from(config.offsets_retention_minutes) * 60_000,
        offsets_retention_check_interval_ms: config.offsets_retention_check_interval_ms,
    }
}

/// Spawns `fut` detached into `queue` (the executor's default queue when `None`).
pub fn spawn_into<F: std::future::Future<Output = ()> + 'static>(
    queue: Option<TaskQueueHandle>,
    fut: F,
) {
    spawn_task_into(queue, fut).detach();
}

/// Spawns `fut` into `queue` (the default queue when `None`) and returns its task.
pub fn spawn_task_into<T: 'static, F: std::future::Future<Output = T> + 'static>(
    queue: Option<TaskQueueHandle>,
    fut: F,
) -> crate::rt::Task<T> {
    match queue {
        // Only a queue of another executor fails, and the shard made its queues itself.
        Some(q) => crate::rt::spawn_local_into(fut, q)
            .expect("the shard's task queues belong to its executor"),
        None => crate::rt::spawn_local(fut),
    }
}

impl Shard {
    /// Shard `id`; on shard 0 the controller is started after (`runtime::start_controller`).
    #[allow(clippy::too_many_arguments)] // The per-core context's parts, each made by the runtime.
    pub fn new(
        id: usize,
        config: Rc<BrokerConfig>,
        settings: &ShardSettings,
        queues: TaskQueues,
        metadata: Arc<ClusterMetadata>,
        senders: Senders<ShardMsg>,
        log_dir: Arc<crate::log_dir::LogDir>,
        open_partition: OpenPartition,
        inter_broker: crate::peer::PeerSecurity,
    ) -> Shard {
        let shards = senders.nr_consumers();
        Shard {
            id,
            shards,
            cache: BatchCache::new(settings.batch_cache_bytes),
            queues,
            controller: std::cell::OnceCell::new(),
            metadata: RefCell::new(metadata),
            partitions: RefCell::new(HashMap::new()),
            topic_configs: RefCell::new(HashMap::new()),
            senders,
            stop: Rc::default(),
            log_dir,
            metrics: ShardMetrics::default(),
            fetch_sessions: RefCell::new(crate::fetch_sessions::FetchSessionCache::new(
                id,
                shards,
                config.max_incremental_fetch_session_cache_slots,
            )),
            groups: crate::groups::GroupCoordinator::new(group_config(&config)),
            txns: crate::txn::TxnCoordinator::new(txn_config(&config)),
            replica_fetchers: crate::replica_fetcher::ReplicaFetchers::default(),
            config,
            inter_broker,
            quota_meters: crate::quotas::QuotaMeters::default(),
            leader_throttle: RefCell::default(),
            opening: crate::keyed_turns::KeyedTurns::default(),
            open_partition,
            this: std::cell::OnceCell::new(),
        }
    }

    /// `self` in an `Rc` that [`Shard::rc`] can hand out again.
    pub fn into_rc(self) -> Rc<Shard> {
        let shard = Rc::new(self);
        let _ = shard.this.set(Rc::downgrade(&shard));
        shard
    }

    /// This shard's `Rc`, when it was made by [`Shard::into_rc`].
    pub fn rc(&self) -> Option<Rc<Shard>> {
        self.this.get().and_then(std::rc::Weak::upgrade)
    }

    /// Sends `msg` to shard `peer`, counting it.
    pub(crate) async fn send(&self, peer: usize, msg: ShardMsg) -> Result<(), ()> {
        ShardMetrics::add(&self.metrics.cross_shard_messages, 1);
        self.senders.send_to(peer, msg).await.map_err(|_| ())
    }

    /// This shard's metrics and partition offsets.
    pub fn snapshot(&self) -> ShardSnapshot {
        let m = &self.metrics;
        let cache = self.cache.stats();
        let mut sync_latency_us_log2 = [0u64; storage::SYNC_LATENCY_BUCKETS];
        let mut write_latency_us_log2 = [0u64; storage::SYNC_LATENCY_BUCKETS];
        let mut partitions = Vec::new();
        let (mut log_writes, mut log_write_bytes) = (0, 0);
        for (tp, p) in self.partitions.borrow().iter() {
            let stats = p.log().stats();
            log_writes += stats.writes;
            log_write_bytes += stats.write_bytes;
            for (total, n) in sync_latency_us_log2
                .iter_mut()
                .zip(stats.sync_latency_us_log2)
            {
                *total += n;
            }
            for (total, n) in write_latency_us_log2
                .iter_mut()
                .zip(stats.write_latency_us_log2)
            {
                *total += n;
            }
            partitions.push(PartitionStatus {
                topic: tp.topic.clone(),
                partition: tp.partition,
                log_start_offset: p.log().log_start_offset().0,
                high_watermark: p.high_watermark().0,
                log_end_offset: p.log().log_end_offset().0,
                size_bytes: p.log().size_bytes(),
            });
        }
        partitions.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        ShardSnapshot {
            shard: self.id,
            produce_requests: m.produce_requests.get(),
            produce_bytes: m.produce_bytes.get(),
            fetch_requests: m.fetch_requests.get(),
            fetch_bytes: m.fetch_bytes.get(),
            cross_shard_messages: m.cross_shard_messages.get(),
            parked_fetches: m.parked_fetches.get(),
            fetch_sessions: self.fetch_sessions.borrow().len(),
            connections: self.stop.connections(),
            cache_hits: cache.hits,
            cache_misses: cache.misses,
            cache_used_bytes: cache.used_bytes,
            request_latency: m
                .request_latency
                .borrow()
                .iter()
                .map(|(k, v)| (*k, v.clone()))
                .collect(),
            sync_latency_us_log2,
            write_latency_us_log2,
            log_writes,
            log_write_bytes,
            partitions,
            committed: self.groups.committed(),
            cleaner: m.cleaner.get(),
        }
    }

    /// Snapshots of every shard, in shard order.
    pub async fn gather(self: &Rc<Self>) -> Vec<ShardSnapshot> {
        let mut out = Vec::with_capacity(self.shards);
        for peer in 0..self.shards {
            if peer == self.id {
                out.push(self.snapshot());
                continue;
            }
            let (reply, answer) = oneshot::channel();
            if self.send(peer, ShardMsg::Snapshot { reply }).await.is_ok() {
                if let Ok(s) = answer.await {
                    out.push(s);
                }
            }
        }
        out
    }

    /// Sleeps for `duration`, or less when shutdown is requested; `true` when it was.
    pub async fn sleep_unless_stopped(&self, duration: std::time::Duration) -> bool {
        futures_lite::future::or(
            async {
                crate::rt::sleep(duration).await;
                false
            },
            async {
                self.stop.requested().await;
                true
            },
        )
        .await
    }

    /// Applies retention to every partition every `log.retention.check.interval.ms` until
    /// shutdown.
    pub async fn retention_loop(&self) {
        loop {
            if self
                .sleep_unless_stopped(self.config.log_retention_check_interval())
                .await
            {
                return;
            }
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
            for (tp, p) in self.owned_partitions() {
                match p.log().enforce_retention(TimestampMs(now)).await {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(%tp, segments = n, "retention deleted segments"),
                    Err(e) => tracing::warn!(%tp, error = %e, "retention failed"),
                }
            }
        }
    }

    /// Writes the `high-watermark` checkpoint of every partition whose high watermark moved,
    /// every `replica.high.watermark.checkpoint.interval.ms` until shutdown (Kafka's
    /// `ReplicaManager.checkpointHighWatermarks`; [`Shard::close_partitions`] writes the last).
    pub async fn high_watermark_checkpoint_loop(&self) {
        while !self
            .sleep_unless_stopped(self.config.replica_high_watermark_checkpoint_interval())
            .await
        {
            futures_util::stream::iter(self.owned_partitions())
                .for_each_concurrent(LOGS_IN_FLIGHT, |(tp, p)| async move {
                    if let Err(e) = p.log().checkpoint_high_watermark().await {
                        tracing::warn!(%tp, error = %e, "writing the high-watermark checkpoint");
                    }
                })
                .await;
        }
    }

    /// Sends the other shards, every [`crate::quotas::QUOTA_REPORT_INTERVAL_MS`] until
    /// shutdown, this shard's client-quota meters that moved since the last report (nothing
    /// while the metadata has no client quotas), so that every shard throttles on the
    /// broker's rates.
    pub async fn quota_report_loop(&self) {
        let interval = std::time::Duration::from_millis(crate::quotas::QUOTA_REPORT_INTERVAL_MS);
        while !self.sleep_unless_stopped(interval).await {
            let reports = self
                .quota_meters
                .take_reports(&self.metadata.borrow().client_quotas, self.id);
            for report in reports {
                for peer in (0..self.shards).filter(|peer| *peer != self.id) {
                    let report = report.clone();
                    // A shard that is gone is stopping: its meters no longer matter.
                    let _ = self.send(peer, ShardMsg::QuotaReport { report }).await;
                }
            }
        }
    }

    /// Every partition this shard owns, at this moment.
    pub(crate) fn owned_partitions(&self) -> Vec<(TopicPartition, Rc<LocalPartition>)> {
        self.partitions
            .borrow()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// Checkpoints the high watermark of, then flushes and closes, every partition log this
    /// shard owns (each leaves its clean-shutdown marker); returns how many closed cleanly.
    pub async fn close_partitions(&self) -> usize {
        self.replica_fetchers.stop_all();
        let owned: Vec<(TopicPartition, Rc<LocalPartition>)> =
            self.partitions.borrow_mut().drain().collect();
        self.topic_configs.borrow_mut().clear();
        futures_util::stream::iter(owned)
            .map(|(tp, partition)| async move {
                if let Err(e) = partition.log().checkpoint_high_watermark().await {
                    tracing::error!(%tp, error = %e, "writing the high-watermark checkpoint");
                }
                let closed = match partition.log().close().await {
                    Ok(()) => true,
                    Err(e) => {
                        tracing::error!(%tp, error = %e, "closing partition log");
                        false
                    }
                };
                partition.close_waiters();
                closed
            })
            .buffer_unordered(LOGS_IN_FLIGHT)
            .filter(|closed| std::future::ready(*closed))
            .count()
            .await
    }

    /// The current metadata snapshot.
    pub fn metadata(&self) -> Arc<ClusterMetadata> {
        self.metadata.borrow().clone()
    }

    /// How many partitions `__transaction_state` has in the current metadata (0 before it is
    /// created): what a transactional id's partition is computed among.
    pub fn txn_partition_count(&self) -> usize {
        self.metadata()
            .topics
            .get(crate::txn::TXN_TOPIC)
            .map_or(0, |t| t.partitions.len())
    }

    /// How many partitions `__consumer_offsets` has in the current metadata (0 before it is
    /// created): what a group's offsets partition is computed among.
    pub fn offsets_partition_count(&self) -> usize {
        self.metadata()
            .topics
            .get(crate::groups::OFFSETS_TOPIC)
            .map_or(0, |t| t.partitions.len())
    }
}
