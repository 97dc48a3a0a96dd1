//! Behaviour tests of `PartitionLog`: append/read, KIP-74, cache, rolls, indexes, timestamps,
//! truncation, delete-records, retention, bad input, reopen.

mod common;

use common::*;
use std::time::Duration;
use storage::{
    BatchError, CleanupPolicy, LeaderEpoch, LogConfig, Offset, StorageError, TimestampMs,
};

#[test]
fn append_assigns_contiguous_offsets_and_reads_back_exact_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let log = open(&path, LogConfig::default(), 1 << 20).await;
        let b1 = batch(1000, 3, 10);
        let b2 = batch(2000, 2, 10);
        let i1 = log.append(b1.clone(), LeaderEpoch(5)).await.unwrap();
        let i2 = log.append(b2.clone(), LeaderEpoch(5)).await.unwrap();
        assert_eq!((i1.base_offset, i1.last_offset), (Offset(0), Offset(2)));
        assert_eq!((i2.base_offset, i2.last_offset), (Offset(3), Offset(4)));
        assert_eq!(log.log_end_offset(), Offset(5));
        let got = log.read(Offset(1), 1 << 20, Offset(5)).await.unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].to_vec(), stamped(&b1, 0, 5));
        assert_eq!(got[1].to_vec(), stamped(&b2, 3, 5));
        // The upper bound (high watermark) hides batches not below it.
        assert_eq!(
            log.read(Offset(0), 1 << 20, Offset(3)).await.unwrap().len(),
            1
        );
        // At the log end: nothing, no error. Beyond it: out of range.
        assert!(log
            .read(Offset(5), 100, Offset(5))
            .await
            .unwrap()
            .is_empty());
        assert!(matches!(
            log.read(Offset(6), 100, Offset(6)).await,
            Err(StorageError::OffsetOutOfRange { .. })
        ));
        // KIP-74: the first batch comes whole even above max_bytes; the next one does not.
        let got = log.read(Offset(0), 1, Offset(5)).await.unwrap();
        assert_eq!(got.len(), 1);
        log.close().await.unwrap();
    });
}

#[test]
fn invalid_batches_are_refused_and_nothing_is_appended() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let log = open(
            &path,
            LogConfig {
                max_message_bytes: 2000,
                ..LogConfig::default()
            },
            1 << 20,
        )
        .await;
        log.append(batch(0, 1, 10), LeaderEpoch(0)).await.unwrap();
        let good = batch(0, 2, 10);
        let mut crc = good.to_vec();
        *crc.last_mut().unwrap() ^= 1;
        let mut magic = good.to_vec();
        magic[16] = 1;
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (good[..good.len() - 3].to_vec(), "truncated"),
            (crc, "crc"),
            (magic, "magic"),
            ([good.to_vec(), vec![0u8; 5]].concat(), "trailing bytes"),
            (
                [good.to_vec(), good[..40].to_vec()].concat(),
                "second batch truncated",
            ),
            (batch(0, 1, 3000).to_vec(), "too large"),
            (Vec::new(), "empty"),
        ];
        for (bytes, what) in cases {
            let err = log.append(bytes.into(), LeaderEpoch(0)).await.unwrap_err();
            assert!(
                matches!(err, StorageError::InvalidBatch(_)),
                "{what}: {err}"
            );
            assert_eq!(log.log_end_offset(), Offset(1), "{what} appended something");
        }
        let err = log
            .append(batch(0, 1, 3000), LeaderEpoch(0))
            .await
            .unwrap_err();
        assert!(matches!(
            err,
            StorageError::InvalidBatch(BatchError::TooLarge { .. })
        ));
        // A valid multi-batch set appends as a whole.
        let two = [good.to_vec(), good.to_vec()].concat();
        let info = log.append(two.into(), LeaderEpoch(0)).await.unwrap();
        assert_eq!((info.base_offset, info.last_offset), (Offset(1), Offset(4)));
    });
}

#[test]
fn recent_reads_hit_the_cache_and_cold_reads_use_dma() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let log = open(&path, small_config(), 1 << 20).await;
        let mut expected = Vec::new();
        for i in 0..50 {
            let b = batch(i, 4, 100);
            let info = log.append(b.clone(), LeaderEpoch(1)).await.unwrap();
            expected.push(stamped(&b, info.base_offset.0, 1));
        }
        log.flush().await.unwrap();
        for (i, want) in expected.iter().enumerate() {
            let got = log
                .read(Offset(i as i64 * 4), 1, Offset(200))
                .await
                .unwrap();
            assert_eq!(&got[0].to_vec(), want);
        }
        assert_eq!(
            log.stats().dma_reads,
            0,
            "recent data must come from memory"
        );
        log.close().await.unwrap();
        // A cache of zero bytes: every read goes to disk, and returns the same bytes.
        let log = open(&path, small_config(), 0).await;
        for (i, want) in expected.iter().enumerate() {
            let got = log
                .read(Offset(i as i64 * 4 + 1), 1, Offset(200))
                .await
                .unwrap();
            assert_eq!(&got[0].to_vec(), want);
        }
        assert!(log.stats().dma_reads >= 50);
    });
}

#[test]
fn rolls_on_segment_bytes_and_segment_ms_and_reopens_clean() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let log = open(&path, small_config(), 0).await;
        let mut expected = Vec::new();
        for i in 0..200i64 {
            let b = batch(10_000 + i * 10, 3, 1000);
            let info = log.append(b.clone(), LeaderEpoch(2)).await.unwrap();
            expected.push((info.base_offset, stamped(&b, info.base_offset.0, 2)));
        }
        assert!(log.segment_count() > 5, "segment.bytes=64KiB must roll");
        log.close().await.unwrap();
        let names: Vec<String> = std::fs::read_dir(&path)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(names.contains(&"00000000000000000000.log".to_string()));
        assert!(names.contains(&"00000000000000000000.index".to_string()));
        assert!(names.contains(&"00000000000000000000.timeindex".to_string()));
        let log = open(&path, small_config(), 0).await;
        assert!(log.stats().opened_clean);
        assert_eq!(log.log_end_offset(), Offset(600));
        for (base, want) in &expected {
            let got = log.read(Offset(base.0 + 2), 1, Offset(600)).await.unwrap();
            assert_eq!(&got[0].to_vec(), want);
        }
        // Timestamps: batch i holds 10_000 + i*10 .. +2.
        let m = log
            .find_offset_by_timestamp(TimestampMs(10_000 + 57 * 10 + 1))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(m.header.base_offset, Offset(57 * 3));
        let m = log
            .find_offset_by_timestamp(TimestampMs(10_005))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(m.header.base_offset, Offset(3));
        assert!(log
            .find_offset_by_timestamp(TimestampMs(99_999))
            .await
            .unwrap()
            .is_none());
        assert_eq!(
            log.max_timestamp().await.unwrap(),
            Some((TimestampMs(10_000 + 199 * 10 + 2), Offset(597)))
        );
        // segment.ms: an aged non-empty segment rolls on the next append.
        let before = log.segment_count();
        log.set_config(LogConfig {
            segment_ms: Duration::from_millis(1),
            ..small_config()
        });
        log.append(batch(0, 1, 1), LeaderEpoch(2)).await.unwrap();
        glommio::timer::sleep(Duration::from_millis(5)).await;
        log.append(batch(0, 1, 1), LeaderEpoch(2)).await.unwrap();
        assert_eq!(log.segment_count(), before + 1);
    });
}

#[test]
fn truncate_to_removes_the_suffix_and_appends_continue() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let log = open(&path, small_config(), 1 << 20).await;
        for i in 0..100 {
            log.append(batch(i, 2, 300), LeaderEpoch(1)).await.unwrap();
        }
        log.wait_written(log.log_end_offset()).await.unwrap();
        log.set_high_watermark(Offset(150));
        // Offset 51 is inside the batch [50, 51]: the whole batch goes.
        log.truncate_to(Offset(51)).await.unwrap();
        assert_eq!(log.log_end_offset(), Offset(50));
        assert_eq!(log.high_watermark(), Offset(50));
        assert!(log
            .read(Offset(50), 100, Offset(50))
            .await
            .unwrap()
            .is_empty());
        let b = batch(7, 1, 5);
        let info = log.append(b.clone(), LeaderEpoch(2)).await.unwrap();
        assert_eq!(info.base_offset, Offset(50));
        log.close().await.unwrap();
        let log = open(&path, small_config(), 0).await;
        assert_eq!(log.log_end_offset(), Offset(51));
        let got = log.read(Offset(50), 100, Offset(51)).await.unwrap();
        assert_eq!(got[0].to_vec(), stamped(&b, 50, 2));
        let got = log.read(Offset(48), 1, Offset(51)).await.unwrap();
        assert_eq!(got[0].header().base_offset, Offset(48));
    });
}

#[test]
fn delete_records_and_retention_move_the_log_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let log = open(&path, small_config(), 0).await;
        for i in 0..300 {
            log.append(batch(i, 2, 1000), LeaderEpoch(1)).await.unwrap();
        }
        let segments = log.segment_count();
        assert_eq!(
            log.delete_records_before(Offset(101)).await.unwrap(),
            Offset(101)
        );
        assert!(log.segment_count() < segments);
        assert!(matches!(
            log.read(Offset(100), 100, Offset(600)).await,
            Err(StorageError::OffsetOutOfRange { .. })
        ));
        assert!(!log
            .read(Offset(101), 100, Offset(600))
            .await
            .unwrap()
            .is_empty());
        // retention.bytes: keeps at most the limit, deleting closed segments only, and only
        // those wholly below the high watermark (Kafka's deleteOldSegments).
        log.set_config(LogConfig {
            retention_bytes: Some(100 << 10),
            ..small_config()
        });
        log.set_high_watermark(Offset(0));
        let segments = log.segment_count();
        assert_eq!(log.enforce_retention(TimestampMs(0)).await.unwrap(), 0);
        assert_eq!(
            log.segment_count(),
            segments,
            "nothing above the high watermark goes"
        );
        log.set_high_watermark(log.written_offset());
        // A cold read started before retention finishes from the open file.
        let reader = log.clone();
        let start = log.log_start_offset();
        let pending =
            glommio::spawn_local(async move { reader.read(start, 1 << 20, Offset(600)).await });
        let deleted = log.enforce_retention(TimestampMs(0)).await.unwrap();
        assert!(deleted > 0);
        let read = pending.await.unwrap();
        assert!(!read.is_empty());
        assert!(log.size_bytes() <= (100 << 10) + (64 << 10));
        let start = log.log_start_offset();
        assert!(start > Offset(101));
        // An empty cleanup.policy keeps every segment whatever retention.ms says.
        let segments = log.segment_count();
        log.set_config(LogConfig {
            retention_ms: Some(Duration::from_secs(1)),
            cleanup_policy: CleanupPolicy::NoCleanup,
            ..small_config()
        });
        assert_eq!(
            log.enforce_retention(TimestampMs(1_000_000)).await.unwrap(),
            0
        );
        assert_eq!(log.segment_count(), segments);
        // retention.ms: every closed segment's newest timestamp (< 600) is older than now-1s.
        log.set_config(LogConfig {
            retention_ms: Some(Duration::from_secs(1)),
            ..small_config()
        });
        log.enforce_retention(TimestampMs(1_000_000)).await.unwrap();
        assert_eq!(log.segment_count(), 1, "only the active segment survives");
        log.close().await.unwrap();
        let log = open(&path, small_config(), 0).await;
        assert!(log.log_start_offset() > start);
        assert_eq!(log.log_end_offset(), Offset(600));
    });
}

#[test]
fn flush_messages_marks_appends_flush_due_and_flush_makes_them_durable() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let log = open(
            &path,
            LogConfig {
                flush_messages: 3,
                ..LogConfig::default()
            },
            1 << 20,
        )
        .await;
        assert!(
            !log.append(batch(0, 2, 10), LeaderEpoch(0))
                .await
                .unwrap()
                .flush_due
        );
        let info = log.append(batch(0, 2, 10), LeaderEpoch(0)).await.unwrap();
        assert!(info.flush_due);
        assert_eq!(
            log.flush_to(info.last_offset.plus(1)).await.unwrap(),
            Offset(4)
        );
        assert_eq!(log.durable_offset(), Offset(4));
        assert!(log.stats().syncs >= 1);
        // flush.ms: a timer flushes without any caller waiting.
        log.set_config(LogConfig {
            flush_ms: Some(Duration::from_millis(10)),
            ..LogConfig::default()
        });
        log.append(batch(0, 1, 10), LeaderEpoch(0)).await.unwrap();
        for _ in 0..500 {
            if log.durable_offset() == Offset(5) {
                break;
            }
            glommio::timer::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(log.durable_offset(), Offset(5));
    });
}

#[test]
fn reopen_reads_only_the_active_tail_whatever_the_closed_segments_weigh() {
    fn bytes_read_on_reopen(record_bytes: usize) -> u64 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        run(move || async move {
            let segment_bytes = 50 * (record_bytes as u64 + 200);
            let config = LogConfig {
                segment_bytes,
                ..small_config()
            };
            let log = open(&path, config.clone(), 0).await;
            while log.segment_count() < 51 {
                log.append(batch(0, 1, record_bytes), LeaderEpoch(0))
                    .await
                    .unwrap();
            }
            // The active segment holds the same single batch in both runs.
            log.roll().await.unwrap();
            log.append(batch(0, 1, 100), LeaderEpoch(0)).await.unwrap();
            log.close().await.unwrap();
            let log = open(&path, config, 0).await;
            assert_eq!(log.segment_count(), 52);
            log.stats().open_read_bytes
        })
    }
    let small = bytes_read_on_reopen(1000);
    let large = bytes_read_on_reopen(16_000);
    assert!(small > 0);
    assert_eq!(small, large, "open must not read closed segments");
}

#[test]
fn a_cold_read_reaching_the_write_frontier_returns_what_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let config = LogConfig {
            write_chunk_bytes: 4096,
            writes_in_flight_max: 1,
            ..LogConfig::default()
        };
        let log = open(&path, config, 0).await;
        for i in 0..100 {
            log.append(batch(i, 1, 100), LeaderEpoch(0)).await.unwrap();
        }
        // Writes are still in flight: the disk holds a prefix, ending inside some batch.
        let got = log.read(Offset(0), 1 << 20, Offset(100)).await.unwrap();
        assert!(!got.is_empty());
        for (i, b) in got.iter().enumerate() {
            let h = storage::validate_batch(&b.to_vec()).unwrap();
            assert_eq!(h.base_offset, Offset(i as i64));
        }
        log.flush().await.unwrap();
        assert_eq!(
            log.read(Offset(0), 1 << 20, Offset(100))
                .await
                .unwrap()
                .len(),
            100
        );
    });
}

#[test]
fn recovery_cuts_a_torn_tail_found_past_the_first_scan_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let config = LogConfig {
            segment_bytes: 8 << 20,
            ..LogConfig::default()
        };
        let log = open(&path, config.clone(), 0).await;
        // ~1.5 MiB of batches: the recovery scan reads 1 MiB at a time, so the end lies in
        // its second chunk, at a position that is not block aligned.
        let mut count = 0;
        while log.size_bytes() < 1_500_000 {
            log.append(batch(count, 1, 3000), LeaderEpoch(0))
                .await
                .unwrap();
            count += 1;
        }
        log.flush().await.unwrap();
        let end = log.size_bytes();
        drop(log);
        // A torn batch after the end: a plausible header, then nothing.
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(path.join("00000000000000000000.log"))
            .unwrap();
        let torn = batch(0, 1, 3000);
        std::os::unix::fs::FileExt::write_at(&file, &torn[..100], end).unwrap();
        drop(file);
        let log = open(&path, config, 0).await;
        assert_eq!(log.log_end_offset(), Offset(count));
        assert_eq!(log.size_bytes(), end);
        let info = log.append(batch(7, 1, 10), LeaderEpoch(0)).await.unwrap();
        assert_eq!(info.base_offset, Offset(count));
        log.flush().await.unwrap();
        let got = log
            .read(Offset(count - 1), 1 << 20, Offset(count + 1))
            .await
            .unwrap();
        assert_eq!(got.len(), 2);
    });
}
