//! The group service: runs a [`GroupOp`] on the shard coordinating its group (routing it over
//! the shard mesh when that is another shard), loads (replays) a `__consumer_offsets`
//! partition into the shard's [`super::coordinator::GroupCoordinator`] once this broker became
//! its leader (elections and resignations are recorded there by the shard, without I/O:
//! [`super::GroupCoordinator::on_election`]), and makes commits and membership changes
//! durable as `acks=all` appends to the group's offsets partition before they are
//! acknowledged (Kafka's `offsets.commit.required.acks = -1`: replicated to the ISR).
//!
//! The ops themselves, the load and the deadline check are [`super::engine`]'s, over the
//! shard as their [`GroupsHost`]; this file routes, checks that this shard coordinates the
//! group's partition, and gives the engine the shard's clock and offsets partitions.

use super::coordinator::Replayed;
use super::engine::{self, GroupsHost};
use super::error::GroupError;
use super::expiry::Expiry;
use super::group::{self, GroupState};
use super::offsets_log::OffsetsRecord;
use super::ops::{GroupOp, GroupReply, ListedGroup, TxnProducer};
use super::{partition_for, DEADLINE_CHECK_INTERVAL, OFFSETS_TOPIC, OFFSET_COMMIT_TIMEOUT};
use crate::coordinator_runtime::LoadId;
use crate::messages::ShardMsg;
use crate::shard::Shard;
use futures_channel::oneshot;
use replication::metadata::{ControllerError, ControllerOp};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Instant;
use storage::TopicPartition;

/// Runs `op` on the shard coordinating `group_id`, creating `__consumer_offsets` first if
/// this is the cluster's first group.
pub async fn call(shard: &Rc<Shard>, group_id: &str, op: GroupOp) -> GroupReply {
    // The stored records carry the id as a Kafka (int16-length) string.
    if group_id.len() > i16::MAX as usize {
        return GroupReply::Error(GroupError::InvalidGroupId);
    }
    let partitions = match ensure_offsets_topic(shard).await {
        Ok(n) => n,
        Err(error) => return GroupReply::Error(error),
    };
    let partition = partition_for(group_id, partitions);
    let meta = shard.metadata();
    let Some(owner) = meta.owner(OFFSETS_TOPIC, partition) else {
        return GroupReply::Error(GroupError::NotCoordinator);
    };
    // The coordinator is the leader of the group's offsets partition (FindCoordinator).
    if !meta.leads(OFFSETS_TOPIC, partition) {
        return GroupReply::Error(GroupError::NotCoordinator);
    }
    drop(meta);
    if owner == shard.id {
        return run_op(shard, partition, group_id, op).await;
    }
    let (reply, answer) = oneshot::channel();
    let msg = ShardMsg::Group {
        partition,
        group_id: group_id.to_string(),
        op,
        reply,
    };
    if shard.send(owner, msg).await.is_err() {
        return GroupReply::Error(GroupError::CoordinatorNotAvailable);
    }
    answer
        .await
        .unwrap_or(GroupReply::Error(GroupError::CoordinatorNotAvailable))
}

/// The partition count of `__consumer_offsets`, creating it with
/// `offsets.topic.num.partitions` partitions if it does not exist (Kafka creates it on the
/// first FindCoordinator too). Errors: `CoordinatorNotAvailable` when it cannot be created.
pub async fn ensure_offsets_topic(shard: &Rc<Shard>) -> Result<usize, GroupError> {
    if let Some(t) = shard.metadata().topics.get(OFFSETS_TOPIC) {
        return Ok(t.partitions.len());
    }
    let overrides = offsets_topic_overrides(&shard.config);
    let op = ControllerOp::CreateTopic {
        assignment: None,
        name: OFFSETS_TOPIC.to_string(),
        partitions: shard.config.offsets_topic_num_partitions,
        replication_factor: offsets_replication_factor(shard)?,
        overrides,
        internal: true,
        validate_only: false,
    };
    match crate::controller::call(shard, op).await {
        Ok(()) | Err(ControllerError::TopicAlreadyExists { .. }) => {}
        Err(e) => {
            tracing::warn!(error = %e, "cannot create {OFFSETS_TOPIC}");
            return Err(GroupError::CoordinatorNotAvailable);
        }
    }
    shard
        .metadata()
        .topics
        .get(OFFSETS_TOPIC)
        .map(|t| t.partitions.len())
        .ok_or(GroupError::CoordinatorNotAvailable)
}

/// The topic configs `__consumer_offsets` is created with, Kafka's
/// (`GroupCoordinatorService.groupMetadataTopicConfigs`): compacted (`cleanup.policy=compact`,
/// so retention deletes none of it; the cleaner keeps each key's latest record),
/// `segment.bytes` from `offsets.topic.segment.bytes`, and `compression.type=producer`. Set on
/// the topic, so DescribeConfigs shows them as DYNAMIC_TOPIC_CONFIG, as Kafka does. (A topic
/// created by an older Sluice keeps its `retention.ms=-1` instead.)
pub fn offsets_topic_overrides(config: &tuning::config::BrokerConfig) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("cleanup.policy".to_string(), "compact".to_string()),
        ("compression.type".to_string(), "producer".to_string()),
        (
            "segment.bytes".to_string(),
            config.offsets_topic_segment_bytes.to_string(),
        ),
    ])
}

/// The replication factor `__consumer_offsets` is created with: `offsets.topic.replication.factor`,
/// at most `BrokerConfig::internal_topic_replicas_max` (the larger of the voters and the
/// registered brokers), so a single node gets its offsets topic with the default of 3 (Kafka
/// would wait for three brokers). As Kafka, the topic is not created with fewer replicas while
/// brokers are down: `CoordinatorNotAvailable` until that many are active (registered,
/// unfenced, not shutting down), which clients retry.
fn offsets_replication_factor(shard: &Shard) -> Result<i16, GroupError> {
    let nodes = shard
        .config
        .internal_topic_replicas_max(shard.metadata().brokers.len());
    let factor = shard
        .config
        .offsets_topic_replication_factor
        .min(i16::try_from(nodes).unwrap_or(i16::MAX));
    let active = shard
        .metadata()
        .brokers
        .values()
        .filter(|b| b.is_active())
        .count();
    if active < usize::try_from(factor).unwrap_or(usize::MAX) {
        tracing::info!(
            factor,
            active,
            "{OFFSETS_TOPIC} waits for enough active brokers to be created"
        );
        return Err(GroupError::CoordinatorNotAvailable);
    }
    Ok(factor)
}

/// Runs `op` here, where `partition` of `__consumer_offsets` is owned.
pub async fn run_op(shard: &Rc<Shard>, partition: i32, group_id: &str, op: GroupOp) -> GroupReply {
    if let Err(error) = coordinating(shard, partition) {
        if error == GroupError::CoordinatorLoadInProgress {
            // A log that failed to open at start gets no role, so no election, until it is
            // opened: open it now (its role is then applied, and the coordinator elected).
            let tp = TopicPartition {
                topic: OFFSETS_TOPIC.to_string(),
                partition,
            };
            if let Err(e) = crate::partitions::service::owned_partition(shard, &tp).await {
                tracing::warn!(%tp, error = %e, "offsets partition cannot be opened");
            }
        }
        return GroupReply::Error(error);
    }
    engine::run(&**shard, partition, group_id, op).await
}

/// The shard is the group coordinator's host: its clock, its `__consumer_offsets`
/// partitions (appended `acks=all` through the partition service, replayed from the log).
impl GroupsHost for Shard {
    fn coordinator(&self) -> &super::GroupCoordinator {
        &self.groups
    }

    fn now(&self) -> Instant {
        Instant::now()
    }

    fn epoch_ms(&self) -> i64 {
        group::epoch_ms()
    }

    fn offsets_partition_count(&self) -> usize {
        Shard::offsets_partition_count(self)
    }

    async fn append_as(
        &self,
        partition: i32,
        records: &[OffsetsRecord],
        producer: Option<TxnProducer>,
    ) -> Result<i64, GroupError> {
        append_offsets_records(self, partition, records, producer).await
    }

    async fn replay(
        &self,
        partition: i32,
        apply: &mut dyn FnMut(Replayed),
    ) -> Result<(), GroupError> {
        replay(self, partition, apply).await
    }
}

/// Appends `records` to `__consumer_offsets` partition `partition` (which this shard
/// owns and leads) with `acks=all` — answered once the ISR has them, which is what lets
/// the offsets outlive this broker — as a transactional batch of `producer` when given
/// (with the coordinator's origin), and waits until they are on this broker's disk. Returns
/// the first record's offset. Errors: `InvalidCommitOffsetSize` for a commit too large for a
/// batch, `InvalidProducerEpoch` for a fenced producer, `NotCoordinator` when the leadership
/// or the log was lost, else `CoordinatorNotAvailable` (e.g. the ISR did not have them within
/// `offsets.commit.timeout.ms`).
async fn append_offsets_records(
    shard: &Shard,
    partition: i32,
    records: &[OffsetsRecord],
    producer: Option<TxnProducer>,
) -> Result<i64, GroupError> {
    let batch = engine::offsets_batch(records, group::epoch_ms(), producer);
    let tp = TopicPartition {
        topic: OFFSETS_TOPIC.to_string(),
        partition,
    };
    // Kafka's CoordinatorOperationExceptionHelper (`GroupError`'s `From`): a leader that lost
    // its leadership (or its log) is no coordinator any more, so the client looks the
    // coordinator up again.
    crate::coordinator_runtime::log::append(shard, &tp, batch, OFFSET_COMMIT_TIMEOUT)
        .await
        .map_err(GroupError::from)
}

/// Whether this shard may serve the groups of offsets `partition` now. Errors:
/// `CoordinatorLoadInProgress` while it loads, and while the installed metadata already names
/// this broker its leader but the shard has not applied that role yet (the shard elects the
/// coordinator once its replica is the leader: a load before that could miss commits the old
/// leader still appends, as Kafka calls `onElection` only after `makeLeader`);
/// `NotCoordinator` when this broker does not lead it, or its load failed.
fn coordinating(shard: &Shard, partition: i32) -> Result<(), GroupError> {
    let partitions = shard.groups.partitions.borrow();
    if partitions.state(partition).is_none() && shard.metadata().leads(OFFSETS_TOPIC, partition) {
        return Err(GroupError::CoordinatorLoadInProgress);
    }
    partitions.check(partition).map_err(GroupError::from)
}

/// Until shutdown: starts each load this shard's coordinator queues (an election,
/// [`super::GroupCoordinator::on_election`]) as a task of its own, which replays the
/// partition. Kept apart from [`deadline_loop`], which may wait for appends.
pub async fn load_loop(shard: &Rc<Shard>) {
    while let Some(loads) = shard.groups.next_loads().await {
        for (partition, load) in loads {
            let task = Rc::clone(shard);
            crate::shard::spawn_into(None, async move {
                load_partition(&task, partition, load).await;
            });
        }
    }
}

/// Runs `load` of offsets `partition` ([`engine::load`]).
async fn load_partition(shard: &Rc<Shard>, partition: i32, load: LoadId) {
    engine::load(&**shard, partition, load).await;
}

/// Hands the records stored in offsets `partition` (which this shard owns), read from its log
/// start to its log end, to `apply`. Errors: `COORDINATOR_NOT_AVAILABLE` when its log cannot
/// be read.
async fn replay(
    shard: &Shard,
    partition: i32,
    apply: &mut dyn FnMut(Replayed),
) -> Result<(), GroupError> {
    let tp = TopicPartition {
        topic: OFFSETS_TOPIC.to_string(),
        partition,
    };
    crate::coordinator_runtime::log::replay(shard, &tp, &mut |batch| {
        engine::replay_batch(batch, partition, apply)
    })
    .await
    .map_err(|_| GroupError::CoordinatorNotAvailable)
}

/// A transaction marker of `producer_id` ending with `end` was written to offsets
/// `partition` (WriteTxnMarkers, after the marker's append): the shard coordinating the
/// partition materialises or discards the pending transactional offsets of its groups
/// (Kafka's `GroupCoordinator.onTransactionCompleted`). Errors: `NotCoordinator` when this
/// broker does not coordinate the partition, `CoordinatorLoadInProgress` while it loads (its
/// replay may not reach the marker: the transaction coordinator retries the marker), or
/// `CoordinatorNotAvailable` when the owning shard is unavailable.
pub async fn on_txn_marker(
    shard: &Rc<Shard>,
    partition: i32,
    producer_id: i64,
    end: storage::TxnResult,
) -> Result<(), GroupError> {
    let Some(owner) = shard.metadata().owner(OFFSETS_TOPIC, partition) else {
        return Err(GroupError::NotCoordinator);
    };
    if owner == shard.id {
        return complete_transaction_here(shard, partition, producer_id, end);
    }
    let (reply, answer) = oneshot::channel();
    let msg = ShardMsg::TxnMarker {
        partition,
        producer_id,
        end,
        reply,
    };
    if shard.send(owner, msg).await.is_err() {
        return Err(GroupError::CoordinatorNotAvailable);
    }
    answer
        .await
        .unwrap_or(Err(GroupError::CoordinatorNotAvailable))
}

/// [`on_txn_marker`] on the shard that owns offsets `partition`.
pub fn complete_transaction_here(
    shard: &Shard,
    partition: i32,
    producer_id: i64,
    end: storage::TxnResult,
) -> Result<(), GroupError> {
    coordinating(shard, partition)?;
    let groups = engine::complete_transaction(shard, partition, producer_id, end);
    tracing::debug!(
        partition,
        producer_id,
        ?end,
        groups,
        "transaction completed"
    );
    Ok(())
}

/// This shard's groups (ListGroups). Errors: `CoordinatorLoadInProgress` while an offsets
/// partition this broker leads is loading (Kafka fails the whole ListGroups so, as the list
/// would be incomplete).
pub fn list_local(shard: &Rc<Shard>) -> Result<Vec<ListedGroup>, GroupError> {
    for p in led_offsets_partitions(shard) {
        if coordinating(shard, p) == Err(GroupError::CoordinatorLoadInProgress) {
            return Err(GroupError::CoordinatorLoadInProgress);
        }
    }
    Ok(shard
        .groups
        .groups
        .borrow()
        .values()
        .filter(|g| g.state() != GroupState::Dead)
        .map(|g| ListedGroup {
            group_id: g.id.clone(),
            protocol_type: g.protocol_type().unwrap_or_default().to_string(),
            state: g.state().name(),
        })
        .collect())
}

/// The `__consumer_offsets` partitions this shard owns and this broker leads.
fn led_offsets_partitions(shard: &Shard) -> Vec<i32> {
    let metadata = shard.metadata();
    metadata
        .topics
        .get(OFFSETS_TOPIC)
        .map(|t| {
            metadata
                .owned_partitions(t, shard.id)
                .filter(|p| metadata.leads(OFFSETS_TOPIC, *p))
                .collect()
        })
        .unwrap_or_default()
}

/// Every shard's groups, in shard order. Errors: as [`list_local`], from any shard.
pub async fn list_all(shard: &Rc<Shard>) -> Result<Vec<ListedGroup>, GroupError> {
    let mut out = Vec::new();
    for peer in 0..shard.shards {
        if peer == shard.id {
            out.extend(list_local(shard)?);
            continue;
        }
        let (reply, answer) = oneshot::channel();
        if shard
            .send(peer, ShardMsg::ListGroups { reply })
            .await
            .is_ok()
        {
            if let Ok(groups) = answer.await {
                out.extend(groups?);
            }
        }
    }
    Ok(out)
}

/// Applies group deadlines every [`DEADLINE_CHECK_INTERVAL`] until shutdown, when it answers
/// every parked request and ends [`load_loop`].
pub async fn deadline_loop(shard: &Rc<Shard>) {
    loop {
        if shard.sleep_unless_stopped(DEADLINE_CHECK_INTERVAL).await {
            engine::unload_all(&shard.groups);
            return;
        }
        engine::tick_deadlines(&**shard).await;
    }
}

/// Expires committed offsets every `offsets.retention.check.interval.ms` until shutdown
/// (Kafka's `cleanupGroupMetadata`), by [`super::expiry`]'s rule: tombstones for the expired
/// offsets, or DeleteGroups' records (every offset and the group) for an Empty group that
/// keeps none. Only groups of offsets partitions this shard coordinates now.
pub async fn expiry_loop(shard: &Rc<Shard>) {
    let cfg = shard.groups.config;
    let interval = std::time::Duration::from_millis(cfg.offsets_retention_check_interval_ms);
    loop {
        if shard.sleep_unless_stopped(interval).await {
            return;
        }
        let partitions = shard.offsets_partition_count();
        let ids: Vec<String> = shard.groups.groups.borrow().keys().cloned().collect();
        for id in ids {
            let partition = partition_for(&id, partitions);
            if coordinating(shard, partition).is_err() {
                continue;
            }
            // Decided and issued with no await between, so a commit that arrives meanwhile
            // is appended after these tombstones and wins on replay.
            let decision = match shard.groups.groups.borrow().get(&id) {
                Some(g) => super::expiry::expiry(g, group::epoch_ms(), cfg.offsets_retention_ms),
                None => continue,
            };
            match decision {
                Expiry::Keep => {}
                Expiry::Group => {
                    if let GroupReply::Error(error) =
                        engine::delete_group(&**shard, partition, &id).await
                    {
                        tracing::warn!(group = %id, ?error, "could not remove an expired group");
                    } else {
                        tracing::info!(group = %id, "removed an expired empty group");
                    }
                }
                Expiry::Offsets(keys) => {
                    engine::expire_offsets(&**shard, partition, &id, keys).await
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_topic_is_created_compacted_as_kafka() {
        let config = tuning::config::BrokerConfig::default();
        let overrides = offsets_topic_overrides(&config);
        let topic = crate::metadata::overrides_config(&overrides, &config.topic_defaults)
            .expect("Kafka's offsets topic configs are valid");
        assert_eq!(topic.log.cleanup_policy, storage::CleanupPolicy::Compact);
        assert!(
            !topic.log.cleanup_policy.deletes(),
            "retention deletes none of it"
        );
        assert_eq!(topic.log.segment_bytes, 104_857_600);
        for key in ["cleanup.policy", "compression.type", "segment.bytes"] {
            assert!(
                topic.is_set(key),
                "{key} set on the topic (DYNAMIC_TOPIC_CONFIG)"
            );
        }
    }
}
