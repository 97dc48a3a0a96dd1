//! CreateTopics (key 19): validated and applied by the controller, which returns only after
//! every shard has opened the new partitions, so the topic takes produce requests at once.
//! A manual replica assignment is accepted when Kafka would accept it on this cluster (each
//! partition on this node: `[[node.id]]`).

use super::replica_assignment;
use super::wire::{str_bytes, topic_name};
use crate::authz::{self, AclOperation};
use crate::errors::{code, controller_error};
use crate::session::Session;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic,
};
use net::kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use net::kafka_protocol::messages::BrokerId;
use net::kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
use replication::metadata::{check_not_internal, ControllerOp, TopicOperation};
use std::rc::Rc;

/// (partitions, replication factor) of a topic created with a manual assignment, checked as
/// Kafka's controller checks it: `num_partitions` and `replication_factor` must be -1 (else
/// INVALID_REQUEST), the partition indices 0, 1, … in any order, and the replica lists valid
/// for the live brokers (see [`replica_assignment::check`]).
fn manual_shape(
    assignments: &[CreatableReplicaAssignment],
    topic: &CreatableTopic,
    brokers: &[i32],
) -> Result<(i32, i16), replica_assignment::Refusal> {
    let request = |field: &str| {
        Err((
            code(ResponseError::InvalidRequest),
            format!("A manual partition assignment was specified, but {field} was not set to -1."),
        ))
    };
    if topic.num_partitions != -1 {
        return request("numPartitions");
    }
    if topic.replication_factor != -1 {
        return request("replicationFactor");
    }
    let mut indexes: Vec<i32> = assignments.iter().map(|a| a.partition_index).collect();
    indexes.sort_unstable();
    if indexes.iter().zip(0..).any(|(&i, expected)| i != expected) {
        return Err((
            code(ResponseError::InvalidReplicaAssignment),
            "partitions should be a consecutive 0-based integer sequence".to_string(),
        ));
    }
    let lists: Vec<&[BrokerId]> = assignments
        .iter()
        .map(|a| a.broker_ids.as_slice())
        .collect();
    let replication = replica_assignment::check(&lists, brokers, None)?;
    let partitions = i32::try_from(assignments.len()).map_err(|_| {
        (
            code(ResponseError::InvalidPartitions),
            "too many partitions".to_string(),
        )
    })?;
    Ok((partitions, replication))
}

pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: CreateTopicsRequest,
) -> CreateTopicsResponse {
    // Kafka: CREATE on the cluster, or on each topic (`crate::authz`).
    let create_all = authz::cluster(shard, session, AclOperation::Create);
    let mut response = CreateTopicsResponse::default();
    // As Kafka: a name given more than once is refused (INVALID_REQUEST) and answered once.
    let mut seen = std::collections::HashMap::new();
    for topic in &req.topics {
        *seen.entry(topic.name.0.to_string()).or_insert(0usize) += 1;
    }
    let mut answered = std::collections::HashSet::new();
    for topic in req.topics {
        let name = topic.name.0.to_string();
        if !answered.insert(name.clone()) {
            continue;
        }
        let result = if seen.get(&name).copied().unwrap_or(0) > 1 {
            duplicate_result(&name)
        } else if !create_all && !authz::topic(shard, session, AclOperation::Create, &name) {
            let mut result = CreatableTopicResult::default();
            result.name = topic_name(&name);
            result.error_code = code(ResponseError::TopicAuthorizationFailed);
            result.error_message = Some(str_bytes("Authorization failed."));
            result.num_partitions = -1;
            result.replication_factor = -1;
            result
        } else {
            create_topic(shard, &topic, &name, req.validate_only).await
        };
        response.topics.push(result);
    }
    response
}

/// The answer to a topic named more than once in the request (INVALID_REQUEST).
fn duplicate_result(name: &str) -> CreatableTopicResult {
    let mut result = CreatableTopicResult::default();
    result.name = topic_name(name);
    result.error_code = code(ResponseError::InvalidRequest);
    result.error_message = Some(str_bytes(format!(
        "CreateTopics names topic '{name}' more than once"
    )));
    result.num_partitions = -1;
    result.replication_factor = -1;
    result
}

/// Checks and creates one topic through the controller (or only checks it, `validate_only`).
async fn create_topic(
    shard: &Rc<Shard>,
    topic: &CreatableTopic,
    name: &str,
    validate_only: bool,
) -> CreatableTopicResult {
    let mut result = CreatableTopicResult::default();
    result.name = topic_name(name);
    let shape = requested_shape(shard, topic);
    let assignment = manual_assignment(topic);
    let (partitions, replication) = shape.clone().unwrap_or((-1, -1));
    let outcome = if let Err(refusal) = shape {
        Err(refusal)
    } else if let Err(e) = check_not_internal(&shard.metadata(), name, TopicOperation::Create) {
        Err(controller_error(&e))
    } else {
        let mut overrides = std::collections::BTreeMap::new();
        for c in &topic.configs {
            if let Some(value) = &c.value {
                overrides.insert(c.name.to_string(), value.to_string());
            }
        }
        let op = ControllerOp::CreateTopic {
            assignment,
            name: name.to_string(),
            partitions,
            replication_factor: replication,
            overrides,
            internal: false,
            validate_only,
        };
        crate::controller::call(shard, op)
            .await
            .map_err(|e| controller_error(&e))
    };
    match outcome {
        Ok(()) => {
            result.num_partitions = partitions;
            result.replication_factor = replication;
            if let Some(t) = shard.metadata().topics.get(name) {
                result.topic_id = t.id;
            }
        }
        Err((error, message)) => {
            result.error_code = error;
            result.error_message = Some(str_bytes(message));
            result.num_partitions = -1;
            result.replication_factor = -1;
        }
    }
    result
}

/// (partitions, replication factor) of `topic`: the request's, -1 meaning the broker default,
/// or those of its manual assignment.
fn requested_shape(
    shard: &Shard,
    topic: &CreatableTopic,
) -> Result<(i32, i16), replica_assignment::Refusal> {
    if !topic.assignments.is_empty() {
        let brokers: Vec<i32> = shard.metadata().brokers.keys().copied().collect();
        return manual_shape(&topic.assignments, topic, &brokers);
    }
    let partitions = if topic.num_partitions == -1 {
        shard.config.num_partitions
    } else {
        topic.num_partitions
    };
    // The controller checks it against the live brokers (INVALID_REPLICATION_FACTOR).
    let replication = if topic.replication_factor == -1 {
        shard.config.default_replication_factor
    } else {
        topic.replication_factor
    };
    Ok((partitions, replication))
}

/// The manual replica lists by partition index (their shape is checked by [`manual_shape`]);
/// none when the request gives no assignment.
fn manual_assignment(topic: &CreatableTopic) -> Option<Vec<Vec<i32>>> {
    (!topic.assignments.is_empty()).then(|| {
        let mut lists: Vec<(i32, Vec<i32>)> = topic
            .assignments
            .iter()
            .map(|a| {
                (
                    a.partition_index,
                    a.broker_ids.iter().map(|b| b.0).collect(),
                )
            })
            .collect();
        lists.sort_by_key(|(p, _)| *p);
        lists.into_iter().map(|(_, l)| l).collect()
    })
}
