//! Per-log configuration, with Kafka's topic property names and defaults.
//!
//! This is the one typed declaration of the topic properties the log acts on: tuning's
//! `TopicConfig` embeds a `LogConfig` and parses Kafka's property strings straight into it
//! (its tests check these defaults against Kafka's), so nothing converts between two copies.

use std::time::Duration;

/// `cleanup.policy`, a list in Kafka (`delete`, `compact`, both, or empty). Sluice does not
/// compact logs: the config parser refuses a list naming `compact`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CleanupPolicy {
    /// `delete`: delete whole closed segments by `retention.ms` / `retention.bytes`.
    #[default]
    Delete,
    /// The empty list: neither delete nor compact; segments are kept whatever the retention
    /// settings say (Kafka 4.x's empty `cleanup.policy`).
    NoCleanup,
}

impl CleanupPolicy {
    /// The Kafka spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            CleanupPolicy::Delete => "delete",
            CleanupPolicy::NoCleanup => "",
        }
    }
}

/// Configuration of one partition log. Field names follow Kafka's topic properties
/// (`segment.bytes` → `segment_bytes`, …); `tuning::config::TopicConfig` parses property
/// strings into it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogConfig {
    /// `segment.bytes`: a segment rolls before it would exceed this many bytes. Kafka default
    /// 1 GiB; at most `i32::MAX`.
    pub segment_bytes: u64,
    /// Disk is reserved (fallocate) for the active segment in steps of this many bytes, up to
    /// `segment_bytes`, always before an append is accepted: writes never allocate blocks and
    /// never fail for space, yet a new partition does not reserve a whole segment at once.
    /// Set it to `segment_bytes` to preallocate each segment whole. Default 64 MiB.
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
    /// `message.timestamp.type=LogAppendTime`: the log stamps each batch with the wall-clock
    /// append time (ms) instead of keeping the producer's timestamps. Default false
    /// (CreateTime).
    pub log_append_time: bool,
    /// `max.message.bytes`: largest batch accepted, in bytes. Kafka default 1048588.
    pub max_message_bytes: usize,
    /// Largest single O_DIRECT write the log submits, in bytes (multiple of 4096). Default
    /// 256 KiB: 16 in flight fit glommio's 10 MiB registered I/O pool, where 1 MiB writes
    /// spilled to page-faulting heap buffers (45 % vs 68 % of raw bandwidth, docs/benchmarks.md).
    pub write_chunk_bytes: usize,
    /// Most O_DIRECT writes in flight per log.
    pub writes_in_flight_max: usize,
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
            log_append_time: false,
            max_message_bytes: 1_048_588,
            write_chunk_bytes: 256 << 10,
            writes_in_flight_max: 16,
            unwritten_bytes_max: 64 << 20,
        }
    }
}
