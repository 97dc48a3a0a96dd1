//! The group coordinator's work on one shard, apart from the shard: the group ops
//! ([`run`]), the load of an offsets partition ([`load`]) and the deadline check
//! ([`tick_deadlines`]), over a [`GroupsHost`] that gives them the shard's
//! [`GroupCoordinator`], the clock and the group's `__consumer_offsets` partition (append
//! `acks=all` and flushed; replay from the log start). The broker's host is the shard
//! (`super::service`); the deterministic simulation (`replication::sim`) is the other, so
//! that the same code runs under simulated time in `sim_tests.rs`.
//!
//! The caller has checked that this shard coordinates the op's partition (active); an op that
//! waits (an append, a parked JoinGroup or SyncGroup) may find it resigned afterwards, and
//! then answers what the append or the unload answered (`NOT_COORDINATOR`).
//!
//! Limits: the wall clock (`epoch_ms`, commit timestamps and `Group`'s state timestamp) is
//! not the host's clock in `Group` itself; only the expiry of offsets reads it.

use super::coordinator::{self, GroupCoordinator, Replayed};
use super::error::GroupError;
use super::group::GroupState;
use super::group::{self, Answer, Group, JoinResult, SyncOutcome, SyncResult};
use super::offsets_log::{CommittedOffset, OffsetsRecord};
use super::ops::{
    DescribedMember, GroupDescription, GroupOp, GroupReply, OffsetCommitEntry, TxnProducer,
};
use super::{partition_for, OFFSET_METADATA_MAX_BYTES};
use crate::coordinator_runtime::LoadId;
use bytes::Bytes;
use std::collections::HashMap;
use std::time::Instant;

/// What the group coordinator needs from the shard it runs on (module doc).
pub(crate) trait GroupsHost {
    /// This shard's coordinator state.
    fn coordinator(&self) -> &GroupCoordinator;
    /// Monotonic time, for sessions and rebalance deadlines.
    fn now(&self) -> Instant;
    /// Wall-clock milliseconds since the Unix epoch, for commit timestamps and expiry.
    fn epoch_ms(&self) -> i64;
    /// The partition count of `__consumer_offsets` (0 while it does not exist).
    fn offsets_partition_count(&self) -> usize;
    /// Appends `records` to offsets `partition` with `acks=all` — as one transactional batch
    /// of `producer` when given (a TxnOffsetCommit's, appended with the coordinator's origin:
    /// its epoch is checked, not its sequence) — and waits until they are on this broker's
    /// disk. Returns the offset of the first record. Errors: as the service's append
    /// (`NOT_COORDINATOR` when the leadership or the log was lost, `COORDINATOR_NOT_AVAILABLE`
    /// on a timeout, `INVALID_PRODUCER_EPOCH` for a fenced producer, …).
    async fn append_as(
        &self,
        partition: i32,
        records: &[OffsetsRecord],
        producer: Option<TxnProducer>,
    ) -> Result<i64, GroupError>;
    /// [`GroupsHost::append_as`] outside any transaction.
    async fn append(&self, partition: i32, records: &[OffsetsRecord]) -> Result<(), GroupError> {
        self.append_as(partition, records, None).await.map(|_| ())
    }
    /// Hands every record and transaction marker of offsets `partition`, from its log start
    /// to its log end, to `apply` in log order. Errors: `COORDINATOR_NOT_AVAILABLE` when it
    /// cannot be read.
    async fn replay(
        &self,
        partition: i32,
        apply: &mut dyn FnMut(Replayed),
    ) -> Result<(), GroupError>;
}

/// One batch of `records`, keyed as Kafka's `__consumer_offsets` (what every append writes);
/// a transactional batch of `producer` (base sequence 0, as Kafka's coordinator writes it)
/// when given.
pub(crate) fn offsets_batch(
    records: &[OffsetsRecord],
    timestamp_ms: i64,
    producer: Option<TxnProducer>,
) -> Bytes {
    let encoded: Vec<(Vec<u8>, Option<Vec<u8>>)> =
        records.iter().map(OffsetsRecord::encode).collect();
    let kv: Vec<storage::KeyValue<'_>> = encoded
        .iter()
        .map(|(k, v)| (Some(k.as_slice()), v.as_deref()))
        .collect();
    let batch = storage::build_batch_kv(storage::TimestampMs(timestamp_ms), &kv);
    match producer {
        Some(p) => storage::transactional_batch(&batch, p.producer_id, p.producer_epoch, 0),
        None => batch,
    }
}

/// Hands every offsets record of one stored batch (`bytes`, read from `partition`) to
/// `apply`, with its offset and, for a transactional batch, its producer id; a control
/// batch's marker as [`Replayed::Marker`]. Unreadable batches and records are logged and
/// skipped, as on replay.
pub(crate) fn replay_batch(bytes: &[u8], partition: i32, apply: &mut dyn FnMut(Replayed)) {
    let header = match storage::BatchHeader::parse(bytes) {
        Ok(h) => h,
        Err(e) => {
            tracing::warn!(partition, error = %e, "skipping unreadable batch");
            return;
        }
    };
    if header.is_control() {
        match storage::control_batch_marker(bytes) {
            Ok(Some(marker)) => apply(Replayed::Marker {
                producer_id: marker.producer_id,
                end: marker.result,
            }),
            Ok(None) => {}
            Err(e) => tracing::warn!(partition, error = %e, "skipping unreadable marker"),
        }
        return;
    }
    let producer_id = header.is_transactional().then_some(header.producer_id);
    let records = match storage::records_of(bytes) {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(partition, error = %e, "skipping unreadable batch");
            return;
        }
    };
    for r in records {
        let Some(key) = r.key else { continue };
        match OffsetsRecord::decode(key, r.value) {
            Ok(Some(record)) => apply(Replayed::Record {
                offset: r.offset.0,
                producer_id,
                record,
            }),
            Ok(None) => {}
            Err(why) => {
                tracing::warn!(partition, offset = r.offset.0, %why, "skipping unreadable record")
            }
        }
    }
}

/// Runs `load` of offsets `partition`: replays its log into a new set of groups, then
/// installs them unless the partition was resigned meanwhile (the load is stale), or marks
/// the partition failed when its log cannot be read.
pub(crate) async fn load<H: GroupsHost>(host: &H, partition: i32, load: LoadId) {
    let now = host.now();
    let mut loaded = HashMap::new();
    let replayed = host
        .replay(partition, &mut |item| {
            coordinator::apply_replayed(&mut loaded, item, now)
        })
        .await;
    let c = host.coordinator();
    if let Err(error) = replayed {
        c.partitions.borrow_mut().fail_load(partition, load);
        tracing::warn!(partition, %error, "cannot load consumer groups");
        return;
    }
    if !c.partitions.borrow_mut().finish_load(partition, load) {
        tracing::info!(partition, "dropping a load whose partition moved meanwhile");
        return;
    }
    let count = loaded.len();
    let mut groups = c.groups.borrow_mut();
    // Nothing of this partition may be left over (module invariant); unload it anyway.
    coordinator::unload_partition(&mut groups, partition, host.offsets_partition_count());
    groups.extend(loaded);
    tracing::info!(partition, groups = count, "loaded consumer groups");
}

/// Applies the deadlines of every group that has some (sessions, rebalance and initial-delay
/// timeouts) at the host's `now`, then appends what the groups queued to persist.
pub(crate) async fn tick_deadlines<H: GroupsHost>(host: &H) {
    let now = host.now();
    let cfg = host.coordinator().config;
    let mut changed = Vec::new();
    for (id, g) in host.coordinator().groups.borrow_mut().iter_mut() {
        if g.has_deadlines() {
            g.tick(now, &cfg);
            changed.push(id.clone());
        }
    }
    let partitions = host.offsets_partition_count();
    for id in changed {
        persist_membership(host, partition_for(&id, partitions), &id).await;
        drop_if_vacant(host, &id);
    }
}

/// The broker stops: every parked join and sync is answered, and the load loop ends.
pub(crate) fn unload_all(coordinator: &GroupCoordinator) {
    for g in coordinator.groups.borrow_mut().values_mut() {
        g.unload();
    }
    coordinator.stop_loads();
}

fn drop_if_vacant<H: GroupsHost>(host: &H, group_id: &str) {
    let mut groups = host.coordinator().groups.borrow_mut();
    if groups.get(group_id).is_some_and(Group::is_vacant) {
        groups.remove(group_id);
    }
}

/// Runs `op` on the groups of offsets `partition`, which the caller checked this shard
/// coordinates now (its state is active).
pub(crate) async fn run<H: GroupsHost>(
    host: &H,
    partition: i32,
    group_id: &str,
    op: GroupOp,
) -> GroupReply {
    let reply = run_inner(host, partition, group_id, op).await;
    // A refused join or commit must not leave an empty group behind.
    drop_if_vacant(host, group_id);
    reply
}

async fn run_inner<H: GroupsHost>(
    host: &H,
    partition: i32,
    group_id: &str,
    op: GroupOp,
) -> GroupReply {
    let now = host.now();
    let cfg = host.coordinator().config;
    match op {
        GroupOp::Join(params) => join_group(host, partition, group_id, params, now).await,
        GroupOp::Sync(params) => sync_group(host, partition, group_id, params, now).await,
        GroupOp::Heartbeat {
            member_id,
            group_instance_id,
            generation,
        } => {
            let error = try_with_group(host, group_id, false, |g| {
                g.heartbeat(&member_id, group_instance_id.as_deref(), generation, now)
            });
            match error.unwrap_or(Err(GroupError::UnknownMemberId)) {
                Ok(()) => GroupReply::Done,
                Err(error) => GroupReply::Error(error),
            }
        }
        GroupOp::Leave { members } => {
            let errors = try_with_group(host, group_id, false, |g| g.leave(&members, now, &cfg));
            persist_membership(host, partition, group_id).await;
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
                host,
                partition,
                group_id,
                &member_id,
                group_instance_id.as_deref(),
                generation,
                offsets,
            )
            .await
        }
        GroupOp::TxnCommit {
            producer,
            member_id,
            group_instance_id,
            generation,
            offsets,
        } => {
            let member = CommitMember {
                member_id: &member_id,
                instance: group_instance_id.as_deref(),
                generation,
            };
            txn_commit_offsets(host, partition, group_id, producer, member, offsets).await
        }
        GroupOp::FetchOffsets {
            partitions,
            require_stable,
        } => fetch_offsets(host, group_id, partitions, require_stable),
        GroupOp::Describe => describe_local(host, group_id),
        GroupOp::Delete => delete_group(host, partition, group_id).await,
        GroupOp::DeleteOffsets { partitions } => {
            delete_offsets(host, partition, group_id, partitions).await
        }
    }
}

/// JoinGroup: the group answers now or once the join completes; what it queued is appended.
async fn join_group<H: GroupsHost>(
    host: &H,
    partition: i32,
    group_id: &str,
    params: group::JoinParams,
    now: Instant,
) -> GroupReply {
    let cfg = host.coordinator().config;
    let answer = try_with_group(host, group_id, true, |g| g.join(params, now, &cfg));
    persist_membership(host, partition, group_id).await;
    GroupReply::Join(match answer {
        Some(Answer::Now(r)) => r,
        Some(Answer::Later(rx)) => rx
            .await
            .unwrap_or_else(|_| JoinResult::error(GroupError::CoordinatorNotAvailable, "")),
        None => JoinResult::error(GroupError::UnknownMemberId, ""),
    })
}

/// SyncGroup: the leader's assignment is appended before the members get it.
async fn sync_group<H: GroupsHost>(
    host: &H,
    partition: i32,
    group_id: &str,
    params: group::SyncParams,
    now: Instant,
) -> GroupReply {
    let cfg = host.coordinator().config;
    let outcome = try_with_group(host, group_id, false, |g| g.sync(params, now));
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
            let result = host.append(partition, &[stored]).await;
            try_with_group(host, group_id, false, |g| {
                g.finish_sync(generation, result, host.now(), &cfg);
            });
            persist_membership(host, partition, group_id).await;
            answer
        }
    };
    GroupReply::Sync(
        rx.await
            .unwrap_or_else(|_| SyncResult::error(GroupError::RebalanceInProgress)),
    )
}

/// OffsetFetch: the committed offsets of `partitions` (`None`: all of the group's). A
/// transaction's pending offsets are never returned; with `require_stable` (KIP-447) a
/// partition with one answers `UNSTABLE_OFFSET_COMMIT` (Kafka's `fetchOffsets`).
fn fetch_offsets<H: GroupsHost>(
    host: &H,
    group_id: &str,
    partitions: Option<Vec<(String, Vec<i32>)>>,
    require_stable: bool,
) -> GroupReply {
    let groups = host.coordinator().groups.borrow();
    let group = groups.get(group_id);
    let answer = |key: (String, i32)| {
        let unstable = require_stable && group.is_some_and(|g| g.pending_txn.has_pending(&key));
        let committed = if unstable {
            Err(GroupError::UnstableOffsetCommit)
        } else {
            Ok(group.and_then(|g| g.offsets.get(&key)).cloned())
        };
        (key.0, key.1, committed)
    };
    let offsets = match partitions {
        Some(wanted) => wanted
            .into_iter()
            .flat_map(|(topic, ps)| ps.into_iter().map(move |p| (topic.clone(), p)))
            .map(answer)
            .collect(),
        None => group.map_or_else(Vec::new, |g| {
            g.offsets.keys().cloned().map(answer).collect()
        }),
    };
    GroupReply::Offsets(offsets)
}

/// DescribeGroups: the group here, or Dead when there is none.
fn describe_local<H: GroupsHost>(host: &H, group_id: &str) -> GroupReply {
    let groups = host.coordinator().groups.borrow();
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
fn try_with_group<H: GroupsHost, T>(
    host: &H,
    group_id: &str,
    create: bool,
    f: impl FnOnce(&mut Group) -> T,
) -> Option<T> {
    let mut groups = host.coordinator().groups.borrow_mut();
    if create && !groups.contains_key(group_id) {
        groups.insert(group_id.to_string(), Group::new(group_id));
    }
    groups.get_mut(group_id).map(f)
}

/// Appends the membership records the group queued (a rebalance that emptied it, a
/// static member replaced); failures are logged: the next change writes it again.
async fn persist_membership<H: GroupsHost>(host: &H, partition: i32, group_id: &str) {
    let pending = try_with_group(host, group_id, false, Group::take_to_persist).unwrap_or_default();
    let Some(latest) = pending.into_iter().last() else {
        return;
    };
    let record = OffsetsRecord::Group {
        group: group_id.to_string(),
        value: Some(latest),
    };
    if let Err(error) = host.append(partition, &[record]).await {
        tracing::warn!(group = group_id, %error, "could not store group membership");
    }
}

async fn commit_offsets<H: GroupsHost>(
    host: &H,
    partition: i32,
    group_id: &str,
    member_id: &str,
    instance: Option<&str>,
    generation: i32,
    offsets: Vec<OffsetCommitEntry>,
) -> GroupReply {
    let allowed = admit_commit(host, group_id, member_id, instance, generation);
    if let Err(error) = allowed {
        return GroupReply::PartitionErrors(
            offsets
                .iter()
                .map(|o| (o.topic.clone(), o.partition, Err(error)))
                .collect(),
        );
    }
    let commit_timestamp_ms = host.epoch_ms();
    let (records, mut results) = offset_records(group_id, &offsets, commit_timestamp_ms);
    let appended = if records.is_empty() {
        Ok(-1)
    } else {
        host.append_as(partition, &records, None).await
    };
    finish_commit(
        host,
        group_id,
        records,
        appended.as_ref().ok().copied(),
        None,
    );
    let appended = appended.map(|_| ());
    if let Err(error) = appended {
        for r in results.iter_mut().filter(|r| r.2.is_ok()) {
            r.2 = Err(error);
        }
    }
    GroupReply::PartitionErrors(results)
}

/// Whether the commit may go ahead (Kafka's checks of member, instance and generation); if
/// so, the group, created for a simple commit, counts it in flight.
fn admit_commit<H: GroupsHost>(
    host: &H,
    group_id: &str,
    member_id: &str,
    instance: Option<&str>,
    generation: i32,
) -> Result<(), GroupError> {
    let now = host.now();
    // Kafka: a member's commit (generation ≥ 0) to a group that does not exist is stale;
    // a simple commit (generation < 0) creates the group.
    let exists = host.coordinator().groups.borrow().contains_key(group_id);
    if !exists && generation >= 0 {
        Err(GroupError::IllegalGeneration)
    } else {
        try_with_group(host, group_id, true, |g| {
            let allowed = g.check_commit(member_id, instance, generation, now);
            if allowed.is_ok() {
                g.commits_in_flight += 1;
            }
            allowed
        })
        .unwrap_or(Err(GroupError::CoordinatorNotAvailable))
    }
}

/// Each partition's result, as [`GroupReply::PartitionErrors`] carries them.
type PartitionResults = Vec<(String, i32, Result<(), GroupError>)>;

/// The records of a commit of `offsets` at `commit_timestamp_ms`, and each partition's
/// result: an offset whose metadata is too large gets an error and no record.
fn offset_records(
    group_id: &str,
    offsets: &[OffsetCommitEntry],
    commit_timestamp_ms: i64,
) -> (Vec<OffsetsRecord>, PartitionResults) {
    let mut records = Vec::new();
    let mut results = Vec::new();
    for o in offsets {
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
                record_offset: -1,
            }),
        });
    }
    (records, results)
}

/// After a commit's append: the commit is no longer in flight, and when appended (at
/// `base_offset`, the first record's offset) its `records` become the group's committed
/// offsets — or, for a transaction's (`producer_id`), its pending ones.
fn finish_commit<H: GroupsHost>(
    host: &H,
    group_id: &str,
    records: Vec<OffsetsRecord>,
    base_offset: Option<i64>,
    producer_id: Option<i64>,
) {
    // A DeleteGroups that ran during the append wrote its tombstones after this commit:
    // the group stays deleted (not re-created), as the log will replay it.
    try_with_group(host, group_id, false, |g| {
        g.commits_in_flight = g.commits_in_flight.saturating_sub(1);
        let Some(base_offset) = base_offset else {
            return;
        };
        for (record_offset, record) in (base_offset..).zip(records) {
            if let OffsetsRecord::Offset {
                topic,
                partition,
                value: Some(value),
                ..
            } = record
            {
                let value = CommittedOffset {
                    record_offset,
                    ..value
                };
                match producer_id {
                    Some(pid) => g.pending_txn.add(pid, (topic, partition), value),
                    None => {
                        g.offsets.insert((topic, partition), value);
                    }
                }
            }
        }
    });
}

/// Who commits offsets: the member, `group.instance.id` and generation of a commit request.
#[derive(Clone, Copy, Debug)]
struct CommitMember<'a> {
    member_id: &'a str,
    instance: Option<&'a str>,
    generation: i32,
}

/// TxnOffsetCommit: the offsets are appended to the group's offsets partition as a
/// transactional batch of `producer`, and stay pending until the producer's marker reaches
/// that partition ([`complete_transaction`]). Checked as Kafka's
/// `validateTransactionalOffsetCommit`: a group that does not exist is created for a commit
/// without a generation (< 0), else `ILLEGAL_GENERATION`; then the group's member, instance
/// and generation checks for a transactional commit.
async fn txn_commit_offsets<H: GroupsHost>(
    host: &H,
    partition: i32,
    group_id: &str,
    producer: TxnProducer,
    member: CommitMember<'_>,
    offsets: Vec<OffsetCommitEntry>,
) -> GroupReply {
    let allowed = admit_txn_commit(host, group_id, member);
    if let Err(error) = allowed {
        return GroupReply::PartitionErrors(
            offsets
                .iter()
                .map(|o| (o.topic.clone(), o.partition, Err(error)))
                .collect(),
        );
    }
    let commit_timestamp_ms = host.epoch_ms();
    let (records, mut results) = offset_records(group_id, &offsets, commit_timestamp_ms);
    let appended = if records.is_empty() {
        Ok(-1)
    } else {
        host.append_as(partition, &records, Some(producer)).await
    };
    let base = appended.as_ref().ok().copied();
    finish_commit(host, group_id, records, base, Some(producer.producer_id));
    if let Err(error) = appended {
        for r in results.iter_mut().filter(|r| r.2.is_ok()) {
            r.2 = Err(error);
        }
    }
    GroupReply::PartitionErrors(results)
}

/// Whether a transactional commit may go ahead (see [`txn_commit_offsets`]); if so, the
/// group counts it in flight.
fn admit_txn_commit<H: GroupsHost>(
    host: &H,
    group_id: &str,
    member: CommitMember<'_>,
) -> Result<(), GroupError> {
    let now = host.now();
    let exists = host.coordinator().groups.borrow().contains_key(group_id);
    if !exists && member.generation >= 0 {
        return Err(GroupError::IllegalGeneration);
    }
    try_with_group(host, group_id, true, |g| {
        let allowed = g.check_txn_commit(member.member_id, member.instance, member.generation, now);
        if allowed.is_ok() {
            g.commits_in_flight += 1;
        }
        allowed
    })
    .unwrap_or(Err(GroupError::CoordinatorNotAvailable))
}

/// A transaction marker of `producer_id` reached offsets `partition` (written there, as
/// WriteTxnMarkers reports it): the pending offsets of its groups are materialised (commit)
/// or discarded (abort). The caller checked that this shard coordinates the partition.
/// Returns how many groups had some.
pub(crate) fn complete_transaction<H: GroupsHost>(
    host: &H,
    partition: i32,
    producer_id: i64,
    end: storage::TxnResult,
) -> usize {
    let partitions = host.offsets_partition_count();
    coordinator::complete_transaction(
        &mut host.coordinator().groups.borrow_mut(),
        producer_id,
        end,
        |id| partition_for(id, partitions) == partition,
    )
}

pub(super) async fn delete_group<H: GroupsHost>(
    host: &H,
    partition: i32,
    group_id: &str,
) -> GroupReply {
    let tombstones = {
        let groups = host.coordinator().groups.borrow();
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
    try_with_group(host, group_id, false, Group::mark_dead);
    match host.append(partition, &tombstones).await {
        Ok(()) => {
            host.coordinator().groups.borrow_mut().remove(group_id);
            GroupReply::Done
        }
        Err(error) => {
            // Not deleted after all: the group stays as it was (Empty, offsets kept).
            let mut groups = host.coordinator().groups.borrow_mut();
            if let Some(g) = groups.remove(group_id) {
                let mut revived = Group::new(group_id);
                revived.offsets = g.offsets;
                groups.insert(group_id.to_string(), revived);
            }
            GroupReply::Error(error)
        }
    }
}

async fn delete_offsets<H: GroupsHost>(
    host: &H,
    partition: i32,
    group_id: &str,
    partitions: Vec<(String, Vec<i32>)>,
) -> GroupReply {
    let (subscribed, state, is_consumer) = {
        let groups = host.coordinator().groups.borrow();
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
        if let Err(error) = host.append(partition, &tombstones).await {
            return GroupReply::Error(error);
        }
        try_with_group(host, group_id, false, |g| {
            for t in &tombstones {
                if let OffsetsRecord::Offset {
                    topic, partition, ..
                } = t
                {
                    let key = (topic.clone(), *partition);
                    g.offsets.remove(&key);
                    // As the tombstone's replay: pending transactional offsets go too.
                    g.pending_txn.remove_key(&key);
                }
            }
        });
    }
    GroupReply::PartitionErrors(results)
}

/// Tombstones `keys` of `group_id` (their retention passed) and forgets those no commit has
/// replaced meanwhile; a failed append leaves them for the next check.
pub(super) async fn expire_offsets<H: GroupsHost>(
    host: &H,
    partition: i32,
    group_id: &str,
    keys: Vec<(String, i32)>,
) {
    let expired: Vec<((String, i32), i64)> = {
        let groups = host.coordinator().groups.borrow();
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
    if let Err(error) = host.append(partition, &tombstones).await {
        tracing::warn!(group = group_id, ?error, "could not expire offsets");
        return;
    }
    tracing::info!(
        group = group_id,
        offsets = expired.len(),
        "expired committed offsets"
    );
    try_with_group(host, group_id, false, |g| {
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
