//! The quorum under the deterministic simulation: 3 and 5 voters over a network that delays,
//! drops, duplicates, reorders, corrupts and partitions, with nodes crashed and restarted on
//! their durable state and proposals at random times, then a healed network. Crashes come at
//! random, as quick reboots (back within 5 ms, while an election or append is under way),
//! and right after a node granted a vote (30%): the moment a vote lost from the persisted
//! hard state would elect two leaders in one term (breaking that on purpose fails the
//! one-leader checker; sending acknowledgements before the write fails raft-rs's own
//! commit assertion). A seed replays exactly (`a_seed_replays_exactly`).
//!
//! Checkers, each run at the moment the event happens (a failure names the node, index or
//! term and prints the seed to replay):
//! - **one leader per term**: every node's view of the leader of a term (its own leadership
//!   included) names the same node;
//! - **committed entries never lost or reordered**: every entry a node applies at an index
//!   equals what any node applied there, and a node never skips an index some node applied
//!   (so each node's applied sequence is a prefix of the longest one, across crashes and
//!   restarts); a snapshot a node restores equals exactly the entries applied up to its index;
//! - **acknowledged means committed**: every proposal that resolved `Ok` is, at the end, the
//!   entry at its index;
//! - **converged**: at the end, every node's applied entries are a prefix of the longest
//!   node's and equal to it up to the last proposal committed after healing;
//! - **progress**: once the network heals and every node is restarted, a leader is elected, a
//!   proposal commits, and every node applies it within a bound of simulated time.
//!
//! Each node keeps its durable state either as the Raft state itself ([`SimRaftDisk`]) or as
//! [`FileRaftStorage`]'s record file in a [`SimDirDisk`], whose appends tear at a crash (a
//! seeded prefix survives), so the file format's recovery runs under the same checkers.
//!
//! Not verified: liveness during the faults (only after healing), membership changes (none),
//! the broker's real directory I/O under `DurableDir` (not built yet), power loss beyond
//! what an unfinished call loses.

use super::{
    AppliedVoterChange, ChangeKind, CrashSwitch, FileRaftStorage, ProposeError, QuorumConfig,
    QuorumNode, QuorumStatus, RaftIndex, RaftTerm, Role, SimDirDisk, SimRaftDisk, StateMachine,
    VoterChange,
};
use crate::runtime::{Clock, LocalBoxFuture, NodeId, Runtime, Transport, TransportError};
use crate::sim::{seeds, Endpoint, Executor, LinkFaults, SeedGuard, SimNetwork, SimRuntime};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use std::cell::{Cell, RefCell};
use std::collections::btree_map::Entry as MapEntry;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::time::Duration;
use storage::Notify;

/// Seeds per cluster size in `cargo test`.
const SEEDS: u64 = 150;
/// Random actions in the faulty phase of one seed.
const CHAOS_STEPS: usize = 60;
/// Longest pause between two actions.
const ACTION_GAP_MS_MAX: u64 = 120;
/// How long after healing the cluster must have elected a leader, committed a proposal and
/// applied it everywhere (simulated time).
const HEAL_DEADLINE: Duration = Duration::from_secs(20);

/// What every node reports, checked as it arrives.
#[derive(Default)]
struct World {
    /// The entry applied at each index, as first seen.
    entries_at: RefCell<BTreeMap<u64, Bytes>>,
    /// The leader of each term, as first seen.
    leaders: RefCell<BTreeMap<u64, NodeId>>,
    /// Proposals that resolved `Ok`: (index, entry).
    acked: RefCell<Vec<(u64, Bytes)>>,
    /// The configuration entry applied at each index, as first seen.
    changes_at: RefCell<BTreeMap<u64, AppliedVoterChange>>,
    /// Voter changes that resolved `Ok`: (index of their last entry, node, what it did).
    changes_acked: RefCell<Vec<(u64, NodeId, ChangeKind)>>,
    stats: RefCell<Stats>,
}

#[derive(Default, Debug, Clone, Copy, PartialEq, Eq)]
struct Stats {
    /// CRC-32C over the entries applied, the leader of each term and the final clock: two
    /// runs of one seed must agree on it.
    fingerprint: u32,
    terms_with_leader: u64,
    acked: u64,
    refused: u64,
    crashes: u64,
    snapshots_installed: u64,
    frames_refused: u64,
    voters_added: u64,
    voters_removed: u64,
    voter_changes_failed: u64,
}

impl std::ops::AddAssign for Stats {
    fn add_assign(&mut self, o: Stats) {
        self.fingerprint ^= o.fingerprint;
        self.terms_with_leader += o.terms_with_leader;
        self.acked += o.acked;
        self.refused += o.refused;
        self.crashes += o.crashes;
        self.snapshots_installed += o.snapshots_installed;
        self.frames_refused += o.frames_refused;
        self.voters_added += o.voters_added;
        self.voters_removed += o.voters_removed;
        self.voter_changes_failed += o.voter_changes_failed;
    }
}

#[derive(Debug, thiserror::Error)]
#[error("a snapshot that does not decode: {0}")]
struct BadSnapshot(&'static str);

/// Applied entries in a list; its snapshot is the list itself.
struct TestMachine {
    node: NodeId,
    world: Rc<World>,
    /// The applied entries: (index, entry). Shared with the test, which compares the nodes'
    /// lists at the end.
    applied: Rc<RefCell<Vec<(u64, Bytes)>>>,
    last: u64,
    /// Set at the first leader report: a restore after it came from the leader.
    running: bool,
}

impl TestMachine {
    fn new(node: NodeId, world: Rc<World>) -> TestMachine {
        TestMachine {
            node,
            world,
            applied: Rc::new(RefCell::new(Vec::new())),
            last: 0,
            running: false,
        }
    }
}

fn decode_snapshot(mut bytes: Bytes) -> Result<Vec<(u64, Bytes)>, BadSnapshot> {
    let mut out = Vec::new();
    while bytes.has_remaining() {
        if bytes.remaining() < 12 {
            return Err(BadSnapshot("a truncated header"));
        }
        let index = bytes.get_u64();
        let len = usize::try_from(bytes.get_u32()).map_err(|_| BadSnapshot("a length"))?;
        if bytes.remaining() < len {
            return Err(BadSnapshot("a truncated entry"));
        }
        out.push((index, bytes.split_to(len)));
    }
    Ok(out)
}

impl StateMachine for TestMachine {
    type RestoreError = BadSnapshot;

    fn apply(&mut self, index: RaftIndex, entry: &[u8]) {
        let (node, index, last) = (self.node, index.0, self.last);
        assert!(index > last, "node {node:?} applied {index} after {last}");
        let mut entries = self.world.entries_at.borrow_mut();
        if let Some((skipped, _)) = entries.range(last + 1..index).next() {
            panic!("node {node:?} skipped the committed entry at {skipped}: applied {index} after {last}");
        }
        match entries.entry(index) {
            MapEntry::Occupied(seen) => assert_eq!(
                &seen.get()[..],
                entry,
                "node {node:?} applied another entry at {index}"
            ),
            MapEntry::Vacant(slot) => {
                slot.insert(Bytes::copy_from_slice(entry));
            }
        }
        self.applied
            .borrow_mut()
            .push((index, Bytes::copy_from_slice(entry)));
        self.last = index;
    }

    fn snapshot(&self) -> Bytes {
        let mut out = BytesMut::new();
        for (index, entry) in self.applied.borrow().iter() {
            out.put_u64(*index);
            out.put_u32(u32::try_from(entry.len()).unwrap_or(u32::MAX));
            out.put_slice(entry);
        }
        out.freeze()
    }

    fn restore(&mut self, index: RaftIndex, snapshot: Bytes) -> Result<(), BadSnapshot> {
        let list = decode_snapshot(snapshot)?;
        let expected: Vec<(u64, Bytes)> = self
            .world
            .entries_at
            .borrow()
            .range(..=index.0)
            .map(|(i, e)| (*i, e.clone()))
            .collect();
        assert_eq!(
            list, expected,
            "node {:?} restored a snapshot at {} that differs from the entries applied up to it",
            self.node, index.0
        );
        *self.applied.borrow_mut() = list;
        self.last = index.0;
        if self.running {
            self.world.stats.borrow_mut().snapshots_installed += 1;
        }
        Ok(())
    }

    fn voters_changed(&mut self, index: RaftIndex, change: &AppliedVoterChange) {
        let node = self.node;
        match self.world.changes_at.borrow_mut().entry(index.0) {
            MapEntry::Occupied(seen) => assert_eq!(
                seen.get(),
                change,
                "node {node:?} applied another configuration entry at {}",
                index.0
            ),
            MapEntry::Vacant(slot) => {
                slot.insert(change.clone());
            }
        }
        if self.world.entries_at.borrow().contains_key(&index.0) {
            panic!("node {node:?} applied a configuration entry where an entry was applied");
        }
    }

    fn leader_changed(&mut self, leader: Option<NodeId>, term: RaftTerm) {
        self.running = true;
        let Some(leader) = leader else { return };
        let mut leaders = self.world.leaders.borrow_mut();
        match leaders.entry(term.0) {
            MapEntry::Occupied(seen) => assert_eq!(
                *seen.get(),
                leader,
                "node {:?} sees {leader:?} leading term {}, another node saw {:?}",
                self.node,
                term.0,
                seen.get()
            ),
            MapEntry::Vacant(slot) => {
                slot.insert(leader);
                self.world.stats.borrow_mut().terms_with_leader += 1;
            }
        }
    }
}

/// Faults the test switches on and off, on top of the network's delays and reordering
/// (shared with the metadata cluster simulation, `metadata::cluster_sim_test`).
pub(crate) struct Faults {
    pub(crate) drop_percent: Cell<u64>,
    pub(crate) duplicate_percent: Cell<u64>,
    pub(crate) corrupt_percent: Cell<u64>,
    /// Links cut in both directions (a partition), as (lower, higher) node ids.
    pub(crate) cut: RefCell<BTreeSet<(NodeId, NodeId)>>,
    /// Chance that a node granting a vote is rebooted right after sending it, in percent.
    pub(crate) reboot_after_vote_percent: Cell<u64>,
    /// Nodes that granted a vote and are to be rebooted (bounded by the voters: deduplicated).
    pub(crate) voted: RefCell<Vec<NodeId>>,
    pub(crate) vote_granted: Rc<Notify>,
}

impl Faults {
    /// Faults with these chances, in percent, and no link cut.
    pub(crate) fn percent(
        drop: u64,
        duplicate: u64,
        corrupt: u64,
        reboot_after_vote: u64,
    ) -> Rc<Faults> {
        Rc::new(Faults {
            drop_percent: Cell::new(drop),
            duplicate_percent: Cell::new(duplicate),
            corrupt_percent: Cell::new(corrupt),
            cut: RefCell::new(BTreeSet::new()),
            reboot_after_vote_percent: Cell::new(reboot_after_vote),
            voted: RefCell::new(Vec::new()),
            vote_granted: Rc::new(Notify::default()),
        })
    }
}

impl Faults {
    pub(crate) fn healed(&self) {
        self.drop_percent.set(0);
        self.duplicate_percent.set(0);
        self.corrupt_percent.set(0);
        self.cut.borrow_mut().clear();
        self.reboot_after_vote_percent.set(0);
        self.voted.borrow_mut().clear();
    }

    /// Notes a granted vote in `frame` from `node` for a reboot, at the configured chance.
    fn note_vote(&self, node: NodeId, frame: &Bytes, rt: &SimRuntime) {
        use protobuf::Message as _;
        let Some(payload) = frame.get(super::codec::FRAME_HEADER_BYTES..) else {
            return;
        };
        let Ok(message) = raft::eraftpb::Message::parse_from_bytes(payload) else {
            return;
        };
        let granted = message.get_msg_type() == raft::eraftpb::MessageType::MsgRequestVoteResponse
            && !message.reject;
        let mut voted = self.voted.borrow_mut();
        if granted && !voted.contains(&node) && rt.chance(self.reboot_after_vote_percent.get()) {
            voted.push(node);
            self.vote_granted.notify_all();
        }
    }
}

/// One node's transport: its network endpoint behind the test's faults. Cloned for each
/// incarnation of the node.
#[derive(Clone)]
pub(crate) struct Link {
    pub(crate) node: NodeId,
    pub(crate) endpoint: Rc<Endpoint<Bytes>>,
    pub(crate) faults: Rc<Faults>,
    pub(crate) runtime: SimRuntime,
}

impl Transport for Link {
    type Message = Bytes;

    fn send(&self, to: NodeId, frame: Bytes) -> Result<(), TransportError> {
        let pair = (self.node.min(to), self.node.max(to));
        let rt = &self.runtime;
        if self.faults.cut.borrow().contains(&pair) || rt.chance(self.faults.drop_percent.get()) {
            return Ok(()); // Lost: the sender cannot tell.
        }
        self.faults.note_vote(self.node, &frame, rt);
        let frame = if rt.chance(self.faults.corrupt_percent.get()) && !frame.is_empty() {
            let mut bytes = frame.to_vec();
            let at = usize::try_from(rt.random(0..bytes.len() as u64)).unwrap_or(0);
            bytes[at] ^= 1 << rt.random(0..8);
            Bytes::from(bytes)
        } else {
            frame
        };
        if rt.chance(self.faults.duplicate_percent.get()) {
            let _ = self.endpoint.send(to, frame.clone());
        }
        self.endpoint.send(to, frame)
    }

    fn recv(&self) -> LocalBoxFuture<(NodeId, Bytes)> {
        self.endpoint.recv()
    }
}

struct Running {
    node: QuorumNode,
    crash: CrashSwitch,
    applied: Rc<RefCell<Vec<(u64, Bytes)>>>,
}

/// A node's durable state: the Raft state itself, or the record file in a directory with
/// torn writes (seeded per node, so both run in every cluster size).
pub(crate) enum Disk {
    State(SimRaftDisk),
    Files(SimDirDisk),
}

struct Cluster {
    rt: SimRuntime,
    world: Rc<World>,
    faults: Rc<Faults>,
    voters: Vec<NodeId>,
    disks: Vec<Disk>,
    links: Vec<Link>,
    nodes: Vec<Option<Running>>,
    next_value: Cell<u64>,
    /// How many of the nodes (the first ones) a fresh store bootstraps as voters; the others
    /// join when a voter change adds them.
    initial_voters: usize,
    /// Whether the chaos also adds and removes voters.
    voter_changes: bool,
    /// Whether a voter change is in progress (one at a time from the test).
    changing: Rc<Cell<bool>>,
}

impl Cluster {
    /// A cluster of `voters` nodes, none started, on a network delaying messages up to
    /// `delay_us_max` µs (the other faults are `faults`'), each node's disk made by `disk`.
    fn new(
        rt: &SimRuntime,
        voters: i32,
        delay_us_max: u64,
        faults: Rc<Faults>,
        disk: impl Fn(&SimRuntime) -> Disk,
    ) -> Cluster {
        let net = SimNetwork::new(
            rt.clone(),
            LinkFaults {
                drop_percent: 0,
                delay_us_max,
            },
        );
        let ids: Vec<NodeId> = (0..voters).map(NodeId).collect();
        let links = ids
            .iter()
            .map(|id| Link {
                node: *id,
                endpoint: Rc::new(net.endpoint(*id)),
                faults: faults.clone(),
                runtime: rt.clone(),
            })
            .collect();
        Cluster {
            rt: rt.clone(),
            world: Rc::new(World::default()),
            faults,
            disks: ids.iter().map(|_| disk(rt)).collect(),
            nodes: ids.iter().map(|_| None).collect(),
            voters: ids,
            links,
            next_value: Cell::new(0),
            initial_voters: usize::try_from(voters).unwrap_or(0),
            voter_changes: false,
            changing: Rc::new(Cell::new(false)),
        }
    }

    fn config(&self, i: usize) -> QuorumConfig {
        let initial = if i < self.initial_voters {
            self.voters[..self.initial_voters].to_vec()
        } else {
            Vec::new()
        };
        let mut config = QuorumConfig::new(self.voters[i], initial);
        config.tick_interval = Duration::from_millis(10);
        config.election_ticks = 10;
        config.heartbeat_ticks = 2;
        // Small, so that snapshots, compaction and catch-up from a snapshot happen.
        config.snapshot_after_entries = 8;
        config.proposals_max = 64;
        // From the run's seed, so that the run replays.
        config.election_seed = self.rt.random(0..u64::MAX);
        config
    }

    async fn start(&mut self, i: usize) {
        let machine = TestMachine::new(self.voters[i], self.world.clone());
        let applied = machine.applied.clone();
        let (config, link, rt) = (self.config(i), self.links[i].clone(), self.rt.clone());
        let (started, crash) = match &self.disks[i] {
            Disk::State(disk) => {
                let storage = disk.open(rt.clone());
                let crash = storage.crash_switch();
                (
                    QuorumNode::start(config, storage, link, rt, machine).await,
                    crash,
                )
            }
            Disk::Files(disk) => {
                let dir = disk.open(rt.clone());
                let crash = dir.crash_switch();
                let storage = FileRaftStorage::new(dir);
                (
                    QuorumNode::start(config, storage, link, rt, machine).await,
                    crash,
                )
            }
        };
        let node =
            started.unwrap_or_else(|e| panic!("node {:?} failed to start: {e}", self.voters[i]));
        self.nodes[i] = Some(Running {
            node,
            crash,
            applied,
        });
    }

    fn crash(&mut self, i: usize) {
        if let Some(running) = self.nodes[i].take() {
            let status = running.node.status();
            self.world.stats.borrow_mut().frames_refused += status.frames_refused;
            running.node.stop();
            running.crash.crash();
            self.world.stats.borrow_mut().crashes += 1;
        }
    }

    fn leader(&self) -> Option<&QuorumNode> {
        self.nodes
            .iter()
            .flatten()
            .map(|r| &r.node)
            .find(|n| n.status().role == Role::Leader)
    }

    /// Proposes a fresh entry on `node` in the background, recording an `Ok` outcome.
    fn propose_on(&self, node: &QuorumNode) {
        let value = self.next_value.get();
        self.next_value.set(value + 1);
        let entry = Bytes::from(format!("entry-{value}"));
        let proposal = node.propose(entry.clone());
        let world = self.world.clone();
        self.rt.spawn(Box::pin(async move {
            match proposal.await {
                Ok(committed) => {
                    world.acked.borrow_mut().push((committed.index.0, entry));
                    world.stats.borrow_mut().acked += 1;
                }
                Err(_) => world.stats.borrow_mut().refused += 1,
            }
        }));
    }

    /// Adds a random node that is not a voter, or removes a random voter, through the
    /// leader, in the background (one change at a time); records an `Ok` outcome.
    fn change_voters(&self) {
        let Some(leader) = self.leader() else { return };
        if self.changing.get() {
            return;
        }
        let node = self.voters[self.random_node()];
        let change = if leader.status().voter_set.contains(&node) {
            VoterChange::Remove { node }
        } else {
            VoterChange::Add {
                node,
                endpoint: Bytes::from(format!("node-{}", node.0)),
            }
        };
        let kind = match change {
            VoterChange::Add { .. } => ChangeKind::AddVoter,
            VoterChange::Remove { .. } => ChangeKind::Remove,
        };
        let proposal = leader.change_voters(change, Duration::from_secs(2));
        let (world, changing) = (self.world.clone(), self.changing.clone());
        changing.set(true);
        self.rt.spawn(Box::pin(async move {
            let outcome = proposal.await;
            changing.set(false);
            let mut stats = world.stats.borrow_mut();
            match outcome {
                Ok(committed) => {
                    world
                        .changes_acked
                        .borrow_mut()
                        .push((committed.index.0, node, kind));
                    match kind {
                        ChangeKind::Remove => stats.voters_removed += 1,
                        _ => stats.voters_added += 1,
                    }
                }
                Err(_) => stats.voter_changes_failed += 1,
            }
        }));
    }

    fn random_node(&self) -> usize {
        usize::try_from(self.rt.random(0..self.voters.len() as u64)).unwrap_or(0)
    }

    async fn reboot(&mut self, i: usize) {
        if self.nodes[i].is_some() {
            self.crash(i);
            let pause = Duration::from_micros(self.rt.random(0..5_000));
            self.rt.sleep(pause).await;
            self.start(i).await;
        }
    }

    async fn chaos(&mut self) {
        let mut steps = 0;
        while steps < CHAOS_STEPS {
            let gap = Duration::from_millis(self.rt.random(0..ACTION_GAP_MS_MAX));
            let vote_granted = self.faults.vote_granted.notified();
            futures_lite::future::or(self.rt.sleep(gap), vote_granted).await;
            let voters: Vec<NodeId> = std::mem::take(&mut *self.faults.voted.borrow_mut());
            if !voters.is_empty() {
                // Reboot a node right after it granted a vote, while the election goes on.
                for voter in voters {
                    if let Some(i) = self.voters.iter().position(|v| *v == voter) {
                        self.reboot(i).await;
                    }
                }
                continue;
            }
            steps += 1;
            if self.voter_changes && self.rt.chance(15) {
                self.change_voters();
                continue;
            }
            let i = self.random_node();
            match self.rt.random(0..100) {
                0..=39 => {
                    if let Some(leader) = self.leader() {
                        self.propose_on(leader);
                    }
                }
                40..=49 => {
                    if let Some(running) = &self.nodes[i] {
                        self.propose_on(&running.node);
                    }
                }
                50..=54 => self.crash(i),
                // A reboot: the process dies and comes back on its disk within a few ms,
                // while the election or append it took part in is still going on.
                55..=64 => self.reboot(i).await,
                65..=69 => {
                    if self.nodes[i].is_none() {
                        self.start(i).await;
                    }
                }
                70..=79 => {
                    // Isolate node i from a random other node, or from everyone.
                    let j = self.random_node();
                    let mut cut = self.faults.cut.borrow_mut();
                    for (k, other) in self.voters.iter().enumerate() {
                        if k != i && (k == j || self.rt.chance(50)) {
                            let a = self.voters[i];
                            cut.insert((a.min(*other), a.max(*other)));
                        }
                    }
                }
                80..=87 => self.faults.cut.borrow_mut().clear(),
                _ => {
                    self.faults.drop_percent.set(self.rt.random(0..30));
                    self.faults.duplicate_percent.set(self.rt.random(0..15));
                    self.faults.corrupt_percent.set(self.rt.random(0..3));
                }
            }
        }
    }

    /// Heals the network, restarts every node, and waits until a proposal commits and every
    /// node has applied it; returns its index.
    async fn heal(&mut self) -> u64 {
        self.faults.healed();
        for i in 0..self.voters.len() {
            if self.nodes[i].is_none() {
                self.start(i).await;
            }
        }
        let deadline = self.rt.now() + HEAL_DEADLINE;
        let committed = loop {
            assert!(
                self.rt.now() < deadline,
                "no proposal committed within {HEAL_DEADLINE:?} of healing; nodes {:?}",
                self.statuses()
            );
            if let Some(leader) = self.leader() {
                let value = self.next_value.get();
                self.next_value.set(value + 1);
                let entry = Bytes::from(format!("final-{value}"));
                let outcome = futures_lite::future::or(
                    async { Some(leader.propose(entry.clone()).await) },
                    async {
                        self.rt.sleep(Duration::from_secs(1)).await;
                        None
                    },
                )
                .await;
                match outcome {
                    Some(Ok(committed)) => {
                        self.world
                            .acked
                            .borrow_mut()
                            .push((committed.index.0, entry));
                        break committed;
                    }
                    Some(Err(ProposeError::NotLeader { .. } | ProposeError::Dropped)) | None => {}
                    Some(Err(e)) => panic!("the final proposal failed: {e}"),
                }
            }
            self.rt.sleep(Duration::from_millis(20)).await;
        };
        loop {
            let mut behind = 0;
            let members = self.members();
            for (i, running) in self.nodes.iter().enumerate() {
                let Some(running) = running else { continue };
                let status = running.node.status();
                if let Some(reason) = status.stopped {
                    panic!("a node stopped after healing: {reason:?}");
                }
                if members.contains(&self.voters[i]) && status.applied_index < committed.index {
                    behind += 1;
                }
            }
            if behind == 0 {
                break;
            }
            assert!(
                self.rt.now() < deadline,
                "{behind} members did not apply index {} within {HEAL_DEADLINE:?} of healing; \
                 members {members:?}, nodes {:?}",
                committed.index.0,
                self.statuses()
            );
            self.rt.sleep(Duration::from_millis(10)).await;
        }
        committed.index.0
    }

    /// What every running node reports (for a failure's message).
    fn statuses(&self) -> Vec<QuorumStatus> {
        self.nodes
            .iter()
            .flatten()
            .map(|r| r.node.status())
            .collect()
    }

    /// The voters and learners of the leader's configuration (every node while there is no
    /// leader).
    fn members(&self) -> Vec<NodeId> {
        match self.leader() {
            Some(leader) => {
                let status = leader.status();
                [status.voter_set, status.learner_set].concat()
            }
            None => self.voters.clone(),
        }
    }

    /// After healing: every node's applied entries are a prefix of the longest node's, and
    /// every member's are equal up to `index`, which every member applied (a removed node
    /// receives nothing more).
    fn check_converged(&self, index: u64) {
        let members = self.members();
        let lists: Vec<Vec<(u64, Bytes)>> = self
            .nodes
            .iter()
            .enumerate()
            .filter(|(i, _)| members.contains(&self.voters[*i]))
            .filter_map(|(_, r)| r.as_ref())
            .map(|r| r.applied.borrow().clone())
            .collect();
        let Some(longest) = lists.iter().max_by_key(|l| l.len()) else {
            return;
        };
        for (i, list) in lists.iter().enumerate() {
            assert!(
                longest.starts_with(list),
                "node {i}'s applied entries are not a prefix of the longest"
            );
            let upto = |l: &[(u64, Bytes)]| l.iter().filter(|(x, _)| *x <= index).count();
            assert_eq!(
                upto(list),
                upto(longest),
                "node {i} differs from the longest at index {index}"
            );
        }
    }

    /// After healing: no node had a committed configuration entry refused by raft-rs, every
    /// member reports the configuration that the last configuration entry it applied put in
    /// force (the initial voters before any), and every voter change acknowledged `Ok` is the
    /// configuration entry at its index.
    fn check_configuration(&self) {
        let changes = self.world.changes_at.borrow();
        let in_force_at = |applied: RaftIndex| {
            changes.range(..=applied.0).next_back().map_or_else(
                || self.voters[..self.initial_voters].to_vec(),
                |(_, last)| last.voters.clone(),
            )
        };
        // A removed node need not learn of its removal: the leader stops replicating to it.
        let members = self.members();
        for (i, running) in self.nodes.iter().enumerate() {
            let Some(running) = running else { continue };
            let status = running.node.status();
            assert_eq!(
                status.conf_changes_refused, 0,
                "node {i}: raft-rs refused a committed configuration entry"
            );
            if members.contains(&self.voters[i]) {
                assert_eq!(
                    status.voter_set,
                    in_force_at(status.applied_index),
                    "node {i}'s voters; changes {changes:?}"
                );
            }
        }
        for (index, node, kind) in self.world.changes_acked.borrow().iter() {
            let applied = changes.get(index).unwrap_or_else(|| {
                panic!("the acknowledged change of {node:?} at {index} was never applied")
            });
            assert_eq!((applied.node, applied.kind), (*node, *kind));
        }
    }

    fn check_acked(&self) {
        let entries = self.world.entries_at.borrow();
        for (index, entry) in self.world.acked.borrow().iter() {
            assert_eq!(
                entries.get(index),
                Some(entry),
                "an acknowledged proposal is not the entry at its index {index}"
            );
        }
    }
}

/// Runs one seed with `voters` nodes; returns its statistics.
fn run_seed(seed: u64, voters: i32) -> Stats {
    run_seed_with(seed, voters, None)
}

/// Runs one seed with `nodes` nodes, the first `changing` of them initial voters and voter
/// changes in the chaos when given (all initial voters, no changes otherwise).
fn run_seed_with(seed: u64, nodes: i32, changing: Option<usize>) -> Stats {
    let mut ex = Executor::new(seed);
    let faults = Faults::percent(5, 5, 1, 30);
    let rt = ex.runtime();
    let mut cluster = Cluster::new(&rt, nodes, 5_000, faults, |rt| {
        if rt.chance(50) {
            Disk::Files(SimDirDisk::default())
        } else {
            Disk::State(SimRaftDisk::default())
        }
    });
    if let Some(initial) = changing {
        cluster.initial_voters = initial;
        cluster.voter_changes = true;
    }
    let world = cluster.world.clone();
    let cluster = ex
        .run_until(async move {
            for i in 0..cluster.voters.len() {
                cluster.start(i).await;
            }
            cluster.chaos().await;
            let healed_at = cluster.heal().await;
            (cluster, healed_at)
        })
        .unwrap_or_else(|stuck| panic!("the simulation got stuck: {stuck:?}"));
    let (cluster, healed_at) = cluster;
    cluster.check_converged(healed_at);
    cluster.check_acked();
    cluster.check_configuration();
    let mut stats = *world.stats.borrow();
    let mut fingerprint = crc32c::crc32c(&rt.now().0.as_micros().to_be_bytes());
    for (index, entry) in world.entries_at.borrow().iter() {
        fingerprint = crc32c::crc32c_append(fingerprint, &index.to_be_bytes());
        fingerprint = crc32c::crc32c_append(fingerprint, entry);
    }
    for (term, leader) in world.leaders.borrow().iter() {
        fingerprint = crc32c::crc32c_append(fingerprint, &term.to_be_bytes());
        fingerprint = crc32c::crc32c_append(fingerprint, &leader.0.to_be_bytes());
    }
    stats.fingerprint = fingerprint;
    for running in cluster.nodes.iter().flatten() {
        stats.frames_refused += running.node.status().frames_refused;
    }
    stats
}

fn run_seeds(base: u64, voters: i32) {
    let mut total = Stats::default();
    for seed in seeds(base, SEEDS) {
        let _guard = SeedGuard(seed);
        total += run_seed(seed, voters);
    }
    eprintln!("{voters} voters: {total:?}");
    // The run exercised what it claims to check: elections, commits, crashes, catch-up from
    // a leader's snapshot, and corrupt frames refused by the codec.
    assert!(total.terms_with_leader > 0, "no leader was ever elected");
    assert!(total.acked > 0, "no proposal committed");
    assert!(total.crashes > 0, "no node crashed");
    assert!(
        total.snapshots_installed > 0,
        "no follower caught up from a snapshot"
    );
    assert!(total.frames_refused > 0, "no corrupt frame reached a node");
}

#[test]
fn three_voters_stay_consistent_under_faults_and_recover() {
    run_seeds(0x3a5e_0001, 3);
}

#[test]
fn five_voters_stay_consistent_under_faults_and_recover() {
    run_seeds(0x5a5e_0001, 5);
}

/// Voter changes (KIP-853) under the same faults: five nodes, three of them the initial
/// voters; the chaos also adds non-voters and removes voters through the leader, one change
/// at a time. On top of the checks of every seed (one leader per term, every node applying
/// the same entries in order, acknowledged entries kept, convergence after healing): every
/// node applies the same configuration entry at each index, every change acknowledged `Ok` is
/// the entry at its index, and after healing every member reports the configuration of the
/// last entry.
#[test]
fn voters_are_added_and_removed_under_faults() {
    let mut total = Stats::default();
    for seed in seeds(0xc0f1_0001, SEEDS / 3) {
        let _guard = SeedGuard(seed);
        total += run_seed_with(seed, 5, Some(3));
    }
    eprintln!("voter changes: {total:?}");
    assert!(total.voters_added > 0, "no voter was added");
    assert!(total.voters_removed > 0, "no voter was removed");
    assert!(total.acked > 0, "no proposal committed");
    assert!(
        total.snapshots_installed > 0,
        "no node caught up from a snapshot"
    );
}

#[test]
fn a_seed_replays_exactly() {
    for seed in seeds(0xde7e_0001, 4) {
        let _guard = SeedGuard(seed);
        let voters = if seed % 2 == 0 { 3 } else { 5 };
        assert_eq!(
            run_seed(seed, voters),
            run_seed(seed, voters),
            "two runs of one seed differ"
        );
    }
}

/// The API's answers on one simulated node or a quiet cluster (no faults).
mod api {
    use super::*;
    use crate::raft::{Committed, StartError};

    fn quiet(seed: u64, voters: i32) -> (Executor, Cluster) {
        let ex = Executor::new(seed);
        let cluster = Cluster::new(
            &ex.runtime(),
            voters,
            1_000,
            Faults::percent(0, 0, 0, 0),
            |_| Disk::Files(SimDirDisk::default()),
        );
        (ex, cluster)
    }

    async fn until_leader(cluster: &Cluster) -> QuorumNode {
        for _ in 0..1_000 {
            if let Some(leader) = cluster.leader() {
                return leader.clone();
            }
            cluster.rt.sleep(Duration::from_millis(5)).await;
        }
        panic!("no leader within 5 s");
    }

    /// One voter (the quorum of a node without `controller.quorum.voters`): it elects itself,
    /// commits in order, and after a restart on its disk restores the snapshot and re-applies
    /// the entries after it, ending with the same applied entries.
    #[test]
    fn one_voter_commits_compacts_and_restarts_to_the_same_state() {
        let (mut ex, mut cluster) = quiet(1, 1);
        let cluster = ex
            .run_until(async move {
                cluster.start(0).await;
                let leader = until_leader(&cluster).await;
                let mut last = RaftIndex(0);
                for i in 0..20 {
                    let Committed { index, .. } = leader
                        .propose(Bytes::from(format!("e{i}")))
                        .await
                        .expect("a lone voter commits");
                    assert!(index > last, "indexes increase");
                    last = index;
                }
                cluster.crash(0);
                cluster.start(0).await;
                let restarted = until_leader(&cluster).await;
                // A new leader's first (empty) entry commits after the restored ones.
                while restarted.status().applied_index <= last {
                    cluster.rt.sleep(Duration::from_millis(5)).await;
                }
                cluster
            })
            .expect("the run completes");
        let entries = cluster.world.entries_at.borrow();
        assert_eq!(entries.len(), 20, "every committed entry applied");
        let values: Vec<Bytes> = entries.values().cloned().collect();
        let expected: Vec<Bytes> = (0..20).map(|i| Bytes::from(format!("e{i}"))).collect();
        assert_eq!(values, expected, "in proposal order");
    }

    /// DescribeQuorum's source: the leader reports every voter's progress (its own log end,
    /// the followers' matched ends once they answered, with when it heard from them and saw
    /// them caught up); a follower reports none; a crashed follower's times stop moving.
    #[test]
    fn the_leader_reports_every_voters_progress() {
        let (mut ex, mut cluster) = quiet(3, 3);
        ex.run_until(async move {
            for i in 0..3 {
                cluster.start(i).await;
            }
            let leader = until_leader(&cluster).await;
            for i in 0..5 {
                leader
                    .propose(Bytes::from(format!("p{i}")))
                    .await
                    .expect("a quorum commits");
            }
            // Heartbeat answers bring every follower's times.
            cluster.rt.sleep(Duration::from_millis(500)).await;
            let status = leader.status();
            let ids: Vec<NodeId> = status.voters.iter().map(|v| v.node).collect();
            assert_eq!(ids, cluster.voters);
            for v in &status.voters {
                assert_eq!(v.log_end, status.log_end, "{v:?} caught up");
                assert!(
                    v.last_fetch.is_some() && v.last_caught_up.is_some(),
                    "{v:?}"
                );
            }
            assert!(status.commit_index <= status.log_end);
            let followers: Vec<_> = cluster
                .nodes
                .iter()
                .flatten()
                .filter(|r| r.node.status().role == Role::Follower)
                .collect();
            assert_eq!(followers.len(), 2);
            assert!(followers.iter().all(|r| r.node.status().voters.is_empty()));
            // A crashed follower is heard from no more.
            let leader_id = leader.leader().expect("a leader");
            let victim = (0..3)
                .find(|&i| cluster.voters[i] != leader_id)
                .expect("a follower");
            let victim_id = cluster.voters[victim];
            cluster.crash(victim);
            let heard = |s: &crate::raft::QuorumStatus| {
                s.voters
                    .iter()
                    .find(|v| v.node == victim_id)
                    .and_then(|v| v.last_fetch)
            };
            let before = heard(&leader.status());
            cluster.rt.sleep(Duration::from_millis(500)).await;
            let after = heard(&leader.status());
            assert!(before.is_some() && before == after, "{before:?} {after:?}");
        })
        .expect("the run completes");
    }

    /// A leader that removes itself answers `Ok` once the removal is applied (it steps down
    /// right then), another voter leads the two left and commits; the removed node is not
    /// among their voters.
    #[test]
    fn a_leader_removing_itself_is_answered_and_replaced() {
        let (mut ex, mut cluster) = quiet(5, 3);
        ex.run_until(async move {
            for i in 0..3 {
                cluster.start(i).await;
            }
            let leader = until_leader(&cluster).await;
            cluster.rt.sleep(Duration::from_millis(100)).await;
            let me = leader.leader().expect("a leader knows itself");
            let removed = leader
                .change_voters(VoterChange::Remove { node: me }, Duration::from_secs(2))
                .await;
            assert!(removed.is_ok(), "{removed:?}");
            let mut successor = None;
            for _ in 0..1_000 {
                successor = cluster.leader().filter(|l| l.leader() != Some(me)).cloned();
                if successor.is_some() {
                    break;
                }
                cluster.rt.sleep(Duration::from_millis(5)).await;
            }
            let successor = successor.expect("another voter leads within 5 s");
            assert!(!successor.status().voter_set.contains(&me));
            let committed = successor.propose(Bytes::from_static(b"after")).await;
            assert!(committed.is_ok(), "{committed:?}");
        })
        .expect("the run completes");
    }

    /// Immediate refusals: a follower names the leader, an empty or oversized entry, a full
    /// queue, and a stopped node.
    #[test]
    fn proposals_are_refused_with_a_reason() {
        let (mut ex, mut cluster) = quiet(2, 3);
        ex.run_until(async move {
            for i in 0..3 {
                cluster.start(i).await;
            }
            let leader = until_leader(&cluster).await;
            let leader_id = leader.leader();
            // The followers learn the leader from its first append.
            cluster.rt.sleep(Duration::from_millis(100)).await;
            let follower = cluster
                .nodes
                .iter()
                .flatten()
                .map(|r| &r.node)
                .find(|n| n.status().role == Role::Follower)
                .expect("a follower");
            assert_eq!(
                follower.propose(Bytes::from_static(b"x")).await,
                Err(ProposeError::NotLeader { leader: leader_id })
            );
            assert_eq!(leader.propose(Bytes::new()).await, Err(ProposeError::Empty));
            let max = cluster.config(0).entry_bytes_max;
            assert_eq!(
                leader.propose(Bytes::from(vec![1u8; max + 1])).await,
                Err(ProposeError::TooLarge {
                    entry_bytes: max + 1,
                    entry_bytes_max: max
                })
            );
            let proposals_max = cluster.config(0).proposals_max;
            let queued: Vec<_> = (0..proposals_max)
                .map(|i| leader.propose(Bytes::from(format!("q{i}"))))
                .collect();
            assert_eq!(
                leader.propose(Bytes::from_static(b"one too many")).await,
                Err(ProposeError::QueueFull { proposals_max })
            );
            leader.stop();
            for proposal in queued {
                assert_eq!(proposal.await, Err(ProposeError::Stopped));
            }
            assert_eq!(
                leader.propose(Bytes::from_static(b"late")).await,
                Err(ProposeError::Stopped)
            );
        })
        .expect("the run completes");
    }

    /// A recovered store keeps the voters it holds, whatever the configuration names (a voter
    /// change may have replaced them); a node outside its configured voters is refused before
    /// the storage is touched.
    #[test]
    fn a_store_keeps_its_voters_and_an_inconsistent_voter_set_is_refused() {
        let (mut ex, mut cluster) = quiet(3, 3);
        ex.run_until(async move {
            cluster.start(0).await;
            cluster.crash(0);
            let Disk::Files(disk) = &cluster.disks[0] else {
                unreachable!("quiet clusters use files");
            };
            let rt = cluster.rt.clone();
            let mut config = cluster.config(0);
            config.voters.push(NodeId(7));
            let started = QuorumNode::start(
                config,
                FileRaftStorage::new(disk.open(rt.clone())),
                cluster.links[0].clone(),
                rt.clone(),
                TestMachine::new(NodeId(0), cluster.world.clone()),
            )
            .await
            .expect("a recovered store starts");
            rt.sleep(Duration::from_millis(50)).await;
            assert_eq!(
                started.status().voter_set,
                vec![NodeId(0), NodeId(1), NodeId(2)]
            );
            started.stop();
            let mut config = cluster.config(0);
            config.node = NodeId(9);
            let started = QuorumNode::start(
                config,
                FileRaftStorage::new(disk.open(rt.clone())),
                cluster.links[0].clone(),
                rt,
                TestMachine::new(NodeId(9), cluster.world.clone()),
            )
            .await;
            assert!(matches!(started, Err(StartError::InvalidConfig { .. })));
        })
        .expect("the run completes");
    }
}
