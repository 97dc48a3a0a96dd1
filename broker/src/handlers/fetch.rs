//! Fetch (key 1): one message per requested partition to its owning shard (run in place when
//! this shard owns it), [`PartitionOp::Fetch`], which the owner answers once — when at least
//! `min_bytes` are there, when `max_wait_ms` has passed, or, with whatever is there, when
//! cancelled. Parked fetches are woken by appends, never by polling. Once the answered bytes
//! reach `min_bytes` (or an answer is an error), the partitions still waiting are cancelled and
//! the response is built from the answers. `partition_max_bytes` bounds each partition and
//! `max_bytes` the response, except that the first batch always comes whole (KIP-74). The
//! response is framed by `net::encode_fetch_response`: batch bytes are sent as they sit in the
//! cache or the read buffer, never copied. A partition whose `current_leader_epoch` (v9+,
//! KIP-320) is not the partition's answers FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH alone.
//!
//! One corner differs from Kafka: Kafka answers a parked fetch as soon as the bytes summed over
//! its partitions reach `min_bytes`; here a waiting partition answers early only when it alone
//! has `min_bytes`, so a fetch with `min_bytes` > 1 whose new data is spread over several
//! partitions, none holding `min_bytes`, waits out `max_wait_ms`. With `min_bytes` = 1 (the
//! default of librdkafka, kafka-python, aiokafka and the Java client) the two agree.

use super::Response;
use crate::errors::{code, partition_op_error_code};
use crate::metrics::ShardMetrics;
use crate::partitions::{epoch_check, PartitionOp, PartitionOpError, PartitionReply};
use crate::seam::GlommioRuntime;
use crate::shard::Shard;
use futures_channel::oneshot;
use futures_util::StreamExt;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::{ApiKey, FetchRequest};
use net::{FetchPartitionData, FetchResponseData, FetchTopicData};
use replication::runtime::{Clock, MonotonicTime};
use std::rc::Rc;
use std::time::Duration;
use storage::{Offset, RecordBatch, TopicPartition};

/// Longest a fetch may be parked, whatever `max_wait_ms` asks (ms).
const FETCH_WAIT_MAX_MS: u64 = 30_000;

struct Wanted {
    tp: TopicPartition,
    offset: i64,
    max_bytes: usize,
    /// KIP-320's `current_leader_epoch` (v9+; negative: no check).
    current_leader_epoch: i32,
}

pub async fn handle(
    shard: &Rc<Shard>,
    req: FetchRequest,
    version: i16,
    correlation_id: i32,
) -> Response {
    let wait_ms = u64::try_from(req.max_wait_ms)
        .unwrap_or(0)
        .min(FETCH_WAIT_MAX_MS);
    let deadline = GlommioRuntime.now() + Duration::from_millis(wait_ms);
    let min_bytes = usize::try_from(req.min_bytes).unwrap_or(0);
    let max_bytes = usize::try_from(req.max_bytes).unwrap_or(0);
    let mut wanted = Vec::new();
    for topic in &req.topics {
        for p in &topic.partitions {
            wanted.push(Wanted {
                tp: TopicPartition {
                    topic: topic.topic.0.to_string(),
                    partition: p.partition,
                },
                offset: p.fetch_offset,
                max_bytes: usize::try_from(p.partition_max_bytes).unwrap_or(0),
                current_leader_epoch: p.current_leader_epoch,
            });
        }
    }
    let replies = fetch_all(shard, wanted, min_bytes, deadline).await;
    let mut budget_left = max_bytes;
    let mut first_batch = true;
    let mut replies = replies.into_iter();
    // Laid out from the request again, its topic names shared, not copied.
    let mut topics = Vec::with_capacity(req.topics.len());
    for topic in &req.topics {
        let mut partitions_out = Vec::with_capacity(topic.partitions.len());
        for p in &topic.partitions {
            let reply = replies
                .next()
                .flatten()
                .unwrap_or(PartitionReply::Error(PartitionOpError::ShardUnavailable));
            partitions_out.push(partition_data(
                p.partition,
                reply,
                &mut budget_left,
                &mut first_batch,
            ));
        }
        topics.push(FetchTopicData {
            topic: topic.topic.clone(),
            topic_id: uuid::Uuid::nil(),
            partitions: partitions_out,
        });
    }
    let returned: usize = topics
        .iter()
        .flat_map(|t| &t.partitions)
        .flat_map(|p| &p.records)
        .map(|chunk| chunk.len())
        .sum();
    ShardMetrics::add(&shard.metrics.fetch_requests, 1);
    ShardMetrics::add(
        &shard.metrics.fetch_bytes,
        u64::try_from(returned).unwrap_or(u64::MAX),
    );
    let response = FetchResponseData {
        throttle_time_ms: 0,
        error_code: 0,
        session_id: 0,
        topics,
    };
    match net::encode_fetch_response(version, correlation_id, &response) {
        Ok(chunks) => Response::Frame(chunks),
        Err(e) => {
            tracing::error!(api = ?ApiKey::Fetch, version, error = %e, "encoding fetch response failed");
            Response::Close
        }
    }
}

fn reply_bytes(reply: &PartitionReply) -> usize {
    match reply {
        PartitionReply::Read { batches, .. } => batches.iter().map(RecordBatch::len).sum(),
        _ => 0,
    }
}

/// Sends one [`PartitionOp::Fetch`] per partition, all at once, and collects the answers in
/// request order (`None`: a partition whose answer never came); once the answered bytes reach `min_bytes` (at least 1) or an answer is an
/// error, the partitions still waiting are cancelled and answer with what they have.
async fn fetch_all(
    shard: &Rc<Shard>,
    wanted: Vec<Wanted>,
    min_bytes: usize,
    deadline: MonotonicTime,
) -> Vec<Option<PartitionReply>> {
    let n = wanted.len();
    let mut cancels = Vec::with_capacity(n);
    // Every partition's fetch runs concurrently inside this task: no task spawned, and a local
    // partition's answer costs no message.
    let mut fetches = futures_util::stream::FuturesUnordered::new();
    for (i, w) in wanted.into_iter().enumerate() {
        let (cancel_tx, cancel) = oneshot::channel::<()>();
        cancels.push(cancel_tx);
        let op = PartitionOp::Fetch {
            offset: Offset(w.offset),
            max_bytes: w.max_bytes,
            min_bytes,
            deadline,
            cancel,
        };
        let epoch = replication::fetch_requested_leader_epoch(w.current_leader_epoch);
        fetches.push(async move { (i, epoch_check::call_checked(shard, w.tp, epoch, op).await) });
    }
    let mut replies: Vec<Option<PartitionReply>> = (0..n).map(|_| None).collect();
    let mut answered_bytes = 0usize;
    while let Some((i, reply)) = fetches.next().await {
        answered_bytes += reply_bytes(&reply);
        let failed = !matches!(reply, PartitionReply::Read { .. });
        if failed || answered_bytes >= min_bytes.max(1) {
            // Dropping the senders cancels the partitions still waiting.
            cancels.clear();
        }
        if let Some(slot) = replies.get_mut(i) {
            *slot = Some(reply);
        }
    }
    replies
}

fn partition_data(
    partition: i32,
    reply: PartitionReply,
    budget_left: &mut usize,
    first_batch: &mut bool,
) -> FetchPartitionData {
    let mut data = FetchPartitionData {
        partition_index: partition,
        error_code: 0,
        high_watermark: -1,
        last_stable_offset: -1,
        log_start_offset: -1,
        aborted_transactions: None,
        preferred_read_replica: -1,
        records: Vec::new(),
    };
    match reply {
        PartitionReply::Read {
            high_watermark,
            log_start_offset,
            batches,
        } => {
            data.high_watermark = high_watermark;
            data.last_stable_offset = high_watermark;
            data.log_start_offset = log_start_offset;
            // Batches go out as stored whatever the Fetch version, zstd below v10 too: Kafka 4
            // does the same since it dropped down-conversion (KIP-724).
            for batch in batches {
                if !*first_batch && batch.len() > *budget_left {
                    break;
                }
                *budget_left = budget_left.saturating_sub(batch.len());
                *first_batch = false;
                data.records.extend(batch.chunks().into_iter().cloned());
            }
        }
        PartitionReply::Error(error) => data.error_code = partition_op_error_code(&error),
        other => {
            tracing::error!(?other, "unexpected reply to fetch read");
            data.error_code = code(ResponseError::UnknownServerError);
        }
    }
    data
}
