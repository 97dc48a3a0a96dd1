//! A partition this shard owns: its log, its high watermark's waiters (parked fetches) and its
//! topic config, with the single-node replication policy — the ISR is this broker, so the high
//! watermark is the log's written offset.
//!
//! The acknowledgement rule (DESIGN.md §3): a Produce with `acks=1` or `acks=all` is answered
//! only once the O_DIRECT writes holding all of its batches have completed (and, where
//! `flush.messages` asks, the `fdatasync` after them). The high watermark moves only over
//! written bytes too, so a consumer never reads an offset that a crash could hand to another
//! record. Writes are group-committed by the log: every append waiting on one burst is
//! released by the same write.

use crate::errors::{code, storage_error_code};
use crate::messages::{Acks, PartitionReply};
use bytes::Bytes;
use net::kafka_protocol::error::ResponseError;
use std::rc::Rc;
use std::time::Duration;
use storage::{LeaderEpoch, Notify, Offset, PartitionLog};
use tuning::config::TopicConfig;

/// A partition this shard owns.
pub struct OwnedPartition {
    pub log: PartitionLog,
    /// Fired whenever the high watermark moves: wakes parked fetches (no polling timers).
    pub hw_moved: Rc<Notify>,
    pub config: TopicConfig,
}

impl OwnedPartition {
    /// Appends a produce request's record set and answers as `acks` asks: `Acks::None` once
    /// the batches are in the log's tail, `Acks::Leader` and `Acks::All` once their write has
    /// completed (and been synced when `flush.messages` is reached). `Acks::All` waits at most
    /// `timeout`, then answers `REQUEST_TIMED_OUT` (the records stay appended, as in Kafka,
    /// whose `timeout_ms` bounds only the wait for the ISR; `acks=1` waits for the local write
    /// as Kafka's synchronous local append does). `now_ms` is the broker's
    /// wall clock for the topic's timestamp checks. An idempotent retry of a batch still in
    /// flight waits for the original's write before it is answered with its offsets.
    pub async fn produce(
        self: &Rc<Self>,
        records: Bytes,
        acks: Acks,
        timeout: Duration,
        now_ms: i64,
    ) -> PartitionReply {
        let records = match crate::produce_checks::prepare(records, &self.config, now_ms) {
            Ok(records) => records,
            Err(error) => return PartitionReply::Error(error),
        };
        let log = &self.log;
        let info = match log.append(records, LeaderEpoch(0)).await {
            Ok(info) => info,
            Err(e) => return PartitionReply::Error(storage_error_code(&e)),
        };
        let produced = PartitionReply::Produced {
            base_offset: info.base_offset.0,
            log_start_offset: log.log_start_offset().0,
            log_append_time_ms: info.log_append_time.map_or(-1, |t| t.0),
        };
        let end = info.last_offset.plus(1);
        // A retry of a batch still being synced waits for that sync as the original does.
        let synced = info.flush_due || (info.duplicate && log.config().flush_messages != u64::MAX);
        if acks == Acks::None {
            // Nobody waits for the answer, but the high watermark still follows the write.
            self.follow_write(end, synced);
            return produced;
        }
        let written = self.await_written(end, synced);
        // Kafka completes acks=all at once on a one-replica ISR whatever timeout_ms says: a
        // zero timeout only waits for the local write, as acks=1 does.
        let result = if acks == Acks::All && !timeout.is_zero() {
            let timed_out = async {
                glommio::timer::sleep(timeout).await;
                None
            };
            match futures_lite::future::or(async { Some(written.await) }, timed_out).await {
                Some(result) => result,
                None => {
                    // The write is still coming: the high watermark must follow it.
                    self.follow_write(end, synced);
                    Err(PartitionReply::Error(code(ResponseError::RequestTimedOut)))
                }
            }
        } else {
            written.await
        };
        match result {
            Ok(()) => produced,
            Err(error) => error,
        }
    }

    /// Moves the high watermark over the write of the records below `end` once it completes,
    /// with no one awaiting the answer.
    fn follow_write(self: &Rc<Self>, end: Offset, synced: bool) {
        let partition = self.clone();
        glommio::spawn_local(async move {
            let _ = partition.await_written(end, synced).await;
        })
        .detach();
    }

    /// Waits until every record below `end` is written (and synced when `synced`), then
    /// moves the high watermark over what is written and wakes parked fetches.
    async fn await_written(&self, end: Offset, synced: bool) -> Result<(), PartitionReply> {
        let log = &self.log;
        let result = if synced {
            log.flush_to(end).await
        } else {
            log.wait_written(end).await
        };
        self.advance_high_watermark();
        result
            .map(|_| ())
            .map_err(|e| PartitionReply::Error(storage_error_code(&e)))
    }

    /// Single-node policy: the high watermark is the written offset (the ISR is this broker).
    pub fn advance_high_watermark(&self) {
        let before = self.log.high_watermark();
        self.log.set_high_watermark(self.log.written_offset());
        if self.log.high_watermark() != before {
            self.hw_moved.notify_all();
        }
    }
}
