//! Partition reassignments (KIP-455), as KRaft's `ReplicationControlManager::
//! alterPartitionReassignments` with `PartitionReassignmentReplicas`,
//! `PartitionReassignmentRevert` and the part of `PartitionChangeBuilder` that completes a
//! reassignment ([`change_record`], also what AlterPartition builds its record with).
//!
//! A reassignment of a partition from its current replicas to a target goes in three steps:
//! 1. one `PartitionChangeRecord` sets replicas = target followed by (current − target),
//!    `adding_replicas` = target − current, `removing_replicas` = current − target; the
//!    brokers of the added replicas create them and fetch from the leader;
//! 2. the leader takes each caught-up added replica into the ISR (AlterPartition);
//! 3. once the ISR holds the whole target, the same change completes it: replicas = target,
//!    ISR ∩ target, both lists cleared, and a new leader epoch — a new leader from the target
//!    when the leader was being removed. The brokers of removed replicas delete them.
//!
//! A target the ISR already holds (a reorder, a replica count decrease) completes in step 1.
//! A cancellation (a null target) goes back to the original replicas and drops the added ones
//! from the ISR.
//!
//! Invariants of a [`PartitionImage`] these changes keep: `adding_replicas` and
//! `removing_replicas` are disjoint subsets of `replicas`, both empty or not as a reassignment
//! is in progress or not, and the ISR is a non-empty subset of `replicas` holding the leader
//! (when there is one).
//!
//! Differences from Kafka: a new target replaces an ongoing reassignment's lists whole (Kafka
//! keeps the old list when the new one would be empty); a partition named twice in one
//! request is changed twice, the second against the first's result (Kafka computes both
//! against the state before the request).

use super::lookup::unclean_leader_election;
use crate::metadata::image::{MetadataImage, PartitionImage};
use crate::metadata::op::*;
use crate::metadata::record::{MetadataRecord, PartitionChangeRecord};
use std::collections::BTreeSet;
use uuid::Uuid;

/// What a partition should become; [`change_record`] completes a reassignment, elects and
/// writes the difference.
pub(super) struct PartitionTarget {
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub adding: Vec<i32>,
    pub removing: Vec<i32>,
    /// Elect outside the ISR when no ISR member may lead (the topic's
    /// `unclean.leader.election.enable`).
    pub unclean: bool,
}

impl PartitionTarget {
    /// The partition as it is, with `isr` as its new ISR.
    pub fn with_isr(p: &PartitionImage, isr: Vec<i32>) -> PartitionTarget {
        PartitionTarget {
            replicas: p.replicas.clone(),
            isr,
            adding: p.adding_replicas.clone(),
            removing: p.removing_replicas.clone(),
            unclean: false,
        }
    }

    /// Kafka's `PartitionReassignmentReplicas.maybeCompleteReassignment`: when a reassignment
    /// is in progress and the ISR without the removed replicas holds every replica left, those
    /// become the replicas and the ISR, and the lists are cleared.
    fn complete_reassignment_if_needed(&mut self) {
        if self.adding.is_empty() && self.removing.is_empty() {
            return;
        }
        let kept = |list: &[i32]| -> Vec<i32> {
            list.iter()
                .copied()
                .filter(|r| !self.removing.contains(r))
                .collect()
        };
        let (isr, replicas) = (kept(&self.isr), kept(&self.replicas));
        if isr.is_empty() || replicas.is_empty() || !replicas.iter().all(|r| isr.contains(r)) {
            return;
        }
        self.isr = isr;
        self.replicas = replicas;
        self.adding.clear();
        self.removing.clear();
    }
}

/// Kafka's `PartitionChangeBuilder.build` without eligible leader replicas: completes a
/// reassignment the target allows, keeps the leader while it is an active member of the new
/// ISR or else elects the first active ISR member in replica order (with `unclean`, any
/// active replica, the ISR becoming just it), bumps the leader epoch when replicas leave, and
/// returns the record of what differs from `p` — `None` when nothing does.
pub(super) fn change_record(
    image: &MetadataImage,
    (topic_id, partition_id): (Uuid, i32),
    p: &PartitionImage,
    mut target: PartitionTarget,
) -> Option<MetadataRecord> {
    target.complete_reassignment_if_needed();
    let active = |b: i32| image.brokers.get(&b).is_some_and(|r| r.is_active());
    let valid = |b: i32| target.isr.contains(&b) && active(b);
    let keep = valid(p.leader);
    let clean = target.replicas.iter().copied().find(|&r| valid(r));
    let unclean = target
        .replicas
        .iter()
        .copied()
        .find(|&r| target.unclean && active(r));
    let leader = match (keep, clean, unclean) {
        (true, _, _) => p.leader,
        (false, Some(r), _) => r,
        (false, None, Some(r)) => {
            // An unclean election: the ISR becomes just the new leader (data loss).
            target.isr = vec![r];
            r
        }
        (false, None, None) => -1,
    };
    // Kafka's `triggerLeaderEpochBumpForReplicaReassignmentIfNeeded`: a replica that leaves
    // is fenced by a new leader epoch (the same leader set again).
    let leader_changed =
        leader != p.leader || !p.replicas.iter().all(|r| target.replicas.contains(r));
    let record = PartitionChangeRecord {
        partition_id,
        topic_id,
        isr: (!target.isr.is_empty() && target.isr != p.isr).then_some(target.isr),
        leader: leader_changed.then_some(leader),
        replicas: (!target.replicas.is_empty() && target.replicas != p.replicas)
            .then_some(target.replicas),
        removing_replicas: (target.removing != p.removing_replicas).then_some(target.removing),
        adding_replicas: (target.adding != p.adding_replicas).then_some(target.adding),
    };
    let no_op = record.isr.is_none()
        && record.leader.is_none()
        && record.replicas.is_none()
        && record.removing_replicas.is_none()
        && record.adding_replicas.is_none();
    (!no_op).then_some(MetadataRecord::PartitionChange(record))
}

/// [`ControllerOp::AlterPartitionReassignments`] on `image`: the records, in request order,
/// and each partition's result. Each partition is checked against the image as the records
/// before it leave it.
pub fn alter_partition_reassignments(
    image: &MetadataImage,
    topics: &[TopicReassignments],
    allow_replication_factor_change: bool,
) -> (Vec<MetadataRecord>, Vec<TopicReassignmentResults>) {
    let mut scratch = image.clone();
    let mut records = Vec::new();
    let mut results = Vec::new();
    for (topic, partitions) in topics {
        let mut out = Vec::with_capacity(partitions.len());
        for (partition, target) in partitions {
            let result = reassign_one(
                &scratch,
                topic,
                *partition,
                target.as_deref(),
                allow_replication_factor_change,
            );
            let result = match result {
                Ok(Some(record)) => match scratch.apply(&record) {
                    Ok(()) => {
                        records.push(record);
                        Ok(())
                    }
                    // The proposer's own record does not apply: refuse this partition only.
                    Err(e) => Err(ReassignmentError::InvalidReplicaAssignment {
                        reason: e.to_string(),
                    }),
                },
                Ok(None) => Ok(()),
                Err(e) => Err(e),
            };
            out.push((*partition, result));
        }
        results.push(TopicReassignmentResults {
            topic: topic.clone(),
            partitions: out,
        });
    }
    (records, results)
}

/// One partition of [`alter_partition_reassignments`] (Kafka's `alterPartitionReassignment`).
fn reassign_one(
    image: &MetadataImage,
    topic: &str,
    partition_id: i32,
    target: Option<&[i32]>,
    allow_replication_factor_change: bool,
) -> Result<Option<MetadataRecord>, ReassignmentError> {
    let t = image
        .topics
        .get(topic)
        .ok_or_else(|| ReassignmentError::UnknownTopic {
            topic: topic.to_string(),
        })?;
    let p = usize::try_from(partition_id)
        .ok()
        .and_then(|i| t.partitions.get(i))
        .ok_or_else(|| ReassignmentError::UnknownPartition {
            topic: topic.to_string(),
            partition: partition_id,
        })?;
    let unclean = unclean_leader_election(image, t);
    let target = match target {
        None => revert_target(p, topic, partition_id, unclean)?,
        Some(target) => {
            check_target(image, target)?;
            let original = p.original_replicas().len();
            if !allow_replication_factor_change && target.len() != original {
                return Err(ReassignmentError::InvalidReplicationFactor {
                    current: original,
                    target: target.len(),
                });
            }
            reassignment_target(p, target)
        }
    };
    Ok(change_record(image, (t.id, partition_id), p, target))
}

/// Kafka's `validateManualPartitionAssignment` for a reassignment: not empty, every broker
/// registered, none twice (Kafka's messages).
fn check_target(image: &MetadataImage, target: &[i32]) -> Result<(), ReassignmentError> {
    let invalid = |reason: String| ReassignmentError::InvalidReplicaAssignment { reason };
    if target.is_empty() {
        return Err(invalid(
            "The manual partition assignment includes an empty replica list.".to_string(),
        ));
    }
    let mut sorted = target.to_vec();
    sorted.sort_unstable();
    for (i, &broker) in sorted.iter().enumerate() {
        if !image.brokers.contains_key(&broker) {
            return Err(invalid(format!(
                "The manual partition assignment includes broker {broker}, but no such broker \
                 is registered."
            )));
        }
        if i > 0 && sorted[i - 1] == broker {
            return Err(invalid(format!(
                "The manual partition assignment includes the broker {broker} more than once."
            )));
        }
    }
    Ok(())
}

/// Kafka's `PartitionReassignmentReplicas(current, target)`: replicas = target followed by
/// the current ones it drops; adding and removing in broker-id order.
fn reassignment_target(p: &PartitionImage, target: &[i32]) -> PartitionTarget {
    let current: BTreeSet<i32> = p.replicas.iter().copied().collect();
    let wanted: BTreeSet<i32> = target.iter().copied().collect();
    let removing: Vec<i32> = current.difference(&wanted).copied().collect();
    let adding: Vec<i32> = wanted.difference(&current).copied().collect();
    let mut replicas = target.to_vec();
    replicas.extend(&removing);
    PartitionTarget {
        replicas,
        isr: p.isr.clone(),
        adding,
        removing,
        unclean: false,
    }
}

/// Kafka's `PartitionReassignmentRevert` with `cancelPartitionReassignment`'s checks: the
/// original replicas, the ISR without the added ones — or, when only added replicas were in
/// sync, the first original replica, which needs an unclean election.
fn revert_target(
    p: &PartitionImage,
    topic: &str,
    partition_id: i32,
    unclean: bool,
) -> Result<PartitionTarget, ReassignmentError> {
    if !p.is_reassigning() {
        return Err(ReassignmentError::NoReassignmentInProgress);
    }
    let replicas = p.original_replicas();
    let mut isr: Vec<i32> = p
        .isr
        .iter()
        .copied()
        .filter(|r| !p.adding_replicas.contains(r))
        .collect();
    if isr.is_empty() {
        let Some(&first) = replicas.first() else {
            return Err(ReassignmentError::InvalidReplicaAssignment {
                reason: "Invalid replica assignment: addingReplicas contains all replicas."
                    .to_string(),
            });
        };
        if !unclean {
            return Err(ReassignmentError::InvalidReplicaAssignment {
                reason: format!(
                    "Unable to revert partition assignment for {topic}:{partition_id} because \
                     it would require an unclean leader election."
                ),
            });
        }
        isr.push(first);
    }
    Ok(PartitionTarget {
        replicas,
        isr,
        adding: Vec::new(),
        removing: Vec::new(),
        unclean,
    })
}
