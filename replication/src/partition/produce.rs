//! The leader's produce path: [`Partition::append`] and the acknowledgement it waits for —
//! the local write (and `fdatasync` where `flush.messages` is due), then, for `acks=all`, the
//! high watermark passing the records (invariant 2 of the parent module) — and the moves of
//! the high watermark that follow a write.

use super::*;

impl<S: PartitionStore + 'static> Partition<S> {
    /// Appends `batches` (checked once by the caller, [`storage::ValidatedBatches`]) on this
    /// leader at its leader epoch and answers as `acks` asks: [`Acks::None`] once they are in
    /// the log's tail, [`Acks::Leader`] once their write has completed (and been synced where
    /// `flush.messages` is reached), as Kafka's synchronous local append — one call to the
    /// log ([`PartitionStore::append`]) appends, waits and returns the written offset;
    /// [`Acks::All`] is first refused when the committed ISR is below `min.insync.replicas`,
    /// then, after the local write, waits until the high watermark passes the records, at most
    /// `timeout` from there (Kafka's `DelayedProduce`: a one-replica ISR completes at once,
    /// without a timer; a zero timeout answers at once). Whatever the answer, the high
    /// watermark follows the write. An idempotent retry of a batch still in flight waits for
    /// the original's write (and sync) and gets its offsets. Errors:
    /// [`PartitionError::Storage`] (too large, producer state, I/O, closed),
    /// [`PartitionError::NotLeaderOrFollower`] on a follower or when the leadership is lost
    /// while waiting, [`PartitionError::Isr`] (`NotEnoughReplicas`, nothing appended),
    /// [`PartitionError::RequestTimedOut`] and [`PartitionError::NotEnoughReplicasAfterAppend`]
    /// (the records stay appended).
    pub async fn append(
        self: &Rc<Self>,
        batches: ValidatedBatches,
        acks: Acks,
        timeout: Duration,
    ) -> Result<Appended, PartitionError> {
        let leader_epoch = match &*self.role.borrow() {
            Role::Leader(isr) => {
                if acks == Acks::All {
                    isr.produce_check()?;
                }
                isr.leader_epoch()
            }
            Role::Follower { leader, .. } => return Err(not_leader(*leader)),
        };
        let until = match acks {
            Acks::None => AppendUntil::InMemory,
            Acks::Leader | Acks::All => AppendUntil::Written,
        };
        let info = match self.log.append(batches, leader_epoch, until).await {
            Ok(info) => info,
            Err(e) => {
                // The records may be appended and only their write failed: the high
                // watermark follows whatever was written.
                self.advance_high_watermark();
                return Err(e.into());
            }
        };
        let appended = Appended {
            base_offset: info.base_offset,
            log_start_offset: info.log_start_offset,
            log_append_time: info.log_append_time,
        };
        let end = info.last_offset.plus(1);
        if acks == Acks::None {
            self.assert_offsets();
            self.follow_write(end, info.sync_needed);
            return Ok(appended);
        }
        // Written (invariant 2; the log asserts it where it waited), with no await since:
        // the ISR state's leader log end offset moves to the offset the call returned.
        self.advance_high_watermark_to(info.written_offset);
        if acks == Acks::All {
            self.await_replicated(end, timeout).await?;
        }
        Ok(appended)
    }

    /// Appends a transaction marker (what a partition leader does for `WriteTxnMarkers`,
    /// KIP-98) at this leader's epoch and answers once the high watermark passes it, as Kafka
    /// appends markers with `acks=all` (`ReplicaManager.appendRecords` with required acks -1
    /// from the coordinator): refused with `NotEnoughReplicas` while the committed ISR is below
    /// `min.insync.replicas`, then the local write (and sync where `flush.messages` is due),
    /// then the wait for the ISR, at most `timeout`. Appending the marker completes its
    /// producer's open transaction: the last stable offset may move at once, so the parked
    /// waiters (read_committed fetches) are woken. Errors: [`PartitionError::Storage`] (a
    /// stale producer epoch, a fenced coordinator epoch, I/O, closed),
    /// [`PartitionError::NotLeaderOrFollower`], [`PartitionError::Isr`],
    /// [`PartitionError::RequestTimedOut`] and [`PartitionError::NotEnoughReplicasAfterAppend`]
    /// (the marker stays appended).
    pub async fn append_txn_marker(
        &self,
        marker: storage::TxnMarker,
        timeout: Duration,
    ) -> Result<Appended, PartitionError> {
        let leader_epoch = match &*self.role.borrow() {
            Role::Leader(isr) => {
                isr.produce_check()?;
                isr.leader_epoch()
            }
            Role::Follower { leader, .. } => return Err(not_leader(*leader)),
        };
        let info = match self.log.append_txn_marker(marker, leader_epoch).await {
            Ok(info) => info,
            Err(e) => {
                self.advance_high_watermark();
                return Err(e.into());
            }
        };
        // The producer's transaction is complete: the LSO may have moved without the HW.
        self.high_watermark_moved.notify_all();
        let end = info.last_offset.plus(1);
        self.await_written(end, info.sync_needed).await?;
        self.await_replicated(end, timeout).await?;
        Ok(Appended {
            base_offset: info.base_offset,
            log_start_offset: info.log_start_offset,
            log_append_time: None,
        })
    }

    /// Waits until the high watermark reaches `end` (Kafka's `DelayedProduce` over
    /// `checkEnoughReplicasReachOffset`), at most `timeout`. With the leader its own only ISR
    /// member the written records are already below the high watermark: no timer is made.
    /// Errors: [`PartitionError::NotEnoughReplicasAfterAppend`],
    /// [`PartitionError::RequestTimedOut`], [`PartitionError::NotLeaderOrFollower`] when the
    /// leadership is lost, a closed partition.
    async fn await_replicated(&self, end: Offset, timeout: Duration) -> Result<(), PartitionError> {
        let mut timer = None;
        loop {
            let woken = self.high_watermark_moved.notified();
            let state = match &*self.role.borrow() {
                Role::Leader(isr) => isr.ack_state(end),
                Role::Follower { leader, .. } => return Err(not_leader(*leader)),
            };
            match state {
                AckState::Done => return Ok(()),
                AckState::NotEnoughReplicasAfterAppend => {
                    return Err(PartitionError::NotEnoughReplicasAfterAppend { end_offset: end })
                }
                AckState::Waiting => {}
            }
            if self.closed.get() {
                return Err(storage::StorageError::Closed.into());
            }
            if timeout.is_zero() {
                return Err(PartitionError::RequestTimedOut { timeout });
            }
            let timer = timer.get_or_insert_with(|| self.runtime.sleep(timeout));
            let timed_out = future::or(
                async {
                    woken.await;
                    false
                },
                async {
                    timer.await;
                    true
                },
            )
            .await;
            if timed_out {
                return Err(PartitionError::RequestTimedOut { timeout });
            }
        }
    }

    /// Moves the high watermark over the write of the records below `end` once it completes,
    /// with no one awaiting the answer.
    fn follow_write(self: &Rc<Self>, end: Offset, synced: bool) {
        let partition = self.clone();
        self.runtime.spawn(Box::pin(async move {
            let _ = partition.await_written(end, synced).await;
        }));
    }

    /// Waits until every record below `end` is written (and synced when `synced`), then moves
    /// the high watermark over what is written.
    async fn await_written(&self, end: Offset, synced: bool) -> Result<(), PartitionError> {
        let result = if synced {
            self.log.flush_to(end).await
        } else {
            self.log.wait_written(end).await
        };
        self.advance_high_watermark();
        result.map(|_| ()).map_err(PartitionError::from)
    }
}
