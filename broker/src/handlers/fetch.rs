//! Fetch (key 1): reads every requested partition on its owning shard; if fewer than
//! `min_bytes` came back, parks on the owning shards (woken by appends, no polling) until one
//! has new data or `max_wait_ms` passes, then reads again. `partition_max_bytes` bounds each
//! partition and `max_bytes` the response, except that the first batch always comes whole
//! (KIP-74). The response is framed by `net::encode_fetch_response`: batch bytes are sent as
//! they sit in the cache or the read buffer, never copied.

use super::{topic_name, Response};
use crate::errors::code;
use crate::messages::{PartitionOp, PartitionReply};
use crate::metrics::ShardMetrics;
use crate::shard::Shard;
use futures_channel::oneshot;
use glommio::channels::local_channel;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::{ApiKey, FetchRequest};
use net::{FetchPartitionData, FetchResponseData, FetchTopicData};
use std::rc::Rc;
use std::time::{Duration, Instant};
use storage::{RecordBatch, TopicPartition};

/// Longest a fetch may be parked, whatever `max_wait_ms` asks (ms).
const FETCH_WAIT_MAX_MS: u64 = 30_000;

struct Wanted {
    tp: TopicPartition,
    offset: i64,
    max_bytes: usize,
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
    let deadline = Instant::now() + Duration::from_millis(wait_ms);
    let min_bytes = usize::try_from(req.min_bytes).unwrap_or(0);
    let max_bytes = usize::try_from(req.max_bytes).unwrap_or(0);
    let mut order: Vec<(String, Vec<i32>)> = Vec::new();
    let mut wanted = Vec::new();
    for topic in &req.topics {
        let name = topic.topic.0.to_string();
        order.push((
            name.clone(),
            topic.partitions.iter().map(|p| p.partition).collect(),
        ));
        for p in &topic.partitions {
            wanted.push(Wanted {
                tp: TopicPartition {
                    topic: name.clone(),
                    partition: p.partition,
                },
                offset: p.fetch_offset,
                max_bytes: usize::try_from(p.partition_max_bytes).unwrap_or(0),
            });
        }
    }
    let mut replies = read_all(shard, &wanted).await;
    loop {
        let total: usize = replies.iter().map(reply_bytes).sum();
        let failed = replies
            .iter()
            .any(|r| !matches!(r, PartitionReply::Read { .. }));
        if total >= min_bytes.max(1) || failed || wanted.is_empty() || Instant::now() >= deadline {
            break;
        }
        wait_any(shard, &wanted, deadline).await;
        replies = read_all(shard, &wanted).await;
    }
    let mut budget_left = max_bytes;
    let mut first_batch = true;
    let mut replies = replies.into_iter();
    let mut topics = Vec::new();
    for (name, partitions) in order {
        let mut partitions_out = Vec::new();
        for partition in partitions {
            let reply = replies.next().unwrap_or(PartitionReply::Error(code(
                ResponseError::UnknownServerError,
            )));
            partitions_out.push(partition_data(
                partition,
                reply,
                &mut budget_left,
                &mut first_batch,
            ));
        }
        topics.push(FetchTopicData {
            topic: topic_name(&name),
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

/// Reads every partition concurrently, each on its owning shard; replies in request order.
async fn read_all(shard: &Rc<Shard>, wanted: &[Wanted]) -> Vec<PartitionReply> {
    let tasks: Vec<_> = wanted
        .iter()
        .map(|w| {
            let (shard, tp) = (shard.clone(), w.tp.clone());
            let op = PartitionOp::Read {
                offset: w.offset,
                max_bytes: w.max_bytes,
            };
            glommio::spawn_local(async move { shard.partition_call(tp, op).await }).detach()
        })
        .collect();
    let mut replies = Vec::with_capacity(tasks.len());
    for task in tasks {
        replies.push(task.await.unwrap_or(PartitionReply::Error(code(
            ResponseError::UnknownServerError,
        ))));
    }
    replies
}

/// Parks on every partition's owning shard until the first one sees its high watermark pass
/// the fetch offset, or `deadline`; the others are cancelled when this returns.
async fn wait_any(shard: &Rc<Shard>, wanted: &[Wanted], deadline: Instant) {
    let (done_tx, done_rx) = local_channel::new_bounded::<()>(1);
    let done_tx = Rc::new(done_tx);
    let mut cancels = Vec::with_capacity(wanted.len());
    for w in wanted {
        let (cancel_tx, cancel) = oneshot::channel::<()>();
        cancels.push(cancel_tx);
        let (shard, tp, done) = (shard.clone(), w.tp.clone(), done_tx.clone());
        let op = PartitionOp::WaitForData {
            offset: w.offset,
            deadline,
            cancel,
        };
        glommio::spawn_local(async move {
            shard.partition_call(tp, op).await;
            let _ = done.try_send(());
        })
        .detach();
    }
    drop(done_tx);
    let timeout = glommio::timer::sleep(deadline.saturating_duration_since(Instant::now()));
    futures_lite::future::or(
        async {
            let _ = done_rx.recv().await;
        },
        timeout,
    )
    .await;
    drop(cancels);
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
        PartitionReply::Error(error) => data.error_code = error,
        other => {
            tracing::error!(?other, "unexpected reply to fetch read");
            data.error_code = code(ResponseError::UnknownServerError);
        }
    }
    data
}
