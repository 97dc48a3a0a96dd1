//! The waiting KIP-890 verification questions of one shard, per coordinator node (Kafka's
//! `AddPartitionsToTxnManager.nodesToTransactions`): pure state, no I/O; `super::verification`
//! sends them. Invariants: a node's queue exists while its sender task runs (`in_flight`), one
//! question per transactional id waits per node, and at most [`VERIFICATIONS_WAITING_MAX`]
//! questions wait per node.

use super::state::TxnError;
use futures_channel::oneshot;
use net::kafka_protocol::error::ResponseError;
use std::cell::RefCell;
use std::collections::HashMap;
use storage::TopicPartition;

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

/// Each partition's answer to a question, in the question's order.
pub type Answers = Vec<Result<(), Unverified>>;

/// One transaction's question to a coordinator.
#[derive(Clone, Debug)]
pub struct Question {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub partitions: Vec<TopicPartition>,
    /// KIP-890 part 2 (Produce v12, TxnOffsetCommit v5): add the partitions to the
    /// transaction (`verify_only` false) rather than only check them.
    pub add: bool,
}

/// A question waiting for its node's next request, and where its answers go.
pub struct Waiting {
    pub question: Question,
    pub answer: oneshot::Sender<Answers>,
}

impl Waiting {
    /// Answers every partition with `code`.
    pub fn answer_all(self, code: i16) {
        let n = self.question.partitions.len();
        let _ = self.answer.send(vec![Err(Unverified::Code(code)); n]);
    }
}

/// What [`Verifier::enqueue`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Enqueued {
    /// Waiting; `start`: no sender task runs for the node, start one.
    Waiting { start: bool },
    /// Answered at once (an older epoch than a question already waiting).
    Answered,
    /// The node's queue is full: answer NETWORK_EXCEPTION.
    Full,
}

/// This shard's waiting questions per coordinator node.
#[derive(Default)]
pub struct Verifier {
    nodes: RefCell<HashMap<i32, NodeQueue>>,
}

#[derive(Default)]
struct NodeQueue {
    waiting: Vec<Waiting>,
}

impl Verifier {
    /// Queues `waiting` for `node`. Kafka's rule for a transactional id already waiting: the
    /// older epoch's question is answered INVALID_PRODUCER_EPOCH, the earlier of two at one
    /// epoch NETWORK_EXCEPTION (a client's retry).
    pub fn enqueue(&self, node: i32, waiting: Waiting) -> Enqueued {
        let mut nodes = self.nodes.borrow_mut();
        let start = !nodes.contains_key(&node);
        let queue = nodes.entry(node).or_default();
        let id = &waiting.question.transactional_id;
        if let Some(i) = queue
            .waiting
            .iter()
            .position(|w| w.question.transactional_id == *id)
        {
            let old = queue.waiting[i].question.producer_epoch;
            let new = waiting.question.producer_epoch;
            if new < old {
                waiting.answer_all(ResponseError::InvalidProducerEpoch.code());
                return Enqueued::Answered;
            }
            let error = if old < new {
                ResponseError::InvalidProducerEpoch
            } else {
                ResponseError::NetworkException
            };
            queue.waiting.swap_remove(i).answer_all(error.code());
        }
        if queue.waiting.len() >= VERIFICATIONS_WAITING_MAX {
            if start {
                nodes.remove(&node);
            }
            return Enqueued::Full;
        }
        queue.waiting.push(waiting);
        assert!(queue.waiting.len() <= VERIFICATIONS_WAITING_MAX, "bounded");
        Enqueued::Waiting { start }
    }

    /// The questions waiting for `node`, for its next request; `None` when none waits: the
    /// node's queue is removed and its sender task ends.
    pub fn take(&self, node: i32) -> Option<Vec<Waiting>> {
        let mut nodes = self.nodes.borrow_mut();
        let queue = nodes.get_mut(&node)?;
        if queue.waiting.is_empty() {
            nodes.remove(&node);
            return None;
        }
        Some(std::mem::take(&mut queue.waiting))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn question(id: &str, epoch: i16) -> (Waiting, oneshot::Receiver<Answers>) {
        let (answer, answered) = oneshot::channel();
        let question = Question {
            transactional_id: id.to_owned(),
            producer_id: 1,
            producer_epoch: epoch,
            partitions: vec![TopicPartition {
                topic: "t".to_owned(),
                partition: 0,
            }],
            add: false,
        };
        (Waiting { question, answer }, answered)
    }

    fn code_of(mut answered: oneshot::Receiver<Answers>) -> Option<i16> {
        match answered.try_recv().ok().flatten()?.pop()? {
            Err(Unverified::Code(c)) => Some(c),
            _ => None,
        }
    }

    #[test]
    fn questions_for_one_node_wait_together_and_one_task_sends_them() {
        let v = Verifier::default();
        let (a, _a) = question("a", 0);
        let (b, _b) = question("b", 0);
        assert_eq!(v.enqueue(7, a), Enqueued::Waiting { start: true });
        assert_eq!(v.enqueue(7, b), Enqueued::Waiting { start: false });
        assert_eq!(v.take(7).map(|w| w.len()), Some(2));
        let (c, _c) = question("c", 0);
        assert_eq!(
            v.enqueue(7, c),
            Enqueued::Waiting { start: false },
            "in flight"
        );
        assert_eq!(v.take(7).map(|w| w.len()), Some(1));
        assert!(v.take(7).is_none(), "the task ends");
        let (d, _d) = question("d", 0);
        assert_eq!(v.enqueue(7, d), Enqueued::Waiting { start: true });
    }

    #[test]
    fn of_two_questions_for_one_id_the_older_epoch_or_the_earlier_is_answered() {
        let v = Verifier::default();
        let (first, first_answer) = question("x", 1);
        let (retry, retry_answer) = question("x", 1);
        let (older, older_answer) = question("x", 0);
        let (newer, _newer_answer) = question("x", 2);
        v.enqueue(3, first);
        v.enqueue(3, retry);
        assert_eq!(
            code_of(first_answer),
            Some(ResponseError::NetworkException.code())
        );
        assert_eq!(v.enqueue(3, older), Enqueued::Answered);
        assert_eq!(
            code_of(older_answer),
            Some(ResponseError::InvalidProducerEpoch.code())
        );
        v.enqueue(3, newer);
        assert_eq!(
            code_of(retry_answer),
            Some(ResponseError::InvalidProducerEpoch.code())
        );
        assert_eq!(v.take(3).map(|w| w.len()), Some(1));
    }

    #[test]
    fn a_nodes_queue_is_bounded() {
        let v = Verifier::default();
        let mut receivers = Vec::new();
        for i in 0..VERIFICATIONS_WAITING_MAX {
            let (w, r) = question(&i.to_string(), 0);
            receivers.push(r);
            assert!(matches!(v.enqueue(1, w), Enqueued::Waiting { .. }));
        }
        let (w, _r) = question("one too many", 0);
        assert_eq!(v.enqueue(1, w), Enqueued::Full);
    }
}
