//! The cluster metadata state machine (KRaft's shape): a [`MetadataImage`], the
//! [`MetadataRecord`]s that change it, the pure [`MetadataImage::apply`], the [`propose`]r that
//! turns a [`ControllerOp`] into records or a typed [`ControllerError`], and the
//! [`MetadataStore`] that keeps the records durable (log + snapshot), and the active
//! controller's [`BrokerHeartbeats`] (broker sessions, not replicated).
//!
//! The controller (shard 0 of the broker today; a Raft group later, with the same records)
//! runs each op as: propose against the image → append the records durably → apply them →
//! publish the new image. `apply` does no I/O and reads no clock or randomness: every id and
//! uuid is chosen by the proposer and carried in the records, so every replica of the log
//! derives the same image.
//!
//! The broker lifecycle (KIP-631): [`ControllerOp::RegisterBroker`] (fenced, new broker
//! epoch), [`ControllerOp::UnfenceBroker`], [`ControllerOp::FenceBroker`] when
//! [`BrokerHeartbeats::expired`] names it, [`ControllerOp::ControlledShutdown`]; each moves
//! leaderships and ISRs so that a leader is always an active broker of its ISR. New
//! partitions are placed over the active brokers rack by rack, KIP-36 ([`place_replicas`]).
//!
//! Node-local concerns (which shard of a broker serves a partition) are not in the image:
//! each broker derives them from it.

pub mod acl;
pub mod authorizer;
mod heartbeats;
mod image;
mod op;
mod propose;
pub mod quotas;
mod raft_machine;
mod record;
mod request;
pub mod scram;
mod store;

pub use heartbeats::BrokerHeartbeats;
pub use image::{
    ApplyError, BrokerRegistration, MetadataImage, PartitionImage, ProducerIdsImage, TopicImage,
};
pub use op::{
    BrokerConfigCheck, BrokerSessionLive, ControllerAnswer, ControllerError, ControllerOp,
    ElectionError, ElectionType, FeatureUpdate, ProposeContext, ReassignmentError,
    TopicConfigCheck, TopicElectionResults, TopicOperation, TopicReassignmentResults,
    TopicReassignments, UpgradeType, ACL_RECORDS_PER_OP_MAX, CONSUMER_OFFSETS_TOPIC,
    INTERNAL_TOPIC_NAMES, PARTITIONS_PER_TOPIC_MAX, PRODUCER_ID_BLOCK_SIZE,
    UNCLEAN_LEADER_ELECTION_ENABLE,
};
pub use propose::{
    alter_partition_reassignments, check_not_internal, check_topic_not_internal, elect_leaders,
    finalized_features, is_internal, leaderships, partitions_to_balance, place_replicas, propose,
    transaction_version, validate_topic_name, ELECTIONS_PER_BALANCE_MAX, METADATA_VERSION,
    METADATA_VERSION_BOOTSTRAP, SUPPORTED_FEATURES, TRANSACTION_VERSION_MAX,
};
pub use raft_machine::{
    apply_entry, decode_entry, decode_snapshot, encode_entry, encode_snapshot, recover_image,
    EntryError, EntryOutcome, MetadataStateMachine, MetadataView, ENTRY_FORMAT_VERSION,
    OUTCOMES_MAX, TAIL_BYTES_MAX, TAIL_ENTRIES_MAX,
};
pub use record::{
    AccessControlEntryRecord, BrokerEndpoint, BrokerRegistrationChangeRecord, ClusterIdRecord,
    ConfigRecord, FeatureLevelRecord, FenceBrokerRecord, MetadataRecord, NextBrokerEpochRecord,
    PartitionChangeRecord, PartitionRecord, ProducerIdsRecord, RegisterBrokerRecord,
    RemoveAccessControlEntryRecord, RemoveTopicRecord, RemoveUserScramCredentialRecord,
    TopicRecord, UnfenceBrokerRecord, UnregisterBrokerRecord, UserScramCredentialRecord,
    VoterEndpointRecord, CONFIG_RESOURCE_BROKER, CONFIG_RESOURCE_TOPIC,
};
pub use request::{
    ControllerReply, ControllerRequest, FetchedEntry, FetchedMetadata, MetadataFetch,
    QuorumDescription, ReplicaDescription,
};
pub use store::{
    decode_files, MetadataStore, Opened, StoreError, FRAME_BYTES_MAX, LOG_FILE_NAME,
    SNAPSHOT_FILE_NAME, SNAPSHOT_LOG_BYTES,
};

#[cfg(test)]
mod cluster_sim_tests;
#[cfg(test)]
mod lifecycle_tests;
#[cfg(test)]
mod model_tests;
