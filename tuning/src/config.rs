//! Broker and topic configuration: Kafka property names, Kafka defaults, validation.
//!
//! Two types:
//! - [`TopicConfig`]: the per-topic properties a Kafka client can describe, create with and alter
//!   (`retention.ms`, `segment.bytes`, …). It remembers which keys were set explicitly, so
//!   DescribeConfigs can report `TOPIC_CONFIG` versus a default ([`TopicConfig::source`]).
//! - [`BrokerConfig`]: the start-up configuration of one `sluice` process, including
//!   `topic_defaults`, the [`TopicConfig`] every new topic starts from.
//!
//! Every key is a Kafka property name where Kafka has one; Sluice-only keys start with
//! `sluice.`. Values are strings as in a Kafka `.properties` file; [`BrokerConfig::set`] and
//! [`TopicConfig::set`] parse and range-check them and fail with a [`ConfigError`] naming the key.
//! Loading order (defaults < TOML file < `--set` < flags) lives in the broker's `cli` module; this module only
//! knows how to apply one key and how to flatten a TOML document into keys
//! ([`flatten_toml`]).
//!
//! Ownership: a `BrokerConfig` is built once at start-up on the main thread and then read-only;
//! shards get clones. Topic configs belong to the cluster metadata (shard 0 now).
//!
//! Every Kafka 4.4 topic key is accepted, validated with Kafka's ranges, stored and described
//! ([`crate::kafka_keys::TOPIC_KEYS`]); broker keys for parts of Kafka that Sluice lacks are
//! refused with the reason ([`crate::kafka_keys::UNSUPPORTED_BROKER_KEYS`]).
//!
//! Limits: one listener, one data directory (Kafka's `log.dirs` list is rejected if it names
//! more than one), `cleanup.policy` `delete` or empty only (no compaction).

use crate::kafka_keys::{
    topic_key, topic_key_for_broker_synonym, unsupported_broker_key, ConfigType, Support, TopicKey,
    TOPIC_KEYS,
};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

/// Kafka's "never" for `flush.messages` and `flush.ms` (`Long.MAX_VALUE`).
pub const FLUSH_NEVER: u64 = i64::MAX as u64;

/// Smallest `segment.bytes` Kafka 4 accepts (1 MiB, KIP-1030).
pub const SEGMENT_BYTES_MIN: u64 = 1 << 20;

/// Largest CPU id `--cores` accepts (`CPU_SETSIZE`).
const CPU_ID_LIMIT: usize = 1024;

/// Why a configuration could not be applied. Every variant names the key (or file) at fault.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The key is not a property Sluice knows; `suggestion` is the closest known key.
    #[error("unknown config key `{key}`{}", did_you_mean(.suggestion))]
    UnknownKey {
        /// The key as given.
        key: String,
        /// Closest known key by edit distance, if one is close enough to be a likely typo.
        suggestion: Option<String>,
    },
    /// The key is known but the value does not parse, is out of range or is not allowed.
    #[error("invalid value `{value}` for config key `{key}`: {why}")]
    InvalidValue {
        /// The key (or command-line flag, e.g. `--listen`) as given.
        key: String,
        /// The value as given.
        value: String,
        /// What is wrong and what would be accepted.
        why: String,
    },
    /// The key is Kafka's, for a part of Kafka that Sluice does not have.
    #[error("config key `{key}` is not supported: {why}")]
    Unsupported {
        /// The key as given.
        key: String,
        /// What Sluice lacks, and what to do.
        why: String,
    },
    /// The `--config` file could not be read.
    #[error("cannot read config file {}: {source}", .path.display())]
    ReadFile {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The `--config` file is not valid TOML or holds a value of an unsupported type.
    #[error("config file {}: {why}", .path.display())]
    ParseFile {
        /// The file.
        path: PathBuf,
        /// The parse error, with its line and column where TOML gives them.
        why: String,
    },
    /// A key in the `--config` file was rejected; `source` names the key.
    #[error("config file {}: {source}", .path.display())]
    InFile {
        /// The file.
        path: PathBuf,
        /// The error for the key.
        #[source]
        source: Box<ConfigError>,
    },
    /// A `--set` argument is not of the form `KEY=VALUE`.
    #[error("--set `{arg}`: expected KEY=VALUE")]
    BadSetArgument {
        /// The argument as given.
        arg: String,
    },
}

fn did_you_mean(suggestion: &Option<String>) -> String {
    match suggestion {
        Some(s) => format!(" (did you mean `{s}`?)"),
        None => String::new(),
    }
}

impl ConfigError {
    /// The key this error is about, if it is about one key.
    pub fn key(&self) -> Option<&str> {
        match self {
            ConfigError::UnknownKey { key, .. }
            | ConfigError::InvalidValue { key, .. }
            | ConfigError::Unsupported { key, .. } => Some(key),
            ConfigError::InFile { source, .. } => source.key(),
            ConfigError::ReadFile { .. }
            | ConfigError::ParseFile { .. }
            | ConfigError::BadSetArgument { .. } => None,
        }
    }

    /// Re-labels the key of an `UnknownKey` / `InvalidValue` error, e.g. a topic-level key
    /// reported under the broker-level name the user typed.
    pub fn with_key(self, key: &str) -> ConfigError {
        match self {
            ConfigError::InvalidValue { value, why, .. } => ConfigError::InvalidValue {
                key: key.to_owned(),
                value,
                why,
            },
            ConfigError::UnknownKey { suggestion, .. } => ConfigError::UnknownKey {
                key: key.to_owned(),
                suggestion,
            },
            other => other,
        }
    }
}

fn invalid(key: &str, value: &str, why: impl Into<String>) -> ConfigError {
    ConfigError::InvalidValue {
        key: key.to_owned(),
        value: value.to_owned(),
        why: why.into(),
    }
}

fn unknown(key: &str, known: &[&'static str]) -> ConfigError {
    ConfigError::UnknownKey {
        key: key.to_owned(),
        suggestion: closest_key(key, known).map(str::to_owned),
    }
}

/// Parses an integer and checks `min <= n <= max`.
fn parse_ranged(key: &str, value: &str, min: i64, max: i64) -> Result<i64, ConfigError> {
    let n: i64 = value
        .trim()
        .parse()
        .map_err(|_| invalid(key, value, "not an integer"))?;
    if n < min || n > max {
        let why = if max == i64::MAX {
            format!("must be at least {min}")
        } else {
            format!("must be between {min} and {max}")
        };
        return Err(invalid(key, value, why));
    }
    Ok(n)
}

/// Like [`parse_ranged`] for a non-negative range, returned unsigned.
fn parse_unsigned(key: &str, value: &str, min: u64, max: i64) -> Result<u64, ConfigError> {
    let min_signed = i64::try_from(min).map_err(|_| invalid(key, value, "bad minimum"))?;
    let n = parse_ranged(key, value, min_signed, max)?;
    u64::try_from(n).map_err(|_| invalid(key, value, "must not be negative"))
}

fn parse_bool(key: &str, value: &str) -> Result<bool, ConfigError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(invalid(key, value, "expected `true` or `false`")),
    }
}

fn render_unlimited(v: Option<u64>) -> String {
    match v {
        Some(n) => n.to_string(),
        None => "-1".to_owned(),
    }
}

// ------------------------------------------------------------------------------------------
// Topic configuration
// ------------------------------------------------------------------------------------------

/// `cleanup.policy`, a list in Kafka (`delete`, `compact`, both, or empty). Sluice does not
/// compact logs: a list naming `compact` is refused.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CleanupPolicy {
    /// `delete`: delete whole closed segments by `retention.ms` / `retention.bytes`.
    #[default]
    Delete,
    /// The empty list: neither delete nor compact; segments are kept whatever the retention
    /// settings say (Kafka 4.x's empty `cleanup.policy`).
    NoCleanup,
}

impl CleanupPolicy {
    /// The Kafka spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            CleanupPolicy::Delete => "delete",
            CleanupPolicy::NoCleanup => "",
        }
    }
}

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
/// Those Sluice acts on ([`Support::Honoured`]) are typed fields, stored as Kafka states them
/// (milliseconds, bytes; `-1` "unlimited" is `None`); the others are kept as validated,
/// normalised strings (`stored`) and described. Change values through [`TopicConfig::set`] /
/// [`TopicConfig::reset`] so the record of explicitly set keys stays right; the public fields
/// are for reading.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicConfig {
    /// `retention.ms`: delete closed segments older than this, in ms. `None` = keep forever
    /// (Kafka's -1). Default 604800000 (7 days).
    pub retention_ms: Option<u64>,
    /// `retention.bytes`: delete oldest closed segments while a partition exceeds this many
    /// bytes. `None` = unlimited (Kafka's -1, the default; Kafka accepts any negative).
    pub retention_bytes: Option<u64>,
    /// `segment.bytes`: roll a segment before it exceeds this many bytes.
    /// Default 1073741824; range [`SEGMENT_BYTES_MIN`]..=2147483647.
    pub segment_bytes: u64,
    /// `segment.ms`: roll a non-empty segment once it is this old, in ms (at least 1).
    /// Default 604800000.
    pub segment_ms: u64,
    /// `cleanup.policy`: `delete` or the empty list (no compaction).
    pub cleanup_policy: CleanupPolicy,
    /// `message.timestamp.type`: `CreateTime` (default) or `LogAppendTime`.
    pub message_timestamp_type: TimestampType,
    /// `message.timestamp.before.max.ms`: for CreateTime topics, how far in the past of the
    /// broker's clock a record's timestamp may be, in ms. Default `i64::MAX` (no limit).
    pub message_timestamp_before_max_ms: u64,
    /// `message.timestamp.after.max.ms`: for CreateTime topics, how far in the future of the
    /// broker's clock a record's timestamp may be, in ms. Default 3600000 (1 hour).
    pub message_timestamp_after_max_ms: u64,
    /// `compression.type`: `producer` (default: keep the producer's codec), `uncompressed`,
    /// `gzip`, `snappy`, `lz4` or `zstd` (batches are recompressed to it).
    pub compression_type: CompressionType,
    /// `max.message.bytes`: largest record batch accepted, in bytes. Default 1048588;
    /// range 0..=2147483647.
    pub max_message_bytes: u32,
    /// `flush.messages`: fdatasync after this many records (at least 1). Default
    /// [`FLUSH_NEVER`].
    pub flush_messages: u64,
    /// `flush.ms`: fdatasync data older than this many ms. Default [`FLUSH_NEVER`].
    pub flush_ms: u64,
    /// `index.interval.bytes`: bytes of log between offset-index entries. Default 4096;
    /// range 0..=2147483647.
    pub index_interval_bytes: u32,
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
    fn default() -> Self {
        TopicConfig {
            retention_ms: Some(604_800_000),
            retention_bytes: None,
            segment_bytes: 1_073_741_824,
            segment_ms: 604_800_000,
            cleanup_policy: CleanupPolicy::Delete,
            message_timestamp_type: TimestampType::CreateTime,
            message_timestamp_before_max_ms: i64::MAX.unsigned_abs(),
            message_timestamp_after_max_ms: 3_600_000,
            compression_type: CompressionType::Producer,
            max_message_bytes: 1_048_588,
            flush_messages: FLUSH_NEVER,
            flush_ms: FLUSH_NEVER,
            index_interval_bytes: 4096,
            min_insync_replicas: 1,
            stored: BTreeMap::new(),
            explicit: BTreeSet::new(),
        }
    }
}

/// Parses a Kafka `long` property with `min <= n`.
fn parse_long_min(key: &str, value: &str, min: i64) -> Result<i64, ConfigError> {
    let n: i64 = value
        .trim()
        .parse()
        .map_err(|_| invalid(key, value, "not an integer"))?;
    if n < min {
        return Err(invalid(key, value, format!("must be at least {min}")));
    }
    Ok(n)
}

/// Validates and normalises the value of a [`Support::Stored`] key, with Kafka 4.4's ranges
/// (probed against the real broker with IncrementalAlterConfigs `validate_only`).
fn normalise_stored(key: &'static TopicKey, value: &str) -> Result<String, ConfigError> {
    let name = key.name;
    let v = value.trim();
    let int_range = |min: i64, max: i64| parse_ranged(name, value, min, max).map(|n| n.to_string());
    match key.config_type {
        ConfigType::Boolean => {
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
        ConfigType::Double => {
            let d: f64 = v
                .parse()
                .map_err(|_| invalid(name, value, "not a number"))?;
            if !(0.0..=1.0).contains(&d) {
                return Err(invalid(name, value, "must be between 0 and 1"));
            }
            Ok(d.to_string())
        }
        ConfigType::List => {
            // The replication throttles: `*` or `partition:broker,...` (Kafka's
            // ThrottledReplicaListValidator); empty means none.
            let items: Vec<&str> = v
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
        ConfigType::Int | ConfigType::Long | ConfigType::String => match name {
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
            "max.compaction.lag.ms" => parse_long_min(name, value, 1).map(|n| n.to_string()),
            // delete.retention.ms, file.delete.delay.ms, min.compaction.lag.ms,
            // segment.jitter.ms.
            _ => parse_long_min(name, value, 0).map(|n| n.to_string()),
        },
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

    /// Sets topic-level property `key` (Kafka name, e.g. `retention.ms`) from its string
    /// value, and marks it as set on this topic.
    ///
    /// # Errors
    /// [`ConfigError::UnknownKey`] for a key that is not a Kafka topic property (with the
    /// closest one as suggestion); [`ConfigError::InvalidValue`] if the value does not parse,
    /// is out of Kafka's range, or needs a feature Sluice lacks (`cleanup.policy=compact`,
    /// `remote.storage.enable=true`; the message names it). On error nothing changes.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        let Some(spec) = topic_key(key) else {
            return Err(unknown(key, &topic_key_names()));
        };
        let name = spec.name;
        let v = value.trim();
        match name {
            "retention.ms" => {
                let n = parse_ranged(key, value, -1, i64::MAX)?;
                self.retention_ms = u64::try_from(n).ok();
            }
            // Kafka: any negative retention.bytes means unlimited.
            "retention.bytes" => {
                let n = parse_long_min(key, value, i64::MIN)?;
                self.retention_bytes = u64::try_from(n).ok();
            }
            "segment.bytes" => {
                self.segment_bytes =
                    parse_unsigned(key, value, SEGMENT_BYTES_MIN, i64::from(i32::MAX))?;
            }
            "segment.ms" => self.segment_ms = parse_unsigned(key, value, 1, i64::MAX)?,
            "cleanup.policy" => {
                let policies: Vec<&str> = v
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
                if policies.contains(&"compact") {
                    return Err(invalid(
                        key,
                        value,
                        "log compaction is not supported by Sluice: only `delete` (or the empty \
                         list, no cleanup) is accepted",
                    ));
                }
                self.cleanup_policy = if policies.is_empty() {
                    CleanupPolicy::NoCleanup
                } else {
                    CleanupPolicy::Delete
                };
            }
            "message.timestamp.type" => {
                self.message_timestamp_type = match v {
                    "CreateTime" => TimestampType::CreateTime,
                    "LogAppendTime" => TimestampType::LogAppendTime,
                    _ => {
                        return Err(invalid(
                            key,
                            value,
                            "expected `CreateTime` or `LogAppendTime`",
                        ))
                    }
                }
            }
            "max.message.bytes" => {
                self.max_message_bytes = parse_u32_int(key, value)?;
            }
            "message.timestamp.before.max.ms" => {
                self.message_timestamp_before_max_ms = parse_unsigned(key, value, 0, i64::MAX)?;
            }
            "message.timestamp.after.max.ms" => {
                self.message_timestamp_after_max_ms = parse_unsigned(key, value, 0, i64::MAX)?;
            }
            "compression.type" => {
                self.compression_type = CompressionType::parse(v).ok_or_else(|| {
                    invalid(
                        key,
                        value,
                        "expected `producer`, `uncompressed`, `gzip`, `snappy`, `lz4` or `zstd`",
                    )
                })?;
            }
            "flush.messages" => self.flush_messages = parse_unsigned(key, value, 1, i64::MAX)?,
            "flush.ms" => self.flush_ms = parse_unsigned(key, value, 0, i64::MAX)?,
            "index.interval.bytes" => {
                self.index_interval_bytes = parse_u32_int(key, value)?;
            }
            "min.insync.replicas" => {
                let n = parse_ranged(key, value, 1, i64::from(i32::MAX))?;
                self.min_insync_replicas =
                    u32::try_from(n).map_err(|_| invalid(key, value, "out of range"))?;
            }
            _ => {
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
        match name {
            "retention.ms" => self.retention_ms = defaults.retention_ms,
            "retention.bytes" => self.retention_bytes = defaults.retention_bytes,
            "segment.bytes" => self.segment_bytes = defaults.segment_bytes,
            "segment.ms" => self.segment_ms = defaults.segment_ms,
            "cleanup.policy" => self.cleanup_policy = defaults.cleanup_policy,
            "message.timestamp.type" => {
                self.message_timestamp_type = defaults.message_timestamp_type;
            }
            "max.message.bytes" => self.max_message_bytes = defaults.max_message_bytes,
            "message.timestamp.before.max.ms" => {
                self.message_timestamp_before_max_ms = defaults.message_timestamp_before_max_ms;
            }
            "message.timestamp.after.max.ms" => {
                self.message_timestamp_after_max_ms = defaults.message_timestamp_after_max_ms;
            }
            "compression.type" => self.compression_type = defaults.compression_type,
            "flush.messages" => self.flush_messages = defaults.flush_messages,
            "flush.ms" => self.flush_ms = defaults.flush_ms,
            "index.interval.bytes" => self.index_interval_bytes = defaults.index_interval_bytes,
            "min.insync.replicas" => self.min_insync_replicas = defaults.min_insync_replicas,
            _ => match defaults.stored.get(name) {
                Some(v) => {
                    self.stored.insert(name, v.clone());
                }
                None => {
                    self.stored.remove(name);
                }
            },
        }
        self.explicit.remove(name);
        Ok(())
    }

    /// The value of topic-level property `key` as Kafka renders it (`-1` for unlimited), or
    /// `None` for an unknown key.
    pub fn get(&self, key: &str) -> Option<String> {
        let spec = topic_key(key)?;
        let value = match spec.name {
            "retention.ms" => render_unlimited(self.retention_ms),
            "retention.bytes" => render_unlimited(self.retention_bytes),
            "segment.bytes" => self.segment_bytes.to_string(),
            "segment.ms" => self.segment_ms.to_string(),
            "cleanup.policy" => self.cleanup_policy.as_str().to_owned(),
            "message.timestamp.type" => self.message_timestamp_type.as_str().to_owned(),
            "max.message.bytes" => self.max_message_bytes.to_string(),
            "message.timestamp.before.max.ms" => self.message_timestamp_before_max_ms.to_string(),
            "message.timestamp.after.max.ms" => self.message_timestamp_after_max_ms.to_string(),
            "compression.type" => self.compression_type.as_str().to_owned(),
            "flush.messages" => self.flush_messages.to_string(),
            "flush.ms" => self.flush_ms.to_string(),
            "index.interval.bytes" => self.index_interval_bytes.to_string(),
            "min.insync.replicas" => self.min_insync_replicas.to_string(),
            name => self
                .stored
                .get(name)
                .cloned()
                .unwrap_or_else(|| spec.default.to_owned()),
        };
        Some(value)
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

    /// The storage engine's view of this config. Write-pipeline fields Kafka has no
    /// property for (`write_chunk_bytes`, …) keep [`storage::LogConfig`]'s defaults;
    /// `flush.*` = [`FLUSH_NEVER`] becomes "never"; an empty `cleanup.policy` keeps every
    /// segment (no retention).
    pub fn to_log_config(&self) -> storage::LogConfig {
        let delete = self.cleanup_policy == CleanupPolicy::Delete;
        storage::LogConfig {
            segment_bytes: self.segment_bytes,
            segment_ms: Duration::from_millis(self.segment_ms),
            index_interval_bytes: u64::from(self.index_interval_bytes),
            flush_messages: if self.flush_messages >= FLUSH_NEVER {
                u64::MAX
            } else {
                self.flush_messages
            },
            flush_ms: if self.flush_ms >= FLUSH_NEVER {
                None
            } else {
                Some(Duration::from_millis(self.flush_ms))
            },
            retention_ms: self
                .retention_ms
                .filter(|_| delete)
                .map(Duration::from_millis),
            retention_bytes: self.retention_bytes.filter(|_| delete),
            max_message_bytes: usize::try_from(self.max_message_bytes).unwrap_or(usize::MAX),
            log_append_time: self.message_timestamp_type == TimestampType::LogAppendTime,
            ..storage::LogConfig::default()
        }
    }
}

/// A Kafka `int` property that must be `>= 0`.
fn parse_u32_int(key: &str, value: &str) -> Result<u32, ConfigError> {
    let n = parse_ranged(key, value, 0, i64::from(i32::MAX))?;
    u32::try_from(n).map_err(|_| invalid(key, value, "out of range"))
}

// ------------------------------------------------------------------------------------------
// Broker configuration
// ------------------------------------------------------------------------------------------

/// A `HOST:PORT` pair as given, unresolved (an advertised listener is for clients to resolve).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostPort {
    /// Host name or IP literal (IPv6 without brackets).
    pub host: String,
    /// TCP port.
    pub port: u16,
}

impl fmt::Display for HostPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

impl FromStr for HostPort {
    type Err = String;

    /// Parses `host:port`, `[v6]:port`, optionally prefixed by `PLAINTEXT://` (Kafka's listener
    /// syntax). An empty host (`:9092`) is returned as an empty string.
    fn from_str(s: &str) -> Result<HostPort, String> {
        let s = s.trim();
        let rest = match s.split_once("://") {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("PLAINTEXT") => rest,
            Some((scheme, _)) => {
                return Err(format!(
                    "listener `{scheme}` is not supported; only PLAINTEXT (or a bare HOST:PORT)"
                ))
            }
            None => s,
        };
        if rest.contains(',') {
            return Err("only one listener is supported".to_owned());
        }
        let (host, port) = if let Some(v6) = rest.strip_prefix('[') {
            let (host, after) = v6
                .split_once(']')
                .ok_or_else(|| "missing `]` after IPv6 address".to_owned())?;
            let port = after
                .strip_prefix(':')
                .ok_or_else(|| "expected HOST:PORT".to_owned())?;
            (host, port)
        } else {
            rest.rsplit_once(':')
                .ok_or_else(|| "expected HOST:PORT".to_owned())?
        };
        if host.contains(':') && !rest.starts_with('[') {
            return Err("write an IPv6 address in brackets: [ADDR]:PORT".to_owned());
        }
        let port: u16 = port
            .parse()
            .map_err(|_| format!("port `{port}` is not a number in 0..=65535"))?;
        Ok(HostPort {
            host: host.to_owned(),
            port,
        })
    }
}

/// Resolves a listen address: `HOST:PORT` (host name or IP; `PLAINTEXT://` prefix and empty
/// host = all interfaces accepted). Uses the system resolver: call at start-up only.
pub fn parse_listen_addr(s: &str) -> Result<SocketAddr, String> {
    let hp: HostPort = s.parse()?;
    if hp.host.is_empty() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), hp.port));
    }
    if let Ok(ip) = hp.host.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, hp.port));
    }
    let mut addrs = (hp.host.as_str(), hp.port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve `{}`: {e}", hp.host))?;
    addrs
        .next()
        .ok_or_else(|| format!("`{}` resolves to no address", hp.host))
}

/// Parses a `--cores` value in taskset's list syntax: CPU ids and ranges, `0`, `0-3`, `0,2`,
/// `0,4-7` = exactly those CPUs, in that order (`0` is CPU 0; the count flag is `--smp`).
/// Rejects duplicates, empty lists and ids >= 1024.
pub fn parse_cores(s: &str) -> Result<Vec<usize>, String> {
    let s = s.trim();
    if s.is_empty() {
        return Err("expected CPU ids as taskset lists them: `0`, `0-3`, `0,2`".to_owned());
    }
    let mut cores = Vec::new();
    let mut seen = BTreeSet::new();
    for part in s.split(',') {
        let part = part.trim();
        let parse_id = |t: &str| -> Result<usize, String> {
            let id: usize = t
                .trim()
                .parse()
                .map_err(|_| format!("`{t}` is not a CPU id"))?;
            if id >= CPU_ID_LIMIT {
                return Err(format!("CPU id {id} is not below {CPU_ID_LIMIT}"));
            }
            Ok(id)
        };
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (parse_id(a)?, parse_id(b)?),
            None => {
                let id = parse_id(part)?;
                (id, id)
            }
        };
        if lo > hi {
            return Err(format!("range `{part}` is backwards"));
        }
        for id in lo..=hi {
            if !seen.insert(id) {
                return Err(format!("CPU {id} is listed twice"));
            }
            cores.push(id);
        }
    }
    Ok(cores)
}

/// Renders cores as `parse_cores` reads them (taskset's list syntax, runs as ranges).
fn render_cores(cores: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < cores.len() {
        let start = cores[i];
        let mut j = i;
        while j + 1 < cores.len() && cores[j + 1] == cores[j] + 1 {
            j += 1;
        }
        if j == i {
            parts.push(start.to_string());
        } else {
            parts.push(format!("{start}-{}", cores[j]));
        }
        i = j + 1;
    }
    parts.join(",")
}

/// CPUs this process may run on (its affinity mask), falling back to
/// `0..available_parallelism()`. Under `taskset -c 2,3` this is `[2, 3]`, not `[0, 1]`.
pub fn available_cores() -> Vec<usize> {
    // SAFETY: `cpu_set_t` is a plain bit array; all-zero is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable `cpu_set_t` and the size passed is its size.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc == 0 {
        // SAFETY: `cpu < CPU_ID_LIMIT` = CPU_SETSIZE, the bit count of `cpu_set_t`.
        let cores: Vec<usize> = (0..CPU_ID_LIMIT)
            .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
            .collect();
        if !cores.is_empty() {
            return cores;
        }
    }
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    (0..n).collect()
}

/// Broker-level keys other than the topic-default ones, for lookups and suggestions.
const BROKER_KEYS: [&str; 20] = [
    "listeners",
    "advertised.listeners",
    "sluice.admin.listen",
    "log.dirs",
    "log.dir",
    "sluice.cores",
    "node.id",
    "broker.id",
    "auto.create.topics.enable",
    "num.partitions",
    "default.replication.factor",
    "socket.request.max.bytes",
    "sluice.batch.cache.bytes",
    "offsets.topic.num.partitions",
    "offsets.topic.segment.bytes",
    "group.initial.rebalance.delay.ms",
    "group.min.session.timeout.ms",
    "group.max.session.timeout.ms",
    "log.retention.check.interval.ms",
    "offsets.topic.replication.factor",
];

/// Every key [`BrokerConfig::set`] accepts: the broker keys, every topic property by its
/// topic-level name and by each broker-level synonym (`log.retention.hours`, …).
pub fn broker_key_names() -> Vec<&'static str> {
    let mut keys: Vec<&'static str> = BROKER_KEYS.to_vec();
    for topic in &TOPIC_KEYS {
        keys.push(topic.name);
        for s in topic.synonyms {
            if !keys.contains(&s.name) {
                keys.push(s.name);
            }
        }
    }
    keys
}

/// The start-up configuration of one `sluice` process.
///
/// Build with `BrokerConfig::default()` and [`BrokerConfig::set`] (or the broker's `cli::load`).
#[derive(Clone, Debug)]
pub struct BrokerConfig {
    /// Kafka listener address (`listeners`, flag `--listen`). Default 127.0.0.1:9092.
    pub listen: SocketAddr,
    /// What Metadata responses tell clients to connect to (`advertised.listeners`, flag
    /// `--advertised-listener`). `None`: derived from `listen`, see
    /// [`BrokerConfig::advertised_listener`].
    pub advertised_listener: Option<HostPort>,
    /// Admin HTTP address (`sluice.admin.listen`, flag `--admin-listen`). Default
    /// 127.0.0.1:9644.
    pub admin_listen: SocketAddr,
    /// Data directory (`log.dirs` / `log.dir`, flag `--data-dir`). Default `./data`.
    pub data_dir: PathBuf,
    /// CPU ids, one shard pinned to each, shard `i` on `cores[i]` (`sluice.cores`, flag
    /// `--cores`). Default: every CPU in the process's affinity mask.
    pub cores: Vec<usize>,
    /// `node.id` (alias `broker.id`). Default 0.
    pub node_id: i32,
    /// `auto.create.topics.enable`: Metadata/Produce for an unknown topic creates it.
    /// Default true.
    pub auto_create_topics_enable: bool,
    /// `num.partitions`: partitions of an auto-created topic or a CreateTopics with -1.
    /// Default 1.
    pub num_partitions: i32,
    /// `default.replication.factor`. Default 1.
    pub default_replication_factor: i16,
    /// `socket.request.max.bytes`: largest request frame, in bytes. Default 104857600.
    pub socket_request_max_bytes: usize,
    /// `message.max.bytes`: broker cap on a record batch, in bytes, and the default of the
    /// topic property `max.message.bytes`. Default 1048588.
    pub message_max_bytes: u32,
    /// `sluice.batch.cache.bytes`: batch cache size per shard, in bytes. Default 64 MiB.
    pub batch_cache_bytes: usize,
    /// Defaults for new topics, set by the broker-level names (`log.retention.ms`, …) or the
    /// topic-level names themselves.
    pub topic_defaults: TopicConfig,
    /// `[[shard]]` sections of the config file: per-core overrides.
    pub shard_overrides: Vec<ShardOverride>,
    /// `offsets.topic.num.partitions`: partitions of `__consumer_offsets`, fixed when the
    /// first group creates it. Default 50.
    pub offsets_topic_num_partitions: i32,
    /// `offsets.topic.segment.bytes`: `segment.bytes` of `__consumer_offsets`, bytes.
    /// Default 104857600.
    pub offsets_topic_segment_bytes: u64,
    /// `group.initial.rebalance.delay.ms`: how long the first rebalance of an empty group
    /// waits for more members, ms. Default 3000.
    pub group_initial_rebalance_delay_ms: i32,
    /// `group.min.session.timeout.ms`: smallest `session.timeout.ms` a member may ask for,
    /// ms. Default 6000.
    pub group_min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms`: largest `session.timeout.ms`, ms. Default 1800000.
    pub group_max_session_timeout_ms: i32,
    /// `log.retention.check.interval.ms`: how often each shard applies retention, ms.
    /// Default 300000 (5 minutes); at least 1.
    pub log_retention_check_interval_ms: u64,
    /// Keys set through [`BrokerConfig::set`], canonical names, with the value as given
    /// (trimmed): DescribeConfigs reports a synonym in its own unit (`log.retention.hours`).
    given: BTreeMap<&'static str, String>,
    /// Kafka's precedence among the broker synonyms of one topic property (e.g.
    /// `log.retention.{ms,minutes,hours}`): topic property → index in its synonym list of the
    /// most specific one set so far. A coarser one never overrides a finer one, whatever the
    /// order.
    synonym_rank: BTreeMap<&'static str, usize>,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 9092),
            advertised_listener: None,
            admin_listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 9644),
            data_dir: PathBuf::from("./data"),
            cores: available_cores(),
            node_id: 0,
            auto_create_topics_enable: true,
            num_partitions: 1,
            default_replication_factor: 1,
            socket_request_max_bytes: 104_857_600,
            message_max_bytes: 1_048_588,
            batch_cache_bytes: 64 << 20,
            topic_defaults: TopicConfig::default(),
            shard_overrides: Vec::new(),
            offsets_topic_num_partitions: 50,
            offsets_topic_segment_bytes: 104_857_600,
            group_initial_rebalance_delay_ms: 3000,
            group_min_session_timeout_ms: 6000,
            group_max_session_timeout_ms: 1_800_000,
            log_retention_check_interval_ms: 300_000,
            given: BTreeMap::new(),
            synonym_rank: BTreeMap::new(),
        }
    }
}

impl BrokerConfig {
    /// Applies one property (Kafka name, a Sluice `sluice.*` key, or a topic-level name as a
    /// topic default).
    ///
    /// # Errors
    /// [`ConfigError::UnknownKey`] naming the closest known key; [`ConfigError::InvalidValue`]
    /// naming `key` (the broker-level name when a topic default is rejected). On error nothing
    /// changes.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        if let Some(why) = unsupported_broker_key(key) {
            return Err(ConfigError::Unsupported {
                key: key.to_owned(),
                why: why.to_owned(),
            });
        }
        let all = broker_key_names();
        let Some(name) = all.iter().copied().find(|k| *k == key) else {
            return Err(unknown(key, &all));
        };
        let v = value.trim();
        match name {
            "listeners" => {
                self.listen = parse_listen_addr(v).map_err(|why| invalid(key, value, why))?;
            }
            "advertised.listeners" => {
                let hp: HostPort = v.parse().map_err(|why| invalid(key, value, why))?;
                if hp.host.is_empty() {
                    return Err(invalid(key, value, "the advertised host must not be empty"));
                }
                if hp.port == 0 {
                    return Err(invalid(key, value, "the advertised port must not be 0"));
                }
                self.advertised_listener = Some(hp);
            }
            "sluice.admin.listen" => {
                self.admin_listen = parse_listen_addr(v).map_err(|why| invalid(key, value, why))?;
            }
            "log.dirs" | "log.dir" => {
                if v.is_empty() {
                    return Err(invalid(key, value, "must not be empty"));
                }
                if v.contains(',') {
                    return Err(invalid(key, value, "only one data directory is supported"));
                }
                self.data_dir = PathBuf::from(v);
            }
            "sluice.cores" => {
                let cores = parse_cores(v).map_err(|why| invalid(key, value, why))?;
                let available = available_cores();
                if let Some(c) = cores.iter().find(|c| !available.contains(c)) {
                    return Err(invalid(
                        key,
                        value,
                        format!(
                            "CPU {c} is not available to this process (available: {})",
                            render_cores(&available)
                        ),
                    ));
                }
                self.cores = cores;
            }
            "node.id" | "broker.id" => {
                let n = parse_ranged(key, value, 0, i64::from(i32::MAX))?;
                self.node_id = i32::try_from(n).map_err(|_| invalid(key, value, "too large"))?;
            }
            "auto.create.topics.enable" => {
                self.auto_create_topics_enable = parse_bool(key, value)?;
            }
            "num.partitions" => {
                let n = parse_ranged(key, value, 1, i64::from(i32::MAX))?;
                self.num_partitions =
                    i32::try_from(n).map_err(|_| invalid(key, value, "too large"))?;
            }
            "default.replication.factor" => {
                let n = parse_ranged(key, value, 1, i64::from(i16::MAX))?;
                self.default_replication_factor =
                    i16::try_from(n).map_err(|_| invalid(key, value, "too large"))?;
            }
            "socket.request.max.bytes" => {
                let n = parse_unsigned(key, value, 1, i64::from(i32::MAX))?;
                self.socket_request_max_bytes =
                    usize::try_from(n).map_err(|_| invalid(key, value, "too large"))?;
            }
            "sluice.batch.cache.bytes" => {
                let n = parse_unsigned(key, value, 0, i64::MAX)?;
                self.batch_cache_bytes =
                    usize::try_from(n).map_err(|_| invalid(key, value, "too large"))?;
            }
            "offsets.topic.num.partitions" => {
                let n = parse_ranged(key, value, 1, 10_000)?;
                self.offsets_topic_num_partitions =
                    i32::try_from(n).map_err(|_| invalid(key, value, "too large"))?;
            }
            "offsets.topic.segment.bytes" => {
                self.offsets_topic_segment_bytes =
                    parse_unsigned(key, value, SEGMENT_BYTES_MIN, i64::from(i32::MAX))?;
            }
            "group.initial.rebalance.delay.ms"
            | "group.min.session.timeout.ms"
            | "group.max.session.timeout.ms" => {
                let n = parse_ranged(key, value, 0, i64::from(i32::MAX))?;
                let n = i32::try_from(n).map_err(|_| invalid(key, value, "too large"))?;
                let (min, max) = match name {
                    "group.min.session.timeout.ms" => (n, self.group_max_session_timeout_ms),
                    "group.max.session.timeout.ms" => (self.group_min_session_timeout_ms, n),
                    _ => (0, i32::MAX),
                };
                if min > max {
                    return Err(invalid(
                        key,
                        value,
                        "group.min.session.timeout.ms must not exceed group.max.session.timeout.ms",
                    ));
                }
                match name {
                    "group.min.session.timeout.ms" => self.group_min_session_timeout_ms = n,
                    "group.max.session.timeout.ms" => self.group_max_session_timeout_ms = n,
                    _ => self.group_initial_rebalance_delay_ms = n,
                }
            }
            "log.retention.check.interval.ms" => {
                self.log_retention_check_interval_ms = parse_unsigned(key, value, 1, i64::MAX)?;
            }
            "offsets.topic.replication.factor" => {
                // Kafka's single-node server.properties says 1; more needs replication.
                if parse_ranged(key, value, 1, i64::from(i16::MAX))? != 1 {
                    return Err(ConfigError::Unsupported {
                        key: key.to_owned(),
                        why: "replication is not built yet: only 1 is accepted".to_owned(),
                    });
                }
            }
            _ => self.set_topic_default(name, key, v)?,
        }
        self.given.insert(name, v.to_owned());
        Ok(())
    }

    /// A topic default, by its topic-level name or a broker-level synonym. Among the synonyms
    /// of one topic property the most specific one set wins, as in Kafka
    /// (`log.retention.ms` > `log.retention.minutes` > `log.retention.hours`); a coarser unit
    /// is converted to ms (a negative retention in any unit means unlimited).
    fn set_topic_default(
        &mut self,
        name: &'static str,
        key: &str,
        v: &str,
    ) -> Result<(), ConfigError> {
        let (topic, rank, ms_per_unit) = match topic_key(name) {
            // The topic-level name at broker level counts as the most specific synonym.
            Some(t) => (t, 0, 1),
            None => {
                let (t, syn) = topic_key_for_broker_synonym(name)
                    .ok_or_else(|| unknown(key, &broker_key_names()))?;
                let rank = t
                    .synonyms
                    .iter()
                    .position(|s| s.name == syn.name)
                    .unwrap_or(0);
                (t, rank, syn.ms_per_unit)
            }
        };
        let value = if ms_per_unit == 1 {
            v.to_owned()
        } else {
            let n = parse_ranged(key, v, i64::MIN, i64::MAX)?;
            if n < 0 && topic.name == "retention.ms" {
                "-1".to_owned()
            } else {
                n.checked_mul(ms_per_unit)
                    .ok_or_else(|| invalid(key, v, "too large once converted to ms"))?
                    .to_string()
            }
        };
        if self.synonym_rank.get(topic.name).is_some_and(|r| *r < rank) {
            // Validated, but a more specific synonym is set and wins, as in Kafka.
            let mut scratch = self.topic_defaults.clone();
            return scratch.set(topic.name, &value).map_err(|e| e.with_key(key));
        }
        self.topic_defaults
            .set(topic.name, &value)
            .map_err(|e| e.with_key(key))?;
        if topic.name == "max.message.bytes" {
            self.message_max_bytes = self.topic_defaults.max_message_bytes;
        }
        self.synonym_rank.insert(topic.name, rank);
        // DescribeConfigs lists a topic-level name given here as its first broker synonym.
        if topic.name == name {
            if let Some(first) = topic.synonyms.first() {
                self.given.insert(first.name, value);
            }
        }
        Ok(())
    }

    /// The value broker key `name` was given, as given (trimmed), if it was set.
    pub fn given(&self, name: &str) -> Option<&str> {
        self.given.get(name).map(String::as_str)
    }

    /// Applies `(key, value)` pairs in order, stopping at the first error.
    pub fn set_all<'a>(
        &mut self,
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<(), ConfigError> {
        pairs.into_iter().try_for_each(|(k, v)| self.set(k, v))
    }

    /// Whether `key` (as given to [`BrokerConfig::set`]) was set explicitly.
    pub fn is_set(&self, key: &str) -> bool {
        self.given.contains_key(key)
    }

    /// How often each shard applies `retention.ms` / `retention.bytes`
    /// (`log.retention.check.interval.ms`).
    pub fn log_retention_check_interval(&self) -> Duration {
        Duration::from_millis(self.log_retention_check_interval_ms)
    }

    /// The listener advertised in Metadata: `advertised.listeners` if set, else `listen`.
    /// A wildcard listen address (0.0.0.0 / ::) is not connectable, so then the machine's host
    /// name is advertised (as Kafka does), or `localhost` if it cannot be read.
    pub fn advertised_listener(&self) -> HostPort {
        if let Some(hp) = &self.advertised_listener {
            return hp.clone();
        }
        let host = if self.listen.ip().is_unspecified() {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
                .filter(|h| !h.is_empty())
                .unwrap_or_else(|| "localhost".to_owned())
        } else {
            self.listen.ip().to_string()
        };
        HostPort {
            host,
            port: self.listen.port(),
        }
    }

    /// Broker-level properties with their values, sorted by key (DescribeConfigs on the
    /// BROKER resource). Topic defaults appear under their broker-level names.
    pub fn entries(&self) -> Vec<(&'static str, String)> {
        let mut out: Vec<(&'static str, String)> = vec![
            ("advertised.listeners", {
                format!("PLAINTEXT://{}", self.advertised_listener())
            }),
            (
                "auto.create.topics.enable",
                self.auto_create_topics_enable.to_string(),
            ),
            (
                "default.replication.factor",
                self.default_replication_factor.to_string(),
            ),
            ("listeners", format!("PLAINTEXT://{}", self.listen)),
            ("log.dirs", self.data_dir.display().to_string()),
            ("node.id", self.node_id.to_string()),
            ("num.partitions", self.num_partitions.to_string()),
            ("sluice.admin.listen", self.admin_listen.to_string()),
            (
                "sluice.batch.cache.bytes",
                self.batch_cache_bytes.to_string(),
            ),
            ("sluice.cores", render_cores(&self.cores)),
            (
                "socket.request.max.bytes",
                self.socket_request_max_bytes.to_string(),
            ),
        ];
        out.push((
            "log.retention.check.interval.ms",
            self.log_retention_check_interval_ms.to_string(),
        ));
        // Each topic default under its first broker-level name, in the topic property's unit.
        for topic in &TOPIC_KEYS {
            if let (Some(first), Some(v)) =
                (topic.synonyms.first(), self.topic_defaults.get(topic.name))
            {
                if !out.iter().any(|(k, _)| *k == first.name) {
                    out.push((first.name, v));
                }
            }
        }
        out.sort_by_key(|(k, _)| *k);
        out
    }
}

// ------------------------------------------------------------------------------------------
// TOML files
// ------------------------------------------------------------------------------------------

/// Keys of a `[[shard]]` section.
pub const SHARD_KEYS: &[&str] = &[
    "core",
    "batch.cache.bytes",
    "io.memory.bytes",
    "listen",
    "produce.shares",
    "fetch.shares",
    "background.shares",
];

/// Default glommio shares of each shard task queue (produce, fetch, background).
pub const TASK_QUEUE_SHARES_DEFAULT: usize = 1000;
/// glommio's default I/O memory per executor, in bytes.
pub const IO_MEMORY_BYTES_DEFAULT: usize = 10 << 20;

/// One `[[shard]]` section: overrides for the shard running on CPU `core`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShardOverride {
    /// The CPU id (one of `sluice.cores`).
    pub core: usize,
    /// `batch.cache.bytes`: this shard's batch cache budget, in bytes.
    pub batch_cache_bytes: Option<usize>,
    /// `io.memory.bytes`: glommio I/O (DMA buffer) memory of this executor, in bytes
    /// (≥ 64 KiB); the log writes 256 KiB chunks, 16 in flight per partition.
    pub io_memory_bytes: Option<usize>,
    /// `listen`: whether this shard accepts client connections (it still owns partitions).
    pub listen: Option<bool>,
    /// `produce.shares`, `fetch.shares`, `background.shares`: glommio CPU shares (1–1000) of
    /// the task queues that run produce work, fetch work, and retention.
    pub produce_shares: Option<usize>,
    pub fetch_shares: Option<usize>,
    pub background_shares: Option<usize>,
}

/// The effective settings of one shard: [`BrokerConfig`] defaults with its `[[shard]]`
/// section applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardSettings {
    pub batch_cache_bytes: usize,
    pub io_memory_bytes: usize,
    pub listen: bool,
    pub produce_shares: usize,
    pub fetch_shares: usize,
    pub background_shares: usize,
}

impl BrokerConfig {
    /// Settings of the shard on CPU `core`.
    pub fn shard_settings(&self, core: usize) -> ShardSettings {
        let o = self.shard_overrides.iter().find(|o| o.core == core);
        let pick = |f: fn(&ShardOverride) -> Option<usize>, default: usize| {
            o.and_then(f).unwrap_or(default)
        };
        ShardSettings {
            batch_cache_bytes: pick(|o| o.batch_cache_bytes, self.batch_cache_bytes),
            io_memory_bytes: pick(|o| o.io_memory_bytes, IO_MEMORY_BYTES_DEFAULT),
            listen: o.and_then(|o| o.listen).unwrap_or(true),
            produce_shares: pick(|o| o.produce_shares, TASK_QUEUE_SHARES_DEFAULT),
            fetch_shares: pick(|o| o.fetch_shares, TASK_QUEUE_SHARES_DEFAULT),
            background_shares: pick(|o| o.background_shares, TASK_QUEUE_SHARES_DEFAULT),
        }
    }

    /// Checks the `[[shard]]` sections against `cores`: each names a configured core, once,
    /// and at least one shard listens.
    ///
    /// # Errors
    /// [`ConfigError::InvalidValue`] naming `[[shard]] core` or `[[shard]] listen`.
    pub fn check_shard_overrides(&self) -> Result<(), ConfigError> {
        let mut seen = BTreeSet::new();
        for o in &self.shard_overrides {
            let core = o.core.to_string();
            if !self.cores.contains(&o.core) {
                return Err(invalid(
                    "[[shard]] core",
                    &core,
                    format!("not one of the configured cores {:?}", self.cores),
                ));
            }
            if !seen.insert(o.core) {
                return Err(invalid(
                    "[[shard]] core",
                    &core,
                    "two [[shard]] sections name this core",
                ));
            }
        }
        if self.cores.iter().all(|&c| !self.shard_settings(c).listen) {
            return Err(invalid(
                "[[shard]] listen",
                "false",
                "at least one shard must listen",
            ));
        }
        Ok(())
    }
}

/// Parses the `[[shard]]` array of a TOML document (absent: none).
///
/// # Errors
/// [`ConfigError::ParseFile`] for invalid TOML or a `shard` that is not an array of tables;
/// [`ConfigError::UnknownKey`] (with the closest known key) or [`ConfigError::InvalidValue`]
/// naming `[[shard]] <key>`.
pub fn parse_shard_sections(text: &str, path: &Path) -> Result<Vec<ShardOverride>, ConfigError> {
    let table: toml::Table = toml::from_str(text).map_err(|e| ConfigError::ParseFile {
        path: path.to_owned(),
        why: e.to_string(),
    })?;
    let Some(sections) = table.get("shard") else {
        return Ok(Vec::new());
    };
    let Some(sections) = sections.as_array() else {
        return Err(ConfigError::ParseFile {
            path: path.to_owned(),
            why: "`shard` must be an array of tables: write each as [[shard]]".into(),
        });
    };
    sections
        .iter()
        .map(|s| parse_shard_section(s, path))
        .collect()
}

fn parse_shard_section(section: &toml::Value, path: &Path) -> Result<ShardOverride, ConfigError> {
    let Some(section) = section.as_table() else {
        return Err(ConfigError::ParseFile {
            path: path.to_owned(),
            why: "each [[shard]] must be a table".into(),
        });
    };
    let mut flat = Vec::new();
    flatten_into("", section, &mut flat).map_err(|why| ConfigError::ParseFile {
        path: path.to_owned(),
        why,
    })?;
    let mut o = ShardOverride::default();
    let mut core = None;
    for (key, value) in flat {
        let name = format!("[[shard]] {key}");
        let bytes = |min: u64| -> Result<usize, ConfigError> {
            let n = parse_unsigned(&name, &value, min, i64::MAX)?;
            usize::try_from(n).map_err(|_| invalid(&name, &value, "too large"))
        };
        let shares = || -> Result<usize, ConfigError> {
            let n = parse_unsigned(&name, &value, 1, 1000)?;
            usize::try_from(n).map_err(|_| invalid(&name, &value, "too large"))
        };
        match key.as_str() {
            "core" => core = Some(bytes(0)?),
            "batch.cache.bytes" => o.batch_cache_bytes = Some(bytes(0)?),
            "io.memory.bytes" => o.io_memory_bytes = Some(bytes(64 << 10)?),
            "listen" => o.listen = Some(parse_bool(&name, &value)?),
            "produce.shares" => o.produce_shares = Some(shares()?),
            "fetch.shares" => o.fetch_shares = Some(shares()?),
            "background.shares" => o.background_shares = Some(shares()?),
            _ => {
                return Err(ConfigError::UnknownKey {
                    suggestion: closest_key(&key, SHARD_KEYS).map(|k| format!("[[shard]] {k}")),
                    key: name,
                })
            }
        }
    }
    o.core = core.ok_or_else(|| invalid("[[shard]] core", "", "each [[shard]] names its core"))?;
    Ok(o)
}

/// Flattens a TOML document into `(key, value)` pairs: nested tables join with `.`
/// (`[log] retention.ms = 1` → `log.retention.ms`), integers and booleans become their decimal
/// text, strings stay, arrays of scalars join with `,` (`cores = [0, 2]` → `0,2`). Pairs come
/// out sorted by key.
///
/// # Errors
/// [`ConfigError::ParseFile`] for invalid TOML, floats, dates, nested arrays, arrays of tables
/// and keys given twice (e.g. both as `"log.retention.ms"` and under `[log]`). The
/// `[[shard]]` sections are skipped here: [`parse_shard_sections`] reads them.
pub fn flatten_toml(text: &str, path: &Path) -> Result<Vec<(String, String)>, ConfigError> {
    let parse_err = |why: String| ConfigError::ParseFile {
        path: path.to_owned(),
        why,
    };
    let mut table: toml::Table = toml::from_str(text).map_err(|e| parse_err(e.to_string()))?;
    table.remove("shard");
    let mut out = Vec::new();
    flatten_into("", &table, &mut out).map_err(parse_err)?;
    out.sort();
    for pair in out.windows(2) {
        if pair[0].0 == pair[1].0 {
            return Err(parse_err(format!("key `{}` is set twice", pair[0].0)));
        }
    }
    Ok(out)
}

fn flatten_into(
    prefix: &str,
    table: &toml::Table,
    out: &mut Vec<(String, String)>,
) -> Result<(), String> {
    for (k, v) in table {
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            toml::Value::Table(t) => flatten_into(&key, t, out)?,
            toml::Value::Array(items) => {
                let mut parts = Vec::with_capacity(items.len());
                for item in items {
                    parts.push(scalar_text(&key, item)?);
                }
                out.push((key, parts.join(",")));
            }
            other => {
                let text = scalar_text(&key, other)?;
                out.push((key, text));
            }
        }
    }
    Ok(())
}

fn scalar_text(key: &str, v: &toml::Value) -> Result<String, String> {
    match v {
        toml::Value::String(s) => Ok(s.clone()),
        toml::Value::Integer(i) => Ok(i.to_string()),
        toml::Value::Boolean(b) => Ok(b.to_string()),
        toml::Value::Float(_) => Err(format!(
            "key `{key}`: floats are not accepted; use an integer"
        )),
        toml::Value::Datetime(_) => Err(format!("key `{key}`: dates are not accepted")),
        toml::Value::Array(_) | toml::Value::Table(_) => Err(format!(
            "key `{key}`: nested arrays and arrays of tables are not supported"
        )),
    }
}

// ------------------------------------------------------------------------------------------
// Suggestions
// ------------------------------------------------------------------------------------------

/// The known key closest to `key` by edit distance, if close enough to be a typo: at most a
/// third of the key's length, or 2 for short keys.
fn closest_key<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    let limit = (key.len() / 3).max(2);
    known
        .iter()
        .map(|k| (edit_distance(key, k), *k))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Levenshtein distance over bytes (keys are ASCII).
fn edit_distance(a: &str, b: &str) -> usize {
    let a = a.as_bytes();
    let b = b.as_bytes();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = prev[j] + usize::from(ca != cb);
            cur[j + 1] = substitute.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
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
        assert_eq!(t.retention_ms, None);
        assert_eq!(t.get("retention.ms").as_deref(), Some("-1"));
        assert!(t.is_set("retention.ms"));
        assert!(!t.is_set("segment.ms"));

        let bad = [
            ("retention.ms", "-2"),
            ("retention.ms", "abc"),
            ("segment.bytes", "1048575"),
            ("segment.bytes", "2147483648"),
            ("segment.ms", "0"),
            ("cleanup.policy", "compact"),
            ("cleanup.policy", "delete,compact"),
            ("cleanup.policy", "nope"),
            ("cleanup.policy", "Delete"),
            ("remote.storage.enable", "true"),
            ("compression.gzip.level", "0"),
            ("compression.zstd.level", "23"),
            ("min.cleanable.dirty.ratio", "1.5"),
            ("min.insync.replicas", "0"),
            ("max.compaction.lag.ms", "0"),
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
        t.set("delete.retention.ms", "1000")
            .expect("compaction's key, stored");
        assert_eq!(t.get("delete.retention.ms").as_deref(), Some("1000"));
        t.set("leader.replication.throttled.replicas", "0:1, 1:2")
            .expect("valid list");
        assert_eq!(
            t.get("leader.replication.throttled.replicas").as_deref(),
            Some("0:1,1:2")
        );
        t.set("retention.bytes", "-7")
            .expect("any negative is unlimited");
        assert_eq!(t.retention_bytes, None);
        let err = t
            .set("cleanup.policy", "compact")
            .expect_err("no compaction");
        assert!(
            err.to_string().contains("compaction is not supported"),
            "{err}"
        );
        t.set("cleanup.policy", "")
            .expect("the empty list: no cleanup");
        assert_eq!(
            t.to_log_config().retention_ms,
            None,
            "empty policy keeps all"
        );
        t.set("cleanup.policy", "delete").expect("valid");
        t.set("message.timestamp.type", "LogAppendTime")
            .expect("valid");
        assert_eq!(t.message_timestamp_type, TimestampType::LogAppendTime);
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

    #[test]
    fn inherit_and_reset() {
        let mut broker = BrokerConfig::default();
        broker.set("log.retention.ms", "1000").expect("valid");
        broker
            .set("log.cleaner.delete.retention.ms", "5")
            .expect("valid");
        let defaults = &broker.topic_defaults;
        let mut t = TopicConfig::inherit(defaults);
        assert_eq!(t.retention_ms, Some(1000));
        assert_eq!(t.get("delete.retention.ms").as_deref(), Some("5"));
        assert!(!t.is_set("retention.ms"));
        t.set("retention.ms", "5").expect("valid");
        t.set("delete.retention.ms", "7").expect("valid");
        assert!(t.is_set("retention.ms"));
        t.reset("retention.ms", defaults).expect("known key");
        t.reset("delete.retention.ms", defaults).expect("known key");
        assert_eq!(t.retention_ms, Some(1000));
        assert_eq!(t.get("delete.retention.ms").as_deref(), Some("5"));
        assert!(!t.is_set("retention.ms"));
        assert_eq!(broker.given("log.retention.ms"), Some("1000"));
    }

    #[test]
    fn broker_names_set_topic_defaults() {
        let mut b = BrokerConfig::default();
        b.set_all([
            ("log.segment.bytes", "1048576"),
            ("log.roll.hours", "2"),
            ("log.cleanup.policy", "delete"),
            ("log.message.timestamp.type", "LogAppendTime"),
            ("log.flush.interval.messages", "10"),
            ("log.flush.interval.ms", "100"),
            ("log.index.interval.bytes", "8192"),
            ("log.retention.bytes", "12345"),
            ("retention.ms", "777"),
        ])
        .expect("valid");
        let t = &b.topic_defaults;
        assert_eq!(t.segment_bytes, 1_048_576);
        assert_eq!(t.segment_ms, 2 * 3_600_000);
        assert_eq!(t.message_timestamp_type, TimestampType::LogAppendTime);
        assert_eq!(t.flush_messages, 10);
        assert_eq!(t.flush_ms, 100);
        assert_eq!(t.index_interval_bytes, 8192);
        assert_eq!(t.retention_bytes, Some(12_345));
        assert_eq!(t.retention_ms, Some(777));

        b.set("message.max.bytes", "2000000").expect("valid");
        assert_eq!(b.message_max_bytes, 2_000_000);
        assert_eq!(b.topic_defaults.max_message_bytes, 2_000_000);

        // Errors about a topic default name the broker-level key the user wrote.
        let err = b.set("log.segment.bytes", "1").expect_err("below 1 MiB");
        assert_eq!(err.key(), Some("log.segment.bytes"));
    }

    #[test]
    fn retention_units_follow_kafka_precedence() {
        let mut b = BrokerConfig::default();
        b.set("log.retention.hours", "1").expect("valid");
        assert_eq!(b.topic_defaults.retention_ms, Some(3_600_000));
        b.set("log.retention.minutes", "2").expect("valid");
        assert_eq!(b.topic_defaults.retention_ms, Some(120_000));
        b.set("log.retention.hours", "5").expect("valid");
        assert_eq!(
            b.topic_defaults.retention_ms,
            Some(120_000),
            "minutes beat hours"
        );
        b.set("log.retention.ms", "10").expect("valid");
        b.set("log.retention.minutes", "5").expect("valid");
        assert_eq!(b.topic_defaults.retention_ms, Some(10), "ms beats minutes");
        b.set("log.retention.hours", "-1")
            .expect("valid, but ms wins");
        assert_eq!(b.topic_defaults.retention_ms, Some(10));

        let mut b = BrokerConfig::default();
        b.set("log.retention.hours", "-1")
            .expect("negative = unlimited");
        assert_eq!(b.topic_defaults.retention_ms, None);
        b.set("log.retention.hours", "x").expect_err("not a number");
        b.set("log.retention.hours", &i64::MAX.to_string())
            .expect_err("overflows ms");
    }

    #[test]
    fn broker_keys() {
        let mut b = BrokerConfig::default();
        assert_eq!(b.log_retention_check_interval_ms, 300_000);
        b.set("log.retention.check.interval.ms", "1000")
            .expect("valid");
        assert_eq!(b.log_retention_check_interval(), Duration::from_secs(1));
        b.set("log.retention.check.interval.ms", "0")
            .expect_err("at least 1");
        b.set("offsets.topic.replication.factor", "1")
            .expect("single node");
        let err = b
            .set("offsets.topic.replication.factor", "3")
            .expect_err("no replication");
        assert!(err.to_string().contains("replication"), "{err}");
        for key in [
            "process.roles",
            "num.network.threads",
            "socket.send.buffer.bytes",
        ] {
            let err = b
                .set(key, "1")
                .expect_err("Kafka key for what Sluice lacks");
            assert!(matches!(err, ConfigError::Unsupported { .. }), "{err}");
            assert_eq!(err.key(), Some(key));
        }
        b.set("min.insync.replicas", "2").expect("topic default");
        assert_eq!(b.topic_defaults.min_insync_replicas, 2);
        b.set("log.roll.jitter.hours", "1").expect("coarse synonym");
        assert_eq!(
            b.topic_defaults.get("segment.jitter.ms").as_deref(),
            Some("3600000")
        );
        assert!(b.auto_create_topics_enable);
        b.set("auto.create.topics.enable", "FALSE").expect("valid");
        assert!(!b.auto_create_topics_enable);
        b.set("num.partitions", "3").expect("valid");
        b.set("num.partitions", "0").expect_err("at least 1");
        b.set("default.replication.factor", "40000")
            .expect_err("i16");
        b.set("node.id", "7").expect("valid");
        b.set("broker.id", "-1").expect_err("negative");
        b.set("socket.request.max.bytes", "0")
            .expect_err("at least 1");
        b.set("sluice.batch.cache.bytes", "0").expect("0 disables");
        b.set("log.dirs", "/a,/b").expect_err("one dir only");
        b.set("log.dirs", "/tmp/x").expect("valid");
        assert_eq!(b.data_dir, PathBuf::from("/tmp/x"));
        b.set("listeners", "PLAINTEXT://127.0.0.1:19092")
            .expect("valid");
        assert_eq!(b.listen, "127.0.0.1:19092".parse().expect("literal"));
        b.set("listeners", "SSL://127.0.0.1:1").expect_err("SSL");
        b.set("listeners", "PLAINTEXT://:9093")
            .expect("all interfaces");
        assert!(b.listen.ip().is_unspecified());
        assert_eq!(b.advertised_listener().port, 9093);
        b.set("advertised.listeners", "kafka.example:9999")
            .expect("valid");
        assert_eq!(b.advertised_listener().to_string(), "kafka.example:9999");
        assert!(b.is_set("listeners"));
        assert!(!b.is_set("node.id") || b.node_id == 7);

        let err = b.set("auto.create.topic.enable", "true").expect_err("typo");
        assert!(
            err.to_string().contains("auto.create.topics.enable"),
            "{err}"
        );
        let entries = b.entries();
        assert!(entries.windows(2).all(|w| w[0].0 < w[1].0), "sorted");
        assert!(entries
            .iter()
            .any(|(k, v)| *k == "num.partitions" && v == "3"));
    }

    #[test]
    fn advertised_defaults_to_listen() {
        let b = BrokerConfig::default();
        assert_eq!(b.advertised_listener().to_string(), "127.0.0.1:9092");
        let mut b = BrokerConfig::default();
        b.set("listeners", "[::1]:9000").expect("v6");
        assert_eq!(b.advertised_listener().to_string(), "[::1]:9000");
    }

    #[test]
    fn host_port_parsing() {
        let hp: HostPort = "a.b:1".parse().expect("valid");
        assert_eq!((hp.host.as_str(), hp.port), ("a.b", 1));
        assert!("a.b".parse::<HostPort>().is_err());
        assert!("a:b".parse::<HostPort>().is_err());
        assert!("a:70000".parse::<HostPort>().is_err());
        assert!("::1:9092".parse::<HostPort>().is_err());
        assert!("[::1".parse::<HostPort>().is_err());
        assert!("a:1,b:2".parse::<HostPort>().is_err());
    }

    #[test]
    fn cores_parsing() {
        assert_eq!(parse_cores("0"), Ok(vec![0]), "CPU 0, as taskset reads it");
        assert_eq!(parse_cores("2"), Ok(vec![2]));
        assert_eq!(parse_cores("0,2,3"), Ok(vec![0, 2, 3]));
        assert_eq!(parse_cores("1-3"), Ok(vec![1, 2, 3]));
        assert_eq!(parse_cores("5-5, 0"), Ok(vec![5, 0]));
        for bad in ["", "a", "1,1", "3-1", "0,", "1-", "2000", "0,1024"] {
            assert!(parse_cores(bad).is_err(), "`{bad}` must be rejected");
        }
        assert_eq!(render_cores(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
        let available = available_cores();
        assert!(!available.is_empty());
        let mut b = BrokerConfig::default();
        assert_eq!(b.cores, available);
        b.set("sluice.cores", "0").expect("CPU 0 exists");
        assert_eq!(b.cores, vec![0]);
        b.set("sluice.cores", "1000-1000")
            .expect_err("no such CPU here");
        assert_eq!(parse_cores(&render_cores(&available)), Ok(available));
    }

    #[test]
    fn toml_flattening() {
        let text = r#"
            "log.retention.ms" = 1000
            "auto.create.topics.enable" = false
            [log]
            segment.bytes = 2048
            cleanup.policy = ["delete"]
            [sluice]
            cores = "0"
        "#;
        let pairs = flatten_toml(text, Path::new("x.toml")).expect("valid");
        let pairs: Vec<(&str, &str)> = pairs
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("auto.create.topics.enable", "false"),
                ("log.cleanup.policy", "delete"),
                ("log.retention.ms", "1000"),
                ("log.segment.bytes", "2048"),
                ("sluice.cores", "0"),
            ]
        );
        let dup = "\"log.retention.ms\" = 1\n[log]\nretention.ms = 2\n";
        let err = flatten_toml(dup, Path::new("x.toml")).expect_err("set twice");
        assert!(err.to_string().contains("log.retention.ms"), "{err}");
        for bad in [
            "a = 1.5",
            "a = [[1]]",
            "[[other]]\ncore = 1",
            "a = ",
            "a = 1979-05-27",
        ] {
            assert!(
                flatten_toml(bad, Path::new("x.toml")).is_err(),
                "`{bad}` must be rejected"
            );
        }
    }

    #[test]
    fn edit_distance_basics() {
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("same", "same"), 0);
        assert_eq!(
            closest_key("log.retension.ms", &broker_key_names()),
            Some("log.retention.ms")
        );
    }
}

#[cfg(test)]
mod shard_section_tests {
    use super::*;

    fn parse(text: &str) -> Result<Vec<ShardOverride>, ConfigError> {
        parse_shard_sections(text, Path::new("sluice.toml"))
    }

    #[test]
    fn shard_sections_parse_and_apply_to_their_core() {
        let text = "num.partitions = 3\n[[shard]]\ncore = 1\nlisten = false\n\"batch.cache.bytes\" = 1048576\n\"produce.shares\" = 200\n";
        let overrides = parse(text).expect("valid");
        assert_eq!(overrides.len(), 1);
        let config = BrokerConfig {
            cores: vec![0, 1],
            shard_overrides: overrides,
            ..BrokerConfig::default()
        };
        let one = config.shard_settings(1);
        assert!(!one.listen);
        assert_eq!(one.batch_cache_bytes, 1 << 20);
        assert_eq!(one.produce_shares, 200);
        assert_eq!(one.fetch_shares, TASK_QUEUE_SHARES_DEFAULT);
        let zero = config.shard_settings(0);
        assert!(zero.listen);
        assert_eq!(zero.batch_cache_bytes, config.batch_cache_bytes);
        config.check_shard_overrides().expect("consistent");
        // The flat keys around the sections are still read.
        let flat = flatten_toml(text, Path::new("sluice.toml")).expect("flat");
        assert_eq!(flat, vec![("num.partitions".to_string(), "3".to_string())]);
    }

    #[test]
    fn bad_shard_sections_name_the_key() {
        let err = parse("[[shard]]\ncore = 0\nlistens = false\n").expect_err("unknown key");
        assert!(err.to_string().contains("[[shard]] listens"), "{err}");
        assert!(err.to_string().contains("[[shard]] listen`"), "{err}");
        let err = parse("[[shard]]\ncore = 0\n\"fetch.shares\" = 5000\n").expect_err("range");
        assert!(err.to_string().contains("[[shard]] fetch.shares"), "{err}");
        let err = parse("[[shard]]\nlisten = true\n").expect_err("no core");
        assert!(err.to_string().contains("[[shard]] core"), "{err}");
        let err = parse("shard = 1\n").expect_err("not an array of tables");
        assert!(err.to_string().contains("[[shard]]"), "{err}");

        let two = parse("[[shard]]\ncore = 0\n[[shard]]\ncore = 0\n").expect("parses");
        let config = BrokerConfig {
            cores: vec![0, 1],
            shard_overrides: two,
            ..BrokerConfig::default()
        };
        assert!(config.check_shard_overrides().is_err());
        let elsewhere = parse("[[shard]]\ncore = 7\n").expect("parses");
        let config = BrokerConfig {
            cores: vec![0, 1],
            shard_overrides: elsewhere,
            ..BrokerConfig::default()
        };
        assert!(config
            .check_shard_overrides()
            .expect_err("not configured")
            .to_string()
            .contains("core"));
        let mute = parse("[[shard]]\ncore = 0\nlisten = false\n").expect("parses");
        let config = BrokerConfig {
            cores: vec![0],
            shard_overrides: mute,
            ..BrokerConfig::default()
        };
        assert!(
            config.check_shard_overrides().is_err(),
            "someone must listen"
        );
    }
}
