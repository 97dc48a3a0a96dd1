//! `sluice tune`: the command-line entry the broker's CLI mounts as a subcommand.
//!
//! Runs on the calling thread: reads sysfs/procfs directly (blocking is fine, no executor runs
//! here) and starts its own pinned glommio executor for the disk probe.

use crate::check::{run_checks, CheckStatus};
use crate::cpu::probe_cpus;
use crate::disk::{probe_disk, DiskProbeConfig};
use crate::tuned::{parse_meminfo_total_bytes, render_config, TuneInputs};
use anyhow::Context as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Arguments of `sluice tune` (use with `#[command(subcommand)]` via a variant holding it, or
/// `#[command(flatten)]`).
#[derive(Clone, Debug, clap::Args)]
pub struct TuneArgs {
    /// Data directory whose disk is probed (a temp file is written there and removed).
    #[arg(long, default_value = "./data")]
    pub data_dir: PathBuf,
    /// Where to write the tuned config; `-` for stdout.
    #[arg(long, default_value = "sluice.toml")]
    pub out: PathBuf,
    /// Time budget of the disk probe, in seconds (at least 1).
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub budget_secs: u64,
    /// Only check host settings that hurt latency, print `ok:`/`warn:`/`skip:` lines, exit 0.
    #[arg(long)]
    pub check: bool,
}

/// Runs `sluice tune` with `args`: either the host checks (`--check`) or the full probe that
/// writes the tuned config.
///
/// # Errors
/// Only the probe and the config write fail (the directory cannot hold the temp file, O_DIRECT
/// is unsupported, the output cannot be written); `--check` never fails.
pub fn run(args: TuneArgs) -> anyhow::Result<()> {
    let sysfs_cpu = Path::new("/sys/devices/system/cpu");
    let cpus = probe_cpus(sysfs_cpu);
    if args.check {
        let shard_cpus = match &cpus {
            Ok(t) => t.shard_cpus.clone(),
            Err(e) => {
                println!("skip: cores: {}", error_chain(e));
                Vec::new()
            }
        };
        for c in run_checks(&args.data_dir, &shard_cpus) {
            println!("{c}");
        }
        return Ok(());
    }

    let cpus = cpus.context("probing cores")?;
    let mut cfg = DiskProbeConfig::new(&args.data_dir, Duration::from_secs(args.budget_secs));
    cfg.cpu = cpus.shard_cpus.first().copied();
    eprintln!(
        "sluice tune: {} shard CPU(s) {:?}; probing {} for up to {} s ...",
        cpus.shard_cpus.len(),
        cpus.shard_cpus,
        args.data_dir.display(),
        args.budget_secs
    );
    let disk = probe_disk(&cfg)
        .with_context(|| format!("probing the disk under {}", args.data_dir.display()))?;
    let mem_total_bytes = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| parse_meminfo_total_bytes(&t));
    let free_bytes = crate::disk::free_bytes(&args.data_dir).ok();
    let checks = run_checks(&args.data_dir, &cpus.shard_cpus);
    let text = render_config(&TuneInputs {
        cpus: &cpus,
        disk: &disk,
        mem_total_bytes,
        free_bytes,
        checks: &checks,
    });
    if args.out.as_os_str() == "-" {
        std::io::stdout()
            .write_all(text.as_bytes())
            .context("writing the config to stdout")?;
    } else {
        std::fs::write(&args.out, &text)
            .with_context(|| format!("writing {}", args.out.display()))?;
        eprintln!("sluice tune: wrote {}", args.out.display());
    }
    let warnings = checks
        .iter()
        .filter(|c| c.status == CheckStatus::Warn)
        .count();
    if warnings > 0 {
        eprintln!("sluice tune: {warnings} host warning(s); see `sluice tune --check`");
    }
    Ok(())
}

/// `e` and its sources, joined by `: ` (one line for a `skip:`).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cur = c.source();
    }
    out
}
