//! One segment of a partition log: `<base>.log` plus its sparse `.index` and `.timeindex`, and
//! `.txnindex`, the aborted transactions whose abort markers are in the segment (KIP-98,
//! Kafka's `TransactionIndex`).
//!
//! The active (last) segment keeps its indexes in memory and writes them whole at roll and at
//! clean shutdown (the `.txnindex` also at a truncation into it); closed segments load theirs
//! lazily on first lookup, so opening a log reads nothing from closed segments (their size
//! comes from the file length, fixed at roll). The active segment's `.txnindex` entries after
//! the producer-state snapshot that recovery starts from are rebuilt by its replay
//! (`log/snapshots.rs`).

use crate::batch::{validate_stored_batch, BatchHeader, BATCH_HEADER_BYTES};
use crate::error::{Result, StorageError};
use crate::index::{relative, OffsetEntry, SegmentIndex, TimeEntry};
use crate::io::{align_down, DirectFile, BLOCK_BYTES, BLOCK_USIZE};
use crate::txn::{decode_txn_index, encode_txn_index, AbortedTxnEntry};
use crate::types::{LeaderEpoch, Offset, TimestampMs};
use bytes::Bytes;
use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Bytes read per DMA read while scanning a segment (recovery, truncation).
const SCAN_CHUNK_BYTES: usize = 1 << 20;

/// File name stem of the segment starting at `base`: 20 zero-padded digits, as Kafka names them.
pub fn file_stem(base: Offset) -> String {
    format!("{:020}", base.0)
}

/// One segment. Owned through `Rc` by its log; a read in progress holds another `Rc`, which
/// keeps the open file (and so its data, even after retention unlinks it) alive until done.
pub struct Segment {
    pub base_offset: Offset,
    pub file: DirectFile,
    dir: PathBuf,
    /// Logical size in bytes: the end of the last whole batch. Invariant: ≤ `u32::MAX`.
    pub size_bytes: Cell<u64>,
    /// Bytes of the file known to be allocated (fallocate succeeded). Invariant for the active
    /// segment: `align_up(size_bytes) ≤ reserved_bytes`, so no write needs new blocks.
    pub reserved_bytes: Cell<u64>,
    /// `None` until loaded (closed segments load lazily).
    index: RefCell<Option<SegmentIndex>>,
    /// Aborted transactions whose markers are in this segment, ascending by marker offset
    /// (`.txnindex`). `None` until loaded; the active segment's is always loaded, since
    /// appends add to it without awaiting.
    aborted: RefCell<Option<Vec<AbortedTxnEntry>>>,
    /// Largest batch max timestamp in the segment and the base offset of its batch.
    max_timestamp: Cell<Option<(TimestampMs, Offset)>>,
    bytes_since_index: Cell<u64>,
    /// When the first batch was appended in this process (drives `segment.ms`).
    pub first_append: Cell<Option<Instant>>,
}

/// What a scan of a segment's bytes found.
pub struct ScanEnd {
    /// Position after the last valid batch.
    pub end_pos: u64,
    /// Offset after the last valid batch (the segment's next offset).
    pub next_offset: Offset,
    /// The bytes of the partial last block, `[align_down(end_pos), end_pos)`.
    pub tail_block: Vec<u8>,
    /// Bytes read from disk by the scan.
    pub bytes_read: u64,
    /// (partition leader epoch, base offset) of each valid batch whose epoch differs from the
    /// previous valid batch's in this scan (the first one always): what recovery assigns to
    /// the leader-epoch cache, as Kafka's segment recovery does.
    pub epoch_starts: Vec<(LeaderEpoch, Offset)>,
}

impl Segment {
    /// The partition directory holding this segment.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Path of this segment's file with `ext` ("log", "index", "timeindex").
    pub fn path(dir: &Path, base: Offset, ext: &str) -> PathBuf {
        dir.join(format!("{}.{ext}", file_stem(base)))
    }

    /// Wraps an opened `.log` file. `index` is `Some` for the active segment.
    pub fn new(
        dir: &Path,
        base_offset: Offset,
        file: DirectFile,
        size_bytes: u64,
        index: Option<SegmentIndex>,
    ) -> Segment {
        Segment {
            base_offset,
            file,
            dir: dir.to_path_buf(),
            size_bytes: Cell::new(size_bytes),
            reserved_bytes: Cell::new(0),
            index: RefCell::new(index),
            aborted: RefCell::new(None),
            max_timestamp: Cell::new(None),
            bytes_since_index: Cell::new(0),
            first_append: Cell::new(None),
        }
    }

    /// Records a batch appended (or found by a scan) at `pos`: adds index entries every
    /// `index_interval_bytes` as Kafka does, and tracks the max timestamp.
    pub fn note_batch(&self, header: &BatchHeader, pos: u64, index_interval_bytes: u64) {
        let mut guard = self.index.borrow_mut();
        let index = guard.get_or_insert_with(SegmentIndex::default);
        let size = header.size_bytes() as u64;
        if self
            .max_timestamp
            .get()
            .is_none_or(|(ts, _)| header.max_timestamp > ts)
        {
            self.max_timestamp
                .set(Some((header.max_timestamp, header.base_offset)));
        }
        if self.bytes_since_index.get() >= index_interval_bytes {
            let position =
                u32::try_from(pos).expect("segment positions fit u32 (segment.bytes ≤ i32::MAX)");
            index.offsets.push(OffsetEntry {
                relative_offset: relative(self.base_offset, header.base_offset),
                position,
            });
            push_time_entry(index, self.base_offset, self.max_timestamp.get());
            self.bytes_since_index.set(0);
        }
        self.bytes_since_index
            .set(self.bytes_since_index.get() + size);
    }

    /// Adds the final time index entry Kafka writes when a segment becomes inactive, so the
    /// last entry of a closed segment's time index is its max timestamp.
    pub fn finish_time_index(&self) {
        if let Some(index) = self.index.borrow_mut().as_mut() {
            push_time_entry(index, self.base_offset, self.max_timestamp.get());
        }
    }

    /// The largest batch timestamp in the segment and the base offset of its batch, loading a
    /// closed segment's time index if needed.
    pub async fn max_timestamp(&self) -> Result<Option<(TimestampMs, Offset)>> {
        self.ensure_index().await?;
        Ok(self.max_timestamp.get())
    }

    /// Byte position to scan from for `offset`.
    pub async fn position_for(&self, offset: Offset) -> Result<u64> {
        self.ensure_index().await?;
        let index = self.index.borrow();
        let rel = relative(self.base_offset, offset.max(self.base_offset));
        Ok(index.as_ref().map_or(0, |i| u64::from(i.position_for(rel))))
    }

    /// The offset to start scanning at for the first batch with max timestamp ≥ `target`.
    pub async fn offset_for_time(&self, target: TimestampMs) -> Result<Offset> {
        self.ensure_index().await?;
        let index = self.index.borrow();
        let rel = index
            .as_ref()
            .map_or(0, |i| i.relative_offset_for_time(target));
        Ok(self.base_offset.plus(i64::from(rel)))
    }

    /// Drops index entries at or after `from` and forgets the max timestamp (truncation; the
    /// caller rescans the remaining tail to rebuild both).
    pub fn truncate_index(&self, from: Offset) {
        if let Some(index) = self.index.borrow_mut().as_mut() {
            index.truncate_from(relative(self.base_offset, from.max(self.base_offset)));
        }
        self.max_timestamp.set(None);
    }

    /// Position of the last offset index entry (where a tail scan may start), and the offset.
    pub fn last_index_entry(&self) -> (u64, Offset) {
        let index = self.index.borrow();
        index
            .as_ref()
            .and_then(|i| i.offsets.last())
            .map_or((0, self.base_offset), |e| {
                (
                    u64::from(e.position),
                    self.base_offset.plus(i64::from(e.relative_offset)),
                )
            })
    }

    /// Loads `.index` and `.timeindex` of a closed segment the first time they are needed.
    /// Missing files give an empty index (lookups then scan from position 0).
    pub async fn ensure_index(&self) -> Result<()> {
        if self.index.borrow().is_some() {
            return Ok(());
        }
        let offsets = read_small_file(&Segment::path(&self.dir, self.base_offset, "index")).await?;
        let times =
            read_small_file(&Segment::path(&self.dir, self.base_offset, "timeindex")).await?;
        let index = SegmentIndex::decode(&offsets, &times, self.size_bytes.get());
        if let Some(last) = index.times.last() {
            self.max_timestamp.set(Some((
                last.timestamp,
                self.base_offset.plus(i64::from(last.relative_offset)),
            )));
        }
        if self.index.borrow().is_none() {
            *self.index.borrow_mut() = Some(index);
        }
        Ok(())
    }

    /// Writes both index files whole and syncs them (roll, clean shutdown).
    pub async fn save_index(&self) -> Result<()> {
        self.save_index_as("").await
    }

    /// As [`Segment::save_index`], to `<base>.index<suffix>` and `<base>.timeindex<suffix>`
    /// (a cleaned segment's `.cleaned` files, docs/storage-format.md §6.8).
    pub async fn save_index_as(&self, suffix: &str) -> Result<()> {
        let (offsets, times) = {
            let index = self.index.borrow();
            let index = index
                .as_ref()
                .expect("only a loaded (active) segment saves its index");
            (index.encode_offsets(), index.encode_times())
        };
        for (ext, bytes) in [("index", offsets), ("timeindex", times)] {
            let path = self
                .dir
                .join(format!("{}.{ext}{suffix}", file_stem(self.base_offset)));
            let file = DirectFile::open(&path, true).await?;
            file.write_whole(&bytes).await?;
            file.fdatasync().await?;
            file.close().await?;
        }
        Ok(())
    }

    /// Starts an empty aborted-transaction index (a new segment, which has no `.txnindex`).
    pub fn start_empty_txn_index(&self) {
        *self.aborted.borrow_mut() = Some(Vec::new());
    }

    /// Loads `.txnindex` the first time it is needed: a missing file is empty; a damaged one
    /// keeps its longest valid prefix (with a warning). Errors: I/O.
    pub async fn ensure_txn_index(&self) -> Result<()> {
        if self.aborted.borrow().is_some() {
            return Ok(());
        }
        let path = Segment::path(&self.dir, self.base_offset, "txnindex");
        let entries = read_txn_index(&path).await?;
        if self.aborted.borrow().is_none() {
            *self.aborted.borrow_mut() = Some(entries);
        }
        Ok(())
    }

    /// Adds the entry of a transaction aborted by a marker in this segment, unless an entry
    /// for that marker is already there (a replay over entries loaded from the file).
    ///
    /// # Panics
    /// When the index is not loaded (the active segment's always is), or the marker lies
    /// before this segment.
    pub fn push_aborted(&self, entry: AbortedTxnEntry) {
        assert!(
            entry.last_offset >= self.base_offset,
            "marker in this segment"
        );
        let mut guard = self.aborted.borrow_mut();
        let entries = guard
            .as_mut()
            .expect("the txn index of a segment being appended to is loaded");
        if entries
            .last()
            .is_none_or(|last| entry.last_offset > last.last_offset)
        {
            entries.push(entry);
        }
    }

    /// Replaces the entries (a cleaned segment takes those of the segments it replaces).
    pub fn set_aborted(&self, entries: Vec<AbortedTxnEntry>) {
        assert!(
            entries
                .windows(2)
                .all(|w| w[0].last_offset < w[1].last_offset),
            "entries ascend by marker offset"
        );
        *self.aborted.borrow_mut() = Some(entries);
    }

    /// Adds `extra` entries (an orphaned `.txnindex` of a segment this one replaced), in
    /// marker order, one per marker.
    ///
    /// # Panics
    /// When the index is not loaded.
    pub fn merge_aborted(&self, extra: Vec<AbortedTxnEntry>) {
        let mut guard = self.aborted.borrow_mut();
        let entries = guard.as_mut().expect("loaded before a merge");
        entries.extend(extra);
        entries.sort_by_key(|e| e.last_offset);
        entries.dedup_by_key(|e| e.last_offset);
    }

    /// Drops the entries whose marker is at or after `from` (truncation, and recovery before
    /// it replays from `from`). No-op when not loaded.
    pub fn truncate_txn_index(&self, from: Offset) {
        if let Some(entries) = self.aborted.borrow_mut().as_mut() {
            entries.retain(|e| e.last_offset < from);
        }
    }

    /// A copy of the loaded entries (`None`: not loaded).
    pub fn aborted_entries(&self) -> Option<Vec<AbortedTxnEntry>> {
        self.aborted.borrow().clone()
    }

    /// Writes `.txnindex` whole and syncs it, or removes it when there is no entry (Kafka
    /// creates the file only for segments with aborted transactions). No-op when not loaded.
    pub async fn save_txn_index(&self) -> Result<()> {
        let Some(bytes) = self.aborted.borrow().as_deref().map(encode_txn_index) else {
            return Ok(());
        };
        let path = Segment::path(&self.dir, self.base_offset, "txnindex");
        if bytes.is_empty() {
            return crate::io::remove_file(&path).await;
        }
        let file = DirectFile::open(&path, true).await?;
        file.write_whole(&bytes).await?;
        file.fdatasync().await?;
        file.close().await
    }

    /// Scans batches from `from_pos` (a batch boundary whose batch has base offset
    /// `from_offset`) up to `limit_pos`, re-adding index entries after the last one kept, and
    /// stops at the first batch that is torn, fails its CRC, is zero-filled, or does not start
    /// after the previous one (a gap is allowed: compaction removes whole batches, and a
    /// follower copies a compacted leader's log with its gaps). Reads `SCAN_CHUNK_BYTES` at a time.
    pub async fn scan(
        &self,
        from_pos: u64,
        from_offset: Offset,
        limit_pos: u64,
        index_interval_bytes: u64,
    ) -> Result<ScanEnd> {
        let mut pos = from_pos;
        let mut expected = from_offset;
        let mut bytes_read = 0u64;
        let mut tail_block = Vec::new();
        let mut epoch_starts: Vec<(LeaderEpoch, Offset)> = Vec::new();
        let mut chunk_len = SCAN_CHUNK_BYTES;
        // `from_pos` is at an index entry (or 0): the next entry comes after another interval.
        self.bytes_since_index.set(0);
        while pos < limit_pos {
            let chunk_start = align_down(pos);
            let data = self.file.read_aligned(chunk_start, chunk_len).await?;
            bytes_read += data.len() as u64;
            let at_eof = data.len() < chunk_len;
            let data_end = (chunk_start + data.len() as u64).min(limit_pos);
            let avail = usize::try_from(data_end - chunk_start).unwrap_or(0);
            let mut progressed = false;
            let mut needs_bigger_chunk = false;
            // Set at the first batch that is not valid: the segment's data ends at `pos`.
            let mut at_end = false;
            loop {
                let at = usize::try_from(pos - chunk_start).unwrap_or(usize::MAX);
                let header = match stored_batch_at(&data[..avail], at, pos, limit_pos, expected) {
                    BatchAt::HeaderCut => break,
                    BatchAt::Invalid => {
                        at_end = true;
                        break;
                    }
                    BatchAt::Cut { size } => {
                        needs_bigger_chunk = true;
                        chunk_len = chunk_len.max(size + 2 * BLOCK_USIZE);
                        break;
                    }
                    BatchAt::Valid(header) => header,
                };
                let size = header.size_bytes();
                self.note_batch(&header, pos, index_interval_bytes);
                note_epoch_start(&mut epoch_starts, &header);
                pos += size as u64;
                expected = header.last_offset().plus(1);
                progressed = true;
            }
            // This chunk holds `align_down(pos)..pos`, wherever the scan stops.
            tail_block = block_tail(&data, chunk_start, pos);
            let more_on_disk = !at_eof && data_end < limit_pos;
            if at_end || !(progressed || needs_bigger_chunk && more_on_disk) {
                break;
            }
        }
        if tail_block.is_empty() && pos % BLOCK_BYTES != 0 {
            let start = align_down(pos);
            let data = self.file.read_aligned(start, BLOCK_USIZE).await?;
            bytes_read += data.len() as u64;
            tail_block = block_tail(&data, start, pos);
        }
        Ok(ScanEnd {
            end_pos: pos,
            next_offset: expected,
            tail_block,
            bytes_read,
            epoch_starts,
        })
    }
}

/// Adds `header`'s epoch and base offset to `epoch_starts` when its epoch differs from the
/// last one there.
fn note_epoch_start(epoch_starts: &mut Vec<(LeaderEpoch, Offset)>, header: &BatchHeader) {
    if epoch_starts.last().map(|(e, _)| *e) != Some(header.partition_leader_epoch) {
        epoch_starts.push((header.partition_leader_epoch, header.base_offset));
    }
}

/// What a scan finds at one place in the bytes read.
enum BatchAt {
    /// The header is not all in the bytes read.
    HeaderCut,
    /// The header is, but not the whole batch of `size` bytes.
    Cut { size: usize },
    /// Torn, fails its CRC, zero-filled, past the limit, or not after the previous batch:
    /// the segment's data ends here.
    Invalid,
    /// A whole valid batch.
    Valid(BatchHeader),
}

/// Checks the batch at `at` in `data` (the bytes read, cut at the scan's limit), which is at
/// `pos` in the segment, against `limit_pos` and the `expected` next offset. The checks run
/// in this order: header present, header parses, within the limit and after the previous
/// batch, batch present, CRC.
fn stored_batch_at(data: &[u8], at: usize, pos: u64, limit_pos: u64, expected: Offset) -> BatchAt {
    if at + BATCH_HEADER_BYTES > data.len() {
        return BatchAt::HeaderCut;
    }
    let Ok(header) = BatchHeader::parse(&data[at..]) else {
        return BatchAt::Invalid;
    };
    let size = header.size_bytes();
    if pos + size as u64 > limit_pos || header.magic != 2 || header.base_offset < expected {
        return BatchAt::Invalid;
    }
    if at + size > data.len() {
        return BatchAt::Cut { size };
    }
    if validate_stored_batch(&data[at..at + size]).is_err() {
        return BatchAt::Invalid;
    }
    BatchAt::Valid(header)
}

/// The bytes of `[align_down(pos), pos)` out of `data`, which starts at `data_start`.
fn block_tail(data: &Bytes, data_start: u64, pos: u64) -> Vec<u8> {
    let start = align_down(pos);
    if start < data_start || pos == start {
        return Vec::new();
    }
    let from = usize::try_from(start - data_start).unwrap_or(usize::MAX);
    let to = usize::try_from(pos - data_start).unwrap_or(usize::MAX);
    data.get(from..to).map(<[u8]>::to_vec).unwrap_or_default()
}

fn push_time_entry(index: &mut SegmentIndex, base: Offset, max: Option<(TimestampMs, Offset)>) {
    let Some((timestamp, offset)) = max else {
        return;
    };
    if index.times.last().is_none_or(|e| timestamp > e.timestamp) {
        let relative_offset = relative(base, offset);
        if index
            .times
            .last()
            .is_none_or(|e| relative_offset > e.relative_offset)
        {
            index.times.push(TimeEntry {
                timestamp,
                relative_offset,
            });
        }
    }
}

/// Reads a `.txnindex` file: a missing file is empty; a damaged one keeps its longest valid
/// prefix (with a warning). Errors: I/O.
pub async fn read_txn_index(path: &Path) -> Result<Vec<AbortedTxnEntry>> {
    let bytes = read_small_file(path).await?;
    let (entries, whole) = decode_txn_index(&bytes);
    if !whole {
        tracing::warn!(path = %path.display(), kept = entries.len(), "damaged txnindex; keeping its valid prefix");
    }
    Ok(entries)
}

/// Reads a whole small file (an index) with aligned direct reads; a missing file is empty.
async fn read_small_file(path: &Path) -> Result<Vec<u8>> {
    if !path.exists() {
        return Ok(Vec::new());
    }
    let file = DirectFile::open(path, false).await?;
    let size = file.file_size().await?;
    let len = usize::try_from(crate::io::align_up(size)).map_err(|_| StorageError::Corrupt {
        path: path.to_path_buf(),
        why: "index too large".into(),
    })?;
    let data = if len == 0 {
        Bytes::new()
    } else {
        file.read_aligned(0, len).await?
    };
    file.close().await?;
    Ok(data.to_vec())
}
