//! Topics and their partitions (KRaft's `ReplicationControlManager`, topic side): name rules,
//! the internal-topic check, CreateTopics, DeleteTopics and CreatePartitions; replicas are
//! placed by `super::placement` (KIP-36).

use super::configs::config_diff;
use super::lookup::{check_not_internal, existing};
use crate::metadata::image::MetadataImage;
use crate::metadata::op::*;
use crate::metadata::record::{
    MetadataRecord, PartitionRecord, RemoveTopicRecord, TopicRecord, CONFIG_RESOURCE_TOPIC,
};
use std::collections::BTreeMap;
use uuid::Uuid;

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

pub(super) fn create_topic(
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

/// A new partition on `replicas`: its ISR is the replicas that are active (registered,
/// unfenced, not shutting down; every one with the placement), its leader the first of them,
/// as KRaft's `ReplicationControlManager` builds it. Errors:
/// [`ControllerError::InvalidReplicaAssignment`] when none is active (a manual assignment of
/// fenced brokers only).
pub(super) fn new_partition(
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
        removing_replicas: Vec::new(),
        adding_replicas: Vec::new(),
    }))
}

/// The replica lists of a manual assignment, one per partition of `partitions`, once every
/// broker in them is registered (Kafka's check; the handler has checked the lists' shape).
/// Errors: [`ControllerError::InvalidReplicaAssignment`] naming the unknown broker.
pub(super) fn manual_assignment(
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

/// The replicas of each partition in `partitions` with `replication_factor` replicas (-1: the
/// context's default), placed on the active brokers (registered, unfenced, not in controlled
/// shutdown) rack by rack (KIP-36, see `super::placement`): partition `p` is the placer's
/// partition `placement_seed + p`, so its replicas span `min(RF, racks)` racks and leaders (the
/// first replica) spread; without racks, the brokers sorted by id from
/// `(placement_seed + p) mod n` on. Errors: [`ControllerError::InvalidReplicationFactor`] for
/// a factor below 1 or above the active brokers.
pub fn place_replicas(
    image: &MetadataImage,
    ctx: &ProposeContext<'_>,
    replication_factor: i16,
    partitions: std::ops::Range<usize>,
) -> Result<Vec<Vec<i32>>, ControllerError> {
    let active: Vec<(i32, Option<&str>)> = image
        .brokers
        .iter()
        .filter(|(_, b)| b.is_active())
        .map(|(id, b)| (*id, b.rack.as_deref()))
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
    let racks = super::placement::group_by_rack(active);
    // `n` is at least 1 here; the seed is reduced first so the sums cannot overflow.
    let start = usize::try_from(ctx.placement_seed % n as u64).unwrap_or(0);
    Ok(partitions
        .map(|p| super::placement::striped(&racks, start + p, count))
        .collect())
}

pub(super) fn check_partition_count(partitions: i32) -> Result<(), ControllerError> {
    if !(1..=PARTITIONS_PER_TOPIC_MAX).contains(&partitions) {
        return Err(ControllerError::PartitionCountOutOfRange { count: partitions });
    }
    Ok(())
}

/// [`ControllerOp::DeleteTopic`]: the topic's removal. Errors:
/// [`ControllerError::InternalTopic`], an unknown topic.
pub(super) fn delete_topic(
    image: &MetadataImage,
    name: &str,
) -> Result<Vec<MetadataRecord>, ControllerError> {
    check_not_internal(image, name, TopicOperation::Delete)?;
    let topic = existing(image, name)?;
    Ok(vec![MetadataRecord::RemoveTopic(RemoveTopicRecord {
        topic_id: topic.id,
    })])
}

/// [`ControllerOp::CreatePartitions`]: the new partitions up to `total`, placed by
/// `assignment` or round-robin with the topic's replication factor. Errors: an unknown or
/// internal topic, a count out of range or not above the current one, a bad assignment or
/// replication factor.
pub(super) fn create_partitions(
    image: &MetadataImage,
    ctx: &ProposeContext<'_>,
    name: &str,
    total: i32,
    assignment: Option<&[Vec<i32>]>,
) -> Result<Vec<MetadataRecord>, ControllerError> {
    let topic = existing(image, name)?;
    check_not_internal(image, name, TopicOperation::CreatePartitions)?;
    let current = topic.partitions.len();
    check_partition_count(total)?;
    let total = usize::try_from(total).unwrap_or(0);
    if total <= current {
        return Err(ControllerError::PartitionCountNotIncreased {
            topic: name.to_string(),
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
