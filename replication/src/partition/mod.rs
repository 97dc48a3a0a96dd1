//! [`Partition`]: one partition as its owning shard serves it — the log, the replica set and
//! ISR, the leader epoch, the high watermark and the waiters parked on it (long-polling
//! fetches) — with the replication policy that decides when an append is acknowledged.
//!
//! A partition has a role, set from the metadata (Kafka's `Partition.makeLeader` /
//! `makeFollower`):
//! - **leader**: holds a [`LeaderIsr`]; the high watermark is its, where the leader's own log
//!   end offset is the log's *written* offset. [`Partition::new`] starts a leader at epoch 0
//!   that is its own only replica and ISR (replication factor 1): there the high watermark is
//!   the written offset, as it was before replication, at no extra cost. Followers fetch with
//!   [`Partition::replica_fetch`] (Kafka's `Partition.fetchRecords` for a follower), which
//!   moves their state in the ISR and answers a diverging epoch (KIP-320).
//! - **follower**: knows the leader and its epoch; appends the leader's batches with their
//!   offsets and epochs ([`Partition::append_as_follower`]); its high watermark is
//!   `min(leader's high watermark as fetched, its own written offset)`; a diverging epoch
//!   truncates it as Kafka's `AbstractFetcherThread` does
//!   ([`Partition::truncate_to_diverging_epoch`]).
//!
//! Invariants:
//! 1. `log_start ≤ high_watermark ≤ written ≤ log_end` (the log clamps the high watermark).
//! 2. Acknowledged means written (DESIGN.md §3): an append with `acks=1`/`all` is answered
//!    only once the O_DIRECT write of all its batches has completed (and the `fdatasync` after
//!    it where `flush.messages` is due); the leader's log end offset in the ISR state is the
//!    written offset, and a follower's fetch offset its written offset, so the high watermark
//!    moves only over bytes written on every ISR member.
//! 3. Every move of the high watermark, and every change of role, wakes the parked waiters;
//!    no timer polls.
//!
//! Limits: a leader takes new `min.insync.replicas` / `replica.lag.time.max.ms` values only
//! with new metadata ([`Partition::become_leader`]); ISR changes are proposed when the caller
//! asks ([`Partition::propose_isr_expansion`] after a follower's fetch,
//! [`Partition::propose_isr_shrink`] on the caller's timer) from [`LeaderIsr`]'s candidates.
//!
//! The partition reaches its log through [`PartitionStore`] and time and spawning through the
//! [`crate::runtime`] seam only, so the simulation in [`crate::sim`] drives it unchanged.
//! Everything runs on the owning shard's thread: `Rc`/`Cell`, no locks.

mod error;
mod isr;
mod leader_epoch;
mod offsets;
mod records;
mod store;

pub use error::PartitionError;
pub use isr::{
    check_follower_broker_epoch, AckState, AlterOutcome, AlterPartitionProposal, AlterRefusal,
    FetchOutcome, FollowerState, IsrConfig, IsrError, LeaderIsr, Leadership,
};
pub use leader_epoch::{
    check_current_leader_epoch, fetch_requested_leader_epoch, list_offsets_leader_epoch,
    requested_leader_epoch, LeaderEpochError, OffsetNotAvailable, NO_LEADER_EPOCH,
};
pub use offsets::{ListedOffset, OffsetSpec};
pub use store::PartitionStore;

use crate::runtime::{MonotonicTime, NodeId, Runtime};
use bytes::Bytes;
use futures_lite::future;
use records::first_offset_at_or_after;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::pin;
use std::rc::Rc;
use std::time::Duration;
use storage::{BatchHeader, LeaderEpoch, Notify, Offset, PartitionLog, RecordBatch, TimestampMs};

/// `replica.lag.time.max.ms`'s default, in milliseconds (Kafka's).
pub const REPLICA_LAG_TIME_MAX_MS_DEFAULT: i64 = 30_000;

/// The error for a leader's operation on a follower of `leader`.
fn not_leader(leader: NodeId) -> PartitionError {
    PartitionError::NotLeaderOrFollower {
        wanted: "the leader",
        leader: Some(leader),
    }
}

/// A Produce request's `acks`: what its answer waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acks {
    /// `acks=0`: nobody waits for the answer; the append is not awaited.
    None,
    /// `acks=1`: the leader's own write has completed.
    Leader,
    /// `acks=-1` (all): the write has completed on every in-sync replica.
    All,
}

impl Acks {
    /// The wire value's meaning; `None` for a value Kafka refuses (`INVALID_REQUIRED_ACKS`).
    pub fn from_wire(acks: i16) -> Option<Acks> {
        match acks {
            0 => Some(Acks::None),
            1 => Some(Acks::Leader),
            -1 => Some(Acks::All),
            _ => None,
        }
    }
}

/// Up to where a read may go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isolation {
    /// Below the high watermark: what consumers see.
    HighWatermark,
    /// Below the log end offset: what a follower replicates.
    LogEnd,
}

/// What an append assigned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Appended {
    pub base_offset: Offset,
    pub log_start_offset: Offset,
    /// The append time stamped into LogAppendTime batches, else `None`.
    pub log_append_time: Option<TimestampMs>,
}

/// Batches read, with the offsets a fetch answer carries.
#[derive(Debug)]
pub struct Read {
    pub high_watermark: Offset,
    pub log_start_offset: Offset,
    pub batches: Vec<RecordBatch>,
}

impl Read {
    /// Bytes of the batches read.
    pub fn bytes(&self) -> usize {
        self.batches.iter().map(RecordBatch::len).sum()
    }
}

/// What a follower's fetch from this leader got (Kafka's `LogReadInfo`).
#[derive(Debug)]
pub struct ReplicaRead {
    /// The high watermark after the fetch moved the follower's state.
    pub high_watermark: Offset,
    pub log_start_offset: Offset,
    /// Batches from the fetch offset, below the leader's written offset (the first whole);
    /// empty when the epochs diverge.
    pub batches: Vec<RecordBatch>,
    /// KIP-320: the follower's last fetched epoch ends here before its fetch offset, or is
    /// unknown here: the largest epoch ≤ it and that epoch's end offset on this leader.
    pub diverging_epoch: Option<(LeaderEpoch, Offset)>,
    /// The follower may join the ISR (propose the committed ISR plus it).
    pub expand_candidate: Option<NodeId>,
}

/// A replica's role in its partition, as the metadata gives it.
enum Role {
    /// This broker leads: the ISR and the high watermark are the [`LeaderIsr`]'s.
    Leader(LeaderIsr),
    /// `leader` leads at `leader_epoch`; this broker replicates its log.
    Follower {
        leader: NodeId,
        leader_epoch: LeaderEpoch,
    },
}

/// Milliseconds on the monotonic clock, as [`LeaderIsr`] takes time.
fn millis(t: MonotonicTime) -> i64 {
    i64::try_from(t.0.as_millis()).unwrap_or(i64::MAX)
}

/// How a [`Partition::wait_for_offset`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitOutcome {
    /// The high watermark passed the offset.
    Passed,
    /// The deadline came first.
    DeadlinePassed,
    /// The waiter's cancel future resolved first.
    Cancelled,
    /// The partition was closed (deleted, moved or shut down).
    Closed,
}

/// One partition on its owning shard. `S` is its log: storage's [`PartitionLog`] on a broker.
pub struct Partition<S = PartitionLog> {
    log: S,
    runtime: Rc<dyn Runtime>,
    /// This broker.
    node: NodeId,
    role: RefCell<Role>,
    /// Fired whenever the high watermark moves or the partition closes (invariant 3).
    high_watermark_moved: Rc<Notify>,
    /// Fired when a leader with followers has written more (parked follower fetches wake);
    /// never fired for a leader that is its only replica.
    written_moved: Rc<Notify>,
    closed: Cell<bool>,
}

impl<S: PartitionStore + 'static> Partition<S> {
    /// A partition led by `node`, its only replica and in-sync replica, at leader epoch 0,
    /// over `log` (already opened and recovered), with `min.insync.replicas` 1: the high
    /// watermark is the written offset.
    pub fn new(log: S, node: NodeId, runtime: Rc<dyn Runtime>) -> Partition<S> {
        let config = IsrConfig {
            min_insync_replicas: 1,
            replica_lag_time_max_ms: REPLICA_LAG_TIME_MAX_MS_DEFAULT,
        };
        let leadership = Leadership {
            leader_epoch: LeaderEpoch(0),
            partition_epoch: 0,
            replicas: vec![node],
            isr: vec![node],
        };
        let isr = LeaderIsr::become_leader(
            node,
            config,
            leadership,
            log.written_offset(),
            log.high_watermark(),
            millis(runtime.now()),
        );
        // A one-replica leadership with min.insync.replicas 1 breaks no ISR rule.
        let isr = isr.expect("a one-replica leadership is valid");
        Partition {
            log,
            runtime,
            node,
            role: RefCell::new(Role::Leader(isr)),
            high_watermark_moved: Rc::new(Notify::default()),
            written_moved: Rc::new(Notify::default()),
            closed: Cell::new(false),
        }
    }

    /// The log.
    pub fn log(&self) -> &S {
        &self.log
    }

    /// The leader as this replica knows it (itself when it leads).
    pub fn leader(&self) -> NodeId {
        match &*self.role.borrow() {
            Role::Leader(_) => self.node,
            Role::Follower { leader, .. } => *leader,
        }
    }

    /// Kafka's `maybeExpandIsr`: `candidate` (a follower a fetch made an expansion candidate)
    /// joins the ISR through the controller. Returns the AlterPartition proposal to send —
    /// the committed ISR plus `candidate` — or `None` when this broker does not lead, a change
    /// is already pending, or `candidate` is no longer a candidate (in the ISR, or its log end
    /// now below the HW: as Kafka, the candidacy is checked again when proposing, since the
    /// fetch that found it may have waited for its read while the HW moved). Until it is
    /// answered
    /// ([`Partition::on_alter_answer`]) the HW counts `candidate` too (the maximal ISR).
    pub fn propose_isr_expansion(&self, candidate: NodeId) -> Option<AlterPartitionProposal> {
        let mut role = self.role.borrow_mut();
        let Role::Leader(isr) = &mut *role else {
            return None;
        };
        if !isr.expand_candidates().contains(&candidate) {
            return None;
        }
        let mut new_isr = isr.isr();
        new_isr.push(candidate);
        new_isr.sort_unstable();
        isr.propose(new_isr).ok()
    }

    /// Kafka's `maybeShrinkIsr`: the ISR followers out of sync at `now` — not at the leader's
    /// log end offset and last caught up more than `replica.lag.time.max.ms` ago — leave the
    /// ISR through the controller. Returns the AlterPartition proposal to send (the committed
    /// ISR without them), or `None` when this broker does not lead, a change is pending, or
    /// every ISR follower is in sync. Until it is committed the HW still counts them (the
    /// maximal ISR), so a leader cut off from the controller never shrinks the ISR to itself.
    /// Kafka's leader runs this every `replica.lag.time.max.ms / 2`; the caller's timer does.
    pub fn propose_isr_shrink(&self, now: MonotonicTime) -> Option<AlterPartitionProposal> {
        let mut role = self.role.borrow_mut();
        let Role::Leader(isr) = &mut *role else {
            return None;
        };
        let out_of_sync = isr.shrink_candidates(millis(now));
        if out_of_sync.is_empty() {
            return None;
        }
        let new_isr: Vec<NodeId> = isr
            .isr()
            .into_iter()
            .filter(|r| !out_of_sync.contains(r))
            .collect();
        isr.propose(new_isr).ok()
    }

    /// The controller's answer to proposal `proposal_id` (Kafka's `handleAlterPartitionUpdate`
    /// / `handleAlterPartitionError`): committed as `isr` at `partition_epoch`, or refused.
    /// Returns the proposal to send again when the refusal asks for a retry; a stale answer,
    /// or one reaching a follower, is ignored.
    pub fn on_alter_answer(
        &self,
        proposal_id: u64,
        answer: Result<(i32, Vec<NodeId>), AlterRefusal>,
    ) -> Option<AlterPartitionProposal> {
        let outcome = {
            let mut role = self.role.borrow_mut();
            let Role::Leader(isr) = &mut *role else {
                return None;
            };
            match answer {
                Ok((partition_epoch, new_isr)) => isr
                    .on_alter_committed(proposal_id, partition_epoch, &new_isr)
                    .unwrap_or(AlterOutcome::Ignored),
                Err(refusal) => isr.on_alter_refused(proposal_id, refusal),
            }
        };
        match outcome {
            AlterOutcome::Committed {
                high_watermark_moved: true,
            }
            | AlterOutcome::Reverted {
                high_watermark_moved: true,
            } => {
                self.advance_high_watermark();
                None
            }
            AlterOutcome::Retry(proposal) => Some(proposal),
            _ => None,
        }
    }

    /// The committed ISR, ascending, when this broker leads; `None` on a follower.
    pub fn isr(&self) -> Option<Vec<NodeId>> {
        match &*self.role.borrow() {
            Role::Leader(isr) => Some(isr.isr()),
            Role::Follower { .. } => None,
        }
    }

    /// The current leader epoch.
    pub fn leader_epoch(&self) -> LeaderEpoch {
        match &*self.role.borrow() {
            Role::Leader(isr) => isr.leader_epoch(),
            Role::Follower { leader_epoch, .. } => *leader_epoch,
        }
    }

    /// Kafka's `makeLeader`: this broker leads at `leadership.leader_epoch`. At a new epoch
    /// the log is first written up to its end, and the epoch is durably assigned to start
    /// there (storage's `assign_leader_epoch`), so `OffsetForLeaderEpoch` and diverging-epoch
    /// answers know it before anything is appended; the ISR state starts (or, for a leader
    /// re-elected, is updated) with the written offset as the leader's log end offset and
    /// `config`'s ISR rules. Metadata older than the current leader epoch is ignored.
    /// Errors: I/O or a closed log, [`PartitionError::Isr`] for an invalid leadership.
    pub async fn become_leader(
        &self,
        leadership: Leadership,
        config: IsrConfig,
        now: MonotonicTime,
    ) -> Result<(), PartitionError> {
        if leadership.leader_epoch < self.leader_epoch() {
            return Ok(());
        }
        let log_end = self.log.log_end_offset();
        self.log.wait_written(log_end).await?;
        self.log
            .assign_leader_epoch(leadership.leader_epoch)
            .await?;
        let leader_log_end_offset = self.log.written_offset();
        let now_ms = millis(now);
        let mut role = self.role.borrow_mut();
        match &mut *role {
            Role::Leader(isr) if isr.leader_epoch() > leadership.leader_epoch => {
                return Ok(()); // A newer epoch came while the log was written.
            }
            // Re-elected with the same ISR rules: followers' log end offsets are kept.
            Role::Leader(isr) if isr.config() == config => {
                isr.update_leadership(leadership, leader_log_end_offset, now_ms)?;
            }
            // A new leader, or new rules: every follower starts unknown (it holds the HW
            // until it fetches), as Kafka's new leader resets its replicas.
            Role::Leader(_) | Role::Follower { .. } => {
                *role = Role::Leader(LeaderIsr::become_leader(
                    self.node,
                    config,
                    leadership,
                    leader_log_end_offset,
                    self.log.high_watermark(),
                    now_ms,
                )?);
            }
        }
        drop(role);
        self.advance_high_watermark();
        self.high_watermark_moved.notify_all();
        Ok(())
    }

    /// Kafka's `makeFollower`: `leader` leads at `leader_epoch`; this broker replicates it.
    /// Waiting `acks=all` produces end with [`PartitionError::NotLeaderOrFollower`]. An epoch
    /// older than the current one is ignored. The log is not truncated here: the first fetch
    /// from the new leader finds any divergence (KIP-320).
    pub fn become_follower(&self, leader: NodeId, leader_epoch: LeaderEpoch) {
        if leader_epoch < self.leader_epoch() {
            return;
        }
        *self.role.borrow_mut() = Role::Follower {
            leader,
            leader_epoch,
        };
        self.high_watermark_moved.notify_all();
    }

    /// The high watermark: consumers read below it.
    pub fn high_watermark(&self) -> Offset {
        self.log.high_watermark()
    }

    /// Appends `records` (whole RecordBatch v2, already checked by the caller) on this leader
    /// at its leader epoch and answers as `acks` asks: [`Acks::None`] once they are in the
    /// log's tail, [`Acks::Leader`] once their write has completed (and been synced where
    /// `flush.messages` is reached), as Kafka's synchronous local append; [`Acks::All`] is
    /// first refused when the committed ISR is below `min.insync.replicas`, then, after the
    /// local write, waits until the high watermark passes the records, at most `timeout` from
    /// there (Kafka's `DelayedProduce`: a one-replica ISR completes at once, without a timer;
    /// a zero timeout answers at once). Whatever the answer, the high watermark follows the
    /// write. An idempotent retry of a batch still in flight waits for the original's write
    /// (and sync) and gets its offsets. Errors: [`PartitionError::Storage`] (invalid batch,
    /// producer state, I/O, closed), [`PartitionError::NotLeaderOrFollower`] on a follower
    /// or when the leadership is lost while waiting, [`PartitionError::Isr`]
    /// (`NotEnoughReplicas`, nothing appended), [`PartitionError::RequestTimedOut`] and
    /// [`PartitionError::NotEnoughReplicasAfterAppend`] (the records stay appended).
    pub async fn append(
        self: &Rc<Self>,
        records: Bytes,
        acks: Acks,
        timeout: Duration,
    ) -> Result<Appended, PartitionError> {
        let leader_epoch = match &*self.role.borrow() {
            Role::Leader(isr) => {
                if acks == Acks::All {
                    isr.produce_check()?;
                }
                isr.leader_epoch()
            }
            Role::Follower { leader, .. } => return Err(not_leader(*leader)),
        };
        let info = self.log.append(records, leader_epoch).await?;
        let appended = Appended {
            base_offset: info.base_offset,
            log_start_offset: self.log.log_start_offset(),
            log_append_time: info.log_append_time,
        };
        let end = info.last_offset.plus(1);
        // A retry of a batch still being synced waits for that sync as the original does.
        let synced = info.flush_due || (info.duplicate && self.log.flush_messages_enabled());
        if acks == Acks::None {
            self.follow_write(end, synced);
            return Ok(appended);
        }
        self.await_written(end, synced).await?;
        if acks == Acks::All {
            self.await_replicated(end, timeout).await?;
        }
        Ok(appended)
    }

    /// Waits until the high watermark reaches `end` (Kafka's `DelayedProduce` over
    /// `checkEnoughReplicasReachOffset`), at most `timeout`. With the leader its own only ISR
    /// member the written records are already below the high watermark: no timer is made.
    /// Errors: [`PartitionError::NotEnoughReplicasAfterAppend`],
    /// [`PartitionError::RequestTimedOut`], [`PartitionError::NotLeaderOrFollower`] when the
    /// leadership is lost, a closed partition.
    async fn await_replicated(&self, end: Offset, timeout: Duration) -> Result<(), PartitionError> {
        let mut timer = None;
        loop {
            let woken = self.high_watermark_moved.notified();
            let state = match &*self.role.borrow() {
                Role::Leader(isr) => isr.ack_state(end),
                Role::Follower { leader, .. } => return Err(not_leader(*leader)),
            };
            match state {
                AckState::Done => return Ok(()),
                AckState::NotEnoughReplicasAfterAppend => {
                    return Err(PartitionError::NotEnoughReplicasAfterAppend { end_offset: end })
                }
                AckState::Waiting => {}
            }
            if self.closed.get() {
                return Err(storage::StorageError::Closed.into());
            }
            if timeout.is_zero() {
                return Err(PartitionError::RequestTimedOut { timeout });
            }
            let timer = timer.get_or_insert_with(|| self.runtime.sleep(timeout));
            let timed_out = future::or(
                async {
                    woken.await;
                    false
                },
                async {
                    timer.await;
                    true
                },
            )
            .await;
            if timed_out {
                return Err(PartitionError::RequestTimedOut { timeout });
            }
        }
    }

    /// Moves the high watermark over the write of the records below `end` once it completes,
    /// with no one awaiting the answer.
    fn follow_write(self: &Rc<Self>, end: Offset, synced: bool) {
        let partition = self.clone();
        self.runtime.spawn(Box::pin(async move {
            let _ = partition.await_written(end, synced).await;
        }));
    }

    /// Waits until every record below `end` is written (and synced when `synced`), then moves
    /// the high watermark over what is written.
    async fn await_written(&self, end: Offset, synced: bool) -> Result<(), PartitionError> {
        let result = if synced {
            self.log.flush_to(end).await
        } else {
            self.log.wait_written(end).await
        };
        self.advance_high_watermark();
        result.map(|_| ()).map_err(PartitionError::from)
    }

    /// On a leader: the written offset is the leader's log end offset in the ISR state, and
    /// the log's high watermark is the ISR state's. Wakes the parked waiters when it moved.
    /// Nothing on a follower (its high watermark follows the leader's).
    fn advance_high_watermark(&self) {
        let written = self.log.written_offset();
        let high_watermark = match &mut *self.role.borrow_mut() {
            Role::Leader(isr) => {
                if written > isr.leader_log_end_offset() {
                    let moved = isr.on_leader_append(written);
                    // Only a regression is refused, and the written offset grew.
                    assert!(moved.is_ok(), "the leader's log end offset grew");
                    if isr.replicas().len() > 1 {
                        self.written_moved.notify_all();
                    }
                }
                isr.high_watermark()
            }
            Role::Follower { .. } => return,
        };
        self.set_high_watermark(high_watermark);
    }

    /// Sets the log's high watermark, waking the parked waiters when it moved.
    fn set_high_watermark(&self, high_watermark: Offset) {
        let before = self.log.high_watermark();
        self.log.set_high_watermark(high_watermark);
        if self.log.high_watermark() != before {
            self.high_watermark_moved.notify_all();
        }
    }

    /// A follower's fetch on this leader (Kafka's `Partition.fetchRecords` from a follower):
    /// `follower` must be a replica; when `last_fetched_epoch` is given and its end offset
    /// here is below `fetch_offset`, or this leader's largest epoch ≤ it is older, the answer
    /// is that diverging epoch and no records, and the follower's state is not moved (KIP-320;
    /// the follower truncates and fetches again). Otherwise the follower's fetch offset (its
    /// written offset) moves its state in the ISR — the high watermark may move and waiters
    /// wake — and up to `max_bytes` (the first batch whole) are read from `fetch_offset`,
    /// below the leader's written offset. `broker_epoch` is the fetch's (KIP-903, `None`
    /// before Fetch v15). Errors: [`PartitionError::NotLeaderOrFollower`] on a follower,
    /// [`PartitionError::Isr`] for a non-replica, a stale broker epoch or a fetch offset above
    /// the leader's log end, [`storage::StorageError::OffsetOutOfRange`] for a fetch offset
    /// below the log start or an epoch this log cannot place, I/O.
    pub async fn replica_fetch(
        &self,
        follower: NodeId,
        fetch_offset: Offset,
        last_fetched_epoch: Option<LeaderEpoch>,
        broker_epoch: Option<i64>,
        max_bytes: usize,
        now: MonotonicTime,
    ) -> Result<ReplicaRead, PartitionError> {
        let outcome = {
            let mut role = self.role.borrow_mut();
            let isr = match &mut *role {
                Role::Leader(isr) => isr,
                Role::Follower { leader, .. } => return Err(not_leader(*leader)),
            };
            if isr.follower(follower).is_none() {
                return Err(IsrError::NotAFollower {
                    replica: follower,
                    replicas: isr.replicas().to_vec(),
                }
                .into());
            }
            let log_start_offset = self.log.log_start_offset();
            let out_of_range = || storage::StorageError::OffsetOutOfRange {
                offset: fetch_offset,
                log_start: log_start_offset,
                log_end: self.log.log_end_offset(),
            };
            // Kafka's `readFromLocalLog` refuses a fetch below the log start before the
            // follower's state moves (whatever the epochs say): the follower then asks for
            // the leader's offsets and truncates ([`Partition::handle_out_of_range`]).
            if fetch_offset < log_start_offset {
                return Err(out_of_range().into());
            }
            if let Some(epoch) = last_fetched_epoch {
                let (end_epoch, end_offset) = self
                    .log
                    .end_offset_for_leader_epoch(epoch)
                    .ok_or_else(out_of_range)?;
                if end_epoch < epoch || end_offset < fetch_offset {
                    return Ok(ReplicaRead {
                        high_watermark: self.log.high_watermark(),
                        log_start_offset,
                        batches: Vec::new(),
                        diverging_epoch: Some((end_epoch, end_offset)),
                        expand_candidate: None,
                    });
                }
            }
            isr.on_follower_fetch(follower, fetch_offset, broker_epoch, millis(now))?
        };
        if outcome.high_watermark_moved {
            self.advance_high_watermark();
        }
        let written = self.log.written_offset();
        let batches = self.log.read(fetch_offset, max_bytes, written).await?;
        Ok(ReplicaRead {
            high_watermark: self.log.high_watermark(),
            log_start_offset: self.log.log_start_offset(),
            batches,
            diverging_epoch: None,
            expand_candidate: outcome.expand_candidate,
        })
    }

    /// [`Partition::replica_fetch`], parked as Kafka parks a follower's fetch
    /// (`DelayedFetch`): while fewer than `min_bytes` (at least 1) came back and the epochs do
    /// not diverge, it waits for the leader to write more — until `deadline`, until `cancel`
    /// resolves (the fetch has enough from other partitions), or until the role changes or
    /// the partition closes — and fetches again. Errors: [`Partition::replica_fetch`]'s, at
    /// once.
    #[allow(clippy::too_many_arguments)] // A follower fetch's fields, as Kafka's FetchParams.
    pub async fn replica_fetch_parked(
        &self,
        follower: NodeId,
        fetch_offset: Offset,
        last_fetched_epoch: Option<LeaderEpoch>,
        broker_epoch: Option<i64>,
        max_bytes: usize,
        min_bytes: usize,
        deadline: MonotonicTime,
        cancel: impl Future<Output = ()>,
    ) -> Result<ReplicaRead, PartitionError> {
        let mut cancel = pin!(cancel);
        let mut timer = None;
        loop {
            let written = self.written_moved.notified();
            let changed = self.high_watermark_moved.notified();
            let now = self.runtime.now();
            let read = self
                .replica_fetch(
                    follower,
                    fetch_offset,
                    last_fetched_epoch,
                    broker_epoch,
                    max_bytes,
                    now,
                )
                .await?;
            let bytes: usize = read.batches.iter().map(RecordBatch::len).sum();
            if bytes >= min_bytes.max(1)
                || read.diverging_epoch.is_some()
                || now >= deadline
                || self.closed.get()
            {
                return Ok(read);
            }
            let timer = timer
                .get_or_insert_with(|| self.runtime.sleep(deadline.saturating_duration_since(now)));
            // Woken: fetch again; cancelled or timed out: fetch once more and answer.
            let stop = future::or(
                async {
                    (&mut cancel).await;
                    true
                },
                future::or(
                    future::or(
                        async {
                            written.await;
                            false
                        },
                        async {
                            changed.await;
                            false
                        },
                    ),
                    async {
                        timer.await;
                        true
                    },
                ),
            )
            .await;
            if stop {
                return self
                    .replica_fetch(
                        follower,
                        fetch_offset,
                        last_fetched_epoch,
                        broker_epoch,
                        max_bytes,
                        self.runtime.now(),
                    )
                    .await;
            }
        }
    }

    /// A follower's append of what its fetch from the leader returned (Kafka's
    /// `ReplicaFetcherThread.processPartitionData`): `records` (possibly empty) are appended
    /// with the leader's offsets and epochs and written, then the high watermark becomes
    /// `min(leader_high_watermark, written offset)`, then the log start offset moves up to
    /// `leader_log_start_offset` when that is higher (Kafka's `maybeIncrementLogStartOffset`:
    /// DeleteRecords and retention on the leader reach its followers; -1, unknown, moves
    /// nothing). When this log is empty (just started at the leader's log start) and the
    /// first batch starts below its end but holds it (the leader's log start falls inside the
    /// batch), the log starts again at that batch's base and takes it whole, as Kafka's
    /// `appendRecordsToFollowerOrFutureReplica`; the leader's log start then moves the log
    /// start back up. Errors: [`PartitionError::NotLeaderOrFollower`] on a leader; storage's
    /// (`UnexpectedAppendOffset` when the records do not continue the log, invalid batches,
    /// I/O, closed); [`PartitionError::OffsetOutOfRange`] when the leader's log start offset
    /// is above this replica's new high watermark (as Kafka: the records are appended, the
    /// log start stays; the next fetch finds the leader's range).
    pub async fn append_as_follower(
        &self,
        records: Bytes,
        leader_high_watermark: Offset,
        leader_log_start_offset: Offset,
    ) -> Result<(), PartitionError> {
        self.follower_check()?;
        if !records.is_empty() {
            match self.log.append_as_follower(records.clone()).await {
                Ok(_) => {}
                Err(storage::StorageError::UnexpectedAppendOffset { .. })
                    if self.first_batch_straddles_empty_log(&records) =>
                {
                    // Kafka's `Partition.appendRecordsToFollowerOrFutureReplica`: a log just
                    // started at the leader's log start (DeleteRecords cut inside a batch)
                    // gets that batch whole, from its base: the log starts again there.
                    let base = BatchHeader::parse(&records)
                        .map_err(storage::StorageError::from)?
                        .base_offset;
                    self.truncate_fully_and_start_at(base).await?;
                    self.log.append_as_follower(records).await?;
                }
                Err(e) => return Err(e.into()),
            }
        }
        // The role may have changed while the records were written: a leader's HW is its own.
        self.follower_check()?;
        self.set_high_watermark(leader_high_watermark.min(self.log.written_offset()));
        if leader_log_start_offset > self.log.log_start_offset() {
            let high_watermark = self.log.high_watermark();
            if leader_log_start_offset > high_watermark {
                return Err(PartitionError::OffsetOutOfRange {
                    offset: leader_log_start_offset,
                    high_watermark,
                });
            }
            self.log
                .delete_records_before(leader_log_start_offset)
                .await?;
        }
        Ok(())
    }

    /// Whether this log is empty (log start = log end) and the first batch of `records` holds
    /// its log end offset but starts below it: the leader's log start, where the follower
    /// started, falls inside that batch.
    fn first_batch_straddles_empty_log(&self, records: &[u8]) -> bool {
        let (log_start, log_end) = (self.log.log_start_offset(), self.log.log_end_offset());
        BatchHeader::parse(records).is_ok_and(|h| {
            log_start == log_end && h.base_offset < log_end && h.last_offset() >= log_end
        })
    }

    /// A follower's answer to its leader's OFFSET_OUT_OF_RANGE for its fetch offset (its log
    /// end offset), given the leader's log start and log end offsets as ListOffsets answers a
    /// replica (Kafka's `AbstractFetcherThread.fetchOffsetAndTruncate`):
    /// - the leader's log end is below this log's end (an unclean election left the leader
    ///   shorter): truncate to the leader's log end — fully, starting there, when that is below
    ///   this log's start too (as Kafka's `truncateTo` below the first segment);
    /// - the leader's log start is above this log's end (this replica was away while the
    ///   leader's retention or DeleteRecords moved past it): truncate fully and start at the
    ///   leader's log start ([`PartitionStore::truncate_fully_and_start_at`]);
    /// - otherwise nothing: the next fetch goes on from this log's end.
    ///
    /// Returns the new log end offset, where the next fetch starts. Errors:
    /// [`PartitionError::NotLeaderOrFollower`] on a leader; storage's (I/O, closed; a negative
    /// leader offset is [`storage::StorageError::OffsetOutOfRange`]).
    pub async fn handle_out_of_range(
        &self,
        leader_log_start_offset: Offset,
        leader_log_end_offset: Offset,
    ) -> Result<Offset, PartitionError> {
        self.follower_check()?;
        let log_end = self.log.log_end_offset();
        if leader_log_end_offset < log_end {
            if leader_log_end_offset >= self.log.log_start_offset() {
                self.truncate_to(leader_log_end_offset).await?;
            } else {
                self.truncate_fully_and_start_at(leader_log_end_offset)
                    .await?;
            }
        } else if leader_log_start_offset > log_end {
            self.truncate_fully_and_start_at(leader_log_start_offset)
                .await?;
        }
        Ok(self.log.log_end_offset())
    }

    /// The log starts again, empty, at `offset` (see [`Partition::handle_out_of_range`]); the
    /// high watermark with it, waiters woken.
    async fn truncate_fully_and_start_at(&self, offset: Offset) -> Result<(), PartitionError> {
        self.log.truncate_fully_and_start_at(offset).await?;
        self.high_watermark_moved.notify_all();
        Ok(())
    }

    /// A follower's truncation on a diverging epoch `(epoch, end_offset)` from its leader
    /// (Kafka's `AbstractFetcherThread.getOffsetTruncationState`): when this log knows
    /// `epoch`, to `min(end_offset, its own end of epoch, log end)`; when its largest epoch
    /// ≤ `epoch` is older, to that epoch's end here (the next fetch finds the rest); when it
    /// knows no such epoch, to `min(end_offset, log end)`. Never simply to the high watermark
    /// (the KIP-101 loss). Returns the new log end offset. Errors:
    /// [`PartitionError::NotLeaderOrFollower`] on a leader; as [`Partition::truncate_to`].
    pub async fn truncate_to_diverging_epoch(
        &self,
        epoch: LeaderEpoch,
        end_offset: Offset,
    ) -> Result<Offset, PartitionError> {
        self.follower_check()?;
        let log_end = self.log.log_end_offset();
        let target = match self.log.end_offset_for_leader_epoch(epoch) {
            Some((local_epoch, local_end)) if local_epoch == epoch => {
                local_end.min(end_offset).min(log_end)
            }
            Some((_, local_end)) => local_end.min(log_end),
            None => end_offset.min(log_end),
        };
        self.truncate_to(target.max(self.log.log_start_offset()))
            .await?;
        Ok(self.log.log_end_offset())
    }

    fn follower_check(&self) -> Result<(), PartitionError> {
        match &*self.role.borrow() {
            Role::Leader(_) => Err(PartitionError::NotLeaderOrFollower {
                wanted: "a follower",
                leader: Some(self.node),
            }),
            Role::Follower { .. } => Ok(()),
        }
    }

    /// Batches from `from`, at most `max_bytes` (the first batch whole, KIP-74), below the
    /// high watermark or the log end as `isolation` says. Errors: `from` below the log start
    /// or above the log end ([`storage::StorageError::OffsetOutOfRange`]), I/O.
    pub async fn read(
        &self,
        from: Offset,
        max_bytes: usize,
        isolation: Isolation,
    ) -> Result<Read, PartitionError> {
        let upper_bound = match isolation {
            Isolation::HighWatermark => self.log.high_watermark(),
            Isolation::LogEnd => self.log.log_end_offset(),
        };
        let batches = self.log.read(from, max_bytes, upper_bound).await?;
        Ok(Read {
            high_watermark: self.log.high_watermark(),
            log_start_offset: self.log.log_start_offset(),
            batches,
        })
    }

    /// Waits until the high watermark passes `offset` (is above it), `deadline` comes,
    /// `cancel` resolves, or the partition closes, whichever is first.
    pub async fn wait_for_offset(
        &self,
        offset: Offset,
        deadline: MonotonicTime,
        cancel: impl Future<Output = ()>,
    ) -> WaitOutcome {
        let mut cancel = pin!(cancel);
        loop {
            let woken = self.high_watermark_moved.notified();
            if self.log.high_watermark() > offset {
                return WaitOutcome::Passed;
            }
            if self.closed.get() {
                return WaitOutcome::Closed;
            }
            let now = self.runtime.now();
            if now >= deadline {
                return WaitOutcome::DeadlinePassed;
            }
            let timer = self.runtime.sleep(deadline.saturating_duration_since(now));
            let cancelled = future::or(
                async {
                    (&mut cancel).await;
                    true
                },
                future::or(
                    async {
                        woken.await;
                        false
                    },
                    async {
                        timer.await;
                        false
                    },
                ),
            )
            .await;
            if cancelled {
                return WaitOutcome::Cancelled;
            }
        }
    }

    /// A consumer fetch of this partition, answered once: reads from `offset` (at most
    /// `max_bytes`, below the high watermark) and, while fewer than `min_bytes` (at least 1)
    /// came back, waits for the high watermark to move and reads again — until `deadline`, or
    /// until `cancel` resolves (the fetch has enough from other partitions), after which it
    /// reads once more and answers with whatever is there. Errors are [`Partition::read`]'s,
    /// answered at once.
    pub async fn fetch(
        &self,
        offset: Offset,
        max_bytes: usize,
        min_bytes: usize,
        deadline: MonotonicTime,
        cancel: impl Future<Output = ()>,
    ) -> Result<Read, PartitionError> {
        let mut cancel = pin!(cancel);
        loop {
            let high_watermark = self.log.high_watermark();
            let read = self
                .read(offset, max_bytes, Isolation::HighWatermark)
                .await?;
            if read.bytes() >= min_bytes.max(1) {
                return Ok(read);
            }
            match self
                .wait_for_offset(high_watermark, deadline, &mut cancel)
                .await
            {
                WaitOutcome::Passed => {}
                WaitOutcome::DeadlinePassed | WaitOutcome::Cancelled | WaitOutcome::Closed => {
                    if self.log.high_watermark() == high_watermark {
                        return Ok(read); // Nothing new to read.
                    }
                    return self.read(offset, max_bytes, Isolation::HighWatermark).await;
                }
            }
        }
    }

    /// ListOffsets, bounded as Kafka's `fetchOffsetForTimestamp`: for a client
    /// ([`Isolation::HighWatermark`]) by the high watermark, so an offset whose write has not
    /// completed is never handed out; for a replica ([`Isolation::LogEnd`], Kafka's follower
    /// asking its leader's range after OFFSET_OUT_OF_RANGE) by the log end offset, so latest
    /// is the log end offset. Errors: I/O.
    pub async fn list_offsets(
        &self,
        spec: OffsetSpec,
        isolation: Isolation,
    ) -> Result<ListedOffset, PartitionError> {
        let upper_bound = match isolation {
            Isolation::HighWatermark => self.log.high_watermark(),
            Isolation::LogEnd => self.log.log_end_offset(),
        };
        match spec {
            OffsetSpec::Latest => Ok(ListedOffset {
                offset: Some(upper_bound),
                timestamp: None,
            }),
            OffsetSpec::Earliest => Ok(ListedOffset {
                offset: Some(self.log.log_start_offset()),
                timestamp: None,
            }),
            OffsetSpec::MaxTimestamp => match self.log.max_timestamp().await? {
                // The index knows the batch; the record with that timestamp is inside it.
                Some((_, batch_base)) if batch_base >= upper_bound => Ok(ListedOffset::NONE),
                Some((ts, batch_base)) => {
                    let batches = self.log.read(batch_base, 1, upper_bound).await?;
                    let (offset, timestamp) = batches
                        .first()
                        .map_or((batch_base.0, ts.0), |b| first_offset_at_or_after(b, ts.0));
                    Ok(ListedOffset {
                        offset: Some(Offset(offset)),
                        timestamp: Some(TimestampMs(timestamp)),
                    })
                }
                None => Ok(ListedOffset::NONE),
            },
            OffsetSpec::Timestamp(target) => {
                match self.log.find_offset_by_timestamp(target).await? {
                    Some(m) => {
                        let (offset, ts) = first_offset_at_or_after(&m.batch, target.0);
                        if offset >= upper_bound.0 {
                            Ok(ListedOffset::NONE)
                        } else {
                            Ok(ListedOffset {
                                offset: Some(Offset(offset)),
                                timestamp: Some(TimestampMs(ts)),
                            })
                        }
                    }
                    None => Ok(ListedOffset::NONE),
                }
            }
        }
    }

    /// DeleteRecords (KIP-107): moves the log start offset to `before` (`None`: the high
    /// watermark); returns the new log start offset (Kafka's "low watermark"). Errors:
    /// [`PartitionError::OffsetOutOfRange`] for an offset that is negative or above the high
    /// watermark (as Kafka's `UnifiedLog.maybeIncrementLogStartOffset` callers), I/O.
    pub async fn delete_records(&self, before: Option<Offset>) -> Result<Offset, PartitionError> {
        let high_watermark = self.log.high_watermark();
        let offset = match before {
            None => high_watermark,
            Some(o) if o.0 < 0 || o > high_watermark => {
                return Err(PartitionError::OffsetOutOfRange {
                    offset: o,
                    high_watermark,
                })
            }
            Some(o) => o,
        };
        Ok(self.log.delete_records_before(offset).await?)
    }

    /// Removes every record at or after `offset` (whole batches), as a follower does to match
    /// its leader (KIP-279); the high watermark comes down with the log end. Errors: `offset`
    /// below the log start, I/O.
    /// On a leader the ISR state starts again from the new log end (its high watermark
    /// never regresses otherwise).
    pub async fn truncate_to(&self, offset: Offset) -> Result<(), PartitionError> {
        self.log.truncate_to(offset).await?;
        let log_end = self.log.log_end_offset();
        if self.log.high_watermark() > log_end {
            self.log.set_high_watermark(log_end);
            self.high_watermark_moved.notify_all();
        }
        let now_ms = millis(self.runtime.now());
        let mut role = self.role.borrow_mut();
        if let Role::Leader(isr) = &mut *role {
            let written = self.log.written_offset();
            if isr.leader_log_end_offset() > written {
                let leadership = Leadership {
                    leader_epoch: isr.leader_epoch(),
                    partition_epoch: isr.partition_epoch(),
                    replicas: isr.replicas().to_vec(),
                    isr: isr.isr(),
                };
                *isr = LeaderIsr::become_leader(
                    self.node,
                    isr.config(),
                    leadership,
                    written,
                    self.log.high_watermark(),
                    now_ms,
                )?;
            }
        }
        Ok(())
    }

    /// Marks the partition closed (its log was closed or discarded by the caller) and wakes
    /// every parked waiter, which answers with what it has.
    pub fn close_waiters(&self) {
        self.closed.set(true);
        self.high_watermark_moved.notify_all();
    }
}
