//! Topic and dynamic broker configs (KRaft's `ConfigurationControlManager`): the changes are
//! checked whole by the caller's config model, then written as the diff of config records.

use super::lookup::{check_not_internal, existing};
use crate::metadata::image::MetadataImage;
use crate::metadata::op::*;
use crate::metadata::record::{
    ConfigRecord, MetadataRecord, CONFIG_RESOURCE_BROKER, CONFIG_RESOURCE_TOPIC,
};
use std::collections::BTreeMap;

/// Changes the overrides of topic `name` by `change` once the result checks out.
pub(super) fn change_configs(
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
    Ok(config_diff(CONFIG_RESOURCE_TOPIC, name, &topic.configs, &configs).collect())
}

/// The ConfigRecords (resource type BROKER) that change the dynamic configs of broker resource
/// `resource_name` by `changes` (after clearing them, with `replace`), once the result checks
/// out; none when nothing changes.
pub(super) fn alter_broker_config(
    image: &MetadataImage,
    ctx: &ProposeContext<'_>,
    resource_name: &str,
    changes: &[(String, Option<String>)],
    replace: bool,
) -> Result<Vec<MetadataRecord>, ControllerError> {
    let empty = BTreeMap::new();
    let current = image.broker_configs.get(resource_name).unwrap_or(&empty);
    let mut configs = if replace {
        BTreeMap::new()
    } else {
        current.clone()
    };
    for (key, value) in changes {
        match value {
            Some(value) => configs.insert(key.clone(), value.clone()),
            None => configs.remove(key),
        };
    }
    let mut candidate = image.broker_configs.clone();
    if configs.is_empty() {
        candidate.remove(resource_name);
    } else {
        candidate.insert(resource_name.to_string(), configs.clone());
    }
    (ctx.check_broker_configs)(&candidate).map_err(|reason| {
        ControllerError::InvalidBrokerConfig {
            resource_name: resource_name.to_string(),
            reason,
        }
    })?;
    Ok(config_diff(CONFIG_RESOURCE_BROKER, resource_name, current, &configs).collect())
}

/// ConfigRecords that turn the configs `from` of resource `name` (of Kafka type
/// `resource_type`) into `to`.
pub(super) fn config_diff<'a>(
    resource_type: i8,
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
            resource_type,
            resource_name: name.to_string(),
            name: key.clone(),
            value,
        })
    })
}

/// [`ControllerOp::AlterTopicConfig`]: `changes` applied in order to the topic's overrides
/// (`None` removes a key). Errors: [`change_configs`]'.
pub(super) fn alter_topic_config(
    image: &MetadataImage,
    ctx: &ProposeContext<'_>,
    name: &str,
    changes: &[(String, Option<String>)],
) -> Result<Vec<MetadataRecord>, ControllerError> {
    change_configs(image, ctx, name, |configs| {
        for (key, value) in changes {
            match value {
                Some(value) => configs.insert(key.clone(), value.clone()),
                None => configs.remove(key),
            };
        }
    })
}
