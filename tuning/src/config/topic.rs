//! [`TopicConfig`]: the per-topic properties (Kafka 4.4's topic keys, [`TOPIC_KEYS`]) and the
//! typed values of those Sluice acts on.

use super::error::{invalid, unknown, ConfigError};
use super::value::{
    parse_bool, parse_long_min, parse_ranged, parse_u32_int, parse_unsigned, render_unlimited,
};
use crate::kafka_keys::{topic_key, ConfigType, Support, TopicKey, TOPIC_KEYS};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// Kafka's "never" for `flush.messages` and `flush.ms` (`Long.MAX_VALUE`).
pub const FLUSH_NEVER: u64 = i64::MAX as u64;

/// Smallest `segment.bytes` Kafka 4 accepts (1 MiB, KIP-1030).
pub const SEGMENT_BYTES_MIN: u64 = 1 << 20;

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
}
