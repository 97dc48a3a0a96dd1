//! The log cleaner of one shard (issue #27; Kafka's `LogCleaner`, here one cleaner per shard
//! whatever `log.cleaner.threads` says, except that 0 runs none). It compacts the compacted
//! partitions this shard owns — leaders and followers alike, each replica its own log, as
//! Kafka — in the shard's background task queue. It runs in the time produce and fetch leave
//! idle: after each 0.2 ms slice it waits for a moment when nothing else runs, and each of its
//! device requests (at most 128 KiB) waits until no log data write is in flight
//! (`storage::log::compact`'s `Throttle`), so a produce that arrives while it cleans waits at
//! most one slice and queues on the device behind at most one request of it.
//!
//! Each round, as Kafka's `LogCleanerManager.grabFilthiestCompactedLog`: roll the active
//! segment of every compacted log whose first append is older than `segment.ms` (else an
//! idle partition's last records are never cleanable); measure each log's dirtiness; clean
//! the filthiest cleanable one — one overdue by `max.compaction.lag.ms` first, then the
//! highest dirty ratio at or above its `min.cleanable.dirty.ratio`. With nothing cleanable it
//! sleeps `log.cleaner.backoff.ms`. A log whose pass fails (a corrupt batch, an offset map
//! too small for one batch) is marked uncleanable and skipped until this shard owns it anew.
//!
//! Memory: one offset map of this shard's share of `log.cleaner.dedupe.buffer.size` (at least
//! 1 MiB), made on the first pass and reused; reads and writes of
//! `log.cleaner.io.buffer.size`; I/O capped at `log.cleaner.io.max.bytes.per.second`.

use crate::metrics::CleanerGauges;
use crate::shard::{LocalPartition, Shard};
use std::collections::BTreeSet;
use std::rc::Rc;
use storage::{CleanerBuffers, OffsetMap, StorageError, TimestampMs, TopicPartition};

/// Least offset map a shard's cleaner gets, in bytes, however small its share.
const MIN_DEDUPE_BUFFER_BYTES: u64 = 1 << 20;

fn wall_clock_ms() -> TimestampMs {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    TimestampMs(ms)
}

/// Runs the shard's cleaner until shutdown; returns at once when `log.cleaner.enable` is
/// false or `log.cleaner.threads` is 0.
pub async fn cleaner_loop(shard: &Rc<Shard>) {
    let config = shard.config.cleaner;
    if !config.enable || config.threads == 0 {
        return;
    }
    let mut buffers: Option<CleanerBuffers> = None;
    let mut uncleanable: BTreeSet<TopicPartition> = BTreeSet::new();
    loop {
        let now = wall_clock_ms();
        let owned = shard.owned_partitions();
        uncleanable.retain(|tp| owned.iter().any(|(t, _)| t == tp));
        let cleaned = match filthiest_log(shard, &owned, &uncleanable, now).await {
            None => false,
            Some((tp, log)) => {
                let buffers = buffers.get_or_insert_with(|| cleaner_buffers(shard));
                clean_log(shard, tp, &log, now, buffers, &mut uncleanable).await
            }
        };
        let pause = if cleaned {
            std::time::Duration::ZERO
        } else {
            config.backoff
        };
        if shard.sleep_unless_stopped(pause).await {
            return;
        }
    }
}

/// The filthiest cleanable log of `owned` (not `uncleanable`): one overdue by
/// `max.compaction.lag.ms` first, then the highest dirty ratio. Rolls each aged active segment
/// on the way, and sets the cleaner gauges.
async fn filthiest_log(
    shard: &Shard,
    owned: &[(TopicPartition, Rc<LocalPartition>)],
    uncleanable: &BTreeSet<TopicPartition>,
    now: TimestampMs,
) -> Option<(TopicPartition, storage::PartitionLog)> {
    let mut gauges = shard.metrics.cleaner.get();
    gauges.max_dirty_percent = 0;
    gauges.max_compaction_delay_secs = 0;
    gauges.uncleanable_partitions = uncleanable.len();
    // (overdue, ratio) of the filthiest cleanable log.
    let mut filthiest: Option<((bool, f64), TopicPartition, storage::PartitionLog)> = None;
    for (tp, partition) in owned {
        if uncleanable.contains(tp) {
            continue;
        }
        let log = partition.log();
        if let Err(e) = log.roll_if_aged().await {
            tracing::warn!(%tp, error = %e, "rolling an aged compacted segment");
        }
        let dirtiness = match log.dirtiness(now).await {
            Ok(Some(d)) => d,
            Ok(None) => continue,
            Err(e) => {
                tracing::warn!(%tp, error = %e, "measuring a compacted log");
                continue;
            }
        };
        // Ratios are within [0, 1]: their percent fits.
        #[allow(clippy::cast_possible_truncation)]
        let percent = (dirtiness.ratio() * 100.0).round() as i64;
        gauges.max_dirty_percent = gauges.max_dirty_percent.max(percent);
        gauges.max_compaction_delay_secs = gauges
            .max_compaction_delay_secs
            .max(dirtiness.compaction_delay_ms / 1000);
        let min_ratio = log.config().compaction.min_cleanable_dirty_ratio;
        if !dirtiness.is_cleanable(min_ratio) {
            continue;
        }
        let rank = (dirtiness.compaction_delay_ms > 0, dirtiness.ratio());
        if filthiest.as_ref().is_none_or(|(best, _, _)| rank > *best) {
            filthiest = Some((rank, tp.clone(), log.clone()));
        }
    }
    shard.metrics.cleaner.set(gauges);
    filthiest.map(|(_, tp, log)| (tp, log))
}

/// The shard's cleaner buffers: an offset map of its share of `log.cleaner.dedupe.buffer.size`
/// (at least [`MIN_DEDUPE_BUFFER_BYTES`]) and the I/O settings.
fn cleaner_buffers(shard: &Shard) -> CleanerBuffers {
    let config = shard.config.cleaner;
    let share = config.dedupe_buffer_bytes / shard.shards.max(1) as u64;
    let bytes = share.max(MIN_DEDUPE_BUFFER_BYTES);
    CleanerBuffers {
        map: OffsetMap::with_budget(usize::try_from(bytes).unwrap_or(usize::MAX)),
        io_buffer_bytes: config.io_buffer_bytes,
        io_max_bytes_per_second: config.io_max_bytes_per_second,
        codec: Rc::new(crate::compression::Codecs),
    }
}

/// One cleaning pass over `log`; true when it cleaned something. A pass that fails marks the
/// partition uncleanable.
async fn clean_log(
    shard: &Shard,
    tp: TopicPartition,
    log: &storage::PartitionLog,
    now: TimestampMs,
    buffers: &mut CleanerBuffers,
    uncleanable: &mut BTreeSet<TopicPartition>,
) -> bool {
    match log.clean(now, buffers).await {
        Ok(Some(report)) => {
            tracing::info!(
                %tp,
                from = report.first_dirty.0,
                to = report.cleaned_to.0,
                bytes_before = report.bytes_before,
                bytes_after = report.bytes_after,
                ms = report.elapsed.as_millis(),
                "cleaned"
            );
            shard.metrics.update_cleaner(|g| g.record_pass(&report));
            true
        }
        Ok(None) | Err(StorageError::Closed) => false,
        Err(e) => {
            tracing::error!(%tp, error = %e, "log cleaning failed; the partition is uncleanable until it moves");
            uncleanable.insert(tp);
            false
        }
    }
}

impl CleanerGauges {
    /// Adds one pass's figures (Kafka's `max-clean-time-secs` and `cleaner-recopy-percent`
    /// describe the last pass here).
    pub fn record_pass(&mut self, report: &storage::CleanReport) {
        self.passes += 1;
        self.dirty_bytes_cleaned += report.bytes_read;
        self.bytes_reclaimed += report.bytes_before.saturating_sub(report.bytes_after);
        self.last_clean_time_ms = u64::try_from(report.elapsed.as_millis()).unwrap_or(u64::MAX);
        self.recopy_percent = report
            .bytes_after
            .saturating_mul(100)
            .checked_div(report.bytes_before)
            .unwrap_or(0);
    }
}
