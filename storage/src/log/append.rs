//! The append path and the group-committed write path: check sizes and sequences (the batches
//! come validated, [`ValidatedBatches`]) and assign offsets, stamp the
//! batches into the in-memory tail and the batch cache, submit O_DIRECT writes (`pump`), wait
//! for them (`wait_written`) or also for a shared `fdatasync` (`flush_to`); disk reservation
//! and segment roll.

use super::{
    blocking_dir_op, reservation_target, sync_dir, AppendInfo, AppendUntil, PartitionLog, Shared,
    State, NEW_SEGMENT_EXT, SYNC_LATENCY_BUCKETS,
};
use crate::batch::{stamp_batch, BatchHeader, RecordBatch};
use crate::cache::CachedBatch;
use crate::error::{BatchError, Result, StorageError};
use crate::io::{
    align_up, remove_file, sleep, spawn_background, spawn_deferred, spawn_detached, DirectFile,
    ZeroWriteSlot, ZERO_WRITE_BYTES,
};
use crate::producer_state::{ProducerState, SequenceCheck};
use crate::segment::Segment;
use crate::txn::{control_batch_marker, TxnMarker};
use crate::txn_verification::VerificationGuard;
use crate::types::{LeaderEpoch, Offset, TimestampMs};
use crate::validated::ValidatedBatches;
use crate::writer::{WriteOp, Writer, ZeroOp};
use bytes::Bytes;
use std::rc::Rc;
use std::time::Instant;

impl PartitionLog {
    /// Waits until every record below `target` (capped at the log end) is written — the
    /// condition for acknowledging it (DESIGN.md §3) — and returns the written offset. Writes
    /// are group-committed, so every append waiting on one burst is released by the same
    /// write. Errors: the sticky write error of a failed write; [`StorageError::Closed`] when
    /// the log closes first.
    pub async fn wait_written(&self, target: Offset) -> Result<Offset> {
        loop {
            let notified = self.shared.notify.notified();
            {
                let st = self.shared.state.borrow();
                self.sticky_write_error(&st)?;
                if st.writer.written_offset >= target.min(st.log_end) {
                    return Ok(st.writer.written_offset);
                }
                if st.closed {
                    return Err(StorageError::Closed);
                }
            }
            notified.await;
        }
    }

    /// Appends `records` — one or more whole RecordBatch v2, as a produce request carries them
    /// for one partition — stamping `leader_epoch`: [`ValidatedBatches::validate`] then
    /// [`PartitionLog::append_validated`] until [`AppendUntil::InMemory`]. For callers that
    /// hold bytes (tests, tools); the broker checks a produce once on its own and appends the
    /// checked set. Errors: an invalid batch ([`StorageError::InvalidBatch`], nothing
    /// appended), else as `append_validated`.
    pub async fn append(&self, records: Bytes, leader_epoch: LeaderEpoch) -> Result<AppendInfo> {
        let batches = ValidatedBatches::validate(&records)?;
        self.append_validated(batches, leader_epoch, AppendUntil::InMemory)
            .await
    }

    /// Appends `batches` (checked once by [`ValidatedBatches::validate`]; not checked again),
    /// stamping `leader_epoch`, and returns, with what the caller acknowledges, once `until`
    /// holds: the batches are in the in-memory tail, or also written (and synced when
    /// [`AppendInfo::sync_needed`]) — one call to append and learn the written offset. All or
    /// nothing: a batch over `max.message.bytes` refuses the whole set with
    /// [`StorageError::InvalidBatch`]. Waits only while a roll runs or while more than
    /// `unwritten_bytes_max` bytes wait for the disk, and behind earlier calls that wait:
    /// appends take offsets in call order (invariant 5).
    /// Errors: too large, producer sequences, [`StorageError::DiskFull`] when a needed roll
    /// finds no space (nothing is appended; later appends retry), a sticky write error, closed
    /// log; with [`AppendUntil::Written`] also the write's or sync's error (the records stay
    /// appended).
    /// A `leader_epoch` newer than the leader-epoch cache's latest is assigned to it, starting
    /// at the first batch's base offset (the checkpoint is written in the background; see
    /// [`PartitionLog::leader_epochs`]).
    pub async fn append_validated(
        &self,
        batches: ValidatedBatches,
        leader_epoch: LeaderEpoch,
        until: AppendUntil,
    ) -> Result<AppendInfo> {
        let origin = match batches.origin() {
            crate::validated::AppendOrigin::Client => Origin::Leader(leader_epoch),
            crate::validated::AppendOrigin::Coordinator => Origin::Coordinator(leader_epoch),
        };
        let verification = batches.verification();
        let batches = batches.into_batches();
        let max_message_bytes = self.shared.config.borrow().max_message_bytes;
        // Kafka's LogValidator: markers come from the transaction coordinator only.
        if let Some((header, _)) = batches.iter().find(|(h, _)| h.is_control()) {
            return Err(StorageError::ControlBatchFromClient {
                base_offset: header.base_offset,
            });
        }
        for (_, bytes) in &batches {
            if bytes.len() > max_message_bytes {
                return Err(BatchError::TooLarge {
                    size: bytes.len(),
                    max: max_message_bytes,
                }
                .into());
            }
        }
        let mut info = self.append_batches(batches, origin, verification).await?;
        if until == AppendUntil::Written {
            self.wait_acknowledgeable(&mut info).await?;
        }
        Ok(info)
    }

    /// Waits until the records of `info` are written — and synced when
    /// [`AppendInfo::sync_needed`] — then sets its written and log start offsets to the log's.
    pub(super) async fn wait_acknowledgeable(&self, info: &mut AppendInfo) -> Result<()> {
        let end = info.last_offset.plus(1);
        if info.sync_needed {
            self.flush_to(end).await?;
        } else {
            self.wait_written(end).await?;
        }
        let st = self.shared.state.borrow();
        info.written_offset = st.writer.written_offset;
        info.log_start_offset = st.log_start;
        // Both waits return only once every record below `end` (capped at the log end) is
        // written, and a truncation since then moves the log end back too.
        assert!(
            info.written_offset >= end.min(st.log_end),
            "acknowledged records are written"
        );
        Ok(())
    }

    /// The append path shared by the leader's [`PartitionLog::append`] and the follower's
    /// [`PartitionLog::append_as_follower`]: `batches` are validated; waits for its turn, a
    /// roll or reservation, then appends them in memory. `verification`: the leader's
    /// KIP-890 check of transactional batches (see [`ValidatedBatches::verification`]).
    pub(super) async fn append_batches(
        &self,
        batches: Vec<(BatchHeader, Bytes)>,
        origin: Origin,
        verification: Option<VerificationGuard>,
    ) -> Result<AppendInfo> {
        let markers = control_markers(&batches)?;
        let total_bytes: u64 = batches.iter().map(|(_, b)| b.len() as u64).sum();
        let total_records: i64 = batches
            .iter()
            .map(|(h, _)| i64::from(h.records_count))
            .sum();
        let turn = AppendTurn::take(&self.shared);
        self.wait_for_room(&turn, total_bytes, total_records)
            .await?;
        // Checked and appended with no await in between, so no other append interleaves.
        if let Some(guard) = verification {
            self.check_verification(&batches, guard)?;
        }
        if let Some(original) = self.check_append(&batches, &markers, origin)? {
            return Ok(self.duplicate_info(original, &batches));
        }
        Ok(self.append_in_memory(batches, &markers, origin))
    }

    /// Waits until `turn` is the oldest append under way, the log is not busy and the unwritten
    /// bytes are within their bound, rolling the active segment when an append of
    /// `total_bytes` and `total_records` does not fit it (size, age or offset range) and
    /// reserving disk for it. Errors: an unusable log, a failed roll or reservation.
    async fn wait_for_room(
        &self,
        turn: &AppendTurn<'_>,
        total_bytes: u64,
        total_records: i64,
    ) -> Result<()> {
        loop {
            let (wait, roll, reserve) = {
                let st = self.shared.state.borrow();
                self.check_usable(&st)?;
                let my_turn = st.append_turns.front() == Some(&turn.ticket);
                let cfg = self.shared.config.borrow();
                let seg = &st.writer.segment;
                let size = seg.size_bytes.get();
                let aged = seg
                    .first_append
                    .get()
                    .is_some_and(|t| t.elapsed() >= cfg.segment_ms);
                let offsets_full =
                    st.log_end.0 + total_records - seg.base_offset.0 > i64::from(u32::MAX);
                let roll =
                    size > 0 && (size + total_bytes > cfg.segment_bytes || aged || offsets_full);
                let needed = align_up(size + total_bytes);
                let reserve = (needed > seg.reserved_bytes.get()).then_some(needed);
                (
                    !my_turn || st.busy || st.writer.unwritten_bytes > cfg.unwritten_bytes_max,
                    roll,
                    reserve,
                )
            };
            if wait {
                self.shared.notify.notified().await;
            } else if roll {
                self.roll().await?;
            } else if let Some(needed) = reserve {
                self.reserve(needed).await?;
            } else {
                return Ok(());
            }
        }
    }

    /// Checks that `batches` may go at the log end: the leader checks producers' sequences
    /// (returning the original of a retried batch); a follower checks that they continue the
    /// log. The caller appends with no await since.
    fn check_append(
        &self,
        batches: &[(BatchHeader, Bytes)],
        markers: &[Option<TxnMarker>],
        origin: Origin,
    ) -> Result<Option<crate::producer_state::BatchMeta>> {
        let st = self.shared.state.borrow();
        match origin {
            Origin::Leader(_) => check_sequences(&st.producers, st.log_end, batches, markers, true),
            Origin::Coordinator(_) => {
                check_sequences(&st.producers, st.log_end, batches, markers, false)
            }
            // The leader checked the sequences; a follower takes its batches as they are
            // (Kafka's REPLICATION origin), and only where they continue the log.
            Origin::Follower => {
                let got = batches[0].0.base_offset;
                if got < st.log_end {
                    return Err(StorageError::UnexpectedAppendOffset {
                        expected: st.log_end,
                        got,
                    });
                }
                Ok(None)
            }
        }
    }

    /// KIP-890 part 1 (Kafka's `UnifiedLog.analyzeAndValidateProducerState` for a client's
    /// append): a transactional data batch of a producer whose transaction is not open here
    /// goes in only with the guard of a verification still under way for it
    /// ([`StorageError::InvalidTxnState`], "Record was not part of an ongoing transaction");
    /// while one is under way, a batch with a higher sequence than the lowest one waiting for
    /// it is [`StorageError::OutOfOrderSequence`] (Kafka's `ProducerAppendInfo.checkSequence`).
    fn check_verification(
        &self,
        batches: &[(BatchHeader, Bytes)],
        guard: VerificationGuard,
    ) -> Result<()> {
        let st = self.shared.state.borrow();
        for (h, _) in batches {
            if !h.is_transactional() || h.is_control() || h.producer_id < 0 {
                continue;
            }
            if st
                .producers
                .has_ongoing_transaction(h.producer_id, h.producer_epoch)
            {
                continue;
            }
            if !st.verifications.guard(h.producer_id).verifies(guard) {
                return Err(StorageError::InvalidTxnState {
                    producer_id: h.producer_id,
                    why: "Record was not part of an ongoing transaction",
                });
            }
            if let Some(lowest) = st.verifications.lowest_sequence(h.producer_id) {
                if h.base_sequence > lowest {
                    return Err(StorageError::OutOfOrderSequence {
                        producer_id: h.producer_id,
                        expected: lowest,
                        got: h.base_sequence,
                    });
                }
            }
        }
        Ok(())
    }

    /// The answer to a retry of `original`, a batch already appended: nothing is appended.
    fn duplicate_info(
        &self,
        original: crate::producer_state::BatchMeta,
        batches: &[(BatchHeader, Bytes)],
    ) -> AppendInfo {
        let st = self.shared.state.borrow();
        AppendInfo {
            base_offset: original.base_offset,
            last_offset: original.last_offset,
            max_timestamp: batches[0].0.max_timestamp,
            log_append_time: None,
            flush_due: false,
            duplicate: true,
            // A retry of a batch still being synced waits for that sync as the original
            // does.
            sync_needed: self.shared.config.borrow().flush_messages != u64::MAX,
            written_offset: st.writer.written_offset,
            log_start_offset: st.log_start,
        }
    }

    /// Reserves disk so that the active segment can hold `needed` bytes (one fallocate, a
    /// preallocation step at a time). Appends wait meanwhile. Errors: `DiskFull` (nothing is
    /// appended by the caller; a later append tries again).
    async fn reserve(&self, needed: u64) -> Result<()> {
        self.acquire_busy().await?;
        let segment = self.shared.state.borrow().writer.segment.clone();
        let config = self.config();
        let mut result = Ok(());
        if needed > segment.reserved_bytes.get() {
            let target = reservation_target(needed, segment.reserved_bytes.get(), &config);
            result = match segment.file.preallocate(target).await {
                Ok(()) => Ok(target),
                // A whole step may not fit where the batch does.
                Err(StorageError::DiskFull { .. }) if target > needed => {
                    segment.file.preallocate(needed).await.map(|()| needed)
                }
                Err(e) => Err(e),
            }
            .map(|reserved| segment.reserved_bytes.set(reserved));
        }
        self.release_busy();
        result
    }

    /// Appends validated and checked `batches` (with `markers[i]` the marker of control batch
    /// `i`; `markers` is empty when no batch is a control batch) to the in-memory tail;
    /// producer state and the active segment's aborted-transaction index follow each batch.
    fn append_in_memory(
        &self,
        batches: Vec<(BatchHeader, Bytes)>,
        markers: &[Option<TxnMarker>],
        origin: Origin,
    ) -> AppendInfo {
        assert!(
            markers.is_empty() || markers.len() == batches.len(),
            "one marker slot per batch, or none"
        );
        let shared = &self.shared;
        let interval = shared.config.borrow().index_interval_bytes;
        let mut st = shared.state.borrow_mut();
        let first_base = match origin {
            Origin::Leader(_) | Origin::Coordinator(_) => st.log_end,
            Origin::Follower => batches[0].0.base_offset,
        };
        let mut max_timestamp = TimestampMs(i64::MIN);
        let mut records = 0u64;
        let log_append_time = self.append_time(origin);
        let mut epochs_changed = assign_leader_epoch(&mut st, origin, first_base);
        for (i, (header, bytes)) in batches.into_iter().enumerate() {
            let marker = markers.get(i).copied().flatten();
            // A follower keeps the leader's offsets, gaps of compaction included.
            let base = match origin {
                Origin::Leader(_) | Origin::Coordinator(_) => st.log_end,
                Origin::Follower => header.base_offset,
            };
            let (stamped, header) = match origin {
                Origin::Leader(epoch) | Origin::Coordinator(epoch) => {
                    stamp_leader_batch(&bytes, header, base, epoch, log_append_time)
                }
                Origin::Follower => {
                    epochs_changed |= assign_follower_epoch(&mut st, &header);
                    (RecordBatch::from_contiguous(bytes), header)
                }
            };
            push_batch(shared, &mut st, base, &header, stamped, marker, interval);
            max_timestamp = max_timestamp.max(header.max_timestamp);
            records += u64::from(header.records_count.unsigned_abs());
        }
        let cfg = shared.config.borrow();
        let (flush_due, arm_timer) =
            count_unflushed(&mut st, cfg.flush_messages, cfg.flush_ms, records);
        let info = AppendInfo {
            base_offset: first_base,
            last_offset: st.log_end.plus(-1),
            max_timestamp,
            log_append_time,
            flush_due,
            duplicate: false,
            sync_needed: flush_due,
            written_offset: st.writer.written_offset,
            log_start_offset: st.log_start,
        };
        if epochs_changed {
            st.epochs_dirty = true;
        }
        drop(cfg);
        drop(st);
        self.start_after_append(
            epochs_changed,
            flush_due,
            info.last_offset.plus(1),
            arm_timer,
        );
        info
    }

    /// The append time the leader stamps when the topic uses it; `None` for a follower, whose
    /// leader stamped it already.
    fn append_time(&self, origin: Origin) -> Option<TimestampMs> {
        match origin {
            Origin::Leader(_) | Origin::Coordinator(_) => self
                .shared
                .config
                .borrow()
                .log_append_time
                .then(wall_clock_ms),
            // The leader stamped the append time already.
            Origin::Follower => None,
        }
    }

    /// The work an append leaves to run after the state borrow is released: submitting the
    /// writes, writing the leader-epoch checkpoint when `epochs_changed`, a flush to `target`
    /// when `flush_due`, and the flush timer when `arm_timer` is set.
    fn start_after_append(
        &self,
        epochs_changed: bool,
        flush_due: bool,
        target: Offset,
        arm_timer: Option<std::time::Duration>,
    ) {
        pump(&self.shared);
        if epochs_changed {
            self.write_leader_epochs_in_background();
        }
        if flush_due {
            let log = self.clone();
            spawn_detached(async move {
                let _ = log.flush_to(target).await;
            });
        }
        if let Some(delay) = arm_timer {
            let log = self.clone();
            spawn_detached(async move {
                sleep(delay).await;
                log.shared.state.borrow_mut().flush_timer_armed = false;
                let target = log.log_end_offset();
                let _ = log.flush_to(target).await;
            });
        }
    }

    /// Waits until everything appended so far is on the device; returns the durable offset.
    pub async fn flush(&self) -> Result<Offset> {
        let target = self.log_end_offset();
        self.flush_to(target).await
    }

    /// Waits until every record below `target` is written and `fdatasync` has returned.
    /// Concurrent callers share syncs (group commit); flushes of different logs run in
    /// parallel on the shard's ring, so a shard groups them by awaiting them together.
    pub async fn flush_to(&self, target: Offset) -> Result<Offset> {
        loop {
            let notified = self.shared.notify.notified();
            let sync = {
                let mut st = self.shared.state.borrow_mut();
                self.sticky_write_error(&st)?;
                let target = target.min(st.log_end);
                if st.durable_offset >= target {
                    return Ok(st.durable_offset);
                }
                if st.closed {
                    return Err(StorageError::Closed);
                }
                if !st.syncing && st.writer.written_offset >= target {
                    st.syncing = true;
                    Some((st.writer.segment.clone(), st.writer.written_offset))
                } else {
                    None
                }
            };
            match sync {
                Some((segment, upto)) => {
                    let started = Instant::now();
                    let result = segment.file.fdatasync().await;
                    let took_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
                    let mut st = self.shared.state.borrow_mut();
                    st.syncing = false;
                    match result {
                        Ok(()) => {
                            st.durable_offset = st.durable_offset.max(upto);
                            self.bump_stats(|s| {
                                s.syncs += 1;
                                s.sync_latency_us_log2[log2_bucket(took_us)] += 1;
                            });
                        }
                        Err(e) => st.write_error = Some(("syncing", e.errno())),
                    }
                    drop(st);
                    self.shared.notify.notify_all();
                }
                None => notified.await,
            }
        }
    }

    /// Closes the active segment (index written, file cut to size, synced) and starts a new
    /// one at the log end offset. Nothing changes if the new segment cannot be created.
    pub async fn roll(&self) -> Result<()> {
        self.exclusive(async || {
            let (old, base) = {
                let st = self.shared.state.borrow();
                (st.writer.segment.clone(), st.log_end)
            };
            if old.size_bytes.get() == 0 {
                return Ok(());
            }
            let dir = &self.shared.dir;
            // The new segment is made under a temporary name and renamed only once the old
            // one is final (invariant 3): a crash in between leaves the old segment last, to
            // be recovered as the active one, and a stray `.log.new` that open removes.
            let path = Segment::path(dir, base, "log");
            let staging = Segment::path(dir, base, NEW_SEGMENT_EXT);
            let mut new_file = DirectFile::open(&staging, true).await?;
            let reserve = reservation_target(0, 0, &self.config());
            if let Err(e) = new_file.preallocate(reserve).await {
                let _ = new_file.close().await;
                remove_file(&staging).await?;
                return Err(e);
            }
            old.finish_time_index();
            old.save_index().await?;
            old.save_txn_index().await?;
            old.file.truncate(old.size_bytes.get()).await?;
            old.file.fdatasync().await?;
            // Producer state as of the new segment's base: a restart replays at most the
            // active segment to rebuild it.
            self.snapshot_producer_state().await?;
            // Recovery scans only the active segment: epochs starting in the old one must be
            // in the checkpoint before the old one is closed.
            self.leader_epochs_written().await?;
            new_file.rename(&path).await?;
            // The new name must be durable before any data of the new segment is.
            blocking_dir_op(dir, "syncing", sync_dir).await?;
            let segment = Rc::new(Segment::new(
                dir,
                base,
                new_file,
                0,
                Some(Default::default()),
            ));
            segment.reserved_bytes.set(reserve);
            segment.start_empty_txn_index();
            let mut st = self.shared.state.borrow_mut();
            st.segments.insert(base, segment.clone());
            st.writer = Writer::new(segment, 0, base, Vec::new());
            Ok(())
        })
        .await
    }
}

/// Drives the writes: schedules the submission of appended bytes, and starts a zero-ahead
/// write when one is due. Called after every append and every completed write.
fn pump(shared: &Rc<Shared>) {
    schedule_writes(shared);
    start_zero_ahead(shared);
}

/// Schedules a task that submits every write the writer allows once it runs. The writes'
/// contents are taken then, not now: the task runs after the tasks already runnable on this
/// shard, so the appends they make meanwhile join the same write (group commit) instead of
/// each rewriting the partial tail block in a write of its own. Their SQEs reach the kernel at
/// the same reactor poll either way.
fn schedule_writes(shared: &Rc<Shared>) {
    {
        let mut st = shared.state.borrow_mut();
        if st.write_error.is_some() || st.write_scheduled || !st.writer.has_unsubmitted() {
            return;
        }
        st.write_scheduled = true;
    }
    let shared = shared.clone();
    spawn_deferred(async move {
        shared.state.borrow_mut().write_scheduled = false;
        let mut first = None;
        while let Some(op) = take_write(&shared) {
            if first.is_none() {
                first = Some(op);
            } else {
                spawn_detached(run_write(shared.clone(), op));
            }
        }
        if let Some(op) = first {
            run_write(shared, op).await;
        }
    });
}

/// The next write the writer allows now, unless a write failed.
fn take_write(shared: &Shared) -> Option<WriteOp> {
    let mut st = shared.state.borrow_mut();
    if st.write_error.is_some() {
        return None;
    }
    let cfg = shared.config.borrow();
    st.writer
        .next_write(cfg.write_chunk_bytes, cfg.writes_in_flight_max)
}

/// Runs one data write, records its completion, and pumps again.
async fn run_write(shared: Rc<Shared>, op: WriteOp) {
    let WriteOp {
        segment,
        buffer,
        pos,
        end_pos,
    } = op;
    let len = buffer.len() as u64;
    let reused = buffer.reused();
    let started = Instant::now();
    let result = segment.file.write_pooled(buffer, pos).await;
    let took_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
    {
        let mut st = shared.state.borrow_mut();
        match result {
            Ok(()) if Rc::ptr_eq(&st.writer.segment, &segment) => st.writer.complete(end_pos),
            Ok(()) => {}
            Err(e) => st.write_error = Some(("writing", e.errno())),
        }
    }
    let mut s = shared.stats.get();
    s.writes += 1;
    s.write_bytes += len;
    if reused {
        s.write_buffers_reused += 1;
    } else {
        s.write_buffers_allocated += 1;
    }
    s.write_latency_us_log2[log2_bucket(took_us)] += 1;
    shared.stats.set(s);
    shared.notify.notify_all();
    pump(&shared);
}

/// Starts the zero-ahead write that is due, if any, in the storage background queue. None
/// starts while a maintenance operation runs (it waits for the one in flight: a roll or
/// truncation cuts the file), after the log closed, or while the executor has
/// `ZERO_WRITES_IN_FLIGHT_MAX` in flight (the log tries again at its next pump).
fn start_zero_ahead(shared: &Rc<Shared>) {
    let Some(slot) = ZeroWriteSlot::take() else {
        return;
    };
    let op = {
        let mut st = shared.state.borrow_mut();
        if st.write_error.is_some() || st.busy || st.closed {
            return;
        }
        let zero_ahead_bytes = shared.config.borrow().zero_ahead_bytes;
        st.writer.next_zero_write(zero_ahead_bytes)
    };
    let Some(ZeroOp { segment, pos }) = op else {
        return;
    };
    let shared = shared.clone();
    spawn_background(async move {
        let result = segment.file.write_zeros(pos).await;
        drop(slot);
        {
            let mut st = shared.state.borrow_mut();
            match result {
                Ok(()) if Rc::ptr_eq(&st.writer.segment, &segment) => {
                    st.writer.complete_zero_write();
                }
                Ok(()) => {}
                Err(e) => st.write_error = Some(("zeroing", e.errno())),
            }
        }
        let mut s = shared.stats.get();
        s.zero_ahead_writes += 1;
        s.zero_ahead_bytes += ZERO_WRITE_BYTES;
        shared.stats.set(s);
        shared.notify.notify_all();
        pump(&shared);
    });
}

/// The latency histogram bucket of `us` microseconds (see [`LogStats::sync_latency_us_log2`]).
fn log2_bucket(us: u64) -> usize {
    ((u64::BITS - us.leading_zeros()) as usize).min(SYNC_LATENCY_BUCKETS - 1)
}

/// Checks the batches of one append against the producers' sequences. `Ok(Some(batch))`: a
/// single retried batch, answered with its original offsets. A multi-batch append is checked
/// batch by batch as if the earlier ones were appended. Errors: out of order, a stale epoch, or a
/// retried batch among new ones.
fn check_sequences(
    producers: &ProducerState,
    log_end: Offset,
    batches: &[(BatchHeader, Bytes)],
    markers: &[Option<TxnMarker>],
    check_sequence_numbers: bool,
) -> Result<Option<crate::producer_state::BatchMeta>> {
    let refuse = |h: &BatchHeader, check: SequenceCheck| match check {
        SequenceCheck::Append | SequenceCheck::Duplicate(_) => StorageError::DuplicateSequence {
            producer_id: h.producer_id,
        },
        SequenceCheck::OutOfOrder { expected, got } => StorageError::OutOfOrderSequence {
            producer_id: h.producer_id,
            expected,
            got,
        },
        SequenceCheck::StaleEpoch { current, got } => StorageError::InvalidProducerEpoch {
            producer_id: h.producer_id,
            current,
            got,
        },
        SequenceCheck::InvalidTxnState(why) => StorageError::InvalidTxnState {
            producer_id: h.producer_id,
            why,
        },
        SequenceCheck::CoordinatorFenced { current, got } => {
            StorageError::TransactionCoordinatorFenced {
                producer_id: h.producer_id,
                current,
                got,
            }
        }
    };
    let check =
        |state: &ProducerState, header: &BatchHeader, marker: Option<&TxnMarker>| match marker {
            Some(marker) => state.check_marker(marker),
            None if check_sequence_numbers => state.check(header),
            None => state.check_epoch(header),
        };
    let marker_of = |i: usize| markers.get(i).and_then(Option::as_ref);
    if let [(header, _)] = batches {
        return match check(producers, header, marker_of(0)) {
            SequenceCheck::Append => Ok(None),
            SequenceCheck::Duplicate(original) => Ok(Some(original)),
            other => Err(refuse(header, other)),
        };
    }
    if batches
        .iter()
        .all(|(h, _)| h.producer_id < 0 && !h.is_transactional())
    {
        return Ok(None);
    }
    let mut tentative = producers.clone();
    let mut next = log_end;
    for (i, (header, _)) in batches.iter().enumerate() {
        let header = BatchHeader {
            base_offset: next,
            ..*header
        };
        match check(&tentative, &header, marker_of(i)) {
            SequenceCheck::Append => {
                tentative.record(&header, marker_of(i));
                next = header.last_offset().plus(1);
            }
            other => return Err(refuse(&header, other)),
        }
    }
    Ok(None)
}

/// Milliseconds since the Unix epoch, now.
fn wall_clock_ms() -> TimestampMs {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    TimestampMs(i64::try_from(since.as_millis()).unwrap_or(i64::MAX))
}

/// Each control batch's marker, parsed before anything is appended (KIP-98; `None` for a
/// data batch and for a control batch compaction emptied); empty (no allocation on the produce
/// path) when there is no control batch.
fn control_markers(batches: &[(BatchHeader, Bytes)]) -> Result<Vec<Option<TxnMarker>>> {
    let markers = if batches.iter().any(|(h, _)| h.is_control()) {
        batches
            .iter()
            .map(|(h, b)| {
                if h.is_control() {
                    control_batch_marker(b)
                } else {
                    Ok(None)
                }
            })
            .collect::<std::result::Result<Vec<_>, BatchError>>()?
    } else {
        Vec::new()
    };
    Ok(markers)
}

/// The leader's copy of a batch at `base`: offsets, `epoch` and the append time (when the
/// topic uses it) stamped into the bytes and the header.
fn stamp_leader_batch(
    bytes: &Bytes,
    header: BatchHeader,
    base: Offset,
    epoch: LeaderEpoch,
    log_append_time: Option<TimestampMs>,
) -> (RecordBatch, BatchHeader) {
    let stamped = stamp_batch(bytes, base, epoch, log_append_time);
    let header = BatchHeader {
        base_offset: base,
        partition_leader_epoch: epoch,
        max_timestamp: log_append_time.unwrap_or(header.max_timestamp),
        ..header
    };
    (stamped, header)
}

/// The leader's `epoch` into the leader-epoch cache from `first_base`, when `origin` is the
/// leader; whether the cache changed.
fn assign_leader_epoch(st: &mut State, origin: Origin, first_base: Offset) -> bool {
    let mut epochs_changed = false;
    if let Origin::Leader(epoch) | Origin::Coordinator(epoch) = origin {
        // Only a newer epoch starts an entry: the leader's own epoch is never older than
        // the cache's latest unless the caller is fenced, which is its check to make.
        if epoch.0 >= 0 && st.epochs.latest_epoch().is_none_or(|l| epoch > l) {
            epochs_changed = st.epochs.assign(epoch, first_base);
        }
    }
    epochs_changed
}

/// Counts `records` appended towards `flush_messages`: whether a flush is due now (the count
/// restarts), and the `flush_ms` delay when this append arms the flush timer.
fn count_unflushed(
    st: &mut State,
    flush_messages: u64,
    flush_ms: Option<std::time::Duration>,
    records: u64,
) -> (bool, Option<std::time::Duration>) {
    st.unflushed_records += records;
    let flush_due = st.unflushed_records >= flush_messages;
    if flush_due {
        st.unflushed_records = 0;
    }
    let arm_timer = flush_ms.filter(|_| !st.flush_timer_armed && !flush_due);
    if arm_timer.is_some() {
        st.flush_timer_armed = true;
    }
    (flush_due, arm_timer)
}

/// A replicated batch's epoch into the leader-epoch cache; whether the cache changed.
fn assign_follower_epoch(st: &mut State, header: &BatchHeader) -> bool {
    // Checked by `check_follower_batches` and `check_append` (`append_batches`) with no await
    // since (invariant 2: offsets stay contiguous).
    assert!(
        header.base_offset >= st.log_end,
        "replicated batch continues the log"
    );
    assert!(
        header.partition_leader_epoch.0 >= 0,
        "replicated batch has an epoch"
    );
    // Kafka's rules: a new epoch starts an entry; an older one removes the
    // entries it conflicts with.
    st.epochs
        .assign(header.partition_leader_epoch, header.base_offset)
}

/// Puts one stamped batch at `base` into the in-memory tail and the batch cache: producer
/// state, the active segment's indexes and size, and the log end follow it.
fn push_batch(
    shared: &Shared,
    st: &mut State,
    base: Offset,
    header: &BatchHeader,
    stamped: RecordBatch,
    marker: Option<TxnMarker>,
    interval: u64,
) {
    let completed = st.producers.record(header, marker.as_ref());
    if header.is_transactional() && header.producer_id >= 0 {
        // Its transaction is open here now, or over: a verification under way is spent
        // (Kafka's `UnifiedLog.updateProducers`).
        st.verifications.clear(header.producer_id);
    }
    let seg = st.writer.segment.clone();
    if let Some(entry) = completed.and_then(|c| c.aborted_entry()) {
        // The marker is in the active segment: its index is loaded.
        seg.push_aborted(entry);
    }
    let pos = seg.size_bytes.get();
    seg.note_batch(header, pos, interval);
    seg.size_bytes.set(pos + stamped.len() as u64);
    if seg.first_append.get().is_none() {
        seg.first_append.set(Some(Instant::now()));
    }
    let cached = CachedBatch {
        base_offset: base,
        last_offset: header.last_offset(),
        batch: stamped,
    };
    shared.cache.insert(shared.cache_id, cached.clone());
    st.writer.push(pos, cached);
    st.log_end = header.last_offset().plus(1);
}

/// Who appends: the leader (offsets and `partitionLeaderEpoch` are stamped, producers'
/// sequences checked) or a follower (the leader's batches kept exactly as they are).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Origin {
    /// A producer's append on the leader: sequences checked.
    Leader(LeaderEpoch),
    /// A coordinator's append on the leader (`AppendOrigin::Coordinator`): epochs checked only.
    Coordinator(LeaderEpoch),
    Follower,
}

/// An append's place in the queue of appends (invariant 5), held from its entry until it has
/// appended or failed; dropping it (also when the append's future is dropped) lets the next
/// one go.
struct AppendTurn<'a> {
    shared: &'a Shared,
    ticket: u64,
}

impl<'a> AppendTurn<'a> {
    fn take(shared: &'a Shared) -> AppendTurn<'a> {
        let mut st = shared.state.borrow_mut();
        let ticket = st.next_append_ticket;
        st.next_append_ticket += 1;
        st.append_turns.push_back(ticket);
        AppendTurn { shared, ticket }
    }
}

impl Drop for AppendTurn<'_> {
    fn drop(&mut self) {
        let others_wait = {
            let mut st = self.shared.state.borrow_mut();
            if let Some(i) = st.append_turns.iter().position(|t| *t == self.ticket) {
                st.append_turns.remove(i);
            }
            !st.append_turns.is_empty()
        };
        if others_wait {
            self.shared.notify.notify_all();
        }
    }
}
