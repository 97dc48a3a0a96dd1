//! Results: the JSON result file (schema below), the HdrHistogram interval log of each broker,
//! and the final table on stdout.
//!
//! JSON (`schema` = "sluice-loadgen/1"): `scenario`, `params`, `machine`, `baselines` (null
//! with `--no-baselines`), and `brokers`, one object per broker with at least `p50_ms`,
//! `p99_ms`, `p999_ms`, `max_ms`, `msgs_per_sec`, `mb_per_sec`, `sent`, `received` (the
//! slowest consumer group's count), `rss_max_bytes` (null when the broker is not local),
//! `cpu` (`broker_percent`, `loadgen_percent`, `broker_us_per_record`: µs of broker CPU per
//! record produced and consumed; null without a broker pid), `vs_baseline` and `vs_floor`;
//! with `--compare`, `comparison` holds second ÷ first for each figure. `floor` (latency
//! only; null with `--no-floor`) is the same run against `sluice-floor`, in the layout of a
//! broker, and each broker's `vs_floor` its CPU per record and percentiles ÷ the floor's.
//! `transactions` (the transactions scenario only, null otherwise) holds `records_per_txn`,
//! `committed`, `aborted`, `txns_per_sec` and `commit_p50_ms`/`commit_p99_ms`/
//! `commit_p999_ms`/`commit_max_ms` (begin → commit returned); there `msgs_per_sec` counts
//! records of committed transactions and the percentiles are send → read_committed receipt.

use crate::baseline::Baselines;
use crate::client::Endpoint;
use crate::latency::Percentiles;
use crate::run::{CatchupFigures, IntervalReport, RunOutcome};
use crate::scenario::Params;
use crate::txn::TxnFigures;
use anyhow::Context as _;
use serde::Serialize;
use std::collections::BTreeMap;

use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Version tag of the JSON layout; bump it when a field changes meaning or goes away.
pub const SCHEMA: &str = "sluice-loadgen/1";

/// The whole result file.
#[derive(Debug, Serialize)]
pub struct ResultFile {
    pub schema: &'static str,
    pub scenario: String,
    pub params: Params,
    pub machine: Machine,
    pub baselines: Option<Baselines>,
    pub brokers: Vec<BrokerResult>,
    /// The same scenario against `sluice-floor` (latency, unless `--no-floor`).
    pub floor: Option<BrokerResult>,
    /// `--compare`: second broker ÷ first, per figure.
    pub comparison: Option<BTreeMap<&'static str, Option<f64>>>,
}

/// Where and when the run happened.
#[derive(Debug, Serialize)]
pub struct Machine {
    pub cpus: usize,
    pub broker_cpus: Option<String>,
    pub loadgen_cpus: Option<String>,
    /// 1-minute load average before and after the run (/proc/loadavg).
    pub load_avg_1m_start: Option<f64>,
    pub load_avg_1m_end: Option<f64>,
    pub date_utc: String,
}

/// One broker's figures.
#[derive(Debug, Serialize)]
pub struct BrokerResult {
    pub label: String,
    pub bootstrap: String,
    /// The clients' `security.protocol` (`--client-config`; PLAINTEXT when not given).
    pub security_protocol: String,
    pub local: bool,
    pub topic: String,
    pub partitions: u32,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub p9999_ms: f64,
    pub max_ms: f64,
    /// Records in the latency histogram (those intended inside the measured window).
    pub latency_count: u64,
    /// Produce acknowledgement latency, intended send → delivery report (the produce half).
    pub ack_p50_ms: f64,
    pub ack_p99_ms: f64,
    pub ack_p999_ms: f64,
    pub ack_max_ms: f64,
    pub msgs_per_sec: f64,
    pub mb_per_sec: f64,
    pub sent: u64,
    pub received: u64,
    pub received_per_group: Vec<u64>,
    pub failed: u64,
    pub consume_errors: u64,
    pub rss_max_bytes: Option<u64>,
    pub rss_end_bytes: Option<u64>,
    pub cpu: CpuUse,
    pub catchup: Option<CatchupFigures>,
    /// The transactions scenario's figures (null for the others).
    pub transactions: Option<TxnFigures>,
    pub intervals: Vec<IntervalReport>,
    pub vs_baseline: Option<BaselineRatios>,
    /// This broker's figures ÷ the floor's of the same run (null without a floor run).
    pub vs_floor: Option<FloorRatios>,
    pub hdr_log: PathBuf,
}

/// A broker figure divided by the floor's in the same run: how many times the least a
/// broker on this runtime must spend.
#[derive(Debug, Clone, Serialize)]
pub struct FloorRatios {
    /// Broker CPU per record ÷ the floor's CPU per record.
    pub broker_cpu_us_per_record: Option<f64>,
    /// End-to-end percentiles ÷ the floor's.
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub p9999_ms: Option<f64>,
}

impl FloorRatios {
    /// `broker`'s figures ÷ `floor`'s.
    pub fn of(broker: &BrokerResult, floor: &BrokerResult) -> FloorRatios {
        FloorRatios {
            broker_cpu_us_per_record: broker
                .cpu
                .broker_us_per_record
                .zip(floor.cpu.broker_us_per_record)
                .and_then(|(b, f)| ratio(b, f)),
            p50_ms: ratio(broker.p50_ms, floor.p50_ms),
            p99_ms: ratio(broker.p99_ms, floor.p99_ms),
            p9999_ms: ratio(broker.p9999_ms, floor.p9999_ms),
        }
    }
}

/// A broker figure divided by the machine's limit measured in the same run.
#[derive(Debug, Clone, Serialize)]
pub struct BaselineRatios {
    /// p50 end-to-end ÷ raw loopback TCP round trip p50 (1 KiB).
    pub p50_vs_tcp_rtt_p50: Option<f64>,
    /// p99 end-to-end ÷ raw loopback TCP round trip p99.
    pub p99_vs_tcp_rtt_p99: Option<f64>,
    /// p99 end-to-end ÷ raw 4 KiB O_DIRECT write + fdatasync p99.
    pub p99_vs_write_fdatasync_p99: Option<f64>,
    /// mb_per_sec ÷ raw O_DIRECT sequential write MB/s.
    pub mb_per_sec_vs_disk_write: Option<f64>,
}

/// CPU used during the run (start of topic creation to the end of the drain), in % of one
/// core: above ~90 % a side is CPU-bound and its queueing shows up as latency.
#[derive(Debug, Clone, Serialize)]
pub struct CpuUse {
    /// The broker's process: the local one, or the one named by `--bootstrap-pid` /
    /// `--compare-pid` (null otherwise).
    pub broker_percent: Option<f64>,
    /// This loadgen process (producers, consumers and librdkafka's threads).
    pub loadgen_percent: Option<f64>,
    /// The broker's CPU time over the run ÷ records produced (each one also consumed by every
    /// group), in µs: what one record costs the broker end to end. Null without a broker pid.
    pub broker_us_per_record: Option<f64>,
    /// Each CPU's busy share over the run, by any process, in % (indexed by CPU id): on a
    /// shared machine a side can be starved by other work without using its CPUs itself.
    pub cpu_busy_percent: Vec<f64>,
    /// Which side ran out of CPU (null when a side's CPUs are unknown).
    pub saturated: Option<Saturated>,
}

/// One side's CPU over a run, for [`Saturated::of`].
#[derive(Debug, Clone, Copy)]
pub struct SideCpu {
    /// The side's own use, in % of one core.
    pub used_percent: f64,
    /// The CPUs it may use.
    pub cores: usize,
    /// Mean busy share of those CPUs by any process, in %.
    pub cpus_busy_percent: Option<f64>,
}

impl SideCpu {
    /// At [`SATURATED_SHARE`] of its cores, by its own use or with its CPUs that busy.
    fn saturated(&self) -> bool {
        self.used_percent >= SATURATED_SHARE * 100.0 * self.cores as f64
            || self
                .cpus_busy_percent
                .is_some_and(|busy| busy >= SATURATED_SHARE * 100.0)
    }
}

/// Share of the cores a side may use above which it counts as saturated (CPU-bound).
pub const SATURATED_SHARE: f64 = 0.9;

/// Which side of a run was CPU-bound: the one whose CPU use reached [`SATURATED_SHARE`] of
/// the cores it may use (its pinned CPUs, or the whole machine when unpinned), or whose CPUs
/// were that busy with anything (other processes on a shared machine).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Saturated {
    Broker,
    Loadgen,
    Both,
    Neither,
}

impl Saturated {
    /// The verdict for a broker side and a loadgen side.
    pub fn of(broker: SideCpu, loadgen: SideCpu) -> Saturated {
        match (broker.saturated(), loadgen.saturated()) {
            (true, true) => Saturated::Both,
            (true, false) => Saturated::Broker,
            (false, true) => Saturated::Loadgen,
            (false, false) => Saturated::Neither,
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Saturated::Broker => "the broker was saturated",
            Saturated::Loadgen => "loadgen was saturated: the figures are the generator's",
            Saturated::Both => "both sides were saturated",
            Saturated::Neither => "neither side was saturated",
        }
    }
}

/// Local broker memory during the run.
#[derive(Debug, Clone, Copy)]
pub struct Rss {
    pub max_bytes: u64,
    pub end_bytes: u64,
}

fn ratio(numerator: f64, denominator: f64) -> Option<f64> {
    (denominator > 0.0 && numerator.is_finite()).then(|| numerator / denominator)
}

impl BrokerResult {
    pub fn new(
        label: &str,
        endpoint: &Endpoint,
        outcome: &RunOutcome,
        rss: Option<Rss>,
        cpu: CpuUse,
        baselines: Option<&Baselines>,
        hdr_log: &Path,
    ) -> BrokerResult {
        let latency = Percentiles::of(&outcome.latency);
        let ack = Percentiles::of(&outcome.ack_latency);
        let vs_baseline = baselines.map(|b| BaselineRatios {
            p50_vs_tcp_rtt_p50: b
                .tcp
                .as_ref()
                .and_then(|t| ratio(latency.p50_ms * 1e3, t.p50_us)),
            p99_vs_tcp_rtt_p99: b
                .tcp
                .as_ref()
                .and_then(|t| ratio(latency.p99_ms * 1e3, t.p99_us)),
            p99_vs_write_fdatasync_p99: b
                .disk
                .as_ref()
                .and_then(|d| ratio(latency.p99_ms * 1e3, d.write_fdatasync_4k_p99_us)),
            mb_per_sec_vs_disk_write: b
                .disk
                .as_ref()
                .and_then(|d| ratio(outcome.mb_per_sec, d.write_mb_per_sec)),
        });
        BrokerResult {
            label: label.to_string(),
            bootstrap: endpoint.bootstrap.clone(),
            security_protocol: endpoint.security_protocol(),
            local: rss.is_some(),
            topic: outcome.topic.clone(),
            partitions: outcome.partitions,
            p50_ms: latency.p50_ms,
            p90_ms: latency.p90_ms,
            p99_ms: latency.p99_ms,
            p999_ms: latency.p999_ms,
            p9999_ms: latency.p9999_ms,
            max_ms: latency.max_ms,
            latency_count: latency.count,
            ack_p50_ms: ack.p50_ms,
            ack_p99_ms: ack.p99_ms,
            ack_p999_ms: ack.p999_ms,
            ack_max_ms: ack.max_ms,
            msgs_per_sec: outcome.msgs_per_sec,
            mb_per_sec: outcome.mb_per_sec,
            sent: outcome.sent,
            received: outcome
                .received_per_group
                .iter()
                .copied()
                .min()
                .unwrap_or(0),
            received_per_group: outcome.received_per_group.clone(),
            failed: outcome.failed,
            consume_errors: outcome.consume_errors,
            rss_max_bytes: rss.map(|r| r.max_bytes),
            rss_end_bytes: rss.map(|r| r.end_bytes),
            cpu,
            catchup: outcome.catchup.clone(),
            transactions: outcome.transactions.clone(),
            intervals: outcome.reports.clone(),
            vs_baseline,
            vs_floor: None,
            hdr_log: hdr_log.to_path_buf(),
        }
    }

    /// Every group got every acknowledged record and none failed.
    pub fn complete(&self) -> bool {
        self.failed == 0 && self.received >= self.sent
    }
}

/// Figures that are whole counts (shown without decimals).
const COUNTS: [&str; 4] = ["sent", "received", "txns_committed", "txns_aborted"];

/// Rows of the table and of `comparison`: name, unit and value of each figure (the
/// transactions scenario's rows only in its runs).
fn figures(b: &BrokerResult) -> Vec<(&'static str, Option<f64>)> {
    let mut rows = vec![
        ("p50_ms", Some(b.p50_ms)),
        ("p90_ms", Some(b.p90_ms)),
        ("p99_ms", Some(b.p99_ms)),
        ("p999_ms", Some(b.p999_ms)),
        ("p9999_ms", Some(b.p9999_ms)),
        ("max_ms", Some(b.max_ms)),
        ("ack_p50_ms", Some(b.ack_p50_ms)),
        ("ack_p99_ms", Some(b.ack_p99_ms)),
        ("msgs_per_sec", Some(b.msgs_per_sec)),
        ("mb_per_sec", Some(b.mb_per_sec)),
        ("sent", Some(b.sent as f64)),
        ("received", Some(b.received as f64)),
        (
            "rss_max_mib",
            b.rss_max_bytes.map(|r| r as f64 / (1 << 20) as f64),
        ),
        ("broker_cpu_%", b.cpu.broker_percent),
        ("broker_cpu_us_per_record", b.cpu.broker_us_per_record),
        ("loadgen_cpu_%", b.cpu.loadgen_percent),
    ];
    if let Some(t) = &b.transactions {
        rows.extend([
            ("txns_per_sec", Some(t.txns_per_sec)),
            ("txn_commit_p50_ms", Some(t.commit_p50_ms)),
            ("txn_commit_p99_ms", Some(t.commit_p99_ms)),
            ("txns_committed", Some(t.committed as f64)),
            ("txns_aborted", Some(t.aborted as f64)),
        ]);
    }
    rows
}

/// second ÷ first for every figure both have.
pub fn comparison(
    first: &BrokerResult,
    second: &BrokerResult,
) -> BTreeMap<&'static str, Option<f64>> {
    figures(first)
        .into_iter()
        .zip(figures(second))
        .map(|((name, a), (_, b))| (name, a.zip(b).and_then(|(a, b)| ratio(b, a))))
        .collect()
}

pub fn write_json(path: &Path, result: &ResultFile) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(result).context("encoding the JSON result")?;
    std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))
}

/// The final table: one column per broker, a ratio column with two brokers, then the
/// baselines and each broker's figures as ratios to them.
pub fn print_table(result: &ResultFile) {
    let p = &result.params;
    let rate = match (p.records_per_txn, p.rate_per_sec) {
        (Some(n), _) => format!("closed loop, {n} records per transaction, read_committed"),
        (None, Some(r)) => format!("{r} msg/s"),
        (None, None) => "unlimited rate".to_string(),
    };
    println!(
        "\n{}{}: {rate}, {} B records, {} partitions, acks={}, linger.ms={}, {} producer(s), {} group(s) × {} consumer(s)",
        if p.soak { "soak of " } else { "" },
        p.scenario.name(),
        p.record_bytes,
        p.partitions,
        p.acks.as_config(),
        p.linger_ms,
        p.producers,
        p.groups,
        p.consumers_per_group,
    );
    print_figures(result);
    print_broker_notes(result);
    if let Some(floor) = &result.floor {
        print_floor(floor, &result.brokers);
    }
    if let Some(base) = &result.baselines {
        print_baselines(base, &result.brokers);
    }
}

/// The figures: one column per broker, and a ratio column with two brokers.
fn print_figures(result: &ResultFile) {
    let mut header = format!("{:<14}", "figure");
    for b in &result.brokers {
        header += &format!(" {:>22}", truncate(&b.label, 22));
    }
    if result.brokers.len() == 2 {
        header += &format!(" {:>8}", "ratio");
    }
    println!("{header}");
    let mut security = format!("{:<14}", "security");
    for b in &result.brokers {
        security += &format!(" {:>22}", truncate(&b.security_protocol, 22));
    }
    println!("{security}");
    let rows: Vec<Vec<(&str, Option<f64>)>> = result.brokers.iter().map(figures).collect();
    for (i, (name, _)) in rows.first().into_iter().flatten().enumerate() {
        let mut line = format!("{name:<14}");
        for row in &rows {
            let value = match row[i].1 {
                Some(v) if COUNTS.contains(name) => format!("{v:.0}"),
                v => fmt_value(v),
            };
            line += &format!(" {value:>22}");
        }
        if let Some(cmp) = &result.comparison {
            line += &format!(
                " {:>8}",
                cmp.get(name)
                    .copied()
                    .flatten()
                    .map_or("-".into(), |r| format!("{r:.2}×"))
            );
        }
        println!("{line}");
    }
}

/// Each broker's catch-up figures, and a line for each incomplete run.
fn print_broker_notes(result: &ResultFile) {
    for b in &result.brokers {
        if let Some(saturated) = b.cpu.saturated {
            let busy: Vec<String> = b
                .cpu
                .cpu_busy_percent
                .iter()
                .enumerate()
                .map(|(id, p)| format!("CPU {id} {p:.0} %"))
                .collect();
            println!(
                "{}: CPU: broker {} %, loadgen {} % of one core; busy (anything): {}: {} (≥ {:.0} % of its cores)",
                b.label,
                fmt_value(b.cpu.broker_percent),
                fmt_value(b.cpu.loadgen_percent),
                busy.join(", "),
                saturated.describe(),
                SATURATED_SHARE * 100.0
            );
        }
        if let Some(c) = &b.catchup {
            println!(
                "{}: produced {:.1} MB in {:.1} s ({:.1} MB/s), read back in {:.1} s ({:.1} MB/s)",
                b.label,
                c.produced_bytes as f64 / 1e6,
                c.produce_s,
                c.produce_mb_per_sec,
                c.read_s,
                c.read_mb_per_sec
            );
        }
        if !b.complete() {
            println!(
                "{}: INCOMPLETE: sent {}, failed {}, received per group {:?}",
                b.label, b.sent, b.failed, b.received_per_group
            );
        }
    }
}

/// The floor's figures, and each broker's as multiples of them.
fn print_floor(floor: &BrokerResult, brokers: &[BrokerResult]) {
    println!(
        "\nfloor (same run, sluice-floor: read, one 4 KiB O_DIRECT write, answer; parked fetch):"
    );
    println!(
        "  CPU {} µs per record ({} % of a core); p50 / p99 / p99.99 {} / {} / {} ms; {} msg/s{}",
        fmt_value(floor.cpu.broker_us_per_record),
        fmt_value(floor.cpu.broker_percent),
        fmt_value(Some(floor.p50_ms)),
        fmt_value(Some(floor.p99_ms)),
        fmt_value(Some(floor.p9999_ms)),
        fmt_value(Some(floor.msgs_per_sec)),
        if floor.complete() {
            ""
        } else {
            " (INCOMPLETE)"
        },
    );
    for b in brokers {
        if let Some(r) = &b.vs_floor {
            println!(
                "  {}: CPU per record = {} floor; p50 = {}, p99 = {}, p99.99 = {} floor",
                b.label,
                fmt_ratio(r.broker_cpu_us_per_record),
                fmt_ratio(r.p50_ms),
                fmt_ratio(r.p99_ms),
                fmt_ratio(r.p9999_ms),
            );
        }
    }
}

/// The baselines, and each broker's figures as ratios to them.
fn print_baselines(base: &Baselines, brokers: &[BrokerResult]) {
    println!("\nbaselines (same run):");
    match &base.tcp {
        Some(t) => println!(
            "  loopback TCP round trip, 1 KiB: p50 {:.1} µs, p99 {:.1} µs",
            t.p50_us, t.p99_us
        ),
        None => println!("  loopback TCP round trip: not measured"),
    }
    match &base.disk {
        Some(d) => println!(
            "  disk ({}): O_DIRECT sequential write {:.0} MB/s; 4 KiB write p50 {:.1} / p99 {:.1} µs; 4 KiB write + fdatasync p50 {:.1} / p99 {:.1} µs",
            d.dir.display(),
            d.write_mb_per_sec,
            d.write_4k_p50_us,
            d.write_4k_p99_us,
            d.write_fdatasync_4k_p50_us,
            d.write_fdatasync_4k_p99_us
        ),
        None => println!("  disk: not measured"),
    }
    for note in &base.notes {
        println!("  note: {note}");
    }
    for b in brokers {
        if let Some(r) = &b.vs_baseline {
            println!(
                "  {}: p50 = {} TCP RTT p50; p99 = {} TCP RTT p99 = {} write+fdatasync p99; {} MB/s = {} of disk write bandwidth",
                b.label,
                fmt_ratio(r.p50_vs_tcp_rtt_p50),
                fmt_ratio(r.p99_vs_tcp_rtt_p99),
                fmt_ratio(r.p99_vs_write_fdatasync_p99),
                fmt_value(Some(b.mb_per_sec)),
                r.mb_per_sec_vs_disk_write
                    .map_or("-".into(), |x| format!("{:.1} %", x * 100.0)),
            );
        }
    }
}

fn truncate(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

fn fmt_ratio(r: Option<f64>) -> String {
    r.map_or("-".into(), |r| format!("{r:.1}×"))
}

fn fmt_value(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(v) if v.abs() >= 1000.0 => format!("{v:.0}"),
        Some(v) => format!("{v:.3}"),
    }
}

/// Current UTC time as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc_now() -> String {
    utc(SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()))
}

/// `secs` since the Unix epoch as `YYYY-MM-DDTHH:MM:SSZ`.
fn utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3_600,
        rem % 3_600 / 60,
        rem % 60
    )
}

/// The 1-minute load average, if /proc/loadavg can be read.
pub fn load_avg_1m() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Cli;
    use crate::latency::new_histogram;
    use clap::Parser;

    fn outcome(scale: u64) -> RunOutcome {
        let mut latency = new_histogram();
        let mut ack_latency = new_histogram();
        for us in 1..=1_000 {
            latency.record(us * scale).expect("in range");
            ack_latency.record(us).expect("in range");
        }
        RunOutcome {
            topic: "t".into(),
            partitions: 6,
            latency,
            ack_latency,
            sent: 1_000,
            failed: 0,
            received_per_group: vec![1_000, 1_000],
            consume_errors: 0,
            msgs_per_sec: 500.0,
            mb_per_sec: 0.512,
            reports: Vec::new(),
            catchup: None,
            transactions: None,
        }
    }

    #[test]
    fn json_result_has_the_documented_keys() {
        let params =
            Params::resolve(&Cli::parse_from(["sluice-loadgen", "fanout"])).expect("params");
        let rss = Rss {
            max_bytes: 3 << 20,
            end_bytes: 2 << 20,
        };
        let cpu = CpuUse {
            broker_percent: Some(40.0),
            loadgen_percent: Some(50.0),
            broker_us_per_record: Some(12.5),
            cpu_busy_percent: vec![50.0, 60.0],
            saturated: None,
        };
        let local = BrokerResult::new(
            "local",
            &Endpoint::plaintext("127.0.0.1:1".into()),
            &outcome(1),
            Some(rss),
            cpu.clone(),
            None,
            Path::new("a.hlog"),
        );
        let remote = BrokerResult::new(
            "remote",
            &Endpoint::plaintext("127.0.0.1:2".into()),
            &outcome(2),
            None,
            cpu.clone(),
            None,
            Path::new("b.hlog"),
        );
        let floor = BrokerResult::new(
            "floor",
            &Endpoint::plaintext("127.0.0.1:3".into()),
            &outcome(1),
            Some(rss),
            CpuUse {
                broker_us_per_record: Some(5.0),
                ..cpu
            },
            None,
            Path::new("f.hlog"),
        );
        let comparison = comparison(&local, &remote);
        let mut brokers = vec![local, remote];
        for b in &mut brokers {
            b.vs_floor = Some(FloorRatios::of(b, &floor));
        }
        let file = ResultFile {
            schema: SCHEMA,
            scenario: "fanout".into(),
            params,
            machine: Machine {
                cpus: 2,
                broker_cpus: Some("0".into()),
                loadgen_cpus: Some("1".into()),
                load_avg_1m_start: Some(0.5),
                load_avg_1m_end: None,
                date_utc: utc_now(),
            },
            baselines: None,
            brokers,
            floor: Some(floor),
            comparison: Some(comparison),
        };
        let json: serde_json::Value =
            serde_json::from_str(&serde_json::to_string(&file).expect("encodes")).expect("decodes");
        assert_eq!(json["schema"], "sluice-loadgen/1");
        assert_eq!(json["params"]["groups"], 4);
        assert_eq!(json["params"]["acks"], "all");
        for broker in json["brokers"].as_array().expect("brokers") {
            for key in [
                "p50_ms",
                "p99_ms",
                "p999_ms",
                "max_ms",
                "msgs_per_sec",
                "mb_per_sec",
                "sent",
                "received",
            ] {
                assert!(broker[key].is_number(), "{key}: {}", broker[key]);
            }
            assert_eq!(broker["received"], 1_000);
        }
        assert_eq!(json["brokers"][0]["rss_max_bytes"], 3 << 20);
        assert!(
            json["brokers"][1]["rss_max_bytes"].is_null(),
            "unknown for a remote broker"
        );
        let p99_ratio = json["comparison"]["p99_ms"].as_f64().expect("ratio");
        assert!((p99_ratio - 2.0).abs() < 0.01, "{p99_ratio}");
        assert!(json["comparison"]["rss_max_mib"].is_null());
        assert_eq!(json["brokers"][0]["cpu"]["broker_us_per_record"], 12.5);
        assert_eq!(json["floor"]["cpu"]["broker_us_per_record"], 5.0);
        assert!(json["brokers"][0]["cpu"]["saturated"].is_null());
        let vs_floor = &json["brokers"][1]["vs_floor"];
        assert_eq!(vs_floor["broker_cpu_us_per_record"], 2.5);
        let p99_vs_floor = vs_floor["p99_ms"].as_f64().expect("ratio");
        assert!((p99_vs_floor - 2.0).abs() < 0.01, "{p99_vs_floor}");
        let per_record_ratio = json["comparison"]["broker_cpu_us_per_record"]
            .as_f64()
            .expect("ratio");
        assert!((per_record_ratio - 1.0).abs() < 1e-9, "{per_record_ratio}");
    }

    #[test]
    fn transactions_figures_are_in_the_json_and_the_table_rows() {
        let counts = crate::txn::TxnCounts::new();
        counts
            .committed
            .store(100, std::sync::atomic::Ordering::Relaxed);
        let mut run = outcome(1);
        run.transactions = Some(TxnFigures::of(10, &counts, 50.0));
        let cpu = CpuUse {
            broker_percent: None,
            loadgen_percent: None,
            broker_us_per_record: None,
            cpu_busy_percent: Vec::new(),
            saturated: None,
        };
        let b = BrokerResult::new(
            "b",
            &Endpoint::plaintext("127.0.0.1:1".into()),
            &run,
            None,
            cpu,
            None,
            Path::new("b.hlog"),
        );
        let json: serde_json::Value =
            serde_json::from_str(&serde_json::to_string(&b).expect("encodes")).expect("decodes");
        assert_eq!(json["transactions"]["records_per_txn"], 10);
        assert_eq!(json["transactions"]["committed"], 100);
        assert_eq!(json["transactions"]["txns_per_sec"], 50.0);
        let rows = figures(&b);
        assert!(rows.contains(&("txns_per_sec", Some(50.0))));
        assert!(rows.contains(&("txns_committed", Some(100.0))));
        let plain = BrokerResult {
            transactions: None,
            ..b
        };
        assert!(
            !figures(&plain)
                .iter()
                .any(|(name, _)| name.starts_with("txn")),
            "other scenarios' tables have no transaction rows"
        );
    }

    #[test]
    fn the_saturated_side_is_the_one_near_its_cores() {
        let side = |used_percent, cores, busy| SideCpu {
            used_percent,
            cores,
            cpus_busy_percent: busy,
        };
        let quiet = side(31.0, 1, Some(40.0));
        assert_eq!(
            Saturated::of(quiet, side(77.0, 1, Some(80.0))),
            Saturated::Neither
        );
        assert_eq!(
            Saturated::of(quiet, side(95.0, 1, None)),
            Saturated::Loadgen
        );
        assert_eq!(
            Saturated::of(side(95.0, 1, None), side(95.0, 2, None)),
            Saturated::Broker
        );
        assert_eq!(
            Saturated::of(side(185.0, 2, None), side(92.0, 1, None)),
            Saturated::Both
        );
        // Starved by other work: its CPU was busy although it used little of it.
        assert_eq!(
            Saturated::of(quiet, side(60.0, 1, Some(97.0))),
            Saturated::Loadgen
        );
    }

    #[test]
    fn utc_dates_are_formatted_like_rfc3339() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc_now().len(), 20);
    }
}
