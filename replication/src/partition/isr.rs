//! [`LeaderIsr`]: the leader's side of Kafka's ISR model for one partition this broker leads,
//! as a pure state machine — no I/O and no clock: every rule that needs the time takes it as a
//! `now_ms` argument (milliseconds on the caller's monotonic clock). Read against Kafka's
//! `Partition.scala` and `Replica.scala` (`core/src/main/scala/kafka/cluster/`).
//!
//! It owns, for one partition: the leader id, leader epoch and partition epoch, the replicas,
//! the committed ISR and at most one pending ISR change (an AlterPartition sent to the
//! controller and not yet answered), `min.insync.replicas`, `replica.lag.time.max.ms`, the
//! leader epoch's start offset, the leader's log end offset (LEO), the high watermark (HW),
//! and per follower what its fetches told the leader ([`FollowerState`]). The shard that owns
//! the partition owns this state; nothing here is shared.
//!
//! Invariants (asserted after every change):
//! 1. The committed ISR and the pending ISR are non-empty subsets of the replicas, without
//!    duplicates, holding the leader.
//! 2. The **maximal ISR** is the committed ISR, or while a change is pending the union of the
//!    committed and the proposed ISR (the larger set), so an isolated leader that proposed to
//!    shrink the ISR to itself still waits for the followers it is removing (KIP-497).
//! 3. `HW ≤ leader LEO`, and HW ≤ the LEO of every maximal-ISR member whenever the HW moved;
//!    the HW never regresses; it does not move while the committed ISR is smaller than the
//!    effective `min.insync.replicas` (Kafka's "strict min ISR", KIP-966).
//! 4. `leader epoch start offset ≤ leader LEO`.
//!
//! Limits: Kafka's HW also waits for a caught-up, eligible follower outside the ISR
//! (`shouldWaitForReplicaToJoinIsr`); this state has no broker-liveness view, so only the
//! maximal ISR holds the HW. Whether a broker is fenced or shutting down is checked by the
//! controller (`INELIGIBLE_REPLICA`), not here; likewise a fetch's broker epoch is checked
//! against the follower's previous fetch, not against the metadata's registration as Kafka
//! does. Reassignments (adding/removing replicas) are not modelled. The caller persists the
//! HW (checkpoint) and the leader epoch's start offset (epoch cache); this state only
//! computes them.

use crate::runtime::NodeId;
use std::collections::{BTreeMap, BTreeSet};
use storage::{LeaderEpoch, Offset};

/// The partition's replication configs the ISR rules read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IsrConfig {
    /// `min.insync.replicas`: the fewest ISR members an `acks=all` produce needs (≥ 1).
    pub min_insync_replicas: usize,
    /// `replica.lag.time.max.ms`: how long, in milliseconds, an ISR follower may go without
    /// being caught up before it is a shrink candidate.
    pub replica_lag_time_max_ms: i64,
}

/// The leadership the metadata gives this broker: Kafka's `LeaderAndIsrPartitionState`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leadership {
    pub leader_epoch: LeaderEpoch,
    /// The controller's version of the partition's state (bumped by every ISR change).
    pub partition_epoch: i32,
    /// The replicas, preferred leader first; holds the leader.
    pub replicas: Vec<NodeId>,
    /// The committed ISR: a subset of `replicas` holding the leader.
    pub isr: Vec<NodeId>,
}

/// What the leader knows of one follower from its fetches (Kafka's `ReplicaState`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FollowerState {
    /// The follower's log end offset: its last fetch offset; `None` until it fetches under
    /// this leader.
    pub log_end_offset: Option<Offset>,
    /// The latest time (ms) at which the follower's fetch offset had reached the leader's LEO.
    pub last_caught_up_time_ms: i64,
    /// The time (ms) of the follower's last fetch; 0 when none.
    pub last_fetch_time_ms: i64,
    /// The leader's LEO when the follower last fetched; `None` when reset by a new leader.
    pub last_fetch_leader_log_end_offset: Option<Offset>,
    /// The broker epoch its last fetch carried (KIP-903); `None` before one, or for a Fetch
    /// older than v15 (Kafka's -1).
    pub broker_epoch: Option<i64>,
}

impl FollowerState {
    /// A follower this leader has not heard from, caught up at `last_caught_up_time_ms`.
    fn fresh(last_caught_up_time_ms: i64) -> FollowerState {
        FollowerState {
            log_end_offset: None,
            last_caught_up_time_ms,
            last_fetch_time_ms: 0,
            last_fetch_leader_log_end_offset: None,
            broker_epoch: None,
        }
    }

    /// Kafka's `ReplicaState.isCaughtUp`: at the leader's LEO, or caught up within the lag.
    fn is_caught_up(&self, leader_log_end_offset: Offset, now_ms: i64, lag_max_ms: i64) -> bool {
        self.log_end_offset == Some(leader_log_end_offset)
            || now_ms.saturating_sub(self.last_caught_up_time_ms) <= lag_max_ms
    }
}

/// KIP-903's checks of the broker epoch a follower's fetch carries (Fetch v15+
/// `ReplicaState.ReplicaEpoch`; `None`: -1 or a Fetch before v15), against `alive_epoch`, the
/// epoch the metadata image registers for that broker when it is not fenced (Kafka's
/// `getAliveBrokerEpoch`). A fetch epoch below it is refused (Kafka's
/// `Replica.updateFetchStateOrThrow`: NOT_LEADER_OR_FOLLOWER), so a fetch from a broker's
/// previous incarnation moves nothing. Otherwise returns whether the follower may join the
/// ISR as far as epochs go (Kafka's `Partition.isBrokerEpochIsrEligible`): it is alive and its
/// fetch carried no epoch or that one. Errors: [`IsrError::StaleBrokerEpoch`].
pub fn check_follower_broker_epoch(
    replica: NodeId,
    fetch_epoch: Option<i64>,
    alive_epoch: Option<i64>,
) -> Result<bool, IsrError> {
    if let (Some(epoch), Some(known)) = (fetch_epoch, alive_epoch) {
        if known > epoch {
            return Err(IsrError::StaleBrokerEpoch {
                replica,
                broker_epoch: epoch,
                known,
            });
        }
    }
    Ok(alive_epoch.is_some() && fetch_epoch.is_none_or(|epoch| Some(epoch) == alive_epoch))
}

/// An AlterPartition the leader sends to the controller (Kafka's `LeaderAndIsr` it submits).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlterPartitionProposal {
    /// Names this proposal among this partition's; its answer must carry it back.
    pub proposal_id: u64,
    pub leader_id: NodeId,
    pub leader_epoch: LeaderEpoch,
    /// The partition epoch the leader knows: the controller refuses the change if it moved.
    pub partition_epoch: i32,
    /// The ISR asked for (holds the leader).
    pub new_isr: Vec<NodeId>,
}

/// Why the controller refused an AlterPartition, as the leader acts on it (Kafka's
/// `Partition.handleAlterPartitionError`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AlterRefusal {
    /// `OPERATION_NOT_ATTEMPTED`: nothing was applied; back to the committed ISR.
    OperationNotAttempted,
    /// `INELIGIBLE_REPLICA`: a new member is fenced or shutting down; nothing was applied.
    IneligibleReplica,
    /// `UNKNOWN_TOPIC_OR_PARTITION` / `UNKNOWN_TOPIC_ID`: wait for new metadata.
    UnknownTopicOrPartition,
    /// `FENCED_LEADER_EPOCH`: this leader is stale; wait for new metadata.
    FencedLeaderEpoch,
    /// `INVALID_UPDATE_VERSION`: the partition epoch moved; wait for new metadata.
    InvalidUpdateVersion,
    /// `INVALID_REQUEST`: wait for new metadata.
    InvalidRequest,
    /// `NEW_LEADER_ELECTED`: applied, but this broker no longer leads; wait for metadata.
    NewLeaderElected,
    /// Anything else (a timeout, no controller): send the same proposal again.
    Retriable,
}

/// What an answer to a proposal did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AlterOutcome {
    /// The answer is not for the pending proposal (stale, or nothing pending): ignored.
    Ignored,
    /// The committed ISR is the answer's; the HW may have moved.
    Committed { high_watermark_moved: bool },
    /// The pending change was dropped (nothing applied); the committed ISR stands.
    Reverted { high_watermark_moved: bool },
    /// The change stays pending until new metadata ([`LeaderIsr::update_leadership`]) comes.
    StaysPending,
    /// Send this proposal again.
    Retry(AlterPartitionProposal),
}

/// What a follower fetch changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FetchOutcome {
    /// The HW moved: parked consumer fetches and `acks=all` produces may complete.
    pub high_watermark_moved: bool,
    /// The follower may join the ISR: propose the committed ISR plus it.
    pub expand_candidate: Option<NodeId>,
}

/// An `acks=all` produce's state (Kafka's `Partition.checkEnoughReplicasReachOffset`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckState {
    /// The HW has not reached the required offset.
    Waiting,
    /// The HW reached it with enough replicas.
    Done,
    /// The HW reached it, but the maximal ISR is below `min.insync.replicas`
    /// (`NOT_ENOUGH_REPLICAS_AFTER_APPEND`, 20); the records stay appended.
    NotEnoughReplicasAfterAppend,
}

/// Why an ISR operation was refused. The broker maps these to Kafka codes at its edge.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IsrError {
    /// A replica set or ISR that breaks invariant 1.
    #[error("invalid ISR {isr:?} for replicas {replicas:?} led by {leader:?}: {reason}")]
    InvalidIsr {
        leader: NodeId,
        replicas: Vec<NodeId>,
        isr: Vec<NodeId>,
        reason: &'static str,
    },
    /// `min.insync.replicas` below 1 or a negative `replica.lag.time.max.ms`.
    #[error("invalid ISR config {config:?}")]
    InvalidConfig { config: IsrConfig },
    /// A fetch from a broker that is not a follower of this partition
    /// (`NOT_LEADER_OR_FOLLOWER` / `UNKNOWN_LEADER_EPOCH` in Kafka).
    #[error("broker {replica:?} is not a follower of this partition (replicas {replicas:?})")]
    NotAFollower {
        replica: NodeId,
        replicas: Vec<NodeId>,
    },
    /// A fetch whose broker epoch is older than `known`: the one this follower already
    /// fetched with, or the one the metadata registers for it ([`check_follower_broker_epoch`])
    /// (`NOT_LEADER_OR_FOLLOWER`, KIP-903).
    #[error("stale broker epoch {broker_epoch} from {replica:?} (known {known})")]
    StaleBrokerEpoch {
        replica: NodeId,
        broker_epoch: i64,
        known: i64,
    },
    /// A fetch offset outside `[0, leader LEO]` (`OFFSET_OUT_OF_RANGE`).
    #[error("fetch offset {fetch_offset} from {replica:?} outside [0, log end {log_end_offset}]")]
    FetchOffsetOutOfRange {
        replica: NodeId,
        fetch_offset: Offset,
        log_end_offset: Offset,
    },
    /// The leader's LEO may only grow by appends.
    #[error("leader log end offset {new} below {current}")]
    LogEndOffsetRegressed { current: Offset, new: Offset },
    /// An ISR change is already pending: one at a time.
    #[error("ISR change {pending:?} already pending")]
    AlterPending { pending: Vec<NodeId> },
    /// An `acks=all` produce while the ISR is below `min.insync.replicas`
    /// (`NOT_ENOUGH_REPLICAS`, 19): nothing is appended.
    #[error("ISR {isr:?} below min.insync.replicas {min_insync_replicas}")]
    NotEnoughReplicas {
        isr: Vec<NodeId>,
        min_insync_replicas: usize,
    },
}

/// The pending ISR change: the proposal sent and not yet answered.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Pending {
    proposal: AlterPartitionProposal,
}

/// The leader's ISR state for one partition (module doc: rules and invariants).
#[derive(Clone, Debug)]
pub struct LeaderIsr {
    leader_id: NodeId,
    config: IsrConfig,
    leader_epoch: LeaderEpoch,
    partition_epoch: i32,
    replicas: Vec<NodeId>,
    /// Committed by the controller (invariant 1).
    isr: BTreeSet<NodeId>,
    /// At most one change in flight (invariant 2).
    pending: Option<Pending>,
    /// The leader's LEO when this leader epoch began (invariant 4): a follower joins the ISR
    /// only once it has reached it.
    leader_epoch_start_offset: Offset,
    leader_log_end_offset: Offset,
    /// Never regresses (invariant 3).
    high_watermark: Offset,
    /// One per replica other than the leader.
    followers: BTreeMap<NodeId, FollowerState>,
    /// The id the next proposal gets.
    next_proposal_id: u64,
}

impl LeaderIsr {
    /// This broker (`leader_id`) becomes the partition's leader (Kafka's `makeLeader` when not
    /// leading before): the leader epoch starts at `leader_log_end_offset`, the HW is the
    /// log's `high_watermark` (clamped to the LEO), and every follower is reset — ISR members
    /// count as caught up at `now_ms`, the others not at all. The HW may move at once (an
    /// ISR of the leader alone). Errors: [`IsrError::InvalidIsr`], [`IsrError::InvalidConfig`].
    pub fn become_leader(
        leader_id: NodeId,
        config: IsrConfig,
        leadership: Leadership,
        leader_log_end_offset: Offset,
        high_watermark: Offset,
        now_ms: i64,
    ) -> Result<LeaderIsr, IsrError> {
        if config.min_insync_replicas < 1 || config.replica_lag_time_max_ms < 0 {
            return Err(IsrError::InvalidConfig { config });
        }
        check_isr(leader_id, &leadership.replicas, &leadership.isr)?;
        let isr: BTreeSet<NodeId> = leadership.isr.iter().copied().collect();
        let followers = leadership
            .replicas
            .iter()
            .filter(|&&r| r != leader_id)
            .map(|&r| {
                let caught_up = if isr.contains(&r) { now_ms } else { 0 };
                (r, FollowerState::fresh(caught_up))
            })
            .collect();
        let mut state = LeaderIsr {
            leader_id,
            config,
            leader_epoch: leadership.leader_epoch,
            partition_epoch: leadership.partition_epoch,
            replicas: leadership.replicas,
            isr,
            pending: None,
            leader_epoch_start_offset: leader_log_end_offset,
            leader_log_end_offset,
            high_watermark: high_watermark.min(leader_log_end_offset),
            followers,
            next_proposal_id: 0,
        };
        state.maybe_increment_high_watermark();
        state.check_invariants();
        Ok(state)
    }

    /// New metadata for a partition this broker already leads (Kafka's `makeLeader` while
    /// leading). Ignored (returns `Ok(false)`) when `leadership.partition_epoch` is below the
    /// current one. Otherwise the replicas and committed ISR are replaced and a pending
    /// change dropped — unless the metadata is at the current leader and partition epochs: that
    /// is the committed state already held (one state per partition epoch), and the controller
    /// may still commit the pending change, so it stays pending and the HW keeps waiting for
    /// its members (else a member the controller adds could miss records the HW passed). At a
    /// new leader epoch its start offset becomes `leader_log_end_offset`
    /// and the followers are reset as Kafka's `resetReplicaState` for a re-elected leader
    /// (their LEO kept, ISR members caught up at `now_ms`). Returns whether the HW moved.
    /// Errors: [`IsrError::InvalidIsr`], [`IsrError::LogEndOffsetRegressed`].
    pub fn update_leadership(
        &mut self,
        leadership: Leadership,
        leader_log_end_offset: Offset,
        now_ms: i64,
    ) -> Result<bool, IsrError> {
        if leadership.partition_epoch < self.partition_epoch {
            return Ok(false);
        }
        check_isr(self.leader_id, &leadership.replicas, &leadership.isr)?;
        self.check_log_end_offset(leader_log_end_offset)?;
        let same_state = leadership.partition_epoch == self.partition_epoch
            && leadership.leader_epoch == self.leader_epoch;
        self.leader_log_end_offset = leader_log_end_offset;
        self.isr = leadership.isr.iter().copied().collect();
        if !same_state {
            self.pending = None;
        }
        let mut followers = BTreeMap::new();
        for &r in leadership.replicas.iter().filter(|&&r| r != self.leader_id) {
            let in_sync = self.isr.contains(&r);
            let state = match self.followers.get(&r) {
                Some(old) if leadership.leader_epoch > self.leader_epoch => {
                    let t = if in_sync { now_ms } else { 0 };
                    FollowerState {
                        log_end_offset: old.log_end_offset,
                        last_caught_up_time_ms: t,
                        last_fetch_time_ms: t,
                        last_fetch_leader_log_end_offset: Some(leader_log_end_offset),
                        broker_epoch: old.broker_epoch,
                    }
                }
                Some(old) => *old,
                None => FollowerState::fresh(if in_sync { now_ms } else { 0 }),
            };
            followers.insert(r, state);
        }
        self.followers = followers;
        if leadership.leader_epoch > self.leader_epoch {
            self.leader_epoch = leadership.leader_epoch;
            self.leader_epoch_start_offset = leader_log_end_offset;
        }
        self.partition_epoch = leadership.partition_epoch;
        self.replicas = leadership.replicas;
        let moved = self.maybe_increment_high_watermark();
        self.check_invariants();
        Ok(moved)
    }

    /// A follower's fetch at `fetch_offset` (its LEO) carrying `broker_epoch` (`None`: a Fetch
    /// before v15), received at `now_ms` (Kafka's `updateFollowerFetchState` and
    /// `Replica.updateFetchStateOrThrow`): a fetch at or above the leader's LEO makes it
    /// caught up at `now_ms`; else one at or above the leader's LEO of its previous fetch
    /// makes it caught up at that fetch's time. Then the follower may be an ISR expansion
    /// candidate, and the HW may move. Errors: [`IsrError::NotAFollower`],
    /// [`IsrError::StaleBrokerEpoch`], [`IsrError::FetchOffsetOutOfRange`].
    pub fn on_follower_fetch(
        &mut self,
        follower_id: NodeId,
        fetch_offset: Offset,
        broker_epoch: Option<i64>,
        now_ms: i64,
    ) -> Result<FetchOutcome, IsrError> {
        let leader_log_end_offset = self.leader_log_end_offset;
        let Some(follower) = self.followers.get_mut(&follower_id) else {
            return Err(IsrError::NotAFollower {
                replica: follower_id,
                replicas: self.replicas.clone(),
            });
        };
        if let (Some(epoch), Some(known)) = (broker_epoch, follower.broker_epoch) {
            if epoch < known {
                return Err(IsrError::StaleBrokerEpoch {
                    replica: follower_id,
                    broker_epoch: epoch,
                    known,
                });
            }
        }
        if fetch_offset.0 < 0 || fetch_offset > leader_log_end_offset {
            return Err(IsrError::FetchOffsetOutOfRange {
                replica: follower_id,
                fetch_offset,
                log_end_offset: leader_log_end_offset,
            });
        }
        let previous_log_end_offset = follower.log_end_offset;
        let last_caught_up_time_ms = if fetch_offset >= leader_log_end_offset {
            follower.last_caught_up_time_ms.max(now_ms)
        } else if follower
            .last_fetch_leader_log_end_offset
            .is_some_and(|o| fetch_offset >= o)
        {
            follower
                .last_caught_up_time_ms
                .max(follower.last_fetch_time_ms)
        } else {
            follower.last_caught_up_time_ms
        };
        *follower = FollowerState {
            log_end_offset: Some(fetch_offset),
            last_caught_up_time_ms,
            last_fetch_time_ms: now_ms,
            last_fetch_leader_log_end_offset: Some(
                follower
                    .last_fetch_leader_log_end_offset
                    .map_or(leader_log_end_offset, |o| o.max(leader_log_end_offset)),
            ),
            broker_epoch,
        };
        // Kafka checks the expansion before moving the HW.
        let expand_candidate = self.is_expand_candidate(follower_id).then_some(follower_id);
        let high_watermark_moved =
            previous_log_end_offset != Some(fetch_offset) && self.maybe_increment_high_watermark();
        self.check_invariants();
        Ok(FetchOutcome {
            high_watermark_moved,
            expand_candidate,
        })
    }

    /// The leader appended: its LEO is now `new_leader_log_end_offset`. Returns whether the
    /// HW moved (an ISR of the leader alone). Errors: [`IsrError::LogEndOffsetRegressed`].
    pub fn on_leader_append(
        &mut self,
        new_leader_log_end_offset: Offset,
    ) -> Result<bool, IsrError> {
        self.check_log_end_offset(new_leader_log_end_offset)?;
        self.leader_log_end_offset = new_leader_log_end_offset;
        let moved = self.maybe_increment_high_watermark();
        self.check_invariants();
        Ok(moved)
    }

    /// ISR followers out of sync at `now_ms` (Kafka's `getOutOfSyncReplicas`): not at the
    /// leader's LEO and last caught up more than `replica.lag.time.max.ms` ago. Empty while
    /// a change is pending.
    pub fn shrink_candidates(&self, now_ms: i64) -> Vec<NodeId> {
        if self.pending.is_some() {
            return Vec::new();
        }
        self.isr
            .iter()
            .filter(|&&r| r != self.leader_id)
            .filter(|r| {
                self.followers.get(r).is_none_or(|f| {
                    !f.is_caught_up(
                        self.leader_log_end_offset,
                        now_ms,
                        self.config.replica_lag_time_max_ms,
                    )
                })
            })
            .copied()
            .collect()
    }

    /// Replicas outside the committed ISR that may join it (Kafka's `needsExpandIsr`): LEO at
    /// or above both the HW and the leader epoch's start offset. Empty while a change is
    /// pending.
    pub fn expand_candidates(&self) -> Vec<NodeId> {
        self.followers
            .keys()
            .copied()
            .filter(|&r| self.is_expand_candidate(r))
            .collect()
    }

    fn is_expand_candidate(&self, replica: NodeId) -> bool {
        if self.pending.is_some() || self.isr.contains(&replica) {
            return false;
        }
        self.followers
            .get(&replica)
            .and_then(|f| f.log_end_offset)
            .is_some_and(|leo| leo >= self.high_watermark && leo >= self.leader_epoch_start_offset)
    }

    /// Proposes `new_isr` to the controller (Kafka's `prepareIsrExpand`/`prepareIsrShrink`):
    /// it becomes the pending change, and the maximal ISR the union of it and the committed
    /// ISR until it is answered. Errors: [`IsrError::AlterPending`], [`IsrError::InvalidIsr`].
    pub fn propose(&mut self, new_isr: Vec<NodeId>) -> Result<AlterPartitionProposal, IsrError> {
        if let Some(p) = &self.pending {
            return Err(IsrError::AlterPending {
                pending: p.proposal.new_isr.clone(),
            });
        }
        check_isr(self.leader_id, &self.replicas, &new_isr)?;
        let proposal = AlterPartitionProposal {
            proposal_id: self.next_proposal_id,
            leader_id: self.leader_id,
            leader_epoch: self.leader_epoch,
            partition_epoch: self.partition_epoch,
            new_isr,
        };
        self.next_proposal_id += 1;
        self.pending = Some(Pending {
            proposal: proposal.clone(),
        });
        self.check_invariants();
        Ok(proposal)
    }

    /// The controller committed proposal `proposal_id` as `isr` at `partition_epoch` (Kafka's
    /// `handleAlterPartitionUpdate`). Ignored unless it answers the pending proposal and
    /// `partition_epoch` is not below the current one. Errors: [`IsrError::InvalidIsr`].
    pub fn on_alter_committed(
        &mut self,
        proposal_id: u64,
        partition_epoch: i32,
        isr: &[NodeId],
    ) -> Result<AlterOutcome, IsrError> {
        if !self.is_pending(proposal_id) || partition_epoch < self.partition_epoch {
            return Ok(AlterOutcome::Ignored);
        }
        check_isr(self.leader_id, &self.replicas, isr)?;
        self.isr = isr.iter().copied().collect();
        self.partition_epoch = partition_epoch;
        self.pending = None;
        let high_watermark_moved = self.maybe_increment_high_watermark();
        self.check_invariants();
        Ok(AlterOutcome::Committed {
            high_watermark_moved,
        })
    }

    /// The controller refused proposal `proposal_id` (Kafka's `handleAlterPartitionError`):
    /// `OPERATION_NOT_ATTEMPTED` and `INELIGIBLE_REPLICA` drop the pending change; the other
    /// known refusals keep it pending until new metadata; anything else is retried. Ignored
    /// unless it answers the pending proposal.
    pub fn on_alter_refused(&mut self, proposal_id: u64, refusal: AlterRefusal) -> AlterOutcome {
        if !self.is_pending(proposal_id) {
            return AlterOutcome::Ignored;
        }
        let outcome = match refusal {
            AlterRefusal::OperationNotAttempted | AlterRefusal::IneligibleReplica => {
                self.pending = None;
                // The maximal ISR may have shrunk (a refused expansion): the HW may move.
                AlterOutcome::Reverted {
                    high_watermark_moved: self.maybe_increment_high_watermark(),
                }
            }
            AlterRefusal::UnknownTopicOrPartition
            | AlterRefusal::FencedLeaderEpoch
            | AlterRefusal::InvalidUpdateVersion
            | AlterRefusal::InvalidRequest
            | AlterRefusal::NewLeaderElected => AlterOutcome::StaysPending,
            AlterRefusal::Retriable => match &self.pending {
                Some(p) => AlterOutcome::Retry(p.proposal.clone()),
                None => AlterOutcome::Ignored,
            },
        };
        self.check_invariants();
        outcome
    }

    fn is_pending(&self, proposal_id: u64) -> bool {
        self.pending
            .as_ref()
            .is_some_and(|p| p.proposal.proposal_id == proposal_id)
    }

    /// Before an `acks=all` append (Kafka's `appendRecordsToLeader`): refused when the
    /// committed ISR is below the effective `min.insync.replicas`. Errors:
    /// [`IsrError::NotEnoughReplicas`].
    pub fn produce_check(&self) -> Result<(), IsrError> {
        if self.isr.len() < self.effective_min_isr() {
            return Err(IsrError::NotEnoughReplicas {
                isr: self.isr(),
                min_insync_replicas: self.config.min_insync_replicas,
            });
        }
        Ok(())
    }

    /// An `acks=all` produce whose records end below `required_offset` (Kafka's
    /// `checkEnoughReplicasReachOffset`): done once the HW reached it, with
    /// `NOT_ENOUGH_REPLICAS_AFTER_APPEND` if the maximal ISR is then below the effective
    /// `min.insync.replicas`.
    pub fn ack_state(&self, required_offset: Offset) -> AckState {
        if self.high_watermark < required_offset {
            AckState::Waiting
        } else if self.effective_min_isr() <= self.maximal_isr_members().count() {
            AckState::Done
        } else {
            AckState::NotEnoughReplicasAfterAppend
        }
    }

    /// `min.insync.replicas` capped by the replica count (Kafka's `effectiveMinIsr`).
    fn effective_min_isr(&self) -> usize {
        self.config.min_insync_replicas.min(self.replicas.len())
    }

    /// The committed ISR, ascending.
    pub fn isr(&self) -> Vec<NodeId> {
        self.isr.iter().copied().collect()
    }

    /// The ISR the HW and `acks=all` wait for (invariant 2), ascending.
    pub fn maximal_isr(&self) -> Vec<NodeId> {
        let mut maximal = self.isr.clone();
        if let Some(p) = &self.pending {
            maximal.extend(p.proposal.new_isr.iter().copied());
        }
        maximal.into_iter().collect()
    }

    /// The maximal ISR's members without allocating (the produce path's use): the committed
    /// ISR, then the pending ISR's members outside it; each once, not sorted.
    fn maximal_isr_members(&self) -> impl Iterator<Item = NodeId> + '_ {
        let proposed = self.pending.iter().flat_map(|p| &p.proposal.new_isr);
        self.isr
            .iter()
            .chain(proposed.filter(|r| !self.isr.contains(r)))
            .copied()
    }

    /// The pending proposal, if any.
    pub fn pending(&self) -> Option<&AlterPartitionProposal> {
        self.pending.as_ref().map(|p| &p.proposal)
    }

    pub fn leader_id(&self) -> NodeId {
        self.leader_id
    }

    pub fn leader_epoch(&self) -> LeaderEpoch {
        self.leader_epoch
    }

    pub fn partition_epoch(&self) -> i32 {
        self.partition_epoch
    }

    pub fn replicas(&self) -> &[NodeId] {
        &self.replicas
    }

    pub fn config(&self) -> IsrConfig {
        self.config
    }

    /// The leader's LEO when the current leader epoch began.
    pub fn leader_epoch_start_offset(&self) -> Offset {
        self.leader_epoch_start_offset
    }

    pub fn leader_log_end_offset(&self) -> Offset {
        self.leader_log_end_offset
    }

    /// The high watermark: consumers read below it.
    pub fn high_watermark(&self) -> Offset {
        self.high_watermark
    }

    /// What the leader knows of `follower`; `None` for a non-follower.
    pub fn follower(&self, follower: NodeId) -> Option<&FollowerState> {
        self.followers.get(&follower)
    }

    fn check_log_end_offset(&self, new: Offset) -> Result<(), IsrError> {
        if new < self.leader_log_end_offset {
            return Err(IsrError::LogEndOffsetRegressed {
                current: self.leader_log_end_offset,
                new,
            });
        }
        Ok(())
    }

    /// Kafka's `maybeIncrementLeaderHW` over the maximal ISR (invariant 3). Returns whether
    /// the HW moved.
    fn maybe_increment_high_watermark(&mut self) -> bool {
        if self.isr.len() < self.effective_min_isr() {
            return false;
        }
        let mut candidate = Some(self.leader_log_end_offset);
        for r in self.maximal_isr_members() {
            if r == self.leader_id {
                continue;
            }
            // A member that has not fetched under this leader holds the HW (Kafka's -1).
            let leo = self.followers.get(&r).and_then(|f| f.log_end_offset);
            candidate = match (candidate, leo) {
                (Some(c), Some(l)) => Some(c.min(l)),
                _ => None,
            };
        }
        match candidate {
            Some(c) if c > self.high_watermark => {
                self.high_watermark = c;
                true
            }
            _ => false,
        }
    }

    fn check_invariants(&self) {
        assert!(
            self.isr.contains(&self.leader_id),
            "invariant 1: ISR holds the leader"
        );
        assert!(
            self.isr.iter().all(|r| self.replicas.contains(r)),
            "invariant 1: ISR within the replicas"
        );
        if let Some(p) = &self.pending {
            assert!(
                p.proposal.new_isr.contains(&self.leader_id),
                "invariant 1: the pending ISR holds the leader"
            );
        }
        assert!(
            self.high_watermark <= self.leader_log_end_offset,
            "invariant 3: HW ≤ leader LEO"
        );
        assert!(
            self.leader_epoch_start_offset <= self.leader_log_end_offset,
            "invariant 4: epoch start ≤ leader LEO"
        );
    }
}

/// Invariant 1 for `isr` over `replicas` led by `leader`.
fn check_isr(leader: NodeId, replicas: &[NodeId], isr: &[NodeId]) -> Result<(), IsrError> {
    let invalid = |reason| IsrError::InvalidIsr {
        leader,
        replicas: replicas.to_vec(),
        isr: isr.to_vec(),
        reason,
    };
    let distinct: BTreeSet<_> = replicas.iter().collect();
    if distinct.len() != replicas.len() {
        return Err(invalid("duplicate replica"));
    }
    if !replicas.contains(&leader) {
        return Err(invalid("the leader is not a replica"));
    }
    let distinct: BTreeSet<_> = isr.iter().collect();
    if distinct.len() != isr.len() {
        return Err(invalid("duplicate ISR member"));
    }
    if !isr.contains(&leader) {
        return Err(invalid("the ISR does not hold the leader"));
    }
    if !isr.iter().all(|r| replicas.contains(r)) {
        return Err(invalid("an ISR member is not a replica"));
    }
    Ok(())
}

#[cfg(test)]
#[path = "isr_tests.rs"]
mod tests;
