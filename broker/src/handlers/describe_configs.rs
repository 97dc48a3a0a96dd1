//! DescribeConfigs (key 32), v1–4: the effective config of a TOPIC resource (from the metadata
//! snapshot: broker topic defaults plus the topic's overrides) or of this BROKER (its start-up
//! config, read-only: dynamic broker configs do not exist here). Nothing is sensitive. Config
//! documentation is not served (`documentation` is null).

use super::str_bytes;
use crate::errors::code;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use net::kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use net::kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use net::kafka_protocol::protocol::StrBytes;
use std::rc::Rc;
use tuning::config::{BrokerConfig, ConfigSource, TopicConfig};

/// Kafka's `ConfigResource.Type` codes.
pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;

/// First version whose entries carry `config_type` and `documentation`.
const CONFIG_TYPE_MIN_VERSION: i16 = 3;

/// Kafka's `DescribeConfigsResponse.ConfigType` codes (the ones used here).
#[derive(Clone, Copy)]
enum ConfigType {
    Unknown = 0,
    Boolean = 1,
    String = 2,
    Int = 3,
    Long = 5,
    List = 7,
}

pub fn handle(
    shard: &Rc<Shard>,
    req: DescribeConfigsRequest,
    version: i16,
) -> DescribeConfigsResponse {
    let mut response = DescribeConfigsResponse::default();
    for resource in &req.resources {
        let mut result = DescribeConfigsResult::default();
        result.resource_type = resource.resource_type;
        result.resource_name = resource.resource_name.clone();
        let outcome = match resource.resource_type {
            RESOURCE_TOPIC => describe_topic(shard, resource, req.include_synonyms),
            RESOURCE_BROKER => describe_broker(shard, resource, req.include_synonyms),
            other => Err((
                ResponseError::InvalidRequest,
                format!("resource type {other} is not supported; only TOPIC (2) and BROKER (4)"),
            )),
        };
        match outcome {
            Ok(entries) => {
                result.configs = entries
                    .into_iter()
                    .map(|e| e.into_result(version))
                    .collect();
            }
            Err((error, message)) => {
                result.error_code = code(error);
                result.error_message = Some(str_bytes(message));
            }
        }
        response.results.push(result);
    }
    response
}

/// One described config, before version-dependent encoding.
struct Entry {
    name: String,
    value: String,
    read_only: bool,
    source: ConfigSource,
    config_type: ConfigType,
    synonyms: Vec<(String, String, ConfigSource)>,
}

impl Entry {
    fn into_result(self, version: i16) -> DescribeConfigsResourceResult {
        let mut r = DescribeConfigsResourceResult::default();
        r.name = str_bytes(self.name);
        r.value = Some(str_bytes(self.value));
        r.read_only = self.read_only;
        r.config_source = self.source.kafka_code();
        r.is_sensitive = false;
        r.synonyms = self
            .synonyms
            .into_iter()
            .map(|(name, value, source)| {
                let mut s = DescribeConfigsSynonym::default();
                s.name = str_bytes(name);
                s.value = Some(str_bytes(value));
                s.source = source.kafka_code();
                s
            })
            .collect();
        if version >= CONFIG_TYPE_MIN_VERSION {
            r.config_type = self.config_type as i8;
            r.documentation = None;
        }
        r
    }
}

/// Whether `key` is asked for: a null or empty key list means every key (as in Kafka).
fn wanted(keys: &Option<Vec<StrBytes>>, key: &str) -> bool {
    match keys {
        None => true,
        Some(keys) => keys.is_empty() || keys.iter().any(|k| k.as_str() == key),
    }
}

type DescribeError = (ResponseError, String);

fn describe_topic(
    shard: &Shard,
    resource: &DescribeConfigsResource,
    include_synonyms: bool,
) -> Result<Vec<Entry>, DescribeError> {
    let name = resource.resource_name.as_str();
    let metadata = shard.metadata();
    let Some(topic) = metadata.topics.get(name) else {
        return Err((
            ResponseError::UnknownTopicOrPartition,
            format!("topic '{name}' does not exist"),
        ));
    };
    let broker_defaults = &shard.config.topic_defaults;
    let config = topic.config(broker_defaults).map_err(|e| {
        // The controller validates every override before storing it; a stored config that
        // no longer parses is a server-side fault, not the client's.
        tracing::error!(topic = %name, error = %e, "stored topic config is invalid");
        (
            ResponseError::UnknownServerError,
            format!("stored config of topic '{name}' is invalid: {e}"),
        )
    })?;
    let builtin = TopicConfig::default();
    let entries = config
        .entries()
        .into_iter()
        .filter(|(key, _)| wanted(&resource.configuration_keys, key))
        .map(|(key, value)| {
            let mut synonyms = Vec::new();
            if include_synonyms {
                // Kafka's order: most to least specific.
                if config.is_set(key) {
                    synonyms.push((key.to_string(), value.clone(), ConfigSource::TopicConfig));
                }
                if let Some(broker_key) = TopicConfig::broker_synonym(key) {
                    if broker_defaults.is_set(key) {
                        if let Some(v) = broker_defaults.get(key) {
                            synonyms.push((
                                broker_key.to_string(),
                                v,
                                ConfigSource::StaticBrokerConfig,
                            ));
                        }
                    }
                    if let Some(v) = builtin.get(key) {
                        synonyms.push((broker_key.to_string(), v, ConfigSource::DefaultConfig));
                    }
                }
            }
            Entry {
                name: key.to_string(),
                value,
                read_only: false,
                source: config.source(key, broker_defaults),
                config_type: topic_config_type(key),
                synonyms,
            }
        })
        .collect();
    Ok(entries)
}

fn describe_broker(
    shard: &Shard,
    resource: &DescribeConfigsResource,
    include_synonyms: bool,
) -> Result<Vec<Entry>, DescribeError> {
    let config: &BrokerConfig = &shard.config;
    let name = resource.resource_name.as_str();
    // An empty name is Kafka's cluster-wide default resource; with no dynamic configs it
    // holds what this (only) broker runs with.
    if !name.is_empty() && name.parse::<i32>().ok() != Some(config.node_id) {
        return Err((
            ResponseError::InvalidRequest,
            format!(
                "broker '{name}' is not this broker (node id {}); the cluster has one broker",
                config.node_id
            ),
        ));
    }
    let entries = config
        .entries()
        .into_iter()
        .filter(|(key, _)| wanted(&resource.configuration_keys, key))
        .map(|(key, value)| {
            // A topic default appears under its broker-level name; it was set explicitly if
            // the broker config set it under either name (or a coarser unit).
            let topic_key =
                TopicConfig::keys().find(|t| TopicConfig::broker_synonym(t) == Some(key));
            let explicit =
                config.is_set(key) || topic_key.is_some_and(|t| config.topic_defaults.is_set(t));
            let source = if explicit {
                ConfigSource::StaticBrokerConfig
            } else {
                ConfigSource::DefaultConfig
            };
            let synonyms = if include_synonyms {
                vec![(key.to_string(), value.clone(), source)]
            } else {
                Vec::new()
            };
            Entry {
                name: key.to_string(),
                value,
                read_only: true,
                source,
                config_type: topic_key.map_or_else(|| broker_config_type(key), topic_config_type),
                synonyms,
            }
        })
        .collect();
    Ok(entries)
}

/// Kafka's declared type of topic property `key` (`LogConfig`).
fn topic_config_type(key: &str) -> ConfigType {
    match key {
        "cleanup.policy" => ConfigType::List,
        "message.timestamp.type" => ConfigType::String,
        "index.interval.bytes" | "max.message.bytes" | "segment.bytes" => ConfigType::Int,
        "flush.messages" | "flush.ms" | "retention.bytes" | "retention.ms" | "segment.ms" => {
            ConfigType::Long
        }
        _ => ConfigType::Unknown,
    }
}

/// Kafka's declared type of broker property `key` (`KafkaConfig`); `sluice.*` keys by value.
fn broker_config_type(key: &str) -> ConfigType {
    match key {
        "auto.create.topics.enable" => ConfigType::Boolean,
        "advertised.listeners" | "listeners" | "log.dirs" => ConfigType::String,
        "sluice.cores" => ConfigType::List,
        "node.id"
        | "num.partitions"
        | "default.replication.factor"
        | "socket.request.max.bytes"
        | "message.max.bytes" => ConfigType::Int,
        "sluice.batch.cache.bytes" => ConfigType::Long,
        "sluice.admin.listen" => ConfigType::String,
        _ => ConfigType::Unknown,
    }
}
