//! The proposer: checks a [`ControllerOp`] against the current image and turns it into the
//! records that carry it out, or refuses it with a typed [`ControllerError`]. Pure, like
//! `apply`: the ids it needs (a new topic's uuid) come in a [`ProposeContext`], chosen by the
//! caller (the controller).

use super::image::{ApplyError, MetadataImage};
use super::record::{
    ConfigRecord, MetadataRecord, PartitionRecord, ProducerIdsRecord, RemoveTopicRecord,
    TopicRecord, CONFIG_RESOURCE_TOPIC,
};
use super::store::StoreError;
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

/// A metadata change, run by the controller one at a time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ControllerOp {
    /// `internal`: created by the broker itself (the group coordinator's offsets topic); only
    /// such a creation may use a name of [`INTERNAL_TOPIC_NAMES`].
    CreateTopic {
        name: String,
        partitions: i32,
        overrides: BTreeMap<String, String>,
        internal: bool,
        validate_only: bool,
    },
    DeleteTopic {
        name: String,
    },
    CreatePartitions {
        name: String,
        total: i32,
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
    /// Hand the next block of [`PRODUCER_ID_BLOCK_SIZE`] producer ids to the proposing broker.
    AllocateProducerIds,
}

impl ControllerOp {
    /// Whether the op only checks (CreateTopics, CreatePartitions and the config APIs'
    /// `validate_only`): its records are not appended.
    pub fn validate_only(&self) -> bool {
        match self {
            ControllerOp::CreateTopic { validate_only, .. }
            | ControllerOp::CreatePartitions { validate_only, .. }
            | ControllerOp::AlterTopicConfig { validate_only, .. }
            | ControllerOp::ReplaceTopicConfig { validate_only, .. } => *validate_only,
            ControllerOp::DeleteTopic { .. } | ControllerOp::AllocateProducerIds => false,
        }
    }
}

/// What a client may not do to an internal topic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
#[derive(Debug, thiserror::Error)]
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
    #[error("topic id {topic_id} is already taken")]
    TopicIdTaken { topic_id: Uuid },
    #[error("producer ids are exhausted (next block would start at {next_producer_id})")]
    ProducerIdsExhausted { next_producer_id: i64 },
    /// The proposed records do not apply to the image: a controller bug.
    #[error("proposed records do not apply: {0}")]
    Apply(#[from] ApplyError),
    #[error("saving cluster metadata: {0}")]
    Store(#[from] StoreError),
    /// The controller could not be reached or stopped.
    #[error("controller unavailable")]
    Unavailable,
}

/// Checks a topic's complete override set (Kafka names → values); `Err` says why it is
/// invalid. The broker's config model supplies it (the image does not know config keys).
pub type TopicConfigCheck<'a> = dyn Fn(&BTreeMap<String, String>) -> Result<(), String> + 'a;

/// What the proposer needs from its caller besides the op and the image.
pub struct ProposeContext<'a> {
    /// This broker: the replica and leader of new partitions, the owner of producer-id blocks.
    pub broker_id: i32,
    pub broker_epoch: i64,
    /// The id of a topic the op creates (the caller picks it at random).
    pub new_topic_id: Uuid,
    pub check_topic_config: &'a TopicConfigCheck<'a>,
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
            overrides,
            internal,
            validate_only: _,
        } => create_topic(image, ctx, name, *partitions, overrides, *internal),
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
            Ok((current..total)
                .map(|p| new_partition(topic.id, p, ctx.broker_id))
                .collect())
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
    }
}

fn create_topic(
    image: &MetadataImage,
    ctx: &ProposeContext<'_>,
    name: &str,
    partitions: i32,
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
    (ctx.check_topic_config)(overrides).map_err(|reason| ControllerError::InvalidConfig {
        topic: name.to_string(),
        reason,
    })?;
    let topic_id = ctx.new_topic_id;
    if image.topic_names_by_id.contains_key(&topic_id) || topic_id.is_nil() {
        return Err(ControllerError::TopicIdTaken { topic_id });
    }
    let count = usize::try_from(partitions).unwrap_or(0);
    let mut records = Vec::with_capacity(1 + count + overrides.len());
    records.push(MetadataRecord::Topic(TopicRecord {
        name: name.to_string(),
        topic_id,
        internal,
    }));
    records.extend((0..count).map(|p| new_partition(topic_id, p, ctx.broker_id)));
    records.extend(config_diff(name, &BTreeMap::new(), overrides));
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

/// A new partition led by `broker_id`, its only replica.
fn new_partition(topic_id: Uuid, partition: usize, broker_id: i32) -> MetadataRecord {
    MetadataRecord::Partition(PartitionRecord {
        partition_id: i32::try_from(partition).expect("partition counts are checked to fit i32"),
        topic_id,
        replicas: vec![broker_id],
        isr: vec![broker_id],
        leader: broker_id,
        leader_epoch: 0,
        partition_epoch: 0,
    })
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
    Ok(config_diff(name, &topic.configs, &configs).collect())
}

/// ConfigRecords that turn topic `name`'s overrides `from` into `to`.
fn config_diff<'a>(
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
            resource_type: CONFIG_RESOURCE_TOPIC,
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
