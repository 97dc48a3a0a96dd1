//! `sluice-loadgen`: the benchmark suite of Sluice. It drives any Kafka-API broker through a
//! real client (librdkafka, via rdkafka) and depends on no broker crate; with no
//! `--bootstrap` it starts a temporary local `sluice` as a child process.
//!
//! This file is glue: flags → scenario parameters → (local broker) → baselines → one run per
//! broker → (latency: the floor's run) → JSON, HdrHistogram logs, plot, table (`sweep`: one
//! run per rate per broker, in `sweep`). Exit status: 0 when every broker delivered every record to every group, 1 when a
//! run was incomplete, 2 on an error.

mod baseline;
mod broker_proc;
mod cli;
mod client;
mod connect;
mod cpus;
mod hdr_log;
mod latency;
mod payload;
mod plot;
mod procstat;
mod progress;
mod report;
mod run;
mod scenario;
mod schedule;
mod sweep;
mod txn;

use anyhow::Context as _;
use broker_proc::{LocalBroker, LocalOptions, ServerKind};
use clap::Parser;
use cli::Cli;
use client::Endpoint;
use cpus::CpuSet;
use report::{BrokerResult, CpuUse, FloorRatios, Machine, ResultFile};
use run::RunIdentity;
use scenario::{parse_key_value, Params};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run_all(&cli) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("sluice-loadgen: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Runs the scenario on every broker and writes the outputs; true when every run was complete.
fn run_all(cli: &Cli) -> anyhow::Result<bool> {
    if cli.scenario == cli::ScenarioName::Connect {
        return run_connect(cli);
    }
    let params = Params::resolve(cli)?;
    let scenario = cli.scenario.name().to_string();
    let paths = OutputPaths::resolve(cli, &scenario)?;
    let load_avg_1m_start = report::load_avg_1m();

    let available = CpuSet::available()?;
    let (mut local, broker_cpus, loadgen_cpus) = start_local_broker(cli, &available)?;
    if let Some(cpus) = &loadgen_cpus {
        cpus.pin_current_thread()
            .with_context(|| format!("pinning loadgen to CPUs {cpus}"))?;
    }
    // The floor and the baselines' server side run where the broker does: its CPUs, or with
    // --bootstrap and no --broker-cpus the CPUs of this process that loadgen leaves (unpinned,
    // the floor could share loadgen's core and its figures were loadgen's as much as its own).
    let floor_cpus = broker_cpus.clone().or_else(|| {
        let rest = loadgen_cpus
            .as_ref()
            .and_then(|cpus| available.without(cpus));
        if rest.is_none() && cli.bootstrap.is_some() && !cli.no_floor {
            eprintln!(
                "sluice-loadgen: warning: no CPU of this process ({available}) is left beside \
                 --loadgen-cpus: the floor and the baselines' server run unpinned (give \
                 --broker-cpus)"
            );
        }
        rest
    });
    let baselines =
        (!cli.no_baselines).then(|| measure_baselines(cli, local.as_ref(), floor_cpus.as_ref()));
    let targets = targets(cli, local.as_ref())?;
    let machine = MachineStart {
        cpus: available.len(),
        broker_cpus,
        loadgen_cpus,
        load_avg_1m_start,
    };

    if cli.scenario == cli::ScenarioName::Sweep {
        return run_sweep(
            cli, &params, &scenario, &targets, &mut local, &paths, machine,
        );
    }
    let (mut results, mut histograms) = run_each_target(
        cli,
        &params,
        &scenario,
        &targets,
        &mut local,
        &paths,
        baselines.as_ref(),
    )?;
    let loadgen_cpus = machine
        .loadgen_cpus
        .clone()
        .unwrap_or_else(|| available.clone());
    for result in &mut results {
        result.cpu.saturated = saturation(&result.cpu, machine.broker_cpus.as_ref(), &loadgen_cpus);
    }
    let floor = if cli.scenario == cli::ScenarioName::Latency && !cli.no_floor {
        let (floor, latency) = run_floor(
            cli,
            &params,
            &scenario,
            floor_cpus.as_ref(),
            &paths,
            baselines.as_ref(),
        )?;
        for result in &mut results {
            result.vs_floor = Some(FloorRatios::of(result, &floor));
        }
        histograms.push((floor.label.clone(), latency));
        Some(floor)
    } else {
        None
    };
    let plot_path = paths.out_dir.join(format!("{}.svg", paths.stem));
    let series: Vec<(String, &hdrhistogram::Histogram<u64>)> =
        histograms.iter().map(|(l, h)| (l.clone(), h)).collect();
    plot::write_svg(
        &plot_path,
        &format!("sluice-loadgen {scenario}: end-to-end latency"),
        &series,
    )?;
    let comparison = match &results[..] {
        [first, second] => Some(report::comparison(first, second)),
        _ => None,
    };
    let complete = results.iter().chain(&floor).all(BrokerResult::complete);
    let result = ResultFile {
        schema: report::SCHEMA,
        scenario,
        params,
        machine: machine.finish(),
        baselines,
        brokers: results,
        floor,
        comparison,
    };
    report::write_json(&paths.json_path, &result)?;
    report::print_table(&result);
    println!(
        "\nwrote {}, {} and the HdrHistogram log(s) beside them",
        paths.json_path.display(),
        plot_path.display()
    );
    Ok(complete)
}

/// Where a run's files go: the JSON result, the directory that holds it, and the stem that the
/// SVG and the HdrHistogram logs beside it share.
struct OutputPaths {
    json_path: PathBuf,
    out_dir: PathBuf,
    stem: String,
}

impl OutputPaths {
    /// The paths from `--json` (default `loadgen-out/<scenario>.json`); creates the directory.
    fn resolve(cli: &Cli, scenario: &str) -> anyhow::Result<Self> {
        let json_path = cli
            .json
            .clone()
            .unwrap_or_else(|| PathBuf::from(format!("loadgen-out/{scenario}.json")));
        let out_dir = json_path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        std::fs::create_dir_all(&out_dir)
            .with_context(|| format!("creating {}", out_dir.display()))?;
        let stem = json_path.file_stem().map_or_else(
            || scenario.to_string(),
            |s| s.to_string_lossy().into_owned(),
        );
        Ok(Self {
            json_path,
            out_dir,
            stem,
        })
    }
}

/// The machine as loadgen found it at the start; `finish` adds the end of the run.
struct MachineStart {
    cpus: usize,
    broker_cpus: Option<CpuSet>,
    loadgen_cpus: Option<CpuSet>,
    load_avg_1m_start: Option<f64>,
}

impl MachineStart {
    /// The machine section of the result file, with the load average and date at the end.
    fn finish(self) -> Machine {
        sweep::machine(
            self.cpus,
            self.broker_cpus.map(|c| c.to_string()),
            self.loadgen_cpus.map(|c| c.to_string()),
            self.load_avg_1m_start,
        )
    }
}

/// The CPU split and, with no `--bootstrap`, the local broker started on its share: returns
/// (local broker, broker CPUs, loadgen CPUs).
fn start_local_broker(
    cli: &Cli,
    available: &CpuSet,
) -> anyhow::Result<(Option<LocalBroker>, Option<CpuSet>, Option<CpuSet>)> {
    if cli.bootstrap.is_some() {
        let broker_cpus = cli.broker_cpus.as_deref().map(CpuSet::parse).transpose()?;
        let loadgen_cpus = cli.loadgen_cpus.as_deref().map(CpuSet::parse).transpose()?;
        return Ok((None, broker_cpus, loadgen_cpus));
    }
    let (default_broker, default_loadgen) = available.split();
    let broker_cpus = cli.broker_cpus.as_deref().map(CpuSet::parse).transpose()?;
    let broker_cpus = broker_cpus.unwrap_or(default_broker);
    let loadgen_cpus = cli.loadgen_cpus.as_deref().map(CpuSet::parse).transpose()?;
    let loadgen_cpus = loadgen_cpus.or(default_loadgen);
    let settings = cli
        .broker_set
        .iter()
        .map(|kv| parse_key_value("--broker-set", kv))
        .collect::<anyhow::Result<_>>()?;
    let options = LocalOptions {
        kind: ServerKind::Sluice,
        binary: broker_proc::find_binary(ServerKind::Sluice, cli.sluice_bin.as_deref())?,
        cpus: Some(broker_cpus.clone()),
        settings,
        data_parent: cli.data_parent.clone().unwrap_or_else(std::env::temp_dir),
    };
    let broker = LocalBroker::start(&options)?;
    eprintln!("sluice-loadgen: started {}", broker.command);
    Ok((Some(broker), Some(broker_cpus), loadgen_cpus))
}

/// The loopback TCP and disk baselines, the disk one in the local broker's data directory
/// (else `--disk-dir`, else here).
fn measure_baselines(
    cli: &Cli,
    local: Option<&LocalBroker>,
    broker_cpus: Option<&CpuSet>,
) -> baseline::Baselines {
    let disk_dir = match local {
        Some(broker) => broker.data_dir(),
        None => cli.disk_dir.clone().unwrap_or_else(|| PathBuf::from(".")),
    };
    eprintln!(
        "sluice-loadgen: measuring baselines (TCP loopback, disk in {})",
        disk_dir.display()
    );
    baseline::measure(&disk_dir, broker_cpus)
}

/// (label, endpoint) of each broker, in run order: the local or `--bootstrap` one with
/// `--client-config`, then any `--compare` with `--compare-client-config` (or, when that is not
/// given, `--client-config`).
fn targets(cli: &Cli, local: Option<&LocalBroker>) -> anyhow::Result<Vec<(String, Endpoint)>> {
    let client_config = key_values("--client-config", &cli.client_config)?;
    let endpoint = |bootstrap: &str, client_config: &[(String, String)]| Endpoint {
        bootstrap: bootstrap.to_string(),
        client_config: client_config.to_vec(),
    };
    let mut targets: Vec<(String, Endpoint)> = match (local, &cli.bootstrap) {
        (Some(broker), _) => vec![(
            "sluice (local)".into(),
            endpoint(&broker.bootstrap, &client_config),
        )],
        (None, Some(bootstrap)) => vec![(bootstrap.clone(), endpoint(bootstrap, &client_config))],
        (None, None) => anyhow::bail!("no broker: give --bootstrap HOST:PORT"),
    };
    if let Some(compare) = &cli.compare {
        // Labels name the output files: keep them distinct even for one broker twice.
        let label = if targets.iter().any(|(l, _)| l == compare) {
            format!("{compare} (2)")
        } else {
            compare.clone()
        };
        let compare_config = if cli.compare_client_config.is_empty() {
            client_config
        } else {
            key_values("--compare-client-config", &cli.compare_client_config)?
        };
        targets.push((label, endpoint(compare, &compare_config)));
    }
    Ok(targets)
}

/// The `KEY=VALUE`s of a repeatable flag, in order.
fn key_values(flag: &str, values: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    values.iter().map(|kv| parse_key_value(flag, kv)).collect()
}

/// The `connect` scenario on every broker in turn: connections/s and CPU per connection;
/// writes the JSON result and prints the table.
fn run_connect(cli: &Cli) -> anyhow::Result<bool> {
    let paths = OutputPaths::resolve(cli, "connect")?;
    let available = CpuSet::available()?;
    let (mut local, _, loadgen_cpus) = start_local_broker(cli, &available)?;
    if let Some(cpus) = &loadgen_cpus {
        cpus.pin_current_thread()
            .with_context(|| format!("pinning loadgen to CPUs {cpus}"))?;
    }
    let connections = cli.connections.unwrap_or(connect::DEFAULT_CONNECTIONS);
    let mut brokers = Vec::new();
    for (i, (label, endpoint)) in targets(cli, local.as_ref())?.iter().enumerate() {
        let is_local = local
            .as_ref()
            .is_some_and(|b| b.bootstrap == endpoint.bootstrap);
        let broker = if is_local { local.take() } else { None };
        let pid = broker
            .as_ref()
            .and_then(LocalBroker::pid)
            .or(external_pid(cli, i));
        let result = connect::run(label, endpoint, connections, pid);
        if let Some(broker) = broker {
            broker.stop()?;
        }
        brokers.push(result?);
    }
    let file = connect::ConnectFile {
        schema: connect::SCHEMA,
        scenario: "connect",
        brokers,
    };
    let text = serde_json::to_string_pretty(&file).context("encoding the JSON result")?;
    std::fs::write(&paths.json_path, text + "\n")
        .with_context(|| format!("writing {}", paths.json_path.display()))?;
    connect::print_table(&file);
    println!("\nwrote {}", paths.json_path.display());
    Ok(true)
}

/// The process to sample for target `i` when loadgen did not start it.
fn external_pid(cli: &Cli, i: usize) -> Option<u32> {
    if i == 0 {
        cli.bootstrap_pid
    } else {
        cli.compare_pid
    }
}

/// The `sweep` scenario: every rate on every target; writes and prints the sweep's outputs.
fn run_sweep(
    cli: &Cli,
    params: &Params,
    scenario: &str,
    targets: &[(String, Endpoint)],
    local: &mut Option<LocalBroker>,
    paths: &OutputPaths,
    machine: MachineStart,
) -> anyhow::Result<bool> {
    let rates = if cli.sweep_rates.is_empty() {
        sweep::DEFAULT_RATES.to_vec()
    } else {
        cli.sweep_rates.clone()
    };
    if rates.contains(&0) {
        anyhow::bail!("--sweep-rates: every rate must be above 0");
    }
    let sweep_targets = targets
        .iter()
        .enumerate()
        .map(|(i, (label, endpoint))| {
            let is_local = local
                .as_ref()
                .is_some_and(|b| b.bootstrap == endpoint.bootstrap);
            sweep::SweepTarget {
                label: label.clone(),
                endpoint: endpoint.clone(),
                local: if is_local { local.take() } else { None },
                pid: external_pid(cli, i),
            }
        })
        .collect();
    let output = sweep::SweepOutput {
        json_path: &paths.json_path,
        out_dir: &paths.out_dir,
        stem: &paths.stem,
    };
    let (file, complete) = sweep::sweep(
        params,
        &rates,
        sweep_targets,
        || machine.finish(),
        &output,
        |i| identity(cli, scenario, i),
    )?;
    sweep::print_table(&file);
    println!(
        "\nwrote {}, {} and the HdrHistogram log of each step beside them",
        paths.json_path.display(),
        paths.out_dir.join(format!("{}.svg", paths.stem)).display()
    );
    Ok(complete)
}

/// One run per target in turn; returns each broker's result and its latency histogram.
#[allow(clippy::type_complexity)]
fn run_each_target(
    cli: &Cli,
    params: &Params,
    scenario: &str,
    targets: &[(String, Endpoint)],
    local: &mut Option<LocalBroker>,
    paths: &OutputPaths,
    baselines: Option<&baseline::Baselines>,
) -> anyhow::Result<(
    Vec<BrokerResult>,
    Vec<(String, hdrhistogram::Histogram<u64>)>,
)> {
    let mut results = Vec::new();
    let mut histograms = Vec::new();
    for (i, (label, endpoint)) in targets.iter().enumerate() {
        let identity = identity(cli, scenario, i);
        let hlog_path = paths
            .out_dir
            .join(format!("{}.{}.hlog", paths.stem, run::slug(label)));
        let is_local = local
            .as_ref()
            .is_some_and(|b| b.bootstrap == endpoint.bootstrap);
        let broker = if is_local { local.take() } else { None };
        let (result, latency) = run_target(
            label,
            endpoint,
            params,
            &identity,
            &hlog_path,
            broker,
            external_pid(cli, i),
            baselines,
        )?;
        results.push(result);
        histograms.push((label.clone(), latency));
    }
    Ok((results, histograms))
}

/// One broker's run: RSS and CPU sampled around it (CPU only for an `external_pid`, a broker
/// loadgen did not start); a local broker is stopped right after (before a `--compare` run, so
/// the second broker has the machine to itself).
#[allow(clippy::too_many_arguments)]
fn run_target(
    label: &str,
    endpoint: &Endpoint,
    params: &Params,
    identity: &RunIdentity,
    hlog_path: &Path,
    local: Option<LocalBroker>,
    external_pid: Option<u32>,
    baselines: Option<&baseline::Baselines>,
) -> anyhow::Result<(BrokerResult, hdrhistogram::Histogram<u64>)> {
    let broker_pid = local.as_ref().and_then(LocalBroker::pid).or(external_pid);
    if let Some(broker) = &local {
        broker.reset_rss();
    }
    let started = std::time::Instant::now();
    let ticks_start = procstat::cpu_ticks();
    let loadgen_cpu_s = procstat::cpu_seconds(None);
    let broker_cpu_s = broker_pid.and_then(|pid| procstat::cpu_seconds(Some(pid)));
    let outcome =
        run::run(endpoint, label, params, identity, hlog_path).map_err(|e| match &local {
            Some(broker) => e.context(broker.describe()),
            None => e,
        })?;
    let wall_s = started.elapsed().as_secs_f64();
    let percent = |start: Option<f64>, end: Option<f64>| {
        start.zip(end).map(|(s, e)| (e - s) / wall_s * 100.0)
    };
    let broker_cpu_used_s = broker_cpu_s
        .zip(broker_pid.and_then(|pid| procstat::cpu_seconds(Some(pid))))
        .map(|(start, end)| end - start);
    let cpu = CpuUse {
        loadgen_percent: percent(loadgen_cpu_s, procstat::cpu_seconds(None)),
        broker_percent: broker_cpu_used_s.map(|used| used / wall_s * 100.0),
        broker_us_per_record: broker_cpu_used_s
            .filter(|_| outcome.sent > 0)
            .map(|used| used * 1e6 / outcome.sent as f64),
        cpu_busy_percent: ticks_start
            .zip(procstat::cpu_ticks())
            .map(|(start, end)| procstat::busy_percent(&start, &end))
            .unwrap_or_default(),
        saturated: None,
    };
    let rss = local.as_ref().and_then(LocalBroker::rss);
    if let Some(broker) = local {
        let stopping = std::time::Instant::now();
        let name = broker.name;
        let status = broker.stop()?;
        eprintln!(
            "sluice-loadgen: stopped the local {name} in {:.1} s ({status})",
            stopping.elapsed().as_secs_f64()
        );
    }
    let result = BrokerResult::new(label, endpoint, &outcome, rss, cpu, baselines, hlog_path);
    Ok((result, outcome.latency))
}

/// Which side of a run was CPU-bound; `None` when the broker's CPUs or either side's use
/// are unknown.
fn saturation(
    cpu: &CpuUse,
    broker_cpus: Option<&CpuSet>,
    loadgen_cpus: &CpuSet,
) -> Option<report::Saturated> {
    let side = |used_percent: Option<f64>, cpus: &CpuSet| {
        let busy: Vec<f64> = cpus
            .ids()
            .iter()
            .filter_map(|&id| cpu.cpu_busy_percent.get(id).copied())
            .collect();
        used_percent.map(|used_percent| report::SideCpu {
            used_percent,
            cores: cpus.len(),
            cpus_busy_percent: (!busy.is_empty())
                .then(|| busy.iter().sum::<f64>() / busy.len() as f64),
        })
    };
    Some(report::Saturated::of(
        side(cpu.broker_percent, broker_cpus?)?,
        side(cpu.loadgen_percent, loadgen_cpus)?,
    ))
}

/// The floor (latency): `sluice-floor` started on `cpus` (the broker's, or with --bootstrap
/// those --loadgen-cpus leaves), the same scenario
/// run against it with `assign()`ing consumers (it has no groups), then stopped. Returns its
/// result, in a broker's layout, and its latency histogram.
fn run_floor(
    cli: &Cli,
    params: &Params,
    scenario: &str,
    cpus: Option<&CpuSet>,
    paths: &OutputPaths,
    baselines: Option<&baseline::Baselines>,
) -> anyhow::Result<(BrokerResult, hdrhistogram::Histogram<u64>)> {
    let options = LocalOptions {
        kind: ServerKind::Floor,
        binary: broker_proc::find_binary(ServerKind::Floor, cli.floor_bin.as_deref())?,
        cpus: cpus.cloned(),
        settings: Vec::new(),
        data_parent: cli.data_parent.clone().unwrap_or_else(std::env::temp_dir),
    };
    let floor = LocalBroker::start(&options)?;
    eprintln!("sluice-loadgen: started the floor: {}", floor.command);
    let floor_params = Params {
        subscribe: false,
        ..params.clone()
    };
    // The floor speaks PLAINTEXT only.
    let endpoint = Endpoint::plaintext(floor.bootstrap.clone());
    let hlog_path = paths
        .out_dir
        .join(format!("{}.{FLOOR_LABEL}.hlog", paths.stem));
    run_target(
        FLOOR_LABEL,
        &endpoint,
        &floor_params,
        &identity(cli, scenario, FLOOR_TARGET),
        &hlog_path,
        Some(floor),
        None,
        baselines,
    )
}

/// The floor's label in the table, the JSON and its HdrHistogram log's name.
const FLOOR_LABEL: &str = "floor";
/// The floor's target index for its run id (after the broker and a `--compare`).
const FLOOR_TARGET: usize = 2;

/// The run id stamped into every record and the topic name of the run on broker `target`
/// (distinct per broker, so that `--compare` with the same broker twice keeps them apart).
fn identity(cli: &Cli, scenario: &str, target: usize) -> RunIdentity {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let run_id = ((u64::from(std::process::id()) << 32) | u64::from(nanos)) + target as u64;
    RunIdentity {
        run_id,
        topic: cli
            .topic
            .clone()
            .unwrap_or_else(|| format!("sluice-loadgen-{scenario}-{run_id:016x}")),
    }
}
