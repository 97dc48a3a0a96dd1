//! Kafka error codes at the edge (STYLE.md "Errors"): internal errors map here with an
//! exhaustive `match`, so a new variant forces a decision.

use crate::dynamic_config::DynamicConfigError;
use crate::groups::GroupError;
use crate::partitions::PartitionOpError;
use crate::produce_checks::ProduceCheckError;
use net::kafka_protocol::error::ResponseError;
use replication::metadata::{ControllerError, ElectionError, ReassignmentError, TopicOperation};
use replication::{IsrError, LeaderEpochError, PartitionError};
use storage::{BatchError, StorageError};

/// The Kafka error code of a partition's ElectLeaders result `e`.
pub fn election_error_code(e: &ElectionError) -> i16 {
    code(match e {
        ElectionError::ElectionNotNeeded => ResponseError::ElectionNotNeeded,
        ElectionError::PreferredLeaderNotAvailable => ResponseError::PreferredLeaderNotAvailable,
        ElectionError::EligibleLeadersNotAvailable => ResponseError::EligibleLeadersNotAvailable,
        ElectionError::UnknownTopic { .. } | ElectionError::UnknownPartition { .. } => {
            ResponseError::UnknownTopicOrPartition
        }
    })
}

/// The Kafka error code of a partition's AlterPartitionReassignments result `e`.
pub fn reassignment_error_code(e: &ReassignmentError) -> i16 {
    code(match e {
        ReassignmentError::UnknownTopic { .. } | ReassignmentError::UnknownPartition { .. } => {
            ResponseError::UnknownTopicOrPartition
        }
        ReassignmentError::NoReassignmentInProgress => ResponseError::NoReassignmentInProgress,
        ReassignmentError::InvalidReplicaAssignment { .. } => {
            ResponseError::InvalidReplicaAssignment
        }
        ReassignmentError::InvalidReplicationFactor { .. } => {
            ResponseError::InvalidReplicationFactor
        }
    })
}

/// The Kafka error code a partition operation answers for `e`.
pub fn partition_op_error_code(e: &PartitionOpError) -> i16 {
    match e {
        PartitionOpError::UnknownTopicOrPartition => code(ResponseError::UnknownTopicOrPartition),
        PartitionOpError::NotLeaderOrFollower => code(ResponseError::NotLeaderOrFollower),
        PartitionOpError::LogUnavailable(_) => code(ResponseError::KafkaStorageError),
        PartitionOpError::Rejected(e) => produce_check_error_code(e),
        PartitionOpError::Partition(e) => partition_error_code(e),
        PartitionOpError::LeaderEpoch(LeaderEpochError::Fenced { .. }) => {
            code(ResponseError::FencedLeaderEpoch)
        }
        PartitionOpError::LeaderEpoch(LeaderEpochError::Unknown { .. }) => {
            code(ResponseError::UnknownLeaderEpoch)
        }
        PartitionOpError::OffsetNotAvailable(_) => code(ResponseError::OffsetNotAvailable),
        PartitionOpError::ShardUnavailable => code(ResponseError::UnknownServerError),
    }
}

/// The Kafka error code for a partition's error.
pub fn partition_error_code(e: &PartitionError) -> i16 {
    match e {
        PartitionError::Storage(e) => storage_error_code(e),
        PartitionError::RequestTimedOut { .. } => code(ResponseError::RequestTimedOut),
        PartitionError::OffsetOutOfRange { .. } => code(ResponseError::OffsetOutOfRange),
        PartitionError::NotEnoughReplicasAfterAppend { .. } => {
            code(ResponseError::NotEnoughReplicasAfterAppend)
        }
        PartitionError::NotLeaderOrFollower { .. } => code(ResponseError::NotLeaderOrFollower),
        PartitionError::Isr(e) => isr_error_code(e),
    }
}

/// The Kafka error code for the ISR state's refusal (Kafka's `Partition.fetchRecords` and
/// `appendRecordsToLeader` throws).
fn isr_error_code(e: &IsrError) -> i16 {
    match e {
        // Kafka's `followerReplicaOrThrow` for a fetch without a current leader epoch.
        IsrError::NotAFollower { .. } | IsrError::StaleBrokerEpoch { .. } => {
            code(ResponseError::NotLeaderOrFollower)
        }
        IsrError::FetchOffsetOutOfRange { .. } => code(ResponseError::OffsetOutOfRange),
        IsrError::NotEnoughReplicas { .. } => code(ResponseError::NotEnoughReplicas),
        IsrError::InvalidIsr { .. }
        | IsrError::InvalidConfig { .. }
        | IsrError::LogEndOffsetRegressed { .. }
        | IsrError::AlterPending { .. } => {
            tracing::warn!(error = %e, "unexpected ISR error");
            code(ResponseError::UnknownServerError)
        }
    }
}

/// The index in its batch of the record without a key that a compacted topic refused, if
/// that is why `e` refused a produce (the handler answers it in `record_errors`).
pub fn keyless_record_index(e: &PartitionOpError) -> Option<i32> {
    match e {
        PartitionOpError::Rejected(ProduceCheckError::KeylessRecord { batch_index }) => {
            Some(*batch_index)
        }
        _ => None,
    }
}

/// The Kafka error code for a record set the produce checks refused (Kafka's LogValidator).
pub fn produce_check_error_code(e: &ProduceCheckError) -> i16 {
    match e {
        ProduceCheckError::Corrupt => code(ResponseError::CorruptMessage),
        // Kafka answers INVALID_RECORD ("inner record count does not match").
        ProduceCheckError::RecordCount => code(ResponseError::InvalidRecord),
        ProduceCheckError::Timestamp => code(ResponseError::InvalidTimestamp),
        // Kafka's LogValidator: "Compacted topic cannot accept message without key".
        ProduceCheckError::KeylessRecord { .. } => code(ResponseError::InvalidRecord),
    }
}

/// The Kafka error code a produce or fetch of one partition answers for `e`.
pub fn storage_error_code(e: &StorageError) -> i16 {
    let error = match e {
        StorageError::InvalidBatch(BatchError::TooLarge { .. }) => ResponseError::MessageTooLarge,
        StorageError::InvalidBatch(
            BatchError::Truncated { .. }
            | BatchError::LengthMismatch { .. }
            | BatchError::Magic(_)
            | BatchError::Crc { .. }
            | BatchError::Malformed(_)
            // Only the cleaner decompresses stored batches; a client's that does not
            // decompress is refused by the produce checks, also as corrupt.
            | BatchError::Codec { .. },
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
        StorageError::InvalidTxnState { .. } => ResponseError::InvalidTxnState,
        StorageError::TransactionCoordinatorFenced { .. } => {
            ResponseError::TransactionCoordinatorFenced
        }
        StorageError::ControlBatchFromClient { .. } => ResponseError::InvalidRecord,
        // Only a follower's own fetcher appends replicated batches; no client request gets these.
        StorageError::UnexpectedAppendOffset { .. } | StorageError::MissingLeaderEpoch { .. } => {
            ResponseError::UnknownServerError
        }
        // Only the cleaner gets it; no request does.
        StorageError::CleanerBufferTooSmall { .. } => ResponseError::UnknownServerError,
    };
    if matches!(error, ResponseError::KafkaStorageError) {
        tracing::warn!(error = %e, "storage error");
    }
    error.code()
}

/// The error a BROKER-resource config change answers for `e`: Kafka answers
/// `INVALID_REQUEST` both for a key fixed at start-up and for a value its `ConfigDef` refuses
/// (`ConfigAdminManager`, checked against Kafka 4.4).
pub fn dynamic_config_error(e: &DynamicConfigError) -> (i16, String) {
    let error = match e {
        DynamicConfigError::NotDynamic(_) | DynamicConfigError::Invalid(_) => {
            ResponseError::InvalidRequest
        }
    };
    (error.code(), e.to_string())
}

/// Shorthand for a protocol error code.
pub fn code(e: ResponseError) -> i16 {
    e.code()
}

/// The Kafka error code a group API answers for `e` (an exhaustive match: each variant is
/// named after its Kafka error).
pub fn group_error_code(e: GroupError) -> i16 {
    let error = match e {
        GroupError::UnknownMemberId => ResponseError::UnknownMemberId,
        GroupError::RebalanceInProgress => ResponseError::RebalanceInProgress,
        GroupError::IllegalGeneration => ResponseError::IllegalGeneration,
        GroupError::CoordinatorNotAvailable => ResponseError::CoordinatorNotAvailable,
        GroupError::NotCoordinator => ResponseError::NotCoordinator,
        GroupError::CoordinatorLoadInProgress => ResponseError::CoordinatorLoadInProgress,
        GroupError::FencedInstanceId => ResponseError::FencedInstanceId,
        GroupError::InconsistentGroupProtocol => ResponseError::InconsistentGroupProtocol,
        GroupError::MemberIdRequired => ResponseError::MemberIdRequired,
        GroupError::InvalidSessionTimeout => ResponseError::InvalidSessionTimeout,
        GroupError::GroupIdNotFound => ResponseError::GroupIdNotFound,
        GroupError::NonEmptyGroup => ResponseError::NonEmptyGroup,
        GroupError::InvalidGroupId => ResponseError::InvalidGroupId,
        GroupError::OffsetMetadataTooLarge => ResponseError::OffsetMetadataTooLarge,
        GroupError::InvalidCommitOffsetSize => ResponseError::InvalidCommitOffsetSize,
        GroupError::GroupSubscribedToTopic => ResponseError::GroupSubscribedToTopic,
        GroupError::UnstableOffsetCommit => ResponseError::UnstableOffsetCommit,
        GroupError::InvalidProducerEpoch => ResponseError::InvalidProducerEpoch,
    };
    error.code()
}

/// The error code of a group result: 0 for `Ok`.
pub fn group_result_code(result: Result<(), GroupError>) -> i16 {
    result.err().map_or(0, group_error_code)
}

/// Kafka's error code and message for a refused or failed controller op.
pub fn controller_error(e: &ControllerError) -> (i16, String) {
    let error = match e {
        ControllerError::InvalidTopicName { .. } => ResponseError::InvalidTopicException,
        ControllerError::TopicAlreadyExists { .. } => ResponseError::TopicAlreadyExists,
        ControllerError::UnknownTopic { .. } | ControllerError::UnknownPartition { .. } => {
            ResponseError::UnknownTopicOrPartition
        }
        ControllerError::PartitionCountOutOfRange { .. }
        | ControllerError::PartitionCountNotIncreased { .. } => ResponseError::InvalidPartitions,
        ControllerError::InvalidConfig { .. } => ResponseError::InvalidConfig,
        // The controller's check of a dynamic broker config change under its lock; the same
        // answer as `dynamic_config_error` gives for the handler's check.
        ControllerError::InvalidBrokerConfig { .. } => ResponseError::InvalidRequest,
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
        ControllerError::InvalidReplicationFactor { .. } => ResponseError::InvalidReplicationFactor,
        ControllerError::InvalidReplicaAssignment { .. } => ResponseError::InvalidReplicaAssignment,
        ControllerError::ChangeTooLarge { .. }
        | ControllerError::NotForwardable { .. }
        | ControllerError::NotPartitionLeader { .. }
        | ControllerError::InvalidIsr { .. } => ResponseError::InvalidRequest,
        ControllerError::FencedLeaderEpoch { .. } => ResponseError::FencedLeaderEpoch,
        ControllerError::InvalidUpdateVersion { .. }
        | ControllerError::FeatureUpdateRefused { .. } => ResponseError::InvalidUpdateVersion,
        ControllerError::IneligibleReplica { .. } => ResponseError::IneligibleReplica,
        ControllerError::DuplicateBrokerRegistration { .. } => {
            ResponseError::DuplicateBrokerRegistration
        }
        ControllerError::UnknownBroker { .. } => ResponseError::BrokerIdNotRegistered,
        ControllerError::StaleBrokerEpoch { .. } => ResponseError::StaleBrokerEpoch,
        // Retriable for Kafka's clients: they look up the controller again and retry.
        // AlterPartition epochs ahead of the controller's: it is likely stale (as Kafka).
        ControllerError::NotController { .. }
        | ControllerError::NotCommitted { .. }
        | ControllerError::AlterPartitionEpochAhead { .. } => ResponseError::NotController,
        // The active controller did not answer in time (paused, cut off, failing over): as
        // Kafka's ForwardingManager answers a forwarded request that timed out; clients retry.
        ControllerError::Unavailable | ControllerError::VoterChangeFailed { .. } => {
            ResponseError::RequestTimedOut
        }
        ControllerError::VoterNotFound { .. } => ResponseError::VoterNotFound,
        ControllerError::DuplicateVoter { .. } => ResponseError::DuplicateVoter,
        ControllerError::VoterChangeRefused { .. } => ResponseError::InvalidRequest,
        ControllerError::TopicIdTaken { .. }
        | ControllerError::ProducerIdsExhausted { .. }
        | ControllerError::TooManyAclRecords
        | ControllerError::Apply(_) => ResponseError::UnknownServerError,
    };
    if matches!(
        error,
        ResponseError::KafkaStorageError | ResponseError::UnknownServerError
    ) {
        tracing::warn!(error = %e, "controller error");
    }
    (error.code(), e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The group coordinator's own mapping of a failed offsets append (`GroupError`'s `From`,
    /// Kafka's `CoordinatorOperationExceptionHelper`) agrees with the Kafka code this edge
    /// gives the same error: MESSAGE_TOO_LARGE → INVALID_COMMIT_OFFSET_SIZE,
    /// NOT_LEADER_OR_FOLLOWER or KAFKA_STORAGE_ERROR → NOT_COORDINATOR, anything else →
    /// COORDINATOR_NOT_AVAILABLE.
    #[test]
    fn group_errors_of_partition_errors_follow_their_kafka_codes() {
        use replication::runtime::NodeId;
        use storage::{LeaderEpoch, Offset};
        let by_code = |code: i16| {
            if code == ResponseError::MessageTooLarge.code() {
                GroupError::InvalidCommitOffsetSize
            } else if code == ResponseError::NotLeaderOrFollower.code()
                || code == ResponseError::KafkaStorageError.code()
            {
                GroupError::NotCoordinator
            } else {
                GroupError::CoordinatorNotAvailable
            }
        };
        let io = || StorageError::Io {
            op: "write",
            path: "p".into(),
            source: std::io::Error::other("x"),
        };
        let storage = || {
            vec![
                StorageError::InvalidBatch(BatchError::TooLarge { size: 2, max: 1 }),
                StorageError::InvalidBatch(BatchError::Magic(1)),
                StorageError::InvalidBatch(BatchError::Malformed("m")),
                StorageError::Closed,
                io(),
            ]
        };
        for e in storage() {
            let code = storage_error_code(&e);
            assert_eq!(GroupError::from(e), by_code(code));
        }
        let mut ops = vec![
            PartitionOpError::UnknownTopicOrPartition,
            PartitionOpError::NotLeaderOrFollower,
            PartitionOpError::LogUnavailable(StorageError::Closed),
            PartitionOpError::Rejected(ProduceCheckError::Corrupt),
            PartitionOpError::ShardUnavailable,
            PartitionOpError::LeaderEpoch(LeaderEpochError::Fenced {
                requested: LeaderEpoch(1),
                current: LeaderEpoch(2),
            }),
            PartitionOpError::Partition(PartitionError::RequestTimedOut {
                timeout: std::time::Duration::from_secs(1),
            }),
            PartitionOpError::Partition(PartitionError::NotLeaderOrFollower {
                wanted: "leader",
                leader: None,
            }),
            PartitionOpError::Partition(PartitionError::NotEnoughReplicasAfterAppend {
                end_offset: Offset(1),
            }),
            PartitionOpError::Partition(PartitionError::Isr(IsrError::NotAFollower {
                replica: NodeId(2),
                replicas: vec![NodeId(1)],
            })),
        ];
        ops.extend(
            storage()
                .into_iter()
                .map(|e| PartitionOpError::Partition(PartitionError::Storage(e))),
        );
        for e in ops {
            let code = partition_op_error_code(&e);
            let shown = e.to_string();
            assert_eq!(GroupError::from(e), by_code(code), "{shown}");
        }
    }

    #[test]
    fn alter_partition_refusals_get_kafkas_codes() {
        let t = || "t".to_string();
        let cases = [
            (
                ControllerError::UnknownPartition {
                    topic: t(),
                    partition: 1,
                },
                3,
            ),
            (
                ControllerError::AlterPartitionEpochAhead {
                    topic: t(),
                    partition: 0,
                    leader_epoch: 2,
                    partition_epoch: 0,
                    current_leader_epoch: 1,
                    current_partition_epoch: 0,
                },
                41,
            ),
            (
                ControllerError::FencedLeaderEpoch {
                    topic: t(),
                    partition: 0,
                    leader_epoch: 0,
                    current: 1,
                },
                74,
            ),
            (
                ControllerError::NotPartitionLeader {
                    topic: t(),
                    partition: 0,
                    broker_id: 2,
                    leader: 1,
                },
                42,
            ),
            (
                ControllerError::InvalidUpdateVersion {
                    topic: t(),
                    partition: 0,
                    partition_epoch: 0,
                    current: 1,
                },
                95,
            ),
            (
                ControllerError::FeatureUpdateRefused {
                    message: "Invalid update version 2 for feature x.".into(),
                },
                95,
            ),
            (
                ControllerError::InvalidIsr {
                    topic: t(),
                    partition: 0,
                    isr: vec![2],
                    reason: "it does not hold the leader".into(),
                },
                42,
            ),
            (
                ControllerError::IneligibleReplica {
                    topic: t(),
                    partition: 0,
                    broker_id: 2,
                    reason: "fenced".into(),
                },
                107,
            ),
        ];
        for (e, code) in cases {
            assert_eq!(controller_error(&e).0, code, "{e}");
        }
    }
}
