//! The metadata controller, on shard 0: validates and applies topic changes one at a time,
//! persists the new metadata, then publishes the snapshot to every shard before answering
//! (so a topic is usable on every shard as soon as CreateTopics returns). The Raft-replicated
//! controller replaces this single-node one later.

use crate::errors::code;
use crate::messages::{ControllerError, ControllerOp};
use crate::metadata::{place_partitions, validate_topic_name, ClusterMetadata, TopicMeta};
use crate::shard::Shard;
use glommio::sync::Semaphore;
use net::kafka_protocol::error::ResponseError;
use std::rc::Rc;
use std::sync::Arc;
use uuid::Uuid;

/// Most partitions one topic may have; a request above it is refused with INVALID_PARTITIONS
/// rather than creating unbounded state.
pub const PARTITIONS_PER_TOPIC_MAX: i32 = 10_000;

/// Controller state: the lock that serialises changes.
pub struct Controller {
    lock: Semaphore,
}

impl Controller {
    pub fn new() -> Controller {
        Controller {
            lock: Semaphore::new(1),
        }
    }
}

fn err(e: ResponseError, message: impl Into<String>) -> ControllerError {
    (code(e), message.into())
}

/// Applies `op`; `Err` carries Kafka's error code and a message for the client.
pub async fn run(shard: &Rc<Shard>, op: ControllerOp) -> Result<(), ControllerError> {
    let controller = shard
        .controller
        .as_ref()
        .expect("controller ops run on shard 0");
    let _permit = controller
        .lock
        .acquire_permit(1)
        .await
        .map_err(|_| err(ResponseError::UnknownServerError, "controller stopped"))?;
    let current = shard.metadata();
    let mut next: ClusterMetadata = (*current).clone();
    let defaults = &shard.config.topic_defaults;
    match op {
        ControllerOp::CreateTopic {
            name,
            partitions,
            overrides,
            validate_only,
        } => {
            validate_topic_name(&name).map_err(|m| err(ResponseError::InvalidTopicException, m))?;
            if next.topics.contains_key(&name) {
                return Err(err(
                    ResponseError::TopicAlreadyExists,
                    format!("topic '{name}' already exists"),
                ));
            }
            check_partition_count(partitions)?;
            let topic = TopicMeta {
                id: Uuid::new_v4(),
                partition_shards: Vec::new(),
                overrides,
            };
            topic
                .config(defaults)
                .map_err(|e| err(ResponseError::InvalidConfig, e.to_string()))?;
            if validate_only {
                return Ok(());
            }
            let count = usize::try_from(partitions).unwrap_or(0);
            let placed = place_partitions(&next, shard.shards, count);
            next.topics.insert(
                name,
                TopicMeta {
                    partition_shards: placed,
                    ..topic
                },
            );
        }
        ControllerOp::DeleteTopic { name } => {
            if next.topics.remove(&name).is_none() {
                return Err(err(
                    ResponseError::UnknownTopicOrPartition,
                    format!("topic '{name}' does not exist"),
                ));
            }
        }
        ControllerOp::CreatePartitions {
            name,
            total,
            validate_only,
        } => {
            let Some(topic) = next.topics.get(&name) else {
                return Err(err(
                    ResponseError::UnknownTopicOrPartition,
                    format!("topic '{name}' does not exist"),
                ));
            };
            let current_count = topic.partition_shards.len();
            check_partition_count(total)?;
            let total = usize::try_from(total).unwrap_or(0);
            if total <= current_count {
                return Err(err(
                    ResponseError::InvalidPartitions,
                    format!("topic '{name}' has {current_count} partitions; the new count must be larger"),
                ));
            }
            if validate_only {
                return Ok(());
            }
            let placed = place_partitions(&next, shard.shards, total - current_count);
            next.topics
                .get_mut(&name)
                .expect("checked above")
                .partition_shards
                .extend(placed);
        }
        ControllerOp::AlterTopicConfig {
            name,
            changes,
            validate_only,
        } => {
            let applied = change_overrides(&mut next, &name, defaults, validate_only, |o| {
                for (key, value) in changes {
                    match value {
                        Some(value) => o.insert(key, value),
                        None => o.remove(&key),
                    };
                }
            })?;
            if !applied {
                return Ok(());
            }
        }
        ControllerOp::ReplaceTopicConfig {
            name,
            overrides,
            validate_only,
        } => {
            let applied = change_overrides(&mut next, &name, defaults, validate_only, |o| {
                *o = overrides;
            })?;
            if !applied {
                return Ok(());
            }
        }
    }
    next.version += 1;
    save(shard, &next).await?;
    shard.publish_metadata(Arc::new(next)).await;
    Ok(())
}

/// Hands out the next producer id, persisted before it is returned so that no id is given
/// twice, even across restarts. Only shard 0 needs the counter, so the new metadata is
/// installed there without being published to the other shards.
pub async fn allocate_producer_id(shard: &Rc<Shard>) -> Result<i64, ControllerError> {
    let controller = shard
        .controller
        .as_ref()
        .expect("controller ops run on shard 0");
    let _permit = controller
        .lock
        .acquire_permit(1)
        .await
        .map_err(|_| err(ResponseError::UnknownServerError, "controller stopped"))?;
    let mut next: ClusterMetadata = (*shard.metadata()).clone();
    let id = next.next_producer_id;
    next.next_producer_id += 1;
    save(shard, &next).await?;
    *shard.metadata.borrow_mut() = Arc::new(next);
    Ok(id)
}

/// Writes `meta` durably (on the blocking pool) before anyone relies on it.
async fn save(shard: &Shard, meta: &ClusterMetadata) -> Result<(), ControllerError> {
    let data_dir = shard.config.data_dir.clone();
    let to_save = meta.clone();
    glommio::executor()
        .spawn_blocking(move || to_save.save_blocking(&data_dir))
        .await
        .map_err(|e| {
            err(
                ResponseError::KafkaStorageError,
                format!("saving cluster metadata: {e}"),
            )
        })
}

/// Applies `change` to the overrides of topic `name` in `next` once the changed config checks
/// out against `defaults`; `Ok(false)` when `validate_only` (nothing changed). Errors:
/// `UNKNOWN_TOPIC_OR_PARTITION`, `INVALID_CONFIG`.
fn change_overrides(
    next: &mut ClusterMetadata,
    name: &str,
    defaults: &tuning::config::TopicConfig,
    validate_only: bool,
    change: impl FnOnce(&mut std::collections::BTreeMap<String, String>),
) -> Result<bool, ControllerError> {
    let Some(topic) = next.topics.get_mut(name) else {
        return Err(err(
            ResponseError::UnknownTopicOrPartition,
            format!("topic '{name}' does not exist"),
        ));
    };
    let mut candidate = topic.clone();
    change(&mut candidate.overrides);
    candidate
        .config(defaults)
        .map_err(|e| err(ResponseError::InvalidConfig, e.to_string()))?;
    if validate_only {
        return Ok(false);
    }
    *topic = candidate;
    Ok(true)
}

fn check_partition_count(partitions: i32) -> Result<(), ControllerError> {
    if !(1..=PARTITIONS_PER_TOPIC_MAX).contains(&partitions) {
        return Err(err(
            ResponseError::InvalidPartitions,
            format!("partition count {partitions} is outside 1..={PARTITIONS_PER_TOPIC_MAX}"),
        ));
    }
    Ok(())
}
