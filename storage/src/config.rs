//! Per-log configuration, with Kafka's topic property names and defaults.
//!
//! This is the one typed declaration of the topic properties the log acts on: tuning's
//! `TopicConfig` embeds a `LogConfig` and parses Kafka's property strings straight into it
//! (its tests check these defaults against Kafka's), so nothing converts between two copies.

use std::time::Duration;

/// `cleanup.policy`, a list in Kafka: `delete`, `compact`, both, or empty.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CleanupPolicy {
    /// `delete`: delete whole closed segments by `retention.ms` / `retention.bytes`.
    #[default]
    Delete,
    /// `compact`: the cleaner keeps the latest record of each key (issue #27); retention
    /// deletes nothing.
    Compact,
    /// `compact,delete`: compacted, and retention deletes old closed segments as well.
    CompactDelete,
    /// The empty list: neither delete nor compact; segments are kept whatever the retention
    /// settings say (Kafka 4.x's empty `cleanup.policy`).
    NoCleanup,
}

impl CleanupPolicy {
    /// The Kafka spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            CleanupPolicy::Delete => "delete",
            CleanupPolicy::Compact => "compact",
            CleanupPolicy::CompactDelete => "compact,delete",
            CleanupPolicy::NoCleanup => "",
        }
    }

    /// Whether the cleaner compacts the log.
    pub fn compacts(self) -> bool {
        matches!(self, CleanupPolicy::Compact | CleanupPolicy::CompactDelete)
    }

    /// Whether `retention.ms` / `retention.bytes` delete segments.
    pub fn deletes(self) -> bool {
        matches!(self, CleanupPolicy::Delete | CleanupPolicy::CompactDelete)
    }
}

/// The cleaner's settings of one log (Kafka's topic properties of compaction).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CompactionConfig {
    /// `min.cleanable.dirty.ratio`: the log is cleaned once dirty bytes / cleanable bytes reach
    /// this (0 to 1). Default 0.5.
    pub min_cleanable_dirty_ratio: f64,
    /// `min.compaction.lag.ms`: a record stays uncompacted at least this long after it was
    /// written (by its batch's max timestamp). Default 0.
    pub min_compaction_lag: Duration,
    /// `max.compaction.lag.ms`: a dirty record older than this makes the log cleanable whatever
    /// its dirty ratio. Default `None` (Kafka's Long.MAX).
    pub max_compaction_lag: Option<Duration>,
    /// `delete.retention.ms`: how long a tombstone is kept after its segment was first cleaned
    /// (KIP-534's delete horizon). Default 1 day.
    pub delete_retention: Duration,
}

impl Default for CompactionConfig {
    fn default() -> Self {
        CompactionConfig {
            min_cleanable_dirty_ratio: 0.5,
            min_compaction_lag: Duration::ZERO,
            max_compaction_lag: None,
            delete_retention: Duration::from_secs(24 * 3600),
        }
    }
}

/// The broker's cleaner settings (Kafka's `log.cleaner.*` broker properties), one cleaner per
/// shard.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CleanerConfig {
    /// `log.cleaner.enable`. Default true.
    pub enable: bool,
    /// `log.cleaner.threads`: Kafka's cleaner threads per broker. Sluice runs one cleaner per
    /// shard for any count but 0, which runs none (as Kafka with no cleaner thread). Default 1.
    pub threads: usize,
    /// `log.cleaner.backoff.ms`: sleep when no log is cleanable. Default 15 s.
    pub backoff: Duration,
    /// `log.cleaner.dedupe.buffer.size`: bytes of the offset map, over all of a broker's
    /// cleaners (each shard takes its share). Default 128 MiB.
    pub dedupe_buffer_bytes: u64,
    /// `log.cleaner.io.buffer.size`: bytes of one read or write buffer of the cleaner.
    /// Default 512 KiB.
    pub io_buffer_bytes: usize,
    /// `log.cleaner.io.max.bytes.per.second`: read plus write rate cap of one cleaner.
    /// Default `None` (Kafka's Double.MAX).
    pub io_max_bytes_per_second: Option<f64>,
}

impl Default for CleanerConfig {
    fn default() -> Self {
        CleanerConfig {
            enable: true,
            threads: 1,
            backoff: Duration::from_secs(15),
            dedupe_buffer_bytes: 128 << 20,
            io_buffer_bytes: 512 << 10,
            io_max_bytes_per_second: None,
        }
    }
}

/// Configuration of one partition log. Field names follow Kafka's topic properties
/// (`segment.bytes` → `segment_bytes`, …); `tuning::config::TopicConfig` parses property
/// strings into it.
#[derive(Clone, Debug, PartialEq)]
pub struct LogConfig {
    /// `segment.bytes`: a segment rolls before it would exceed this many bytes. Kafka default
    /// 1 GiB; at most `i32::MAX`.
    pub segment_bytes: u64,
    /// Disk is reserved (fallocate) for the active segment in steps of at most this many
    /// bytes, up to `segment_bytes`, always before an append is accepted: writes never
    /// allocate blocks and never fail for space, yet a new partition does not reserve a whole
    /// segment at once. A segment's first step is 2 MiB (or this, if smaller) and each later
    /// one as large as what the segment holds reserved, up to this. Default 64 MiB.
    pub preallocate_step_bytes: u64,
    /// `segment.ms`: a non-empty segment rolls once its first append is this old. Default 7 days.
    pub segment_ms: Duration,
    /// `index.interval.bytes`: bytes of log between sparse offset/time index entries. Default 4096.
    pub index_interval_bytes: u64,
    /// `flush.messages`: fdatasync after this many records. Default: never (Kafka: Long.MAX).
    pub flush_messages: u64,
    /// `flush.ms`: fdatasync data older than this. Default: never (Kafka: Long.MAX).
    pub flush_ms: Option<Duration>,
    /// `retention.ms`: delete closed segments whose newest timestamp is older. Default 7 days;
    /// `None` keeps data forever (Kafka's -1).
    pub retention_ms: Option<Duration>,
    /// `retention.bytes`: delete oldest closed segments while the log exceeds this. Default
    /// `None` (Kafka's -1, unlimited).
    pub retention_bytes: Option<u64>,
    /// `cleanup.policy`: whether `retention.ms` / `retention.bytes` delete segments at all.
    /// Default [`CleanupPolicy::Delete`].
    pub cleanup_policy: CleanupPolicy,
    /// The compaction properties; used when `cleanup_policy` compacts.
    pub compaction: CompactionConfig,
    /// `message.timestamp.type=LogAppendTime`: the log stamps each batch with the wall-clock
    /// append time (ms) instead of keeping the producer's timestamps. Default false
    /// (CreateTime).
    pub log_append_time: bool,
    /// `max.message.bytes`: largest batch accepted, in bytes. Kafka default 1048588.
    pub max_message_bytes: usize,
    /// Largest single O_DIRECT write the log submits, in bytes (multiple of 4096). Default
    /// 256 KiB: 16 in flight fit the runtime's 10 MiB registered I/O pool (`io.rs`), where
    /// 1 MiB writes spilled to page-faulting heap buffers (45 % vs 68 % of raw bandwidth,
    /// docs/benchmarks.md).
    pub write_chunk_bytes: usize,
    /// Most O_DIRECT writes in flight per log.
    pub writes_in_flight_max: usize,
    /// How far past the logical end, in bytes, the log keeps the preallocated space written
    /// with zeros, in the background and 256 KiB at a time: data writes then overwrite written
    /// blocks, which io_uring does inline, instead of converting fallocate's unwritten extents,
    /// which ext4 cannot do without blocking, so the kernel hands such a write to an io-wq
    /// worker thread. Costs one extra device write of every byte. 0 turns it off. Default 1 MiB.
    pub zero_ahead_bytes: u64,
    /// Bound on appended bytes not yet written to disk; appends wait (backpressure) beyond it.
    pub unwritten_bytes_max: usize,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            preallocate_step_bytes: 64 << 20,
            segment_ms: Duration::from_secs(7 * 24 * 3600),
            index_interval_bytes: 4096,
            flush_messages: u64::MAX,
            flush_ms: None,
            retention_ms: Some(Duration::from_secs(7 * 24 * 3600)),
            retention_bytes: None,
            cleanup_policy: CleanupPolicy::Delete,
            compaction: CompactionConfig::default(),
            log_append_time: false,
            max_message_bytes: 1_048_588,
            write_chunk_bytes: 256 << 10,
            writes_in_flight_max: 16,
            zero_ahead_bytes: 1 << 20,
            unwritten_bytes_max: 64 << 20,
        }
    }
}
