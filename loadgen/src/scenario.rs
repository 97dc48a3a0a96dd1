//! Named scenarios and their defaults: turns the flags into the fully resolved `Params` of a
//! run. The defaults here are the ones `--help` and docs/benchmarks.md document.

use crate::cli::{Acks, Cli, Compression, ScenarioName};
use crate::payload::STAMP_BYTES;
use anyhow::{bail, Context as _};
use serde::Serialize;
use std::time::Duration;

/// Everything one run needs, defaults applied.
#[derive(Debug, Clone, Serialize)]
pub struct Params {
    /// The workload that runs (for `soak`, the soaked scenario).
    pub scenario: ScenarioName,
    /// Whether this is a soak run (periodic reports, long default duration).
    pub soak: bool,
    /// Records per second over all producers; `None` = unlimited.
    pub rate_per_sec: Option<u64>,
    pub record_bytes: usize,
    pub partitions: u32,
    pub acks: Acks,
    pub compression: Compression,
    pub producers: u32,
    pub groups: u32,
    pub consumers_per_group: u32,
    pub linger_ms: u32,
    pub batch_bytes: u32,
    pub idempotence: bool,
    /// transactions: records per transaction of the closed-loop transactional producers;
    /// `None` for the other scenarios (plain producers).
    pub records_per_txn: Option<u32>,
    #[serde(rename = "duration_s", serialize_with = "seconds")]
    pub duration: Duration,
    #[serde(rename = "warmup_s", serialize_with = "seconds")]
    pub warmup: Duration,
    /// catchup: bytes produced before the consumers start; `None` for other scenarios.
    pub catchup_bytes: Option<u64>,
    #[serde(rename = "report_every_s", serialize_with = "opt_seconds")]
    pub report_every: Option<Duration>,
    pub segment_bytes: u64,
    pub topic_configs: Vec<(String, String)>,
    pub replication_factor: i32,
    pub subscribe: bool,
    #[serde(rename = "drain_timeout_s", serialize_with = "seconds")]
    pub drain_timeout: Duration,
}

fn seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

fn opt_seconds<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_f64(d.as_secs_f64()),
        None => s.serialize_none(),
    }
}

/// Records per second of the latency profile.
const LATENCY_RATE_PER_SEC: u64 = 10_000;
/// 1 KiB records, the risk-control profile.
const RECORD_BYTES: usize = 1024;
/// librdkafka's batch.size is counted in bytes; 1 MiB batches for the batching scenarios.
const BATCH_BYTES: u32 = 1 << 20;
/// Default measured time and warm-up of the timed scenarios.
const DURATION_S: f64 = 30.0;
const WARMUP_S: f64 = 5.0;
/// sweep: measured time and warm-up of each step.
const SWEEP_STEP_DURATION_S: f64 = 10.0;
const SWEEP_STEP_WARMUP_S: f64 = 2.0;
/// soak: default duration and report period.
const SOAK_DURATION_S: f64 = 3_600.0;
const SOAK_REPORT_EVERY_S: f64 = 60.0;
/// catchup: bytes produced before the reader starts (1 GiB).
const CATCHUP_BYTES: u64 = 1 << 30;
/// Segment sizes of the created topics: Sluice preallocates a whole segment per partition,
/// so 1,000 partitions get small ones (2 GiB reserved in all).
const SEGMENT_BYTES: u64 = 256 << 20;
const PARTITIONS_SEGMENT_BYTES: u64 = 2 << 20;
/// transactions: records per transaction unless `--records-per-txn` says otherwise, and the
/// partitions each transaction's records are spread over.
const RECORDS_PER_TXN: u32 = 10;
const TRANSACTIONS_PARTITIONS: u32 = 3;

/// The scenario whose profile each run follows: `soak` runs `--soak-of`, each `sweep` step is
/// the latency profile at another rate.
fn profiled_scenario(cli: &Cli) -> anyhow::Result<ScenarioName> {
    let scenario = match cli.scenario {
        ScenarioName::Soak => cli.soak_of,
        // Each sweep step is the latency profile at another rate.
        ScenarioName::Sweep => ScenarioName::Latency,
        other => other,
    };
    if matches!(scenario, ScenarioName::Soak | ScenarioName::Sweep) {
        bail!(
            "--soak-of {}: pick the scenario to soak (latency, throughput, …)",
            scenario.name()
        );
    }
    Ok(scenario)
}

/// The default run duration and progress-report interval, in seconds, of a soak, a sweep step
/// or any other run.
fn default_duration_and_report_s(soak: bool, sweep: bool) -> (f64, Option<f64>) {
    if soak {
        (SOAK_DURATION_S, Some(SOAK_REPORT_EVERY_S))
    } else if sweep {
        (SWEEP_STEP_DURATION_S, None)
    } else {
        (DURATION_S, None)
    }
}

impl Params {
    pub fn resolve(cli: &Cli) -> anyhow::Result<Params> {
        let soak = cli.scenario == ScenarioName::Soak;
        let sweep = cli.scenario == ScenarioName::Sweep;
        let scenario = profiled_scenario(cli)?;
        let batching = matches!(
            scenario,
            ScenarioName::Throughput | ScenarioName::Catchup | ScenarioName::Partitions
        );
        let transactions = scenario == ScenarioName::Transactions;
        let rate_default = match scenario {
            ScenarioName::Throughput | ScenarioName::Catchup | ScenarioName::Transactions => 0,
            _ => LATENCY_RATE_PER_SEC,
        };
        let rate = cli.rate.unwrap_or(rate_default);
        let (duration_default_s, report_default_s) = default_duration_and_report_s(soak, sweep);
        let params = Params {
            scenario,
            soak,
            rate_per_sec: (rate > 0).then_some(rate),
            record_bytes: cli.record_bytes.unwrap_or(RECORD_BYTES),
            partitions: cli.partitions.unwrap_or(match scenario {
                ScenarioName::Partitions => 1_000,
                ScenarioName::Transactions => TRANSACTIONS_PARTITIONS,
                _ => 6,
            }),
            acks: cli.acks.unwrap_or(Acks::All),
            compression: cli.compression.unwrap_or(Compression::None),
            producers: cli.producers.unwrap_or(1),
            groups: cli.groups.unwrap_or(match scenario {
                ScenarioName::Fanout => 4,
                _ => 1,
            }),
            consumers_per_group: cli.consumers.unwrap_or(1),
            linger_ms: cli.linger_ms.unwrap_or(if batching { 5 } else { 0 }),
            batch_bytes: cli.batch_bytes.unwrap_or(BATCH_BYTES),
            // A transactional producer is idempotent (KIP-98).
            idempotence: cli.idempotence || transactions,
            records_per_txn: if transactions {
                Some(cli.records_per_txn.unwrap_or(RECORDS_PER_TXN))
            } else {
                cli.records_per_txn
            },
            duration: seconds_flag("--duration", cli.duration.unwrap_or(duration_default_s))?,
            warmup: seconds_flag(
                "--warmup",
                cli.warmup.unwrap_or(match scenario {
                    ScenarioName::Catchup => 0.0,
                    _ if sweep => SWEEP_STEP_WARMUP_S,
                    _ => WARMUP_S,
                }),
            )?,
            catchup_bytes: (scenario == ScenarioName::Catchup)
                .then(|| cli.catchup_bytes.unwrap_or(CATCHUP_BYTES)),
            report_every: cli
                .report_every
                .or(report_default_s)
                .map(|s| seconds_flag("--report-every", s))
                .transpose()?,
            segment_bytes: cli.segment_bytes.unwrap_or(match scenario {
                ScenarioName::Partitions => PARTITIONS_SEGMENT_BYTES,
                _ => SEGMENT_BYTES,
            }),
            topic_configs: cli
                .topic_config
                .iter()
                .map(|kv| parse_key_value("--topic-config", kv))
                .collect::<anyhow::Result<_>>()?,
            replication_factor: cli.replication_factor,
            subscribe: !cli.assign,
            drain_timeout: seconds_flag("--drain-timeout", cli.drain_timeout)?,
        };
        params.check()?;
        Ok(params)
    }

    fn check(&self) -> anyhow::Result<()> {
        if self.record_bytes < STAMP_BYTES {
            bail!(
                "--record-bytes {} is below the {STAMP_BYTES}-byte timing stamp",
                self.record_bytes
            );
        }
        for (flag, value) in [
            ("--partitions", self.partitions),
            ("--producers", self.producers),
            ("--groups", self.groups),
            ("--consumers", self.consumers_per_group),
        ] {
            if value == 0 {
                bail!("{flag} must be at least 1");
            }
        }
        if self.consumers_per_group > self.partitions && !self.subscribe {
            bail!(
                "--consumers {} exceeds --partitions {}: some consumers would have no partition",
                self.consumers_per_group,
                self.partitions
            );
        }
        if self.idempotence && self.acks != Acks::All {
            bail!("--idempotence needs --acks all");
        }
        self.check_transactions()?;
        if self.duration.is_zero() && self.catchup_bytes.is_none() {
            bail!("--duration must be above 0");
        }
        if self.catchup_bytes == Some(0) {
            bail!("--catchup-bytes must be above 0");
        }
        Ok(())
    }

    /// The transactions scenario's own rules: a closed loop of whole transactions.
    fn check_transactions(&self) -> anyhow::Result<()> {
        let transactions = self.scenario == ScenarioName::Transactions;
        match self.records_per_txn {
            Some(_) if !transactions => bail!("--records-per-txn is for the transactions scenario"),
            Some(0) => bail!("--records-per-txn must be at least 1"),
            _ => {}
        }
        if transactions && self.rate_per_sec.is_some() {
            bail!("transactions runs closed loop (the next transaction begins when the commit returns): leave out --rate");
        }
        Ok(())
    }

    /// catchup: records produced before the reader starts (whole records, at least one).
    pub fn catchup_records(&self) -> Option<u64> {
        let bytes = self.catchup_bytes?;
        let record_bytes = self.record_bytes as u64;
        Some(bytes.div_ceil(record_bytes).max(1))
    }
}

/// A non-negative, finite number of seconds as a `Duration`.
fn seconds_flag(flag: &str, s: f64) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(s).with_context(|| format!("{flag} {s}: not a number of seconds"))
}

/// `KEY=VALUE` of a repeatable flag.
pub fn parse_key_value(flag: &str, kv: &str) -> anyhow::Result<(String, String)> {
    match kv.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => bail!("{flag} {kv}: expected KEY=VALUE"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn params(args: &[&str]) -> anyhow::Result<Params> {
        let cli =
            Cli::try_parse_from(std::iter::once("sluice-loadgen").chain(args.iter().copied()))?;
        Params::resolve(&cli)
    }

    #[test]
    fn latency_is_the_default_risk_control_profile() {
        let p = params(&[]).expect("defaults resolve");
        assert_eq!(p.scenario, ScenarioName::Latency);
        assert_eq!(p.rate_per_sec, Some(10_000));
        assert_eq!(p.record_bytes, 1024);
        assert_eq!(p.acks, Acks::All);
        assert_eq!(p.partitions, 6);
        assert_eq!((p.producers, p.groups, p.consumers_per_group), (1, 1, 1));
        assert_eq!(p.linger_ms, 0);
        assert_eq!(p.duration, Duration::from_secs(30));
    }

    #[test]
    fn scenario_defaults_and_flags_that_override_them() {
        assert_eq!(params(&["fanout"]).expect("fanout").groups, 4);
        assert_eq!(
            params(&["partitions"]).expect("partitions").partitions,
            1_000
        );
        let t = params(&["throughput"]).expect("throughput");
        assert_eq!(t.rate_per_sec, None);
        assert_eq!(t.linger_ms, 5);
        let c = params(&[
            "catchup",
            "--catchup-bytes",
            "1000",
            "--record-bytes",
            "100",
        ])
        .expect("catchup");
        assert_eq!(c.catchup_records(), Some(10));
        let s = params(&["soak", "--soak-of", "fanout", "--duration", "2"]).expect("soak");
        assert!(s.soak);
        assert_eq!(s.groups, 4);
        assert_eq!(s.report_every, Some(Duration::from_secs(60)));
        let w = params(&["sweep"]).expect("sweep");
        assert_eq!(
            w.scenario,
            ScenarioName::Latency,
            "each step is the latency profile"
        );
        assert_eq!(w.duration, Duration::from_secs(10));
        assert_eq!(w.warmup, Duration::from_secs(2));
        let o = params(&["--rate", "5", "--topic-config", "flush.messages=1"]).expect("flags");
        assert_eq!(o.rate_per_sec, Some(5));
        assert_eq!(o.topic_configs, vec![("flush.messages".into(), "1".into())]);
        let x = params(&["transactions"]).expect("transactions");
        assert_eq!(x.records_per_txn, Some(10));
        assert_eq!(x.partitions, 3);
        assert_eq!(x.rate_per_sec, None, "closed loop");
        assert!(x.idempotence, "a transactional producer is idempotent");
        let x = params(&["transactions", "--records-per-txn", "100"]).expect("100 per txn");
        assert_eq!(x.records_per_txn, Some(100));
        assert_eq!(params(&[]).expect("latency").records_per_txn, None);
    }

    #[test]
    fn bad_flag_combinations_are_refused() {
        assert!(params(&["--record-bytes", "8"]).is_err());
        assert!(params(&["--partitions", "2", "--consumers", "3", "--assign"]).is_err());
        assert!(
            params(&["--partitions", "2", "--consumers", "3"]).is_ok(),
            "a group may have idle members"
        );
        assert!(params(&["--idempotence", "--acks", "1"]).is_err());
        assert!(params(&["--topic-config", "flush.messages"]).is_err());
        assert!(params(&["soak", "--soak-of", "soak"]).is_err());
        assert!(params(&["soak", "--soak-of", "sweep"]).is_err());
        assert!(params(&["--duration", "-1"]).is_err());
        assert!(params(&["--records-per-txn", "10"]).is_err());
        assert!(params(&["transactions", "--records-per-txn", "0"]).is_err());
        assert!(params(&["transactions", "--rate", "100"]).is_err());
        assert!(params(&["transactions", "--acks", "1"]).is_err());
    }
}
