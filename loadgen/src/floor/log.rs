//! One partition of the floor: the broker's per-record system work and nothing else.
//!
//! A produced batch gets its offsets (the 8-byte `baseOffset` of each RecordBatch is set, as a
//! broker does; nothing else is checked or rewritten), is appended to an in-memory list, and
//! is acknowledged only once one O_DIRECT write of the 4 KiB block(s) it touches has completed
//! into the partition's preallocated file (DESIGN.md §3: acknowledged means written). Writes
//! are group-committed as Sluice's log does: while one write is in flight, later batches wait
//! and the next write covers them all. The file is a ring: positions wrap at
//! [`FILE_BYTES`], since nothing ever reads it back; fetches are answered from memory. The
//! ring is written with zeros once at creation: a write into a preallocated but unwritten
//! extent is punted by io_uring to its io-wq workers (an extent conversion), which Sluice
//! avoids with its zero-ahead writes; so the floor's data writes, like Sluice's, overwrite
//! written blocks. (Sluice's zero-ahead writes themselves — one 256 KiB write per 256 KiB of
//! log — are left out of the floor.)
//!
//! Offsets become visible to fetches (the high watermark) only when their write completed.

use crate::event::Event;
use bytes::{Bytes, BytesMut};
use glommio::io::DmaFile;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::path::Path;

/// O_DIRECT block size, in bytes.
const BLOCK_BYTES: u64 = 4096;
/// Bytes preallocated (and zeroed) per partition file; write positions wrap at this size.
pub const FILE_BYTES: u64 = 16 << 20;
/// Size of each zeroing write at creation.
const ZERO_WRITE_BYTES: usize = 1 << 20;
/// Bytes of batches kept in memory per partition for fetches (older ones are dropped and the
/// log start offset moves on).
const RETAINED_BYTES: usize = 16 << 20;
/// RecordBatch v2 header: `baseOffset` (8) `batchLength` (4) … `lastOffsetDelta` at byte 23.
const BATCH_LENGTH_OFFSET: usize = 8;
const LAST_OFFSET_DELTA_OFFSET: usize = 23;
const BATCH_HEADER_BYTES: usize = 61;

/// Why produced bytes were refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendError {
    /// Not a sequence of whole RecordBatch v2 headers (Kafka's `CORRUPT_MESSAGE`).
    Corrupt,
}

/// One appended batch (or request's worth of batches of one partition).
struct Batch {
    /// One past the last offset.
    end_offset: i64,
    /// Position of the first byte in the partition's byte stream.
    position: u64,
    bytes: Bytes,
}

struct LogState {
    next_offset: i64,
    /// The high watermark: every offset below it was written.
    durable_offset: i64,
    log_start_offset: i64,
    /// Bytes appended so far (the end of the byte stream).
    position: u64,
    /// Bytes written so far.
    written_position: u64,
    /// The bytes of the partial block at `written_position`, rewritten with the next write.
    tail: Vec<u8>,
    batches: VecDeque<Batch>,
    retained_bytes: usize,
    writing: bool,
}

/// What a fetch gets from one partition.
pub struct FetchSlice {
    pub high_watermark: i64,
    pub log_start_offset: i64,
    /// `None`: the fetch offset is out of range.
    pub records: Option<Bytes>,
}

/// A partition: its file, its in-memory batches and its durable offset.
pub struct PartitionLog {
    file: DmaFile,
    state: RefCell<LogState>,
    durable: Event,
}

impl PartitionLog {
    /// Creates, preallocates and zeroes `path`.
    ///
    /// # Errors
    /// Opening, preallocating or zeroing the file failed.
    pub async fn create(path: &Path) -> std::io::Result<PartitionLog> {
        let file = glommio::io::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .dma_open(path)
            .await
            .map_err(std::io::Error::from)?;
        file.pre_allocate(FILE_BYTES, false)
            .await
            .map_err(std::io::Error::from)?;
        for position in (0..FILE_BYTES).step_by(ZERO_WRITE_BYTES) {
            let mut zeros = file.alloc_dma_buffer(ZERO_WRITE_BYTES);
            zeros.as_bytes_mut().fill(0);
            file.write_at(zeros, position)
                .await
                .map_err(std::io::Error::from)?;
        }
        Ok(PartitionLog {
            file,
            state: RefCell::new(LogState {
                next_offset: 0,
                durable_offset: 0,
                log_start_offset: 0,
                position: 0,
                written_position: 0,
                tail: Vec::new(),
                batches: VecDeque::new(),
                retained_bytes: 0,
                writing: false,
            }),
            durable: Event::default(),
        })
    }

    /// Gives `records` (one or more RecordBatch v2) their offsets and appends them; returns
    /// (base offset, end offset). Not yet written: see [`PartitionLog::make_durable`].
    ///
    /// # Errors
    /// [`AppendError::Corrupt`] when the bytes are not whole batch headers.
    pub fn append(&self, records: &[u8]) -> Result<(i64, i64), AppendError> {
        let mut state = self.state.borrow_mut();
        let base_offset = state.next_offset;
        let mut bytes = BytesMut::from(records);
        let mut next = base_offset;
        let mut at = 0;
        while at < bytes.len() {
            let batch = &mut bytes[at..];
            if batch.len() < BATCH_HEADER_BYTES {
                return Err(AppendError::Corrupt);
            }
            let length = read_i32(batch, BATCH_LENGTH_OFFSET);
            let delta = read_i32(batch, LAST_OFFSET_DELTA_OFFSET);
            let total = usize::try_from(length)
                .ok()
                .and_then(|l| l.checked_add(BATCH_LENGTH_OFFSET + 4))
                .filter(|&t| t >= BATCH_HEADER_BYTES && t <= batch.len())
                .ok_or(AppendError::Corrupt)?;
            if delta < 0 {
                return Err(AppendError::Corrupt);
            }
            batch[..8].copy_from_slice(&next.to_be_bytes());
            next += i64::from(delta) + 1;
            at += total;
        }
        if next == base_offset {
            return Err(AppendError::Corrupt);
        }
        let len = bytes.len();
        let position = state.position;
        state.batches.push_back(Batch {
            end_offset: next,
            position,
            bytes: bytes.freeze(),
        });
        state.next_offset = next;
        state.position += len as u64;
        state.retained_bytes += len;
        while state.retained_bytes > RETAINED_BYTES
            && state
                .batches
                .front()
                .is_some_and(|b| b.end_offset <= state.durable_offset)
        {
            if let Some(old) = state.batches.pop_front() {
                state.retained_bytes -= old.bytes.len();
                state.log_start_offset = old.end_offset;
            }
        }
        Ok((base_offset, next))
    }

    /// Resolves once every offset below `end_offset` is written; writes what is pending when
    /// no write is in flight (group commit). `written` is notified after each write.
    ///
    /// # Errors
    /// The O_DIRECT write failed.
    pub async fn make_durable(&self, end_offset: i64, written: &Event) -> std::io::Result<()> {
        loop {
            let generation = {
                let state = self.state.borrow();
                if state.durable_offset >= end_offset {
                    return Ok(());
                }
                state.writing.then(|| self.durable.generation())
            };
            match generation {
                Some(generation) => self.durable.changed(generation).await,
                None => self.write_pending(written).await?,
            }
        }
    }

    /// One O_DIRECT write of the blocks from the written position to the appended end.
    async fn write_pending(&self, written: &Event) -> std::io::Result<()> {
        let (buffer, file_position, end_position, end_offset) = {
            let mut state = self.state.borrow_mut();
            state.writing = true;
            let start = align_down(state.written_position);
            let end = state.position;
            let len = usize::try_from(align_up(end) - start).map_err(std::io::Error::other)?;
            let mut buffer = self.file.alloc_dma_buffer(len);
            let out = buffer.as_bytes_mut();
            out[..state.tail.len()].copy_from_slice(&state.tail);
            let first_new = state
                .batches
                .partition_point(|b| b.position < state.written_position);
            let mut at = state.tail.len();
            for batch in state.batches.range(first_new..) {
                out[at..at + batch.bytes.len()].copy_from_slice(&batch.bytes);
                at += batch.bytes.len();
            }
            out[at..].fill(0);
            (buffer, start % FILE_BYTES, end, state.next_offset)
        };
        let result = self.file.write_at(buffer, file_position).await;
        let mut state = self.state.borrow_mut();
        state.writing = false;
        if result.is_ok() {
            let block_start = align_down(end_position);
            let keep = usize::try_from(end_position - block_start).unwrap_or(0);
            let mut tail = std::mem::take(&mut state.tail);
            tail.clear();
            let first_kept = state
                .batches
                .partition_point(|b| b.position + b.bytes.len() as u64 <= block_start);
            for batch in state.batches.range(first_kept..) {
                let from = usize::try_from(block_start.saturating_sub(batch.position)).unwrap_or(0);
                tail.extend_from_slice(&batch.bytes[from.min(batch.bytes.len())..]);
            }
            tail.truncate(keep);
            state.tail = tail;
            state.written_position = end_position;
            state.durable_offset = end_offset;
        }
        drop(state);
        self.durable.notify();
        written.notify();
        result.map(|_| ()).map_err(std::io::Error::from)
    }

    /// The written batches from `fetch_offset` on, at most `max_bytes` (at least one batch).
    pub fn read(&self, fetch_offset: i64, max_bytes: usize) -> FetchSlice {
        let state = self.state.borrow();
        let in_range = fetch_offset >= state.log_start_offset && fetch_offset <= state.next_offset;
        let records = in_range.then(|| {
            let first = state
                .batches
                .partition_point(|b| b.end_offset <= fetch_offset);
            let mut chosen = state
                .batches
                .range(first..)
                .take_while(|b| b.end_offset <= state.durable_offset);
            let Some(head) = chosen.next() else {
                return Bytes::new();
            };
            let mut total = head.bytes.len();
            let rest: Vec<&Batch> = chosen
                .take_while(|b| {
                    total += b.bytes.len();
                    total <= max_bytes
                })
                .collect();
            if rest.is_empty() {
                return head.bytes.clone();
            }
            let mut joined = BytesMut::with_capacity(total);
            joined.extend_from_slice(&head.bytes);
            for batch in rest {
                joined.extend_from_slice(&batch.bytes);
            }
            joined.freeze()
        });
        FetchSlice {
            high_watermark: state.durable_offset,
            log_start_offset: state.log_start_offset,
            records,
        }
    }

    /// (log start offset, high watermark).
    pub fn offsets(&self) -> (i64, i64) {
        let state = self.state.borrow();
        (state.log_start_offset, state.durable_offset)
    }
}

fn read_i32(bytes: &[u8], at: usize) -> i32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[at..at + 4]);
    i32::from_be_bytes(word)
}

fn align_down(position: u64) -> u64 {
    position / BLOCK_BYTES * BLOCK_BYTES
}

fn align_up(position: u64) -> u64 {
    position.div_ceil(BLOCK_BYTES) * BLOCK_BYTES
}

#[cfg(test)]
mod tests {
    use super::*;
    use glommio::LocalExecutorBuilder;

    /// A RecordBatch v2 header of `records` records, `len` bytes long (the rest zeros).
    fn batch(records: i32, len: usize) -> Vec<u8> {
        let mut bytes = vec![0x11u8; len];
        bytes[..8].copy_from_slice(&[0xff; 8]);
        let length = i32::try_from(len - 12).expect("small batch");
        bytes[8..12].copy_from_slice(&length.to_be_bytes());
        bytes[23..27].copy_from_slice(&(records - 1).to_be_bytes());
        bytes
    }

    fn offset_of(bytes: &[u8]) -> i64 {
        i64::from_be_bytes(bytes[..8].try_into().expect("8 bytes"))
    }

    #[test]
    fn batches_get_offsets_and_are_read_only_once_written() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("t-0.log");
        let probe_dir = dir.path().to_path_buf();
        LocalExecutorBuilder::default()
            .spawn(move || async move {
                crate::probe_iopoll(&probe_dir).await.expect("probe");
                let log = PartitionLog::create(&path).await.expect("create");
                let written = Event::default();
                let (a, b, c) = (batch(3, 1500), batch(2, 3000), batch(1, 2000));
                assert_eq!(log.append(&a), Ok((0, 3)));
                assert_eq!(log.append(&b), Ok((3, 5)));
                let before = log.read(0, 1 << 20);
                assert_eq!(before.high_watermark, 0);
                assert_eq!(before.records.as_deref(), Some(&[][..]));

                log.make_durable(5, &written).await.expect("write");
                assert_eq!(log.offsets(), (0, 5));
                let all = log.read(0, 1 << 20).records.expect("in range");
                assert_eq!(all.len(), 4500);
                assert_eq!((offset_of(&all), offset_of(&all[1500..])), (0, 3));
                let one = log.read(1, 100).records.expect("in range");
                assert_eq!(
                    one.len(),
                    1500,
                    "at least one whole batch, however small the limit"
                );
                assert_eq!(log.read(4, 1 << 20).records.map(|r| r.len()), Some(3000));
                assert!(log.read(9, 1 << 20).records.is_none(), "past the end");

                // The next write rewrites the partial block: the file holds the whole stream.
                assert_eq!(log.append(&c), Ok((5, 6)));
                log.make_durable(6, &written).await.expect("write");
                let file = std::fs::read(&path).expect("read back");
                assert_eq!(&file[..4500], &all[..]);
                assert_eq!(offset_of(&file[4500..]), 5);
                assert_eq!(&file[4508..6500], &c[8..]);
                assert_eq!(log.append(&[0u8; 10]), Err(AppendError::Corrupt));
                assert_eq!(log.append(&batch(1, 40)), Err(AppendError::Corrupt));
            })
            .expect("executor")
            .join()
            .expect("executor ran");
    }
}
