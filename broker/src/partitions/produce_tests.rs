//! The produce path's one pass (issue #26 point 6), from the owning shard's check
//! (`service::check_produce`) through the partition's append into a real log on disk: each
//! produced batch is split and CRC-32C-checked once — the topic's checks and the log's append
//! check nothing again, recompression included — and a corrupt batch is still refused,
//! CORRUPT_MESSAGE, with nothing appended. The passes are counted by storage's
//! `validation_passes` (feature `validation-count`, enabled for the broker's tests only).
//! Not checked here: the routing to the owner (the compat tests produce through a broker).

use super::service::check_produce;
use crate::errors::{code, partition_op_error_code};
use crate::seam::ShardRuntime;
use bytes::Bytes;
use net::kafka_protocol::error::ResponseError;
use replication::runtime::NodeId;
use replication::{Acks, Partition};
use std::rc::Rc;
use std::time::Duration;
use storage::{build_batch, validation_passes, BatchCache, LogConfig, PartitionLog, TimestampMs};
use tuning::config::TopicConfig;

/// Three batches of 2, 1 and 3 records, back to back as a produce request carries them.
fn three_batches(now_ms: i64) -> Bytes {
    let batches = [
        build_batch(TimestampMs(now_ms), &[b"a", b"bb"]),
        build_batch(TimestampMs(now_ms), &[b"c"]),
        build_batch(TimestampMs(now_ms), &[b"d", b"ee", b"fff"]),
    ];
    Bytes::from(batches.concat())
}

/// The wall clock in ms, as the owning shard checks timestamps against it.
fn now_ms() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970");
    i64::try_from(since.as_millis()).expect("fits i64")
}

#[test]
fn each_produced_batch_is_crc_checked_once_and_a_corrupt_one_is_refused() {
    crate::rt::on_executor(|| async {
        let dir = tempfile::tempdir().expect("temp dir");
        let log = PartitionLog::open(dir.path(), LogConfig::default(), &BatchCache::new(1 << 20))
            .await
            .expect("open log");
        let partition = Rc::new(Partition::new(log, NodeId(1), Rc::new(ShardRuntime)));
        let now = now_ms();
        let mut zstd = TopicConfig::default();
        zstd.set("compression.type", "zstd").expect("a codec");
        for (config, end) in [(TopicConfig::default(), 6), (zstd, 12)] {
            let before = validation_passes();
            let batches = check_produce(&three_batches(now), &config, now).expect("valid");
            let appended = partition
                .append(batches, Acks::Leader, Duration::from_secs(5))
                .await
                .expect("appended");
            assert_eq!(
                validation_passes() - before,
                3,
                "one CRC pass per produced batch ({})",
                config.compression_type.codec().unwrap_or(0)
            );
            assert_eq!(appended.base_offset.0, end - 6);
            assert_eq!(
                partition.high_watermark().0,
                end,
                "written and acknowledged"
            );
        }

        let mut corrupt = three_batches(now).to_vec();
        let last = corrupt.len() - 1;
        corrupt[last] ^= 0xff;
        let before = validation_passes();
        let refused = check_produce(&Bytes::from(corrupt), &TopicConfig::default(), now)
            .expect_err("a corrupt batch");
        assert_eq!(validation_passes() - before, 3, "found in the one pass");
        assert_eq!(
            partition_op_error_code(&refused),
            code(ResponseError::CorruptMessage)
        );
        assert_eq!(partition.log().log_end_offset().0, 12, "nothing appended");
        partition.log().close().await.expect("close");
    });
}
