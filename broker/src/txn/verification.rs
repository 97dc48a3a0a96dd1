//! KIP-890, the partition leader's question to the transaction coordinator (Kafka's
//! `AddPartitionsToTxnManager`): is this partition in the producer's ongoing transaction
//! (part 1, AddPartitionsToTxn with `verify_only`), or — for a client at transaction version
//! 2 (part 2: Produce v12, TxnOffsetCommit v5) — add it to the transaction (`verify_only`
//! false). Asked before the transaction's first batch is appended to a partition, as
//! AddPartitionsToTxn v5. When this broker leads the transactional id's `__transaction_state`
//! partition the coordinator is asked in-process ([`super::service::call`]); otherwise the
//! questions for one coordinator node are batched, as Kafka's manager does: one request in
//! flight per node from this shard, the questions that arrive meanwhile sent together in the
//! next one. Of two questions for one transactional id waiting together, the older epoch's is
//! answered INVALID_PRODUCER_EPOCH and, for equal epochs, the earlier one NETWORK_EXCEPTION
//! (a client's retry), as Kafka's `addTxnData`.
//!
//! Never blocks the shard: each question is a future; a node's requests are sent by a task of
//! its own. Waiting questions per node are bounded by [`super::verify_queue::VERIFICATIONS_WAITING_MAX`]; past it a
//! question is answered NETWORK_EXCEPTION at once (retriable, as a full send queue is).

use super::ops::{TxnOp, TxnReply};
use super::state::TxnError;
use super::verify_queue::{Answers, Enqueued, Waiting};
pub use super::verify_queue::{Question, Unverified};
use super::TXN_TOPIC;
use crate::coordinator_runtime::partition_for;
use crate::shard::Shard;
use futures_channel::oneshot;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use net::kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey, ProducerId, TopicName,
    TransactionalId,
};
use net::kafka_protocol::protocol::StrBytes;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

/// The AddPartitionsToTxn version a leader verifies or adds with (Kafka's latest; any broker
/// form, v4+, counts as transaction version 2 at the coordinator).
const VERIFY_VERSION: i16 = 5;

/// Asks the coordinator of `question.transactional_id` whether each of its partitions is in
/// the producer's transaction: per partition in order, `Ok` or why not.
pub async fn verify(shard: &Rc<Shard>, question: Question) -> Answers {
    let n = question.partitions.len();
    let coordinator = {
        let meta = shard.metadata();
        meta.topics.get(TXN_TOPIC).and_then(|t| {
            let partition = partition_for(&question.transactional_id, t.partitions.len());
            meta.partition(TXN_TOPIC, partition)
                .map(|p| p.leader)
                .filter(|leader| *leader >= 0)
        })
    };
    let Some(node) = coordinator else {
        return vec![Err(Unverified::Coordinator(TxnError::CoordinatorNotAvailable)); n];
    };
    if node == shard.config.node_id {
        return verify_here(shard, question).await;
    }
    let (answer, answered) = oneshot::channel();
    match shard
        .txns
        .verifier
        .enqueue(node, Waiting { question, answer })
    {
        Enqueued::Waiting { start: true } => {
            let shard = Rc::clone(shard);
            crate::shard::spawn_into(None, async move { send_loop(&shard, node).await });
        }
        Enqueued::Waiting { start: false } | Enqueued::Answered => {}
        Enqueued::Full => return vec![Err(Unverified::Code(network_exception())); n],
    }
    answered
        .await
        .unwrap_or_else(|_| vec![Err(Unverified::Code(network_exception())); n])
}

/// The coordinator on this broker, asked directly.
async fn verify_here(shard: &Rc<Shard>, question: Question) -> Answers {
    let n = question.partitions.len();
    let op = if question.add {
        TxnOp::AddPartitions {
            producer_id: question.producer_id,
            producer_epoch: question.producer_epoch,
            partitions: question.partitions,
            client_transaction_version: super::state::CLIENT_TXN_VERSION_2,
        }
    } else {
        TxnOp::Verify {
            producer_id: question.producer_id,
            producer_epoch: question.producer_epoch,
            partitions: question.partitions,
        }
    };
    match super::service::call(shard, &question.transactional_id, op).await {
        TxnReply::Verified(Ok(each)) if each.len() == n => each
            .into_iter()
            .map(|r| r.map_err(Unverified::Coordinator))
            .collect(),
        TxnReply::Done(Ok(())) => vec![Ok(()); n],
        TxnReply::Verified(Err(e)) | TxnReply::Done(Err(e)) => {
            vec![Err(Unverified::Coordinator(e)); n]
        }
        other => {
            tracing::error!(?other, "unexpected reply to a verification");
            vec![Err(Unverified::Coordinator(TxnError::CoordinatorNotAvailable)); n]
        }
    }
}

fn network_exception() -> i16 {
    ResponseError::NetworkException.code()
}

/// Sends `node`'s waiting questions, one request at a time, until none waits.
async fn send_loop(shard: &Rc<Shard>, node: i32) {
    while let Some(batch) = shard.txns.verifier.take(node) {
        let questions: Vec<&Question> = batch.iter().map(|w| &w.question).collect();
        let answers = ask(shard, node, &questions).await;
        for (waiting, answer) in batch.into_iter().zip(answers) {
            let _ = waiting.answer.send(answer);
        }
    }
}

/// One AddPartitionsToTxn request to `node` for `questions`: per question, per partition.
async fn ask(shard: &Shard, node: i32, questions: &[&Question]) -> Vec<Answers> {
    let every = |code: i16| -> Vec<Answers> {
        questions
            .iter()
            .map(|q| vec![Err(Unverified::Code(code)); q.partitions.len()])
            .collect()
    };
    let request = AddPartitionsToTxnRequest::default()
        .with_transactions(questions.iter().map(|q| transaction_of(q)).collect());
    use crate::replica_fetcher::fetcher::{frame, round_trip, unframe};
    let correlation_id = 1;
    let exchange = async {
        let bytes = frame(
            ApiKey::AddPartitionsToTxn,
            "AddPartitionsToTxn",
            VERIFY_VERSION,
            correlation_id,
            &request,
        )?;
        let mut connection = None;
        let body = round_trip(shard, node, &mut connection, &bytes).await?;
        unframe::<AddPartitionsToTxnResponse>(
            node,
            ApiKey::AddPartitionsToTxn,
            "AddPartitionsToTxn",
            VERIFY_VERSION,
            body,
            correlation_id,
        )
    };
    let response = match exchange.await {
        Ok(r) => r,
        Err(error) => {
            tracing::info!(node, %error, "transaction verification not sent");
            return every(network_exception());
        }
    };
    if response.error_code != 0 {
        // Kafka: the client must not see CLUSTER_AUTHORIZATION_FAILED; the verification did
        // not complete.
        let code = if response.error_code == ResponseError::ClusterAuthorizationFailed.code() {
            ResponseError::InvalidTxnState.code()
        } else {
            response.error_code
        };
        return every(code);
    }
    let mut codes: HashMap<(&str, &str, i32), i16> = HashMap::new();
    for t in &response.results_by_transaction {
        for topic in &t.topic_results {
            for p in &topic.results_by_partition {
                codes.insert(
                    (&t.transactional_id.0, &topic.name.0, p.partition_index),
                    p.partition_error_code,
                );
            }
        }
    }
    questions
        .iter()
        .map(|q| {
            q.partitions
                .iter()
                .map(|tp| {
                    let key = (q.transactional_id.as_str(), tp.topic.as_str(), tp.partition);
                    match codes.get(&key).copied() {
                        Some(0) => Ok(()),
                        Some(code) => Err(Unverified::Code(code)),
                        None => Err(Unverified::Code(network_exception())),
                    }
                })
                .collect()
        })
        .collect()
}

/// The broker form of one question (`verify_only` unless it adds).
fn transaction_of(q: &Question) -> AddPartitionsToTxnTransaction {
    let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in &q.partitions {
        topics.entry(&tp.topic).or_default().push(tp.partition);
    }
    AddPartitionsToTxnTransaction::default()
        .with_transactional_id(TransactionalId(StrBytes::from_string(
            q.transactional_id.clone(),
        )))
        .with_producer_id(ProducerId(q.producer_id))
        .with_producer_epoch(q.producer_epoch)
        .with_verify_only(!q.add)
        .with_topics(
            topics
                .into_iter()
                .map(|(topic, partitions)| {
                    AddPartitionsToTxnTopic::default()
                        .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                        .with_partitions(partitions)
                })
                .collect(),
        )
}
