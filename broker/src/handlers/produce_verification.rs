//! KIP-890 part 1 on the produce path (Kafka's `ReplicaManager.handleProduceAppend` with
//! `transaction.partition.verification.enable`): before a transactional batch is appended to
//! a partition where its producer's transaction is not open yet, the partition's leader
//! starts a verification there (a guard kept in the partition's producer state,
//! `storage::VerificationStates`), asks the transaction coordinator whether the partition is
//! in the transaction (`crate::txn::verification`), and appends only if so, carrying the
//! guard — so a write verified before an abort marker cannot land after it.
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
    {
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
    let starts = started.iter().map(|(tp, sequence)| {
        crate::partitions::service::call(
            shard,
            tp.clone(),
            PartitionOp::StartTxnVerification {
                producer_id,
                producer_epoch,
                base_sequence: *sequence,
            },
        )
    });
    let replies = futures_util::future::join_all(starts).await;
    let mut asking = Vec::new();
    for ((tp, _), reply) in started.into_iter().zip(replies) {
        let outcome = match reply {
            PartitionReply::VerificationStarted(guard) if guard == VerificationGuard::SENTINEL => {
                Ok(guard)
            }
            PartitionReply::VerificationStarted(guard) => {
                asking.push((tp, guard));
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
        return verified;
    }
    let question = Question {
        transactional_id: transactional_id.0.to_string(),
        producer_id,
        producer_epoch,
        partitions: asking.iter().map(|(tp, _)| tp.clone()).collect(),
    };
    let answers = crate::txn::verification::verify(shard, question).await;
    for ((tp, guard), answer) in asking.into_iter().zip(answers) {
        let outcome = answer.map(|()| guard).map_err(|u| {
            let coordinator_code = match u {
                Unverified::Coordinator(e) => txn_error_code(e, false),
                Unverified::Code(c) => c,
            };
            produce_error(coordinator_code, version)
        });
        verified
            .by_partition
            .insert((tp.topic, tp.partition), outcome);
    }
    verified
}

/// What a Produce of `version` answers for a partition the coordinator did not verify, with
/// its `coordinator_code` (Kafka's `AddPartitionsToTxnManager` then `ReplicaManager`; see the
/// module doc).
pub(super) fn produce_error(coordinator_code: i16, version: i16) -> VerifyRefusal {
    let is = |e: ResponseError| coordinator_code == e.code();
    let mapped = if is(ResponseError::ProducerFenced) {
        code(ResponseError::InvalidProducerEpoch)
    } else if is(ResponseError::TransactionAbortable) && version < TRANSACTION_ABORTABLE_VERSION {
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
        for version in 3..11 {
            let (c, message) = produce_error(abortable, version);
            assert_eq!(c, invalid_txn_state, "v{version}");
            assert_eq!(
                message.as_deref(),
                Some("Partition was not added to the transaction")
            );
        }
        assert_eq!(produce_error(abortable, 11), (abortable, None));
        assert_eq!(
            produce_error(code(ResponseError::ProducerFenced), 9),
            (code(ResponseError::InvalidProducerEpoch), None)
        );
        let (c, message) = produce_error(code(ResponseError::NotCoordinator), 11);
        assert_eq!(c, code(ResponseError::NotEnoughReplicas));
        assert!(message
            .unwrap()
            .ends_with("Underlying error: NOT_COORDINATOR"));
        let mapping = code(ResponseError::InvalidProducerIdMapping);
        assert_eq!(produce_error(mapping, 9), (mapping, None));
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
