//! `sluice`: the Kafka-API broker. Parses flags and config, takes the data directory's lock,
//! loads the cluster metadata, and runs one shard per core until stopped. The binary
//! (`src/main.rs`) is glue: it sets up logging and calls [`run`].
//!
//! Modules (private): `runtime` (executors, mesh, listeners), `shard` (per-core state and
//! partition operations), `connection` (one client socket), `handlers` (one file per Kafka
//! API), `controller` + `metadata` (topics, placement), `config`/`cli` (properties), `admin`
//! (HTTP).
//!
//! The public surface is [`run`] and the decoders of bytes a client, a peer broker or a file
//! sends (re-exported below for the fuzz targets in `broker/fuzz`, DESIGN.md §7 and §11): each
//! is pure (no I/O, no executor) and answers a typed error, never a panic, on any input.

mod admin;
mod authz;
mod cleaner;
mod cli;
mod compression;
mod connection;
mod controller;
mod coordinator_runtime;
mod dispatch;
mod dynamic_config;
mod errors;
mod fetch_sessions;
mod groups;
mod handlers;
mod keyed_turns;
mod listener;
mod lockfile;
mod log_dir;
mod messages;
pub(crate) mod meta_properties;
mod metadata;
mod metrics;
mod partition_lifecycle;
mod partitions;
mod peer;
mod produce_checks;
mod publisher;
mod quorum;
mod quotas;
mod replica_fetcher;
mod replication_quota;
mod response;
mod rt;
mod runtime;
mod sasl;
mod seam;
mod send;
mod session;
mod shard;
mod shutdown;
mod tls;
mod txn;

pub use admin::{head_end, parse_request, Request};
pub use produce_checks::{prepare as prepare_produce, ProduceCheckError};
pub use replica_fetcher::fetcher::{
    decode_fetch, decode_list_offsets, listed_offset, FetcherError,
};
pub use sasl::{
    server_nonce as sasl_server_nonce, Now as SaslNow, SaslListener, SaslServer, Step as SaslStep,
};

use clap::Parser;

/// Removes what a deletion left behind when the broker stopped before its background removal
/// (directories ending in [`partition_lifecycle::DELETED_DIR_SUFFIX`]). Runs before the executors start, so
/// blocking file calls are fine here.
fn remove_deleted_partition_dirs(data_dir: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(data_dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if name
            .to_string_lossy()
            .ends_with(partition_lifecycle::DELETED_DIR_SUFFIX)
        {
            if let Err(e) = std::fs::remove_dir_all(entry.path()) {
                tracing::warn!(dir = %entry.path().display(), error = %e, "removing deleted partition directory");
            }
        }
    }
}

/// Runs the broker: flags and config, the data-dir lock, recovery, then the shards until a
/// stop signal (or `sluice tune`).
///
/// # Errors
/// A bad flag or config, a taken data directory, a failed recovery or start-up.
pub fn run() -> anyhow::Result<()> {
    let mut args = cli::Args::parse();
    if let Some(cli::Command::Tune(tune)) = args.command.take() {
        return tuning::run(tune);
    }
    let config = cli::load(args)?;
    let _lock = lockfile::DataDirLock::acquire(&config.data_dir)?;
    anyhow::ensure!(!config.cores.is_empty(), "no cores to run on");
    let startup = controller::bootstrap::recover(&config)?;
    // The cluster id of a recovered log; a new log's is written once it commits.
    let known = (startup.initial_applied.0 > 0).then_some(startup.image.cluster_id.as_str());
    meta_properties::ensure(&config.data_dir, config.node_id, known)?;
    remove_deleted_partition_dirs(&config.data_dir);
    // Before any other thread starts, so that every thread inherits the blocked signals.
    let stop = shutdown::install()?;
    runtime::run(config, startup, stop)?;
    eprintln!("sluice: stopped cleanly");
    Ok(())
}
