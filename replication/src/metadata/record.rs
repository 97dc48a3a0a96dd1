//! Metadata records: the changes the controller appends, one kind per KRaft record
//! (`metadata/src/main/resources/common/metadata/*Record.json` in Apache Kafka), with Kafka's
//! field names in snake case. A record carries every id and uuid it introduces (chosen by the
//! proposer), so applying it needs no clock and no randomness.
//!
//! Fields Sluice does not use yet (directories, ELR, migration flags, features) are left out;
//! a later field is added with `#[serde(default)]` so that older records still decode.

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
    Topic(TopicRecord),
    Partition(PartitionRecord),
    PartitionChange(PartitionChangeRecord),
    Config(ConfigRecord),
    RemoveTopic(RemoveTopicRecord),
    ProducerIds(ProducerIdsRecord),
    RegisterBroker(RegisterBrokerRecord),
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
}

/// A change of an existing partition (KRaft `PartitionChangeRecord`): `None` fields keep
/// their value. Applying it increments the partition epoch, and the leader epoch when the
/// leader changes.
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
}

/// Sets (`Some`) or removes (`None`) one config override (KRaft `ConfigRecord`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigRecord {
    /// [`CONFIG_RESOURCE_TOPIC`] or [`CONFIG_RESOURCE_BROKER`].
    pub resource_type: i8,
    /// Topic name, or broker id in decimal.
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
/// replaces the broker's previous registration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisterBrokerRecord {
    pub broker_id: i32,
    /// Random per process start (chosen by the broker that registers).
    pub incarnation_id: Uuid,
    pub broker_epoch: i64,
    pub end_points: Vec<BrokerEndpoint>,
    pub rack: Option<String>,
    pub fenced: bool,
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
