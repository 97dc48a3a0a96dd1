//! Produce (key 0): each partition's record set goes to its owning shard (here or over the
//! mesh, as `Bytes`, never copied), all partitions concurrently, routed by the placement
//! resolved from the request's one metadata snapshot (one lookup per topic); the answer per
//! partition is its base offset or Kafka's error code, given once the owner's write of its
//! batches has completed (`acks=1`/`all`, DESIGN.md §3). acks=0 gets no response (the caller drops it).
//! `acks=all` waits for the partition's high watermark; the leader refuses it with
//! NOT_ENOUGH_REPLICAS while the ISR is below `min.insync.replicas` (capped by the replica
//! count, Kafka's `effectiveMinIsr`; see [`replication::LeaderIsr`]).
//!
//! Per version, as Kafka's `ProduceRequest.validateRecords`: a partition's records must be
//! exactly one magic-2 batch (INVALID_RECORD), and a zstd batch needs v7+
//! (UNSUPPORTED_COMPRESSION_TYPE, KIP-110). `log_start_offset` is answered from v5 and
//! `record_errors` / `error_message` from v8 (by kafka-protocol's encoder).
//!
//! From v10 (KIP-951) a NOT_LEADER_OR_FOLLOWER answer names the partition's current leader
//! and epoch, and the response lists the endpoint of each such leader that is alive, as
//! Kafka's `KafkaApis.handleProduceRequest` does, so a client can go to the new leader
//! without a metadata refresh. Only answers with that error pay for it.
//!
//! Transactions (KIP-98): transactional batches are appended and tracked by the partition's
//! producer state (the open transaction holds back the last stable offset until its marker,
//! written by WriteTxnMarkers). As Kafka's `KafkaApis.handleProduceRequest`, a request with
//! transactional batches but no `transactional_id`, or one the principal may not WRITE, is
//! refused whole with TRANSACTIONAL_ID_AUTHORIZATION_FAILED. A
//! control batch (a marker) from a client is refused with INVALID_RECORD, as Kafka's
//! `LogValidator`. KIP-890 part 1: with `transaction.partition.verification.enable`, the
//! transaction's first batch in a partition is appended only once the transaction coordinator
//! says the partition is in the transaction (`super::produce_verification`).
//!
//! With an authorizer, a topic the principal may not WRITE gets TOPIC_AUTHORIZATION_FAILED on
//! each of its partitions (`crate::authz`).
//!
//! A record without a key on a compacted topic is refused as Kafka's LogValidator refuses it:
//! INVALID_RECORD, with the record's index in `record_errors` and Kafka's summary in
//! `error_message` ("... Compacted topic cannot accept message without key in topic partition
//! t-0.").
//!
//! A client over its `producer_byte_rate` quota gets `throttle_time_ms` and its connection is
//! muted that long (`crate::quotas`).

use super::leader_hints::LeaderHints;
use super::produce_verification::{verify_transactions, Verified};
use crate::authz::{self, AclOperation, RESOURCE_TRANSACTIONAL_ID};
use crate::errors::{code, controller_error, keyless_record_index, partition_op_error_code};
use crate::metadata::ClusterMetadata;
use crate::metrics::ShardMetrics;
use crate::partitions::{PartitionOp, PartitionOpError, PartitionReply};
use crate::session::Session;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, LeaderIdAndEpoch, NodeEndpoint, PartitionProduceResponse,
    TopicProduceResponse,
};
use net::kafka_protocol::messages::{BrokerId, ProduceRequest, ProduceResponse};
use net::kafka_protocol::protocol::StrBytes;
use replication::metadata::{check_topic_not_internal, TopicOperation};
use replication::Acks;
use std::rc::Rc;
use std::time::Duration;
use storage::TopicPartition;

/// First Produce version whose NOT_LEADER_OR_FOLLOWER answers carry leader hints (KIP-951).
const LEADER_HINTS_VERSION: i16 = 10;

/// Why a partition's records were not appended.
#[derive(Debug, PartialEq, Eq)]
enum Refusal {
    /// Kafka's error code, nothing more to say.
    Code(i16),
    /// A record without a key on a compacted topic, at this index of its batch.
    KeylessRecord { batch_index: i32 },
    /// Kafka's error code with Kafka's `error_message` (KIP-890's verification answers).
    Message { code: i16, message: String },
}

impl From<i16> for Refusal {
    fn from(code: i16) -> Self {
        Refusal::Code(code)
    }
}

impl From<super::produce_verification::VerifyRefusal> for Refusal {
    fn from((code, message): super::produce_verification::VerifyRefusal) -> Self {
        match message {
            Some(message) => Refusal::Message { code, message },
            None => Refusal::Code(code),
        }
    }
}

impl Refusal {
    fn of(e: &PartitionOpError) -> Refusal {
        match keyless_record_index(e) {
            Some(batch_index) => Refusal::KeylessRecord { batch_index },
            None => Refusal::Code(partition_op_error_code(e)),
        }
    }
}

pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    client_id: &str,
    req: ProduceRequest,
    version: i16,
) -> ProduceResponse {
    let acks = Acks::from_wire(req.acks);
    let timeout = Duration::from_millis(u64::try_from(req.timeout_ms).unwrap_or(0));
    let unauthorized_transactional = transactional_without_id(&req)
        || req.transactional_id.as_ref().is_some_and(|id| {
            !authz::allowed(
                shard,
                session,
                AclOperation::Write,
                RESOURCE_TRANSACTIONAL_ID,
                id,
            )
        });
    let bytes = count_request(shard, &req);
    let throttle_time_ms = shard.quota_meters.record(
        &shard.metadata.borrow().client_quotas,
        session,
        client_id,
        crate::quotas::Metered::Produce,
        bytes as f64,
    );
    let mut verified =
        if unauthorized_transactional || acks.is_none() || req.transactional_id.is_none() {
            Verified::default()
        } else {
            // Boxed: its future (~4.5 KiB) would otherwise be part of every request's task, of
            // every API, and copied at each spawn; only a transactional produce pays for it.
            Box::pin(verify_transactions(shard, session, &req, version)).await
        };
    let metadata = shard.metadata();
    // The response is laid out from the request (its topic names shared, not copied) and
    // filled in from every partition's append, in request order.
    let mut response = ProduceResponse::default();
    let mut appends = Vec::new();
    for topic in req.topic_data {
        let name: &str = &topic.name.0;
        // The request's one lookup of each topic: its internal flag and every partition's
        // placement (owner shard, leadership) come from it, and the routing looks nothing up.
        let image = metadata.topics.get(name);
        // Only the broker writes an internal topic (Kafka refuses too).
        let internal = check_topic_not_internal(image, name, TopicOperation::Produce)
            .err()
            .map(|e| controller_error(&e).0);
        let unauthorized = !authz::topic(shard, session, AclOperation::Write, name);
        let mut answer = TopicProduceResponse::default();
        answer.partition_responses = Vec::with_capacity(topic.partition_data.len());
        for p in topic.partition_data {
            let tp = TopicPartition {
                topic: name.to_owned(),
                partition: p.index,
            };
            let placement = image.and_then(|t| metadata.placement(t, p.index));
            let verification = verified.take(name, p.index);
            let task = async move {
                let Some(acks) = acks else {
                    return Err(code(ResponseError::InvalidRequiredAcks).into());
                };
                if unauthorized_transactional {
                    return Err(code(ResponseError::TransactionalIdAuthorizationFailed).into());
                }
                if unauthorized {
                    return Err(code(ResponseError::TopicAuthorizationFailed).into());
                }
                if let Some(error) = internal {
                    return Err(error.into());
                }
                let Some(records) = p.records else {
                    return Err(code(ResponseError::CorruptMessage).into());
                };
                check_for_version(&records, version)?;
                let op = PartitionOp::Produce {
                    records,
                    acks,
                    timeout,
                    origin: storage::AppendOrigin::Client,
                    verification: verification.transpose().map_err(Refusal::from)?,
                };
                match crate::partitions::service::call_placed(shard, tp, placement, op).await {
                    PartitionReply::Error(e) => Err(Refusal::of(&e)),
                    reply => Ok(reply),
                }
            };
            let mut slot = PartitionProduceResponse::default();
            slot.index = p.index;
            answer.partition_responses.push(slot);
            appends.push(task);
        }
        answer.name = topic.name;
        response.responses.push(answer);
    }
    drop(metadata);
    await_appends(&mut response, appends).await;
    if version >= LEADER_HINTS_VERSION && not_leader_answers(&response) {
        add_leader_hints(&shard.metadata(), &session.listener, &mut response);
    }
    response.throttle_time_ms = throttle_time_ms;
    response
}

/// Kafka's check: transactional batches need a transactional id.
fn transactional_without_id(req: &ProduceRequest) -> bool {
    req.transactional_id.is_none()
        && req
            .topic_data
            .iter()
            .flat_map(|t| &t.partition_data)
            .any(|p| p.records.as_deref().is_some_and(is_transactional))
}

/// Counts the request and its record bytes in the shard's produce metrics; returns the bytes.
fn count_request(shard: &Shard, req: &ProduceRequest) -> usize {
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
    bytes
}

/// Runs every partition's append concurrently inside this task (no task spawned, and a local
/// partition's append costs no message) and fills in its slot of `response`, in request order.
/// The appends are polled where `join_all` keeps them (one allocation), never moved into this
/// future: one held here would make every request's task, whatever its API, that much larger.
async fn await_appends(
    response: &mut ProduceResponse,
    appends: Vec<impl std::future::Future<Output = Result<PartitionReply, Refusal>>>,
) {
    let slots = response.responses.iter_mut().flat_map(|t| {
        let topic = &t.name.0;
        t.partition_responses.iter_mut().map(move |p| (topic, p))
    });
    for ((topic, slot), reply) in slots.zip(futures_util::future::join_all(appends).await) {
        fill_in(slot, topic, reply);
    }
}

/// Bytes of a RecordBatch before its `attributes` field (base offset, length, partition
/// leader epoch, magic, CRC).
const ATTRIBUTES_AT: usize = 21;
/// Where the batch's `magic` byte sits.
const MAGIC_AT: usize = 16;
/// Bytes before a batch's `length` field counts (base offset and length).
const LOG_OVERHEAD: usize = 12;
/// First Produce version that may carry zstd batches (KIP-110).
const FIRST_ZSTD_VERSION: i16 = 7;
/// Compression codec id of zstd in a batch's attributes.
const ZSTD_CODEC: u8 = 4;

/// `attributes` bit 4 of a batch: transactional (KIP-98).
const TRANSACTIONAL_ATTRIBUTE: u8 = 0x10;

/// Whether a partition's records start with a transactional batch (Kafka's
/// `ProduceRequest.hasTransactionalRecords` looks at each partition's first batch; a request
/// holds exactly one batch per partition, else INVALID_RECORD).
fn is_transactional(records: &[u8]) -> bool {
    records
        .get(ATTRIBUTES_AT + 1)
        .is_some_and(|attributes| attributes & TRANSACTIONAL_ATTRIBUTE != 0)
}

/// Kafka's per-version rules for a partition's records (`ProduceRequest.validateRecords`):
/// exactly one batch, of magic 2 (every version served is v3+), else INVALID_RECORD; a zstd
/// batch below v7 is UNSUPPORTED_COMPRESSION_TYPE. A record set too short to hold a batch
/// header, or whose batch runs past its end, is left to the log to refuse (CORRUPT_MESSAGE).
/// `Err`: the Kafka code.
fn check_for_version(records: &[u8], version: i16) -> Result<(), i16> {
    let (Some(length), Some(&magic), Some(&codec)) = (
        records.get(8..LOG_OVERHEAD),
        records.get(MAGIC_AT),
        records.get(ATTRIBUTES_AT + 1),
    ) else {
        return Ok(());
    };
    let length = i32::from_be_bytes([length[0], length[1], length[2], length[3]]);
    let total = usize::try_from(length).map_or(usize::MAX, |l| l.saturating_add(LOG_OVERHEAD));
    if total > records.len() {
        return Ok(());
    }
    if total < records.len() || magic != 2 {
        return Err(code(ResponseError::InvalidRecord));
    }
    if version < FIRST_ZSTD_VERSION && codec & 0x07 == ZSTD_CODEC {
        return Err(code(ResponseError::UnsupportedCompressionType));
    }
    Ok(())
}

/// Whether some partition is answered NOT_LEADER_OR_FOLLOWER (only then are hints added:
/// a successful produce takes no metadata snapshot for them).
fn not_leader_answers(response: &ProduceResponse) -> bool {
    let not_leader = code(ResponseError::NotLeaderOrFollower);
    response
        .responses
        .iter()
        .flat_map(|t| &t.partition_responses)
        .any(|p| p.error_code == not_leader)
}

/// KIP-951's hints, as Kafka's `KafkaApis.handleProduceRequest` gives them (see
/// [`super::leader_hints`]): each partition answered NOT_LEADER_OR_FOLLOWER gets its current
/// leader and leader epoch, and the response the endpoint of every such leader that is alive.
fn add_leader_hints(meta: &ClusterMetadata, listener: &str, response: &mut ProduceResponse) {
    let not_leader = code(ResponseError::NotLeaderOrFollower);
    let mut hints = LeaderHints::new(meta, listener);
    for topic in &mut response.responses {
        for p in &mut topic.partition_responses {
            if p.error_code != not_leader {
                continue;
            }
            let (leader_id, leader_epoch) = hints.current_leader(&topic.name.0, p.index);
            p.current_leader = LeaderIdAndEpoch::default()
                .with_leader_id(BrokerId(leader_id))
                .with_leader_epoch(leader_epoch);
        }
    }
    response.node_endpoints = hints
        .endpoints()
        .into_iter()
        .map(|b| {
            NodeEndpoint::default()
                .with_node_id(BrokerId(b.id))
                .with_host(super::wire::str_bytes(b.host))
                .with_port(i32::from(b.port))
                .with_rack(b.rack.map(super::wire::str_bytes))
        })
        .collect();
}

/// Writes one partition's outcome into its slot of the response (of partition `p.index` of
/// `topic`); `Err`: a refusal by the handler or by the owner.
fn fill_in(p: &mut PartitionProduceResponse, topic: &str, reply: Result<PartitionReply, Refusal>) {
    p.log_append_time_ms = -1;
    match reply {
        Ok(PartitionReply::Produced {
            base_offset,
            log_start_offset,
            log_append_time_ms,
        }) => {
            p.base_offset = base_offset;
            p.log_start_offset = log_start_offset;
            p.log_append_time_ms = log_append_time_ms;
        }
        Err(Refusal::Code(error)) => {
            p.error_code = error;
            p.base_offset = -1;
            p.log_start_offset = -1;
        }
        Err(Refusal::Message { code, message }) => {
            p.error_code = code;
            p.error_message = Some(StrBytes::from_string(message));
            p.base_offset = -1;
            p.log_start_offset = -1;
        }
        Err(Refusal::KeylessRecord { batch_index }) => {
            // Kafka's words (LogValidator.validateRecord and processRecordErrors).
            let why = format!(
                "Compacted topic cannot accept message without key in topic partition {topic}-{}.",
                p.index
            );
            p.error_code = code(ResponseError::InvalidRecord);
            p.error_message = Some(StrBytes::from_string(format!(
                "One or more records have been rejected due to 1 record errors in total, and \
                 only showing the first three errors at most: [RecordError(batchIndex=\
                 {batch_index}, message='{why}')]"
            )));
            let mut error = BatchIndexAndErrorMessage::default();
            error.batch_index = batch_index;
            error.batch_index_error_message = Some(StrBytes::from_string(why));
            p.record_errors = vec![error];
            p.base_offset = -1;
            p.log_start_offset = -1;
        }
        other => {
            tracing::error!(?other, "unexpected reply to produce");
            p.error_code = code(ResponseError::UnknownServerError);
            p.base_offset = -1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch header of `total` bytes with `magic` and compression `codec`.
    fn batch(total: usize, magic: u8, codec: u8) -> Vec<u8> {
        let mut b = vec![0u8; total];
        let length = i32::try_from(total - LOG_OVERHEAD).unwrap();
        b[8..12].copy_from_slice(&length.to_be_bytes());
        b[MAGIC_AT] = magic;
        b[ATTRIBUTES_AT + 1] = codec;
        b
    }

    #[test]
    fn a_keyless_record_is_answered_as_kafka_answers_it() {
        let mut p = PartitionProduceResponse::default();
        p.index = 3;
        fill_in(&mut p, "t", Err(Refusal::KeylessRecord { batch_index: 2 }));
        assert_eq!(p.error_code, code(ResponseError::InvalidRecord));
        assert_eq!(p.error_code, 87);
        let message = p.error_message.as_deref().expect("a message");
        assert!(
            message.contains(
                "Compacted topic cannot accept message without key in topic partition t-3."
            ),
            "{message}"
        );
        assert_eq!(p.record_errors.len(), 1);
        assert_eq!(p.record_errors[0].batch_index, 2);
        assert_eq!(p.base_offset, -1);
        let e =
            PartitionOpError::Rejected(crate::produce_checks::ProduceCheckError::KeylessRecord {
                batch_index: 2,
            });
        assert_eq!(Refusal::of(&e), Refusal::KeylessRecord { batch_index: 2 });
    }

    #[test]
    fn one_magic_2_batch_per_partition_and_zstd_from_v7() {
        let plain = batch(70, 2, 0);
        let zstd = batch(70, 2, ZSTD_CODEC);
        assert_eq!(check_for_version(&plain, 3), Ok(()));
        assert_eq!(check_for_version(&zstd, 7), Ok(()));
        let unsupported = Err(code(ResponseError::UnsupportedCompressionType));
        for version in 3..7 {
            assert_eq!(check_for_version(&zstd, version), unsupported, "v{version}");
        }
        let invalid = Err(code(ResponseError::InvalidRecord));
        let two = [plain.clone(), plain.clone()].concat();
        assert_eq!(check_for_version(&two, 9), invalid, "two batches");
        assert_eq!(check_for_version(&batch(70, 1, 0), 9), invalid, "magic 1");
        // Too short or torn: the log's own checks refuse it (CORRUPT_MESSAGE).
        assert_eq!(check_for_version(&plain[..20], 3), Ok(()));
        assert_eq!(check_for_version(&plain[..69], 3), Ok(()));
        let mut negative = plain.clone();
        negative[8..12].copy_from_slice(&(-1i32).to_be_bytes());
        assert_eq!(
            check_for_version(&negative, 3),
            Ok(()),
            "a negative length: corrupt"
        );
    }
}
