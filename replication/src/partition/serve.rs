//! Serving followers on a leader: [`Partition::replica_fetch`] (Kafka's `Partition.fetchRecords`
//! from a follower: divergence check, the follower's state in the ISR, the read below the
//! written offset) and its long-polling form [`Partition::replica_fetch_parked`].

use super::*;

impl<S: PartitionStore + 'static> Partition<S> {
    /// A follower's fetch on this leader (Kafka's `Partition.fetchRecords` from a follower):
    /// `follower` must be a replica; when `last_fetched_epoch` is given and its end offset
    /// here is below `fetch_offset`, or this leader's largest epoch ≤ it is older, the answer
    /// is that diverging epoch and no records, and the follower's state is not moved (KIP-320;
    /// the follower truncates and fetches again). Otherwise the follower's fetch offset (its
    /// written offset) moves its state in the ISR — the high watermark may move and waiters
    /// wake — and up to `max_bytes` (the first batch whole) are read from `fetch_offset`,
    /// below the leader's written offset. `broker_epoch` is the fetch's (KIP-903, `None`
    /// before Fetch v15). Errors: [`PartitionError::NotLeaderOrFollower`] on a follower,
    /// [`PartitionError::Isr`] for a non-replica, a stale broker epoch or a fetch offset above
    /// the leader's log end, [`storage::StorageError::OffsetOutOfRange`] for a fetch offset
    /// below the log start or an epoch this log cannot place, I/O.
    pub async fn replica_fetch(
        &self,
        follower: NodeId,
        fetch_offset: Offset,
        last_fetched_epoch: Option<LeaderEpoch>,
        broker_epoch: Option<i64>,
        max_bytes: usize,
        now: MonotonicTime,
    ) -> Result<ReplicaRead, PartitionError> {
        let outcome = {
            let mut role = self.role.borrow_mut();
            let isr = match &mut *role {
                Role::Leader(isr) => isr,
                Role::Follower { leader, .. } => return Err(not_leader(*leader)),
            };
            if isr.follower(follower).is_none() {
                return Err(IsrError::NotAFollower {
                    replica: follower,
                    replicas: isr.replicas().to_vec(),
                }
                .into());
            }
            let log_start_offset = self.log.log_start_offset();
            let out_of_range = || storage::StorageError::OffsetOutOfRange {
                offset: fetch_offset,
                log_start: log_start_offset,
                log_end: self.log.log_end_offset(),
            };
            // Kafka's `readFromLocalLog` refuses a fetch below the log start before the
            // follower's state moves (whatever the epochs say): the follower then asks for
            // the leader's offsets and truncates ([`Partition::handle_out_of_range`]).
            if fetch_offset < log_start_offset {
                return Err(out_of_range().into());
            }
            if let Some(epoch) = last_fetched_epoch {
                let (end_epoch, end_offset) = self
                    .log
                    .end_offset_for_leader_epoch(epoch)
                    .ok_or_else(out_of_range)?;
                if end_epoch < epoch || end_offset < fetch_offset {
                    return Ok(ReplicaRead {
                        high_watermark: self.log.high_watermark(),
                        log_start_offset,
                        batches: Vec::new(),
                        diverging_epoch: Some((end_epoch, end_offset)),
                        expand_candidate: None,
                    });
                }
            }
            isr.on_follower_fetch(follower, fetch_offset, broker_epoch, millis(now))?
        };
        if outcome.high_watermark_moved {
            self.advance_high_watermark();
        }
        // A follower reads only written bytes (invariant 2): its fetch offset is its own.
        self.assert_offsets();
        let written = self.log.written_offset();
        let batches = self.log.read(fetch_offset, max_bytes, written).await?;
        Ok(ReplicaRead {
            high_watermark: self.log.high_watermark(),
            log_start_offset: self.log.log_start_offset(),
            batches,
            diverging_epoch: None,
            expand_candidate: outcome.expand_candidate,
        })
    }

    /// [`Partition::replica_fetch`], parked as Kafka parks a follower's fetch
    /// (`DelayedFetch`): while fewer than `min_bytes` (at least 1) came back and the epochs do
    /// not diverge, it waits for the leader to write more — until `deadline`, until `cancel`
    /// resolves (the fetch has enough from other partitions), or until the role changes or
    /// the partition closes — and fetches again. Errors: [`Partition::replica_fetch`]'s, at
    /// once.
    #[allow(clippy::too_many_arguments)] // A follower fetch's fields, as Kafka's FetchParams.
    pub async fn replica_fetch_parked(
        &self,
        follower: NodeId,
        fetch_offset: Offset,
        last_fetched_epoch: Option<LeaderEpoch>,
        broker_epoch: Option<i64>,
        max_bytes: usize,
        min_bytes: usize,
        deadline: MonotonicTime,
        cancel: impl Future<Output = ()>,
    ) -> Result<ReplicaRead, PartitionError> {
        let mut cancel = pin!(cancel);
        let mut timer = None;
        loop {
            let written = self.written_moved.notified();
            let changed = self.high_watermark_moved.notified();
            let now = self.runtime.now();
            let read = self
                .replica_fetch(
                    follower,
                    fetch_offset,
                    last_fetched_epoch,
                    broker_epoch,
                    max_bytes,
                    now,
                )
                .await?;
            let bytes: usize = read.batches.iter().map(RecordBatch::len).sum();
            if bytes >= min_bytes.max(1)
                || read.diverging_epoch.is_some()
                || now >= deadline
                || self.closed.get()
            {
                return Ok(read);
            }
            let timer = timer
                .get_or_insert_with(|| self.runtime.sleep(deadline.saturating_duration_since(now)));
            // Woken: fetch again; cancelled or timed out: fetch once more and answer.
            let stop = future::or(
                async {
                    (&mut cancel).await;
                    true
                },
                future::or(
                    future::or(
                        async {
                            written.await;
                            false
                        },
                        async {
                            changed.await;
                            false
                        },
                    ),
                    async {
                        timer.await;
                        true
                    },
                ),
            )
            .await;
            if stop {
                return self
                    .replica_fetch(
                        follower,
                        fetch_offset,
                        last_fetched_epoch,
                        broker_epoch,
                        max_bytes,
                        self.runtime.now(),
                    )
                    .await;
            }
        }
    }
}
