//! [`BrokerConfig`]: the start-up configuration of one `sluice` process — its broker-level
//! keys, the topic defaults set by their broker-level synonyms (Kafka's precedence among
//! `log.retention.{ms,minutes,hours}`), and the per-shard settings. The broker-level keys
//! themselves are one table in `broker_keys`.

use super::cores::available_cores;
use super::error::{invalid, ConfigError};
use super::file::flatten_toml;
use super::listener::{
    default_protocol_map, parse_listen_addr, HostPort, ListenerEndpoint, SecurityProtocol,
};
use super::shard::{
    parse_shard_sections, ShardOverride, ShardSettings, IO_MEMORY_BYTES_DEFAULT,
    TASK_QUEUE_SHARES_DEFAULT,
};
use super::topic::TopicConfig;
use super::voters::{render_quorum_voters, QuorumVoter};
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;
use storage::CleanerConfig;

/// The start-up configuration of one `sluice` process.
///
/// Build with `BrokerConfig::default()` and [`BrokerConfig::set`] (or the broker's `cli::load`).
#[derive(Clone, Debug)]
pub struct BrokerConfig {
    /// Kafka listeners (`listeners`, flag `--listen` for one `PLAINTEXT` listener), each
    /// with its address resolved for binding. Default `PLAINTEXT://127.0.0.1:9092`. Names are
    /// unique; their protocols come from `listener.security.protocol.map`
    /// ([`BrokerConfig::check_listeners`]).
    pub listeners: Vec<Listener>,
    /// What Metadata responses tell clients of each listener to connect to
    /// (`advertised.listeners`, flag `--advertised-listener`), by listener name; a listener
    /// missing here advertises its own address, see [`BrokerConfig::advertised_endpoints`].
    pub advertised_listeners: Vec<ListenerEndpoint>,
    /// `listener.security.protocol.map`: listener name → security protocol. Default each
    /// protocol's name to itself (Kafka's).
    pub listener_security_protocol_map: Vec<(String, SecurityProtocol)>,
    /// `inter.broker.listener.name`: the listener other brokers' replica fetchers and
    /// controller forwarding connect to. `None`: the listener named after
    /// `security.inter.broker.protocol` (default `PLAINTEXT`), as in Kafka.
    pub inter_broker_listener_name: Option<String>,
    /// `security.inter.broker.protocol` when set (only one of it and
    /// `inter.broker.listener.name` may be).
    pub security_inter_broker_protocol: Option<SecurityProtocol>,
    /// `controller.listener.names`: the listeners the controller quorum speaks on, upper
    /// case; the first names the voters' own traffic (each voter's address of
    /// `controller.quorum.voters`), its protocol from `listener.security.protocol.map`
    /// (`PLAINTEXT` or `SSL`). Empty (default): the voters speak `PLAINTEXT`.
    pub controller_listener_names: Vec<String>,
    /// The TLS and SASL keys (`ssl.*`, `sasl.enabled.mechanisms`, `sasl.jaas.config`) and
    /// their per-listener overrides (`listener.name.<l>.ssl.*`,
    /// `listener.name.<l>.<mechanism>.sasl.jaas.config`, the listener and mechanism names in
    /// lower case as Kafka writes them), as given (trimmed); the broker builds each TLS and
    /// SASL listener's settings from them ([`BrokerConfig::listener_property`]).
    pub security_properties: BTreeMap<String, String>,
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
    /// `transaction.state.log.num.partitions`: partitions of `__transaction_state`, fixed
    /// when the first transactional id creates it. Default 50.
    pub transaction_state_log_num_partitions: i32,
    /// `transaction.state.log.replication.factor`: replicas of each `__transaction_state`
    /// partition, at most the cluster's size. Default 3.
    pub transaction_state_log_replication_factor: i16,
    /// `transaction.state.log.min.isr`: `min.insync.replicas` of `__transaction_state`, at
    /// most its replication factor. Default 2.
    pub transaction_state_log_min_isr: i32,
    /// `transaction.state.log.segment.bytes`: `segment.bytes` of `__transaction_state`, bytes.
    /// Default 104857600.
    pub transaction_state_log_segment_bytes: u64,
    /// `transaction.max.timeout.ms`: the largest `transaction.timeout.ms` a producer may ask
    /// for, ms. Default 900000.
    pub transaction_max_timeout_ms: i32,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`: how often open
    /// transactions past their timeout are aborted, ms. Default 10000; at least 1.
    pub transaction_abort_timed_out_transaction_cleanup_interval_ms: u64,
    /// `transaction.remove.expired.transaction.cleanup.interval.ms`: how often expired
    /// transactional ids are removed, ms. Default 3600000; at least 1.
    pub transaction_remove_expired_transaction_cleanup_interval_ms: u64,
    /// `transactional.id.expiration.ms`: how long a transactional id without a transaction is
    /// kept after its last update, ms. Default 604800000 (7 days); at least 1.
    pub transactional_id_expiration_ms: i64,
    /// `transaction.partition.verification.enable`: a partition leader asks the transaction
    /// coordinator whether the partition is in the producer's transaction before it appends
    /// the transaction's first batch there (KIP-890 part 1). Default true; dynamic.
    pub transaction_partition_verification_enable: bool,
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
    /// `offsets.retention.minutes`: how long committed offsets outlive their group's use of
    /// them (KIP-211: an Empty group's, counted from when it became Empty), minutes. Default
    /// 10080 (7 days); at least 1.
    pub offsets_retention_minutes: i32,
    /// `offsets.retention.check.interval.ms`: how often each shard expires committed
    /// offsets, ms. Default 600000 (10 minutes); at least 1.
    pub offsets_retention_check_interval_ms: u64,
    /// `replica.high.watermark.checkpoint.interval.ms`: how often each shard writes the
    /// high-watermark checkpoint of every partition whose high watermark moved, ms (a restarted
    /// replica starts from it). Default 5000 (Kafka's); at least 1.
    pub replica_high_watermark_checkpoint_interval_ms: u64,
    /// `offsets.topic.replication.factor`: replicas of each `__consumer_offsets` partition.
    /// Default 3 (Kafka's). Sluice creates the topic with min(this, the nodes of
    /// `controller.quorum.voters`, 1 without them), so a single node keeps working with the
    /// default (Kafka would wait for three brokers), and only once that many brokers are active.
    pub offsets_topic_replication_factor: i16,
    /// `replica.lag.time.max.ms` (Kafka's `ReplicationConfigs`): how long an ISR follower
    /// may go without fetching up to the leader's log end offset before the leader removes it
    /// from the ISR, ms; the leader checks every half of it (Kafka's `isr-expiration`).
    /// Default 30000 (Kafka's); at least 1 (Kafka accepts any long). Read-only, as in Kafka
    /// 4.x: fixed at start-up, not a dynamic broker config.
    pub replica_lag_time_max_ms: u64,
    /// `leader.replication.throttled.rate` (KIP-73): the bytes per second a leader may send
    /// to followers of the replicas its topics list in `leader.replication.throttled.replicas`.
    /// Default `i64::MAX` (no limit), as Kafka; dynamic. Stored; not enforced yet.
    pub leader_replication_throttled_rate: u64,
    /// `follower.replication.throttled.rate` (KIP-73): the bytes per second this broker's
    /// replica fetchers may fetch for the replicas its topics list in
    /// `follower.replication.throttled.replicas` while they are out of the ISR. Default
    /// `i64::MAX` (no limit), as Kafka; dynamic.
    pub follower_replication_throttled_rate: u64,
    /// `replica.alter.log.dirs.io.max.bytes.per.second`: Kafka's limit on moving replicas
    /// between log directories. Sluice has one data directory and moves none; accepted (and
    /// cleared by `kafka-reassign-partitions.sh --verify`) with Kafka's default `i64::MAX`.
    pub replica_alter_log_dirs_io_max_bytes_per_second: u64,
    /// `process.roles` (KIP-631): what this node is — a broker, a controller (a voter of
    /// `controller.quorum.voters`), or both. Default both, as every Sluice node was before the
    /// key existed (Kafka has no default). A broker-only node follows the metadata log as an
    /// observer and never votes; a controller-only node serves no Kafka listener.
    pub process_roles: ProcessRoles,
    /// `controller.quorum.voters` (KIP-595): every voter of the controller quorum with the
    /// address its quorum transport listens on, `id@host:port,…`. Default empty: this node
    /// is a one-voter quorum of itself and listens for no voter. When set, `node.id` must be
    /// one of them ([`BrokerConfig::check_quorum`]).
    pub controller_quorum_voters: Vec<QuorumVoter>,
    /// `controller.quorum.bootstrap.servers` (KIP-853): controllers (`host:port` of their
    /// controller listener) that a controller joining a running quorum asks where the voters
    /// are. Sluice takes it only on a controller-only node without `controller.quorum.voters`
    /// (it starts with no voters and waits for AddRaftVoter); default empty.
    pub controller_quorum_bootstrap_servers: Vec<SocketAddr>,
    /// `controller.quorum.election.timeout.ms`: how long a voter hears nothing from a leader
    /// before it campaigns, ms (raft-rs randomises it within [1×, 2×)). Default 1000
    /// (Kafka's); at least 300, 3 quorum ticks ([`BrokerConfig::QUORUM_TICK_MS`]), above
    /// the leader's heartbeat of 2 ticks.
    pub controller_quorum_election_timeout_ms: u64,
    /// `broker.heartbeat.interval.ms` (KIP-631): how often a broker heartbeats to the active
    /// controller, ms. Default 2000; below `broker.session.timeout.ms`.
    pub broker_heartbeat_interval_ms: u64,
    /// `broker.session.timeout.ms` (KIP-631): how long the controller waits for a broker's
    /// heartbeat before it fences the broker, ms. Default 9000.
    pub broker_session_timeout_ms: u64,
    /// `auto.leader.rebalance.enable`: whether the active controller moves leaderships back
    /// to the preferred replica (the first of the assignment) on its own. Default true.
    pub auto_leader_rebalance_enable: bool,
    /// `leader.imbalance.per.broker.percentage`: the share of a broker's preferred
    /// partitions it may not lead, in percent, before the controller moves them back.
    /// Default 10; any integer, as Kafka (0 or less: any imbalance).
    pub leader_imbalance_per_broker_percentage: i32,
    /// `leader.imbalance.check.interval.seconds`: how often the active controller checks the
    /// leader balance, s. Default 300; at least 1.
    pub leader_imbalance_check_interval_seconds: u64,
    /// `max.incremental.fetch.session.cache.slots`: how many incremental fetch sessions
    /// (KIP-227) the broker keeps, shared out among its shards (each gets its share, rounded
    /// up). Default 1000; at least 0 (0: no sessions, every fetch is full).
    pub max_incremental_fetch_session_cache_slots: usize,
    /// The log cleaner's `log.cleaner.*` settings (`enable`, `threads`, `backoff.ms`,
    /// `dedupe.buffer.size`, `io.buffer.size`, `io.max.bytes.per.second`), Kafka's defaults.
    /// One cleaner runs per shard whatever `log.cleaner.threads` says, except that 0 runs none.
    pub cleaner: CleanerConfig,
    /// `connection.failed.authentication.delay.ms`: how long a failed SASL authentication's
    /// answer (and the close after it) is held back, against password guessing, ms. Default
    /// 100 (Kafka's); at most `connections.max.idle.ms` (600000) here.
    pub connection_failed_authentication_delay_ms: u64,
    /// `broker.rack`: this broker's rack, registered with the controller and listed in
    /// Metadata and DescribeCluster; new replicas are placed rack by rack (KIP-36). Default:
    /// none.
    pub broker_rack: Option<String>,
    /// `replica.selector.class`: when it names Kafka's
    /// `org.apache.kafka.common.replica.RackAwareReplicaSelector` (the only selector Sluice
    /// has, KIP-392), a leader answers a consumer's Fetch (v11+) naming a `rack_id` with the
    /// `preferred_read_replica` in that rack; "" (the default, Kafka's null): no selector,
    /// consumers read from the leader unless they choose a follower themselves.
    pub rack_aware_replica_selector: bool,
    /// `authorizer.class.name`: ACLs are checked on every request when it names Kafka's
    /// `org.apache.kafka.metadata.authorizer.StandardAuthorizer` (the only authorizer Sluice
    /// has, KIP-801); "" (the default): no authorizer, the ACL APIs answer SECURITY_DISABLED.
    pub authorizer_enabled: bool,
    /// `super.users`: principals allowed everything (`User:admin;User:ops`). Default none.
    pub super_users: Vec<String>,
    /// `allow.everyone.if.no.acl.found`: the answer for a resource no ACL names. Default false.
    pub allow_everyone_if_no_acl_found: bool,
    /// Keys set through [`BrokerConfig::set`], canonical names, with the value as given
    /// (trimmed): DescribeConfigs reports a synonym in its own unit (`log.retention.hours`).
    pub(super) given: BTreeMap<&'static str, String>,
    /// Kafka's precedence among the broker synonyms of one topic property (e.g.
    /// `log.retention.{ms,minutes,hours}`): topic property → index in its synonym list of the
    /// most specific one set so far. A coarser one never overrides a finer one, whatever the
    /// order.
    pub(super) synonym_rank: BTreeMap<&'static str, usize>,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            listeners: vec![Listener {
                name: SecurityProtocol::Plaintext.name().to_owned(),
                host_port: HostPort {
                    host: Ipv4Addr::LOCALHOST.to_string(),
                    port: 9092,
                },
                addr: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 9092),
            }],
            advertised_listeners: Vec::new(),
            listener_security_protocol_map: default_protocol_map(),
            inter_broker_listener_name: None,
            security_inter_broker_protocol: None,
            controller_listener_names: Vec::new(),
            security_properties: BTreeMap::new(),
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
            transaction_state_log_num_partitions: 50,
            transaction_state_log_replication_factor: 3,
            transaction_state_log_min_isr: 2,
            transaction_state_log_segment_bytes: 104_857_600,
            transaction_max_timeout_ms: 900_000,
            transaction_abort_timed_out_transaction_cleanup_interval_ms: 10_000,
            transaction_remove_expired_transaction_cleanup_interval_ms: 3_600_000,
            transactional_id_expiration_ms: 604_800_000,
            transaction_partition_verification_enable: true,
            group_initial_rebalance_delay_ms: 3000,
            group_min_session_timeout_ms: 6000,
            group_max_session_timeout_ms: 1_800_000,
            log_retention_check_interval_ms: 300_000,
            offsets_retention_minutes: 10_080,
            offsets_retention_check_interval_ms: 600_000,
            replica_high_watermark_checkpoint_interval_ms: 5_000,
            offsets_topic_replication_factor: 3,
            replica_lag_time_max_ms: 30_000,
            leader_replication_throttled_rate: i64::MAX.unsigned_abs(),
            follower_replication_throttled_rate: i64::MAX.unsigned_abs(),
            replica_alter_log_dirs_io_max_bytes_per_second: i64::MAX.unsigned_abs(),
            process_roles: ProcessRoles::COMBINED,
            controller_quorum_voters: Vec::new(),
            controller_quorum_bootstrap_servers: Vec::new(),
            controller_quorum_election_timeout_ms: 1000,
            broker_heartbeat_interval_ms: 2000,
            broker_session_timeout_ms: 9000,
            auto_leader_rebalance_enable: true,
            leader_imbalance_per_broker_percentage: 10,
            leader_imbalance_check_interval_seconds: 300,
            max_incremental_fetch_session_cache_slots: 1000,
            cleaner: CleanerConfig::default(),
            broker_rack: None,
            authorizer_enabled: false,
            rack_aware_replica_selector: false,
            super_users: Vec::new(),
            allow_everyone_if_no_acl_found: false,
            connection_failed_authentication_delay_ms: 100,
            given: BTreeMap::new(),
            synonym_rank: BTreeMap::new(),
        }
    }
}

impl BrokerConfig {
    /// Applies the `sluice.toml` document `text` (read from `path`, which errors name): each
    /// key [`flatten_toml`] gives, then the `[[shard]]` sections. The file layer of the
    /// broker's loading order (defaults < file < `--set` < flags); pure, so the bytes of any
    /// file can be checked without I/O (the `load_config` fuzz target in `tuning/fuzz`).
    ///
    /// # Errors
    /// [`ConfigError::ParseFile`] for a document [`flatten_toml`] or
    /// [`parse_shard_sections`] refuses, [`ConfigError::InFile`] wrapping the first bad key.
    /// On error the keys before the bad one stay applied.
    pub fn apply_toml(&mut self, text: &str, path: &Path) -> Result<(), ConfigError> {
        let in_file = |e: ConfigError| ConfigError::InFile {
            path: path.to_owned(),
            source: Box::new(e),
        };
        for (key, value) in flatten_toml(text, path)? {
            self.set(&key, &value).map_err(in_file)?;
        }
        self.shard_overrides = parse_shard_sections(text, path).map_err(in_file)?;
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

    /// How often each shard writes the high-watermark checkpoints
    /// (`replica.high.watermark.checkpoint.interval.ms`).
    pub fn replica_high_watermark_checkpoint_interval(&self) -> Duration {
        Duration::from_millis(self.replica_high_watermark_checkpoint_interval_ms)
    }

    /// `connection.failed.authentication.delay.ms` as a [`Duration`].
    pub fn connection_failed_authentication_delay(&self) -> Duration {
        Duration::from_millis(self.connection_failed_authentication_delay_ms)
    }

    /// `replica.lag.time.max.ms` as a [`Duration`].
    pub fn replica_lag_time_max(&self) -> Duration {
        Duration::from_millis(self.replica_lag_time_max_ms)
    }

    /// The endpoint advertised for each listener, in `listeners` order: the
    /// `advertised.listeners` entry of its name if any, else its own address. A wildcard
    /// listen address (0.0.0.0 / ::) is not connectable, so then the machine's host name is
    /// advertised (as Kafka does), or `localhost` if it cannot be read.
    pub fn advertised_endpoints(&self) -> Vec<AdvertisedListener> {
        self.listeners
            .iter()
            .map(|l| {
                let host_port = match self.advertised_listeners.iter().find(|a| a.name == l.name) {
                    Some(a) => a.host_port.clone(),
                    None if l.addr.ip().is_unspecified() => HostPort {
                        host: std::fs::read_to_string("/proc/sys/kernel/hostname")
                            .ok()
                            .map(|h| h.trim().to_owned())
                            .filter(|h| !h.is_empty())
                            .unwrap_or_else(|| "localhost".to_owned()),
                        port: l.addr.port(),
                    },
                    None => HostPort {
                        host: l.addr.ip().to_string(),
                        port: l.addr.port(),
                    },
                };
                AdvertisedListener {
                    name: l.name.clone(),
                    host_port,
                    security_protocol: self
                        .listener_protocol(&l.name)
                        .unwrap_or(SecurityProtocol::Plaintext),
                }
            })
            .collect()
    }

    /// The security protocol of listener `name` (upper case) in
    /// `listener.security.protocol.map`.
    pub fn listener_protocol(&self, name: &str) -> Option<SecurityProtocol> {
        self.listener_security_protocol_map
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, p)| *p)
    }

    /// The listener other brokers connect to (`inter.broker.listener.name`, else the one
    /// named after `security.inter.broker.protocol`, default `PLAINTEXT`).
    pub fn inter_broker_listener_name(&self) -> String {
        self.inter_broker_listener_name.clone().unwrap_or_else(|| {
            self.security_inter_broker_protocol
                .unwrap_or(SecurityProtocol::Plaintext)
                .name()
                .to_owned()
        })
    }

    /// The security protocol of the inter-broker listener ([`Self::inter_broker_listener_name`]);
    /// `PLAINTEXT` when it names no mapped listener ([`Self::check_listeners`] refuses that).
    pub fn inter_broker_protocol(&self) -> SecurityProtocol {
        self.listener_protocol(&self.inter_broker_listener_name())
            .unwrap_or(SecurityProtocol::Plaintext)
    }

    /// Whether this node joins a running quorum (KIP-853): a controller with
    /// `controller.quorum.bootstrap.servers` and no `controller.quorum.voters`. It starts with
    /// no voters and becomes one when AddRaftVoter adds it.
    pub fn joins_quorum(&self) -> bool {
        self.process_roles.controller
            && self.controller_quorum_voters.is_empty()
            && !self.controller_quorum_bootstrap_servers.is_empty()
    }

    /// Where this node's voter listener binds: its entry of `controller.quorum.voters`, else
    /// (a controller-only node joining a running quorum) the listener of `listeners` that
    /// `controller.listener.names` names first. `None`: neither.
    pub fn voter_address(&self) -> Option<SocketAddr> {
        if let Some(v) = self
            .controller_quorum_voters
            .iter()
            .find(|v| v.id == self.node_id)
        {
            return Some(v.addr);
        }
        if self.process_roles != ProcessRoles::CONTROLLER {
            return None;
        }
        let name = self.controller_listener_names.first()?;
        let listener = self.listeners.iter().find(|l| &l.name == name)?;
        parse_listen_addr(&listener.host_port.to_string()).ok()
    }

    /// The listener the voters speak on (the first of `controller.listener.names`) and its
    /// protocol; `None` without `controller.listener.names` (the voters speak `PLAINTEXT`).
    pub fn controller_listener(&self) -> Option<(&str, SecurityProtocol)> {
        let name = self.controller_listener_names.first()?;
        let protocol = self
            .listener_protocol(name)
            .unwrap_or(SecurityProtocol::Plaintext);
        Some((name.as_str(), protocol))
    }

    /// The value of TLS key `key` (`ssl.…`) for listener `listener`: its
    /// `listener.name.<listener in lower case>.<key>` override, else `key` itself.
    pub fn listener_property(&self, listener: &str, key: &str) -> Option<&str> {
        let prefixed = format!("listener.name.{}.{key}", listener.to_ascii_lowercase());
        self.security_properties
            .get(&prefixed)
            .or_else(|| self.security_properties.get(key))
            .map(String::as_str)
    }

    /// Checks the listener keys against each other once every key is set, with Kafka's
    /// messages: each listener has a security protocol; no two listeners share a port;
    /// `advertised.listeners` names only listeners; the inter-broker listener is one of them,
    /// and when it uses SASL `sasl.mechanism.inter.broker.protocol` (Kafka's default `GSSAPI`)
    /// names a mechanism of [`INTER_BROKER_SASL_MECHANISMS`]; the controller listener (see
    /// [`BrokerConfig::controller_listener`]) is `PLAINTEXT` or `SSL` and not a Kafka listener.
    ///
    /// # Errors
    /// [`ConfigError::InvalidValue`] naming the key at fault.
    pub fn check_listeners(&self) -> Result<(), ConfigError> {
        let listeners = self
            .listeners
            .iter()
            .map(|l| format!("{}://{}", l.name, l.host_port))
            .collect::<Vec<_>>()
            .join(",");
        for l in &self.listeners {
            if self.listener_protocol(&l.name).is_none() {
                return Err(invalid(
                    "listener.security.protocol.map",
                    &render_protocol_map(&self.listener_security_protocol_map),
                    format!("No security protocol defined for listener {}", l.name),
                ));
            }
            if self
                .listeners
                .iter()
                .any(|o| o.name != l.name && o.addr.port() == l.addr.port() && l.addr.port() != 0)
            {
                return Err(invalid(
                    "listeners",
                    &listeners,
                    "Each listener must have a different port",
                ));
            }
        }
        let names: Vec<&str> = self.listeners.iter().map(|l| l.name.as_str()).collect();
        if let Some(a) = self
            .advertised_listeners
            .iter()
            .find(|a| !names.contains(&a.name.as_str()))
        {
            return Err(invalid(
                "advertised.listeners",
                &a.to_string(),
                format!(
                    "advertised.listeners listener names must be equal to or a subset of the \
                     ones defined in listeners. Found {}. The valid options based on the \
                     current configuration are {}",
                    a.name,
                    names.join(",")
                ),
            ));
        }
        if self.inter_broker_listener_name.is_some()
            && self.security_inter_broker_protocol.is_some()
        {
            return Err(invalid(
                "inter.broker.listener.name",
                &self.inter_broker_listener_name(),
                "Only one of inter.broker.listener.name and security.inter.broker.protocol \
                 should be set.",
            ));
        }
        let inter = self.inter_broker_listener_name();
        if !names.contains(&inter.as_str()) {
            return Err(invalid(
                "inter.broker.listener.name",
                &inter,
                format!(
                    "inter.broker.listener.name must be a listener name defined in \
                     advertised.listeners. The valid options based on currently configured \
                     listeners are {}",
                    names.join(",")
                ),
            ));
        }
        if self.inter_broker_protocol().uses_sasl() {
            let mechanism = self
                .security_properties
                .get("sasl.mechanism.inter.broker.protocol")
                .map_or("GSSAPI", String::as_str);
            if !INTER_BROKER_SASL_MECHANISMS.contains(&mechanism) {
                return Err(invalid(
                    "sasl.mechanism.inter.broker.protocol",
                    mechanism,
                    format!(
                        "the inter-broker listener {inter} uses SASL: Sluice's brokers \
                         authenticate to each other with {} only",
                        INTER_BROKER_SASL_MECHANISMS.join(", ")
                    ),
                ));
            }
        }
        self.check_controller_listener(&names)
    }

    /// `controller.listener.names` against the other listener keys: its first name has a
    /// protocol, `PLAINTEXT` or `SSL`, and is not one of `listeners` (the voters listen on
    /// their address of `controller.quorum.voters`).
    fn check_controller_listener(&self, names: &[&str]) -> Result<(), ConfigError> {
        let Some(name) = self.controller_listener_names.first() else {
            return Ok(());
        };
        let value = self.controller_listener_names.join(",");
        match self.listener_protocol(name) {
            None => {
                return Err(invalid(
                    "listener.security.protocol.map",
                    &render_protocol_map(&self.listener_security_protocol_map),
                    format!("No security protocol defined for listener {name}"),
                ))
            }
            Some(SecurityProtocol::Plaintext | SecurityProtocol::Ssl) => {}
            Some(p) => {
                return Err(invalid(
                    "controller.listener.names",
                    &value,
                    format!(
                        "controller listener {name} is {p}: Sluice's voters speak PLAINTEXT or \
                         SSL (no SASL between voters)"
                    ),
                ))
            }
        }
        // A controller-only node binds no Kafka listener: its `listeners` may name the
        // controller listener (where a joining controller listens, as Kafka's controllers).
        if names.contains(&name.as_str()) && self.process_roles != ProcessRoles::CONTROLLER {
            return Err(invalid(
                "controller.listener.names",
                &value,
                format!(
                    "{name} is also in listeners: Sluice's voters listen on their address in \
                     controller.quorum.voters, not on a Kafka listener; remove it from listeners"
                ),
            ));
        }
        Ok(())
    }
}

/// The SASL mechanisms a broker authenticates to other brokers with
/// (`sasl.mechanism.inter.broker.protocol`).
const INTER_BROKER_SASL_MECHANISMS: &[&str] = &["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"];

/// `listener.security.protocol.map` as Kafka writes it.
pub(super) fn render_protocol_map(map: &[(String, SecurityProtocol)]) -> String {
    map.iter()
        .map(|(n, p)| format!("{n}:{p}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// `process.roles`: which of Kafka's two roles a node plays (at least one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessRoles {
    /// Serves Kafka clients and hosts partitions.
    pub broker: bool,
    /// Votes in the controller quorum and may become the active controller.
    pub controller: bool,
}

impl ProcessRoles {
    /// `broker,controller` (the default).
    pub const COMBINED: ProcessRoles = ProcessRoles {
        broker: true,
        controller: true,
    };
    /// `controller`: a controller-only node.
    pub const CONTROLLER: ProcessRoles = ProcessRoles {
        broker: false,
        controller: true,
    };

    /// Parses Kafka's comma-separated list of `broker` and `controller`. Errors: Kafka's
    /// messages for an unknown role (an empty one included) and a duplicate
    /// (`KafkaConfig.parseProcessRoles`), and one for an empty list.
    pub fn parse(value: &str) -> Result<ProcessRoles, String> {
        let mut roles = ProcessRoles {
            broker: false,
            controller: false,
        };
        if value.trim().is_empty() {
            return Err("process.roles must contain broker, controller or both".into());
        }
        let listed: Vec<&str> = value.split(',').map(str::trim).collect();
        for role in &listed {
            let slot = match *role {
                "broker" => &mut roles.broker,
                "controller" => &mut roles.controller,
                other => {
                    return Err(format!(
                        "Unknown process role '{other}' (only 'broker' and 'controller' are \
                         allowed roles)"
                    ))
                }
            };
            if *slot {
                return Err(format!(
                    "Duplicate role names found in `process.roles`: {}",
                    listed.join(", ")
                ));
            }
            *slot = true;
        }
        if !roles.broker && !roles.controller {
            return Err("process.roles must contain broker, controller or both".into());
        }
        Ok(roles)
    }
}

impl std::fmt::Display for ProcessRoles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.broker, self.controller) {
            (true, true) => f.write_str("broker,controller"),
            (true, false) => f.write_str("broker"),
            _ => f.write_str("controller"),
        }
    }
}

/// One Kafka listener: its name, its address as given and as resolved for binding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listener {
    /// The listener name, upper case.
    pub name: String,
    /// The address as given (empty host: every interface).
    pub host_port: HostPort,
    /// The address to bind.
    pub addr: SocketAddr,
}

/// A listener as other brokers register it and Metadata lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdvertisedListener {
    /// The listener name, upper case.
    pub name: String,
    /// Host and port clients are told to connect to.
    pub host_port: HostPort,
    /// The listener's security protocol.
    pub security_protocol: SecurityProtocol,
}

impl BrokerConfig {
    /// The controller quorum's Raft tick, ms: `controller.quorum.election.timeout.ms` is
    /// counted in whole ticks of it (rounded down).
    pub const QUORUM_TICK_MS: u64 = 100;

    /// The controller quorum's Raft tick ([`BrokerConfig::QUORUM_TICK_MS`]).
    pub fn quorum_tick(&self) -> Duration {
        Duration::from_millis(Self::QUORUM_TICK_MS)
    }

    /// `controller.quorum.election.timeout.ms` in whole quorum ticks (at least 3).
    pub fn quorum_election_ticks(&self) -> usize {
        let ticks = self.controller_quorum_election_timeout_ms / Self::QUORUM_TICK_MS;
        usize::try_from(ticks).unwrap_or(usize::MAX)
    }

    /// Checks the quorum keys against each other, once every key is set: `node.id` is one
    /// of `controller.quorum.voters` (when any are configured) exactly when `process.roles`
    /// holds `controller`, a node that is not both has voters to follow, and
    /// `broker.heartbeat.interval.ms` is below `broker.session.timeout.ms` (else every
    /// broker would be fenced between two heartbeats).
    ///
    /// # Errors
    /// [`ConfigError::InvalidValue`] naming `controller.quorum.voters` or
    /// `broker.heartbeat.interval.ms`, with Kafka's reasons.
    pub fn check_quorum(&self) -> Result<(), ConfigError> {
        let voters = &self.controller_quorum_voters;
        let roles = self.process_roles;
        let bootstrap = &self.controller_quorum_bootstrap_servers;
        if !bootstrap.is_empty() {
            let value = super::voters::render_bootstrap_servers(bootstrap);
            let refuse =
                |why: String| Err(invalid("controller.quorum.bootstrap.servers", &value, why));
            if !voters.is_empty() {
                return refuse(
                    "set controller.quorum.voters (the voters a new quorum starts with) or \
                     controller.quorum.bootstrap.servers (a controller joining a running quorum), \
                     not both"
                        .into(),
                );
            }
            if roles != ProcessRoles::CONTROLLER {
                return refuse(format!(
                    "process.roles={roles}: Sluice follows controller.quorum.bootstrap.servers \
                     only on a controller joining a running quorum (process.roles=controller); \
                     brokers name controller.quorum.voters"
                ));
            }
            if self.voter_address().is_none() {
                return refuse(
                    "a joining controller listens on the listener that controller.listener.names \
                     names first: add it to listeners (for example \
                     controller.listener.names=CONTROLLER and listeners=CONTROLLER://127.0.0.1:9093)"
                        .into(),
                );
            }
            return Ok(());
        }
        if roles != ProcessRoles::COMBINED && voters.is_empty() {
            return Err(invalid(
                "controller.quorum.voters",
                "",
                format!(
                    "process.roles={roles} needs the controller quorum's voters: set \
                     controller.quorum.voters"
                ),
            ));
        }
        let voter = voters.iter().any(|v| v.id == self.node_id);
        if roles.controller && !voters.is_empty() && !voter {
            return Err(invalid(
                "controller.quorum.voters",
                &render_quorum_voters(voters),
                format!(
                    "node.id {} is not among the voters: if process.roles contains the \
                     'controller' role, the node id must be included in the set of voters",
                    self.node_id
                ),
            ));
        }
        if !roles.controller && voter {
            return Err(invalid(
                "controller.quorum.voters",
                &render_quorum_voters(voters),
                format!(
                    "if process.roles contains just the 'broker' role, the node id {} must \
                     not be included in the set of voters",
                    self.node_id
                ),
            ));
        }
        if self.broker_heartbeat_interval_ms >= self.broker_session_timeout_ms {
            return Err(invalid(
                "broker.heartbeat.interval.ms",
                &self.broker_heartbeat_interval_ms.to_string(),
                format!(
                    "must be below broker.session.timeout.ms ({})",
                    self.broker_session_timeout_ms
                ),
            ));
        }
        Ok(())
    }

    /// The most replicas an internal topic (`__consumer_offsets`, `__transaction_state`) is
    /// created with, whatever its replication-factor key says, in a cluster whose metadata
    /// lists `registered_brokers` brokers: the larger of that and the voters of
    /// `controller.quorum.voters` (at least one), so that a single node gets its internal
    /// topics with Kafka's default factor of 3, a cluster of combined nodes as many replicas as
    /// it has nodes even before all registered, and every node of a cluster computes the same
    /// (the topic still waits until that many brokers are active, as Kafka's).
    pub fn internal_topic_replicas_max(&self, registered_brokers: usize) -> usize {
        self.controller_quorum_voters
            .len()
            .max(registered_brokers)
            .max(1)
    }

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
            spin_before_park_us: o.and_then(|o| o.spin_before_park_us).unwrap_or(0),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::broker_keys::broker_key_names;
    use crate::config::cores::{parse_cores, render_cores};
    use crate::config::suggest::closest_key;
    use crate::config::topic::TimestampType;
    use std::path::PathBuf;

    #[test]
    fn inherit_and_reset() {
        let mut broker = BrokerConfig::default();
        broker.set("log.retention.ms", "1000").expect("valid");
        broker
            .set("log.cleaner.delete.retention.ms", "5")
            .expect("valid");
        let defaults = &broker.topic_defaults;
        let mut t = TopicConfig::inherit(defaults);
        assert_eq!(t.log.retention_ms, Some(Duration::from_millis(1000)));
        assert_eq!(t.get("delete.retention.ms").as_deref(), Some("5"));
        assert!(!t.is_set("retention.ms"));
        t.set("retention.ms", "5").expect("valid");
        t.set("delete.retention.ms", "7").expect("valid");
        assert!(t.is_set("retention.ms"));
        t.reset("retention.ms", defaults).expect("known key");
        t.reset("delete.retention.ms", defaults).expect("known key");
        assert_eq!(t.log.retention_ms, Some(Duration::from_millis(1000)));
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
        assert_eq!(t.log.segment_bytes, 1_048_576);
        assert_eq!(t.log.segment_ms, Duration::from_millis(2 * 3_600_000));
        assert_eq!(t.message_timestamp_type(), TimestampType::LogAppendTime);
        assert_eq!(t.log.flush_messages, 10);
        assert_eq!(t.log.flush_ms, Some(Duration::from_millis(100)));
        assert_eq!(t.log.index_interval_bytes, 8192);
        assert_eq!(t.log.retention_bytes, Some(12_345));
        assert_eq!(t.log.retention_ms, Some(Duration::from_millis(777)));

        b.set("message.max.bytes", "2000000").expect("valid");
        assert_eq!(b.message_max_bytes, 2_000_000);
        assert_eq!(b.topic_defaults.log.max_message_bytes, 2_000_000);

        // Errors about a topic default name the broker-level key the user wrote.
        let err = b.set("log.segment.bytes", "1").expect_err("below 1 MiB");
        assert_eq!(err.key(), Some("log.segment.bytes"));
    }

    #[test]
    fn retention_units_follow_kafka_precedence() {
        let mut b = BrokerConfig::default();
        b.set("log.retention.hours", "1").expect("valid");
        assert_eq!(
            b.topic_defaults.log.retention_ms,
            Some(Duration::from_millis(3_600_000))
        );
        b.set("log.retention.minutes", "2").expect("valid");
        assert_eq!(
            b.topic_defaults.log.retention_ms,
            Some(Duration::from_millis(120_000))
        );
        b.set("log.retention.hours", "5").expect("valid");
        assert_eq!(
            b.topic_defaults.log.retention_ms,
            Some(Duration::from_millis(120_000)),
            "minutes beat hours"
        );
        b.set("log.retention.ms", "10").expect("valid");
        b.set("log.retention.minutes", "5").expect("valid");
        assert_eq!(
            b.topic_defaults.log.retention_ms,
            Some(Duration::from_millis(10)),
            "ms beats minutes"
        );
        b.set("log.retention.hours", "-1")
            .expect("valid, but ms wins");
        assert_eq!(
            b.topic_defaults.log.retention_ms,
            Some(Duration::from_millis(10))
        );

        let mut b = BrokerConfig::default();
        b.set("log.retention.hours", "-1")
            .expect("negative = unlimited");
        assert_eq!(b.topic_defaults.log.retention_ms, None);
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
        assert_eq!(
            b.replica_high_watermark_checkpoint_interval(),
            Duration::from_secs(5),
            "Kafka's default"
        );
        b.set("replica.high.watermark.checkpoint.interval.ms", "250")
            .expect("valid");
        assert_eq!(
            b.replica_high_watermark_checkpoint_interval(),
            Duration::from_millis(250)
        );
        b.set("replica.high.watermark.checkpoint.interval.ms", "0")
            .expect_err("at least 1");
        assert_eq!(b.offsets_topic_replication_factor, 3, "Kafka's default");
        b.set("offsets.topic.replication.factor", "1")
            .expect("single node");
        assert_eq!(b.offsets_topic_replication_factor, 1);
        b.set("offsets.topic.replication.factor", "0")
            .expect_err("at least 1");
        assert_eq!(b.replica_lag_time_max_ms, 30_000, "Kafka's default");
        b.set("replica.lag.time.max.ms", "4000")
            .expect("replication is built");
        assert_eq!(b.replica_lag_time_max(), Duration::from_secs(4));
        assert!(
            b.entries()
                .contains(&("replica.lag.time.max.ms", "4000".to_owned())),
            "listed by DescribeConfigs"
        );
        b.set("replica.lag.time.max.ms", "0")
            .expect_err("at least 1");
        b.set("replica.lag.time.max.ms", "-1")
            .expect_err("not negative");
        assert_eq!(b.replica_lag_time_max_ms, 4000, "unchanged on error");
        for key in ["num.network.threads", "socket.send.buffer.bytes"] {
            let err = b
                .set(key, "1")
                .expect_err("Kafka key for what Sluice lacks");
            assert!(matches!(err, ConfigError::Unsupported { .. }), "{err}");
            assert_eq!(err.key(), Some(key));
        }
        // A controller joining a running quorum (KIP-853): bootstrap servers, no voters, its
        // controller listener among `listeners`; anything else is refused.
        let mut j = BrokerConfig::default();
        j.set("node.id", "7").expect("valid");
        j.set("process.roles", "controller").expect("valid");
        j.set(
            "controller.quorum.bootstrap.servers",
            "127.0.0.1:9093,127.0.0.1:9094",
        )
        .expect("valid");
        assert!(
            !j.joins_quorum() || j.check_quorum().is_err(),
            "no controller listener yet"
        );
        j.set(
            "listener.security.protocol.map",
            "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        )
        .expect("valid");
        j.set("controller.listener.names", "CONTROLLER")
            .expect("valid");
        j.set("listeners", "CONTROLLER://127.0.0.1:9097")
            .expect("valid");
        j.check_quorum().expect("a joining controller");
        assert!(j.joins_quorum());
        assert_eq!(
            j.voter_address(),
            Some("127.0.0.1:9097".parse().expect("an address"))
        );
        let mut both = j.clone();
        both.set("controller.quorum.voters", "1@127.0.0.1:9093")
            .expect("valid");
        let err = both
            .check_quorum()
            .expect_err("voters and bootstrap servers");
        assert!(err.to_string().contains("not both"), "{err}");
        let mut broker = j.clone();
        broker.set("process.roles", "broker").expect("valid");
        let err = broker
            .check_quorum()
            .expect_err("a broker with bootstrap servers");
        assert!(
            err.to_string().contains("only on a controller joining"),
            "{err}"
        );
        // A key Sluice accepts is never refused: the refused list is checked first.
        for (key, _) in crate::kafka_keys::UNSUPPORTED_BROKER_KEYS {
            assert!(
                !broker_key_names().contains(key),
                "{key} is both accepted and refused"
            );
        }
        b.set("transaction.state.log.replication.factor", "1")
            .expect("transactions are built");
        assert_eq!(b.transaction_state_log_replication_factor, 1);
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
        assert_eq!(
            b.listeners[0].addr,
            "127.0.0.1:19092".parse().expect("literal")
        );
        b.set("listeners", "PLAINTEXT://:9093")
            .expect("all interfaces");
        assert!(b.listeners[0].addr.ip().is_unspecified());
        assert_eq!(b.advertised_endpoints()[0].host_port.port, 9093);
        b.set("advertised.listeners", "kafka.example:9999")
            .expect("valid");
        assert_eq!(
            b.advertised_endpoints()[0].host_port.to_string(),
            "kafka.example:9999"
        );
        assert!(b.is_set("listeners"));
        assert!(!b.is_set("node.id") || b.node_id == 7);

        let err = b.set("auto.create.topic.enable", "true").expect_err("typo");
        assert!(
            err.to_string().contains("auto.create.topics.enable"),
            "{err}"
        );
        let entries = b.entries();
        assert!(entries.windows(2).all(|w| w[0].0 < w[1].0), "sorted");
        for key in ["log.cleaner.enable", "log.cleaner.threads"] {
            assert!(entries.iter().any(|(k, _)| *k == key), "{key} described");
        }
        assert!(entries
            .iter()
            .any(|(k, v)| *k == "num.partitions" && v == "3"));
    }

    #[test]
    fn cleaner_keys() {
        let mut b = BrokerConfig::default();
        assert_eq!(b.cleaner, CleanerConfig::default());
        let shown = |b: &BrokerConfig, key: &str| {
            b.entries()
                .into_iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| v)
        };
        // Kafka 4.4's defaults, as its DescribeConfigs lists them.
        for (key, value) in [
            ("log.cleaner.enable", "true"),
            ("log.cleaner.threads", "1"),
            ("log.cleaner.backoff.ms", "15000"),
            ("log.cleaner.dedupe.buffer.size", "134217728"),
            ("log.cleaner.io.buffer.size", "524288"),
            (
                "log.cleaner.io.max.bytes.per.second",
                "1.7976931348623157E308",
            ),
        ] {
            assert_eq!(shown(&b, key).as_deref(), Some(value), "{key}");
        }
        b.set("log.cleaner.enable", "false").expect("valid");
        b.set("log.cleaner.threads", "1").expect("one per shard");
        b.set("log.cleaner.backoff.ms", "0").expect("valid");
        b.set("log.cleaner.dedupe.buffer.size", "16777216")
            .expect("valid");
        b.set("log.cleaner.io.buffer.size", "65536").expect("valid");
        b.set("log.cleaner.io.max.bytes.per.second", "1000000")
            .expect("valid");
        assert_eq!(
            b.cleaner,
            CleanerConfig {
                enable: false,
                threads: 1,
                backoff: Duration::ZERO,
                dedupe_buffer_bytes: 16 << 20,
                io_buffer_bytes: 64 << 10,
                io_max_bytes_per_second: Some(1e6),
            }
        );
        assert_eq!(
            shown(&b, "log.cleaner.io.max.bytes.per.second").as_deref(),
            Some("1000000.0")
        );
        b.set(
            "log.cleaner.io.max.bytes.per.second",
            "1.7976931348623157E308",
        )
        .expect("Double.MAX");
        assert_eq!(b.cleaner.io_max_bytes_per_second, None);

        let before = b.cleaner;
        for (key, value) in [
            ("log.cleaner.threads", "-1"),
            ("log.cleaner.enable", "maybe"),
            ("log.cleaner.backoff.ms", "-1"),
            ("log.cleaner.dedupe.buffer.size", "-1"),
            ("log.cleaner.io.buffer.size", "-1"),
            ("log.cleaner.io.buffer.size", "2147483648"),
            ("log.cleaner.io.max.bytes.per.second", "0"),
            ("log.cleaner.io.max.bytes.per.second", "fast"),
        ] {
            let err = b.set(key, value).expect_err(&format!("{key}={value}"));
            assert!(
                matches!(&err, ConfigError::InvalidValue { key: k, .. } if k == key),
                "{err}"
            );
        }
        assert_eq!(b.cleaner, before, "unchanged on error");
        // Any count Kafka takes is taken (one cleaner runs per shard; 0 runs none).
        b.set("log.cleaner.threads", "4").expect("Kafka's range");
        assert_eq!(b.cleaner.threads, 4);
        b.set("log.cleaner.threads", "0").expect("Kafka's range");
        assert_eq!(b.cleaner.threads, 0);
    }

    #[test]
    fn leader_balance_keys_have_kafkas_defaults_and_ranges() {
        let mut b = BrokerConfig::default();
        assert!(b.auto_leader_rebalance_enable);
        assert_eq!(b.leader_imbalance_per_broker_percentage, 10);
        assert_eq!(b.leader_imbalance_check_interval_seconds, 300);
        b.set("auto.leader.rebalance.enable", "false")
            .expect("a boolean");
        assert!(!b.auto_leader_rebalance_enable);
        b.set("leader.imbalance.per.broker.percentage", "0")
            .expect("Kafka declares no range");
        assert_eq!(b.leader_imbalance_per_broker_percentage, 0);
        b.set("leader.imbalance.check.interval.seconds", "1")
            .expect("at least 1");
        assert_eq!(b.leader_imbalance_check_interval_seconds, 1);
        assert!(b
            .set("leader.imbalance.check.interval.seconds", "0")
            .is_err());
        assert!(b.set("auto.leader.rebalance.enable", "yes").is_err());
    }

    #[test]
    fn only_the_rack_aware_replica_selector_is_accepted() {
        let mut b = BrokerConfig::default();
        assert!(
            !b.rack_aware_replica_selector,
            "Kafka's default is no selector"
        );
        b.set(
            "replica.selector.class",
            "org.apache.kafka.common.replica.RackAwareReplicaSelector",
        )
        .expect("Kafka's rack-aware selector");
        assert!(b.rack_aware_replica_selector);
        let refused = b
            .set(
                "replica.selector.class",
                "com.example.NearestReplicaSelector",
            )
            .expect_err("Sluice has no other selector");
        assert!(
            refused.to_string().contains("RackAwareReplicaSelector"),
            "{refused}"
        );
        b.set("replica.selector.class", "").expect("back to none");
        assert!(!b.rack_aware_replica_selector);
    }

    #[test]
    fn quorum_keys() {
        let mut b = BrokerConfig::default();
        assert!(
            b.controller_quorum_voters.is_empty(),
            "one voter: this node"
        );
        assert_eq!(b.controller_quorum_election_timeout_ms, 1000);
        assert_eq!(b.quorum_election_ticks(), 10);
        assert_eq!(b.broker_heartbeat_interval_ms, 2000);
        assert_eq!(b.broker_session_timeout_ms, 9000);
        b.check_quorum().expect("defaults are consistent");

        b.set(
            "controller.quorum.voters",
            "1@127.0.0.1:9093,2@127.0.0.1:9094",
        )
        .expect("valid");
        assert_eq!(b.controller_quorum_voters.len(), 2);
        let err = b.check_quorum().expect_err("node.id 0 is no voter");
        assert_eq!(err.key(), Some("controller.quorum.voters"));
        assert!(err.to_string().contains("node.id 0"), "{err}");
        b.set("node.id", "2").expect("valid");
        b.check_quorum().expect("node 2 votes");
        let err = b
            .set(
                "controller.quorum.voters",
                "1@127.0.0.1:9093,1@127.0.0.1:9094",
            )
            .expect_err("duplicate id");
        assert_eq!(err.key(), Some("controller.quorum.voters"));
        assert_eq!(b.controller_quorum_voters.len(), 2, "unchanged on error");
        b.set("controller.quorum.voters", "1@127.0.0.1")
            .expect_err("malformed");
        let entries = b.entries();
        assert!(entries
            .iter()
            .any(|(k, v)| *k == "controller.quorum.voters"
                && v == "1@127.0.0.1:9093,2@127.0.0.1:9094"));

        // process.roles (KIP-631), Kafka's checks against the voters.
        assert_eq!(b.process_roles, ProcessRoles::COMBINED);
        assert!(entries
            .iter()
            .any(|(k, v)| *k == "process.roles" && v == "broker,controller"));
        b.set("process.roles", "broker").expect("valid");
        let err = b
            .check_quorum()
            .expect_err("a broker-only node 2 is a voter");
        assert!(err.to_string().contains("must not be included"), "{err}");
        b.set("node.id", "4").expect("valid");
        b.check_quorum().expect("broker 4 observes voters 1 and 2");
        b.set("process.roles", "controller").expect("valid");
        let err = b.check_quorum().expect_err("controller 4 is no voter");
        assert!(err.to_string().contains("must be included"), "{err}");
        b.set("node.id", "1").expect("valid");
        b.check_quorum().expect("controller 1 votes");
        assert_eq!(b.process_roles.to_string(), "controller");
        b.set("process.roles", " controller , broker")
            .expect("valid");
        assert_eq!(b.process_roles, ProcessRoles::COMBINED);
        for (bad, why) in [
            ("", "must contain"),
            ("broker,broker", "Duplicate role names"),
            ("observer", "Unknown process role 'observer'"),
            ("broker,,controller", "Unknown process role ''"),
        ] {
            let err = b.set("process.roles", bad).expect_err(bad);
            assert_eq!(err.key(), Some("process.roles"));
            assert!(err.to_string().contains(why), "{err}");
        }
        assert_eq!(
            b.process_roles,
            ProcessRoles::COMBINED,
            "unchanged on error"
        );
        let mut alone = BrokerConfig::default();
        alone.set("process.roles", "broker").expect("valid");
        let err = alone.check_quorum().expect_err("nothing to follow");
        assert_eq!(err.key(), Some("controller.quorum.voters"));
        b.set("node.id", "2").expect("valid");

        b.set("controller.quorum.election.timeout.ms", "350")
            .expect("valid");
        assert_eq!(b.quorum_election_ticks(), 3, "rounded down");
        b.set("controller.quorum.election.timeout.ms", "299")
            .expect_err("fewer than 3 ticks");
        b.set("controller.quorum.election.timeout.ms", "2000")
            .expect("valid");
        assert_eq!(b.quorum_election_ticks(), 20);

        b.set("broker.heartbeat.interval.ms", "0")
            .expect_err("at least 1");
        b.set("broker.session.timeout.ms", "1000").expect("valid");
        let err = b
            .check_quorum()
            .expect_err("heartbeat 2000 >= session 1000");
        assert_eq!(err.key(), Some("broker.heartbeat.interval.ms"));
        b.set("broker.heartbeat.interval.ms", "500").expect("valid");
        b.check_quorum().expect("consistent");

        // A topic config, and its broker-level default (Kafka's synonym of the same name).
        assert_eq!(
            b.topic_defaults
                .get("unclean.leader.election.enable")
                .as_deref(),
            Some("false")
        );
        b.set("unclean.leader.election.enable", "true")
            .expect("valid");
        assert_eq!(
            b.topic_defaults
                .get("unclean.leader.election.enable")
                .as_deref(),
            Some("true")
        );
        b.set("unclean.leader.election.enable", "maybe")
            .expect_err("a boolean");
        let mut t = TopicConfig::default();
        t.set("unclean.leader.election.enable", "true")
            .expect("a topic config");
        t.set("unclean.leader.election.enable", "1")
            .expect_err("a boolean");
    }

    #[test]
    fn advertised_defaults_to_listen() {
        let b = BrokerConfig::default();
        assert_eq!(
            b.advertised_endpoints()[0].host_port.to_string(),
            "127.0.0.1:9092"
        );
        let mut b = BrokerConfig::default();
        b.set("listeners", "[::1]:9000").expect("v6");
        assert_eq!(
            b.advertised_endpoints()[0].host_port.to_string(),
            "[::1]:9000"
        );
    }

    #[test]
    fn named_listeners_as_kafka() {
        let mut b = BrokerConfig::default();
        b.set_all([
            (
                "listeners",
                "INTERNAL://127.0.0.1:9092,EXTERNAL://127.0.0.1:9093",
            ),
            (
                "listener.security.protocol.map",
                "INTERNAL:PLAINTEXT,EXTERNAL:SSL",
            ),
            ("advertised.listeners", "EXTERNAL://kafka.example:19093"),
            ("inter.broker.listener.name", "internal"),
        ])
        .expect("valid");
        b.check_listeners().expect("consistent");
        let ads = b.advertised_endpoints();
        assert_eq!(ads[0].host_port.to_string(), "127.0.0.1:9092");
        assert_eq!(ads[1].host_port.to_string(), "kafka.example:19093");
        assert_eq!(ads[1].security_protocol, SecurityProtocol::Ssl);
        assert_eq!(b.inter_broker_listener_name(), "INTERNAL");

        let mut bad = b.clone();
        bad.set("listener.security.protocol.map", "INTERNAL:PLAINTEXT")
            .expect("parses");
        let err = bad.check_listeners().expect_err("EXTERNAL unmapped");
        assert!(
            err.to_string()
                .contains("No security protocol defined for listener EXTERNAL"),
            "{err}"
        );
        let mut bad = b.clone();
        bad.set("advertised.listeners", "OTHER://h:1")
            .expect("parses");
        let err = bad.check_listeners().expect_err("not a listener");
        assert!(
            err.to_string().contains("must be equal to or a subset"),
            "{err}"
        );
        let mut bad = b.clone();
        bad.set("inter.broker.listener.name", "EXTERNAL")
            .expect("parses");
        bad.check_listeners().expect("SSL between brokers");
        let mut sasl = BrokerConfig::default();
        sasl.set_all([
            ("listeners", "SASL_SSL://127.0.0.1:9093"),
            ("inter.broker.listener.name", "SASL_SSL"),
        ])
        .expect("parses");
        let err = sasl.check_listeners().expect_err("GSSAPI by default");
        assert!(
            err.to_string()
                .contains("sasl.mechanism.inter.broker.protocol"),
            "{err}"
        );
        sasl.set("sasl.mechanism.inter.broker.protocol", "PLAIN")
            .expect("parses");
        sasl.check_listeners().expect("PLAIN between brokers");
        sasl.set("controller.listener.names", "controller,other")
            .expect("parses");
        let err = sasl.check_listeners().expect_err("CONTROLLER unmapped");
        assert!(err.to_string().contains("listener CONTROLLER"), "{err}");
        sasl.set(
            "listener.security.protocol.map",
            "SASL_SSL:SASL_SSL,CONTROLLER:SSL",
        )
        .expect("parses");
        sasl.check_listeners().expect("an SSL controller listener");
        assert_eq!(
            sasl.controller_listener(),
            Some(("CONTROLLER", SecurityProtocol::Ssl))
        );
        sasl.set("controller.listener.names", "SASL_SSL")
            .expect("parses");
        let err = sasl.check_listeners().expect_err("no SASL between voters");
        assert!(err.to_string().contains("PLAINTEXT or SSL"), "{err}");
        let mut bad = b.clone();
        bad.set("security.inter.broker.protocol", "PLAINTEXT")
            .expect("parses");
        let err = bad.check_listeners().expect_err("both set");
        assert!(err.to_string().contains("Only one of"), "{err}");
        let mut bad = BrokerConfig::default();
        bad.set("listeners", "SSL://127.0.0.1:9093")
            .expect("parses");
        let err = bad
            .check_listeners()
            .expect_err("no PLAINTEXT listener between brokers");
        assert!(
            err.to_string()
                .contains("inter.broker.listener.name must be"),
            "{err}"
        );
        let mut bad = BrokerConfig::default();
        bad.set("listeners", "A://127.0.0.1:1,B://127.0.0.1:1")
            .expect("parses");
        bad.set("listener.security.protocol.map", "A:PLAINTEXT,B:PLAINTEXT")
            .expect("parses");
        bad.set("inter.broker.listener.name", "A").expect("parses");
        assert!(bad
            .check_listeners()
            .expect_err("one port")
            .to_string()
            .contains("different port"));
    }

    #[test]
    fn tls_keys_per_listener() {
        let mut b = BrokerConfig::default();
        b.set("ssl.client.auth", "required").expect("valid");
        b.set("listener.name.EXTERNAL.ssl.client.auth", "none")
            .expect("valid");
        b.set("ssl.client.auth", "always").expect_err("not a value");
        b.set("ssl.keystore.type", "JKS").expect_err("PEM only");
        b.set("ssl.enabled.protocols", "TLSv1.2,TLSv1.3")
            .expect("valid");
        b.set("ssl.enabled.protocols", "TLSv1.1").expect_err("old");
        assert_eq!(
            b.listener_property("EXTERNAL", "ssl.client.auth"),
            Some("none")
        );
        assert_eq!(
            b.listener_property("INTERNAL", "ssl.client.auth"),
            Some("required")
        );
        assert_eq!(
            b.listener_property("INTERNAL", "ssl.keystore.location"),
            None
        );
        b.set("listener.name.x.ssl.bogus", "1")
            .expect_err("unknown key");
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
    fn typos_suggest_broker_keys() {
        assert_eq!(
            closest_key("log.retension.ms", &broker_key_names()),
            Some("log.retention.ms")
        );
    }
}

#[cfg(test)]
#[cfg(test)]
mod shard_section_tests {
    use super::*;
    use crate::config::file::flatten_toml;
    use crate::config::shard::{parse_shard_sections, ShardOverride, TASK_QUEUE_SHARES_DEFAULT};
    use std::path::Path;

    fn parse(text: &str) -> Result<Vec<ShardOverride>, ConfigError> {
        parse_shard_sections(text, Path::new("sluice.toml"))
    }

    #[test]
    fn shard_sections_parse_and_apply_to_their_core() {
        let text = "num.partitions = 3\n[[shard]]\ncore = 1\nlisten = false\n\"batch.cache.bytes\" = 1048576\n\"produce.shares\" = 200\n\"spin.before.park.us\" = 500\n";
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
        assert_eq!(one.spin_before_park_us, 500);
        let zero = config.shard_settings(0);
        assert!(zero.listen);
        assert_eq!(zero.spin_before_park_us, 0, "no spin unless asked");
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
        let err = parse("[[shard]]\ncore = 0\n\"spin.before.park.us\" = 2000000\n")
            .expect_err("a spin longer than 1 s");
        assert!(
            err.to_string().contains("[[shard]] spin.before.park.us"),
            "{err}"
        );
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
