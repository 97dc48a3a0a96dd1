//! Reads for consumers and admin requests: [`Partition::read`], the long-polling
//! [`Partition::fetch`] and [`Partition::wait_for_offset`], ListOffsets and DeleteRecords.

use super::*;

impl<S: PartitionStore + 'static> Partition<S> {
    /// Where reads under `isolation` stop: the high watermark, the last stable offset
    /// (KIP-98) or the log end offset.
    pub fn upper_bound(&self, isolation: Isolation) -> Offset {
        match isolation {
            Isolation::HighWatermark => self.log.high_watermark(),
            Isolation::LastStable => self.log.last_stable_offset(),
            Isolation::LogEnd => self.log.log_end_offset(),
        }
    }

    /// The replica a consumer fetching from `fetch_offset` should read from instead of this
    /// leader (KIP-392), among `candidates` (the replicas in the consumer's rack, the caller's
    /// choice): those in this leader's ISR whose log end offset, as their fetches told it, is
    /// at or past `fetch_offset`; of them the most caught-up — the highest log end offset,
    /// then the latest caught-up time, then the lowest id — as Kafka's
    /// `ReplicaManager.findPreferredReadReplica` ranks them with `ReplicaView.comparator`.
    /// `None` on a follower or when no candidate qualifies. Unlike Kafka, a replica's log start
    /// offset is not checked (the leader does not track it).
    pub fn preferred_read_replica(
        &self,
        candidates: &[NodeId],
        fetch_offset: Offset,
    ) -> Option<NodeId> {
        let role = self.role.borrow();
        let Role::Leader(isr) = &*role else {
            return None;
        };
        let in_sync = isr.isr();
        candidates
            .iter()
            .filter(|c| in_sync.contains(c))
            .filter_map(|&c| {
                let state = isr.follower(c)?;
                let log_end = state.log_end_offset.filter(|&leo| leo >= fetch_offset)?;
                Some((log_end, state.last_caught_up_time_ms, std::cmp::Reverse(c)))
            })
            .max()
            .map(|(_, _, std::cmp::Reverse(c))| c)
    }

    /// Batches from `from`, at most `max_bytes` (the first batch whole, KIP-74), below the
    /// high watermark, the last stable offset or the log end as `isolation` says; under
    /// [`Isolation::LastStable`] with the aborted transactions that may have records among
    /// them (Kafka's `UnifiedLog.read` with `TXN_COMMITTED`: those whose abort marker is at or
    /// after `from` and whose first offset is below the end of the last batch read). Errors:
    /// `from` below the log start or above the log end
    /// ([`storage::StorageError::OffsetOutOfRange`]), I/O.
    pub async fn read(
        &self,
        from: Offset,
        max_bytes: usize,
        isolation: Isolation,
    ) -> Result<Read, PartitionError> {
        self.assert_offsets();
        let upper_bound = self.upper_bound(isolation);
        let batches = self.log.read(from, max_bytes, upper_bound).await?;
        let aborted = match isolation {
            Isolation::LastStable => {
                let upto = batches
                    .last()
                    .map_or(from, |b| b.header().last_offset().plus(1));
                Some(self.log.aborted_transactions(from, upto).await?)
            }
            Isolation::HighWatermark | Isolation::LogEnd => None,
        };
        Ok(Read {
            high_watermark: self.log.high_watermark(),
            last_stable_offset: self.log.last_stable_offset(),
            log_start_offset: self.log.log_start_offset(),
            batches,
            aborted,
        })
    }

    /// Waits until the high watermark passes `offset` (is above it), `deadline` comes,
    /// `cancel` resolves, or the partition closes, whichever is first.
    pub async fn wait_for_offset(
        &self,
        offset: Offset,
        deadline: MonotonicTime,
        cancel: impl Future<Output = ()>,
    ) -> WaitOutcome {
        self.wait_for_bound(Isolation::HighWatermark, offset, deadline, cancel)
            .await
    }

    /// Waits until the bound of `isolation` ([`Partition::upper_bound`]) passes `offset`,
    /// `deadline` comes, `cancel` resolves, or the partition closes, whichever is first.
    /// Every move of the high watermark and every marker append wakes it to look again.
    pub async fn wait_for_bound(
        &self,
        isolation: Isolation,
        offset: Offset,
        deadline: MonotonicTime,
        cancel: impl Future<Output = ()>,
    ) -> WaitOutcome {
        let mut cancel = pin!(cancel);
        loop {
            let woken = self.high_watermark_moved.notified();
            if self.upper_bound(isolation) > offset {
                return WaitOutcome::Passed;
            }
            if self.closed.get() {
                return WaitOutcome::Closed;
            }
            let now = self.runtime.now();
            if now >= deadline {
                return WaitOutcome::DeadlinePassed;
            }
            let timer = self.runtime.sleep(deadline.saturating_duration_since(now));
            let cancelled = future::or(
                async {
                    (&mut cancel).await;
                    true
                },
                future::or(
                    async {
                        woken.await;
                        false
                    },
                    async {
                        timer.await;
                        false
                    },
                ),
            )
            .await;
            if cancelled {
                return WaitOutcome::Cancelled;
            }
        }
    }

    /// What a consumer's fetch from `offset` under `isolation` answers when it would read
    /// nothing now: the partition's offsets and no batches — `Some` only while the partition
    /// is open, `offset` is within the log (log start to log end; outside, a read answers
    /// OFFSET_OUT_OF_RANGE) and at or past the bound of `isolation`. `None`: a read would
    /// return records or an error. No I/O and no wait: what a fetch of many partitions looks
    /// at before it reads any (see [`Partition::bound_moved`] to wait for the answer to change).
    pub fn nothing_to_read(&self, offset: Offset, isolation: Isolation) -> Option<Read> {
        let idle = !self.closed.get()
            && offset >= self.log.log_start_offset()
            && offset <= self.log.log_end_offset()
            && offset >= self.upper_bound(isolation);
        idle.then(|| Read {
            high_watermark: self.log.high_watermark(),
            last_stable_offset: self.log.last_stable_offset(),
            log_start_offset: self.log.log_start_offset(),
            batches: Vec::new(),
            aborted: None,
        })
    }

    /// Resolves at the next move of the high watermark or the last stable offset, or the
    /// partition's close, after this call (the signal [`Partition::wait_for_bound`] waits on):
    /// taken before a [`Partition::nothing_to_read`] look with no await between, no move is
    /// missed.
    pub fn bound_moved(&self) -> storage::Notified {
        self.high_watermark_moved.notified()
    }

    /// A consumer fetch of this partition, answered once: reads from `offset` (at most
    /// `max_bytes`, below the high watermark — or the last stable offset for
    /// [`Isolation::LastStable`], read_committed) and, while fewer than `min_bytes` (at
    /// least one) came back, waits for that bound to move and reads again — until `deadline`, or
    /// until `cancel` resolves (the fetch has enough from other partitions), after which it
    /// reads once more and answers with whatever is there. Errors are [`Partition::read`]'s,
    /// answered at once.
    pub async fn fetch(
        &self,
        offset: Offset,
        max_bytes: usize,
        min_bytes: usize,
        isolation: Isolation,
        deadline: MonotonicTime,
        cancel: impl Future<Output = ()>,
    ) -> Result<Read, PartitionError> {
        let mut cancel = pin!(cancel);
        loop {
            let bound = self.upper_bound(isolation);
            let read = self.read(offset, max_bytes, isolation).await?;
            if read.bytes() >= min_bytes.max(1) {
                return Ok(read);
            }
            match self
                .wait_for_bound(isolation, bound, deadline, &mut cancel)
                .await
            {
                WaitOutcome::Passed => {}
                WaitOutcome::DeadlinePassed | WaitOutcome::Cancelled | WaitOutcome::Closed => {
                    if self.upper_bound(isolation) == bound {
                        return Ok(read); // Nothing new to read.
                    }
                    return self.read(offset, max_bytes, isolation).await;
                }
            }
        }
    }

    /// ListOffsets, bounded as Kafka's `fetchOffsetForTimestamp`: for a client
    /// ([`Isolation::HighWatermark`]) by the high watermark, so an offset whose write has not
    /// completed is never handed out; for a read_committed client ([`Isolation::LastStable`])
    /// by the last stable offset, so latest is the LSO; for a replica ([`Isolation::LogEnd`], Kafka's follower
    /// asking its leader's range after OFFSET_OUT_OF_RANGE) by the log end offset, so latest
    /// is the log end offset. Errors: I/O.
    pub async fn list_offsets(
        &self,
        spec: OffsetSpec,
        isolation: Isolation,
    ) -> Result<ListedOffset, PartitionError> {
        let upper_bound = self.upper_bound(isolation);
        match spec {
            OffsetSpec::Latest => Ok(ListedOffset {
                offset: Some(upper_bound),
                timestamp: None,
            }),
            OffsetSpec::Earliest => Ok(ListedOffset {
                offset: Some(self.log.log_start_offset()),
                timestamp: None,
            }),
            OffsetSpec::MaxTimestamp => match self.log.max_timestamp().await? {
                // The index knows the batch; the record with that timestamp is inside it.
                Some((_, batch_base)) if batch_base >= upper_bound => Ok(ListedOffset::NONE),
                Some((ts, batch_base)) => {
                    let batches = self.log.read(batch_base, 1, upper_bound).await?;
                    let (offset, timestamp) = batches
                        .first()
                        .map_or((batch_base.0, ts.0), |b| first_offset_at_or_after(b, ts.0));
                    Ok(ListedOffset {
                        offset: Some(Offset(offset)),
                        timestamp: Some(TimestampMs(timestamp)),
                    })
                }
                None => Ok(ListedOffset::NONE),
            },
            OffsetSpec::Timestamp(target) => {
                match self.log.find_offset_by_timestamp(target).await? {
                    Some(m) => {
                        let (offset, ts) = first_offset_at_or_after(&m.batch, target.0);
                        if offset >= upper_bound.0 {
                            Ok(ListedOffset::NONE)
                        } else {
                            Ok(ListedOffset {
                                offset: Some(Offset(offset)),
                                timestamp: Some(TimestampMs(ts)),
                            })
                        }
                    }
                    None => Ok(ListedOffset::NONE),
                }
            }
        }
    }

    /// DeleteRecords (KIP-107): moves the log start offset to `before` (`None`: the high
    /// watermark); returns the new log start offset (Kafka's "low watermark"). Errors:
    /// [`PartitionError::OffsetOutOfRange`] for an offset that is negative or above the high
    /// watermark (as Kafka's `UnifiedLog.maybeIncrementLogStartOffset` callers), I/O.
    pub async fn delete_records(&self, before: Option<Offset>) -> Result<Offset, PartitionError> {
        let high_watermark = self.log.high_watermark();
        let offset = match before {
            None => high_watermark,
            Some(o) if o.0 < 0 || o > high_watermark => {
                return Err(PartitionError::OffsetOutOfRange {
                    offset: o,
                    high_watermark,
                })
            }
            Some(o) => o,
        };
        Ok(self.log.delete_records_before(offset).await?)
    }
}
