//! CreateTopics (key 19): validated and applied by the controller, which returns only after
//! every shard has opened the new partitions, so the topic takes produce requests at once.

use super::{str_bytes, topic_name};
use crate::errors::code;
use crate::messages::ControllerOp;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use net::kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
use std::rc::Rc;

/// Brokers in this cluster: a replication factor above it is refused.
const BROKERS: i16 = 1;

pub async fn handle(shard: &Rc<Shard>, req: CreateTopicsRequest) -> CreateTopicsResponse {
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
        let mut result = CreatableTopicResult::default();
        result.name = topic_name(&name);
        if seen.get(&name).copied().unwrap_or(0) > 1 {
            result.error_code = code(ResponseError::InvalidRequest);
            result.error_message = Some(str_bytes(format!(
                "CreateTopics names topic '{name}' more than once"
            )));
            result.num_partitions = -1;
            result.replication_factor = -1;
            response.topics.push(result);
            continue;
        }
        let partitions = if topic.num_partitions == -1 {
            shard.config.num_partitions
        } else {
            topic.num_partitions
        };
        let replication = if topic.replication_factor == -1 {
            shard.config.default_replication_factor
        } else {
            topic.replication_factor
        };
        let outcome = if replication < 1 || replication > BROKERS {
            Err((
                code(ResponseError::InvalidReplicationFactor),
                format!("replication factor {replication} is outside 1..={BROKERS} (brokers in the cluster)"),
            ))
        } else if name == crate::groups::OFFSETS_TOPIC {
            Err((
                code(ResponseError::InvalidRequest),
                format!("'{name}' is an internal topic, created by the group coordinator"),
            ))
        } else if !topic.assignments.is_empty() {
            Err((
                code(ResponseError::InvalidRequest),
                "manual replica assignment is not supported".to_string(),
            ))
        } else {
            let mut overrides = std::collections::BTreeMap::new();
            for c in &topic.configs {
                if let Some(value) = &c.value {
                    overrides.insert(c.name.to_string(), value.to_string());
                }
            }
            let op = ControllerOp::CreateTopic {
                name: name.clone(),
                partitions,
                overrides,
                validate_only: req.validate_only,
            };
            shard.controller_call(op).await
        };
        match outcome {
            Ok(()) => {
                result.num_partitions = partitions;
                result.replication_factor = replication;
                if let Some(t) = shard.metadata().topics.get(&name) {
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
        response.topics.push(result);
    }
    response
}
