//! The group coordinator (DESIGN.md §2): consumer groups and their committed offsets.
//!
//! A group lives on the shard that owns its partition of the internal `__consumer_offsets`
//! topic — partition `abs(javaHashCode(group_id)) % partitions`, as Kafka places it — so every
//! group operation is a typed [`GroupOp`] run there ([`Shard::group_call`]). Commits and
//! membership changes are ordinary appends to that partition's log ([`offsets_log`] holds
//! Kafka's record formats), flushed before they are acknowledged; a shard replays its offsets
//! partitions before it serves their groups, so offsets and groups survive restarts.

pub mod group;
pub mod offsets_log;

use crate::errors::code;
use crate::messages::{Acks, PartitionOp, PartitionReply, ShardMsg};
use crate::shard::Shard;
use bytes::Bytes;
use futures_channel::oneshot;
use group::{Answer, Group, GroupConfig, JoinParams, JoinResult, SyncOutcome, SyncParams};
use group::{GroupState, SyncResult};
use net::kafka_protocol::error::ResponseError;
use offsets_log::{CommittedOffset, OffsetsRecord};
use replication::metadata::{ControllerError, ControllerOp};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::rc::Rc;
use std::time::{Duration, Instant};
use storage::{Offset, TimestampMs, TopicPartition};

/// The internal topic holding committed offsets and group metadata (Kafka's name).
pub const OFFSETS_TOPIC: &str = replication::metadata::CONSUMER_OFFSETS_TOPIC;

/// Largest committed-offset metadata string, bytes (Kafka `offset.metadata.max.bytes`).
pub const OFFSET_METADATA_MAX_BYTES: usize = 4096;

/// Preallocation step of `__consumer_offsets` segments, bytes: its records are small and it
/// has many partitions, so it does not take the data topics' 64 MiB steps.
pub const OFFSETS_PREALLOCATE_STEP_BYTES: u64 = 1 << 20;

/// How often deadlines (sessions, rebalance and initial-delay timeouts) are checked: the
/// resolution of Kafka's timing wheel for these, which are seconds long.
const DEADLINE_CHECK_INTERVAL: Duration = Duration::from_millis(100);

/// Bytes read per step while replaying an offsets partition.
const REPLAY_READ_BYTES: usize = 1 << 20;
/// Longest wait for an offsets append to be written (Kafka's `offsets.commit.timeout.ms`
/// default); past it the commit fails with `COORDINATOR_NOT_AVAILABLE`.
const OFFSET_COMMIT_TIMEOUT: Duration = Duration::from_secs(5);

/// The `__consumer_offsets` partition of `group_id` among `partitions` (Kafka:
/// `Utils.abs(groupId.hashCode) % groupMetadataTopicPartitionCount`, Java's `String.hashCode`
/// over UTF-16 code units).
pub fn partition_for(group_id: &str, partitions: usize) -> i32 {
    let hash = group_id.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    });
    let positive = hash & 0x7fff_ffff;
    let n = i32::try_from(partitions.max(1)).unwrap_or(i32::MAX);
    positive % n
}

/// One partition's commit in an OffsetCommit.
#[derive(Clone, Debug)]
pub struct OffsetCommitEntry {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
}

/// An operation on one group, run by the shard that coordinates it.
#[derive(Debug)]
pub enum GroupOp {
    Join(JoinParams),
    Sync(SyncParams),
    Heartbeat {
        member_id: String,
        group_instance_id: Option<String>,
        generation: i32,
    },
    /// (member id, `group.instance.id`) of each leaving member.
    Leave {
        members: Vec<(String, Option<String>)>,
    },
    Commit {
        member_id: String,
        group_instance_id: Option<String>,
        generation: i32,
        offsets: Vec<OffsetCommitEntry>,
    },
    /// `None`: every committed offset of the group.
    FetchOffsets {
        partitions: Option<Vec<(String, Vec<i32>)>>,
    },
    Describe,
    Delete,
    DeleteOffsets {
        partitions: Vec<(String, Vec<i32>)>,
    },
}

/// A member as DescribeGroups shows it.
#[derive(Clone, Debug)]
pub struct DescribedMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub metadata: Bytes,
    pub assignment: Bytes,
}

/// A group as DescribeGroups shows it.
#[derive(Clone, Debug)]
pub struct GroupDescription {
    pub state: &'static str,
    pub protocol_type: String,
    /// The chosen assignor (empty unless Stable, as in Kafka).
    pub protocol: String,
    pub members: Vec<DescribedMember>,
}

/// A group as ListGroups shows it.
#[derive(Clone, Debug)]
pub struct ListedGroup {
    pub group_id: String,
    pub protocol_type: String,
    pub state: &'static str,
}

/// One committed offset, for the consumer-lag metric.
#[derive(Clone, Debug)]
pub struct CommittedStatus {
    pub group: String,
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
}

/// The coordinating shard's answer to a [`GroupOp`].
#[derive(Debug)]
pub enum GroupReply {
    Join(JoinResult),
    Sync(SyncResult),
    /// The error code of a Heartbeat or DeleteGroups, or of any op that failed as a whole.
    Error(i16),
    /// Per leaving member, in request order.
    Leave(Vec<i16>),
    /// (topic, partition, error) per committed or deleted partition, in request order.
    PartitionErrors(Vec<(String, i32, i16)>),
    /// (topic, partition, committed offset or `None`).
    Offsets(Vec<(String, i32, Option<CommittedOffset>)>),
    Described(GroupDescription),
}

/// Per-shard coordinator state: the groups of the offsets partitions this shard owns.
pub struct GroupCoordinator {
    groups: RefCell<HashMap<String, Group>>,
    /// Offsets partitions replayed into `groups`.
    loaded: RefCell<HashSet<i32>>,
    load_lock: glommio::sync::Semaphore,
    config: GroupConfig,
}

impl GroupCoordinator {
    pub fn new(config: GroupConfig) -> GroupCoordinator {
        GroupCoordinator {
            groups: RefCell::new(HashMap::new()),
            loaded: RefCell::new(HashSet::new()),
            load_lock: glommio::sync::Semaphore::new(1),
            config,
        }
    }

    /// Every committed offset of this shard's groups.
    pub fn committed(&self) -> Vec<CommittedStatus> {
        let groups = self.groups.borrow();
        let mut out = Vec::new();
        for (id, g) in groups.iter() {
            for ((topic, partition), c) in &g.offsets {
                out.push(CommittedStatus {
                    group: id.clone(),
                    topic: topic.clone(),
                    partition: *partition,
                    offset: c.offset,
                });
            }
        }
        out
    }

    /// Applies one replayed record.
    fn apply(&self, record: OffsetsRecord, now: Instant) {
        let mut groups = self.groups.borrow_mut();
        match record {
            OffsetsRecord::Offset {
                group,
                topic,
                partition,
                value: Some(value),
            } => {
                groups
                    .entry(group.clone())
                    .or_insert_with(|| Group::new(&group))
                    .offsets
                    .insert((topic, partition), value);
            }
            OffsetsRecord::Offset {
                group,
                topic,
                partition,
                value: None,
            } => {
                if let Some(g) = groups.get_mut(&group) {
                    g.offsets.remove(&(topic, partition));
                }
            }
            OffsetsRecord::Group {
                group,
                value: Some(stored),
            } => groups
                .entry(group.clone())
                .or_insert_with(|| Group::new(&group))
                .restore(stored, now),
            OffsetsRecord::Group { group, value: None } => {
                groups.remove(&group);
            }
        }
    }
}

impl Shard {
    /// Runs `op` on the shard coordinating `group_id`, creating `__consumer_offsets` first if
    /// this is the cluster's first group.
    pub async fn group_call(self: &Rc<Self>, group_id: &str, op: GroupOp) -> GroupReply {
        // The stored records carry the id as a Kafka (int16-length) string.
        if group_id.len() > i16::MAX as usize {
            return GroupReply::Error(code(ResponseError::InvalidGroupId));
        }
        let partitions = match self.ensure_offsets_topic().await {
            Ok(n) => n,
            Err(error) => return GroupReply::Error(error),
        };
        let partition = partition_for(group_id, partitions);
        let Some(owner) = self.metadata().owner(OFFSETS_TOPIC, partition) else {
            return GroupReply::Error(code(ResponseError::CoordinatorNotAvailable));
        };
        if owner == self.id {
            return self.run_group_op(partition, group_id, op).await;
        }
        let (reply, answer) = oneshot::channel();
        let msg = ShardMsg::Group {
            partition,
            group_id: group_id.to_string(),
            op,
            reply,
        };
        if self.send(owner, msg).await.is_err() {
            return GroupReply::Error(code(ResponseError::CoordinatorNotAvailable));
        }
        answer.await.unwrap_or(GroupReply::Error(code(
            ResponseError::CoordinatorNotAvailable,
        )))
    }

    /// The partition count of `__consumer_offsets`, creating it with
    /// `offsets.topic.num.partitions` partitions if it does not exist (Kafka creates it on the
    /// first FindCoordinator too). Errors: a Kafka error code.
    pub async fn ensure_offsets_topic(self: &Rc<Self>) -> Result<usize, i16> {
        if let Some(t) = self.metadata().topics.get(OFFSETS_TOPIC) {
            return Ok(t.partitions.len());
        }
        // Kafka compacts this topic; Sluice has no compaction yet, so nothing may expire.
        let overrides = BTreeMap::from([
            ("retention.ms".to_string(), "-1".to_string()),
            ("retention.bytes".to_string(), "-1".to_string()),
            (
                "segment.bytes".to_string(),
                self.config.offsets_topic_segment_bytes.to_string(),
            ),
        ]);
        let op = ControllerOp::CreateTopic {
            name: OFFSETS_TOPIC.to_string(),
            partitions: self.config.offsets_topic_num_partitions,
            overrides,
            internal: true,
            validate_only: false,
        };
        match self.controller_call(op).await {
            Ok(()) | Err(ControllerError::TopicAlreadyExists { .. }) => {}
            Err(e) => {
                tracing::warn!(error = %e, "cannot create {OFFSETS_TOPIC}");
                return Err(code(ResponseError::CoordinatorNotAvailable));
            }
        }
        self.metadata()
            .topics
            .get(OFFSETS_TOPIC)
            .map(|t| t.partitions.len())
            .ok_or(code(ResponseError::CoordinatorNotAvailable))
    }

    /// Runs `op` here, where `partition` of `__consumer_offsets` is owned.
    pub async fn run_group_op(
        self: &Rc<Self>,
        partition: i32,
        group_id: &str,
        op: GroupOp,
    ) -> GroupReply {
        let reply = self.run_group_op_inner(partition, group_id, op).await;
        // A refused join or commit must not leave an empty group behind.
        self.drop_if_vacant(group_id);
        reply
    }

    fn drop_if_vacant(&self, group_id: &str) {
        let mut groups = self.groups.groups.borrow_mut();
        if groups.get(group_id).is_some_and(Group::is_vacant) {
            groups.remove(group_id);
        }
    }

    async fn run_group_op_inner(
        self: &Rc<Self>,
        partition: i32,
        group_id: &str,
        op: GroupOp,
    ) -> GroupReply {
        if let Err(error) = self.ensure_groups_loaded(partition).await {
            return GroupReply::Error(error);
        }
        let now = Instant::now();
        let cfg = self.groups.config;
        match op {
            GroupOp::Join(params) => {
                let answer = self.try_with_group(group_id, true, |g| g.join(params, now, &cfg));
                self.persist_membership(partition, group_id).await;
                GroupReply::Join(match answer {
                    Some(Answer::Now(r)) => r,
                    Some(Answer::Later(rx)) => rx.await.unwrap_or_else(|_| {
                        JoinResult::error(ResponseError::CoordinatorNotAvailable, "")
                    }),
                    None => JoinResult::error(ResponseError::UnknownMemberId, ""),
                })
            }
            GroupOp::Sync(params) => {
                let outcome = self.try_with_group(group_id, false, |g| g.sync(params, now));
                let rx = match outcome {
                    None => return sync_error(ResponseError::UnknownMemberId),
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
                        let result = self.append_offsets_records(partition, &[stored]).await;
                        self.try_with_group(group_id, false, |g| {
                            g.finish_sync(generation, result, Instant::now(), &cfg);
                        });
                        self.persist_membership(partition, group_id).await;
                        answer
                    }
                };
                GroupReply::Sync(rx.await.unwrap_or_else(|_| {
                    SyncResult::error(code(ResponseError::RebalanceInProgress))
                }))
            }
            GroupOp::Heartbeat {
                member_id,
                group_instance_id,
                generation,
            } => {
                let error = self.try_with_group(group_id, false, |g| {
                    g.heartbeat(&member_id, group_instance_id.as_deref(), generation, now)
                });
                GroupReply::Error(error.unwrap_or(code(ResponseError::UnknownMemberId)))
            }
            GroupOp::Leave { members } => {
                let errors = self.try_with_group(group_id, false, |g| g.leave(&members, now, &cfg));
                self.persist_membership(partition, group_id).await;
                GroupReply::Leave(
                    errors.unwrap_or_else(|| {
                        vec![code(ResponseError::UnknownMemberId); members.len()]
                    }),
                )
            }
            GroupOp::Commit {
                member_id,
                group_instance_id,
                generation,
                offsets,
            } => {
                self.commit_offsets(
                    partition,
                    group_id,
                    &member_id,
                    group_instance_id.as_deref(),
                    generation,
                    offsets,
                )
                .await
            }
            GroupOp::FetchOffsets { partitions } => {
                let groups = self.groups.groups.borrow();
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
            GroupOp::Describe => {
                let groups = self.groups.groups.borrow();
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
            GroupOp::Delete => self.delete_group(partition, group_id).await,
            GroupOp::DeleteOffsets { partitions } => {
                self.delete_offsets(partition, group_id, partitions).await
            }
        }
    }

    /// Runs `f` on the group (creating it when `create`); `None` when it does not exist.
    fn try_with_group<T>(
        &self,
        group_id: &str,
        create: bool,
        f: impl FnOnce(&mut Group) -> T,
    ) -> Option<T> {
        let mut groups = self.groups.groups.borrow_mut();
        if create && !groups.contains_key(group_id) {
            groups.insert(group_id.to_string(), Group::new(group_id));
        }
        groups.get_mut(group_id).map(f)
    }

    /// Appends the membership records the group queued (a rebalance that emptied it, a
    /// static member replaced); failures are logged: the next change writes it again.
    async fn persist_membership(&self, partition: i32, group_id: &str) {
        let pending = self
            .try_with_group(group_id, false, Group::take_to_persist)
            .unwrap_or_default();
        let Some(latest) = pending.into_iter().last() else {
            return;
        };
        let record = OffsetsRecord::Group {
            group: group_id.to_string(),
            value: Some(latest),
        };
        if let Err(error) = self.append_offsets_records(partition, &[record]).await {
            tracing::warn!(group = group_id, error, "could not store group membership");
        }
    }

    async fn commit_offsets(
        &self,
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
        let exists = self.groups.groups.borrow().contains_key(group_id);
        let error = if !exists && generation >= 0 {
            code(ResponseError::IllegalGeneration)
        } else {
            self.try_with_group(group_id, true, |g| {
                let error = g.check_commit(member_id, instance, generation, now);
                if error == 0 {
                    g.commits_in_flight += 1;
                }
                error
            })
            .unwrap_or(code(ResponseError::CoordinatorNotAvailable))
        };
        let all = |error: i16| {
            offsets
                .iter()
                .map(|o| (o.topic.clone(), o.partition, error))
                .collect::<Vec<_>>()
        };
        if error != 0 {
            return GroupReply::PartitionErrors(all(error));
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
                    code(ResponseError::OffsetMetadataTooLarge),
                ));
                continue;
            }
            results.push((o.topic.clone(), o.partition, 0));
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
            self.append_offsets_records(partition, &records).await
        };
        // A DeleteGroups that ran during the append wrote its tombstones after this commit:
        // the group stays deleted (not re-created), as the log will replay it.
        self.try_with_group(group_id, false, |g| {
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
            for r in results.iter_mut().filter(|r| r.2 == 0) {
                r.2 = error;
            }
        }
        GroupReply::PartitionErrors(results)
    }

    async fn delete_group(&self, partition: i32, group_id: &str) -> GroupReply {
        let tombstones = {
            let groups = self.groups.groups.borrow();
            let Some(g) = groups.get(group_id) else {
                return GroupReply::Error(code(ResponseError::GroupIdNotFound));
            };
            if g.state() == GroupState::Dead {
                return GroupReply::Error(code(ResponseError::GroupIdNotFound));
            }
            if g.state() != GroupState::Empty || !g.is_empty() {
                return GroupReply::Error(code(ResponseError::NonEmptyGroup));
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
        self.try_with_group(group_id, false, Group::mark_dead);
        match self.append_offsets_records(partition, &tombstones).await {
            Ok(()) => {
                self.groups.groups.borrow_mut().remove(group_id);
                GroupReply::Error(0)
            }
            Err(error) => {
                // Not deleted after all: the group stays as it was (Empty, offsets kept).
                let mut groups = self.groups.groups.borrow_mut();
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
        &self,
        partition: i32,
        group_id: &str,
        partitions: Vec<(String, Vec<i32>)>,
    ) -> GroupReply {
        let (subscribed, state, is_consumer) = {
            let groups = self.groups.groups.borrow();
            let Some(g) = groups.get(group_id) else {
                return GroupReply::Error(code(ResponseError::GroupIdNotFound));
            };
            (
                g.subscribed_topics(),
                g.state(),
                g.protocol_type() == Some("consumer"),
            )
        };
        if state == GroupState::Dead {
            return GroupReply::Error(code(ResponseError::GroupIdNotFound));
        }
        if state != GroupState::Empty && !is_consumer {
            // Kafka: without the consumer protocol the subscriptions cannot be known.
            return GroupReply::Error(code(ResponseError::NonEmptyGroup));
        }
        let mut results = Vec::new();
        let mut tombstones = Vec::new();
        for (topic, ps) in partitions {
            for p in ps {
                // KIP-496: offsets of a topic the active group consumes stay.
                if state != GroupState::Empty && subscribed.contains(&topic) {
                    results.push((
                        topic.clone(),
                        p,
                        code(ResponseError::GroupSubscribedToTopic),
                    ));
                    continue;
                }
                results.push((topic.clone(), p, 0));
                tombstones.push(OffsetsRecord::Offset {
                    group: group_id.to_string(),
                    topic: topic.clone(),
                    partition: p,
                    value: None,
                });
            }
        }
        if !tombstones.is_empty() {
            if let Err(error) = self.append_offsets_records(partition, &tombstones).await {
                return GroupReply::Error(error);
            }
            self.try_with_group(group_id, false, |g| {
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
    /// owns) and waits until they are on disk. Errors: a Kafka error code fit for the group
    /// APIs (`COORDINATOR_NOT_AVAILABLE`, or `INVALID_COMMIT_OFFSET_SIZE` for a too large
    /// commit).
    async fn append_offsets_records(
        &self,
        partition: i32,
        records: &[OffsetsRecord],
    ) -> Result<(), i16> {
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
        let map_error = |e: i16| {
            if e == code(ResponseError::MessageTooLarge) {
                code(ResponseError::InvalidCommitOffsetSize)
            } else {
                code(ResponseError::CoordinatorNotAvailable)
            }
        };
        match self
            .run_partition_op(
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
            PartitionReply::Error(e) => return Err(map_error(e)),
            other => {
                tracing::error!(?other, "unexpected reply to an offsets append");
                return Err(code(ResponseError::CoordinatorNotAvailable));
            }
        }
        let owned = self.owned_partition(&tp).await.map_err(map_error)?;
        owned
            .log
            .flush_to(owned.log.log_end_offset())
            .await
            .map(|_| ())
            .map_err(|e| map_error(crate::errors::storage_error_code(&e)))
    }

    /// Replays `__consumer_offsets` partition `partition` into this shard's groups, once.
    /// Errors: `COORDINATOR_NOT_AVAILABLE` when its log cannot be read.
    async fn ensure_groups_loaded(&self, partition: i32) -> Result<(), i16> {
        if self.groups.loaded.borrow().contains(&partition) {
            return Ok(());
        }
        let _permit = self
            .groups
            .load_lock
            .acquire_permit(1)
            .await
            .map_err(|_| code(ResponseError::CoordinatorNotAvailable))?;
        if self.groups.loaded.borrow().contains(&partition) {
            return Ok(());
        }
        let tp = TopicPartition {
            topic: OFFSETS_TOPIC.to_string(),
            partition,
        };
        let unavailable = |_| code(ResponseError::CoordinatorNotAvailable);
        let owned = self.owned_partition(&tp).await.map_err(unavailable)?;
        let log = &owned.log;
        let end = log.log_end_offset();
        let mut at = log.log_start_offset();
        let now = Instant::now();
        let mut applied = 0usize;
        while at < end {
            let batches = log
                .read(at, REPLAY_READ_BYTES, end)
                .await
                .map_err(|e| unavailable(crate::errors::storage_error_code(&e)))?;
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
                        Ok(Some(record)) => {
                            self.groups.apply(record, now);
                            applied += 1;
                        }
                        Ok(None) => {}
                        Err(why) => tracing::warn!(%tp, offset = r.offset.0, %why,
                            "skipping unreadable record"),
                    }
                }
            }
            at = next;
        }
        if applied > 0 {
            tracing::info!(%tp, records = applied, "loaded consumer groups");
        }
        self.groups.loaded.borrow_mut().insert(partition);
        Ok(())
    }

    /// The `__consumer_offsets` partitions this shard owns.
    fn owned_offsets_partitions(&self) -> Vec<i32> {
        let metadata = self.metadata();
        metadata
            .topics
            .get(OFFSETS_TOPIC)
            .map(|t| metadata.owned_partitions(t, self.id).collect())
            .unwrap_or_default()
    }

    /// This shard's groups (ListGroups), after replaying its offsets partitions.
    pub async fn list_local_groups(&self) -> Vec<ListedGroup> {
        for p in self.owned_offsets_partitions() {
            if let Err(error) = self.ensure_groups_loaded(p).await {
                tracing::warn!(partition = p, error, "offsets partition not loaded");
            }
        }
        self.groups
            .groups
            .borrow()
            .values()
            .filter(|g| g.state() != GroupState::Dead)
            .map(|g| ListedGroup {
                group_id: g.id.clone(),
                protocol_type: g.protocol_type().unwrap_or_default().to_string(),
                state: g.state().name(),
            })
            .collect()
    }

    /// Every shard's groups, in shard order.
    pub async fn list_all_groups(self: &Rc<Self>) -> Vec<ListedGroup> {
        let mut out = Vec::new();
        for peer in 0..self.shards {
            if peer == self.id {
                out.extend(self.list_local_groups().await);
                continue;
            }
            let (reply, answer) = oneshot::channel();
            if self
                .send(peer, ShardMsg::ListGroups { reply })
                .await
                .is_ok()
            {
                if let Ok(groups) = answer.await {
                    out.extend(groups);
                }
            }
        }
        out
    }

    /// Loads this shard's offsets partitions, then applies group deadlines every
    /// [`DEADLINE_CHECK_INTERVAL`] until shutdown, when it answers every parked request.
    pub async fn group_deadline_loop(self: &Rc<Self>) {
        for p in self.owned_offsets_partitions() {
            if let Err(error) = self.ensure_groups_loaded(p).await {
                tracing::warn!(
                    partition = p,
                    error,
                    "offsets partition not loaded at start"
                );
            }
        }
        loop {
            if self.sleep_unless_stopped(DEADLINE_CHECK_INTERVAL).await {
                for g in self.groups.groups.borrow_mut().values_mut() {
                    g.unload();
                }
                return;
            }
            let now = Instant::now();
            let cfg = self.groups.config;
            let mut changed = Vec::new();
            for (id, g) in self.groups.groups.borrow_mut().iter_mut() {
                if g.has_deadlines() {
                    g.tick(now, &cfg);
                    changed.push(id.clone());
                }
            }
            let partitions = self
                .metadata()
                .topics
                .get(OFFSETS_TOPIC)
                .map_or(0, |t| t.partitions.len());
            for id in changed {
                self.persist_membership(partition_for(&id, partitions), &id)
                    .await;
                self.drop_if_vacant(&id);
            }
        }
    }
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

fn sync_error(error: ResponseError) -> GroupReply {
    GroupReply::Sync(SyncResult::error(code(error)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_land_on_kafkas_partition() {
        // Java: "a".hashCode() = 97; "ab".hashCode() = 97 * 31 + 98 = 3105.
        assert_eq!(partition_for("a", 50), 97 % 50);
        assert_eq!(partition_for("ab", 50), 3105 % 50);
        // Overflowing hashes wrap as Java's int does and are masked positive.
        let long = "a-rather-long-consumer-group-name";
        let p = partition_for(long, 50);
        assert!((0..50).contains(&p));
        assert_eq!(partition_for("", 50), 0);
        assert_eq!(partition_for("x", 1), 0);
    }
}
