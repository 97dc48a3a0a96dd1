//! The floor's answers to each served API, from its [`Floor`] state.
//!
//! Produce: offsets, one group-committed O_DIRECT write per partition touched, then the
//! answer (acks=0 and acks=1 wait for the write as acks=all does: there are no followers).
//! Fetch: answered at once when the written data reaches `min_bytes`, else parked until a
//! write completes or `max_wait_ms` passes; `partition_max_bytes` is applied (at least one
//! batch), the response-wide `max_bytes` is not. Nothing is validated beyond the batch
//! headers.

use crate::log::{AppendError, PartitionLog};
use crate::state::{Floor, NODE_ID};
use futures_lite::future;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    BrokerId, CreateTopicsRequest, CreateTopicsResponse, FetchRequest, FetchResponse,
    FindCoordinatorRequest, FindCoordinatorResponse, ListOffsetsRequest, ListOffsetsResponse,
    MetadataRequest, MetadataResponse, ProduceRequest, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use std::time::{Duration, Instant};

/// The ListOffsets timestamp that names the log's start.
const EARLIEST_TIMESTAMP: i64 = -2;
/// Partitions of a topic created with `num_partitions` -1 (Kafka's `num.partitions`).
const DEFAULT_PARTITIONS: usize = 1;
/// Most partitions one topic may have here: each preallocates its own file.
const PARTITIONS_MAX: usize = 64;
/// Kafka's longest topic name.
const TOPIC_NAME_MAX_CHARS: usize = 249;

fn broker_id() -> BrokerId {
    BrokerId(NODE_ID)
}

/// Metadata: the floor is node 0, leader of every partition; unknown topics are reported so.
pub fn metadata(floor: &Floor, request: &MetadataRequest) -> MetadataResponse {
    let wanted: Vec<String> = match &request.topics {
        Some(topics) => topics
            .iter()
            .filter_map(|t| t.name.as_ref().map(|n| n.0.to_string()))
            .collect(),
        None => floor.topic_names().into_iter().map(|(n, _)| n).collect(),
    };
    let topics = wanted
        .into_iter()
        .map(|name| {
            let topic = MetadataResponseTopic::default()
                .with_name(Some(TopicName(StrBytes::from_string(name.clone()))));
            match floor.topic(&name) {
                Some(partitions) => topic.with_partitions(
                    (0..partitions.len())
                        .map(|p| {
                            MetadataResponsePartition::default()
                                .with_partition_index(p as i32)
                                .with_leader_id(broker_id())
                                .with_leader_epoch(0)
                                .with_replica_nodes(vec![broker_id()])
                                .with_isr_nodes(vec![broker_id()])
                        })
                        .collect(),
                ),
                None => topic.with_error_code(ResponseError::UnknownTopicOrPartition.code()),
            }
        })
        .collect();
    MetadataResponse::default()
        .with_brokers(vec![MetadataResponseBroker::default()
            .with_node_id(broker_id())
            .with_host(StrBytes::from_string(floor.host.clone()))
            .with_port(floor.port)])
        .with_cluster_id(Some(StrBytes::from_static_str("sluice-floor")))
        .with_controller_id(broker_id())
        .with_topics(topics)
}

fn legal_topic_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= TOPIC_NAME_MAX_CHARS
        && name != "."
        && name != ".."
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// CreateTopics: every topic gets its partitions' files; configs are ignored.
pub async fn create_topics(floor: &Floor, request: &CreateTopicsRequest) -> CreateTopicsResponse {
    let mut results = Vec::with_capacity(request.topics.len());
    for topic in &request.topics {
        let name = topic.name.0.to_string();
        let partitions = match usize::try_from(topic.num_partitions) {
            Ok(n) if n > 0 => n,
            _ => DEFAULT_PARTITIONS,
        };
        let error = if !legal_topic_name(&name) {
            Some(ResponseError::InvalidTopicException)
        } else if partitions > PARTITIONS_MAX {
            Some(ResponseError::InvalidPartitions)
        } else if request.validate_only {
            None
        } else {
            match floor.create_topic(&name, partitions).await {
                Ok(true) => None,
                Ok(false) => Some(ResponseError::TopicAlreadyExists),
                Err(e) => {
                    eprintln!("sluice-floor: creating {name}: {e}");
                    Some(ResponseError::KafkaStorageError)
                }
            }
        };
        results.push(
            CreatableTopicResult::default()
                .with_name(topic.name.clone())
                .with_error_code(error.map_or(0, |e| e.code()))
                .with_num_partitions(partitions as i32)
                .with_replication_factor(1),
        );
    }
    CreateTopicsResponse::default().with_topics(results)
}

/// FindCoordinator: the floor coordinates every group (it never sees a JoinGroup).
pub fn find_coordinator(
    floor: &Floor,
    request: &FindCoordinatorRequest,
    api_version: i16,
) -> FindCoordinatorResponse {
    let host = StrBytes::from_string(floor.host.clone());
    if api_version < 4 {
        return FindCoordinatorResponse::default()
            .with_node_id(broker_id())
            .with_host(host)
            .with_port(floor.port);
    }
    FindCoordinatorResponse::default().with_coordinators(
        request
            .coordinator_keys
            .iter()
            .map(|key| {
                Coordinator::default()
                    .with_key(key.clone())
                    .with_node_id(broker_id())
                    .with_host(host.clone())
                    .with_port(floor.port)
            })
            .collect(),
    )
}

/// Produce: append every partition's batches, then wait for their writes together.
pub async fn produce(floor: &Floor, request: &ProduceRequest) -> ProduceResponse {
    let mut topics = Vec::with_capacity(request.topic_data.len());
    let mut pending = Vec::new();
    for topic in &request.topic_data {
        let logs = floor.topic(&topic.name.0);
        let mut partitions = Vec::with_capacity(topic.partition_data.len());
        for data in &topic.partition_data {
            let log = logs.as_ref().and_then(|l| {
                usize::try_from(data.index)
                    .ok()
                    .and_then(|i| l.get(i).map(|_| (l.clone(), i)))
            });
            let answer = PartitionProduceResponse::default()
                .with_index(data.index)
                .with_log_append_time_ms(-1);
            let Some((logs, index)) = log else {
                partitions
                    .push(answer.with_error_code(ResponseError::UnknownTopicOrPartition.code()));
                continue;
            };
            let records = data.records.as_deref().unwrap_or_default();
            match logs[index].append(records) {
                Ok((base_offset, end_offset)) => {
                    pending.push((logs, index, end_offset, topics.len(), partitions.len()));
                    partitions.push(answer.with_base_offset(base_offset));
                }
                Err(AppendError::Corrupt) => {
                    partitions.push(answer.with_error_code(ResponseError::CorruptMessage.code()));
                }
            }
        }
        topics.push(
            TopicProduceResponse::default()
                .with_name(topic.name.clone())
                .with_partition_responses(partitions),
        );
    }
    let writes = pending.iter().map(|(logs, index, end_offset, _, _)| {
        logs[*index].make_durable(*end_offset, &floor.written)
    });
    let outcomes = futures_util::future::join_all(writes).await;
    for ((logs, index, _, t, p), outcome) in pending.iter().zip(outcomes) {
        let answer: &mut PartitionProduceResponse = &mut topics[*t].partition_responses[*p];
        answer.log_start_offset = logs[*index].offsets().0;
        if let Err(e) = outcome {
            eprintln!("sluice-floor: write failed: {e}");
            answer.error_code = ResponseError::KafkaStorageError.code();
        }
    }
    ProduceResponse::default().with_responses(topics)
}

/// One partition's part of a fetch answer and its record bytes.
fn fetch_partition(
    logs: Option<&Vec<PartitionLog>>,
    partition: i32,
    offset: i64,
    max_bytes: i32,
) -> (PartitionData, usize) {
    let answer = PartitionData::default()
        .with_partition_index(partition)
        .with_aborted_transactions(Some(Vec::new()));
    let Some(log) = logs.and_then(|l| usize::try_from(partition).ok().and_then(|i| l.get(i)))
    else {
        return (
            answer.with_error_code(ResponseError::UnknownTopicOrPartition.code()),
            0,
        );
    };
    let slice = log.read(offset, usize::try_from(max_bytes).unwrap_or(0));
    let answer = answer
        .with_high_watermark(slice.high_watermark)
        .with_last_stable_offset(slice.high_watermark)
        .with_log_start_offset(slice.log_start_offset);
    match slice.records {
        Some(records) => {
            let len = records.len();
            (answer.with_records(Some(records)), len)
        }
        None => (
            answer.with_error_code(ResponseError::OffsetOutOfRange.code()),
            0,
        ),
    }
}

/// The fetch answer as the logs stand, and its record bytes.
fn fetch_now(floor: &Floor, request: &FetchRequest) -> (FetchResponse, usize) {
    let mut total = 0;
    let topics = request
        .topics
        .iter()
        .map(|topic| {
            let logs = floor.topic(&topic.topic.0);
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let (data, bytes) = fetch_partition(
                        logs.as_deref(),
                        p.partition,
                        p.fetch_offset,
                        p.partition_max_bytes,
                    );
                    total += bytes;
                    data
                })
                .collect();
            FetchableTopicResponse::default()
                .with_topic(topic.topic.clone())
                .with_partitions(partitions)
        })
        .collect();
    (FetchResponse::default().with_responses(topics), total)
}

/// Fetch: at once when `min_bytes` are there, else parked until a write completes or
/// `max_wait_ms` passes (Kafka's long poll).
pub async fn fetch(floor: &Floor, request: &FetchRequest) -> FetchResponse {
    let max_wait = Duration::from_millis(u64::try_from(request.max_wait_ms).unwrap_or(0));
    let deadline = Instant::now() + max_wait;
    let min_bytes = usize::try_from(request.min_bytes).unwrap_or(0).max(1);
    loop {
        let generation = floor.written.generation();
        let (response, bytes) = fetch_now(floor, request);
        let now = Instant::now();
        if bytes >= min_bytes || now >= deadline {
            return response;
        }
        let woken = future::or(
            async {
                floor.written.changed(generation).await;
                true
            },
            async {
                glommio::timer::sleep(deadline - now).await;
                false
            },
        )
        .await;
        if !woken {
            return fetch_now(floor, request).0;
        }
    }
}

/// ListOffsets: the log start (earliest) or the high watermark (latest, and any timestamp:
/// the floor keeps no time index).
pub fn list_offsets(floor: &Floor, request: &ListOffsetsRequest) -> ListOffsetsResponse {
    let topics = request
        .topics
        .iter()
        .map(|topic| {
            let logs = floor.topic(&topic.name.0);
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let answer = ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index)
                        .with_timestamp(-1)
                        .with_leader_epoch(0);
                    let log = logs.as_ref().and_then(|l| {
                        usize::try_from(p.partition_index)
                            .ok()
                            .and_then(|i| l.get(i))
                    });
                    match log {
                        Some(log) => {
                            let (start, end) = log.offsets();
                            let offset = if p.timestamp == EARLIEST_TIMESTAMP {
                                start
                            } else {
                                end
                            };
                            answer.with_offset(offset)
                        }
                        None => {
                            answer.with_error_code(ResponseError::UnknownTopicOrPartition.code())
                        }
                    }
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    ListOffsetsResponse::default().with_topics(topics)
}
