//! Idempotent-producer sequences (KIP-98) in the log: a retried batch gets its original
//! offsets and is not appended again — also after a clean reopen, a crash reopen, and a roll —
//! a gap is refused, and an old epoch is fenced.

mod common;

use bytes::Bytes;
use common::*;
use storage::{batch_crc, LeaderEpoch, LogConfig, Offset, StorageError};

fn idempotent(pid: i64, epoch: i16, seq: i32, records: usize) -> Bytes {
    let mut b = batch(0, records, 1000).to_vec();
    b[43..51].copy_from_slice(&pid.to_be_bytes());
    b[51..53].copy_from_slice(&epoch.to_be_bytes());
    b[53..57].copy_from_slice(&seq.to_be_bytes());
    let crc = batch_crc(&b);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(b)
}

#[test]
fn retries_are_deduplicated_across_reopen_and_gaps_and_old_epochs_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let config = LogConfig {
            segment_bytes: 16 << 10,
            ..LogConfig::default()
        };
        let log = open(&path, config.clone(), 1 << 20).await;
        let first = log
            .append(idempotent(7, 0, 0, 3), LeaderEpoch(0))
            .await
            .unwrap();
        assert_eq!((first.base_offset, first.duplicate), (Offset(0), false));
        let retry = log
            .append(idempotent(7, 0, 0, 3), LeaderEpoch(0))
            .await
            .unwrap();
        assert_eq!(
            (retry.base_offset, retry.last_offset, retry.duplicate),
            (Offset(0), Offset(2), true)
        );
        assert_eq!(
            log.log_end_offset(),
            Offset(3),
            "the retry appended nothing"
        );
        assert!(matches!(
            log.append(idempotent(7, 0, 5, 1), LeaderEpoch(0)).await,
            Err(StorageError::OutOfOrderSequence {
                expected: 3,
                got: 5,
                ..
            })
        ));
        // Sequences continue, across rolls (16 KiB segments).
        let mut seq = 3;
        for _ in 0..100 {
            log.append(idempotent(7, 0, seq, 2), LeaderEpoch(0))
                .await
                .unwrap();
            seq += 2;
        }
        assert!(log.segment_count() > 2);
        let end = log.log_end_offset();
        log.close().await.unwrap();

        // Clean reopen: the last batch's retry is still recognised.
        let log = open(&path, config.clone(), 1 << 20).await;
        let retry = log
            .append(idempotent(7, 0, seq - 2, 2), LeaderEpoch(0))
            .await
            .unwrap();
        assert!(retry.duplicate);
        assert_eq!(retry.base_offset, end.plus(-2));
        // A new epoch starts at 0 and fences the old one.
        log.append(idempotent(7, 1, 0, 1), LeaderEpoch(0))
            .await
            .unwrap();
        assert!(matches!(
            log.append(idempotent(7, 0, seq, 1), LeaderEpoch(0)).await,
            Err(StorageError::InvalidProducerEpoch {
                current: 1,
                got: 0,
                ..
            })
        ));
        log.append(idempotent(7, 1, 1, 1), LeaderEpoch(0))
            .await
            .unwrap();
        log.flush().await.unwrap();
        let end = log.log_end_offset();
        drop(log); // no clean close: rebuilt from the roll snapshot plus the active segment

        let log = open(&path, config, 1 << 20).await;
        let retry = log
            .append(idempotent(7, 1, 1, 1), LeaderEpoch(0))
            .await
            .unwrap();
        assert!(retry.duplicate);
        assert_eq!(retry.base_offset, end.plus(-1));
        assert_eq!(log.log_end_offset(), end);
        // Non-idempotent batches are never checked.
        log.append(batch(0, 1, 10), LeaderEpoch(0)).await.unwrap();
        log.append(batch(0, 1, 10), LeaderEpoch(0)).await.unwrap();
        assert_eq!(log.log_end_offset(), end.plus(2));
    });
}
