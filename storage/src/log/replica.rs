//! What partition replication (DESIGN.md §9) needs of the log: the follower's append of the
//! leader's batches (`append_as_follower`), the leader-epoch cache's queries and its
//! `leader-epoch-checkpoint` file, and the per-partition `high-watermark` checkpoint.
//!
//! The leader-epoch checkpoint follows the cache (`State::epochs`): every change marks it
//! dirty and one background task at a time rewrites the file (checkpoint.rs: CRC-guarded, temp
//! file + fsync + rename + directory fsync). Appends do not wait for it; a roll, a close and a
//! truncation do ([`PartitionLog::leader_epochs_written`]). Crash argument (also in
//! `docs/storage-format.md`): an entry the file lacks starts in the active segment after what
//! a clean close left indexed, which recovery scans and assigns again; an entry the file has
//! too many (a truncation or a log start move not yet written) is cut by recovery's
//! `truncate_from_end(log end)` / `truncate_from_start(log start)`.

use super::append::Origin;
use super::epochs::LeaderEpochCache;
use super::{
    AppendInfo, PartitionLog, Shared, HIGH_WATERMARK_CHECKPOINT_FILE, LEADER_EPOCH_CHECKPOINT_FILE,
};
use crate::batch::{split_stored_batches, BatchHeader};
use crate::checkpoint;
use crate::error::{Result, StorageError};
use crate::io::spawn_detached;
use crate::types::{LeaderEpoch, Offset};
use bytes::Bytes;
use std::path::Path;
use std::rc::Rc;

/// Bytes read at a time when the leader-epoch cache is rebuilt from the whole log.
const REBUILD_READ_BYTES: usize = 1 << 20;

impl PartitionLog {
    /// Appends the leader's batches as a follower replicates them (Kafka's `appendAsFollower`):
    /// `records` — whole RecordBatch v2 from a Fetch response — are validated as the leader's
    /// append validates them (length, magic, record count, CRC-32C; not `max.message.bytes`,
    /// which the leader applied), and must continue the log: the first base offset is the log
    /// end offset and each batch starts after the previous one. Offsets, partition leader
    /// epochs and timestamps stay as the leader set them; each batch's epoch is assigned to
    /// the leader-epoch cache (Kafka's rules, [`LeaderEpochCache::assign`]); producers' state
    /// is updated from the batches without checking their sequences (the leader did).
    ///
    /// Returns once the batches' O_DIRECT write has completed (and `fdatasync` too when
    /// `flush.messages` was reached): the follower's next fetch offset acknowledges them
    /// (DESIGN.md §3). Errors: [`StorageError::InvalidBatch`],
    /// [`StorageError::UnexpectedAppendOffset`], [`StorageError::MissingLeaderEpoch`] (nothing
    /// appended); as [`PartitionLog::append`] for disk, write errors and a closed log.
    pub async fn append_as_follower(&self, records: Bytes) -> Result<AppendInfo> {
        let batches = split_stored_batches(&records)?;
        check_follower_batches(&batches)?;
        let mut info = self.append_batches(batches, Origin::Follower, None).await?;
        self.wait_acknowledgeable(&mut info).await?;
        Ok(info)
    }

    /// A copy of the leader-epoch cache.
    pub fn leader_epochs(&self) -> LeaderEpochCache {
        self.shared.state.borrow().epochs.clone()
    }

    /// The newest leader epoch in the cache.
    pub fn latest_leader_epoch(&self) -> Option<LeaderEpoch> {
        self.shared.state.borrow().epochs.latest_epoch()
    }

    /// The start offset of `epoch` in the leader-epoch cache (`None`: no entry): for the
    /// current epoch, where its leader took over (Kafka's `leaderEpochStartOffsetOpt`).
    pub fn leader_epoch_start_offset(&self, epoch: LeaderEpoch) -> Option<Offset> {
        let st = self.shared.state.borrow();
        st.epochs
            .entries()
            .iter()
            .find(|e| e.epoch == epoch)
            .map(|e| e.start_offset)
    }

    /// The leader epoch of the record at `offset`: that of the newest cache entry starting
    /// at or before it (`None`: no entry does).
    pub fn leader_epoch_for_offset(&self, offset: Offset) -> Option<LeaderEpoch> {
        self.shared.state.borrow().epochs.epoch_for_offset(offset)
    }

    /// `OffsetForLeaderEpoch`'s answer for `requested` against this log's end:
    /// [`LeaderEpochCache::end_offset_for`] (`None`: Kafka's undefined epoch and offset).
    pub fn end_offset_for_leader_epoch(
        &self,
        requested: LeaderEpoch,
    ) -> Option<(LeaderEpoch, Offset)> {
        let st = self.shared.state.borrow();
        st.epochs.end_offset_for(requested, st.log_end)
    }

    /// Assigns `epoch` to start at the log end offset, durably — what Kafka's leader does when
    /// it takes over a partition (`Partition.makeLeader`), so that `OffsetForLeaderEpoch`
    /// answers for the new epoch before it has appended anything. Kafka's `assign` rules; no
    /// change (and no write) when the epoch already starts at or before the log end. Like
    /// Kafka's, the entry goes again at the next open while no batch of the epoch follows it
    /// (recovery cuts entries at the log end). Errors: a negative epoch is refused as
    /// [`StorageError::MissingLeaderEpoch`]; the sticky write error; a closed log.
    pub async fn assign_leader_epoch(&self, epoch: LeaderEpoch) -> Result<()> {
        {
            let mut st = self.shared.state.borrow_mut();
            self.check_usable(&st)?;
            if epoch.0 < 0 {
                return Err(StorageError::MissingLeaderEpoch {
                    base_offset: st.log_end,
                });
            }
            let log_end = st.log_end;
            if st.epochs.assign(epoch, log_end) {
                st.epochs_dirty = true;
            }
        }
        self.leader_epochs_written().await
    }

    /// Writes the high watermark to the partition's `high-watermark` checkpoint (atomically,
    /// durably) and returns the value the file holds; nothing is written when it already
    /// holds the current value. The caller decides when (Kafka checkpoints every
    /// `replica.high.watermark.checkpoint.interval.ms`, and at shutdown); the next open starts
    /// from it, clamped to the log. A truncation below the checkpointed value rewrites it
    /// before returning ([`PartitionLog::truncate_to`]). Concurrent calls write one after
    /// another. Errors: I/O, [`StorageError::Closed`].
    pub async fn checkpoint_high_watermark(&self) -> Result<Offset> {
        self.write_high_watermark_checkpoint(None).await
    }

    /// Writes `value` (`None`: the high watermark as it is once no other write of the file
    /// runs) to the `high-watermark` checkpoint unless the file holds it already; returns the
    /// value written. One write of the file at a time (they share its temp file).
    pub(super) async fn write_high_watermark_checkpoint(
        &self,
        value: Option<Offset>,
    ) -> Result<Offset> {
        loop {
            let notified = self.shared.notify.notified();
            {
                let mut st = self.shared.state.borrow_mut();
                if st.closed {
                    return Err(StorageError::Closed);
                }
                if !st.hw_writing {
                    st.hw_writing = true;
                    break;
                }
            }
            notified.await;
        }
        let hw = value.unwrap_or_else(|| self.high_watermark());
        let result = if self.shared.state.borrow().hw_checkpointed == Some(hw) {
            Ok(())
        } else {
            let path = self.shared.dir.join(HIGH_WATERMARK_CHECKPOINT_FILE);
            checkpoint::write(&path, &[hw.0]).await
        };
        let mut st = self.shared.state.borrow_mut();
        st.hw_writing = false;
        if result.is_ok() {
            st.hw_checkpointed = Some(hw);
        }
        drop(st);
        self.shared.notify.notify_all();
        result.map(|()| hw)
    }

    /// The high watermark in `dir`'s `high-watermark` checkpoint: `Ok(None)` when there is
    /// none. Errors: I/O, [`StorageError::Corrupt`].
    pub async fn read_high_watermark_checkpoint(dir: &Path) -> Result<Option<Offset>> {
        let path = dir.join(HIGH_WATERMARK_CHECKPOINT_FILE);
        match checkpoint::read(&path).await? {
            None => Ok(None),
            Some(v) => match v.as_slice() {
                [hw] if *hw >= 0 => Ok(Some(Offset(*hw))),
                _ => Err(StorageError::Corrupt {
                    path,
                    why: "a high-watermark checkpoint holds one offset".into(),
                }),
            },
        }
    }

    /// Starts the task that writes the leader-epoch checkpoint if the cache changed and no
    /// write is under way (a running one picks the change up when it finishes).
    pub(super) fn write_leader_epochs_in_background(&self) {
        {
            let mut st = self.shared.state.borrow_mut();
            if st.epochs_writing || !st.epochs_dirty || st.write_error.is_some() || st.closed {
                return;
            }
            st.epochs_writing = true;
        }
        spawn_detached(write_leader_epochs(self.shared.clone()));
    }

    /// Waits until the leader-epoch checkpoint holds the cache as it is now. Errors:
    /// [`StorageError::DiskFull`] when the disk had no room for the file (the cache stays
    /// dirty; the next call writes it again); the sticky write error (also set by any other
    /// failed checkpoint write: the device is failing).
    pub(super) async fn leader_epochs_written(&self) -> Result<()> {
        // This wait tries again after a full disk.
        self.shared.state.borrow_mut().epochs_disk_full = false;
        self.write_leader_epochs_in_background();
        loop {
            let notified = self.shared.notify.notified();
            {
                let st = self.shared.state.borrow();
                self.sticky_write_error(&st)?;
                if st.epochs_disk_full && !st.epochs_writing {
                    return Err(StorageError::DiskFull {
                        op: "writing the leader-epoch checkpoint",
                        path: self.shared.dir.join(LEADER_EPOCH_CHECKPOINT_FILE),
                    });
                }
                if !st.epochs_dirty && !st.epochs_writing {
                    return Ok(());
                }
                if st.closed && !st.epochs_writing {
                    return Err(StorageError::Closed);
                }
            }
            notified.await;
        }
    }

    /// Waits until no leader-epoch or high-watermark checkpoint write is under way.
    pub(super) async fn checkpoint_writes_idle(&self) {
        loop {
            let notified = self.shared.notify.notified();
            {
                let st = self.shared.state.borrow();
                if !st.epochs_writing && !st.hw_writing {
                    return;
                }
            }
            notified.await;
        }
    }

    /// Truncation from the end (`truncate_to`): entries starting at or after `end_offset` go,
    /// durably before this returns.
    pub(super) async fn truncate_leader_epochs_from_end(&self, end_offset: Offset) -> Result<()> {
        {
            let mut st = self.shared.state.borrow_mut();
            if st.epochs.truncate_from_end(end_offset) {
                st.epochs_dirty = true;
            }
        }
        // Truncation stays strict: with entries past the cut still in the file, no append may
        // follow, so any failure, a full disk included, is sticky until the log is reopened.
        let written = self.leader_epochs_written().await;
        if let Err(e) = &written {
            let mut st = self.shared.state.borrow_mut();
            if st.write_error.is_none() && !matches!(e, StorageError::Closed) {
                st.write_error = Some(("truncating the leader-epoch checkpoint", e.errno()));
            }
        }
        written
    }

    /// The log start moved to `start_offset` (DeleteRecords, retention): the cache follows, and
    /// its checkpoint is written in the background (recovery repeats this, as Kafka's does).
    pub(super) fn truncate_leader_epochs_from_start(&self, start_offset: Offset) {
        {
            let mut st = self.shared.state.borrow_mut();
            if !st.epochs.truncate_from_start(start_offset) {
                return;
            }
            st.epochs_dirty = true;
        }
        self.write_leader_epochs_in_background();
    }

    /// Recovery of the leader-epoch cache at open, once the log's extent is known. `loaded` is
    /// the checkpoint's cache (`None`: missing or unreadable); `scanned` the epoch starts that
    /// recovery's scan of the active segment found. With a checkpoint: its entries at or past
    /// the log end go (written before a crash took their data, or a truncation not yet
    /// written), then scanned epochs newer than the latest are assigned (entries whose write
    /// a crash prevented). Without one: rebuilt from every batch of the log (a full read, once;
    /// a log made before this file existed, or a lost file). Then the log start is applied.
    /// The file is rewritten if anything changed (`file_present`: the directory has one,
    /// readable or not).
    pub(super) async fn recover_leader_epochs(
        &self,
        loaded: Option<LeaderEpochCache>,
        scanned: &[(LeaderEpoch, Offset)],
        file_present: bool,
    ) -> Result<()> {
        let (log_start, log_end) = (self.log_start_offset(), self.log_end_offset());
        let (mut cache, rebuilt) = match loaded.clone() {
            Some(mut cache) => {
                cache.truncate_from_end(log_end);
                for &(epoch, start) in scanned {
                    assign_if_newer(&mut cache, epoch, start);
                }
                (cache, false)
            }
            None => (self.scan_leader_epochs(log_start, log_end).await?, true),
        };
        cache.truncate_from_start(log_start);
        // A rebuilt cache is written unless it is empty and no file is there: no file and an
        // empty cache say the same (a new partition's open writes nothing; its first leader
        // epoch does), while an unreadable file is replaced.
        let changed = if rebuilt {
            file_present || !cache.entries().is_empty()
        } else {
            loaded.as_ref() != Some(&cache)
        };
        {
            let mut st = self.shared.state.borrow_mut();
            st.epochs = cache;
            st.epochs_dirty = changed;
        }
        if changed {
            self.leader_epochs_written().await?;
        }
        Ok(())
    }

    /// The leader-epoch cache of the batches in `[from, to)`, read from the log.
    async fn scan_leader_epochs(&self, from: Offset, to: Offset) -> Result<LeaderEpochCache> {
        let mut cache = LeaderEpochCache::new();
        let mut offset = from;
        while offset < to {
            let batches = self.read(offset, REBUILD_READ_BYTES, to).await?;
            let Some(last) = batches.last() else { break };
            for b in &batches {
                let h = b.header();
                assign_if_newer(&mut cache, h.partition_leader_epoch, h.base_offset);
            }
            offset = last.header().last_offset().plus(1);
        }
        Ok(cache)
    }
}

/// Recovery's rule (Kafka's `LogSegment.recover`): a batch's epoch starts an entry only when it
/// is newer than the latest; batches without an epoch (-1) are skipped.
fn assign_if_newer(cache: &mut LeaderEpochCache, epoch: LeaderEpoch, start: Offset) {
    if epoch.0 >= 0 && start.0 >= 0 && cache.latest_epoch().is_none_or(|l| epoch > l) {
        cache.assign(epoch, start);
    }
}

/// The checks of a follower's batches that need no log state: each has a partition leader
/// epoch, and each starts after the previous one.
fn check_follower_batches(batches: &[(BatchHeader, Bytes)]) -> Result<()> {
    for (h, _) in batches {
        if h.partition_leader_epoch.0 < 0 {
            return Err(StorageError::MissingLeaderEpoch {
                base_offset: h.base_offset,
            });
        }
        if h.base_offset.0 < 0 {
            return Err(StorageError::UnexpectedAppendOffset {
                expected: Offset(0),
                got: h.base_offset,
            });
        }
    }
    for pair in batches.windows(2) {
        let (prev, next) = (&pair[0].0, &pair[1].0);
        // `last_offset_delta` ≥ 0 (validated); a base offset near i64::MAX must not overflow.
        let expected = prev
            .base_offset
            .0
            .checked_add(i64::from(prev.last_offset_delta) + 1)
            .map(Offset);
        // A compacted leader's log has gaps between batches (issue #27): each batch starts
        // after the previous one, not necessarily right after it.
        if expected.is_none_or(|e| next.base_offset < e) {
            return Err(StorageError::UnexpectedAppendOffset {
                expected: expected.unwrap_or(Offset(i64::MAX)),
                got: next.base_offset,
            });
        }
    }
    Ok(())
}

/// The leader-epoch checkpoint writer: rewrites the file until it holds the cache as it is,
/// then ends. One runs at a time (`epochs_writing`); a failed write is the log's sticky write
/// error.
async fn write_leader_epochs(shared: Rc<Shared>) {
    let path = shared.dir.join(LEADER_EPOCH_CHECKPOINT_FILE);
    loop {
        let values = {
            let mut st = shared.state.borrow_mut();
            if !st.epochs_dirty || st.write_error.is_some() || st.closed {
                st.epochs_writing = false;
                break;
            }
            st.epochs_dirty = false;
            st.epochs.encode()
        };
        if let Err(e) = checkpoint::write(&path, &values).await {
            let mut st = shared.state.borrow_mut();
            if matches!(e, StorageError::DiskFull { .. }) {
                // No room for the file: the cache is still to be written, by the next wait
                // for it (a roll, a close, the next leader epoch), once space returns.
                st.epochs_dirty = true;
                st.epochs_disk_full = true;
            } else {
                st.write_error = Some(("writing the leader-epoch checkpoint", e.errno()));
            }
            st.epochs_writing = false;
            break;
        }
    }
    shared.notify.notify_all();
}
