//! A shard's group coordinator state: the groups of the `__consumer_offsets` partitions this
//! broker leads and this shard owns, and where each of those partitions stands (the shared
//! runtime's [`CoordinatedPartitions`]). Pure state; the service ([`super::service`]) runs the
//! ops, the appends and the loads.
//!
//! A partition's coordinator follows its leadership, as Kafka's `CoordinatorRuntime` does
//! (`crate::coordinator_runtime`: loading, then active; resigned, its groups are unloaded —
//! parked joins and syncs answered `NOT_COORDINATOR`).
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
use crate::coordinator_runtime::{CoordinatedPartitions, LoadId, LoadQueue};
use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Instant;
use storage::TxnResult;

/// Per-shard coordinator state: the groups of the offsets partitions this shard coordinates.
pub struct GroupCoordinator {
    /// Groups of active partitions only (module invariant).
    pub(super) groups: RefCell<HashMap<String, Group>>,
    pub(super) partitions: RefCell<CoordinatedPartitions>,
    /// Loads elected but not started yet.
    loads: LoadQueue,
    pub(super) config: GroupConfig,
}

impl GroupCoordinator {
    pub fn new(config: GroupConfig) -> GroupCoordinator {
        GroupCoordinator {
            groups: RefCell::new(HashMap::new()),
            partitions: RefCell::new(CoordinatedPartitions::default()),
            loads: LoadQueue::default(),
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
            self.loads.push(partition, load);
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
        self.loads.cancel(partition);
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
        self.loads.next().await
    }

    /// The broker is stopping: [`GroupCoordinator::next_loads`] returns `None` from now on.
    pub(super) fn stop_loads(&self) {
        self.loads.stop();
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
                    Err(crate::coordinator_runtime::NotServing::NotCoordinator)
                );
                c.stop_loads();
                assert_eq!(c.next_loads().await, None);
            })
            .expect("executor")
            .join()
            .expect("test ran");
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
