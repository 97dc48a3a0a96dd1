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
//! Files by role: this one holds the types, the role changes and the ISR proposals;
//! `produce` the leader's append and acknowledgement; `serve` the leader serving follower
//! fetches; `follower` the follower's appends, recoveries and truncation; `read` consumer
//! reads, ListOffsets and DeleteRecords.
//!
//! The partition reaches its log through [`PartitionStore`] and time and spawning through the
//! [`crate::runtime`] seam only, so the simulation (`crate::sim`) drives it unchanged.
//! Everything runs on the owning shard's thread: `Rc`/`Cell`, no locks.

mod error;
mod follower;
mod isr;
mod leader_epoch;
mod offsets;
mod produce;
mod read;
mod records;
mod serve;
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
use storage::{
    AppendUntil, BatchHeader, LeaderEpoch, Notify, Offset, PartitionLog, RecordBatch, TimestampMs,
    ValidatedBatches,
};

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
    /// Below the high watermark: what consumers see (`read_uncommitted`).
    HighWatermark,
    /// Below the last stable offset (KIP-98): what a `read_committed` consumer sees, with the
    /// aborted transactions of the range read.
    LastStable,
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
    /// The last stable offset (KIP-98) when read.
    pub last_stable_offset: Offset,
    pub log_start_offset: Offset,
    pub batches: Vec<RecordBatch>,
    /// For [`Isolation::LastStable`], the aborted transactions that may have records among
    /// `batches` (Kafka's `FetchDataInfo.abortedTransactions`); `None` for other reads.
    pub aborted: Option<Vec<storage::AbortedTxn>>,
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
    /// Fired whenever the high watermark moves, a transaction marker is appended (the last
    /// stable offset may move) or the partition closes (invariant 3).
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
        let leadership_epoch = leadership.leader_epoch;
        // A follower stops following before the awaits below, as Kafka removes the partition
        // from its fetcher before `makeLeader`: an answer of the old leader still on its way
        // is refused (`follower_check`, and a fetcher's epoch check sees the new epoch) rather
        // than appended after the new epoch's start — which removed that entry from the
        // leader-epoch cache again.
        if let Role::Follower {
            leader,
            leader_epoch,
        } = &mut *self.role.borrow_mut()
        {
            *leader = self.node;
            *leader_epoch = leadership_epoch;
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
            Role::Follower { leader_epoch, .. } if *leader_epoch > leadership.leader_epoch => {
                return Ok(()); // Made a follower at a newer epoch meanwhile.
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
        // Leader epochs only grow: an older leadership returned above.
        assert!(
            self.leader_epoch() >= leadership_epoch,
            "a leader epoch went back"
        );
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

    /// The futures waiting on this partition's signals now (tests: a fetch that answered, was
    /// cancelled or timed out leaves none behind).
    #[cfg(test)]
    pub(crate) fn waiting(&self) -> usize {
        self.high_watermark_moved.waiting() + self.written_moved.waiting()
    }

    /// The high watermark: consumers read below it.
    pub fn high_watermark(&self) -> Offset {
        self.log.high_watermark()
    }

    /// Marks the partition closed (its log was closed or discarded by the caller) and wakes
    /// every parked waiter, which answers with what it has.
    pub fn close_waiters(&self) {
        self.closed.set(true);
        self.high_watermark_moved.notify_all();
    }

    /// On a leader: the written offset is the leader's log end offset in the ISR state, and
    /// the log's high watermark is the ISR state's. Wakes the parked waiters when it moved.
    /// Nothing on a follower (its high watermark follows the leader's).
    fn advance_high_watermark(&self) {
        self.advance_high_watermark_to(self.log.written_offset());
    }

    /// [`Partition::advance_high_watermark`] with `written`, the log's written offset now
    /// (as an append that waited for its write returned it).
    fn advance_high_watermark_to(&self, written: Offset) {
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
        self.assert_offsets();
        if self.log.high_watermark() != before {
            self.high_watermark_moved.notify_all();
        }
    }

    /// Invariant 1 where the offsets change (every high watermark move, append and
    /// truncation) and where a read takes its bound from them: the high watermark never passes
    /// the written offset, nor the written offset the log end offset.
    fn assert_offsets(&self) {
        let high_watermark = self.log.high_watermark();
        let written = self.log.written_offset();
        let log_end = self.log.log_end_offset();
        assert!(
            high_watermark <= written,
            "invariant 1: high watermark {high_watermark:?} above written offset {written:?}"
        );
        assert!(
            written <= log_end,
            "invariant 1: written offset {written:?} above log end offset {log_end:?}"
        );
    }
}
