//! What replication needs of the log: the leader-epoch cache kept by appends (leader and
//! follower) and truncation, its `leader-epoch-checkpoint` across clean and unclean reopens
//! (also missing, corrupt or stale), `append_as_follower`'s checks and durability, and the
//! `high-watermark` checkpoint.

mod common;

use bytes::Bytes;
use common::*;
use std::path::Path;
use storage::{
    batch_crc, BatchError, EpochEntry, LeaderEpoch, LogConfig, Offset, PartitionLog, StorageError,
};

const EPOCH_FILE: &str = "leader-epoch-checkpoint";

fn entries(log: &PartitionLog) -> Vec<(i32, i64)> {
    log.leader_epochs()
        .entries()
        .iter()
        .map(
            |&EpochEntry {
                 epoch,
                 start_offset,
             }| (epoch.0, start_offset.0),
        )
        .collect()
}

/// A checkpoint file in checkpoint.rs's format holding `values`.
fn checkpoint_text(values: &[i64]) -> String {
    let mut body = String::from("0\n");
    for v in values {
        body.push_str(&format!("{v}\n"));
    }
    format!("{body}{:08x}\n", crc32c::crc32c(body.as_bytes()))
}

/// A leader log at `dir` with batches of 2 records at epochs 1, 1, 2, 2, 4 (offsets 0..10),
/// and the bytes of those batches as stored (what a follower fetches).
async fn leader_with_epochs(dir: &Path) -> (PartitionLog, Vec<Bytes>) {
    let log = open(dir, LogConfig::default(), 1 << 20).await;
    for (i, epoch) in [1, 1, 2, 2, 4].into_iter().enumerate() {
        log.append(batch(1000 + i as i64, 2, 50), LeaderEpoch(epoch))
            .await
            .unwrap();
    }
    let end = log.log_end_offset();
    log.wait_written(end).await.unwrap();
    let stored = log.read(Offset(0), 1 << 20, end).await.unwrap();
    (
        log,
        stored.iter().map(|b| Bytes::from(b.to_vec())).collect(),
    )
}

fn concat(batches: &[Bytes]) -> Bytes {
    Bytes::from(batches.concat())
}

#[test]
fn leader_appends_assign_newer_epochs_and_the_checkpoint_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let (log, _) = leader_with_epochs(&path).await;
        assert_eq!(entries(&log), [(1, 0), (2, 4), (4, 8)]);
        assert_eq!(log.latest_leader_epoch(), Some(LeaderEpoch(4)));
        // OffsetForLeaderEpoch, Kafka's answers.
        let q = |e: i32| log.end_offset_for_leader_epoch(LeaderEpoch(e));
        assert_eq!(q(4), Some((LeaderEpoch(4), Offset(10))));
        assert_eq!(q(3), Some((LeaderEpoch(2), Offset(8))));
        assert_eq!(q(2), Some((LeaderEpoch(2), Offset(8))));
        assert_eq!(q(1), Some((LeaderEpoch(1), Offset(4))));
        assert_eq!(q(0), Some((LeaderEpoch(0), Offset(0))));
        assert_eq!(q(5), None);
        assert_eq!(q(-1), None);
        assert_eq!(
            q(-2),
            Some((LeaderEpoch(-2), Offset(0))),
            "only -1 is undefined"
        );
        // Where each epoch starts, and the epoch of a record (ListOffsets' leader epoch).
        assert_eq!(
            log.leader_epoch_start_offset(LeaderEpoch(2)),
            Some(Offset(4))
        );
        assert_eq!(log.leader_epoch_start_offset(LeaderEpoch(3)), None);
        assert_eq!(log.leader_epoch_for_offset(Offset(0)), Some(LeaderEpoch(1)));
        assert_eq!(log.leader_epoch_for_offset(Offset(7)), Some(LeaderEpoch(2)));
        assert_eq!(log.leader_epoch_for_offset(Offset(9)), Some(LeaderEpoch(4)));
        // An older epoch from the caller starts no entry (fencing is the partition's check).
        log.append(batch(0, 1, 10), LeaderEpoch(3)).await.unwrap();
        assert_eq!(entries(&log), [(1, 0), (2, 4), (4, 8)]);
        log.close().await.unwrap();
        let text = std::fs::read_to_string(path.join(EPOCH_FILE)).unwrap();
        assert_eq!(text, checkpoint_text(&[3, 1, 0, 2, 4, 4, 8]));
        let log = open(&path, LogConfig::default(), 1 << 20).await;
        assert_eq!(entries(&log), [(1, 0), (2, 4), (4, 8)]);
        log.append(batch(0, 1, 10), LeaderEpoch(6)).await.unwrap();
        assert_eq!(entries(&log), [(1, 0), (2, 4), (4, 8), (6, 11)]);
        // Unclean: the entry may not be in the file yet; recovery's scan finds it.
        log.wait_written(Offset(12)).await.unwrap();
        drop(log);
        let log = open(&path, LogConfig::default(), 1 << 20).await;
        assert_eq!(entries(&log), [(1, 0), (2, 4), (4, 8), (6, 11)]);
        log.close().await.unwrap();
    });
}

#[test]
fn follower_append_keeps_the_leaders_bytes_and_epochs_and_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (leader_dir, follower_dir) = (dir.path().join("leader"), dir.path().join("follower"));
    run(move || async move {
        let (leader, stored) = leader_with_epochs(&leader_dir).await;
        // LogAppendTime on the follower must not restamp the leader's batches.
        let config = LogConfig {
            log_append_time: true,
            ..small_config()
        };
        let follower = open(&follower_dir, config.clone(), 1 << 20).await;
        let info = follower
            .append_as_follower(concat(&stored[..3]))
            .await
            .unwrap();
        assert_eq!((info.base_offset, info.last_offset), (Offset(0), Offset(5)));
        assert_eq!(info.log_append_time, None);
        // Returned only once written (DESIGN.md §3).
        assert!(follower.written_offset() >= Offset(6));
        follower
            .append_as_follower(concat(&stored[3..]))
            .await
            .unwrap();
        assert_eq!(follower.log_end_offset(), leader.log_end_offset());
        assert_eq!(follower.leader_epochs(), leader.leader_epochs());
        let got = follower.read(Offset(0), 1 << 20, Offset(10)).await.unwrap();
        let got: Vec<Vec<u8>> = got.iter().map(|b| b.to_vec()).collect();
        let want: Vec<Vec<u8>> = stored.iter().map(|b| b.to_vec()).collect();
        assert_eq!(
            got, want,
            "bytes, offsets, epochs and timestamps as the leader's"
        );
        // Clean reopen.
        follower.close().await.unwrap();
        let follower = open(&follower_dir, config.clone(), 1 << 20).await;
        assert_eq!(follower.leader_epochs(), leader.leader_epochs());
        // More from the leader (a new epoch), then an unclean reopen.
        leader
            .append(batch(5, 3, 10), LeaderEpoch(7))
            .await
            .unwrap();
        leader.wait_written(Offset(13)).await.unwrap();
        let more = leader.read(Offset(10), 1 << 20, Offset(13)).await.unwrap();
        follower
            .append_as_follower(Bytes::from(more[0].to_vec()))
            .await
            .unwrap();
        assert_eq!(entries(&follower), [(1, 0), (2, 4), (4, 8), (7, 10)]);
        drop(follower);
        let follower = open(&follower_dir, config, 1 << 20).await;
        assert_eq!(follower.leader_epochs(), leader.leader_epochs());
        assert_eq!(follower.log_end_offset(), Offset(13));
        let got = follower
            .read(Offset(10), 1 << 20, Offset(13))
            .await
            .unwrap();
        assert_eq!(got[0].to_vec(), more[0].to_vec());
        follower.close().await.unwrap();
        leader.close().await.unwrap();
    });
}

#[test]
fn follower_append_refuses_what_does_not_continue_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let (leader_dir, follower_dir) = (dir.path().join("leader"), dir.path().join("follower"));
    run(move || async move {
        let (_leader, stored) = leader_with_epochs(&leader_dir).await;
        let follower = open(&follower_dir, LogConfig::default(), 1 << 20).await;
        follower
            .append_as_follower(stored[0].clone())
            .await
            .unwrap();
        let unexpected = |r: Result<_, StorageError>| match r {
            Err(StorageError::UnexpectedAppendOffset { expected, got }) => (expected.0, got.0),
            other => panic!("expected UnexpectedAppendOffset, got {other:?}"),
        };
        // An overlap, and a batch of one append that goes back below the previous one, are
        // refused, as Kafka's appendAsFollower refuses them (a gap is not: below).
        assert_eq!(
            unexpected(follower.append_as_follower(stored[0].clone()).await),
            (2, 0)
        );
        assert_eq!(
            unexpected(
                follower
                    .append_as_follower(concat(&[stored[1].clone(), stored[0].clone()]))
                    .await
            ),
            (4, 0)
        );
        // No partition leader epoch.
        let mut no_epoch = stored[1].to_vec();
        no_epoch[12..16].copy_from_slice(&(-1i32).to_be_bytes());
        assert!(matches!(
            follower.append_as_follower(Bytes::from(no_epoch)).await,
            Err(StorageError::MissingLeaderEpoch {
                base_offset: Offset(2)
            })
        ));
        // A corrupt batch (CRC), and one whose CRC was recomputed over a wrong record count.
        let mut crc = stored[1].to_vec();
        *crc.last_mut().unwrap() ^= 1;
        assert!(matches!(
            follower.append_as_follower(Bytes::from(crc)).await,
            Err(StorageError::InvalidBatch(BatchError::Crc { .. }))
        ));
        let mut count = stored[1].to_vec();
        count[57..61].copy_from_slice(&3i32.to_be_bytes());
        let c = batch_crc(&count);
        count[17..21].copy_from_slice(&c.to_be_bytes());
        assert!(matches!(
            follower.append_as_follower(Bytes::from(count)).await,
            Err(StorageError::InvalidBatch(BatchError::RecordCount { .. }))
        ));
        assert_eq!(follower.log_end_offset(), Offset(2), "nothing appended");
        assert_eq!(entries(&follower), [(1, 0)]);
        // A gap is accepted, as Kafka accepts it: a compacted leader's log has gaps where
        // whole batches were removed (issue #27), and its followers copy them.
        follower
            .append_as_follower(concat(&[stored[2].clone(), stored[3].clone()]))
            .await
            .unwrap();
        assert_eq!(follower.log_end_offset(), stored_end(&stored[3]));
        follower.close().await.unwrap();
    });
}

/// One past the last offset of the stored batch `b`.
fn stored_end(b: &Bytes) -> Offset {
    let h = storage::BatchHeader::parse(b).unwrap();
    h.base_offset.plus(i64::from(h.last_offset_delta) + 1)
}

/// Builds a batch of one idempotent producer (`pid`, epoch 0) at sequence `seq`.
fn idempotent(pid: i64, seq: i32, records: usize) -> Bytes {
    let mut b = batch(0, records, 100).to_vec();
    b[43..51].copy_from_slice(&pid.to_be_bytes());
    b[51..53].copy_from_slice(&0i16.to_be_bytes());
    b[53..57].copy_from_slice(&seq.to_be_bytes());
    let crc = batch_crc(&b);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(b)
}

#[test]
fn a_follower_rebuilds_producer_state_from_replicated_batches() {
    let dir = tempfile::tempdir().unwrap();
    let (leader_dir, follower_dir) = (dir.path().join("leader"), dir.path().join("follower"));
    run(move || async move {
        let leader = open(&leader_dir, LogConfig::default(), 1 << 20).await;
        leader
            .append(idempotent(9, 0, 2), LeaderEpoch(3))
            .await
            .unwrap();
        leader
            .append(idempotent(9, 2, 3), LeaderEpoch(3))
            .await
            .unwrap();
        leader.wait_written(Offset(5)).await.unwrap();
        let stored = leader.read(Offset(0), 1 << 20, Offset(5)).await.unwrap();
        let stored: Vec<Bytes> = stored.iter().map(|b| Bytes::from(b.to_vec())).collect();
        let follower = open(&follower_dir, LogConfig::default(), 1 << 20).await;
        follower.append_as_follower(concat(&stored)).await.unwrap();
        // The follower becomes leader: the producer's retry is recognised, a gap refused.
        let retry = follower
            .append(idempotent(9, 2, 3), LeaderEpoch(4))
            .await
            .unwrap();
        assert_eq!((retry.duplicate, retry.base_offset), (true, Offset(2)));
        assert!(matches!(
            follower.append(idempotent(9, 9, 1), LeaderEpoch(4)).await,
            Err(StorageError::OutOfOrderSequence { expected: 5, .. })
        ));
        let next = follower
            .append(idempotent(9, 5, 1), LeaderEpoch(4))
            .await
            .unwrap();
        assert_eq!(next.base_offset, Offset(5));
        assert_eq!(entries(&follower), [(3, 0), (4, 5)]);
        follower.close().await.unwrap();
        leader.close().await.unwrap();
    });
}

#[test]
fn truncation_cuts_the_epoch_cache_durably() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let (log, _) = leader_with_epochs(&path).await;
        // Beyond the log end: nothing changes.
        log.truncate_to(Offset(50)).await.unwrap();
        assert_eq!(entries(&log), [(1, 0), (2, 4), (4, 8)]);
        // Into epoch 2's second batch: epoch 4 goes.
        log.truncate_to(Offset(7)).await.unwrap();
        assert_eq!(log.log_end_offset(), Offset(6));
        assert_eq!(entries(&log), [(1, 0), (2, 4)]);
        let text = std::fs::read_to_string(path.join(EPOCH_FILE)).unwrap();
        assert_eq!(
            text,
            checkpoint_text(&[2, 1, 0, 2, 4]),
            "written before returning"
        );
        drop(log);
        let log = open(&path, LogConfig::default(), 1 << 20).await;
        assert_eq!(entries(&log), [(1, 0), (2, 4)]);
        // Exactly at epoch 2's start.
        log.truncate_to(Offset(4)).await.unwrap();
        assert_eq!(entries(&log), [(1, 0)]);
        assert_eq!(
            log.end_offset_for_leader_epoch(LeaderEpoch(1)),
            Some((LeaderEpoch(1), Offset(4)))
        );
        log.close().await.unwrap();
        let log = open(&path, LogConfig::default(), 1 << 20).await;
        assert_eq!(entries(&log), [(1, 0)]);
        // The log goes on with a new epoch where it was cut.
        log.append(batch(0, 1, 10), LeaderEpoch(5)).await.unwrap();
        assert_eq!(entries(&log), [(1, 0), (5, 4)]);
        log.close().await.unwrap();
    });
}

#[test]
fn a_missing_corrupt_or_stale_epoch_file_is_recovered_from_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let config = small_config();
        let log = open(&path, config.clone(), 1 << 20).await;
        // Several segments (64 KiB each), epochs changing in closed and active segments.
        let mut want = Vec::new();
        for i in 0..120i64 {
            let epoch = (i / 25) as i32 * 2;
            let info = log
                .append(batch(i, 2, 1500), LeaderEpoch(epoch))
                .await
                .unwrap();
            if want.last().map(|(e, _)| *e) != Some(epoch) {
                want.push((epoch, info.base_offset.0));
            }
        }
        assert!(log.segment_count() > 3);
        assert_eq!(entries(&log), want);
        log.close().await.unwrap();
        let file = path.join(EPOCH_FILE);

        std::fs::remove_file(&file).unwrap();
        let log = open(&path, config.clone(), 1 << 20).await;
        assert_eq!(entries(&log), want, "rebuilt from the batches");
        log.close().await.unwrap();
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            checkpoint_text(&log.leader_epochs().entries().iter().fold(
                vec![want.len() as i64],
                |mut v, e| {
                    v.extend([i64::from(e.epoch.0), e.start_offset.0]);
                    v
                }
            )),
            "and written again"
        );

        std::fs::write(&file, b"0\n2\n1\n0\nnot a checkpoint\n").unwrap();
        let log = open(&path, config.clone(), 1 << 20).await;
        assert_eq!(entries(&log), want, "a corrupt file is rebuilt too");
        log.close().await.unwrap();
        // Entries that do not ascend, under a valid CRC.
        std::fs::write(&file, checkpoint_text(&[2, 5, 0, 3, 10])).unwrap();
        let log = open(&path, config.clone(), 1 << 20).await;
        assert_eq!(entries(&log), want);
        log.close().await.unwrap();

        // Stale after a crash: an entry past the log end (a truncation not yet written) and
        // the newest entry missing (its write not done; it starts in the active segment, as
        // a roll waits for the file), with no clean-shutdown marker, so the active segment
        // is scanned.
        let log = open(&path, config.clone(), 1 << 20).await;
        let info = log.append(batch(0, 1, 10), LeaderEpoch(10)).await.unwrap();
        want.push((10, info.base_offset.0));
        assert_eq!(entries(&log), want);
        log.close().await.unwrap();
        let mut stale: Vec<i64> = vec![want.len() as i64];
        for &(e, s) in &want[..want.len() - 1] {
            stale.extend([i64::from(e), s]);
        }
        stale.extend([100, 10_000]);
        std::fs::write(&file, checkpoint_text(&stale)).unwrap();
        std::fs::remove_file(path.join("clean-shutdown")).unwrap();
        let log = open(&path, config.clone(), 1 << 20).await;
        assert_eq!(entries(&log), want);
        assert_eq!(
            log.end_offset_for_leader_epoch(LeaderEpoch(9)),
            Some((LeaderEpoch(8), info.base_offset))
        );
        log.close().await.unwrap();
    });
}

#[test]
fn the_log_start_moves_the_first_epoch_entry() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let (log, _) = leader_with_epochs(&path).await;
        log.delete_records_before(Offset(5)).await.unwrap();
        assert_eq!(entries(&log), [(2, 5), (4, 8)]);
        log.close().await.unwrap();
        let log = open(&path, LogConfig::default(), 1 << 20).await;
        assert_eq!(entries(&log), [(2, 5), (4, 8)]);
        log.close().await.unwrap();
    });
}

#[test]
fn the_high_watermark_checkpoint_is_where_a_reopened_log_starts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let (log, _) = leader_with_epochs(&path).await;
        assert_eq!(
            PartitionLog::read_high_watermark_checkpoint(&path)
                .await
                .unwrap(),
            None
        );
        log.set_high_watermark(Offset(6));
        assert_eq!(log.checkpoint_high_watermark().await.unwrap(), Offset(6));
        assert_eq!(
            PartitionLog::read_high_watermark_checkpoint(&path)
                .await
                .unwrap(),
            Some(Offset(6))
        );
        drop(log);
        let log = open(&path, LogConfig::default(), 1 << 20).await;
        assert_eq!(log.log_end_offset(), Offset(10));
        assert_eq!(log.high_watermark(), Offset(6));
        // Above the recovered log end it is clamped to it.
        log.set_high_watermark(Offset(10));
        log.checkpoint_high_watermark().await.unwrap();
        log.truncate_to(Offset(4)).await.unwrap();
        log.close().await.unwrap();
        let log = open(&path, LogConfig::default(), 1 << 20).await;
        assert_eq!(log.high_watermark(), Offset(4));
        log.close().await.unwrap();
        // Corrupt: the log start, the safe lower bound.
        std::fs::write(path.join("high-watermark"), b"0\n7\nffffffff\n").unwrap();
        assert!(matches!(
            PartitionLog::read_high_watermark_checkpoint(&path).await,
            Err(StorageError::Corrupt { .. })
        ));
        let log = open(&path, LogConfig::default(), 1 << 20).await;
        assert_eq!(log.high_watermark(), log.log_start_offset());
        log.close().await.unwrap();
    });
}

#[test]
fn a_truncation_lowers_the_high_watermark_checkpoint_before_new_records_come() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let (log, _) = leader_with_epochs(&path).await;
        log.set_high_watermark(Offset(10));
        assert_eq!(log.checkpoint_high_watermark().await.unwrap(), Offset(10));
        log.truncate_to(Offset(4)).await.unwrap();
        assert_eq!(
            PartitionLog::read_high_watermark_checkpoint(&path)
                .await
                .unwrap(),
            Some(Offset(4)),
            "the truncation rewrote the checkpoint"
        );
        // New records after the cut, then a crash (no close): a checkpoint still at 10 would
        // count them as replicated.
        log.append(batch(2000, 4, 50), LeaderEpoch(5))
            .await
            .unwrap();
        let end = log.log_end_offset();
        log.wait_written(end).await.unwrap();
        assert_eq!(end, Offset(8));
        drop(log);
        let log = open(&path, LogConfig::default(), 1 << 20).await;
        assert_eq!(log.log_end_offset(), Offset(8));
        assert_eq!(log.high_watermark(), Offset(4));
        // Unchanged: nothing to write; changed: written.
        assert_eq!(log.checkpoint_high_watermark().await.unwrap(), Offset(4));
        log.set_high_watermark(Offset(8));
        assert_eq!(log.checkpoint_high_watermark().await.unwrap(), Offset(8));
        log.close().await.unwrap();
    });
}

#[test]
fn a_follower_append_with_flush_messages_returns_synced() {
    let dir = tempfile::tempdir().unwrap();
    let (leader_dir, follower_dir) = (dir.path().join("leader"), dir.path().join("follower"));
    run(move || async move {
        let (_leader, stored) = leader_with_epochs(&leader_dir).await;
        let config = LogConfig {
            flush_messages: 1,
            ..LogConfig::default()
        };
        let follower = open(&follower_dir, config, 1 << 20).await;
        for b in &stored {
            let info = follower.append_as_follower(b.clone()).await.unwrap();
            assert!(info.flush_due);
            assert!(
                follower.durable_offset() > info.last_offset,
                "synced before returning"
            );
        }
        follower.close().await.unwrap();
        assert!(matches!(
            follower.append_as_follower(stored[0].clone()).await,
            Err(StorageError::Closed)
        ));
    });
}

#[test]
fn a_new_leader_assigns_its_epoch_at_the_log_end() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let (log, _) = leader_with_epochs(&path).await;
        log.assign_leader_epoch(LeaderEpoch(6)).await.unwrap();
        assert_eq!(entries(&log), [(1, 0), (2, 4), (4, 8), (6, 10)]);
        let text = std::fs::read_to_string(path.join(EPOCH_FILE)).unwrap();
        assert_eq!(text, checkpoint_text(&[4, 1, 0, 2, 4, 4, 8, 6, 10]));
        // A follower at epoch 4 learns that epoch 4 ended at 10.
        assert_eq!(
            log.end_offset_for_leader_epoch(LeaderEpoch(4)),
            Some((LeaderEpoch(4), Offset(10)))
        );
        // Again, and appends at the epoch, change nothing.
        log.assign_leader_epoch(LeaderEpoch(6)).await.unwrap();
        log.append(batch(0, 2, 10), LeaderEpoch(6)).await.unwrap();
        assert_eq!(entries(&log), [(1, 0), (2, 4), (4, 8), (6, 10)]);
        assert!(matches!(
            log.assign_leader_epoch(LeaderEpoch(-1)).await,
            Err(StorageError::MissingLeaderEpoch { .. })
        ));
        log.close().await.unwrap();
        // An epoch that wrote nothing does not outlive a reopen (Kafka's recovery too).
        let log = open(&path, LogConfig::default(), 1 << 20).await;
        log.assign_leader_epoch(LeaderEpoch(8)).await.unwrap();
        assert_eq!(entries(&log), [(1, 0), (2, 4), (4, 8), (6, 10), (8, 12)]);
        log.close().await.unwrap();
        let log = open(&path, LogConfig::default(), 1 << 20).await;
        assert_eq!(entries(&log), [(1, 0), (2, 4), (4, 8), (6, 10)]);
        log.close().await.unwrap();
    });
}

/// The names in `dir`, sorted, without the transient probe file.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with(".sluice"))
        // A rewritten checkpoint's previous contents, its partner in the next rewrite.
        .filter(|n| !n.ends_with("checkpoint.tmp") && n != "high-watermark.tmp")
        .collect();
    names.sort();
    names
}

/// A log at `dir` with three segments (offsets 0..6, 6..12, 12..16), epochs 1 then 2,
/// producer snapshots from its rolls, and a high-watermark checkpoint at 14.
async fn three_segments(dir: &Path) -> PartitionLog {
    let log = open(dir, small_config(), 1 << 20).await;
    for (i, epoch) in [1, 1, 1, 2, 2, 2, 2, 2].into_iter().enumerate() {
        log.append(batch(1000 + i as i64, 2, 50), LeaderEpoch(epoch))
            .await
            .unwrap();
        if i == 2 || i == 5 {
            log.roll().await.unwrap();
        }
    }
    log.wait_written(Offset(16)).await.unwrap();
    log.set_high_watermark(Offset(14));
    log.checkpoint_high_watermark().await.unwrap();
    assert_eq!(log.segment_count(), 3);
    assert!(listing(dir).iter().any(|n| n.ends_with(".snapshot")));
    log
}

#[test]
fn a_full_truncation_starts_an_empty_log_at_the_offset_and_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let log = three_segments(&path).await;
        log.truncate_fully_and_start_at(Offset(40)).await.unwrap();
        assert_eq!(log.log_start_offset(), Offset(40));
        assert_eq!(log.log_end_offset(), Offset(40));
        assert_eq!(log.written_offset(), Offset(40));
        assert_eq!(log.high_watermark(), Offset(40));
        assert_eq!(log.segment_count(), 1);
        assert_eq!(log.size_bytes(), 0);
        assert_eq!(entries(&log), []);
        assert_eq!(log.latest_leader_epoch(), None);
        assert!(matches!(
            log.read(Offset(12), 1 << 20, Offset(40)).await,
            Err(StorageError::OffsetOutOfRange { .. })
        ));
        assert!(log
            .read(Offset(40), 1 << 20, Offset(40))
            .await
            .unwrap()
            .is_empty());
        // On disk: one segment at the new base and the checkpoints at the new start.
        assert_eq!(
            listing(&path),
            [
                "00000000000000000040.log",
                "high-watermark",
                "leader-epoch-checkpoint",
                "log-start-offset-checkpoint",
            ]
        );
        assert_eq!(
            std::fs::read_to_string(path.join("log-start-offset-checkpoint")).unwrap(),
            checkpoint_text(&[40])
        );
        assert_eq!(
            std::fs::read_to_string(path.join(EPOCH_FILE)).unwrap(),
            checkpoint_text(&[0])
        );
        assert_eq!(
            PartitionLog::read_high_watermark_checkpoint(&path)
                .await
                .unwrap(),
            Some(Offset(40))
        );
        // A follower goes on at the new base with the leader's batches.
        let first = stamped(&batch(5000, 3, 40), 40, 7);
        let info = log
            .append_as_follower(Bytes::from(first.clone()))
            .await
            .unwrap();
        assert_eq!(
            (info.base_offset, info.last_offset),
            (Offset(40), Offset(42))
        );
        assert_eq!(entries(&log), [(7, 40)]);
        // Unclean reopen: recovery scans the new active segment.
        drop(log);
        let log = open(&path, small_config(), 1 << 20).await;
        assert_eq!(log.log_start_offset(), Offset(40));
        assert_eq!(log.log_end_offset(), Offset(43));
        assert_eq!(entries(&log), [(7, 40)]);
        let read = log.read(Offset(40), 1 << 20, Offset(43)).await.unwrap();
        assert_eq!(read.len(), 1);
        assert_eq!(read[0].to_vec(), first);
        // And as a leader, at a newer epoch.
        let next = log
            .append(batch(6000, 2, 40), LeaderEpoch(8))
            .await
            .unwrap();
        assert_eq!(next.base_offset, Offset(43));
        assert_eq!(entries(&log), [(7, 40), (8, 43)]);
        log.close().await.unwrap();
        let log = open(&path, small_config(), 1 << 20).await;
        assert_eq!(
            (log.log_start_offset(), log.log_end_offset()),
            (Offset(40), Offset(45))
        );
        assert_eq!(entries(&log), [(7, 40), (8, 43)]);
        log.close().await.unwrap();
    });
}

#[test]
fn a_full_truncation_below_the_log_end_drops_every_record_and_producer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let log = three_segments(&path).await;
        log.append(idempotent(9, 0, 2), LeaderEpoch(2))
            .await
            .unwrap();
        log.wait_written(Offset(18)).await.unwrap();
        log.truncate_fully_and_start_at(Offset(7)).await.unwrap();
        assert_eq!(
            (log.log_start_offset(), log.log_end_offset()),
            (Offset(7), Offset(7))
        );
        assert_eq!(log.segment_count(), 1);
        // The producer state went with its batches: sequence 0 again is new, not a retry.
        let next = log
            .append(idempotent(9, 0, 1), LeaderEpoch(3))
            .await
            .unwrap();
        assert_eq!((next.base_offset, next.duplicate), (Offset(7), false));
        assert!(matches!(
            log.truncate_fully_and_start_at(Offset(-1)).await,
            Err(StorageError::OffsetOutOfRange { .. })
        ));
        log.wait_written(Offset(8)).await.unwrap();
        drop(log);
        let log = open(&path, small_config(), 1 << 20).await;
        assert_eq!(
            (log.log_start_offset(), log.log_end_offset()),
            (Offset(7), Offset(8))
        );
        assert_eq!(entries(&log), [(3, 7)]);
        assert_eq!(
            log.high_watermark(),
            Offset(7),
            "the checkpoint moved to the new start"
        );
        log.close().await.unwrap();
    });
}

/// The states a crash can leave part-way through a full truncation, made by hand, each
/// opened by recovery as a log the fetcher goes on from (docs/storage-format.md §6.5).
#[test]
fn every_crash_point_of_a_full_truncation_opens_a_consistent_log() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    run(move || async move {
        let remove = |p: &Path, names: &[&str]| {
            for n in names {
                std::fs::remove_file(p.join(n)).unwrap();
            }
        };
        let segment = |base: i64, ext: &str| format!("{base:020}.{ext}");
        // Step 2 part-way: the newest segment went; the rest is a shorter log.
        let p = root.join("prefix");
        let log = three_segments(&p).await;
        log.close().await.unwrap();
        remove(
            &p,
            &[
                &segment(12, "log"),
                &segment(12, "index"),
                &segment(12, "timeindex"),
            ],
        );
        std::fs::remove_file(p.join("clean-shutdown")).unwrap();
        let log = open(&p, small_config(), 1 << 20).await;
        assert_eq!(
            (log.log_start_offset(), log.log_end_offset()),
            (Offset(0), Offset(12))
        );
        assert_eq!(entries(&log), [(1, 0), (2, 6)]);
        assert!(log.high_watermark() <= Offset(12));
        log.close().await.unwrap();
        // Step 2 done, before step 4: no segment; an empty log at the old log start.
        let p = root.join("empty");
        let log = three_segments(&p).await;
        log.delete_records_before(Offset(3)).await.unwrap();
        drop(log);
        for name in listing(&p) {
            if name.ends_with(".log") || name.ends_with("index") || name.ends_with(".snapshot") {
                std::fs::remove_file(p.join(name)).unwrap();
            }
        }
        let log = open(&p, small_config(), 1 << 20).await;
        assert_eq!(
            (log.log_start_offset(), log.log_end_offset()),
            (Offset(3), Offset(3))
        );
        assert_eq!(log.high_watermark(), Offset(3));
        log.append_as_follower(Bytes::from(stamped(&batch(1, 1, 10), 3, 2)))
            .await
            .unwrap();
        log.close().await.unwrap();
        // Step 4 done, before the new segment's name is durable: the empty log at the offset.
        let p = root.join("started");
        let log = three_segments(&p).await;
        drop(log);
        for name in listing(&p) {
            if name.ends_with(".log") || name.ends_with("index") || name.ends_with(".snapshot") {
                std::fs::remove_file(p.join(name)).unwrap();
            }
        }
        std::fs::write(p.join(EPOCH_FILE), checkpoint_text(&[0])).unwrap();
        std::fs::write(
            p.join("log-start-offset-checkpoint"),
            checkpoint_text(&[40]),
        )
        .unwrap();
        let log = open(&p, small_config(), 1 << 20).await;
        assert_eq!(
            (log.log_start_offset(), log.log_end_offset()),
            (Offset(40), Offset(40))
        );
        assert_eq!(entries(&log), []);
        assert_eq!(log.high_watermark(), Offset(40));
        log.close().await.unwrap();
    });
}
