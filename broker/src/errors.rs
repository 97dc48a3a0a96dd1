//! Kafka error codes at the edge (STYLE.md "Errors"): internal errors map here with an
//! exhaustive `match`, so a new variant forces a decision.

use net::kafka_protocol::error::ResponseError;
use replication::metadata::{ControllerError, TopicOperation};
use storage::{BatchError, StorageError};

/// The Kafka error code a produce or fetch of one partition answers for `e`.
pub fn storage_error_code(e: &StorageError) -> i16 {
    let error = match e {
        StorageError::InvalidBatch(BatchError::TooLarge { .. }) => ResponseError::MessageTooLarge,
        StorageError::InvalidBatch(
            BatchError::Truncated { .. }
            | BatchError::LengthMismatch { .. }
            | BatchError::Magic(_)
            | BatchError::Crc { .. }
            | BatchError::Malformed(_),
        ) => ResponseError::CorruptMessage,
        // Kafka's LogValidator: a record count that disagrees with the records is an
        // InvalidRecordException (INVALID_RECORD), not a corrupt batch.
        StorageError::InvalidBatch(BatchError::RecordCount { .. }) => ResponseError::InvalidRecord,
        StorageError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
        StorageError::DiskFull { .. } | StorageError::Io { .. } | StorageError::Corrupt { .. } => {
            ResponseError::KafkaStorageError
        }
        // The partition moved or was deleted while the request was in flight.
        StorageError::Closed => ResponseError::NotLeaderOrFollower,
        StorageError::OutOfOrderSequence { .. } => ResponseError::OutOfOrderSequenceNumber,
        StorageError::InvalidProducerEpoch { .. } => ResponseError::InvalidProducerEpoch,
        StorageError::DuplicateSequence { .. } => ResponseError::DuplicateSequenceNumber,
    };
    if matches!(error, ResponseError::KafkaStorageError) {
        tracing::warn!(error = %e, "storage error");
    }
    error.code()
}

/// Shorthand for a protocol error code.
pub fn code(e: ResponseError) -> i16 {
    e.code()
}

/// Kafka's error code and message for a refused or failed controller op.
pub fn controller_error(e: &ControllerError) -> (i16, String) {
    let error = match e {
        ControllerError::InvalidTopicName { .. } => ResponseError::InvalidTopicException,
        ControllerError::TopicAlreadyExists { .. } => ResponseError::TopicAlreadyExists,
        ControllerError::UnknownTopic { .. } => ResponseError::UnknownTopicOrPartition,
        ControllerError::PartitionCountOutOfRange { .. }
        | ControllerError::PartitionCountNotIncreased { .. } => ResponseError::InvalidPartitions,
        ControllerError::InvalidConfig { .. } => ResponseError::InvalidConfig,
        // As Kafka answers each: a creation or config change of an internal topic is an
        // invalid request; deleting, growing, producing to it or deleting its records names an
        // invalid topic.
        ControllerError::InternalTopic { operation, .. } => match operation {
            TopicOperation::Create | TopicOperation::AlterConfigs => ResponseError::InvalidRequest,
            TopicOperation::Delete
            | TopicOperation::CreatePartitions
            | TopicOperation::Produce
            | TopicOperation::DeleteRecords => ResponseError::InvalidTopicException,
        },
        ControllerError::Store(_) => ResponseError::KafkaStorageError,
        ControllerError::TopicIdTaken { .. }
        | ControllerError::ProducerIdsExhausted { .. }
        | ControllerError::Apply(_)
        | ControllerError::Unavailable => ResponseError::UnknownServerError,
    };
    if matches!(
        error,
        ResponseError::KafkaStorageError | ResponseError::UnknownServerError
    ) {
        tracing::warn!(error = %e, "controller error");
    }
    (error.code(), e.to_string())
}
