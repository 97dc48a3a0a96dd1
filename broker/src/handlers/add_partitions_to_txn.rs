//! AddPartitionsToTxn (key 24), v0–5. The client form (v0–3, one transaction) adds
//! partitions to the producer's open transaction (starting it); the broker form (v4+, many
//! transactions) does the same — for a client at transaction version 2 (KIP-890 part 2:
//! Produce v12, TxnOffsetCommit v5 add implicitly) — or, with `verify_only`, only checks that
//! the partitions are in the transaction — KIP-890 part 1's check a partition leader makes
//! before it appends a transactional batch (a partition not added answers
//! TRANSACTION_ABORTABLE).
//!
//! As Kafka's `KafkaApis.handleAddPartitionsToTxnRequest`: a partition whose topic or
//! partition does not exist answers UNKNOWN_TOPIC_OR_PARTITION and the others of its
//! transaction OPERATION_NOT_ATTEMPTED, without asking the coordinator; otherwise the
//! coordinator's error applies to every partition. Before v2 PRODUCER_FENCED is answered
//! INVALID_PRODUCER_EPOCH.

use super::txn_errors::txn_error_code;
use super::wire::topic_name;
use crate::authz::{self, AclOperation, RESOURCE_TRANSACTIONAL_ID};
use crate::errors::code;
use crate::session::Session;
use crate::shard::Shard;
use crate::txn::{TxnError, TxnOp, TxnReply};
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use net::kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use net::kafka_protocol::messages::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse};
use std::rc::Rc;
use storage::TopicPartition;

pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: AddPartitionsToTxnRequest,
    version: i16,
) -> AddPartitionsToTxnResponse {
    let mut response = AddPartitionsToTxnResponse::default();
    // Kafka: the v4+ (broker) form needs CLUSTER_ACTION on the cluster (`crate::authz`).
    if version >= 4 && !authz::cluster(shard, session, AclOperation::ClusterAction) {
        response.error_code = code(ResponseError::ClusterAuthorizationFailed);
        return response;
    }
    let fenced_is_invalid_epoch = version < 2;
    if version <= 3 {
        let results = one_transaction(
            shard,
            session,
            &req.v3_and_below_transactional_id.0,
            (
                req.v3_and_below_producer_id.0,
                req.v3_and_below_producer_epoch,
            ),
            Form::Client,
            &req.v3_and_below_topics,
            fenced_is_invalid_epoch,
        )
        .await;
        response.results_by_topic_v3_and_below = results;
        return response;
    }
    for t in &req.transactions {
        let mut result = AddPartitionsToTxnResult::default();
        result.transactional_id = t.transactional_id.clone();
        result.topic_results = one_transaction(
            shard,
            session,
            &t.transactional_id.0,
            (t.producer_id.0, t.producer_epoch),
            if t.verify_only {
                Form::BrokerVerify
            } else {
                Form::BrokerAdd
            },
            &t.topics,
            false,
        )
        .await;
        response.results_by_transaction.push(result);
    }
    response
}

/// What one transaction of the request asks.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    /// v0–3: a client adds partitions (transaction version 1).
    Client,
    /// v4+ without `verify_only`: a leader adds them for a client at transaction version 2
    /// (KIP-890 part 2).
    BrokerAdd,
    /// v4+ with `verify_only`: a leader checks them (KIP-890 part 1).
    BrokerVerify,
}

/// The per-partition results of one transaction's request; `producer` is its (producer id,
/// epoch).
async fn one_transaction(
    shard: &Rc<Shard>,
    session: &Session,
    transactional_id: &str,
    producer: (i64, i16),
    form: Form,
    topics: &[AddPartitionsToTxnTopic],
    fenced_is_invalid_epoch: bool,
) -> Vec<AddPartitionsToTxnTopicResult> {
    let (producer_id, producer_epoch) = producer;
    let partitions: Vec<TopicPartition> = topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| TopicPartition {
                topic: t.name.0.to_string(),
                partition: *p,
            })
        })
        .collect();
    // Checked first, as Kafka's handler: WRITE on the transactional id (else every partition
    // answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED), WRITE on each topic, then existence; a
    // refused partition leaves the others OPERATION_NOT_ATTEMPTED.
    let txn_allowed = authz::allowed(
        shard,
        session,
        AclOperation::Write,
        RESOURCE_TRANSACTIONAL_ID,
        transactional_id,
    );
    let refused: Vec<Option<ResponseError>> = {
        let meta = shard.metadata();
        partitions
            .iter()
            .map(|tp| {
                if !txn_allowed {
                    Some(ResponseError::TransactionalIdAuthorizationFailed)
                } else if !authz::topic(shard, session, AclOperation::Write, &tp.topic) {
                    Some(ResponseError::TopicAuthorizationFailed)
                } else if meta.partition(&tp.topic, tp.partition).is_none() {
                    Some(ResponseError::UnknownTopicOrPartition)
                } else {
                    None
                }
            })
            .collect()
    };
    let codes: Vec<i16> = if refused.iter().any(Option::is_some) {
        refused
            .iter()
            .map(|r| code(r.unwrap_or(ResponseError::OperationNotAttempted)))
            .collect()
    } else {
        let n = partitions.len();
        let op = if form == Form::BrokerVerify {
            TxnOp::Verify {
                producer_id,
                producer_epoch,
                partitions: partitions.clone(),
            }
        } else {
            TxnOp::AddPartitions {
                producer_id,
                producer_epoch,
                partitions: partitions.clone(),
                // Kafka's `transactionVersionForAddPartitionsToTxn`: the broker form (v4+) is
                // transaction version 2.
                client_transaction_version: if form == Form::Client {
                    crate::txn::state::CLIENT_TXN_VERSION_1
                } else {
                    crate::txn::state::CLIENT_TXN_VERSION_2
                },
            }
        };
        let all = |e: TxnError| vec![txn_error_code(e, fenced_is_invalid_epoch); n];
        match crate::txn::service::call(shard, transactional_id, op).await {
            TxnReply::Done(Ok(())) => vec![0; n],
            TxnReply::Done(Err(e)) | TxnReply::Verified(Err(e)) => all(e),
            TxnReply::Verified(Ok(each)) => each
                .into_iter()
                .map(|r| r.err().map_or(0, |e| txn_error_code(e, false)))
                .collect(),
            TxnReply::ProducerId(_) | TxnReply::Described(_) => {
                all(TxnError::CoordinatorNotAvailable)
            }
        }
    };
    let mut out: Vec<AddPartitionsToTxnTopicResult> = Vec::new();
    for (tp, error_code) in partitions.into_iter().zip(codes) {
        let mut p = AddPartitionsToTxnPartitionResult::default();
        p.partition_index = tp.partition;
        p.partition_error_code = error_code;
        match out.iter_mut().find(|t| *t.name.0 == *tp.topic) {
            Some(t) => t.results_by_partition.push(p),
            None => {
                let mut t = AddPartitionsToTxnTopicResult::default();
                t.name = topic_name(&tp.topic);
                t.results_by_partition.push(p);
                out.push(t);
            }
        }
    }
    out
}
