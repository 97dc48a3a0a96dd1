//! Removing records: truncation from the end (`truncate_to`, a follower cutting to the
//! leader's log, KIP-101/279), full truncation (`truncate_fully_and_start_at`, a follower
//! whose log ends below its leader's log start), and from the start — DeleteRecords
//! (KIP-107) and retention by `retention.ms` / `retention.bytes` (closed segments only).

use super::epochs::LeaderEpochCache;
use super::{
    blocking_dir_op, reserve_after_recovery, sync_dir, PartitionLog, LOG_START_CHECKPOINT_FILE,
};
use crate::batch::BatchHeader;
use crate::checkpoint;
use crate::error::{Result, StorageError};
use crate::io::{align_down, align_up, remove_file, DirectFile, BLOCK_BYTES, BLOCK_USIZE};
use crate::producer_state::ProducerState;
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
        self.check_at_or_above_log_start(offset)?;
        self.exclusive(async || {
            let (target, doomed) = self.truncation_target(offset);
            let cut = self.position_of_batch_holding(&target, offset).await?;
            let interval = self.shared.config.borrow().index_interval_bytes;
            target.truncate_index(cut.1);
            let (from_pos, from_offset) = target.last_index_entry();
            let scan = target.scan(from_pos, from_offset, cut.0, interval).await?;
            assert_eq!(scan.end_pos, cut.0, "truncation point is a batch boundary");
            self.cut_segment_files(&target, &doomed, cut.0, &scan.tail_block)
                .await?;
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
            self.checkpoints_after_cut(&target, cut.1).await
        })
        .await
    }

    /// Refuses a truncation to `offset` below the log start.
    fn check_at_or_above_log_start(&self, offset: Offset) -> Result<()> {
        let st = self.shared.state.borrow();
        if offset < st.log_start {
            return Err(StorageError::OffsetOutOfRange {
                offset,
                log_start: st.log_start,
                log_end: st.log_end,
            });
        }
        Ok(())
    }

    /// The segment holding `offset` (at or below it) and the segments after it, which a
    /// truncation to `offset` removes.
    fn truncation_target(&self, offset: Offset) -> (Rc<Segment>, Vec<Rc<Segment>>) {
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
    }

    /// The files of a truncation: removes `doomed`, then cuts `target` at `cut_pos` (its last
    /// block rewritten from `tail_block`), reserves after it and syncs it.
    async fn cut_segment_files(
        &self,
        target: &Rc<Segment>,
        doomed: &[Rc<Segment>],
        cut_pos: u64,
        tail_block: &[u8],
    ) -> Result<()> {
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
        block.as_bytes_mut()[..tail_block.len()].copy_from_slice(tail_block);
        if cut_pos % BLOCK_BYTES != 0 {
            target.file.write_at(block, align_down(cut_pos)).await?;
        }
        target.file.truncate(align_up(cut_pos)).await?;
        let config = self.config();
        reserve_after_recovery(target, cut_pos, &config).await?;
        target.file.fdatasync().await?;
        target.size_bytes.set(cut_pos);
        Ok(())
    }

    /// What follows a truncation's data, in order: the log start checkpoint when the log is
    /// empty at `cut`, producer state and `target`'s `.txnindex`, the leader-epoch cache, and
    /// the high-watermark checkpoint where it was above `cut`.
    async fn checkpoints_after_cut(&self, target: &Segment, cut: Offset) -> Result<()> {
        if self.log_start_offset() == cut {
            checkpoint::write(&self.shared.dir.join(LOG_START_CHECKPOINT_FILE), &[cut.0]).await?;
        }
        // Batches past the cut are gone: rebuild from a snapshot at or below it (open
        // transactions, and the target's `.txnindex` entries, from the replay).
        target.ensure_txn_index().await?;
        target.truncate_txn_index(cut);
        self.rebuild_producer_state().await?;
        // The target's file loses its entries past the cut before anything is appended
        // after it (recovery also drops entries past its replay start).
        target.save_txn_index().await?;
        blocking_dir_op(&self.shared.dir, "syncing", sync_dir).await?;
        // After the data: a crash before this write leaves entries past the log end in
        // the file, which recovery cuts.
        self.truncate_leader_epochs_from_end(cut).await?;
        // Before any append past the cut: a checkpoint above it would, after a crash,
        // count records appended after the truncation as replicated.
        let checkpointed = self.shared.state.borrow().hw_checkpointed;
        if checkpointed.is_some_and(|hw| hw > cut) {
            self.checkpoint_high_watermark().await?;
        }
        Ok(())
    }

    /// Removes every record and starts the log, empty, at `offset` (Kafka's
    /// `UnifiedLog.truncateFullyAndStartAt`): what a follower does when its log ends below
    /// its leader's log start offset, which the leader no longer serves. Every segment and
    /// every producer-state snapshot goes; one new, empty active segment has base `offset`;
    /// the log start offset, the log end offset and the high watermark become `offset`; the
    /// leader-epoch cache and the producer state are emptied. Every file change is durable
    /// before this returns, in an order a crash at any point survives (`docs/storage-format.md`
    /// §6.5): recovery then opens either a prefix of the old log or the empty log at `offset`.
    /// A read already holding a removed segment finishes from its open file. `offset` may be
    /// anywhere at or above 0, below or above the old log end. Errors:
    /// [`StorageError::OffsetOutOfRange`] for a negative `offset` (nothing changed); I/O
    /// (then the log refuses appends from now on with that error: its files no longer match
    /// its state; reopening recovers it); a closed log.
    pub async fn truncate_fully_and_start_at(&self, offset: Offset) -> Result<()> {
        if offset.0 < 0 {
            let st = self.shared.state.borrow();
            return Err(StorageError::OffsetOutOfRange {
                offset,
                log_start: st.log_start,
                log_end: st.log_end,
            });
        }
        self.exclusive(async || {
            let result = self.replace_with_empty_segment(offset).await;
            if let Err(e) = &result {
                self.shared.state.borrow_mut().write_error =
                    Some(("truncating the log fully", e.errno()));
                self.shared.notify.notify_all();
            }
            result
        })
        .await
    }

    /// The steps of [`PartitionLog::truncate_fully_and_start_at`], under `exclusive` (every
    /// appended byte written and synced, no zero-ahead write in flight).
    async fn replace_with_empty_segment(&self, offset: Offset) -> Result<()> {
        let dir = self.shared.dir.clone();
        // 1. A crash part-way through step 2 leaves a prefix of the log: a high-watermark
        //    checkpoint above the old log start could then count records appended after
        //    that crash as replicated (§5.2). At or below the log start it claims nothing.
        //    The high watermark in memory comes down too, so that a concurrent
        //    `checkpoint_high_watermark` cannot write the old value back meanwhile.
        self.lower_high_watermark_to_log_start().await?;
        // 2. The producer snapshots (a crash then leaves segments without them: producer
        //    state is replayed from the log, never taken from a snapshot of removed batches),
        //    then every segment, newest first (a crash leaves a prefix of whole segments, the
        //    last recovered as the active one), durably.
        self.remove_producer_snapshots().await?;
        self.remove_every_segment().await?;
        // 3. The leader-epoch cache empties (Kafka's `clearAndFlush`), durably: with no
        //    segment left, an entry the file kept would outlive its data.
        {
            let mut st = self.shared.state.borrow_mut();
            st.epochs = LeaderEpochCache::new();
            st.epochs_dirty = true;
        }
        self.leader_epochs_written().await?;
        // 4. The new log start: from here, a directory without segments opens as the empty
        //    log at `offset` (open takes the checkpoint as the base of its first segment).
        checkpoint::write(&dir.join(LOG_START_CHECKPOINT_FILE), &[offset.0]).await?;
        // 5. The new active segment, as open would create it; its name made durable.
        let segment = self.create_empty_segment(offset).await?;
        {
            let mut st = self.shared.state.borrow_mut();
            st.segments.clear();
            st.segments.insert(offset, segment.clone());
            st.writer = Writer::new(segment, 0, offset, Vec::new());
            st.log_start = offset;
            st.log_end = offset;
            st.high_watermark = offset;
            st.durable_offset = offset;
            st.unflushed_records = 0;
            st.producers = ProducerState::default();
        }
        self.shared
            .cache
            .truncate_from(self.shared.cache_id, Offset(0));
        // 6. A checkpointed high watermark follows the log (Kafka sets it to the new end).
        if self.shared.state.borrow().hw_checkpointed.is_some() {
            self.write_high_watermark_checkpoint(Some(offset)).await?;
        }
        Ok(())
    }

    /// Step 1 of [`PartitionLog::replace_with_empty_segment`]: the high watermark, in memory
    /// and in its checkpoint where that is above, comes down to the log start.
    async fn lower_high_watermark_to_log_start(&self) -> Result<()> {
        let (old_start, checkpointed) = {
            let mut st = self.shared.state.borrow_mut();
            st.high_watermark = st.high_watermark.min(st.log_start);
            (st.log_start, st.hw_checkpointed)
        };
        if checkpointed.is_some_and(|hw| hw > old_start) {
            self.write_high_watermark_checkpoint(Some(old_start))
                .await?;
        }
        Ok(())
    }

    /// Removes every segment's files, newest first, then syncs the directory.
    async fn remove_every_segment(&self) -> Result<()> {
        let doomed: Vec<Offset> = self
            .shared
            .state
            .borrow()
            .segments
            .keys()
            .copied()
            .collect();
        for base in doomed.iter().rev() {
            self.remove_segment_files(*base).await?;
        }
        blocking_dir_op(&self.shared.dir, "syncing", sync_dir).await
    }

    /// Creates an empty segment at `offset` as open would create the active one (reserved,
    /// with an empty `.txnindex` in memory) and syncs the directory.
    async fn create_empty_segment(&self, offset: Offset) -> Result<Rc<Segment>> {
        let dir = &self.shared.dir;
        let file = DirectFile::open(&Segment::path(dir, offset, "log"), true).await?;
        let segment = Rc::new(Segment::new(dir, offset, file, 0, Some(Default::default())));
        reserve_after_recovery(&segment, 0, &self.config()).await?;
        segment.start_empty_txn_index();
        blocking_dir_op(dir, "syncing", sync_dir).await?;
        Ok(segment)
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
                // The cut is this batch's start. The log then ends at its base offset, or at
                // `offset` when `offset` falls in a gap compaction left before this batch
                // (Kafka's truncateTo: the log end is the target, never past it).
                return Ok((pos, header.base_offset.min(offset)));
            }
            pos += header.size_bytes() as u64;
        }
        // Past the segment's last batch (compaction removed the batches up to the next
        // segment): the cut is the segment's end, and the log ends at `offset`.
        Ok((end, offset))
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
            self.delete_oldest_segment(&segment, next_base).await?;
        }
        Ok(self.log_start_offset())
    }

    /// Applies `retention.ms` (against `now`) and `retention.bytes`: deletes closed segments
    /// wholly below the high watermark only, oldest first, and moves the log start offset to
    /// the first kept segment. A read already holding a deleted segment finishes from the open
    /// file. Returns segments deleted (none when `cleanup.policy` is not `delete`).
    ///
    /// As Kafka's `UnifiedLog.deleteOldSegments` (`highWatermark >= upperBoundOffset`): a
    /// segment holding records the ISR does not all have yet stays, so retention never moves a
    /// leader's log start past its high watermark — which would answer `acks=all` for records
    /// no follower has, and send in-sync followers out of range.
    pub async fn enforce_retention(&self, now: TimestampMs) -> Result<usize> {
        let cfg = self.config();
        if !cfg.cleanup_policy.deletes() {
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
            if next_base > self.high_watermark() {
                break;
            }
            let size = segment.size_bytes.get();
            let by_bytes = excess > 0 && size <= excess;
            // A closed segment compaction emptied has no timestamp left: it holds nothing to
            // keep, so it never holds time retention back (Kafka falls back to the file's
            // modification time there).
            let by_time = match cutoff {
                Some(cutoff) => {
                    size == 0
                        || segment
                            .max_timestamp()
                            .await?
                            .is_some_and(|(max, _)| max < cutoff)
                }
                None => false,
            };
            if !(by_bytes || by_time) {
                break;
            }
            excess = excess.saturating_sub(size);
            self.delete_oldest_segment(&segment, next_base).await?;
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

    /// Deletes `segment` if it is still the oldest segment and closed (the cleaner may have
    /// replaced it meanwhile: then nothing happens); the log start moves to `next_base`. Runs
    /// as a maintenance operation (invariant 4), so it never interleaves with a clean's swap.
    async fn delete_oldest_segment(&self, segment: &Rc<Segment>, next_base: Offset) -> Result<()> {
        self.acquire_busy().await?;
        let still_oldest = self
            .oldest_closed_segment()
            .is_some_and(|(oldest, next)| Rc::ptr_eq(&oldest, segment) && next == next_base);
        if still_oldest {
            let mut st = self.shared.state.borrow_mut();
            if let Some(old) = st.segments.remove(&segment.base_offset) {
                super::dispose_retired(old);
            }
            st.log_start = st.log_start.max(next_base);
            st.high_watermark = st.high_watermark.max(st.log_start);
        }
        let result = if still_oldest {
            self.shared
                .cache
                .evict_below(self.shared.cache_id, next_base);
            self.truncate_leader_epochs_from_start(self.log_start_offset());
            self.remove_segment_files(segment.base_offset).await
        } else {
            Ok(())
        };
        self.release_busy();
        result
    }

    async fn remove_segment_files(&self, base: Offset) -> Result<()> {
        for ext in ["log", "index", "timeindex", "txnindex"] {
            remove_file(&Segment::path(&self.shared.dir, base, ext)).await?;
        }
        Ok(())
    }
}
