//! The config operations of IncrementalAlterConfigs (KIP-339) shared by TOPIC and BROKER
//! resources, and the BROKER resource's path of IncrementalAlterConfigs and AlterConfigs.
//!
//! APPEND and SUBTRACT work on list-typed properties only (`cleanup.policy`,
//! `leader.replication.throttled.replicas`, …, and their broker-level names), as Kafka's
//! `ConfigAdminManager.prepareIncrementalConfigs`: APPEND adds each given item not already in
//! the current list at its end; SUBTRACT removes every given item. The current list is the
//! resource's value in effect (its own value, else the inherited default); the result is then
//! checked like a SET of it, so `cleanup.policy` APPEND `compact` is refused while compaction is
//! not built. A list operation on any other type is refused with Kafka 4.4's INVALID_CONFIG and
//! its message: for a topic "Can't APPEND to key … because its type is not LIST." (the
//! controller's check), for a broker "Config value append is not allowed for config key: …"
//! (`ConfigAdminManager`'s).
//!
//! The new value is computed from the metadata snapshot the request saw and stored as a SET:
//! two list operations on one key racing each other may lose one (the controller applies them
//! in order, each as a whole value). A BROKER change goes to the controller as
//! `ControllerOp::AlterBrokerConfig`, whose proposer re-checks the whole result under the
//! controller lock and turns it into BROKER `ConfigRecord`s (`dynamic_config`).

use super::describe_configs::{RESOURCE_BROKER, RESOURCE_TOPIC};
use crate::dynamic_config::{self, BrokerConfigs, BrokerResource};
use crate::errors::{code, controller_error, dynamic_config_error};
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource;
use replication::metadata::ControllerOp;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use tuning::kafka_keys::{topic_key, topic_key_for_broker_synonym, ConfigType};

/// A refused resource: Kafka's error code and message.
pub type Refusal = (i16, String);

/// Kafka's `AlterConfigOp.OpType` codes.
pub const OP_SET: i8 = 0;
pub const OP_DELETE: i8 = 1;
pub const OP_APPEND: i8 = 2;
pub const OP_SUBTRACT: i8 = 3;

/// The items of a list value: comma-separated, trimmed, empty items dropped.
fn items(list: &str) -> impl Iterator<Item = &str> {
    list.split(',').map(str::trim).filter(|s| !s.is_empty())
}

/// The new value of property `key` of a `resource_type` resource (Kafka's code) after `op`
/// (APPEND or SUBTRACT) with `value` on `current`; `is_list` says whether `key` is list-typed.
///
/// # Errors
/// INVALID_CONFIG for a property that is not a list; INVALID_REQUEST for an operation with no
/// value.
pub fn list_op(
    resource_type: i8,
    key: &str,
    is_list: bool,
    op: i8,
    current: &str,
    value: Option<&str>,
) -> Result<String, Refusal> {
    let verb = if op == OP_APPEND {
        "append"
    } else {
        "subtract"
    };
    if !is_list {
        let message = if resource_type == RESOURCE_TOPIC {
            format!(
                "Can't {} to key {key} because its type is not LIST.",
                verb.to_uppercase()
            )
        } else {
            format!("Config value {verb} is not allowed for config key: {key}")
        };
        return Err((code(ResponseError::InvalidConfig), message));
    }
    let Some(value) = value else {
        return Err((
            code(ResponseError::InvalidRequest),
            format!("{} of `{key}` has no value", verb.to_uppercase()),
        ));
    };
    let given: Vec<&str> = items(value).collect();
    let mut list: Vec<&str> = items(current).collect();
    if op == OP_APPEND {
        for item in given {
            if !list.contains(&item) {
                list.push(item);
            }
        }
    } else {
        list.retain(|item| !given.contains(item));
    }
    Ok(list.join(","))
}

/// Whether topic property `key` is list-typed.
pub fn is_topic_list(key: &str) -> bool {
    topic_key(key).is_some_and(|k| k.config_type == ConfigType::List)
}

/// Refuses a key named twice in one resource, as Kafka does.
pub fn check_unique<'a>(keys: impl IntoIterator<Item = &'a str>) -> Result<(), Refusal> {
    let mut seen = BTreeSet::new();
    for key in keys {
        if !seen.insert(key) {
            return Err((
                code(ResponseError::InvalidRequest),
                format!("config key `{key}` is named more than once"),
            ));
        }
    }
    Ok(())
}

/// The BROKER resource `name`, or INVALID_REQUEST for another broker's id.
pub fn broker_resource(shard: &Shard, name: &str) -> Result<BrokerResource, Refusal> {
    BrokerResource::parse(name, shard.config.node_id)
        .map_err(|m| (code(ResponseError::InvalidRequest), m))
}

/// IncrementalAlterConfigs on a BROKER resource: the dynamic configs of that resource change
/// by each operation in order; keys fixed at start-up are refused, all of them named.
pub async fn alter_broker_incremental(
    shard: &Rc<Shard>,
    resource: &AlterConfigsResource,
    validate_only: bool,
) -> Result<(), Refusal> {
    let which = broker_resource(shard, resource.resource_name.as_str())?;
    check_unique(resource.configs.iter().map(|c| c.name.as_str()))?;
    dynamic_config::check_keys(resource.configs.iter().map(|c| c.name.as_str()))
        .map_err(|e| dynamic_config_error(&e))?;
    let resource_name = which.resource_name(shard.config.node_id);
    let metadata = shard.metadata();
    let mut candidate: BrokerConfigs = metadata.broker_configs.clone();
    let mut changes = Vec::with_capacity(resource.configs.len());
    for c in &resource.configs {
        let key = c.name.as_str();
        let value = c.value.as_ref().map(|v| v.as_str());
        let new = match c.config_operation {
            OP_SET => {
                let Some(value) = value else {
                    return Err((
                        code(ResponseError::InvalidRequest),
                        format!("SET of `{key}` has no value"),
                    ));
                };
                Some(value.to_string())
            }
            OP_DELETE => None,
            op @ (OP_APPEND | OP_SUBTRACT) => {
                let topic = topic_key_for_broker_synonym(key).map(|(t, _)| t);
                let current = match candidate.get(&resource_name).and_then(|c| c.get(key)) {
                    Some(v) => v.clone(),
                    None => {
                        let effective = dynamic_config::effective(&shard.config, &candidate)
                            .map_err(|e| dynamic_config_error(&e))?;
                        topic
                            .and_then(|t| effective.topic_defaults.get(t.name))
                            .unwrap_or_default()
                    }
                };
                let is_list = topic.is_some_and(|t| t.config_type == ConfigType::List);
                Some(list_op(RESOURCE_BROKER, key, is_list, op, &current, value)?)
            }
            other => {
                return Err((
                    code(ResponseError::InvalidRequest),
                    format!("unknown config operation {other} for `{key}`"),
                ));
            }
        };
        let configs = candidate.entry(resource_name.clone()).or_default();
        match &new {
            Some(v) => configs.insert(key.to_string(), v.clone()),
            None => configs.remove(key),
        };
        changes.push((key.to_string(), new));
    }
    // Checked here for the client's error; the controller checks again under its lock.
    dynamic_config::effective(&shard.config, &candidate).map_err(|e| dynamic_config_error(&e))?;
    check_key_stores(shard, &candidate, changes.iter().map(|(k, _)| k.as_str())).await?;
    crate::controller::call(
        shard,
        ControllerOp::AlterBrokerConfig {
            resource_name,
            changes,
            replace: false,
            validate_only,
        },
    )
    .await
    .map_err(|e| controller_error(&e))
}

/// AlterConfigs on a BROKER resource: `configs` (null values dropped, as Kafka drops them)
/// become that resource's whole set of dynamic configs.
pub async fn replace_broker(
    shard: &Rc<Shard>,
    name: &str,
    configs: BTreeMap<String, String>,
    validate_only: bool,
) -> Result<(), Refusal> {
    let which = broker_resource(shard, name)?;
    dynamic_config::check_keys(configs.keys().map(String::as_str))
        .map_err(|e| dynamic_config_error(&e))?;
    let mut candidate: BrokerConfigs = shard.metadata().broker_configs.clone();
    candidate.insert(which.resource_name(shard.config.node_id), configs.clone());
    check_key_stores(shard, &candidate, configs.keys().map(String::as_str)).await?;
    let changes = configs.into_iter().map(|(k, v)| (k, Some(v))).collect();
    crate::controller::call(
        shard,
        ControllerOp::AlterBrokerConfig {
            resource_name: which.resource_name(shard.config.node_id),
            changes,
            replace: true,
            validate_only,
        },
    )
    .await
    .map_err(|e| controller_error(&e))
}

/// When `changed` names a listener's TLS store, checks that every TLS listener of this
/// broker still loads its stores with `candidate` applied (files read on the blocking pool),
/// as Kafka validates a dynamic SSL change before accepting it.
async fn check_key_stores<'a>(
    shard: &Rc<Shard>,
    candidate: &BrokerConfigs,
    mut changed: impl Iterator<Item = &'a str>,
) -> Result<(), Refusal> {
    if !changed.any(dynamic_config::is_dynamic_tls) {
        return Ok(());
    }
    let config = dynamic_config::effective(&shard.config, candidate)
        .map_err(|e| dynamic_config_error(&e))?;
    let tls_listeners: Vec<String> = config
        .listeners
        .iter()
        .filter(|l| {
            config
                .listener_protocol(&l.name)
                .is_some_and(|p| p.uses_tls())
        })
        .map(|l| l.name.clone())
        .collect();
    let checked = crate::rt::spawn_blocking(move || {
        tls_listeners
            .iter()
            .try_for_each(|name| crate::tls::ListenerTls::new(&config, name).map(|_| ()))
    })
    .await;
    checked.map_err(|e| {
        (
            code(ResponseError::InvalidRequest),
            format!("Validation of dynamic config update of SSLFactory failed: {e}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_adds_missing_items_and_subtract_removes_given_ones() {
        let append =
            |cur, v| list_op(RESOURCE_TOPIC, "k", true, OP_APPEND, cur, Some(v)).expect("list");
        let subtract =
            |cur, v| list_op(RESOURCE_TOPIC, "k", true, OP_SUBTRACT, cur, Some(v)).expect("list");
        assert_eq!(append("delete", "compact"), "delete,compact");
        assert_eq!(append("delete", "delete"), "delete");
        assert_eq!(append("", "0:0, 1:0"), "0:0,1:0");
        assert_eq!(subtract("delete,compact", "delete"), "compact");
        assert_eq!(subtract("delete", "delete"), "");
        assert_eq!(subtract("0:0,1:0", "2:0"), "0:0,1:0");
        let (error, message) = list_op(
            RESOURCE_TOPIC,
            "retention.ms",
            false,
            OP_APPEND,
            "1",
            Some("2"),
        )
        .expect_err("not a list");
        assert_eq!(error, code(ResponseError::InvalidConfig));
        assert_eq!(
            message,
            "Can't APPEND to key retention.ms because its type is not LIST."
        );
        let (_, message) = list_op(
            RESOURCE_BROKER,
            "log.retention.ms",
            false,
            OP_SUBTRACT,
            "1",
            Some("2"),
        )
        .expect_err("not a list");
        assert_eq!(
            message,
            "Config value subtract is not allowed for config key: log.retention.ms"
        );
        assert!(list_op(RESOURCE_TOPIC, "k", true, OP_SUBTRACT, "", None).is_err());
    }
}
