//! Log compaction on disk (issue #27, DESIGN.md §12, Kafka's `Cleaner.doClean`): how dirty a
//! compacted log is, and one cleaning pass over its closed segments.
//!
//! A pass, as Kafka's:
//! 1. **Offset map.** From the first dirty offset (the `cleaner-offset-checkpoint`, else the
//!    log start) through the cleanable segments — closed, wholly below the high watermark,
//!    and older than `min.compaction.lag.ms` — every keyed record goes into the
//!    [`OffsetMap`], whole batches only; a full map ends the pass's reach early.
//! 2. **Clean.** Every segment from the log start up to that reach, in groups whose sizes add
//!    up to at most `segment.bytes`, is streamed batch by batch through
//!    [`crate::clean::filter::clean_batch`] into `<base>.log.cleaned` (plus its `.index` and
//!    `.timeindex`), each file written with O_DIRECT and synced.
//! 3. **Swap.** Under the maintenance lock (invariant 4 of `log/mod.rs`), if the group's
//!    segments are still the log's, the steps of [`crate::clean::swap::swap_steps`] replace
//!    them by the cleaned segment; a crash at any step is undone or finished by
//!    [`recover_clean_swap`] at the next open (`docs/storage-format.md` §6.8).
//! 4. **Checkpoint.** The new first dirty offset is written to `cleaner-offset-checkpoint`.
//!
//! Transactions (KIP-98): the cleanable segments also end at the first unstable offset;
//! batches of aborted transactions are neither mapped nor kept ([`AbortedTxnWalk`]); a marker
//! stays while its transaction still had batches in the pass, then gets a delete horizon and
//! goes after it; the cleaned segment takes its group's `.txnindex` entries of the markers it
//! keeps (written after the swap's commit point; an interrupted merge is finished by `open`).
//!
//! Offsets never change; readers that hold a replaced segment finish from its open file. The
//! pass reads and writes `log.cleaner.io.buffer.size` bytes at a time, at most
//! `log.cleaner.io.max.bytes.per.second`, and yields to the shard's other work between
//! batches.

use super::{blocking_dir_op, list_dir, sync_dir, PartitionLog};
use crate::batch::{validate_stored_batch, BatchHeader, BATCH_HEADER_BYTES};
use crate::checkpoint;
use crate::clean::codec::RecordsCodec;
use crate::clean::fill_map;
use crate::clean::filter::{clean_batch, clean_marker, discard_batch, CleanRules, Cleaned};
use crate::clean::swap::{recovery_steps, swap_steps, FsStep};
use crate::clean::txn::{AbortedTxnWalk, TxnRole};
use crate::error::{Result, StorageError};
use crate::index::SegmentIndex;
use crate::io::{align_down, align_up, remove_file, DirectFile, BLOCK_USIZE};
use crate::offset_map::OffsetMap;
use crate::segment::{file_stem, Segment};
use crate::types::{Offset, TimestampMs};
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Name of the per-partition first-dirty-offset checkpoint (Kafka keeps one
/// `cleaner-offset-checkpoint` per log directory; here each partition has its own).
pub(super) const CLEANER_CHECKPOINT_FILE: &str = "cleaner-offset-checkpoint";

/// How dirty a compacted log is (Kafka's `LogToClean`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Dirtiness {
    /// Where the next pass starts reading into the offset map.
    pub first_dirty: Offset,
    /// Base of the first segment no pass may clean yet (the active one, one not wholly below
    /// the high watermark, or one younger than `min.compaction.lag.ms`).
    pub cleanable_end: Offset,
    /// Bytes of the segments wholly below `first_dirty`.
    pub clean_bytes: u64,
    /// Bytes of the cleanable segments from the one holding `first_dirty`.
    pub dirty_bytes: u64,
    /// How long, in ms, the oldest dirty batch has waited past `max.compaction.lag.ms`
    /// (0: not overdue, or no maximum lag).
    pub compaction_delay_ms: i64,
}

impl Dirtiness {
    /// `dirty / (clean + dirty)`, 0 for an empty log.
    pub fn ratio(&self) -> f64 {
        let total = self.clean_bytes + self.dirty_bytes;
        if total == 0 {
            0.0
        } else {
            // Byte counts of one log are far below 2^52: exact enough as f64.
            #[allow(clippy::cast_precision_loss)]
            let ratio = self.dirty_bytes as f64 / total as f64;
            ratio
        }
    }

    /// Whether a pass is due: dirty bytes exist, and the ratio is above `min_ratio`
    /// (`min.cleanable.dirty.ratio`; strictly, as Kafka's `grabFilthiestCompactedLog`, so 1.0
    /// never cleans by ratio) or a record waited past `max.compaction.lag.ms`.
    pub fn is_cleanable(&self, min_ratio: f64) -> bool {
        self.dirty_bytes > 0 && (self.ratio() > min_ratio || self.compaction_delay_ms > 0)
    }
}

/// The memory one cleaner reuses from pass to pass (Kafka's per-thread `Cleaner` buffers).
pub struct CleanerBuffers {
    /// The offset map, sized from the shard's share of `log.cleaner.dedupe.buffer.size`.
    pub map: OffsetMap,
    /// `log.cleaner.io.buffer.size`: bytes per read and per write.
    pub io_buffer_bytes: usize,
    /// `log.cleaner.io.max.bytes.per.second` (reads plus writes); `None`: no cap.
    pub io_max_bytes_per_second: Option<f64>,
    /// The codecs of compressed batches (the broker's).
    pub codec: Rc<dyn RecordsCodec>,
}

/// What one pass did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CleanReport {
    /// The first dirty offset before the pass, and after it (the new checkpoint).
    pub first_dirty: Offset,
    pub cleaned_to: Offset,
    /// Bytes read (map and clean) and written (cleaned segments and their indexes).
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Bytes and segments of the cleaned groups before and after.
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub segments_before: usize,
    pub segments_after: usize,
    /// Groups found replaced by retention or truncation at swap time, and left alone.
    pub groups_skipped: usize,
    /// Wall time of the pass.
    pub elapsed: Duration,
}

/// The batches a pass keeps even when cleaning empties them (besides each group's last,
/// which `write_cleaned_group` keeps).
#[derive(Clone, Copy)]
struct Keep<'a> {
    /// Base offset of each producer's last batch: its sequence state (Kafka's rule).
    last_batches: &'a BTreeMap<i64, Offset>,
    /// One past the last offset of the cleaning round's last batch.
    round_last_end: Offset,
}

impl Keep<'_> {
    fn kept_even_empty(&self, header: &BatchHeader) -> bool {
        let last_of_producer = header.producer_id >= 0
            && self.last_batches.get(&header.producer_id) == Some(&header.base_offset);
        last_of_producer || header.last_offset().plus(1) == self.round_last_end
    }
}

/// Caps a pass's I/O rate and keeps it preemptible.
struct Throttle {
    bytes_per_second: Option<f64>,
    started: Instant,
    read_bytes: u64,
    written_bytes: u64,
    /// When the cleaner last yielded its task queue.
    slice_started: Instant,
    /// The shard's append write latency when the pass began, before any of its I/O (`None`:
    /// no appends then).
    quiet_write_latency: Option<Duration>,
    /// Pause before each device request while appends' writes are slower than
    /// [`WRITE_LATENCY_LIMIT`] allows.
    gap: Duration,
}

/// How much slower than before the pass appends' writes may get before the cleaner backs off:
/// `quiet × 3/2 + 50 µs`.
fn write_latency_limit(quiet: Duration) -> Duration {
    quiet * 3 / 2 + Duration::from_micros(50)
}

/// Bounds of the cleaner's back-off gap ([`Throttle::before_io`]).
const GAP_MIN: Duration = Duration::from_micros(200);
const GAP_MAX: Duration = Duration::from_millis(50);

/// Longest stretch the cleaner runs before it lets the executor poll its rings and run the
/// shard's produce and fetch work ([`crate::io::yield_to_reactor`]). glommio's own slice (its
/// preemption timer) is 100 ms, which a clean would fill: measured, the latency profile's p99
/// went from 7.7 to 97 ms while the same shard cleaned 1 GiB with only `yield_if_needed`.
const CLEANER_SLICE: Duration = Duration::from_micros(200);

/// A yield to the reactor that comes back within this found the shard idle: nothing else ran
/// meanwhile ([`Throttle::tick`]).
const IDLE_YIELD_MAX: Duration = Duration::from_micros(50);

/// Longest the cleaner waits for an idle moment before it runs a slice anyway: on a shard
/// busy without a break it still gets one slice per wait (about 1 % of the core).
const IDLE_WAIT_MAX: Duration = Duration::from_millis(20);

impl Throttle {
    fn new(bytes_per_second: Option<f64>) -> Throttle {
        Throttle {
            bytes_per_second,
            started: Instant::now(),
            read_bytes: 0,
            written_bytes: 0,
            slice_started: Instant::now(),
            quiet_write_latency: crate::io::foreground_write_latency(),
            gap: Duration::ZERO,
        }
    }

    /// Once the cleaner has run [`CLEANER_SLICE`], waits for the shard to be idle: it yields to
    /// the reactor until a yield comes back at once ([`IDLE_YIELD_MAX`]: no request, response
    /// or other task ran meanwhile), or [`IDLE_WAIT_MAX`] has passed. So the cleaner runs in
    /// the time produce and fetch leave idle, and a request that arrives during a slice waits
    /// at most one slice. glommio's task-queue shares cannot give that: a queue that wakes
    /// starts just behind the running ones, and requests wake their queue each time.
    async fn tick(&mut self) {
        if self.slice_started.elapsed() < CLEANER_SLICE {
            return;
        }
        let waiting_since = Instant::now();
        loop {
            let yielded_at = Instant::now();
            crate::io::yield_to_reactor().await;
            if yielded_at.elapsed() <= IDLE_YIELD_MAX || waiting_since.elapsed() >= IDLE_WAIT_MAX {
                break;
            }
        }
        self.slice_started = Instant::now();
    }

    /// Waits, before each of the cleaner's device requests, until no log data write (an
    /// append an ack waits for) is in flight on this shard, or [`IDLE_WAIT_MAX`] has passed:
    /// produce's writes then queue on the device behind at most one cleaner request of at most
    /// [`CLEANER_IO_BYTES_MAX`].
    async fn before_io(&mut self) {
        let waiting_since = Instant::now();
        while crate::io::foreground_writes_in_flight() > 0
            && waiting_since.elapsed() < IDLE_WAIT_MAX
        {
            crate::io::sleep(FOREGROUND_WRITE_POLL).await;
        }
        // Paced on the device's answer: while appends' writes take longer than before the
        // pass began, the gap before each request doubles; once they are back, it halves.
        let slowed = match (
            self.quiet_write_latency,
            crate::io::foreground_write_latency(),
        ) {
            (Some(quiet), Some(now)) => now > write_latency_limit(quiet),
            _ => false,
        };
        self.gap = if slowed {
            (self.gap * 2).clamp(GAP_MIN, GAP_MAX)
        } else if self.gap > GAP_MIN {
            self.gap / 2
        } else {
            Duration::ZERO
        };
        if !self.gap.is_zero() {
            crate::io::sleep(self.gap).await;
        }
    }

    async fn read(&mut self, bytes: u64) {
        self.read_bytes += bytes;
        self.pace().await;
    }

    async fn wrote(&mut self, bytes: u64) {
        self.written_bytes += bytes;
        self.pace().await;
    }

    async fn pace(&mut self) {
        if let Some(rate) = self.bytes_per_second.filter(|r| *r > 0.0) {
            // Counted bytes stay far below 2^52.
            #[allow(clippy::cast_precision_loss)]
            let secs = (self.read_bytes + self.written_bytes) as f64 / rate;
            // A tiny rate makes `due` too large for a `Duration` (or a timer): sleep in steps.
            let due = Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX);
            loop {
                let elapsed = self.started.elapsed();
                if due <= elapsed {
                    break;
                }
                crate::io::sleep((due - elapsed).min(MAX_PACE_SLEEP)).await;
            }
        }
        self.tick().await;
    }
}

/// Largest device request of the cleaner, in bytes (a batch larger than this is read whole):
/// `log.cleaner.io.buffer.size` is what it buffers, this is what one request may hold the
/// device for (~0.2 ms at 700 MB/s) while a produce's write waits behind it.
const CLEANER_IO_BYTES_MAX: usize = 128 << 10;

/// How often [`Throttle::before_io`] looks again while a log data write is in flight (about
/// the time one 4 KiB write takes on an NVMe device).
const FOREGROUND_WRITE_POLL: Duration = Duration::from_micros(50);

/// Longest single sleep of the throttle.
const MAX_PACE_SLEEP: Duration = Duration::from_secs(1);

/// Whole batches of one closed segment, read `chunk_bytes` at a time.
struct BatchStream {
    segment: Rc<Segment>,
    pos: u64,
    end: u64,
    chunk: Bytes,
    chunk_start: u64,
    chunk_bytes: usize,
}

impl BatchStream {
    fn new(segment: Rc<Segment>, chunk_bytes: usize) -> BatchStream {
        let end = segment.size_bytes.get();
        BatchStream {
            segment,
            pos: 0,
            end,
            chunk: Bytes::new(),
            chunk_start: 0,
            chunk_bytes: usize::try_from(align_up(
                chunk_bytes.clamp(BLOCK_USIZE, CLEANER_IO_BYTES_MAX) as u64,
            ))
            .unwrap_or(usize::MAX),
        }
    }

    /// The next batch, CRC-checked, with its position; `None` at the segment's end.
    async fn next(&mut self, throttle: &mut Throttle) -> Result<Option<(u64, Bytes)>> {
        let mut want = self.chunk_bytes;
        while self.pos < self.end {
            let chunk_end = self.chunk_start + self.chunk.len() as u64;
            if self.pos >= self.chunk_start && self.pos + BATCH_HEADER_BYTES as u64 <= chunk_end {
                let at = usize::try_from(self.pos - self.chunk_start).unwrap_or(usize::MAX);
                let header = BatchHeader::parse(&self.chunk[at..])
                    .map_err(|e| self.corrupt(format!("batch at byte {}: {e}", self.pos)))?;
                let size = header.size_bytes();
                if self.pos + size as u64 > self.end {
                    return Err(
                        self.corrupt(format!("batch at byte {} runs past the end", self.pos))
                    );
                }
                if self.pos + size as u64 <= chunk_end {
                    let batch = self.chunk.slice(at..at + size);
                    validate_stored_batch(&batch)
                        .map_err(|e| self.corrupt(format!("batch at byte {}: {e}", self.pos)))?;
                    let pos = self.pos;
                    self.pos += size as u64;
                    return Ok(Some((pos, batch)));
                }
                want = want.max(size + 2 * BLOCK_USIZE);
            }
            let start = align_down(self.pos);
            let len = usize::try_from(align_up(
                (start + want as u64).min(align_up(self.end)) - start,
            ))
            .unwrap_or(usize::MAX);
            throttle.before_io().await;
            let data = self.segment.file.read_aligned(start, len).await?;
            throttle.read(data.len() as u64).await;
            if data.is_empty()
                || (start == self.chunk_start && start + data.len() as u64 <= chunk_end)
            {
                // The file ends before the segment's size says: reading again would not help.
                return Err(self.corrupt(format!(
                    "the file ends at byte {} before the segment's size, {}",
                    start + data.len() as u64,
                    self.end
                )));
            }
            self.chunk_start = start;
            self.chunk = data;
        }
        Ok(None)
    }

    fn corrupt(&self, why: String) -> StorageError {
        StorageError::Corrupt {
            path: Segment::path(self.segment.dir(), self.segment.base_offset, "log"),
            why,
        }
    }
}

/// A group's walk through its transactions, and the markers the clean removed (their
/// `.txnindex` entries go with them).
struct MarkerTrack<'w> {
    walk: &'w mut AbortedTxnWalk,
    removed: BTreeSet<Offset>,
}

/// A cleaned segment being written: `<base>.log.cleaned` plus the in-memory index.
struct CleanedWriter {
    segment: Segment,
    pending: Vec<u8>,
    written_pos: u64,
    io_buffer_bytes: usize,
    index_interval_bytes: u64,
}

impl CleanedWriter {
    async fn create(
        dir: &Path,
        base: Offset,
        io_buffer_bytes: usize,
        index_interval_bytes: u64,
    ) -> Result<CleanedWriter> {
        let path = cleaned_path(dir, base, "log");
        remove_file(&path).await?;
        let file = DirectFile::open(&path, true).await?;
        Ok(CleanedWriter {
            segment: Segment::new(dir, base, file, 0, Some(SegmentIndex::default())),
            pending: Vec::with_capacity(io_buffer_bytes + BLOCK_USIZE),
            written_pos: 0,
            io_buffer_bytes: io_buffer_bytes.max(BLOCK_USIZE),
            index_interval_bytes,
        })
    }

    /// Cleans `batch` (its group's last when `last_of_group`: kept even if emptied) by its
    /// role in a transaction — aborted data discarded, a marker kept while its transaction's
    /// batches may remain, other data by key — and appends what remains of it.
    async fn clean_and_push(
        &mut self,
        batch: &[u8],
        rules: CleanRules<'_>,
        keep: Keep<'_>,
        markers: &mut MarkerTrack<'_>,
        last_of_group: bool,
        throttle: &mut Throttle,
    ) -> Result<()> {
        let header = BatchHeader::parse(batch)?;
        let keep_if_empty = last_of_group || keep.kept_even_empty(&header);
        let fate = match markers.walk.next(&header) {
            TxnRole::AbortedData => discard_batch(batch, keep_if_empty)?,
            TxnRole::Marker { batches_seen } => clean_marker(
                batch,
                batches_seen || keep_if_empty,
                rules.now,
                rules.delete_retention_ms,
            )?,
            TxnRole::Data => clean_batch(batch, rules, keep_if_empty)?,
        };
        if fate == Cleaned::Removed && header.is_control() {
            markers.removed.insert(header.base_offset);
        }
        match fate {
            Cleaned::Unchanged => self.push(batch, throttle).await,
            Cleaned::Rewritten(bytes) => self.push(&bytes, throttle).await,
            Cleaned::Removed => Ok(()),
        }
    }

    async fn push(&mut self, batch: &[u8], throttle: &mut Throttle) -> Result<()> {
        let header = BatchHeader::parse(batch)?;
        let pos = self.segment.size_bytes.get();
        self.segment
            .note_batch(&header, pos, self.index_interval_bytes);
        self.segment.size_bytes.set(pos + batch.len() as u64);
        self.pending.extend_from_slice(batch);
        if self.pending.len() >= self.io_buffer_bytes {
            let whole = usize::try_from(align_down(self.pending.len() as u64)).unwrap_or(0);
            self.write(whole, throttle).await?;
        }
        Ok(())
    }

    /// Writes the first `len` pending bytes (`len` a multiple of the block size, or all of
    /// them, zero-padded, at the end).
    async fn write(&mut self, len: usize, throttle: &mut Throttle) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        let aligned = usize::try_from(align_up(len as u64)).unwrap_or(usize::MAX);
        let mut done = 0;
        while done < aligned {
            // At most CLEANER_IO_BYTES_MAX per request (see `Throttle::before_io`).
            let piece = (aligned - done).min(CLEANER_IO_BYTES_MAX);
            let mut buf = self.segment.file.alloc_write_buffer(piece);
            let copied = len.saturating_sub(done).min(piece);
            buf.as_bytes_mut()[..copied].copy_from_slice(&self.pending[done..done + copied]);
            throttle.before_io().await;
            self.segment.file.write_at(buf, self.written_pos).await?;
            throttle.wrote(piece as u64).await;
            self.written_pos += piece as u64;
            done += piece;
        }
        self.pending.drain(..len);
        Ok(())
    }

    /// Writes the rest, cuts the file to its size, syncs it, and writes the `.cleaned` index
    /// files. Returns the segment, ready to take the final name's place.
    async fn finish(mut self, throttle: &mut Throttle) -> Result<(Segment, u64)> {
        let rest = self.pending.len();
        self.write(rest, throttle).await?;
        let size = self.segment.size_bytes.get();
        self.segment.file.truncate(size).await?;
        self.segment.file.fdatasync().await?;
        self.segment.finish_time_index();
        self.segment.save_index_as(".cleaned").await?;
        Ok((self.segment, size))
    }
}

fn cleaned_path(dir: &Path, base: Offset, ext: &str) -> std::path::PathBuf {
    dir.join(format!("{}.{ext}.cleaned", file_stem(base)))
}

impl PartitionLog {
    /// The first dirty offset: where the next pass starts (0 → the log start).
    pub fn first_dirty_offset(&self) -> Offset {
        let st = self.shared.state.borrow();
        if st.clean_end < st.log_start || st.clean_end > st.log_end {
            st.log_start
        } else {
            st.clean_end
        }
    }

    /// The closed segments a pass may clean, oldest first, with the next segment's base:
    /// wholly below the high watermark and, from the one holding `first_dirty` on, by max
    /// timestamp older than `min_lag_ms` at `now` (Kafka's `firstUncleanableDirtyOffset`, whose
    /// lag check starts at the first dirty offset: a clean segment never holds a pass back);
    /// and that bound.
    async fn cleanable_segments(
        &self,
        now: TimestampMs,
        min_lag_ms: i64,
        first_dirty: Offset,
    ) -> Result<(Vec<(Rc<Segment>, Offset)>, Offset)> {
        let (all, hw, active_base) = {
            let st = self.shared.state.borrow();
            let all: Vec<Rc<Segment>> = st.segments.values().cloned().collect();
            // Kafka's `firstUncleanableDirtyOffset`: an open transaction's batches are not
            // cleaned before its marker says whether they count (KIP-98).
            let bound = st
                .producers
                .first_unstable_offset()
                .map_or(st.high_watermark, |f| f.min(st.high_watermark));
            (all, bound, st.writer.segment.base_offset)
        };
        let mut out = Vec::new();
        for pair in all.windows(2) {
            let (segment, next) = (&pair[0], pair[1].base_offset);
            if next > hw {
                return Ok((out, segment.base_offset));
            }
            if min_lag_ms > 0 && next > first_dirty {
                let young = segment
                    .max_timestamp()
                    .await?
                    .is_some_and(|(max, _)| max.0 > now.0.saturating_sub(min_lag_ms));
                if young {
                    return Ok((out, segment.base_offset));
                }
            }
            out.push((segment.clone(), next));
        }
        Ok((out, active_base))
    }

    /// How dirty the log is at `now` (ms since the epoch); `None` unless `cleanup.policy`
    /// compacts. Loads closed segments' time indexes when `min.compaction.lag.ms` is set;
    /// reads one block of the first dirty segment when `max.compaction.lag.ms` is.
    ///
    /// # Errors
    /// I/O reading an index or a block.
    pub async fn dirtiness(&self, now: TimestampMs) -> Result<Option<Dirtiness>> {
        let config = self.config();
        if !config.cleanup_policy.compacts() {
            return Ok(None);
        }
        let lag = &config.compaction;
        let min_lag_ms = i64::try_from(lag.min_compaction_lag.as_millis()).unwrap_or(i64::MAX);
        let first_dirty = self.first_dirty_offset();
        let (segments, cleanable_end) = self
            .cleanable_segments(now, min_lag_ms, first_dirty)
            .await?;
        let mut dirtiness = Dirtiness {
            first_dirty,
            cleanable_end,
            clean_bytes: 0,
            dirty_bytes: 0,
            compaction_delay_ms: 0,
        };
        let mut first_dirty_segment = None;
        for (segment, next) in &segments {
            if *next <= first_dirty {
                dirtiness.clean_bytes += segment.size_bytes.get();
            } else {
                first_dirty_segment.get_or_insert_with(|| segment.clone());
                dirtiness.dirty_bytes += segment.size_bytes.get();
            }
        }
        if let (Some(max_lag), Some(segment)) = (lag.max_compaction_lag, first_dirty_segment) {
            let max_lag_ms = i64::try_from(max_lag.as_millis()).unwrap_or(i64::MAX);
            // A batch without a timestamp (-1) says nothing of its age (Kafka skips it too).
            if let Some(first) = first_batch_timestamp(&segment).await?.filter(|t| t.0 > 0) {
                let due = now.0.saturating_sub(max_lag_ms);
                dirtiness.compaction_delay_ms = due.saturating_sub(first.0).max(0);
            }
        }
        Ok(Some(dirtiness))
    }

    /// Rolls the active segment of a compacted log when it holds data and its first append is
    /// older than `segment.ms` (or `max.compaction.lag.ms`, if smaller, as Kafka's
    /// `maxSegmentMs`), so an idle partition's last records become cleanable. A segment
    /// reopened after a restart counts from the first call. Returns whether it rolled.
    ///
    /// # Errors
    /// As [`PartitionLog::roll`].
    pub async fn roll_if_aged(&self) -> Result<bool> {
        let config = self.config();
        if !config.cleanup_policy.compacts() {
            return Ok(false);
        }
        let max_age = config
            .compaction
            .max_compaction_lag
            .map_or(config.segment_ms, |lag| lag.min(config.segment_ms));
        let aged = {
            let st = self.shared.state.borrow();
            let active = &st.writer.segment;
            if active.size_bytes.get() == 0 {
                return Ok(false);
            }
            let first = active.first_append.get().unwrap_or_else(|| {
                let now = Instant::now();
                active.first_append.set(Some(now));
                now
            });
            first.elapsed() >= max_age
        };
        if aged {
            self.roll().await?;
        }
        Ok(aged)
    }

    /// One cleaning pass at wall-clock `now` (ms) with `buffers`; `None` when nothing is
    /// cleanable (the policy does not compact, or no dirty closed segment). Runs alongside
    /// appends and reads; only the swap of each group takes the maintenance lock.
    ///
    /// # Errors
    /// [`StorageError::CleanerBufferTooSmall`] when the first dirty batch alone holds more
    /// records than the offset map takes; [`StorageError::Corrupt`] for a batch that does not
    /// parse or fails its CRC (nothing is changed: the caller stops cleaning this log); I/O,
    /// including [`StorageError::DiskFull`] writing the cleaned files (they are removed, the
    /// log is unchanged).
    pub async fn clean(
        &self,
        now: TimestampMs,
        buffers: &mut CleanerBuffers,
    ) -> Result<Option<CleanReport>> {
        let started = Instant::now();
        let config = self.config();
        if !config.cleanup_policy.compacts() {
            return Ok(None);
        }
        let min_lag_ms =
            i64::try_from(config.compaction.min_compaction_lag.as_millis()).unwrap_or(i64::MAX);
        let first_dirty = self.first_dirty_offset();
        let (segments, _) = self
            .cleanable_segments(now, min_lag_ms, first_dirty)
            .await?;
        if segments.iter().all(|(_, next)| *next <= first_dirty) {
            return Ok(None);
        }
        let mut throttle = Throttle::new(buffers.io_max_bytes_per_second);
        // 1. The offset map over the dirty section.
        let (covered_end, round_last_end) = self
            .fill_offset_map(&segments, first_dirty, buffers, &mut throttle, started)
            .await?;
        // 2–3. Clean and swap each group of segments below the map's reach.
        let last_batches = self.shared.state.borrow().producers.last_batch_bases();
        let rules = CleanRules {
            map: &buffers.map,
            now,
            delete_retention_ms: i64::try_from(config.compaction.delete_retention.as_millis())
                .unwrap_or(i64::MAX),
            codec: &*buffers.codec,
        };
        let in_reach: Vec<(Rc<Segment>, Offset)> = segments
            .into_iter()
            .filter(|(segment, _)| segment.base_offset < covered_end)
            .collect();
        let clean_from = in_reach.first().map_or(first_dirty, |(s, _)| s.base_offset);
        let mut walk = AbortedTxnWalk::new(
            self.aborted_entries_overlapping(clean_from, covered_end)
                .await?,
        );
        let keep = Keep {
            last_batches: &last_batches,
            round_last_end,
        };
        let mut report = CleanReport {
            first_dirty,
            ..self
                .clean_groups(
                    group_by_size(&in_reach, config.segment_bytes),
                    rules,
                    keep,
                    &mut walk,
                    &mut throttle,
                    buffers.io_buffer_bytes,
                )
                .await?
        };
        // 4. Where the next pass starts.
        report.cleaned_to = self
            .save_first_dirty(report.groups_skipped, first_dirty, covered_end)
            .await?;
        report.bytes_read = throttle.read_bytes;
        report.bytes_written = throttle.written_bytes;
        report.elapsed = started.elapsed();
        Ok(Some(report))
    }

    /// Step 1 of [`PartitionLog::clean`]: fills `buffers.map` from the dirty batches of
    /// `segments` from `first_dirty` on, until the map is full. Returns where the map's reach
    /// ends and one past the last offset of the last batch it took. Errors:
    /// [`StorageError::CleanerBufferTooSmall`] when it took nothing, a corrupt batch, I/O.
    async fn fill_offset_map(
        &self,
        segments: &[(Rc<Segment>, Offset)],
        first_dirty: Offset,
        buffers: &mut CleanerBuffers,
        throttle: &mut Throttle,
        started: Instant,
    ) -> Result<(Offset, Offset)> {
        buffers.map.clear();
        let mut covered_end = first_dirty;
        // One past the last offset of the last batch the map took: that batch is the last of
        // the cleaning round, kept even when it ends up empty (Kafka's `cleanInto`), so a
        // reader's position after it is a batch's end, never a gap with nothing after it.
        let mut round_last_end = first_dirty;
        let section_end = segments.last().map_or(first_dirty, |(_, next)| *next);
        // Records of aborted transactions never enter the map (KIP-98: an aborted value must
        // not shadow a committed one).
        let mut fill_walk = AbortedTxnWalk::new(
            self.aborted_entries_overlapping(first_dirty, section_end)
                .await?,
        );
        'fill: for (segment, next) in segments {
            if *next <= first_dirty {
                continue;
            }
            let mut stream = BatchStream::new(segment.clone(), buffers.io_buffer_bytes);
            while let Some((_, batch)) = stream.next(throttle).await? {
                throttle.tick().await;
                let header = BatchHeader::parse(&batch)?;
                if header.last_offset() < first_dirty {
                    continue;
                }
                let aborted = fill_walk.is_aborted(&header);
                if !aborted && fill_map(&mut buffers.map, [&batch[..]], &*buffers.codec)? == 0 {
                    break 'fill;
                }
                covered_end = header.last_offset().plus(1);
                round_last_end = covered_end;
            }
            covered_end = covered_end.max(*next);
        }
        tracing::debug!(
            dir = %self.shared.dir.display(),
            ms = started.elapsed().as_millis(),
            covered_end = covered_end.0,
            "cleaner: offset map filled"
        );
        if covered_end == first_dirty {
            return Err(StorageError::CleanerBufferTooSmall {
                keys: buffers.map.free_keys(),
                offset: first_dirty,
            });
        }
        Ok((covered_end, round_last_end))
    }

    /// Steps 2–3 of [`PartitionLog::clean`]: cleans and swaps each of `groups` in turn. Returns
    /// a report of the groups' bytes and segments before and after, and of those skipped.
    async fn clean_groups(
        &self,
        groups: Vec<&[(Rc<Segment>, Offset)]>,
        rules: CleanRules<'_>,
        keep: Keep<'_>,
        walk: &mut AbortedTxnWalk,
        throttle: &mut Throttle,
        io_buffer_bytes: usize,
    ) -> Result<CleanReport> {
        let mut report = CleanReport::default();
        for group in groups {
            let before: u64 = group.iter().map(|(s, _)| s.size_bytes.get()).sum();
            let written = self
                .clean_group(group, rules, keep, walk, throttle, io_buffer_bytes)
                .await?;
            match written {
                Some(after) => {
                    report.bytes_before += before;
                    report.bytes_after += after;
                    report.segments_before += group.len();
                    report.segments_after += 1;
                }
                None => report.groups_skipped += 1,
            }
        }
        Ok(report)
    }

    /// Step 4 of [`PartitionLog::clean`]: the first dirty offset of the next pass, in memory
    /// and in the cleaner checkpoint: `covered_end`, or `first_dirty` again when
    /// `groups_skipped` is not 0. Returns it.
    async fn save_first_dirty(
        &self,
        groups_skipped: usize,
        first_dirty: Offset,
        covered_end: Offset,
    ) -> Result<Offset> {
        // A group skipped (retention, DeleteRecords or a truncation replaced one of its
        // segments meanwhile) still holds superseded records the next pass's map must see
        // again: the checkpoint stays (Kafka's aborted clean).
        let next_dirty = if groups_skipped > 0 {
            first_dirty
        } else {
            covered_end
        };
        self.shared.state.borrow_mut().clean_end = next_dirty;
        checkpoint::write(
            &self.shared.dir.join(CLEANER_CHECKPOINT_FILE),
            &[next_dirty.0],
        )
        .await?;
        Ok(next_dirty)
    }

    /// Cleans one group into `<base>.*.cleaned` and swaps it in; the cleaned size, or `None`
    /// when the group was no longer the log's at swap time (its files are removed).
    async fn clean_group(
        &self,
        group: &[(Rc<Segment>, Offset)],
        rules: CleanRules<'_>,
        keep: Keep<'_>,
        walk: &mut AbortedTxnWalk,
        throttle: &mut Throttle,
        io_buffer_bytes: usize,
    ) -> Result<Option<u64>> {
        let dir = self.shared.dir.clone();
        let base = group[0].0.base_offset;
        let interval = self.shared.config.borrow().index_interval_bytes;
        let out = CleanedWriter::create(&dir, base, io_buffer_bytes, interval).await?;
        // Markers this clean removes: their `.txnindex` entries go with them.
        let mut markers = MarkerTrack {
            walk,
            removed: BTreeSet::new(),
        };
        let written = write_cleaned_group(out, group, rules, keep, &mut markers, throttle).await;
        tracing::debug!(dir = %dir.display(), base = base.0, "cleaner: group written and synced");
        let (cleaned, size) = match written {
            Ok(done) => done,
            Err(e) => {
                remove_cleaned_files(&dir, base).await?;
                return Err(e);
            }
        };
        let had_entries = load_indexes_keep_aborted(group, &cleaned, &markers.removed).await?;
        let result = self.swap_group_marked(group, cleaned, had_entries).await?;
        tracing::debug!(dir = %dir.display(), base = base.0, "cleaner: group swapped");
        match result {
            Ok(true) => {
                let next = group.last().map_or(base, |(_, next)| *next);
                self.shared.cache.evict_below(self.shared.cache_id, next);
                Ok(Some(size))
            }
            Ok(false) => {
                remove_cleaned_files(&dir, base).await?;
                Ok(None)
            }
            Err(e) => {
                // The files match no state any more: the log refuses appends until reopened,
                // and the open's recovery finishes or undoes the swap.
                self.shared.state.borrow_mut().write_error =
                    Some(("swapping a cleaned segment", e.errno()));
                self.shared.notify.notify_all();
                Err(e)
            }
        }
    }

    /// Takes the maintenance lock and swaps `cleaned` in for `group` ([`PartitionLog::swap_group`]);
    /// when the old segments `had_entries` in their `.txnindex`, the repair marker is durable
    /// from before the swap until after it. Errors: writing the marker, the lock (the swap not
    /// begun); the swap's own result carries its errors.
    async fn swap_group_marked(
        &self,
        group: &[(Rc<Segment>, Offset)],
        cleaned: Segment,
        had_entries: bool,
    ) -> Result<Result<bool>> {
        let dir = &self.shared.dir;
        // From the swap's commit point until its `.txnindex` files are written, they may
        // hold entries of removed markers: a crash then has open check them against the log.
        let repair_marker = dir.join(super::txn::TXN_INDEX_REPAIR_FILE);
        if had_entries {
            blocking_dir_op(&repair_marker, "writing", |p| std::fs::write(p, b"")).await?;
            blocking_dir_op(dir, "syncing", sync_dir).await?;
        }
        self.acquire_busy().await?;
        let mut result = self.swap_group(group, cleaned).await;
        if had_entries && result.is_ok() {
            result = async {
                remove_file(&repair_marker).await?;
                blocking_dir_op(dir, "syncing", sync_dir).await
            }
            .await
            .map(|()| result.unwrap_or(false));
        }
        self.release_busy();
        Ok(result)
    }

    /// Under the maintenance lock: runs the swap's file steps if every segment of `group` is
    /// still the log's and closed, then replaces them in the segment map. `false`: the group
    /// changed meanwhile (retention, DeleteRecords or truncation), nothing was done.
    async fn swap_group(&self, group: &[(Rc<Segment>, Offset)], cleaned: Segment) -> Result<bool> {
        let unchanged = {
            let st = self.shared.state.borrow();
            group.iter().all(|(segment, next)| {
                st.segments
                    .get(&segment.base_offset)
                    .is_some_and(|s| Rc::ptr_eq(s, segment))
                    && !Rc::ptr_eq(segment, &st.writer.segment)
                    && st.segments.contains_key(next)
            })
        };
        if !unchanged {
            return Ok(false);
        }
        let bases: Vec<Offset> = group.iter().map(|(s, _)| s.base_offset).collect();
        let dir = self.shared.dir.clone();
        for step in swap_steps(&bases) {
            if !matches!(step, FsStep::Write(_)) {
                crate::crash_point::reach("clean.swap", &dir)?;
                run_step(&dir, step).await?;
            }
        }
        let cleaned = Rc::new(cleaned);
        {
            let mut st = self.shared.state.borrow_mut();
            for base in &bases {
                if let Some(old) = st.segments.remove(base) {
                    super::dispose_retired(old);
                }
            }
            st.segments.insert(bases[0], cleaned.clone());
        }
        // After the commit point: the cleaned segment's `.txnindex` (the group's entries),
        // then the other old segments' files go. A crash in between leaves those files
        // without their `.log`: open merges them into the segment covering their base
        // (`docs/storage-format.md` §6.8).
        cleaned.save_txn_index().await?;
        for base in &bases[1..] {
            remove_file(&Segment::path(&dir, *base, "txnindex")).await?;
        }
        blocking_dir_op(&dir, "syncing", sync_dir).await?;
        Ok(true)
    }
}

/// Cleans every batch of `group` into `out` and finishes it (written and synced); the
/// cleaned segment and its size.
async fn write_cleaned_group(
    mut out: CleanedWriter,
    group: &[(Rc<Segment>, Offset)],
    rules: CleanRules<'_>,
    keep: Keep<'_>,
    markers: &mut MarkerTrack<'_>,
    throttle: &mut Throttle,
) -> Result<(Segment, u64)> {
    // Each batch is cleaned once the next one is read, so the group's last is known:
    // it is kept even when cleaning empties it. The cleaned segment then ends at or
    // after the base of the group's last segment, which is how the recovery of a
    // committed swap tells which old segments it replaced (storage-format.md §6.8).
    let mut held: Option<Bytes> = None;
    for (segment, _) in group {
        let mut stream = BatchStream::new(segment.clone(), out.io_buffer_bytes);
        while let Some((_, batch)) = stream.next(throttle).await? {
            throttle.tick().await;
            if let Some(previous) = held.replace(batch) {
                out.clean_and_push(&previous, rules, keep, markers, false, throttle)
                    .await?;
            }
        }
    }
    if let Some(last) = held {
        out.clean_and_push(&last, rules, keep, markers, true, throttle)
            .await?;
    }
    out.finish(throttle).await
}

/// Loads the indexes of `group`'s segments, and gives `cleaned` their `.txnindex` entries
/// but those of the markers in `removed`; whether any segment had an entry.
async fn load_indexes_keep_aborted(
    group: &[(Rc<Segment>, Offset)],
    cleaned: &Segment,
    removed: &BTreeSet<Offset>,
) -> Result<bool> {
    // Old segments' indexes in memory before any file is renamed: a reader holding one
    // must never load the new segment's index under the old segment's name.
    let mut aborted = Vec::new();
    let mut had_entries = false;
    for (segment, _) in group {
        segment.ensure_index().await?;
        // The cleaned segment takes the `.txnindex` entries of the abort markers it keeps
        // (Kafka keeps an entry with its retained marker).
        segment.ensure_txn_index().await?;
        let entries = segment.aborted_entries().unwrap_or_default();
        had_entries |= !entries.is_empty();
        aborted.extend(
            entries
                .into_iter()
                .filter(|e| !removed.contains(&e.last_offset)),
        );
    }
    cleaned.set_aborted(aborted);
    Ok(had_entries)
}

/// Consecutive segments whose sizes add up to at most `segment_bytes` (at least one each),
/// and whose offsets fit one segment's 32-bit relative offsets.
fn group_by_size(
    segments: &[(Rc<Segment>, Offset)],
    segment_bytes: u64,
) -> Vec<&[(Rc<Segment>, Offset)]> {
    let mut groups = Vec::new();
    let mut start = 0;
    let mut bytes = 0u64;
    for (i, (segment, next)) in segments.iter().enumerate() {
        let size = segment.size_bytes.get();
        let span = next.0 - segments[start].0.base_offset.0;
        if i > start && (bytes + size > segment_bytes || span > i64::from(u32::MAX)) {
            groups.push(&segments[start..i]);
            start = i;
            bytes = 0;
        }
        bytes += size;
    }
    if start < segments.len() {
        groups.push(&segments[start..]);
    }
    groups
}

/// The max timestamp of a segment's first batch (Kafka's `getFirstBatchTimestamp`).
async fn first_batch_timestamp(segment: &Segment) -> Result<Option<TimestampMs>> {
    if segment.size_bytes.get() < BATCH_HEADER_BYTES as u64 {
        return Ok(None);
    }
    let block = segment.file.read_aligned(0, BLOCK_USIZE).await?;
    Ok(BatchHeader::parse(&block).ok().map(|h| h.max_timestamp))
}

async fn remove_cleaned_files(dir: &Path, base: Offset) -> Result<()> {
    for ext in ["log", "index", "timeindex"] {
        remove_file(&cleaned_path(dir, base, ext)).await?;
    }
    Ok(())
}

/// Runs one swap or recovery step, durably where the step says so.
async fn run_step(dir: &Path, step: FsStep) -> Result<()> {
    match step {
        FsStep::Write(name) => unreachable!("{name}: the writes are the cleaner's own"),
        FsStep::Rename { from, to } => {
            let (from, to) = (dir.join(from), dir.join(to));
            blocking_dir_op(&from, "renaming", move |f| std::fs::rename(f, &to)).await
        }
        FsStep::Unlink(name) => remove_file(&dir.join(name)).await,
        FsStep::SyncDir => blocking_dir_op(dir, "syncing", sync_dir).await,
    }
}

/// Finishes or undoes a swap a crash interrupted (`docs/storage-format.md` §6.8), before the
/// log's segments are listed: runs [`recovery_steps`] over the directory's files. A
/// `<base>.log.swap` is scanned for the last offset it holds.
///
/// # Errors
/// I/O.
pub(super) async fn recover_clean_swap(dir: &Path, index_interval_bytes: u64) -> Result<usize> {
    let files: BTreeSet<String> = list_dir(dir).await?.into_iter().collect();
    let interrupted = files
        .iter()
        .any(|f| f.ends_with(".cleaned") || f.ends_with(".swap") || f.ends_with(".deleted"));
    if !interrupted {
        return Ok(0);
    }
    let mut ends = BTreeMap::new();
    let mut swap_indexes = Vec::new();
    for file in &files {
        let Some(stem) = file.strip_suffix(".log.swap") else {
            continue;
        };
        let Ok(base) = stem.parse::<i64>() else {
            continue;
        };
        let base = Offset(base);
        let path = dir.join(file);
        let handle = DirectFile::open(&path, false).await?;
        let size = handle.file_size().await?;
        let segment = Segment::new(dir, base, handle, 0, Some(SegmentIndex::default()));
        let scan = segment.scan(0, base, size, index_interval_bytes).await?;
        ends.insert(base, Offset(scan.next_offset.0 - 1).max(base));
        // The committed swap's indexes, from its log: the index renames of step 2 share one
        // directory sync with the log's, so after a power loss an index `.swap` could be
        // missing while the old segment's index still has the final name (storage-format.md
        // §6.8). Written whole and synced before any step renames them. The time index ends
        // with the segment's max timestamp, as a roll's and the cleaner's do: a closed
        // segment's max timestamp is read back from that last entry, and without it lookups
        // by timestamp would skip the segment.
        segment.finish_time_index();
        segment.save_index_as(".swap").await?;
        swap_indexes.extend([
            format!("{stem}.index.swap"),
            format!("{stem}.timeindex.swap"),
        ]);
    }
    let files: BTreeSet<String> = files.into_iter().chain(swap_indexes).collect();
    let steps = recovery_steps(&files, |base| ends.get(&base).copied().unwrap_or(base));
    let count = steps.len();
    tracing::warn!(dir = %dir.display(), steps = count, "finishing an interrupted compaction swap");
    for step in steps {
        crate::crash_point::reach("clean.recover", dir)?;
        run_step(dir, step).await?;
    }
    Ok(count)
}
