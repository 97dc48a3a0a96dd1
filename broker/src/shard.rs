//! One shard: the partitions it owns (their logs, high watermarks and parked fetches), its
//! batch cache, its copy of the cluster metadata, and its senders to every other shard.
//! Everything here lives on one glommio executor: `Rc`/`RefCell`, no locks.
//!
//! A partition operation runs on the owning shard (`crate::partitions::service::call`): here
//! when this shard owns the partition, else over the mesh. The
//! partition itself (its replication policy, high watermark and waiters) is
//! [`replication::Partition`]; here it is only looked up, opened and closed.

use crate::messages::ShardMsg;
use crate::metadata::{topic_config, ClusterMetadata};
use crate::metrics::{PartitionStatus, ShardMetrics, ShardSnapshot};
use crate::partitions::{PartitionOp, PartitionOpError};
use futures_channel::oneshot;
use glommio::channels::channel_mesh::Senders;
use glommio::{Latency, Shares, TaskQueueHandle};
use net::kafka_protocol::messages::ApiKey;
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use storage::{BatchCache, PartitionLog, TimestampMs, TopicPartition};
use tuning::config::{BrokerConfig, ShardSettings, TopicConfig};

/// State of one shard.
pub struct Shard {
    pub id: usize,
    pub shards: usize,
    pub config: Rc<BrokerConfig>,
    pub metadata: RefCell<Arc<ClusterMetadata>>,
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
    pub queues: TaskQueues,
    /// The consumer groups of the `__consumer_offsets` partitions this shard owns.
    pub groups: crate::groups::GroupCoordinator,
    /// Shard [`crate::replica_fetcher::FETCHER_SHARD`] only: this broker's replica fetchers.
    pub replica_fetchers: crate::replica_fetcher::ReplicaFetchers,
    open_lock: glommio::sync::Semaphore,
    /// This shard's own `Rc`, set by [`Shard::into_rc`], for the tasks a partition operation
    /// starts (an ISR change sent to the controller).
    this: std::cell::OnceCell<std::rc::Weak<Shard>>,
}

/// A partition this shard owns, over its storage log.
pub type LocalPartition = replication::Partition<PartitionLog>;

/// The shard's glommio task queues, with the CPU shares of its `[[shard]]` section: produce
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
        let ex = glommio::executor();
        let make = |shares: usize, name: &str| {
            ex.create_task_queue(Shares::Static(shares), Latency::NotImportant, name)
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

    /// The queue a message from another shard runs in.
    pub fn for_message(&self, msg: &ShardMsg) -> Option<TaskQueueHandle> {
        match msg {
            ShardMsg::Partition {
                op: PartitionOp::Produce { .. },
                ..
            } => Some(self.produce),
            ShardMsg::Partition {
                op: PartitionOp::Fetch { .. },
                ..
            } => Some(self.fetch),
            _ => None,
        }
    }
}

/// Ending of a deleted partition's directory until it is removed (Kafka's `-delete`).
pub const DELETED_DIR_SUFFIX: &str = "-delete";

/// Removes `dir`, a deleted partition's renamed directory, on the blocking pool.
pub async fn remove_deleted_dir(dir: PathBuf) {
    let shown = dir.display().to_string();
    let removed = glommio::executor()
        .spawn_blocking(move || std::fs::remove_dir_all(dir))
        .await;
    if let Err(e) = removed {
        tracing::warn!(dir = %shown, error = %e, "removing deleted partition directory");
    }
}

/// The storage config of partition `tp`: its topic's, with the small preallocation step of
/// `__consumer_offsets`.
fn log_config(tp: &TopicPartition, config: &TopicConfig) -> storage::LogConfig {
    let mut log_config = config.to_log_config();
    if tp.topic == crate::groups::OFFSETS_TOPIC {
        log_config.preallocate_step_bytes = crate::groups::OFFSETS_PREALLOCATE_STEP_BYTES;
    }
    log_config
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
) -> glommio::Task<T> {
    match queue {
        // Only a queue of another executor fails, and the shard made its queues itself.
        Some(q) => glommio::spawn_local_into(fut, q)
            .expect("the shard's task queues belong to its executor"),
        None => glommio::spawn_local(fut),
    }
}

impl Shard {
    /// Shard `id`; on shard 0 the controller is started after (`runtime::start_controller`).
    pub fn new(
        id: usize,
        config: Rc<BrokerConfig>,
        settings: &ShardSettings,
        queues: TaskQueues,
        metadata: Arc<ClusterMetadata>,
        senders: Senders<ShardMsg>,
        log_dir: Arc<crate::log_dir::LogDir>,
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
            groups: crate::groups::GroupCoordinator::new(group_config(&config)),
            replica_fetchers: crate::replica_fetcher::ReplicaFetchers::default(),
            config,
            open_lock: glommio::sync::Semaphore::new(1),
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
                glommio::timer::sleep(duration).await;
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
            for (tp, p) in self.owned_partitions() {
                if let Err(e) = p.log().checkpoint_high_watermark().await {
                    tracing::warn!(%tp, error = %e, "writing the high-watermark checkpoint");
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
        let mut clean = 0;
        for (tp, partition) in owned {
            if let Err(e) = partition.log().checkpoint_high_watermark().await {
                tracing::error!(%tp, error = %e, "writing the high-watermark checkpoint");
            }
            match partition.log().close().await {
                Ok(()) => clean += 1,
                Err(e) => tracing::error!(%tp, error = %e, "closing partition log"),
            }
            partition.close_waiters();
        }
        clean
    }

    /// The current metadata snapshot.
    pub fn metadata(&self) -> Arc<ClusterMetadata> {
        self.metadata.borrow().clone()
    }

    /// How many partitions `__consumer_offsets` has in the current metadata (0 before it is
    /// created): what a group's offsets partition is computed among.
    pub fn offsets_partition_count(&self) -> usize {
        self.metadata()
            .topics
            .get(crate::groups::OFFSETS_TOPIC)
            .map_or(0, |t| t.partitions.len())
    }

    fn partition_dir(&self, tp: &TopicPartition) -> PathBuf {
        self.config.data_dir.join(tp.dir_name())
    }

    /// Installs `snapshot`: opens logs of partitions this shard now owns, closes and deletes
    /// those of deleted topics, and applies config changes.
    pub async fn apply_metadata(&self, snapshot: Arc<ClusterMetadata>) {
        // Installed first: from here on, requests for deleted partitions are refused rather than
        // reopened, and requests for new ones open them (serialised with the opens below).
        let previous = std::mem::replace(&mut *self.metadata.borrow_mut(), snapshot.clone());
        let mut wanted: HashMap<TopicPartition, TopicConfig> = HashMap::new();
        // Dynamic broker configs change the defaults of every topic that does not override them.
        let defaults = crate::dynamic_config::topic_defaults(&self.config, &snapshot.image);
        for (name, topic) in &snapshot.topics {
            let config = topic_config(topic, &defaults);
            for partition in snapshot.owned_partitions(topic, self.id) {
                wanted.insert(
                    TopicPartition {
                        topic: name.clone(),
                        partition,
                    },
                    config.clone(),
                );
            }
        }
        // Partitions this shard held (open, or owned by the previous snapshot) that the new
        // one drops: their topic was deleted.
        let mut removed: Vec<TopicPartition> = self
            .partitions
            .borrow()
            .keys()
            .filter(|tp| !wanted.contains_key(*tp))
            .cloned()
            .collect();
        for (name, topic) in &previous.topics {
            for partition in previous.owned_partitions(topic, self.id) {
                let tp = TopicPartition {
                    topic: name.clone(),
                    partition,
                };
                if !wanted.contains_key(&tp) && !removed.contains(&tp) {
                    removed.push(tp);
                }
            }
        }
        for tp in removed {
            self.delete_partition(&tp).await;
        }
        for (tp, config) in wanted {
            let current = self.partitions.borrow().get(&tp).cloned();
            if let Some(owned) = &current {
                let image = snapshot.partition(&tp.topic, tp.partition);
                // A new image or new configs (min.insync.replicas, dynamic ones included).
                if image != previous.partition(&tp.topic, tp.partition)
                    || snapshot.topics.get(&tp.topic).map(|t| &t.configs)
                        != previous.topics.get(&tp.topic).map(|t| &t.configs)
                    || snapshot.broker_configs != previous.broker_configs
                {
                    self.apply_role(&tp, owned, &config).await;
                }
            }
            match current {
                Some(_) if self.topic_configs.borrow().get(&tp) == Some(&config) => {}
                Some(owned) => {
                    owned.log().set_config(log_config(&tp, &config));
                    self.topic_configs.borrow_mut().insert(tp, config);
                }
                None => {
                    if let Err(e) = self.open_partition(&tp, config).await {
                        tracing::error!(%tp, error = %e, "cannot open partition log; retried on next use");
                    }
                }
            }
        }
    }

    /// Makes `partition` (`tp`, open here) leader or follower as the installed image says
    /// (Kafka's `makeLeader` / `makeFollower`): a leader gets the image's leader epoch,
    /// partition epoch, replicas and ISR, with `config`'s `min.insync.replicas` and the
    /// broker's `replica.lag.time.max.ms`; a follower
    /// its leader and leader epoch (the replica fetcher on shard
    /// [`crate::replica_fetcher::FETCHER_SHARD`] fetches it). For a `__consumer_offsets`
    /// partition the group coordinator follows: elected with the leadership (its groups
    /// load), resigned without it. Runs only when the partition's image changes or it opens,
    /// never per produce or fetch.
    async fn apply_role(
        &self,
        tp: &TopicPartition,
        partition: &LocalPartition,
        config: &TopicConfig,
    ) {
        use replication::runtime::{Clock, NodeId};
        let meta = self.metadata();
        let Some(image) = meta.partition(&tp.topic, tp.partition) else {
            return;
        };
        let node = self.config.node_id;
        if image.leader == node {
            let leadership = replication::Leadership {
                leader_epoch: storage::LeaderEpoch(image.leader_epoch),
                partition_epoch: image.partition_epoch,
                replicas: image.replicas.iter().copied().map(NodeId).collect(),
                isr: image.isr.iter().copied().map(NodeId).collect(),
            };
            let isr_config = replication::IsrConfig {
                min_insync_replicas: usize::try_from(self.min_insync_replicas(&meta, tp, config))
                    .unwrap_or(1)
                    .max(1),
                replica_lag_time_max_ms: i64::try_from(self.config.replica_lag_time_max_ms)
                    .unwrap_or(i64::MAX),
            };
            let now = crate::seam::GlommioRuntime.now();
            match partition.become_leader(leadership, isr_config, now).await {
                Ok(()) if tp.topic == crate::groups::OFFSETS_TOPIC => {
                    self.groups.on_election(tp.partition, image.leader_epoch);
                }
                Ok(()) => {}
                Err(e) => {
                    tracing::error!(%tp, error = %e, "cannot become the partition's leader");
                }
            }
            return;
        }
        if image.leader >= 0 {
            partition.become_follower(
                NodeId(image.leader),
                storage::LeaderEpoch(image.leader_epoch),
            );
        }
        // Another broker leads (or none does): this broker's coordinator lets the group go.
        if tp.topic == crate::groups::OFFSETS_TOPIC {
            self.groups.on_resignation(
                tp.partition,
                Some(image.leader_epoch),
                self.offsets_partition_count(),
            );
        }
    }

    /// `min.insync.replicas` of `tp`'s topic: its override, else the broker's dynamic value
    /// (this broker's, else the cluster default, as Kafka 4.4's controller writes one), else
    /// `config`'s (the start-up default).
    fn min_insync_replicas(
        &self,
        meta: &ClusterMetadata,
        tp: &TopicPartition,
        config: &TopicConfig,
    ) -> u32 {
        const KEY: &str = "min.insync.replicas";
        meta.topics
            .get(&tp.topic)
            .and_then(|t| t.configs.get(KEY))
            .map(String::as_str)
            .or_else(|| {
                crate::dynamic_config::DynamicBrokerConfigs::of(
                    &meta.broker_configs,
                    self.config.node_id,
                )
                .lookup(KEY)
                .map(|(v, _)| v)
            })
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(config.min_insync_replicas)
    }

    /// Deletes partition `tp` of a deleted topic, as Kafka does: the log is discarded at once
    /// (no clean close: its files are going), its directory is renamed to
    /// `<topic>-<partition>.<uuid>-delete` — so a topic re-created under the same name starts
    /// empty — and removed in the background. Parked fetches are woken.
    async fn delete_partition(&self, tp: &TopicPartition) {
        if tp.topic == crate::groups::OFFSETS_TOPIC {
            self.groups
                .on_resignation(tp.partition, None, self.offsets_partition_count());
        }
        let owned = self.partitions.borrow_mut().remove(tp);
        self.topic_configs.borrow_mut().remove(tp);
        if let Some(owned) = owned {
            owned.log().discard().await;
            owned.close_waiters();
        }
        let dir = self.partition_dir(tp);
        let doomed = self.config.data_dir.join(format!(
            "{}.{}{DELETED_DIR_SUFFIX}",
            tp.dir_name(),
            uuid::Uuid::new_v4().simple()
        ));
        let renamed = {
            let doomed = doomed.clone();
            glommio::executor()
                .spawn_blocking(move || match std::fs::rename(&dir, &doomed) {
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
                    other => other.map(|()| true),
                })
                .await
        };
        match renamed {
            Ok(true) => spawn_into(Some(self.queues.background), remove_deleted_dir(doomed)),
            Ok(false) => {}
            Err(e) => tracing::warn!(%tp, error = %e, "renaming deleted partition directory"),
        }
    }

    /// Opens the log of `tp`, which this shard owns, and starts serving it.
    async fn open_partition(
        &self,
        tp: &TopicPartition,
        config: TopicConfig,
    ) -> Result<Rc<LocalPartition>, storage::StorageError> {
        // Opens are serialised, so two tasks never open one log twice.
        let _permit = self
            .open_lock
            .acquire_permit(1)
            .await
            .map_err(|_| storage::StorageError::Closed)?;
        if let Some(owned) = self.partitions.borrow().get(tp).cloned() {
            return Ok(owned);
        }
        if self.stop.is_requested() {
            return Err(storage::StorageError::Closed);
        }
        let dir = self.partition_dir(tp);
        let log = PartitionLog::open(&dir, log_config(tp, &config), &self.cache).await?;
        // The topic may have been deleted (its directory renamed away) while the log opened.
        if self.metadata().owner(&tp.topic, tp.partition) != Some(self.id) {
            log.discard().await;
            return Err(storage::StorageError::Closed);
        }
        let owned = Rc::new(replication::Partition::new(
            log,
            replication::runtime::NodeId(self.config.node_id),
            Rc::new(crate::seam::GlommioRuntime),
        ));
        self.apply_role(tp, &owned, &config).await;
        self.topic_configs.borrow_mut().insert(tp.clone(), config);
        self.partitions
            .borrow_mut()
            .insert(tp.clone(), owned.clone());
        Ok(owned)
    }

    /// The open partition `tp`, opening it again if this shard owns it but its log failed to
    /// open earlier (e.g. a full disk at start-up). Errors:
    /// [`PartitionOpError::UnknownTopicOrPartition`] when not owned here,
    /// [`PartitionOpError::LogUnavailable`] when the log still cannot be opened.
    pub(crate) async fn owned_partition(
        &self,
        tp: &TopicPartition,
    ) -> Result<Rc<LocalPartition>, PartitionOpError> {
        if let Some(owned) = self.partitions.borrow().get(tp).cloned() {
            return Ok(owned);
        }
        let meta = self.metadata();
        let owner = meta.owner(&tp.topic, tp.partition);
        let topic = meta.topics.get(&tp.topic);
        let (Some(owner), Some(topic)) = (owner, topic) else {
            return Err(PartitionOpError::UnknownTopicOrPartition);
        };
        if owner != self.id {
            return Err(PartitionOpError::UnknownTopicOrPartition);
        }
        let defaults = crate::dynamic_config::topic_defaults(&self.config, &meta.image);
        let config = topic_config(topic, &defaults);
        self.open_partition(tp, config).await.map_err(|e| {
            tracing::warn!(%tp, error = %e, "partition log still cannot be opened");
            PartitionOpError::LogUnavailable(e)
        })
    }

    /// Sends `snapshot` to every other shard and installs it here; returns when all have it.
    pub async fn publish_metadata(self: &Rc<Self>, snapshot: Arc<ClusterMetadata>) {
        let mut acks = Vec::new();
        for peer in 0..self.shards {
            if peer == self.id {
                continue;
            }
            let (reply, ack) = oneshot::channel();
            let msg = ShardMsg::Metadata {
                snapshot: snapshot.clone(),
                reply,
            };
            if self.send(peer, msg).await.is_ok() {
                acks.push(ack);
            }
        }
        self.apply_metadata(snapshot).await;
        for ack in acks {
            let _ = ack.await;
        }
    }
}
