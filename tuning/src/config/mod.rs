//! Broker and topic configuration: Kafka property names, Kafka defaults, validation.
//!
//! Two types:
//! - [`TopicConfig`]: the per-topic properties a Kafka client can describe, create with and alter
//!   (`retention.ms`, `segment.bytes`, …). It remembers which keys were set explicitly, so
//!   DescribeConfigs can report `TOPIC_CONFIG` versus a default ([`TopicConfig::is_set`]).
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
//! Limits: one data directory (Kafka's `log.dirs` list is rejected if it names
//! more than one), `cleanup.policy` `delete` or empty only (no compaction).
//!
//! Files, by concern (private modules; the public items are re-exported here, so paths stay
//! `tuning::config::…`):
//! - `topic`: [`TopicConfig`] and the typed values of topic properties. Each property is
//!   declared once: Kafka's facts in [`crate::kafka_keys::TOPIC_KEYS`], the log's values in
//!   storage's `LogConfig` (embedded as [`TopicConfig::log`], no conversion), parsing and
//!   rendering in one table entry per key.
//! - `broker`: [`BrokerConfig`], the broker-level keys and the topic defaults they set.
//! - `shard`: `[[shard]]` per-core sections ([`ShardOverride`], [`ShardSettings`]).
//! - `file`: flattening a TOML document into keys ([`flatten_toml`]).
//! - `listener`, `cores`: `HOST:PORT` listeners and `--cores` CPU lists; `voters`:
//!   `controller.quorum.voters` ([`QuorumVoter`]).
//! - `value`: parsing and range checks of one value; `error`: [`ConfigError`];
//!   `suggest`: the closest known key for a typo.
//!
//! Imports run one way: `broker` uses the others, nothing uses `broker`.

mod broker;
mod broker_keys;
mod cores;
mod error;
mod file;
mod listener;
mod shard;
mod suggest;
mod topic;
mod value;
mod voters;

pub use broker::{AdvertisedListener, BrokerConfig, Listener, ProcessRoles};
pub use broker_keys::{broker_key_names, SASL_KEYS, SSL_KEYS};
pub use cores::{available_cores, parse_cores};
pub use error::ConfigError;
pub use file::flatten_toml;
pub use listener::{
    default_protocol_map, parse_endpoints, parse_listen_addr, parse_protocol_map, HostPort,
    ListenerEndpoint, SecurityProtocol,
};
pub use shard::{
    parse_shard_sections, ShardOverride, ShardSettings, IO_MEMORY_BYTES_DEFAULT, SHARD_KEYS,
    TASK_QUEUE_SHARES_DEFAULT,
};
pub use topic::{
    CleanupPolicy, CompressionType, ConfigSource, TimestampType, TopicConfig, FLUSH_NEVER,
    SEGMENT_BYTES_MIN,
};
pub use voters::{
    parse_bootstrap_servers, parse_quorum_voters, render_bootstrap_servers, render_quorum_voters,
    QuorumVoter,
};
