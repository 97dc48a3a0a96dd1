//! `[[shard]]` sections of the config file: per-core overrides ([`ShardOverride`]) and the
//! effective settings of one shard ([`ShardSettings`]; computed by
//! `BrokerConfig::shard_settings`).

use super::error::{invalid, ConfigError};
use super::file::flatten_into;
use super::suggest::closest_key;
use super::value::{parse_bool, parse_unsigned};
use std::path::Path;

/// Keys of a `[[shard]]` section.
pub const SHARD_KEYS: &[&str] = &[
    "core",
    "batch.cache.bytes",
    "io.memory.bytes",
    "listen",
    "produce.shares",
    "fetch.shares",
    "background.shares",
    "spin.before.park.us",
];

/// Default glommio shares of each shard task queue (produce, fetch, background).
pub const TASK_QUEUE_SHARES_DEFAULT: usize = 1000;
/// glommio's default I/O memory per executor, in bytes.
pub const IO_MEMORY_BYTES_DEFAULT: usize = 10 << 20;
/// Longest `spin.before.park.us` accepted, in microseconds (1 s: longer buys nothing, the
/// shard's own timers wake it more often than that).
const SPIN_BEFORE_PARK_US_MAX: i64 = 1_000_000;

/// One `[[shard]]` section: overrides for the shard running on CPU `core`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShardOverride {
    /// The CPU id (one of `sluice.cores`).
    pub core: usize,
    /// `batch.cache.bytes`: this shard's batch cache budget, in bytes.
    pub batch_cache_bytes: Option<usize>,
    /// `io.memory.bytes`: glommio I/O (DMA buffer) memory of this executor, in bytes
    /// (≥ 64 KiB); the log writes 256 KiB chunks, 16 in flight per partition.
    pub io_memory_bytes: Option<usize>,
    /// `listen`: whether this shard accepts client connections (it still owns partitions).
    pub listen: Option<bool>,
    /// `produce.shares`, `fetch.shares`, `background.shares`: glommio CPU shares (1–1000) of
    /// the task queues that run produce work, fetch work, and retention.
    pub produce_shares: Option<usize>,
    pub fetch_shares: Option<usize>,
    pub background_shares: Option<usize>,
    /// `spin.before.park.us`: how long the shard's executor polls its rings for new work
    /// before it sleeps in the kernel, in microseconds (0: it sleeps at once, the default).
    /// An opt-in busy-poll mode for a dedicated core, as Redpanda's reactor polls: a request
    /// that arrives within the spin is seen without a wake-up, at the price of a core that
    /// stays busy while the shard is idle.
    pub spin_before_park_us: Option<u64>,
}

/// The effective settings of one shard: [`crate::config::BrokerConfig`] defaults with its
/// `[[shard]]` section applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardSettings {
    pub batch_cache_bytes: usize,
    pub io_memory_bytes: usize,
    pub listen: bool,
    pub produce_shares: usize,
    pub fetch_shares: usize,
    pub background_shares: usize,
    /// Microseconds the executor spins before it parks (0: no spin).
    pub spin_before_park_us: u64,
}

/// Parses the `[[shard]]` array of a TOML document (absent: none).
///
/// # Errors
/// [`ConfigError::ParseFile`] for invalid TOML or a `shard` that is not an array of tables;
/// [`ConfigError::UnknownKey`] (with the closest known key) or [`ConfigError::InvalidValue`]
/// naming `[[shard]] <key>`.
pub fn parse_shard_sections(text: &str, path: &Path) -> Result<Vec<ShardOverride>, ConfigError> {
    let table: toml::Table = toml::from_str(text).map_err(|e| ConfigError::ParseFile {
        path: path.to_owned(),
        why: e.to_string(),
    })?;
    let Some(sections) = table.get("shard") else {
        return Ok(Vec::new());
    };
    let Some(sections) = sections.as_array() else {
        return Err(ConfigError::ParseFile {
            path: path.to_owned(),
            why: "`shard` must be an array of tables: write each as [[shard]]".into(),
        });
    };
    sections
        .iter()
        .map(|s| parse_shard_section(s, path))
        .collect()
}

fn parse_shard_section(section: &toml::Value, path: &Path) -> Result<ShardOverride, ConfigError> {
    let Some(section) = section.as_table() else {
        return Err(ConfigError::ParseFile {
            path: path.to_owned(),
            why: "each [[shard]] must be a table".into(),
        });
    };
    let mut flat = Vec::new();
    flatten_into("", section, &mut flat).map_err(|why| ConfigError::ParseFile {
        path: path.to_owned(),
        why,
    })?;
    let mut o = ShardOverride::default();
    let mut core = None;
    for (key, value) in flat {
        let name = format!("[[shard]] {key}");
        let bytes = |min: u64| -> Result<usize, ConfigError> {
            let n = parse_unsigned(&name, &value, min, i64::MAX)?;
            usize::try_from(n).map_err(|_| invalid(&name, &value, "too large"))
        };
        let shares = || -> Result<usize, ConfigError> {
            let n = parse_unsigned(&name, &value, 1, 1000)?;
            usize::try_from(n).map_err(|_| invalid(&name, &value, "too large"))
        };
        match key.as_str() {
            "core" => core = Some(bytes(0)?),
            "batch.cache.bytes" => o.batch_cache_bytes = Some(bytes(0)?),
            "io.memory.bytes" => o.io_memory_bytes = Some(bytes(64 << 10)?),
            "listen" => o.listen = Some(parse_bool(&name, &value)?),
            "produce.shares" => o.produce_shares = Some(shares()?),
            "fetch.shares" => o.fetch_shares = Some(shares()?),
            "background.shares" => o.background_shares = Some(shares()?),
            "spin.before.park.us" => {
                o.spin_before_park_us =
                    Some(parse_unsigned(&name, &value, 0, SPIN_BEFORE_PARK_US_MAX)?);
            }
            _ => {
                return Err(ConfigError::UnknownKey {
                    suggestion: closest_key(&key, SHARD_KEYS).map(|k| format!("[[shard]] {k}")),
                    key: name,
                })
            }
        }
    }
    o.core = core.ok_or_else(|| invalid("[[shard]] core", "", "each [[shard]] names its core"))?;
    Ok(o)
}
