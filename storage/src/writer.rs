//! The write pipeline of the active segment: appended batches wait here (in memory) until
//! their bytes are on disk. Full blocks are written as they fill, up to `writes_in_flight_max`
//! writes at once; the partial tail block is kept in memory and written (then rewritten as it
//! fills) whenever no other write is in flight.
//!
//! Zero-ahead: the preallocated space just past the logical end is written with zeros in the
//! background ([`Writer::next_zero_write`]), [`ZERO_WRITE_BYTES`] at a time, up to
//! `zero_ahead_bytes` ahead. fallocate leaves *unwritten* extents; an O_DIRECT write that
//! reaches into one cannot be done under io_uring's non-blocking attempt on ext4 (the write
//! spans a written and an unwritten extent, or needs the extent converted at completion), so
//! the kernel hands it to an io-wq worker thread. Data writes into zeroed space are plain
//! overwrites of written blocks, done inline; the conversion happens once per zero write.
//!
//! Invariants:
//! 1. Writes in flight never overlap: a write that starts in the block where the previous write
//!    ended waits for that write (else an older copy of the block could land last).
//! 2. `written_pos` is the end of the longest prefix whose writes all completed;
//!    `pending` holds exactly the batches that end after `written_pos`.
//! 3. `tail_block` holds the bytes `[align_down(submitted_pos), submitted_pos)`.
//! 4. Zeros never land on data: a zero write covers only blocks at or past
//!    `align_up(segment size)` when it is submitted (no data write in flight reaches there,
//!    and what is there reads as zeros already), and no data write reaching into a zero write
//!    in flight is submitted until it completes (`next_write` stops short of it).

use crate::cache::CachedBatch;
use crate::io::{align_down, align_up, WriteBuffer, BLOCK_BYTES, BLOCK_USIZE, ZERO_WRITE_BYTES};
use crate::segment::Segment;
use crate::types::Offset;
use std::collections::VecDeque;
use std::rc::Rc;

/// Distance in bytes past the logical end at which zeroing starts when it is not already
/// ahead (a fresh writer, or appends outran it): appends landing in this gap while the zero
/// write is in flight are written straight away (into unwritten extents) rather than waiting
/// for it.
const ZERO_AHEAD_GAP_BYTES: u64 = 64 << 10;

/// A batch appended to the active segment whose bytes are not all on disk yet.
pub struct PendingBatch {
    pub pos: u64,
    pub batch: CachedBatch,
}

impl PendingBatch {
    fn end(&self) -> u64 {
        self.pos + self.batch.batch.len() as u64
    }
}

struct InFlight {
    end_pos: u64,
    done: bool,
}

/// Write state of the active segment.
pub struct Writer {
    pub segment: Rc<Segment>,
    pub pending: VecDeque<PendingBatch>,
    /// Bytes of `pending` (drives append backpressure).
    pub unwritten_bytes: usize,
    submitted_pos: u64,
    /// Invariant 3; its capacity (one block) is kept, so a write allocates nothing for it.
    tail_block: Vec<u8>,
    in_flight: VecDeque<InFlight>,
    pub written_pos: u64,
    /// Offset after the last batch whose bytes are all written (not yet necessarily synced).
    pub written_offset: Offset,
    /// End of the last completed zero write (the writer's start position before any): where
    /// zeroing goes on if it is still ahead of the data.
    zeroed_pos: u64,
    /// Byte position of the zero write in flight (at most one; it covers
    /// `[pos, pos + ZERO_WRITE_BYTES)`, invariant 4).
    zeroing: Option<u64>,
}

/// One write to submit: `buffer` goes to aligned position `pos`.
pub struct WriteOp {
    pub segment: Rc<Segment>,
    pub buffer: WriteBuffer,
    pub pos: u64,
    pub end_pos: u64,
}

/// One zero-ahead write to submit: [`ZERO_WRITE_BYTES`] zeros at aligned position `pos`.
pub struct ZeroOp {
    pub segment: Rc<Segment>,
    pub pos: u64,
}

impl Writer {
    /// A writer for `segment`, whose bytes up to `end_pos` (holding offsets up to
    /// `next_offset`) are on disk; `tail_block` holds `[align_down(end_pos), end_pos)`.
    pub fn new(
        segment: Rc<Segment>,
        end_pos: u64,
        next_offset: Offset,
        mut tail_block: Vec<u8>,
    ) -> Writer {
        assert_eq!(tail_block.len() as u64, end_pos - align_down(end_pos));
        tail_block.reserve_exact(BLOCK_USIZE - tail_block.len());
        Writer {
            segment,
            pending: VecDeque::new(),
            unwritten_bytes: 0,
            submitted_pos: end_pos,
            tail_block,
            in_flight: VecDeque::new(),
            written_pos: end_pos,
            written_offset: next_offset,
            zeroed_pos: align_up(end_pos),
            zeroing: None,
        }
    }

    /// Whether appended bytes wait for a write to be submitted.
    pub fn has_unsubmitted(&self) -> bool {
        self.submitted_pos < self.segment.size_bytes.get()
    }

    /// Whether a zero write is in flight.
    pub fn is_zeroing(&self) -> bool {
        self.zeroing.is_some()
    }

    /// The next zero write, if one is due: none is in flight, the zeroed space reaches less
    /// than `zero_ahead_bytes` past the logical end, and a whole [`ZERO_WRITE_BYTES`] fits in
    /// the reserved (preallocated) space. `zero_ahead_bytes = 0` never zeroes.
    pub fn next_zero_write(&mut self, zero_ahead_bytes: u64) -> Option<ZeroOp> {
        if self.zeroing.is_some() {
            return None;
        }
        let data_end = align_up(self.segment.size_bytes.get());
        // Invariant 4: at or past the data end; go on where zeroing stopped if that is far
        // enough ahead, else leave a gap for the appends of the next moments.
        let from = if self.zeroed_pos >= data_end + ZERO_AHEAD_GAP_BYTES {
            self.zeroed_pos
        } else {
            data_end + ZERO_AHEAD_GAP_BYTES
        };
        if from >= data_end + zero_ahead_bytes
            || from + ZERO_WRITE_BYTES > self.segment.reserved_bytes.get()
        {
            return None;
        }
        assert_eq!(from % BLOCK_BYTES, 0, "zero writes are block aligned");
        self.zeroing = Some(from);
        Some(ZeroOp {
            segment: self.segment.clone(),
            pos: from,
        })
    }

    /// Marks the zero write in flight complete.
    pub fn complete_zero_write(&mut self) {
        let pos = self.zeroing.take().expect("a zero write was in flight");
        self.zeroed_pos = pos + ZERO_WRITE_BYTES;
    }

    /// Queues an appended batch at `pos` (the segment's previous end).
    pub fn push(&mut self, pos: u64, batch: CachedBatch) {
        self.unwritten_bytes += batch.batch.len();
        self.pending.push_back(PendingBatch { pos, batch });
    }

    /// The next write to submit, if one may start now (invariant 1, the in-flight bound).
    /// Copies the queued bytes into an aligned DMA buffer: the one copy on the write path.
    pub fn next_write(&mut self, chunk_bytes: usize, in_flight_max: usize) -> Option<WriteOp> {
        let end_pos = self.segment.size_bytes.get();
        if self.submitted_pos >= end_pos || self.in_flight.len() >= in_flight_max {
            return None;
        }
        let start = align_down(self.submitted_pos);
        if self
            .in_flight
            .back()
            .is_some_and(|w| !w.done && w.end_pos > start)
        {
            return None;
        }
        let mut end = end_pos.min(start + chunk_bytes as u64);
        // Invariant 4: stop short of a zero write in flight (its start is block aligned).
        if let Some(zero_pos) = self.zeroing.filter(|&z| align_up(end) > z) {
            end = zero_pos;
            if end <= self.submitted_pos {
                return None;
            }
        }
        // A write ending inside a block makes the next write wait for it (invariant 1). While
        // other writes are in flight, write whole blocks only, so streams keep the queue deep;
        // the partial tail goes out as soon as the queue is empty.
        if end % BLOCK_BYTES != 0 && !self.in_flight.is_empty() {
            end = align_down(end);
            if end <= self.submitted_pos {
                return None;
            }
        }
        let len = usize::try_from(align_up(end) - start).expect("write chunk fits usize");
        let mut buffer = self.segment.file.take_write_buffer(len);
        let dst = buffer.as_bytes_mut();
        dst[..self.tail_block.len()].copy_from_slice(&self.tail_block);
        dst[as_usize(end - start)..].fill(0);
        let first = self
            .pending
            .partition_point(|p| p.end() <= self.submitted_pos);
        for p in self.pending.range(first..) {
            if p.pos >= end {
                break;
            }
            let from = self.submitted_pos.max(p.pos);
            let to = end.min(p.end());
            p.batch.batch.copy_range(
                as_usize(from - p.pos),
                as_usize(to - p.pos),
                &mut dst[as_usize(from - start)..as_usize(to - start)],
            );
        }
        let tail_start = as_usize(align_down(end) - start);
        self.tail_block.clear();
        self.tail_block
            .extend_from_slice(&dst[tail_start..as_usize(end - start)]);
        self.submitted_pos = end;
        self.in_flight.push_back(InFlight {
            end_pos: end,
            done: false,
        });
        Some(WriteOp {
            segment: self.segment.clone(),
            buffer,
            pos: start,
            end_pos: end,
        })
    }

    /// Marks the write ending at `end_pos` complete and advances `written_pos` and
    /// `written_offset` over the completed prefix.
    pub fn complete(&mut self, end_pos: u64) {
        if let Some(w) = self
            .in_flight
            .iter_mut()
            .find(|w| w.end_pos == end_pos && !w.done)
        {
            w.done = true;
        }
        while self.in_flight.front().is_some_and(|w| w.done) {
            let w = self.in_flight.pop_front().expect("front checked above");
            self.written_pos = w.end_pos;
        }
        while self
            .pending
            .front()
            .is_some_and(|p| p.end() <= self.written_pos)
        {
            let p = self.pending.pop_front().expect("front checked above");
            self.unwritten_bytes -= p.batch.batch.len();
            self.written_offset = p.batch.last_offset.plus(1);
        }
    }
}

fn as_usize(v: u64) -> usize {
    usize::try_from(v).expect("in-memory buffer offsets fit usize")
}
