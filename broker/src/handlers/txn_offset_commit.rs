//! TxnOffsetCommit (key 28), v0–5 (KIP-98; KIP-447 added the member fields in v3): a
//! transactional producer commits a consumer group's offsets inside its transaction
//! (`sendOffsetsToTransaction`). The group coordinator appends them to the group's
//! `__consumer_offsets` partition as a transactional batch of the producer (`acks=all`,
//! flushed) and keeps them pending — OffsetFetch does not return them — until the
//! producer's marker reaches that partition: a commit materialises them, an abort discards
//! them (`crate::groups::txn_offsets`).
//!
//! Per-partition errors, as Kafka's `KafkaApis.handleTxnOffsetCommitRequest` and
//! `OffsetMetadataManager.commitTransactionalOffset`: a partition that does not exist
//! UNKNOWN_TOPIC_OR_PARTITION; an empty group id INVALID_GROUP_ID; a group that does not
//! exist, with a generation ≥ 0, ILLEGAL_GENERATION; v3+ member checks (UNKNOWN_MEMBER_ID,
//! ILLEGAL_GENERATION, FENCED_INSTANCE_ID); a fenced producer epoch INVALID_PRODUCER_EPOCH;
//! metadata over `offset.metadata.max.bytes` OFFSET_METADATA_TOO_LARGE; the coordinator's
//! NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS / COORDINATOR_NOT_AVAILABLE.
//!
//! KIP-890, before the offsets are appended (Kafka's `CoordinatorRuntime
//! .scheduleTransactionalWriteOperation`): the group's leader asks the transaction
//! coordinator whether the group's `__consumer_offsets` partition is in the producer's
//! transaction (with `transaction.partition.verification.enable`; not added:
//! INVALID_TXN_STATE, TRANSACTION_ABORTABLE from v4), or — v5, a client at transaction
//! version 2 (part 2), which sends no AddOffsetsToTxn — adds it, whatever the switch says.
//! A coordinator that is busy or unreachable answers COORDINATOR_NOT_AVAILABLE (retried), a
//! fenced producer INVALID_PRODUCER_EPOCH.

use super::offset_commit::{group_by_topic, partition_results};
use super::produce_verification::produce_error;
use super::txn_errors::txn_error_code;
use super::wire::topic_name;
use crate::authz::{self, AclOperation, RESOURCE_TRANSACTIONAL_ID};
use crate::errors::code;
use crate::groups::{GroupOp, GroupReply, OffsetCommitEntry, TxnProducer};
use crate::session::Session;
use crate::shard::Shard;
use crate::txn::verification::{Question, Unverified};
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use net::kafka_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};
use std::rc::Rc;
use storage::TopicPartition;

/// First TxnOffsetCommit version whose clients handle TRANSACTION_ABORTABLE (KIP-890).
const TRANSACTION_ABORTABLE_VERSION: i16 = 4;
/// First TxnOffsetCommit version of transaction version 2 (KIP-890 part 2): the offsets
/// partition is added to the transaction implicitly.
const IMPLICIT_ADD_VERSION: i16 = 5;

pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: TxnOffsetCommitRequest,
    version: i16,
) -> TxnOffsetCommitResponse {
    let offsets = requested_offsets(&req);
    // Kafka: WRITE on the transactional id, READ on the group (each refuses every partition),
    // READ on each topic (`crate::authz`).
    let refused_all = if !authz::allowed(
        shard,
        session,
        AclOperation::Write,
        RESOURCE_TRANSACTIONAL_ID,
        &req.transactional_id.0,
    ) {
        Some(ResponseError::TransactionalIdAuthorizationFailed)
    } else if !authz::group(shard, session, AclOperation::Read, &req.group_id.0) {
        Some(ResponseError::GroupAuthorizationFailed)
    } else {
        None
    };
    if let Some(error) = refused_all {
        let error = code(error);
        let results = offsets.into_iter().map(|o| (o.topic, o.partition, error));
        return respond(results.collect());
    }
    let group_id = req.group_id.0.to_string();
    let results = partition_results(shard, session, &group_id, offsets, |offsets| {
        commit(shard, &req, version, &group_id, offsets)
    })
    .await;
    respond(results)
}

/// The response carrying `results` (topic, partition, error code), grouped by topic.
fn respond(results: Vec<(String, i32, i16)>) -> TxnOffsetCommitResponse {
    let mut response = TxnOffsetCommitResponse::default();
    response.topics = group_by_topic(results)
        .into_iter()
        .map(|(name, partitions)| topic_response(&name, partitions))
        .collect();
    response
}

/// Every partition's offset in the request, in request order.
fn requested_offsets(req: &TxnOffsetCommitRequest) -> Vec<OffsetCommitEntry> {
    req.topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| OffsetCommitEntry {
                topic: t.name.0.to_string(),
                partition: p.partition_index,
                offset: p.committed_offset,
                leader_epoch: p.committed_leader_epoch,
                metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
            })
        })
        .collect()
}

/// Commits `offsets` in the producer's transaction through the group's coordinator; returns
/// (topic, partition, error code) for each, the group's error for all when the commit as a
/// whole fails.
async fn commit(
    shard: &Rc<Shard>,
    req: &TxnOffsetCommitRequest,
    version: i16,
    group_id: &str,
    offsets: Vec<OffsetCommitEntry>,
) -> Vec<(String, i32, i16)> {
    let fallback: Vec<(String, i32)> = offsets
        .iter()
        .map(|o| (o.topic.clone(), o.partition))
        .collect();
    if let Err(e) = verify_offsets_partition(shard, req, version, group_id).await {
        return fallback.iter().map(|(t, p)| (t.clone(), *p, e)).collect();
    }
    let op = GroupOp::TxnCommit {
        producer: TxnProducer {
            producer_id: req.producer_id.0,
            producer_epoch: req.producer_epoch,
        },
        member_id: req.member_id.to_string(),
        group_instance_id: req.group_instance_id.as_ref().map(|i| i.to_string()),
        generation: req.generation_id,
        offsets,
    };
    let all = |e: i16| fallback.iter().map(|(t, p)| (t.clone(), *p, e)).collect();
    match crate::groups::service::call(shard, group_id, op).await {
        GroupReply::PartitionErrors(results) => results
            .into_iter()
            .map(|(t, p, r)| (t, p, crate::errors::group_result_code(r)))
            .collect(),
        GroupReply::Error(e) => all(crate::errors::group_error_code(e)),
        other => {
            tracing::error!(?other, "unexpected reply to TxnOffsetCommit");
            all(code(ResponseError::UnknownServerError))
        }
    }
}

/// KIP-890 (see the module doc): checks — or, from v5, adds — the group's offsets partition
/// in the producer's transaction when this broker leads it (else the commit answers
/// NOT_COORDINATOR by itself). Errors: the Kafka code every partition answers.
async fn verify_offsets_partition(
    shard: &Rc<Shard>,
    req: &TxnOffsetCommitRequest,
    version: i16,
    group_id: &str,
) -> Result<(), i16> {
    let add = version >= IMPLICIT_ADD_VERSION;
    let partition = {
        let meta = shard.metadata();
        if !add
            && !crate::dynamic_config::transaction_partition_verification_enable(
                &shard.config,
                &meta.image,
            )
        {
            return Ok(());
        }
        let partition = crate::groups::partition_for(group_id, shard.offsets_partition_count());
        if !meta.leads(crate::groups::OFFSETS_TOPIC, partition) {
            return Ok(());
        }
        partition
    };
    let question = Question {
        transactional_id: req.transactional_id.0.to_string(),
        producer_id: req.producer_id.0,
        producer_epoch: req.producer_epoch,
        partitions: vec![TopicPartition {
            topic: crate::groups::OFFSETS_TOPIC.to_string(),
            partition,
        }],
        add,
    };
    let answers = crate::txn::verification::verify(shard, question).await;
    let Some(Err(unverified)) = answers.into_iter().next() else {
        return Ok(());
    };
    let coordinator_code = match unverified {
        Unverified::Coordinator(e) => txn_error_code(e, false),
        Unverified::Code(c) => c,
    };
    let (mapped, _) = produce_error(coordinator_code, version >= TRANSACTION_ABORTABLE_VERSION);
    // Kafka's `GroupCoordinatorService.handleOperationException`.
    Err(if mapped == code(ResponseError::NotEnoughReplicas) {
        code(ResponseError::CoordinatorNotAvailable)
    } else {
        mapped
    })
}

/// One topic's answer: (partition index, error code) of each of its partitions.
fn topic_response(name: &str, partitions: Vec<(i32, i16)>) -> TxnOffsetCommitResponseTopic {
    let mut t = TxnOffsetCommitResponseTopic::default();
    t.name = topic_name(name);
    t.partitions = partitions
        .into_iter()
        .map(|(index, error)| {
            let mut p = TxnOffsetCommitResponsePartition::default();
            p.partition_index = index;
            p.error_code = error;
            p
        })
        .collect();
    t
}
