//! Produce (key 0): each partition's record set goes to its owning shard (here or over the
//! mesh, as `Bytes`, never copied), all partitions concurrently; the answer per partition is
//! its base offset or Kafka's error code, given once the owner's write of its batches has
//! completed (`acks=1`/`all`, DESIGN.md §3). acks=0 gets no response (the caller drops it).
//! `acks=all` to a topic whose `min.insync.replicas` exceeds 1 is refused with
//! NOT_ENOUGH_REPLICAS, as Kafka refuses it when the ISR is too small: every partition's ISR
//! here is this one broker.

use super::topic_name;
use crate::errors::{code, controller_error};
use crate::messages::{Acks, PartitionOp, PartitionReply};
use crate::metadata::ClusterMetadata;
use crate::metrics::ShardMetrics;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::produce_response::{
    PartitionProduceResponse, TopicProduceResponse,
};
use net::kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use replication::metadata::{check_not_internal, TopicOperation};
use std::rc::Rc;
use std::time::Duration;
use storage::TopicPartition;

pub async fn handle(shard: &Rc<Shard>, req: ProduceRequest) -> ProduceResponse {
    let acks = Acks::from_wire(req.acks);
    let timeout = Duration::from_millis(u64::try_from(req.timeout_ms).unwrap_or(0));
    // Transactions are not supported (see init_producer_id.rs): refuse, never hang.
    let transactional = req.transactional_id.is_some();
    let metrics = &shard.metrics;
    ShardMetrics::add(&metrics.produce_requests, 1);
    let bytes: usize = req
        .topic_data
        .iter()
        .flat_map(|t| &t.partition_data)
        .filter_map(|p| p.records.as_ref().map(|r| r.len()))
        .sum();
    ShardMetrics::add(
        &metrics.produce_bytes,
        u64::try_from(bytes).unwrap_or(u64::MAX),
    );
    let metadata = shard.metadata();
    let mut tasks = Vec::new();
    for topic in req.topic_data {
        let name = topic.name.0.to_string();
        let too_few_replicas = req.acks == -1 && min_insync_replicas(shard, &metadata, &name) > 1;
        // Only the broker writes an internal topic (Kafka refuses too).
        let internal = check_not_internal(&metadata, &name, TopicOperation::Produce)
            .err()
            .map(|e| controller_error(&e).0);
        let mut partitions = Vec::new();
        for p in topic.partition_data {
            let tp = TopicPartition {
                topic: name.clone(),
                partition: p.index,
            };
            let shard = shard.clone();
            let task = glommio::spawn_local(async move {
                let Some(acks) = acks else {
                    return PartitionReply::Error(code(ResponseError::InvalidRequiredAcks));
                };
                if transactional {
                    return PartitionReply::Error(code(
                        ResponseError::TransactionalIdAuthorizationFailed,
                    ));
                }
                if too_few_replicas {
                    return PartitionReply::Error(code(ResponseError::NotEnoughReplicas));
                }
                if let Some(error) = internal {
                    return PartitionReply::Error(error);
                }
                let Some(records) = p.records else {
                    return PartitionReply::Error(code(ResponseError::CorruptMessage));
                };
                shard
                    .partition_call(
                        tp,
                        PartitionOp::Produce {
                            records,
                            acks,
                            timeout,
                        },
                    )
                    .await
            })
            .detach();
            partitions.push((p.index, task));
        }
        tasks.push((name, partitions));
    }
    let mut response = ProduceResponse::default();
    for (name, partitions) in tasks {
        let mut topic = TopicProduceResponse::default();
        topic.name = topic_name(&name);
        for (index, task) in partitions {
            let reply = task.await.unwrap_or(PartitionReply::Error(code(
                ResponseError::UnknownServerError,
            )));
            let mut p = PartitionProduceResponse::default();
            p.index = index;
            p.log_append_time_ms = -1;
            match reply {
                PartitionReply::Produced {
                    base_offset,
                    log_start_offset,
                    log_append_time_ms,
                } => {
                    p.base_offset = base_offset;
                    p.log_start_offset = log_start_offset;
                    p.log_append_time_ms = log_append_time_ms;
                }
                PartitionReply::Error(error) => {
                    p.error_code = error;
                    p.base_offset = -1;
                    p.log_start_offset = -1;
                }
                other => {
                    tracing::error!(?other, "unexpected reply to produce");
                    p.error_code = code(ResponseError::UnknownServerError);
                    p.base_offset = -1;
                }
            }
            topic.partition_responses.push(p);
        }
        response.responses.push(topic);
    }
    response
}

/// `min.insync.replicas` of topic `name`: its override, else the broker's default (an unknown
/// topic gets the default; its partitions answer UNKNOWN_TOPIC_OR_PARTITION anyway).
fn min_insync_replicas(shard: &Shard, metadata: &ClusterMetadata, name: &str) -> u32 {
    metadata
        .topics
        .get(name)
        .and_then(|t| t.configs.get("min.insync.replicas"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(shard.config.topic_defaults.min_insync_replicas)
}
