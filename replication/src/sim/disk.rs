//! A simulated partition log over a fake disk: [`SimLog`] implements
//! [`crate::PartitionStore`] with `PartitionLog`'s semantics, where every write and fsync
//! completes after a seeded delay and [`SimLog::crash`] loses whatever was not written.
//!
//! What it models: group-committed writes in append order (one write in flight carries every
//! batch appended before it started), `flush.messages`, a process crash (written batches and
//! the log start offset survive; the in-memory tail does not), truncation (also the full one
//! of a follower below its leader's log start, atomic here), DeleteRecords, the
//! follower's append of a leader's batches and the leader-epoch cache (rebuilt at open from
//! the written batches, as recovery leaves it: an epoch with no batch is gone).
//! What it does not: power loss (unsynced written data is kept), torn writes inside a batch,
//! segments and retention, idempotent producer state, I/O errors. Unlike `PartitionLog` it
//! does not clamp the high watermark, so a checker sees the partition's own choice.

use super::SimRuntime;
use crate::runtime::Runtime;
use bytes::{Bytes, BytesMut};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;
use storage::{
    split_batches, AppendInfo, AppendUntil, LeaderEpoch, LeaderEpochCache, Notify, Offset,
    RecordBatch, Result, StorageError, TimestampMatch, TimestampMs, ValidatedBatches,
};

/// Longest simulated write or fsync, in µs.
const IO_DELAY_US_MAX: u64 = 2_000;

/// What survives a crash: the batches whose write completed, the log start offset and the
/// high-watermark checkpoint.
#[derive(Clone, Default)]
pub struct SimDisk {
    image: Rc<RefCell<DiskImage>>,
}

#[derive(Default)]
struct DiskImage {
    batches: Vec<RecordBatch>,
    log_start: Offset,
    /// The high watermark as last set: the simulated checkpoint, written at every move (the
    /// broker writes it now and then, so its own is older and as safe: both are committed).
    high_watermark: Option<Offset>,
}

struct State {
    /// Every batch in the log, in offset order; the first `written` are on the disk.
    batches: Vec<RecordBatch>,
    written: usize,
    log_start: Offset,
    log_end: Offset,
    written_offset: Offset,
    durable_offset: Offset,
    high_watermark: Offset,
    unflushed_records: u64,
    /// The leader-epoch cache: an entry per epoch, at its first batch's base offset.
    epochs: LeaderEpochCache,
    writing: bool,
    /// Set by a crash: this incarnation's pending writes never complete.
    crashed: bool,
}

/// A simulated partition log (cheap to clone: another handle to the same log).
#[derive(Clone)]
pub struct SimLog {
    runtime: SimRuntime,
    disk: SimDisk,
    flush_messages: u64,
    state: Rc<RefCell<State>>,
    notify: Rc<Notify>,
}

fn end_of(batch: &RecordBatch) -> Offset {
    batch.header().last_offset().plus(1)
}

impl SimLog {
    /// Opens the log on `disk` after a start or a crash: what was written is there, and the
    /// high watermark is the checkpointed one, else the log end (as `PartitionLog::open`
    /// sets it). `flush_messages` is the topic's `flush.messages` (`u64::MAX`: never).
    pub fn open(runtime: SimRuntime, disk: SimDisk, flush_messages: u64) -> SimLog {
        let (batches, log_start, checkpoint) = {
            let image = disk.image.borrow();
            (image.batches.clone(), image.log_start, image.high_watermark)
        };
        let log_end = batches.last().map_or(log_start, end_of).max(log_start);
        let high_watermark = checkpoint.map_or(log_end, |hw| hw.clamp(log_start, log_end));
        let mut epochs = LeaderEpochCache::new();
        for batch in &batches {
            let header = batch.header();
            epochs.assign(header.partition_leader_epoch, header.base_offset);
        }
        SimLog {
            runtime,
            disk,
            flush_messages,
            notify: Rc::new(Notify::default()),
            state: Rc::new(RefCell::new(State {
                written: batches.len(),
                batches,
                log_start,
                log_end,
                written_offset: log_end,
                durable_offset: log_end,
                high_watermark,
                unflushed_records: 0,
                epochs,
                writing: false,
                crashed: false,
            })),
        }
    }

    /// Crashes the process holding this log: pending writes are lost, every waiter gets
    /// [`StorageError::Closed`]; reopen with [`SimLog::open`] on the same disk.
    pub fn crash(&self) {
        self.state.borrow_mut().crashed = true;
        self.notify.notify_all();
    }

    /// Every batch in the log now (written or not), read at once: a checker's view that no
    /// other task can change halfway (a [`PartitionStore::read`] may wait for the disk).
    #[cfg(test)]
    pub fn batches_now(&self) -> Vec<RecordBatch> {
        self.state.borrow().batches.clone()
    }

    /// The offset below which every record is synced.
    pub fn durable_offset(&self) -> Offset {
        self.state.borrow().durable_offset
    }

    fn io_delay(&self) -> Duration {
        Duration::from_micros(self.runtime.random(1..IO_DELAY_US_MAX))
    }

    /// Starts the writer unless one is running: it writes everything appended so far as one
    /// burst, then the next burst, until the tail is empty.
    fn start_writer(&self) {
        if std::mem::replace(&mut self.state.borrow_mut().writing, true) {
            return;
        }
        let log = self.clone();
        self.runtime.spawn(Box::pin(async move {
            loop {
                let upto = log.state.borrow().batches.len();
                log.runtime.sleep(log.io_delay()).await;
                let mut st = log.state.borrow_mut();
                if st.crashed {
                    return;
                }
                // A truncation while the write was in flight may have cut the burst short.
                let upto = upto.min(st.batches.len());
                let mut image = log.disk.image.borrow_mut();
                for batch in &st.batches[st.written..upto] {
                    image.batches.push(batch.clone());
                }
                drop(image);
                st.written = upto;
                st.written_offset = st.batches[..upto]
                    .last()
                    .map_or(st.log_start, end_of)
                    .max(st.written_offset.min(st.log_end));
                let more = st.written < st.batches.len();
                st.writing = more;
                drop(st);
                log.notify.notify_all();
                if !more {
                    return;
                }
            }
        }));
    }

    fn closed(&self) -> Result<()> {
        if self.state.borrow().crashed {
            Err(StorageError::Closed)
        } else {
            Ok(())
        }
    }

    /// As `PartitionLog`'s: waits until `info`'s records are written (and synced when
    /// `sync_needed`), then sets its written and log start offsets to the log's.
    async fn wait_acknowledgeable(&self, info: &mut AppendInfo) -> Result<()> {
        let end = info.last_offset.plus(1);
        if info.sync_needed {
            crate::PartitionStore::flush_to(self, end).await?;
        } else {
            crate::PartitionStore::wait_written(self, end).await?;
        }
        let st = self.state.borrow();
        info.written_offset = st.written_offset;
        info.log_start_offset = st.log_start;
        Ok(())
    }

    /// The leader's append into the simulated tail, as `PartitionLog`'s: offsets and the
    /// epoch stamped, nothing written yet.
    fn append_in_memory(
        &self,
        batches: &ValidatedBatches,
        leader_epoch: LeaderEpoch,
    ) -> AppendInfo {
        let mut st = self.state.borrow_mut();
        let base_offset = st.log_end;
        let mut max_timestamp = TimestampMs(i64::MIN);
        let mut records_appended = 0u64;
        for (header, bytes) in batches.iter() {
            // Stamp baseOffset and partitionLeaderEpoch, as the log does (outside the CRC).
            let mut stamped = BytesMut::from(&bytes[..]);
            stamped[0..8].copy_from_slice(&st.log_end.0.to_be_bytes());
            stamped[12..16].copy_from_slice(&leader_epoch.0.to_be_bytes());
            let batch = RecordBatch::from_contiguous(stamped.freeze());
            let base = st.log_end;
            st.epochs.assign(leader_epoch, base);
            st.log_end = end_of(&batch);
            max_timestamp = max_timestamp.max(header.max_timestamp);
            records_appended += u64::try_from(header.records_count).unwrap_or(0);
            st.batches.push(batch);
        }
        st.unflushed_records += records_appended;
        let flush_due = st.unflushed_records >= self.flush_messages;
        if flush_due {
            st.unflushed_records = 0;
        }
        AppendInfo {
            base_offset,
            last_offset: st.log_end.plus(-1),
            max_timestamp,
            log_append_time: None,
            flush_due,
            duplicate: false,
            sync_needed: flush_due,
            written_offset: st.written_offset,
            log_start_offset: st.log_start,
        }
    }

    fn out_of_range(st: &State, offset: Offset) -> StorageError {
        StorageError::OffsetOutOfRange {
            offset,
            log_start: st.log_start,
            log_end: st.log_end,
        }
    }
}

impl crate::PartitionStore for SimLog {
    async fn append(
        &self,
        batches: ValidatedBatches,
        leader_epoch: LeaderEpoch,
        until: AppendUntil,
    ) -> Result<AppendInfo> {
        self.closed()?;
        let mut info = self.append_in_memory(&batches, leader_epoch);
        self.start_writer();
        if until == AppendUntil::Written {
            self.wait_acknowledgeable(&mut info).await?;
        }
        Ok(info)
    }

    /// The marker batch appended like a produce's (the simulated log tracks no transactions:
    /// its last stable offset is the high watermark).
    async fn append_txn_marker(
        &self,
        marker: storage::TxnMarker,
        leader_epoch: LeaderEpoch,
    ) -> Result<AppendInfo> {
        self.closed()?;
        let bytes = storage::build_marker_batch(&marker, TimestampMs(0));
        let batches = ValidatedBatches::validate(&bytes)?;
        let info = self.append_in_memory(&batches, leader_epoch);
        self.start_writer();
        Ok(info)
    }

    async fn wait_written(&self, target: Offset) -> Result<Offset> {
        loop {
            let notified = self.notify.notified();
            {
                self.closed()?;
                let st = self.state.borrow();
                if st.written_offset >= target.min(st.log_end) {
                    return Ok(st.written_offset);
                }
            }
            notified.await;
        }
    }

    async fn flush_to(&self, target: Offset) -> Result<Offset> {
        let upto = self.wait_written(target).await?;
        self.runtime.sleep(self.io_delay()).await;
        self.closed()?;
        let mut st = self.state.borrow_mut();
        st.durable_offset = st.durable_offset.max(upto);
        Ok(st.durable_offset)
    }

    async fn append_as_follower(&self, records: Bytes) -> Result<AppendInfo> {
        self.closed()?;
        let batches = split_batches(&records)?;
        let mut info = {
            let mut st = self.state.borrow_mut();
            // Check every batch before appending any, as the log does.
            let mut expected = st.log_end;
            for (header, _) in &batches {
                if header.partition_leader_epoch.0 < 0 {
                    return Err(StorageError::MissingLeaderEpoch {
                        base_offset: header.base_offset,
                    });
                }
                if header.base_offset != expected {
                    return Err(StorageError::UnexpectedAppendOffset {
                        expected,
                        got: header.base_offset,
                    });
                }
                expected = header.last_offset().plus(1);
            }
            let base_offset = st.log_end;
            let mut max_timestamp = TimestampMs(i64::MIN);
            for (header, bytes) in batches {
                st.epochs
                    .assign(header.partition_leader_epoch, header.base_offset);
                st.log_end = header.last_offset().plus(1);
                max_timestamp = max_timestamp.max(header.max_timestamp);
                st.unflushed_records += u64::try_from(header.records_count).unwrap_or(0);
                st.batches.push(RecordBatch::from_contiguous(bytes));
            }
            let flush_due = st.unflushed_records >= self.flush_messages;
            if flush_due {
                st.unflushed_records = 0;
            }
            AppendInfo {
                base_offset,
                last_offset: st.log_end.plus(-1),
                max_timestamp,
                log_append_time: None,
                flush_due,
                duplicate: false,
                sync_needed: flush_due,
                written_offset: st.written_offset,
                log_start_offset: st.log_start,
            }
        };
        self.start_writer();
        self.wait_acknowledgeable(&mut info).await?;
        Ok(info)
    }

    async fn assign_leader_epoch(&self, epoch: LeaderEpoch) -> Result<()> {
        self.closed()?;
        let mut st = self.state.borrow_mut();
        if epoch.0 < 0 {
            return Err(StorageError::MissingLeaderEpoch {
                base_offset: st.log_end,
            });
        }
        let log_end = st.log_end;
        st.epochs.assign(epoch, log_end);
        Ok(())
    }

    fn latest_leader_epoch(&self) -> Option<LeaderEpoch> {
        self.state.borrow().epochs.latest_epoch()
    }

    fn end_offset_for_leader_epoch(&self, requested: LeaderEpoch) -> Option<(LeaderEpoch, Offset)> {
        let st = self.state.borrow();
        st.epochs.end_offset_for(requested, st.log_end)
    }

    async fn read(
        &self,
        offset: Offset,
        max_bytes: usize,
        upper_bound: Offset,
    ) -> Result<Vec<RecordBatch>> {
        // A disk read takes time too (some reads are served from memory at once).
        if self.runtime.chance(30) {
            self.runtime.sleep(self.io_delay()).await;
        }
        let st = self.state.borrow();
        if offset < st.log_start || offset > st.log_end {
            return Err(Self::out_of_range(&st, offset));
        }
        let mut out = Vec::new();
        let mut bytes = 0usize;
        for batch in st.batches.iter().filter(|b| end_of(b) > offset) {
            if batch.header().base_offset >= upper_bound {
                break;
            }
            if !out.is_empty() && bytes + batch.len() > max_bytes {
                break;
            }
            bytes += batch.len();
            out.push(batch.clone());
        }
        Ok(out)
    }

    async fn find_offset_by_timestamp(
        &self,
        target: TimestampMs,
    ) -> Result<Option<TimestampMatch>> {
        let st = self.state.borrow();
        Ok(st
            .batches
            .iter()
            .filter(|b| end_of(b) > st.log_start)
            .find(|b| b.header().max_timestamp >= target)
            .map(|batch| TimestampMatch {
                batch: batch.clone(),
                header: batch.header(),
            }))
    }

    async fn max_timestamp(&self) -> Result<Option<(TimestampMs, Offset)>> {
        let st = self.state.borrow();
        let mut best: Option<(TimestampMs, Offset)> = None;
        for batch in st.batches.iter().filter(|b| end_of(b) > st.log_start) {
            let header = batch.header();
            if best.is_none_or(|b| header.max_timestamp > b.0) {
                best = Some((header.max_timestamp, header.base_offset));
            }
        }
        Ok(best)
    }

    async fn truncate_to(&self, offset: Offset) -> Result<()> {
        // As the log does: every appended byte is written first, then the cut.
        let end = self.state.borrow().log_end;
        self.wait_written(end).await?;
        let mut st = self.state.borrow_mut();
        if offset < st.log_start {
            return Err(Self::out_of_range(&st, offset));
        }
        if offset >= st.log_end {
            // Nothing to cut, but an epoch that starts at the log end (a leader that wrote
            // nothing in it) goes, as storage's `truncate_to` drops it: else a follower's
            // fetch keeps naming that epoch and diverges again forever.
            let log_end = st.log_end;
            st.epochs.truncate_from_end(log_end);
            return Ok(());
        }
        let keep = st
            .batches
            .iter()
            .take_while(|b| end_of(b) <= offset)
            .count();
        st.batches.truncate(keep);
        st.written = st.written.min(keep);
        st.log_end = st
            .batches
            .last()
            .map_or(st.log_start, end_of)
            .max(st.log_start);
        st.written_offset = st.written_offset.min(st.log_end);
        st.durable_offset = st.durable_offset.min(st.log_end);
        st.high_watermark = st.high_watermark.min(st.log_end);
        let log_end = st.log_end;
        st.epochs.truncate_from_end(log_end);
        let mut image = self.disk.image.borrow_mut();
        image.batches.truncate(keep);
        // The checkpoint comes down with the log, as the storage's does: a checkpoint above
        // the new end would, after a crash, cover records appended after the truncation.
        image.high_watermark = image.high_watermark.map(|hw| hw.min(log_end));
        Ok(())
    }

    async fn truncate_fully_and_start_at(&self, offset: Offset) -> Result<()> {
        // As the log does: every appended byte is written first, then the files are replaced.
        let end = self.state.borrow().log_end;
        self.wait_written(end).await?;
        let mut st = self.state.borrow_mut();
        if offset.0 < 0 {
            return Err(Self::out_of_range(&st, offset));
        }
        st.batches.clear();
        st.written = 0;
        st.log_start = offset;
        st.log_end = offset;
        st.written_offset = offset;
        st.durable_offset = offset;
        st.high_watermark = offset;
        st.unflushed_records = 0;
        st.epochs = LeaderEpochCache::new();
        // The disk takes the new log whole (the storage's steps each leave a log recovery
        // opens: a prefix of the old one or the new empty one; the simulation keeps the end).
        let mut image = self.disk.image.borrow_mut();
        image.batches.clear();
        image.log_start = offset;
        image.high_watermark = image.high_watermark.map(|_| offset);
        Ok(())
    }

    async fn delete_records_before(&self, offset: Offset) -> Result<Offset> {
        self.closed()?;
        let mut st = self.state.borrow_mut();
        if offset > st.log_end {
            return Err(Self::out_of_range(&st, offset));
        }
        if offset > st.log_start {
            st.log_start = offset;
            st.high_watermark = st.high_watermark.max(offset);
            // The log start checkpoint is written before the answer.
            self.disk.image.borrow_mut().log_start = offset;
        }
        Ok(st.log_start)
    }

    fn log_start_offset(&self) -> Offset {
        self.state.borrow().log_start
    }
    fn log_end_offset(&self) -> Offset {
        self.state.borrow().log_end
    }
    fn written_offset(&self) -> Offset {
        self.state.borrow().written_offset
    }
    fn high_watermark(&self) -> Offset {
        self.state.borrow().high_watermark
    }
    fn set_high_watermark(&self, high_watermark: Offset) {
        self.state.borrow_mut().high_watermark = high_watermark;
        if !self.state.borrow().crashed {
            self.disk.image.borrow_mut().high_watermark = Some(high_watermark);
        }
    }
}
