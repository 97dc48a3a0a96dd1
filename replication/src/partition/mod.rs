//! [`Partition`]: one partition as its owning shard serves it — the log, the replica set and
//! ISR, the leader epoch, the high watermark and the waiters parked on it (long-polling
//! fetches) — with the replication policy that decides when an append is acknowledged.
//!
//! Policy today (single node): the replica set and the ISR are this broker alone, the leader
//! epoch is 0, and the high watermark is the log's written offset. Invariants:
//! 1. `log_start ≤ high_watermark ≤ written ≤ log_end` (the log clamps the high watermark).
//! 2. Acknowledged means written (DESIGN.md §3): an append with `acks=1`/`all` is answered
//!    only once the O_DIRECT write of all its batches has completed (and the `fdatasync` after
//!    it where `flush.messages` is due); the high watermark moves only over written bytes, so a
//!    consumer never reads an offset a crash could hand to another record.
//! 3. Every move of the high watermark wakes the parked waiters; no timer polls.
//!
//! The partition reaches its log through [`PartitionStore`] and time and spawning through the
//! [`crate::runtime`] seam only, so the simulation in [`crate::sim`] drives it unchanged.
//! Everything runs on the owning shard's thread: `Rc`/`Cell`, no locks.

mod error;
mod isr;
mod leader_epoch;
mod records;
mod store;

pub use error::PartitionError;
pub use isr::{
    AckState, AlterOutcome, AlterPartitionProposal, AlterRefusal, FetchOutcome, FollowerState,
    IsrConfig, IsrError, LeaderIsr, Leadership,
};
pub use leader_epoch::{
    check_current_leader_epoch, fetch_requested_leader_epoch, list_offsets_leader_epoch,
    requested_leader_epoch, LeaderEpochError, OffsetNotAvailable, NO_LEADER_EPOCH,
};
pub use store::PartitionStore;

use crate::runtime::{MonotonicTime, NodeId, Runtime};
use bytes::Bytes;
use futures_lite::future;
use records::first_offset_at_or_after;
use std::cell::Cell;
use std::future::Future;
use std::pin::pin;
use std::rc::Rc;
use std::time::Duration;
use storage::{LeaderEpoch, Notify, Offset, PartitionLog, RecordBatch, TimestampMs};

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

/// What ListOffsets asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffsetSpec {
    /// The high watermark (Kafka's "latest").
    Latest,
    /// The log start offset.
    Earliest,
    /// The record with the largest timestamp (KIP-734).
    MaxTimestamp,
    /// The first record whose timestamp is ≥ this.
    Timestamp(TimestampMs),
}

/// ListOffsets' answer: `None` where no record matches (Kafka's -1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListedOffset {
    pub offset: Option<Offset>,
    pub timestamp: Option<TimestampMs>,
}

impl ListedOffset {
    const NONE: ListedOffset = ListedOffset {
        offset: None,
        timestamp: None,
    };
}

/// One partition on its owning shard. `S` is its log: storage's [`PartitionLog`] on a broker.
pub struct Partition<S = PartitionLog> {
    log: S,
    runtime: Rc<dyn Runtime>,
    /// The replicas (this broker alone today).
    replicas: Vec<NodeId>,
    /// The in-sync replicas: a subset of `replicas` holding the leader (this broker today).
    isr: Vec<NodeId>,
    leader_epoch: LeaderEpoch,
    /// Fired whenever the high watermark moves or the partition closes (invariant 3).
    high_watermark_moved: Rc<Notify>,
    closed: Cell<bool>,
}

impl<S: PartitionStore + 'static> Partition<S> {
    /// A partition led by `node`, its only replica and in-sync replica, at leader epoch 0,
    /// over `log` (already opened and recovered).
    pub fn new(log: S, node: NodeId, runtime: Rc<dyn Runtime>) -> Partition<S> {
        Partition {
            log,
            runtime,
            replicas: vec![node],
            isr: vec![node],
            leader_epoch: LeaderEpoch(0),
            high_watermark_moved: Rc::new(Notify::default()),
            closed: Cell::new(false),
        }
    }

    /// The log.
    pub fn log(&self) -> &S {
        &self.log
    }

    /// The replica set.
    pub fn replicas(&self) -> &[NodeId] {
        &self.replicas
    }

    /// The in-sync replicas.
    pub fn isr(&self) -> &[NodeId] {
        &self.isr
    }

    /// The current leader epoch.
    pub fn leader_epoch(&self) -> LeaderEpoch {
        self.leader_epoch
    }

    /// The high watermark: consumers read below it.
    pub fn high_watermark(&self) -> Offset {
        self.log.high_watermark()
    }

    /// Appends `records` (whole RecordBatch v2, already checked by the caller) and answers as
    /// `acks` asks: [`Acks::None`] once they are in the log's tail, [`Acks::Leader`] and
    /// [`Acks::All`] once their write has completed (and been synced where `flush.messages`
    /// is reached). `Acks::All` waits at most `timeout` (a zero timeout waits for the local
    /// write, as Kafka completes a one-replica ISR at once); `acks=1` always waits for the
    /// local write, as Kafka's synchronous local append does. Whatever the answer, the high
    /// watermark follows the write. An idempotent retry of a batch still in flight waits for
    /// the original's write (and sync) and gets its offsets.
    /// Errors: [`PartitionError::Storage`] (invalid batch, producer state, I/O, closed),
    /// [`PartitionError::RequestTimedOut`] (the records stay appended).
    pub async fn append(
        self: &Rc<Self>,
        records: Bytes,
        acks: Acks,
        timeout: Duration,
    ) -> Result<Appended, PartitionError> {
        let info = self.log.append(records, self.leader_epoch).await?;
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
        let written = self.await_written(end, synced);
        if acks == Acks::All && !timeout.is_zero() {
            let timed_out = async {
                self.runtime.sleep(timeout).await;
                None
            };
            match future::or(async { Some(written.await) }, timed_out).await {
                Some(result) => result?,
                None => {
                    // The write is still coming: the high watermark must follow it.
                    self.follow_write(end, synced);
                    return Err(PartitionError::RequestTimedOut { timeout });
                }
            }
        } else {
            written.await?;
        }
        Ok(appended)
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

    /// Single-node policy: the high watermark is the written offset (the ISR is this broker).
    /// Wakes the parked waiters when it moved.
    fn advance_high_watermark(&self) {
        let before = self.log.high_watermark();
        self.log.set_high_watermark(self.log.written_offset());
        if self.log.high_watermark() != before {
            self.high_watermark_moved.notify_all();
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

    /// ListOffsets, bounded by the high watermark as Kafka's `fetchOffsetForTimestamp`: an
    /// offset whose write has not completed is never handed out. Errors: I/O.
    pub async fn list_offsets(&self, spec: OffsetSpec) -> Result<ListedOffset, PartitionError> {
        let high_watermark = self.log.high_watermark();
        match spec {
            OffsetSpec::Latest => Ok(ListedOffset {
                offset: Some(high_watermark),
                timestamp: None,
            }),
            OffsetSpec::Earliest => Ok(ListedOffset {
                offset: Some(self.log.log_start_offset()),
                timestamp: None,
            }),
            OffsetSpec::MaxTimestamp => match self.log.max_timestamp().await? {
                // The index knows the batch; the record with that timestamp is inside it.
                Some((_, batch_base)) if batch_base >= high_watermark => Ok(ListedOffset::NONE),
                Some((ts, batch_base)) => {
                    let batches = self.log.read(batch_base, 1, high_watermark).await?;
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
                        if offset >= high_watermark.0 {
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
    pub async fn truncate_to(&self, offset: Offset) -> Result<(), PartitionError> {
        self.log.truncate_to(offset).await?;
        let log_end = self.log.log_end_offset();
        if self.log.high_watermark() > log_end {
            self.log.set_high_watermark(log_end);
            self.high_watermark_moved.notify_all();
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
