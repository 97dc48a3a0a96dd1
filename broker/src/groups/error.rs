//! Why a group operation failed: the group coordinator's typed errors. Kafka's error codes are
//! chosen from these only at the edge (`crate::errors::group_error_code`).

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
}
