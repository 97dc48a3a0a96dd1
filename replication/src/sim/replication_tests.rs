//! One partition replicated over three simulated brokers (replicas 1, 2, 3; committed ISR all
//! three, `min.insync.replicas` 2), driven through the partition's replication calls:
//! the leader's [`Partition::append`] and [`Partition::replica_fetch`], the followers'
//! [`Partition::append_as_follower`] and [`Partition::truncate_to_diverging_epoch`], and
//! [`Partition::become_leader`] / [`Partition::become_follower`] from a test "controller" that
//! elects a new leader from the live ISR members at a new leader epoch. Each follower runs a
//! fetch loop (fetch offset = its written offset, last fetched epoch = its latest epoch) with
//! seeded delays, its fetches parked on the leader ([`Partition::replica_fetch_parked`]). Seeded faults: a follower lags (long pauses between fetches), is cut off
//! from the leader for a while, and the leader crashes (its unwritten tail lost), a follower
//! becomes leader with a new epoch, and the old leader restarts as a follower, truncates at
//! the diverging epoch and catches up.
//!
//! Checkers:
//! - **no acknowledged record lost**: every record acknowledged with `acks=all` is, after
//!   every step, in the current leader's log at its offset with its value;
//! - **one value per offset**: an offset seen below the leader's high watermark always holds
//!   the same value, across epochs and leaders;
//! - **HW monotonic within an epoch**: the leader's high watermark never goes down while its
//!   epoch lasts;
//! - **ISR logs equal below the HW**: once the faults are healed and the followers caught up
//!   (which must happen: a liveness check), every replica's log below the leader's high
//!   watermark is the leader's, batch for batch (offsets, epochs, values);
//! - **one leader per epoch**: no two live replicas claim leadership at the same epoch, and
//!   every batch in any log carries an epoch that was elected, non-decreasing along the log.
//!
//! Not verified: records acknowledged with `acks=1` (Kafka may lose them at a failover, so
//! they are only checked for one value per offset), ISR shrink and expansion (the committed
//! ISR stays all three here: a cut-off follower makes `acks=all` time out; `isr_tests` changes
//! it through a simulated controller), power loss,
//! the wire protocol and the fetcher's bounded queues (the broker's), more than one crash in
//! flight at a time, and a follower's high watermark between a restart and its first fetch
//! (the simulated log reopens with the high watermark at its end, having no high-watermark
//! checkpoint; followers are compared only once caught up).

use super::test_records::records;
use super::{seeds, Executor, SeedGuard, SimDisk, SimLog, SimRuntime};
use crate::runtime::{Clock, MonotonicTime, NodeId, Runtime};
use crate::{Acks, IsrConfig, Leadership, Partition, PartitionError, PartitionStore};
use bytes::{Bytes, BytesMut};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;
use storage::{build_batch, LeaderEpoch, Offset, TimestampMs};

/// Steps per seed.
const STEPS: usize = 60;
/// Seeds `cargo test` runs.
const SEEDS: u64 = 60;
/// The replicas.
const REPLICAS: [NodeId; 3] = [NodeId(1), NodeId(2), NodeId(3)];
/// Bytes one follower fetch asks for.
const FETCH_BYTES_MAX: usize = 300;
/// Longest a follower fetch is parked on the leader, in µs of simulated time.
const FETCH_WAIT_US: u64 = 1_000;
/// The produce timeout, in µs of simulated time.
const PRODUCE_TIMEOUT_US: u64 = 20_000;
/// How long, in µs of simulated time, healed followers get to catch up.
const CATCH_UP_US_MAX: u64 = 200_000;

type SimPartition = Partition<SimLog>;

const CONFIG: IsrConfig = IsrConfig {
    min_insync_replicas: 2,
    replica_lag_time_max_ms: 30_000,
};

struct Node {
    id: NodeId,
    disk: SimDisk,
    partition: Rc<SimPartition>,
    alive: bool,
    /// Cut off from the leader: its fetches do not arrive.
    cut: bool,
    /// Pauses long between fetches.
    lagging: bool,
    /// Bumped by each restart: a fetch loop of an older incarnation stops.
    incarnation: u64,
}

struct Cluster {
    nodes: Vec<Node>,
    leader: NodeId,
    leader_epoch: LeaderEpoch,
    /// Every epoch elected, with its leader.
    elected: BTreeMap<i32, NodeId>,
    /// Diverging epochs the followers were answered.
    divergences: u64,
}

impl Cluster {
    fn node(&self, id: NodeId) -> &Node {
        self.nodes
            .iter()
            .find(|n| n.id == id)
            .expect("a replica of the cluster")
    }
    fn node_mut(&mut self, id: NodeId) -> &mut Node {
        self.nodes
            .iter_mut()
            .find(|n| n.id == id)
            .expect("a replica of the cluster")
    }
    fn leader_partition(&self) -> Rc<SimPartition> {
        self.node(self.leader).partition.clone()
    }
}

type Shared = Rc<RefCell<Cluster>>;

fn open(rt: &SimRuntime, id: NodeId, disk: &SimDisk) -> Rc<SimPartition> {
    Rc::new(Partition::new(
        SimLog::open(rt.clone(), disk.clone(), u64::MAX),
        id,
        Rc::new(rt.clone()),
    ))
}

fn leadership(epoch: LeaderEpoch) -> Leadership {
    Leadership {
        leader_epoch: epoch,
        partition_epoch: epoch.0,
        replicas: REPLICAS.to_vec(),
        isr: REPLICAS.to_vec(),
    }
}

fn delay(rt: &SimRuntime, us_max: u64) -> Duration {
    Duration::from_micros(rt.random(1..us_max))
}

/// A follower's fetch loop for incarnation `incarnation` of node `id`: fetch from the leader
/// at its written offset and latest epoch, then append or truncate, until the node restarts.
async fn fetch_loop(cluster: Shared, rt: SimRuntime, id: NodeId, incarnation: u64) {
    loop {
        let (me, leader, cut, lagging) = {
            let c = cluster.borrow();
            let n = c.node(id);
            if n.incarnation != incarnation || !n.alive {
                return;
            }
            let leader = c.node(c.leader);
            let usable = leader.alive && c.leader != id;
            (
                n.partition.clone(),
                usable.then(|| leader.partition.clone()),
                n.cut,
                n.lagging,
            )
        };
        rt.sleep(delay(&rt, if lagging { 5_000 } else { 300 }))
            .await;
        let Some(leader) = leader.filter(|_| !cut) else {
            continue;
        };
        if me.leader() == id {
            continue; // Not yet told to follow.
        }
        let fetch_offset = me.log().written_offset();
        let last_fetched_epoch = me.log().latest_leader_epoch();
        // Parked on the leader as Kafka's replica.fetch.wait.max.ms / min.bytes ask (scaled).
        let deadline = rt.now() + Duration::from_micros(FETCH_WAIT_US);
        let answer = leader
            .replica_fetch_parked(
                id,
                fetch_offset,
                last_fetched_epoch,
                None,
                FETCH_BYTES_MAX,
                1,
                deadline,
                futures_lite::future::pending::<()>(),
            )
            .await;
        // The answer travels back.
        rt.sleep(delay(&rt, 300)).await;
        let Ok(read) = answer else {
            continue; // A stale leader or a crashed log: fetch again (new metadata comes).
        };
        let result = match read.diverging_epoch {
            Some((epoch, end_offset)) => {
                cluster.borrow_mut().divergences += 1;
                me.truncate_to_diverging_epoch(epoch, end_offset)
                    .await
                    .map(|_| ())
            }
            None => {
                let mut records = BytesMut::new();
                for batch in &read.batches {
                    records.extend_from_slice(&batch.to_vec());
                }
                me.append_as_follower(records.freeze(), read.high_watermark, read.log_start_offset)
                    .await
            }
        };
        // A crash or a role change since the fetch: the next turn sees the new state.
        let _ = result;
    }
}

struct Model {
    /// Value of each offset acknowledged with acks=all.
    acked: BTreeMap<i64, u64>,
    /// Value of each offset seen below a leader's high watermark.
    committed: BTreeMap<i64, u64>,
    /// The leader's high watermark last seen, with its epoch.
    last_high_watermark: (LeaderEpoch, Offset),
    next_value: u64,
}

/// The whole log of `p` (as written or not).
async fn whole_log(p: Rc<SimPartition>) -> Result<Vec<(i64, u64, i32)>, String> {
    let log = p.log();
    let batches = log
        .read(log.log_start_offset(), usize::MAX, log.log_end_offset())
        .await
        .map_err(|e| e.to_string())?;
    records(&batches)
}

async fn produce(
    p: Rc<SimPartition>,
    first_value: u64,
    n: u64,
    acks: Acks,
) -> (Vec<u64>, Result<crate::Appended, PartitionError>) {
    let values: Vec<u64> = (first_value..first_value + n).collect();
    let encoded: Vec<[u8; 8]> = values.iter().map(|v| v.to_be_bytes()).collect();
    let slices: Vec<&[u8]> = encoded.iter().map(|e| e.as_slice()).collect();
    let batch: Bytes = build_batch(
        TimestampMs(i64::try_from(first_value).unwrap_or(0)),
        &slices,
    );
    let result = p
        .append(
            storage::ValidatedBatches::validate(&batch).expect("a valid batch"),
            acks,
            Duration::from_micros(PRODUCE_TIMEOUT_US),
        )
        .await;
    (values, result)
}

/// The checkers that hold after every step (module doc).
fn check(ex: &mut Executor, cluster: &Shared, model: &mut Model) -> Result<(), String> {
    let (leader, epoch, partitions) = {
        let c = cluster.borrow();
        let live: Vec<_> = c
            .nodes
            .iter()
            .filter(|n| n.alive)
            .map(|n| (n.id, n.partition.clone()))
            .collect();
        (c.leader_partition(), c.leader_epoch, live)
    };
    // One leader per epoch.
    let mut claims: BTreeMap<i32, NodeId> = BTreeMap::new();
    for (id, p) in &partitions {
        if p.leader() == *id {
            if let Some(other) = claims.insert(p.leader_epoch().0, *id) {
                return Err(format!(
                    "{other:?} and {id:?} both lead epoch {}",
                    p.leader_epoch().0
                ));
            }
        }
    }
    // HW monotonic within an epoch.
    let hw = leader.high_watermark();
    let (last_epoch, last_hw) = model.last_high_watermark;
    if last_epoch == epoch && hw < last_hw {
        return Err(format!(
            "high watermark went from {last_hw} to {hw} in epoch {}",
            epoch.0
        ));
    }
    model.last_high_watermark = (epoch, hw);
    let elected: Vec<i32> = cluster.borrow().elected.keys().copied().collect();
    for (id, p) in partitions {
        let log = ex
            .run_until(whole_log(p.clone()))
            .map_err(|s| format!("read {id:?}: {s:?}"))??;
        let mut previous_epoch = i32::MIN;
        for &(offset, value, batch_epoch) in &log {
            // Every batch's epoch was elected, non-decreasing along the log.
            if !elected.contains(&batch_epoch) || batch_epoch < previous_epoch {
                return Err(format!(
                    "{id:?}: offset {offset} has epoch {batch_epoch} after {previous_epoch} \
                     (elected {elected:?})"
                ));
            }
            previous_epoch = batch_epoch;
            // One value per offset, below the high watermark of a leader.
            if Offset(offset) < hw && Rc::ptr_eq(&p, &leader) {
                if let Some(v) = model.committed.insert(offset, value) {
                    if v != value {
                        return Err(format!("offset {offset} held {v}, now {value}"));
                    }
                }
            }
        }
        // No acknowledged record lost: on the leader.
        if Rc::ptr_eq(&p, &leader) {
            let held: BTreeMap<i64, u64> = log.iter().map(|&(o, v, _)| (o, v)).collect();
            for (offset, value) in &model.acked {
                if held.get(offset) != Some(value) {
                    return Err(format!(
                        "acknowledged offset {offset} (value {value}) not on leader {id:?}: {:?}",
                        held.get(offset)
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Heals every fault and waits until every live follower caught up with the leader; then
/// checks that their logs equal the leader's below its high watermark.
fn heal_and_compare(ex: &mut Executor, rt: &SimRuntime, cluster: &Shared) -> Result<(), String> {
    for n in cluster.borrow_mut().nodes.iter_mut() {
        n.cut = false;
        n.lagging = false;
    }
    let c = cluster.clone();
    let sleeper = rt.clone();
    let deadline = rt.now() + Duration::from_micros(CATCH_UP_US_MAX);
    let caught_up = ex
        .run_until(async move {
            loop {
                let done = {
                    let c = c.borrow();
                    let leader = c.leader_partition();
                    let end = leader.log().log_end_offset();
                    leader.log().written_offset() == end
                        && leader.high_watermark() == end
                        && c.nodes.iter().filter(|n| n.alive).all(|n| {
                            n.partition.log().written_offset() == end
                                && n.partition.high_watermark() == end
                        })
                };
                if done {
                    return true;
                }
                if sleeper.now() >= deadline {
                    return false;
                }
                sleeper.sleep(Duration::from_micros(500)).await;
            }
        })
        .map_err(|s| format!("catch-up: {s:?}"))?;
    if !caught_up {
        return Err("the healed followers did not catch up with the leader".into());
    }
    let (leader, others) = {
        let c = cluster.borrow();
        let others: Vec<_> = c
            .nodes
            .iter()
            .filter(|n| n.alive && n.id != c.leader)
            .map(|n| (n.id, n.partition.clone()))
            .collect();
        (c.leader_partition(), others)
    };
    let hw = leader.high_watermark().0;
    let below = |log: Vec<(i64, u64, i32)>| -> Vec<(i64, u64, i32)> {
        log.into_iter().filter(|r| r.0 < hw).collect()
    };
    let leader_log = below(
        ex.run_until(whole_log(leader.clone()))
            .map_err(|s| format!("read leader: {s:?}"))??,
    );
    for (id, p) in others {
        let log = below(
            ex.run_until(whole_log(p))
                .map_err(|s| format!("read {id:?}: {s:?}"))??,
        );
        if log != leader_log {
            return Err(format!(
                "{id:?}'s log below the high watermark {hw} differs from the leader's"
            ));
        }
    }
    Ok(())
}

/// Crashes the leader, elects a live ISR member at the next epoch, and restarts the old
/// leader as a follower.
fn fail_over(ex: &mut Executor, rt: &SimRuntime, cluster: &Shared) -> Result<(), String> {
    let (old, candidates) = {
        let c = cluster.borrow();
        let candidates: Vec<NodeId> = c
            .nodes
            .iter()
            .filter(|n| n.alive && n.id != c.leader)
            .map(|n| n.id)
            .collect();
        (c.leader, candidates)
    };
    let pick = usize::try_from(rt.random(0..candidates.len() as u64)).unwrap_or(0);
    let new_leader = candidates[pick];
    {
        let mut c = cluster.borrow_mut();
        let n = c.node_mut(old);
        n.alive = false;
        n.partition.log().crash();
        n.partition.close_waiters();
        let epoch = LeaderEpoch(c.leader_epoch.0 + 1);
        c.leader_epoch = epoch;
        c.leader = new_leader;
        c.elected.insert(epoch.0, new_leader);
    }
    let (p, epoch, followers) = {
        let c = cluster.borrow();
        let followers: Vec<_> = c
            .nodes
            .iter()
            .filter(|n| n.alive && n.id != new_leader)
            .map(|n| n.partition.clone())
            .collect();
        (
            c.node(new_leader).partition.clone(),
            c.leader_epoch,
            followers,
        )
    };
    for f in followers {
        f.become_follower(new_leader, epoch);
    }
    let now = rt.now();
    ex.run_until(async move { p.become_leader(leadership(epoch), CONFIG, now).await })
        .map_err(|s| format!("become leader: {s:?}"))?
        .map_err(|e| format!("become leader: {e}"))?;
    // The old leader restarts from its disk and follows.
    let incarnation = {
        let mut c = cluster.borrow_mut();
        let n = c.node_mut(old);
        n.partition = open(rt, old, &n.disk);
        n.partition.become_follower(new_leader, epoch);
        n.alive = true;
        n.cut = false;
        n.incarnation += 1;
        n.incarnation
    };
    rt.spawn(Box::pin(fetch_loop(
        cluster.clone(),
        rt.clone(),
        old,
        incarnation,
    )));
    Ok(())
}

/// What one run exercised, so the test can tell a vacuous pass.
#[derive(Default)]
struct Exercised {
    acked: usize,
    failovers: usize,
    divergences: u64,
}

fn run(seed: u64) -> Result<Exercised, String> {
    let mut ex = Executor::new(seed);
    let rt = ex.runtime();
    let nodes = REPLICAS
        .iter()
        .map(|&id| {
            let disk = SimDisk::default();
            Node {
                id,
                partition: open(&rt, id, &disk),
                disk,
                alive: true,
                cut: false,
                lagging: false,
                incarnation: 0,
            }
        })
        .collect();
    let cluster: Shared = Rc::new(RefCell::new(Cluster {
        nodes,
        leader: NodeId(1),
        leader_epoch: LeaderEpoch(1),
        elected: BTreeMap::from([(1, NodeId(1))]),
        divergences: 0,
    }));
    {
        let c = cluster.borrow();
        for n in c.nodes.iter().filter(|n| n.id != c.leader) {
            n.partition.become_follower(c.leader, c.leader_epoch);
        }
    }
    let first = cluster.borrow().leader_partition();
    let now = rt.now();
    ex.run_until(async move {
        first
            .become_leader(leadership(LeaderEpoch(1)), CONFIG, now)
            .await
    })
    .map_err(|s| format!("become leader: {s:?}"))?
    .map_err(|e| format!("become leader: {e}"))?;
    for &id in &REPLICAS[1..] {
        rt.spawn(Box::pin(fetch_loop(cluster.clone(), rt.clone(), id, 0)));
    }
    let mut model = Model {
        acked: BTreeMap::new(),
        committed: BTreeMap::new(),
        last_high_watermark: (LeaderEpoch(1), Offset(0)),
        next_value: 0,
    };
    let mut failovers = 0;
    for _ in 0..STEPS {
        match rt.random(0..100) {
            0..=59 => {
                let n = rt.random(1..4);
                let first = model.next_value;
                model.next_value += n;
                let acks = if rt.chance(70) {
                    Acks::All
                } else {
                    Acks::Leader
                };
                let p = cluster.borrow().leader_partition();
                let (values, result) = ex
                    .run_until(produce(p, first, n, acks))
                    .map_err(|s| format!("produce: {s:?}"))?;
                match result {
                    Ok(appended) if acks == Acks::All => {
                        for (i, v) in values.iter().enumerate() {
                            let offset = appended.base_offset.0 + i64::try_from(i).unwrap_or(0);
                            model.acked.insert(offset, *v);
                        }
                    }
                    Ok(_) | Err(PartitionError::RequestTimedOut { .. }) => {}
                    Err(e) => return Err(format!("produce with {acks:?}: {e}")),
                }
            }
            60..=69 => {
                // A follower lags, or stops lagging.
                let id = REPLICAS[usize::try_from(rt.random(0..3)).unwrap_or(0)];
                let mut c = cluster.borrow_mut();
                let n = c.node_mut(id);
                n.lagging = !n.lagging;
            }
            70..=79 => {
                // A follower is cut off from the leader, or reconnected.
                let id = REPLICAS[usize::try_from(rt.random(0..3)).unwrap_or(0)];
                let mut c = cluster.borrow_mut();
                let n = c.node_mut(id);
                n.cut = !n.cut;
            }
            80..=89 => {
                fail_over(&mut ex, &rt, &cluster)?;
                failovers += 1;
            }
            _ => heal_and_compare(&mut ex, &rt, &cluster)?,
        }
        check(&mut ex, &cluster, &mut model)?;
    }
    heal_and_compare(&mut ex, &rt, &cluster)?;
    check(&mut ex, &cluster, &mut model)?;
    let divergences = cluster.borrow().divergences;
    Ok(Exercised {
        acked: model.acked.len(),
        failovers,
        divergences,
    })
}

#[test]
fn replication_under_simulation() {
    let seeds = seeds(0x5eed_0015, SEEDS);
    let mut total = Exercised::default();
    for &seed in &seeds {
        let _guard = SeedGuard(seed);
        match run(seed) {
            Ok(e) => {
                total.acked += e.acked;
                total.failovers += e.failovers;
                total.divergences += e.divergences;
            }
            Err(e) => panic!("seed {seed}: {e}"),
        }
    }
    // Over many seeds, a run that acknowledged nothing, never failed over or never diverged
    // checked nothing (a single replayed seed may legitimately miss one).
    if seeds.len() >= 10 {
        assert!(total.acked > 0, "no record was acknowledged with acks=all");
        assert!(total.failovers > 0, "no leader failed over");
        assert!(
            total.divergences > 0,
            "no follower diverged from a new leader"
        );
    }
    eprintln!(
        "replication simulation: {} seeds, {} records acknowledged, {} failovers, {} diverging epochs",
        seeds.len(),
        total.acked,
        total.failovers,
        total.divergences
    );
}

/// Node 1 made leader at epoch 1 of a partition whose replicas and ISR are {1, 2}: the
/// follower's fetch alone moves the HW.
fn leader_of_two(ex: &mut Executor, rt: &SimRuntime) -> Rc<SimPartition> {
    let leader = open(rt, NodeId(1), &SimDisk::default());
    let (p, now) = (leader.clone(), rt.now());
    let two = Leadership {
        replicas: vec![NodeId(1), NodeId(2)],
        isr: vec![NodeId(1), NodeId(2)],
        ..leadership(LeaderEpoch(1))
    };
    ex.run_until(async move { p.become_leader(two, CONFIG, now).await })
        .expect("runs")
        .expect("becomes leader");
    leader
}

/// Node 2's fetch from `offset` at epoch 1, parked until `deadline` (min_bytes 1, never
/// cancelled); resolves to its answer and the time it was answered.
async fn parked_fetch_of_node_2(
    p: Rc<SimPartition>,
    clock: SimRuntime,
    offset: Offset,
    deadline: MonotonicTime,
) -> (Result<crate::ReplicaRead, PartitionError>, MonotonicTime) {
    let read = p
        .replica_fetch_parked(
            NodeId(2),
            offset,
            Some(LeaderEpoch(1)),
            None,
            FETCH_BYTES_MAX,
            1,
            deadline,
            futures_lite::future::pending::<()>(),
        )
        .await;
    (read, clock.now())
}

/// A follower's fetch parked at the leader's log end is answered by the leader's next write,
/// with the new records, not by its deadline; and a parked fetch with nothing new answers
/// empty at its deadline.
#[test]
fn a_parked_replica_fetch_is_woken_by_the_leaders_write() {
    let mut ex = Executor::new(7);
    let rt = ex.runtime();
    let leader = leader_of_two(&mut ex, &rt);
    let deadline = rt.now() + Duration::from_secs(1);
    let parked = parked_fetch_of_node_2(leader.clone(), rt.clone(), Offset(0), deadline);
    let producer = leader.clone();
    let (read, answered_at) = ex
        .run_until(async move {
            futures_lite::future::zip(parked, produce(producer, 0, 2, Acks::Leader))
                .await
                .0
        })
        .expect("runs");
    let read = read.expect("a replica's fetch");
    assert!(
        answered_at < deadline,
        "answered by the write, not the deadline"
    );
    let got = records(&read.batches).expect("records");
    assert_eq!(
        got.iter().map(|r| (r.0, r.1)).collect::<Vec<_>>(),
        vec![(0, 0), (1, 1)]
    );
    assert_eq!(read.diverging_epoch, None);

    let deadline = rt.now() + Duration::from_millis(1);
    let (read, answered_at) = ex
        .run_until(parked_fetch_of_node_2(
            leader.clone(),
            rt.clone(),
            Offset(2),
            deadline,
        ))
        .expect("runs");
    let read = read.expect("a replica's fetch");
    assert!(
        answered_at >= deadline,
        "nothing new: answered at the deadline"
    );
    assert!(read.batches.is_empty());
    assert_eq!(
        read.high_watermark,
        Offset(2),
        "the follower's fetch at 2 moved the HW"
    );
}

/// A follower's fetch parked on an idle partition and answered at its deadline leaves nothing
/// waiting on the partition. Each fetch runs in a task of its own (a broker polls each
/// partition of a fetch under its own waker): before `storage::Notify` gave a dropped waiter's
/// slot back, every such fetch left its waker on the idle partition until the partition next
/// changed — thousands within seconds on `__consumer_offsets`' partitions, each keeping its
/// fetch's future alive (~900 MiB per broker at 10,000 msg/s, RF 3).
#[test]
fn a_parked_replica_fetch_that_times_out_leaves_no_waiter_behind() {
    const FETCHES: usize = 100;
    let mut ex = Executor::new(13);
    let rt = ex.runtime();
    let leader = leader_of_two(&mut ex, &rt);
    let answered = Rc::new(std::cell::Cell::new(0));
    for _ in 0..FETCHES {
        let deadline = rt.now() + Duration::from_millis(5);
        let fetch = parked_fetch_of_node_2(leader.clone(), rt.clone(), Offset(0), deadline);
        let answered = answered.clone();
        rt.spawn(Box::pin(async move {
            let read = fetch.await.0.expect("a replica's fetch");
            assert!(read.batches.is_empty(), "nothing was written");
            answered.set(answered.get() + 1);
        }));
    }
    let (clock, done) = (rt.clone(), answered.clone());
    ex.run_until(async move {
        while done.get() < FETCHES {
            clock.sleep(Duration::from_millis(1)).await;
        }
    })
    .expect("runs");
    assert_eq!(leader.waiting(), 0, "every fetch answered at its deadline");
}

/// `acks=all` against the ISR rules (Kafka's `appendRecordsToLeader` and
/// `checkEnoughReplicasReachOffset`): with the committed ISR below `min.insync.replicas` it is
/// refused before the append (`NOT_ENOUGH_REPLICAS`) while `acks=1` succeeds; with an ISR
/// member that does not fetch it times out (`REQUEST_TIMED_OUT`), the records staying
/// appended above the high watermark, which the member's fetch then moves over them.
#[test]
fn acks_all_follows_the_isr() {
    let mut ex = Executor::new(11);
    let rt = ex.runtime();
    let leader = open(&rt, NodeId(1), &SimDisk::default());
    let lead = |ex: &mut Executor, isr: Vec<NodeId>, epoch: i32| {
        let (p, now) = (leader.clone(), rt.now());
        let l = Leadership {
            isr,
            ..leadership(LeaderEpoch(epoch))
        };
        ex.run_until(async move { p.become_leader(l, CONFIG, now).await })
            .expect("runs")
            .expect("becomes leader");
    };
    // ISR {1} of {1, 2, 3}, min.insync.replicas 2.
    lead(&mut ex, vec![NodeId(1)], 1);
    let (_, refused) = ex
        .run_until(produce(leader.clone(), 0, 1, Acks::All))
        .expect("runs");
    assert!(
        matches!(
            refused,
            Err(PartitionError::Isr(
                crate::IsrError::NotEnoughReplicas { .. }
            ))
        ),
        "{refused:?}"
    );
    assert_eq!(leader.log().log_end_offset(), Offset(0), "nothing appended");
    let (_, written) = ex
        .run_until(produce(leader.clone(), 1, 1, Acks::Leader))
        .expect("runs");
    assert_eq!(written.expect("acks=1 succeeds").base_offset, Offset(0));

    // ISR {1, 2} (min.insync.replicas met); replica 2 has fetched up to 1, then goes silent.
    lead(&mut ex, vec![NodeId(1), NodeId(2)], 2);
    let fetch = |ex: &mut Executor, offset: i64| {
        let (p, now) = (leader.clone(), rt.now());
        ex.run_until(async move {
            p.replica_fetch(NodeId(2), Offset(offset), None, None, FETCH_BYTES_MAX, now)
                .await
        })
        .expect("runs")
        .expect("a replica's fetch")
    };
    fetch(&mut ex, 1);
    assert_eq!(leader.high_watermark(), Offset(1));
    let (_, timed_out) = ex
        .run_until(produce(leader.clone(), 2, 2, Acks::All))
        .expect("runs");
    assert!(
        matches!(timed_out, Err(PartitionError::RequestTimedOut { .. })),
        "{timed_out:?}"
    );
    assert_eq!(leader.log().log_end_offset(), Offset(3), "the records stay");
    assert_eq!(leader.high_watermark(), Offset(1));
    // Its fetch at 3 (it has them) moves the high watermark over them.
    let read = fetch(&mut ex, 3);
    assert_eq!(read.high_watermark, Offset(3));
    assert_eq!(leader.high_watermark(), Offset(3));
}

/// Kafka's `maybeShrinkIsr` on the partition ([`Partition::propose_isr_shrink`]): an ISR
/// follower behind the leader's log end offset is proposed out of the ISR only once it was
/// last caught up more than `replica.lag.time.max.ms` ago, a caught-up one never; no second
/// proposal while one is pending; until the controller commits the change the high watermark
/// still waits for the follower (the maximal ISR), and once committed it moves without it.
#[test]
fn a_follower_behind_for_the_lag_time_is_proposed_out_of_the_isr() {
    let mut ex = Executor::new(13);
    let rt = ex.runtime();
    let leader = open(&rt, NodeId(1), &SimDisk::default());
    let (p, now) = (leader.clone(), rt.now());
    ex.run_until(async move {
        p.become_leader(leadership(LeaderEpoch(1)), CONFIG, now)
            .await
    })
    .expect("runs")
    .expect("becomes leader");
    let (_, written) = ex
        .run_until(produce(leader.clone(), 0, 1, Acks::Leader))
        .expect("runs");
    assert_eq!(written.expect("acks=1 succeeds").base_offset, Offset(0));
    let fetch = |ex: &mut Executor, replica: NodeId, offset: i64| {
        let (p, now) = (leader.clone(), rt.now());
        ex.run_until(async move {
            p.replica_fetch(replica, Offset(offset), None, None, FETCH_BYTES_MAX, now)
                .await
        })
        .expect("runs")
        .expect("a replica's fetch");
    };
    let sleep = |ex: &mut Executor, ms: u64| {
        let clock = rt.clone();
        ex.run_until(async move { clock.sleep(Duration::from_millis(ms)).await })
            .expect("runs");
    };
    let lag_ms = u64::try_from(CONFIG.replica_lag_time_max_ms).expect("positive");
    // Replica 2 is at the leader's log end; replica 3 stays behind it (at 0).
    fetch(&mut ex, NodeId(2), 1);
    fetch(&mut ex, NodeId(3), 0);
    assert_eq!(leader.high_watermark(), Offset(0), "replica 3 holds the HW");
    sleep(&mut ex, lag_ms / 2);
    fetch(&mut ex, NodeId(2), 1);
    assert_eq!(
        leader.propose_isr_shrink(rt.now()),
        None,
        "behind for less than the lag time"
    );
    sleep(&mut ex, lag_ms / 2 + 1);
    fetch(&mut ex, NodeId(2), 1);
    let proposal = leader
        .propose_isr_shrink(rt.now())
        .expect("replica 3 is out of sync");
    assert_eq!(proposal.new_isr, vec![NodeId(1), NodeId(2)]);
    assert_eq!(proposal.leader_epoch, LeaderEpoch(1));
    assert_eq!(
        leader.propose_isr_shrink(rt.now()),
        None,
        "one pending change at a time"
    );
    assert_eq!(
        leader.high_watermark(),
        Offset(0),
        "the pending shrink does not move the HW (maximal ISR)"
    );
    assert_eq!(
        leader.on_alter_answer(
            proposal.proposal_id,
            Ok((proposal.partition_epoch + 1, proposal.new_isr.clone()))
        ),
        None
    );
    assert_eq!(leader.isr(), Some(vec![NodeId(1), NodeId(2)]));
    assert_eq!(
        leader.high_watermark(),
        Offset(1),
        "committed: the HW moves over the ISR {{1, 2}}"
    );
    assert_eq!(
        leader.propose_isr_shrink(rt.now()),
        None,
        "replica 2 is caught up"
    );
}

/// Kafka's order in `makeLeader` (the partition leaves its fetcher first): a follower taking
/// the leadership at a new epoch follows no more from the moment [`Partition::become_leader`]
/// starts. An answer of the old leader that arrives while it waits for its log to be written
/// is refused (before the fix it was appended after the point where the new epoch starts, and
/// the leader-epoch cache's entry for the new epoch was removed again); an append already under
/// way is kept and the new epoch starts after it.
#[test]
fn a_follower_taking_the_leadership_appends_no_more_as_a_follower() {
    let mut ex = Executor::new(19);
    let rt = ex.runtime();
    let old = open(&rt, NodeId(2), &SimDisk::default());
    let (p, now) = (old.clone(), rt.now());
    ex.run_until(async move {
        p.become_leader(leadership(LeaderEpoch(1)), CONFIG, now)
            .await
    })
    .expect("runs")
    .expect("becomes leader");
    for value in 0..3 {
        let (_, written) = ex
            .run_until(produce(old.clone(), value, 1, Acks::Leader))
            .expect("runs");
        assert_eq!(
            written.expect("acks=1").base_offset,
            Offset(i64::try_from(value).unwrap_or(0))
        );
    }
    // The old leader's answers for offsets 0, 1 and 2, one batch each.
    let answer = |ex: &mut Executor, offset: i64| -> Bytes {
        let (p, now) = (old.clone(), rt.now());
        let read = ex
            .run_until(async move {
                p.replica_fetch(NodeId(1), Offset(offset), None, None, FETCH_BYTES_MAX, now)
                    .await
            })
            .expect("runs")
            .expect("a replica's fetch");
        Bytes::from(read.batches[0].to_vec())
    };
    let (first, second, third) = (answer(&mut ex, 0), answer(&mut ex, 1), answer(&mut ex, 2));
    let new = open(&rt, NodeId(1), &SimDisk::default());
    new.become_follower(NodeId(2), LeaderEpoch(1));
    let append = |p: Rc<SimPartition>, records: Bytes| async move {
        p.append_as_follower(records, Offset(0), Offset(0)).await
    };
    ex.run_until(append(new.clone(), first))
        .expect("runs")
        .expect("the first answer is appended");
    // The second answer's append is under way (its write not done) when the leadership comes;
    // the third arrives while `become_leader` waits for that write.
    let now = rt.now();
    let taking = {
        let p = new.clone();
        async move {
            p.become_leader(leadership(LeaderEpoch(2)), CONFIG, now)
                .await
        }
    };
    let (_, (took, late)) = ex
        .run_until(futures_lite::future::zip(
            append(new.clone(), second),
            futures_lite::future::zip(taking, append(new.clone(), third)),
        ))
        .expect("runs");
    took.expect("becomes leader");
    assert!(
        matches!(late, Err(PartitionError::NotLeaderOrFollower { .. })),
        "the old leader's late answer is refused: {late:?}"
    );
    assert_eq!(
        new.log().log_end_offset(),
        Offset(2),
        "the second answer is kept, not the third"
    );
    assert_eq!(new.leader_epoch(), LeaderEpoch(2));
    assert_eq!(
        new.log().end_offset_for_leader_epoch(LeaderEpoch(1)),
        Some((LeaderEpoch(1), Offset(2))),
        "epoch 1 ends, and epoch 2 starts, where the log ended when the leadership was taken"
    );
}
