//! Leader elections and ISR changes (KRaft's `ReplicationControlManager` with
//! `PartitionChangeBuilder`): AlterPartition, ElectLeaders (preferred and unclean, KIP-183,
//! KIP-460), and the election that leaders come from the ISR unless the topic's
//! `unclean.leader.election.enable` says otherwise.

use super::lookup::{existing, unclean_leader_election};
use super::reassignments::{change_record, PartitionTarget};
use crate::metadata::image::{MetadataImage, PartitionImage};
use crate::metadata::op::*;
use crate::metadata::record::{MetadataRecord, PartitionChangeRecord};
use uuid::Uuid;

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
pub(super) fn elect_one(
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
pub(super) fn alter_partition(
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
    check_alter_epochs(
        p,
        topic,
        partition_id,
        broker_id,
        (leader_epoch, partition_epoch),
    )?;
    check_new_isr(image, p, topic, partition_id, new_isr)?;
    // Kafka's `PartitionChangeBuilder`: the new ISR may complete a reassignment (KIP-455),
    // which can move the leadership off the sender (answered as a new leader).
    let mut target = PartitionTarget::with_isr(p, new_isr.to_vec());
    target.unclean = unclean_leader_election(image, t);
    Ok(change_record(image, (t.id, partition_id), p, target)
        .into_iter()
        .collect())
}

/// AlterPartition's epoch and leader checks, in Kafka's order: epochs ahead of the image,
/// a fenced leader epoch, a sender that is not the leader, a stale partition epoch.
fn check_alter_epochs(
    p: &PartitionImage,
    topic: &str,
    partition_id: i32,
    broker_id: i32,
    (leader_epoch, partition_epoch): (i32, i32),
) -> Result<(), ControllerError> {
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
    Ok(())
}

/// AlterPartition's checks of the proposed ISR: distinct members, all replicas, the leader
/// among them, each registered, unfenced and not shutting down.
fn check_new_isr(
    image: &MetadataImage,
    p: &PartitionImage,
    topic: &str,
    partition_id: i32,
    new_isr: &[i32],
) -> Result<(), ControllerError> {
    let name = || topic.to_string();
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
    Ok(())
}

/// Kafka's `PartitionChangeBuilder::electLeader`: the first replica (preferred order) in `isr`
/// that `acceptable` allows; else, with `unclean`, the first acceptable replica, and the ISR
/// becomes just it; else no leader (-1) and the ISR unchanged. Returns (leader, ISR).
pub(super) fn elect_leader(
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
pub(super) fn partition_change(
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
        removing_replicas: None,
        adding_replicas: None,
    }))
}
