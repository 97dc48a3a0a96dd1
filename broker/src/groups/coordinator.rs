//! A shard's group coordinator state: the groups of the `__consumer_offsets` partitions this
//! broker leads and this shard owns, and where each of those partitions stands
//! ([`OffsetsPartitions`]). Pure state; the service ([`super::service`]) runs the ops, the
//! appends and the loads.
//!
//! A partition's coordinator follows its leadership, as Kafka's `CoordinatorRuntime` does
//! (`scheduleLoadOperation` / `scheduleUnloadOperation`, driven by `onElection` /
//! `onResignation` with the partition's leader epoch as the coordinator epoch):
//!
//! 1. elected (this broker became the leader): the partition is *loading* while its log is
//!    replayed; its groups answer `COORDINATOR_LOAD_IN_PROGRESS`;
//! 2. the replay finished: *active*, its groups are served;
//! 3. resigned (another broker leads, or the partition is gone): its groups are unloaded —
//!    parked joins and syncs answered `NOT_COORDINATOR` — and every op answers
//!    `NOT_COORDINATOR`.
//!
//! The partition lifecycle (`crate::partition_lifecycle`) records elections and resignations
//! here as it applies partition roles ([`GroupCoordinator::on_election`],
//! [`GroupCoordinator::on_resignation`]): no I/O, so the lifecycle never calls into the
//! service. An election queues its load and wakes the service's
//! load loop ([`GroupCoordinator::next_loads`]), which starts it at once.
//!
//! Invariant: `groups` holds only groups of active partitions (a load's groups are built
//! apart and installed when it finishes; a resignation removes them).

use super::group::{Group, GroupConfig};
use super::offsets_log::{CommittedOffset, OffsetsRecord};
use super::ops::CommittedStatus;
use super::GroupError;
use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Instant;
use storage::TxnResult;

/// Per-shard coordinator state: the groups of the offsets partitions this shard coordinates.
pub struct GroupCoordinator {
    /// Groups of active partitions only (module invariant).
    pub(super) groups: RefCell<HashMap<String, Group>>,
    pub(super) partitions: RefCell<OffsetsPartitions>,
    /// Loads elected but not started yet: at most one per offsets partition this shard owns
    /// (an election queues a load only for a partition not coordinated here).
    loads_to_start: RefCell<Vec<(i32, LoadId)>>,
    /// One permit per queued load: what the load loop waits on. Closed at shutdown.
    loads_queued: crate::rt::Semaphore,
    pub(super) config: GroupConfig,
}

impl GroupCoordinator {
    pub fn new(config: GroupConfig) -> GroupCoordinator {
        GroupCoordinator {
            groups: RefCell::new(HashMap::new()),
            partitions: RefCell::new(OffsetsPartitions::default()),
            loads_to_start: RefCell::new(Vec::new()),
            loads_queued: crate::rt::Semaphore::new(0),
            config,
        }
    }

    /// This broker became the leader of offsets `partition` with `leader_epoch` (Kafka's
    /// `GroupCoordinator.onElection`; the coordinator epoch is the leader epoch): unless it
    /// already coordinates it, a load of its log is queued and its groups answer
    /// `COORDINATOR_LOAD_IN_PROGRESS` until the load finished.
    pub fn on_election(&self, partition: i32, leader_epoch: i32) {
        if let Some(load) = self.partitions.borrow_mut().elect(partition, leader_epoch) {
            tracing::info!(partition, leader_epoch, "loading consumer groups");
            self.loads_to_start.borrow_mut().push((partition, load));
            self.loads_queued.signal(1);
        }
    }

    /// This broker no longer leads offsets `partition` from `leader_epoch` on (`None`: the
    /// partition is gone) (Kafka's `GroupCoordinator.onResignation`): its groups — those
    /// whose partition among `offsets_partitions` is `partition` — are unloaded (generations
    /// and members go; members rejoin at the new coordinator, which replays the committed
    /// offsets from its replica of the log) and its ops answer `NOT_COORDINATOR`.
    pub fn on_resignation(
        &self,
        partition: i32,
        leader_epoch: Option<i32>,
        offsets_partitions: usize,
    ) {
        if !self.partitions.borrow_mut().resign(partition, leader_epoch) {
            return;
        }
        self.loads_to_start
            .borrow_mut()
            .retain(|(p, _)| *p != partition);
        let unloaded =
            unload_partition(&mut self.groups.borrow_mut(), partition, offsets_partitions);
        tracing::info!(
            partition,
            ?leader_epoch,
            groups = unloaded,
            "unloaded consumer groups"
        );
    }

    /// Waits until a load is queued, then returns every queued load (possibly none: a
    /// resignation may have taken them back), to be started now. `None` once
    /// [`GroupCoordinator::stop_loads`] was called.
    pub(super) async fn next_loads(&self) -> Option<Vec<(i32, LoadId)>> {
        self.loads_queued.acquire(1).await.ok()?;
        Some(std::mem::take(&mut *self.loads_to_start.borrow_mut()))
    }

    /// The broker is stopping: [`GroupCoordinator::next_loads`] returns `None` from now on.
    pub(super) fn stop_loads(&self) {
        self.loads_queued.close();
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
}

/// Where a coordinated offsets partition stands (Kafka's `CoordinatorState`, without the
/// states that need no entry: not coordinated = absent).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CoordinatorState {
    /// Its log is being replayed; ops answer `COORDINATOR_LOAD_IN_PROGRESS`.
    Loading,
    /// Its groups are served.
    Active,
    /// Its log could not be replayed; ops answer `NOT_COORDINATOR` until an election at a
    /// newer leader epoch loads it again (Kafka's FAILED).
    Failed,
}

/// Names one load, so a load that finishes after its partition was resigned (and perhaps
/// elected again, with a new load) is told apart and dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadId(u64);

#[derive(Clone, Copy, Debug)]
struct PartitionCoordinator {
    /// The coordinator epoch: the leader epoch it was elected with (the highest seen).
    leader_epoch: i32,
    state: CoordinatorState,
    load: LoadId,
}

/// The offsets partitions this shard coordinates, by partition index: a state machine
/// without I/O, driven by elections, resignations and finished loads.
#[derive(Debug, Default)]
pub struct OffsetsPartitions {
    coordinators: HashMap<i32, PartitionCoordinator>,
    next_load: u64,
}

impl OffsetsPartitions {
    /// This broker became the leader of `partition` with `leader_epoch` (Kafka's
    /// `onElection`). Returns the load to run when the partition was not coordinated here, or
    /// its load failed and `leader_epoch` is newer; `None` when it is already loading or
    /// active (the epoch is raised, nothing reloads: this broker's log stayed the partition's
    /// log) or failed at this epoch.
    pub fn elect(&mut self, partition: i32, leader_epoch: i32) -> Option<LoadId> {
        if let Some(c) = self.coordinators.get_mut(&partition) {
            let retry = c.state == CoordinatorState::Failed && leader_epoch > c.leader_epoch;
            c.leader_epoch = c.leader_epoch.max(leader_epoch);
            if !retry {
                return None;
            }
        }
        let load = LoadId(self.next_load);
        self.next_load += 1;
        self.coordinators.insert(
            partition,
            PartitionCoordinator {
                leader_epoch,
                state: CoordinatorState::Loading,
                load,
            },
        );
        Some(load)
    }

    /// This broker no longer leads `partition` (Kafka's `onResignation`): from `leader_epoch`
    /// on, or at all when `None` (the partition is gone). Returns whether it was coordinated
    /// here, so its groups must be unloaded. A resignation older than the coordinator's
    /// epoch is ignored, as Kafka ignores it.
    pub fn resign(&mut self, partition: i32, leader_epoch: Option<i32>) -> bool {
        let Some(c) = self.coordinators.get(&partition) else {
            return false;
        };
        if leader_epoch.is_some_and(|e| e <= c.leader_epoch) {
            return false;
        }
        self.coordinators.remove(&partition);
        true
    }

    /// `load` of `partition` replayed its log. Returns whether its groups are to be
    /// installed (the partition is active from now on); `false` when the load is stale (the
    /// partition was resigned since).
    pub fn finish_load(&mut self, partition: i32, load: LoadId) -> bool {
        match self.coordinators.get_mut(&partition) {
            Some(c) if c.load == load && c.state == CoordinatorState::Loading => {
                c.state = CoordinatorState::Active;
                true
            }
            _ => false,
        }
    }

    /// `load` of `partition` could not read its log: the partition is
    /// [`CoordinatorState::Failed`] until an election at a newer leader epoch.
    pub fn fail_load(&mut self, partition: i32, load: LoadId) {
        if let Some(c) = self
            .coordinators
            .get_mut(&partition)
            .filter(|c| c.load == load)
        {
            c.state = CoordinatorState::Failed;
        }
    }

    /// Where `partition` stands here; `None` when this broker was not elected its leader.
    pub fn state(&self, partition: i32) -> Option<CoordinatorState> {
        self.coordinators.get(&partition).map(|c| c.state)
    }

    /// Whether `partition`'s groups may be served now. Errors:
    /// [`GroupError::CoordinatorLoadInProgress`] while loading,
    /// [`GroupError::NotCoordinator`] when not coordinated here or its load failed.
    pub fn check(&self, partition: i32) -> Result<(), GroupError> {
        match self.state(partition) {
            Some(CoordinatorState::Active) => Ok(()),
            Some(CoordinatorState::Loading) => Err(GroupError::CoordinatorLoadInProgress),
            Some(CoordinatorState::Failed) | None => Err(GroupError::NotCoordinator),
        }
    }
}

/// What a replay of an offsets partition hands over, in log order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Replayed {
    /// A record, at `offset` in the log; `producer_id` is its batch's when the batch is
    /// transactional (a TxnOffsetCommit's record, pending until its marker).
    Record {
        offset: i64,
        producer_id: Option<i64>,
        record: OffsetsRecord,
    },
    /// A transaction marker of `producer_id`.
    Marker { producer_id: i64, end: TxnResult },
}

/// Applies one replayed item to `groups`, the groups of one offsets partition: a record later
/// in the log wins, tombstones delete (pending transactional offsets of their partition
/// too), a transactional record's offset stays pending until its producer's marker, which
/// materialises (commit) or discards (abort) it (`super::txn_offsets`).
pub(super) fn apply_replayed(groups: &mut HashMap<String, Group>, item: Replayed, now: Instant) {
    match item {
        Replayed::Record {
            offset,
            producer_id,
            record,
        } => apply_record(groups, offset, producer_id, record, now),
        Replayed::Marker { producer_id, end } => {
            complete_transaction(groups, producer_id, end, |_| true);
        }
    }
}

/// `producer_id`'s transaction ended with `end` on an offsets partition: the pending offsets
/// of every group of `groups` that `on_partition` accepts (the groups of that partition)
/// are materialised or discarded. Returns how many groups had some.
pub(super) fn complete_transaction(
    groups: &mut HashMap<String, Group>,
    producer_id: i64,
    end: TxnResult,
    on_partition: impl Fn(&str) -> bool,
) -> usize {
    let mut completed = 0;
    for (id, g) in groups.iter_mut() {
        if g.pending_txn.has_producer(producer_id) && on_partition(id) {
            g.pending_txn.complete(producer_id, end, &mut g.offsets);
            completed += 1;
        }
    }
    completed
}

fn apply_record(
    groups: &mut HashMap<String, Group>,
    record_offset: i64,
    producer_id: Option<i64>,
    record: OffsetsRecord,
    now: Instant,
) {
    match record {
        OffsetsRecord::Offset {
            group,
            topic,
            partition,
            value: Some(value),
        } => {
            let g = groups
                .entry(group.clone())
                .or_insert_with(|| Group::new(&group));
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
        OffsetsRecord::Offset {
            group,
            topic,
            partition,
            value: None,
        } => {
            if let Some(g) = groups.get_mut(&group) {
                let key = (topic, partition);
                g.offsets.remove(&key);
                g.pending_txn.remove_key(&key);
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

/// Removes from `groups` those whose offsets partition (of `partitions`) is `partition`,
/// answering their parked joins and syncs `NOT_COORDINATOR` (Kafka's unload on resignation:
/// members rejoin at the new coordinator). Returns how many were removed.
pub(super) fn unload_partition(
    groups: &mut HashMap<String, Group>,
    partition: i32,
    partitions: usize,
) -> usize {
    let before = groups.len();
    groups.retain(|id, g| {
        if super::partition_for(id, partitions) != partition {
            return true;
        }
        g.unload();
        false
    });
    before - groups.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Replays `record` at offset 0, outside any transaction.
    fn apply_plain(groups: &mut HashMap<String, Group>, record: OffsetsRecord, now: Instant) {
        apply_record(groups, 0, None, record, now);
    }

    fn commit(group: &str, offset: i64) -> OffsetsRecord {
        OffsetsRecord::Offset {
            group: group.into(),
            topic: "t".into(),
            partition: 0,
            value: Some(CommittedOffset {
                offset,
                leader_epoch: -1,
                metadata: String::new(),
                commit_timestamp_ms: 0,
                record_offset: -1,
            }),
        }
    }

    #[test]
    fn an_elected_partition_loads_then_serves_and_a_resigned_one_is_not_coordinated() {
        let mut p = OffsetsPartitions::default();
        assert_eq!(p.check(3), Err(GroupError::NotCoordinator));
        let load = p.elect(3, 5).expect("a new election loads");
        assert_eq!(p.check(3), Err(GroupError::CoordinatorLoadInProgress));
        assert_eq!(p.elect(3, 5), None, "one load per election");
        assert!(p.finish_load(3, load));
        assert_eq!(p.check(3), Ok(()));
        // Still the leader with a newer epoch: the same log, no reload.
        assert_eq!(p.elect(3, 6), None);
        assert_eq!(p.check(3), Ok(()));
        // A resignation from an epoch the coordinator already has is stale.
        assert!(!p.resign(3, Some(6)));
        assert_eq!(p.check(3), Ok(()));
        assert!(p.resign(3, Some(7)));
        assert_eq!(p.check(3), Err(GroupError::NotCoordinator));
        assert!(!p.resign(3, Some(8)), "nothing left to unload");
        // Leader again later: the log is replayed again (it holds the other leader's writes).
        assert!(p.elect(3, 9).is_some());
        assert_eq!(p.check(3), Err(GroupError::CoordinatorLoadInProgress));
        assert!(
            p.resign(3, None),
            "a deleted partition resigns whatever its epoch"
        );
        assert_eq!(p.check(3), Err(GroupError::NotCoordinator));
    }

    #[test]
    fn elections_queue_loads_and_a_resignation_takes_its_load_back_and_unloads_its_groups() {
        crate::rt::LocalExecutorBuilder::default()
            .spawn(|| async {
                let c = GroupCoordinator::new(GroupConfig {
                    min_session_timeout_ms: 6000,
                    max_session_timeout_ms: 1_800_000,
                    initial_rebalance_delay_ms: 0,
                    offsets_retention_ms: 604_800_000,
                    offsets_retention_check_interval_ms: 600_000,
                });
                let partitions = 50;
                let group_of = |p: i32| {
                    (0..)
                        .map(|i| format!("g{i}"))
                        .find(|g| super::super::partition_for(g, partitions) == p)
                        .expect("some name lands on every partition")
                };
                c.on_election(1, 0);
                c.on_election(2, 0);
                c.on_election(1, 0); // already loading: no second load
                let loads = c.next_loads().await.expect("not stopped");
                assert_eq!(loads.iter().map(|l| l.0).collect::<Vec<_>>(), vec![1, 2]);
                for (p, load) in loads {
                    assert!(c.partitions.borrow_mut().finish_load(p, load));
                }
                let (kept, dropped) = (group_of(1), group_of(2));
                for g in [&kept, &dropped] {
                    apply_plain(&mut c.groups.borrow_mut(), commit(g, 1), Instant::now());
                }
                // Partition 3 is elected and resigned before its load started.
                c.on_election(3, 0);
                c.on_resignation(3, Some(1), partitions);
                c.on_resignation(2, Some(1), partitions);
                assert_eq!(
                    c.next_loads().await,
                    Some(vec![]),
                    "partition 3's load was taken back"
                );
                assert!(c.groups.borrow().contains_key(&kept));
                assert!(
                    !c.groups.borrow().contains_key(&dropped),
                    "unloaded with partition 2"
                );
                assert_eq!(
                    c.partitions.borrow().check(2),
                    Err(GroupError::NotCoordinator)
                );
                c.stop_loads();
                assert_eq!(c.next_loads().await, None);
            })
            .expect("executor")
            .join()
            .expect("test ran");
    }

    #[test]
    fn a_load_that_finishes_after_its_partition_moved_is_dropped() {
        let mut p = OffsetsPartitions::default();
        let first = p.elect(0, 1).expect("loads");
        assert!(p.resign(0, Some(2)));
        assert!(!p.finish_load(0, first), "resigned while loading");
        let second = p.elect(0, 3).expect("loads again");
        assert_ne!(first, second);
        assert!(!p.finish_load(0, first), "the earlier load is stale");
        assert_eq!(p.check(0), Err(GroupError::CoordinatorLoadInProgress));
        // A stale load's failure leaves the current one alone.
        p.fail_load(0, first);
        assert_eq!(p.check(0), Err(GroupError::CoordinatorLoadInProgress));
        assert!(p.finish_load(0, second));
        assert_eq!(p.check(0), Ok(()));
        // A failed load leaves the partition uncoordinated until an election at a newer
        // leader epoch (a role re-applied at the same epoch, e.g. an ISR change, does not).
        assert!(p.resign(0, Some(4)));
        let third = p.elect(0, 5).expect("loads");
        p.fail_load(0, third);
        assert_eq!(p.state(0), Some(CoordinatorState::Failed));
        assert_eq!(p.check(0), Err(GroupError::NotCoordinator));
        assert_eq!(p.elect(0, 5), None, "same epoch: no reload");
        assert_eq!(p.check(0), Err(GroupError::NotCoordinator));
        let fourth = p.elect(0, 6).expect("a newer election retries the load");
        assert_eq!(p.check(0), Err(GroupError::CoordinatorLoadInProgress));
        assert!(p.finish_load(0, fourth));
        assert_eq!(p.check(0), Ok(()));
    }

    #[test]
    fn replay_keeps_the_last_commit_and_honours_tombstones() {
        let now = Instant::now();
        let mut groups = HashMap::new();
        apply_plain(&mut groups, commit("g", 10), now);
        apply_plain(&mut groups, commit("g", 25), now);
        apply_plain(&mut groups, commit("h", 7), now);
        assert_eq!(groups["g"].offsets[&("t".to_string(), 0)].offset, 25);
        apply_plain(
            &mut groups,
            OffsetsRecord::Offset {
                group: "h".into(),
                topic: "t".into(),
                partition: 0,
                value: None,
            },
            now,
        );
        assert!(groups["h"].offsets.is_empty());
        apply_plain(
            &mut groups,
            OffsetsRecord::Group {
                group: "h".into(),
                value: None,
            },
            now,
        );
        assert!(!groups.contains_key("h"));
        assert!(groups.contains_key("g"));
    }

    #[test]
    fn replay_keeps_transactional_offsets_pending_until_their_marker() {
        let now = Instant::now();
        let mut groups = HashMap::new();
        let mut at = 0;
        let replay = |groups: &mut HashMap<String, Group>, item: Replayed| {
            apply_replayed(groups, item, now);
        };
        let mut record = |producer_id, record| {
            at += 1;
            Replayed::Record {
                offset: at,
                producer_id,
                record,
            }
        };
        let key = ("t".to_string(), 0);
        replay(&mut groups, record(None, commit("g", 5)));
        // Producer 1 commits 10 and producer 2 commits 20 in their transactions.
        replay(&mut groups, record(Some(1), commit("g", 10)));
        replay(&mut groups, record(Some(2), commit("g", 20)));
        replay(&mut groups, record(Some(3), commit("h", 30)));
        assert_eq!(
            groups["g"].offsets[&key].offset, 5,
            "pending offsets are not committed"
        );
        assert!(groups["g"].pending_txn.has_pending(&key));
        // Producer 1 commits: its offset is materialised, with its record's offset.
        replay(
            &mut groups,
            Replayed::Marker {
                producer_id: 1,
                end: TxnResult::Commit,
            },
        );
        assert_eq!(groups["g"].offsets[&key].offset, 10);
        assert_eq!(groups["g"].offsets[&key].record_offset, 2);
        assert!(
            groups["g"].pending_txn.has_pending(&key),
            "producer 2's still is"
        );
        // Producer 2 aborts: discarded.
        replay(
            &mut groups,
            Replayed::Marker {
                producer_id: 2,
                end: TxnResult::Abort,
            },
        );
        assert_eq!(groups["g"].offsets[&key].offset, 10);
        assert!(!groups["g"].pending_txn.has_pending(&key));
        // Producer 3's marker is not in the log yet: its offset stays pending, and its group
        // exists (with nothing committed).
        assert!(groups["h"].offsets.is_empty());
        assert!(groups["h"].pending_txn.has_pending(&key));
        assert!(!groups["h"].is_vacant());
        // A tombstone for the partition discards pending offsets too.
        replay(
            &mut groups,
            record(
                None,
                OffsetsRecord::Offset {
                    group: "h".into(),
                    topic: "t".into(),
                    partition: 0,
                    value: None,
                },
            ),
        );
        assert!(groups["h"].pending_txn.is_empty());
        replay(
            &mut groups,
            Replayed::Marker {
                producer_id: 3,
                end: TxnResult::Commit,
            },
        );
        assert!(groups["h"].offsets.is_empty());
    }

    #[test]
    fn unloading_a_partition_removes_only_its_groups() {
        let partitions = 50;
        let now = Instant::now();
        let mut groups = HashMap::new();
        let names: Vec<String> = (0..20).map(|i| format!("group-{i}")).collect();
        for name in &names {
            apply_plain(&mut groups, commit(name, 1), now);
        }
        let target = super::super::partition_for(&names[0], partitions);
        let on_target = names
            .iter()
            .filter(|n| super::super::partition_for(n, partitions) == target)
            .count();
        assert_eq!(unload_partition(&mut groups, target, partitions), on_target);
        assert_eq!(groups.len(), names.len() - on_target);
        assert!(groups
            .keys()
            .all(|n| super::super::partition_for(n, partitions) != target));
    }
}
