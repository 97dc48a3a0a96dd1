//! Per-shard metrics and their Prometheus rendering (`GET /metrics` on the admin port).
//!
//! Each shard counts into its own [`ShardMetrics`] (plain `Cell`s: one executor, no atomics on
//! the data path). A scrape asks every shard for a [`ShardSnapshot`] over the mesh and renders
//! them with `prometheus-client`, one `shard` label per shard.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::time::Duration;

/// Upper bounds of the request latency buckets, in µs.
pub const LATENCY_BUCKETS_US: [u64; 14] = [
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000,
];

/// A latency histogram with fixed buckets ([`LATENCY_BUCKETS_US`] plus +Inf).
#[derive(Clone, Debug, Default)]
pub struct LatencyHistogram {
    /// Per bucket (not cumulative); the last is +Inf.
    pub counts: [u64; LATENCY_BUCKETS_US.len() + 1],
    pub sum_us: u64,
    pub count: u64,
}

impl LatencyHistogram {
    pub fn record(&mut self, took: Duration) {
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        let bucket = LATENCY_BUCKETS_US.partition_point(|&b| b < us);
        self.counts[bucket] += 1;
        self.sum_us = self.sum_us.saturating_add(us);
        self.count += 1;
    }
}

/// Counters of one shard.
#[derive(Default)]
pub struct ShardMetrics {
    pub produce_requests: Cell<u64>,
    pub produce_bytes: Cell<u64>,
    pub fetch_requests: Cell<u64>,
    pub fetch_bytes: Cell<u64>,
    /// Messages this shard sent to other shards.
    pub cross_shard_messages: Cell<u64>,
    /// Fetches parked on this shard's partitions right now.
    pub parked_fetches: Cell<i64>,
    /// Request latency by API name, decode to response ready.
    pub request_latency: RefCell<BTreeMap<&'static str, LatencyHistogram>>,
    /// The shard's log cleaner (`cleaner.rs`).
    pub cleaner: Cell<CleanerGauges>,
}

/// What the shard's log cleaner reports (Kafka's `kafka.log:type=LogCleaner*` metrics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CleanerGauges {
    /// Passes completed, bytes they read, and bytes they gave back to the disk.
    pub passes: u64,
    pub dirty_bytes_cleaned: u64,
    pub bytes_reclaimed: u64,
    /// The last pass's wall time, ms.
    pub last_clean_time_ms: u64,
    /// The last pass's bytes written as a percent of the bytes it replaced.
    pub recopy_percent: u64,
    /// Highest dirty ratio (percent) and `max.compaction.lag.ms` overdue time (s) among the
    /// shard's compacted logs at the last round.
    pub max_dirty_percent: i64,
    pub max_compaction_delay_secs: i64,
    /// Partitions whose cleaning failed and that are skipped.
    pub uncleanable_partitions: usize,
}

impl ShardMetrics {
    pub fn add(cell: &Cell<u64>, n: u64) {
        cell.set(cell.get().saturating_add(n));
    }

    pub fn record_latency(&self, api: &'static str, took: Duration) {
        self.request_latency
            .borrow_mut()
            .entry(api)
            .or_default()
            .record(took);
    }

    /// Changes the cleaner's gauges in place.
    pub fn update_cleaner(&self, f: impl FnOnce(&mut CleanerGauges)) {
        let mut g = self.cleaner.get();
        f(&mut g);
        self.cleaner.set(g);
    }
}

/// One partition's offsets, for `/v1/status` and lag.
#[derive(Clone, Debug)]
pub struct PartitionStatus {
    pub topic: String,
    pub partition: i32,
    pub log_start_offset: i64,
    pub high_watermark: i64,
    pub log_end_offset: i64,
    pub size_bytes: u64,
}

/// Everything one shard reports to a scrape (`Send`: it crosses shards).
#[derive(Clone, Debug, Default)]
pub struct ShardSnapshot {
    pub shard: usize,
    pub produce_requests: u64,
    pub produce_bytes: u64,
    pub fetch_requests: u64,
    pub fetch_bytes: u64,
    pub cross_shard_messages: u64,
    pub parked_fetches: i64,
    /// Open incremental fetch sessions (KIP-227).
    pub fetch_sessions: usize,
    pub connections: usize,
    pub cache_hits: u64,
    pub cache_misses: u64,
    pub cache_used_bytes: usize,
    pub request_latency: Vec<(&'static str, LatencyHistogram)>,
    /// Log `fdatasync` latency summed over the shard's partitions, log2 µs buckets as in
    /// `storage::LogStats::sync_latency_us_log2`.
    pub sync_latency_us_log2: [u64; storage::SYNC_LATENCY_BUCKETS],
    /// `storage::LogStats::write_latency_us_log2`, summed over the shard's partitions.
    pub write_latency_us_log2: [u64; storage::SYNC_LATENCY_BUCKETS],
    /// O_DIRECT writes of this shard's partition logs, and their bytes.
    pub log_writes: u64,
    pub log_write_bytes: u64,
    pub partitions: Vec<PartitionStatus>,
    /// Committed offsets of the groups this shard coordinates.
    pub committed: Vec<crate::groups::CommittedStatus>,
    /// The shard's log cleaner.
    pub cleaner: CleanerGauges,
}

/// Renders snapshots in the Prometheus text format.
pub fn render(snapshots: Vec<ShardSnapshot>) -> String {
    let mut registry = Registry::with_prefix("sluice");
    registry.register_collector(Box::new(Snapshots(snapshots)));
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
    out
}

#[derive(Debug)]
struct Snapshots(Vec<ShardSnapshot>);

type Labels = Vec<(String, String)>;
/// One histogram series: labels, sum (seconds), count, cumulative (upper bound s, count).
type HistogramRow = (Labels, f64, u64, Vec<(f64, u64)>);

fn shard_label(s: &ShardSnapshot) -> Labels {
    vec![("shard".to_string(), s.shard.to_string())]
}

fn counter(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: &[(Labels, u64)],
) -> std::fmt::Result {
    let mut metric = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, v) in rows {
        ConstCounter::new(*v).encode(metric.encode_family(labels)?)?;
    }
    Ok(())
}

fn gauge(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: &[(Labels, i64)],
) -> std::fmt::Result {
    let mut metric = enc.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, v) in rows {
        ConstGauge::new(*v).encode(metric.encode_family(labels)?)?;
    }
    Ok(())
}

fn histogram(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: &[HistogramRow],
) -> std::fmt::Result {
    let mut metric = enc.encode_descriptor(name, help, None, MetricType::Histogram)?;
    for (labels, sum, count, buckets) in rows {
        metric
            .encode_family(labels)?
            .encode_histogram::<Labels>(*sum, *count, buckets, None)?;
    }
    Ok(())
}

/// A histogram row from log2 buckets (entry `i` counts values below `2^i` µs, the last one
/// also everything slower), its sum approximated with each bucket's midpoint.
fn log2_histogram(labels: Labels, counts: &[u64]) -> HistogramRow {
    let mut count = 0;
    let mut sum = 0.0;
    let mut buckets = Vec::with_capacity(counts.len());
    for (i, &n) in counts.iter().enumerate() {
        count += n;
        let upper_us = (1u64 << i) as f64;
        sum += n as f64 * upper_us * 0.75 / 1e6;
        let bound = if i + 1 == counts.len() {
            f64::INFINITY
        } else {
            upper_us / 1e6
        };
        // Per-bucket counts: the encoder makes them cumulative itself.
        buckets.push((bound, n));
    }
    (labels, sum, count, buckets)
}

impl Collector for Snapshots {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        self.encode_traffic(&mut enc)?;
        self.encode_cleaner(&mut enc)?;
        self.encode_shard_gauges(&mut enc)?;
        self.encode_latencies(&mut enc)?;
        self.encode_high_watermarks(&mut enc)?;
        self.encode_group_lag(&mut enc)
    }
}

impl Snapshots {
    /// Request, byte, write and cache counters per shard.
    fn encode_traffic(&self, enc: &mut DescriptorEncoder) -> std::fmt::Result {
        let per_shard = |f: fn(&ShardSnapshot) -> u64| -> Vec<(Labels, u64)> {
            self.0.iter().map(|s| (shard_label(s), f(s))).collect()
        };
        counter(
            enc,
            "produce_requests",
            "Produce requests handled.",
            &per_shard(|s| s.produce_requests),
        )?;
        counter(
            enc,
            "produce_bytes",
            "Record bytes produced (batches as received), bytes.",
            &per_shard(|s| s.produce_bytes),
        )?;
        counter(
            enc,
            "fetch_requests",
            "Fetch requests handled.",
            &per_shard(|s| s.fetch_requests),
        )?;
        counter(
            enc,
            "fetch_bytes",
            "Record bytes returned by fetches, bytes.",
            &per_shard(|s| s.fetch_bytes),
        )?;
        counter(
            enc,
            "cross_shard_messages",
            "Messages sent to other shards.",
            &per_shard(|s| s.cross_shard_messages),
        )?;
        counter(
            enc,
            "log_writes",
            "O_DIRECT writes of partition logs completed (group-committed: one per burst).",
            &per_shard(|s| s.log_writes),
        )?;
        counter(
            enc,
            "log_write_bytes",
            "Bytes written by those writes (aligned blocks, tail rewrites included), bytes.",
            &per_shard(|s| s.log_write_bytes),
        )?;
        counter(
            enc,
            "batch_cache_hits",
            "Reads answered from the batch cache.",
            &per_shard(|s| s.cache_hits),
        )?;
        counter(
            enc,
            "batch_cache_misses",
            "Reads the batch cache could not answer.",
            &per_shard(|s| s.cache_misses),
        )?;
        Ok(())
    }

    /// The log cleaner's counters and gauges per shard (Kafka's cleaner metrics).
    fn encode_cleaner(&self, enc: &mut DescriptorEncoder) -> std::fmt::Result {
        let per_shard = |f: fn(&ShardSnapshot) -> u64| -> Vec<(Labels, u64)> {
            self.0.iter().map(|s| (shard_label(s), f(s))).collect()
        };
        let gauges = |f: fn(&ShardSnapshot) -> i64| -> Vec<(Labels, i64)> {
            self.0.iter().map(|s| (shard_label(s), f(s))).collect()
        };
        counter(
            enc,
            "log_cleaner_passes",
            "Log cleaner passes completed.",
            &per_shard(|s| s.cleaner.passes),
        )?;
        counter(
            enc,
            "log_cleaner_dirty_bytes_cleaned",
            "Bytes the log cleaner read, bytes.",
            &per_shard(|s| s.cleaner.dirty_bytes_cleaned),
        )?;
        counter(
            enc,
            "log_cleaner_bytes_reclaimed",
            "Bytes compaction removed from the logs, bytes.",
            &per_shard(|s| s.cleaner.bytes_reclaimed),
        )?;
        gauge(
            enc,
            "log_cleaner_max_clean_time_secs",
            "Wall time of the cleaner's last pass, seconds (Kafka's max-clean-time-secs).",
            &gauges(|s| i64::try_from(s.cleaner.last_clean_time_ms / 1000).unwrap_or(i64::MAX)),
        )?;
        gauge(
            enc,
            "log_cleaner_cleaner_recopy_percent",
            "Bytes the last pass wrote as a percent of those it replaced.",
            &gauges(|s| i64::try_from(s.cleaner.recopy_percent).unwrap_or(i64::MAX)),
        )?;
        gauge(
            enc,
            "log_cleaner_max_dirty_percent",
            "Highest dirty ratio of the shard's compacted logs, percent.",
            &gauges(|s| s.cleaner.max_dirty_percent),
        )?;
        gauge(
            enc,
            "log_cleaner_max_compaction_delay_secs",
            "Longest wait past max.compaction.lag.ms among the shard's compacted logs, seconds.",
            &gauges(|s| s.cleaner.max_compaction_delay_secs),
        )?;
        gauge(
            enc,
            "log_cleaner_uncleanable_partitions_count",
            "Compacted partitions the cleaner skips after a failed pass.",
            &gauges(|s| i64::try_from(s.cleaner.uncleanable_partitions).unwrap_or(i64::MAX)),
        )?;
        Ok(())
    }

    /// Parked fetches, fetch sessions, connections, partitions and cache bytes per shard.
    fn encode_shard_gauges(&self, enc: &mut DescriptorEncoder) -> std::fmt::Result {
        let gauges = |f: fn(&ShardSnapshot) -> i64| -> Vec<(Labels, i64)> {
            self.0.iter().map(|s| (shard_label(s), f(s))).collect()
        };
        gauge(
            enc,
            "parked_fetches",
            "Fetches waiting for data on this shard.",
            &gauges(|s| s.parked_fetches),
        )?;
        gauge(
            enc,
            "fetch_sessions",
            "Open incremental fetch sessions (KIP-227; Kafka's NumIncrementalFetchSessions).",
            &gauges(|s| i64::try_from(s.fetch_sessions).unwrap_or(i64::MAX)),
        )?;
        gauge(
            enc,
            "connections",
            "Open client connections.",
            &gauges(|s| i64::try_from(s.connections).unwrap_or(i64::MAX)),
        )?;
        gauge(
            enc,
            "partitions_owned",
            "Partitions this shard owns.",
            &gauges(|s| i64::try_from(s.partitions.len()).unwrap_or(i64::MAX)),
        )?;
        gauge(
            enc,
            "batch_cache_used_bytes",
            "Bytes held by the batch cache.",
            &gauges(|s| i64::try_from(s.cache_used_bytes).unwrap_or(i64::MAX)),
        )?;
        Ok(())
    }

    /// Request, flush and write latency histograms per shard.
    fn encode_latencies(&self, enc: &mut DescriptorEncoder) -> std::fmt::Result {
        let latency: Vec<_> = self
            .0
            .iter()
            .flat_map(|s| {
                s.request_latency.iter().map(move |(api, h)| {
                    let mut labels = shard_label(s);
                    labels.push(("api".to_string(), (*api).to_string()));
                    // Per-bucket counts: the encoder makes them cumulative itself.
                    let buckets: Vec<(f64, u64)> = h
                        .counts
                        .iter()
                        .enumerate()
                        .map(|(i, &n)| {
                            let bound = LATENCY_BUCKETS_US
                                .get(i)
                                .map_or(f64::INFINITY, |&us| us as f64 / 1e6);
                            (bound, n)
                        })
                        .collect();
                    (labels, h.sum_us as f64 / 1e6, h.count, buckets)
                })
            })
            .collect();
        histogram(
            enc,
            "request_latency_seconds",
            "Time from request decoded to response ready.",
            &latency,
        )?;
        let log2_rows = |f: fn(&ShardSnapshot) -> &[u64]| -> Vec<HistogramRow> {
            self.0
                .iter()
                .map(|s| log2_histogram(shard_label(s), f(s)))
                .collect()
        };
        histogram(
            enc,
            "flush_latency_seconds",
            "Log fdatasync latency (sum approximated from buckets).",
            &log2_rows(|s| &s.sync_latency_us_log2),
        )?;
        histogram(
            enc,
            "write_latency_seconds",
            "Log O_DIRECT write latency, submission to completion (sum approximated from buckets).",
            &log2_rows(|s| &s.write_latency_us_log2),
        )?;
        Ok(())
    }

    /// The high watermark of every partition.
    fn encode_high_watermarks(&self, enc: &mut DescriptorEncoder) -> std::fmt::Result {
        let mut offsets = enc.encode_descriptor(
            "partition_high_watermark",
            "High watermark per partition (offset).",
            None,
            MetricType::Gauge,
        )?;
        for s in &self.0 {
            for p in &s.partitions {
                let labels: Labels = vec![
                    ("shard".into(), s.shard.to_string()),
                    ("topic".into(), p.topic.clone()),
                    ("partition".into(), p.partition.to_string()),
                ];
                ConstGauge::new(p.high_watermark).encode(offsets.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }

    /// Each group's lag per partition it committed.
    fn encode_group_lag(&self, enc: &mut DescriptorEncoder) -> std::fmt::Result {
        // Lag joins each committed offset with its partition's high watermark, which may live
        // on another shard than the group.
        let high_watermarks: std::collections::HashMap<(&str, i32), i64> = self
            .0
            .iter()
            .flat_map(|s| s.partitions.iter())
            .map(|p| ((p.topic.as_str(), p.partition), p.high_watermark))
            .collect();
        let mut lag = enc.encode_descriptor(
            "consumer_group_lag",
            "Messages between a group's committed offset and the partition's high watermark.",
            None,
            MetricType::Gauge,
        )?;
        for s in &self.0 {
            for c in &s.committed {
                let Some(hw) = high_watermarks.get(&(c.topic.as_str(), c.partition)) else {
                    continue;
                };
                let labels: Labels = vec![
                    ("group".into(), c.group.clone()),
                    ("topic".into(), c.topic.clone()),
                    ("partition".into(), c.partition.to_string()),
                ];
                ConstGauge::new((hw - c.offset).max(0)).encode(lag.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

/// `/v1/status` body.
pub fn status_json(snapshots: &[ShardSnapshot]) -> serde_json::Value {
    serde_json::json!({
        "status": "ok",
        "shards": snapshots.iter().map(|s| serde_json::json!({
            "shard": s.shard,
            "connections": s.connections,
            "partitions": s.partitions.iter().map(|p| serde_json::json!({
                "topic": p.topic,
                "partition": p.partition,
                "log_start_offset": p.log_start_offset,
                "high_watermark": p.high_watermark,
                "log_end_offset": p.log_end_offset,
                "size_bytes": p.size_bytes,
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}
