//! CreatePartitions (key 37), v0–3: grows a topic to `count` partitions. The controller places
//! the new partitions (or takes the manual replica assignments, checked as Kafka checks them:
//! registered brokers, the topic's replication factor) and returns once every owning shard
//! has opened them.

use super::replica_assignment;
use super::wire::{str_bytes, topic_name};
use crate::authz::{self, AclOperation};
use crate::errors::{code, controller_error};
use crate::session::Session;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::create_partitions_request::CreatePartitionsAssignment;
use net::kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use net::kafka_protocol::messages::BrokerId;
use net::kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use replication::metadata::{check_not_internal, ControllerOp, TopicOperation};
use std::collections::BTreeMap;
use std::rc::Rc;

/// Checks the manual assignments of the partitions that growing `name` to `count` adds:
/// one replica list per new partition, each of registered brokers with the topic's
/// replication factor. `None` when they are fine, or when the topic or the count is
/// wrong (the controller refuses those with its own errors, as Kafka checks them first).
fn check_assignments(
    shard: &Shard,
    name: &str,
    count: i32,
    assignments: &[CreatePartitionsAssignment],
) -> Option<replica_assignment::Refusal> {
    let meta = shard.metadata();
    let topic = meta.topics.get(name)?;
    let current = topic.partitions.len();
    let replication = topic.partitions.first().map(|p| p.replicas.len());
    let added = usize::try_from(count).ok()?.checked_sub(current)?;
    if added == 0 {
        return None;
    }
    if assignments.len() != added {
        return Some((
            code(ResponseError::InvalidReplicaAssignment),
            format!(
                "Attempted to add {added} additional partition(s), but only {} assignment(s) \
                 were specified.",
                assignments.len()
            ),
        ));
    }
    let lists: Vec<&[BrokerId]> = assignments
        .iter()
        .map(|a| a.broker_ids.as_slice())
        .collect();
    let brokers: Vec<i32> = meta.brokers.keys().copied().collect();
    replica_assignment::check(&lists, &brokers, replication).err()
}

pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    // Kafka refuses a topic given twice in one request (INVALID_REQUEST for each copy).
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for topic in &req.topics {
        *seen.entry(topic.name.0.to_string()).or_default() += 1;
    }
    let mut response = CreatePartitionsResponse::default();
    for topic in req.topics {
        let name = topic.name.0.to_string();
        let outcome = if seen.get(&name).copied().unwrap_or(0) > 1 {
            Err((
                code(ResponseError::InvalidRequest),
                format!("topic '{name}' is named more than once in the request"),
            ))
        } else if !authz::topic(shard, session, AclOperation::Alter, &name) {
            // Kafka: ALTER on the topic (`crate::authz`).
            Err((
                code(ResponseError::TopicAuthorizationFailed),
                "Authorization failed.".to_string(),
            ))
        } else if let Err(e) =
            check_not_internal(&shard.metadata(), &name, TopicOperation::CreatePartitions)
        {
            // More partitions would move groups away from their stored offsets.
            Err(controller_error(&e))
        } else if let Some(refusal) = topic
            .assignments
            .as_deref()
            .and_then(|a| check_assignments(shard, &name, topic.count, a))
        {
            Err(refusal)
        } else {
            crate::controller::call(
                shard,
                ControllerOp::CreatePartitions {
                    assignment: topic.assignments.as_ref().map(|lists| {
                        lists
                            .iter()
                            .map(|a| a.broker_ids.iter().map(|b| b.0).collect())
                            .collect()
                    }),
                    name: name.clone(),
                    total: topic.count,
                    validate_only: req.validate_only,
                },
            )
            .await
            .map_err(|e| controller_error(&e))
        };
        let mut result = CreatePartitionsTopicResult::default();
        result.name = topic_name(&name);
        if let Err((error, message)) = outcome {
            result.error_code = error;
            result.error_message = Some(str_bytes(message));
        }
        response.results.push(result);
    }
    response
}
