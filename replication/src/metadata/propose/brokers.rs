//! The broker lifecycle (KRaft's `ClusterControlManager`, KIP-631): registration (fenced,
//! with a new broker epoch), unfencing, fencing and controlled shutdown, which move the
//! broker's leaderships and ISR memberships off it; and producer-id blocks.

use super::elections::{elect_leader, partition_change};
use super::lookup::unclean_leader_election;
use crate::metadata::image::MetadataImage;
use crate::metadata::op::*;
use crate::metadata::record::{
    BrokerEndpoint, BrokerRegistrationChangeRecord, FenceBrokerRecord, MetadataRecord,
    ProducerIdsRecord, RegisterBrokerRecord, UnfenceBrokerRecord, UnregisterBrokerRecord,
};
use uuid::Uuid;

/// How many partitions `broker_id` leads in `image`.
pub fn leaderships(image: &MetadataImage, broker_id: i32) -> usize {
    image
        .topics
        .values()
        .flat_map(|t| &t.partitions)
        .filter(|p| p.leader == broker_id)
        .count()
}

/// The registration of `broker_id`, checked against `broker_epoch` when given. Errors:
/// [`ControllerError::UnknownBroker`], [`ControllerError::StaleBrokerEpoch`].
pub(super) fn registration(
    image: &MetadataImage,
    broker_id: i32,
    broker_epoch: Option<i64>,
) -> Result<&crate::metadata::BrokerRegistration, ControllerError> {
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
pub(super) fn register_broker(
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

/// The one place a broker leaves the partitions (fencing, controlled shutdown, a replaced or
/// removed registration; KRaft's `generateLeaderAndIsrUpdates` with a broker to remove): it
/// leaves every ISR, except where it is the sole member (Kafka keeps the last member, so the
/// partition can come back with it, and leaves it leaderless), and every partition it led
/// gets a new leader from the rest of the ISR that is active ([`elect_leader`]).
pub(super) fn remove_broker_from_partitions(
    image: &MetadataImage,
    broker_id: i32,
) -> Vec<MetadataRecord> {
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
pub(super) fn elect_leaderless(image: &MetadataImage, broker_id: i32) -> Vec<MetadataRecord> {
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

/// [`ControllerOp::AllocateProducerIds`]: the next block of [`PRODUCER_ID_BLOCK_SIZE`]
/// producer ids, owned by the proposing broker. Errors:
/// [`ControllerError::ProducerIdsExhausted`].
pub(super) fn allocate_producer_ids(
    image: &MetadataImage,
    ctx: &ProposeContext<'_>,
) -> Result<Vec<MetadataRecord>, ControllerError> {
    let start = image.producer_ids.next_producer_id;
    let next_producer_id =
        start
            .checked_add(PRODUCER_ID_BLOCK_SIZE)
            .ok_or(ControllerError::ProducerIdsExhausted {
                next_producer_id: start,
            })?;
    Ok(vec![MetadataRecord::ProducerIds(ProducerIdsRecord {
        broker_id: ctx.broker_id,
        broker_epoch: ctx.broker_epoch,
        next_producer_id,
    })])
}

/// [`ControllerOp::UnfenceBroker`]: unfences a fenced broker and, unless it is shutting down,
/// elects it where partitions have no leader. Nothing for an unfenced broker. Errors: an
/// unknown broker or a stale broker epoch.
pub(super) fn unfence_broker(
    image: &MetadataImage,
    broker_id: i32,
    broker_epoch: i64,
) -> Result<Vec<MetadataRecord>, ControllerError> {
    let b = registration(image, broker_id, Some(broker_epoch))?;
    if !b.fenced {
        return Ok(Vec::new());
    }
    let mut records = vec![MetadataRecord::UnfenceBroker(UnfenceBrokerRecord {
        broker_id,
        broker_epoch,
    })];
    if !b.in_controlled_shutdown {
        records.extend(elect_leaderless(image, broker_id));
    }
    Ok(records)
}

/// [`ControllerOp::FenceBroker`]: fences the broker (once) and moves its leaderships and ISR
/// memberships off it. Errors: an unknown broker.
pub(super) fn fence_broker(
    image: &MetadataImage,
    broker_id: i32,
) -> Result<Vec<MetadataRecord>, ControllerError> {
    let b = registration(image, broker_id, None)?;
    let mut records = Vec::new();
    if !b.fenced {
        records.push(MetadataRecord::FenceBroker(FenceBrokerRecord {
            broker_id,
            broker_epoch: b.broker_epoch,
        }));
    }
    records.extend(remove_broker_from_partitions(image, broker_id));
    Ok(records)
}

/// [`ControllerOp::ControlledShutdown`]: marks the broker as shutting down (once) and moves
/// its leaderships and ISR memberships off it. Errors: an unknown broker or a stale broker
/// epoch.
pub(super) fn controlled_shutdown(
    image: &MetadataImage,
    broker_id: i32,
    broker_epoch: i64,
) -> Result<Vec<MetadataRecord>, ControllerError> {
    let b = registration(image, broker_id, Some(broker_epoch))?;
    let mut records = Vec::new();
    if !b.in_controlled_shutdown {
        records.push(MetadataRecord::BrokerRegistrationChange(
            BrokerRegistrationChangeRecord {
                broker_id,
                broker_epoch,
                fenced: None,
                in_controlled_shutdown: Some(true),
            },
        ));
    }
    records.extend(remove_broker_from_partitions(image, broker_id));
    Ok(records)
}

/// [`ControllerOp::UnregisterBroker`]: moves the broker off its partitions, then removes its
/// registration. Errors: an unknown broker.
pub(super) fn unregister_broker(
    image: &MetadataImage,
    broker_id: i32,
) -> Result<Vec<MetadataRecord>, ControllerError> {
    let b = registration(image, broker_id, None)?;
    let mut records = remove_broker_from_partitions(image, broker_id);
    records.push(MetadataRecord::UnregisterBroker(UnregisterBrokerRecord {
        broker_id,
        broker_epoch: b.broker_epoch,
    }));
    Ok(records)
}
