//! One consumer group's membership state machine, as Kafka's classic group coordinator runs it
//! (`GroupMetadata` / `GroupCoordinator`, KIP-62, KIP-345, KIP-394): states Empty,
//! PreparingRebalance, CompletingRebalance, Stable and Dead; a generation per completed
//! rebalance; the leader member computes the assignment and hands it over in SyncGroup.
//!
//! Pure logic: no I/O and no clock of its own (`now` is passed in), so it is tested directly.
//! JoinGroup and SyncGroup answers that must wait for other members are parked as oneshot
//! senders inside the member; whatever must be made durable (the group's membership record)
//! is queued in [`Group::take_to_persist`] for the coordinator to append.

use super::error::GroupError;
use super::offsets_log::{CommittedOffset, StoredGroup, StoredMember};
use super::txn_offsets::PendingTxnOffsets;
use bytes::Bytes;
use futures_channel::oneshot;
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

/// Longest client id or `group.instance.id` a generated member id starts with, in bytes.
const MEMBER_ID_PREFIX_MAX_BYTES: usize = 255;

/// Kafka's group states (the names DescribeGroups and ListGroups report).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl GroupState {
    /// The name Kafka reports.
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}

/// Broker settings the state machine obeys.
#[derive(Clone, Copy, Debug)]
pub struct GroupConfig {
    /// `group.min.session.timeout.ms` (Kafka default 6000).
    pub min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms` (Kafka default 1800000).
    pub max_session_timeout_ms: i32,
    /// `group.initial.rebalance.delay.ms` (Kafka default 3000): how long the first rebalance
    /// of an empty group waits for more members, extended by each newcomer up to the
    /// rebalance timeout.
    pub initial_rebalance_delay_ms: i32,
    /// `offsets.retention.minutes` in ms (Kafka default 7 days): see [`super::expiry`].
    pub offsets_retention_ms: i64,
    /// `offsets.retention.check.interval.ms` (Kafka default 600000): how often offsets expire.
    pub offsets_retention_check_interval_ms: u64,
}

/// A JoinGroup, whatever its version.
#[derive(Clone, Debug)]
pub struct JoinParams {
    /// Empty for a member joining for the first time.
    pub member_id: String,
    /// `group.instance.id` (KIP-345, v5+).
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    /// v0 has none: the session timeout stands in.
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    /// (assignor name, member metadata), in the member's order of preference.
    pub protocols: Vec<(String, Bytes)>,
    /// v4+ (KIP-394): a dynamic member's first join gets `MEMBER_ID_REQUIRED` and an id.
    pub require_known_member_id: bool,
    /// v9+ (KIP-814): the answer can tell a rejoined static leader to skip the assignment.
    pub supports_skip_assignment: bool,
}

/// One member as the leader's JoinGroup answer lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinedMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    /// The member's metadata for the chosen protocol.
    pub metadata: Bytes,
}

/// The JoinGroup answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinResult {
    /// `None`: joined.
    pub error: Option<GroupError>,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub member_id: String,
    /// Only the leader gets the members.
    pub members: Vec<JoinedMember>,
    /// v9 (KIP-814): a static leader that rejoined a stable group must not reassign.
    pub skip_assignment: bool,
}

impl JoinResult {
    /// A refusal with `error`, echoing `member_id`.
    pub fn error(error: GroupError, member_id: &str) -> JoinResult {
        JoinResult {
            error: Some(error),
            generation: -1,
            protocol_type: None,
            protocol_name: None,
            leader: String::new(),
            member_id: member_id.to_string(),
            members: Vec::new(),
            skip_assignment: false,
        }
    }
}

/// The SyncGroup answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyncResult {
    /// `None`: the assignment is given.
    pub error: Option<GroupError>,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

impl SyncResult {
    /// A refusal with `error`.
    pub fn error(error: GroupError) -> SyncResult {
        SyncResult {
            error: Some(error),
            protocol_type: None,
            protocol_name: None,
            assignment: Bytes::new(),
        }
    }
}

/// A SyncGroup, whatever its version.
#[derive(Clone, Debug)]
pub struct SyncParams {
    pub generation: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    /// v5+: must match the group's when given.
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    /// The leader's assignment: (member id, assignment bytes).
    pub assignments: Vec<(String, Bytes)>,
}

/// What a JoinGroup or SyncGroup gets now.
pub enum Answer<T> {
    /// Answered at once.
    Now(T),
    /// Answered when the rebalance gets there.
    Later(oneshot::Receiver<T>),
}

/// What a SyncGroup does.
pub enum SyncOutcome {
    Answer(Answer<SyncResult>),
    /// The leader's assignment: append `record`, then call [`Group::finish_sync`] with
    /// `generation` and the result; the leader's own answer waits in `answer`.
    Persist {
        generation: i32,
        record: StoredGroup,
        answer: oneshot::Receiver<SyncResult>,
    },
}

/// One group member.
pub struct Member {
    pub id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout: Duration,
    pub rebalance_timeout: Duration,
    pub protocols: Vec<(String, Bytes)>,
    pub assignment: Bytes,
    awaiting_join: Option<oneshot::Sender<JoinResult>>,
    awaiting_sync: Option<oneshot::Sender<SyncResult>>,
    /// The member leaves the group when no heartbeat, join or sync renews this.
    session_deadline: Instant,
    /// Order of arrival: the first member to join leads.
    joined_seq: u64,
}

impl Member {
    fn new(id: String, p: &JoinParams, now: Instant, joined_seq: u64) -> Member {
        let session_timeout = millis(p.session_timeout_ms);
        Member {
            id,
            group_instance_id: p.group_instance_id.clone(),
            client_id: p.client_id.clone(),
            client_host: p.client_host.clone(),
            session_timeout,
            rebalance_timeout: millis(p.rebalance_timeout_ms),
            protocols: p.protocols.clone(),
            assignment: Bytes::new(),
            awaiting_join: None,
            awaiting_sync: None,
            session_deadline: now + session_timeout,
            joined_seq,
        }
    }

    fn update(&mut self, p: &JoinParams) {
        self.client_id.clone_from(&p.client_id);
        self.client_host.clone_from(&p.client_host);
        self.session_timeout = millis(p.session_timeout_ms);
        self.rebalance_timeout = millis(p.rebalance_timeout_ms);
        self.protocols.clone_from(&p.protocols);
    }

    fn metadata_for(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }

    fn renew_session(&mut self, now: Instant) {
        self.session_deadline = now + self.session_timeout;
    }
}

fn millis(ms: i32) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// The first rebalance of an empty group waits `group.initial.rebalance.delay.ms` for more
/// members, again while newcomers keep arriving, within the rebalance timeout.
struct InitialDelay {
    delay: Duration,
    remaining: Duration,
    new_member_added: bool,
}

/// One consumer group and its committed offsets.
pub struct Group {
    pub id: String,
    state: GroupState,
    /// When the group entered `state`, ms since the epoch (Kafka's `currentStateTimestamp`:
    /// an Empty group's offsets expire `offsets.retention.minutes` after it).
    state_timestamp_ms: i64,
    /// Invariant: only grows on a group instance (bumped by one per completed join, asserted
    /// in [`Group::complete_join`]; queued records in [`Group::take_to_persist`]).
    generation: i32,
    protocol_type: Option<String>,
    protocol_name: Option<String>,
    /// Invariant: in CompletingRebalance the leader is a member — [`Group::complete_join`]
    /// picks it among the members that rejoined, a replaced static leader hands it to its new
    /// id, and every removal leaves CompletingRebalance (asserted where SyncGroup and a
    /// repeated JoinGroup read it, [`Group::assert_leader_is_member`]). A restored group's
    /// leader is disk input and is not asserted until a join of ours sets it.
    leader: Option<String>,
    members: BTreeMap<String, Member>,
    /// Ids handed out with `MEMBER_ID_REQUIRED`, until their join or their session timeout.
    pending_members: HashMap<String, Instant>,
    /// `group.instance.id` → member id.
    static_members: HashMap<String, String>,
    rebalance_deadline: Option<Instant>,
    initial_delay: Option<InitialDelay>,
    next_seq: u64,
    /// Committed offsets by (topic, partition).
    pub offsets: BTreeMap<(String, i32), CommittedOffset>,
    /// OffsetCommits accepted and still being appended (the group is not vacant meanwhile).
    pub commits_in_flight: usize,
    /// Transactional offset commits whose transaction has not ended (TxnOffsetCommit).
    pub pending_txn: PendingTxnOffsets,
    to_persist: Vec<StoredGroup>,
}

impl Group {
    /// A new group, Empty, generation 0.
    pub fn new(id: &str) -> Group {
        Group {
            id: id.to_string(),
            state: GroupState::Empty,
            state_timestamp_ms: epoch_ms(),
            generation: 0,
            protocol_type: None,
            protocol_name: None,
            leader: None,
            members: BTreeMap::new(),
            pending_members: HashMap::new(),
            static_members: HashMap::new(),
            rebalance_deadline: None,
            initial_delay: None,
            next_seq: 0,
            offsets: BTreeMap::new(),
            commits_in_flight: 0,
            pending_txn: PendingTxnOffsets::default(),
            to_persist: Vec::new(),
        }
    }

    /// The group as its stored metadata record left it (on load): Stable with its members,
    /// whose sessions start now, or Empty.
    ///
    /// No assertion on the generation or the leader here: `stored` is disk input (a replay
    /// builds its groups apart from the live ones, so there is no generation in memory to
    /// compare with; a later record in the log simply wins).
    pub fn restore(&mut self, stored: StoredGroup, now: Instant) {
        self.generation = stored.generation;
        self.protocol_type = Some(stored.protocol_type).filter(|t| !t.is_empty());
        self.protocol_name = stored.protocol.clone();
        self.leader = stored.leader;
        self.members.clear();
        self.static_members.clear();
        self.pending_members.clear();
        for (seq, m) in stored.members.into_iter().enumerate() {
            let protocol = stored.protocol.clone().unwrap_or_default();
            let session_timeout = millis(m.session_timeout_ms);
            if let Some(instance) = &m.group_instance_id {
                self.static_members
                    .insert(instance.clone(), m.member_id.clone());
            }
            self.members.insert(
                m.member_id.clone(),
                Member {
                    id: m.member_id,
                    group_instance_id: m.group_instance_id,
                    client_id: m.client_id,
                    client_host: m.client_host,
                    session_timeout,
                    rebalance_timeout: millis(m.rebalance_timeout_ms),
                    protocols: vec![(protocol, m.subscription)],
                    assignment: m.assignment,
                    awaiting_join: None,
                    awaiting_sync: None,
                    session_deadline: now + session_timeout,
                    joined_seq: seq as u64,
                },
            );
        }
        self.next_seq = self.members.len() as u64;
        self.state = if self.members.is_empty() {
            GroupState::Empty
        } else {
            GroupState::Stable
        };
        self.state_timestamp_ms = stored.current_state_timestamp_ms;
    }

    pub fn state(&self) -> GroupState {
        self.state
    }

    #[cfg(test)]
    pub fn generation(&self) -> i32 {
        self.generation
    }

    #[cfg(test)]
    pub fn leader(&self) -> Option<&str> {
        self.leader.as_deref()
    }

    pub fn protocol_type(&self) -> Option<&str> {
        self.protocol_type.as_deref()
    }

    pub fn protocol_name(&self) -> Option<&str> {
        self.protocol_name.as_deref()
    }

    /// Members in order of arrival.
    pub fn members(&self) -> Vec<&Member> {
        let mut members: Vec<&Member> = self.members.values().collect();
        members.sort_by_key(|m| m.joined_seq);
        members
    }

    /// Whether the group has no members (nor members being admitted).
    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.pending_members.is_empty()
    }

    /// Membership records the coordinator must append, oldest first.
    pub fn take_to_persist(&mut self) -> Vec<StoredGroup> {
        let pending = std::mem::take(&mut self.to_persist);
        assert!(
            pending
                .windows(2)
                .all(|w| w[0].generation <= w[1].generation),
            "a group's generation only grows: its queued records are in generation order"
        );
        pending
    }

    /// Queues the group's current membership record for the coordinator to append.
    fn queue_persist(&mut self) {
        let record = self.stored();
        assert!(
            self.to_persist
                .last()
                .is_none_or(|last| last.generation <= record.generation),
            "a group's generation only grows: a queued record never goes back"
        );
        self.to_persist.push(record);
    }

    /// Asserts the invariant on [`Group::leader`] in CompletingRebalance: the group has a
    /// leader and it is one of its members.
    fn assert_leader_is_member(&self) {
        assert_eq!(self.state, GroupState::CompletingRebalance);
        let leader = self
            .leader
            .as_ref()
            .expect("a CompletingRebalance group has a leader");
        assert!(
            self.members.contains_key(leader),
            "a CompletingRebalance group's leader is among its members"
        );
    }

    /// Marks the group deleted (DeleteGroups): it stays Dead until dropped.
    pub fn mark_dead(&mut self) {
        self.enter(GroupState::Dead);
    }

    /// Moves the group to `state`, stamping when it did (a move to the same state keeps the
    /// first stamp, as Kafka's `transitionTo` is only called on a change).
    fn enter(&mut self, state: GroupState) {
        if self.state != state {
            self.state = state;
            self.state_timestamp_ms = epoch_ms();
        }
    }

    /// When the group entered its current state, ms since the epoch.
    pub fn state_timestamp_ms(&self) -> i64 {
        self.state_timestamp_ms
    }

    /// The record of the group's current membership.
    pub fn stored(&self) -> StoredGroup {
        let protocol = self.protocol_name.clone().unwrap_or_default();
        StoredGroup {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation,
            protocol: self.protocol_name.clone(),
            leader: self.leader.clone(),
            current_state_timestamp_ms: self.state_timestamp_ms,
            members: self
                .members()
                .into_iter()
                .map(|m| StoredMember {
                    member_id: m.id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: duration_ms(m.rebalance_timeout),
                    session_timeout_ms: duration_ms(m.session_timeout),
                    subscription: m.metadata_for(&protocol),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        }
    }

    /// The member's metadata for the chosen protocol (DescribeGroups).
    pub fn member_metadata(&self, member: &Member) -> Bytes {
        member.metadata_for(self.protocol_name.as_deref().unwrap_or_default())
    }

    /// Topics the members subscribe to, when the group uses the consumer protocol
    /// (OffsetDelete refuses to delete their offsets, KIP-496).
    pub fn subscribed_topics(&self) -> Vec<String> {
        if self.protocol_type.as_deref() != Some("consumer") {
            return Vec::new();
        }
        let protocol = self.protocol_name.clone().unwrap_or_default();
        let mut topics: Vec<String> = self
            .members
            .values()
            .flat_map(|m| consumer_subscription_topics(&m.metadata_for(&protocol)))
            .collect();
        topics.sort();
        topics.dedup();
        topics
    }

    // ---- JoinGroup -----------------------------------------------------------------------

    /// Handles a JoinGroup.
    pub fn join(&mut self, p: JoinParams, now: Instant, cfg: &GroupConfig) -> Answer<JoinResult> {
        let reply = |e: GroupError| Answer::Now(JoinResult::error(e, &p.member_id));
        if self.state == GroupState::Dead {
            return reply(GroupError::CoordinatorNotAvailable);
        }
        if p.session_timeout_ms < cfg.min_session_timeout_ms
            || p.session_timeout_ms > cfg.max_session_timeout_ms
        {
            return reply(GroupError::InvalidSessionTimeout);
        }
        if p.protocol_type.is_empty() || p.protocols.is_empty() || !self.supports(&p) {
            return reply(GroupError::InconsistentGroupProtocol);
        }
        if p.member_id.is_empty() {
            self.join_new_member(p, now, cfg)
        } else {
            self.join_known_member(p, now, cfg)
        }
    }

    /// Whether a member with `p`'s protocols can join: same protocol type, and some assignor
    /// every member supports.
    fn supports(&self, p: &JoinParams) -> bool {
        if self.members.is_empty() {
            return true;
        }
        if self.protocol_type.as_deref() != Some(p.protocol_type.as_str()) {
            return false;
        }
        let others: Vec<&Member> = self
            .members
            .values()
            .filter(|m| m.id != p.member_id)
            .collect();
        p.protocols.iter().any(|(name, _)| {
            others
                .iter()
                .all(|m| m.protocols.iter().any(|(n, _)| n == name))
        })
    }

    fn join_new_member(
        &mut self,
        p: JoinParams,
        now: Instant,
        cfg: &GroupConfig,
    ) -> Answer<JoinResult> {
        let prefix = p.group_instance_id.as_deref().unwrap_or(&p.client_id);
        // Member ids are stored as Kafka strings (at most 32767 bytes): keep the prefix short.
        let cut = (0..=prefix.len().min(MEMBER_ID_PREFIX_MAX_BYTES))
            .rev()
            .find(|&i| prefix.is_char_boundary(i))
            .unwrap_or(0);
        let prefix = &prefix[..cut];
        let new_id = format!("{prefix}-{}", uuid::Uuid::new_v4());
        if let Some(instance) = p.group_instance_id.clone() {
            if let Some(old_id) = self.static_members.get(&instance).cloned() {
                return self.replace_static_member(&old_id, new_id, p, now, cfg);
            }
            self.static_members.insert(instance, new_id.clone());
        } else if p.require_known_member_id {
            // KIP-394: the member must come back with this id before it counts.
            let deadline = now + millis(p.session_timeout_ms);
            self.pending_members.insert(new_id.clone(), deadline);
            return Answer::Now(JoinResult::error(GroupError::MemberIdRequired, &new_id));
        }
        self.add_member_and_rebalance(new_id, &p, now, cfg)
    }

    /// KIP-345: a static member that comes back (new member id, same `group.instance.id`)
    /// takes its predecessor's place and assignment. In a Stable group whose protocols it
    /// still matches, no rebalance happens.
    fn replace_static_member(
        &mut self,
        old_id: &str,
        new_id: String,
        p: JoinParams,
        now: Instant,
        cfg: &GroupConfig,
    ) -> Answer<JoinResult> {
        let Some(mut old) = self.members.remove(old_id) else {
            // The map said it was here; treat it as a new static member.
            if let Some(instance) = &p.group_instance_id {
                self.static_members.insert(instance.clone(), new_id.clone());
            }
            return self.add_member_and_rebalance(new_id, &p, now, cfg);
        };
        if let Some(tx) = old.awaiting_join.take() {
            let _ = tx.send(JoinResult::error(GroupError::FencedInstanceId, old_id));
        }
        if let Some(tx) = old.awaiting_sync.take() {
            let _ = tx.send(SyncResult::error(GroupError::FencedInstanceId));
        }
        // As Kafka: no rebalance while the group's chosen assignor stays available to the
        // member (its subscription bytes may differ, e.g. no owned partitions after a restart).
        let unchanged = self
            .protocol_name
            .as_ref()
            .is_some_and(|chosen| p.protocols.iter().any(|(name, _)| name == chosen));
        let mut member = Member::new(new_id.clone(), &p, now, old.joined_seq);
        member.assignment = old.assignment;
        if let Some(instance) = &p.group_instance_id {
            self.static_members.insert(instance.clone(), new_id.clone());
        }
        if self.leader.as_deref() == Some(old_id) {
            self.leader = Some(new_id.clone());
        }
        self.members.insert(new_id.clone(), member);
        assert!(
            self.leader.as_deref() != Some(old_id),
            "a replaced static member is not the leader any more"
        );
        assert!(
            self.leader.as_deref() != Some(new_id.as_str()) || self.members.contains_key(&new_id),
            "a replaced static leader's new id is among the members"
        );
        match self.state {
            GroupState::Stable if unchanged => {
                Answer::Now(self.rejoined_static_answer(old_id, &new_id, &p))
            }
            GroupState::PreparingRebalance => {
                let (tx, rx) = oneshot::channel();
                if let Some(m) = self.members.get_mut(&new_id) {
                    m.awaiting_join = Some(tx);
                }
                self.try_complete_join(now);
                Answer::Later(rx)
            }
            _ => {
                let (tx, rx) = oneshot::channel();
                if let Some(m) = self.members.get_mut(&new_id) {
                    m.awaiting_join = Some(tx);
                }
                self.prepare_rebalance(now, cfg);
                self.try_complete_join(now);
                Answer::Later(rx)
            }
        }
    }

    /// A static member that came back to a Stable group it still matches: the membership
    /// is stored again and the member gets the current generation, no rebalance.
    fn rejoined_static_answer(&mut self, old_id: &str, new_id: &str, p: &JoinParams) -> JoinResult {
        self.queue_persist();
        let is_leader = self.leader.as_deref() == Some(new_id);
        let mut answer = self.current_generation_answer(new_id, is_leader);
        if is_leader && !p.supports_skip_assignment {
            // Before KIP-814 (JoinGroup v9) a rejoined static leader cannot be told
            // to keep the assignment, so Kafka names its old id as the leader: it
            // acts as a follower and its SyncGroup gets the stored assignment.
            answer.leader = old_id.to_string();
            answer.members.clear();
            answer.skip_assignment = false;
        }
        answer
    }

    fn add_member_and_rebalance(
        &mut self,
        id: String,
        p: &JoinParams,
        now: Instant,
        cfg: &GroupConfig,
    ) -> Answer<JoinResult> {
        let (tx, rx) = oneshot::channel();
        let mut member = Member::new(id.clone(), p, now, self.next_seq);
        self.next_seq += 1;
        member.awaiting_join = Some(tx);
        if self.members.is_empty() {
            self.protocol_type = Some(p.protocol_type.clone());
        }
        self.members.insert(id, member);
        if let Some(delay) = &mut self.initial_delay {
            delay.new_member_added = true;
        }
        if self.state != GroupState::PreparingRebalance {
            self.prepare_rebalance(now, cfg);
        }
        self.try_complete_join(now);
        Answer::Later(rx)
    }

    fn join_known_member(
        &mut self,
        p: JoinParams,
        now: Instant,
        cfg: &GroupConfig,
    ) -> Answer<JoinResult> {
        let id = p.member_id.clone();
        if self.pending_members.remove(&id).is_some() {
            return self.add_member_and_rebalance(id, &p, now, cfg);
        }
        if let Some(error) = self.fenced(&id, p.group_instance_id.as_deref()) {
            return Answer::Now(JoinResult::error(error, &id));
        }
        let Some(member) = self.members.get_mut(&id) else {
            return Answer::Now(JoinResult::error(GroupError::UnknownMemberId, &id));
        };
        let unchanged = member.protocols == p.protocols;
        match self.state {
            GroupState::PreparingRebalance => {
                member.update(&p);
                let (tx, rx) = oneshot::channel();
                member.awaiting_join = Some(tx);
                self.try_complete_join(now);
                Answer::Later(rx)
            }
            GroupState::CompletingRebalance | GroupState::Stable
                if unchanged
                    && (self.state == GroupState::CompletingRebalance
                        || self.leader.as_deref() != Some(id.as_str())) =>
            {
                // The member lost our answer (or just wants its generation again).
                member.renew_session(now);
                let is_leader = self.leader.as_deref() == Some(id.as_str());
                Answer::Now(self.current_generation_answer(&id, is_leader))
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                // New protocols, or the leader asks for a rebalance (e.g. new topics matched).
                member.update(&p);
                let (tx, rx) = oneshot::channel();
                member.awaiting_join = Some(tx);
                self.prepare_rebalance(now, cfg);
                self.try_complete_join(now);
                Answer::Later(rx)
            }
            GroupState::Empty | GroupState::Dead => {
                Answer::Now(JoinResult::error(GroupError::UnknownMemberId, &id))
            }
        }
    }

    /// `FENCED_INSTANCE_ID` when `instance` belongs to another member id (KIP-345); an
    /// unknown instance is not fenced (Kafka's `isStaticMemberFenced`).
    fn fenced(&self, member_id: &str, instance: Option<&str>) -> Option<GroupError> {
        let instance = instance?;
        match self.static_members.get(instance) {
            Some(id) if id != member_id => Some(GroupError::FencedInstanceId),
            _ => None,
        }
    }

    /// `COORDINATOR_NOT_AVAILABLE` for a deleted group, `FENCED_INSTANCE_ID` for a
    /// `group.instance.id` that belongs to another member.
    fn dead_or_fenced(&self, member_id: &str, instance: Option<&str>) -> Option<GroupError> {
        if self.state == GroupState::Dead {
            return Some(GroupError::CoordinatorNotAvailable);
        }
        self.fenced(member_id, instance)
    }

    fn current_generation_answer(&self, member_id: &str, is_leader: bool) -> JoinResult {
        if self.state == GroupState::CompletingRebalance {
            self.assert_leader_is_member();
        }
        JoinResult {
            error: None,
            generation: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            leader: self.leader.clone().unwrap_or_default(),
            member_id: member_id.to_string(),
            members: if is_leader {
                self.member_list()
            } else {
                Vec::new()
            },
            // Only a static leader is told not to reassign (KIP-814); v<9 cannot say it.
            skip_assignment: is_leader && self.state == GroupState::Stable,
        }
    }

    fn member_list(&self) -> Vec<JoinedMember> {
        let protocol = self.protocol_name.clone().unwrap_or_default();
        self.members()
            .into_iter()
            .map(|m| JoinedMember {
                member_id: m.id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                metadata: m.metadata_for(&protocol),
            })
            .collect()
    }

    /// Moves to PreparingRebalance: members must rejoin within the rebalance timeout.
    fn prepare_rebalance(&mut self, now: Instant, cfg: &GroupConfig) {
        if self.state == GroupState::CompletingRebalance {
            self.reset_assignments(GroupError::RebalanceInProgress);
        }
        let from_empty = self.state == GroupState::Empty;
        self.enter(GroupState::PreparingRebalance);
        let rebalance_timeout = self
            .members
            .values()
            .map(|m| m.rebalance_timeout)
            .max()
            .unwrap_or_default();
        let delay = millis(cfg.initial_rebalance_delay_ms);
        if from_empty && !delay.is_zero() {
            self.initial_delay = Some(InitialDelay {
                delay,
                remaining: rebalance_timeout.saturating_sub(delay),
                new_member_added: false,
            });
            self.rebalance_deadline = Some(now + delay);
        } else {
            self.initial_delay = None;
            self.rebalance_deadline = Some(now + rebalance_timeout);
        }
    }

    fn reset_assignments(&mut self, error: GroupError) {
        for m in self.members.values_mut() {
            m.assignment = Bytes::new();
            if let Some(tx) = m.awaiting_sync.take() {
                let _ = tx.send(SyncResult::error(error));
            }
        }
    }

    /// Completes the join once every member has rejoined and no admitted id is outstanding
    /// (never early while the initial delay runs).
    fn try_complete_join(&mut self, now: Instant) {
        if self.state != GroupState::PreparingRebalance || self.initial_delay.is_some() {
            return;
        }
        let all_joined = self.members.values().all(|m| m.awaiting_join.is_some())
            && self.pending_members.is_empty();
        if all_joined {
            self.complete_join(now);
        }
    }

    fn complete_join(&mut self, now: Instant) {
        self.initial_delay = None;
        self.rebalance_deadline = None;
        // Dynamic members that did not rejoin in time are out; static ones keep their place
        // until their session times out (Kafka's rule).
        let missing: Vec<String> = self
            .members
            .values()
            .filter(|m| m.awaiting_join.is_none() && m.group_instance_id.is_none())
            .map(|m| m.id.clone())
            .collect();
        for id in missing {
            self.drop_member(&id);
        }
        let rejoined: Vec<String> = self
            .members()
            .into_iter()
            .filter(|m| m.awaiting_join.is_some())
            .map(|m| m.id.clone())
            .collect();
        if rejoined.is_empty() && !self.members.is_empty() {
            // Only absent static members are left: wait for them (or their session timeouts),
            // as Kafka postpones a rebalance that nobody rejoined.
            let timeout = self
                .members
                .values()
                .map(|m| m.rebalance_timeout)
                .max()
                .unwrap_or_default();
            self.rebalance_deadline = Some(now + timeout);
            return;
        }
        let previous = self.generation;
        self.generation += 1;
        assert!(
            self.generation > previous,
            "a group's generation only grows"
        );
        if self.members.is_empty() {
            self.enter(GroupState::Empty);
            self.protocol_name = None;
            self.leader = None;
            self.queue_persist();
            return;
        }
        self.protocol_name = self.select_protocol();
        // The leader must be a member that rejoined: it computes the assignment now.
        if !self.leader.as_ref().is_some_and(|l| rejoined.contains(l)) {
            self.leader = rejoined.first().cloned();
        }
        assert!(
            self.leader.as_ref().is_some_and(|l| rejoined.contains(l)),
            "a new generation's leader is a member that rejoined it"
        );
        self.enter(GroupState::CompletingRebalance);
        self.answer_rejoined(rejoined, now);
    }

    /// Sends each member that rejoined its JoinGroup answer for the new generation (the
    /// leader's lists every member) and renews its session.
    fn answer_rejoined(&mut self, rejoined: Vec<String>, now: Instant) {
        self.assert_leader_is_member();
        let leader = self.leader.clone().unwrap_or_default();
        let everyone = self.member_list();
        for id in rejoined {
            let answer = JoinResult {
                error: None,
                generation: self.generation,
                protocol_type: self.protocol_type.clone(),
                protocol_name: self.protocol_name.clone(),
                leader: leader.clone(),
                member_id: id.clone(),
                members: if id == leader {
                    everyone.clone()
                } else {
                    Vec::new()
                },
                skip_assignment: false,
            };
            if let Some(m) = self.members.get_mut(&id) {
                m.renew_session(now);
                if let Some(tx) = m.awaiting_join.take() {
                    let _ = tx.send(answer);
                }
            }
        }
    }

    /// Kafka's vote: among assignors every member supports, each member votes for the first
    /// in its own preference order; most votes wins (ties: the earliest member's choice).
    fn select_protocol(&self) -> Option<String> {
        let members = self.members();
        let first = members.first()?;
        let candidates: Vec<&String> = first
            .protocols
            .iter()
            .map(|(n, _)| n)
            .filter(|n| {
                members
                    .iter()
                    .all(|m| m.protocols.iter().any(|(x, _)| x == *n))
            })
            .collect();
        let mut votes: Vec<(&String, usize)> = candidates.iter().map(|c| (*c, 0)).collect();
        for m in &members {
            if let Some((name, _)) = m.protocols.iter().find(|(n, _)| candidates.contains(&n)) {
                if let Some(v) = votes.iter_mut().find(|(c, _)| *c == name) {
                    v.1 += 1;
                }
            }
        }
        let best = votes.iter().map(|(_, n)| *n).max()?;
        votes
            .into_iter()
            .find(|(_, n)| *n == best)
            .map(|(c, _)| c.clone())
    }

    /// Removes a member, answering its parked requests with `UNKNOWN_MEMBER_ID`.
    fn drop_member(&mut self, id: &str) {
        if let Some(mut m) = self.members.remove(id) {
            if let Some(tx) = m.awaiting_join.take() {
                let _ = tx.send(JoinResult::error(GroupError::UnknownMemberId, id));
            }
            if let Some(tx) = m.awaiting_sync.take() {
                let _ = tx.send(SyncResult::error(GroupError::UnknownMemberId));
            }
            if let Some(instance) = &m.group_instance_id {
                if self.static_members.get(instance).map(String::as_str) == Some(id) {
                    self.static_members.remove(instance);
                }
            }
        }
        if self.leader.as_deref() == Some(id) {
            self.leader = None;
        }
        assert!(!self.members.contains_key(id), "a dropped member is gone");
        assert!(
            self.leader.as_deref() != Some(id),
            "a dropped member is not the leader: the leader is among the members"
        );
    }

    /// Removes a member (LeaveGroup, session timeout) and rebalances the rest.
    fn remove_member_and_rebalance(&mut self, id: &str, now: Instant, cfg: &GroupConfig) {
        self.drop_member(id);
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.prepare_rebalance(now, cfg);
                self.try_complete_join(now);
            }
            GroupState::PreparingRebalance => self.try_complete_join(now),
            GroupState::Empty | GroupState::Dead => {}
        }
    }

    // ---- SyncGroup, Heartbeat, LeaveGroup -------------------------------------------------

    /// Handles a SyncGroup.
    pub fn sync(&mut self, p: SyncParams, now: Instant) -> SyncOutcome {
        let reply = |e: GroupError| SyncOutcome::Answer(Answer::Now(SyncResult::error(e)));
        if self.state == GroupState::Dead {
            return reply(GroupError::CoordinatorNotAvailable);
        }
        if let Some(error) = self.fenced(&p.member_id, p.group_instance_id.as_deref()) {
            return reply(error);
        }
        if !self.members.contains_key(&p.member_id) {
            return reply(GroupError::UnknownMemberId);
        }
        if p.generation != self.generation {
            return reply(GroupError::IllegalGeneration);
        }
        let mismatch = |given: &Option<String>, ours: &Option<String>| {
            given.is_some() && ours.is_some() && given != ours
        };
        if mismatch(&p.protocol_type, &self.protocol_type)
            || mismatch(&p.protocol_name, &self.protocol_name)
        {
            return reply(GroupError::InconsistentGroupProtocol);
        }
        match self.state {
            GroupState::Empty => reply(GroupError::UnknownMemberId),
            GroupState::PreparingRebalance => reply(GroupError::RebalanceInProgress),
            GroupState::Stable => {
                let member = &self.members[&p.member_id];
                SyncOutcome::Answer(Answer::Now(self.assignment_answer(member)))
            }
            GroupState::CompletingRebalance => {
                self.assert_leader_is_member();
                let is_leader = self.leader.as_deref() == Some(p.member_id.as_str());
                let (tx, rx) = oneshot::channel();
                if let Some(m) = self.members.get_mut(&p.member_id) {
                    m.awaiting_sync = Some(tx);
                    m.renew_session(now);
                }
                if !is_leader {
                    return SyncOutcome::Answer(Answer::Later(rx));
                }
                let assignments: HashMap<String, Bytes> = p.assignments.into_iter().collect();
                for m in self.members.values_mut() {
                    m.assignment = assignments.get(&m.id).cloned().unwrap_or_default();
                }
                SyncOutcome::Persist {
                    generation: self.generation,
                    record: self.stored(),
                    answer: rx,
                }
            }
            GroupState::Dead => reply(GroupError::CoordinatorNotAvailable),
        }
    }

    fn assignment_answer(&self, member: &Member) -> SyncResult {
        SyncResult {
            error: None,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            assignment: member.assignment.clone(),
        }
    }

    /// After the leader's assignment was appended (`Ok`) or could not be (`Err(code)`): the
    /// generation becomes Stable and every member gets its assignment, or everyone gets the
    /// error and the group rebalances. Nothing happens if the group moved on meanwhile.
    pub fn finish_sync(
        &mut self,
        generation: i32,
        result: Result<(), GroupError>,
        now: Instant,
        cfg: &GroupConfig,
    ) {
        if self.state != GroupState::CompletingRebalance || self.generation != generation {
            return;
        }
        match result {
            Ok(()) => {
                self.enter(GroupState::Stable);
                let answers: Vec<(String, SyncResult)> = self
                    .members
                    .values()
                    .map(|m| (m.id.clone(), self.assignment_answer(m)))
                    .collect();
                for (id, answer) in answers {
                    if let Some(tx) = self
                        .members
                        .get_mut(&id)
                        .and_then(|m| m.awaiting_sync.take())
                    {
                        let _ = tx.send(answer);
                    }
                }
            }
            Err(error) => {
                self.reset_assignments(error);
                self.prepare_rebalance(now, cfg);
            }
        }
    }

    /// Handles a Heartbeat: `Err` is the refusal to answer.
    pub fn heartbeat(
        &mut self,
        member_id: &str,
        instance: Option<&str>,
        generation: i32,
        now: Instant,
    ) -> Result<(), GroupError> {
        if let Some(error) = self.dead_or_fenced(member_id, instance) {
            return Err(error);
        }
        let Some(member) = self.members.get_mut(member_id) else {
            return Err(GroupError::UnknownMemberId);
        };
        if generation != self.generation {
            return Err(GroupError::IllegalGeneration);
        }
        match self.state {
            GroupState::Empty => Err(GroupError::UnknownMemberId),
            GroupState::PreparingRebalance => {
                member.renew_session(now);
                Err(GroupError::RebalanceInProgress)
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                member.renew_session(now);
                Ok(())
            }
            GroupState::Dead => Err(GroupError::CoordinatorNotAvailable),
        }
    }

    /// Handles a LeaveGroup of `(member id, group.instance.id)` pairs: a result each, in order.
    pub fn leave(
        &mut self,
        leaving: &[(String, Option<String>)],
        now: Instant,
        cfg: &GroupConfig,
    ) -> Vec<Result<(), GroupError>> {
        leaving
            .iter()
            .map(|(member_id, instance)| {
                if self.state == GroupState::Dead {
                    return Err(GroupError::CoordinatorNotAvailable);
                }
                let id = match instance {
                    Some(instance) => match self.static_members.get(instance) {
                        None => return Err(GroupError::UnknownMemberId),
                        Some(id) if !member_id.is_empty() && id != member_id => {
                            return Err(GroupError::FencedInstanceId)
                        }
                        Some(id) => id.clone(),
                    },
                    None => member_id.clone(),
                };
                if self.pending_members.remove(&id).is_some() {
                    self.try_complete_join(now);
                    return Ok(());
                }
                if !self.members.contains_key(&id) {
                    return Err(GroupError::UnknownMemberId);
                }
                self.remove_member_and_rebalance(&id, now, cfg);
                Ok(())
            })
            .collect()
    }

    /// Checks an OffsetCommit's member and generation (Kafka's rules): `Ok` when it may commit.
    /// A commit with generation < 0 into an Empty group is a "simple" commit (manual
    /// assignment, admin tools).
    pub fn check_commit(
        &mut self,
        member_id: &str,
        instance: Option<&str>,
        generation: i32,
        now: Instant,
    ) -> Result<(), GroupError> {
        if let Some(error) = self.dead_or_fenced(member_id, instance) {
            return Err(error);
        }
        if generation < 0 && self.state == GroupState::Empty {
            return Ok(());
        }
        if self.state == GroupState::CompletingRebalance {
            return Err(GroupError::RebalanceInProgress);
        }
        let Some(member) = self.members.get_mut(member_id) else {
            return Err(GroupError::UnknownMemberId);
        };
        if generation != self.generation {
            return Err(GroupError::IllegalGeneration);
        }
        member.renew_session(now);
        Ok(())
    }

    /// Checks a TxnOffsetCommit's member and generation (Kafka's `validateOffsetCommit` for a
    /// transactional commit): as [`Group::check_commit`], except that a commit without a
    /// member (no member id, instance or generation: TxnOffsetCommit before v3) is accepted
    /// whatever the state, and a group completing a rebalance accepts it too (the producer's
    /// transaction does not wait for the assignment).
    pub fn check_txn_commit(
        &mut self,
        member_id: &str,
        instance: Option<&str>,
        generation: i32,
        now: Instant,
    ) -> Result<(), GroupError> {
        if let Some(error) = self.dead_or_fenced(member_id, instance) {
            return Err(error);
        }
        let memberless = generation < 0 && member_id.is_empty() && instance.is_none();
        if (generation < 0 && self.state == GroupState::Empty) || memberless {
            return Ok(());
        }
        let Some(member) = self.members.get_mut(member_id) else {
            return Err(GroupError::UnknownMemberId);
        };
        if generation != self.generation {
            return Err(GroupError::IllegalGeneration);
        }
        member.renew_session(now);
        Ok(())
    }

    // ---- time ------------------------------------------------------------------------------

    /// Applies every deadline that passed by `now`: admitted ids and sessions that timed out,
    /// the initial delay, and the rebalance timeout.
    pub fn tick(&mut self, now: Instant, cfg: &GroupConfig) {
        let before = self.pending_members.len();
        self.pending_members.retain(|_, deadline| *deadline > now);
        if self.pending_members.len() != before {
            self.try_complete_join(now);
        }
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| {
                m.awaiting_join.is_none() && m.awaiting_sync.is_none() && m.session_deadline <= now
            })
            .map(|m| m.id.clone())
            .collect();
        for id in expired {
            tracing::info!(group = %self.id, member = %id, "member session timed out");
            self.remove_member_and_rebalance(&id, now, cfg);
        }
        if self.state != GroupState::PreparingRebalance
            || self.rebalance_deadline.is_none_or(|d| d > now)
        {
            return;
        }
        match &mut self.initial_delay {
            Some(delay) if delay.new_member_added && !delay.remaining.is_zero() => {
                let step = delay.delay.min(delay.remaining);
                delay.remaining -= step;
                delay.new_member_added = false;
                self.rebalance_deadline = Some(now + step);
            }
            _ => self.complete_join(now),
        }
    }

    /// The broker is stopping: every parked JoinGroup and SyncGroup is answered with
    /// `NOT_COORDINATOR` (as when Kafka moves a coordinator), so no client waits on a broker
    /// that is going away and the connections can drain.
    pub fn unload(&mut self) {
        for m in self.members.values_mut() {
            if let Some(tx) = m.awaiting_join.take() {
                let _ = tx.send(JoinResult::error(GroupError::NotCoordinator, &m.id));
            }
            if let Some(tx) = m.awaiting_sync.take() {
                let _ = tx.send(SyncResult::error(GroupError::NotCoordinator));
            }
        }
    }

    /// Whether [`Group::tick`] has anything to watch.
    pub fn has_deadlines(&self) -> bool {
        !self.members.is_empty()
            || !self.pending_members.is_empty()
            || self.rebalance_deadline.is_some()
    }

    /// Whether the group holds nothing worth keeping: Empty, never formed a generation, no
    /// members, admitted ids or offsets (e.g. only refused joins ever reached it).
    pub fn is_vacant(&self) -> bool {
        self.state == GroupState::Empty
            && self.generation == 0
            && self.members.is_empty()
            && self.pending_members.is_empty()
            && self.offsets.is_empty()
            && self.commits_in_flight == 0
            && self.pending_txn.is_empty()
    }
}

fn duration_ms(d: Duration) -> i32 {
    i32::try_from(d.as_millis()).unwrap_or(i32::MAX)
}

/// Milliseconds since the Unix epoch.
pub fn epoch_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The topics of a consumer-protocol subscription (Kafka `ConsumerProtocolSubscription`:
/// `version:int16, topics:[string], …`); empty when it does not parse.
fn consumer_subscription_topics(metadata: &[u8]) -> Vec<String> {
    let mut buf = metadata;
    let mut take = |n: usize| -> Option<&[u8]> {
        let (head, rest) = (buf.get(..n)?, buf.get(n..)?);
        buf = rest;
        Some(head)
    };
    let mut parse = || -> Option<Vec<String>> {
        take(2)?;
        let count = i32::from_be_bytes(take(4)?.try_into().ok()?);
        let mut topics = Vec::new();
        for _ in 0..count.max(0) {
            let len = i16::from_be_bytes(take(2)?.try_into().ok()?);
            let name = take(usize::try_from(len).ok()?)?;
            topics.push(String::from_utf8(name.to_vec()).ok()?);
        }
        Some(topics)
    };
    parse().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CFG: GroupConfig = GroupConfig {
        min_session_timeout_ms: 6000,
        max_session_timeout_ms: 1_800_000,
        initial_rebalance_delay_ms: 0,
        offsets_retention_ms: 604_800_000,
        offsets_retention_check_interval_ms: 600_000,
    };
    const SESSION: Duration = Duration::from_millis(10_000);

    fn params(member_id: &str, instance: Option<&str>, v4: bool) -> JoinParams {
        JoinParams {
            member_id: member_id.to_string(),
            group_instance_id: instance.map(str::to_string),
            client_id: "client".to_string(),
            client_host: "/127.0.0.1".to_string(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 30_000,
            protocol_type: "consumer".to_string(),
            protocols: vec![("range".to_string(), Bytes::from_static(b"meta"))],
            require_known_member_id: v4 && instance.is_none(),
            supports_skip_assignment: false,
        }
    }

    fn now_answer<T>(a: Answer<T>) -> T {
        match a {
            Answer::Now(t) => t,
            Answer::Later(mut rx) => rx
                .try_recv()
                .expect("sender alive")
                .expect("answered already"),
        }
    }

    fn parked<T>(a: Answer<T>) -> oneshot::Receiver<T> {
        match a {
            Answer::Later(rx) => rx,
            Answer::Now(_) => panic!("expected a parked answer"),
        }
    }

    fn sync(
        g: &mut Group,
        member: &str,
        generation: i32,
        assignments: Vec<(String, Bytes)>,
    ) -> SyncOutcome {
        g.sync(
            SyncParams {
                generation,
                member_id: member.to_string(),
                group_instance_id: None,
                protocol_type: None,
                protocol_name: None,
                assignments,
            },
            Instant::now(),
        )
    }

    /// Joins a dynamic member the v4 way (MEMBER_ID_REQUIRED, then with the id).
    fn admit(g: &mut Group, now: Instant) -> (String, Answer<JoinResult>) {
        let first = now_answer(g.join(params("", None, true), now, &CFG));
        assert_eq!(first.error, Some(GroupError::MemberIdRequired));
        assert!(!first.member_id.is_empty());
        let id = first.member_id.clone();
        (id.clone(), g.join(params(&id, None, true), now, &CFG))
    }

    #[test]
    fn unloading_answers_parked_joins_not_coordinator() {
        // A resigned coordinator unloads its groups (Kafka's onResignation): a member waiting
        // in JoinGroup is told to find the new coordinator.
        let now = Instant::now();
        let mut g = Group::new("g");
        let (_a, join_a) = admit(&mut g, now);
        let first = parked(join_a).try_recv().unwrap().unwrap();
        assert_eq!((first.error, first.generation), (None, 1));
        let (_b, join_b) = admit(&mut g, now);
        let mut join_b = parked(join_b);
        assert_eq!(join_b.try_recv(), Ok(None), "b waits for a to rejoin");
        g.unload();
        let answer = join_b.try_recv().expect("sender alive").expect("answered");
        assert_eq!(answer.error, Some(GroupError::NotCoordinator));
    }

    /// A group with members `a` (leader) and `b`, Stable at generation 1.
    fn stable_pair(now: Instant) -> (Group, String, String) {
        let mut g = Group::new("g");
        let (a, join_a) = admit(&mut g, now);
        let mut join_a = parked(join_a);
        // `a` alone completed a generation at once; `b` joining starts the next one.
        let first = join_a.try_recv().unwrap().unwrap();
        assert_eq!((first.error, first.generation), (None, 1));
        let (b, join_b) = admit(&mut g, now);
        let mut join_b = parked(join_b);
        assert_eq!(g.state(), GroupState::PreparingRebalance);
        let join_a = parked(g.join(params(&a, None, true), now, &CFG));
        let mut join_a = join_a;
        let ra = join_a.try_recv().unwrap().unwrap();
        let rb = join_b.try_recv().unwrap().unwrap();
        assert_eq!((ra.generation, rb.generation), (2, 2));
        assert_eq!(ra.leader, a);
        assert_eq!(ra.members.len(), 2, "the leader sees every member");
        assert!(rb.members.is_empty());
        assert_eq!(g.state(), GroupState::CompletingRebalance);
        let SyncOutcome::Answer(Answer::Later(mut sync_b)) = sync(&mut g, &b, 2, vec![]) else {
            panic!("a follower waits for the leader");
        };
        let assignments = vec![
            (a.clone(), Bytes::from_static(b"A")),
            (b.clone(), Bytes::from_static(b"B")),
        ];
        let SyncOutcome::Persist {
            generation,
            record,
            answer: mut sync_a,
        } = sync(&mut g, &a, 2, assignments)
        else {
            panic!("the leader's assignment is stored first");
        };
        assert_eq!(record.members.len(), 2);
        assert!(
            sync_b.try_recv().unwrap().is_none(),
            "nobody is answered before it is stored"
        );
        g.finish_sync(generation, Ok(()), now, &CFG);
        assert_eq!(g.state(), GroupState::Stable);
        assert_eq!(
            sync_a.try_recv().unwrap().unwrap().assignment,
            Bytes::from_static(b"A")
        );
        assert_eq!(
            sync_b.try_recv().unwrap().unwrap().assignment,
            Bytes::from_static(b"B")
        );
        (g, a, b)
    }

    #[test]
    fn two_members_rebalance_to_stable_with_the_leaders_assignment() {
        let (g, ..) = stable_pair(Instant::now());
        assert_eq!(g.generation(), 2);
        assert_eq!(g.protocol_name(), Some("range"));
    }

    #[test]
    fn stale_or_unknown_members_get_kafkas_errors() {
        let now = Instant::now();
        let (mut g, a, b) = stable_pair(now);
        assert_eq!(g.heartbeat(&a, None, 2, now), Ok(()));
        assert_eq!(
            g.heartbeat("nobody", None, 2, now),
            Err(GroupError::UnknownMemberId)
        );
        assert_eq!(
            g.heartbeat(&a, None, 1, now),
            Err(GroupError::IllegalGeneration)
        );
        let SyncOutcome::Answer(Answer::Now(r)) = sync(&mut g, &b, 1, vec![]) else {
            panic!("a stale sync is answered at once");
        };
        assert_eq!(r.error, Some(GroupError::IllegalGeneration));
        let SyncOutcome::Answer(Answer::Now(r)) = sync(&mut g, "nobody", 2, vec![]) else {
            panic!("an unknown member's sync is answered at once");
        };
        assert_eq!(r.error, Some(GroupError::UnknownMemberId));
        assert_eq!(
            g.check_commit(&a, None, 1, now),
            Err(GroupError::IllegalGeneration)
        );
        assert_eq!(g.check_commit(&a, None, 2, now), Ok(()));
        // The leader rejoining starts a rebalance: the other member's heartbeat says so.
        let _rejoin = parked(g.join(params(&a, None, true), now, &CFG));
        assert_eq!(
            g.heartbeat(&b, None, 2, now),
            Err(GroupError::RebalanceInProgress)
        );
        assert_eq!(
            g.check_commit(&b, None, 2, now),
            Ok(()),
            "commits go on while preparing"
        );
    }

    #[test]
    fn a_leaving_member_hands_its_partitions_to_the_rest_at_once() {
        let now = Instant::now();
        let (mut g, a, b) = stable_pair(now);
        assert_eq!(g.leave(&[(b.clone(), None)], now, &CFG), vec![Ok(())]);
        assert_eq!(g.state(), GroupState::PreparingRebalance);
        let mut rejoin = parked(g.join(params(&a, None, true), now, &CFG));
        let r = rejoin.try_recv().unwrap().unwrap();
        assert_eq!((r.generation, r.members.len()), (3, 1));
        assert_eq!(
            g.leave(&[(b, None)], now, &CFG),
            vec![Err(GroupError::UnknownMemberId)]
        );
    }

    #[test]
    fn a_silent_member_is_removed_after_its_session_timeout() {
        let now = Instant::now();
        let (mut g, a, b) = stable_pair(now);
        let later = now + SESSION / 2;
        assert_eq!(g.heartbeat(&a, None, 2, later), Ok(()));
        g.tick(now + SESSION + Duration::from_millis(1), &CFG);
        assert_eq!(g.state(), GroupState::PreparingRebalance, "b timed out");
        assert_eq!(
            g.heartbeat(&b, None, 2, later),
            Err(GroupError::UnknownMemberId)
        );
        let mut rejoin = parked(g.join(params(&a, None, true), later, &CFG));
        assert_eq!(rejoin.try_recv().unwrap().unwrap().members.len(), 1);
    }

    #[test]
    fn members_that_do_not_rejoin_are_dropped_at_the_rebalance_timeout() {
        let now = Instant::now();
        let (mut g, a, b) = stable_pair(now);
        let mut rejoin = parked(g.join(params(&a, None, true), now, &CFG));
        // b keeps its session alive but never rejoins.
        for s in [9, 18, 27] {
            let t = now + Duration::from_secs(s);
            assert_eq!(
                g.heartbeat(&b, None, 2, t),
                Err(GroupError::RebalanceInProgress)
            );
            g.tick(t, &CFG);
        }
        g.tick(now + Duration::from_secs(29), &CFG);
        assert!(rejoin.try_recv().unwrap().is_none(), "still waiting for b");
        g.tick(now + Duration::from_secs(31), &CFG);
        let r = rejoin.try_recv().unwrap().unwrap();
        assert_eq!((r.generation, r.members.len()), (3, 1));
    }

    #[test]
    fn the_last_member_leaving_empties_the_group_and_stores_it() {
        let now = Instant::now();
        let (mut g, a, b) = stable_pair(now);
        g.take_to_persist();
        g.leave(&[(a, None), (b, None)], now, &CFG);
        assert_eq!(g.state(), GroupState::Empty);
        let stored = g.take_to_persist();
        assert_eq!(stored.len(), 1);
        assert!(stored[0].members.is_empty());
        assert_eq!(
            g.check_commit("", None, -1, now),
            Ok(()),
            "simple commits into an empty group"
        );
    }

    #[test]
    fn a_restarted_static_member_gets_its_assignment_back_without_a_rebalance() {
        let now = Instant::now();
        let mut g = Group::new("g");
        let mut ja = parked(g.join(params("", Some("i-a"), true), now, &CFG));
        let a = ja.try_recv().unwrap().unwrap();
        assert_eq!(
            a.error, None,
            "static members need no MEMBER_ID_REQUIRED round"
        );
        let mut jb = parked(g.join(params("", Some("i-b"), true), now, &CFG));
        let _a_rejoins = parked(g.join(params(&a.member_id, Some("i-a"), true), now, &CFG));
        let b = jb.try_recv().unwrap().unwrap();
        let SyncOutcome::Persist { generation, .. } = g.sync(
            SyncParams {
                generation: b.generation,
                member_id: a.member_id.clone(),
                group_instance_id: Some("i-a".into()),
                protocol_type: None,
                protocol_name: None,
                assignments: vec![
                    (a.member_id.clone(), Bytes::from_static(b"A")),
                    (b.member_id.clone(), Bytes::from_static(b"B")),
                ],
            },
            now,
        ) else {
            panic!("leader sync");
        };
        g.finish_sync(generation, Ok(()), now, &CFG);
        assert_eq!(g.state(), GroupState::Stable);
        // b restarts: new process, same group.instance.id, empty member id.
        let again = now_answer(g.join(params("", Some("i-b"), true), now, &CFG));
        assert_eq!(again.error, None);
        assert_ne!(again.member_id, b.member_id);
        assert_eq!(again.generation, generation, "no new generation");
        assert_eq!(g.state(), GroupState::Stable);
        let SyncOutcome::Answer(Answer::Now(r)) = g.sync(
            SyncParams {
                generation,
                member_id: again.member_id.clone(),
                group_instance_id: Some("i-b".into()),
                protocol_type: None,
                protocol_name: None,
                assignments: vec![],
            },
            now,
        ) else {
            panic!("a stable group answers at once");
        };
        assert_eq!(r.assignment, Bytes::from_static(b"B"));
        // The old incarnation is fenced.
        assert_eq!(
            g.heartbeat(&b.member_id, Some("i-b"), generation, now),
            Err(GroupError::FencedInstanceId)
        );
        assert_eq!(
            g.heartbeat(&a.member_id, Some("i-a"), generation, now),
            Ok(())
        );
    }

    #[test]
    fn the_initial_delay_gathers_members_before_the_first_generation() {
        let cfg = GroupConfig {
            initial_rebalance_delay_ms: 3000,
            ..CFG
        };
        let now = Instant::now();
        let mut g = Group::new("g");
        let mut j1 = parked(g.join(params("", None, false), now, &cfg));
        let mut j2 = parked(g.join(params("", None, false), now, &cfg));
        g.tick(now + Duration::from_millis(2900), &cfg);
        assert!(
            j1.try_recv().unwrap().is_none(),
            "still in the initial delay"
        );
        g.tick(now + Duration::from_millis(3000), &cfg);
        // A newcomer arrived during the delay: it is extended once more.
        assert!(j1.try_recv().unwrap().is_none());
        g.tick(now + Duration::from_millis(6000), &cfg);
        let (r1, r2) = (
            j1.try_recv().unwrap().unwrap(),
            j2.try_recv().unwrap().unwrap(),
        );
        assert_eq!((r1.generation, r2.generation), (1, 1));
    }

    #[test]
    fn a_member_leaving_during_the_initial_delay_leaves_an_empty_group() {
        let cfg = GroupConfig {
            initial_rebalance_delay_ms: 3000,
            ..CFG
        };
        let now = Instant::now();
        let mut g = Group::new("g");
        let mut join = parked(g.join(params("", None, false), now, &cfg));
        let id = g.members().first().map(|m| m.id.clone()).unwrap();
        assert_eq!(g.leave(&[(id, None)], now, &cfg), vec![Ok(())]);
        assert!(
            g.has_deadlines(),
            "the pending rebalance still needs its deadline"
        );
        g.tick(now + Duration::from_millis(3001), &cfg);
        assert_eq!(g.state(), GroupState::Empty);
        assert_eq!(
            join.try_recv().unwrap().unwrap().error,
            Some(GroupError::UnknownMemberId)
        );
    }

    #[test]
    fn bad_joins_are_refused() {
        let now = Instant::now();
        let mut g = Group::new("g");
        let mut p = params("", None, false);
        p.session_timeout_ms = 100;
        assert_eq!(
            now_answer(g.join(p, now, &CFG)).error,
            Some(GroupError::InvalidSessionTimeout)
        );
        let mut p = params("", None, false);
        p.protocols.clear();
        assert_eq!(
            now_answer(g.join(p, now, &CFG)).error,
            Some(GroupError::InconsistentGroupProtocol)
        );
        assert_eq!(
            now_answer(g.join(params("ghost", None, true), now, &CFG)).error,
            Some(GroupError::UnknownMemberId)
        );
        let _first = parked(g.join(params("", None, false), now, &CFG));
        let mut other = params("", None, false);
        other.protocols = vec![("roundrobin".into(), Bytes::new())];
        assert_eq!(
            now_answer(g.join(other, now, &CFG)).error,
            Some(GroupError::InconsistentGroupProtocol),
            "no assignor in common with the members"
        );
    }

    #[test]
    fn subscriptions_name_their_topics() {
        let mut meta = vec![0, 1, 0, 0, 0, 2];
        for t in ["orders", "audit"] {
            meta.extend_from_slice(&(t.len() as i16).to_be_bytes());
            meta.extend_from_slice(t.as_bytes());
        }
        meta.extend_from_slice(&[0xff, 0xff, 0xff, 0xff]);
        assert_eq!(consumer_subscription_topics(&meta), vec!["orders", "audit"]);
        assert!(consumer_subscription_topics(&[0, 1, 0x7f]).is_empty());
    }

    /// What a client does next in the model test.
    #[derive(Clone, Debug)]
    enum Op {
        /// Client `c` joins (with the member id it holds, or fresh), v4 or static.
        Join {
            c: usize,
            fresh: bool,
        },
        /// Client `c` syncs with the generation it saw last, off by `skew`.
        Sync {
            c: usize,
            skew: i32,
        },
        Heartbeat {
            c: usize,
            skew: i32,
        },
        Leave {
            c: usize,
        },
        Commit {
            c: usize,
        },
        /// Time passes, ms.
        Wait {
            ms: u64,
        },
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            (0..4usize, any::<bool>()).prop_map(|(c, fresh)| Op::Join { c, fresh }),
            (0..4usize, -1..=1i32).prop_map(|(c, skew)| Op::Sync { c, skew }),
            (0..4usize, -1..=1i32).prop_map(|(c, skew)| Op::Heartbeat { c, skew }),
            (0..4usize).prop_map(|c| Op::Leave { c }),
            (0..4usize).prop_map(|c| Op::Commit { c }),
            (0..40_000u64).prop_map(|ms| Op::Wait { ms }),
        ]
    }

    proptest::proptest! {
        /// Any interleaving of client requests and time: no panic, generations only grow,
        /// the leader is a member once a generation completes, and once every client goes
        /// quiet the group always drains to Empty with every parked request answered —
        /// never a stuck group.
        #[test]
        fn any_request_sequence_leaves_no_stuck_group(
            ops in proptest::collection::vec(op(), 1..80),
            statics in proptest::collection::vec(proptest::bool::ANY, 4),
            initial_delay_ms in proptest::prop_oneof![proptest::strategy::Just(0), proptest::strategy::Just(3000)],
        ) {
            let cfg = GroupConfig { initial_rebalance_delay_ms: initial_delay_ms, ..CFG };
            // As the coordinator's deadline loop: only groups with deadlines are ticked.
            let tick = |g: &mut Group, now: Instant| {
                if g.has_deadlines() {
                    g.tick(now, &cfg);
                }
            };
            let start = Instant::now();
            let mut now = start;
            let mut g = Group::new("g");
            let mut ids = vec![String::new(); 4];
            let mut generations = [0i32; 4];
            let mut join_waits = Vec::new();
            let mut sync_waits = Vec::new();
            let mut last_generation = 0;
            for op in ops {
                match op {
                    Op::Join { c, fresh } => {
                        let id = if fresh { String::new() } else { ids[c].clone() };
                        let instance = format!("i{c}");
                        let p = params(&id, statics[c].then_some(instance.as_str()), true);
                        match g.join(p, now, &cfg) {
                            Answer::Now(r) => {
                                if !r.member_id.is_empty() {
                                    ids[c] = r.member_id;
                                }
                                generations[c] = r.generation;
                            }
                            Answer::Later(rx) => join_waits.push((c, rx)),
                        }
                    }
                    Op::Sync { c, skew } => {
                        let outcome = g.sync(
                            SyncParams {
                                generation: generations[c] + skew,
                                member_id: ids[c].clone(),
                                group_instance_id: statics[c].then(|| format!("i{c}")),
                                protocol_type: None,
                                protocol_name: None,
                                assignments: ids.iter().map(|id| (id.clone(), Bytes::new())).collect(),
                            },
                            now,
                        );
                        match outcome {
                            SyncOutcome::Answer(Answer::Now(_)) => {}
                            SyncOutcome::Answer(Answer::Later(rx)) => sync_waits.push(rx),
                            SyncOutcome::Persist { generation, answer, .. } => {
                                sync_waits.push(answer);
                                g.finish_sync(generation, Ok(()), now, &cfg);
                            }
                        }
                    }
                    Op::Heartbeat { c, skew } => {
                        let instance = statics[c].then(|| format!("i{c}"));
                        let _ = g.heartbeat(&ids[c], instance.as_deref(), generations[c] + skew, now);
                    }
                    Op::Leave { c } => {
                        let instance = statics[c].then(|| format!("i{c}"));
                        g.leave(&[(ids[c].clone(), instance)], now, &cfg);
                    }
                    Op::Commit { c } => {
                        let instance = statics[c].then(|| format!("i{c}"));
                        let _ = g.check_commit(&ids[c], instance.as_deref(), generations[c], now);
                    }
                    Op::Wait { ms } => {
                        now += Duration::from_millis(ms);
                        tick(&mut g, now);
                    }
                }
                // Answers that arrived tell clients their ids and generations.
                join_waits.retain_mut(|(c, rx)| match rx.try_recv() {
                    Ok(Some(r)) => {
                        if r.error.is_none() {
                            ids[*c] = r.member_id;
                            generations[*c] = r.generation;
                        }
                        false
                    }
                    Ok(None) => true,
                    Err(_) => false,
                });
                proptest::prop_assert!(g.generation >= last_generation);
                last_generation = g.generation;
                if matches!(g.state(), GroupState::CompletingRebalance | GroupState::Stable) {
                    let leader = g.leader.clone().unwrap_or_default();
                    proptest::prop_assert!(g.members.contains_key(&leader));
                }
                if g.state() == GroupState::Empty {
                    proptest::prop_assert!(g.members.is_empty());
                }
                for (instance, id) in &g.static_members {
                    let member = g.members.get(id);
                    proptest::prop_assert!(member.is_some(), "static {instance} maps to a member");
                }
            }
            // Everyone goes quiet: sessions and rebalance timeouts run out.
            for _ in 0..4 {
                now += Duration::from_secs(60);
                tick(&mut g, now);
            }
            proptest::prop_assert_eq!(g.state(), GroupState::Empty);
            for (_, mut rx) in join_waits {
                proptest::prop_assert!(!matches!(rx.try_recv(), Ok(None)), "a join left parked");
            }
            for mut rx in sync_waits {
                proptest::prop_assert!(!matches!(rx.try_recv(), Ok(None)), "a sync left parked");
            }
        }
    }
}
