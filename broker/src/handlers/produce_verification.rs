//! KIP-890 part 1 on the produce path (Kafka's `ReplicaManager.handleProduceAppend` with
//! `transaction.partition.verification.enable`): before a transactional batch is appended to
//! a partition where its producer's transaction is not open yet, the partition's leader
//! starts a verification there (a guard kept in the partition's producer state,
//! `storage::VerificationStates`), asks the transaction coordinator whether the partition is
//! in the transaction (`crate::txn::verification`), and appends only if so, carrying the
//! guard — so a write verified before an abort marker cannot land after it.
//!
//! KIP-890 part 2: from Produce v12 (a client at transaction version 2) the leader's call
//! adds the partition to the transaction instead (AddPartitionsToTxn with `verify_only`
//! false), whatever the switch says, and asks again for up to 100 ms while the coordinator
//! answers CONCURRENT_TRANSACTIONS (the previous transaction still completing).
//!
//! Only a request with a `transactional_id` and a transactional batch pays for this: a
//! non-transactional produce reads no config and makes no call. The switch is read per such
//! request, so a dynamic change (IncrementalAlterConfigs on the BROKER resource) applies to
//! the next one.
//!
//! Errors as Kafka answers them, by Produce version: the coordinator's TRANSACTION_ABORTABLE
//! (the partition is not in the transaction) is INVALID_TXN_STATE below v11 and
//! TRANSACTION_ABORTABLE from v11 (KIP-890's new error for new clients); PRODUCER_FENCED is
//! INVALID_PRODUCER_EPOCH; INVALID_TXN_STATE says "Partition was not added to the
//! transaction"; a coordinator that is busy, loading, moving or unreachable
//! (CONCURRENT_TRANSACTIONS, NETWORK_EXCEPTION, COORDINATOR_LOAD_IN_PROGRESS,
//! COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR) is NOT_ENOUGH_REPLICAS, which every client
//! retries without a metadata refresh.

use super::txn_errors::txn_error_code;
use crate::authz::{self, AclOperation};
use crate::errors::{code, partition_op_error_code};
use crate::partitions::{PartitionOp, PartitionReply};
use crate::session::Session;
use crate::shard::Shard;
use crate::txn::verification::{Question, Unverified};
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::ProduceRequest;
use std::collections::HashMap;
use std::rc::Rc;
use storage::{TopicPartition, VerificationGuard};

/// First Produce version whose clients handle TRANSACTION_ABORTABLE (Kafka's `genericError`
/// operation, KIP-890).
const TRANSACTION_ABORTABLE_VERSION: i16 = 11;

/// First Produce version of transaction version 2 (Kafka's `addPartition` operation, KIP-890
/// part 2): the leader adds the partition to the transaction, the client sends no
/// AddPartitionsToTxn.
const IMPLICIT_ADD_VERSION: i16 = 12;

/// First pause before the leader asks again when the coordinator answered
/// CONCURRENT_TRANSACTIONS to an implicit add (Kafka's
/// `add.partitions.to.txn.retry.backoff.ms` default).
const ADD_PARTITIONS_RETRY_BACKOFF: std::time::Duration = std::time::Duration::from_millis(20);
/// How long the leader keeps asking, at most (Kafka's
/// `add.partitions.to.txn.retry.backoff.max.ms` default); then the client's own retry takes
/// over (NOT_ENOUGH_REPLICAS).
const ADD_PARTITIONS_RETRY_BACKOFF_MAX: std::time::Duration = std::time::Duration::from_millis(100);

/// Bytes of a RecordBatch header up to and including its base sequence, and where its
/// producer id, producer epoch and base sequence sit.
const PRODUCER_FIELDS_END: usize = 57;
const PRODUCER_ID_AT: usize = 43;
const PRODUCER_EPOCH_AT: usize = 51;
const BASE_SEQUENCE_AT: usize = 53;
/// `attributes` byte (low) of a batch, and its transactional bit (KIP-98).
const ATTRIBUTES_LOW_AT: usize = 22;
const TRANSACTIONAL_ATTRIBUTE: u8 = 0x10;

/// A partition's refusal: Kafka's code and, where Kafka gives one, its message.
pub(super) type VerifyRefusal = (i16, Option<String>);

/// Each transactional partition's verification outcome, for its append.
#[derive(Default)]
pub(super) struct Verified {
    by_partition: HashMap<(String, i32), Result<VerificationGuard, VerifyRefusal>>,
}

impl Verified {
    /// The outcome for partition `partition` of `topic`: `None` when its append is not
    /// checked (verification off, not a transactional batch, refused on other grounds);
    /// else the guard its append carries, or its refusal.
    pub(super) fn take(
        &mut self,
        topic: &str,
        partition: i32,
    ) -> Option<Result<VerificationGuard, VerifyRefusal>> {
        if self.by_partition.is_empty() {
            return None;
        }
        self.by_partition.remove(&(topic.to_owned(), partition))
    }
}

/// A transactional batch's producer: (producer id, epoch, base sequence).
type Producer = (i64, i16, i32);

/// The producer of `records` when they start with a transactional batch.
fn transactional_producer(records: &[u8]) -> Option<Producer> {
    let header = records.get(..PRODUCER_FIELDS_END)?;
    if header[ATTRIBUTES_LOW_AT] & TRANSACTIONAL_ATTRIBUTE == 0 {
        return None;
    }
    let at = |i: usize, n: usize| &header[i..i + n];
    let producer_id = i64::from_be_bytes(at(PRODUCER_ID_AT, 8).try_into().ok()?);
    let epoch = i16::from_be_bytes(at(PRODUCER_EPOCH_AT, 2).try_into().ok()?);
    let sequence = i32::from_be_bytes(at(BASE_SEQUENCE_AT, 4).try_into().ok()?);
    (producer_id >= 0).then_some((producer_id, epoch, sequence))
}

/// Verifies the transactional partitions of `req` when `transaction.partition.verification
/// .enable` is on (see the module doc); returns each one's outcome.
pub(super) async fn verify_transactions(
    shard: &Rc<Shard>,
    session: &Session,
    req: &ProduceRequest,
    version: i16,
) -> Verified {
    let mut verified = Verified::default();
    let Some(transactional_id) = req.transactional_id.as_ref() else {
        return verified;
    };
    let candidates: Vec<(TopicPartition, Producer)> = req
        .topic_data
        .iter()
        .flat_map(|t| t.partition_data.iter().map(move |p| (t, p)))
        .filter_map(|(t, p)| {
            let producer = transactional_producer(p.records.as_deref()?)?;
            let tp = TopicPartition {
                topic: t.name.0.to_string(),
                partition: p.index,
            };
            Some((tp, producer))
        })
        .collect();
    let Some(&(_, (producer_id, producer_epoch, _))) = candidates.first() else {
        return verified;
    };
    // Kafka asks even with verification off when the client relies on the implicit add.
    let add = version >= IMPLICIT_ADD_VERSION;
    if !add {
        let meta = shard.metadata();
        if !crate::dynamic_config::transaction_partition_verification_enable(
            &shard.config,
            &meta.image,
        ) {
            return verified;
        }
    }
    let mut started = Vec::new();
    for (tp, (pid, epoch, sequence)) in candidates {
        // Refused on other grounds before any append (the produce handler's checks).
        let internal = shard
            .metadata()
            .topics
            .get(&tp.topic)
            .is_some_and(|t| t.internal);
        if internal || !authz::topic(shard, session, AclOperation::Write, &tp.topic) {
            continue;
        }
        if (pid, epoch) != (producer_id, producer_epoch) {
            // Kafka: one request, one transactional producer.
            let refusal = (code(ResponseError::InvalidProducerIdMapping), None);
            verified
                .by_partition
                .insert((tp.topic, tp.partition), Err(refusal));
            continue;
        }
        started.push((tp, sequence));
    }
    // Kafka's `maybeRetryOnConcurrentTransactions`: a client at transaction version 2 sends
    // the next transaction's first batch as soon as EndTxn answered, while the previous one
    // may still be completing; the leader asks again for a short while.
    let ask = Ask {
        transactional_id: &transactional_id.0,
        producer_id,
        producer_epoch,
        add,
        version,
    };
    let mut backoff = ADD_PARTITIONS_RETRY_BACKOFF;
    let mut waited = std::time::Duration::ZERO;
    loop {
        let concurrent = start_and_ask(shard, &ask, started, &mut verified).await;
        let again = !concurrent.is_empty()
            && add
            && waited < ADD_PARTITIONS_RETRY_BACKOFF_MAX
            && !shard.sleep_unless_stopped(backoff).await;
        if !again {
            for (tp, _, outcome) in concurrent {
                verified
                    .by_partition
                    .insert((tp.topic, tp.partition), outcome);
            }
            return verified;
        }
        waited += backoff;
        backoff = (backoff * 2).min(ADD_PARTITIONS_RETRY_BACKOFF_MAX);
        started = concurrent
            .into_iter()
            .map(|(tp, seq, _)| (tp, seq))
            .collect();
    }
}

/// One transaction's question, as [`start_and_ask`] puts it.
struct Ask<'a> {
    transactional_id: &'a str,
    producer_id: i64,
    producer_epoch: i16,
    /// Add the partitions (Produce v12+) rather than only check them.
    add: bool,
    version: i16,
}

/// A partition whose coordinator answered CONCURRENT_TRANSACTIONS: (partition, base
/// sequence, that outcome).
type Concurrent = (
    TopicPartition,
    i32,
    Result<VerificationGuard, VerifyRefusal>,
);

/// Starts the verification of each of `started` (partition, base sequence) and asks the
/// coordinator about those that need it; records each outcome in `verified`, except those
/// answered CONCURRENT_TRANSACTIONS, which are returned.
async fn start_and_ask(
    shard: &Rc<Shard>,
    ask: &Ask<'_>,
    started: Vec<(TopicPartition, i32)>,
    verified: &mut Verified,
) -> Vec<Concurrent> {
    let starts = started.iter().map(|(tp, sequence)| {
        crate::partitions::service::call(
            shard,
            tp.clone(),
            PartitionOp::StartTxnVerification {
                producer_id: ask.producer_id,
                producer_epoch: ask.producer_epoch,
                base_sequence: *sequence,
            },
        )
    });
    let replies = futures_util::future::join_all(starts).await;
    let mut asking = Vec::new();
    for ((tp, sequence), reply) in started.into_iter().zip(replies) {
        let outcome = match reply {
            PartitionReply::VerificationStarted(guard) if guard == VerificationGuard::SENTINEL => {
                Ok(guard)
            }
            PartitionReply::VerificationStarted(guard) => {
                asking.push((tp, sequence, guard));
                continue;
            }
            PartitionReply::Error(e) => Err((partition_op_error_code(&e), None)),
            other => {
                tracing::error!(?other, "unexpected reply to a verification start");
                Err((code(ResponseError::UnknownServerError), None))
            }
        };
        verified
            .by_partition
            .insert((tp.topic, tp.partition), outcome);
    }
    if asking.is_empty() {
        return Vec::new();
    }
    let question = Question {
        transactional_id: ask.transactional_id.to_owned(),
        producer_id: ask.producer_id,
        producer_epoch: ask.producer_epoch,
        partitions: asking.iter().map(|(tp, ..)| tp.clone()).collect(),
        add: ask.add,
    };
    let answers = crate::txn::verification::verify(shard, question).await;
    let mut concurrent = Vec::new();
    for ((tp, sequence, guard), answer) in asking.into_iter().zip(answers) {
        let mut busy = false;
        let outcome = answer.map(|()| guard).map_err(|u| {
            let coordinator_code = match u {
                Unverified::Coordinator(e) => txn_error_code(e, false),
                Unverified::Code(c) => c,
            };
            busy = coordinator_code == code(ResponseError::ConcurrentTransactions);
            produce_error(
                coordinator_code,
                ask.version >= TRANSACTION_ABORTABLE_VERSION,
            )
        });
        if busy {
            concurrent.push((tp, sequence, outcome));
            continue;
        }
        verified
            .by_partition
            .insert((tp.topic, tp.partition), outcome);
    }
    concurrent
}

/// What a request answers for a partition the coordinator did not verify, with its
/// `coordinator_code` (Kafka's `AddPartitionsToTxnManager` then `ReplicaManager`; see the
/// module doc); `transaction_abortable`: the request version's clients handle
/// TRANSACTION_ABORTABLE (Produce v11+, TxnOffsetCommit v4+), else it is INVALID_TXN_STATE.
pub(super) fn produce_error(coordinator_code: i16, transaction_abortable: bool) -> VerifyRefusal {
    let is = |e: ResponseError| coordinator_code == e.code();
    let mapped = if is(ResponseError::ProducerFenced) {
        code(ResponseError::InvalidProducerEpoch)
    } else if is(ResponseError::TransactionAbortable) && !transaction_abortable {
        code(ResponseError::InvalidTxnState)
    } else {
        coordinator_code
    };
    if mapped == code(ResponseError::InvalidTxnState) {
        return (
            mapped,
            Some("Partition was not added to the transaction".to_owned()),
        );
    }
    let retriable = [
        (
            ResponseError::ConcurrentTransactions,
            "CONCURRENT_TRANSACTIONS",
        ),
        (ResponseError::NetworkException, "NETWORK_EXCEPTION"),
        (
            ResponseError::CoordinatorLoadInProgress,
            "COORDINATOR_LOAD_IN_PROGRESS",
        ),
        (
            ResponseError::CoordinatorNotAvailable,
            "COORDINATOR_NOT_AVAILABLE",
        ),
        (ResponseError::NotCoordinator, "NOT_COORDINATOR"),
    ];
    match retriable.iter().find(|(e, _)| e.code() == mapped) {
        Some((_, name)) => (
            code(ResponseError::NotEnoughReplicas),
            Some(format!(
                "Unable to verify the partition has been added to the transaction. Underlying \
                 error: {name}"
            )),
        ),
        None => (mapped, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coordinator_answers_become_kafkas_produce_errors_per_version() {
        let abortable = code(ResponseError::TransactionAbortable);
        let invalid_txn_state = code(ResponseError::InvalidTxnState);
        let (c, message) = produce_error(abortable, false);
        assert_eq!(c, invalid_txn_state);
        assert_eq!(
            message.as_deref(),
            Some("Partition was not added to the transaction")
        );
        assert_eq!(produce_error(abortable, true), (abortable, None));
        assert_eq!(
            produce_error(code(ResponseError::ProducerFenced), false),
            (code(ResponseError::InvalidProducerEpoch), None)
        );
        let (c, message) = produce_error(code(ResponseError::NotCoordinator), true);
        assert_eq!(c, code(ResponseError::NotEnoughReplicas));
        assert!(message
            .unwrap()
            .ends_with("Underlying error: NOT_COORDINATOR"));
        let mapping = code(ResponseError::InvalidProducerIdMapping);
        assert_eq!(produce_error(mapping, false), (mapping, None));
    }

    #[test]
    fn the_producer_of_a_transactional_batch_is_read_from_its_header() {
        let mut batch = vec![0u8; 70];
        batch[PRODUCER_ID_AT..PRODUCER_ID_AT + 8].copy_from_slice(&42i64.to_be_bytes());
        batch[PRODUCER_EPOCH_AT..PRODUCER_EPOCH_AT + 2].copy_from_slice(&3i16.to_be_bytes());
        batch[BASE_SEQUENCE_AT..BASE_SEQUENCE_AT + 4].copy_from_slice(&7i32.to_be_bytes());
        assert_eq!(transactional_producer(&batch), None, "not transactional");
        batch[ATTRIBUTES_LOW_AT] = TRANSACTIONAL_ATTRIBUTE;
        assert_eq!(transactional_producer(&batch), Some((42, 3, 7)));
        assert_eq!(transactional_producer(&batch[..56]), None, "too short");
    }
}
