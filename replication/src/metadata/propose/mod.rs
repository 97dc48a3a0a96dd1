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
//! partitions are placed over the active brokers rack by rack (KIP-36, after KRaft's
//! `StripedReplicaPlacer`; `placement`).
//!
//! AlterPartitionReassignments ([`alter_partition_reassignments`], KIP-455) follows KRaft's
//! reassignment steps; the AlterPartition that brings the last added replica into the ISR
//! completes it.
//!
//! ElectLeaders ([`elect_leaders`]) follows `ReplicationControlManager::electLeaders` and
//! `PartitionChangeBuilder`'s preferred and unclean elections (KIP-183, KIP-460), without
//! eligible leader replicas (KIP-966).
//!
//! Files by concern, as KRaft's control managers: `topics` (topics, partitions), `placement` (rack-aware replica placement),
//! `brokers` (the broker lifecycle, producer ids), `elections` (AlterPartition, ElectLeaders), `reassignments` (KIP-455),
//! `balance` (which leaders to move back, `auto.leader.rebalance.enable`), `features`
//! (finalized features, UpdateFeatures), `acls` (CreateAcls, DeleteAcls), `quotas`
//! (AlterClientQuotas), `scram` (AlterUserScramCredentials) and `configs`; this one dispatches an op to them. The op vocabulary is
//! in `super::op`.
//!
//! Limits: fencing and shutdown scan every partition (Kafka keeps a broker → ISR index).

mod acls;
mod balance;
mod brokers;
mod configs;
mod elections;
mod features;
mod lookup;
mod placement;
mod quotas;
mod reassignments;
mod scram;
mod topics;

pub use balance::{partitions_to_balance, ELECTIONS_PER_BALANCE_MAX};
pub use brokers::leaderships;
pub use elections::elect_leaders;
pub use features::{
    finalized_features, transaction_version, METADATA_VERSION, METADATA_VERSION_BOOTSTRAP,
    SUPPORTED_FEATURES, TRANSACTION_VERSION_MAX,
};
pub use lookup::{check_not_internal, check_topic_not_internal, is_internal};
pub use reassignments::alter_partition_reassignments;
pub use topics::{place_replicas, validate_topic_name};

use super::image::MetadataImage;
use super::op::*;
use super::record::MetadataRecord;
use brokers::*;
use configs::*;
use elections::*;
use topics::*;

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
        ControllerOp::DeleteTopic { name } => delete_topic(image, name),
        ControllerOp::CreatePartitions {
            name,
            total,
            assignment,
            validate_only: _,
        } => create_partitions(image, ctx, name, *total, assignment.as_deref()),
        ControllerOp::AlterTopicConfig {
            name,
            changes,
            validate_only: _,
        } => alter_topic_config(image, ctx, name, changes),
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
        ControllerOp::AllocateProducerIds => allocate_producer_ids(image, ctx),
        ControllerOp::RegisterBroker {
            broker_id,
            incarnation_id,
            end_points,
            rack,
        } => register_broker(image, ctx, *broker_id, *incarnation_id, end_points, rack),
        ControllerOp::UnfenceBroker {
            broker_id,
            broker_epoch,
        } => unfence_broker(image, *broker_id, *broker_epoch),
        ControllerOp::FenceBroker { broker_id } => fence_broker(image, *broker_id),
        ControllerOp::ControlledShutdown {
            broker_id,
            broker_epoch,
        } => controlled_shutdown(image, *broker_id, *broker_epoch),
        ControllerOp::UnregisterBroker { broker_id } => unregister_broker(image, *broker_id),
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
        ControllerOp::AlterPartitionReassignments {
            topics,
            allow_replication_factor_change,
        } => Ok(alter_partition_reassignments(image, topics, *allow_replication_factor_change).0),
        ControllerOp::UpdateFeatures {
            updates,
            validate_only: _,
        } => features::update_features(image, ctx.controller_id, updates),
        ControllerOp::CreateAcls { creations } => Ok(acls::create_acls(image, ctx, creations)),
        ControllerOp::DeleteAcls { filters } => acls::delete_acls(image, filters),
        ControllerOp::AlterClientQuotas { entries, .. } => Ok(quotas::alter(image, entries).0),
        ControllerOp::AlterUserScramCredentials {
            deletions,
            upsertions,
        } => Ok(scram::alter(image, deletions, upsertions).0),
    }
}

impl ControllerOp {
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
            ControllerOp::AlterPartitionReassignments {
                topics,
                allow_replication_factor_change,
            } => ControllerAnswer::AlterPartitionReassignments {
                results: alter_partition_reassignments(
                    before,
                    topics,
                    *allow_replication_factor_change,
                )
                .1,
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
            ControllerOp::CreateAcls { creations } => ControllerAnswer::CreateAcls {
                results: acls::create_results(creations),
            },
            ControllerOp::DeleteAcls { filters } => ControllerAnswer::DeleteAcls {
                results: acls::delete_results(before, filters),
            },
            ControllerOp::AlterClientQuotas { entries, .. } => {
                ControllerAnswer::AlterClientQuotas {
                    results: quotas::alter(before, entries).1,
                }
            }
            ControllerOp::AlterUserScramCredentials {
                deletions,
                upsertions,
            } => ControllerAnswer::AlterUserScramCredentials {
                results: scram::alter(before, deletions, upsertions).1,
            },
            _ => ControllerAnswer::Done,
        }
    }
}
