//! Opening a partition log (recovery of the active segment's tail, DESIGN.md §3), discarding
//! it, and closing it cleanly (the marker that lets the next open skip the full scan).

use super::{
    blocking_dir_op, list_dir, reserve_after_recovery, sync_dir, LogStats, PartitionLog, Shared,
    State, LEADER_EPOCH_CHECKPOINT_FILE, LOG_START_CHECKPOINT_FILE, NEW_SEGMENT_EXT,
};
use crate::cache::BatchCache;
use crate::checkpoint;
use crate::config::LogConfig;
use crate::error::{Result, StorageError};
use crate::io::{align_down, align_up, remove_file, DirectFile, BLOCK_BYTES, BLOCK_USIZE};
use crate::log::epochs::LeaderEpochCache;
use crate::notify::Notify;
use crate::producer_state::ProducerState;
use crate::segment::{ScanEnd, Segment};
use crate::types::Offset;
use crate::writer::Writer;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::rc::Rc;

/// Name of the per-partition marker written after a clean close.
const CLEAN_SHUTDOWN_FILE: &str = "clean-shutdown";

impl PartitionLog {
    /// Opens the log in `dir` (created if missing), recovering the active segment: closed
    /// segments are opened without reading them; the active one is scanned from its last
    /// index entry after a clean close, or from its start otherwise, and cut at the first torn,
    /// zeroed or corrupt batch. Errors: I/O, [`crate::StorageError::DiskFull`], corrupt checkpoint.
    pub async fn open(dir: &Path, config: LogConfig, cache: &BatchCache) -> Result<PartitionLog> {
        blocking_dir_op(dir, "creating", |d| std::fs::create_dir_all(d)).await?;
        let swap_steps =
            super::compact::recover_clean_swap(dir, config.index_interval_bytes).await?;
        let listing = list_dir(dir).await?;
        let mut bases = segment_bases(&listing);
        let clean = listing.iter().any(|n| n == CLEAN_SHUTDOWN_FILE);
        for stray in listing.iter().filter(|n| n.ends_with(NEW_SEGMENT_EXT)) {
            remove_file(&dir.join(stray)).await?;
        }
        let checkpoint_start = read_offset_checkpoint(&dir.join(LOG_START_CHECKPOINT_FILE)).await?;
        if bases.is_empty() {
            bases.push(checkpoint_start.unwrap_or_default());
        }
        let epochs_loaded = read_leader_epoch_checkpoint(dir).await?;
        let clean_end = read_offset_checkpoint(&dir.join(super::compact::CLEANER_CHECKPOINT_FILE))
            .await?
            .unwrap_or(Offset(0));
        let mut stats = LogStats {
            opened_clean: clean,
            open_swap_steps: swap_steps as u64,
            ..LogStats::default()
        };
        let last_base = *bases.last().expect("at least one segment");
        let mut segments = open_closed_segments(dir, &bases[..bases.len() - 1]).await?;
        let (active, scan) = recover_active_segment(dir, last_base, clean, &config).await?;
        stats.open_read_bytes += scan.bytes_read;
        let end = scan.end_pos;
        let log_end = scan.next_offset;
        segments.insert(last_base, active.clone());
        let first_base = *bases.first().expect("at least one segment");
        let log_start = checkpoint_start
            .map_or(first_base, |c| c.max(first_base))
            .min(log_end);
        let (high_watermark, hw_checkpointed) =
            high_watermark_at_open(dir, log_start, log_end).await?;
        if clean {
            // Durably gone before any append, so a later crash never trusts a stale index.
            remove_file(&dir.join(CLEAN_SHUTDOWN_FILE)).await?;
            blocking_dir_op(dir, "syncing", sync_dir).await?;
        }
        let writer = Writer::new(active, end, log_end, scan.tail_block);
        let cache_id = cache.register();
        let state = recovered_state(
            segments,
            writer,
            (log_start, log_end),
            high_watermark,
            hw_checkpointed,
            clean_end,
        );
        let log = PartitionLog {
            shared: Rc::new(Shared {
                dir: dir.to_path_buf(),
                config: RefCell::new(config),
                cache: cache.clone(),
                cache_id,
                notify: Rc::new(Notify::default()),
                state: RefCell::new(state),
                stats: Cell::new(stats),
            }),
        };
        log.repair_txn_indexes(&listing).await?;
        log.rebuild_producer_state().await?;
        let epochs_file = listing.iter().any(|n| n == LEADER_EPOCH_CHECKPOINT_FILE);
        log.recover_leader_epochs(epochs_loaded, &scan.epoch_starts, epochs_file)
            .await?;
        Ok(log)
    }

    /// Closes the log without writing anything more: for a log whose files are about to be
    /// deleted (a deleted topic). Waits only for a running maintenance operation (a roll
    /// creates files in the directory), not for writes. Appends, flushes and waits get
    /// [`crate::StorageError::Closed`] from now on; writes already in flight finish on their own.
    pub async fn discard(&self) {
        let held = self.acquire_busy().await.is_ok();
        let was_open = {
            let mut st = self.shared.state.borrow_mut();
            !std::mem::replace(&mut st.closed, true)
        };
        if was_open {
            self.shared.cache.unregister(self.shared.cache_id);
        }
        // A checkpoint write under way finishes (no new one starts on a closed log): the
        // caller deletes the directory next, and a late write must not land in a new one.
        self.checkpoint_writes_idle().await;
        if held {
            self.release_busy();
        } else {
            self.shared.notify.notify_all();
        }
    }

    /// Flushes everything, writes the active segment's index, cuts its file to size, and
    /// leaves the clean-shutdown marker so the next open scans only the tail after the last
    /// index entry. The log refuses every later call with [`crate::StorageError::Closed`].
    pub async fn close(&self) -> Result<()> {
        self.exclusive(async || {
            let active = self.shared.state.borrow().writer.segment.clone();
            // Before the snapshot: recovery from that snapshot takes every entry before it
            // from this file (docs/storage-format.md §5.4).
            active.save_txn_index().await?;
            self.snapshot_producer_state().await?;
            // The next open scans only past the last index entry: every epoch entry must be in
            // the file by then.
            self.leader_epochs_written().await?;
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

/// The base offsets of the segments in `listing` (the `<base>.log` files), in order.
fn segment_bases(listing: &[String]) -> Vec<Offset> {
    let mut bases: Vec<Offset> = listing
        .iter()
        .filter_map(|name| name.strip_suffix(".log")?.parse::<i64>().ok())
        .map(Offset)
        .collect();
    bases.sort();
    bases
}

/// The offset a one-value checkpoint file at `path` holds; `None` when there is no file or
/// no value.
async fn read_offset_checkpoint(path: &Path) -> Result<Option<Offset>> {
    Ok(checkpoint::read(path)
        .await?
        .and_then(|v| v.first().copied())
        .map(Offset))
}

/// Opens the closed segments at `bases` without reading them.
async fn open_closed_segments(
    dir: &Path,
    bases: &[Offset],
) -> Result<BTreeMap<Offset, Rc<Segment>>> {
    let mut segments = BTreeMap::new();
    for &base in bases {
        let file = DirectFile::open(&Segment::path(dir, base, "log"), false).await?;
        let size = file.file_size().await?;
        segments.insert(base, Rc::new(Segment::new(dir, base, file, size, None)));
    }
    Ok(segments)
}

/// Opens the active segment at `last_base` and recovers its tail: scans it (from its last
/// index entry after a `clean` close, else from its start), then zeroes what follows the
/// valid end, gives back the space after it, preallocates anew and syncs. Returns the
/// segment, its size set to the valid end, and what the scan found.
async fn recover_active_segment(
    dir: &Path,
    last_base: Offset,
    clean: bool,
    config: &LogConfig,
) -> Result<(Rc<Segment>, ScanEnd)> {
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
    reserve_after_recovery(&active, end, config).await?;
    active.file.fdatasync().await?;
    Ok((active, scan))
}

/// A log's state as recovered: `log_start..log_end` all durable, no append, write or
/// maintenance under way; producer state and the leader-epoch cache still empty (the open
/// rebuilds them).
fn recovered_state(
    segments: BTreeMap<Offset, Rc<Segment>>,
    writer: Writer,
    (log_start, log_end): (Offset, Offset),
    high_watermark: Offset,
    hw_checkpointed: Option<Offset>,
    clean_end: Offset,
) -> State {
    State {
        segments,
        writer,
        log_start,
        log_end,
        high_watermark,
        durable_offset: log_end,
        syncing: false,
        write_scheduled: false,
        busy: false,
        closed: false,
        unflushed_records: 0,
        flush_timer_armed: false,
        write_error: None,
        clean_end,
        append_turns: VecDeque::new(),
        next_append_ticket: 0,
        producers: ProducerState::default(),
        verifications: crate::txn_verification::VerificationStates::default(),
        epochs: LeaderEpochCache::new(),
        epochs_dirty: false,
        epochs_writing: false,
        epochs_disk_full: false,
        hw_writing: false,
        hw_checkpointed,
    }
}

/// The high watermark a log opens with, and the value its checkpoint holds (`None`: no file,
/// or unreadable).
async fn high_watermark_at_open(
    dir: &Path,
    log_start: Offset,
    log_end: Offset,
) -> Result<(Offset, Option<Offset>)> {
    // A restarted replica starts from its checkpointed high watermark; without one (a
    // single node never writes it) everything recovered counts as replicated, as before.
    match PartitionLog::read_high_watermark_checkpoint(dir).await {
        Ok(hw) => Ok((hw.map_or(log_end, |hw| hw.clamp(log_start, log_end)), hw)),
        Err(StorageError::Corrupt { path, why }) => {
            // The safe lower bound: the leader's fetch answers move it up again.
            tracing::warn!(path = %path.display(), why, "unreadable high-watermark checkpoint; starting at the log start");
            Ok((log_start, None))
        }
        Err(e) => Err(e),
    }
}

/// The leader-epoch checkpoint's cache: `None` when the file is missing or unreadable (a torn
/// or foreign file, a CRC mismatch, entries that do not ascend) — the cache is then rebuilt
/// from the log, which holds every batch's epoch, instead of refusing to open. Errors: I/O.
async fn read_leader_epoch_checkpoint(dir: &Path) -> Result<Option<LeaderEpochCache>> {
    let path = dir.join(LEADER_EPOCH_CHECKPOINT_FILE);
    let values = match checkpoint::read(&path).await {
        Ok(v) => v,
        Err(StorageError::Corrupt { .. }) => {
            tracing::warn!(path = %path.display(), "unreadable leader-epoch checkpoint; rebuilding it from the log");
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    let Some(values) = values else {
        return Ok(None);
    };
    let cache = LeaderEpochCache::decode(&values);
    if cache.is_none() {
        tracing::warn!(path = %path.display(), "leader-epoch checkpoint entries do not ascend; rebuilding it from the log");
    }
    Ok(cache)
}
