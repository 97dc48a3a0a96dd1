//! Dynamic broker configs (Kafka's `DynamicBrokerConfig`, KIP-226): broker properties changed
//! at run time through IncrementalAlterConfigs / AlterConfigs on the BROKER resource.
//!
//! Which keys: the broker-level defaults of topic properties, each by its primary broker name
//! (`log.retention.ms`, `log.segment.bytes`, `message.max.bytes`, …): Kafka's
//! `DynamicLogConfig.ReconfigurableConfigs`, the values of `ServerTopicConfigSynonyms`; and
//! `transaction.partition.verification.enable` (KIP-890, read per transactional produce), and
//! the replication throttles (KIP-73: `leader.replication.throttled.rate`,
//! `follower.replication.throttled.rate`, `replica.alter.log.dirs.io.max.bytes.per.second`). A
//! change reaches every partition that does not override the property, on every shard, as a
//! topic config change does: the values live in the metadata image as KRaft `ConfigRecord`s of
//! resource type BROKER (`MetadataImage::broker_configs`, resource name "" for the cluster-wide
//! default or the node id; proposed by the controller, persisted by its record log and
//! snapshot, published to every shard), and each shard derives its topic defaults from its
//! start-up [`BrokerConfig`] plus them ([`topic_defaults`]). Every other broker key
//! (`num.partitions`, `log.retention.check.interval.ms`, `log.retention.hours`, listeners, …)
//! is fixed at start-up, as in Kafka, and refused with Kafka's answer: `INVALID_REQUEST`,
//! "Cannot update these configs dynamically: [keys]". Kafka's other dynamic keys (thread
//! pools, connection quotas, SSL, the log cleaner) configure parts Sluice does not have and are
//! refused the same way.
//!
//! Precedence, as Kafka's: this broker's dynamic value, then the cluster-wide dynamic default
//! (resource name ""), then the start-up config; among the synonyms of one topic property the
//! most specific one set wins, whatever its source (`log.retention.ms` over
//! `log.retention.hours`).
//!
//! One difference: Kafka accepts and stores a broker key it does not know; Sluice refuses it
//! (`INVALID_REQUEST`, naming the closest known key), as it does at start-up.

use replication::metadata::MetadataImage;
use std::borrow::Cow;
use std::collections::BTreeMap;
use tuning::config::{BrokerConfig, ConfigError, ConfigSource, TopicConfig};
use tuning::kafka_keys::TOPIC_KEYS;

/// Dynamic broker configs of every BROKER resource, as the image keeps them: resource name
/// ("" or a node id) → Kafka names → values.
pub type BrokerConfigs = BTreeMap<String, BTreeMap<String, String>>;

/// No configs: what a resource without dynamic configs has.
static NONE: BTreeMap<String, String> = BTreeMap::new();

/// The dynamic broker configs that apply to one broker: the cluster-wide defaults and its own.
#[derive(Clone, Copy, Debug)]
pub struct DynamicBrokerConfigs<'a> {
    /// Cluster-wide defaults: the BROKER resource with the empty name.
    pub cluster_default: &'a BTreeMap<String, String>,
    /// This broker's: the BROKER resource named by its node id.
    pub broker: &'a BTreeMap<String, String>,
}

impl<'a> DynamicBrokerConfigs<'a> {
    /// The configs of `configs` that apply to broker `node_id`.
    pub fn of(configs: &'a BrokerConfigs, node_id: i32) -> DynamicBrokerConfigs<'a> {
        if configs.is_empty() {
            // The common case, asked per produce request: no allocation for the key.
            return DynamicBrokerConfigs {
                cluster_default: &NONE,
                broker: &NONE,
            };
        }
        DynamicBrokerConfigs {
            cluster_default: configs.get("").unwrap_or(&NONE),
            broker: configs.get(&node_id.to_string()).unwrap_or(&NONE),
        }
    }

    /// Whether no dynamic config is set.
    pub fn is_empty(&self) -> bool {
        self.cluster_default.is_empty() && self.broker.is_empty()
    }

    /// Where broker key `key`'s dynamic value comes from, with it: this broker's, else the
    /// cluster default.
    pub fn lookup(&self, key: &str) -> Option<(&'a str, ConfigSource)> {
        if let Some(v) = self.broker.get(key) {
            return Some((v, ConfigSource::DynamicBrokerConfig));
        }
        self.cluster_default
            .get(key)
            .map(|v| (v.as_str(), ConfigSource::DynamicDefaultBrokerConfig))
    }
}

/// Which BROKER resource a request names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BrokerResource {
    /// The empty name: cluster-wide defaults.
    ClusterDefault,
    /// This broker, by its node id.
    Broker,
}

impl BrokerResource {
    /// The resource `name` names: "" or this broker's node id; another id is not in the cluster.
    pub fn parse(name: &str, node_id: i32) -> Result<BrokerResource, String> {
        if name.is_empty() {
            Ok(BrokerResource::ClusterDefault)
        } else if name.parse::<i32>().ok() == Some(node_id) {
            Ok(BrokerResource::Broker)
        } else {
            Err(format!(
                "broker '{name}' is not this broker (node id {node_id}); the cluster has one broker"
            ))
        }
    }

    /// The resource name its `ConfigRecord`s carry: "" or the node id in decimal (however the
    /// request spelled it).
    pub fn resource_name(self, node_id: i32) -> String {
        match self {
            BrokerResource::ClusterDefault => String::new(),
            BrokerResource::Broker => node_id.to_string(),
        }
    }
}

/// The per-listener TLS keys that change at run time (Kafka's `DynamicListenerConfig`: a
/// listener's key and trust stores), as `listener.name.<listener>.<key>`: certificate
/// rotation without a restart.
pub const DYNAMIC_TLS_KEYS: &[&str] = &[
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.key.password",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.certificates",
];

/// Whether `key` is one of [`DYNAMIC_TLS_KEYS`] under `listener.name.<listener>.`.
pub fn is_dynamic_tls(key: &str) -> bool {
    key.strip_prefix("listener.name.")
        .and_then(|rest| rest.split_once('.'))
        .is_some_and(|(_, base)| DYNAMIC_TLS_KEYS.contains(&base))
}

/// Broker keys of no topic property that change at run time (Kafka's
/// `DynamicProducerStateManagerConfig`, KIP-890's switch; the replication throttles of
/// Kafka's `DynamicReplicationConfig`, KIP-73, which `kafka-reassign-partitions.sh` sets with
/// `--throttle` and clears after `--verify` and `--cancel`).
pub const DYNAMIC_BROKER_KEYS: &[&str] = &[
    TRANSACTION_PARTITION_VERIFICATION_ENABLE,
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
];

/// KIP-890 part 1's switch (see [`transaction_partition_verification_enable`]).
const TRANSACTION_PARTITION_VERIFICATION_ENABLE: &str = "transaction.partition.verification.enable";

/// `transaction.partition.verification.enable` in effect on this broker: its dynamic value
/// (this broker's, else the cluster default) or the start-up config's. A stored value that
/// does not parse (the controller checks it before storing) leaves the start-up value.
pub fn transaction_partition_verification_enable(
    start_up: &BrokerConfig,
    image: &MetadataImage,
) -> bool {
    let dynamic = DynamicBrokerConfigs::of(&image.broker_configs, start_up.node_id);
    match dynamic.lookup(TRANSACTION_PARTITION_VERIFICATION_ENABLE) {
        Some((value, _)) => value
            .trim()
            .parse::<bool>()
            .unwrap_or(start_up.transaction_partition_verification_enable),
        None => start_up.transaction_partition_verification_enable,
    }
}

/// Whether broker key `key` can be changed at run time: the primary broker name of a topic
/// property (see the module doc), one of [`DYNAMIC_BROKER_KEYS`], or a listener's TLS store
/// ([`is_dynamic_tls`]).
pub fn is_dynamic(key: &str) -> bool {
    is_dynamic_tls(key)
        || DYNAMIC_BROKER_KEYS.contains(&key)
        || TOPIC_KEYS
            .iter()
            .any(|t| t.synonyms.first().is_some_and(|s| s.name == key))
}

/// The dynamic TLS store keys of `configs` that apply to broker `node_id` (cluster default,
/// then its own), for noticing a certificate rotation.
pub fn dynamic_tls_keys(configs: &BrokerConfigs, node_id: i32) -> BTreeMap<String, String> {
    let dynamic = DynamicBrokerConfigs::of(configs, node_id);
    let mut out = BTreeMap::new();
    for map in [dynamic.cluster_default, dynamic.broker] {
        for (k, v) in map.iter().filter(|(k, _)| is_dynamic_tls(k)) {
            out.insert(k.clone(), v.clone());
        }
    }
    out
}

/// Why a dynamic broker config change is refused.
#[derive(Debug, thiserror::Error)]
pub enum DynamicConfigError {
    /// Keys fixed at start-up (Kafka's message, sorted).
    #[error("Cannot update these configs dynamically: [{}]", .0.join(", "))]
    NotDynamic(Vec<String>),
    /// A value that does not parse or is out of range; an unknown key.
    #[error(transparent)]
    Invalid(#[from] ConfigError),
}

/// Checks that every key of `dynamic` may change at run time.
///
/// # Errors
/// [`DynamicConfigError::NotDynamic`] naming the keys that may not (or an unknown key as
/// [`DynamicConfigError::Invalid`]).
pub fn check_keys<'a>(keys: impl IntoIterator<Item = &'a str>) -> Result<(), DynamicConfigError> {
    let mut fixed = Vec::new();
    for key in keys {
        if is_dynamic(key) {
            continue;
        }
        // A key Sluice knows (or knows it lacks) is fixed at start-up; any other is unknown.
        if !tuning::config::broker_key_names().contains(&key) {
            if let Err(e @ ConfigError::UnknownKey { .. }) = BrokerConfig::default().set(key, "") {
                return Err(e.into());
            }
        }
        fixed.push(key.to_owned());
    }
    if fixed.is_empty() {
        Ok(())
    } else {
        fixed.sort();
        Err(DynamicConfigError::NotDynamic(fixed))
    }
}

/// The broker config in effect: `start_up` with the dynamic configs of `configs` that apply to
/// it applied (cluster defaults, then this broker's).
///
/// # Errors
/// The first key or value that does not check out ([`check_keys`], [`BrokerConfig::set`]).
pub fn effective(
    start_up: &BrokerConfig,
    configs: &BrokerConfigs,
) -> Result<BrokerConfig, DynamicConfigError> {
    let dynamic = DynamicBrokerConfigs::of(configs, start_up.node_id);
    let mut config = start_up.clone();
    for map in [dynamic.cluster_default, dynamic.broker] {
        check_keys(map.keys().map(String::as_str))?;
        for (key, value) in map {
            config.set(key, value)?;
        }
    }
    Ok(config)
}

/// The defaults of every topic property in effect on this broker: the start-up config's, or,
/// with dynamic configs set in `image`, those. The controller checks dynamic configs before
/// storing them; a stored set that no longer checks out (a start-up config changed since) is
/// logged and ignored.
pub fn topic_defaults<'a>(
    start_up: &'a BrokerConfig,
    image: &MetadataImage,
) -> Cow<'a, TopicConfig> {
    if DynamicBrokerConfigs::of(&image.broker_configs, start_up.node_id).is_empty() {
        return Cow::Borrowed(&start_up.topic_defaults);
    }
    match effective(start_up, &image.broker_configs) {
        Ok(config) => Cow::Owned(config.topic_defaults),
        Err(e) => {
            tracing::error!(error = %e, "stored dynamic broker configs are invalid; ignored");
            Cow::Borrowed(&start_up.topic_defaults)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listeners_key_store_is_dynamic_and_noticed() {
        assert!(is_dynamic("listener.name.ssl.ssl.keystore.location"));
        assert!(is_dynamic("listener.name.external.ssl.key.password"));
        assert!(
            !is_dynamic("ssl.keystore.location"),
            "per listener only, as Kafka"
        );
        assert!(!is_dynamic("listener.name.ssl.ssl.client.auth"));
        check_keys(["listener.name.ssl.ssl.keystore.location"]).expect("dynamic");
        let mut configs = BrokerConfigs::new();
        configs.entry("7".into()).or_default().extend([
            (
                "listener.name.ssl.ssl.keystore.location".to_owned(),
                "/b.pem".to_owned(),
            ),
            ("log.retention.ms".to_owned(), "1".to_owned()),
        ]);
        configs.entry(String::new()).or_default().insert(
            "listener.name.ssl.ssl.keystore.location".to_owned(),
            "/a.pem".to_owned(),
        );
        let keys = dynamic_tls_keys(&configs, 7);
        assert_eq!(keys.len(), 1);
        assert_eq!(
            keys["listener.name.ssl.ssl.keystore.location"], "/b.pem",
            "the broker's wins"
        );
        assert_eq!(
            dynamic_tls_keys(&configs, 8)["listener.name.ssl.ssl.keystore.location"],
            "/a.pem"
        );
    }

    #[test]
    fn primary_synonyms_are_dynamic_and_others_fixed() {
        for key in [
            "log.retention.ms",
            "log.segment.bytes",
            "message.max.bytes",
            "log.cleanup.policy",
        ] {
            assert!(is_dynamic(key), "{key}");
        }
        for key in [
            "log.retention.hours",
            "num.partitions",
            "log.retention.check.interval.ms",
            "node.id",
            // Read-only in Kafka 4.x too: `KafkaConfig.replicaLagTimeMaxMs`, in no reconfigurable set.
            "replica.lag.time.max.ms",
        ] {
            assert!(!is_dynamic(key), "{key}");
        }
        match check_keys(["num.partitions", "log.retention.ms", "node.id"]) {
            Err(DynamicConfigError::NotDynamic(keys)) => {
                assert_eq!(keys, ["node.id", "num.partitions"])
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            check_keys(["log.retention.msx"]),
            Err(DynamicConfigError::Invalid(ConfigError::UnknownKey { .. }))
        ));
        assert!(matches!(
            check_keys(["replica.lag.time.max.ms"]),
            Err(DynamicConfigError::NotDynamic(_))
        ));
        // Kafka's dynamic thread-pool key: Sluice has no thread pools.
        assert!(matches!(
            check_keys(["num.io.threads"]),
            Err(DynamicConfigError::NotDynamic(_))
        ));
    }

    #[test]
    fn broker_value_beats_cluster_default_beats_start_up() {
        let mut start_up = BrokerConfig::default();
        start_up.set("log.retention.hours", "1").expect("valid");
        let node = start_up.node_id.to_string();
        let mut dynamic = BrokerConfigs::new();
        let effective_ms = |d: &BrokerConfigs| {
            effective(&start_up, d)
                .expect("valid")
                .topic_defaults
                .log
                .retention_ms
                .map(|d| d.as_millis())
        };
        assert_eq!(effective_ms(&dynamic), Some(3_600_000));
        dynamic
            .entry(String::new())
            .or_default()
            .insert("log.retention.ms".into(), "5000".into());
        assert_eq!(
            effective_ms(&dynamic),
            Some(5000),
            "ms beats the static hours"
        );
        // Another broker's configs do not apply here.
        dynamic
            .entry(format!("{node}0"))
            .or_default()
            .insert("log.retention.ms".into(), "9000".into());
        assert_eq!(effective_ms(&dynamic), Some(5000));
        dynamic
            .entry(node.clone())
            .or_default()
            .insert("log.retention.ms".into(), "7000".into());
        assert_eq!(effective_ms(&dynamic), Some(7000));
        assert_eq!(
            DynamicBrokerConfigs::of(&dynamic, start_up.node_id).lookup("log.retention.ms"),
            Some(("7000", ConfigSource::DynamicBrokerConfig))
        );
        dynamic
            .entry(node)
            .or_default()
            .insert("log.segment.bytes".into(), "100".into());
        assert!(matches!(
            effective(&start_up, &dynamic),
            Err(DynamicConfigError::Invalid(_))
        ));
    }
}
