//! The partition lifecycle of one shard (Kafka's `ReplicaManager.applyDelta`, then the
//! coordinators' election hooks as Kafka's `BrokerMetadataPublisher` calls them): when the
//! shard installs a metadata image ([`apply_metadata`]) the partitions it now owns are opened,
//! those of deleted topics are deleted, config changes reach the open logs, and every
//! partition whose image changed (or that opens) takes its role — leader or follower, logged
//! at INFO when its leader epoch moves — after which the group coordinator is told about its
//! `__consumer_offsets` partitions (`GroupCoordinator::on_election` / `on_resignation`).
//!
//! State: none of its own. The open partitions, their topic configs and the partitions being
//! opened are the shard context's ([`Shard::partitions`], [`Shard::topic_configs`],
//! [`Shard::opening`]); everything runs on the owning shard's executor.
//!
//! Invariants:
//! 1. A partition enters [`Shard::partitions`] only here ([`open_partition`]), after its role
//!    was applied and while the installed image names this shard its owner; opens of one
//!    partition take turns ([`Shard::opening`]), so a log is never opened twice. Opens of
//!    different partitions overlap, up to [`LOGS_IN_FLIGHT`] from one image.
//! 2. A role is applied only when a partition opens or its image (or its topic's or the
//!    brokers' configs) changed — never per produce or fetch.
//! 3. The coordinator of an offsets partition is elected only after its replica became the
//!    leader (Kafka calls `onElection` after `makeLeader`), and resigned when another broker
//!    leads it or it is deleted.
//!
//! The data-plane services below this module (`partitions/`, `groups/`) reopen a log that
//! failed to open earlier through [`Shard::open_partition`], a function pointer the runtime
//! sets to [`open_partition_boxed`]: they cannot name this module, which calls the group
//! coordinator above them.

use crate::metadata::{topic_config, ClusterMetadata};
use crate::shard::{spawn_into, LocalPartition, Shard, LOGS_IN_FLIGHT};
use futures_util::future::LocalBoxFuture;
use futures_util::StreamExt;
use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use storage::{PartitionLog, StorageError, TopicPartition};
use tuning::config::TopicConfig;

/// Ending of a deleted partition's directory until it is removed (Kafka's `-delete`).
pub const DELETED_DIR_SUFFIX: &str = "-delete";

/// Removes `dir`, a deleted partition's renamed directory, on the blocking pool.
pub async fn remove_deleted_dir(dir: PathBuf) {
    let shown = dir.display().to_string();
    let removed = crate::rt::spawn_blocking(move || std::fs::remove_dir_all(dir)).await;
    if let Err(e) = removed {
        tracing::warn!(dir = %shown, error = %e, "removing deleted partition directory");
    }
}

/// The storage config of partition `tp`: its topic's, with the small preallocation step of
/// `__consumer_offsets`.
fn log_config(tp: &TopicPartition, config: &TopicConfig) -> storage::LogConfig {
    let mut log_config = config.to_log_config();
    if tp.topic == crate::txn::TXN_TOPIC {
        log_config.preallocate_step_bytes = crate::txn::TXN_PREALLOCATE_STEP_BYTES;
    }
    if tp.topic == crate::groups::OFFSETS_TOPIC {
        log_config.preallocate_step_bytes = crate::groups::OFFSETS_PREALLOCATE_STEP_BYTES;
    }
    log_config
}

fn partition_dir(shard: &Shard, tp: &TopicPartition) -> PathBuf {
    shard.config.data_dir.join(tp.dir_name())
}

/// Installs `snapshot` on `shard`: opens logs of partitions this shard now owns, closes and
/// deletes those of deleted topics, and applies config and role changes.
pub async fn apply_metadata(shard: &Shard, snapshot: Arc<ClusterMetadata>) {
    // Installed first: from here on, requests for deleted partitions are refused rather than
    // reopened, and requests for new ones open them (serialised with the opens below).
    let previous = std::mem::replace(&mut *shard.metadata.borrow_mut(), snapshot.clone());
    let wanted = wanted_partitions(shard, &snapshot);
    // Partitions this shard held (open, or owned by the previous snapshot) that the new
    // one drops: their topic was deleted.
    let mut removed: Vec<TopicPartition> = shard
        .partitions
        .borrow()
        .keys()
        .filter(|tp| !wanted.contains_key(*tp))
        .cloned()
        .collect();
    for (name, topic) in &previous.topics {
        for partition in previous.owned_partitions(topic, shard.id) {
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
        delete_partition(shard, &tp).await;
    }
    let mut to_open = Vec::new();
    for (tp, config) in wanted {
        let current = shard.partitions.borrow().get(&tp).cloned();
        if let Some(owned) = &current {
            let image = snapshot.partition(&tp.topic, tp.partition);
            // A new image or new configs (min.insync.replicas, dynamic ones included).
            if image != previous.partition(&tp.topic, tp.partition)
                || snapshot.topics.get(&tp.topic).map(|t| &t.configs)
                    != previous.topics.get(&tp.topic).map(|t| &t.configs)
                || snapshot.broker_configs != previous.broker_configs
            {
                apply_role(shard, &tp, owned, &config).await;
            }
        }
        match current {
            Some(_) if shard.topic_configs.borrow().get(&tp) == Some(&config) => {}
            Some(owned) => {
                owned.log().set_config(log_config(&tp, &config));
                shard.topic_configs.borrow_mut().insert(tp, config);
            }
            None => to_open.push((tp, config)),
        }
    }
    futures_util::stream::iter(to_open)
        .for_each_concurrent(LOGS_IN_FLIGHT, |(tp, config)| async move {
            if let Err(e) = open_partition(shard, &tp, config).await {
                tracing::error!(%tp, error = %e, "cannot open partition log; retried on next use");
            }
        })
        .await;
}

/// The partitions `snapshot` has `shard` own, with their topic configs (dynamic broker
/// configs change the defaults of every topic that does not override them).
fn wanted_partitions(
    shard: &Shard,
    snapshot: &ClusterMetadata,
) -> HashMap<TopicPartition, TopicConfig> {
    let mut wanted = HashMap::new();
    let defaults = crate::dynamic_config::topic_defaults(&shard.config, &snapshot.image);
    for (name, topic) in &snapshot.topics {
        let config = topic_config(topic, &defaults);
        for partition in snapshot.owned_partitions(topic, shard.id) {
            wanted.insert(
                TopicPartition {
                    topic: name.clone(),
                    partition,
                },
                config.clone(),
            );
        }
    }
    wanted
}

/// Makes `partition` (`tp`, open here) leader or follower as the installed image says
/// (Kafka's `makeLeader` / `makeFollower`): a leader gets the image's leader epoch,
/// partition epoch, replicas and ISR, with `config`'s `min.insync.replicas` and the
/// broker's `replica.lag.time.max.ms`; a follower
/// its leader and leader epoch (the replica fetcher on shard
/// [`crate::replica_fetcher::FETCHER_SHARD`] fetches it). For a `__consumer_offsets`
/// partition the group coordinator follows: elected with the leadership (its groups
/// load), resigned without it (module invariants 2 and 3).
async fn apply_role(
    shard: &Shard,
    tp: &TopicPartition,
    partition: &LocalPartition,
    config: &TopicConfig,
) {
    use replication::runtime::{Clock, NodeId};
    let meta = shard.metadata();
    let Some(image) = meta.partition(&tp.topic, tp.partition) else {
        return;
    };
    let node = shard.config.node_id;
    if image.leader == node {
        let leadership = replication::Leadership {
            leader_epoch: storage::LeaderEpoch(image.leader_epoch),
            partition_epoch: image.partition_epoch,
            replicas: image.replicas.iter().copied().map(NodeId).collect(),
            isr: image.isr.iter().copied().map(NodeId).collect(),
        };
        let isr_config = replication::IsrConfig {
            min_insync_replicas: usize::try_from(min_insync_replicas(shard, &meta, tp, config))
                .unwrap_or(1)
                .max(1),
            replica_lag_time_max_ms: i64::try_from(shard.config.replica_lag_time_max_ms)
                .unwrap_or(i64::MAX),
        };
        let now = crate::seam::ShardRuntime.now();
        let was = partition.leader_epoch();
        let result = partition.become_leader(leadership, isr_config, now).await;
        if result.is_ok() && was.0 < image.leader_epoch {
            // Kafka's "Leader ... starts at leader epoch" line.
            tracing::info!(%tp, leader_epoch = image.leader_epoch,
                log_end_offset = %partition.log().log_end_offset(), "became the leader");
        }
        match result {
            Ok(()) if tp.topic == crate::groups::OFFSETS_TOPIC => {
                shard.groups.on_election(tp.partition, image.leader_epoch);
            }
            Ok(()) if tp.topic == crate::txn::TXN_TOPIC => {
                shard.txns.on_election(tp.partition, image.leader_epoch);
            }
            Ok(()) => {}
            Err(e) => {
                tracing::error!(%tp, error = %e, "cannot become the partition's leader");
            }
        }
        return;
    }
    if image.leader >= 0 {
        if partition.leader_epoch().0 < image.leader_epoch {
            tracing::info!(%tp, leader = image.leader, leader_epoch = image.leader_epoch,
                "following the leader");
        }
        partition.become_follower(
            NodeId(image.leader),
            storage::LeaderEpoch(image.leader_epoch),
        );
    }
    // Another broker leads (or none does): this broker's coordinator lets the ids go.
    if tp.topic == crate::txn::TXN_TOPIC {
        shard.txns.on_resignation(
            tp.partition,
            Some(image.leader_epoch),
            shard.txn_partition_count(),
        );
    }
    // … and the groups.
    if tp.topic == crate::groups::OFFSETS_TOPIC {
        shard.groups.on_resignation(
            tp.partition,
            Some(image.leader_epoch),
            shard.offsets_partition_count(),
        );
    }
}

/// `min.insync.replicas` of `tp`'s topic: its override, else the broker's dynamic value
/// (this broker's, else the cluster default, as Kafka 4.4's controller writes one), else
/// `config`'s (the start-up default).
fn min_insync_replicas(
    shard: &Shard,
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
                shard.config.node_id,
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
async fn delete_partition(shard: &Shard, tp: &TopicPartition) {
    if tp.topic == crate::txn::TXN_TOPIC {
        shard
            .txns
            .on_resignation(tp.partition, None, shard.txn_partition_count());
    }
    if tp.topic == crate::groups::OFFSETS_TOPIC {
        shard
            .groups
            .on_resignation(tp.partition, None, shard.offsets_partition_count());
    }
    let owned = shard.partitions.borrow_mut().remove(tp);
    shard.topic_configs.borrow_mut().remove(tp);
    if let Some(owned) = owned {
        owned.log().discard().await;
        owned.close_waiters();
    }
    let dir = partition_dir(shard, tp);
    let doomed = shard.config.data_dir.join(format!(
        "{}.{}{DELETED_DIR_SUFFIX}",
        tp.dir_name(),
        uuid::Uuid::new_v4().simple()
    ));
    let renamed = {
        let doomed = doomed.clone();
        crate::rt::spawn_blocking(move || match std::fs::rename(&dir, &doomed) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            other => other.map(|()| true),
        })
        .await
    };
    match renamed {
        Ok(true) => spawn_into(Some(shard.queues.background), remove_deleted_dir(doomed)),
        Ok(false) => {}
        Err(e) => tracing::warn!(%tp, error = %e, "renaming deleted partition directory"),
    }
}

/// Opens the log of `tp`, which `shard` owns, applies its role and starts serving it (module
/// invariant 1). Errors: [`StorageError::Closed`] when the shard is stopping or the topic was
/// deleted while the log opened, else the log's own.
pub async fn open_partition(
    shard: &Shard,
    tp: &TopicPartition,
    config: TopicConfig,
) -> Result<Rc<LocalPartition>, StorageError> {
    // Opens of one partition are serialised, so two tasks never open one log twice.
    let _turn = shard.opening.take(tp).await;
    if let Some(owned) = shard.partitions.borrow().get(tp).cloned() {
        return Ok(owned);
    }
    if shard.stop.is_requested() {
        return Err(StorageError::Closed);
    }
    let dir = partition_dir(shard, tp);
    let log = PartitionLog::open(&dir, log_config(tp, &config), &shard.cache).await?;
    // The topic may have been deleted (its directory renamed away) while the log opened.
    if shard.metadata().owner(&tp.topic, tp.partition) != Some(shard.id) {
        log.discard().await;
        return Err(StorageError::Closed);
    }
    let owned = Rc::new(replication::Partition::new(
        log,
        replication::runtime::NodeId(shard.config.node_id),
        Rc::new(crate::seam::ShardRuntime),
    ));
    apply_role(shard, tp, &owned, &config).await;
    shard.topic_configs.borrow_mut().insert(tp.clone(), config);
    shard
        .partitions
        .borrow_mut()
        .insert(tp.clone(), owned.clone());
    Ok(owned)
}

/// [`open_partition`] as the shard's [`crate::shard::OpenPartition`] (what the runtime hands
/// [`Shard::new`]).
pub fn open_partition_boxed<'a>(
    shard: &'a Shard,
    tp: &'a TopicPartition,
    config: TopicConfig,
) -> LocalBoxFuture<'a, Result<Rc<LocalPartition>, StorageError>> {
    Box::pin(open_partition(shard, tp, config))
}
