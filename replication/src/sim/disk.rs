//! A simulated partition log over a fake disk: [`SimLog`] implements
//! [`crate::PartitionStore`] with `PartitionLog`'s semantics, where every write and fsync
//! completes after a seeded delay and [`SimLog::crash`] loses whatever was not written.
//!
//! What it models: group-committed writes in append order (one write in flight carries every
//! batch appended before it started), `flush.messages`, a process crash (written batches and
//! the log start offset survive; the in-memory tail does not), truncation, DeleteRecords.
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
    split_batches, AppendInfo, LeaderEpoch, Notify, Offset, RecordBatch, Result, StorageError,
    TimestampMatch, TimestampMs,
};

/// Longest simulated write or fsync, in µs.
const IO_DELAY_US_MAX: u64 = 2_000;

/// What survives a crash: the batches whose write completed and the log start offset.
#[derive(Clone, Default)]
pub struct SimDisk {
    image: Rc<RefCell<DiskImage>>,
}

#[derive(Default)]
struct DiskImage {
    batches: Vec<RecordBatch>,
    log_start: Offset,
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
    /// high watermark is the log end (as `PartitionLog::open` sets it). `flush_messages` is
    /// the topic's `flush.messages` (`u64::MAX`: never).
    pub fn open(runtime: SimRuntime, disk: SimDisk, flush_messages: u64) -> SimLog {
        let (batches, log_start) = {
            let image = disk.image.borrow();
            (image.batches.clone(), image.log_start)
        };
        let log_end = batches.last().map_or(log_start, end_of).max(log_start);
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
                high_watermark: log_end,
                unflushed_records: 0,
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

    fn out_of_range(st: &State, offset: Offset) -> StorageError {
        StorageError::OffsetOutOfRange {
            offset,
            log_start: st.log_start,
            log_end: st.log_end,
        }
    }
}

impl crate::PartitionStore for SimLog {
    async fn append(&self, records: Bytes, leader_epoch: LeaderEpoch) -> Result<AppendInfo> {
        self.closed()?;
        let batches = split_batches(&records)?;
        let mut st = self.state.borrow_mut();
        let base_offset = st.log_end;
        let mut max_timestamp = TimestampMs(i64::MIN);
        let mut records_appended = 0u64;
        for (header, bytes) in batches {
            // Stamp baseOffset and partitionLeaderEpoch, as the log does (outside the CRC).
            let mut stamped = BytesMut::from(&bytes[..]);
            stamped[0..8].copy_from_slice(&st.log_end.0.to_be_bytes());
            stamped[12..16].copy_from_slice(&leader_epoch.0.to_be_bytes());
            let batch = RecordBatch::from_contiguous(stamped.freeze());
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
        let info = AppendInfo {
            base_offset,
            last_offset: st.log_end.plus(-1),
            max_timestamp,
            log_append_time: None,
            flush_due,
            duplicate: false,
        };
        drop(st);
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

    fn flush_messages_enabled(&self) -> bool {
        self.flush_messages != u64::MAX
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
        self.disk.image.borrow_mut().batches.truncate(keep);
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
    }
}
