//! Removing records: truncation from the end (`truncate_to`, a follower cutting to the
//! leader's log, KIP-101/279), and from the start — DeleteRecords (KIP-107) and retention by
//! `retention.ms` / `retention.bytes` (closed segments only).

use super::{
    blocking_dir_op, reserve_after_recovery, sync_dir, PartitionLog, LOG_START_CHECKPOINT_FILE,
};
use crate::batch::BatchHeader;
use crate::checkpoint;
use crate::config::CleanupPolicy;
use crate::error::{Result, StorageError};
use crate::io::{align_down, align_up, remove_file, BLOCK_BYTES, BLOCK_USIZE};
use crate::segment::Segment;
use crate::types::{Offset, TimestampMs};
use crate::writer::Writer;
use std::rc::Rc;

impl PartitionLog {
    /// Removes every record at or after `offset` (a follower truncating to the leader's log,
    /// KIP-101/279). If `offset` falls inside a batch, the whole batch goes, so the new log end
    /// is that batch's base offset; the high watermark, and its checkpoint where it was above,
    /// come down to the new end before this returns. Errors: `offset` below the log start, I/O.
    pub async fn truncate_to(&self, offset: Offset) -> Result<()> {
        let log_end = self.log_end_offset();
        if offset >= log_end {
            // As Kafka: an entry at the log end (an epoch that wrote nothing) conflicts with
            // the leader's log, so the cache is cut at the log end even here.
            return self.truncate_leader_epochs_from_end(log_end).await;
        }
        {
            let st = self.shared.state.borrow();
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
            // After the data: a crash before this write leaves entries past the log end in
            // the file, which recovery cuts.
            self.truncate_leader_epochs_from_end(cut.1).await?;
            // Before any append past the cut: a checkpoint above it would, after a crash,
            // count records appended after the truncation as replicated.
            let checkpointed = self.shared.state.borrow().hw_checkpointed;
            if checkpointed.is_some_and(|hw| hw > cut.1) {
                self.checkpoint_high_watermark().await?;
            }
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
        self.truncate_leader_epochs_from_start(self.log_start_offset());
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
    /// already holding a deleted segment finishes from the open file. Returns segments deleted
    /// (none when `cleanup.policy` is not `delete`).
    pub async fn enforce_retention(&self, now: TimestampMs) -> Result<usize> {
        let cfg = self.config();
        if cfg.cleanup_policy != CleanupPolicy::Delete {
            return Ok(0);
        }
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
        self.truncate_leader_epochs_from_start(self.log_start_offset());
        self.remove_segment_files(base).await
    }

    async fn remove_segment_files(&self, base: Offset) -> Result<()> {
        for ext in ["log", "index", "timeindex"] {
            remove_file(&Segment::path(&self.shared.dir, base, ext)).await?;
        }
        Ok(())
    }
}
