//! KIP-890 part 1, the partition leader's question to the transaction coordinator (Kafka's
//! `AddPartitionsToTxnManager`): is this partition in the producer's ongoing transaction?
//! Asked before the transaction's first batch is appended to a partition, as AddPartitionsToTxn
//! v4 with `verify_only`. When this broker leads the transactional id's `__transaction_state`
//! partition the coordinator is asked in-process ([`super::service::call`]); otherwise the
//! questions for one coordinator node are batched, as Kafka's manager does: one request in
//! flight per node from this shard, the questions that arrive meanwhile sent together in the
//! next one. Of two questions for one transactional id waiting together, the older epoch's is
//! answered INVALID_PRODUCER_EPOCH and, for equal epochs, the earlier one NETWORK_EXCEPTION
//! (a client's retry), as Kafka's `addTxnData`.
//!
//! Never blocks the shard: each question is a future; a node's requests are sent by a task of
//! its own. Waiting questions per node are bounded by [`VERIFICATIONS_WAITING_MAX`]; past it a
//! question is answered NETWORK_EXCEPTION at once (retriable, as a full send queue is).

use super::ops::{TxnOp, TxnReply};
use super::state::TxnError;
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
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use storage::TopicPartition;

/// The AddPartitionsToTxn version a leader verifies with (the first broker form, KIP-890).
const VERIFY_VERSION: i16 = 4;

/// Questions waiting for one coordinator node on one shard, at most.
pub const VERIFICATIONS_WAITING_MAX: usize = 1024;

/// Why a partition was not verified.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unverified {
    /// The coordinator on this broker said so.
    Coordinator(TxnError),
    /// Another broker's coordinator answered this Kafka code, or the exchange failed with it
    /// (NETWORK_EXCEPTION).
    Code(i16),
}

/// One transaction's question to a coordinator.
#[derive(Clone, Debug)]
pub struct Question {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub partitions: Vec<TopicPartition>,
}

/// A question waiting for its node's next request.
struct Waiting {
    question: Question,
    answer: oneshot::Sender<Vec<Result<(), Unverified>>>,
}

/// This shard's questions per coordinator node (see the module doc).
#[derive(Default)]
pub struct Verifier {
    nodes: RefCell<HashMap<i32, NodeQueue>>,
}

#[derive(Default)]
struct NodeQueue {
    /// A request to the node is under way (its task sends the waiting ones next).
    in_flight: bool,
    waiting: Vec<Waiting>,
}

/// Asks the coordinator of `question.transactional_id` whether each of its partitions is in
/// the producer's transaction: per partition in order, `Ok` or why not.
pub async fn verify(shard: &Rc<Shard>, question: Question) -> Vec<Result<(), Unverified>> {
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
    if !enqueue(shard, node, Waiting { question, answer }) {
        return vec![Err(Unverified::Code(network_exception())); n];
    }
    answered
        .await
        .unwrap_or_else(|_| vec![Err(Unverified::Code(network_exception())); n])
}

/// The coordinator on this broker, asked directly.
async fn verify_here(shard: &Rc<Shard>, question: Question) -> Vec<Result<(), Unverified>> {
    let n = question.partitions.len();
    let op = TxnOp::Verify {
        producer_id: question.producer_id,
        producer_epoch: question.producer_epoch,
        partitions: question.partitions,
    };
    match super::service::call(shard, &question.transactional_id, op).await {
        TxnReply::Verified(Ok(each)) if each.len() == n => each
            .into_iter()
            .map(|r| r.map_err(Unverified::Coordinator))
            .collect(),
        TxnReply::Verified(Err(e)) => vec![Err(Unverified::Coordinator(e)); n],
        other => {
            tracing::error!(?other, "unexpected reply to a verification");
            vec![Err(Unverified::Coordinator(TxnError::CoordinatorNotAvailable)); n]
        }
    }
}

fn network_exception() -> i16 {
    ResponseError::NetworkException.code()
}

/// Queues `waiting` for `node`, starting the node's sender task when none runs. `false`:
/// the node's queue is full. Kafka's rule for a transactional id already waiting: the older
/// epoch's question is answered INVALID_PRODUCER_EPOCH, the earlier of two at one epoch
/// NETWORK_EXCEPTION.
fn enqueue(shard: &Rc<Shard>, node: i32, waiting: Waiting) -> bool {
    let start = {
        let mut nodes = shard.txns.verifier.nodes.borrow_mut();
        let queue = nodes.entry(node).or_default();
        let id = &waiting.question.transactional_id;
        if let Some(i) = queue
            .waiting
            .iter()
            .position(|w| w.question.transactional_id == *id)
        {
            let (old, new) = (
                queue.waiting[i].question.producer_epoch,
                waiting.question.producer_epoch,
            );
            if new < old {
                answer_all(waiting, ResponseError::InvalidProducerEpoch.code());
                return true;
            }
            let error = if old < new {
                ResponseError::InvalidProducerEpoch.code()
            } else {
                network_exception()
            };
            answer_all(queue.waiting.swap_remove(i), error);
        }
        if queue.waiting.len() >= VERIFICATIONS_WAITING_MAX {
            return false;
        }
        queue.waiting.push(waiting);
        assert!(queue.waiting.len() <= VERIFICATIONS_WAITING_MAX, "bounded");
        !std::mem::replace(&mut queue.in_flight, true)
    };
    if start {
        let shard = Rc::clone(shard);
        crate::shard::spawn_into(None, async move { send_loop(&shard, node).await });
    }
    true
}

/// Answers every partition of `waiting` with `code`.
fn answer_all(waiting: Waiting, code: i16) {
    let n = waiting.question.partitions.len();
    let _ = waiting.answer.send(vec![Err(Unverified::Code(code)); n]);
}

/// Sends `node`'s waiting questions, one request at a time, until none waits.
async fn send_loop(shard: &Rc<Shard>, node: i32) {
    loop {
        let batch = {
            let mut nodes = shard.txns.verifier.nodes.borrow_mut();
            let Some(queue) = nodes.get_mut(&node) else {
                return;
            };
            if queue.waiting.is_empty() {
                nodes.remove(&node);
                return;
            }
            std::mem::take(&mut queue.waiting)
        };
        let questions: Vec<&Question> = batch.iter().map(|w| &w.question).collect();
        let answers = ask(shard, node, &questions).await;
        for (waiting, answer) in batch.into_iter().zip(answers) {
            let _ = waiting.answer.send(answer);
        }
    }
}

/// One AddPartitionsToTxn request to `node` for `questions`: per question, per partition.
async fn ask(
    shard: &Shard,
    node: i32,
    questions: &[&Question],
) -> Vec<Vec<Result<(), Unverified>>> {
    let every = |code: i16| -> Vec<Vec<Result<(), Unverified>>> {
        questions
            .iter()
            .map(|q| vec![Err(Unverified::Code(code)); q.partitions.len()])
            .collect()
    };
    let request = AddPartitionsToTxnRequest::default().with_transactions(
        questions.iter().map(|q| transaction_of(q)).collect(),
    );
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

/// The broker form of one question (`verify_only`).
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
        .with_verify_only(true)
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
