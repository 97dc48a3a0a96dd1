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
];

/// Default glommio shares of each shard task queue (produce, fetch, background).
pub const TASK_QUEUE_SHARES_DEFAULT: usize = 1000;
/// glommio's default I/O memory per executor, in bytes.
pub const IO_MEMORY_BYTES_DEFAULT: usize = 10 << 20;

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
