//! `PartitionLog`: the log of one partition, owned by one shard (single-threaded, no locks).
//!
//! Data flow of an append: validate every batch (CRC-32C, magic, lengths, counts) → wait only
//! if a roll is under way or too many bytes are unwritten → assign offsets, stamp `baseOffset`
//! and `partitionLeaderEpoch` → insert into the segment's in-memory index, the write queue and
//! the shard's batch cache → return. Background tasks copy the queued bytes into aligned DMA
//! buffers and write them (group commit: appends that arrive while a write is in flight go out
//! together in the next one, so the partial tail block is written once per burst);
//! [`PartitionLog::wait_written`] waits for those writes — what an acknowledgement needs
//! (DESIGN.md §3: a completed O_DIRECT write outlives the process) — and
//! [`PartitionLog::flush_to`] also for one `fdatasync` shared by every concurrent flusher.
//!
//! Invariants:
//! 1. `log_start ≤ high_watermark ≤ written_offset ≤ log_end` (a reader below the high
//!    watermark never sees a byte a crash could take back), and
//!    `durable_offset ≤ written_offset`.
//! 2. Offsets are contiguous: the active segment's next offset is `log_end`.
//! 3. Only the last segment is written; every earlier segment was synced and truncated to its
//!    exact size before the next one was created (so a closed segment needs no recovery).
//! 4. Only one maintenance operation (roll, truncation, close) runs at a time (`busy`); appends
//!    wait for it.
//! 5. Appends take offsets in the order `append` was called (the order of a connection's
//!    produce requests): each takes a ticket on entry, and only the oldest waiting ticket may
//!    append, so a call that arrives just as a wait ends cannot overtake one that waited.

use crate::batch::{split_batches, stamp_batch, BatchHeader, RecordBatch, BATCH_HEADER_BYTES};
use crate::cache::{take_batches, BatchCache, CachedBatch, LogId};
use crate::checkpoint;
use crate::config::LogConfig;
use crate::error::{BatchError, Result, StorageError};
use crate::io::{
    align_down, align_up, remove_file, sleep, spawn_detached, DirectFile, Notify, BLOCK_BYTES,
    BLOCK_USIZE,
};
use crate::producer_state::{ProducerState, SequenceCheck};
use crate::segment::Segment;
use crate::types::{LeaderEpoch, Offset, TimestampMs};
use crate::writer::{WriteOp, Writer};
use bytes::Bytes;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Instant;

/// Extension of a segment being created by a roll, before it is renamed to `.log`.
const NEW_SEGMENT_EXT: &str = "log.new";
/// Extension of producer-state snapshots, named by the offset they were taken at.
const SNAPSHOT_EXT: &str = "snapshot";
/// Producer-state snapshots kept per partition.
const SNAPSHOTS_KEPT: usize = 3;
/// Name of the per-partition marker written after a clean close.
const CLEAN_SHUTDOWN_FILE: &str = "clean-shutdown";
/// Name of the log start offset checkpoint (Kafka: `log-start-offset-checkpoint`).
const LOG_START_CHECKPOINT_FILE: &str = "log-start-offset-checkpoint";
/// Smallest disk read of a cold fetch, in bytes.
const READ_CHUNK_MIN_BYTES: usize = 64 << 10;
/// Largest disk read of a cold fetch beyond the first batch, in bytes.
const READ_CHUNK_MAX_BYTES: usize = 8 << 20;

/// Buckets of [`LogStats::sync_latency_us_log2`]: up to 2^23 µs (~8 s).
pub const SYNC_LATENCY_BUCKETS: usize = 24;

/// What an append assigned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppendInfo {
    /// Offset of the first record of the first batch.
    pub base_offset: Offset,
    /// Offset of the last record of the last batch.
    pub last_offset: Offset,
    /// Largest max timestamp among the appended batches.
    pub max_timestamp: TimestampMs,
    /// The append time stamped into the batches, for LogAppendTime topics (the produce
    /// response's `log_append_time_ms`).
    pub log_append_time: Option<TimestampMs>,
    /// `flush.messages` was reached by this append: a flush started, and a caller following
    /// Kafka's semantics awaits [`PartitionLog::flush_to`]`(last_offset + 1)` before answering.
    pub flush_due: bool,
    /// The batch was a retry of one already in the log (idempotent producer): nothing was
    /// appended, and the offsets are the original ones.
    pub duplicate: bool,
}

/// The first batch holding a record with timestamp ≥ the target, from
/// [`PartitionLog::find_offset_by_timestamp`].
#[derive(Clone, Debug)]
pub struct TimestampMatch {
    /// The whole batch; records inside it before the target time are the caller's to skip
    /// (they need decompression for compressed batches).
    pub batch: RecordBatch,
    pub header: BatchHeader,
}

/// Counters of one log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogStats {
    /// Disk reads made by fetch-path reads (cache misses), and their bytes.
    pub dma_reads: u64,
    pub dma_read_bytes: u64,
    /// Bytes of log data read by `open` (the recovery scan of the active segment).
    pub open_read_bytes: u64,
    /// Whether `open` found the clean-shutdown marker and skipped the full tail scan.
    pub opened_clean: bool,
    /// Writes submitted and their bytes (including rewrites of the tail block).
    pub writes: u64,
    pub write_bytes: u64,
    /// Completed `fdatasync` calls on the log file.
    pub syncs: u64,
    /// `fdatasync` latency histogram: entry `i` counts syncs that took less than `2^i` µs
    /// (and at least `2^(i-1)`); the last entry also counts everything slower.
    pub sync_latency_us_log2: [u64; SYNC_LATENCY_BUCKETS],
    /// O_DIRECT write latency (submission to completion reaped), buckets as
    /// `sync_latency_us_log2`: what an acknowledgement waits for beyond the append.
    pub write_latency_us_log2: [u64; SYNC_LATENCY_BUCKETS],
}

struct State {
    segments: BTreeMap<Offset, Rc<Segment>>,
    writer: Writer,
    /// Idempotent producers' sequences (KIP-98).
    producers: ProducerState,
    log_start: Offset,
    log_end: Offset,
    high_watermark: Offset,
    durable_offset: Offset,
    syncing: bool,
    busy: bool,
    closed: bool,
    unflushed_records: u64,
    flush_timer_armed: bool,
    /// A failed data write or sync: sticky, since data in preallocated space cannot fail for
    /// lack of space, so the device is failing. Reads go on; appends and flushes get it.
    write_error: Option<(&'static str, i32)>,
    /// Tickets of the appends under way, oldest first (invariant 5); the next ticket to hand out.
    append_turns: VecDeque<u64>,
    next_append_ticket: u64,
}

struct Shared {
    dir: PathBuf,
    config: RefCell<LogConfig>,
    cache: BatchCache,
    cache_id: LogId,
    notify: Rc<Notify>,
    state: RefCell<State>,
    stats: Cell<LogStats>,
}

/// The log of one partition. Cloning gives another handle to the same log.
#[derive(Clone)]
pub struct PartitionLog {
    shared: Rc<Shared>,
}

impl PartitionLog {
    /// Opens the log in `dir` (created if missing), recovering the active segment: closed
    /// segments are opened without reading them; the active one is scanned from its last
    /// index entry after a clean close, or from its start otherwise, and cut at the first torn,
    /// zeroed or corrupt batch. Errors: I/O, [`StorageError::DiskFull`], corrupt checkpoint.
    pub async fn open(dir: &Path, config: LogConfig, cache: &BatchCache) -> Result<PartitionLog> {
        blocking_dir_op(dir, "creating", |d| std::fs::create_dir_all(d)).await?;
        let listing = list_dir(dir).await?;
        let mut bases: Vec<Offset> = listing
            .iter()
            .filter_map(|name| name.strip_suffix(".log")?.parse::<i64>().ok())
            .map(Offset)
            .collect();
        bases.sort();
        let clean = listing.iter().any(|n| n == CLEAN_SHUTDOWN_FILE);
        for stray in listing.iter().filter(|n| n.ends_with(NEW_SEGMENT_EXT)) {
            remove_file(&dir.join(stray)).await?;
        }
        let checkpoint_start = checkpoint::read(&dir.join(LOG_START_CHECKPOINT_FILE))
            .await?
            .and_then(|v| v.first().copied())
            .map(Offset);
        if bases.is_empty() {
            bases.push(checkpoint_start.unwrap_or_default());
        }
        let mut stats = LogStats {
            opened_clean: clean,
            ..LogStats::default()
        };
        let mut segments = BTreeMap::new();
        let last_base = *bases.last().expect("at least one segment");
        for &base in &bases[..bases.len() - 1] {
            let file = DirectFile::open(&Segment::path(dir, base, "log"), false).await?;
            let size = file.file_size().await?;
            segments.insert(base, Rc::new(Segment::new(dir, base, file, size, None)));
        }
        let active_path = Segment::path(dir, last_base, "log");
        let file = DirectFile::open(&active_path, true).await?;
        let file_size = file.file_size().await?;
        // After a clean close the saved index is trusted (loaded below); otherwise the scan
        // rebuilds it from nothing.
        let fresh_index = (!clean).then(Default::default);
        let active = Rc::new(Segment::new(dir, last_base, file, 0, fresh_index));
        let (from_pos, from_offset) = if clean {
            active.size_bytes.set(file_size);
            active.ensure_index().await?;
            active.last_index_entry()
        } else {
            (0, last_base)
        };
        let interval = config.index_interval_bytes;
        let scan = active
            .scan(from_pos, from_offset, file_size, interval)
            .await?;
        stats.open_read_bytes += scan.bytes_read;
        active.size_bytes.set(scan.end_pos);
        // Zero what follows the valid end (a torn batch, or stale data a later crash could
        // mistake for batches), give back the space after it, preallocate anew, and sync.
        let end = scan.end_pos;
        if end % BLOCK_BYTES != 0 {
            let mut block = active.file.alloc_write_buffer(BLOCK_USIZE);
            block.as_bytes_mut()[..scan.tail_block.len()].copy_from_slice(&scan.tail_block);
            active.file.write_at(block, align_down(end)).await?;
        }
        active.file.truncate(align_up(end)).await?;
        reserve_after_recovery(&active, end, &config).await?;
        active.file.fdatasync().await?;
        let log_end = scan.next_offset;
        segments.insert(last_base, active.clone());
        let first_base = *bases.first().expect("at least one segment");
        let log_start = checkpoint_start
            .map_or(first_base, |c| c.max(first_base))
            .min(log_end);
        if clean {
            // Durably gone before any append, so a later crash never trusts a stale index.
            remove_file(&dir.join(CLEAN_SHUTDOWN_FILE)).await?;
            blocking_dir_op(dir, "syncing", sync_dir).await?;
        }
        let writer = Writer::new(active, end, log_end, scan.tail_block);
        let cache_id = cache.register();
        let log = PartitionLog {
            shared: Rc::new(Shared {
                dir: dir.to_path_buf(),
                config: RefCell::new(config),
                cache: cache.clone(),
                cache_id,
                notify: Rc::new(Notify::default()),
                state: RefCell::new(State {
                    segments,
                    writer,
                    log_start,
                    log_end,
                    high_watermark: log_end,
                    durable_offset: log_end,
                    syncing: false,
                    busy: false,
                    closed: false,
                    unflushed_records: 0,
                    flush_timer_armed: false,
                    write_error: None,
                    append_turns: VecDeque::new(),
                    next_append_ticket: 0,
                    producers: ProducerState::default(),
                }),
                stats: Cell::new(stats),
            }),
        };
        log.rebuild_producer_state().await?;
        Ok(log)
    }

    /// Offsets of the producer-state snapshots in the partition directory, ascending.
    async fn snapshot_offsets(&self) -> Result<Vec<Offset>> {
        let listing = list_dir(&self.shared.dir).await?;
        let mut offsets: Vec<Offset> = listing
            .iter()
            .filter_map(|n| {
                n.strip_suffix(SNAPSHOT_EXT)?
                    .strip_suffix('.')?
                    .parse()
                    .ok()
            })
            .map(Offset)
            .collect();
        offsets.sort();
        Ok(offsets)
    }

    /// Rebuilds producer state from the newest snapshot at or below the log end plus the
    /// batches after it; snapshots beyond the log end (a crash or truncation cut them off) are
    /// removed.
    async fn rebuild_producer_state(&self) -> Result<()> {
        let (log_start, log_end) = (self.log_start_offset(), self.log_end_offset());
        let snapshots = self.snapshot_offsets().await?;
        for stale in snapshots.iter().filter(|o| **o > log_end) {
            remove_file(&self.snapshot_path(*stale)).await?;
        }
        let mut state = ProducerState::default();
        let mut from = log_start;
        if let Some(&at) = snapshots.iter().rev().find(|o| **o <= log_end) {
            let path = self.snapshot_path(at);
            match checkpoint::read(&path)
                .await?
                .and_then(|v| ProducerState::decode(&v))
            {
                Some(s) => {
                    state = s;
                    from = at.max(log_start);
                }
                None => {
                    tracing::warn!(path = %path.display(), "unreadable producer snapshot; replaying the log")
                }
            }
        }
        let mut offset = from;
        while offset < log_end {
            let batches = self.read(offset, 1 << 20, log_end).await?;
            let Some(last) = batches.last() else { break };
            for b in &batches {
                state.record(&b.header());
            }
            offset = last.header().last_offset().plus(1);
        }
        self.shared.state.borrow_mut().producers = state;
        Ok(())
    }

    fn snapshot_path(&self, offset: Offset) -> PathBuf {
        self.shared.dir.join(format!(
            "{}.{SNAPSHOT_EXT}",
            crate::segment::file_stem(offset)
        ))
    }

    /// Writes the producer state as of the log end (`<log end>.snapshot`) and keeps only the
    /// newest [`SNAPSHOTS_KEPT`] snapshots.
    async fn snapshot_producer_state(&self) -> Result<()> {
        let (at, values) = {
            let st = self.shared.state.borrow();
            (st.log_end, st.producers.encode())
        };
        checkpoint::write(&self.snapshot_path(at), &values).await?;
        let snapshots = self.snapshot_offsets().await?;
        let excess = snapshots.len().saturating_sub(SNAPSHOTS_KEPT);
        for old in &snapshots[..excess] {
            remove_file(&self.snapshot_path(*old)).await?;
        }
        Ok(())
    }

    /// The partition directory.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// First offset still in the log.
    pub fn log_start_offset(&self) -> Offset {
        self.shared.state.borrow().log_start
    }

    /// Log end offset (LEO): the offset the next appended record gets.
    pub fn log_end_offset(&self) -> Offset {
        self.shared.state.borrow().log_end
    }

    /// High watermark: moved by the caller (the leader, from follower LEOs; single node: the
    /// written offset).
    pub fn high_watermark(&self) -> Offset {
        self.shared.state.borrow().high_watermark
    }

    /// Moves the high watermark, clamped to `[log_start, written_offset]` (invariant 1: never
    /// past bytes whose write has not completed).
    pub fn set_high_watermark(&self, hw: Offset) {
        let mut st = self.shared.state.borrow_mut();
        st.high_watermark = hw.min(st.writer.written_offset).max(st.log_start);
    }

    /// Offset below which every record's O_DIRECT write has completed: those records survive
    /// a crash of the process (not necessarily a power loss: see [`PartitionLog::durable_offset`]).
    pub fn written_offset(&self) -> Offset {
        self.shared.state.borrow().writer.written_offset
    }

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
                if let Some((op, errno)) = st.write_error {
                    return Err(StorageError::io(
                        op,
                        &self.shared.dir,
                        std::io::Error::from_raw_os_error(errno),
                    ));
                }
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

    /// Offset below which every record is on the device (fdatasync returned).
    pub fn durable_offset(&self) -> Offset {
        self.shared.state.borrow().durable_offset
    }

    /// Bytes of all segments.
    pub fn size_bytes(&self) -> u64 {
        let st = self.shared.state.borrow();
        st.segments.values().map(|s| s.size_bytes.get()).sum()
    }

    /// Number of segments (closed and active).
    pub fn segment_count(&self) -> usize {
        self.shared.state.borrow().segments.len()
    }

    /// Counters of this log.
    pub fn stats(&self) -> LogStats {
        self.shared.stats.get()
    }

    /// The current configuration.
    pub fn config(&self) -> LogConfig {
        self.shared.config.borrow().clone()
    }

    /// Replaces the configuration (IncrementalAlterConfigs). Applies from the next append or
    /// retention pass; an existing active segment keeps its preallocated size.
    pub fn set_config(&self, config: LogConfig) {
        *self.shared.config.borrow_mut() = config;
    }

    /// Appends `records` — one or more whole RecordBatch v2, as a produce request carries them
    /// for one partition — stamping `leader_epoch`. All or nothing: any invalid batch refuses
    /// the whole set with [`StorageError::InvalidBatch`]. Returns once the batches are in the
    /// in-memory tail: before acknowledging them call [`PartitionLog::wait_written`] (the write
    /// completed) or [`PartitionLog::flush_to`] (also synced). Waits only while a
    /// roll runs or while more than `unwritten_bytes_max` bytes wait for the disk, and behind
    /// earlier calls that wait: appends take offsets in call order (invariant 5).
    /// Errors: invalid batch, [`StorageError::DiskFull`] when a needed roll finds no space
    /// (nothing is appended; later appends retry), a sticky write error, closed log.
    pub async fn append(&self, records: Bytes, leader_epoch: LeaderEpoch) -> Result<AppendInfo> {
        let batches = split_batches(&records)?;
        let max_message_bytes = self.shared.config.borrow().max_message_bytes;
        for (_, bytes) in &batches {
            if bytes.len() > max_message_bytes {
                return Err(BatchError::TooLarge {
                    size: bytes.len(),
                    max: max_message_bytes,
                }
                .into());
            }
        }
        let total_bytes: u64 = batches.iter().map(|(_, b)| b.len() as u64).sum();
        let total_records: i64 = batches
            .iter()
            .map(|(h, _)| i64::from(h.records_count))
            .sum();
        let turn = AppendTurn::take(&self.shared);
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
                break;
            }
        }
        // Checked and appended with no await in between, so no other append interleaves.
        let duplicate = {
            let st = self.shared.state.borrow();
            check_sequences(&st.producers, st.log_end, &batches)?
        };
        if let Some(original) = duplicate {
            return Ok(AppendInfo {
                base_offset: original.base_offset,
                last_offset: original.last_offset,
                max_timestamp: batches[0].0.max_timestamp,
                log_append_time: None,
                flush_due: false,
                duplicate: true,
            });
        }
        Ok(self.append_in_memory(batches, leader_epoch))
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

    /// Waits until no maintenance operation runs, then marks one running (invariant 4).
    async fn acquire_busy(&self) -> Result<()> {
        loop {
            let notified = self.shared.notify.notified();
            {
                let mut st = self.shared.state.borrow_mut();
                self.check_usable(&st)?;
                if !st.busy {
                    st.busy = true;
                    break;
                }
            }
            notified.await;
        }
        Ok(())
    }

    /// Ends the maintenance operation started by [`PartitionLog::acquire_busy`].
    fn release_busy(&self) {
        self.shared.state.borrow_mut().busy = false;
        self.shared.notify.notify_all();
    }

    fn append_in_memory(
        &self,
        batches: Vec<(BatchHeader, Bytes)>,
        epoch: LeaderEpoch,
    ) -> AppendInfo {
        let shared = &self.shared;
        let interval = shared.config.borrow().index_interval_bytes;
        let mut st = shared.state.borrow_mut();
        let first_base = st.log_end;
        let mut max_timestamp = TimestampMs(i64::MIN);
        let mut records = 0u64;
        let log_append_time = shared.config.borrow().log_append_time.then(wall_clock_ms);
        for (header, bytes) in batches {
            let base = st.log_end;
            let stamped = stamp_batch(&bytes, base, epoch, log_append_time);
            let header = BatchHeader {
                base_offset: base,
                partition_leader_epoch: epoch,
                max_timestamp: log_append_time.unwrap_or(header.max_timestamp),
                ..header
            };
            st.producers.record(&header);
            let seg = st.writer.segment.clone();
            let pos = seg.size_bytes.get();
            seg.note_batch(&header, pos, interval);
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
            max_timestamp = max_timestamp.max(header.max_timestamp);
            records += u64::from(header.records_count.unsigned_abs());
        }
        let cfg = shared.config.borrow();
        st.unflushed_records += records;
        let flush_due = st.unflushed_records >= cfg.flush_messages;
        if flush_due {
            st.unflushed_records = 0;
        }
        let arm_timer = cfg.flush_ms.filter(|_| !st.flush_timer_armed && !flush_due);
        if arm_timer.is_some() {
            st.flush_timer_armed = true;
        }
        let info = AppendInfo {
            base_offset: first_base,
            last_offset: st.log_end.plus(-1),
            max_timestamp,
            log_append_time,
            flush_due,
            duplicate: false,
        };
        drop(cfg);
        drop(st);
        pump(shared);
        if flush_due {
            let log = self.clone();
            let target = info.last_offset.plus(1);
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
        info
    }

    fn check_usable(&self, st: &State) -> Result<()> {
        if st.closed {
            return Err(StorageError::Closed);
        }
        if let Some((op, errno)) = st.write_error {
            return Err(StorageError::io(
                op,
                &self.shared.dir,
                std::io::Error::from_raw_os_error(errno),
            ));
        }
        Ok(())
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
                if let Some((op, errno)) = st.write_error {
                    return Err(StorageError::io(
                        op,
                        &self.shared.dir,
                        std::io::Error::from_raw_os_error(errno),
                    ));
                }
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
                        Err(e) => st.write_error = Some(("syncing", errno_of(&e))),
                    }
                    drop(st);
                    self.shared.notify.notify_all();
                }
                None => notified.await,
            }
        }
    }

    fn bump_stats(&self, f: impl FnOnce(&mut LogStats)) {
        let mut s = self.shared.stats.get();
        f(&mut s);
        self.shared.stats.set(s);
    }

    /// Runs `op` as the only maintenance operation (invariant 4), after every appended byte
    /// is written and synced.
    async fn exclusive<T>(&self, op: impl AsyncFnOnce() -> Result<T>) -> Result<T> {
        self.acquire_busy().await?;
        let result = async {
            self.flush().await?;
            op().await
        }
        .await;
        self.release_busy();
        result
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
            old.file.truncate(old.size_bytes.get()).await?;
            old.file.fdatasync().await?;
            // Producer state as of the new segment's base: a restart replays at most the
            // active segment to rebuild it.
            self.snapshot_producer_state().await?;
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
            let mut st = self.shared.state.borrow_mut();
            st.segments.insert(base, segment.clone());
            st.writer = Writer::new(segment, 0, base, Vec::new());
            Ok(())
        })
        .await
    }

    /// Reads whole batches starting with the one holding `offset`, totalling at most
    /// `max_bytes` except that the first batch always comes whole (KIP-74), and only batches
    /// whose last offset is below `upper_bound` (the high watermark for consumers, the log end
    /// for followers). Served from the batch cache or the write queue when the offset is
    /// recent; otherwise one or more aligned DMA reads of the segment. The `Bytes` returned
    /// share the cache's or the read buffer's memory: no record byte is copied.
    /// Errors: [`StorageError::OffsetOutOfRange`] below the log start or above the log end;
    /// reading at the log end returns no batches.
    pub async fn read(
        &self,
        offset: Offset,
        max_bytes: usize,
        upper_bound: Offset,
    ) -> Result<Vec<RecordBatch>> {
        let (segment, readable_end) = {
            let st = self.shared.state.borrow();
            if offset < st.log_start || offset > st.log_end {
                return Err(StorageError::OffsetOutOfRange {
                    offset,
                    log_start: st.log_start,
                    log_end: st.log_end,
                });
            }
            if offset == st.log_end || offset >= upper_bound {
                return Ok(Vec::new());
            }
            if let Some(hit) =
                self.shared
                    .cache
                    .read(self.shared.cache_id, offset, max_bytes, upper_bound)
            {
                return Ok(hit);
            }
            let pending = &st.writer.pending;
            if pending
                .front()
                .is_some_and(|p| p.batch.base_offset <= offset)
            {
                let start = pending.partition_point(|p| p.batch.last_offset < offset);
                return Ok(take_batches(
                    pending.range(start..).map(|p| &p.batch),
                    max_bytes,
                    upper_bound,
                ));
            }
            let (_, segment) = st
                .segments
                .range(..=offset)
                .next_back()
                .expect("a segment starts at or below every offset ≥ log start");
            let readable_end = if Rc::ptr_eq(segment, &st.writer.segment) {
                (st.writer.written_pos, true)
            } else {
                (segment.size_bytes.get(), false)
            };
            (segment.clone(), readable_end)
        };
        self.read_segment(&segment, offset, max_bytes, upper_bound, readable_end)
            .await
    }

    async fn read_segment(
        &self,
        segment: &Segment,
        offset: Offset,
        max_bytes: usize,
        upper_bound: Offset,
        (readable_end, at_write_frontier): (u64, bool),
    ) -> Result<Vec<RecordBatch>> {
        let mut pos = segment.position_for(offset).await?;
        let mut out = Vec::new();
        let mut total = 0usize;
        let mut want = max_bytes.clamp(READ_CHUNK_MIN_BYTES, READ_CHUNK_MAX_BYTES);
        while pos < readable_end && out.is_empty() {
            let chunk_start = align_down(pos);
            let len =
                usize::try_from(align_up((pos + want as u64).min(readable_end)) - chunk_start)
                    .unwrap_or(usize::MAX);
            let data = segment.file.read_aligned(chunk_start, len).await?;
            self.bump_stats(|s| {
                s.dma_reads += 1;
                s.dma_read_bytes += data.len() as u64;
            });
            let avail =
                usize::try_from((chunk_start + data.len() as u64).min(readable_end) - chunk_start)
                    .unwrap_or(0);
            let chunk_reaches_end = chunk_start + data.len() as u64 >= readable_end;
            let mut at = usize::try_from(pos - chunk_start).unwrap_or(usize::MAX);
            loop {
                if at >= avail {
                    break;
                }
                // A batch (or its header) that runs past the bytes read: read on if the segment
                // has more; at the end of a closed segment it is damage, while in the active
                // segment it is still being written, so the read stops there with what it has.
                let header_fits = at + BATCH_HEADER_BYTES <= avail;
                let size = if header_fits {
                    BatchHeader::parse(&data[at..avail])
                        .map_err(|e| self.corrupt(segment, pos, e))?
                        .size_bytes()
                } else {
                    BATCH_HEADER_BYTES
                };
                if !header_fits || at + size > avail {
                    if chunk_reaches_end {
                        if at_write_frontier {
                            return Ok(out);
                        }
                        let have = avail - at;
                        return Err(self.corrupt(
                            segment,
                            pos,
                            BatchError::Truncated { have, need: size },
                        ));
                    }
                    want = want.max(size + BLOCK_USIZE);
                    break;
                }
                let header = BatchHeader::parse(&data[at..avail])
                    .map_err(|e| self.corrupt(segment, pos, e))?;
                if header.last_offset() >= offset {
                    if header.last_offset() >= upper_bound
                        || (!out.is_empty() && total + size > max_bytes)
                    {
                        return Ok(out);
                    }
                    let batch = data.slice(at..at + size);
                    crate::batch::validate_batch(&batch)
                        .map_err(|e| self.corrupt(segment, pos, e))?;
                    total += size;
                    out.push(RecordBatch::from_contiguous(batch));
                }
                at += size;
                pos += size as u64;
            }
        }
        Ok(out)
    }

    fn corrupt(&self, segment: &Segment, pos: u64, e: BatchError) -> StorageError {
        StorageError::Corrupt {
            path: Segment::path(&self.shared.dir, segment.base_offset, "log"),
            why: format!("batch at byte {pos}: {e}"),
        }
    }

    /// The first batch whose max timestamp is ≥ `target` (ListOffsets by timestamp), found via
    /// the segments' max timestamps and time indexes, then a short scan; `None` when no record
    /// is that recent.
    pub async fn find_offset_by_timestamp(
        &self,
        target: TimestampMs,
    ) -> Result<Option<TimestampMatch>> {
        let segments: Vec<Rc<Segment>> = self
            .shared
            .state
            .borrow()
            .segments
            .values()
            .cloned()
            .collect();
        for segment in segments {
            let Some((max, _)) = segment.max_timestamp().await? else {
                continue;
            };
            if max < target {
                continue;
            }
            let mut offset = segment
                .offset_for_time(target)
                .await?
                .max(self.log_start_offset());
            loop {
                let end = self.log_end_offset();
                if offset >= end {
                    break;
                }
                let batches = self.read(offset, 1 << 20, end).await?;
                if batches.is_empty() {
                    break;
                }
                for batch in batches {
                    let header = batch.header();
                    if header.max_timestamp >= target {
                        return Ok(Some(TimestampMatch { batch, header }));
                    }
                    offset = header.last_offset().plus(1);
                }
            }
        }
        Ok(None)
    }

    /// The largest timestamp in the log and the base offset of its batch (ListOffsets
    /// `MAX_TIMESTAMP`, KIP-734), loading closed segments' time indexes as needed.
    pub async fn max_timestamp(&self) -> Result<Option<(TimestampMs, Offset)>> {
        let segments: Vec<Rc<Segment>> = self
            .shared
            .state
            .borrow()
            .segments
            .values()
            .cloned()
            .collect();
        let mut best: Option<(TimestampMs, Offset)> = None;
        for segment in segments {
            if let Some(m) = segment.max_timestamp().await? {
                if best.is_none_or(|b| m.0 > b.0) {
                    best = Some(m);
                }
            }
        }
        Ok(best)
    }

    /// Removes every record at or after `offset` (a follower truncating to the leader's log,
    /// KIP-101/279). If `offset` falls inside a batch, the whole batch goes, so the new log end
    /// is that batch's base offset. Errors: `offset` below the log start.
    pub async fn truncate_to(&self, offset: Offset) -> Result<()> {
        {
            let st = self.shared.state.borrow();
            if offset >= st.log_end {
                return Ok(());
            }
            if offset < st.log_start {
                return Err(StorageError::OffsetOutOfRange {
                    offset,
                    log_start: st.log_start,
                    log_end: st.log_end,
                });
            }
        }
        self.exclusive(async || {
            let (target, doomed) = {
                let st = self.shared.state.borrow();
                let (_, target) = st
                    .segments
                    .range(..=offset)
                    .next_back()
                    .expect("segment at or below offset");
                let doomed: Vec<Rc<Segment>> = st
                    .segments
                    .range(target.base_offset.plus(1)..)
                    .map(|(_, s)| s.clone())
                    .collect();
                (target.clone(), doomed)
            };
            let cut = self.position_of_batch_holding(&target, offset).await?;
            let interval = self.shared.config.borrow().index_interval_bytes;
            target.truncate_index(cut.1);
            let (from_pos, from_offset) = target.last_index_entry();
            let scan = target.scan(from_pos, from_offset, cut.0, interval).await?;
            assert_eq!(scan.end_pos, cut.0, "truncation point is a batch boundary");
            // Later segments go first, newest first, durably: a crash part-way leaves a shorter
            // suffix of whole segments, and the target, now last, is recovered as the active
            // segment. Readers holding them keep their open files.
            for s in doomed.iter().rev() {
                self.remove_segment_files(s.base_offset).await?;
            }
            if !doomed.is_empty() {
                blocking_dir_op(&self.shared.dir, "syncing", sync_dir).await?;
            }
            let mut block = target.file.alloc_write_buffer(BLOCK_USIZE);
            block.as_bytes_mut()[..scan.tail_block.len()].copy_from_slice(&scan.tail_block);
            if cut.0 % BLOCK_BYTES != 0 {
                target.file.write_at(block, align_down(cut.0)).await?;
            }
            target.file.truncate(align_up(cut.0)).await?;
            let config = self.config();
            reserve_after_recovery(&target, cut.0, &config).await?;
            target.file.fdatasync().await?;
            target.size_bytes.set(cut.0);
            {
                let mut st = self.shared.state.borrow_mut();
                for s in &doomed {
                    st.segments.remove(&s.base_offset);
                }
                st.writer = Writer::new(target.clone(), cut.0, cut.1, scan.tail_block);
                st.log_end = cut.1;
                // A batch straddling the log start may take the log start down with it; the
                // log is then empty at its new end.
                st.log_start = st.log_start.min(cut.1);
                st.high_watermark = st.high_watermark.min(cut.1);
                st.durable_offset = st.durable_offset.min(cut.1);
            }
            self.shared.cache.truncate_from(self.shared.cache_id, cut.1);
            if self.log_start_offset() == cut.1 {
                checkpoint::write(
                    &self.shared.dir.join(LOG_START_CHECKPOINT_FILE),
                    &[cut.1 .0],
                )
                .await?;
            }
            // Batches past the cut are gone: rebuild from a snapshot at or below it.
            self.rebuild_producer_state().await?;
            Ok(())
        })
        .await
    }

    /// (byte position, base offset) of the batch holding `offset` in `segment`.
    async fn position_of_batch_holding(
        &self,
        segment: &Segment,
        offset: Offset,
    ) -> Result<(u64, Offset)> {
        let mut pos = segment.position_for(offset).await?;
        let end = segment.size_bytes.get();
        while pos < end {
            let data = segment
                .file
                .read_aligned(align_down(pos), 2 * BLOCK_USIZE)
                .await?;
            let at = usize::try_from(pos - align_down(pos)).unwrap_or(usize::MAX);
            let header = BatchHeader::parse(data.get(at..).unwrap_or_default())
                .map_err(|e| self.corrupt(segment, pos, e))?;
            if header.last_offset() >= offset {
                return Ok((pos, header.base_offset));
            }
            pos += header.size_bytes() as u64;
        }
        Ok((end, self.log_end_offset()))
    }

    /// Moves the log start offset to `offset` (DeleteRecords, KIP-107): reads below it fail
    /// with `OffsetOutOfRange`; closed segments wholly below it are deleted. Persisted in the
    /// log start offset checkpoint. Errors: `offset` above the log end.
    pub async fn delete_records_before(&self, offset: Offset) -> Result<Offset> {
        {
            let mut st = self.shared.state.borrow_mut();
            if offset > st.log_end {
                return Err(StorageError::OffsetOutOfRange {
                    offset,
                    log_start: st.log_start,
                    log_end: st.log_end,
                });
            }
            if offset <= st.log_start {
                return Ok(st.log_start);
            }
            st.log_start = offset;
            st.high_watermark = st.high_watermark.max(offset);
        }
        checkpoint::write(
            &self.shared.dir.join(LOG_START_CHECKPOINT_FILE),
            &[offset.0],
        )
        .await?;
        while let Some((segment, next_base)) = self.oldest_closed_segment() {
            if next_base > offset {
                break;
            }
            self.delete_oldest_segment(segment.base_offset, next_base)
                .await?;
        }
        Ok(self.log_start_offset())
    }

    /// Applies `retention.ms` (against `now`) and `retention.bytes`: deletes closed segments
    /// only, oldest first, and moves the log start offset to the first kept segment. A read
    /// already holding a deleted segment finishes from the open file. Returns segments deleted.
    pub async fn enforce_retention(&self, now: TimestampMs) -> Result<usize> {
        let cfg = self.config();
        let mut excess = cfg
            .retention_bytes
            .map_or(0, |limit| self.size_bytes().saturating_sub(limit));
        let cutoff = cfg.retention_ms.map(|ms| {
            TimestampMs(
                now.0
                    .saturating_sub(i64::try_from(ms.as_millis()).unwrap_or(i64::MAX)),
            )
        });
        let mut deleted = 0;
        loop {
            let Some((segment, next_base)) = self.oldest_closed_segment() else {
                break;
            };
            let size = segment.size_bytes.get();
            let by_bytes = excess > 0 && size <= excess;
            let by_time = match cutoff {
                Some(cutoff) => segment
                    .max_timestamp()
                    .await?
                    .is_some_and(|(max, _)| max < cutoff),
                None => false,
            };
            if !(by_bytes || by_time) {
                break;
            }
            excess = excess.saturating_sub(size);
            self.delete_oldest_segment(segment.base_offset, next_base)
                .await?;
            deleted += 1;
        }
        Ok(deleted)
    }

    /// The oldest segment if it is closed (another one follows it), and the next one's base.
    fn oldest_closed_segment(&self) -> Option<(Rc<Segment>, Offset)> {
        let st = self.shared.state.borrow();
        let mut it = st.segments.values();
        match (it.next(), it.next()) {
            (Some(first), Some(next)) => Some((first.clone(), next.base_offset)),
            _ => None,
        }
    }

    /// Deletes the oldest segment, which must be closed; the log start moves to `next_base`.
    async fn delete_oldest_segment(&self, base: Offset, next_base: Offset) -> Result<()> {
        {
            let mut st = self.shared.state.borrow_mut();
            st.segments.remove(&base);
            st.log_start = st.log_start.max(next_base);
            st.high_watermark = st.high_watermark.max(st.log_start);
        }
        self.shared
            .cache
            .evict_below(self.shared.cache_id, next_base);
        self.remove_segment_files(base).await
    }

    async fn remove_segment_files(&self, base: Offset) -> Result<()> {
        for ext in ["log", "index", "timeindex"] {
            remove_file(&Segment::path(&self.shared.dir, base, ext)).await?;
        }
        Ok(())
    }

    /// Closes the log without writing anything more: for a log whose files are about to be
    /// deleted (a deleted topic). Waits only for a running maintenance operation (a roll
    /// creates files in the directory), not for writes. Appends, flushes and waits get
    /// [`StorageError::Closed`] from now on; writes already in flight finish on their own.
    pub async fn discard(&self) {
        let held = self.acquire_busy().await.is_ok();
        let was_open = {
            let mut st = self.shared.state.borrow_mut();
            !std::mem::replace(&mut st.closed, true)
        };
        if was_open {
            self.shared.cache.unregister(self.shared.cache_id);
        }
        if held {
            self.release_busy();
        } else {
            self.shared.notify.notify_all();
        }
    }

    /// Flushes everything, writes the active segment's index, cuts its file to size, and
    /// leaves the clean-shutdown marker so the next open scans only the tail after the last
    /// index entry. The log refuses every later call with [`StorageError::Closed`].
    pub async fn close(&self) -> Result<()> {
        self.exclusive(async || {
            let active = self.shared.state.borrow().writer.segment.clone();
            self.snapshot_producer_state().await?;
            active.save_index().await?;
            active.file.truncate(active.size_bytes.get()).await?;
            active.file.fdatasync().await?;
            let marker = self.shared.dir.join(CLEAN_SHUTDOWN_FILE);
            blocking_dir_op(&marker, "writing", |p| std::fs::write(p, b"")).await?;
            blocking_dir_op(&self.shared.dir, "syncing", sync_dir).await?;
            self.shared.state.borrow_mut().closed = true;
            self.shared.cache.unregister(self.shared.cache_id);
            Ok(())
        })
        .await
    }
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

/// Submits every write the writer allows now; each completion pumps again.
fn pump(shared: &Rc<Shared>) {
    loop {
        let op = {
            let mut st = shared.state.borrow_mut();
            if st.write_error.is_some() {
                return;
            }
            let cfg = shared.config.borrow();
            st.writer
                .next_write(cfg.write_chunk_bytes, cfg.writes_in_flight_max)
        };
        let Some(WriteOp {
            segment,
            buffer,
            pos,
            end_pos,
        }) = op
        else {
            return;
        };
        let len = buffer.len() as u64;
        let shared = shared.clone();
        spawn_detached(async move {
            let started = Instant::now();
            let result = segment.file.write_at(buffer, pos).await;
            let took_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
            {
                let mut st = shared.state.borrow_mut();
                match result {
                    Ok(()) if Rc::ptr_eq(&st.writer.segment, &segment) => {
                        st.writer.complete(end_pos)
                    }
                    Ok(()) => {}
                    Err(e) => st.write_error = Some(("writing", errno_of(&e))),
                }
            }
            let mut s = shared.stats.get();
            s.writes += 1;
            s.write_bytes += len;
            s.write_latency_us_log2[log2_bucket(took_us)] += 1;
            shared.stats.set(s);
            shared.notify.notify_all();
            pump(&shared);
        });
    }
}

/// The latency histogram bucket of `us` microseconds (see [`LogStats::sync_latency_us_log2`]).
fn log2_bucket(us: u64) -> usize {
    ((u64::BITS - us.leading_zeros()) as usize).min(SYNC_LATENCY_BUCKETS - 1)
}

/// Reserves one preallocation step past `end` for a reopened or truncated active segment. On a
/// full disk the log still opens (reads go on) with only what the file already holds reserved;
/// appends then refuse with `DiskFull` until space returns.
async fn reserve_after_recovery(segment: &Segment, end: u64, config: &LogConfig) -> Result<()> {
    let target = reservation_target(align_up(end), align_up(end), config);
    match segment.file.preallocate(target).await {
        Ok(()) => segment.reserved_bytes.set(target),
        Err(StorageError::DiskFull { path, .. }) => {
            tracing::warn!(path = %path.display(), "disk full: no space reserved past the log end");
            segment.reserved_bytes.set(align_up(end));
        }
        Err(e) => return Err(e),
    }
    Ok(())
}

/// The size to reserve so that `needed` bytes fit: a step past what is reserved, but not past
/// the segment size unless `needed` itself is (one batch larger than `segment.bytes`).
fn reservation_target(needed: u64, reserved: u64, config: &LogConfig) -> u64 {
    let step = align_up(config.preallocate_step_bytes.max(1));
    needed
        .max(reserved + step)
        .min(config.segment_bytes.max(needed))
}

/// Checks the batches of one append against the producers' sequences. `Ok(Some(batch))`: a
/// single retried batch, answered with its original offsets. A multi-batch append is checked
/// batch by batch as if the earlier ones were appended. Errors: out of order, a stale epoch, or a
/// retried batch among new ones.
fn check_sequences(
    producers: &ProducerState,
    log_end: Offset,
    batches: &[(BatchHeader, Bytes)],
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
    };
    if let [(header, _)] = batches {
        return match producers.check(header) {
            SequenceCheck::Append => Ok(None),
            SequenceCheck::Duplicate(original) => Ok(Some(original)),
            other => Err(refuse(header, other)),
        };
    }
    if batches.iter().all(|(h, _)| h.producer_id < 0) {
        return Ok(None);
    }
    let mut tentative = producers.clone();
    let mut next = log_end;
    for (header, _) in batches {
        let header = BatchHeader {
            base_offset: next,
            ..*header
        };
        match tentative.check(&header) {
            SequenceCheck::Append => {
                tentative.record(&header);
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

fn errno_of(e: &StorageError) -> i32 {
    match e {
        StorageError::DiskFull { .. } => libc::ENOSPC,
        StorageError::Io { source, .. } => source.raw_os_error().unwrap_or(libc::EIO),
        _ => libc::EIO,
    }
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// Runs a blocking filesystem call on the executor's blocking pool.
async fn blocking_dir_op(
    path: &Path,
    op: &'static str,
    f: impl FnOnce(&Path) -> std::io::Result<()> + Send + 'static,
) -> Result<()> {
    let owned = path.to_path_buf();
    glommio::executor()
        .spawn_blocking(move || f(&owned))
        .await
        .map_err(|e| StorageError::io(op, path, e))
}

async fn list_dir(dir: &Path) -> Result<Vec<String>> {
    let owned = dir.to_path_buf();
    glommio::executor()
        .spawn_blocking(move || -> std::io::Result<Vec<String>> {
            std::fs::read_dir(&owned)?
                .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
                .collect()
        })
        .await
        .map_err(|e| StorageError::io("listing", dir, e))
}
