//! IncrementalAlterConfigs (key 44), v0–1: SET, DELETE, APPEND and SUBTRACT of TOPIC config
//! overrides and of dynamic BROKER configs (`config_ops`, `dynamic_config`). For a topic the
//! handler computes the changes from the current metadata snapshot and the controller applies
//! them to the overrides (re-validating them); the owning shards pick the new config up from the
//! published snapshot (`partition_lifecycle::apply_metadata` → `PartitionLog::set_config`).

use super::config_ops::{
    alter_broker_incremental, check_unique, is_topic_list, list_op, OP_APPEND, OP_DELETE, OP_SET,
    OP_SUBTRACT,
};
use super::describe_configs::{RESOURCE_BROKER, RESOURCE_TOPIC};
use super::wire::str_bytes;
use crate::authz::{self, AclOperation};
use crate::errors::{code, controller_error};
use crate::metadata::topic_config;
use crate::session::Session;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use net::kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use net::kafka_protocol::messages::{
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use replication::metadata::{check_not_internal, ControllerOp, TopicOperation};
use std::rc::Rc;
use tuning::config::TopicConfig;

pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let mut response = IncrementalAlterConfigsResponse::default();
    for resource in &req.resources {
        let denied = authz::config_resource_denied(
            shard,
            session,
            AclOperation::AlterConfigs,
            resource.resource_type,
            &resource.resource_name,
        );
        let outcome = match resource.resource_type {
            _ if denied.is_some() => Err(denied.expect("checked")),
            RESOURCE_TOPIC => alter_topic(shard, resource, req.validate_only).await,
            RESOURCE_BROKER => alter_broker_incremental(shard, resource, req.validate_only).await,
            other => Err((
                code(ResponseError::InvalidRequest),
                format!("resource type {other} is not supported; only TOPIC (2) and BROKER (4)"),
            )),
        };
        let mut result = AlterConfigsResourceResponse::default();
        result.resource_type = resource.resource_type;
        result.resource_name = resource.resource_name.clone();
        if let Err((error, message)) = outcome {
            result.error_code = error;
            result.error_message = Some(str_bytes(message));
        }
        response.responses.push(result);
    }
    response
}

async fn alter_topic(
    shard: &Rc<Shard>,
    resource: &AlterConfigsResource,
    validate_only: bool,
) -> Result<(), (i16, String)> {
    let name = resource.resource_name.to_string();
    check_unique(resource.configs.iter().map(|c| c.name.as_str()))?;
    let metadata = shard.metadata();
    let Some(topic) = metadata.topics.get(&name) else {
        return Err((
            code(ResponseError::UnknownTopicOrPartition),
            format!("topic '{name}' does not exist"),
        ));
    };
    // An internal topic's configs are the broker's own (`__consumer_offsets` is compacted,
    // with its segment size from `offsets.topic.segment.bytes`): refused, as before.
    check_not_internal(&metadata, &name, TopicOperation::AlterConfigs)
        .map_err(|e| controller_error(&e))?;
    let defaults = &*crate::dynamic_config::topic_defaults(&shard.config, &metadata.image);
    // The effective config, changed alongside `overrides` only to validate each SET with the
    // parser that will apply it (its error names the key and says what is accepted).
    let mut effective = topic_config(topic, defaults);
    let mut changes = Vec::with_capacity(resource.configs.len());
    for c in &resource.configs {
        changes.push(topic_change(&mut effective, defaults, c)?);
    }
    crate::controller::call(
        shard,
        ControllerOp::AlterTopicConfig {
            name,
            changes,
            validate_only,
        },
    )
    .await
    .map_err(|e| controller_error(&e))
}

/// One config operation of a topic resource, checked by applying it to `effective` (`reset`
/// needs the topic `defaults`); returns the override it makes: (key, new value, or none to
/// delete the override).
fn topic_change(
    effective: &mut TopicConfig,
    defaults: &TopicConfig,
    c: &AlterableConfig,
) -> Result<(String, Option<String>), (i16, String)> {
    let invalid_config = |m: String| (code(ResponseError::InvalidConfig), m);
    let key = c.name.as_str();
    // `reset` fails only for an unknown key (with the closest known one as suggestion).
    effective
        .clone()
        .reset(key, defaults)
        .map_err(|e| invalid_config(e.to_string()))?;
    match c.config_operation {
        OP_SET => {
            let Some(value) = &c.value else {
                return Err(invalid_config(format!("SET of `{key}` has no value")));
            };
            effective
                .set(key, value.as_str())
                .map_err(|e| invalid_config(e.to_string()))?;
            Ok((key.to_string(), Some(value.to_string())))
        }
        OP_DELETE => {
            effective
                .reset(key, defaults)
                .map_err(|e| invalid_config(e.to_string()))?;
            Ok((key.to_string(), None))
        }
        op @ (OP_APPEND | OP_SUBTRACT) => {
            let current = effective.get(key).unwrap_or_default();
            let value = c.value.as_ref().map(|v| v.as_str());
            let new = list_op(RESOURCE_TOPIC, key, is_topic_list(key), op, &current, value)?;
            effective
                .set(key, &new)
                .map_err(|e| invalid_config(e.to_string()))?;
            Ok((key.to_string(), Some(new)))
        }
        other => Err((
            code(ResponseError::InvalidRequest),
            format!("unknown config operation {other} for `{key}`"),
        )),
    }
}
