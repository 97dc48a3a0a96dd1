//! DescribeConfigs (key 32), v1–4: the effective config of a TOPIC resource (from the metadata
//! snapshot: broker topic defaults plus the topic's overrides) or of this BROKER (its start-up
//! config with the dynamic broker configs applied; only the dynamic keys are not read-only, see
//! `dynamic_config`). A dynamic value is reported with Kafka's DYNAMIC_BROKER_CONFIG or
//! DYNAMIC_DEFAULT_BROKER_CONFIG source and listed first among the synonyms. Nothing is
//! sensitive. Config documentation is not served (`documentation` is null).
//!
//! A topic lists all 37 properties of Kafka 4.4, with Kafka's types, sources and synonyms as
//! Apache Kafka 4.4.0 reports them (checked with `scripts/kafka-ref`): the topic override,
//! then each broker-level synonym set in the broker config (STATIC_BROKER_CONFIG, in its own
//! unit), then the DEFAULT_CONFIG synonyms that have a Kafka default. For a property with
//! several broker synonyms (`retention.ms`: `log.retention.{ms,minutes,hours}`) Kafka lists
//! broker synonyms only when the first (ms) one is set, and otherwise reports the value as
//! DEFAULT_CONFIG even when a coarser synonym set it; Sluice does the same. One difference:
//! Kafka 4.4's controller writes `min.insync.replicas` as a cluster-wide dynamic default at
//! bootstrap (DYNAMIC_DEFAULT_BROKER_CONFIG); Sluice writes none at bootstrap and reports it as
//! DEFAULT_CONFIG (or STATIC_BROKER_CONFIG when set at start-up).

use super::wire::str_bytes;
use crate::authz::{self, AclOperation};
use crate::dynamic_config::DynamicBrokerConfigs;
use crate::errors::code;
use crate::session::Session;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use net::kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use net::kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use net::kafka_protocol::protocol::StrBytes;
use std::rc::Rc;
use tuning::config::{BrokerConfig, ConfigSource};
use tuning::kafka_keys::{topic_key_for_broker_synonym, ConfigType, TopicKey, TOPIC_KEYS};

/// Kafka's `ConfigResource.Type` codes.
pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;

/// First version whose entries carry `config_type` and `documentation`.
const CONFIG_TYPE_MIN_VERSION: i16 = 3;

pub fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: DescribeConfigsRequest,
    version: i16,
) -> DescribeConfigsResponse {
    let mut response = DescribeConfigsResponse::default();
    for resource in &req.resources {
        let mut result = DescribeConfigsResult::default();
        result.resource_type = resource.resource_type;
        result.resource_name = resource.resource_name.clone();
        let denied = authz::config_resource_denied(
            shard,
            session,
            AclOperation::DescribeConfigs,
            resource.resource_type,
            &resource.resource_name,
        );
        let outcome = match resource.resource_type {
            _ if denied.is_some() => {
                let (error_code, message) = denied.expect("checked");
                result.error_code = error_code;
                result.error_message = Some(str_bytes(message));
                response.results.push(result);
                continue;
            }
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
    config_type: Option<ConfigType>,
    synonyms: Vec<Synonym>,
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
            // 0 is Kafka's UNKNOWN type.
            r.config_type = self.config_type.map_or(0, ConfigType::kafka_code);
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
    let broker: &BrokerConfig = &shard.config;
    let dynamic = DynamicBrokerConfigs::of(&metadata.broker_configs, broker.node_id);
    let defaults = crate::dynamic_config::topic_defaults(broker, &metadata.image);
    let config = crate::metadata::topic_config(topic, &defaults);
    let entries = TOPIC_KEYS
        .iter()
        .filter(|key| wanted(&resource.configuration_keys, key.name))
        .filter_map(|key| {
            let value = config.get(key.name)?;
            let on_topic = config.is_set(key.name);
            Some(topic_entry(
                key,
                value,
                on_topic,
                broker,
                &dynamic,
                include_synonyms,
            ))
        })
        .collect();
    Ok(entries)
}

/// A synonym as listed: (name, value, source).
type Synonym = (String, String, ConfigSource);

/// Topic property `key` with its effective `value` (`on_topic`: set on the topic), its source
/// and, with `include_synonyms`, its synonyms in Kafka's order.
fn topic_entry(
    key: &TopicKey,
    value: String,
    on_topic: bool,
    broker: &BrokerConfig,
    dynamic: &DynamicBrokerConfigs<'_>,
    include_synonyms: bool,
) -> Entry {
    // See the module doc: Kafka consults the broker synonyms of a many-synonym
    // property only when its first one is set.
    let consult_broker = key.synonyms.len() <= 1
        || key
            .synonyms
            .first()
            .is_some_and(|s| broker.is_set(s.name) || dynamic.lookup(s.name).is_some());
    let broker_synonyms = if consult_broker {
        broker_synonyms(key, broker, dynamic)
    } else {
        Vec::new()
    };
    let source = if on_topic {
        ConfigSource::TopicConfig
    } else if let Some((_, _, source)) = broker_synonyms.first() {
        *source
    } else {
        ConfigSource::DefaultConfig
    };
    let mut synonyms = Vec::new();
    if include_synonyms {
        if on_topic {
            synonyms.push((
                key.name.to_string(),
                value.clone(),
                ConfigSource::TopicConfig,
            ));
        }
        if consult_broker {
            synonyms.extend(broker_synonyms);
            for s in key.synonyms {
                if let Some(d) = s.default {
                    synonyms.push((
                        s.name.to_string(),
                        d.to_string(),
                        ConfigSource::DefaultConfig,
                    ));
                }
            }
        }
    }
    Entry {
        name: key.name.to_string(),
        value,
        read_only: false,
        source,
        config_type: Some(key.config_type),
        synonyms,
    }
}

/// The broker-level synonyms of topic property `key` that are set: dynamic broker values,
/// then start-up ones (Kafka's synonym order).
fn broker_synonyms(
    key: &TopicKey,
    broker: &BrokerConfig,
    dynamic: &DynamicBrokerConfigs<'_>,
) -> Vec<Synonym> {
    let dynamic_synonyms = key.synonyms.iter().filter_map(|s| {
        dynamic
            .lookup(s.name)
            .map(|(v, source)| (s.name.to_string(), v.to_string(), source))
    });
    dynamic_synonyms
        .chain(key.synonyms.iter().filter_map(|s| {
            broker.given(s.name).map(|v| {
                (
                    s.name.to_string(),
                    v.to_string(),
                    ConfigSource::StaticBrokerConfig,
                )
            })
        }))
        .collect()
}

fn describe_broker(
    shard: &Shard,
    resource: &DescribeConfigsResource,
    include_synonyms: bool,
) -> Result<Vec<Entry>, DescribeError> {
    let start_up: &BrokerConfig = &shard.config;
    let metadata = shard.metadata();
    let dynamic = DynamicBrokerConfigs::of(&metadata.broker_configs, start_up.node_id);
    let effective = crate::dynamic_config::effective(start_up, &metadata.broker_configs)
        .unwrap_or_else(|e| {
            // The controller checks dynamic configs before storing them.
            tracing::error!(error = %e, "stored dynamic broker configs are invalid; ignored");
            start_up.clone()
        });
    let config = &effective;
    let start_up_values: std::collections::BTreeMap<&str, String> =
        start_up.entries().into_iter().collect();
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
            broker_entry(
                key,
                value,
                start_up,
                &start_up_values,
                &dynamic,
                include_synonyms,
            )
        })
        .collect();
    Ok(entries)
}

/// Broker property `key` with its effective `value`, its source and, with
/// `include_synonyms`, its synonyms: dynamic values first, then the start-up one.
fn broker_entry(
    key: &str,
    value: String,
    start_up: &BrokerConfig,
    start_up_values: &std::collections::BTreeMap<&str, String>,
    dynamic: &DynamicBrokerConfigs<'_>,
    include_synonyms: bool,
) -> Entry {
    // A topic default appears under its broker-level name; it was set explicitly if
    // the broker config set it under either name (or a coarser unit).
    let topic = topic_key_for_broker_synonym(key).map(|(t, _)| t);
    let explicit =
        start_up.is_set(key) || topic.is_some_and(|t| start_up.topic_defaults.is_set(t.name));
    let start_up_source = if explicit {
        ConfigSource::StaticBrokerConfig
    } else {
        ConfigSource::DefaultConfig
    };
    let dynamic_value = dynamic.lookup(key);
    let source = dynamic_value.map_or(start_up_source, |(_, s)| s);
    let synonyms = if include_synonyms {
        let mut synonyms: Vec<Synonym> = [
            dynamic
                .broker
                .get(key)
                .map(|v| (v, ConfigSource::DynamicBrokerConfig)),
            dynamic
                .cluster_default
                .get(key)
                .map(|v| (v, ConfigSource::DynamicDefaultBrokerConfig)),
        ]
        .into_iter()
        .flatten()
        .map(|(v, s)| (key.to_string(), v.clone(), s))
        .collect();
        let start_up_value = start_up_values
            .get(key)
            .map_or_else(|| value.clone(), Clone::clone);
        synonyms.push((key.to_string(), start_up_value, start_up_source));
        synonyms
    } else {
        Vec::new()
    };
    Entry {
        name: key.to_string(),
        value,
        read_only: !crate::dynamic_config::is_dynamic(key),
        source,
        config_type: topic.map_or_else(|| broker_config_type(key), |t| Some(t.config_type)),
        synonyms,
    }
}

/// Kafka's declared type of broker property `key` (`KafkaConfig`); `sluice.*` keys by value.
fn broker_config_type(key: &str) -> Option<ConfigType> {
    Some(match key {
        "auto.create.topics.enable" => ConfigType::Boolean,
        "advertised.listeners"
        | "listeners"
        | "listener.security.protocol.map"
        | "inter.broker.listener.name"
        | "security.inter.broker.protocol"
        | "log.dirs"
        | "broker.rack"
        | "replica.selector.class" => ConfigType::String,
        "sluice.cores" | "controller.quorum.voters" => ConfigType::List,
        "node.id"
        | "controller.quorum.election.timeout.ms"
        | "broker.heartbeat.interval.ms"
        | "broker.session.timeout.ms"
        | "num.partitions"
        | "default.replication.factor"
        | "socket.request.max.bytes"
        | "message.max.bytes" => ConfigType::Int,
        "sluice.batch.cache.bytes"
        | "log.retention.check.interval.ms"
        | "replica.high.watermark.checkpoint.interval.ms" => ConfigType::Long,
        "sluice.admin.listen" => ConfigType::String,
        _ => return None,
    })
}
