//! Transactions in the log (KIP-98, issue #28): commit and abort markers, the last stable
//! offset moving with the open transactions of several producers, the aborted transactions a
//! read_committed fetch lists, fencing of stale producer and coordinator epochs, and the
//! durability of open transactions and `.txnindex` across a clean reopen, a crash (no close),
//! truncation, DeleteRecords and a follower's replication.

mod common;

use bytes::Bytes;
use common::*;
use std::collections::BTreeMap;
use std::path::Path;
use storage::{
    batch_crc, AbortedTxn, LeaderEpoch, LogConfig, Offset, PartitionLog, StorageError, TxnMarker,
    TxnResult, ABORTED_TXN_BYTES,
};

const EPOCH: LeaderEpoch = LeaderEpoch(0);

/// A transactional batch of `records` records of `value_bytes` bytes.
fn txn_batch(pid: i64, epoch: i16, seq: i32, records: usize, value_bytes: usize) -> Bytes {
    let mut b = batch(0, records, value_bytes).to_vec();
    b[21..23].copy_from_slice(&0x10i16.to_be_bytes());
    b[43..51].copy_from_slice(&pid.to_be_bytes());
    b[51..53].copy_from_slice(&epoch.to_be_bytes());
    b[53..57].copy_from_slice(&seq.to_be_bytes());
    let crc = batch_crc(&b);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(b)
}

/// An idempotent, non-transactional batch.
fn idempotent(pid: i64, epoch: i16, seq: i32) -> Bytes {
    let mut b = batch(0, 1, 10).to_vec();
    b[43..51].copy_from_slice(&pid.to_be_bytes());
    b[51..53].copy_from_slice(&epoch.to_be_bytes());
    b[53..57].copy_from_slice(&seq.to_be_bytes());
    let crc = batch_crc(&b);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(b)
}

fn marker(pid: i64, epoch: i16, result: TxnResult, coordinator_epoch: i32) -> TxnMarker {
    TxnMarker {
        producer_id: pid,
        producer_epoch: epoch,
        result,
        coordinator_epoch,
    }
}

fn aborted(pid: i64, first: i64) -> AbortedTxn {
    AbortedTxn {
        producer_id: pid,
        first_offset: Offset(first),
    }
}

/// Waits for the writes and moves the high watermark to the log end (a single replica).
async fn replicate(log: &PartitionLog) {
    let end = log.log_end_offset();
    log.wait_written(end).await.unwrap();
    log.set_high_watermark(end);
}

/// Total bytes of the partition's `.txnindex` files, and how many there are.
fn txnindex_files(dir: &Path) -> (u64, usize) {
    let mut bytes = 0;
    let mut count = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        if e.file_name().to_string_lossy().ends_with(".txnindex") {
            bytes += e.metadata().unwrap().len();
            count += 1;
        }
    }
    (bytes, count)
}

#[test]
fn last_stable_offset_follows_open_transactions_of_several_producers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let log = open(&path, small_config(), 1 << 20).await;
        log.append(batch(0, 1, 10), EPOCH).await.unwrap(); // 0
        replicate(&log).await;
        assert_eq!(log.last_stable_offset(), Offset(1));
        assert_eq!(log.first_unstable_offset(), None);
        log.append(txn_batch(1, 0, 0, 2, 10), EPOCH).await.unwrap(); // 1..2
        log.append(txn_batch(2, 0, 0, 1, 10), EPOCH).await.unwrap(); // 3
        log.append(txn_batch(1, 0, 2, 1, 10), EPOCH).await.unwrap(); // 4
        replicate(&log).await;
        assert_eq!(log.last_stable_offset(), Offset(1));
        assert_eq!(log.ongoing_transactions(), [(1, Offset(1)), (2, Offset(3))]);
        let commit = log
            .append_txn_marker(marker(1, 0, TxnResult::Commit, 0), EPOCH)
            .await
            .unwrap();
        assert_eq!(commit.base_offset, Offset(5));
        // Until the high watermark passes the marker, producer 1's transaction still bounds
        // the LSO (Kafka's unreplicated transactions): a leader change could cut the marker.
        assert_eq!(log.high_watermark(), Offset(5));
        assert_eq!(log.last_stable_offset(), Offset(1));
        replicate(&log).await;
        assert_eq!(log.last_stable_offset(), Offset(3));
        log.append(txn_batch(3, 0, 0, 1, 10), EPOCH).await.unwrap(); // 6
        log.append_txn_marker(marker(2, 0, TxnResult::Abort, 0), EPOCH)
            .await
            .unwrap(); // 7
        replicate(&log).await;
        assert_eq!(log.last_stable_offset(), Offset(6));
        assert_eq!(log.ongoing_transactions(), [(3, Offset(6))]);
        log.append_txn_marker(marker(3, 0, TxnResult::Abort, 0), EPOCH)
            .await
            .unwrap(); // 8
                       // Not yet replicated: producer 3's transaction still bounds the LSO.
        assert_eq!(log.high_watermark(), Offset(8));
        assert_eq!(log.last_stable_offset(), Offset(6));
        replicate(&log).await;
        assert_eq!(log.last_stable_offset(), Offset(9));
        assert_eq!(log.first_unstable_offset(), None);

        // The markers are control batches in the log.
        let read = log.read(Offset(5), 1 << 20, Offset(9)).await.unwrap();
        let controls: Vec<i64> = read
            .iter()
            .map(|b| b.header())
            .filter(|h| h.is_control() && h.is_transactional())
            .map(|h| h.base_offset.0)
            .collect();
        assert_eq!(controls, [5, 7, 8]);
        let bytes = read[0].to_vec();
        assert_eq!(
            storage::parse_marker(&bytes).unwrap(),
            marker(1, 0, TxnResult::Commit, 0)
        );

        // Aborted transactions of fetched ranges.
        let all = log
            .aborted_transactions(Offset(0), Offset(9))
            .await
            .unwrap();
        assert_eq!(all, [aborted(2, 3), aborted(3, 6)]);
        let tail = log
            .aborted_transactions(Offset(8), Offset(9))
            .await
            .unwrap();
        assert_eq!(tail, [aborted(3, 6)]);
        let head = log
            .aborted_transactions(Offset(0), Offset(3))
            .await
            .unwrap();
        assert!(head.is_empty(), "no aborted transaction starts below 3");
        let mid = log
            .aborted_transactions(Offset(4), Offset(6))
            .await
            .unwrap();
        assert_eq!(mid, [aborted(2, 3)]);

        // A marker with no open transaction (an empty transaction) changes nothing.
        log.append_txn_marker(marker(4, 0, TxnResult::Abort, 0), EPOCH)
            .await
            .unwrap();
        replicate(&log).await;
        assert_eq!(log.last_stable_offset(), Offset(10));
        let all = log
            .aborted_transactions(Offset(0), Offset(10))
            .await
            .unwrap();
        assert_eq!(all.len(), 2);
        log.close().await.unwrap();
    });
}

#[test]
fn stale_epochs_control_batches_from_clients_and_invalid_states_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let log = open(&path, small_config(), 1 << 20).await;
        log.append(txn_batch(1, 0, 0, 1, 10), EPOCH).await.unwrap();
        log.append_txn_marker(marker(1, 0, TxnResult::Commit, 5), EPOCH)
            .await
            .unwrap();
        // An epoch bump (KIP-360/890): the old epoch's markers are fenced.
        log.append(txn_batch(1, 1, 0, 1, 10), EPOCH).await.unwrap();
        let end = log.log_end_offset();
        assert!(matches!(
            log.append_txn_marker(marker(1, 0, TxnResult::Abort, 5), EPOCH)
                .await,
            Err(StorageError::InvalidProducerEpoch {
                producer_id: 1,
                current: 1,
                got: 0
            })
        ));
        // An older coordinator is fenced.
        assert!(matches!(
            log.append_txn_marker(marker(1, 1, TxnResult::Abort, 4), EPOCH)
                .await,
            Err(StorageError::TransactionCoordinatorFenced {
                producer_id: 1,
                current: 5,
                got: 4
            })
        ));
        // A non-transactional batch while the producer's transaction is open.
        assert!(matches!(
            log.append(idempotent(1, 1, 1), EPOCH).await,
            Err(StorageError::InvalidTxnState { producer_id: 1, .. })
        ));
        // Clients never write control batches.
        let forged = storage::build_marker_batch(
            &marker(9, 0, TxnResult::Commit, 0),
            storage::TimestampMs(0),
        );
        assert!(matches!(
            log.append(forged, EPOCH).await,
            Err(StorageError::ControlBatchFromClient { .. })
        ));
        assert_eq!(log.log_end_offset(), end, "nothing was appended");
        // The current coordinator epoch and producer epoch go through.
        log.append_txn_marker(marker(1, 1, TxnResult::Abort, 5), EPOCH)
            .await
            .unwrap();
        assert_eq!(log.first_unstable_offset(), None);
        log.close().await.unwrap();
    });
}

/// What the log must hold: open transactions by producer, aborted ones in marker order.
#[derive(Default, Debug)]
struct Model {
    open: BTreeMap<i64, i64>,
    aborted: Vec<AbortedTxn>,
    seq: BTreeMap<i64, i32>,
    /// Every completed transaction: producer id, first offset, marker offset, result.
    ended: Vec<(i64, i64, i64, TxnResult)>,
}

impl Model {
    async fn data(&mut self, log: &PartitionLog, pid: i64, records: usize) {
        let seq = self.seq.entry(pid).or_insert(0);
        let info = log
            .append(txn_batch(pid, 0, *seq, records, 700), EPOCH)
            .await
            .unwrap();
        *seq += records as i32;
        self.open.entry(pid).or_insert(info.base_offset.0);
    }

    async fn end(&mut self, log: &PartitionLog, pid: i64, result: TxnResult) {
        let at = log
            .append_txn_marker(marker(pid, 0, result, 0), EPOCH)
            .await
            .unwrap()
            .base_offset;
        if let Some(first) = self.open.remove(&pid) {
            self.ended.push((pid, first, at.0, result));
            if result == TxnResult::Abort {
                self.aborted.push(aborted(pid, first));
            }
        }
    }

    /// The model of the log truncated at `cut`: transactions whose marker was cut are open
    /// again, those starting at or after the cut are gone.
    fn truncated(&self, cut: i64) -> Model {
        let mut m = Model::default();
        for &(pid, first, at, result) in &self.ended {
            if at < cut {
                m.ended.push((pid, first, at, result));
                if result == TxnResult::Abort {
                    m.aborted.push(aborted(pid, first));
                }
            } else if first < cut {
                m.open.insert(pid, first);
            }
        }
        for (&pid, &first) in &self.open {
            if first < cut {
                m.open.insert(pid, first);
            }
        }
        m
    }

    async fn check(&self, log: &PartitionLog) {
        let mut open: Vec<(i64, Offset)> =
            self.open.iter().map(|(p, o)| (*p, Offset(*o))).collect();
        open.sort_by_key(|(_, o)| *o);
        assert_eq!(log.ongoing_transactions(), open);
        let first_open = open.first().map(|(_, o)| *o);
        assert_eq!(log.first_unstable_offset(), first_open);
        // Completed transactions whose marker is not below the high watermark bound it too.
        let hw = log.high_watermark();
        let unreplicated = self
            .ended
            .iter()
            .filter(|(_, _, at, _)| Offset(*at) >= hw)
            .map(|(_, first, _, _)| Offset(*first));
        let lso = first_open
            .into_iter()
            .chain(unreplicated)
            .fold(hw, Offset::min);
        assert_eq!(log.last_stable_offset(), lso);
        let got = log
            .aborted_transactions(log.log_start_offset(), log.log_end_offset())
            .await
            .unwrap();
        assert_eq!(got, self.aborted);
    }

    /// A round of transactions over three producers, ending with two of them still open.
    async fn round(&mut self, log: &PartitionLog, round: usize) {
        for i in 0..9 {
            let pid = 100 + (i % 3) as i64;
            self.data(log, pid, 1 + i % 3).await;
            if i % 3 == 2 {
                let result = if (round + i) % 2 == 0 {
                    TxnResult::Abort
                } else {
                    TxnResult::Commit
                };
                self.end(log, 100 + ((i + round) % 3) as i64, result).await;
            }
        }
    }
}

#[test]
fn the_last_stable_offset_waits_for_the_high_watermark_to_pass_a_marker() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let log = open(&path, small_config(), 1 << 20).await;
        log.append(txn_batch(1, 0, 0, 2, 10), EPOCH).await.unwrap(); // 0..1
        log.append(batch(0, 1, 10), EPOCH).await.unwrap(); // 2
        log.append_txn_marker(marker(1, 0, TxnResult::Commit, 0), EPOCH)
            .await
            .unwrap(); // 3
        log.append(batch(0, 1, 10), EPOCH).await.unwrap(); // 4
        log.wait_written(log.log_end_offset()).await.unwrap();
        assert_eq!(log.first_unstable_offset(), None, "no transaction is open");
        for hw in 0..=3 {
            log.set_high_watermark(Offset(hw));
            assert_eq!(log.last_stable_offset(), Offset(0), "marker at 3, hw {hw}");
        }
        // Once the high watermark passes the marker, the transaction no longer counts, and a
        // later high watermark moves the LSO with it.
        log.set_high_watermark(Offset(4));
        assert_eq!(log.last_stable_offset(), Offset(4));
        log.set_high_watermark(Offset(5));
        assert_eq!(log.last_stable_offset(), Offset(5));
        log.close().await.unwrap();
    });
}

#[test]
fn a_producer_snapshot_below_the_log_start_is_ignored_and_removed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let log = open(&path, rolling_config(), 1 << 20).await;
        log.append(txn_batch(1, 0, 0, 1, 10), EPOCH).await.unwrap(); // 0
                                                                     // The roll's snapshot, at 1, holds producer 1's open transaction.
        log.roll().await.unwrap();
        log.append_txn_marker(marker(1, 0, TxnResult::Commit, 0), EPOCH)
            .await
            .unwrap(); // 1
        log.append(batch(0, 2, 10), EPOCH).await.unwrap(); // 2..3
        replicate(&log).await;
        assert_eq!(log.last_stable_offset(), Offset(4));
        log.delete_records_before(Offset(2)).await.unwrap();
        log.flush().await.unwrap();
        drop(log); // a crash: the newest snapshot is the roll's, below the log start

        let log = open(&path, rolling_config(), 1 << 20).await;
        assert_eq!(log.log_start_offset(), Offset(2));
        log.set_high_watermark(log.log_end_offset());
        // From the log start, not from the snapshot: the commit marker is before the log start.
        assert_eq!(log.ongoing_transactions(), []);
        assert_eq!(log.last_stable_offset(), Offset(4));
        let snapshots = std::fs::read_dir(&path)
            .unwrap()
            .filter(|e| {
                let e = e.as_ref().unwrap();
                e.file_name().to_string_lossy().ends_with(".snapshot")
            })
            .count();
        assert_eq!(snapshots, 0, "the snapshot below the log start is removed");
        log.close().await.unwrap();
    });
}

/// `batch` (one stored control batch) with its record removed, as Kafka's cleaner leaves the
/// last batch of a producer whose marker passed its delete horizon.
fn emptied_control_batch(batch: &[u8]) -> Vec<u8> {
    const HEADER_BYTES: usize = 61;
    let mut b = batch[..HEADER_BYTES].to_vec();
    b[8..12].copy_from_slice(&(HEADER_BYTES as i32 - 12).to_be_bytes()); // batchLength
    b[57..61].copy_from_slice(&0i32.to_be_bytes()); // records count
    let crc = batch_crc(&b);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

/// `batch` (one stored marker) with its control key's version set to `version`.
fn marker_key_version(batch: &[u8], version: i16) -> Vec<u8> {
    // Header 61, record length 1, attributes/timestamp delta/offset delta 3, key length 1.
    let at = 61 + 1 + 3 + 1;
    let mut b = batch.to_vec();
    b[at..at + 2].copy_from_slice(&version.to_be_bytes());
    let crc = batch_crc(&b);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

#[test]
fn a_follower_takes_emptied_control_batches_and_later_control_key_versions() {
    let dir = tempfile::tempdir().unwrap();
    let (leader_dir, follower_dir) = (dir.path().join("leader"), dir.path().join("follower"));
    run(move || async move {
        let leader = open(&leader_dir, small_config(), 1 << 20).await;
        // Producer 5's marker ends an empty transaction: the cleaner may empty it.
        leader
            .append_txn_marker(marker(5, 0, TxnResult::Commit, 0), EPOCH)
            .await
            .unwrap(); // 0
        leader
            .append(txn_batch(2, 0, 0, 1, 10), EPOCH)
            .await
            .unwrap(); // 1
        leader
            .append_txn_marker(marker(2, 0, TxnResult::Abort, 0), EPOCH)
            .await
            .unwrap(); // 2
        leader.append(batch(0, 1, 10), EPOCH).await.unwrap(); // 3
        replicate(&leader).await;
        let end = leader.log_end_offset();
        let stored = leader.read(Offset(0), 1 << 20, end).await.unwrap();
        assert_eq!(stored.len(), 4);
        let mut bytes = emptied_control_batch(&stored[0].to_vec());
        bytes.extend_from_slice(&stored[1].to_vec());
        bytes.extend_from_slice(&marker_key_version(&stored[2].to_vec(), 1));
        bytes.extend_from_slice(&stored[3].to_vec());

        let follower = open(&follower_dir, small_config(), 1 << 20).await;
        follower
            .append_as_follower(Bytes::from(bytes))
            .await
            .unwrap();
        assert_eq!(follower.log_end_offset(), end);
        follower.wait_written(end).await.unwrap();
        follower.set_high_watermark(end);
        let check = async |log: &PartitionLog| {
            assert_eq!(log.ongoing_transactions(), []);
            assert_eq!(log.last_stable_offset(), end);
            let got = log.aborted_transactions(Offset(0), end).await.unwrap();
            assert_eq!(got, [aborted(2, 1)]);
        };
        check(&follower).await;
        // A crash: the replay reads them again.
        follower.flush().await.unwrap();
        drop(follower);
        let follower = open(&follower_dir, small_config(), 1 << 20).await;
        follower.set_high_watermark(end);
        check(&follower).await;
        follower.close().await.unwrap();
        leader.close().await.unwrap();
    });
}

#[test]
fn a_coordinators_transactional_append_checks_epochs_not_sequences() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let log = open(&path, small_config(), 1 << 20).await;
        let as_coordinator = |epoch: i16| {
            storage::ValidatedBatches::validate(&txn_batch(7, epoch, 0, 1, 10))
                .unwrap()
                .with_origin(storage::AppendOrigin::Coordinator)
        };
        // Each TxnOffsetCommit's batch starts at sequence 0: all are appended.
        for expected in 0..3 {
            let info = log
                .append_validated(as_coordinator(1), EPOCH, storage::AppendUntil::Written)
                .await
                .unwrap();
            assert_eq!(info.base_offset, Offset(expected));
            assert!(!info.duplicate);
        }
        assert_eq!(log.ongoing_transactions(), [(7, Offset(0))]);
        // A client's batch at sequence 0 again is a retry: nothing appended.
        let info = log.append(txn_batch(7, 1, 0, 1, 10), EPOCH).await.unwrap();
        assert!(info.duplicate);
        // An older epoch is fenced whoever appends.
        assert!(matches!(
            log.append_validated(as_coordinator(0), EPOCH, storage::AppendUntil::Written)
                .await,
            Err(StorageError::InvalidProducerEpoch { .. })
        ));
        assert_eq!(log.log_end_offset(), Offset(3));
        log.close().await.unwrap();
    });
}

fn rolling_config() -> LogConfig {
    LogConfig {
        segment_bytes: 8 << 10,
        index_interval_bytes: 1024,
        ..LogConfig::default()
    }
}

#[test]
fn open_transactions_and_txnindex_survive_clean_reopen_and_crash() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let mut model = Model::default();
        let log = open(&path, rolling_config(), 1 << 20).await;
        for round in 0..6 {
            model.round(&log, round).await;
        }
        replicate(&log).await;
        assert!(
            log.segment_count() > 3,
            "aborts spread over several segments"
        );
        assert!(model.aborted.len() >= 4 && !model.open.is_empty());
        model.check(&log).await;
        log.close().await.unwrap();
        // Every abort is in a `.txnindex` file after a clean close.
        let (bytes, files) = txnindex_files(&path);
        assert_eq!(bytes, (model.aborted.len() * ABORTED_TXN_BYTES) as u64);
        assert!(files > 1);

        let log = open(&path, rolling_config(), 1 << 20).await;
        assert!(log.stats().opened_clean);
        model.check(&log).await;
        // More after the clean reopen, then a crash: the active segment's entries from
        // before the close come from its file, later ones from the replay.
        for round in 6..8 {
            model.round(&log, round).await;
        }
        replicate(&log).await;
        model.check(&log).await;
        log.flush().await.unwrap();
        drop(log);

        let log = open(&path, rolling_config(), 1 << 20).await;
        assert!(!log.stats().opened_clean);
        model.check(&log).await;
        // A crash with no roll since the reopen: only the replay knows the newest aborts.
        model.data(&log, 200, 1).await;
        model.end(&log, 200, TxnResult::Abort).await;
        model.data(&log, 201, 1).await;
        log.flush().await.unwrap();
        drop(log);
        let log = open(&path, rolling_config(), 1 << 20).await;
        model.check(&log).await;
        // Transactions left open before the crash are closed by their markers afterwards.
        let open_pids: Vec<i64> = model.open.keys().copied().collect();
        for pid in open_pids {
            model.end(&log, pid, TxnResult::Abort).await;
        }
        replicate(&log).await;
        model.check(&log).await;
        assert_eq!(log.last_stable_offset(), log.log_end_offset());
        log.close().await.unwrap();
        let (bytes, _) = txnindex_files(&path);
        assert_eq!(bytes, (model.aborted.len() * ABORTED_TXN_BYTES) as u64);
    });
}

#[test]
fn truncation_reopens_transactions_and_drops_their_aborts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let log = open(&path, rolling_config(), 1 << 20).await;
        let mut model = Model::default();
        for round in 0..3 {
            model.round(&log, round).await;
        }
        // Producer 7's transaction, aborted in the last segment, past a roll.
        log.roll().await.unwrap();
        model.data(&log, 7, 2).await;
        let first = model.open[&7];
        let marker_at = log.log_end_offset();
        model.end(&log, 7, TxnResult::Abort).await;
        replicate(&log).await;
        model.check(&log).await;
        log.close().await.unwrap();
        let (before, _) = txnindex_files(&path);
        let log = open(&path, rolling_config(), 1 << 20).await;

        // Truncating at the marker: producer 7's transaction is open again, its abort gone.
        log.truncate_to(marker_at).await.unwrap();
        model.aborted.pop();
        model.open.insert(7, first);
        model.check(&log).await;
        let (after, _) = txnindex_files(&path);
        assert_eq!(
            after,
            before - ABORTED_TXN_BYTES as u64,
            "the file lost the entry"
        );
        // Ended differently this time.
        model.end(&log, 7, TxnResult::Commit).await;
        replicate(&log).await;
        model.check(&log).await;
        log.flush().await.unwrap();
        drop(log);
        let log = open(&path, rolling_config(), 1 << 20).await;
        model.check(&log).await;

        // Truncating into an earlier segment drops later segments' aborts and their files.
        let segments_before = log.segment_count();
        log.truncate_to(Offset(marker_at.0 / 2)).await.unwrap();
        assert!(log.segment_count() < segments_before);
        let cut = log.log_end_offset();
        let model = model.truncated(cut.0);
        assert!(!model.aborted.is_empty() && !model.open.is_empty());
        model.check(&log).await;
        log.close().await.unwrap();
        let (bytes, _) = txnindex_files(&path);
        assert_eq!(bytes, (model.aborted.len() * ABORTED_TXN_BYTES) as u64);
        let log = open(&path, rolling_config(), 1 << 20).await;
        model.check(&log).await;
        log.close().await.unwrap();
    });
}

#[test]
fn delete_records_removes_txnindex_files_with_their_segments() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let log = open(&path, rolling_config(), 1 << 20).await;
        let mut model = Model::default();
        for round in 0..6 {
            model.round(&log, round).await;
        }
        let open_pids: Vec<i64> = model.open.keys().copied().collect();
        for pid in open_pids {
            model.end(&log, pid, TxnResult::Commit).await;
        }
        log.roll().await.unwrap();
        replicate(&log).await;
        let (_, files_before) = txnindex_files(&path);
        assert!(files_before > 1);
        let cut = Offset(log.log_end_offset().0 / 2);
        log.delete_records_before(cut).await.unwrap();
        let start = log.log_start_offset();
        // The files left hold exactly the aborts of the segments left.
        let left = log
            .aborted_transactions(Offset(0).max(start), log.log_end_offset())
            .await
            .unwrap();
        let (bytes_after, files_after) = txnindex_files(&path);
        assert!(files_after < files_before);
        assert!(left.len() < model.aborted.len());
        // An abort whose marker is in a kept segment stays listed even if its transaction
        // started in a deleted one (Kafka lists it; the consumer skips what it never gets).
        assert!(model.aborted.ends_with(&left));
        let mut kept_entries = 0;
        let segments_left: Vec<i64> = std::fs::read_dir(&path)
            .unwrap()
            .filter_map(|e| {
                let name = e.unwrap().file_name().to_string_lossy().into_owned();
                name.strip_suffix(".log")?.parse().ok()
            })
            .collect();
        for e in std::fs::read_dir(&path).unwrap() {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            if let Some(stem) = name.strip_suffix(".txnindex") {
                let base: i64 = stem.parse().unwrap();
                assert!(
                    segments_left.contains(&base),
                    "no .txnindex outlives its segment"
                );
                kept_entries += 1;
            }
        }
        assert_eq!(kept_entries, files_after);
        assert!(bytes_after >= (left.len() * ABORTED_TXN_BYTES) as u64);
        log.close().await.unwrap();
    });
}

#[test]
fn a_follower_rebuilds_open_transactions_and_aborts_from_replicated_batches() {
    let dir = tempfile::tempdir().unwrap();
    let (leader_dir, follower_dir) = (dir.path().join("leader"), dir.path().join("follower"));
    run(move || async move {
        let leader = open(&leader_dir, rolling_config(), 1 << 20).await;
        let mut model = Model::default();
        for round in 0..4 {
            model.round(&leader, round).await;
        }
        replicate(&leader).await;
        let follower = open(&follower_dir, rolling_config(), 1 << 20).await;
        let mut offset = Offset(0);
        while offset < leader.log_end_offset() {
            let batches = leader
                .read(offset, 16 << 10, leader.log_end_offset())
                .await
                .unwrap();
            let mut bytes = Vec::new();
            for b in &batches {
                bytes.extend_from_slice(&b.to_vec());
            }
            let info = follower
                .append_as_follower(Bytes::from(bytes))
                .await
                .unwrap();
            offset = info.last_offset.plus(1);
        }
        follower.set_high_watermark(leader.high_watermark());
        model.check(&follower).await;
        assert_eq!(follower.last_stable_offset(), leader.last_stable_offset());
        follower.flush().await.unwrap();
        drop(follower);
        let follower = open(&follower_dir, rolling_config(), 1 << 20).await;
        follower.set_high_watermark(leader.high_watermark());
        model.check(&follower).await;
        follower.close().await.unwrap();
        leader.close().await.unwrap();
    });
}

/// A transactional batch of keyed records (`build_batch_kv`) for producer `pid`, epoch 0.
fn txn_kv(pid: i64, seq: i32, records: &[(&str, &str)]) -> Bytes {
    let kvs: Vec<storage::KeyValue<'_>> = records
        .iter()
        .map(|(k, v)| (Some(k.as_bytes()), Some(v.as_bytes())))
        .collect();
    let mut b = storage::build_batch_kv(storage::TimestampMs(1_000), &kvs).to_vec();
    b[21..23].copy_from_slice(&0x10i16.to_be_bytes());
    b[43..51].copy_from_slice(&pid.to_be_bytes());
    b[51..53].copy_from_slice(&0i16.to_be_bytes());
    b[53..57].copy_from_slice(&seq.to_be_bytes());
    let crc = batch_crc(&b);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(b)
}

/// Every batch of the log: (header, records as (key, value) when it is a data batch).
async fn all_batches(log: &PartitionLog) -> Vec<(storage::BatchHeader, Vec<(String, String)>)> {
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    let end = log.log_end_offset();
    while offset < end {
        let batches = log.read(offset, 1 << 20, end).await.unwrap();
        let Some(last) = batches.last() else { break };
        offset = last.header().last_offset().plus(1);
        for b in &batches {
            let header = b.header();
            let bytes = b.to_vec();
            let records = if header.is_control() {
                Vec::new()
            } else {
                storage::records_of(&bytes)
                    .unwrap()
                    .iter()
                    .map(|r| {
                        let text =
                            |v: Option<&[u8]>| String::from_utf8(v.unwrap().to_vec()).unwrap();
                        (text(r.key), text(r.value))
                    })
                    .collect()
            };
            out.push((header, records));
        }
    }
    out
}

#[test]
fn compaction_drops_aborted_batches_keeps_markers_and_never_lets_an_aborted_value_win() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let config = LogConfig {
            segment_bytes: 4 << 10,
            index_interval_bytes: 256,
            cleanup_policy: storage::CleanupPolicy::Compact,
            compaction: storage::CompactionConfig {
                min_cleanable_dirty_ratio: 0.0,
                ..storage::CompactionConfig::default()
            },
            retention_ms: None,
            ..LogConfig::default()
        };
        let log = open(&path, config.clone(), 1 << 20).await;
        let filler = |i: usize| {
            // Two keys: cleaned segments shrink and merge.
            let key = format!("f{}", i % 2);
            let value = "v".repeat(400);
            storage::build_batch_kv(
                storage::TimestampMs(1_000),
                &[(Some(key.as_bytes()), Some(value.as_bytes()))],
            )
        };
        log.append(txn_kv(1, 0, &[("k", "committed")]), EPOCH)
            .await
            .unwrap(); // 0
        log.append(txn_kv(2, 0, &[("k", "aborted"), ("x", "aborted")]), EPOCH)
            .await
            .unwrap(); // 1..2
        log.append_txn_marker(marker(1, 0, TxnResult::Commit, 0), EPOCH)
            .await
            .unwrap(); // 3
        log.append(txn_kv(2, 2, &[("y", "aborted")]), EPOCH)
            .await
            .unwrap(); // 4
                       // The abort marker opens a segment of its own: its `.txnindex` moves into the
                       // cleaned segment of the group that starts at 0.
        log.roll().await.unwrap();
        assert!(path.join("00000000000000000005.log").exists());
        log.append_txn_marker(marker(2, 0, TxnResult::Abort, 0), EPOCH)
            .await
            .unwrap(); // 5
        for i in 0..2 {
            log.append(filler(i), EPOCH).await.unwrap();
        }
        // Two small segments: one cleaning group.
        log.roll().await.unwrap();
        for i in 0..20 {
            log.append(filler(i), EPOCH).await.unwrap();
        }
        // Producer 3's transaction stays open: nothing from its first offset on is cleaned.
        let open_at = log
            .append(txn_kv(3, 0, &[("f0", "open")]), EPOCH)
            .await
            .unwrap()
            .base_offset;
        for i in 0..20 {
            log.append(filler(i), EPOCH).await.unwrap();
        }
        log.roll().await.unwrap();
        replicate(&log).await;
        assert!(log.segment_count() > 4);
        let mut buffers = storage::CleanerBuffers {
            map: storage::OffsetMap::with_budget(1 << 20),
            io_buffer_bytes: 8 << 10,
            io_max_bytes_per_second: None,
            codec: std::rc::Rc::new(storage::NoCodec),
        };
        let report = log
            .clean(storage::TimestampMs(10_000), &mut buffers)
            .await
            .unwrap()
            .expect("a pass ran");
        assert!(report.cleaned_to <= open_at, "{report:?}");
        assert!(report.segments_after < report.segments_before, "{report:?}");
        assert!(!path.join("00000000000000000005.log").exists(), "merged");

        let check = async |log: &PartitionLog| {
            let batches = all_batches(log).await;
            // The committed value survives: the aborted one at a later offset never entered
            // the offset map.
            let k: Vec<&(String, String)> = batches
                .iter()
                .flat_map(|(_, r)| r)
                .filter(|(key, _)| key == "k")
                .collect();
            assert_eq!(k, [&("k".to_string(), "committed".to_string())]);
            // Producer 2's aborted batches are gone; its last batch stays, empty (sequences).
            let p2: Vec<(i64, i32)> = batches
                .iter()
                .filter(|(h, _)| h.producer_id == 2 && !h.is_control())
                .map(|(h, r)| (h.base_offset.0, r.len() as i32))
                .collect();
            assert_eq!(p2, [(4, 0)]);
            // Both markers stay, and the abort's index entry with its marker.
            let markers: Vec<i64> = batches
                .iter()
                .filter(|(h, _)| h.is_control())
                .map(|(h, _)| h.base_offset.0)
                .collect();
            assert_eq!(markers, [3, 5]);
            let listed = log
                .aborted_transactions(Offset(0), log.log_end_offset())
                .await
                .unwrap();
            assert_eq!(listed, [aborted(2, 1)]);
            // The open transaction's batch is untouched.
            assert!(batches
                .iter()
                .any(|(h, r)| h.producer_id == 3 && r.len() == 1));
            assert_eq!(log.first_unstable_offset(), Some(open_at));
        };
        check(&log).await;
        // No `.txnindex` outlives its `.log`, and the entry is in the file.
        for e in std::fs::read_dir(&path).unwrap() {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            if let Some(stem) = name.strip_suffix(".txnindex") {
                assert!(path.join(format!("{stem}.log")).exists(), "{name} orphaned");
            }
        }
        assert_eq!(txnindex_files(&path).0, ABORTED_TXN_BYTES as u64);
        log.close().await.unwrap();
        let log = open(&path, config.clone(), 1 << 20).await;
        log.set_high_watermark(log.log_end_offset());
        check(&log).await;
        log.close().await.unwrap();

        // A crash after the swap's commit point, before the merge: the entry is still in the
        // replaced segment's file, whose `.log` is gone. Open merges it into segment 0.
        let merged = path.join("00000000000000000000.txnindex");
        let orphan = path.join("00000000000000000005.txnindex");
        std::fs::rename(&merged, &orphan).unwrap();
        let log = open(&path, config, 1 << 20).await;
        assert!(!orphan.exists() && merged.exists());
        log.set_high_watermark(log.log_end_offset());
        check(&log).await;
        log.close().await.unwrap();
    });
}

/// An idempotent, non-transactional keyed batch.
fn idempotent_kv(pid: i64, seq: i32, key: &str, value: &str) -> Bytes {
    let mut b = storage::build_batch_kv(
        storage::TimestampMs(1_000),
        &[(Some(key.as_bytes()), Some(value.as_bytes()))],
    )
    .to_vec();
    b[43..51].copy_from_slice(&pid.to_be_bytes());
    b[51..53].copy_from_slice(&0i16.to_be_bytes());
    b[53..57].copy_from_slice(&seq.to_be_bytes());
    let crc = batch_crc(&b);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(b)
}

#[test]
fn compaction_removes_markers_after_their_delete_horizon_once_their_batches_are_gone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let config = LogConfig {
            segment_bytes: 4 << 10,
            index_interval_bytes: 256,
            cleanup_policy: storage::CleanupPolicy::Compact,
            compaction: storage::CompactionConfig {
                min_cleanable_dirty_ratio: 0.0,
                delete_retention: std::time::Duration::from_millis(100),
                ..storage::CompactionConfig::default()
            },
            retention_ms: None,
            ..LogConfig::default()
        };
        let log = open(&path, config.clone(), 1 << 20).await;
        log.append(txn_kv(2, 0, &[("a", "aborted")]), EPOCH)
            .await
            .unwrap(); // 0
        log.append_txn_marker(marker(2, 0, TxnResult::Abort, 0), EPOCH)
            .await
            .unwrap(); // 1
        log.append(idempotent_kv(2, 1, "p2", "x"), EPOCH)
            .await
            .unwrap(); // 2
        log.append(txn_kv(1, 0, &[("c", "committed")]), EPOCH)
            .await
            .unwrap(); // 3
        log.append_txn_marker(marker(1, 0, TxnResult::Commit, 0), EPOCH)
            .await
            .unwrap(); // 4
        log.append(idempotent_kv(1, 1, "c", "newer"), EPOCH)
            .await
            .unwrap(); // 5
        let mut buffers = storage::CleanerBuffers {
            map: storage::OffsetMap::with_budget(1 << 20),
            io_buffer_bytes: 8 << 10,
            io_max_bytes_per_second: None,
            codec: std::rc::Rc::new(storage::NoCodec),
        };
        // Each pass gets fresh dirty data to clean.
        let pass = async |log: &PartitionLog, buffers: &mut storage::CleanerBuffers, now: i64| {
            for i in 0..3 {
                log.append(idempotent_kv(-1, -1, &format!("f{i}"), "v"), EPOCH)
                    .await
                    .unwrap();
            }
            log.roll().await.unwrap();
            replicate(log).await;
            log.clean(storage::TimestampMs(now), buffers)
                .await
                .unwrap()
                .expect("a pass ran");
        };
        let markers = async |log: &PartitionLog| -> Vec<(i64, bool)> {
            all_batches(log)
                .await
                .iter()
                .filter(|(h, _)| h.is_control())
                .map(|(h, _)| {
                    (
                        h.base_offset.0,
                        h.attributes & storage::DELETE_HORIZON_BIT != 0,
                    )
                })
                .collect()
        };
        let data_at = async |log: &PartitionLog| -> Vec<i64> {
            all_batches(log)
                .await
                .iter()
                .filter(|(h, _)| !h.is_control() && h.base_offset.0 < 6)
                .map(|(h, _)| h.base_offset.0)
                .collect()
        };
        // 1. The aborted batch and the superseded committed one go; their markers stay (the
        //    pass met their batches), with the abort's index entry.
        pass(&log, &mut buffers, 10_000).await;
        assert_eq!(data_at(&log).await, [2, 5]);
        assert_eq!(markers(&log).await, [(1, false), (4, false)]);
        assert_eq!(
            log.aborted_transactions(Offset(0), log.log_end_offset())
                .await
                .unwrap(),
            [aborted(2, 0)]
        );
        // 2. No batch of theirs is left: the markers get their delete horizon.
        pass(&log, &mut buffers, 20_000).await;
        assert_eq!(markers(&log).await, [(1, true), (4, true)]);
        // 3. Past it, they go, and the abort's entry with them.
        pass(&log, &mut buffers, 20_050).await;
        assert_eq!(
            markers(&log).await,
            [(1, true), (4, true)],
            "horizon not reached"
        );
        pass(&log, &mut buffers, 20_100).await;
        assert!(markers(&log).await.is_empty());
        assert_eq!(data_at(&log).await, [2, 5], "producers' last batches stay");
        let listed = log
            .aborted_transactions(Offset(0), log.log_end_offset())
            .await
            .unwrap();
        assert!(listed.is_empty());
        assert_eq!(txnindex_files(&path), (0, 0));
        log.close().await.unwrap();
        let log = open(&path, config.clone(), 1 << 20).await;
        assert!(markers(&log).await.is_empty());
        assert_eq!(log.first_unstable_offset(), None);
        log.close().await.unwrap();

        // A crash inside a swap's `.txnindex` window: the first segment's file still names
        // the removed abort marker, and the repair marker is there. Open drops the entry.
        let stale = storage::AbortedTxnEntry {
            producer_id: 2,
            first_offset: Offset(0),
            last_offset: Offset(1),
            last_stable_offset: Offset(2),
        };
        std::fs::write(path.join("00000000000000000000.txnindex"), stale.encode()).unwrap();
        std::fs::write(path.join("txnindex-repair"), b"").unwrap();
        let log = open(&path, config, 1 << 20).await;
        assert!(!path.join("txnindex-repair").exists());
        let listed = log
            .aborted_transactions(Offset(0), log.log_end_offset())
            .await
            .unwrap();
        assert!(listed.is_empty(), "{listed:?}");
        assert_eq!(txnindex_files(&path), (0, 0));
        log.close().await.unwrap();
    });
}

#[test]
fn a_verified_append_needs_the_kept_guard_and_an_abort_spends_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let log = open(&path, small_config(), 1 << 20).await;
        let verified = |seq: i32, guard: storage::VerificationGuard| {
            storage::ValidatedBatches::validate(&txn_batch(3, 0, seq, 1, 10))
                .unwrap()
                .with_verification(guard)
        };
        let written = storage::AppendUntil::Written;
        // KIP-890 part 1: no verification under way, no transaction open: refused.
        let unverified = log
            .append_validated(
                verified(0, storage::VerificationGuard::SENTINEL),
                EPOCH,
                written,
            )
            .await;
        assert!(matches!(
            unverified,
            Err(StorageError::InvalidTxnState { producer_id: 3, .. })
        ));
        // A verification at sequence 0: a higher sequence may not go first.
        let guard = log.start_txn_verification(3, 0, 0);
        assert_ne!(guard, storage::VerificationGuard::SENTINEL);
        assert!(matches!(
            log.append_validated(verified(1, guard), EPOCH, written)
                .await,
            Err(StorageError::OutOfOrderSequence { .. })
        ));
        log.append_validated(verified(0, guard), EPOCH, written)
            .await
            .unwrap();
        // The transaction is open now: nothing more to verify.
        assert_eq!(
            log.start_txn_verification(3, 1, 0),
            storage::VerificationGuard::SENTINEL
        );
        log.append_validated(
            verified(1, storage::VerificationGuard::SENTINEL),
            EPOCH,
            written,
        )
        .await
        .unwrap();
        // A verification answered before the abort cannot let a write in after it.
        log.append_txn_marker(marker(3, 0, TxnResult::Abort, 0), EPOCH)
            .await
            .unwrap();
        let stale = guard;
        let fresh = log.start_txn_verification(3, 2, 0);
        assert_ne!(fresh, stale);
        assert!(matches!(
            log.append_validated(verified(2, stale), EPOCH, written)
                .await,
            Err(StorageError::InvalidTxnState { producer_id: 3, .. })
        ));
        assert_eq!(log.log_end_offset(), Offset(3));
        log.close().await.unwrap();
    });
}
