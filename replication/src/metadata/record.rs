//! Metadata records: the changes the controller appends, one kind per KRaft record
//! (`metadata/src/main/resources/common/metadata/*Record.json` in Apache Kafka), with Kafka's
//! field names in snake case. A record carries every id and uuid it introduces (chosen by the
//! proposer), so applying it needs no clock and no randomness.
//!
//! Fields Sluice does not use yet (directories, ELR, migration flags, features) are left out;
//! a later field is added with `#[serde(default)]` so that older records still decode.

use super::acl::AclBinding;
use super::quotas::{QuotaEntity, QuotaValue};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Kafka's `ConfigResource.Type` of a [`ConfigRecord`] for a topic.
pub const CONFIG_RESOURCE_TOPIC: i8 = 2;
/// Kafka's `ConfigResource.Type` of a [`ConfigRecord`] for a broker.
pub const CONFIG_RESOURCE_BROKER: i8 = 4;

/// One metadata change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum MetadataRecord {
    /// [`TopicRecord`].
    Topic(TopicRecord),
    /// [`PartitionRecord`].
    Partition(PartitionRecord),
    /// [`PartitionChangeRecord`].
    PartitionChange(PartitionChangeRecord),
    /// [`ConfigRecord`].
    Config(ConfigRecord),
    /// [`RemoveTopicRecord`].
    RemoveTopic(RemoveTopicRecord),
    /// [`ProducerIdsRecord`].
    ProducerIds(ProducerIdsRecord),
    /// [`RegisterBrokerRecord`].
    RegisterBroker(RegisterBrokerRecord),
    /// [`FenceBrokerRecord`].
    FenceBroker(FenceBrokerRecord),
    /// [`UnfenceBrokerRecord`].
    UnfenceBroker(UnfenceBrokerRecord),
    /// [`BrokerRegistrationChangeRecord`].
    BrokerRegistrationChange(BrokerRegistrationChangeRecord),
    /// [`UnregisterBrokerRecord`].
    UnregisterBroker(UnregisterBrokerRecord),
    /// [`NextBrokerEpochRecord`] (snapshots only).
    NextBrokerEpoch(NextBrokerEpochRecord),
    /// [`ClusterIdRecord`] (the first entry of a new metadata log).
    ClusterId(ClusterIdRecord),
    /// [`FeatureLevelRecord`].
    FeatureLevel(FeatureLevelRecord),
    /// [`AccessControlEntryRecord`].
    AccessControlEntry(AccessControlEntryRecord),
    /// [`RemoveAccessControlEntryRecord`].
    RemoveAccessControlEntry(RemoveAccessControlEntryRecord),
    /// [`ClientQuotaRecord`].
    ClientQuota(ClientQuotaRecord),
    /// [`UserScramCredentialRecord`].
    UserScramCredential(UserScramCredentialRecord),
    /// [`RemoveUserScramCredentialRecord`].
    RemoveUserScramCredential(RemoveUserScramCredentialRecord),
    /// [`VoterEndpointRecord`].
    VoterEndpoint(VoterEndpointRecord),
}

/// Where a controller added to the quorum by a voter change (KIP-853's AddRaftVoter) is
/// reached, or its removal (`endpoint` `None`): Kafka's `VotersRecord`, one voter at a time.
/// The metadata state machine writes it at the index of the configuration entry, so that
/// snapshots, observers and restarted nodes know every added voter's address (the voters of
/// `controller.quorum.voters` are known from each node's configuration).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VoterEndpointRecord {
    pub node_id: i32,
    /// `host:port` of its controller listener; `None`: it left the quorum.
    pub endpoint: Option<String>,
}

/// A user's SCRAM credential for one mechanism, new or replacing the previous one (KRaft
/// `UserScramCredentialRecord`, KIP-554).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserScramCredentialRecord {
    pub name: String,
    /// The mechanism's wire type ([`super::scram::ScramMechanism::wire_type`]).
    pub mechanism: i8,
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: i32,
}

/// Keys stay out of logs.
impl std::fmt::Debug for UserScramCredentialRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserScramCredentialRecord")
            .field("name", &self.name)
            .field("mechanism", &self.mechanism)
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

/// The removal of a user's SCRAM credential for one mechanism (KRaft
/// `RemoveUserScramCredentialRecord`); applying it refuses a credential that does not exist.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoveUserScramCredentialRecord {
    pub name: String,
    /// The mechanism's wire type.
    pub mechanism: i8,
}

/// A finalized feature level (KRaft `FeatureLevelRecord`, KIP-584/KIP-778): `feature_level`
/// 0 removes the feature from the finalized set.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeatureLevelRecord {
    pub name: String,
    pub feature_level: i16,
}

/// A quota value set or removed (KRaft `ClientQuotaRecord`, KIP-546).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientQuotaRecord {
    /// Entity type → name (`None`: the type's default), sorted by type.
    pub entity: QuotaEntity,
    pub key: String,
    /// The new value; ignored when `remove`.
    pub value: QuotaValue,
    pub remove: bool,
}

/// A new ACL (KRaft `AccessControlEntryRecord`, KIP-801): the binding and the id it is
/// removed by.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessControlEntryRecord {
    pub id: Uuid,
    pub binding: AclBinding,
}

/// The removal of the ACL with `id` (KRaft `RemoveAccessControlEntryRecord`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoveAccessControlEntryRecord {
    pub id: Uuid,
}

/// A new topic (KRaft `TopicRecord`); its partitions follow as [`PartitionRecord`]s.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicRecord {
    pub name: String,
    pub topic_id: Uuid,
    /// Sluice's addition: the topic is internal (written only by the broker itself, such as
    /// `__consumer_offsets`). Kafka derives this from the name; here it is recorded.
    #[serde(default)]
    pub internal: bool,
}

/// A new partition of an existing topic (KRaft `PartitionRecord`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionRecord {
    pub partition_id: i32,
    pub topic_id: Uuid,
    /// Broker ids of the replicas, preferred leader first.
    pub replicas: Vec<i32>,
    /// Broker ids of the in-sync replicas.
    pub isr: Vec<i32>,
    /// Broker id of the leader, or -1 (Kafka's "no leader").
    pub leader: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    /// Replicas an ongoing reassignment removes (KIP-455; empty when none is in progress;
    /// absent from records written before reassignments).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removing_replicas: Vec<i32>,
    /// Replicas an ongoing reassignment adds (KIP-455), as `removing_replicas`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adding_replicas: Vec<i32>,
}

/// A change of an existing partition (KRaft `PartitionChangeRecord`): `None` fields keep
/// their value. Applying it increments the partition epoch, and the leader epoch when
/// `leader` is set — to another broker, or to the same one to bump the epoch, as Kafka's
/// `PartitionRegistration.merge` (a reassignment that drops replicas does).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionChangeRecord {
    pub partition_id: i32,
    pub topic_id: Uuid,
    #[serde(default)]
    pub isr: Option<Vec<i32>>,
    #[serde(default)]
    pub leader: Option<i32>,
    #[serde(default)]
    pub replicas: Option<Vec<i32>>,
    /// The new `removing_replicas` of a reassignment (KIP-455); `Some(vec![])` clears them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removing_replicas: Option<Vec<i32>>,
    /// The new `adding_replicas` of a reassignment (KIP-455); `Some(vec![])` clears them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adding_replicas: Option<Vec<i32>>,
}

/// Sets (`Some`) or removes (`None`) one config override (KRaft `ConfigRecord`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigRecord {
    /// [`CONFIG_RESOURCE_TOPIC`] or [`CONFIG_RESOURCE_BROKER`].
    pub resource_type: i8,
    /// Topic name; for a broker, its id in decimal or "" for the cluster-wide default (a
    /// dynamic broker config, as in Kafka).
    pub resource_name: String,
    pub name: String,
    pub value: Option<String>,
}

/// Deletes a topic with its partitions and config overrides (KRaft `RemoveTopicRecord`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoveTopicRecord {
    pub topic_id: Uuid,
}

/// Hands a block of producer ids to a broker (KRaft `ProducerIdsRecord`): the block ends just
/// below `next_producer_id`, the first id of the next block.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerIdsRecord {
    pub broker_id: i32,
    pub broker_epoch: i64,
    pub next_producer_id: i64,
}

/// A broker's registration at start-up (KRaft `RegisterBrokerRecord`); a new incarnation
/// replaces the broker's previous registration. Applying it refuses a `broker_epoch` not above
/// the broker's current one, and moves the image's next broker epoch past it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisterBrokerRecord {
    pub broker_id: i32,
    /// Random per process start (chosen by the broker that registers).
    pub incarnation_id: Uuid,
    /// Chosen by the controller: above every broker epoch handed out before (Kafka uses the
    /// record's offset; Sluice the image's `next_broker_epoch`, or the offset at start-up).
    pub broker_epoch: i64,
    pub end_points: Vec<BrokerEndpoint>,
    pub rack: Option<String>,
    pub fenced: bool,
    /// KRaft's `InControlledShutdown` (record version 1+); false in records written before it.
    #[serde(default)]
    pub in_controlled_shutdown: bool,
}

/// Fences a broker (KRaft `FenceBrokerRecord`): its session expired, so it may lead nothing
/// and is not a candidate for the ISR. Applying it refuses a `broker_epoch` other than the
/// registration's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FenceBrokerRecord {
    pub broker_id: i32,
    /// The epoch of the registration it fences.
    pub broker_epoch: i64,
}

/// Unfences a broker (KRaft `UnfenceBrokerRecord`): it has caught up with the metadata log
/// and may lead again. Applying it refuses a `broker_epoch` other than the registration's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnfenceBrokerRecord {
    pub broker_id: i32,
    /// The epoch of the registration it unfences.
    pub broker_epoch: i64,
}

/// Changes a registered broker's state (KRaft `BrokerRegistrationChangeRecord`, whose `Fenced`
/// and `InControlledShutdown` are int8 tri-states; here `None` keeps the value). Applying it
/// refuses a `broker_epoch` other than the registration's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerRegistrationChangeRecord {
    pub broker_id: i32,
    /// The epoch of the registration it changes.
    pub broker_epoch: i64,
    #[serde(default)]
    pub fenced: Option<bool>,
    #[serde(default)]
    pub in_controlled_shutdown: Option<bool>,
}

/// Removes a broker's registration (KRaft `UnregisterBrokerRecord`). Applying it refuses a
/// `broker_epoch` other than the registration's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnregisterBrokerRecord {
    pub broker_id: i32,
    /// The epoch of the registration it removes.
    pub broker_epoch: i64,
}

/// Sluice's addition, written only by snapshots: the next broker epoch the controller hands
/// out. Kafka needs no such record (a broker epoch is the offset of its registration, and
/// offsets go on after a snapshot); Sluice keeps the counter in the image, and a snapshot must
/// keep it even when the broker that held the highest epoch has been unregistered. Applying it
/// refuses a counter that moves backwards.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NextBrokerEpochRecord {
    pub next_broker_epoch: i64,
}

/// One listener of a registered broker.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerEndpoint {
    pub name: String,
    pub host: String,
    pub port: u16,
    /// Kafka's `SecurityProtocol` id (0: PLAINTEXT).
    pub security_protocol: i16,
}

/// Names the cluster: the first entry of a new metadata log (Sluice's record: Kafka writes the
/// cluster id into each node's `meta.properties` with `kafka-storage format` instead). The
/// first active controller of a new cluster proposes the id it drew; once one is set, every
/// later one is refused, so all nodes agree on the first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterIdRecord {
    pub cluster_id: String,
}
