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
//! A Fetch with `replica_id` ≥ 0 is a follower's (Kafka's `FetchParams.isFromFollower`): each
//! partition goes to [`PartitionOp::ReplicaFetch`] on its leader's owning shard, which moves
//! the follower's state in the ISR and answers with records below the leader's
//! written offset, the high watermark, the log start and — v12+ — the diverging epoch
//! (KIP-320); a broker that is not a replica gets `NOT_LEADER_OR_FOLLOWER`, as Kafka's
//! `Partition.followerReplicaOrThrow` answers a Fetch without a current leader epoch. It is
//! parked like a consumer's, woken by the leader's writes rather than by the high watermark.
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
use net::{FetchEpochEndOffset, FetchPartitionData, FetchResponseData, FetchTopicData};
use replication::runtime::{Clock, MonotonicTime, NodeId};
use std::rc::Rc;
use std::time::Duration;
use storage::{LeaderEpoch, Offset, RecordBatch, TopicPartition};

/// Longest a fetch may be parked, whatever `max_wait_ms` asks (ms).
const FETCH_WAIT_MAX_MS: u64 = 30_000;

struct Wanted {
    tp: TopicPartition,
    offset: i64,
    max_bytes: usize,
    /// KIP-320's `current_leader_epoch` (v9+; negative: no check).
    current_leader_epoch: i32,
    /// The follower's `last_fetched_epoch` (v12+; -1 for none).
    last_fetched_epoch: i32,
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
                last_fetched_epoch: p.last_fetched_epoch,
            });
        }
    }
    // Fetch ≤ v14 names a follower by `replica_id` (-1: a consumer); v15's ReplicaState is
    // not advertised.
    let replica = (req.replica_id.0 >= 0).then_some(NodeId(req.replica_id.0));
    let replies = fetch_all(shard, wanted, replica, min_bytes, deadline).await;
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
        PartitionReply::Read { batches, .. } | PartitionReply::ReplicaRead { batches, .. } => {
            batches.iter().map(RecordBatch::len).sum()
        }
        _ => 0,
    }
}

/// Whether `reply` ends the wait of the others: an error, or a diverging epoch (the follower
/// must truncate before anything else helps it, as Kafka's `DelayedFetch` completes).
fn answers_now(reply: &PartitionReply) -> bool {
    match reply {
        PartitionReply::Read { .. } => false,
        PartitionReply::ReplicaRead {
            diverging_epoch, ..
        } => diverging_epoch.is_some(),
        _ => true,
    }
}

/// Sends one [`PartitionOp::Fetch`] per partition — [`PartitionOp::ReplicaFetch`] for a
/// follower's fetch (`replica`) — all at once, and collects the answers in request order
/// (`None`: a partition whose answer never came); once the answered bytes reach `min_bytes`
/// (at least 1) or an answer is an error or a diverging epoch, the partitions still waiting
/// are cancelled and answer with what they have.
async fn fetch_all(
    shard: &Rc<Shard>,
    wanted: Vec<Wanted>,
    replica: Option<NodeId>,
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
        let op = match replica {
            Some(replica) => PartitionOp::ReplicaFetch {
                replica,
                fetch_offset: Offset(w.offset),
                last_fetched_epoch: (w.last_fetched_epoch >= 0)
                    .then_some(LeaderEpoch(w.last_fetched_epoch)),
                max_bytes: w.max_bytes,
                min_bytes,
                deadline,
                cancel,
            },
            None => PartitionOp::Fetch {
                offset: Offset(w.offset),
                max_bytes: w.max_bytes,
                min_bytes,
                deadline,
                cancel,
            },
        };
        let epoch = replication::fetch_requested_leader_epoch(w.current_leader_epoch);
        fetches.push(async move { (i, epoch_check::call_checked(shard, w.tp, epoch, op).await) });
    }
    let mut replies: Vec<Option<PartitionReply>> = (0..n).map(|_| None).collect();
    let mut answered_bytes = 0usize;
    while let Some((i, reply)) = fetches.next().await {
        answered_bytes += reply_bytes(&reply);
        if answers_now(&reply) || answered_bytes >= min_bytes.max(1) {
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
        diverging_epoch: None,
    };
    match reply {
        PartitionReply::ReplicaRead {
            high_watermark,
            log_start_offset,
            batches,
            diverging_epoch,
        } => {
            data.high_watermark = high_watermark;
            data.last_stable_offset = high_watermark;
            data.log_start_offset = log_start_offset;
            data.diverging_epoch = diverging_epoch.map(|(epoch, end_offset)| FetchEpochEndOffset {
                epoch: epoch.0,
                end_offset: end_offset.0,
            });
            take_batches(&mut data, batches, budget_left, first_batch);
        }
        PartitionReply::Read {
            high_watermark,
            log_start_offset,
            batches,
        } => {
            data.high_watermark = high_watermark;
            data.last_stable_offset = high_watermark;
            data.log_start_offset = log_start_offset;
            take_batches(&mut data, batches, budget_left, first_batch);
        }
        PartitionReply::Error(error) => data.error_code = partition_op_error_code(&error),
        other => {
            tracing::error!(?other, "unexpected reply to fetch read");
            data.error_code = code(ResponseError::UnknownServerError);
        }
    }
    data
}

/// Puts `batches` into `data` within the response's `budget_left` bytes, the response's first
/// batch whole (KIP-74). Batches go out as stored whatever the Fetch version, zstd below v10
/// too: Kafka 4 does the same since it dropped down-conversion (KIP-724).
fn take_batches(
    data: &mut FetchPartitionData,
    batches: Vec<RecordBatch>,
    budget_left: &mut usize,
    first_batch: &mut bool,
) {
    for batch in batches {
        if !*first_batch && batch.len() > *budget_left {
            break;
        }
        *budget_left = budget_left.saturating_sub(batch.len());
        *first_batch = false;
        data.records.extend(batch.chunks().into_iter().cloned());
    }
}
