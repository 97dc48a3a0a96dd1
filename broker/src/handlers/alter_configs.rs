//! AlterConfigs (key 33), v0–2: the legacy whole-set config update that IncrementalAlterConfigs
//! (KIP-339) superseded but Kafka still serves. For a TOPIC resource the request's entries
//! become the topic's complete set of overrides: every override not named is removed, so a key
//! left out returns to the broker default (Kafka's `ConfigAdminManager.alterConfigs`). Entries
//! with a null value are dropped, as Kafka drops them. The controller replaces the map under its
//! lock and re-validates it; owning shards pick it up from the published snapshot.
//!
//! BROKER resources: the entries become the resource's whole set of dynamic broker configs
//! (`config_ops::replace_broker`); a key fixed at start-up is refused as Kafka refuses it —
//! `INVALID_REQUEST`, "Cannot update these configs dynamically: [keys]".

use super::config_ops::Refusal;
use super::describe_configs::{RESOURCE_BROKER, RESOURCE_TOPIC};
use super::wire::str_bytes;
use crate::authz::{self, AclOperation};
use crate::errors::{code, controller_error};
use crate::session::Session;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::alter_configs_request::AlterConfigsResource;
use net::kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use net::kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse};
use replication::metadata::{check_not_internal, ControllerOp, TopicOperation};
use std::collections::BTreeMap;
use std::rc::Rc;
use tuning::config::TopicConfig;

pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: AlterConfigsRequest,
) -> AlterConfigsResponse {
    let mut response = AlterConfigsResponse::default();
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
            RESOURCE_BROKER => match requested_overrides(resource) {
                Ok(configs) => {
                    super::config_ops::replace_broker(
                        shard,
                        resource.resource_name.as_str(),
                        configs,
                        req.validate_only,
                    )
                    .await
                }
                Err(e) => Err(e),
            },
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

/// The new override map: the request's non-null entries, each key at most once.
fn requested_overrides(
    resource: &AlterConfigsResource,
) -> Result<BTreeMap<String, String>, Refusal> {
    let mut overrides = BTreeMap::new();
    let mut seen = std::collections::BTreeSet::new();
    for c in &resource.configs {
        if !seen.insert(c.name.as_str()) {
            return Err((
                code(ResponseError::InvalidRequest),
                format!("config key `{}` is named more than once", c.name.as_str()),
            ));
        }
        if let Some(value) = &c.value {
            overrides.insert(c.name.to_string(), value.to_string());
        }
    }
    Ok(overrides)
}

async fn alter_topic(
    shard: &Rc<Shard>,
    resource: &AlterConfigsResource,
    validate_only: bool,
) -> Result<(), Refusal> {
    let name = resource.resource_name.to_string();
    let overrides = requested_overrides(resource)?;
    let metadata = shard.metadata();
    if !metadata.topics.contains_key(&name) {
        return Err((
            code(ResponseError::UnknownTopicOrPartition),
            format!("topic '{name}' does not exist"),
        ));
    }
    check_not_internal(&metadata, &name, TopicOperation::AlterConfigs)
        .map_err(|e| controller_error(&e))?;
    // Validate each entry with the parser that will apply it, so the error names the key.
    let mut candidate = TopicConfig::inherit(&crate::dynamic_config::topic_defaults(
        &shard.config,
        &metadata.image,
    ));
    for (key, value) in &overrides {
        candidate
            .set(key, value)
            .map_err(|e| (code(ResponseError::InvalidConfig), e.to_string()))?;
    }
    crate::controller::call(
        shard,
        ControllerOp::ReplaceTopicConfig {
            name,
            overrides,
            validate_only,
        },
    )
    .await
    .map_err(|e| controller_error(&e))
}
