//! Command-line flags of `sluice` and start-up config loading.
//!
//! Precedence, lowest first: built-in defaults < the `--config` TOML file < `--set KEY=VALUE`
//! (in order given) < the dedicated flags (`--listen`, `--data-dir`, …). Every layer goes through
//! [`BrokerConfig::set`], so the same keys, ranges and error messages apply everywhere; an error
//! names the key (or flag) and the process should exit before binding anything.
//!
//! Runs once on the main thread before any executor starts: it reads the config file with
//! `std::fs` and resolves host names with the system resolver, both blocking.

use std::path::PathBuf;

use clap::Parser;

use tuning::config::{BrokerConfig, ConfigError};

const AFTER_HELP: &str = "\
CONFIG KEYS (for --config and --set; Kafka property names):
  Broker:
    listeners                     NAME://HOST:PORT,... (bare HOST:PORT = PLAINTEXT)
                                  [PLAINTEXT://127.0.0.1:9092]
    advertised.listeners          NAME://HOST:PORT,... clients of listener NAME are told
                                  [each listener's address]
    log.dirs, log.dir             data directory (one)                  [./data]
    node.id, broker.id            [0]
    auto.create.topics.enable     [true]
    num.partitions                partitions of new topics by default  [1]
    default.replication.factor    [1]
    socket.request.max.bytes      largest request frame                 [104857600]
    message.max.bytes             largest record batch; also the
                                  default of max.message.bytes          [1048588]
    sluice.admin.listen           admin HTTP HOST:PORT                  [127.0.0.1:9644]
    sluice.cores                  CPU list as --cores (taskset syntax)  [all CPUs]
    log.retention.check.interval.ms  how often retention runs, ms      [300000]
    replica.high.watermark.checkpoint.interval.ms  how often moved high
                                  watermarks are checkpointed, ms       [5000]
    offsets.topic.replication.factor  replicas of __consumer_offsets;
                                  at most the quorum's nodes           [3]
    broker.rack                   this broker's rack (replicas are placed
                                  rack by rack, KIP-36)                 [none]
    replica.selector.class        org.apache.kafka.common.replica.
                                  RackAwareReplicaSelector: consumers
                                  with client.rack read from their rack [none]
    replica.lag.time.max.ms       an ISR follower not caught up this long
                                  leaves the ISR, ms                    [30000]
  Security (docs/operations.md, Security; per listener: listener.name.<l>.KEY):
    listener.security.protocol.map  NAME:PLAINTEXT|SSL|SASL_PLAINTEXT|SASL_SSL,...
                                  [each protocol's name to itself]
    inter.broker.listener.name    listener other brokers connect to (TLS, SASL)
                                  [the one named after security.inter.broker.protocol]
    security.inter.broker.protocol  [PLAINTEXT]
    sasl.mechanism.inter.broker.protocol  PLAIN|SCRAM-SHA-256|SCRAM-SHA-512 [GSSAPI]
    controller.listener.names     the voters' listener: PLAINTEXT or SSL  [none]
    ssl.endpoint.identification.algorithm  https or empty (peers' host) [https]
    ssl.keystore.type, ssl.truststore.type  PEM only                    [PEM]
    ssl.keystore.location         PEM file: PKCS#8 key + certificate chain
    ssl.keystore.certificate.chain, ssl.keystore.key  the same inline (PEM)
    ssl.key.password              password of an encrypted PKCS#8 key
    ssl.truststore.location, ssl.truststore.certificates  PEM CA certificates
    ssl.client.auth               required|requested|none               [none]
    ssl.enabled.protocols         TLSv1.2,TLSv1.3                       [both]
    ssl.cipher.suites             IANA names                   [all of rustls's]
    ssl.principal.mapping.rules   RULE:pattern/replacement/[LU],...,DEFAULT [DEFAULT]
    sasl.enabled.mechanisms       PLAIN (others are refused to clients) [GSSAPI]
    listener.name.<l>.plain.sasl.jaas.config, sasl.jaas.config
                                  PlainLoginModule required user_NAME=\"PASSWORD\" ...;
    connection.failed.authentication.delay.ms                           [100]
  Controller quorum (KRaft's names):
    process.roles                 broker|controller|broker,controller   [broker,controller]
    controller.quorum.voters      ID@HOST:PORT,... ; names node.id exactly when it is a
                                  controller                  [empty: this node alone]
    controller.quorum.election.timeout.ms  at least 300                 [1000]
    broker.heartbeat.interval.ms  below broker.session.timeout.ms       [2000]
    broker.session.timeout.ms                                           [9000]
    group.initial.rebalance.delay.ms, group.min.session.timeout.ms,
    group.max.session.timeout.ms, offsets.topic.num.partitions,
    offsets.topic.segment.bytes, offsets.retention.minutes,
    offsets.retention.check.interval.ms  as in Kafka
    log.cleaner.enable                                                  [true]
    log.cleaner.threads           cleaners per shard: only 1            [1]
    log.cleaner.backoff.ms        sleep when nothing is cleanable, ms   [15000]
    log.cleaner.dedupe.buffer.size  offset map bytes, all shards        [134217728]
    log.cleaner.io.buffer.size    cleaner read/write buffer, bytes      [524288]
    log.cleaner.io.max.bytes.per.second  cleaner I/O cap per cleaner    [no limit]
    sluice.batch.cache.bytes      batch cache per shard, bytes          [67108864]
  Topic defaults (broker name, or the topic name itself); every Kafka 4.4 topic key is
  accepted, these are the ones Sluice acts on (docs/operations.md lists all):
    log.retention.ms (.minutes, .hours) = retention.ms   -1 = forever   [604800000]
    log.retention.bytes = retention.bytes                -1 = unlimited [-1]
    log.segment.bytes = segment.bytes                    2^20..2^31-1   [1073741824]
    log.roll.ms (.hours) = segment.ms                                   [604800000]
    log.cleanup.policy = cleanup.policy      delete, compact, both, or empty  [delete]
    log.message.timestamp.type = message.timestamp.type  CreateTime|LogAppendTime
    log.message.timestamp.before.max.ms = message.timestamp.before.max.ms  [no limit]
    log.message.timestamp.after.max.ms = message.timestamp.after.max.ms    [3600000]
    compression.type                  producer|uncompressed|gzip|snappy|lz4|zstd  [producer]
    message.max.bytes = max.message.bytes                               [1048588]
    log.flush.interval.messages = flush.messages                        [never]
    log.flush.interval.ms = flush.ms                                    [never]
    log.index.interval.bytes = index.interval.bytes                     [4096]
    min.insync.replicas       acks=all needs this many in-sync replicas [1]
  Kafka keys for what Sluice lacks (num.io.threads, num.network.threads, ...) stop start-up with
  the reason.

CONFIG FILE (TOML): flat quoted keys or nested tables, integer/boolean/string values:
    \"auto.create.topics.enable\" = false
    [log]
    retention.ms = 86400000
    segment.bytes = 268435456";

/// `sluice` command-line arguments. Derives [`clap::Parser`] (and so [`clap::Args`], for use as
/// a flattened group under a future subcommand).
/// Subcommands of `sluice`.
#[derive(Clone, Debug, clap::Subcommand)]
pub enum Command {
    /// Probe cores and the data disk (O_DIRECT writes/reads by block size and queue depth,
    /// fdatasync) within a time budget and write a commented config; `--check` only warns about
    /// settings that hurt latency (memlock, CPU governor, THP, disk scheduler, swap).
    Tune(tuning::TuneArgs),
}

#[derive(Clone, Debug, Default, Parser)]
#[command(
    name = "sluice",
    version,
    about = "Sluice: a Kafka-API-compatible broker, one shard per core",
    long_about = "Sluice: a Kafka-API-compatible broker, one shard per core.\n\n\
        With no arguments it serves Kafka on 127.0.0.1:9092 and admin HTTP on 127.0.0.1:9644, \
        keeps data in ./data and runs one shard on every CPU it may use.\n\n\
        Settings apply in this order, later winning: built-in defaults, the --config file, \
        --set KEY=VALUE (in order), then the dedicated flags. Unknown keys and bad values stop \
        start-up with a message naming the key.",
    after_help = AFTER_HELP
)]
pub struct Args {
    /// `sluice tune`: probe this machine's cores and data disk and write a tuned config.
    #[command(subcommand)]
    pub command: Option<Command>,

    /// One PLAINTEXT Kafka listener (replaces key `listeners`, which names several)
    /// [default: 127.0.0.1:9092]
    #[arg(long, value_name = "HOST:PORT")]
    pub listen: Option<String>,

    /// Address clients are told to connect to in Metadata: HOST:PORT for the PLAINTEXT
    /// listener, or NAME://HOST:PORT,... (key `advertised.listeners`)
    /// [default: each listen address; the host name if that is 0.0.0.0]
    #[arg(long, value_name = "HOST:PORT")]
    pub advertised_listener: Option<String>,

    /// Admin HTTP address: GET /health, GET /v1/status (key `sluice.admin.listen`)
    /// [default: 127.0.0.1:9644]
    #[arg(long, value_name = "HOST:PORT")]
    pub admin_listen: Option<String>,

    /// Data directory, created if missing and locked against a second broker (key `log.dirs`)
    /// [default: ./data]
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,

    /// CPUs to run shards on, one shard per CPU, as taskset lists them: 0 (CPU 0), 0-3, 0,2
    /// (key `sluice.cores`) [default: every CPU this process may use]
    #[arg(long, value_name = "LIST")]
    pub cores: Option<String>,

    /// Number of shards: the first N of the --cores CPUs (or of the CPUs this process may use)
    #[arg(long, value_name = "N")]
    pub smp: Option<usize>,

    /// TOML file of config keys (Kafka property names); see CONFIG FILE below
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Set any broker or default-topic property, e.g. --set auto.create.topics.enable=false;
    /// repeatable, later wins
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

/// Builds the broker config from `args`: defaults < `--config` file < `--set` < flags.
///
/// # Errors
/// [`ConfigError::ReadFile`] / [`ConfigError::ParseFile`] for the config file,
/// [`ConfigError::InFile`] wrapping the first bad key in it, [`ConfigError::BadSetArgument`]
/// for a `--set` without `=`, and [`ConfigError::UnknownKey`] / [`ConfigError::InvalidValue`]
/// naming the key, or the flag (e.g. `--listen`) for a bad flag value.
pub fn load(args: Args) -> Result<BrokerConfig, ConfigError> {
    let mut config = BrokerConfig::default();

    if let Some(path) = &args.config {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::ReadFile {
            path: path.clone(),
            source,
        })?;
        config.apply_toml(&text, path)?;
    }

    for arg in &args.set {
        let (key, value) = split_set_arg(arg)?;
        config.set(key, value)?;
    }

    let flags = [
        ("--listen", "listeners", args.listen.as_deref()),
        (
            "--advertised-listener",
            "advertised.listeners",
            args.advertised_listener.as_deref(),
        ),
        (
            "--admin-listen",
            "sluice.admin.listen",
            args.admin_listen.as_deref(),
        ),
        ("--cores", "sluice.cores", args.cores.as_deref()),
    ];
    for (flag, key, value) in flags {
        if let Some(value) = value {
            config.set(key, value).map_err(|e| e.with_key(flag))?;
        }
    }
    if let Some(path) = args.data_dir {
        // Set the path directly: a directory name may contain a comma, which the Kafka key
        // `log.dirs` (a list) rejects.
        if path.as_os_str().is_empty() {
            return Err(ConfigError::InvalidValue {
                key: "--data-dir".to_owned(),
                value: String::new(),
                why: "must not be empty".to_owned(),
            });
        }
        config.data_dir = path;
    }
    if let Some(n) = args.smp {
        if n == 0 || n > config.cores.len() {
            return Err(ConfigError::InvalidValue {
                key: "--smp".to_owned(),
                value: n.to_string(),
                why: format!(
                    "must be between 1 and the {} CPUs of --cores or the affinity mask",
                    config.cores.len()
                ),
            });
        }
        config.cores.truncate(n);
    }
    config.check_shard_overrides()?;
    config.check_quorum()?;
    if config.process_roles.broker {
        // A controller-only node binds no Kafka listener (its voter address is its listener).
        config.check_listeners()?;
    }
    Ok(config)
}

/// Splits a `--set` argument at its first `=`; the key is trimmed, the value kept as is.
fn split_set_arg(arg: &str) -> Result<(&str, &str), ConfigError> {
    match arg.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => Ok((key.trim(), value)),
        _ => Err(ConfigError::BadSetArgument {
            arg: arg.to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use std::io::Write;

    fn args(argv: &[&str]) -> Args {
        let mut full = vec!["sluice"];
        full.extend_from_slice(argv);
        Args::try_parse_from(full).expect("arguments parse")
    }

    #[test]
    fn clap_definition_is_valid() {
        Args::command().debug_assert();
    }

    #[test]
    fn no_arguments_gives_defaults() {
        let c = load(args(&[])).expect("defaults load");
        assert_eq!(c.listeners[0].addr.to_string(), "127.0.0.1:9092");
        assert_eq!(c.admin_listen.to_string(), "127.0.0.1:9644");
        assert_eq!(c.data_dir, PathBuf::from("./data"));
        assert!(!c.cores.is_empty());
        assert!(c.auto_create_topics_enable);
    }

    #[test]
    fn layers_apply_in_order() {
        let mut file = tempfile::NamedTempFile::new().expect("temp file");
        writeln!(
            file,
            "\"num.partitions\" = 3\nlisteners = \"127.0.0.1:1000\"\n[log]\nretention.ms = 5\n\
             [auto.create.topics]\nenable = false"
        )
        .expect("write");
        let path = file.path().to_str().expect("utf-8 temp path");
        let c = load(args(&[
            "--config",
            path,
            "--set",
            "num.partitions=4",
            "--set",
            "listeners=127.0.0.1:2000",
            "--listen",
            "127.0.0.1:3000",
            "--data-dir",
            "/tmp/sluice-x",
            "--cores",
            "0",
        ]))
        .expect("valid");
        assert_eq!(c.num_partitions, 4, "--set beats the file");
        assert_eq!(c.listeners[0].addr.port(), 3000, "the flag beats --set");
        assert_eq!(
            c.topic_defaults.log.retention_ms,
            Some(std::time::Duration::from_millis(5)),
            "nested table key"
        );
        assert!(!c.auto_create_topics_enable);
        assert_eq!(c.data_dir, PathBuf::from("/tmp/sluice-x"));
        assert_eq!(c.cores, vec![0]);
        assert_eq!(
            c.advertised_endpoints()[0].host_port.to_string(),
            "127.0.0.1:3000"
        );
    }

    #[test]
    fn errors_name_the_key_or_flag() {
        let err = load(args(&["--set", "auto.create.topics.enabled=false"])).expect_err("typo");
        let msg = err.to_string();
        assert!(msg.contains("auto.create.topics.enabled"), "{msg}");
        assert!(
            msg.contains("did you mean `auto.create.topics.enable`"),
            "{msg}"
        );

        let err = load(args(&["--set", "num.partitions"])).expect_err("no =");
        assert!(matches!(err, ConfigError::BadSetArgument { .. }), "{err}");

        let err = load(args(&["--listen", "nonsense"])).expect_err("bad flag");
        assert_eq!(err.key(), Some("--listen"), "{err}");
        let c = load(args(&["--cores", "0"])).expect("CPU 0");
        assert_eq!(c.cores, vec![0]);
        let err = load(args(&["--cores", ""])).expect_err("no CPU");
        assert!(err.to_string().contains("--cores"), "{err}");
        let c = load(args(&["--smp", "1"])).expect("one shard");
        assert_eq!(c.cores.len(), 1);
        let err = load(args(&["--smp", "0"])).expect_err("no shard");
        assert_eq!(err.key(), Some("--smp"), "{err}");
        let err = load(args(&[
            "--set",
            "controller.quorum.voters=1@127.0.0.1:9093",
        ]))
        .expect_err("node.id 0 is not a voter");
        assert_eq!(err.key(), Some("controller.quorum.voters"), "{err}");
        let c = load(args(&[
            "--set",
            "node.id=1",
            "--set",
            "controller.quorum.voters=1@127.0.0.1:9093",
        ]))
        .expect("node 1 votes");
        assert_eq!(c.controller_quorum_voters.len(), 1);
        let err = load(args(&["--set", "num.io.threads=8"])).expect_err("thread-per-core");
        assert!(err.to_string().contains("thread-per-core"), "{err}");
        let c = load(args(&["--set", "log.retention.check.interval.ms=1000"])).expect("Kafka key");
        assert_eq!(
            c.log_retention_check_interval(),
            std::time::Duration::from_secs(1)
        );

        let mut file = tempfile::NamedTempFile::new().expect("temp file");
        writeln!(file, "[log]\nsegment.bytes = 3").expect("write");
        let path = file.path().to_str().expect("utf-8 temp path");
        let err = load(args(&["--config", path])).expect_err("below minimum");
        let msg = err.to_string();
        assert!(
            msg.contains("log.segment.bytes") && msg.contains(path),
            "{msg}"
        );
        assert_eq!(err.key(), Some("log.segment.bytes"));

        let err = load(args(&["--config", "/nonexistent/sluice.toml"])).expect_err("no file");
        assert!(matches!(err, ConfigError::ReadFile { .. }), "{err}");
    }

    #[test]
    fn help_example_file_loads() {
        let (_, example) = AFTER_HELP
            .split_once("values:\n")
            .expect("help has a CONFIG FILE example");
        let mut file = tempfile::NamedTempFile::new().expect("temp file");
        file.write_all(example.as_bytes()).expect("write");
        let path = file.path().to_str().expect("utf-8 temp path");
        let c = load(args(&["--config", path])).expect("the documented example is valid");
        assert!(!c.auto_create_topics_enable);
        assert_eq!(
            c.topic_defaults.log.retention_ms,
            Some(std::time::Duration::from_millis(86_400_000))
        );
    }

    #[test]
    fn set_value_may_contain_equals() {
        assert_eq!(split_set_arg("a=b=c").ok(), Some(("a", "b=c")));
        assert!(split_set_arg("=1").is_err());
    }
}
