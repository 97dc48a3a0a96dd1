//! The controller's op vocabulary: [`ControllerOp`] (one metadata change, as the broker's
//! handlers ask for it), its [`ControllerAnswer`], the typed refusals ([`ControllerError`],
//! [`ElectionError`]), what the proposer needs from its caller ([`ProposeContext`]) and the
//! limits and names ops are checked against.

use super::acl::{AclBinding, AclBindingFilter, InvalidAcl};
use super::image::ApplyError;
use super::quotas::QuotaChanges;
use super::record::BrokerEndpoint;
#[cfg(doc)]
use super::record::FeatureLevelRecord;
use super::scram::{ScramAlterResult, ScramUpsertion};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use uuid::Uuid;

/// Most partitions one topic may have; a request above it is refused with
/// [`ControllerError::PartitionCountOutOfRange`] rather than creating unbounded state.
pub const PARTITIONS_PER_TOPIC_MAX: i32 = 10_000;

/// Producer ids per [`ProducerIdsRecord`] block (Kafka's `ProducerIdManager` block size).
pub const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;

/// The internal topic holding committed offsets and group metadata (Kafka's name).
pub const CONSUMER_OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Names reserved for internal topics: a client may not create a topic with one of them, even
/// before the broker has created it.
pub const INTERNAL_TOPIC_NAMES: &[&str] = &[CONSUMER_OFFSETS_TOPIC];

/// The topic config (and cluster-wide dynamic broker config) that lets a leader be elected
/// outside the ISR, losing what only the ISR had (Kafka's name; default false).
pub const UNCLEAN_LEADER_ELECTION_ENABLE: &str = "unclean.leader.election.enable";

/// A metadata change, run by the controller one at a time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ControllerOp {
    /// `internal`: created by the broker itself (the group coordinator's offsets topic); only
    /// such a creation may use a name of [`INTERNAL_TOPIC_NAMES`].
    ///
    /// `replication_factor`: replicas per partition, -1 for the context's
    /// [`ProposeContext::default_replication_factor`]; placed on the active brokers
    /// ([`place_replicas`]).
    CreateTopic {
        name: String,
        partitions: i32,
        replication_factor: i16,
        /// A manual replica assignment (CreateTopics' `assignments`): one replica list per
        /// partition, preferred leader first, used instead of the placement. The handler has
        /// checked its shape; the controller checks that every broker is registered.
        #[serde(default)]
        assignment: Option<Vec<Vec<i32>>>,
        overrides: BTreeMap<String, String>,
        internal: bool,
        validate_only: bool,
    },
    DeleteTopic {
        name: String,
    },
    /// Grows the topic to `total` partitions; the new ones get the topic's replication factor
    /// (that of partition 0) and are placed as [`ControllerOp::CreateTopic`] places them.
    CreatePartitions {
        name: String,
        total: i32,
        /// Manual replica lists of the new partitions (CreatePartitions' `assignments`), as
        /// in [`ControllerOp::CreateTopic`].
        #[serde(default)]
        assignment: Option<Vec<Vec<i32>>>,
        validate_only: bool,
    },
    /// Apply config changes to the topic's overrides, in order: `Some(value)` sets a key,
    /// `None` removes its override. Applied to the overrides current under the controller
    /// lock, so concurrent alterations of one topic do not undo each other.
    AlterTopicConfig {
        name: String,
        changes: Vec<(String, Option<String>)>,
        validate_only: bool,
    },
    /// Replace the topic's overrides with `overrides` (AlterConfigs' whole-set semantics).
    ReplaceTopicConfig {
        name: String,
        overrides: BTreeMap<String, String>,
        validate_only: bool,
    },
    /// Change the dynamic configs of the BROKER resource `resource_name` (a broker id in
    /// decimal, or "" for the cluster-wide default): with `replace` (AlterConfigs) its set is
    /// cleared first; then `Some(value)` sets a key and `None` removes it, in order. Applied to
    /// the configs current under the controller lock and checked as a whole by the context's
    /// [`BrokerConfigCheck`].
    AlterBrokerConfig {
        resource_name: String,
        changes: Vec<(String, Option<String>)>,
        replace: bool,
        validate_only: bool,
    },
    /// Hand the next block of [`PRODUCER_ID_BLOCK_SIZE`] producer ids to the proposing broker.
    AllocateProducerIds,
    /// A broker starts (BrokerRegistration, KRaft `ClusterControlManager::registerBroker`): a
    /// new registration gets the image's next broker epoch and starts fenced; the broker's
    /// previous registration, if any, is replaced, its leaderships and ISR places removed as
    /// for [`ControllerOp::FenceBroker`]. The same incarnation registering again changes
    /// nothing (a retry). Errors: [`ControllerError::DuplicateBrokerRegistration`] when another
    /// incarnation's session is still live. Answer: [`ControllerAnswer::Registered`].
    RegisterBroker {
        broker_id: i32,
        incarnation_id: Uuid,
        end_points: Vec<BrokerEndpoint>,
        rack: Option<String>,
    },
    /// The broker has caught up with the metadata log (KRaft's heartbeat `want_fence = false`
    /// once caught up): unfences it, then elects it leader of every leaderless partition whose
    /// ISR holds it (or, where unclean election is enabled, of which it is a replica). Nothing
    /// changes when it is not fenced. Errors: [`ControllerError::UnknownBroker`],
    /// [`ControllerError::StaleBrokerEpoch`].
    UnfenceBroker {
        broker_id: i32,
        broker_epoch: i64,
    },
    /// The broker's session expired (KRaft `ReplicationControlManager::handleBrokerFenced`):
    /// fences it, removes it from every ISR where it is not the sole member and elects new
    /// leaders where it led ([`ControllerOp::ControlledShutdown`] removes it the same way).
    /// Errors: [`ControllerError::UnknownBroker`].
    FenceBroker {
        broker_id: i32,
    },
    /// The broker asks to shut down (KRaft's heartbeat `want_shut_down`,
    /// `handleBrokerInControlledShutdown`): marks it in controlled shutdown, then removes it
    /// from ISRs and leaderships as fencing does. Errors: [`ControllerError::UnknownBroker`],
    /// [`ControllerError::StaleBrokerEpoch`]. Answer:
    /// [`ControllerAnswer::ControlledShutdown`].
    ControlledShutdown {
        broker_id: i32,
        broker_epoch: i64,
    },
    /// Removes the broker's registration (UnregisterBroker, KRaft
    /// `handleBrokerUnregistered`) after removing it from ISRs and leaderships as fencing
    /// does; it stays listed as a replica. Errors: [`ControllerError::UnknownBroker`].
    UnregisterBroker {
        broker_id: i32,
    },
    /// Elects leaders (ElectLeaders, KIP-183/KIP-460; KRaft
    /// `ReplicationControlManager::electLeaders`): for each named partition, or every partition
    /// of every topic when `partitions` is `None`, as [`elect_leaders`] does. Never refused as a
    /// whole: each partition gets its own result. Answer: [`ControllerAnswer::ElectLeaders`].
    ElectLeaders {
        election_type: ElectionType,
        /// The request's topics in its order, each with the partition ids named for it.
        partitions: Option<Vec<(String, Vec<i32>)>>,
    },
    /// The partition's leader changes its ISR (AlterPartition, KRaft
    /// `ReplicationControlManager::alterPartition`): checked in Kafka's order — the broker's
    /// registration and epoch ([`ControllerError::StaleBrokerEpoch`]), the topic and partition
    /// ([`ControllerError::UnknownTopic`], [`ControllerError::UnknownPartition`]), epochs ahead
    /// of the controller's ([`ControllerError::AlterPartitionEpochAhead`]), an older leader
    /// epoch ([`ControllerError::FencedLeaderEpoch`]), a broker that is not the leader
    /// ([`ControllerError::NotPartitionLeader`]), an older partition epoch
    /// ([`ControllerError::InvalidUpdateVersion`]), an ISR that is not a set of replicas
    /// holding the leader ([`ControllerError::InvalidIsr`]), a member not registered, fenced or
    /// in controlled shutdown ([`ControllerError::IneligibleReplica`]). Then one
    /// [`PartitionChangeRecord`] replaces the ISR and bumps the partition epoch (the leader
    /// epoch stays); none when `new_isr` is the current ISR (as Kafka's
    /// `PartitionChangeBuilder`, in order). Answer: [`ControllerAnswer::AlterPartition`].
    AlterPartition {
        /// The leader sending the change, and its broker epoch.
        broker_id: i32,
        broker_epoch: i64,
        topic: String,
        partition: i32,
        /// The epochs the leader knows.
        leader_epoch: i32,
        partition_epoch: i32,
        new_isr: Vec<i32>,
    },
    /// AlterPartitionReassignments (KIP-455; KRaft `ReplicationControlManager::
    /// alterPartitionReassignments`): per named partition, in order, `Some(target)` starts a
    /// reassignment to `target` (replacing any in progress) and `None` cancels the one in
    /// progress, as `propose::alter_partition_reassignments` does. Never refused as a whole: each
    /// partition gets its own result. Answer: [`ControllerAnswer::AlterPartitionReassignments`].
    AlterPartitionReassignments {
        /// The request's topics in its order, each with (partition id, target replicas).
        topics: Vec<TopicReassignments>,
        /// The request's `allow_replication_factor_change` (v1; true before): when false, a
        /// target with another replica count than the original assignment is refused
        /// ([`ReassignmentError::InvalidReplicationFactor`]).
        allow_replication_factor_change: bool,
    },
    /// Changes finalized feature levels (UpdateFeatures, KIP-584/KIP-778; KRaft
    /// `FeatureControlManager::updateFeatures`): every update is checked in Kafka's order and
    /// the first refused one refuses them all
    /// ([`ControllerError::FeatureUpdateRefused`]); else one [`FeatureLevelRecord`] each.
    UpdateFeatures {
        updates: Vec<FeatureUpdate>,
        validate_only: bool,
    },
    /// CreateAcls (KRaft `AclControlManager::createAcls`): each binding is checked on its own
    /// ([`super::acl::validate_new`]); a valid one not yet present gets an
    /// `AccessControlEntryRecord`, its id counted up from [`ProposeContext::new_topic_id`]
    /// past taken ones. Never refused as a whole. Answer: [`ControllerAnswer::CreateAcls`].
    CreateAcls {
        creations: Vec<AclBinding>,
    },
    /// DeleteAcls (`AclControlManager::deleteAcls`): every ACL some valid filter matches is
    /// removed. Refused as a whole ([`ControllerError::TooManyAclRecords`]) when it would
    /// remove more than [`ACL_RECORDS_PER_OP_MAX`]. Answer: [`ControllerAnswer::DeleteAcls`].
    DeleteAcls {
        filters: Vec<AclBindingFilter>,
    },
    /// AlterClientQuotas (KRaft `ClientQuotaControlManager::alterClientQuotas`, KIP-546): per
    /// entity, its changes (`Some(value)` sets a key, `None` removes it), checked on their own
    /// ([`super::quotas::validate_entity`], [`super::quotas::validate_value`]); an entity with
    /// a refused change changes nothing. Answer: [`ControllerAnswer::AlterClientQuotas`].
    AlterClientQuotas {
        entries: Vec<QuotaChanges>,
        validate_only: bool,
    },
    /// AlterUserScramCredentials (KRaft `ScramControlManager::alterCredentials`, KIP-554):
    /// `deletions` are (user, mechanism type); each user's change is checked on its own
    /// ([`super::scram::validate_upsertion`]; a user named twice is refused); the valid ones
    /// become `UserScramCredentialRecord`s (the keys derived from the salted password) and
    /// `RemoveUserScramCredentialRecord`s. Answer: [`ControllerAnswer::AlterUserScramCredentials`].
    AlterUserScramCredentials {
        deletions: Vec<(String, i8)>,
        upsertions: Vec<ScramUpsertion>,
    },
}

/// One feature change of [`ControllerOp::UpdateFeatures`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeatureUpdate {
    pub feature: String,
    /// The new finalized level; 0 removes the feature.
    pub max_version_level: i16,
    pub upgrade_type: UpgradeType,
}

/// How a [`FeatureUpdate`] may move the level (Kafka's `FeatureUpdate.UpgradeType`, the
/// request's `upgrade_type`: 1, 2, 3; v0's `allow_downgrade` is a safe downgrade).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum UpgradeType {
    /// Up only (1).
    Upgrade,
    /// Down, when no metadata is lost (2).
    SafeDowngrade,
    /// Down, losing metadata (3).
    UnsafeDowngrade,
    /// Another code: refused.
    Unknown,
}

impl UpgradeType {
    /// The type of the wire's `upgrade_type` code.
    pub fn from_code(code: i8) -> UpgradeType {
        match code {
            1 => UpgradeType::Upgrade,
            2 => UpgradeType::SafeDowngrade,
            3 => UpgradeType::UnsafeDowngrade,
            _ => UpgradeType::Unknown,
        }
    }
}

/// Most ACL records one CreateAcls or DeleteAcls may write (Kafka's
/// `MAX_RECORDS_PER_USER_OP`).
pub const ACL_RECORDS_PER_OP_MAX: usize = 10_000;

impl ControllerOp {
    /// Whether the op only checks (CreateTopics, CreatePartitions and the config APIs'
    /// `validate_only`): its records are not appended.
    pub fn validate_only(&self) -> bool {
        match self {
            ControllerOp::CreateTopic { validate_only, .. }
            | ControllerOp::CreatePartitions { validate_only, .. }
            | ControllerOp::AlterTopicConfig { validate_only, .. }
            | ControllerOp::ReplaceTopicConfig { validate_only, .. }
            | ControllerOp::AlterBrokerConfig { validate_only, .. }
            | ControllerOp::UpdateFeatures { validate_only, .. }
            | ControllerOp::AlterClientQuotas { validate_only, .. } => *validate_only,
            ControllerOp::DeleteTopic { .. }
            | ControllerOp::AllocateProducerIds
            | ControllerOp::RegisterBroker { .. }
            | ControllerOp::UnfenceBroker { .. }
            | ControllerOp::FenceBroker { .. }
            | ControllerOp::ControlledShutdown { .. }
            | ControllerOp::UnregisterBroker { .. }
            | ControllerOp::AlterPartition { .. }
            | ControllerOp::ElectLeaders { .. }
            | ControllerOp::AlterPartitionReassignments { .. }
            | ControllerOp::CreateAcls { .. }
            | ControllerOp::DeleteAcls { .. }
            | ControllerOp::AlterUserScramCredentials { .. } => false,
        }
    }
}

/// The answer to a [`ControllerOp`] beyond success ([`ControllerOp::answer`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ControllerAnswer {
    /// Nothing to say beyond success.
    Done,
    /// [`ControllerOp::RegisterBroker`]: the registration's broker epoch (the broker sends it
    /// in its heartbeats and fetches, KIP-903).
    Registered { broker_epoch: i64 },
    /// [`ControllerOp::ControlledShutdown`]: whether the broker leads no partition now and may
    /// stop (BrokerHeartbeatResponse's `should_shut_down`).
    ControlledShutdown { should_shut_down: bool },
    /// [`ControllerOp::AlterPartition`]: the partition's state once changed (its ISR is the
    /// requested one).
    AlterPartition {
        leader: i32,
        leader_epoch: i32,
        partition_epoch: i32,
    },
    /// [`ControllerOp::ElectLeaders`]: the result of each partition, by topic.
    ElectLeaders { results: Vec<TopicElectionResults> },
    /// [`ControllerOp::AlterPartitionReassignments`]: the result of each partition, by topic,
    /// in the request's order.
    AlterPartitionReassignments {
        results: Vec<TopicReassignmentResults>,
    },
    /// [`ControllerOp::CreateAcls`]: per creation in request order, `Err` with Kafka's
    /// INVALID_REQUEST message when it was refused.
    CreateAcls {
        results: Vec<Result<(), InvalidAcl>>,
    },
    /// [`ControllerOp::DeleteAcls`]: per filter in request order, the bindings it removed, or
    /// `Err` (INVALID_REQUEST) when the filter was refused.
    DeleteAcls {
        results: Vec<Result<Vec<AclBinding>, InvalidAcl>>,
    },
    /// [`ControllerOp::AlterClientQuotas`]: per entity in request order, `Err` with Kafka's
    /// INVALID_REQUEST message when its changes were refused.
    AlterClientQuotas { results: Vec<Result<(), String>> },
    /// [`ControllerOp::AlterUserScramCredentials`]: per user, its result (Kafka's order: the
    /// deletions done, the upsertions done, then the refused).
    AlterUserScramCredentials { results: Vec<ScramAlterResult> },
}

/// ElectLeaders' election types (KIP-460; the wire's `ElectionType` int8).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ElectionType {
    /// 0: the preferred replica (the first of the assignment) becomes leader when it is an
    /// active member of the ISR.
    Preferred,
    /// 1: a partition without a leader gets one: from the ISR if an active member is left,
    /// else any active replica, whose log then becomes the partition's (data loss).
    Unclean,
}

/// The results of [`ControllerOp::ElectLeaders`] for one topic (ElectLeadersResponse's
/// `ReplicaElectionResult`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicElectionResults {
    pub topic: String,
    /// By partition id, in the request's order (in partition order for every partition);
    /// `Ok` when the election changed the leader.
    pub partitions: Vec<(i32, Result<(), ElectionError>)>,
}

/// Why a partition got no new leader from [`ControllerOp::ElectLeaders`] (Kafka's error per
/// partition; the broker maps it to the code).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum ElectionError {
    /// `ELECTION_NOT_NEEDED` (84): the preferred replica leads already (preferred), or the
    /// partition has a leader (unclean).
    #[error("Leader election not needed for topic partition.")]
    ElectionNotNeeded,
    /// `PREFERRED_LEADER_NOT_AVAILABLE` (80): the preferred replica is not an active member of
    /// the ISR.
    #[error("The preferred leader was not available.")]
    PreferredLeaderNotAvailable,
    /// `ELIGIBLE_LEADERS_NOT_AVAILABLE` (83): no replica of the leaderless partition is
    /// active.
    #[error("Eligible topic partition leaders are not available.")]
    EligibleLeadersNotAvailable,
    /// `UNKNOWN_TOPIC_OR_PARTITION` (3), with Kafka's messages.
    #[error("No such topic as {topic}")]
    UnknownTopic { topic: String },
    #[error("No such partition as {topic}-{partition}")]
    UnknownPartition { topic: String, partition: i32 },
}

/// One topic of [`ControllerOp::AlterPartitionReassignments`]: its name and, per named
/// partition, its target replicas (`None`: cancel the reassignment in progress).
pub type TopicReassignments = (String, Vec<(i32, Option<Vec<i32>>)>);

/// The results of [`ControllerOp::AlterPartitionReassignments`] for one topic
/// (AlterPartitionReassignmentsResponse's `ReassignableTopicResponse`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicReassignmentResults {
    pub topic: String,
    /// By partition id, in the request's order.
    pub partitions: Vec<(i32, Result<(), ReassignmentError>)>,
}

/// Why a partition's reassignment was refused (Kafka's error per partition, with Kafka's
/// messages; the broker maps it to the code).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum ReassignmentError {
    /// `UNKNOWN_TOPIC_OR_PARTITION` (3).
    #[error("Unable to find a topic named {topic}.")]
    UnknownTopic { topic: String },
    #[error("Unable to find partition {topic}:{partition}.")]
    UnknownPartition { topic: String, partition: i32 },
    /// `NO_REASSIGNMENT_IN_PROGRESS` (85): a cancellation of a partition not being
    /// reassigned.
    #[error("No partition reassignment is in progress.")]
    NoReassignmentInProgress,
    /// `INVALID_REPLICA_ASSIGNMENT` (39): an empty target, a broker named twice or not
    /// registered, or a cancellation that would need an unclean election.
    #[error("{reason}")]
    InvalidReplicaAssignment { reason: String },
    /// `INVALID_REPLICATION_FACTOR` (38): the target changes the replica count while the
    /// request does not allow it.
    #[error("The replication factor is changed from {current} to {target} but allowReplicationFactorChange is false.")]
    InvalidReplicationFactor { current: usize, target: usize },
}

/// What a client may not do to an internal topic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TopicOperation {
    Create,
    Delete,
    CreatePartitions,
    AlterConfigs,
    Produce,
    DeleteRecords,
}

impl TopicOperation {
    /// The end of the refusal message ("'x' is an internal topic…").
    fn refusal(self) -> &'static str {
        match self {
            TopicOperation::Create => ", created by the group coordinator",
            TopicOperation::Delete => " and cannot be deleted",
            TopicOperation::CreatePartitions => "; its partition count is fixed",
            TopicOperation::AlterConfigs => "; its configs are fixed",
            TopicOperation::Produce => "; only the broker writes to it",
            TopicOperation::DeleteRecords => "; its records cannot be deleted",
        }
    }
}

/// Why the controller refused an op (mapped to Kafka's codes in `broker/src/errors.rs`).
/// Serialisable: a broker that forwarded a request to the active controller gets it back.
#[derive(Debug, thiserror::Error, Serialize, Deserialize)]
pub enum ControllerError {
    #[error("{reason}")]
    InvalidTopicName { topic: String, reason: String },
    #[error("topic '{topic}' already exists")]
    TopicAlreadyExists { topic: String },
    #[error("topic '{topic}' does not exist")]
    UnknownTopic { topic: String },
    #[error("partition count {count} is outside 1..={PARTITIONS_PER_TOPIC_MAX}")]
    PartitionCountOutOfRange { count: i32 },
    #[error("topic '{topic}' has {current} partitions; the new count must be larger")]
    PartitionCountNotIncreased { topic: String, current: usize },
    /// `reason` comes from the config check of the [`ProposeContext`].
    #[error("{reason}")]
    InvalidConfig { topic: String, reason: String },
    #[error("'{topic}' is an internal topic{}", operation.refusal())]
    InternalTopic {
        topic: String,
        operation: TopicOperation,
    },
    /// A dynamic broker config change the context's [`BrokerConfigCheck`] refused; `reason`
    /// is its message (Kafka's wording, such as "Cannot update these configs dynamically").
    #[error("{reason}")]
    InvalidBrokerConfig {
        resource_name: String,
        reason: String,
    },
    #[error("topic id {topic_id} is already taken")]
    TopicIdTaken { topic_id: Uuid },
    #[error("producer ids are exhausted (next block would start at {next_producer_id})")]
    ProducerIdsExhausted { next_producer_id: i64 },
    /// The replication factor is 0 or below -1, or above `available_brokers`, the active
    /// (registered, unfenced, not shutting down) brokers (Kafka's messages).
    #[error("{}", replication_factor_refusal(*replication_factor, *available_brokers))]
    InvalidReplicationFactor {
        replication_factor: i16,
        available_brokers: usize,
    },
    /// Another incarnation of the broker id is registered and its session is live (Kafka's
    /// `DuplicateBrokerRegistrationException`).
    #[error("Another broker is registered with that broker id ({broker_id}).")]
    DuplicateBrokerRegistration { broker_id: i32 },
    /// The op names a broker that is not registered (Kafka's `BROKER_ID_NOT_REGISTERED`).
    #[error("Broker {broker_id} is not registered.")]
    UnknownBroker { broker_id: i32 },
    /// The op carries another epoch than the broker's registration (Kafka's
    /// `STALE_BROKER_EPOCH`): it comes from an older incarnation.
    #[error("Expected broker epoch {current} of broker {broker_id}, but got broker epoch {broker_epoch}.")]
    StaleBrokerEpoch {
        broker_id: i32,
        broker_epoch: i64,
        current: i64,
    },
    /// A DeleteAcls would remove more than [`ACL_RECORDS_PER_OP_MAX`] ACLs (Kafka's
    /// `BoundedListTooLongException`, answered by Kafka as UNKNOWN_SERVER_ERROR).
    #[error("Cannot remove more than {ACL_RECORDS_PER_OP_MAX} acls in a single delete operation.")]
    TooManyAclRecords,
    /// The proposed records do not apply to the image: a controller bug.
    #[error("proposed records do not apply: {0}")]
    Apply(#[from] ApplyError),
    /// This node is not the active controller (Kafka's NOT_CONTROLLER); `active` is the one
    /// it knows, if any.
    #[error("this node is not the active controller (active controller: {active:?})")]
    NotController { active: Option<i32> },
    /// The controller quorum did not commit the change (`reason`: raft's refusal, a lost
    /// leadership, or an entry skipped because the image changed under it).
    #[error("the controller quorum did not commit the change: {reason}")]
    NotCommitted { reason: String },
    /// A manual replica assignment the controller refuses (Kafka's
    /// `INVALID_REPLICA_ASSIGNMENT`, with Kafka's message in `reason`).
    #[error("{reason}")]
    InvalidReplicaAssignment { reason: String },
    /// The change's records exceed the largest metadata entry (`entry_bytes` of
    /// `entry_bytes_max`): it can never commit, so it is refused (INVALID_REQUEST), not
    /// retried.
    #[error("the change is too large for one metadata entry ({entry_bytes} bytes, at most {entry_bytes_max})")]
    ChangeTooLarge {
        entry_bytes: usize,
        entry_bytes_max: usize,
    },
    /// A request only the active controller makes itself (fencing, unfencing, a controlled
    /// shutdown's move) arrived from another broker: refused (INVALID_REQUEST).
    /// (Unregistering is also a client's request, UnregisterBroker, forwarded as Kafka's.)
    #[error("'{op}' is not accepted from another broker")]
    NotForwardable { op: String },
    /// The controller could not be reached or stopped.
    #[error("controller unavailable")]
    Unavailable,
    /// AddRaftVoter names a voter (Kafka's `DUPLICATE_VOTER`).
    #[error("node {voter_id} is a voter already")]
    DuplicateVoter { voter_id: i32 },
    /// A voter change names a node that is not a voter, or the last one (Kafka's
    /// `VOTER_NOT_FOUND`).
    #[error("{reason}")]
    VoterNotFound { voter_id: i32, reason: String },
    /// A voter change that could not be carried out now: another one in progress, or its
    /// outcome unknown when the leadership or the timeout ran out (Kafka answers
    /// `REQUEST_TIMED_OUT` for each).
    #[error("{reason}")]
    VoterChangeFailed { reason: String },
    /// A voter change Sluice refuses: removing a node that is also a registered broker
    /// (its broker would stop following the metadata log: a removed voter does not observe).
    #[error("{reason}")]
    VoterChangeRefused { reason: String },
    /// The topic exists but not the partition (Kafka's `UNKNOWN_TOPIC_OR_PARTITION`).
    #[error("partition {topic}-{partition} does not exist")]
    UnknownPartition { topic: String, partition: i32 },
    /// AlterPartition with a leader or partition epoch above the controller's: this
    /// controller is likely stale (Kafka answers `NOT_CONTROLLER`).
    #[error("{topic}-{partition}: request epochs (leader {leader_epoch}, partition {partition_epoch}) are ahead of the controller's (leader {current_leader_epoch}, partition {current_partition_epoch})")]
    AlterPartitionEpochAhead {
        topic: String,
        partition: i32,
        leader_epoch: i32,
        partition_epoch: i32,
        current_leader_epoch: i32,
        current_partition_epoch: i32,
    },
    /// AlterPartition from an older leader epoch (Kafka's `FENCED_LEADER_EPOCH`).
    #[error(
        "{topic}-{partition}: leader epoch {leader_epoch} is older than the current {current}"
    )]
    FencedLeaderEpoch {
        topic: String,
        partition: i32,
        leader_epoch: i32,
        current: i32,
    },
    /// AlterPartition from a broker that does not lead the partition (Kafka's
    /// `INVALID_REQUEST`).
    #[error("{topic}-{partition}: broker {broker_id} is not the leader ({leader})")]
    NotPartitionLeader {
        topic: String,
        partition: i32,
        broker_id: i32,
        leader: i32,
    },
    /// AlterPartition from an older partition epoch (Kafka's `INVALID_UPDATE_VERSION`).
    #[error("{topic}-{partition}: partition epoch {partition_epoch} is older than the current {current}")]
    InvalidUpdateVersion {
        topic: String,
        partition: i32,
        partition_epoch: i32,
        current: i32,
    },
    /// A feature update refused (Kafka's `INVALID_UPDATE_VERSION`); `message` is Kafka's
    /// ("Invalid update version …" or "Invalid metadata.version …").
    #[error("{message}")]
    FeatureUpdateRefused { message: String },
    /// An ISR with a duplicate or a non-replica, or without the leader (Kafka's
    /// `INVALID_REQUEST`).
    #[error("{topic}-{partition}: invalid ISR {isr:?}: {reason}")]
    InvalidIsr {
        topic: String,
        partition: i32,
        isr: Vec<i32>,
        reason: String,
    },
    /// A new ISR member that is not registered, is fenced or is in controlled shutdown
    /// (Kafka's `INELIGIBLE_REPLICA`).
    #[error("{topic}-{partition}: broker {broker_id} may not join the ISR: {reason}")]
    IneligibleReplica {
        topic: String,
        partition: i32,
        broker_id: i32,
        reason: String,
    },
}

/// Checks a topic's complete override set (Kafka names → values); `Err` says why it is
/// invalid. The broker's config model supplies it (the image does not know config keys).
pub type TopicConfigCheck<'a> = dyn Fn(&BTreeMap<String, String>) -> Result<(), String> + 'a;

/// Checks the dynamic broker configs of every BROKER resource as they would be after a change
/// (resource name → Kafka names → values); `Err` says why they are refused. The broker's
/// config model supplies it (the image does not know which keys may change at run time).
pub type BrokerConfigCheck<'a> =
    dyn Fn(&BTreeMap<String, BTreeMap<String, String>>) -> Result<(), String> + 'a;

/// Whether the session of a broker (by broker id) is live: it heartbeated within the session
/// timeout (the controller's [`super::BrokerHeartbeats::is_live`]).
pub type BrokerSessionLive<'a> = dyn Fn(i32) -> bool + 'a;

/// What the proposer needs from its caller besides the op and the image.
pub struct ProposeContext<'a> {
    /// The proposing broker: the owner of producer-id blocks.
    pub broker_id: i32,
    /// This controller's node id (named in Kafka's feature-update refusals).
    pub controller_id: i32,
    pub broker_epoch: i64,
    /// The id of a topic the op creates (the caller picks it at random).
    pub new_topic_id: Uuid,
    pub check_topic_config: &'a TopicConfigCheck<'a>,
    pub check_broker_configs: &'a BrokerConfigCheck<'a>,
    /// Replicas per partition when an op asks for -1 (Kafka's `default.replication.factor`).
    pub default_replication_factor: i16,
    /// Where round-robin placement starts among the active brokers (taken modulo their
    /// count); the caller picks it at random, as Kafka's placer does, so leaders of different
    /// topics spread.
    pub placement_seed: u64,
    /// Whether a broker's session is live; a live session of another incarnation refuses a
    /// registration ([`ControllerOp::RegisterBroker`]).
    pub broker_session_live: &'a BrokerSessionLive<'a>,
}

/// Kafka's refusal of a replication factor of `replication_factor` with `available_brokers`
/// active brokers.
fn replication_factor_refusal(replication_factor: i16, available_brokers: usize) -> String {
    if replication_factor < 1 {
        return "Replication factor must be larger than 0, or -1 to use the default value."
            .to_string();
    }
    format!(
        "Unable to replicate the partition {replication_factor} time(s): The target replication \
         factor of {replication_factor} cannot be reached because only {available_brokers} \
         broker(s) are registered."
    )
}
