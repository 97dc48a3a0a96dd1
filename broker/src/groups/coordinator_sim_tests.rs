//! The group coordinator under the deterministic simulation (`replication::sim`, issue #26
//! point 5): the coordinator's real ops, load and deadline check ([`super::engine`]) hosted by
//! [`SimHost`] — the simulation's clock and a [`SimLog`] as the group's `__consumer_offsets`
//! partition (seeded write and fsync delays; a crash loses what was not written).
//!
//! Per seed: [`MEMBERS`] consumers of one group, each living for a seeded span, join (a first
//! join gets `MEMBER_ID_REQUIRED`), sync (the leader assigns [`PARTITIONS`] partitions
//! round-robin over the members its JoinGroup answer lists), then heartbeat and commit offsets
//! at seeded intervals, rejoining when told to; some pause longer than their session (the
//! coordinator expels them), and at the end of its span a member leaves with LeaveGroup or
//! just stops (its session expires). Requests take a seeded delay to arrive. One to three
//! times per seed — and once more at the end — the coordinator fails over: its process
//! crashes (the offsets log loses what was not written; parked joins and syncs are answered
//! `NOT_COORDINATOR`), and after a seeded gap a new coordinator at the next leader epoch
//! opens the log from the same simulated disk and replays it (`on_election`, `next_loads`,
//! [`engine::load`]) while members are answered `COORDINATOR_LOAD_IN_PROGRESS`. Group
//! deadlines are checked every [`DEADLINE_CHECK_INTERVAL`] of simulated time, as the shard
//! does. Every commit carries a value from one counter, taken just before the append, so
//! values grow in log order.
//!
//! Checkers (a failure names the invariant and prints `SLUICE_SIM_SEED=<seed>`):
//! 1. **generations only grow**: within one coordinator's tenure the group's generation never
//!    goes down between two observations (after every op and every deadline check); a
//!    failover's loaded generation is at least every generation a member was successfully
//!    synced at (the assignment was stored before any member got it), and each member's
//!    successful syncs never go back a generation (a rejoin to a Stable group without
//!    changes syncs again at the same one, as Kafka);
//! 2. **the leader is a member**: in CompletingRebalance and Stable the group has a leader and
//!    it is one of its members; the leader's JoinGroup answer lists itself;
//! 3. **one owner per partition**: while the group is Stable, every partition is assigned to
//!    exactly one member of the current generation (the members' assignments are disjoint
//!    and cover every partition);
//! 4. **committed offsets survive the failover**: after every load, each partition's committed
//!    offset is at least the largest one a member was acknowledged, and is a value some
//!    member committed (nothing invented);
//! 5. **not vacuous**: over the seeds run, members were synced, commits acknowledged and
//!    failovers loaded.
//!
//! Apart from the seeds, one fixed scenario over a [`SimLog`] checks TxnOffsetCommit's
//! pending offsets through commits, aborts and two loads
//! (`transactional_offsets_are_pending_until_their_marker_also_after_a_load`).
//!
//! Not verified: the routing and the coordinating check against the metadata image (the
//! service's), replication of the offsets partition (the new coordinator reads the old one's
//! disk after its crash: with `acks=all` every acknowledged record is on the new leader's
//! replica, which `replication::sim` tests), static members, DeleteGroups, offset expiry,
//! the in-memory offsets between two loads, and that the group settles (liveness).

use super::engine::{self, GroupsHost};
use super::error::GroupError;
use super::group::{GroupConfig, GroupState, JoinParams, SyncParams};
use super::offsets_log::OffsetsRecord;
use super::ops::{GroupOp, GroupReply, OffsetCommitEntry};
use super::{GroupCoordinator, DEADLINE_CHECK_INTERVAL};
use crate::coordinator_runtime::log::REPLAY_READ_BYTES;
use bytes::Bytes;
use replication::runtime::{Clock, MonotonicTime, Runtime};
use replication::sim::{seeds, Executor, SeedGuard, SimDisk, SimLog, SimRuntime};
use replication::PartitionStore;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::time::{Duration, Instant};
use storage::LeaderEpoch;

/// Seeds `cargo test` runs (`SLUICE_SIM_BASE` / `SLUICE_SIM_COUNT` / `SLUICE_SIM_SEED` choose
/// others).
const SEEDS: u64 = 200;
const MEMBERS: usize = 4;
/// Partitions of the consumed topic the leader assigns.
const PARTITIONS: i32 = 6;
const GROUP: &str = "g";
const TOPIC: &str = "t";
/// Simulated time a seed runs before its last failover.
const RUN: Duration = Duration::from_secs(30);

const CONFIG: GroupConfig = GroupConfig {
    min_session_timeout_ms: 100,
    max_session_timeout_ms: 60_000,
    initial_rebalance_delay_ms: 300,
    offsets_retention_ms: i64::MAX / 2,
    offsets_retention_check_interval_ms: u64::MAX / 2,
};

/// One coordinator incarnation: the engine's host on the simulation.
struct SimHost {
    rt: SimRuntime,
    /// `Instant` for simulated time zero (the group state machine takes `Instant`s).
    origin: Instant,
    coordinator: GroupCoordinator,
    log: SimLog,
    leader_epoch: LeaderEpoch,
}

impl GroupsHost for SimHost {
    fn coordinator(&self) -> &GroupCoordinator {
        &self.coordinator
    }

    fn now(&self) -> Instant {
        self.origin + self.rt.now().0
    }

    fn epoch_ms(&self) -> i64 {
        1_700_000_000_000 + i64::try_from(self.rt.now().0.as_millis()).unwrap_or(0)
    }

    fn offsets_partition_count(&self) -> usize {
        1
    }

    async fn append_as(
        &self,
        _partition: i32,
        records: &[OffsetsRecord],
        producer: Option<super::ops::TxnProducer>,
    ) -> Result<i64, GroupError> {
        let batch = engine::offsets_batch(records, self.epoch_ms(), producer);
        let batches = storage::ValidatedBatches::validate(&batch)
            .expect("the coordinator builds valid batches")
            .with_origin(storage::AppendOrigin::Coordinator);
        let info = self
            .log
            .append(batches, self.leader_epoch, storage::AppendUntil::Written)
            .await?;
        self.log.flush_to(info.last_offset.plus(1)).await?;
        Ok(info.base_offset.0)
    }

    async fn replay(
        &self,
        partition: i32,
        apply: &mut dyn FnMut(super::coordinator::Replayed),
    ) -> Result<(), GroupError> {
        let end = self.log.log_end_offset();
        let mut at = self.log.log_start_offset();
        while at < end {
            let batches = self
                .log
                .read(at, REPLAY_READ_BYTES, end)
                .await
                .map_err(|_| GroupError::CoordinatorNotAvailable)?;
            let Some(last) = batches.last() else {
                break;
            };
            let next = last.header().last_offset().plus(1);
            for batch in batches {
                engine::replay_batch(&batch.to_vec(), partition, apply);
            }
            at = next;
        }
        Ok(())
    }
}

/// What the members were told, for the checkers.
#[derive(Default)]
struct Model {
    /// Per partition: the largest acknowledged commit.
    acked: BTreeMap<i32, i64>,
    /// Per partition: every value ever sent in a commit.
    issued: BTreeMap<i32, BTreeSet<i64>>,
    next_value: i64,
    /// The largest generation a member was successfully synced at.
    synced_max: i32,
    /// The group's generation last observed in this coordinator's tenure.
    generation_seen: i32,
    syncs: u64,
    commits_acked: u64,
    loads: u64,
}

struct World {
    rt: SimRuntime,
    origin: Instant,
    disk: SimDisk,
    host: RefCell<Rc<SimHost>>,
    epoch: Cell<i32>,
    model: RefCell<Model>,
}

impl World {
    fn host(&self) -> Rc<SimHost> {
        self.host.borrow().clone()
    }

    fn past(&self, t: MonotonicTime) -> bool {
        self.rt.now() >= t
    }

    async fn sleep_between(&self, min: Duration, max: Duration) {
        let us = self
            .rt
            .random(micros(min)..micros(max).max(micros(min) + 1));
        self.rt.sleep(Duration::from_micros(us)).await;
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Checkers 1 (within a tenure), 2 and 3 on the current coordinator's group.
fn check_group(world: &World) {
    let host = world.host();
    let groups = host.coordinator.groups.borrow();
    let Some(g) = groups.get(GROUP) else {
        return;
    };
    let mut model = world.model.borrow_mut();
    assert!(
        g.generation() >= model.generation_seen,
        "invariant 'generations only grow': {} after {}",
        g.generation(),
        model.generation_seen
    );
    model.generation_seen = g.generation();
    if !matches!(
        g.state(),
        GroupState::CompletingRebalance | GroupState::Stable
    ) {
        return;
    }
    let members: Vec<_> = g.members();
    let leader = g
        .leader()
        .expect("invariant 'a rebalanced group has a leader'");
    assert!(
        members.iter().any(|m| m.id == leader),
        "invariant 'the leader is a member': {leader} not among {:?}",
        members.iter().map(|m| &m.id).collect::<Vec<_>>()
    );
    if g.state() != GroupState::Stable {
        return;
    }
    let mut owners: BTreeMap<i32, &str> = BTreeMap::new();
    for m in &members {
        for p in decode(&m.assignment) {
            if let Some(other) = owners.insert(p, &m.id) {
                panic!(
                    "invariant 'one owner per partition': {p} assigned to {other} and {} \
                     in generation {}",
                    m.id,
                    g.generation()
                );
            }
        }
    }
    assert_eq!(
        owners.keys().copied().collect::<Vec<_>>(),
        (0..PARTITIONS).collect::<Vec<_>>(),
        "invariant 'one owner per partition': every partition is assigned in generation {}",
        g.generation()
    );
}

fn encode(partitions: &[i32]) -> Bytes {
    partitions
        .iter()
        .map(|p| u8::try_from(*p).expect("few partitions"))
        .collect()
}

fn decode(assignment: &[u8]) -> Vec<i32> {
    assignment.iter().map(|p| i32::from(*p)).collect()
}

/// One request: a seeded delay on the way, then the op on the current coordinator, if it
/// coordinates the partition now (the service's check), then the checkers. `make` builds the
/// op on arrival (a commit takes its values then, so values grow in log order).
async fn call(world: &World, make: impl FnOnce(&mut Model) -> GroupOp) -> GroupReply {
    world
        .sleep_between(Duration::ZERO, Duration::from_millis(5))
        .await;
    let host = world.host();
    if let Err(error) = host.coordinator.partitions.borrow().check(0) {
        return GroupReply::Error(error.into());
    }
    let op = make(&mut world.model.borrow_mut());
    let reply = engine::run(&*host, 0, GROUP, op).await;
    check_group(world);
    reply
}

/// One member's life (module doc): join, sync, then heartbeat and commit until `end`.
async fn member(world: Rc<World>, index: usize, end: MonotonicTime, leaves: bool) {
    let session_ms = i32::try_from(world.rt.random(1_000..4_000)).unwrap_or(1_000);
    let session = Duration::from_millis(u64::try_from(session_ms).unwrap_or(1_000));
    let backoff = Duration::from_millis(100);
    let mut member_id = String::new();
    let mut last_synced = -1;
    'join: while !world.past(end) {
        let join = JoinParams {
            member_id: member_id.clone(),
            group_instance_id: None,
            client_id: format!("c{index}"),
            client_host: "/sim".to_string(),
            session_timeout_ms: session_ms,
            rebalance_timeout_ms: session_ms * 2,
            protocol_type: "consumer".to_string(),
            protocols: vec![("sim".to_string(), Bytes::new())],
            require_known_member_id: true,
            supports_skip_assignment: false,
        };
        let joined = match call(&world, |_| GroupOp::Join(join)).await {
            GroupReply::Join(r) => r,
            _ => {
                world.rt.sleep(backoff).await;
                continue;
            }
        };
        match joined.error {
            None => {}
            Some(GroupError::MemberIdRequired) => {
                member_id = joined.member_id;
                continue;
            }
            Some(GroupError::UnknownMemberId) => {
                member_id.clear();
                continue;
            }
            Some(_) => {
                world.rt.sleep(backoff).await;
                continue;
            }
        }
        member_id = joined.member_id.clone();
        let generation = joined.generation;
        let mut assignments = Vec::new();
        if joined.leader == member_id {
            assert!(
                joined.members.iter().any(|m| m.member_id == member_id),
                "invariant 'the leader is a member': the leader's JoinGroup lists it"
            );
            let ids: Vec<&String> = joined.members.iter().map(|m| &m.member_id).collect();
            let mut by_member: BTreeMap<&String, Vec<i32>> = BTreeMap::new();
            for p in 0..PARTITIONS {
                let owner = ids[usize::try_from(p).unwrap_or(0) % ids.len()];
                by_member.entry(owner).or_default().push(p);
            }
            assignments = ids
                .iter()
                .map(|id| {
                    let ps = by_member.get(id).cloned().unwrap_or_default();
                    ((*id).clone(), encode(&ps))
                })
                .collect();
        }
        let sync = SyncParams {
            generation,
            member_id: member_id.clone(),
            group_instance_id: None,
            protocol_type: Some("consumer".to_string()),
            protocol_name: joined.protocol_name.clone(),
            assignments,
        };
        let owned = match call(&world, |_| GroupOp::Sync(sync)).await {
            GroupReply::Sync(s) if s.error.is_none() => decode(&s.assignment),
            _ => {
                world.rt.sleep(backoff).await;
                continue;
            }
        };
        {
            let mut model = world.model.borrow_mut();
            assert!(
                generation >= last_synced,
                "invariant 'generations only grow': {member_id} synced at {generation} \
                 after {last_synced}"
            );
            last_synced = generation;
            model.synced_max = model.synced_max.max(generation);
            model.syncs += 1;
        }
        loop {
            // Now and then a pause longer than the session: the coordinator expels it.
            if world.rt.chance(3) {
                world.sleep_between(session, session * 2).await;
            } else {
                world.sleep_between(session / 6, session / 3).await;
            }
            if world.past(end) {
                if leaves {
                    let members = vec![(member_id.clone(), None)];
                    call(&world, |_| GroupOp::Leave { members }).await;
                }
                return;
            }
            if !owned.is_empty() && world.rt.chance(50) {
                commit(&world, &member_id, generation, &owned).await;
            }
            let heartbeat = |_: &mut Model| GroupOp::Heartbeat {
                member_id: member_id.clone(),
                group_instance_id: None,
                generation,
            };
            match call(&world, heartbeat).await {
                GroupReply::Done => {}
                GroupReply::Error(GroupError::UnknownMemberId) => {
                    member_id.clear();
                    continue 'join;
                }
                GroupReply::Error(
                    GroupError::RebalanceInProgress | GroupError::IllegalGeneration,
                ) => continue 'join,
                GroupReply::Error(_) => {}
                other => panic!("a heartbeat answered {other:?}"),
            }
        }
    }
}

/// Commits the next counter value for each partition `owned`; acknowledged ones go to the
/// model.
async fn commit(world: &World, member_id: &str, generation: i32, owned: &[i32]) {
    let sent = RefCell::new(Vec::new());
    let make = |model: &mut Model| {
        let offsets = owned
            .iter()
            .map(|&p| {
                model.next_value += 1;
                let value = model.next_value;
                model.issued.entry(p).or_default().insert(value);
                sent.borrow_mut().push((p, value));
                OffsetCommitEntry {
                    topic: TOPIC.to_string(),
                    partition: p,
                    offset: value,
                    leader_epoch: -1,
                    metadata: None,
                }
            })
            .collect();
        GroupOp::Commit {
            member_id: member_id.to_string(),
            group_instance_id: None,
            generation,
            offsets,
        }
    };
    let GroupReply::PartitionErrors(results) = call(world, make).await else {
        return;
    };
    let mut model = world.model.borrow_mut();
    for ((_, p, result), (sent_p, value)) in results.iter().zip(sent.borrow().iter()) {
        assert_eq!(*p, *sent_p, "the answer lists the partitions in order");
        if result.is_ok() {
            let acked = model.acked.entry(*p).or_insert(*value);
            *acked = (*acked).max(*value);
            model.commits_acked += 1;
        }
    }
}

/// The coordinator's process crashes; after a gap a new one at the next leader epoch loads
/// the offsets log from the same disk. Then checkers 1 (across the failover) and 4.
async fn failover(world: &World) {
    let old = world.host();
    old.log.crash();
    let epoch = world.epoch.get() + 1;
    world.epoch.set(epoch);
    old.coordinator.on_resignation(0, Some(epoch), 1);
    world
        .sleep_between(Duration::ZERO, Duration::from_millis(500))
        .await;
    let new = Rc::new(SimHost {
        rt: world.rt.clone(),
        origin: world.origin,
        coordinator: GroupCoordinator::new(CONFIG),
        log: SimLog::open(world.rt.clone(), world.disk.clone(), u64::MAX),
        leader_epoch: LeaderEpoch(epoch),
    });
    new.coordinator.on_election(0, epoch);
    *world.host.borrow_mut() = new.clone();
    let loads = new.coordinator.next_loads().await.expect("not stopped");
    for (partition, load) in loads {
        engine::load(&*new, partition, load).await;
    }
    check_loaded(world, &new);
}

/// Checkers 1 (a load keeps every synced generation) and 4 on a finished load.
fn check_loaded(world: &World, host: &SimHost) {
    if host.coordinator.partitions.borrow().check(0).is_err() {
        return; // A newer failover took over meanwhile: it checks its own load.
    }
    let groups = host.coordinator.groups.borrow();
    let mut model = world.model.borrow_mut();
    model.loads += 1;
    let g = groups.get(GROUP);
    let generation = g.map_or(0, |g| g.generation());
    assert!(
        generation >= model.synced_max,
        "invariant 'generations only grow': loaded generation {generation}, a member was \
         synced at {}",
        model.synced_max
    );
    model.generation_seen = generation;
    for (p, acked) in &model.acked {
        let loaded = g.and_then(|g| g.offsets.get(&(TOPIC.to_string(), *p)));
        let Some(loaded) = loaded else {
            panic!("invariant 'committed offsets survive': partition {p} lost {acked}");
        };
        assert!(
            loaded.offset >= *acked,
            "invariant 'committed offsets survive': partition {p} loaded {} < acknowledged \
             {acked}",
            loaded.offset
        );
        assert!(
            model
                .issued
                .get(p)
                .is_some_and(|s| s.contains(&loaded.offset)),
            "invariant 'committed offsets survive': partition {p} loaded {}, never committed",
            loaded.offset
        );
    }
}

/// One seed's run; returns its model for the non-vacuity check.
fn run(seed: u64) -> Model {
    let mut ex = Executor::new(seed);
    let rt = ex.runtime();
    let disk = SimDisk::default();
    let origin = Instant::now();
    let first = Rc::new(SimHost {
        rt: rt.clone(),
        origin,
        coordinator: GroupCoordinator::new(CONFIG),
        log: SimLog::open(rt.clone(), disk.clone(), u64::MAX),
        leader_epoch: LeaderEpoch(0),
    });
    let world = Rc::new(World {
        rt: rt.clone(),
        origin,
        disk,
        host: RefCell::new(first.clone()),
        epoch: Cell::new(0),
        model: RefCell::new(Model::default()),
    });
    let main = {
        let world = world.clone();
        async move {
            first.coordinator.on_election(0, 0);
            for (partition, load) in first.coordinator.next_loads().await.expect("running") {
                engine::load(&*first, partition, load).await;
            }
            let run_us = micros(RUN);
            for index in 0..MEMBERS {
                let start = Duration::from_micros(world.rt.random(0..run_us / 4));
                let end = MonotonicTime(Duration::from_micros(world.rt.random(run_us / 2..run_us)));
                let leaves = world.rt.chance(50);
                let w = world.clone();
                world.rt.spawn(Box::pin(async move {
                    w.rt.sleep(start).await;
                    member(w, index, end, leaves).await;
                }));
            }
            let w = world.clone();
            world.rt.spawn(Box::pin(async move {
                loop {
                    w.rt.sleep(DEADLINE_CHECK_INTERVAL).await;
                    let host = w.host();
                    if host.coordinator.partitions.borrow().check(0).is_ok() {
                        engine::tick_deadlines(&*host).await;
                        check_group(&w);
                    }
                }
            }));
            let failovers = world.rt.random(1..4);
            for _ in 0..failovers {
                let gap = micros(RUN) / (failovers + 1);
                world
                    .rt
                    .sleep(Duration::from_micros(world.rt.random(gap / 2..gap)))
                    .await;
                failover(&world).await;
            }
            let left = RUN.saturating_sub(world.rt.now().0);
            world.rt.sleep(left).await;
            failover(&world).await;
        }
    };
    ex.run_until(main).expect("the run ends");
    world.model.take()
}

#[test]
fn group_coordinator_survives_failovers_under_simulation() {
    let (mut syncs, mut acked, mut loads) = (0, 0, 0);
    let seeds = seeds(0x6772_6f75_7073, SEEDS);
    for &seed in &seeds {
        let _guard = SeedGuard(seed);
        let model = run(seed);
        syncs += model.syncs;
        acked += model.commits_acked;
        loads += model.loads;
    }
    eprintln!(
        "{} seeds: {syncs} syncs, {acked} commits acknowledged, {loads} loads checked",
        seeds.len()
    );
    assert!(syncs > 0, "not vacuous: members were synced");
    assert!(acked > 0, "not vacuous: commits were acknowledged");
    assert!(loads > 0, "not vacuous: failovers loaded");
}

/// TxnOffsetCommit through the engine over a [`SimLog`] (no faults): a transaction's offsets
/// stay pending — OffsetFetch returns the last committed offset, or UNSTABLE_OFFSET_COMMIT
/// with `require_stable` — until its marker is in the log and the coordinator is told; an
/// abort discards them, a commit materialises them; a coordinator loading the log later
/// honours the markers the same way, and keeps a transaction without its marker pending.
#[test]
fn transactional_offsets_are_pending_until_their_marker_also_after_a_load() {
    let mut ex = Executor::new(1);
    let rt = ex.runtime();
    let disk = SimDisk::default();
    let origin = Instant::now();
    // Each coordinator opens the log as the disk holds it then.
    let host_at = move |epoch: i32| {
        Rc::new(SimHost {
            rt: rt.clone(),
            origin,
            coordinator: GroupCoordinator::new(CONFIG),
            log: SimLog::open(rt.clone(), disk.clone(), u64::MAX),
            leader_epoch: LeaderEpoch(epoch),
        })
    };
    let test = async move {
        let first = host_at(0);
        load_as(&first, 0).await;
        let h = &*first;
        assert_eq!(run_op(h, commit_op(5)).await, vec![Ok(())]);
        assert_eq!(run_op(h, txn_op(1, -1, "", 10)).await, vec![Ok(())]);
        assert_eq!(fetch(h, false).await, Ok(Some(5)));
        assert_eq!(fetch(h, true).await, Err(GroupError::UnstableOffsetCommit));
        end_txn(h, 1, storage::TxnResult::Abort).await;
        assert_eq!(fetch(h, true).await, Ok(Some(5)), "an abort discards");
        assert_eq!(run_op(h, txn_op(1, -1, "", 20)).await, vec![Ok(())]);
        end_txn(h, 1, storage::TxnResult::Commit).await;
        assert_eq!(fetch(h, true).await, Ok(Some(20)), "a commit materialises");
        // v3+ member checks: a member the group does not know, a generation for a group
        // that does not exist.
        assert_eq!(
            run_op(h, txn_op(2, 3, "m-1", 25)).await,
            vec![Err(GroupError::UnknownMemberId)]
        );
        let other = engine::run(h, 0, "other", txn_op(2, 3, "m-1", 1)).await;
        assert!(
            matches!(&other, GroupReply::PartitionErrors(r) if r[0].2 == Err(GroupError::IllegalGeneration)),
            "{other:?}"
        );
        // Producer 2's transaction has no marker yet when the next coordinator loads.
        assert_eq!(run_op(h, txn_op(2, -1, "", 30)).await, vec![Ok(())]);
        first.coordinator.on_resignation(0, Some(1), 1);

        let second = host_at(1);
        load_as(&second, 1).await;
        let h = &*second;
        assert_eq!(
            fetch(h, false).await,
            Ok(Some(20)),
            "the replay honours markers"
        );
        assert_eq!(fetch(h, true).await, Err(GroupError::UnstableOffsetCommit));
        end_txn(h, 2, storage::TxnResult::Commit).await;
        assert_eq!(fetch(h, true).await, Ok(Some(30)));
        second.coordinator.on_resignation(0, Some(2), 1);

        let third = host_at(2);
        load_as(&third, 2).await;
        assert_eq!(fetch(&third, true).await, Ok(Some(30)));
    };
    ex.run_until(test).expect("the test completes");
}

async fn load_as(host: &Rc<SimHost>, epoch: i32) {
    host.coordinator.on_election(0, epoch);
    for (partition, load) in host.coordinator.next_loads().await.expect("running") {
        engine::load(&**host, partition, load).await;
    }
}

fn entry(offset: i64) -> Vec<OffsetCommitEntry> {
    vec![OffsetCommitEntry {
        topic: TOPIC.to_string(),
        partition: 0,
        offset,
        leader_epoch: -1,
        metadata: None,
    }]
}

fn commit_op(offset: i64) -> GroupOp {
    GroupOp::Commit {
        member_id: String::new(),
        group_instance_id: None,
        generation: -1,
        offsets: entry(offset),
    }
}

fn txn_op(producer_id: i64, generation: i32, member_id: &str, offset: i64) -> GroupOp {
    GroupOp::TxnCommit {
        producer: super::ops::TxnProducer {
            producer_id,
            producer_epoch: 0,
        },
        member_id: member_id.to_string(),
        group_instance_id: None,
        generation,
        offsets: entry(offset),
    }
}

async fn run_op(host: &SimHost, op: GroupOp) -> Vec<Result<(), GroupError>> {
    match engine::run(host, 0, GROUP, op).await {
        GroupReply::PartitionErrors(results) => results.into_iter().map(|r| r.2).collect(),
        other => panic!("unexpected reply {other:?}"),
    }
}

async fn fetch(host: &SimHost, require_stable: bool) -> Result<Option<i64>, GroupError> {
    let op = GroupOp::FetchOffsets {
        partitions: Some(vec![(TOPIC.to_string(), vec![0])]),
        require_stable,
    };
    match engine::run(host, 0, GROUP, op).await {
        GroupReply::Offsets(o) => o[0].2.clone().map(|c| c.map(|c| c.offset)),
        other => panic!("unexpected reply {other:?}"),
    }
}

/// The producer's marker appended to the offsets log, then the coordinator told (what
/// WriteTxnMarkers does).
async fn end_txn(host: &SimHost, producer_id: i64, result: storage::TxnResult) {
    let marker = storage::TxnMarker {
        producer_id,
        producer_epoch: 0,
        result,
        coordinator_epoch: 0,
    };
    let info = host
        .log
        .append_txn_marker(marker, host.leader_epoch)
        .await
        .expect("marker appended");
    host.log
        .flush_to(info.last_offset.plus(1))
        .await
        .expect("marker flushed");
    engine::complete_transaction(host, 0, producer_id, result);
}
