//! The proposer: checks a [`ControllerOp`] against the current image and turns it into the
//! records that carry it out, or refuses it with a typed [`ControllerError`]. Pure, like
//! `apply`: what it needs from the world (a new topic's uuid, the placement start, whether a
//! broker's session is live) comes in a [`ProposeContext`], chosen by the caller (the
//! controller).
//!
//! The broker lifecycle follows KRaft's `ClusterControlManager` and `ReplicationControlManager`
//! (KIP-631): a broker registers (fenced, with a new broker epoch), is unfenced once it has
//! caught up, is fenced when its session expires, and moves its leaderships off before a
//! controlled shutdown. Leaders come only from the ISR (unless the topic's
//! `unclean.leader.election.enable` is true), as `PartitionChangeBuilder` elects them; new
//! partitions are placed round-robin over the active brokers (Kafka's rack-unaware
//! assignment).
//!
//! ElectLeaders ([`elect_leaders`]) follows `ReplicationControlManager::electLeaders` and
//! `PartitionChangeBuilder`'s preferred and unclean elections (KIP-183, KIP-460), without
//! eligible leader replicas (KIP-966).
//!
//! Limits: fencing and shutdown scan every partition (Kafka keeps a broker → ISR index); racks
//! are recorded but not used for placement.

use super::image::{ApplyError, MetadataImage, PartitionImage, TopicImage};
use super::record::{
    BrokerEndpoint, BrokerRegistrationChangeRecord, ConfigRecord, FenceBrokerRecord,
    MetadataRecord, PartitionChangeRecord, PartitionRecord, ProducerIdsRecord,
    RegisterBrokerRecord, RemoveTopicRecord, TopicRecord, UnfenceBrokerRecord,
    UnregisterBrokerRecord, CONFIG_RESOURCE_BROKER, CONFIG_RESOURCE_TOPIC,
};
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
}

impl ControllerOp {
    /// Whether the op only checks (CreateTopics, CreatePartitions and the config APIs'
    /// `validate_only`): its records are not appended.
    pub fn validate_only(&self) -> bool {
        match self {
            ControllerOp::CreateTopic { validate_only, .. }
            | ControllerOp::CreatePartitions { validate_only, .. }
            | ControllerOp::AlterTopicConfig { validate_only, .. }
            | ControllerOp::ReplaceTopicConfig { validate_only, .. }
            | ControllerOp::AlterBrokerConfig { validate_only, .. } => *validate_only,
            ControllerOp::DeleteTopic { .. }
            | ControllerOp::AllocateProducerIds
            | ControllerOp::RegisterBroker { .. }
            | ControllerOp::UnfenceBroker { .. }
            | ControllerOp::FenceBroker { .. }
            | ControllerOp::ControlledShutdown { .. }
            | ControllerOp::UnregisterBroker { .. }
            | ControllerOp::AlterPartition { .. }
            | ControllerOp::ElectLeaders { .. } => false,
        }
    }

    /// What the controller answers for this op, read from `after`, the image once its records
    /// are applied (the same image when there were none), or, for
    /// [`ControllerOp::ElectLeaders`], from `before`, the image they were proposed against.
    pub fn answer(&self, before: &MetadataImage, after: &MetadataImage) -> ControllerAnswer {
        match self {
            ControllerOp::ElectLeaders {
                election_type,
                partitions,
            } => ControllerAnswer::ElectLeaders {
                results: elect_leaders(before, *election_type, partitions.as_deref()).1,
            },
            ControllerOp::RegisterBroker { broker_id, .. } => {
                after
                    .brokers
                    .get(broker_id)
                    .map_or(ControllerAnswer::Done, |b| ControllerAnswer::Registered {
                        broker_epoch: b.broker_epoch,
                    })
            }
            ControllerOp::ControlledShutdown { broker_id, .. } => {
                ControllerAnswer::ControlledShutdown {
                    should_shut_down: leaderships(after, *broker_id) == 0,
                }
            }
            ControllerOp::AlterPartition {
                topic, partition, ..
            } => usize::try_from(*partition)
                .ok()
                .and_then(|p| after.topics.get(topic)?.partitions.get(p))
                .map_or(ControllerAnswer::Done, |p| {
                    ControllerAnswer::AlterPartition {
                        leader: p.leader,
                        leader_epoch: p.leader_epoch,
                        partition_epoch: p.partition_epoch,
                    }
                }),
            _ => ControllerAnswer::Done,
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

/// How many partitions `broker_id` leads in `image`.
pub fn leaderships(image: &MetadataImage, broker_id: i32) -> usize {
    image
        .topics
        .values()
        .flat_map(|t| &t.partitions)
        .filter(|p| p.leader == broker_id)
        .count()
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
    /// A request only the active controller makes itself (fencing, unfencing, unregistering a
    /// broker) arrived from another broker: refused (INVALID_REQUEST).
    #[error("'{op}' is not accepted from another broker")]
    NotForwardable { op: String },
    /// The controller could not be reached or stopped.
    #[error("controller unavailable")]
    Unavailable,
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

/// Kafka's topic name rules: 1–249 characters of `[a-zA-Z0-9._-]`, not `.` or `..`.
/// Errors: a message saying which rule `name` breaks.
pub fn validate_topic_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("topic name is empty".into());
    }
    if name == "." || name == ".." {
        return Err(format!("topic name cannot be '{name}'"));
    }
    if name.len() > 249 {
        return Err(format!(
            "topic name is {} characters, the maximum is 249",
            name.len()
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!(
            "topic name '{name}' contains '{c}'; legal characters are ASCII letters, digits, '.', '_' and '-'"
        ));
    }
    Ok(())
}

/// Whether topic `name` is internal: its flag when it exists, else whether the name is
/// reserved for one ([`INTERNAL_TOPIC_NAMES`]).
pub fn is_internal(image: &MetadataImage, name: &str) -> bool {
    image
        .topics
        .get(name)
        .map_or_else(|| INTERNAL_TOPIC_NAMES.contains(&name), |t| t.internal)
}

/// The one check of every client operation a topic's internal flag forbids. Errors:
/// [`ControllerError::InternalTopic`].
pub fn check_not_internal(
    image: &MetadataImage,
    name: &str,
    operation: TopicOperation,
) -> Result<(), ControllerError> {
    if is_internal(image, name) {
        return Err(ControllerError::InternalTopic {
            topic: name.to_string(),
            operation,
        });
    }
    Ok(())
}

/// The records that carry out `op` on `image`, in order; empty when nothing changes. Errors:
/// the refusal, checked in the order Kafka's controller checks (name, existence, partition
/// count, config).
pub fn propose(
    image: &MetadataImage,
    op: &ControllerOp,
    ctx: &ProposeContext<'_>,
) -> Result<Vec<MetadataRecord>, ControllerError> {
    match op {
        ControllerOp::CreateTopic {
            name,
            partitions,
            replication_factor,
            assignment,
            overrides,
            internal,
            validate_only: _,
        } => create_topic(
            image,
            ctx,
            name,
            (*partitions, *replication_factor, assignment.as_deref()),
            overrides,
            *internal,
        ),
        ControllerOp::DeleteTopic { name } => {
            check_not_internal(image, name, TopicOperation::Delete)?;
            let topic = existing(image, name)?;
            Ok(vec![MetadataRecord::RemoveTopic(RemoveTopicRecord {
                topic_id: topic.id,
            })])
        }
        ControllerOp::CreatePartitions {
            name,
            total,
            assignment,
            validate_only: _,
        } => {
            let topic = existing(image, name)?;
            check_not_internal(image, name, TopicOperation::CreatePartitions)?;
            let current = topic.partitions.len();
            check_partition_count(*total)?;
            let total = usize::try_from(*total).unwrap_or(0);
            if total <= current {
                return Err(ControllerError::PartitionCountNotIncreased {
                    topic: name.clone(),
                    current,
                });
            }
            // The topic's replication factor is that of its first partition (a topic has at
            // least one); a count beyond i16 cannot be placed and is refused as too large.
            let replication_factor = topic
                .partitions
                .first()
                .map_or(-1, |p| i16::try_from(p.replicas.len()).unwrap_or(i16::MAX));
            let assignments = match assignment {
                Some(lists) => manual_assignment(image, lists, current..total)?,
                None => place_replicas(image, ctx, replication_factor, current..total)?,
            };
            (current..total)
                .zip(assignments)
                .map(|(p, replicas)| new_partition(image, topic.id, p, replicas))
                .collect()
        }
        ControllerOp::AlterTopicConfig {
            name,
            changes,
            validate_only: _,
        } => change_configs(image, ctx, name, |configs| {
            for (key, value) in changes {
                match value {
                    Some(value) => configs.insert(key.clone(), value.clone()),
                    None => configs.remove(key),
                };
            }
        }),
        ControllerOp::ReplaceTopicConfig {
            name,
            overrides,
            validate_only: _,
        } => change_configs(image, ctx, name, |configs| configs.clone_from(overrides)),
        ControllerOp::AlterBrokerConfig {
            resource_name,
            changes,
            replace,
            validate_only: _,
        } => alter_broker_config(image, ctx, resource_name, changes, *replace),
        ControllerOp::AllocateProducerIds => {
            let start = image.producer_ids.next_producer_id;
            let next_producer_id = start.checked_add(PRODUCER_ID_BLOCK_SIZE).ok_or(
                ControllerError::ProducerIdsExhausted {
                    next_producer_id: start,
                },
            )?;
            Ok(vec![MetadataRecord::ProducerIds(ProducerIdsRecord {
                broker_id: ctx.broker_id,
                broker_epoch: ctx.broker_epoch,
                next_producer_id,
            })])
        }
        ControllerOp::RegisterBroker {
            broker_id,
            incarnation_id,
            end_points,
            rack,
        } => register_broker(image, ctx, *broker_id, *incarnation_id, end_points, rack),
        ControllerOp::UnfenceBroker {
            broker_id,
            broker_epoch,
        } => {
            let b = registration(image, *broker_id, Some(*broker_epoch))?;
            if !b.fenced {
                return Ok(Vec::new());
            }
            let mut records = vec![MetadataRecord::UnfenceBroker(UnfenceBrokerRecord {
                broker_id: *broker_id,
                broker_epoch: *broker_epoch,
            })];
            if !b.in_controlled_shutdown {
                records.extend(elect_leaderless(image, *broker_id));
            }
            Ok(records)
        }
        ControllerOp::FenceBroker { broker_id } => {
            let b = registration(image, *broker_id, None)?;
            let mut records = Vec::new();
            if !b.fenced {
                records.push(MetadataRecord::FenceBroker(FenceBrokerRecord {
                    broker_id: *broker_id,
                    broker_epoch: b.broker_epoch,
                }));
            }
            records.extend(remove_broker_from_partitions(image, *broker_id));
            Ok(records)
        }
        ControllerOp::ControlledShutdown {
            broker_id,
            broker_epoch,
        } => {
            let b = registration(image, *broker_id, Some(*broker_epoch))?;
            let mut records = Vec::new();
            if !b.in_controlled_shutdown {
                records.push(MetadataRecord::BrokerRegistrationChange(
                    BrokerRegistrationChangeRecord {
                        broker_id: *broker_id,
                        broker_epoch: *broker_epoch,
                        fenced: None,
                        in_controlled_shutdown: Some(true),
                    },
                ));
            }
            records.extend(remove_broker_from_partitions(image, *broker_id));
            Ok(records)
        }
        ControllerOp::UnregisterBroker { broker_id } => {
            let b = registration(image, *broker_id, None)?;
            let mut records = remove_broker_from_partitions(image, *broker_id);
            records.push(MetadataRecord::UnregisterBroker(UnregisterBrokerRecord {
                broker_id: *broker_id,
                broker_epoch: b.broker_epoch,
            }));
            Ok(records)
        }
        ControllerOp::AlterPartition {
            broker_id,
            broker_epoch,
            topic,
            partition,
            leader_epoch,
            partition_epoch,
            new_isr,
        } => alter_partition(
            image,
            (*broker_id, *broker_epoch),
            topic,
            *partition,
            (*leader_epoch, *partition_epoch),
            new_isr,
        ),
        ControllerOp::ElectLeaders {
            election_type,
            partitions,
        } => Ok(elect_leaders(image, *election_type, partitions.as_deref()).0),
    }
}

/// [`ControllerOp::ElectLeaders`] on `image` (KRaft's `ReplicationControlManager::
/// electLeaders` and `electLeader`): the records of the elections and the result of each
/// partition. For a named partition of an unknown topic or beyond the topic's partitions:
/// [`ElectionError::UnknownTopic`], [`ElectionError::UnknownPartition`]. `partitions: None`
/// means every partition of every topic (internal ones too), each topic listed in name order
/// with only the partitions whose result is not [`ElectionError::ElectionNotNeeded`], as Kafka
/// answers it. Every election reads `image` as it is (Kafka's records are applied once the op
/// is done), so a partition named twice gets the same result twice and one record.
pub fn elect_leaders(
    image: &MetadataImage,
    election_type: ElectionType,
    partitions: Option<&[(String, Vec<i32>)]>,
) -> (Vec<MetadataRecord>, Vec<TopicElectionResults>) {
    let mut records: Vec<MetadataRecord> = Vec::new();
    let mut results = Vec::new();
    let mut elect = |topic: &str, partition: i32| {
        let (record, result) = elect_one(image, election_type, topic, partition);
        if let Some(record) = record.filter(|r| !records.contains(r)) {
            records.push(record);
        }
        result
    };
    match partitions {
        None => {
            for (topic, t) in &image.topics {
                let mut out = Vec::new();
                for p in 0..t.partitions.len() {
                    let partition =
                        i32::try_from(p).expect("partition counts are checked to fit i32");
                    let result = elect(topic, partition);
                    if result != Err(ElectionError::ElectionNotNeeded) {
                        out.push((partition, result));
                    }
                }
                results.push(TopicElectionResults {
                    topic: topic.clone(),
                    partitions: out,
                });
            }
        }
        Some(named) => {
            for (topic, ids) in named {
                let partitions = ids.iter().map(|&p| (p, elect(topic, p))).collect();
                results.push(TopicElectionResults {
                    topic: topic.clone(),
                    partitions,
                });
            }
        }
    }
    (records, results)
}

/// One partition's election (KRaft's `electLeader` with `PartitionChangeBuilder`'s
/// `electPreferredLeader` / `electAnyLeader`, without eligible leader replicas): the record
/// that changes its leader, if any, and the partition's result.
fn elect_one(
    image: &MetadataImage,
    election_type: ElectionType,
    topic: &str,
    partition_id: i32,
) -> (Option<MetadataRecord>, Result<(), ElectionError>) {
    let Some(t) = image.topics.get(topic) else {
        let error = ElectionError::UnknownTopic {
            topic: topic.to_string(),
        };
        return (None, Err(error));
    };
    let Some((index, partition)) = usize::try_from(partition_id)
        .ok()
        .and_then(|i| Some((i, t.partitions.get(i)?)))
    else {
        let error = ElectionError::UnknownPartition {
            topic: topic.to_string(),
            partition: partition_id,
        };
        return (None, Err(error));
    };
    let preferred = partition.replicas.first().copied();
    let needed = match election_type {
        ElectionType::Preferred => preferred != Some(partition.leader),
        ElectionType::Unclean => partition.leader == -1,
    };
    if !needed {
        return (None, Err(ElectionError::ElectionNotNeeded));
    }
    let active = |b: i32| image.brokers.get(&b).is_some_and(|r| r.is_active());
    let valid = |b: i32| partition.isr.contains(&b) && active(b);
    let (leader, isr) = match election_type {
        ElectionType::Preferred => {
            // The preferred replica; else the current leader stays if it is still valid; else
            // the next valid replica (a leaderless partition comes back).
            let leader = preferred
                .filter(|&p| valid(p))
                .or_else(|| valid(partition.leader).then_some(partition.leader))
                .or_else(|| partition.replicas.iter().copied().find(|&r| valid(r)))
                .unwrap_or(-1);
            (leader, partition.isr.clone())
        }
        ElectionType::Unclean => {
            elect_leader(&partition.replicas, partition.isr.clone(), &active, true)
        }
    };
    match partition_change(t.id, index, partition, leader, isr) {
        Some(record) => (Some(record), Ok(())),
        None => {
            let error = match election_type {
                ElectionType::Preferred => ElectionError::PreferredLeaderNotAvailable,
                ElectionType::Unclean => ElectionError::EligibleLeadersNotAvailable,
            };
            (None, Err(error))
        }
    }
}

/// [`ControllerOp::AlterPartition`], checked in the order of KRaft's
/// `ReplicationControlManager::alterPartition` and `validateAlterPartitionData`.
fn alter_partition(
    image: &MetadataImage,
    (broker_id, broker_epoch): (i32, i64),
    topic: &str,
    partition_id: i32,
    (leader_epoch, partition_epoch): (i32, i32),
    new_isr: &[i32],
) -> Result<Vec<MetadataRecord>, ControllerError> {
    // Kafka's `checkBrokerEpoch`: a missing registration is a stale epoch too (-1: none).
    match image.brokers.get(&broker_id) {
        Some(b) if b.broker_epoch == broker_epoch => {}
        b => {
            return Err(ControllerError::StaleBrokerEpoch {
                broker_id,
                broker_epoch,
                current: b.map_or(-1, |b| b.broker_epoch),
            })
        }
    }
    let t = existing(image, topic)?;
    let p = usize::try_from(partition_id)
        .ok()
        .and_then(|i| t.partitions.get(i))
        .ok_or_else(|| ControllerError::UnknownPartition {
            topic: topic.to_string(),
            partition: partition_id,
        })?;
    let name = || topic.to_string();
    if leader_epoch > p.leader_epoch || partition_epoch > p.partition_epoch {
        return Err(ControllerError::AlterPartitionEpochAhead {
            topic: name(),
            partition: partition_id,
            leader_epoch,
            partition_epoch,
            current_leader_epoch: p.leader_epoch,
            current_partition_epoch: p.partition_epoch,
        });
    }
    if leader_epoch < p.leader_epoch {
        return Err(ControllerError::FencedLeaderEpoch {
            topic: name(),
            partition: partition_id,
            leader_epoch,
            current: p.leader_epoch,
        });
    }
    if broker_id != p.leader {
        return Err(ControllerError::NotPartitionLeader {
            topic: name(),
            partition: partition_id,
            broker_id,
            leader: p.leader,
        });
    }
    if partition_epoch < p.partition_epoch {
        return Err(ControllerError::InvalidUpdateVersion {
            topic: name(),
            partition: partition_id,
            partition_epoch,
            current: p.partition_epoch,
        });
    }
    let invalid = |reason: &str| ControllerError::InvalidIsr {
        topic: name(),
        partition: partition_id,
        isr: new_isr.to_vec(),
        reason: reason.to_string(),
    };
    let distinct: std::collections::BTreeSet<_> = new_isr.iter().collect();
    if distinct.len() != new_isr.len() {
        return Err(invalid("duplicate member"));
    }
    if let Some(r) = new_isr.iter().find(|r| !p.replicas.contains(r)) {
        return Err(invalid(&format!("{r} is not a replica")));
    }
    if !new_isr.contains(&p.leader) {
        return Err(invalid("it does not hold the leader"));
    }
    for &r in new_isr {
        let reason = match image.brokers.get(&r) {
            None => "not registered",
            Some(b) if b.in_controlled_shutdown => "shutting down",
            Some(b) if b.fenced => "fenced",
            Some(_) => continue,
        };
        return Err(ControllerError::IneligibleReplica {
            topic: name(),
            partition: partition_id,
            broker_id: r,
            reason: reason.to_string(),
        });
    }
    if new_isr == p.isr.as_slice() {
        return Ok(Vec::new());
    }
    Ok(vec![MetadataRecord::PartitionChange(
        PartitionChangeRecord {
            partition_id,
            topic_id: t.id,
            isr: Some(new_isr.to_vec()),
            leader: None,
            replicas: None,
        },
    )])
}

/// The registration of `broker_id`, checked against `broker_epoch` when given. Errors:
/// [`ControllerError::UnknownBroker`], [`ControllerError::StaleBrokerEpoch`].
fn registration(
    image: &MetadataImage,
    broker_id: i32,
    broker_epoch: Option<i64>,
) -> Result<&super::image::BrokerRegistration, ControllerError> {
    let b = image
        .brokers
        .get(&broker_id)
        .ok_or(ControllerError::UnknownBroker { broker_id })?;
    match broker_epoch {
        Some(broker_epoch) if broker_epoch != b.broker_epoch => {
            Err(ControllerError::StaleBrokerEpoch {
                broker_id,
                broker_epoch,
                current: b.broker_epoch,
            })
        }
        _ => Ok(b),
    }
}

/// KRaft's `ClusterControlManager::registerBroker`, without features and directories.
fn register_broker(
    image: &MetadataImage,
    ctx: &ProposeContext<'_>,
    broker_id: i32,
    incarnation_id: Uuid,
    end_points: &[BrokerEndpoint],
    rack: &Option<String>,
) -> Result<Vec<MetadataRecord>, ControllerError> {
    let previous = image.brokers.get(&broker_id);
    if let Some(b) = previous {
        if b.incarnation_id == incarnation_id {
            // A retry of the registration that succeeded: the same broker epoch answers it.
            return Ok(Vec::new());
        }
        if (ctx.broker_session_live)(broker_id) {
            return Err(ControllerError::DuplicateBrokerRegistration { broker_id });
        }
    }
    let mut records = vec![MetadataRecord::RegisterBroker(RegisterBrokerRecord {
        broker_id,
        incarnation_id,
        broker_epoch: image.next_broker_epoch,
        end_points: end_points.to_vec(),
        rack: rack.clone(),
        fenced: true,
        in_controlled_shutdown: false,
    })];
    if previous.is_some() {
        // The old incarnation is gone without a clean shutdown (its session expired, maybe
        // not yet fenced): what it led or had in sync may be lost (KIP-966's unclean
        // shutdown handling, without the ELR).
        records.extend(remove_broker_from_partitions(image, broker_id));
    }
    Ok(records)
}

/// Whether topic `topic` may elect a leader outside the ISR: its
/// [`UNCLEAN_LEADER_ELECTION_ENABLE`] override, else the cluster-wide dynamic broker config,
/// else false (Kafka's default; a per-broker or static value is not consulted).
fn unclean_leader_election(image: &MetadataImage, topic: &TopicImage) -> bool {
    topic
        .configs
        .get(UNCLEAN_LEADER_ELECTION_ENABLE)
        .or_else(|| {
            image
                .broker_configs
                .get("")
                .and_then(|c| c.get(UNCLEAN_LEADER_ELECTION_ENABLE))
        })
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

/// Kafka's `PartitionChangeBuilder::electLeader`: the first replica (preferred order) in `isr`
/// that `acceptable` allows; else, with `unclean`, the first acceptable replica, and the ISR
/// becomes just it; else no leader (-1) and the ISR unchanged. Returns (leader, ISR).
fn elect_leader(
    replicas: &[i32],
    isr: Vec<i32>,
    acceptable: &dyn Fn(i32) -> bool,
    unclean: bool,
) -> (i32, Vec<i32>) {
    if let Some(&leader) = replicas.iter().find(|r| isr.contains(r) && acceptable(**r)) {
        return (leader, isr);
    }
    if unclean {
        if let Some(&leader) = replicas.iter().find(|r| acceptable(**r)) {
            return (leader, vec![leader]);
        }
    }
    (-1, isr)
}

/// The record that moves `partition` of `topic_id` to `leader` and `isr`, or none when both
/// are unchanged; only the changed fields are set (apply bumps the leader epoch on a leader
/// change).
fn partition_change(
    topic_id: Uuid,
    partition_id: usize,
    partition: &PartitionImage,
    leader: i32,
    isr: Vec<i32>,
) -> Option<MetadataRecord> {
    let leader_changed = leader != partition.leader;
    let isr_changed = isr != partition.isr;
    if !leader_changed && !isr_changed {
        return None;
    }
    Some(MetadataRecord::PartitionChange(PartitionChangeRecord {
        partition_id: i32::try_from(partition_id).expect("partition counts are checked to fit i32"),
        topic_id,
        isr: isr_changed.then_some(isr),
        leader: leader_changed.then_some(leader),
        replicas: None,
    }))
}

/// The one place a broker leaves the partitions (fencing, controlled shutdown, a replaced or
/// removed registration; KRaft's `generateLeaderAndIsrUpdates` with a broker to remove): it
/// leaves every ISR, except where it is the sole member (Kafka keeps the last member, so the
/// partition can come back with it, and leaves it leaderless), and every partition it led
/// gets a new leader from the rest of the ISR that is active ([`elect_leader`]).
fn remove_broker_from_partitions(image: &MetadataImage, broker_id: i32) -> Vec<MetadataRecord> {
    let acceptable =
        |b: i32| b != broker_id && image.brokers.get(&b).is_some_and(|r| r.is_active());
    let mut records = Vec::new();
    for topic in image.topics.values() {
        let unclean = unclean_leader_election(image, topic);
        for (p, partition) in topic.partitions.iter().enumerate() {
            let leads = partition.leader == broker_id;
            if !leads && !partition.isr.contains(&broker_id) {
                continue;
            }
            let mut isr: Vec<i32> = partition
                .isr
                .iter()
                .copied()
                .filter(|r| *r != broker_id)
                .collect();
            if isr.is_empty() {
                isr.push(broker_id);
            }
            let (leader, isr) = if leads {
                elect_leader(&partition.replicas, isr, &acceptable, unclean)
            } else {
                (partition.leader, isr)
            };
            records.extend(partition_change(topic.id, p, partition, leader, isr));
        }
    }
    records
}

/// Leaders for the leaderless partitions of which `broker_id`, being unfenced, is a replica
/// (KRaft's `handleBrokerUnfenced`): elected as [`elect_leader`] does with the broker
/// counted active.
fn elect_leaderless(image: &MetadataImage, broker_id: i32) -> Vec<MetadataRecord> {
    let acceptable =
        |b: i32| b == broker_id || image.brokers.get(&b).is_some_and(|r| r.is_active());
    let mut records = Vec::new();
    for topic in image.topics.values() {
        let unclean = unclean_leader_election(image, topic);
        for (p, partition) in topic.partitions.iter().enumerate() {
            if partition.leader != -1 || !partition.replicas.contains(&broker_id) {
                continue;
            }
            let (leader, isr) = elect_leader(
                &partition.replicas,
                partition.isr.clone(),
                &acceptable,
                unclean,
            );
            records.extend(partition_change(topic.id, p, partition, leader, isr));
        }
    }
    records
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

/// The replicas of each partition in `partitions` with `replication_factor` replicas (-1: the
/// context's default), placed on the active brokers (registered, unfenced, not in controlled
/// shutdown) sorted by id, as Kafka's rack-unaware round-robin does: partition `p`'s replicas
/// are the brokers from `(placement_seed + p) mod n` on, so leaders (the first replica)
/// spread. Errors: [`ControllerError::InvalidReplicationFactor`] for a factor below 1 or
/// above the active brokers.
pub fn place_replicas(
    image: &MetadataImage,
    ctx: &ProposeContext<'_>,
    replication_factor: i16,
    partitions: std::ops::Range<usize>,
) -> Result<Vec<Vec<i32>>, ControllerError> {
    let active: Vec<i32> = image
        .brokers
        .iter()
        .filter(|(_, b)| b.is_active())
        .map(|(id, _)| *id)
        .collect();
    let replication_factor = match replication_factor {
        -1 => ctx.default_replication_factor,
        rf => rf,
    };
    let refused = ControllerError::InvalidReplicationFactor {
        replication_factor,
        available_brokers: active.len(),
    };
    let Ok(count) = usize::try_from(replication_factor) else {
        return Err(refused);
    };
    if count == 0 || count > active.len() {
        return Err(refused);
    }
    let n = active.len();
    // `n` is at least 1 here; the seed is reduced first so the sums cannot overflow.
    let start = usize::try_from(ctx.placement_seed % n as u64).unwrap_or(0);
    Ok(partitions
        .map(|p| {
            (0..count)
                .map(|i| active[(start + p % n + i) % n])
                .collect()
        })
        .collect())
}

fn create_topic(
    image: &MetadataImage,
    ctx: &ProposeContext<'_>,
    name: &str,
    (partitions, replication_factor, assignment): (i32, i16, Option<&[Vec<i32>]>),
    overrides: &BTreeMap<String, String>,
    internal: bool,
) -> Result<Vec<MetadataRecord>, ControllerError> {
    validate_topic_name(name).map_err(|reason| ControllerError::InvalidTopicName {
        topic: name.to_string(),
        reason,
    })?;
    if !internal {
        check_not_internal(image, name, TopicOperation::Create)?;
    }
    if image.topics.contains_key(name) {
        return Err(ControllerError::TopicAlreadyExists {
            topic: name.to_string(),
        });
    }
    check_partition_count(partitions)?;
    let count = usize::try_from(partitions).unwrap_or(0);
    let assignments = match assignment {
        Some(lists) => manual_assignment(image, lists, 0..count)?,
        None => place_replicas(image, ctx, replication_factor, 0..count)?,
    };
    (ctx.check_topic_config)(overrides).map_err(|reason| ControllerError::InvalidConfig {
        topic: name.to_string(),
        reason,
    })?;
    let topic_id = ctx.new_topic_id;
    if image.topic_names_by_id.contains_key(&topic_id) || topic_id.is_nil() {
        return Err(ControllerError::TopicIdTaken { topic_id });
    }
    let mut records = Vec::with_capacity(1 + count + overrides.len());
    records.push(MetadataRecord::Topic(TopicRecord {
        name: name.to_string(),
        topic_id,
        internal,
    }));
    for (p, replicas) in assignments.into_iter().enumerate() {
        records.push(new_partition(image, topic_id, p, replicas)?);
    }
    records.extend(config_diff(
        CONFIG_RESOURCE_TOPIC,
        name,
        &BTreeMap::new(),
        overrides,
    ));
    Ok(records)
}

fn existing<'a>(
    image: &'a MetadataImage,
    name: &str,
) -> Result<&'a super::image::TopicImage, ControllerError> {
    image
        .topics
        .get(name)
        .ok_or_else(|| ControllerError::UnknownTopic {
            topic: name.to_string(),
        })
}

/// A new partition on `replicas` (at least one), all in sync, led by the first.
/// A new partition on `replicas`: its ISR is the replicas that are active (registered,
/// unfenced, not shutting down; every one with the placement), its leader the first of them,
/// as KRaft's `ReplicationControlManager` builds it. Errors:
/// [`ControllerError::InvalidReplicaAssignment`] when none is active (a manual assignment of
/// fenced brokers only).
fn new_partition(
    image: &MetadataImage,
    topic_id: Uuid,
    partition: usize,
    replicas: Vec<i32>,
) -> Result<MetadataRecord, ControllerError> {
    let partition_id = i32::try_from(partition).expect("partition counts are checked to fit i32");
    let isr: Vec<i32> = replicas
        .iter()
        .copied()
        .filter(|r| image.brokers.get(r).is_some_and(|b| b.is_active()))
        .collect();
    let Some(&leader) = isr.first() else {
        return Err(ControllerError::InvalidReplicaAssignment {
            reason: format!(
                "All brokers specified in the manual partition assignment for partition \
                 {partition_id} are fenced or in controlled shutdown."
            ),
        });
    };
    Ok(MetadataRecord::Partition(PartitionRecord {
        partition_id,
        topic_id,
        leader,
        isr,
        replicas,
        leader_epoch: 0,
        partition_epoch: 0,
    }))
}

/// The replica lists of a manual assignment, one per partition of `partitions`, once every
/// broker in them is registered (Kafka's check; the handler has checked the lists' shape).
/// Errors: [`ControllerError::InvalidReplicaAssignment`] naming the unknown broker.
fn manual_assignment(
    image: &MetadataImage,
    lists: &[Vec<i32>],
    partitions: std::ops::Range<usize>,
) -> Result<Vec<Vec<i32>>, ControllerError> {
    let first = partitions.start;
    if lists.len() != partitions.len() {
        return Err(ControllerError::InvalidReplicaAssignment {
            reason: format!(
                "{} partition(s) but {} replica list(s) in the manual assignment",
                partitions.len(),
                lists.len()
            ),
        });
    }
    for (i, list) in lists.iter().enumerate() {
        if list.is_empty() {
            return Err(ControllerError::InvalidReplicaAssignment {
                reason: format!(
                    "The manual partition assignment includes an empty replica list for \
                     partition {}.",
                    first + i
                ),
            });
        }
        if let Some(unknown) = list.iter().find(|b| !image.brokers.contains_key(b)) {
            return Err(ControllerError::InvalidReplicaAssignment {
                reason: format!(
                    "The manual partition assignment includes broker {unknown}, but no such \
                     broker is registered."
                ),
            });
        }
    }
    Ok(lists.to_vec())
}

/// Changes the overrides of topic `name` by `change` once the result checks out.
fn change_configs(
    image: &MetadataImage,
    ctx: &ProposeContext<'_>,
    name: &str,
    change: impl FnOnce(&mut BTreeMap<String, String>),
) -> Result<Vec<MetadataRecord>, ControllerError> {
    let topic = existing(image, name)?;
    check_not_internal(image, name, TopicOperation::AlterConfigs)?;
    let mut configs = topic.configs.clone();
    change(&mut configs);
    (ctx.check_topic_config)(&configs).map_err(|reason| ControllerError::InvalidConfig {
        topic: name.to_string(),
        reason,
    })?;
    Ok(config_diff(CONFIG_RESOURCE_TOPIC, name, &topic.configs, &configs).collect())
}

/// The ConfigRecords (resource type BROKER) that change the dynamic configs of broker resource
/// `resource_name` by `changes` (after clearing them, with `replace`), once the result checks
/// out; none when nothing changes.
fn alter_broker_config(
    image: &MetadataImage,
    ctx: &ProposeContext<'_>,
    resource_name: &str,
    changes: &[(String, Option<String>)],
    replace: bool,
) -> Result<Vec<MetadataRecord>, ControllerError> {
    let empty = BTreeMap::new();
    let current = image.broker_configs.get(resource_name).unwrap_or(&empty);
    let mut configs = if replace {
        BTreeMap::new()
    } else {
        current.clone()
    };
    for (key, value) in changes {
        match value {
            Some(value) => configs.insert(key.clone(), value.clone()),
            None => configs.remove(key),
        };
    }
    let mut candidate = image.broker_configs.clone();
    if configs.is_empty() {
        candidate.remove(resource_name);
    } else {
        candidate.insert(resource_name.to_string(), configs.clone());
    }
    (ctx.check_broker_configs)(&candidate).map_err(|reason| {
        ControllerError::InvalidBrokerConfig {
            resource_name: resource_name.to_string(),
            reason,
        }
    })?;
    Ok(config_diff(CONFIG_RESOURCE_BROKER, resource_name, current, &configs).collect())
}

/// ConfigRecords that turn the configs `from` of resource `name` (of Kafka type
/// `resource_type`) into `to`.
fn config_diff<'a>(
    resource_type: i8,
    name: &'a str,
    from: &'a BTreeMap<String, String>,
    to: &'a BTreeMap<String, String>,
) -> impl Iterator<Item = MetadataRecord> + 'a {
    let removed = from
        .keys()
        .filter(|k| !to.contains_key(*k))
        .map(|k| (k, None));
    let set = to
        .iter()
        .filter(|(k, v)| from.get(*k) != Some(v))
        .map(|(k, v)| (k, Some(v.clone())));
    removed.chain(set).map(move |(key, value)| {
        MetadataRecord::Config(ConfigRecord {
            resource_type,
            resource_name: name.to_string(),
            name: key.clone(),
            value,
        })
    })
}

fn check_partition_count(partitions: i32) -> Result<(), ControllerError> {
    if !(1..=PARTITIONS_PER_TOPIC_MAX).contains(&partitions) {
        return Err(ControllerError::PartitionCountOutOfRange { count: partitions });
    }
    Ok(())
}
