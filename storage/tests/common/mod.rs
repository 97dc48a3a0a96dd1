//! Helpers shared by the storage integration tests.
#![allow(dead_code)]

use bytes::Bytes;
use glommio::LocalExecutorBuilder;
use std::future::Future;
use storage::{build_batch, BatchCache, LogConfig, PartitionLog, TimestampMs};

/// Runs `f` on a fresh glommio executor (one shard) and returns its output.
pub fn run<F, T>(f: impl FnOnce() -> F + Send + 'static) -> T
where
    F: Future<Output = T> + 'static,
    T: Send + 'static,
{
    LocalExecutorBuilder::default()
        .spawn(f)
        .expect("spawn executor")
        .join()
        .expect("executor thread")
}

/// A batch of `n` records of `value_bytes` bytes each, timestamps from `ts`.
pub fn batch(ts: i64, n: usize, value_bytes: usize) -> Bytes {
    let values: Vec<Vec<u8>> = (0..n).map(|i| vec![(i % 251) as u8; value_bytes]).collect();
    let refs: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
    build_batch(TimestampMs(ts), &refs)
}

/// Small segments so tests roll often.
pub fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 64 << 10,
        index_interval_bytes: 1024,
        ..LogConfig::default()
    }
}

pub async fn open(dir: &std::path::Path, config: LogConfig, cache_bytes: usize) -> PartitionLog {
    PartitionLog::open(dir, config, &BatchCache::new(cache_bytes))
        .await
        .expect("open log")
}

/// The log's leader-epoch cache as `(epoch, start offset)` pairs.
pub fn epoch_starts(log: &PartitionLog) -> Vec<(i32, i64)> {
    log.leader_epochs()
        .entries()
        .iter()
        .map(|e| (e.epoch.0, e.start_offset.0))
        .collect()
}

/// The bytes of `batch` as the log stores it at `base`: baseOffset and leader epoch stamped.
pub fn stamped(batch: &[u8], base: i64, epoch: i32) -> Vec<u8> {
    let mut v = batch.to_vec();
    v[0..8].copy_from_slice(&base.to_be_bytes());
    v[12..16].copy_from_slice(&epoch.to_be_bytes());
    v
}
