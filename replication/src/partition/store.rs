//! [`PartitionStore`]: what a [`crate::Partition`] needs from its log, implemented for
//! storage's [`PartitionLog`] (the broker) and for the simulation's log over a fake disk
//! (`sim::SimLog`). The methods are `PartitionLog`'s, with its semantics and errors.

use bytes::Bytes;
use storage::{
    AbortedTxn, AppendInfo, AppendUntil, LeaderEpoch, Offset, PartitionLog, RecordBatch, Result,
    TimestampMatch, TimestampMs, TxnMarker, ValidatedBatches,
};

/// The log under a partition. Offsets obey `log_start ≤ high_watermark ≤ written ≤ log_end`.
#[allow(async_fn_in_trait)] // Used generically on one thread: the futures need not be `Send`.
pub trait PartitionStore {
    /// Appends the checked `batches` stamped with `leader_epoch`; returns once `until` holds,
    /// with the assigned offsets and the written and log start offsets then — the leader's
    /// one call per produce (see [`PartitionLog::append_validated`]).
    async fn append(
        &self,
        batches: ValidatedBatches,
        leader_epoch: LeaderEpoch,
        until: AppendUntil,
    ) -> Result<AppendInfo>;
    /// Waits until every record below `target` is written (survives a process crash).
    async fn wait_written(&self, target: Offset) -> Result<Offset>;
    /// Waits until every record below `target` is written and synced (survives power loss).
    async fn flush_to(&self, target: Offset) -> Result<Offset>;
    /// Appends the leader's batches as a follower, offsets and epochs kept; returns once they
    /// are written (see [`PartitionLog::append_as_follower`]).
    async fn append_as_follower(&self, records: Bytes) -> Result<AppendInfo>;
    /// Durably starts `epoch` at the log end offset (see [`PartitionLog::assign_leader_epoch`]).
    async fn assign_leader_epoch(&self, epoch: LeaderEpoch) -> Result<()>;
    /// The newest leader epoch in the epoch cache.
    fn latest_leader_epoch(&self) -> Option<LeaderEpoch>;
    /// The largest epoch ≤ `requested` and its end offset (`OffsetForLeaderEpoch`'s answer).
    fn end_offset_for_leader_epoch(&self, requested: LeaderEpoch) -> Option<(LeaderEpoch, Offset)>;
    /// Batches from `offset`, at most `max_bytes` (first batch whole), below `upper_bound`.
    async fn read(
        &self,
        offset: Offset,
        max_bytes: usize,
        upper_bound: Offset,
    ) -> Result<Vec<RecordBatch>>;
    /// The first batch whose max timestamp is ≥ `target`.
    async fn find_offset_by_timestamp(&self, target: TimestampMs)
        -> Result<Option<TimestampMatch>>;
    /// The largest timestamp and the base offset of its batch.
    async fn max_timestamp(&self) -> Result<Option<(TimestampMs, Offset)>>;
    /// Removes every record at or after `offset` (whole batches).
    async fn truncate_to(&self, offset: Offset) -> Result<()>;
    /// Removes every record and starts the log, empty, at `offset`: log start, log end and
    /// high watermark become `offset`, the leader-epoch cache empties (see
    /// [`PartitionLog::truncate_fully_and_start_at`]).
    async fn truncate_fully_and_start_at(&self, offset: Offset) -> Result<()>;
    /// Moves the log start offset forward to `offset`; returns the log start offset.
    async fn delete_records_before(&self, offset: Offset) -> Result<Offset>;
    /// First offset still in the log.
    fn log_start_offset(&self) -> Offset;
    /// The offset the next appended record gets (LEO).
    fn log_end_offset(&self) -> Offset;
    /// Offset below which every record's write has completed.
    fn written_offset(&self) -> Offset;
    /// The high watermark as last set (clamped by the log).
    fn high_watermark(&self) -> Offset;
    /// Moves the high watermark, clamped to `[log_start, written]`.
    fn set_high_watermark(&self, high_watermark: Offset);
    /// The last stable offset (KIP-98, see [`PartitionLog::last_stable_offset`]); a log that
    /// does not track transactions answers the high watermark.
    fn last_stable_offset(&self) -> Offset {
        self.high_watermark()
    }
    /// The aborted transactions that may have records in `[from, upto)` (see
    /// [`PartitionLog::aborted_transactions`]); none for a log that does not track them.
    async fn aborted_transactions(&self, from: Offset, upto: Offset) -> Result<Vec<AbortedTxn>> {
        let _ = (from, upto);
        Ok(Vec::new())
    }
    /// Appends a transaction marker stamped with `leader_epoch`, in the log's tail (see
    /// [`PartitionLog::append_txn_marker`]); await [`PartitionStore::wait_written`] after.
    async fn append_txn_marker(
        &self,
        marker: TxnMarker,
        leader_epoch: LeaderEpoch,
    ) -> Result<AppendInfo>;
}

impl PartitionStore for PartitionLog {
    async fn append(
        &self,
        batches: ValidatedBatches,
        leader_epoch: LeaderEpoch,
        until: AppendUntil,
    ) -> Result<AppendInfo> {
        PartitionLog::append_validated(self, batches, leader_epoch, until).await
    }
    async fn wait_written(&self, target: Offset) -> Result<Offset> {
        PartitionLog::wait_written(self, target).await
    }
    async fn flush_to(&self, target: Offset) -> Result<Offset> {
        PartitionLog::flush_to(self, target).await
    }
    async fn append_as_follower(&self, records: Bytes) -> Result<AppendInfo> {
        PartitionLog::append_as_follower(self, records).await
    }
    async fn assign_leader_epoch(&self, epoch: LeaderEpoch) -> Result<()> {
        PartitionLog::assign_leader_epoch(self, epoch).await
    }
    fn latest_leader_epoch(&self) -> Option<LeaderEpoch> {
        PartitionLog::latest_leader_epoch(self)
    }
    fn end_offset_for_leader_epoch(&self, requested: LeaderEpoch) -> Option<(LeaderEpoch, Offset)> {
        PartitionLog::end_offset_for_leader_epoch(self, requested)
    }
    async fn read(
        &self,
        offset: Offset,
        max_bytes: usize,
        upper_bound: Offset,
    ) -> Result<Vec<RecordBatch>> {
        PartitionLog::read(self, offset, max_bytes, upper_bound).await
    }
    async fn find_offset_by_timestamp(
        &self,
        target: TimestampMs,
    ) -> Result<Option<TimestampMatch>> {
        PartitionLog::find_offset_by_timestamp(self, target).await
    }
    async fn max_timestamp(&self) -> Result<Option<(TimestampMs, Offset)>> {
        PartitionLog::max_timestamp(self).await
    }
    async fn truncate_to(&self, offset: Offset) -> Result<()> {
        PartitionLog::truncate_to(self, offset).await
    }
    async fn truncate_fully_and_start_at(&self, offset: Offset) -> Result<()> {
        PartitionLog::truncate_fully_and_start_at(self, offset).await
    }
    async fn delete_records_before(&self, offset: Offset) -> Result<Offset> {
        PartitionLog::delete_records_before(self, offset).await
    }
    fn log_start_offset(&self) -> Offset {
        PartitionLog::log_start_offset(self)
    }
    fn log_end_offset(&self) -> Offset {
        PartitionLog::log_end_offset(self)
    }
    fn written_offset(&self) -> Offset {
        PartitionLog::written_offset(self)
    }
    fn high_watermark(&self) -> Offset {
        PartitionLog::high_watermark(self)
    }
    fn set_high_watermark(&self, high_watermark: Offset) {
        PartitionLog::set_high_watermark(self, high_watermark)
    }
    fn last_stable_offset(&self) -> Offset {
        PartitionLog::last_stable_offset(self)
    }
    async fn aborted_transactions(&self, from: Offset, upto: Offset) -> Result<Vec<AbortedTxn>> {
        PartitionLog::aborted_transactions(self, from, upto).await
    }
    async fn append_txn_marker(
        &self,
        marker: TxnMarker,
        leader_epoch: LeaderEpoch,
    ) -> Result<AppendInfo> {
        PartitionLog::append_txn_marker(self, marker, leader_epoch).await
    }
}
