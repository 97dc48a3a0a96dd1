//! The metadata image: the cluster's state after every record applied so far, and the pure
//! [`MetadataImage::apply`] that moves it forward by one record.
//!
//! Invariants (checked by `apply`, which refuses a record that would break one):
//! 1. `topic_names_by_id` and `topics` describe the same topics: each topic's id maps back to
//!    its name.
//! 2. A topic's partitions are numbered `0..n` with no gap (a [`PartitionRecord`] adds the
//!    next one).
//! 3. `producer_ids.next_producer_id` never decreases.
//! 4. `next_broker_epoch` never decreases and is above every registered broker's epoch; a
//!    broker's epoch only grows (a new registration), and a record that names a broker's
//!    registration (fence, unfence, change, unregister) carries its current epoch (KRaft's
//!    `ClusterControlManager` replay checks the same).
//! 5. ACL ids are unique and a removal names an existing one; no two ids carry the same
//!    binding (the proposer skips a creation of an existing binding, as `AclControlManager`).
//! 6. A SCRAM credential removal names an existing credential; no user is kept without one.

use super::acl::AclBinding;
use super::quotas::ClientQuotas;
use super::record::ClientQuotaRecord;
use super::record::{
    AccessControlEntryRecord, BrokerEndpoint, BrokerRegistrationChangeRecord, ConfigRecord,
    FeatureLevelRecord, FenceBrokerRecord, MetadataRecord, NextBrokerEpochRecord,
    PartitionChangeRecord, PartitionRecord, ProducerIdsRecord, RegisterBrokerRecord,
    RemoveAccessControlEntryRecord, RemoveTopicRecord, TopicRecord, UnfenceBrokerRecord,
    UnregisterBrokerRecord, CONFIG_RESOURCE_BROKER, CONFIG_RESOURCE_TOPIC,
};
use super::record::{
    RemoveUserScramCredentialRecord, UserScramCredentialRecord, VoterEndpointRecord,
};
use super::scram::{ScramCredential, ScramCredentials, ScramMechanism};
use std::collections::BTreeMap;
use uuid::Uuid;

/// One partition's cluster assignment (which brokers hold it, which one leads).
///
/// While a reassignment is in progress (KIP-455) `replicas` is the target followed by the
/// replicas being removed, `adding_replicas` the target's replicas not in the original
/// assignment and `removing_replicas` the original's not in the target (Kafka's
/// `PartitionReassignmentReplicas`); both are empty otherwise.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionImage {
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub leader: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub adding_replicas: Vec<i32>,
    pub removing_replicas: Vec<i32>,
}

impl PartitionImage {
    /// Whether a reassignment is in progress (Kafka's `isReassignmentInProgress`).
    pub fn is_reassigning(&self) -> bool {
        !self.adding_replicas.is_empty() || !self.removing_replicas.is_empty()
    }

    /// The assignment before the ongoing reassignment: `replicas` without the ones it adds
    /// (Kafka's `PartitionReassignmentReplicas.originalReplicas`).
    pub fn original_replicas(&self) -> Vec<i32> {
        self.replicas
            .iter()
            .copied()
            .filter(|r| !self.adding_replicas.contains(r))
            .collect()
    }

    /// The assignment the ongoing reassignment moves to: `replicas` without the ones it
    /// removes (all of them when none is in progress).
    pub fn target_replicas(&self) -> Vec<i32> {
        self.replicas
            .iter()
            .copied()
            .filter(|r| !self.removing_replicas.contains(r))
            .collect()
    }
}

/// One topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicImage {
    /// Topic id (KIP-516).
    pub id: Uuid,
    /// Written only by the broker itself; clients may not create, delete, grow, reconfigure,
    /// produce to or delete records of it (see [`super::check_not_internal`]).
    pub internal: bool,
    /// Indexed by partition number (invariant 2).
    pub partitions: Vec<PartitionImage>,
    /// Topic config properties set explicitly (Kafka names → values); the rest are defaults.
    pub configs: BTreeMap<String, String>,
}

/// A registered broker (KRaft's `BrokerRegistration`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerRegistration {
    pub incarnation_id: Uuid,
    pub broker_epoch: i64,
    pub end_points: Vec<BrokerEndpoint>,
    pub rack: Option<String>,
    /// Its session expired, or it has not caught up since registering: it leads nothing and
    /// is in no ISR unless it is the sole member.
    pub fenced: bool,
    /// It asked to shut down (ControlledShutdown): it leads nothing and gets no new replicas.
    pub in_controlled_shutdown: bool,
}

impl BrokerRegistration {
    /// Whether the broker may lead and take new replicas: unfenced and not shutting down
    /// (KRaft's `ReplicationControlManager::isActive` plus the controlled-shutdown check).
    pub fn is_active(&self) -> bool {
        !self.fenced && !self.in_controlled_shutdown
    }
}

/// Producer-id blocks handed out so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProducerIdsImage {
    /// First id of the next block (invariant 3); every id below it has been handed out.
    pub next_producer_id: i64,
}

/// The whole cluster metadata. Immutable once published; a change makes a new image.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetadataImage {
    /// Reported in Metadata and DescribeCluster; fixed when the cluster is first started.
    pub cluster_id: String,
    pub topics: BTreeMap<String, TopicImage>,
    /// Topic name of each topic id (invariant 1).
    pub topic_names_by_id: BTreeMap<Uuid, String>,
    /// Dynamic broker configs, by BROKER resource name: a broker id in decimal, or "" for the
    /// cluster-wide default (`ConfigRecord`s of resource type BROKER; no empty set is kept).
    pub broker_configs: BTreeMap<String, BTreeMap<String, String>>,
    /// Registered brokers by broker id.
    pub brokers: BTreeMap<i32, BrokerRegistration>,
    /// The broker epoch the next registration gets (invariant 4): every epoch below it may
    /// have been handed out.
    pub next_broker_epoch: i64,
    pub producer_ids: ProducerIdsImage,
    /// Finalized feature levels by feature name, as the last `FeatureLevelRecord` of each set
    /// them (0 included). A feature absent has its bootstrap level (`metadata.version`
    /// [`super::METADATA_VERSION_BOOTSTRAP`], `transaction.version` 2, the rest 0).
    pub features: BTreeMap<String, i16>,
    /// ACLs by id (invariant 5: no two ids carry the same binding).
    pub acls: BTreeMap<Uuid, AclBinding>,
    /// Client quota values by entity (no entity without a value).
    pub client_quotas: ClientQuotas,
    /// SCRAM credentials by user and mechanism (invariant 6).
    pub scram_credentials: ScramCredentials,
    /// The controller listener (`host:port`) of each voter (or learner being added) that a
    /// voter change added, by node id (KIP-853; `VoterEndpointRecord`).
    pub voter_endpoints: BTreeMap<i32, String>,
}

/// A record that does not fit the image it is applied to. The proposer never produces one,
/// so on replay it means the metadata files are inconsistent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum ApplyError {
    #[error("topic '{name}' already exists")]
    TopicExists { name: String },
    #[error("topic id {topic_id} already exists")]
    TopicIdExists { topic_id: Uuid },
    #[error("no topic has id {topic_id}")]
    UnknownTopicId { topic_id: Uuid },
    #[error("no topic is named '{name}'")]
    UnknownTopic { name: String },
    #[error("partition {partition_id} of topic {topic_id} is not the next one ({expected})")]
    PartitionOutOfOrder {
        topic_id: Uuid,
        partition_id: i32,
        expected: usize,
    },
    #[error("topic {topic_id} has no partition {partition_id}")]
    UnknownPartition { topic_id: Uuid, partition_id: i32 },
    #[error("config resource type {resource_type} is not a topic (2) or a broker (4)")]
    ConfigResourceType { resource_type: i8 },
    /// A [`super::record::ClusterIdRecord`] for a cluster already named (or an empty name).
    #[error("the cluster is named '{current}': cluster id '{proposed}' refused")]
    ClusterIdSet { current: String, proposed: String },
    #[error("producer id block ending at {next_producer_id} is not after {current}")]
    ProducerIdsBackwards { next_producer_id: i64, current: i64 },
    #[error("broker {broker_id} is not registered")]
    UnknownBroker { broker_id: i32 },
    /// A record for an older (or other) registration of the broker than the current one
    /// (invariant 4); `current` is the registration's epoch.
    #[error("broker epoch {broker_epoch} of broker {broker_id} is stale (its registration has epoch {current})")]
    StaleBrokerEpoch {
        broker_id: i32,
        broker_epoch: i64,
        current: i64,
    },
    /// An ACL whose id or binding is already present (invariant 5).
    #[error("ACL {id} (or its binding) already exists")]
    AclExists { id: Uuid },
    #[error("no ACL has id {id}")]
    UnknownAcl { id: Uuid },
    /// A SCRAM credential record whose mechanism type is not 1 or 2.
    #[error("SCRAM mechanism type {mechanism} is unknown")]
    UnknownScramMechanism { mechanism: i8 },
    /// The removal of a SCRAM credential that does not exist (invariant 6).
    #[error("user '{name}' has no SCRAM credential of mechanism type {mechanism}")]
    UnknownScramCredential { name: String, mechanism: i8 },
    #[error("next broker epoch {next_broker_epoch} is below {current}")]
    BrokerEpochBackwards {
        next_broker_epoch: i64,
        current: i64,
    },
}

impl MetadataImage {
    /// An empty cluster named `cluster_id`.
    pub fn new(cluster_id: String) -> MetadataImage {
        MetadataImage {
            cluster_id,
            ..MetadataImage::default()
        }
    }

    /// The topic with id `topic_id`.
    pub fn topic_by_id(&self, topic_id: Uuid) -> Option<(&str, &TopicImage)> {
        let name = self.topic_names_by_id.get(&topic_id)?;
        self.topics.get(name).map(|t| (name.as_str(), t))
    }

    /// Applies `record`. Pure: the outcome depends only on the image and the record. On error
    /// the image is unchanged.
    pub fn apply(&mut self, record: &MetadataRecord) -> Result<(), ApplyError> {
        match record {
            MetadataRecord::Topic(r) => self.apply_topic(r),
            MetadataRecord::Partition(r) => self.apply_partition(r),
            MetadataRecord::PartitionChange(r) => self.apply_partition_change(r),
            MetadataRecord::Config(r) => self.apply_config(r),
            MetadataRecord::RemoveTopic(r) => self.apply_remove_topic(r),
            MetadataRecord::ProducerIds(r) => self.apply_producer_ids(r),
            MetadataRecord::RegisterBroker(r) => self.apply_register_broker(r),
            MetadataRecord::FenceBroker(FenceBrokerRecord {
                broker_id,
                broker_epoch,
            }) => self
                .registration_mut(*broker_id, *broker_epoch)
                .map(|b| b.fenced = true),
            MetadataRecord::UnfenceBroker(UnfenceBrokerRecord {
                broker_id,
                broker_epoch,
            }) => self
                .registration_mut(*broker_id, *broker_epoch)
                .map(|b| b.fenced = false),
            MetadataRecord::BrokerRegistrationChange(r) => self.apply_registration_change(r),
            MetadataRecord::AccessControlEntry(r) => self.apply_acl(r),
            MetadataRecord::ClientQuota(r) => {
                self.apply_client_quota(r);
                Ok(())
            }
            MetadataRecord::UserScramCredential(r) => self.apply_scram_credential(r),
            MetadataRecord::RemoveUserScramCredential(r) => self.apply_remove_scram_credential(r),
            MetadataRecord::VoterEndpoint(VoterEndpointRecord { node_id, endpoint }) => {
                match endpoint {
                    Some(endpoint) => self.voter_endpoints.insert(*node_id, endpoint.clone()),
                    None => self.voter_endpoints.remove(node_id),
                };
                Ok(())
            }
            MetadataRecord::RemoveAccessControlEntry(RemoveAccessControlEntryRecord { id }) => self
                .acls
                .remove(id)
                .map(drop)
                .ok_or(ApplyError::UnknownAcl { id: *id }),
            MetadataRecord::UnregisterBroker(UnregisterBrokerRecord {
                broker_id,
                broker_epoch,
            }) => {
                self.registration_mut(*broker_id, *broker_epoch)?;
                self.brokers.remove(broker_id);
                Ok(())
            }
            MetadataRecord::NextBrokerEpoch(NextBrokerEpochRecord { next_broker_epoch }) => {
                let current = self.next_broker_epoch;
                if *next_broker_epoch < current {
                    return Err(ApplyError::BrokerEpochBackwards {
                        next_broker_epoch: *next_broker_epoch,
                        current,
                    });
                }
                self.next_broker_epoch = *next_broker_epoch;
                Ok(())
            }
            MetadataRecord::ClusterId(r) => self.apply_cluster_id(&r.cluster_id),
            MetadataRecord::FeatureLevel(FeatureLevelRecord {
                name,
                feature_level,
            }) => {
                // Kept at 0 too: a feature with a bootstrap level (`transaction.version`) set to
                // 0 stays 0.
                self.features.insert(name.clone(), *feature_level);
                Ok(())
            }
        }
    }

    /// The registration of `broker_id` when its epoch is `broker_epoch`. Errors:
    /// [`ApplyError::UnknownBroker`], [`ApplyError::StaleBrokerEpoch`].
    fn registration_mut(
        &mut self,
        broker_id: i32,
        broker_epoch: i64,
    ) -> Result<&mut BrokerRegistration, ApplyError> {
        let b = self
            .brokers
            .get_mut(&broker_id)
            .ok_or(ApplyError::UnknownBroker { broker_id })?;
        if b.broker_epoch != broker_epoch {
            return Err(ApplyError::StaleBrokerEpoch {
                broker_id,
                broker_epoch,
                current: b.broker_epoch,
            });
        }
        Ok(b)
    }

    fn apply_registration_change(
        &mut self,
        r: &BrokerRegistrationChangeRecord,
    ) -> Result<(), ApplyError> {
        let b = self.registration_mut(r.broker_id, r.broker_epoch)?;
        if let Some(fenced) = r.fenced {
            b.fenced = fenced;
        }
        if let Some(in_controlled_shutdown) = r.in_controlled_shutdown {
            b.in_controlled_shutdown = in_controlled_shutdown;
        }
        Ok(())
    }

    fn apply_acl(&mut self, r: &AccessControlEntryRecord) -> Result<(), ApplyError> {
        if self.acls.contains_key(&r.id) || self.acls.values().any(|b| *b == r.binding) {
            return Err(ApplyError::AclExists { id: r.id });
        }
        self.acls.insert(r.id, r.binding.clone());
        Ok(())
    }

    fn apply_scram_credential(&mut self, r: &UserScramCredentialRecord) -> Result<(), ApplyError> {
        let mechanism =
            ScramMechanism::from_type(r.mechanism).ok_or(ApplyError::UnknownScramMechanism {
                mechanism: r.mechanism,
            })?;
        self.scram_credentials
            .entry(r.name.clone())
            .or_default()
            .insert(
                mechanism,
                ScramCredential {
                    salt: r.salt.clone(),
                    stored_key: r.stored_key.clone(),
                    server_key: r.server_key.clone(),
                    iterations: r.iterations,
                },
            );
        Ok(())
    }

    fn apply_remove_scram_credential(
        &mut self,
        r: &RemoveUserScramCredentialRecord,
    ) -> Result<(), ApplyError> {
        let missing = || ApplyError::UnknownScramCredential {
            name: r.name.clone(),
            mechanism: r.mechanism,
        };
        let mechanism = ScramMechanism::from_type(r.mechanism).ok_or_else(missing)?;
        let user = self
            .scram_credentials
            .get_mut(&r.name)
            .ok_or_else(missing)?;
        user.remove(&mechanism).ok_or_else(missing)?;
        if user.is_empty() {
            self.scram_credentials.remove(&r.name);
        }
        Ok(())
    }

    fn apply_client_quota(&mut self, r: &ClientQuotaRecord) {
        if r.remove {
            if let Some(values) = self.client_quotas.get_mut(&r.entity) {
                values.remove(&r.key);
                if values.is_empty() {
                    self.client_quotas.remove(&r.entity);
                }
            }
        } else {
            self.client_quotas
                .entry(r.entity.clone())
                .or_default()
                .insert(r.key.clone(), r.value);
        }
    }

    fn apply_cluster_id(&mut self, cluster_id: &str) -> Result<(), ApplyError> {
        if !self.cluster_id.is_empty() || cluster_id.is_empty() {
            return Err(ApplyError::ClusterIdSet {
                current: self.cluster_id.clone(),
                proposed: cluster_id.to_string(),
            });
        }
        self.cluster_id = cluster_id.to_string();
        Ok(())
    }

    fn apply_topic(&mut self, r: &TopicRecord) -> Result<(), ApplyError> {
        if self.topics.contains_key(&r.name) {
            return Err(ApplyError::TopicExists {
                name: r.name.clone(),
            });
        }
        if self.topic_names_by_id.contains_key(&r.topic_id) {
            return Err(ApplyError::TopicIdExists {
                topic_id: r.topic_id,
            });
        }
        self.topic_names_by_id.insert(r.topic_id, r.name.clone());
        self.topics.insert(
            r.name.clone(),
            TopicImage {
                id: r.topic_id,
                internal: r.internal,
                partitions: Vec::new(),
                configs: BTreeMap::new(),
            },
        );
        Ok(())
    }

    fn topic_mut(&mut self, topic_id: Uuid) -> Result<&mut TopicImage, ApplyError> {
        self.topic_names_by_id
            .get(&topic_id)
            .and_then(|name| self.topics.get_mut(name))
            .ok_or(ApplyError::UnknownTopicId { topic_id })
    }

    fn apply_partition(&mut self, r: &PartitionRecord) -> Result<(), ApplyError> {
        let topic = self.topic_mut(r.topic_id)?;
        let expected = topic.partitions.len();
        if usize::try_from(r.partition_id).ok() != Some(expected) {
            return Err(ApplyError::PartitionOutOfOrder {
                topic_id: r.topic_id,
                partition_id: r.partition_id,
                expected,
            });
        }
        topic.partitions.push(PartitionImage {
            replicas: r.replicas.clone(),
            isr: r.isr.clone(),
            leader: r.leader,
            leader_epoch: r.leader_epoch,
            partition_epoch: r.partition_epoch,
            adding_replicas: r.adding_replicas.clone(),
            removing_replicas: r.removing_replicas.clone(),
        });
        Ok(())
    }

    fn apply_partition_change(&mut self, r: &PartitionChangeRecord) -> Result<(), ApplyError> {
        let topic = self.topic_mut(r.topic_id)?;
        let partition = usize::try_from(r.partition_id)
            .ok()
            .and_then(|p| topic.partitions.get_mut(p))
            .ok_or(ApplyError::UnknownPartition {
                topic_id: r.topic_id,
                partition_id: r.partition_id,
            })?;
        if let Some(isr) = &r.isr {
            partition.isr.clone_from(isr);
        }
        if let Some(replicas) = &r.replicas {
            partition.replicas.clone_from(replicas);
        }
        if let Some(adding) = &r.adding_replicas {
            partition.adding_replicas.clone_from(adding);
        }
        if let Some(removing) = &r.removing_replicas {
            partition.removing_replicas.clone_from(removing);
        }
        // Kafka's `PartitionRegistration.merge`: a set leader is a new leader epoch, even the
        // same broker (records written before reassignments set it only on a change).
        if let Some(leader) = r.leader {
            partition.leader = leader;
            partition.leader_epoch = partition.leader_epoch.wrapping_add(1);
        }
        partition.partition_epoch = partition.partition_epoch.wrapping_add(1);
        Ok(())
    }

    fn apply_config(&mut self, r: &ConfigRecord) -> Result<(), ApplyError> {
        let configs = match r.resource_type {
            CONFIG_RESOURCE_TOPIC => {
                &mut self
                    .topics
                    .get_mut(&r.resource_name)
                    .ok_or_else(|| ApplyError::UnknownTopic {
                        name: r.resource_name.clone(),
                    })?
                    .configs
            }
            CONFIG_RESOURCE_BROKER => self
                .broker_configs
                .entry(r.resource_name.clone())
                .or_default(),
            resource_type => return Err(ApplyError::ConfigResourceType { resource_type }),
        };
        match &r.value {
            Some(value) => configs.insert(r.name.clone(), value.clone()),
            None => configs.remove(&r.name),
        };
        if r.resource_type == CONFIG_RESOURCE_BROKER
            && self
                .broker_configs
                .get(&r.resource_name)
                .is_some_and(BTreeMap::is_empty)
        {
            // An empty override set is no override set: keeps images equal however reached.
            self.broker_configs.remove(&r.resource_name);
        }
        Ok(())
    }

    fn apply_remove_topic(&mut self, r: &RemoveTopicRecord) -> Result<(), ApplyError> {
        let name =
            self.topic_names_by_id
                .remove(&r.topic_id)
                .ok_or(ApplyError::UnknownTopicId {
                    topic_id: r.topic_id,
                })?;
        self.topics.remove(&name);
        Ok(())
    }

    fn apply_producer_ids(&mut self, r: &ProducerIdsRecord) -> Result<(), ApplyError> {
        let current = self.producer_ids.next_producer_id;
        if r.next_producer_id <= current {
            return Err(ApplyError::ProducerIdsBackwards {
                next_producer_id: r.next_producer_id,
                current,
            });
        }
        self.producer_ids.next_producer_id = r.next_producer_id;
        Ok(())
    }

    fn apply_register_broker(&mut self, r: &RegisterBrokerRecord) -> Result<(), ApplyError> {
        // Only the broker's own epoch is checked against the record: registrations of
        // different brokers in a snapshot come in broker-id order, not epoch order.
        if let Some(b) = self.brokers.get(&r.broker_id) {
            if r.broker_epoch <= b.broker_epoch {
                return Err(ApplyError::StaleBrokerEpoch {
                    broker_id: r.broker_id,
                    broker_epoch: r.broker_epoch,
                    current: b.broker_epoch,
                });
            }
        }
        self.next_broker_epoch = self.next_broker_epoch.max(r.broker_epoch.saturating_add(1));
        self.brokers.insert(
            r.broker_id,
            BrokerRegistration {
                incarnation_id: r.incarnation_id,
                broker_epoch: r.broker_epoch,
                end_points: r.end_points.clone(),
                rack: r.rack.clone(),
                fenced: r.fenced,
                in_controlled_shutdown: r.in_controlled_shutdown,
            },
        );
        Ok(())
    }

    /// Records that rebuild this image from an empty one named [`MetadataImage::cluster_id`]:
    /// what a snapshot holds (as KRaft snapshots hold records).
    pub fn to_records(&self) -> Vec<MetadataRecord> {
        let mut records: Vec<MetadataRecord> = self
            .features
            .iter()
            .map(|(name, level)| {
                MetadataRecord::FeatureLevel(FeatureLevelRecord {
                    name: name.clone(),
                    feature_level: *level,
                })
            })
            .collect();
        if self.next_broker_epoch > 0 {
            // First: the registrations that follow only move it up to where it already is.
            records.push(MetadataRecord::NextBrokerEpoch(NextBrokerEpochRecord {
                next_broker_epoch: self.next_broker_epoch,
            }));
        }
        for (broker_id, b) in &self.brokers {
            records.push(MetadataRecord::RegisterBroker(RegisterBrokerRecord {
                broker_id: *broker_id,
                incarnation_id: b.incarnation_id,
                broker_epoch: b.broker_epoch,
                end_points: b.end_points.clone(),
                rack: b.rack.clone(),
                fenced: b.fenced,
                in_controlled_shutdown: b.in_controlled_shutdown,
            }));
        }
        for (name, configs) in &self.broker_configs {
            records.extend(config_records(CONFIG_RESOURCE_BROKER, name, configs));
        }
        for (name, topic) in &self.topics {
            records.push(MetadataRecord::Topic(TopicRecord {
                name: name.clone(),
                topic_id: topic.id,
                internal: topic.internal,
            }));
            for (p, partition) in topic.partitions.iter().enumerate() {
                records.push(MetadataRecord::Partition(PartitionRecord {
                    partition_id: i32::try_from(p).expect("partition counts fit i32"),
                    topic_id: topic.id,
                    replicas: partition.replicas.clone(),
                    isr: partition.isr.clone(),
                    leader: partition.leader,
                    leader_epoch: partition.leader_epoch,
                    partition_epoch: partition.partition_epoch,
                    removing_replicas: partition.removing_replicas.clone(),
                    adding_replicas: partition.adding_replicas.clone(),
                }));
            }
            records.extend(config_records(CONFIG_RESOURCE_TOPIC, name, &topic.configs));
        }
        if self.producer_ids.next_producer_id > 0 {
            records.push(MetadataRecord::ProducerIds(ProducerIdsRecord {
                // The block's owner is not kept in the image; -1 says "restored from a snapshot".
                broker_id: -1,
                broker_epoch: -1,
                next_producer_id: self.producer_ids.next_producer_id,
            }));
        }
        for (entity, values) in &self.client_quotas {
            records.extend(values.iter().map(|(key, value)| {
                MetadataRecord::ClientQuota(ClientQuotaRecord {
                    entity: entity.clone(),
                    key: key.clone(),
                    value: *value,
                    remove: false,
                })
            }));
        }
        for (name, mechanisms) in &self.scram_credentials {
            records.extend(mechanisms.iter().map(|(mechanism, c)| {
                MetadataRecord::UserScramCredential(UserScramCredentialRecord {
                    name: name.clone(),
                    mechanism: mechanism.wire_type(),
                    salt: c.salt.clone(),
                    stored_key: c.stored_key.clone(),
                    server_key: c.server_key.clone(),
                    iterations: c.iterations,
                })
            }));
        }
        records.extend(self.acls.iter().map(|(id, binding)| {
            MetadataRecord::AccessControlEntry(AccessControlEntryRecord {
                id: *id,
                binding: binding.clone(),
            })
        }));
        records.extend(self.voter_endpoints.iter().map(|(node_id, endpoint)| {
            MetadataRecord::VoterEndpoint(VoterEndpointRecord {
                node_id: *node_id,
                endpoint: Some(endpoint.clone()),
            })
        }));
        records
    }
}

fn config_records<'a>(
    resource_type: i8,
    resource_name: &'a str,
    configs: &'a BTreeMap<String, String>,
) -> impl Iterator<Item = MetadataRecord> + 'a {
    configs.iter().map(move |(name, value)| {
        MetadataRecord::Config(ConfigRecord {
            resource_type,
            resource_name: resource_name.to_string(),
            name: name.clone(),
            value: Some(value.clone()),
        })
    })
}
