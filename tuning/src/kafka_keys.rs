//! The tables of Kafka property names Sluice answers to, checked against Apache Kafka 4.4.0
//! (`scripts/kafka-ref`, DescribeConfigs and IncrementalAlterConfigs against the real broker):
//!
//! - [`TOPIC_KEYS`]: every topic property Kafka 4.4 lists in DescribeConfigs (37), with its
//!   declared type, Kafka's default, its broker-level synonyms and whether Sluice acts on it.
//!   [`crate::config::TopicConfig`] parses the ones Sluice acts on into typed fields and keeps
//!   the others as validated strings, so that every Kafka topic key is accepted, stored and
//!   described.
//! - [`UNSUPPORTED_BROKER_KEYS`]: keys of Kafka's `server.properties` for what Sluice does not
//!   do, each with the reason [`crate::config::BrokerConfig::set`] gives when refusing it.
//!
//! No state; `const` data only.

/// Kafka's declared type of a config property (`ConfigDef.Type`), as DescribeConfigs v3+
/// reports it in `config_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigType {
    /// `true` / `false`.
    Boolean,
    /// Free text or one of a fixed set of words.
    String,
    /// 32-bit signed integer.
    Int,
    /// 64-bit signed integer.
    Long,
    /// Floating point.
    Double,
    /// Comma-separated list.
    List,
}

impl ConfigType {
    /// Kafka's `DescribeConfigsResponse.ConfigType` code.
    pub fn kafka_code(self) -> i8 {
        match self {
            ConfigType::Boolean => 1,
            ConfigType::String => 2,
            ConfigType::Int => 3,
            ConfigType::Long => 5,
            ConfigType::Double => 6,
            ConfigType::List => 7,
        }
    }
}

/// What Sluice does with a topic property.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Support {
    /// The log, the produce path or retention act on it.
    Honoured,
    /// Accepted, validated as Kafka validates it, stored and described; it configures a part of
    /// Kafka that Sluice does not have (tiered storage, replication throttles, …), so it
    /// changes nothing. A value that would need that part (`remote.storage.enable=true`) is
    /// refused by the parser.
    Stored,
}

/// A broker-level property that sets a topic property's default (Kafka's synonym).
#[derive(Clone, Copy, Debug)]
pub struct Synonym {
    /// The broker property, e.g. `log.retention.hours`.
    pub name: &'static str,
    /// Milliseconds per unit of this property when the topic property is in ms and this one
    /// is coarser (`log.retention.hours` → 3600000); 1 otherwise.
    pub ms_per_unit: i64,
    /// Kafka's default of the broker property in its own unit, if it has one (DescribeConfigs
    /// lists a `DEFAULT_CONFIG` synonym only for those).
    pub default: Option<&'static str>,
}

/// One Kafka topic property.
#[derive(Clone, Copy, Debug)]
pub struct TopicKey {
    /// Kafka's topic-level name.
    pub name: &'static str,
    /// Kafka's declared type.
    pub config_type: ConfigType,
    /// Kafka 4.4's default, as DescribeConfigs renders it.
    pub default: &'static str,
    /// Broker-level properties that set the default, most specific first (Kafka's order).
    pub synonyms: &'static [Synonym],
    /// Whether Sluice acts on it.
    pub support: Support,
}

const fn syn(name: &'static str, default: &'static str) -> Synonym {
    Synonym {
        name,
        ms_per_unit: 1,
        default: Some(default),
    }
}

const LONG_MAX: &str = "9223372036854775807";

/// Every topic property of Kafka 4.4, sorted by name (DescribeConfigs order here).
pub const TOPIC_KEYS: [TopicKey; 37] = [
    TopicKey {
        name: "cleanup.policy",
        config_type: ConfigType::List,
        default: "delete",
        synonyms: &[syn("log.cleanup.policy", "delete")],
        support: Support::Honoured,
    },
    TopicKey {
        name: "compression.gzip.level",
        config_type: ConfigType::Int,
        default: "-1",
        synonyms: &[syn("compression.gzip.level", "-1")],
        support: Support::Stored,
    },
    TopicKey {
        name: "compression.lz4.level",
        config_type: ConfigType::Int,
        default: "9",
        synonyms: &[syn("compression.lz4.level", "9")],
        support: Support::Stored,
    },
    TopicKey {
        name: "compression.type",
        config_type: ConfigType::String,
        default: "producer",
        synonyms: &[syn("compression.type", "producer")],
        support: Support::Honoured,
    },
    TopicKey {
        name: "compression.zstd.level",
        config_type: ConfigType::Int,
        default: "3",
        synonyms: &[syn("compression.zstd.level", "3")],
        support: Support::Stored,
    },
    TopicKey {
        name: "delete.retention.ms",
        config_type: ConfigType::Long,
        default: "86400000",
        synonyms: &[syn("log.cleaner.delete.retention.ms", "86400000")],
        support: Support::Honoured,
    },
    TopicKey {
        name: "errors.deadletterqueue.group.enable",
        config_type: ConfigType::Boolean,
        default: "false",
        synonyms: &[],
        support: Support::Stored,
    },
    TopicKey {
        name: "file.delete.delay.ms",
        config_type: ConfigType::Long,
        default: "60000",
        synonyms: &[syn("log.segment.delete.delay.ms", "60000")],
        support: Support::Stored,
    },
    TopicKey {
        name: "flush.messages",
        config_type: ConfigType::Long,
        default: LONG_MAX,
        synonyms: &[syn("log.flush.interval.messages", LONG_MAX)],
        support: Support::Honoured,
    },
    TopicKey {
        name: "flush.ms",
        config_type: ConfigType::Long,
        default: LONG_MAX,
        synonyms: &[
            Synonym {
                name: "log.flush.interval.ms",
                ms_per_unit: 1,
                default: None,
            },
            syn("log.flush.scheduler.interval.ms", LONG_MAX),
        ],
        support: Support::Honoured,
    },
    TopicKey {
        name: "follower.replication.throttled.replicas",
        config_type: ConfigType::List,
        default: "",
        synonyms: &[],
        support: Support::Stored,
    },
    TopicKey {
        name: "index.interval.bytes",
        config_type: ConfigType::Int,
        default: "4096",
        synonyms: &[syn("log.index.interval.bytes", "4096")],
        support: Support::Honoured,
    },
    TopicKey {
        name: "leader.replication.throttled.replicas",
        config_type: ConfigType::List,
        default: "",
        synonyms: &[],
        support: Support::Stored,
    },
    TopicKey {
        name: "local.retention.bytes",
        config_type: ConfigType::Long,
        default: "-2",
        synonyms: &[syn("log.local.retention.bytes", "-2")],
        support: Support::Stored,
    },
    TopicKey {
        name: "local.retention.ms",
        config_type: ConfigType::Long,
        default: "-2",
        synonyms: &[syn("log.local.retention.ms", "-2")],
        support: Support::Stored,
    },
    TopicKey {
        name: "max.compaction.lag.ms",
        config_type: ConfigType::Long,
        default: LONG_MAX,
        synonyms: &[syn("log.cleaner.max.compaction.lag.ms", LONG_MAX)],
        support: Support::Honoured,
    },
    TopicKey {
        name: "max.decompressed.message.bytes",
        config_type: ConfigType::Int,
        default: "2147483639",
        synonyms: &[syn("max.decompressed.message.bytes", "2147483639")],
        support: Support::Stored,
    },
    TopicKey {
        name: "max.message.bytes",
        config_type: ConfigType::Int,
        default: "1048588",
        synonyms: &[syn("message.max.bytes", "1048588")],
        support: Support::Honoured,
    },
    TopicKey {
        name: "message.timestamp.after.max.ms",
        config_type: ConfigType::Long,
        default: "3600000",
        synonyms: &[syn("log.message.timestamp.after.max.ms", "3600000")],
        support: Support::Honoured,
    },
    TopicKey {
        name: "message.timestamp.before.max.ms",
        config_type: ConfigType::Long,
        default: LONG_MAX,
        synonyms: &[syn("log.message.timestamp.before.max.ms", LONG_MAX)],
        support: Support::Honoured,
    },
    TopicKey {
        name: "message.timestamp.type",
        config_type: ConfigType::String,
        default: "CreateTime",
        synonyms: &[syn("log.message.timestamp.type", "CreateTime")],
        support: Support::Honoured,
    },
    TopicKey {
        name: "min.cleanable.dirty.ratio",
        config_type: ConfigType::Double,
        default: "0.5",
        synonyms: &[syn("log.cleaner.min.cleanable.ratio", "0.5")],
        support: Support::Honoured,
    },
    TopicKey {
        name: "min.compaction.lag.ms",
        config_type: ConfigType::Long,
        default: "0",
        synonyms: &[syn("log.cleaner.min.compaction.lag.ms", "0")],
        support: Support::Honoured,
    },
    TopicKey {
        name: "min.insync.replicas",
        config_type: ConfigType::Int,
        default: "1",
        synonyms: &[syn("min.insync.replicas", "1")],
        support: Support::Honoured,
    },
    TopicKey {
        name: "preallocate",
        config_type: ConfigType::Boolean,
        default: "false",
        synonyms: &[syn("log.preallocate", "false")],
        support: Support::Stored,
    },
    TopicKey {
        name: "remote.copy.lag.bytes",
        config_type: ConfigType::Long,
        default: "-1",
        synonyms: &[syn("log.remote.copy.lag.bytes", "-1")],
        support: Support::Stored,
    },
    TopicKey {
        name: "remote.copy.lag.ms",
        config_type: ConfigType::Long,
        default: "0",
        synonyms: &[syn("log.remote.copy.lag.ms", "0")],
        support: Support::Stored,
    },
    TopicKey {
        name: "remote.log.copy.disable",
        config_type: ConfigType::Boolean,
        default: "false",
        synonyms: &[],
        support: Support::Stored,
    },
    TopicKey {
        name: "remote.log.delete.on.disable",
        config_type: ConfigType::Boolean,
        default: "false",
        synonyms: &[],
        support: Support::Stored,
    },
    TopicKey {
        name: "remote.storage.enable",
        config_type: ConfigType::Boolean,
        default: "false",
        synonyms: &[],
        support: Support::Stored,
    },
    TopicKey {
        name: "retention.bytes",
        config_type: ConfigType::Long,
        default: "-1",
        synonyms: &[syn("log.retention.bytes", "-1")],
        support: Support::Honoured,
    },
    TopicKey {
        name: "retention.ms",
        config_type: ConfigType::Long,
        default: "604800000",
        synonyms: &[
            Synonym {
                name: "log.retention.ms",
                ms_per_unit: 1,
                default: None,
            },
            Synonym {
                name: "log.retention.minutes",
                ms_per_unit: 60_000,
                default: None,
            },
            Synonym {
                name: "log.retention.hours",
                ms_per_unit: 3_600_000,
                default: Some("168"),
            },
        ],
        support: Support::Honoured,
    },
    TopicKey {
        name: "segment.bytes",
        config_type: ConfigType::Int,
        default: "1073741824",
        synonyms: &[syn("log.segment.bytes", "1073741824")],
        support: Support::Honoured,
    },
    TopicKey {
        name: "segment.index.bytes",
        config_type: ConfigType::Int,
        default: "10485760",
        synonyms: &[syn("log.index.size.max.bytes", "10485760")],
        support: Support::Stored,
    },
    TopicKey {
        name: "segment.jitter.ms",
        config_type: ConfigType::Long,
        default: "0",
        synonyms: &[
            Synonym {
                name: "log.roll.jitter.ms",
                ms_per_unit: 1,
                default: None,
            },
            Synonym {
                name: "log.roll.jitter.hours",
                ms_per_unit: 3_600_000,
                default: Some("0"),
            },
        ],
        support: Support::Stored,
    },
    TopicKey {
        name: "segment.ms",
        config_type: ConfigType::Long,
        default: "604800000",
        synonyms: &[
            Synonym {
                name: "log.roll.ms",
                ms_per_unit: 1,
                default: None,
            },
            Synonym {
                name: "log.roll.hours",
                ms_per_unit: 3_600_000,
                default: Some("168"),
            },
        ],
        support: Support::Honoured,
    },
    TopicKey {
        name: "unclean.leader.election.enable",
        config_type: ConfigType::Boolean,
        default: "false",
        synonyms: &[syn("unclean.leader.election.enable", "false")],
        support: Support::Stored,
    },
];

const _: () = {
    // Sorted and unique: lookups and DescribeConfigs rely on the order.
    let mut i = 1;
    while i < TOPIC_KEYS.len() {
        let (a, b) = (
            TOPIC_KEYS[i - 1].name.as_bytes(),
            TOPIC_KEYS[i].name.as_bytes(),
        );
        let mut j = 0;
        while j < a.len() && j < b.len() && a[j] == b[j] {
            j += 1;
        }
        assert!(j < b.len(), "TOPIC_KEYS not sorted or not unique");
        assert!(j == a.len() || a[j] < b[j], "TOPIC_KEYS not sorted");
        i += 1;
    }
};

/// The entry of topic property `name`.
pub fn topic_key(name: &str) -> Option<&'static TopicKey> {
    TOPIC_KEYS.iter().find(|k| k.name == name)
}

/// The topic property whose default the broker-level property `name` sets, with the synonym.
pub fn topic_key_for_broker_synonym(name: &str) -> Option<(&'static TopicKey, &'static Synonym)> {
    TOPIC_KEYS
        .iter()
        .find_map(|k| k.synonyms.iter().find(|s| s.name == name).map(|s| (k, s)))
}

/// Keys of Kafka's `server.properties` for parts of Kafka that Sluice does not have, with the
/// reason a start-up with one of them fails. A key that Sluice accepts with Kafka's meaning is
/// not here; a key in neither list is unknown.
pub const UNSUPPORTED_BROKER_KEYS: &[(&str, &str)] = &[
    ("num.network.threads", "Sluice is thread-per-core: each shard owns its connections (set the CPUs with --cores); remove the key"),
    ("num.io.threads", "Sluice is thread-per-core: each shard does its own I/O (set the CPUs with --cores); remove the key"),
    ("num.recovery.threads.per.data.dir", "Sluice recovers each partition on the shard that owns it; remove the key"),
    ("num.replica.fetchers", "Sluice runs one replica fetcher per leader broker, on shard 0, fanned out to the owning shards; remove the key"),
    ("background.threads", "Sluice is thread-per-core: background work runs on each shard; remove the key"),
    ("socket.send.buffer.bytes", "Sluice keeps the kernel's socket buffer sizes; remove the key"),
    ("socket.receive.buffer.bytes", "Sluice keeps the kernel's socket buffer sizes; remove the key"),
    ("share.coordinator.state.topic.replication.factor", "share groups are not built; remove the key"),
    ("share.coordinator.state.topic.min.isr", "share groups are not built; remove the key"),
    ("remote.log.storage.system.enable", "tiered storage is not built; remove the key"),
    ("group.coordinator.rebalance.protocols", "Sluice serves the classic group protocol only; remove the key"),
];

/// Why Sluice refuses broker key `name`, if it is one of [`UNSUPPORTED_BROKER_KEYS`].
pub fn unsupported_broker_key(name: &str) -> Option<&'static str> {
    UNSUPPORTED_BROKER_KEYS
        .iter()
        .find(|(k, _)| *k == name)
        .map(|(_, why)| *why)
}
