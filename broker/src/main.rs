//! `sluice`: the Kafka-API broker. Parses flags and config, takes the data directory's lock,
//! loads the cluster metadata, and runs one shard per core until stopped.
//!
//! Modules: `runtime` (executors, mesh, listeners), `shard` (per-core state and partition
//! operations), `connection` (one client socket), `handlers` (one file per Kafka API),
//! `controller` + `metadata` (topics, placement), `config`/`cli` (properties), `admin` (HTTP).

mod admin;
mod cli;
mod compression;
mod connection;
mod controller;
mod dispatch;
mod dynamic_config;
mod errors;
mod groups;
mod handlers;
mod listener;
mod lockfile;
mod log_dir;
mod messages;
mod metadata;
mod metrics;
mod partitions;
mod produce_checks;
mod quorum;
mod replica_fetcher;
mod runtime;
mod seam;
mod send;
mod shard;
mod shutdown;

use clap::Parser;

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    if let Err(e) = run() {
        eprintln!("sluice: {e:#}");
        std::process::exit(1);
    }
}

/// Removes what a deletion left behind when the broker stopped before its background removal
/// (directories ending in [`shard::DELETED_DIR_SUFFIX`]). Runs before the executors start, so
/// blocking file calls are fine here.
fn remove_deleted_partition_dirs(data_dir: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(data_dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if name.to_string_lossy().ends_with(shard::DELETED_DIR_SUFFIX) {
            if let Err(e) = std::fs::remove_dir_all(entry.path()) {
                tracing::warn!(dir = %entry.path().display(), error = %e, "removing deleted partition directory");
            }
        }
    }
}

fn run() -> anyhow::Result<()> {
    let mut args = cli::Args::parse();
    if let Some(cli::Command::Tune(tune)) = args.command.take() {
        return tuning::run(tune);
    }
    let config = cli::load(args)?;
    let _lock = lockfile::DataDirLock::acquire(&config.data_dir)?;
    anyhow::ensure!(!config.cores.is_empty(), "no cores to run on");
    let startup = controller::bootstrap::recover(&config)?;
    remove_deleted_partition_dirs(&config.data_dir);
    // Before any other thread starts, so that every thread inherits the blocked signals.
    let stop = shutdown::install()?;
    runtime::run(config, startup, stop)?;
    eprintln!("sluice: stopped cleanly");
    Ok(())
}
