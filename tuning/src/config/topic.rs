//! [`TopicConfig`]: the per-topic properties (Kafka 4.4's topic keys, [`TOPIC_KEYS`]) and the
//! typed values of those Sluice acts on.
//!
//! Each topic property is declared once:
//! - its Kafka facts — name, type, default, broker-level synonyms, whether Sluice acts on it —
//!   in [`TOPIC_KEYS`] (`kafka_keys`), from which key lookup, suggestions, DescribeConfigs'
//!   listing and, by parsing the default strings, [`TopicConfig::default`] all come;
//! - its typed value in one field: the log's properties in storage's own [`LogConfig`],
//!   embedded as [`TopicConfig::log`] (so the partition log gets exactly that, with no
//!   conversion by hand), the produce path's in `TopicConfig` itself;
//! - its parsing and rendering in one [`TYPED_KEYS`] entry beside each other, from which
//!   [`TopicConfig::set`], [`TopicConfig::get`] and [`TopicConfig::reset`] (set from the
//!   default's rendering) work.
//!
//! Storage keeps the same numbers in [`LogConfig::default`] so that the crate stands alone;
//! a test checks that they are Kafka's. The other keys ([`Support::Stored`]) are validated
//! strings.

use super::error::{invalid, unknown, ConfigError};
use super::value::{
    parse_bool, parse_long_min, parse_ranged, parse_u32_int, parse_unsigned, render_double,
    render_unlimited,
};
use crate::kafka_keys::{topic_key, ConfigType, Support, TopicKey, TOPIC_KEYS};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
pub use storage::CleanupPolicy;
use storage::LogConfig;

/// Kafka's "never" for `flush.messages` and `flush.ms` (`Long.MAX_VALUE`).
pub const FLUSH_NEVER: u64 = i64::MAX as u64;

/// Smallest `segment.bytes` Kafka 4 accepts (1 MiB, KIP-1030).
pub const SEGMENT_BYTES_MIN: u64 = 1 << 20;

/// `message.timestamp.type`: which timestamp a batch carries in the log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TimestampType {
    /// Keep the producer's timestamps.
    #[default]
    CreateTime,
    /// The broker overwrites batch timestamps with its clock at append (and recomputes the CRC).
    LogAppendTime,
}

impl TimestampType {
    /// The Kafka spelling (`CreateTime` / `LogAppendTime`).
    pub fn as_str(self) -> &'static str {
        match self {
            TimestampType::CreateTime => "CreateTime",
            TimestampType::LogAppendTime => "LogAppendTime",
        }
    }
}

/// Where a topic property's effective value comes from, as DescribeConfigs reports it (the
/// variant names are Kafka's `ConfigSource` names, hence the shared suffix).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(clippy::enum_variant_names)]
pub enum ConfigSource {
    /// Set on the topic (CreateTopics configs or IncrementalAlterConfigs).
    TopicConfig,
    /// A dynamic config of this broker (IncrementalAlterConfigs / AlterConfigs on the BROKER
    /// resource named by its node id).
    DynamicBrokerConfig,
    /// A cluster-wide dynamic default (the BROKER resource with the empty name).
    DynamicDefaultBrokerConfig,
    /// Not set on the topic; the broker's start-up config sets the default.
    StaticBrokerConfig,
    /// Neither: Kafka's built-in default.
    DefaultConfig,
}

impl ConfigSource {
    /// Kafka's `config_source` code in DescribeConfigs responses (v1+).
    pub fn kafka_code(self) -> i8 {
        match self {
            ConfigSource::TopicConfig => 1,
            ConfigSource::DynamicBrokerConfig => 2,
            ConfigSource::DynamicDefaultBrokerConfig => 3,
            ConfigSource::StaticBrokerConfig => 4,
            ConfigSource::DefaultConfig => 5,
        }
    }
}

/// `compression.type` of a topic (Kafka's values).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CompressionType {
    /// Keep each batch as the producer compressed it.
    #[default]
    Producer,
    Uncompressed,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl CompressionType {
    fn parse(v: &str) -> Option<CompressionType> {
        Some(match v {
            "producer" => CompressionType::Producer,
            "uncompressed" => CompressionType::Uncompressed,
            "gzip" => CompressionType::Gzip,
            "snappy" => CompressionType::Snappy,
            "lz4" => CompressionType::Lz4,
            "zstd" => CompressionType::Zstd,
            _ => return None,
        })
    }

    /// Kafka's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            CompressionType::Producer => "producer",
            CompressionType::Uncompressed => "uncompressed",
            CompressionType::Gzip => "gzip",
            CompressionType::Snappy => "snappy",
            CompressionType::Lz4 => "lz4",
            CompressionType::Zstd => "zstd",
        }
    }

    /// The RecordBatch codec id batches are recompressed to, or `None` for `producer`.
    pub fn codec(self) -> Option<u8> {
        match self {
            CompressionType::Producer => None,
            CompressionType::Uncompressed => Some(0),
            CompressionType::Gzip => Some(1),
            CompressionType::Snappy => Some(2),
            CompressionType::Lz4 => Some(3),
            CompressionType::Zstd => Some(4),
        }
    }
}

fn topic_key_names() -> Vec<&'static str> {
    TOPIC_KEYS.iter().map(|k| k.name).collect()
}

/// The per-topic properties: every key of Kafka 4.4's topic config ([`TOPIC_KEYS`]).
///
/// Those Sluice acts on ([`Support::Honoured`]) are typed fields: the log's in [`Self::log`]
/// (storage's own config, so nothing converts them), the produce path's here; the others are
/// kept as validated, normalised strings (`stored`) and described. Each typed key is parsed and
/// rendered in one entry of `TYPED_KEYS`. Change values through [`TopicConfig::set`] /
/// [`TopicConfig::reset`] so the record of explicitly set keys stays right; the public fields
/// are for reading.
#[derive(Clone, Debug, PartialEq)]
pub struct TopicConfig {
    /// What the partition log acts on, under Kafka's names and units: `segment.bytes`,
    /// `segment.ms`, `index.interval.bytes`, `flush.messages`, `flush.ms`, `retention.ms`,
    /// `retention.bytes`, `cleanup.policy`, `max.message.bytes`, `message.timestamp.type`
    /// (`log_append_time`) and compaction's `min.cleanable.dirty.ratio`,
    /// `min.compaction.lag.ms`, `max.compaction.lag.ms`, `delete.retention.ms`
    /// (`compaction`). Kafka's "never" ([`FLUSH_NEVER`]) is `u64::MAX` / `None` there, its
    /// `-1` "unlimited" is `None`. The write-pipeline fields Kafka has no property for
    /// (`write_chunk_bytes`, …) keep [`LogConfig`]'s defaults.
    pub log: LogConfig,
    /// `message.timestamp.before.max.ms`: for CreateTime topics, how far in the past of the
    /// broker's clock a record's timestamp may be, in ms. Default `i64::MAX` (no limit).
    pub message_timestamp_before_max_ms: u64,
    /// `message.timestamp.after.max.ms`: for CreateTime topics, how far in the future of the
    /// broker's clock a record's timestamp may be, in ms. Default 3600000 (1 hour).
    pub message_timestamp_after_max_ms: u64,
    /// `compression.type`: `producer` (default: keep the producer's codec), `uncompressed`,
    /// `gzip`, `snappy`, `lz4` or `zstd` (batches are recompressed to it).
    pub compression_type: CompressionType,
    /// `cleanup.policy` as given, items trimmed and empty ones dropped, in the given order:
    /// Kafka describes the list as set (`delete,compact` after APPEND `compact`), while
    /// [`LogConfig::cleanup_policy`] keeps only which policies are in it.
    cleanup_policy_list: String,
    /// `min.insync.replicas`: an `acks=all` produce needs this many in-sync replicas, else
    /// NOT_ENOUGH_REPLICAS. Sluice is one broker, so every ISR has 1 replica. Default 1.
    pub min_insync_replicas: u32,
    /// Values of the [`Support::Stored`] keys that differ from Kafka's default (normalised as
    /// DescribeConfigs renders them).
    stored: BTreeMap<&'static str, String>,
    /// Keys set through [`TopicConfig::set`] on this value, i.e. not inherited.
    explicit: BTreeSet<&'static str>,
}

impl Default for TopicConfig {
    /// Kafka 4.4's defaults, parsed from [`TOPIC_KEYS`] (the one place they are written; a test
    /// checks that storage's [`LogConfig::default`] agrees).
    fn default() -> Self {
        let mut config = TopicConfig {
            log: LogConfig::default(),
            message_timestamp_before_max_ms: 0,
            message_timestamp_after_max_ms: 0,
            compression_type: CompressionType::default(),
            cleanup_policy_list: String::new(),
            min_insync_replicas: 0,
            stored: BTreeMap::new(),
            explicit: BTreeSet::new(),
        };
        for typed in &TYPED_KEYS {
            let key = topic_key(typed.name).expect("every typed key is in TOPIC_KEYS");
            (typed.set)(&mut config, key.name, key.default).expect("Kafka's defaults parse");
        }
        config
    }
}

/// How one typed ([`Support::Honoured`]) topic property is read into its field and rendered
/// from it, as Kafka renders it (`-1` for unlimited). `set` gets the key (for errors) and the
/// value as given; on error it changes nothing.
struct TypedKey {
    name: &'static str,
    set: fn(&mut TopicConfig, &str, &str) -> Result<(), ConfigError>,
    get: fn(&TopicConfig) -> String,
}

/// Milliseconds of a duration set from a millisecond property (exact: it came from a `u64`).
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Kafka's `Long.MAX_VALUE` as a millisecond count: "never" for `max.compaction.lag.ms`.
const LONG_MAX_MS: u64 = i64::MAX as u64;

/// Kafka's `LogConfig.validateValues`: `min.compaction.lag.ms` may not exceed
/// `max.compaction.lag.ms` (`None`: no maximum).
fn check_compaction_lags(min: Duration, max: Option<Duration>) -> Result<(), ConfigError> {
    match max {
        Some(max) if min > max => Err(invalid(
            "min.compaction.lag.ms",
            &millis(min).to_string(),
            format!(
                "conflict topic config setting min.compaction.lag.ms ({}) > \
                 max.compaction.lag.ms ({})",
                millis(min),
                millis(max)
            ),
        )),
        _ => Ok(()),
    }
}

/// Every typed topic property: parsing and rendering, one entry per key. Its names are exactly
/// the [`Support::Honoured`] keys of [`TOPIC_KEYS`] (checked by a test).
const TYPED_KEYS: [TypedKey; 18] = [
    // Kafka's list parsing: comma-separated, items trimmed, empty items dropped, duplicates
    // allowed; `delete`, `compact`, both in either order, or none.
    TypedKey {
        name: "cleanup.policy",
        set: |c, key, value| {
            let policies: Vec<&str> = value
                .trim()
                .split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .collect();
            if let Some(bad) = policies
                .iter()
                .find(|p| !matches!(**p, "delete" | "compact"))
            {
                return Err(invalid(
                    key,
                    value,
                    format!("`{bad}` is not a policy: expected `delete` or `compact`"),
                ));
            }
            let compact = policies.contains(&"compact");
            let delete = policies.contains(&"delete");
            c.log.cleanup_policy = match (compact, delete) {
                (false, false) => CleanupPolicy::NoCleanup,
                (false, true) => CleanupPolicy::Delete,
                (true, false) => CleanupPolicy::Compact,
                (true, true) => CleanupPolicy::CompactDelete,
            };
            c.cleanup_policy_list = policies.join(",");
            Ok(())
        },
        get: |c| c.cleanup_policy_list.clone(),
    },
    TypedKey {
        name: "compression.type",
        set: |c, key, value| {
            c.compression_type = CompressionType::parse(value.trim()).ok_or_else(|| {
                invalid(
                    key,
                    value,
                    "expected `producer`, `uncompressed`, `gzip`, `snappy`, `lz4` or `zstd`",
                )
            })?;
            Ok(())
        },
        get: |c| c.compression_type.as_str().to_owned(),
    },
    TypedKey {
        name: "delete.retention.ms",
        set: |c, key, value| {
            let n = parse_unsigned(key, value, 0, i64::MAX)?;
            c.log.compaction.delete_retention = Duration::from_millis(n);
            Ok(())
        },
        get: |c| millis(c.log.compaction.delete_retention).to_string(),
    },
    TypedKey {
        name: "flush.messages",
        set: |c, key, value| {
            let n = parse_unsigned(key, value, 1, i64::MAX)?;
            c.log.flush_messages = if n >= FLUSH_NEVER { u64::MAX } else { n };
            Ok(())
        },
        get: |c| c.log.flush_messages.min(FLUSH_NEVER).to_string(),
    },
    TypedKey {
        name: "flush.ms",
        set: |c, key, value| {
            let n = parse_unsigned(key, value, 0, i64::MAX)?;
            c.log.flush_ms = (n < FLUSH_NEVER).then(|| Duration::from_millis(n));
            Ok(())
        },
        get: |c| c.log.flush_ms.map_or(FLUSH_NEVER, millis).to_string(),
    },
    TypedKey {
        name: "index.interval.bytes",
        set: |c, key, value| {
            c.log.index_interval_bytes = u64::from(parse_u32_int(key, value)?);
            Ok(())
        },
        get: |c| c.log.index_interval_bytes.to_string(),
    },
    // Kafka's Long.MAX is "no maximum lag".
    TypedKey {
        name: "max.compaction.lag.ms",
        set: |c, key, value| {
            let n = parse_unsigned(key, value, 1, i64::MAX)?;
            let max = (n < LONG_MAX_MS).then(|| Duration::from_millis(n));
            c.log.compaction.max_compaction_lag = max;
            Ok(())
        },
        get: |c| {
            c.log
                .compaction
                .max_compaction_lag
                .map_or(LONG_MAX_MS, millis)
                .to_string()
        },
    },
    TypedKey {
        name: "max.message.bytes",
        set: |c, key, value| {
            let n = parse_u32_int(key, value)?;
            c.log.max_message_bytes =
                usize::try_from(n).map_err(|_| invalid(key, value, "out of range"))?;
            Ok(())
        },
        get: |c| c.log.max_message_bytes.to_string(),
    },
    TypedKey {
        name: "message.timestamp.after.max.ms",
        set: |c, key, value| {
            c.message_timestamp_after_max_ms = parse_unsigned(key, value, 0, i64::MAX)?;
            Ok(())
        },
        get: |c| c.message_timestamp_after_max_ms.to_string(),
    },
    TypedKey {
        name: "message.timestamp.before.max.ms",
        set: |c, key, value| {
            c.message_timestamp_before_max_ms = parse_unsigned(key, value, 0, i64::MAX)?;
            Ok(())
        },
        get: |c| c.message_timestamp_before_max_ms.to_string(),
    },
    TypedKey {
        name: "message.timestamp.type",
        set: |c, key, value| {
            c.log.log_append_time = match value.trim() {
                "CreateTime" => false,
                "LogAppendTime" => true,
                _ => {
                    return Err(invalid(
                        key,
                        value,
                        "expected `CreateTime` or `LogAppendTime`",
                    ))
                }
            };
            Ok(())
        },
        get: |c| c.message_timestamp_type().as_str().to_owned(),
    },
    TypedKey {
        name: "min.cleanable.dirty.ratio",
        set: |c, key, value| {
            let ratio: f64 = value
                .trim()
                .parse()
                .map_err(|_| invalid(key, value, "not a number"))?;
            if !(0.0..=1.0).contains(&ratio) {
                return Err(invalid(key, value, "must be between 0 and 1"));
            }
            c.log.compaction.min_cleanable_dirty_ratio = ratio;
            Ok(())
        },
        get: |c| render_double(c.log.compaction.min_cleanable_dirty_ratio),
    },
    TypedKey {
        name: "min.compaction.lag.ms",
        set: |c, key, value| {
            let min = Duration::from_millis(parse_unsigned(key, value, 0, i64::MAX)?);
            c.log.compaction.min_compaction_lag = min;
            Ok(())
        },
        get: |c| millis(c.log.compaction.min_compaction_lag).to_string(),
    },
    TypedKey {
        name: "min.insync.replicas",
        set: |c, key, value| {
            let n = parse_ranged(key, value, 1, i64::from(i32::MAX))?;
            c.min_insync_replicas =
                u32::try_from(n).map_err(|_| invalid(key, value, "out of range"))?;
            Ok(())
        },
        get: |c| c.min_insync_replicas.to_string(),
    },
    // Kafka: any negative retention.bytes means unlimited.
    TypedKey {
        name: "retention.bytes",
        set: |c, key, value| {
            let n = parse_long_min(key, value, i64::MIN)?;
            c.log.retention_bytes = u64::try_from(n).ok();
            Ok(())
        },
        get: |c| render_unlimited(c.log.retention_bytes),
    },
    TypedKey {
        name: "retention.ms",
        set: |c, key, value| {
            let n = parse_ranged(key, value, -1, i64::MAX)?;
            c.log.retention_ms = u64::try_from(n).ok().map(Duration::from_millis);
            Ok(())
        },
        get: |c| render_unlimited(c.log.retention_ms.map(millis)),
    },
    TypedKey {
        name: "segment.bytes",
        set: |c, key, value| {
            c.log.segment_bytes =
                parse_unsigned(key, value, SEGMENT_BYTES_MIN, i64::from(i32::MAX))?;
            Ok(())
        },
        get: |c| c.log.segment_bytes.to_string(),
    },
    TypedKey {
        name: "segment.ms",
        set: |c, key, value| {
            c.log.segment_ms = Duration::from_millis(parse_unsigned(key, value, 1, i64::MAX)?);
            Ok(())
        },
        get: |c| millis(c.log.segment_ms).to_string(),
    },
];

/// The typed entry of topic property `name`, if Sluice acts on it.
fn typed_key(name: &str) -> Option<&'static TypedKey> {
    TYPED_KEYS.iter().find(|t| t.name == name)
}

/// Validates and normalises the value of a [`Support::Stored`] key, with Kafka 4.4's ranges
/// (probed against the real broker with IncrementalAlterConfigs `validate_only`).
fn normalise_stored(key: &'static TopicKey, value: &str) -> Result<String, ConfigError> {
    let name = key.name;
    match key.config_type {
        ConfigType::Boolean => normalise_stored_bool(name, value),
        ConfigType::Double => normalise_stored_ratio(name, value),
        ConfigType::List => normalise_replica_list(name, value),
        ConfigType::Int | ConfigType::Long | ConfigType::String => {
            normalise_stored_number(name, value)
        }
    }
}

/// A stored boolean; `remote.storage.enable=true` is refused.
fn normalise_stored_bool(name: &'static str, value: &str) -> Result<String, ConfigError> {
    let b = parse_bool(name, value)?;
    if b && name == "remote.storage.enable" {
        // Kafka too refuses it while the broker's tiered storage is off.
        return Err(invalid(
            name,
            value,
            "tiered storage (remote log storage) is not supported by Sluice",
        ));
    }
    Ok(b.to_string())
}

/// A stored double, which must lie between 0 and 1.
fn normalise_stored_ratio(name: &'static str, value: &str) -> Result<String, ConfigError> {
    let d: f64 = value
        .trim()
        .parse()
        .map_err(|_| invalid(name, value, "not a number"))?;
    if !(0.0..=1.0).contains(&d) {
        return Err(invalid(name, value, "must be between 0 and 1"));
    }
    Ok(d.to_string())
}

/// The replication throttles: `*` or `partition:broker,...` (Kafka's
/// ThrottledReplicaListValidator); empty means none.
fn normalise_replica_list(name: &'static str, value: &str) -> Result<String, ConfigError> {
    let items: Vec<&str> = value
        .trim()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    let pair = |s: &str| {
        s.split_once(':').is_some_and(|(p, b)| {
            !p.is_empty()
                && !b.is_empty()
                && p.bytes().all(|c| c.is_ascii_digit())
                && b.bytes().all(|c| c.is_ascii_digit())
        })
    };
    if items == ["*"] || items.iter().all(|s| pair(s)) {
        Ok(items.join(","))
    } else {
        Err(invalid(
            name,
            value,
            format!(
                "{name} must be the literal '*' or a list of replicas \
                 [partitionId]:[brokerId],..."
            ),
        ))
    }
}

/// A stored int, long or string key: each name with its own range.
fn normalise_stored_number(name: &'static str, value: &str) -> Result<String, ConfigError> {
    let int_range = |min: i64, max: i64| parse_ranged(name, value, min, max).map(|n| n.to_string());
    match name {
        "compression.gzip.level" => {
            let n = parse_ranged(name, value, -1, 9)?;
            if n == 0 {
                return Err(invalid(
                    name,
                    value,
                    "must be between 1 and 9 or equal to -1",
                ));
            }
            Ok(n.to_string())
        }
        "compression.lz4.level" => int_range(1, 17),
        "compression.zstd.level" => int_range(-131_072, 22),
        "max.decompressed.message.bytes" => int_range(1, i64::from(i32::MAX)),
        "segment.index.bytes" => int_range(4, i64::from(i32::MAX)),
        "local.retention.bytes" | "local.retention.ms" => {
            parse_long_min(name, value, -2).map(|n| n.to_string())
        }
        "remote.copy.lag.bytes" => parse_long_min(name, value, -1).map(|n| n.to_string()),
        "remote.copy.lag.ms" => parse_long_min(name, value, i64::MIN).map(|n| n.to_string()),
        // file.delete.delay.ms, segment.jitter.ms.
        _ => parse_long_min(name, value, 0).map(|n| n.to_string()),
    }
}

impl TopicConfig {
    /// A topic's starting config: the values of `defaults` (usually
    /// `BrokerConfig::topic_defaults`) with no key marked as set on the topic.
    pub fn inherit(defaults: &TopicConfig) -> TopicConfig {
        TopicConfig {
            explicit: BTreeSet::new(),
            ..defaults.clone()
        }
    }

    /// All topic-level property names (Kafka 4.4's), in [`TopicConfig::entries`] order.
    pub fn keys() -> impl Iterator<Item = &'static str> {
        TOPIC_KEYS.iter().map(|k| k.name)
    }

    /// The checks across keys, on a whole config (Kafka's `LogConfig.validateValues`, run when
    /// a topic is created or its configs altered, never on configs already stored):
    /// `min.compaction.lag.ms` ≤ `max.compaction.lag.ms`.
    ///
    /// # Errors
    /// [`ConfigError::InvalidValue`] naming `min.compaction.lag.ms`, in Kafka's words.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_compaction_lags(
            self.log.compaction.min_compaction_lag,
            self.log.compaction.max_compaction_lag,
        )
    }

    /// Sets topic-level property `key` (Kafka name, e.g. `retention.ms`) from its string
    /// value, and marks it as set on this topic.
    ///
    /// # Errors
    /// [`ConfigError::UnknownKey`] for a key that is not a Kafka topic property (with the
    /// closest one as suggestion); [`ConfigError::InvalidValue`] if the value does not parse,
    /// is out of Kafka's range, conflicts with another key as Kafka refuses
    /// (`min.compaction.lag.ms` > `max.compaction.lag.ms`), or needs a feature Sluice lacks
    /// (`remote.storage.enable=true`; the message names it). On error nothing changes.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        let Some(spec) = topic_key(key) else {
            return Err(unknown(key, &topic_key_names()));
        };
        let name = spec.name;
        match typed_key(name) {
            Some(typed) => (typed.set)(self, key, value)?,
            None => {
                assert_eq!(
                    spec.support,
                    Support::Stored,
                    "typed key `{name}` not parsed"
                );
                let normalised = normalise_stored(spec, value)?;
                if normalised == spec.default {
                    self.stored.remove(name);
                } else {
                    self.stored.insert(name, normalised);
                }
            }
        }
        self.explicit.insert(name);
        Ok(())
    }

    /// Resets `key` to the value in `defaults` and unmarks it (IncrementalAlterConfigs
    /// `DELETE`).
    ///
    /// # Errors
    /// [`ConfigError::UnknownKey`] if `key` is not a topic property.
    pub fn reset(&mut self, key: &str, defaults: &TopicConfig) -> Result<(), ConfigError> {
        let Some(spec) = topic_key(key) else {
            return Err(unknown(key, &topic_key_names()));
        };
        let name = spec.name;
        // Every value renders as a string its parser reads back to the same value (tested).
        let value = defaults
            .get(name)
            .expect("a topic key has a value in every config");
        self.set(name, &value)?;
        self.explicit.remove(name);
        Ok(())
    }

    /// The value of topic-level property `key` as Kafka renders it (`-1` for unlimited), or
    /// `None` for an unknown key.
    pub fn get(&self, key: &str) -> Option<String> {
        let spec = topic_key(key)?;
        let value = match typed_key(spec.name) {
            Some(typed) => (typed.get)(self),
            None => self
                .stored
                .get(spec.name)
                .cloned()
                .unwrap_or_else(|| spec.default.to_owned()),
        };
        Some(value)
    }

    /// `message.timestamp.type`, from the log's `log_append_time`.
    pub fn message_timestamp_type(&self) -> TimestampType {
        if self.log.log_append_time {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }

    /// Every topic property with its value, sorted by name (stable, for DescribeConfigs).
    pub fn entries(&self) -> Vec<(&'static str, String)> {
        Self::keys()
            .filter_map(|k| self.get(k).map(|v| (k, v)))
            .collect()
    }

    /// Whether `key` was set on this value by [`TopicConfig::set`] (not inherited).
    pub fn is_set(&self, key: &str) -> bool {
        self.explicit.contains(key)
    }

    /// The storage engine's config of this topic's partitions: a copy of [`Self::log`].
    pub fn to_log_config(&self) -> LogConfig {
        self.log.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_defaults_are_kafkas() {
        let t = TopicConfig::default();
        let got: Vec<(&str, String)> = t.entries();
        // What Apache Kafka 4.4.0 lists for a new topic (DescribeConfigs, scripts/kafka-ref).
        let want = [
            ("cleanup.policy", "delete"),
            ("compression.gzip.level", "-1"),
            ("compression.lz4.level", "9"),
            ("compression.type", "producer"),
            ("compression.zstd.level", "3"),
            ("delete.retention.ms", "86400000"),
            ("errors.deadletterqueue.group.enable", "false"),
            ("file.delete.delay.ms", "60000"),
            ("flush.messages", "9223372036854775807"),
            ("flush.ms", "9223372036854775807"),
            ("follower.replication.throttled.replicas", ""),
            ("index.interval.bytes", "4096"),
            ("leader.replication.throttled.replicas", ""),
            ("local.retention.bytes", "-2"),
            ("local.retention.ms", "-2"),
            ("max.compaction.lag.ms", "9223372036854775807"),
            ("max.decompressed.message.bytes", "2147483639"),
            ("max.message.bytes", "1048588"),
            ("message.timestamp.after.max.ms", "3600000"),
            ("message.timestamp.before.max.ms", "9223372036854775807"),
            ("message.timestamp.type", "CreateTime"),
            ("min.cleanable.dirty.ratio", "0.5"),
            ("min.compaction.lag.ms", "0"),
            ("min.insync.replicas", "1"),
            ("preallocate", "false"),
            ("remote.copy.lag.bytes", "-1"),
            ("remote.copy.lag.ms", "0"),
            ("remote.log.copy.disable", "false"),
            ("remote.log.delete.on.disable", "false"),
            ("remote.storage.enable", "false"),
            ("retention.bytes", "-1"),
            ("retention.ms", "604800000"),
            ("segment.bytes", "1073741824"),
            ("segment.index.bytes", "10485760"),
            ("segment.jitter.ms", "0"),
            ("segment.ms", "604800000"),
            ("unclean.leader.election.enable", "false"),
        ];
        assert_eq!(got.len(), want.len());
        for ((gk, gv), (wk, wv)) in got.iter().zip(want) {
            assert_eq!((*gk, gv.as_str()), (wk, wv));
        }
        // The default topic config maps onto storage's defaults exactly.
        assert_eq!(t.to_log_config(), storage::LogConfig::default());
    }

    #[test]
    fn topic_set_validates_and_marks() {
        let mut t = TopicConfig::default();
        t.set("retention.ms", "-1").expect("-1 is unlimited");
        assert_eq!(t.log.retention_ms, None);
        assert_eq!(t.get("retention.ms").as_deref(), Some("-1"));
        assert!(t.is_set("retention.ms"));
        assert!(!t.is_set("segment.ms"));

        let bad = [
            ("retention.ms", "-2"),
            ("retention.ms", "abc"),
            ("segment.bytes", "1048575"),
            ("segment.bytes", "2147483648"),
            ("segment.ms", "0"),
            ("cleanup.policy", "nope"),
            ("cleanup.policy", "compact,nope"),
            ("cleanup.policy", "Delete"),
            ("remote.storage.enable", "true"),
            ("compression.gzip.level", "0"),
            ("compression.zstd.level", "23"),
            ("min.cleanable.dirty.ratio", "1.5"),
            ("min.insync.replicas", "0"),
            ("max.compaction.lag.ms", "0"),
            ("max.compaction.lag.ms", "-1"),
            ("min.compaction.lag.ms", "-1"),
            ("delete.retention.ms", "-1"),
            ("min.cleanable.dirty.ratio", "-0.1"),
            ("min.cleanable.dirty.ratio", "x"),
            ("local.retention.ms", "-3"),
            ("segment.index.bytes", "3"),
            ("leader.replication.throttled.replicas", "x"),
            ("preallocate", "yes"),
            ("message.timestamp.type", "createtime"),
            ("max.message.bytes", "-1"),
            ("flush.messages", "0"),
            ("flush.ms", "-1"),
            ("index.interval.bytes", "2147483648"),
        ];
        for (k, v) in bad {
            let before = t.clone();
            let err = t.set(k, v).expect_err(&format!("{k}={v} must be rejected"));
            assert!(
                matches!(&err, ConfigError::InvalidValue { key, .. } if key == k),
                "{err}"
            );
            assert!(err.to_string().contains(k), "{err}");
            assert_eq!(t, before, "a rejected set changes nothing");
        }

        t.set("segment.bytes", "1048576").expect("Kafka's minimum");
        t.set("cleanup.policy", " delete ").expect("trimmed");
        // Keys for what Sluice lacks are stored and described where Kafka accepts them.
        t.set("leader.replication.throttled.replicas", "0:1, 1:2")
            .expect("valid list");
        assert_eq!(
            t.get("leader.replication.throttled.replicas").as_deref(),
            Some("0:1,1:2")
        );
        t.set("retention.bytes", "-7")
            .expect("any negative is unlimited");
        assert_eq!(t.log.retention_bytes, None);
        t.set("cleanup.policy", "")
            .expect("the empty list: no cleanup");
        assert_eq!(
            t.to_log_config().cleanup_policy,
            CleanupPolicy::NoCleanup,
            "empty policy keeps all"
        );
        assert_eq!(t.get("cleanup.policy").as_deref(), Some(""));
        t.set("cleanup.policy", "delete").expect("valid");
        t.set("message.timestamp.type", "LogAppendTime")
            .expect("valid");
        assert_eq!(t.message_timestamp_type(), TimestampType::LogAppendTime);
        t.set("flush.messages", "1").expect("valid");
        t.set("flush.ms", "0").expect("valid");
        let log = t.to_log_config();
        assert_eq!(log.segment_bytes, 1_048_576);
        assert_eq!(log.flush_messages, 1);
        assert_eq!(log.flush_ms, Some(Duration::ZERO));
        assert_eq!(log.retention_ms, None);
        assert_eq!(
            log.write_chunk_bytes,
            storage::LogConfig::default().write_chunk_bytes
        );
    }

    #[test]
    fn cleanup_policy_is_a_list() {
        let mut t = TopicConfig::default();
        // Described in the order given, as Kafka describes a list it was given.
        for (value, policy, rendered) in [
            ("compact", CleanupPolicy::Compact, "compact"),
            (
                "delete,compact",
                CleanupPolicy::CompactDelete,
                "delete,compact",
            ),
            (
                " compact , delete ",
                CleanupPolicy::CompactDelete,
                "compact,delete",
            ),
            ("compact,compact", CleanupPolicy::Compact, "compact,compact"),
            ("delete,,delete", CleanupPolicy::Delete, "delete,delete"),
            ("", CleanupPolicy::NoCleanup, ""),
            ("delete", CleanupPolicy::Delete, "delete"),
        ] {
            t.set("cleanup.policy", value).expect("a valid list");
            assert_eq!(t.log.cleanup_policy, policy, "{value}");
            assert_eq!(t.get("cleanup.policy").as_deref(), Some(rendered));
        }
        assert!(CleanupPolicy::CompactDelete.compacts() && CleanupPolicy::CompactDelete.deletes());
    }

    #[test]
    fn compaction_keys_are_typed() {
        let mut t = TopicConfig::default();
        t.set("min.cleanable.dirty.ratio", "0.25").expect("valid");
        t.set("min.compaction.lag.ms", "1000").expect("valid");
        t.set("max.compaction.lag.ms", "60000").expect("valid");
        t.set("delete.retention.ms", "0").expect("valid");
        let c = t.to_log_config().compaction;
        assert_eq!(c.min_cleanable_dirty_ratio, 0.25);
        assert_eq!(c.min_compaction_lag, Duration::from_secs(1));
        assert_eq!(c.max_compaction_lag, Some(Duration::from_secs(60)));
        assert_eq!(c.delete_retention, Duration::ZERO);
        assert_eq!(t.get("min.cleanable.dirty.ratio").as_deref(), Some("0.25"));
        assert_eq!(t.get("max.compaction.lag.ms").as_deref(), Some("60000"));
        t.set("min.cleanable.dirty.ratio", "1").expect("the bound");
        assert_eq!(t.get("min.cleanable.dirty.ratio").as_deref(), Some("1.0"));

        // Kafka refuses min.compaction.lag.ms > max.compaction.lag.ms, whichever is set, on
        // the config as a whole (validateValues), so a pair set together is checked as a pair.
        let mut wrong = t.clone();
        wrong
            .set("min.compaction.lag.ms", "60001")
            .expect("each key parses alone");
        let err = wrong.validate().expect_err("min above max");
        assert!(
            err.to_string()
                .contains("min.compaction.lag.ms (60001) > max.compaction.lag.ms (60000)"),
            "{err}"
        );
        let mut wrong = t.clone();
        wrong.set("max.compaction.lag.ms", "999").unwrap();
        assert!(wrong.validate().is_err(), "max below min");
        wrong.set("min.compaction.lag.ms", "10").unwrap();
        wrong
            .validate()
            .expect("set as a pair, the final config holds");
        t.set("min.compaction.lag.ms", "60000")
            .expect("equal is fine");
        t.validate().expect("equal is fine");

        t.set("max.compaction.lag.ms", "9223372036854775807")
            .expect("Long.MAX");
        assert_eq!(t.log.compaction.max_compaction_lag, None);
        assert_eq!(
            t.get("max.compaction.lag.ms").as_deref(),
            Some("9223372036854775807")
        );
    }

    #[test]
    fn typed_keys_are_the_honoured_keys() {
        for key in &TOPIC_KEYS {
            assert_eq!(
                typed_key(key.name).is_some(),
                key.support == Support::Honoured,
                "{}",
                key.name
            );
        }
        assert!(TYPED_KEYS.iter().all(|t| topic_key(t.name).is_some()));
    }

    #[test]
    fn every_value_reads_back_as_rendered() {
        // `reset` and `Default` rely on it: set(get(k)) changes nothing.
        let mut t = TopicConfig::default();
        for (k, v) in [
            ("retention.ms", "-1"),
            ("retention.bytes", "5"),
            ("flush.ms", "0"),
            ("flush.messages", "1"),
            ("cleanup.policy", ""),
            ("message.timestamp.type", "LogAppendTime"),
            ("segment.jitter.ms", "7"),
            ("cleanup.policy", "delete,compact"),
            ("min.cleanable.dirty.ratio", "0.1"),
            ("max.compaction.lag.ms", "5000"),
            ("min.compaction.lag.ms", "4000"),
            ("delete.retention.ms", "1"),
        ] {
            t.set(k, v).expect("valid");
        }
        for config in [TopicConfig::default(), t] {
            let mut again = config.clone();
            for (k, v) in config.entries() {
                again.set(k, &v).expect("a rendered value parses");
            }
            assert_eq!(again.entries(), config.entries());
            assert_eq!(again.log, config.log);
        }
    }

    #[test]
    fn topic_unknown_key_suggests() {
        let mut t = TopicConfig::default();
        let err = t.set("retention.mss", "1").expect_err("unknown");
        match &err {
            ConfigError::UnknownKey { key, suggestion } => {
                assert_eq!(key, "retention.mss");
                assert_eq!(suggestion.as_deref(), Some("retention.ms"));
            }
            other => panic!("wrong error {other}"),
        }
        assert_eq!(
            err.to_string(),
            "unknown config key `retention.mss` (did you mean `retention.ms`?)"
        );
        let err = t.set("zzzzzzzzzzzzzzzzzzzzzz", "1").expect_err("unknown");
        assert!(matches!(
            err,
            ConfigError::UnknownKey {
                suggestion: None,
                ..
            }
        ));
    }
}
