//! `PartitionLog`: the log of one partition, owned by one shard (single-threaded, no locks).
//!
//! Data flow of an append: the batches come checked once ([`crate::ValidatedBatches`]: CRC-32C,
//! magic, lengths, counts; a follower's are checked on entry) → wait only
//! if a roll is under way or too many bytes are unwritten → assign offsets, stamp `baseOffset`
//! and `partitionLeaderEpoch` → insert into the segment's in-memory index, the write queue and
//! the shard's batch cache → return. Background tasks copy the queued bytes into aligned DMA
//! buffers (pooled per shard) and write them (group commit: appends made before the write's
//! task runs, or while a write is in flight, go out together in one write, so the partial tail
//! block is written once per burst), and write zeros ahead of the tail so data writes land in
//! written extents (zero-ahead, writer.rs);
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
//! 6. The leader-epoch cache's entries start at or below `log_end`, and every entry starting
//!    in a closed segment is in the `leader-epoch-checkpoint` file (a roll waits for the file;
//!    see `replica`), so recovery needs the file plus its scan of the active segment only.
//!
//! Files, by concern (each adds an `impl PartitionLog` block; shared state, accessors and the
//! maintenance lock live here):
//! - `open`: open and recovery of the active segment's tail, discard, clean close.
//! - `append`: `max.message.bytes`, sequences and offset assignment, the group-committed
//!   write path (`pump`), `wait_written`, `flush_to` (shared `fdatasync`), disk reservation
//!   and segment roll.
//! - `read`: fetch reads from the batch cache, the write queue or DMA reads; lookups by time.
//! - `retention`: `truncate_to`, DeleteRecords, `retention.ms` / `retention.bytes`.
//! - `compact`: log compaction — dirtiness, the cleaning pass, its swap and the recovery of
//!   an interrupted swap (issue #27).
//! - `snapshots`: producer-state snapshots and their rebuild on open and truncation (open
//!   transactions and the active segment's `.txnindex` entries included).
//! - `txn`: transactions (KIP-98) — the marker append, the last stable offset, the aborted
//!   transactions of a read_committed fetch.
//! - `epochs`: the leader-epoch cache (pure); `replica`: what replication needs of the log —
//!   `append_as_follower`, the leader-epoch checkpoint kept in step with the cache, the
//!   high-watermark checkpoint.

mod append;
pub(crate) mod compact;
pub(crate) mod epochs;
mod open;
mod read;
mod replica;
mod retention;
mod snapshots;
mod txn;

use crate::batch::{BatchHeader, RecordBatch};
use crate::cache::{BatchCache, LogId};
use crate::config::LogConfig;
use crate::error::{BatchError, Result, StorageError};
use crate::io::align_up;
use crate::notify::Notify;
use crate::producer_state::ProducerState;
use crate::segment::Segment;
use crate::types::{Offset, TimestampMs};
use crate::writer::Writer;
use epochs::LeaderEpochCache;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// Extension of a segment being created by a roll, before it is renamed to `.log`.
const NEW_SEGMENT_EXT: &str = "log.new";
/// Name of the log start offset checkpoint (Kafka: `log-start-offset-checkpoint`).
const LOG_START_CHECKPOINT_FILE: &str = "log-start-offset-checkpoint";
/// Name of the leader-epoch checkpoint (Kafka's name).
const LEADER_EPOCH_CHECKPOINT_FILE: &str = "leader-epoch-checkpoint";
/// Name of the high-watermark checkpoint (per partition; Kafka keeps one per log directory).
const HIGH_WATERMARK_CHECKPOINT_FILE: &str = "high-watermark";

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
    /// An acknowledgement of these records waits for [`PartitionLog::flush_to`], not only
    /// [`PartitionLog::wait_written`]: `flush_due`, or a retry while `flush.messages` is set
    /// (its original may still be syncing). What [`AppendUntil::Written`] waited for.
    pub sync_needed: bool,
    /// The log's written offset when the call returned: after [`AppendUntil::Written`], at
    /// least `last_offset + 1` (invariant 1: at most the log end offset).
    pub written_offset: Offset,
    /// The log start offset when the call returned (the produce answer's `log_start_offset`).
    pub log_start_offset: Offset,
}

/// How far [`PartitionLog::append_validated`] goes before it returns, so that a caller learns
/// what it acknowledges from the one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppendUntil {
    /// The batches are in the in-memory tail (a produce with `acks=0`).
    InMemory,
    /// Their O_DIRECT write has completed — and the shared `fdatasync` after it when
    /// [`AppendInfo::sync_needed`] — as an acknowledgement needs (DESIGN.md §3).
    Written,
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
    /// File steps `open` ran to finish or undo a compaction swap a crash interrupted.
    pub open_swap_steps: u64,
    /// Data writes submitted and their bytes (including rewrites of the tail block).
    pub writes: u64,
    pub write_bytes: u64,
    /// Data writes whose aligned buffer came from the executor's write-buffer pool, and those
    /// that allocated a fresh one (pool misses).
    pub write_buffers_reused: u64,
    pub write_buffers_allocated: u64,
    /// Zero-ahead writes submitted and their bytes (zeros over preallocated space past the
    /// logical end, so data writes land in written extents; not counted in `writes`).
    pub zero_ahead_writes: u64,
    pub zero_ahead_bytes: u64,
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
    /// Idempotent producers' sequences and transactional producers' open transactions (KIP-98).
    producers: ProducerState,
    /// KIP-890 part 1: producers whose first transactional append here waits for the
    /// transaction coordinator's answer (see `crate::txn_verification`).
    verifications: crate::txn_verification::VerificationStates,
    /// The leader-epoch cache (KIP-101). Every entry whose start offset lies in a closed
    /// segment, or before the active segment's last index entry after a clean close, is in
    /// the leader-epoch checkpoint (roll and close wait for `epochs_dirty` to clear); later
    /// ones are found again by recovery's scan of the active segment.
    epochs: LeaderEpochCache,
    /// `epochs` changed since the last write of the checkpoint began.
    epochs_dirty: bool,
    /// A task is writing the leader-epoch checkpoint (one at a time: they share a temp file).
    epochs_writing: bool,
    /// A write of the leader-epoch checkpoint found the disk full since the last wait for it
    /// ([`PartitionLog::leader_epochs_written`]) began, which clears this and tries again
    /// (`epochs_dirty` stayed set). Not sticky: a full disk is not a failing device.
    epochs_disk_full: bool,
    /// A `checkpoint_high_watermark` call is writing its file (one at a time, likewise).
    hw_writing: bool,
    /// The value the `high-watermark` checkpoint holds (as read at open or last written);
    /// `None` when there is no file.
    hw_checkpointed: Option<Offset>,
    log_start: Offset,
    log_end: Offset,
    high_watermark: Offset,
    durable_offset: Offset,
    syncing: bool,
    /// A task that will submit the writes the writer allows is scheduled (`append::pump`).
    write_scheduled: bool,
    busy: bool,
    closed: bool,
    unflushed_records: u64,
    flush_timer_armed: bool,
    /// A failed data write or sync: sticky, since data in preallocated space cannot fail for
    /// lack of space, so the device is failing. Reads go on; appends and flushes get it.
    write_error: Option<(&'static str, i32)>,
    /// The cleaner's first dirty offset (`cleaner-offset-checkpoint`; 0 when none).
    clean_end: Offset,
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
        let hw = st.high_watermark;
        st.producers.on_high_watermark_updated(hw);
    }

    /// Offset below which every record's O_DIRECT write has completed: those records survive
    /// a crash of the process (not necessarily a power loss: see [`PartitionLog::durable_offset`]).
    pub fn written_offset(&self) -> Offset {
        self.shared.state.borrow().writer.written_offset
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

    /// Waits until no zero-ahead write is in flight.
    async fn zero_ahead_idle(&self) {
        loop {
            let notified = self.shared.notify.notified();
            if !self.shared.state.borrow().writer.is_zeroing() {
                return;
            }
            notified.await;
        }
    }

    fn check_usable(&self, st: &State) -> Result<()> {
        if st.closed {
            return Err(StorageError::Closed);
        }
        self.sticky_write_error(st)
    }

    /// The sticky error of a failed write (DESIGN.md §3: after one, nothing more is
    /// acknowledged), as the I/O error it was.
    fn sticky_write_error(&self, st: &State) -> Result<()> {
        match st.write_error {
            Some((op, errno)) => Err(StorageError::io(
                op,
                &self.shared.dir,
                std::io::Error::from_raw_os_error(errno),
            )),
            None => Ok(()),
        }
    }

    fn bump_stats(&self, f: impl FnOnce(&mut LogStats)) {
        let mut s = self.shared.stats.get();
        f(&mut s);
        self.shared.stats.set(s);
    }

    /// Runs `op` as the only maintenance operation (invariant 4), after every appended byte
    /// is written and synced and the zero-ahead write in flight, if any, has completed (none
    /// starts meanwhile: `op` may cut or replace the file).
    async fn exclusive<T>(&self, op: impl AsyncFnOnce() -> Result<T>) -> Result<T> {
        self.acquire_busy().await?;
        let result = async {
            self.flush().await?;
            self.zero_ahead_idle().await;
            op().await
        }
        .await;
        self.release_busy();
        result
    }

    fn corrupt(&self, segment: &Segment, pos: u64, e: BatchError) -> StorageError {
        StorageError::Corrupt {
            path: Segment::path(&self.shared.dir, segment.base_offset, "log"),
            why: format!("batch at byte {pos}: {e}"),
        }
    }
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

/// A segment's first preallocation step. Later steps are as large as what the segment holds
/// reserved (each doubles it), up to `preallocate_step_bytes`: an idle partition reserves
/// 2 MiB of disk, not a whole step (10,000 new partitions reserved 625 GiB with 64 MiB first
/// steps), and a busy one reaches full steps within five. 2 MiB holds the default zero-ahead
/// (1 MiB past a 64 KiB gap), so a new segment's first appends land in zeroed space.
const PREALLOCATE_FIRST_STEP_BYTES: u64 = 2 << 20;

/// The size to reserve so that `needed` bytes fit: a step past what is reserved (see
/// [`PREALLOCATE_FIRST_STEP_BYTES`]), but not past the segment size unless `needed` itself is
/// (one batch larger than `segment.bytes`).
fn reservation_target(needed: u64, reserved: u64, config: &LogConfig) -> u64 {
    let largest = align_up(config.preallocate_step_bytes.max(1));
    let step = reserved.clamp(PREALLOCATE_FIRST_STEP_BYTES.min(largest), largest);
    debug_assert_eq!(step % crate::io::BLOCK_BYTES, 0, "steps stay block aligned");
    needed
        .max(reserved + step)
        .min(config.segment_bytes.max(needed))
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// How long a retired segment's disposal waits for its last reader, at most.
const RETIRED_WAIT_MAX: std::time::Duration = std::time::Duration::from_secs(60);
/// How often it looks.
const RETIRED_POLL: std::time::Duration = std::time::Duration::from_millis(10);
/// Pause between two retired segments' closes on one shard. Freeing a segment's blocks holds
/// the filesystem's journal, which the shard's own O_DIRECT writes into preallocated space
/// need too (to mark their extents written): closes in a row stalled produce for 200-400 ms
/// when a clean retired 16 segments of 64 MiB; one at a time they cost a few ms each.
const RETIRED_SPACING: std::time::Duration = std::time::Duration::from_millis(100);

thread_local! {
    /// This shard's retired segments waiting to be closed, oldest first, and whether its
    /// reaper task runs. Bounded by the segments the shard's logs retire (each is listed
    /// once, when the log drops it from its segment map).
    static RETIRED: RefCell<(VecDeque<Rc<Segment>>, bool)> = const { RefCell::new((VecDeque::new(), false)) };
}

/// Closes a segment the log no longer lists and whose files are (or are about to be)
/// unlinked — compaction's swap, retention — once no reader holds it, one at a time per
/// shard ([`RETIRED_SPACING`] apart), with [`crate::io::DirectFile::close_retired`] so that
/// freeing its blocks runs on the blocking pool, never on the shard's executor. A segment a
/// reader still holds after [`RETIRED_WAIT_MAX`] is closed when that reader lets go.
pub(super) fn dispose_retired(segment: Rc<Segment>) {
    let start = RETIRED.with(|r| {
        let mut r = r.borrow_mut();
        r.0.push_back(segment);
        !std::mem::replace(&mut r.1, true)
    });
    if start {
        crate::io::spawn_detached(reap_retired());
    }
}

/// The shard's reaper: closes retired segments one by one until none is left.
async fn reap_retired() {
    while let Some(segment) = RETIRED.with(|r| {
        let mut r = r.borrow_mut();
        let next = r.0.pop_front();
        r.1 = next.is_some();
        next
    }) {
        let started = std::time::Instant::now();
        let mut segment = segment;
        loop {
            match Rc::try_unwrap(segment) {
                Ok(owned) => {
                    let path = Segment::path(owned.dir(), owned.base_offset, "log");
                    if let Err(e) = owned.file.close_retired().await {
                        tracing::warn!(path = %path.display(), error = %e, "closing a retired segment");
                    }
                    crate::io::sleep(RETIRED_SPACING).await;
                    break;
                }
                Err(shared) if started.elapsed() < RETIRED_WAIT_MAX => {
                    segment = shared;
                    crate::io::sleep(RETIRED_POLL).await;
                }
                Err(_) => break,
            }
        }
    }
}

/// Runs a blocking filesystem call on the executor's blocking pool.
async fn blocking_dir_op(
    path: &Path,
    op: &'static str,
    f: impl FnOnce(&Path) -> std::io::Result<()> + Send + 'static,
) -> Result<()> {
    let owned = path.to_path_buf();
    crate::io::spawn_blocking(move || f(&owned))
        .await
        .map_err(|e| StorageError::io(op, path, e))
}

async fn list_dir(dir: &Path) -> Result<Vec<String>> {
    let owned = dir.to_path_buf();
    crate::io::spawn_blocking(move || -> std::io::Result<Vec<String>> {
        std::fs::read_dir(&owned)?
            .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect()
    })
    .await
    .map_err(|e| StorageError::io("listing", dir, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn reservation_steps_start_small_and_double_up_to_the_configured_step() {
        let config = LogConfig::default();
        assert_eq!(config.preallocate_step_bytes, 64 * MIB);
        let mut reserved = 0;
        let mut targets = Vec::new();
        while reserved < 256 * MIB {
            reserved = reservation_target(reserved + 1, reserved, &config);
            targets.push(reserved / MIB);
        }
        assert_eq!(targets, [2, 4, 8, 16, 32, 64, 128, 192, 256]);
        // Reopened with 500 MiB in the segment: a whole step past its end.
        assert_eq!(reservation_target(500 * MIB, 500 * MIB, &config), 564 * MIB);
        // A batch larger than the step gets what it needs.
        assert_eq!(reservation_target(9 * MIB, 2 * MIB, &config), 9 * MIB);
    }

    #[test]
    fn reservation_steps_stay_within_a_smaller_step_and_the_segment() {
        let small = LogConfig {
            preallocate_step_bytes: 256 << 10,
            ..LogConfig::default()
        };
        assert_eq!(reservation_target(0, 0, &small), 256 << 10);
        assert_eq!(
            reservation_target(10 * MIB + 1, 10 * MIB, &small),
            10 * MIB + (256 << 10)
        );
        let segment = LogConfig {
            segment_bytes: 3 * MIB,
            ..LogConfig::default()
        };
        assert_eq!(reservation_target(2 * MIB + 1, 2 * MIB, &segment), 3 * MIB);
        // One batch larger than `segment.bytes`: all of it.
        assert_eq!(reservation_target(5 * MIB, 2 * MIB, &segment), 5 * MIB);
    }
}
