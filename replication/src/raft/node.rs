//! [`QuorumNode`]: one voter of the controller quorum, a raft-rs `RawNode` driven by one task
//! on the runtime seam.
//!
//! The driver task owns the `RawNode`, the [`RaftStorage`], the transport and the
//! [`StateMachine`]; the [`QuorumNode`] handle shares only the proposal queue, the status and
//! the stop flag with it. Each turn of the driver:
//! 1. waits for a message, the next tick, or a proposal / stop (whichever comes first);
//! 2. steps up to [`MESSAGES_PER_TURN_MAX`] decoded messages (see [`super::codec`] for which
//!    are accepted), ticks once per elapsed tick interval, proposes queued entries when this
//!    node is the leader (otherwise they fail with [`ProposeError::NotLeader`]);
//! 3. handles the `Ready`: the leader's own messages go out at once (Raft thesis §10.2.1:
//!    replication overlaps the leader's write); a received snapshot, the new entries and the
//!    hard state are made durable through [`RaftStorage::persist`]; only then are the
//!    messages that acknowledge them sent (votes, append responses: `persisted_messages`),
//!    the committed entries applied and the `Ready` advanced;
//! 4. when more than [`QuorumConfig::snapshot_after_entries`] entries were applied since the
//!    last snapshot, takes the state machine's snapshot and compacts the log
//!    ([`RaftStorage::compact`]); a follower behind the compacted log catches up from it.
//!
//! Invariants:
//! 1. no message that acknowledges an entry, a vote or a snapshot leaves before the
//!    `persist` covering it resolved (raft-rs marks them as `persisted_messages`);
//! 2. entries are applied once per incarnation, in index order, with no gap (a snapshot
//!    restore counts as applying every entry up to its index);
//! 3. a proposal resolves exactly once: `Ok` when the entry it created is applied at its
//!    index and term, an error otherwise (a dropped completion resolves as
//!    [`ProposeError::Stopped`]).
//!
//! Determinism: raft-rs draws each randomized election timeout from the thread's RNG; the
//! driver replaces every draw by one seeded from [`QuorumConfig::election_seed`], so a
//! simulation run is a function of its seed.
//!
//! Voter changes ([`QuorumNode::change_voters`], KIP-853): one at a time, each a Raft
//! single-server change (see [`super::membership`]); an added node is a learner until it holds
//! every committed entry. The configuration in force is raft-rs's: bootstrapped from
//! [`QuorumConfig::voters`] on a fresh store, then changed only by applied configuration
//! entries. It is durable through snapshots: a restart begins with the last snapshot's
//! configuration (or the bootstrapped one) and re-applies the configuration entries after it,
//! as every other entry.
//!
//! Limits: proposals only on the leader (no forwarding); the transport's `recv` must be cancel-safe (dropping its future before it
//! resolves loses no message), as the driver races it against its timer. raft-rs asserts
//! Raft's rules on what voters send (a commit index beyond this node's log panics, as the
//! deliberately broken persistence in the simulation showed): quorum members are trusted peers,
//! the voter listener's security keeps out every other sender, and the codec every corrupted
//! frame.

use super::codec;
use super::membership::{self, AppliedVoterChange, ChangeKind, FirstStep, Refusal, VoterChange};
use super::storage::{
    check_recovered, LogCache, Persist, RaftStorage, RaftStorageError, Recovered,
};
use super::types::{RaftIndex, RaftTerm, StateMachine};
use crate::runtime::{MonotonicTime, NodeId, Runtime, Transport};
use bytes::Bytes;
use futures_lite::future;
use raft::eraftpb::{ConfChangeV2, ConfState, Entry, EntryType, Message, MessageType, Snapshot};
use raft::{RawNode, SnapshotStatus, StateRole};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use storage::Notify;

/// Most messages stepped in one driver turn before the `Ready` is handled.
pub const MESSAGES_PER_TURN_MAX: usize = 256;
/// Largest append message raft-rs builds (bytes of entries; one entry may exceed it).
pub const APPEND_BYTES_MAX: u64 = 1 << 20;
/// Most append messages in flight to one follower.
pub const APPENDS_IN_FLIGHT_MAX: usize = 256;
/// Most bytes of proposed but uncommitted entries on the leader; raft-rs drops proposals
/// beyond it ([`ProposeError::Dropped`]).
pub const UNCOMMITTED_BYTES_MAX: u64 = 64 << 20;

/// Timing and bounds of a [`QuorumNode`]; [`QuorumConfig::new`] gives the defaults.
#[derive(Clone, Debug)]
pub struct QuorumConfig {
    /// This node (Kafka's `node.id`).
    pub node: NodeId,
    /// The voters a fresh store starts with, this node included (Kafka's
    /// `controller.quorum.voters`, or the `--initial-controllers` of a dynamic quorum). Empty:
    /// this node joins a running quorum and waits until a voter change adds it (KIP-853). A
    /// recovered store keeps its own configuration, whatever this says.
    pub voters: Vec<NodeId>,
    /// Time between two Raft ticks (default 100 ms).
    pub tick_interval: Duration,
    /// Ticks without a leader's message before a follower campaigns (randomised by raft-rs
    /// within `[election_ticks, 2 × election_ticks)`; default 10).
    pub election_ticks: usize,
    /// Ticks between the leader's heartbeats (default 2; below `election_ticks`).
    pub heartbeat_ticks: usize,
    /// Entries applied since the last snapshot that trigger a new snapshot and a compaction
    /// (default 10,000).
    pub snapshot_after_entries: u64,
    /// Largest entry [`QuorumNode::propose`] takes, in bytes (default 1 MiB).
    pub entry_bytes_max: usize,
    /// Most proposals queued or in flight on this node (default 1,024).
    pub proposals_max: usize,
    /// Seeds the draw of each randomized election timeout (default: from the node id, so
    /// voters differ). raft-rs draws them from the thread's RNG; the driver replaces each draw
    /// by one from this seed so that a simulation replays exactly.
    pub election_seed: u64,
}

impl QuorumConfig {
    /// The defaults for `node` among `voters`.
    pub fn new(node: NodeId, voters: Vec<NodeId>) -> QuorumConfig {
        QuorumConfig {
            node,
            voters,
            tick_interval: Duration::from_millis(100),
            election_ticks: 10,
            heartbeat_ticks: 2,
            snapshot_after_entries: 10_000,
            entry_bytes_max: 1 << 20,
            proposals_max: 1_024,
            election_seed: 0x9e37_79b9_7f4a_7c15 ^ u64::from(node.0.unsigned_abs()),
        }
    }

    fn check(&self) -> Result<(), StartError> {
        let invalid = |reason: String| Err(StartError::InvalidConfig { reason });
        let mut sorted = self.voters.clone();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() != self.voters.len() {
            return invalid(format!("voters {:?} name a node twice", self.voters));
        }
        if !self.voters.is_empty() && !self.voters.contains(&self.node) {
            return invalid(format!(
                "node {:?} is not among the voters {:?}",
                self.node, self.voters
            ));
        }
        if let Some(bad) = self.voters.iter().find(|v| codec::raft_id(**v).is_none()) {
            return invalid(format!("voter {bad:?} has a negative node id"));
        }
        if self.tick_interval.is_zero() {
            return invalid("a zero tick interval".into());
        }
        if self.heartbeat_ticks == 0 || self.election_ticks <= self.heartbeat_ticks {
            return invalid(format!(
                "election ticks {} must exceed heartbeat ticks {} > 0",
                self.election_ticks, self.heartbeat_ticks
            ));
        }
        if self.snapshot_after_entries == 0 || self.proposals_max == 0 {
            return invalid("zero snapshot_after_entries or proposals_max".into());
        }
        if self.entry_bytes_max == 0 || self.entry_bytes_max > codec::SNAPSHOT_BYTES_MAX {
            return invalid(format!(
                "entry_bytes_max {} outside 1..={}",
                self.entry_bytes_max,
                codec::SNAPSHOT_BYTES_MAX
            ));
        }
        Ok(())
    }

    fn raft_voters(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = self
            .voters
            .iter()
            .filter_map(|v| codec::raft_id(*v))
            .collect();
        ids.sort_unstable();
        ids
    }
}

/// Why [`QuorumNode::start`] failed.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The configuration is inconsistent.
    #[error("invalid quorum configuration: {reason}")]
    InvalidConfig { reason: String },
    /// Reading or bootstrapping the durable state failed.
    #[error("the Raft storage failed: {0}")]
    Storage(#[from] RaftStorageError),
    /// The state machine refused the stored snapshot.
    #[error("the state machine could not restore the snapshot at index {index}: {reason}")]
    Restore { index: u64, reason: String },
    /// raft-rs refused its configuration or state.
    #[error("raft-rs refused to start: {reason}")]
    Raft { reason: String },
}

/// Why a proposal did not commit.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum ProposeError {
    /// This node is not the leader; `leader` is the one it knows of, if any.
    #[error("not the leader (the leader is {leader:?})")]
    NotLeader { leader: Option<NodeId> },
    /// [`QuorumConfig::proposals_max`] proposals are queued or in flight.
    #[error("{proposals_max} proposals are already queued or in flight")]
    QueueFull { proposals_max: usize },
    /// The entry is larger than [`QuorumConfig::entry_bytes_max`].
    #[error("an entry of {entry_bytes} bytes, more than {entry_bytes_max}")]
    TooLarge {
        entry_bytes: usize,
        entry_bytes_max: usize,
    },
    /// An empty entry (Raft uses empty entries itself, as a new leader's first entry).
    #[error("an empty entry")]
    Empty,
    /// The entry did not commit: raft-rs refused it, or another leader's entry replaced it.
    #[error("the entry was dropped (refused or replaced by another leader's entry)")]
    Dropped,
    /// A snapshot from the leader replaced the log past the entry: it may or may not have
    /// committed (like a timeout, the caller must find out).
    #[error("the outcome is unknown: a snapshot replaced the log past the entry")]
    Indeterminate,
    /// The node stopped before the outcome was known.
    #[error("the quorum node stopped")]
    Stopped,
    /// A voter change: `node` is a voter already.
    #[error("node {} is a voter already", node.0)]
    AlreadyVoter { node: NodeId },
    /// A voter change: `node` is neither a voter nor a learner (or has no raft id).
    #[error("node {} is not a voter", node.0)]
    NotAMember { node: NodeId },
    /// A voter change would remove the last voter.
    #[error("node {} is the last voter", node.0)]
    LastVoter { node: NodeId },
    /// Another voter change is not applied yet (one at a time; a new leader's first entry
    /// counts as one until applied).
    #[error("another voter change is in progress")]
    VoterChangeInProgress,
    /// The learner being added did not hold every committed entry before the change's
    /// timeout; it was removed again.
    #[error("node {} did not catch up with the leader in time", node.0)]
    NotCaughtUp { node: NodeId },
}

impl From<Refusal> for ProposeError {
    fn from(refusal: Refusal) -> ProposeError {
        match refusal {
            Refusal::AlreadyVoter(node) => ProposeError::AlreadyVoter { node },
            Refusal::NotAMember(node) => ProposeError::NotAMember { node },
            Refusal::LastVoter(node) => ProposeError::LastVoter { node },
        }
    }
}

/// Where a proposal committed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Committed {
    /// The entry's index in the Raft log.
    pub index: RaftIndex,
    /// The term of the leader that appended it.
    pub term: RaftTerm,
}

/// Why the driver stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// [`QuorumNode::stop`] was called.
    Requested,
    /// A storage call failed (a crash in the simulation).
    Storage(RaftStorageError),
    /// The state machine refused a snapshot received from the leader.
    Restore { index: u64, reason: String },
    /// The state machine's snapshot exceeds [`codec::SNAPSHOT_BYTES_MAX`].
    SnapshotTooLarge { snapshot_bytes: usize },
}

/// A voter's role.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Follows a leader (or waits for one).
    Follower,
    /// Asks for pre-votes before campaigning.
    PreCandidate,
    /// Campaigns for votes.
    Candidate,
    /// Leads the quorum: the active controller.
    Leader,
}

/// What a [`QuorumNode`] reports about itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuorumStatus {
    /// This node's role.
    pub role: Role,
    /// The leader of `term` as this node knows it.
    pub leader: Option<NodeId>,
    /// The current term.
    pub term: RaftTerm,
    /// The highest index known committed.
    pub commit_index: RaftIndex,
    /// The term of the entry at `commit_index` (0 when unknown). A new leader learns which
    /// of its predecessors' entries are committed only once an entry of its own term (its
    /// first, empty one) is: until `commit_term == term`, entries past `commit_index` may
    /// still commit before anything it proposes (Raft §5.4.2), so a state machine applied
    /// up to `commit_index` is not yet the state its proposals will follow.
    pub commit_term: RaftTerm,
    /// The highest index applied to the state machine (no-op entries included).
    pub applied_index: RaftIndex,
    /// Frames refused by the codec (corrupt, misaddressed, or of a type peers never send)
    /// since the start.
    pub frames_refused: u64,
    /// Configuration entries raft-rs refused to apply (none is expected) since the start.
    pub conf_changes_refused: u64,
    /// Leader heartbeats whose commit index lay past this voter's log (it lost entries the
    /// leader believes it has: a wiped disk) since the start; their commit was ignored.
    pub commits_beyond_log: u64,
    /// Set once the driver stopped.
    pub stopped: Option<StopReason>,
    /// This node's log end: the index of its last entry (Raft indexes start at 1, so this is
    /// also Kafka's exclusive log end offset).
    pub log_end: RaftIndex,
    /// While this node leads: every voter's replication progress (this node's own first is
    /// not guaranteed; by node id), for DescribeQuorum. Empty otherwise.
    pub voters: Vec<VoterProgress>,
    /// While this node leads: every learner's (a node being added) likewise.
    pub learners: Vec<VoterProgress>,
    /// The voters of the configuration this node has applied, by node id.
    pub voter_set: Vec<NodeId>,
    /// The learners of that configuration, by node id.
    pub learner_set: Vec<NodeId>,
}

/// A voter's replication progress as the leader sees it (KIP-595's `ReplicaState`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VoterProgress {
    pub node: NodeId,
    /// Its log end as the leader knows it: the index of the last entry it matched (as
    /// [`QuorumStatus::log_end`]).
    pub log_end: RaftIndex,
    /// When the leader last heard from it (an append or heartbeat answer), on the
    /// runtime's monotonic clock; the leader itself: now. `None`: not since this node leads.
    pub last_fetch: Option<MonotonicTime>,
    /// When it last had every entry the leader had: the leader itself, now.
    pub last_caught_up: Option<MonotonicTime>,
}

struct Slot {
    outcome: Option<Result<Committed, ProposeError>>,
    /// Set with the outcome: a proposal resolves once (invariant 3).
    completed: bool,
    waker: Option<Waker>,
}

/// The outcome of [`QuorumNode::propose`]: resolves once, with where the entry committed or
/// why it did not.
pub struct Proposal {
    slot: Rc<RefCell<Slot>>,
}

impl Future for Proposal {
    type Output = Result<Committed, ProposeError>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut slot = self.slot.borrow_mut();
        match slot.outcome.take() {
            Some(outcome) => Poll::Ready(outcome),
            None => {
                slot.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

/// The driver's side of a [`Proposal`]; dropped without an outcome, it resolves as
/// [`ProposeError::Stopped`] (invariant 3).
struct Completer {
    slot: Rc<RefCell<Slot>>,
}

impl Completer {
    fn pair() -> (Proposal, Completer) {
        let slot = Rc::new(RefCell::new(Slot {
            outcome: None,
            completed: false,
            waker: None,
        }));
        (Proposal { slot: slot.clone() }, Completer { slot })
    }

    fn resolved(outcome: Result<Committed, ProposeError>) -> Proposal {
        let (proposal, completer) = Completer::pair();
        completer.complete(outcome);
        proposal
    }

    fn complete(self, outcome: Result<Committed, ProposeError>) {
        self.set(outcome);
    }

    fn set(&self, outcome: Result<Committed, ProposeError>) {
        let mut slot = self.slot.borrow_mut();
        if !slot.completed {
            slot.completed = true;
            slot.outcome = Some(outcome);
            if let Some(waker) = slot.waker.take() {
                waker.wake();
            }
        }
    }
}

impl Drop for Completer {
    fn drop(&mut self) {
        self.set(Err(ProposeError::Stopped));
    }
}

struct Shared {
    config: QuorumConfig,
    /// Proposals not yet handed to raft-rs; with `in_flight` at most `proposals_max`.
    queue: RefCell<VecDeque<(Bytes, Completer)>>,
    in_flight: Cell<usize>,
    status: RefCell<QuorumStatus>,
    stop_requested: Cell<bool>,
    /// Wakes the driver (a proposal or a stop).
    wake: Rc<Notify>,
    /// A voter change not yet taken by the driver, with its timeout.
    voter_change: RefCell<Option<(VoterChange, Duration, Completer)>>,
}

/// A fresh store gets the configured voters (none: a joining node starts with an empty
/// configuration and waits for a leader to add it); a recovered one keeps its own.
async fn establish_voters<S: RaftStorage>(
    storage: &mut S,
    recovered: &mut Recovered,
    raft_voters: &[u64],
    snapshot_index: u64,
) -> Result<(), StartError> {
    if recovered.conf_state != ConfState::default() {
        return Ok(());
    }
    if snapshot_index != 0 || !recovered.entries.is_empty() {
        return Err(StartError::Storage(RaftStorageError::Corrupt {
            reason: "entries or a snapshot but no voters".into(),
        }));
    }
    if raft_voters.is_empty() {
        return Ok(());
    }
    let conf_state = ConfState {
        voters: raft_voters.to_vec(),
        ..ConfState::default()
    };
    storage
        .persist(Persist {
            conf_state: Some(&conf_state),
            ..Persist::default()
        })
        .await?;
    recovered.conf_state = conf_state;
    Ok(())
}

/// raft-rs's configuration of voter `this`, which has applied up to `snapshot_index`.
fn raft_config(config: &QuorumConfig, this: u64, snapshot_index: u64) -> raft::Config {
    raft::Config {
        id: this,
        election_tick: config.election_ticks,
        heartbeat_tick: config.heartbeat_ticks,
        applied: snapshot_index,
        max_size_per_msg: APPEND_BYTES_MAX,
        max_inflight_msgs: APPENDS_IN_FLIGHT_MAX,
        check_quorum: true,
        pre_vote: true,
        max_uncommitted_size: UNCOMMITTED_BYTES_MAX,
        ..raft::Config::default()
    }
}

/// raft-rs's node of voter `this` over `cache`; a one-voter quorum has campaigned already.
fn new_raw_node(
    config: &QuorumConfig,
    this: u64,
    snapshot_index: u64,
    cache: LogCache,
) -> Result<RawNode<LogCache>, StartError> {
    let raft_config = raft_config(config, this, snapshot_index);
    let logger = slog::Logger::root(slog::Discard, slog::o!());
    let mut raw = RawNode::new(&raft_config, cache, &logger).map_err(|e| StartError::Raft {
        reason: e.to_string(),
    })?;
    if raw.raft.prs().conf().to_conf_state().voters == [this] {
        // A one-voter quorum elects itself at once instead of after an election timeout.
        raw.campaign().map_err(|e| StartError::Raft {
            reason: e.to_string(),
        })?;
    }
    Ok(raw)
}

impl Shared {
    /// A follower's state at start: nothing queued, `commit` and `applied` as recovered.
    fn new(config: QuorumConfig, term: RaftTerm, commit: RaftIndex, applied: RaftIndex) -> Self {
        Shared {
            queue: RefCell::new(VecDeque::new()),
            in_flight: Cell::new(0),
            status: RefCell::new(QuorumStatus {
                role: Role::Follower,
                leader: None,
                term,
                commit_index: commit,
                commit_term: RaftTerm(0),
                applied_index: applied,
                frames_refused: 0,
                conf_changes_refused: 0,
                commits_beyond_log: 0,
                stopped: None,
                log_end: RaftIndex(0),
                voters: Vec::new(),
                learners: Vec::new(),
                voter_set: Vec::new(),
                learner_set: Vec::new(),
            }),
            stop_requested: Cell::new(false),
            wake: Rc::new(Notify::default()),
            voter_change: RefCell::new(None),
            config,
        }
    }
}

/// One voter of the controller quorum (cheap to clone: a handle to the running node).
#[derive(Clone)]
pub struct QuorumNode {
    shared: Rc<Shared>,
}

impl QuorumNode {
    /// Recovers `storage` (bootstrapping a fresh one with the configured voters), restores
    /// `state_machine` from the stored snapshot and spawns the driver on `runtime`.
    /// Errors: [`StartError`].
    pub async fn start<S, T, R, M>(
        config: QuorumConfig,
        mut storage: S,
        transport: T,
        runtime: R,
        mut state_machine: M,
    ) -> Result<QuorumNode, StartError>
    where
        S: RaftStorage + 'static,
        T: Transport<Message = Bytes> + 'static,
        R: Runtime + Clone + 'static,
        M: StateMachine + 'static,
    {
        config.check()?;
        let raft_voters = config.raft_voters();
        let mut recovered = storage.recover().await?;
        check_recovered(&recovered)?;
        let snapshot_index = recovered.snapshot.get_metadata().index;
        establish_voters(&mut storage, &mut recovered, &raft_voters, snapshot_index).await?;
        // A snapshot holds committed state only: its index is committed even when the
        // durable commit index lagged behind the compaction.
        let commit = recovered.hard_state.commit.max(snapshot_index);
        recovered.hard_state.commit = commit;
        if snapshot_index > 0 {
            state_machine
                .restore(RaftIndex(snapshot_index), recovered.snapshot.data.clone())
                .map_err(|e| StartError::Restore {
                    index: snapshot_index,
                    reason: e.to_string(),
                })?;
        }
        let this = codec::raft_id(config.node).ok_or_else(|| StartError::InvalidConfig {
            reason: format!("node {:?} has a negative id", config.node),
        })?;
        let cache = LogCache::new(recovered);
        let raw = new_raw_node(&config, this, snapshot_index, cache.clone())?;
        let shared = Rc::new(Shared::new(
            config,
            RaftTerm(raw.raft.term),
            RaftIndex(commit),
            RaftIndex(snapshot_index),
        ));
        let next_tick = runtime.now() + shared.config.tick_interval;
        let mut driver = Driver {
            rng: fastrand::Rng::with_seed(shared.config.election_seed),
            election_timeout_for: None,
            shared: shared.clone(),
            raw,
            cache,
            storage,
            transport,
            runtime: runtime.clone(),
            state_machine,
            this,
            in_flight: BTreeMap::new(),
            applied: snapshot_index,
            reported: None,
            next_tick,
            unreachable: Vec::new(),
            snapshots_sent: Vec::new(),
            heard: BTreeMap::new(),
            heard_term: 0,
            voter_change: None,
        };
        driver.pin_election_timeout();
        runtime.spawn(Box::pin(driver.run()));
        Ok(QuorumNode { shared })
    }

    /// A proposal refused at once when this node stopped ([`ProposeError::Stopped`]) or does
    /// not lead ([`ProposeError::NotLeader`]); `None` while it leads.
    fn unless_leading(&self) -> Option<Proposal> {
        let shared = &self.shared;
        let status = shared.status.borrow();
        if status.stopped.is_some() || shared.stop_requested.get() {
            return Some(Completer::resolved(Err(ProposeError::Stopped)));
        }
        if status.role != Role::Leader {
            return Some(Completer::resolved(Err(ProposeError::NotLeader {
                leader: status.leader,
            })));
        }
        None
    }

    /// Proposes `entry` for the log. Resolves with where it committed (applied on this node
    /// at that index) or a [`ProposeError`]; the immediate refusals (not the leader, queue
    /// full, too large, empty, stopped) resolve at the first poll.
    pub fn propose(&self, entry: Bytes) -> Proposal {
        if let Some(refused) = self.unless_leading() {
            return refused;
        }
        let shared = &self.shared;
        if entry.is_empty() {
            return Completer::resolved(Err(ProposeError::Empty));
        }
        let entry_bytes_max = shared.config.entry_bytes_max;
        if entry.len() > entry_bytes_max {
            return Completer::resolved(Err(ProposeError::TooLarge {
                entry_bytes: entry.len(),
                entry_bytes_max,
            }));
        }
        let mut queue = shared.queue.borrow_mut();
        let proposals_max = shared.config.proposals_max;
        if queue.len() + shared.in_flight.get() >= proposals_max {
            return Completer::resolved(Err(ProposeError::QueueFull { proposals_max }));
        }
        let (proposal, completer) = Completer::pair();
        queue.push_back((entry, completer));
        drop(queue);
        shared.wake.notify_all();
        proposal
    }

    /// Changes the voter set by one node (KIP-853's AddRaftVoter / RemoveRaftVoter), on the
    /// leader only. Resolves with where the change's last entry committed, or a
    /// [`ProposeError`]: not the leader; another change in progress; a node that is a voter
    /// already, or not a member, or the last voter; an added node that did not catch up
    /// within `timeout` ([`ProposeError::NotCaughtUp`], its learner entry removed again); or
    /// [`ProposeError::Indeterminate`] when the leadership or `timeout` ran out after an entry
    /// was proposed (it may still commit).
    pub fn change_voters(&self, change: VoterChange, timeout: Duration) -> Proposal {
        if let Some(refused) = self.unless_leading() {
            return refused;
        }
        let shared = &self.shared;
        let mut slot = shared.voter_change.borrow_mut();
        if slot.is_some() {
            return Completer::resolved(Err(ProposeError::VoterChangeInProgress));
        }
        let (proposal, completer) = Completer::pair();
        *slot = Some((change, timeout, completer));
        drop(slot);
        shared.wake.notify_all();
        proposal
    }

    /// The leader this node knows of (`None` while there is none, or once stopped).
    pub fn leader(&self) -> Option<NodeId> {
        let status = self.shared.status.borrow();
        status.stopped.is_none().then_some(status.leader).flatten()
    }

    /// What this node reports about itself.
    pub fn status(&self) -> QuorumStatus {
        self.shared.status.borrow().clone()
    }

    /// Stops the driver at its next step: it sends nothing more, queued and in-flight
    /// proposals resolve as [`ProposeError::Stopped`]. Durable state stays as it is.
    pub fn stop(&self) {
        self.shared.stop_requested.set(true);
        self.shared.wake.notify_all();
    }
}

/// Where the voter change being carried out stands (on the leader).
enum ChangeStep {
    /// Its entry of `kind` is proposed at `index`: wait until applied.
    Proposed { kind: ChangeKind, index: u64 },
    /// The learner is in the configuration: wait until it holds every committed entry.
    CatchingUp,
}

/// The voter change the driver carries out.
struct PendingChange {
    change: VoterChange,
    /// The leader's term when it began: a new term ends it.
    term: u64,
    deadline: MonotonicTime,
    step: ChangeStep,
    /// Whether an entry was proposed (after which the outcome of a lost leadership is
    /// unknown).
    proposed: bool,
    completer: Completer,
}

/// What woke the driver.
enum Event {
    Message(NodeId, Bytes),
    Timer,
}

struct Driver<S, T, R, M> {
    shared: Rc<Shared>,
    raw: RawNode<LogCache>,
    cache: LogCache,
    storage: S,
    transport: T,
    runtime: R,
    state_machine: M,
    /// This node's raft id.
    this: u64,
    /// Proposed entries by index: the term they were proposed in, and their completion.
    in_flight: BTreeMap<u64, (u64, Completer)>,
    /// The last applied index (invariant 2).
    applied: u64,
    /// The (leader, term) last reported to the state machine.
    reported: Option<(Option<NodeId>, u64)>,
    next_tick: MonotonicTime,
    /// Sends that failed, reported to raft-rs after the `Ready` was advanced (raft-rs takes
    /// no input between `ready` and `advance`). Bounded by the messages of one `Ready`.
    unreachable: Vec<u64>,
    /// Snapshots handed to the transport (raft id, handed over), reported likewise.
    snapshots_sent: Vec<(u64, bool)>,
    /// Draws the randomized election timeouts ([`QuorumConfig::election_seed`]).
    rng: fastrand::Rng,
    /// The (term, role, leader) and timeout the last draw was made for.
    election_timeout_for: Option<((u64, StateRole, u64), usize)>,
    /// While leading: when each other voter was last heard from and last caught up (raft id
    /// → times); cleared when the leadership changes. Bounded by the voter count.
    heard: BTreeMap<u64, (Option<MonotonicTime>, Option<MonotonicTime>)>,
    /// The term `heard` is about.
    heard_term: u64,
    /// The voter change being carried out (at most one: raft-rs takes one at a time).
    voter_change: Option<PendingChange>,
}

impl<S, T, R, M> Driver<S, T, R, M>
where
    S: RaftStorage,
    T: Transport<Message = Bytes>,
    R: Runtime,
    M: StateMachine,
{
    async fn run(mut self) {
        let reason = loop {
            if let Err(reason) = self.turn().await {
                break reason;
            }
        };
        // Invariant 3: every proposal still waiting resolves.
        for (_, completer) in self.shared.queue.borrow_mut().drain(..) {
            completer.complete(Err(ProposeError::Stopped));
        }
        for (_, (_, completer)) in std::mem::take(&mut self.in_flight) {
            completer.complete(Err(ProposeError::Stopped));
        }
        if let Some((_, _, completer)) = self.shared.voter_change.borrow_mut().take() {
            completer.complete(Err(ProposeError::Stopped));
        }
        if let Some(pending) = self.voter_change.take() {
            pending.completer.complete(Err(ProposeError::Stopped));
        }
        self.shared.in_flight.set(0);
        let mut status = self.shared.status.borrow_mut();
        status.stopped = Some(reason);
        status.role = Role::Follower;
        status.leader = None;
    }

    /// Replaces raft-rs's draw of the randomized election timeout (from the thread's RNG,
    /// made whenever it resets to a term, role or leader) by a draw from `rng`, in the same
    /// range `[election_ticks, 2 × election_ticks)`. Called after every input to raft-rs.
    fn pin_election_timeout(&mut self) {
        let raft = &mut self.raw.raft;
        let key = (raft.term, raft.state, raft.leader_id);
        let current = raft.randomized_election_timeout();
        if self.election_timeout_for == Some((key, current)) {
            return;
        }
        let ticks = self.shared.config.election_ticks;
        let timeout = self.rng.usize(ticks..2 * ticks);
        raft.set_randomized_election_timeout(timeout);
        self.election_timeout_for = Some((key, timeout));
    }

    fn stop_requested(&self) -> Result<(), StopReason> {
        if self.shared.stop_requested.get() {
            Err(StopReason::Requested)
        } else {
            Ok(())
        }
    }

    async fn turn(&mut self) -> Result<(), StopReason> {
        self.stop_requested()?;
        let woken = self.shared.wake.notified();
        let idle = self.shared.queue.borrow().is_empty()
            && self.shared.voter_change.borrow().is_none()
            && !self.raw.has_ready()
            && self.runtime.now() < self.next_tick;
        let mut messages = 0;
        if idle {
            let until_tick = self
                .next_tick
                .0
                .saturating_sub(self.runtime.now().0)
                .max(Duration::from_micros(1));
            let event = {
                let recv = async {
                    let (from, frame) = self.transport.recv().await;
                    Event::Message(from, frame)
                };
                let timer = async {
                    self.runtime.sleep(until_tick).await;
                    Event::Timer
                };
                let wake = async {
                    woken.await;
                    Event::Timer
                };
                future::or(recv, future::or(timer, wake)).await
            };
            self.stop_requested()?;
            if let Event::Message(from, frame) = event {
                self.step(from, &frame);
                messages += 1;
            }
        } else {
            // Busy: let the shard's other tasks run before this turn's work.
            future::yield_now().await;
        }
        while messages < MESSAGES_PER_TURN_MAX {
            let Some((from, frame)) = future::poll_once(self.transport.recv()).await else {
                break;
            };
            self.step(from, &frame);
            messages += 1;
        }
        self.tick();
        self.propose_queued();
        self.drive_voter_change();
        self.handle_ready().await?;
        self.maybe_compact().await?;
        self.report_status();
        Ok(())
    }

    fn step(&mut self, from: NodeId, frame: &Bytes) {
        match codec::decode(self.this, from, frame) {
            // raft-rs refuses stale or unexpected messages with an error; that is its
            // normal handling of a lossy, reordering network, not a fault of this node.
            Ok(mut message) => {
                // A leader's heartbeat carries min(its commit, what it believes this voter
                // matched). After this voter lost its log (a wiped or replaced disk) that can
                // lie past its last entry, and raft-rs panics on it; such a commit is ignored
                // (the voter's committed index stays) until the leader has repaired the log
                // through rejected appends, as Raft does for any lagging follower.
                if message.get_msg_type() == MessageType::MsgHeartbeat
                    && message.commit > self.raw.raft.raft_log.last_index()
                {
                    message.commit = self.raw.raft.raft_log.committed;
                    self.shared.status.borrow_mut().commits_beyond_log += 1;
                }
                let answer = matches!(
                    message.get_msg_type(),
                    MessageType::MsgAppendResponse | MessageType::MsgHeartbeatResponse
                );
                let _ = self.raw.step(message);
                self.pin_election_timeout();
                if answer {
                    self.heard_from(from);
                }
            }
            Err(_) => self.shared.status.borrow_mut().frames_refused += 1,
        }
    }

    fn tick(&mut self) {
        let now = self.runtime.now();
        let interval = self.shared.config.tick_interval;
        // A driver delayed (a slow fsync, a starved core) catches up at most one election
        // timeout of ticks, then resumes from now.
        let mut ticks = 0;
        while now >= self.next_tick && ticks < self.shared.config.election_ticks {
            self.raw.tick();
            self.pin_election_timeout();
            self.next_tick = self.next_tick + interval;
            ticks += 1;
        }
        if now >= self.next_tick {
            self.next_tick = now + interval;
        }
    }

    fn propose_queued(&mut self) {
        loop {
            let Some((entry, completer)) = self.shared.queue.borrow_mut().pop_front() else {
                return;
            };
            if self.raw.raft.state != StateRole::Leader {
                let leader = codec::node_id(self.raw.raft.leader_id);
                completer.complete(Err(ProposeError::NotLeader { leader }));
                continue;
            }
            let before = self.raw.raft.raft_log.last_index();
            match self.raw.propose(Vec::new(), entry.to_vec()) {
                Ok(()) => {
                    let index = self.raw.raft.raft_log.last_index();
                    assert_eq!(index, before + 1, "a proposal appends one entry");
                    self.in_flight
                        .insert(index, (self.raw.raft.term, completer));
                    self.shared.in_flight.set(self.in_flight.len());
                }
                Err(_) => completer.complete(Err(ProposeError::Dropped)),
            }
        }
    }

    fn send(&mut self, messages: Vec<Message>) {
        for message in messages {
            let to = message.to;
            let is_snapshot = message.get_msg_type() == MessageType::MsgSnapshot;
            let sent = match (codec::node_id(to), codec::encode(&message)) {
                (Some(node), Ok(frame)) => self.transport.send(node, frame).is_ok(),
                // raft-rs addresses only configured voters; an unencodable message is lost.
                _ => false,
            };
            if !sent {
                self.unreachable.push(to);
            }
            if is_snapshot {
                self.snapshots_sent.push((to, sent));
            }
        }
    }

    async fn handle_ready(&mut self) -> Result<(), StopReason> {
        if !self.raw.has_ready() {
            return Ok(());
        }
        let mut ready = self.raw.ready();
        // The leader's messages need not wait for its own write (raft-rs puts them here only
        // on a leader; everything a follower or candidate sends is a persisted message).
        self.send(ready.take_messages());
        let snapshot = (!ready.snapshot().is_empty()).then(|| ready.snapshot().clone());
        let entries = ready.take_entries();
        let hard_state = ready.hs().cloned();
        if snapshot.is_some() || !entries.is_empty() || hard_state.is_some() {
            let step = Persist {
                snapshot: snapshot.as_ref(),
                entries: &entries,
                hard_state: hard_state.as_ref(),
                conf_state: None,
            };
            self.storage
                .persist(step)
                .await
                .map_err(StopReason::Storage)?;
            self.cache.persisted(step);
        }
        if let Some(snapshot) = snapshot {
            self.restore(snapshot)?;
        }
        self.apply(ready.take_committed_entries());
        // Invariant 1: what acknowledges the entries, the vote or the snapshot leaves only now.
        self.send(ready.take_persisted_messages());
        let mut light = self.raw.advance(ready);
        if let Some(commit) = light.commit_index() {
            self.cache.set_commit(commit);
        }
        self.send(light.take_messages());
        self.apply(light.take_committed_entries());
        self.raw.advance_apply();
        for to in self.unreachable.drain(..) {
            self.raw.report_unreachable(to);
        }
        for (to, handed_over) in self.snapshots_sent.drain(..) {
            // A snapshot handed to the transport counts as delivered: if it was lost, the
            // follower's next append response sends the leader back to probing.
            let status = if handed_over {
                SnapshotStatus::Finish
            } else {
                SnapshotStatus::Failure
            };
            self.raw.report_snapshot(to, status);
        }
        Ok(())
    }

    fn restore(&mut self, snapshot: Snapshot) -> Result<(), StopReason> {
        let index = snapshot.get_metadata().index;
        self.state_machine
            .restore(RaftIndex(index), snapshot.data.clone())
            .map_err(|e| StopReason::Restore {
                index,
                reason: e.to_string(),
            })?;
        self.applied = index;
        // Proposals at or below the snapshot: the log that held them is gone.
        let later = self.in_flight.split_off(&(index + 1));
        for (_, (_, completer)) in std::mem::replace(&mut self.in_flight, later) {
            completer.complete(Err(ProposeError::Indeterminate));
        }
        self.shared.in_flight.set(self.in_flight.len());
        Ok(())
    }

    fn apply(&mut self, entries: Vec<Entry>) {
        for entry in entries {
            // Invariant 2: raft-rs hands committed entries over in order, once.
            assert_eq!(entry.index, self.applied + 1, "committed entries in order");
            self.applied = entry.index;
            if entry.get_entry_type() == EntryType::EntryNormal && !entry.data.is_empty() {
                self.state_machine
                    .apply(RaftIndex(entry.index), &entry.data);
            } else if let Some((cc, node, kind, endpoint)) = membership::decode(&entry) {
                self.apply_conf_change(entry.index, &cc, node, kind, endpoint);
            }
            let later = self.in_flight.split_off(&(entry.index + 1));
            for (index, (term, completer)) in std::mem::replace(&mut self.in_flight, later) {
                let outcome = if index == entry.index && term == entry.term {
                    Ok(Committed {
                        index: RaftIndex(index),
                        term: RaftTerm(term),
                    })
                } else {
                    Err(ProposeError::Dropped)
                };
                completer.complete(outcome);
            }
            self.shared.in_flight.set(self.in_flight.len());
        }
    }

    /// Compacts after [`QuorumConfig::snapshot_after_entries`] applied entries, and once at
    /// the first applied entry: a log that starts at index 1 would let a node that joins with
    /// an empty configuration replay entries without the configuration the first voters were
    /// bootstrapped with (it is in no entry), so every log starts after a snapshot that carries
    /// it, and a joining node catches up from one.
    async fn maybe_compact(&mut self) -> Result<(), StopReason> {
        let snapshot_index = self.cache.snapshot_index();
        let first = snapshot_index == 0 && self.applied > 0;
        // raft-rs on a node refuses a snapshot whose configuration does not name it (one
        // taken before it was added): the cache asks for a newer one.
        let wanted = self.cache.take_snapshot_wanted() && self.applied > snapshot_index;
        if !first
            && !wanted
            && self.applied < snapshot_index + self.shared.config.snapshot_after_entries
        {
            return Ok(());
        }
        self.compact().await
    }

    /// Snapshots the state machine at the applied index and compacts the log up to it.
    async fn compact(&mut self) -> Result<(), StopReason> {
        let data = self.state_machine.snapshot();
        if data.len() > codec::SNAPSHOT_BYTES_MAX {
            return Err(StopReason::SnapshotTooLarge {
                snapshot_bytes: data.len(),
            });
        }
        // The applied entry is in the log: applied ≤ persisted, and only applied entries
        // are ever compacted away.
        let Some(term) = self.cache.term_of(self.applied) else {
            unreachable!("applied index {} is in the log", self.applied);
        };
        let mut snapshot = Snapshot {
            data,
            ..Snapshot::default()
        };
        let metadata = snapshot.mut_metadata();
        metadata.index = self.applied;
        metadata.term = term;
        metadata.set_conf_state(self.cache.conf_state());
        self.storage
            .compact(&snapshot)
            .await
            .map_err(StopReason::Storage)?;
        self.cache.compacted(&snapshot);
        Ok(())
    }

    /// Takes a requested voter change, or moves the one in progress on (see
    /// [`QuorumNode::change_voters`]).
    fn drive_voter_change(&mut self) {
        if self.voter_change.is_none() {
            let Some((change, timeout, completer)) = self.shared.voter_change.borrow_mut().take()
            else {
                return;
            };
            let raft = &self.raw.raft;
            if raft.state != StateRole::Leader {
                let leader = codec::node_id(raft.leader_id);
                completer.complete(Err(ProposeError::NotLeader { leader }));
                return;
            }
            // A new leader's first entry counts as a configuration change until applied (and
            // a leader that applied nothing has not compacted its log yet: `maybe_compact`).
            if raft.has_pending_conf() || self.applied == 0 {
                completer.complete(Err(ProposeError::VoterChangeInProgress));
                return;
            }
            let first = match membership::plan(&change, &raft.prs().conf().to_conf_state()) {
                Ok(first) => first,
                Err(refusal) => {
                    completer.complete(Err(refusal.into()));
                    return;
                }
            };
            let mut pending = PendingChange {
                term: raft.term,
                deadline: self.runtime.now() + timeout,
                step: ChangeStep::CatchingUp,
                proposed: false,
                change,
                completer,
            };
            let kind = match first {
                FirstStep::CatchUp => None,
                FirstStep::AddLearner => Some(ChangeKind::AddLearner),
                FirstStep::Remove => Some(ChangeKind::Remove),
            };
            if let Some(kind) = kind {
                match self.propose_change(kind, &pending.change) {
                    Ok(index) => {
                        pending.step = ChangeStep::Proposed { kind, index };
                        pending.proposed = true;
                    }
                    Err(e) => {
                        pending.completer.complete(Err(e));
                        return;
                    }
                }
            }
            self.voter_change = Some(pending);
        }
        self.advance_voter_change();
    }

    /// Proposes the configuration entry `kind` of `change`'s node; returns its index.
    fn propose_change(
        &mut self,
        kind: ChangeKind,
        change: &VoterChange,
    ) -> Result<u64, ProposeError> {
        let node = change.node();
        let cc = membership::conf_change(kind, node).ok_or(ProposeError::NotAMember { node })?;
        let context = match change {
            VoterChange::Add { endpoint, .. } if kind != ChangeKind::Remove => endpoint.to_vec(),
            _ => Vec::new(),
        };
        let before = self.raw.raft.raft_log.last_index();
        self.raw
            .propose_conf_change(context, cc)
            .map_err(|_| ProposeError::Dropped)?;
        let index = self.raw.raft.raft_log.last_index();
        assert_eq!(index, before + 1, "a proposal appends one entry");
        Ok(index)
    }

    /// Moves the voter change in progress on by what was applied, the learner's progress and
    /// the clock; resolves it when it is done or failed.
    fn advance_voter_change(&mut self) {
        let Some(mut pending) = self.voter_change.take() else {
            return;
        };
        let raft = &self.raw.raft;
        let now = self.runtime.now();
        let node = pending.change.node();
        let id = codec::raft_id(node).unwrap_or(0);
        let leading = raft.state == StateRole::Leader && raft.term == pending.term;
        let lost = || {
            Err(if pending.proposed {
                ProposeError::Indeterminate
            } else {
                ProposeError::NotLeader {
                    leader: codec::node_id(raft.leader_id),
                }
            })
        };
        let outcome = match pending.step {
            // Decided by the configuration once the entry's index is applied, even on a leader
            // that has stepped down since (it does when it removed itself).
            ChangeStep::Proposed { kind, index } if self.applied >= index => {
                let conf = raft.prs().conf().to_conf_state();
                let in_effect = match kind {
                    ChangeKind::AddLearner => conf.learners.contains(&id),
                    ChangeKind::AddVoter => conf.voters.contains(&id),
                    ChangeKind::Remove => {
                        !conf.voters.contains(&id) && !conf.learners.contains(&id)
                    }
                };
                if !in_effect {
                    // raft-rs turned it into an empty entry, or another leader's entry took
                    // its index.
                    Some(Err(ProposeError::Dropped))
                } else if kind != ChangeKind::AddLearner {
                    Some(Ok(Committed {
                        index: RaftIndex(index),
                        term: RaftTerm(pending.term),
                    }))
                } else if leading {
                    pending.step = ChangeStep::CatchingUp;
                    None
                } else {
                    Some(lost())
                }
            }
            _ if !leading => Some(lost()),
            ChangeStep::Proposed { .. } if now >= pending.deadline => {
                Some(Err(ProposeError::Indeterminate))
            }
            ChangeStep::Proposed { .. } => None,
            ChangeStep::CatchingUp => {
                let matched = raft.prs().get(id).map_or(0, |p| p.matched);
                if matched >= raft.raft_log.committed {
                    match self.propose_change(ChangeKind::AddVoter, &pending.change) {
                        Ok(index) => {
                            pending.step = ChangeStep::Proposed {
                                kind: ChangeKind::AddVoter,
                                index,
                            };
                            pending.proposed = true;
                            None
                        }
                        Err(e) => Some(Err(e)),
                    }
                } else if now >= pending.deadline {
                    // The learner is dropped again; if this removal is lost, the next add
                    // of the node resumes from its catch-up.
                    let _ = self.propose_change(ChangeKind::Remove, &pending.change);
                    Some(Err(ProposeError::NotCaughtUp { node }))
                } else {
                    None
                }
            }
        };
        match outcome {
            Some(outcome) => pending.completer.complete(outcome),
            None => self.voter_change = Some(pending),
        }
    }

    /// Applies the committed configuration entry at `index` (one change of `node`, with the
    /// added node's `endpoint`): to
    /// raft-rs, to the cache (so that the next snapshot carries it) and to the state machine.
    /// A change raft-rs refuses is skipped, alike on every member (all apply the same entries
    /// to the same configuration); none is proposed that could be.
    fn apply_conf_change(
        &mut self,
        index: u64,
        cc: &ConfChangeV2,
        node: NodeId,
        kind: ChangeKind,
        endpoint: Bytes,
    ) {
        let Ok(conf) = self.raw.apply_conf_change(cc) else {
            self.shared.status.borrow_mut().conf_changes_refused += 1;
            return;
        };
        self.cache.set_conf_state(conf.clone());
        let change = AppliedVoterChange {
            node,
            kind,
            endpoint,
            voters: membership::node_ids(&conf.voters),
            learners: membership::node_ids(&conf.learners),
        };
        self.state_machine.voters_changed(RaftIndex(index), &change);
        self.step_down_if_removed();
    }

    /// A leader whose removal was just applied steps down at once, before raft-rs takes any
    /// other input: raft-rs 0.7 leaves it leading a configuration it is not in, and then
    /// panics on the next append answer or persisted entry (its own progress is gone). It asks
    /// the most caught-up remaining voter to campaign now (Raft's `TimeoutNow`, as a leadership
    /// transfer sends) so that the quorum does not wait out an election timeout.
    fn step_down_if_removed(&mut self) {
        let raft = &self.raw.raft;
        if raft.state != StateRole::Leader || raft.prs().conf().voters().contains(self.this) {
            return;
        }
        let successor = raft
            .prs()
            .iter()
            .filter(|(id, _)| **id != self.this && raft.prs().conf().voters().contains(**id))
            .map(|(&id, p)| (p.matched, id))
            .max();
        let term = raft.term;
        if let Some((_, to)) = successor {
            let mut timeout_now = Message::default();
            timeout_now.set_msg_type(MessageType::MsgTimeoutNow);
            timeout_now.from = self.this;
            timeout_now.to = to;
            timeout_now.term = term;
            self.send(vec![timeout_now]);
        }
        self.raw.raft.become_follower(term, raft::INVALID_ID);
        self.pin_election_timeout();
    }

    /// While leading, notes that voter `from` answered now, and whether it has caught up.
    fn heard_from(&mut self, from: NodeId) {
        let raft = &self.raw.raft;
        if raft.state != StateRole::Leader {
            return;
        }
        let Some(id) = codec::raft_id(from) else {
            return;
        };
        let Some(progress) = raft.prs().get(id) else {
            return;
        };
        let now = self.runtime.now();
        let caught_up = progress.matched >= raft.raft_log.last_index();
        self.forget_heard_of_other_terms();
        let entry = self.heard.entry(id).or_default();
        entry.0 = Some(now);
        if caught_up {
            entry.1 = Some(now);
        }
    }

    /// Clears what was heard when this node no longer leads in the term it was heard in.
    fn forget_heard_of_other_terms(&mut self) {
        let raft = &self.raw.raft;
        if raft.state != StateRole::Leader || raft.term != self.heard_term {
            self.heard.clear();
            self.heard_term = raft.term;
        }
    }

    /// Every voter's and every learner's progress while this node leads (empty otherwise).
    fn member_progress(&mut self) -> (Vec<VoterProgress>, Vec<VoterProgress>) {
        self.forget_heard_of_other_terms();
        let raft = &self.raw.raft;
        if raft.state != StateRole::Leader {
            return (Vec::new(), Vec::new());
        }
        let now = self.runtime.now();
        let learners = raft.prs().conf().learners();
        let (mut voters, mut learning) = (Vec::new(), Vec::new());
        for (&id, progress) in raft.prs().iter() {
            let Some(node) = codec::node_id(id) else {
                continue;
            };
            let (last_fetch, last_caught_up) = if id == self.this {
                (Some(now), Some(now))
            } else {
                self.heard.get(&id).copied().unwrap_or_default()
            };
            let log_end = if id == self.this {
                raft.raft_log.last_index()
            } else {
                progress.matched
            };
            let entry = VoterProgress {
                node,
                log_end: RaftIndex(log_end),
                last_fetch,
                last_caught_up,
            };
            if learners.contains(&id) {
                learning.push(entry);
            } else {
                voters.push(entry);
            }
        }
        voters.sort_by_key(|v| v.node);
        learning.sort_by_key(|v| v.node);
        (voters, learning)
    }

    fn report_status(&mut self) {
        let (voters, learners) = self.member_progress();
        let raft = &self.raw.raft;
        let conf = raft.prs().conf().to_conf_state();
        let leader = codec::node_id(raft.leader_id);
        let term = raft.term;
        let role = match raft.state {
            StateRole::Follower => Role::Follower,
            StateRole::PreCandidate => Role::PreCandidate,
            StateRole::Candidate => Role::Candidate,
            StateRole::Leader => Role::Leader,
        };
        {
            let mut status = self.shared.status.borrow_mut();
            status.role = role;
            status.leader = leader;
            status.term = RaftTerm(term);
            status.commit_index = RaftIndex(raft.raft_log.committed);
            status.commit_term = RaftTerm(raft.raft_log.term(raft.raft_log.committed).unwrap_or(0));
            status.applied_index = RaftIndex(self.applied);
            status.log_end = RaftIndex(raft.raft_log.last_index());
            status.voters = voters;
            status.learners = learners;
            status.voter_set = membership::node_ids(&conf.voters);
            status.learner_set = membership::node_ids(&conf.learners);
        }
        if self.reported != Some((leader, term)) {
            self.reported = Some((leader, term));
            self.state_machine.leader_changed(leader, RaftTerm(term));
        }
    }
}
