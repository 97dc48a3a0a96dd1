//! The `sluice.toml` loader on arbitrary file contents: `BrokerConfig::apply_toml` (TOML
//! parsing, flattening, every key's parser and range check, the `[[shard]]` sections), then
//! the checks the broker runs after all layers (`check_shard_overrides`, `check_quorum`) and
//! the per-core settings. Each must answer `Ok` or a typed error, never panic. Seed the corpus
//! with `tuning/fuzz/seeds.py` (the documented example files and the tests' inputs).
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;
use tuning::config::BrokerConfig;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut config = BrokerConfig::default();
    if config.apply_toml(text, Path::new("sluice.toml")).is_err() {
        return;
    }
    let _ = config.check_shard_overrides();
    let _ = config.check_quorum();
    for &core in &config.cores {
        let _ = config.shard_settings(core);
    }
    let _ = config.entries();
});
