//! DeleteTopics (key 20), v1–5 (topics by name; v6 topic ids are not served). The controller
//! drops the topic from the metadata and every owning shard closes and removes the partition
//! logs before the answer, so a topic re-created under the same name starts empty at offset 0.

use super::{str_bytes, topic_name};
use crate::errors::code;
use crate::messages::ControllerOp;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use net::kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse};
use std::collections::BTreeMap;
use std::rc::Rc;

/// First version whose results carry `error_message`.
const ERROR_MESSAGE_MIN_VERSION: i16 = 5;

pub async fn handle(
    shard: &Rc<Shard>,
    req: DeleteTopicsRequest,
    version: i16,
) -> DeleteTopicsResponse {
    // Kafka refuses a name given twice in one request (INVALID_REQUEST for each copy).
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for name in &req.topic_names {
        *seen.entry(name.0.to_string()).or_default() += 1;
    }
    let mut response = DeleteTopicsResponse::default();
    for name in req.topic_names {
        let name = name.0.to_string();
        let outcome = if seen.get(&name).copied().unwrap_or(0) > 1 {
            Err((
                code(ResponseError::InvalidRequest),
                format!("topic '{name}' is named more than once in the request"),
            ))
        } else if name == crate::groups::OFFSETS_TOPIC {
            // Deleting it would lose every group's committed offsets under the coordinator.
            Err((
                code(ResponseError::InvalidTopicException),
                format!("'{name}' is an internal topic and cannot be deleted"),
            ))
        } else {
            shard
                .controller_call(ControllerOp::DeleteTopic { name: name.clone() })
                .await
        };
        let mut result = DeletableTopicResult::default();
        result.name = Some(topic_name(&name));
        if let Err((error, message)) = outcome {
            result.error_code = error;
            if version >= ERROR_MESSAGE_MIN_VERSION {
                result.error_message = Some(str_bytes(message));
            }
        }
        response.responses.push(result);
    }
    response
}
