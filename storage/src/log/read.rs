//! Reads: whole batches from the batch cache, the write queue, or aligned DMA reads of a
//! segment (KIP-74 first-batch rule, upper bound = high watermark or log end); lookups by
//! timestamp (ListOffsets).

use super::{PartitionLog, TimestampMatch};
use crate::batch::{BatchHeader, RecordBatch, BATCH_HEADER_BYTES};
use crate::cache::take_batches;
use crate::error::{BatchError, Result, StorageError};
use crate::io::{align_down, align_up, BLOCK_USIZE};
use crate::segment::Segment;
use crate::types::{Offset, TimestampMs};
use bytes::Bytes;
use std::rc::Rc;

/// Smallest disk read of a cold fetch, in bytes.
const READ_CHUNK_MIN_BYTES: usize = 64 << 10;
/// Largest disk read of a cold fetch beyond the first batch, in bytes.
const READ_CHUNK_MAX_BYTES: usize = 8 << 20;

impl PartitionLog {
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
        let mut offset = offset;
        loop {
            let (segment, readable_end, next_base) = {
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
                let next_base = st
                    .segments
                    .range(offset.plus(1)..)
                    .next()
                    .map(|(base, _)| *base);
                (segment.clone(), readable_end, next_base)
            };
            let out = self
                .read_segment(&segment, offset, max_bytes, upper_bound, readable_end)
                .await?;
            // A closed segment may end before the next one starts: compaction removed its
            // last batches (issue #27). The read goes on at the next segment, as Kafka's.
            match next_base {
                Some(next) if out.is_empty() && !readable_end.1 => offset = next,
                _ => return Ok(out),
            }
        }
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
            let (chunk_start, data, avail) =
                self.read_chunk(segment, pos, want, readable_end).await?;
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
                        let have = avail - at;
                        return self.cut_batch_at_end(
                            segment,
                            pos,
                            at_write_frontier,
                            out,
                            have,
                            size,
                        );
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
                    crate::batch::validate_stored_batch(&batch)
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

    /// One aligned DMA read of `segment` for [`PartitionLog::read_segment`]: about `want`
    /// bytes from `pos`, not past `readable_end`. Returns the block-aligned start of the
    /// read, the bytes read, and how many of them lie below `readable_end`.
    async fn read_chunk(
        &self,
        segment: &Segment,
        pos: u64,
        want: usize,
        readable_end: u64,
    ) -> Result<(u64, Bytes, usize)> {
        let chunk_start = align_down(pos);
        let len = usize::try_from(align_up((pos + want as u64).min(readable_end)) - chunk_start)
            .unwrap_or(usize::MAX);
        let data = segment.file.read_aligned(chunk_start, len).await?;
        self.bump_stats(|s| {
            s.dma_reads += 1;
            s.dma_read_bytes += data.len() as u64;
        });
        let avail =
            usize::try_from((chunk_start + data.len() as u64).min(readable_end) - chunk_start)
                .unwrap_or(0);
        Ok((chunk_start, data, avail))
    }

    /// A batch at `pos` of which only `have` of `need` bytes lie before the readable end: in
    /// the active segment (`at_write_frontier`) it is still being written, so the read ends
    /// with `out`; at the end of a closed segment it is damage.
    fn cut_batch_at_end(
        &self,
        segment: &Segment,
        pos: u64,
        at_write_frontier: bool,
        out: Vec<RecordBatch>,
        have: usize,
        need: usize,
    ) -> Result<Vec<RecordBatch>> {
        if at_write_frontier {
            return Ok(out);
        }
        Err(self.corrupt(segment, pos, BatchError::Truncated { have, need }))
    }

    /// The first batch holding a record and whose max timestamp is ≥ `target` (ListOffsets by
    /// timestamp), found via the segments' max timestamps and time indexes, then a short scan;
    /// `None` when no record is that recent.
    pub async fn find_offset_by_timestamp(
        &self,
        target: TimestampMs,
    ) -> Result<Option<TimestampMatch>> {
        let segments = self.segments_oldest_first();
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
                    // A batch cleaning emptied (kept as its producer's last, or the round's)
                    // keeps the max timestamp of records that are gone: no record of it can
                    // match (Kafka's `searchForTimestamp` looks at records, and finds none).
                    if header.max_timestamp >= target && header.records_count > 0 {
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
        let segments = self.segments_oldest_first();
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
}

impl PartitionLog {
    /// The segments as they are now, oldest first (held: a roll or retention meanwhile does
    /// not change what a lookup walks).
    fn segments_oldest_first(&self) -> Vec<Rc<Segment>> {
        self.shared
            .state
            .borrow()
            .segments
            .values()
            .cloned()
            .collect()
    }
}
