//! Per-core tuning: the `sluice tune` probe of cores and the data disk, the host checks, and the
//! tuned config writer.
//!
//! Modules (private; the public surface is the `pub use` list below):
//! - `cpu`: online CPUs, SMT sibling groups, the affinity mask; one shard per physical core.
//! - `disk`: O_DIRECT write/read latency and bandwidth per block size × queue depth on a pinned
//!   glommio executor, and `fdatasync` latency, within a time budget (DESIGN.md §6, §8).
//! - `check`: host settings that hurt latency (memlock, governor, THP, I/O scheduler, swap).
//! - `tuned`: renders `sluice.toml` with the broker's keys and the figures in comments.
//! - `cli`: [`TuneArgs`] and [`run`], mounted by the broker as `sluice tune`.
//! - [`config`]: the config model — broker and topic properties (Kafka names and defaults),
//!   `[[shard]]` per-core sections, TOML flattening and validation; the broker reads it.
//! - [`kafka_keys`]: the tables of Kafka 4.4's topic properties (type, default, synonyms) and
//!   of the `server.properties` keys Sluice refuses, with the reason.
//!
//! Nothing here runs on a broker shard: `sluice tune` is a separate command that starts its own
//! executor, so blocking sysfs reads are fine outside it.

mod check;
mod cli;
pub mod config;
mod cpu;
mod disk;
mod error;
pub mod kafka_keys;
mod tuned;

pub use check::{
    block_device_of, check_governor, check_memlock, check_scheduler, check_swap, check_thp,
    run_checks, selected_choice, BlockDevice, Check, CheckStatus, MEMLOCK_BYTES_MIN,
};
pub use cli::{run, TuneArgs};
pub use cpu::{choose_shard_cpus, parse_cpu_list, probe_cpus, render_cores, CpuTopology};
pub use disk::{
    parse_loadavg_1m, parse_proc_stat_ticks, probe_disk, CellResult, DiskProbeConfig, DiskReport,
    FsyncResult, IoKind, LatencySummary, BLOCK_SIZES_BYTES, QUEUE_DEPTHS,
};
pub use error::TuneError;
pub use tuned::{
    batch_cache_bytes, parse_meminfo_total_bytes, render_config, segment_bytes,
    write_pattern_reasoning, TuneInputs, ALLOWED_KEYS,
};
