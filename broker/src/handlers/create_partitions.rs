//! CreatePartitions (key 37), v0–3: grows a topic to `count` partitions. The controller places
//! the new partitions and returns once every owning shard has opened them. Manual replica
//! assignments are refused (single broker: there is nothing to choose).

use super::{str_bytes, topic_name};
use crate::errors::code;
use crate::messages::ControllerOp;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use net::kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use std::collections::BTreeMap;
use std::rc::Rc;

pub async fn handle(shard: &Rc<Shard>, req: CreatePartitionsRequest) -> CreatePartitionsResponse {
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
        } else if name == crate::groups::OFFSETS_TOPIC {
            // More partitions would move groups away from their stored offsets.
            Err((
                code(ResponseError::InvalidTopicException),
                format!("'{name}' is an internal topic; its partition count is fixed"),
            ))
        } else if topic.assignments.is_some() {
            Err((
                code(ResponseError::InvalidRequest),
                "manual replica assignment is not supported".to_string(),
            ))
        } else {
            shard
                .controller_call(ControllerOp::CreatePartitions {
                    name: name.clone(),
                    total: topic.count,
                    validate_only: req.validate_only,
                })
                .await
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
