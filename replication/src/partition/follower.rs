//! The follower's operations: appending the leader's batches with their offsets and epochs
//! ([`Partition::append_as_follower`]), the out-of-range and diverging-epoch recoveries
//! (Kafka's `AbstractFetcherThread`), and truncation ([`Partition::truncate_to`], KIP-279).

use super::*;

impl<S: PartitionStore + 'static> Partition<S> {
    /// A follower's append of what its fetch from the leader returned (Kafka's
    /// `ReplicaFetcherThread.processPartitionData`): `records` (possibly empty) are appended
    /// with the leader's offsets and epochs and written, then the high watermark becomes
    /// `min(leader_high_watermark, written offset)`, then the log start offset moves up to
    /// `leader_log_start_offset` when that is higher (Kafka's `maybeIncrementLogStartOffset`:
    /// DeleteRecords and retention on the leader reach its followers; -1, unknown, moves
    /// nothing). When this log is empty (just started at the leader's log start) and the
    /// first batch starts below its end but holds it (the leader's log start falls inside the
    /// batch), the log starts again at that batch's base and takes it whole, as Kafka's
    /// `appendRecordsToFollowerOrFutureReplica`; the leader's log start then moves the log
    /// start back up. Errors: [`PartitionError::NotLeaderOrFollower`] on a leader; storage's
    /// (`UnexpectedAppendOffset` when the records do not continue the log, invalid batches,
    /// I/O, closed); [`PartitionError::OffsetOutOfRange`] when the leader's log start offset
    /// is above this replica's new high watermark (as Kafka: the records are appended, the
    /// log start stays; the next fetch finds the leader's range).
    pub async fn append_as_follower(
        &self,
        records: Bytes,
        leader_high_watermark: Offset,
        leader_log_start_offset: Offset,
    ) -> Result<(), PartitionError> {
        self.follower_check()?;
        if !records.is_empty() {
            match self.log.append_as_follower(records.clone()).await {
                Ok(_) => {}
                Err(storage::StorageError::UnexpectedAppendOffset { .. })
                    if self.first_batch_straddles_empty_log(&records) =>
                {
                    // Kafka's `Partition.appendRecordsToFollowerOrFutureReplica`: a log just
                    // started at the leader's log start (DeleteRecords cut inside a batch)
                    // gets that batch whole, from its base: the log starts again there.
                    let base = BatchHeader::parse(&records)
                        .map_err(storage::StorageError::from)?
                        .base_offset;
                    self.truncate_fully_and_start_at(base).await?;
                    self.log.append_as_follower(records).await?;
                }
                Err(e) => return Err(e.into()),
            }
        }
        // The role may have changed while the records were written: a leader's HW is its own.
        self.follower_check()?;
        self.set_high_watermark(leader_high_watermark.min(self.log.written_offset()));
        if leader_log_start_offset > self.log.log_start_offset() {
            let high_watermark = self.log.high_watermark();
            if leader_log_start_offset > high_watermark {
                return Err(PartitionError::OffsetOutOfRange {
                    offset: leader_log_start_offset,
                    high_watermark,
                });
            }
            self.log
                .delete_records_before(leader_log_start_offset)
                .await?;
        }
        Ok(())
    }

    /// Whether this log is empty (log start = log end) and the first batch of `records` holds
    /// its log end offset but starts below it: the leader's log start, where the follower
    /// started, falls inside that batch.
    fn first_batch_straddles_empty_log(&self, records: &[u8]) -> bool {
        let (log_start, log_end) = (self.log.log_start_offset(), self.log.log_end_offset());
        BatchHeader::parse(records).is_ok_and(|h| {
            log_start == log_end && h.base_offset < log_end && h.last_offset() >= log_end
        })
    }

    /// A follower's answer to its leader's OFFSET_OUT_OF_RANGE for its fetch offset (its log
    /// end offset), given the leader's log start and log end offsets as ListOffsets answers a
    /// replica (Kafka's `AbstractFetcherThread.fetchOffsetAndTruncate`):
    /// - the leader's log end is below this log's end (an unclean election left the leader
    ///   shorter): truncate to the leader's log end — fully, starting there, when that is below
    ///   this log's start too (as Kafka's `truncateTo` below the first segment);
    /// - the leader's log start is above this log's end (this replica was away while the
    ///   leader's retention or DeleteRecords moved past it): truncate fully and start at the
    ///   leader's log start ([`PartitionStore::truncate_fully_and_start_at`]);
    /// - otherwise nothing: the next fetch goes on from this log's end.
    ///
    /// Returns the new log end offset, where the next fetch starts. Errors:
    /// [`PartitionError::NotLeaderOrFollower`] on a leader; storage's (I/O, closed; a negative
    /// leader offset is [`storage::StorageError::OffsetOutOfRange`]).
    pub async fn handle_out_of_range(
        &self,
        leader_log_start_offset: Offset,
        leader_log_end_offset: Offset,
    ) -> Result<Offset, PartitionError> {
        self.follower_check()?;
        let log_end = self.log.log_end_offset();
        if leader_log_end_offset < log_end {
            if leader_log_end_offset >= self.log.log_start_offset() {
                self.truncate_to(leader_log_end_offset).await?;
            } else {
                self.truncate_fully_and_start_at(leader_log_end_offset)
                    .await?;
            }
        } else if leader_log_start_offset > log_end {
            self.truncate_fully_and_start_at(leader_log_start_offset)
                .await?;
        }
        Ok(self.log.log_end_offset())
    }

    /// The log starts again, empty, at `offset` (see [`Partition::handle_out_of_range`]); the
    /// high watermark with it, waiters woken.
    async fn truncate_fully_and_start_at(&self, offset: Offset) -> Result<(), PartitionError> {
        self.log.truncate_fully_and_start_at(offset).await?;
        self.high_watermark_moved.notify_all();
        Ok(())
    }

    /// A follower's truncation on a diverging epoch `(epoch, end_offset)` from its leader
    /// (Kafka's `AbstractFetcherThread.getOffsetTruncationState`): when this log knows
    /// `epoch`, to `min(end_offset, its own end of epoch, log end)`; when its largest epoch
    /// ≤ `epoch` is older, to that epoch's end here (the next fetch finds the rest); when it
    /// knows no such epoch, to `min(end_offset, log end)`. Never simply to the high watermark
    /// (the KIP-101 loss). Returns the new log end offset. Errors:
    /// [`PartitionError::NotLeaderOrFollower`] on a leader; as [`Partition::truncate_to`].
    pub async fn truncate_to_diverging_epoch(
        &self,
        epoch: LeaderEpoch,
        end_offset: Offset,
    ) -> Result<Offset, PartitionError> {
        self.follower_check()?;
        let log_end = self.log.log_end_offset();
        let target = match self.log.end_offset_for_leader_epoch(epoch) {
            Some((local_epoch, local_end)) if local_epoch == epoch => {
                local_end.min(end_offset).min(log_end)
            }
            Some((_, local_end)) => local_end.min(log_end),
            None => end_offset.min(log_end),
        };
        self.truncate_to(target.max(self.log.log_start_offset()))
            .await?;
        Ok(self.log.log_end_offset())
    }

    /// Refuses a follower's op on a leader, and on a follower taking the leadership
    /// (`Partition::become_leader` under way: it follows itself).
    fn follower_check(&self) -> Result<(), PartitionError> {
        let leading = match &*self.role.borrow() {
            Role::Leader(_) => true,
            Role::Follower { leader, .. } => *leader == self.node,
        };
        if leading {
            return Err(PartitionError::NotLeaderOrFollower {
                wanted: "a follower",
                leader: Some(self.node),
            });
        }
        Ok(())
    }

    /// Removes every record at or after `offset` (whole batches), as a follower does to match
    /// its leader (KIP-279); the high watermark comes down with the log end. Errors: `offset`
    /// below the log start, I/O.
    /// On a leader the ISR state starts again from the new log end (its high watermark
    /// never regresses otherwise).
    pub async fn truncate_to(&self, offset: Offset) -> Result<(), PartitionError> {
        self.log.truncate_to(offset).await?;
        let log_end = self.log.log_end_offset();
        if self.log.high_watermark() > log_end {
            self.log.set_high_watermark(log_end);
            self.high_watermark_moved.notify_all();
        }
        let now_ms = millis(self.runtime.now());
        let mut role = self.role.borrow_mut();
        if let Role::Leader(isr) = &mut *role {
            let written = self.log.written_offset();
            if isr.leader_log_end_offset() > written {
                let leadership = Leadership {
                    leader_epoch: isr.leader_epoch(),
                    partition_epoch: isr.partition_epoch(),
                    replicas: isr.replicas().to_vec(),
                    isr: isr.isr(),
                };
                *isr = LeaderIsr::become_leader(
                    self.node,
                    isr.config(),
                    leadership,
                    written,
                    self.log.high_watermark(),
                    now_ms,
                )?;
            }
        }
        drop(role);
        self.assert_offsets();
        Ok(())
    }
}
