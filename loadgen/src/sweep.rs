//! The `sweep` scenario: the latency profile at rising rates (1k, 2k, 5k, 10k, 20k, … msg/s)
//! on each broker, until a broker no longer holds the target rate: the knee of its latency
//! curve. Each step is an ordinary run (its own topic, warm-up and measured window) with the
//! rate as the only change; a step "holds" when the acknowledged rate reaches
//! [`HELD_FRACTION`] of the target and every record reached the group. The broker's CPU is
//! sampled per step from /proc (the local `sluice`, or the process given with
//! `--bootstrap-pid` / `--compare-pid`, e.g. the Kafka that scripts/kafka-ref started).
//!
//! Outputs: one JSON file (schema [`SCHEMA`]) with every step of every broker, one
//! HdrHistogram log per step, and one SVG of p99 against the achieved rate, one line per
//! broker.

use crate::broker_proc::LocalBroker;
use crate::client::Endpoint;
use crate::latency::Percentiles;
use crate::report::{self, Machine};
use crate::run::{self, RunIdentity};
use crate::scenario::Params;
use crate::{plot, procstat};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Version tag of the sweep JSON layout.
pub const SCHEMA: &str = "sluice-loadgen-sweep/1";

/// A step holds its rate when at least this fraction of the target was acknowledged per
/// second.
pub const HELD_FRACTION: f64 = 0.95;

/// The default rates (msg/s): 1-2-5 steps from 1,000 to 1,000,000.
pub const DEFAULT_RATES: [u64; 10] = [
    1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000, 500_000, 1_000_000,
];

/// One rate on one broker.
#[derive(Debug, Serialize)]
pub struct SweepStep {
    pub target_msgs_per_sec: u64,
    pub achieved_msgs_per_sec: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p9999_ms: f64,
    pub max_ms: f64,
    pub ack_p99_ms: f64,
    /// The broker's CPU over the step, in % of one core (null without a broker pid).
    pub broker_cpu_percent: Option<f64>,
    /// Broker CPU time per acknowledged record, µs (null without a broker pid).
    pub broker_cpu_us_per_record: Option<f64>,
    pub loadgen_cpu_percent: Option<f64>,
    pub sent: u64,
    pub received: u64,
    /// Every acknowledged record reached the group and none failed.
    pub complete: bool,
    /// `achieved ≥ HELD_FRACTION × target` and complete.
    pub held: bool,
    pub hdr_log: PathBuf,
}

/// Every step of one broker.
#[derive(Debug, Serialize)]
pub struct SweepSeries {
    pub label: String,
    pub bootstrap: String,
    /// The clients' `security.protocol` (`--client-config`; PLAINTEXT when not given).
    pub security_protocol: String,
    /// The highest target rate held; null when even the first was not.
    pub knee_msgs_per_sec: Option<u64>,
    pub steps: Vec<SweepStep>,
}

/// The whole sweep result file.
#[derive(Debug, Serialize)]
pub struct SweepFile {
    pub schema: &'static str,
    pub scenario: &'static str,
    /// The latency profile of every step (its `rate_per_sec` is the first step's).
    pub params: Params,
    pub rates: Vec<u64>,
    pub held_fraction: f64,
    pub machine: Machine,
    pub brokers: Vec<SweepSeries>,
}

/// One broker to sweep.
pub struct SweepTarget {
    pub label: String,
    pub endpoint: Endpoint,
    /// Started by loadgen: its CPU is sampled, and it is stopped after the last step.
    pub local: Option<LocalBroker>,
    /// Process to sample when the broker is not local.
    pub pid: Option<u32>,
}

/// Where a sweep writes: the JSON file, and the directory and file stem of the rest.
pub struct SweepOutput<'a> {
    pub json_path: &'a Path,
    pub out_dir: &'a Path,
    pub stem: &'a str,
}

/// Sweeps `rates` on each target in turn; returns the result (also written to the JSON file
/// and the SVG) and whether every step that was run completed.
pub fn sweep(
    params: &Params,
    rates: &[u64],
    targets: Vec<SweepTarget>,
    machine: impl FnOnce() -> Machine,
    output: &SweepOutput<'_>,
    identity: impl Fn(usize) -> RunIdentity,
) -> anyhow::Result<(SweepFile, bool)> {
    let mut series = Vec::new();
    let mut run_index = 0;
    for target in targets {
        series.push(sweep_target(
            params,
            rates,
            target,
            output,
            &identity,
            &mut run_index,
        )?);
    }
    let complete = series.iter().all(|s| s.steps.iter().all(|st| st.complete));
    let file = SweepFile {
        schema: SCHEMA,
        scenario: "sweep",
        params: params.clone(),
        rates: rates.to_vec(),
        held_fraction: HELD_FRACTION,
        machine: machine(),
        brokers: series,
    };
    write_outputs(&file, output)?;
    Ok((file, complete))
}

/// One target's series: the rates in turn until one is not held (`run_index` numbers the runs
/// across targets); a local broker is stopped after its last step.
fn sweep_target(
    params: &Params,
    rates: &[u64],
    target: SweepTarget,
    output: &SweepOutput<'_>,
    identity: &impl Fn(usize) -> RunIdentity,
    run_index: &mut usize,
) -> anyhow::Result<SweepSeries> {
    let pid = target
        .local
        .as_ref()
        .and_then(LocalBroker::pid)
        .or(target.pid);
    let mut steps = Vec::new();
    for &rate in rates {
        let mut step_params = params.clone();
        step_params.rate_per_sec = Some(rate);
        let hlog = output.out_dir.join(format!(
            "{}.{}.{rate}.hlog",
            output.stem,
            run::slug(&target.label)
        ));
        eprintln!("sluice-loadgen: sweep {}: {rate} msg/s", target.label);
        let step = run_step(
            &target,
            &step_params,
            rate,
            pid,
            &identity(*run_index),
            &hlog,
        )?;
        *run_index += 1;
        let held = step.held;
        steps.push(step);
        if !held {
            break;
        }
    }
    if let Some(broker) = target.local {
        let status = broker.stop()?;
        eprintln!("sluice-loadgen: stopped the local sluice ({status})");
    }
    Ok(SweepSeries {
        knee_msgs_per_sec: steps
            .iter()
            .take_while(|s| s.held)
            .map(|s| s.target_msgs_per_sec)
            .last(),
        label: target.label,
        security_protocol: target.endpoint.security_protocol(),
        bootstrap: target.endpoint.bootstrap,
        steps,
    })
}

/// Writes the sweep's JSON file and its SVG (p99 against the achieved rate, one line per
/// broker).
fn write_outputs(file: &SweepFile, output: &SweepOutput<'_>) -> anyhow::Result<()> {
    let json = serde_json::to_string_pretty(file)?;
    std::fs::write(output.json_path, json + "\n")
        .map_err(|e| anyhow::anyhow!("writing {}: {e}", output.json_path.display()))?;
    let lines: Vec<(String, Vec<(f64, f64)>)> = file
        .brokers
        .iter()
        .map(|s| {
            let pts = s
                .steps
                .iter()
                .filter(|st| st.achieved_msgs_per_sec > 0.0)
                .map(|st| (st.achieved_msgs_per_sec, st.p99_ms))
                .collect();
            (s.label.clone(), pts)
        })
        .collect();
    plot::write_sweep_svg(
        &output.out_dir.join(format!("{}.svg", output.stem)),
        "sluice-loadgen sweep: p99 end-to-end latency against the achieved rate",
        &lines,
    )
}

fn run_step(
    target: &SweepTarget,
    params: &Params,
    rate: u64,
    pid: Option<u32>,
    identity: &RunIdentity,
    hlog: &Path,
) -> anyhow::Result<SweepStep> {
    let started = std::time::Instant::now();
    let loadgen_cpu_s = procstat::cpu_seconds(None);
    let broker_cpu_s = pid.and_then(|p| procstat::cpu_seconds(Some(p)));
    let outcome = run::run(&target.endpoint, &target.label, params, identity, hlog).map_err(
        |e| match &target.local {
            Some(broker) => e.context(broker.describe()),
            None => e,
        },
    )?;
    let wall_s = started.elapsed().as_secs_f64();
    let broker_cpu_used_s = broker_cpu_s
        .zip(pid.and_then(|p| procstat::cpu_seconds(Some(p))))
        .map(|(s, e)| e - s);
    let loadgen_cpu_percent = loadgen_cpu_s
        .zip(procstat::cpu_seconds(None))
        .map(|(s, e)| (e - s) / wall_s * 100.0);
    let latency = Percentiles::of(&outcome.latency);
    let ack = Percentiles::of(&outcome.ack_latency);
    let received = outcome
        .received_per_group
        .iter()
        .copied()
        .min()
        .unwrap_or(0);
    let complete = outcome.failed == 0 && received >= outcome.sent;
    let held = complete && outcome.msgs_per_sec >= HELD_FRACTION * rate as f64;
    Ok(SweepStep {
        target_msgs_per_sec: rate,
        achieved_msgs_per_sec: outcome.msgs_per_sec,
        p50_ms: latency.p50_ms,
        p99_ms: latency.p99_ms,
        p9999_ms: latency.p9999_ms,
        max_ms: latency.max_ms,
        ack_p99_ms: ack.p99_ms,
        broker_cpu_percent: broker_cpu_used_s.map(|s| s / wall_s * 100.0),
        broker_cpu_us_per_record: broker_cpu_used_s
            .filter(|_| outcome.sent > 0)
            .map(|s| s * 1e6 / outcome.sent as f64),
        loadgen_cpu_percent,
        sent: outcome.sent,
        received,
        complete,
        held,
        hdr_log: hlog.to_path_buf(),
    })
}

/// The sweep table: one block per broker, one line per step.
pub fn print_table(file: &SweepFile) {
    let p = &file.params;
    println!(
        "\nsweep of the latency profile: {} B records, {} partitions, acks={}, linger.ms={}, \
         {:.0} s per step; a step holds at ≥ {:.0} % of its rate",
        p.record_bytes,
        p.partitions,
        p.acks.as_config(),
        p.linger_ms,
        p.duration.as_secs_f64(),
        file.held_fraction * 100.0
    );
    let fmt = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.1}"));
    for s in &file.brokers {
        let knee = s
            .knee_msgs_per_sec
            .map_or_else(|| "none held".to_string(), |k| format!("{k} msg/s"));
        println!("\n{} over {} (knee: {knee})", s.label, s.security_protocol);
        println!(
            "{:>10} {:>12} {:>9} {:>9} {:>10} {:>9} {:>12} {:>5}",
            "target/s",
            "achieved/s",
            "p50 ms",
            "p99 ms",
            "p99.99 ms",
            "cpu %",
            "cpu µs/rec",
            "held"
        );
        for st in &s.steps {
            println!(
                "{:>10} {:>12.0} {:>9.3} {:>9.3} {:>10.3} {:>9} {:>12} {:>5}",
                st.target_msgs_per_sec,
                st.achieved_msgs_per_sec,
                st.p50_ms,
                st.p99_ms,
                st.p9999_ms,
                fmt(st.broker_cpu_percent),
                fmt(st.broker_cpu_us_per_record),
                if st.held { "yes" } else { "no" }
            );
        }
    }
}

/// The machine description of a sweep (as other scenarios write it).
pub fn machine(
    cpus: usize,
    broker_cpus: Option<String>,
    loadgen_cpus: Option<String>,
    load_avg_1m_start: Option<f64>,
) -> Machine {
    Machine {
        cpus,
        broker_cpus,
        loadgen_cpus,
        load_avg_1m_start,
        load_avg_1m_end: report::load_avg_1m(),
        date_utc: report::utc_now(),
    }
}
