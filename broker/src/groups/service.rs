//! The group service: runs a [`GroupOp`] on the shard coordinating its group (routing it over
//! the shard mesh when that is another shard), loads (replays) a `__consumer_offsets`
//! partition into the shard's [`super::coordinator::GroupCoordinator`] once this broker became
//! its leader (elections and resignations are recorded there by the shard, without I/O:
//! [`super::GroupCoordinator::on_election`]), and makes commits and membership changes
//! durable as `acks=all` appends to the group's offsets partition before they are
//! acknowledged (Kafka's `offsets.commit.required.acks = -1`: replicated to the ISR).

use super::coordinator::{self, LoadId};
use super::error::GroupError;
use super::expiry::Expiry;
use super::group::GroupState;
use super::group::{self, Answer, Group, JoinResult, SyncOutcome, SyncResult};
use super::offsets_log::{CommittedOffset, OffsetsRecord};
use super::ops::{
    DescribedMember, GroupDescription, GroupOp, GroupReply, ListedGroup, OffsetCommitEntry,
};
use super::{
    partition_for, DEADLINE_CHECK_INTERVAL, OFFSETS_TOPIC, OFFSET_COMMIT_TIMEOUT,
    OFFSET_METADATA_MAX_BYTES, REPLAY_READ_BYTES,
};
use crate::messages::ShardMsg;
use crate::partitions::{PartitionOp, PartitionReply};
use crate::shard::Shard;
use bytes::Bytes;
use futures_channel::oneshot;
use replication::metadata::{ControllerError, ControllerOp};
use replication::Acks;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::time::Instant;
use storage::{Offset, TimestampMs, TopicPartition};

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
/// at most the cluster's size — its `controller.quorum.voters` (every Sluice node is a
/// combined broker and voter), one without them — so a single node gets its offsets topic with
/// the default of 3 (Kafka would wait for three brokers). As Kafka, the topic is not created
/// with fewer replicas while brokers are down: `CoordinatorNotAvailable` until that many are
/// active (registered, unfenced, not shutting down), which clients retry.
fn offsets_replication_factor(shard: &Shard) -> Result<i16, GroupError> {
    let nodes = shard.config.controller_quorum_voters.len().max(1);
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
    let reply = run_group_op_inner(shard, partition, group_id, op).await;
    // A refused join or commit must not leave an empty group behind.
    drop_if_vacant(shard, group_id);
    reply
}

fn drop_if_vacant(shard: &Shard, group_id: &str) {
    let mut groups = shard.groups.groups.borrow_mut();
    if groups.get(group_id).is_some_and(Group::is_vacant) {
        groups.remove(group_id);
    }
}

async fn run_group_op_inner(
    shard: &Rc<Shard>,
    partition: i32,
    group_id: &str,
    op: GroupOp,
) -> GroupReply {
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
    let now = Instant::now();
    let cfg = shard.groups.config;
    match op {
        GroupOp::Join(params) => join_group(shard, partition, group_id, params, now).await,
        GroupOp::Sync(params) => sync_group(shard, partition, group_id, params, now).await,
        GroupOp::Heartbeat {
            member_id,
            group_instance_id,
            generation,
        } => {
            let error = try_with_group(shard, group_id, false, |g| {
                g.heartbeat(&member_id, group_instance_id.as_deref(), generation, now)
            });
            match error.unwrap_or(Err(GroupError::UnknownMemberId)) {
                Ok(()) => GroupReply::Done,
                Err(error) => GroupReply::Error(error),
            }
        }
        GroupOp::Leave { members } => {
            let errors = try_with_group(shard, group_id, false, |g| g.leave(&members, now, &cfg));
            persist_membership(shard, partition, group_id).await;
            GroupReply::Leave(
                errors.unwrap_or_else(|| vec![Err(GroupError::UnknownMemberId); members.len()]),
            )
        }
        GroupOp::Commit {
            member_id,
            group_instance_id,
            generation,
            offsets,
        } => {
            commit_offsets(
                shard,
                partition,
                group_id,
                &member_id,
                group_instance_id.as_deref(),
                generation,
                offsets,
            )
            .await
        }
        GroupOp::FetchOffsets { partitions } => fetch_offsets(shard, group_id, partitions),
        GroupOp::Describe => describe_local(shard, group_id),
        GroupOp::Delete => delete_group(shard, partition, group_id).await,
        GroupOp::DeleteOffsets { partitions } => {
            delete_offsets(shard, partition, group_id, partitions).await
        }
    }
}

/// JoinGroup: the group answers now or once the join completes; what it queued is appended.
async fn join_group(
    shard: &Shard,
    partition: i32,
    group_id: &str,
    params: group::JoinParams,
    now: Instant,
) -> GroupReply {
    let cfg = shard.groups.config;
    let answer = try_with_group(shard, group_id, true, |g| g.join(params, now, &cfg));
    persist_membership(shard, partition, group_id).await;
    GroupReply::Join(match answer {
        Some(Answer::Now(r)) => r,
        Some(Answer::Later(rx)) => rx
            .await
            .unwrap_or_else(|_| JoinResult::error(GroupError::CoordinatorNotAvailable, "")),
        None => JoinResult::error(GroupError::UnknownMemberId, ""),
    })
}

/// SyncGroup: the leader's assignment is appended before the members get it.
async fn sync_group(
    shard: &Shard,
    partition: i32,
    group_id: &str,
    params: group::SyncParams,
    now: Instant,
) -> GroupReply {
    let cfg = shard.groups.config;
    let outcome = try_with_group(shard, group_id, false, |g| g.sync(params, now));
    let rx = match outcome {
        None => return sync_error(GroupError::UnknownMemberId),
        Some(SyncOutcome::Answer(Answer::Now(r))) => return GroupReply::Sync(r),
        Some(SyncOutcome::Answer(Answer::Later(rx))) => rx,
        Some(SyncOutcome::Persist {
            generation,
            record,
            answer,
        }) => {
            let stored = OffsetsRecord::Group {
                group: group_id.to_string(),
                value: Some(record),
            };
            let result = append_offsets_records(shard, partition, &[stored]).await;
            try_with_group(shard, group_id, false, |g| {
                g.finish_sync(generation, result, Instant::now(), &cfg);
            });
            persist_membership(shard, partition, group_id).await;
            answer
        }
    };
    GroupReply::Sync(
        rx.await
            .unwrap_or_else(|_| SyncResult::error(GroupError::RebalanceInProgress)),
    )
}

/// OffsetFetch: the committed offsets of `partitions` (`None`: all of the group's).
fn fetch_offsets(
    shard: &Shard,
    group_id: &str,
    partitions: Option<Vec<(String, Vec<i32>)>>,
) -> GroupReply {
    let groups = shard.groups.groups.borrow();
    let group = groups.get(group_id);
    let offsets = match partitions {
        Some(wanted) => wanted
            .into_iter()
            .flat_map(|(topic, ps)| ps.into_iter().map(move |p| (topic.clone(), p)))
            .map(|(topic, p)| {
                let c = group.and_then(|g| g.offsets.get(&(topic.clone(), p)));
                (topic, p, c.cloned())
            })
            .collect(),
        None => group.map_or_else(Vec::new, |g| {
            g.offsets
                .iter()
                .map(|((t, p), c)| (t.clone(), *p, Some(c.clone())))
                .collect()
        }),
    };
    GroupReply::Offsets(offsets)
}

/// DescribeGroups: the group here, or Dead when there is none.
fn describe_local(shard: &Shard, group_id: &str) -> GroupReply {
    let groups = shard.groups.groups.borrow();
    GroupReply::Described(match groups.get(group_id) {
        Some(g) => describe(g),
        None => GroupDescription {
            state: GroupState::Dead.name(),
            protocol_type: String::new(),
            protocol: String::new(),
            members: Vec::new(),
        },
    })
}

/// Runs `f` on the group (creating it when `create`); `None` when it does not exist.
fn try_with_group<T>(
    shard: &Shard,
    group_id: &str,
    create: bool,
    f: impl FnOnce(&mut Group) -> T,
) -> Option<T> {
    let mut groups = shard.groups.groups.borrow_mut();
    if create && !groups.contains_key(group_id) {
        groups.insert(group_id.to_string(), Group::new(group_id));
    }
    groups.get_mut(group_id).map(f)
}

/// Appends the membership records the group queued (a rebalance that emptied it, a
/// static member replaced); failures are logged: the next change writes it again.
async fn persist_membership(shard: &Shard, partition: i32, group_id: &str) {
    let pending =
        try_with_group(shard, group_id, false, Group::take_to_persist).unwrap_or_default();
    let Some(latest) = pending.into_iter().last() else {
        return;
    };
    let record = OffsetsRecord::Group {
        group: group_id.to_string(),
        value: Some(latest),
    };
    if let Err(error) = append_offsets_records(shard, partition, &[record]).await {
        tracing::warn!(group = group_id, %error, "could not store group membership");
    }
}

async fn commit_offsets(
    shard: &Shard,
    partition: i32,
    group_id: &str,
    member_id: &str,
    instance: Option<&str>,
    generation: i32,
    offsets: Vec<OffsetCommitEntry>,
) -> GroupReply {
    let now = Instant::now();
    // Kafka: a member's commit (generation ≥ 0) to a group that does not exist is stale;
    // a simple commit (generation < 0) creates the group.
    let exists = shard.groups.groups.borrow().contains_key(group_id);
    let allowed = if !exists && generation >= 0 {
        Err(GroupError::IllegalGeneration)
    } else {
        try_with_group(shard, group_id, true, |g| {
            let allowed = g.check_commit(member_id, instance, generation, now);
            if allowed.is_ok() {
                g.commits_in_flight += 1;
            }
            allowed
        })
        .unwrap_or(Err(GroupError::CoordinatorNotAvailable))
    };
    if let Err(error) = allowed {
        return GroupReply::PartitionErrors(
            offsets
                .iter()
                .map(|o| (o.topic.clone(), o.partition, Err(error)))
                .collect(),
        );
    }
    let commit_timestamp_ms = group::epoch_ms();
    let mut records = Vec::new();
    let mut results = Vec::new();
    for o in &offsets {
        let metadata = o.metadata.clone().unwrap_or_default();
        if metadata.len() > OFFSET_METADATA_MAX_BYTES {
            results.push((
                o.topic.clone(),
                o.partition,
                Err(GroupError::OffsetMetadataTooLarge),
            ));
            continue;
        }
        results.push((o.topic.clone(), o.partition, Ok(())));
        records.push(OffsetsRecord::Offset {
            group: group_id.to_string(),
            topic: o.topic.clone(),
            partition: o.partition,
            value: Some(CommittedOffset {
                offset: o.offset,
                leader_epoch: o.leader_epoch,
                metadata,
                commit_timestamp_ms,
            }),
        });
    }
    let appended = if records.is_empty() {
        Ok(())
    } else {
        append_offsets_records(shard, partition, &records).await
    };
    // A DeleteGroups that ran during the append wrote its tombstones after this commit:
    // the group stays deleted (not re-created), as the log will replay it.
    try_with_group(shard, group_id, false, |g| {
        g.commits_in_flight = g.commits_in_flight.saturating_sub(1);
        if appended.is_err() {
            return;
        }
        for record in records {
            if let OffsetsRecord::Offset {
                topic,
                partition,
                value: Some(value),
                ..
            } = record
            {
                g.offsets.insert((topic, partition), value);
            }
        }
    });
    if let Err(error) = appended {
        for r in results.iter_mut().filter(|r| r.2.is_ok()) {
            r.2 = Err(error);
        }
    }
    GroupReply::PartitionErrors(results)
}

async fn delete_group(shard: &Shard, partition: i32, group_id: &str) -> GroupReply {
    let tombstones = {
        let groups = shard.groups.groups.borrow();
        let Some(g) = groups.get(group_id) else {
            return GroupReply::Error(GroupError::GroupIdNotFound);
        };
        if g.state() == GroupState::Dead {
            return GroupReply::Error(GroupError::GroupIdNotFound);
        }
        if g.state() != GroupState::Empty || !g.is_empty() {
            return GroupReply::Error(GroupError::NonEmptyGroup);
        }
        let mut records: Vec<OffsetsRecord> = g
            .offsets
            .keys()
            .map(|(topic, p)| OffsetsRecord::Offset {
                group: group_id.to_string(),
                topic: topic.clone(),
                partition: *p,
                value: None,
            })
            .collect();
        records.push(OffsetsRecord::Group {
            group: group_id.to_string(),
            value: None,
        });
        records
    };
    // Dead while the tombstones are written: joins and commits meanwhile are refused.
    try_with_group(shard, group_id, false, Group::mark_dead);
    match append_offsets_records(shard, partition, &tombstones).await {
        Ok(()) => {
            shard.groups.groups.borrow_mut().remove(group_id);
            GroupReply::Done
        }
        Err(error) => {
            // Not deleted after all: the group stays as it was (Empty, offsets kept).
            let mut groups = shard.groups.groups.borrow_mut();
            if let Some(g) = groups.remove(group_id) {
                let mut revived = Group::new(group_id);
                revived.offsets = g.offsets;
                groups.insert(group_id.to_string(), revived);
            }
            GroupReply::Error(error)
        }
    }
}

async fn delete_offsets(
    shard: &Shard,
    partition: i32,
    group_id: &str,
    partitions: Vec<(String, Vec<i32>)>,
) -> GroupReply {
    let (subscribed, state, is_consumer) = {
        let groups = shard.groups.groups.borrow();
        let Some(g) = groups.get(group_id) else {
            return GroupReply::Error(GroupError::GroupIdNotFound);
        };
        (
            g.subscribed_topics(),
            g.state(),
            g.protocol_type() == Some("consumer"),
        )
    };
    if state == GroupState::Dead {
        return GroupReply::Error(GroupError::GroupIdNotFound);
    }
    if state != GroupState::Empty && !is_consumer {
        // Kafka: without the consumer protocol the subscriptions cannot be known.
        return GroupReply::Error(GroupError::NonEmptyGroup);
    }
    let mut results = Vec::new();
    let mut tombstones = Vec::new();
    for (topic, ps) in partitions {
        for p in ps {
            // KIP-496: offsets of a topic the active group consumes stay.
            if state != GroupState::Empty && subscribed.contains(&topic) {
                results.push((topic.clone(), p, Err(GroupError::GroupSubscribedToTopic)));
                continue;
            }
            results.push((topic.clone(), p, Ok(())));
            tombstones.push(OffsetsRecord::Offset {
                group: group_id.to_string(),
                topic: topic.clone(),
                partition: p,
                value: None,
            });
        }
    }
    if !tombstones.is_empty() {
        if let Err(error) = append_offsets_records(shard, partition, &tombstones).await {
            return GroupReply::Error(error);
        }
        try_with_group(shard, group_id, false, |g| {
            for t in &tombstones {
                if let OffsetsRecord::Offset {
                    topic, partition, ..
                } = t
                {
                    g.offsets.remove(&(topic.clone(), *partition));
                }
            }
        });
    }
    GroupReply::PartitionErrors(results)
}

/// Appends `records` to `__consumer_offsets` partition `partition` (which this shard
/// owns and leads) with `acks=all` — answered once the ISR has them, which is what lets
/// the offsets outlive this broker — and waits until they are on this broker's disk.
/// Errors: `InvalidCommitOffsetSize` for a commit too large for a batch, `NotCoordinator`
/// when the leadership or the log was lost, else `CoordinatorNotAvailable` (e.g. the ISR did
/// not have them within `offsets.commit.timeout.ms`).
async fn append_offsets_records(
    shard: &Shard,
    partition: i32,
    records: &[OffsetsRecord],
) -> Result<(), GroupError> {
    let encoded: Vec<(Vec<u8>, Option<Vec<u8>>)> =
        records.iter().map(OffsetsRecord::encode).collect();
    let kv: Vec<storage::KeyValue<'_>> = encoded
        .iter()
        .map(|(k, v)| (Some(k.as_slice()), v.as_deref()))
        .collect();
    let batch = storage::build_batch_kv(TimestampMs(group::epoch_ms()), &kv);
    let tp = TopicPartition {
        topic: OFFSETS_TOPIC.to_string(),
        partition,
    };
    // Kafka's CoordinatorOperationExceptionHelper (`GroupError`'s `From`): a leader that lost
    // its leadership (or its log) is no coordinator any more, so the client looks the
    // coordinator up again.
    match crate::partitions::service::run_here(
        shard,
        &tp,
        PartitionOp::Produce {
            records: batch,
            acks: Acks::All,
            timeout: OFFSET_COMMIT_TIMEOUT,
        },
    )
    .await
    {
        PartitionReply::Produced { .. } => {}
        PartitionReply::Error(e) => return Err(GroupError::from(e)),
        other => {
            tracing::error!(?other, "unexpected reply to an offsets append");
            return Err(GroupError::CoordinatorNotAvailable);
        }
    }
    let owned = crate::partitions::service::owned_partition(shard, &tp).await?;
    owned
        .log()
        .flush_to(owned.log().log_end_offset())
        .await
        .map(|_| ())
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
    partitions.check(partition)
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

/// Runs `load` of offsets `partition`: replays its log, then installs its groups unless the
/// partition was resigned meanwhile.
async fn load_partition(shard: &Rc<Shard>, partition: i32, load: LoadId) {
    match replay(shard, partition).await {
        Ok(loaded) => {
            if !shard
                .groups
                .partitions
                .borrow_mut()
                .finish_load(partition, load)
            {
                tracing::info!(partition, "dropping a load whose partition moved meanwhile");
                return;
            }
            let count = loaded.len();
            let mut groups = shard.groups.groups.borrow_mut();
            // Nothing of this partition may be left over (module invariant); unload it anyway.
            coordinator::unload_partition(&mut groups, partition, shard.offsets_partition_count());
            groups.extend(loaded);
            tracing::info!(partition, groups = count, "loaded consumer groups");
        }
        Err(error) => {
            shard
                .groups
                .partitions
                .borrow_mut()
                .fail_load(partition, load);
            tracing::warn!(partition, %error, "cannot load consumer groups");
        }
    }
}

/// The groups stored in offsets `partition` (which this shard owns), read from its log start
/// to its log end. Errors: `COORDINATOR_NOT_AVAILABLE` when its log cannot be read.
async fn replay(shard: &Shard, partition: i32) -> Result<HashMap<String, Group>, GroupError> {
    let tp = TopicPartition {
        topic: OFFSETS_TOPIC.to_string(),
        partition,
    };
    let unavailable = |_| GroupError::CoordinatorNotAvailable;
    let owned = crate::partitions::service::owned_partition(shard, &tp)
        .await
        .map_err(unavailable)?;
    let log = owned.log();
    let end = log.log_end_offset();
    let mut at = log.log_start_offset();
    let now = Instant::now();
    let mut groups = HashMap::new();
    while at < end {
        let batches = log
            .read(at, REPLAY_READ_BYTES, end)
            .await
            .map_err(|_| GroupError::CoordinatorNotAvailable)?;
        let Some(last) = batches.last() else {
            break;
        };
        let next: Offset = last.header().last_offset().plus(1);
        for batch in batches {
            let bytes = batch.to_vec();
            let records = match storage::records_of(&bytes) {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(%tp, error = %e, "skipping unreadable batch");
                    continue;
                }
            };
            for r in records {
                let Some(key) = r.key else { continue };
                match OffsetsRecord::decode(key, r.value) {
                    Ok(Some(record)) => coordinator::apply_record(&mut groups, record, now),
                    Ok(None) => {}
                    Err(why) => tracing::warn!(%tp, offset = r.offset.0, %why,
                        "skipping unreadable record"),
                }
            }
        }
        at = next;
    }
    Ok(groups)
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
            for g in shard.groups.groups.borrow_mut().values_mut() {
                g.unload();
            }
            shard.groups.stop_loads();
            return;
        }
        let now = Instant::now();
        let cfg = shard.groups.config;
        let mut changed = Vec::new();
        for (id, g) in shard.groups.groups.borrow_mut().iter_mut() {
            if g.has_deadlines() {
                g.tick(now, &cfg);
                changed.push(id.clone());
            }
        }
        let partitions = shard.offsets_partition_count();
        for id in changed {
            persist_membership(shard, partition_for(&id, partitions), &id).await;
            drop_if_vacant(shard, &id);
        }
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
                    if let GroupReply::Error(error) = delete_group(shard, partition, &id).await {
                        tracing::warn!(group = %id, ?error, "could not remove an expired group");
                    } else {
                        tracing::info!(group = %id, "removed an expired empty group");
                    }
                }
                Expiry::Offsets(keys) => expire_offsets(shard, partition, &id, keys).await,
            }
        }
    }
}

/// Tombstones `keys` of `group_id` (their retention passed) and forgets those no commit has
/// replaced meanwhile; a failed append leaves them for the next check.
async fn expire_offsets(shard: &Shard, partition: i32, group_id: &str, keys: Vec<(String, i32)>) {
    let expired: Vec<((String, i32), i64)> = {
        let groups = shard.groups.groups.borrow();
        let Some(g) = groups.get(group_id) else {
            return;
        };
        keys.into_iter()
            .filter_map(|k| {
                g.offsets
                    .get(&k)
                    .map(|o| o.commit_timestamp_ms)
                    .map(|t| (k, t))
            })
            .collect()
    };
    let tombstones: Vec<OffsetsRecord> = expired
        .iter()
        .map(|((topic, p), _)| OffsetsRecord::Offset {
            group: group_id.to_string(),
            topic: topic.clone(),
            partition: *p,
            value: None,
        })
        .collect();
    if let Err(error) = append_offsets_records(shard, partition, &tombstones).await {
        tracing::warn!(group = group_id, ?error, "could not expire offsets");
        return;
    }
    tracing::info!(
        group = group_id,
        offsets = expired.len(),
        "expired committed offsets"
    );
    try_with_group(shard, group_id, false, |g| {
        for (key, committed_at_ms) in &expired {
            // A commit that landed meanwhile was appended after the tombstone: it stays.
            if g.offsets
                .get(key)
                .is_some_and(|o| o.commit_timestamp_ms == *committed_at_ms)
            {
                g.offsets.remove(key);
            }
        }
    });
}

fn describe(g: &Group) -> GroupDescription {
    let stable = g.state() == GroupState::Stable;
    GroupDescription {
        state: g.state().name(),
        protocol_type: g.protocol_type().unwrap_or_default().to_string(),
        protocol: if stable {
            g.protocol_name().unwrap_or_default().to_string()
        } else {
            String::new()
        },
        members: g
            .members()
            .into_iter()
            .map(|m| DescribedMember {
                member_id: m.id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                // Kafka shows member metadata and assignments only once they are settled.
                metadata: if stable {
                    g.member_metadata(m)
                } else {
                    Bytes::new()
                },
                assignment: if stable {
                    m.assignment.clone()
                } else {
                    Bytes::new()
                },
            })
            .collect(),
    }
}

fn sync_error(error: GroupError) -> GroupReply {
    GroupReply::Sync(SyncResult::error(error))
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
