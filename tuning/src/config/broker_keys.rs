//! The broker-level keys of [`BrokerConfig`] other than the topic defaults, as one table
//! ([`BROKER_KEYS`]): each key's name, how [`BrokerConfig::set`] applies a value, and how
//! [`BrokerConfig::entries`] reports it. Adding a key is one row here (and its field).
//!
//! Each setter gets the key as given, the value as given (for error messages) and the value
//! trimmed; on error it changes nothing.

use super::broker::{render_protocol_map, BrokerConfig, Listener, ProcessRoles};
use super::cores::{available_cores, parse_cores, render_cores};
use super::error::{invalid, unknown, ConfigError};
use super::listener::{
    parse_endpoints, parse_listen_addr, parse_protocol_map, resolve, SecurityProtocol,
};
use super::topic::SEGMENT_BYTES_MIN;
use super::value::{parse_bool, parse_ranged, parse_unsigned, render_double};
use super::voters::{
    parse_bootstrap_servers, parse_quorum_voters, render_bootstrap_servers, render_quorum_voters,
};
use crate::kafka_keys::{
    topic_key, topic_key_for_broker_synonym, unsupported_broker_key, TOPIC_KEYS,
};
use std::path::PathBuf;
use std::time::Duration;

/// Applies a value to one key: `(config, key, value as given, value trimmed)`. Errors:
/// [`ConfigError::InvalidValue`] naming the key.
pub(super) type SetKey = fn(&mut BrokerConfig, &str, &str, &str) -> Result<(), ConfigError>;

/// The value of one key as DescribeConfigs lists it.
pub(super) type ShowKey = fn(&BrokerConfig) -> String;

/// One broker-level key.
pub(super) struct BrokerKey {
    /// Kafka's name (or a `sluice.*` name).
    pub(super) name: &'static str,
    /// Parses and applies a value.
    pub(super) set: SetKey,
    /// Its value in [`BrokerConfig::entries`]; `None`: not listed there (an alias listed
    /// under its canonical name, or a key Sluice does not report).
    pub(super) show: Option<ShowKey>,
}

/// `n` as an `i32`, or "too large".
fn to_i32(key: &str, value: &str, n: i64) -> Result<i32, ConfigError> {
    i32::try_from(n).map_err(|_| invalid(key, value, "too large"))
}

/// `n` as an `i16`, or "too large".
fn to_i16(key: &str, value: &str, n: i64) -> Result<i16, ConfigError> {
    i16::try_from(n).map_err(|_| invalid(key, value, "too large"))
}

/// `n` as a `usize`, or "too large".
fn to_usize(key: &str, value: &str, n: u64) -> Result<usize, ConfigError> {
    usize::try_from(n).map_err(|_| invalid(key, value, "too large"))
}

/// `listeners`: every entry resolved for binding (a bare `HOST:PORT` is `PLAINTEXT`).
fn set_listeners(c: &mut BrokerConfig, key: &str, value: &str, v: &str) -> Result<(), ConfigError> {
    let endpoints = parse_endpoints(v).map_err(|why| invalid(key, value, why))?;
    let mut listeners = Vec::with_capacity(endpoints.len());
    for e in endpoints {
        let addr = resolve(&e.host_port).map_err(|why| invalid(key, value, why))?;
        listeners.push(Listener {
            name: e.name,
            host_port: e.host_port,
            addr,
        });
    }
    c.listeners = listeners;
    Ok(())
}

fn set_advertised_listeners(
    c: &mut BrokerConfig,
    key: &str,
    value: &str,
    v: &str,
) -> Result<(), ConfigError> {
    let endpoints = parse_endpoints(v).map_err(|why| invalid(key, value, why))?;
    if endpoints.iter().any(|e| e.host_port.host.is_empty()) {
        return Err(invalid(key, value, "the advertised host must not be empty"));
    }
    if endpoints.iter().any(|e| e.host_port.port == 0) {
        return Err(invalid(key, value, "the advertised port must not be 0"));
    }
    c.advertised_listeners = endpoints;
    Ok(())
}

/// `listeners` as Kafka writes it.
fn show_listeners(c: &BrokerConfig) -> String {
    c.listeners
        .iter()
        .map(|l| format!("{}://{}", l.name, l.host_port))
        .collect::<Vec<_>>()
        .join(",")
}

/// `advertised.listeners` as Kafka writes it: each listener's advertised endpoint.
fn show_advertised_listeners(c: &BrokerConfig) -> String {
    c.advertised_endpoints()
        .iter()
        .map(|a| format!("{}://{}", a.name, a.host_port))
        .collect::<Vec<_>>()
        .join(",")
}

/// The TLS keys Sluice reads (Kafka's `SslConfigs`), at broker level or under
/// `listener.name.<listener>.`.
pub const SSL_KEYS: &[&str] = &[
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.key.password",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.certificates",
    "ssl.enabled.protocols",
    "ssl.protocol",
    "ssl.cipher.suites",
    "ssl.client.auth",
    "ssl.principal.mapping.rules",
    "ssl.endpoint.identification.algorithm",
];

/// The SASL keys Sluice reads (Kafka's `BrokerSecurityConfigs` and `SaslConfigs`), at broker
/// level or under `listener.name.<listener>.`; those of [`SASL_MECHANISM_KEYS`] also as
/// `listener.name.<listener>.<mechanism>.<key>`.
pub const SASL_KEYS: &[&str] = &[
    "sasl.enabled.mechanisms",
    "sasl.jaas.config",
    "sasl.mechanism.inter.broker.protocol",
    "sasl.server.callback.handler.class",
    "connections.max.reauth.ms",
    "sasl.oauthbearer.jwks.endpoint.url",
    "sasl.oauthbearer.jwks.endpoint.refresh.ms",
    "sasl.oauthbearer.expected.audience",
    "sasl.oauthbearer.expected.issuer",
    "sasl.oauthbearer.sub.claim.name",
    "sasl.oauthbearer.scope.claim.name",
    "sasl.oauthbearer.clock.skew.seconds",
];

/// The SASL keys Kafka also reads per mechanism, as
/// `listener.name.<listener>.<mechanism>.<key>` (`ListenerName.saslMechanismConfigPrefix`).
pub const SASL_MECHANISM_KEYS: &[&str] = &[
    "sasl.jaas.config",
    "sasl.server.callback.handler.class",
    "connections.max.reauth.ms",
];

/// The TLS or SASL key `key` names (itself, or the part after `listener.name.<listener>.`,
/// a per-mechanism key as `<mechanism>.<key>`), if it is one of [`SSL_KEYS`] or
/// [`SASL_KEYS`].
fn security_key(key: &str) -> Option<String> {
    let base = match key.strip_prefix("listener.name.") {
        Some(rest) => rest.split_once('.').map(|(_, k)| k)?,
        None => key,
    };
    for suffix in SASL_MECHANISM_KEYS {
        let Some(mechanism) = base.strip_suffix(suffix).and_then(|m| m.strip_suffix('.')) else {
            continue;
        };
        if mechanism.is_empty() {
            continue;
        }
        let valid = key.starts_with("listener.name.")
            && mechanism
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        return valid.then(|| format!("{}.{suffix}", mechanism.to_ascii_lowercase()));
    }
    SSL_KEYS
        .iter()
        .chain(SASL_KEYS)
        .copied()
        .find(|k| *k == base)
        .map(str::to_owned)
}

/// Checks the value of TLS key `base` (the values Kafka enumerates) and stores it under `key`.
fn set_security_key(
    c: &mut BrokerConfig,
    key: &str,
    base: &str,
    value: &str,
) -> Result<(), ConfigError> {
    let v = value.trim();
    match base {
        "ssl.keystore.type" | "ssl.truststore.type" if !v.eq_ignore_ascii_case("PEM") => {
            return Err(invalid(
                key,
                value,
                "Sluice reads PEM keys and certificates only (ssl.keystore.type=PEM); convert \
                 a JKS or PKCS12 store to PEM",
            ));
        }
        "ssl.client.auth" if !matches!(v, "required" | "requested" | "none") => {
            return Err(invalid(
                key,
                value,
                "Invalid value: must be one of required, requested, none",
            ));
        }
        "sasl.enabled.mechanisms" if v.split(',').all(|m| m.trim().is_empty()) => {
            return Err(invalid(key, value, "name at least one mechanism"));
        }
        b if (b.ends_with("connections.max.reauth.ms")
            || b == "sasl.oauthbearer.jwks.endpoint.refresh.ms"
            || b == "sasl.oauthbearer.clock.skew.seconds")
            && v.parse::<u64>().is_err() =>
        {
            return Err(invalid(key, value, "expected a non-negative integer"));
        }
        "ssl.enabled.protocols" => {
            if let Some(p) = v
                .split(',')
                .map(str::trim)
                .find(|p| !matches!(*p, "TLSv1.2" | "TLSv1.3"))
            {
                return Err(invalid(
                    key,
                    value,
                    format!("protocol {p} is not supported: TLSv1.2 and TLSv1.3 only"),
                ));
            }
        }
        _ => {}
    }
    if let Some(rest) = key.strip_prefix("listener.name.") {
        // Kafka's listener prefix is lower case.
        let (listener, _) = rest.split_once('.').unwrap_or((rest, ""));
        let normalised = format!("listener.name.{}.{base}", listener.to_ascii_lowercase());
        c.security_properties.insert(normalised, v.to_owned());
    } else {
        c.security_properties.insert(base.to_owned(), v.to_owned());
    }
    Ok(())
}

fn set_data_dir(c: &mut BrokerConfig, key: &str, value: &str, v: &str) -> Result<(), ConfigError> {
    if v.is_empty() {
        return Err(invalid(key, value, "must not be empty"));
    }
    if v.contains(',') {
        return Err(invalid(key, value, "only one data directory is supported"));
    }
    c.data_dir = PathBuf::from(v);
    Ok(())
}

fn set_cores(c: &mut BrokerConfig, key: &str, value: &str, v: &str) -> Result<(), ConfigError> {
    let cores = parse_cores(v).map_err(|why| invalid(key, value, why))?;
    let available = available_cores();
    if let Some(core) = cores.iter().find(|core| !available.contains(core)) {
        return Err(invalid(
            key,
            value,
            format!(
                "CPU {core} is not available to this process (available: {})",
                render_cores(&available)
            ),
        ));
    }
    c.cores = cores;
    Ok(())
}

fn set_node_id(c: &mut BrokerConfig, key: &str, value: &str, _: &str) -> Result<(), ConfigError> {
    let n = parse_ranged(key, value, 0, i64::from(i32::MAX))?;
    c.node_id = to_i32(key, value, n)?;
    Ok(())
}

/// Which of the three group timing keys a value is for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum GroupMs {
    InitialRebalanceDelay,
    MinSessionTimeout,
    MaxSessionTimeout,
}

/// One of `group.{initial.rebalance.delay,min.session.timeout,max.session.timeout}.ms`: at
/// most `i32::MAX` ms, and the minimum session timeout never above the maximum.
fn set_group_ms(
    c: &mut BrokerConfig,
    which: GroupMs,
    key: &str,
    value: &str,
) -> Result<(), ConfigError> {
    let n = parse_ranged(key, value, 0, i64::from(i32::MAX))?;
    let n = to_i32(key, value, n)?;
    let (min, max) = match which {
        GroupMs::MinSessionTimeout => (n, c.group_max_session_timeout_ms),
        GroupMs::MaxSessionTimeout => (c.group_min_session_timeout_ms, n),
        GroupMs::InitialRebalanceDelay => (0, i32::MAX),
    };
    if min > max {
        return Err(invalid(
            key,
            value,
            "group.min.session.timeout.ms must not exceed group.max.session.timeout.ms",
        ));
    }
    match which {
        GroupMs::MinSessionTimeout => c.group_min_session_timeout_ms = n,
        GroupMs::MaxSessionTimeout => c.group_max_session_timeout_ms = n,
        GroupMs::InitialRebalanceDelay => c.group_initial_rebalance_delay_ms = n,
    }
    Ok(())
}

/// Kafka's `Double.MAX_VALUE` as its DescribeConfigs writes it: the default of
/// `log.cleaner.io.max.bytes.per.second`, no limit.
const DOUBLE_MAX: &str = "1.7976931348623157E308";

/// `log.cleaner.io.max.bytes.per.second`: a positive rate; Double.MAX (or more) is no limit.
fn set_cleaner_io_max(
    c: &mut BrokerConfig,
    key: &str,
    value: &str,
    v: &str,
) -> Result<(), ConfigError> {
    let rate: f64 = v.parse().map_err(|_| invalid(key, value, "not a number"))?;
    if rate.is_nan() || rate <= 0.0 {
        return Err(invalid(
            key,
            value,
            "must be a positive number of bytes per second",
        ));
    }
    c.cleaner.io_max_bytes_per_second = (rate < f64::MAX).then_some(rate);
    Ok(())
}

/// Every broker-level key other than the topic-default ones, for [`BrokerConfig::set`],
/// [`BrokerConfig::entries`], lookups and suggestions.
pub(super) const BROKER_KEYS: &[BrokerKey] = &[
    BrokerKey {
        name: "listeners",
        set: set_listeners,
        show: Some(show_listeners),
    },
    BrokerKey {
        name: "advertised.listeners",
        set: set_advertised_listeners,
        show: Some(show_advertised_listeners),
    },
    BrokerKey {
        name: "listener.security.protocol.map",
        set: |c, key, value, v| {
            c.listener_security_protocol_map =
                parse_protocol_map(v).map_err(|why| invalid(key, value, why))?;
            Ok(())
        },
        show: Some(|c| render_protocol_map(&c.listener_security_protocol_map)),
    },
    BrokerKey {
        name: "inter.broker.listener.name",
        set: |c, key, value, v| {
            if v.is_empty() {
                return Err(invalid(key, value, "must not be empty"));
            }
            c.inter_broker_listener_name = Some(v.to_ascii_uppercase());
            Ok(())
        },
        show: Some(BrokerConfig::inter_broker_listener_name),
    },
    BrokerKey {
        name: "controller.listener.names",
        set: |c, key, value, v| {
            let names: Vec<String> = v
                .split(',')
                .map(|n| n.trim().to_ascii_uppercase())
                .filter(|n| !n.is_empty())
                .collect();
            if names.is_empty() {
                return Err(invalid(key, value, "name at least one listener"));
            }
            c.controller_listener_names = names;
            Ok(())
        },
        show: Some(|c| c.controller_listener_names.join(",")),
    },
    BrokerKey {
        name: "security.inter.broker.protocol",
        set: |c, key, value, v| {
            let p = SecurityProtocol::from_name(v).ok_or_else(|| {
                invalid(
                    key,
                    value,
                    "must be one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL",
                )
            })?;
            c.security_inter_broker_protocol = Some(p);
            Ok(())
        },
        show: Some(|c| {
            c.security_inter_broker_protocol
                .unwrap_or(SecurityProtocol::Plaintext)
                .name()
                .to_owned()
        }),
    },
    BrokerKey {
        name: "sluice.admin.listen",
        set: |c, key, value, v| {
            c.admin_listen = parse_listen_addr(v).map_err(|why| invalid(key, value, why))?;
            Ok(())
        },
        show: Some(|c| c.admin_listen.to_string()),
    },
    BrokerKey {
        name: "log.dirs",
        set: set_data_dir,
        show: Some(|c| c.data_dir.display().to_string()),
    },
    BrokerKey {
        name: "log.dir",
        set: set_data_dir,
        show: None,
    },
    BrokerKey {
        name: "sluice.cores",
        set: set_cores,
        show: Some(|c| render_cores(&c.cores)),
    },
    BrokerKey {
        name: "node.id",
        set: set_node_id,
        show: Some(|c| c.node_id.to_string()),
    },
    BrokerKey {
        name: "broker.id",
        set: set_node_id,
        show: None,
    },
    BrokerKey {
        name: "auto.create.topics.enable",
        set: |c, key, value, _| {
            c.auto_create_topics_enable = parse_bool(key, value)?;
            Ok(())
        },
        show: Some(|c| c.auto_create_topics_enable.to_string()),
    },
    BrokerKey {
        name: "num.partitions",
        set: |c, key, value, _| {
            let n = parse_ranged(key, value, 1, i64::from(i32::MAX))?;
            c.num_partitions = to_i32(key, value, n)?;
            Ok(())
        },
        show: Some(|c| c.num_partitions.to_string()),
    },
    BrokerKey {
        name: "default.replication.factor",
        set: |c, key, value, _| {
            let n = parse_ranged(key, value, 1, i64::from(i16::MAX))?;
            c.default_replication_factor = to_i16(key, value, n)?;
            Ok(())
        },
        show: Some(|c| c.default_replication_factor.to_string()),
    },
    BrokerKey {
        name: "socket.request.max.bytes",
        set: |c, key, value, _| {
            let n = parse_unsigned(key, value, 1, i64::from(i32::MAX))?;
            c.socket_request_max_bytes = to_usize(key, value, n)?;
            Ok(())
        },
        show: Some(|c| c.socket_request_max_bytes.to_string()),
    },
    BrokerKey {
        name: "sluice.batch.cache.bytes",
        set: |c, key, value, _| {
            let n = parse_unsigned(key, value, 0, i64::MAX)?;
            c.batch_cache_bytes = to_usize(key, value, n)?;
            Ok(())
        },
        show: Some(|c| c.batch_cache_bytes.to_string()),
    },
    BrokerKey {
        name: "offsets.topic.num.partitions",
        set: |c, key, value, _| {
            let n = parse_ranged(key, value, 1, 10_000)?;
            c.offsets_topic_num_partitions = to_i32(key, value, n)?;
            Ok(())
        },
        show: None,
    },
    BrokerKey {
        name: "transaction.state.log.num.partitions",
        set: |c, key, value, _| {
            let n = parse_ranged(key, value, 1, 10_000)?;
            c.transaction_state_log_num_partitions = to_i32(key, value, n)?;
            Ok(())
        },
        show: None,
    },
    BrokerKey {
        name: "transaction.state.log.replication.factor",
        set: |c, key, value, _| {
            let n = parse_ranged(key, value, 1, i64::from(i16::MAX))?;
            c.transaction_state_log_replication_factor = to_i16(key, value, n)?;
            Ok(())
        },
        show: Some(|c| c.transaction_state_log_replication_factor.to_string()),
    },
    BrokerKey {
        name: "transaction.state.log.min.isr",
        set: |c, key, value, _| {
            let n = parse_ranged(key, value, 1, i64::from(i32::MAX))?;
            c.transaction_state_log_min_isr = to_i32(key, value, n)?;
            Ok(())
        },
        show: Some(|c| c.transaction_state_log_min_isr.to_string()),
    },
    BrokerKey {
        name: "transaction.state.log.segment.bytes",
        set: |c, key, value, _| {
            c.transaction_state_log_segment_bytes =
                parse_unsigned(key, value, SEGMENT_BYTES_MIN, i64::from(i32::MAX))?;
            Ok(())
        },
        show: None,
    },
    BrokerKey {
        name: "transaction.max.timeout.ms",
        set: |c, key, value, _| {
            let n = parse_ranged(key, value, 1, i64::from(i32::MAX))?;
            c.transaction_max_timeout_ms = to_i32(key, value, n)?;
            Ok(())
        },
        show: Some(|c| c.transaction_max_timeout_ms.to_string()),
    },
    BrokerKey {
        name: "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        set: |c, key, value, _| {
            c.transaction_abort_timed_out_transaction_cleanup_interval_ms =
                parse_unsigned(key, value, 1, i64::from(i32::MAX))?;
            Ok(())
        },
        show: Some(|c| {
            c.transaction_abort_timed_out_transaction_cleanup_interval_ms
                .to_string()
        }),
    },
    BrokerKey {
        name: "transaction.remove.expired.transaction.cleanup.interval.ms",
        set: |c, key, value, _| {
            c.transaction_remove_expired_transaction_cleanup_interval_ms =
                parse_unsigned(key, value, 1, i64::from(i32::MAX))?;
            Ok(())
        },
        show: Some(|c| {
            c.transaction_remove_expired_transaction_cleanup_interval_ms
                .to_string()
        }),
    },
    BrokerKey {
        name: "transactional.id.expiration.ms",
        set: |c, key, value, _| {
            c.transactional_id_expiration_ms = parse_ranged(key, value, 1, i64::from(i32::MAX))?;
            Ok(())
        },
        show: Some(|c| c.transactional_id_expiration_ms.to_string()),
    },
    BrokerKey {
        name: "transaction.partition.verification.enable",
        set: |c, key, value, _| {
            c.transaction_partition_verification_enable = parse_bool(key, value)?;
            Ok(())
        },
        show: Some(|c| c.transaction_partition_verification_enable.to_string()),
    },
    BrokerKey {
        name: "offsets.topic.segment.bytes",
        set: |c, key, value, _| {
            c.offsets_topic_segment_bytes =
                parse_unsigned(key, value, SEGMENT_BYTES_MIN, i64::from(i32::MAX))?;
            Ok(())
        },
        show: None,
    },
    BrokerKey {
        name: "group.initial.rebalance.delay.ms",
        set: |c, key, value, _| set_group_ms(c, GroupMs::InitialRebalanceDelay, key, value),
        show: None,
    },
    BrokerKey {
        name: "group.min.session.timeout.ms",
        set: |c, key, value, _| set_group_ms(c, GroupMs::MinSessionTimeout, key, value),
        show: None,
    },
    BrokerKey {
        name: "group.max.session.timeout.ms",
        set: |c, key, value, _| set_group_ms(c, GroupMs::MaxSessionTimeout, key, value),
        show: None,
    },
    BrokerKey {
        name: "log.retention.check.interval.ms",
        set: |c, key, value, _| {
            c.log_retention_check_interval_ms = parse_unsigned(key, value, 1, i64::MAX)?;
            Ok(())
        },
        show: Some(|c| c.log_retention_check_interval_ms.to_string()),
    },
    BrokerKey {
        name: "offsets.retention.minutes",
        set: |c, key, value, _| {
            let n = parse_ranged(key, value, 1, i64::from(i32::MAX))?;
            c.offsets_retention_minutes =
                i32::try_from(n).map_err(|_| invalid(key, value, "too large"))?;
            Ok(())
        },
        show: Some(|c| c.offsets_retention_minutes.to_string()),
    },
    BrokerKey {
        name: "offsets.retention.check.interval.ms",
        set: |c, key, value, _| {
            c.offsets_retention_check_interval_ms = parse_unsigned(key, value, 1, i64::MAX)?;
            Ok(())
        },
        show: Some(|c| c.offsets_retention_check_interval_ms.to_string()),
    },
    BrokerKey {
        name: "replica.high.watermark.checkpoint.interval.ms",
        set: |c, key, value, _| {
            c.replica_high_watermark_checkpoint_interval_ms =
                parse_unsigned(key, value, 1, i64::MAX)?;
            Ok(())
        },
        show: Some(|c| c.replica_high_watermark_checkpoint_interval_ms.to_string()),
    },
    BrokerKey {
        name: "offsets.topic.replication.factor",
        set: |c, key, value, _| {
            let n = parse_ranged(key, value, 1, i64::from(i16::MAX))?;
            c.offsets_topic_replication_factor = to_i16(key, value, n)?;
            Ok(())
        },
        show: Some(|c| c.offsets_topic_replication_factor.to_string()),
    },
    BrokerKey {
        name: "replica.lag.time.max.ms",
        set: |c, key, value, _| {
            c.replica_lag_time_max_ms = parse_unsigned(key, value, 1, i64::MAX)?;
            Ok(())
        },
        show: Some(|c| c.replica_lag_time_max_ms.to_string()),
    },
    BrokerKey {
        name: "leader.replication.throttled.rate",
        set: |c, key, value, _| {
            c.leader_replication_throttled_rate = parse_unsigned(key, value, 0, i64::MAX)?;
            Ok(())
        },
        show: Some(|c| c.leader_replication_throttled_rate.to_string()),
    },
    BrokerKey {
        name: "follower.replication.throttled.rate",
        set: |c, key, value, _| {
            c.follower_replication_throttled_rate = parse_unsigned(key, value, 0, i64::MAX)?;
            Ok(())
        },
        show: Some(|c| c.follower_replication_throttled_rate.to_string()),
    },
    BrokerKey {
        name: "replica.alter.log.dirs.io.max.bytes.per.second",
        set: |c, key, value, _| {
            c.replica_alter_log_dirs_io_max_bytes_per_second =
                parse_unsigned(key, value, 0, i64::MAX)?;
            Ok(())
        },
        show: Some(|c| c.replica_alter_log_dirs_io_max_bytes_per_second.to_string()),
    },
    BrokerKey {
        name: "process.roles",
        set: |c, key, value, v| {
            c.process_roles = ProcessRoles::parse(v).map_err(|why| invalid(key, value, why))?;
            Ok(())
        },
        show: Some(|c| c.process_roles.to_string()),
    },
    BrokerKey {
        name: "controller.quorum.voters",
        set: |c, key, value, v| {
            c.controller_quorum_voters =
                parse_quorum_voters(v).map_err(|why| invalid(key, value, why))?;
            Ok(())
        },
        show: Some(|c| render_quorum_voters(&c.controller_quorum_voters)),
    },
    BrokerKey {
        name: "controller.quorum.bootstrap.servers",
        set: |c, key, value, v| {
            c.controller_quorum_bootstrap_servers =
                parse_bootstrap_servers(v).map_err(|why| invalid(key, value, why))?;
            Ok(())
        },
        show: Some(|c| render_bootstrap_servers(&c.controller_quorum_bootstrap_servers)),
    },
    BrokerKey {
        name: "controller.quorum.election.timeout.ms",
        set: |c, key, value, _| {
            c.controller_quorum_election_timeout_ms = parse_unsigned(
                key,
                value,
                3 * BrokerConfig::QUORUM_TICK_MS,
                i64::from(i32::MAX),
            )?;
            Ok(())
        },
        show: Some(|c| c.controller_quorum_election_timeout_ms.to_string()),
    },
    BrokerKey {
        name: "broker.heartbeat.interval.ms",
        set: |c, key, value, _| {
            c.broker_heartbeat_interval_ms = parse_unsigned(key, value, 1, i64::from(i32::MAX))?;
            Ok(())
        },
        show: Some(|c| c.broker_heartbeat_interval_ms.to_string()),
    },
    BrokerKey {
        name: "broker.session.timeout.ms",
        set: |c, key, value, _| {
            c.broker_session_timeout_ms = parse_unsigned(key, value, 1, i64::from(i32::MAX))?;
            Ok(())
        },
        show: Some(|c| c.broker_session_timeout_ms.to_string()),
    },
    BrokerKey {
        name: "auto.leader.rebalance.enable",
        set: |c, key, value, _| {
            c.auto_leader_rebalance_enable = parse_bool(key, value)?;
            Ok(())
        },
        show: Some(|c| c.auto_leader_rebalance_enable.to_string()),
    },
    BrokerKey {
        name: "leader.imbalance.per.broker.percentage",
        set: |c, key, value, _| {
            let n = parse_ranged(key, value, i64::from(i32::MIN), i64::from(i32::MAX))?;
            c.leader_imbalance_per_broker_percentage = to_i32(key, value, n)?;
            Ok(())
        },
        show: Some(|c| c.leader_imbalance_per_broker_percentage.to_string()),
    },
    BrokerKey {
        name: "leader.imbalance.check.interval.seconds",
        set: |c, key, value, _| {
            c.leader_imbalance_check_interval_seconds = parse_unsigned(key, value, 1, i64::MAX)?;
            Ok(())
        },
        show: Some(|c| c.leader_imbalance_check_interval_seconds.to_string()),
    },
    BrokerKey {
        name: "max.incremental.fetch.session.cache.slots",
        set: |c, key, value, _| {
            let n = parse_ranged(key, value, 0, i64::from(i32::MAX))?;
            c.max_incremental_fetch_session_cache_slots = usize::try_from(n).unwrap_or(0);
            Ok(())
        },
        show: Some(|c| c.max_incremental_fetch_session_cache_slots.to_string()),
    },
    BrokerKey {
        name: "log.cleaner.enable",
        set: |c, key, value, _| {
            c.cleaner.enable = parse_bool(key, value)?;
            Ok(())
        },
        show: Some(|c| c.cleaner.enable.to_string()),
    },
    // Kafka runs this many cleaner threads per broker; Sluice runs one cleaner on each shard,
    // for the partitions that shard owns, whatever the count, except that 0 (Kafka: no cleaner
    // thread) runs none. Kafka's range: at least 0.
    BrokerKey {
        name: "log.cleaner.threads",
        set: |c, key, value, _| {
            let n = parse_ranged(key, value, 0, i64::from(i32::MAX))?;
            c.cleaner.threads = usize::try_from(n).unwrap_or(usize::MAX);
            Ok(())
        },
        show: Some(|c| c.cleaner.threads.to_string()),
    },
    BrokerKey {
        name: "log.cleaner.backoff.ms",
        set: |c, key, value, _| {
            c.cleaner.backoff = Duration::from_millis(parse_unsigned(key, value, 0, i64::MAX)?);
            Ok(())
        },
        show: Some(|c| {
            u64::try_from(c.cleaner.backoff.as_millis())
                .unwrap_or(u64::MAX)
                .to_string()
        }),
    },
    // Kafka declares no range for it; a negative size means nothing, so it is refused.
    BrokerKey {
        name: "log.cleaner.dedupe.buffer.size",
        set: |c, key, value, _| {
            c.cleaner.dedupe_buffer_bytes = parse_unsigned(key, value, 0, i64::MAX)?;
            Ok(())
        },
        show: Some(|c| c.cleaner.dedupe_buffer_bytes.to_string()),
    },
    BrokerKey {
        name: "log.cleaner.io.buffer.size",
        set: |c, key, value, _| {
            let n = parse_unsigned(key, value, 0, i64::from(i32::MAX))?;
            c.cleaner.io_buffer_bytes = to_usize(key, value, n)?;
            Ok(())
        },
        show: Some(|c| c.cleaner.io_buffer_bytes.to_string()),
    },
    BrokerKey {
        name: "log.cleaner.io.max.bytes.per.second",
        set: set_cleaner_io_max,
        show: Some(|c| {
            c.cleaner
                .io_max_bytes_per_second
                .map_or_else(|| DOUBLE_MAX.to_owned(), render_double)
        }),
    },
    BrokerKey {
        name: "broker.rack",
        set: |c, _, _, v| {
            c.broker_rack = (!v.is_empty()).then(|| v.to_string());
            Ok(())
        },
        show: Some(|c| c.broker_rack.clone().unwrap_or_default()),
    },
    BrokerKey {
        name: "replica.selector.class",
        set: |c, key, value, v| {
            c.rack_aware_replica_selector = match v {
                "" => false,
                RACK_AWARE_REPLICA_SELECTOR => true,
                _ => {
                    return Err(invalid(
                        key,
                        value,
                        format!("Sluice's only replica selector is {RACK_AWARE_REPLICA_SELECTOR}"),
                    ))
                }
            };
            Ok(())
        },
        show: Some(|c| {
            if c.rack_aware_replica_selector {
                RACK_AWARE_REPLICA_SELECTOR
            } else {
                ""
            }
            .to_string()
        }),
    },
    BrokerKey {
        name: "authorizer.class.name",
        set: |c, key, value, v| {
            c.authorizer_enabled = match v {
                "" => false,
                STANDARD_AUTHORIZER => true,
                _ => {
                    return Err(invalid(
                        key,
                        value,
                        format!("Sluice's only authorizer is {STANDARD_AUTHORIZER}"),
                    ))
                }
            };
            Ok(())
        },
        show: Some(|c| {
            if c.authorizer_enabled {
                STANDARD_AUTHORIZER
            } else {
                ""
            }
            .to_string()
        }),
    },
    BrokerKey {
        name: "super.users",
        set: |c, key, value, v| {
            let users: Vec<String> = v
                .split(';')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(str::to_string)
                .collect();
            if let Some(bad) = users.iter().find(|p| !p.contains(':')) {
                return Err(invalid(
                    key,
                    value,
                    format!("{bad} is not a principal (Type:name)"),
                ));
            }
            c.super_users = users;
            Ok(())
        },
        show: Some(|c| c.super_users.join(";")),
    },
    BrokerKey {
        name: "allow.everyone.if.no.acl.found",
        set: |c, key, value, _| {
            c.allow_everyone_if_no_acl_found = parse_bool(key, value)?;
            Ok(())
        },
        show: Some(|c| c.allow_everyone_if_no_acl_found.to_string()),
    },
    BrokerKey {
        name: "connection.failed.authentication.delay.ms",
        set: |c, key, value, _| {
            let n = parse_ranged(key, value, 0, 600_000)?;
            c.connection_failed_authentication_delay_ms = u64::try_from(n).unwrap_or(0);
            Ok(())
        },
        show: Some(|c| c.connection_failed_authentication_delay_ms.to_string()),
    },
];

/// Kafka's KRaft authorizer (KIP-801), the value of `authorizer.class.name` that turns ACLs on.
pub const STANDARD_AUTHORIZER: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";

/// Kafka's rack-aware replica selector (KIP-392), the value of `replica.selector.class` that
/// turns preferred read replicas on.
pub const RACK_AWARE_REPLICA_SELECTOR: &str =
    "org.apache.kafka.common.replica.RackAwareReplicaSelector";

/// The row of broker key `name`, if it is one (topic defaults are not).
pub(super) fn broker_key(name: &str) -> Option<&'static BrokerKey> {
    BROKER_KEYS.iter().find(|k| k.name == name)
}

/// Every key [`BrokerConfig::set`] accepts: the broker keys, every topic property by its
/// topic-level name and by each broker-level synonym (`log.retention.hours`, …).
pub fn broker_key_names() -> Vec<&'static str> {
    let mut keys: Vec<&'static str> = BROKER_KEYS.iter().map(|k| k.name).collect();
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

impl BrokerConfig {
    /// Applies one property (Kafka name, a Sluice `sluice.*` key, or a topic-level name as a
    /// topic default).
    ///
    /// # Errors
    /// [`ConfigError::UnknownKey`] naming the closest known key; [`ConfigError::InvalidValue`]
    /// naming `key` (the broker-level name when a topic default is rejected). On error nothing
    /// changes.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        if let Some(base) = security_key(key) {
            return set_security_key(self, key, &base, value);
        }
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
        match broker_key(name) {
            Some(row) => (row.set)(self, key, value, v)?,
            None => self.set_topic_default(name, key, v)?,
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
            // At most i32::MAX: the topic property's range.
            self.message_max_bytes =
                u32::try_from(self.topic_defaults.log.max_message_bytes).unwrap_or(u32::MAX);
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

    /// Broker-level properties with their values, sorted by key (DescribeConfigs on the
    /// BROKER resource). Topic defaults appear under their broker-level names.
    pub fn entries(&self) -> Vec<(&'static str, String)> {
        let mut out: Vec<(&'static str, String)> = BROKER_KEYS
            .iter()
            .filter_map(|row| row.show.map(|show| (row.name, show(self))))
            .collect();
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
