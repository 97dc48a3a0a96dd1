//! Why a group operation failed: the group coordinator's typed errors. Kafka's error codes are
//! chosen from these only at the edge (`crate::errors::group_error_code`).
//!
//! A failed write or read of the coordinator's own `__consumer_offsets` partition becomes a
//! `GroupError` here, by `From`, with no Kafka code in between (Kafka's
//! `CoordinatorOperationExceptionHelper`): each `match` is exhaustive, so a new partition or
//! storage error forces a decision.

use crate::partitions::PartitionOpError;
use crate::produce_checks::ProduceCheckError;
use replication::{IsrError, LeaderEpochError, PartitionError};
use storage::{BatchError, StorageError};

/// A group coordinator failure, named after the Kafka error each one is answered with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GroupError {
    #[error("the member id is not a member of the group")]
    UnknownMemberId,
    #[error("the group is rebalancing: rejoin")]
    RebalanceInProgress,
    #[error("the generation is not the group's current one")]
    IllegalGeneration,
    #[error("the coordinator is not available (group deleted, or its log unavailable)")]
    CoordinatorNotAvailable,
    #[error("this broker does not coordinate the group (it does not lead its offsets partition)")]
    NotCoordinator,
    #[error("the group's offsets partition is still being loaded")]
    CoordinatorLoadInProgress,
    #[error("the group.instance.id belongs to another member (KIP-345)")]
    FencedInstanceId,
    #[error("the member's protocol type or protocols do not match the group's")]
    InconsistentGroupProtocol,
    #[error("a new member must rejoin with the member id it was given (KIP-394)")]
    MemberIdRequired,
    #[error("the session timeout is outside group.min/max.session.timeout.ms")]
    InvalidSessionTimeout,
    #[error("the group does not exist")]
    GroupIdNotFound,
    #[error("the group still has members")]
    NonEmptyGroup,
    #[error("the group id is empty or too long")]
    InvalidGroupId,
    #[error("the offset metadata is longer than offset.metadata.max.bytes")]
    OffsetMetadataTooLarge,
    #[error("the commit is larger than a batch may be")]
    InvalidCommitOffsetSize,
    #[error("the group's members consume this topic (KIP-496)")]
    GroupSubscribedToTopic,
    #[error("a transaction's offset commit for the partition is pending (KIP-447)")]
    UnstableOffsetCommit,
    #[error("the producer epoch is older than the producer's (a fenced producer, KIP-98)")]
    InvalidProducerEpoch,
}

/// The shared runtime's refusal to serve a partition's keys (Kafka's
/// COORDINATOR_LOAD_IN_PROGRESS and NOT_COORDINATOR).
impl From<crate::coordinator_runtime::NotServing> for GroupError {
    fn from(e: crate::coordinator_runtime::NotServing) -> GroupError {
        match e {
            crate::coordinator_runtime::NotServing::LoadInProgress => {
                GroupError::CoordinatorLoadInProgress
            }
            crate::coordinator_runtime::NotServing::NotCoordinator => GroupError::NotCoordinator,
        }
    }
}

/// A failed append to (or flush of) the coordinator's offsets partition, as Kafka's
/// `CoordinatorOperationExceptionHelper` answers it: a leader that lost its leadership or its
/// log is no coordinator any more (`NotCoordinator`, so the client looks the coordinator up
/// again), a commit too large for a batch is `InvalidCommitOffsetSize`, and anything else
/// (a timeout, too few replicas, an unexpected refusal) is `CoordinatorNotAvailable`.
impl From<PartitionOpError> for GroupError {
    fn from(e: PartitionOpError) -> GroupError {
        match e {
            PartitionOpError::NotLeaderOrFollower | PartitionOpError::LogUnavailable(_) => {
                GroupError::NotCoordinator
            }
            PartitionOpError::Partition(e) => GroupError::from(e),
            PartitionOpError::UnknownTopicOrPartition
            | PartitionOpError::Rejected(
                ProduceCheckError::Corrupt
                | ProduceCheckError::RecordCount
                | ProduceCheckError::Timestamp
                | ProduceCheckError::KeylessRecord { .. },
            )
            | PartitionOpError::LeaderEpoch(
                LeaderEpochError::Fenced { .. } | LeaderEpochError::Unknown { .. },
            )
            | PartitionOpError::OffsetNotAvailable(_)
            | PartitionOpError::ShardUnavailable => GroupError::CoordinatorNotAvailable,
        }
    }
}

/// As [`From<PartitionOpError>`]: the partition's own refusals.
impl From<PartitionError> for GroupError {
    fn from(e: PartitionError) -> GroupError {
        match e {
            PartitionError::Storage(e) => GroupError::from(e),
            PartitionError::NotLeaderOrFollower { .. } => GroupError::NotCoordinator,
            PartitionError::Isr(e) => GroupError::from(e),
            PartitionError::RequestTimedOut { .. }
            | PartitionError::OffsetOutOfRange { .. }
            | PartitionError::NotEnoughReplicasAfterAppend { .. } => {
                GroupError::CoordinatorNotAvailable
            }
        }
    }
}

/// As [`From<PartitionOpError>`]: the ISR state's refusals.
impl From<IsrError> for GroupError {
    fn from(e: IsrError) -> GroupError {
        match e {
            IsrError::NotAFollower { .. } | IsrError::StaleBrokerEpoch { .. } => {
                GroupError::NotCoordinator
            }
            IsrError::FetchOffsetOutOfRange { .. } | IsrError::NotEnoughReplicas { .. } => {
                GroupError::CoordinatorNotAvailable
            }
            IsrError::InvalidIsr { .. }
            | IsrError::InvalidConfig { .. }
            | IsrError::LogEndOffsetRegressed { .. }
            | IsrError::AlterPending { .. } => {
                tracing::warn!(error = %e, "unexpected ISR error");
                GroupError::CoordinatorNotAvailable
            }
        }
    }
}

/// As [`From<PartitionOpError>`]: the log's failures (of the append, or of the flush after it).
impl From<StorageError> for GroupError {
    fn from(e: StorageError) -> GroupError {
        match e {
            StorageError::InvalidBatch(BatchError::TooLarge { .. }) => {
                GroupError::InvalidCommitOffsetSize
            }
            // The log failed, or it was closed (the partition moved or was deleted meanwhile).
            StorageError::DiskFull { .. }
            | StorageError::Io { .. }
            | StorageError::Corrupt { .. } => {
                tracing::warn!(error = %e, "storage error");
                GroupError::NotCoordinator
            }
            StorageError::Closed => GroupError::NotCoordinator,
            // A TxnOffsetCommit of a fenced producer (Kafka passes the error through).
            StorageError::InvalidProducerEpoch { .. } => GroupError::InvalidProducerEpoch,
            StorageError::InvalidBatch(
                BatchError::Truncated { .. }
                | BatchError::LengthMismatch { .. }
                | BatchError::Magic(_)
                | BatchError::Crc { .. }
                | BatchError::Malformed(_)
                | BatchError::RecordCount { .. }
                | BatchError::Codec { .. },
            )
            | StorageError::OffsetOutOfRange { .. }
            | StorageError::OutOfOrderSequence { .. }
            | StorageError::DuplicateSequence { .. }
            // The coordinator writes plain batches: these need a producer id or a marker.
            | StorageError::InvalidTxnState { .. }
            | StorageError::TransactionCoordinatorFenced { .. }
            | StorageError::ControlBatchFromClient { .. }
            | StorageError::UnexpectedAppendOffset { .. }
            | StorageError::MissingLeaderEpoch { .. }
            | StorageError::CleanerBufferTooSmall { .. } => GroupError::CoordinatorNotAvailable,
        }
    }
}
