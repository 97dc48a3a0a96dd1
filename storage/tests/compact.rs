//! Behaviour and crash tests of log compaction on disk (issue #27): a pass keeps the latest
//! record of every key at its offset, never touches the active segment, thins nothing a reader
//! needs (tombstones stay `delete.retention.ms`, each producer's last batch stays), survives a
//! reopen, and a swap cut after any of its file steps is finished or undone by the next open,
//! so the log holds exactly the old segments' records or exactly the cleaned ones. A follower
//! copies a compacted leader's gaps and reopens with them.

mod common;

use bytes::Bytes;
use common::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;
use storage::{
    batch_crc, build_batch_kv, cut_at, records_of, swap_steps, CleanerBuffers, CleanupPolicy,
    CompactionConfig, FsStep, LeaderEpoch, LogConfig, Offset, OffsetMap, PartitionLog,
    StorageError, TimestampMs,
};

const NOW: TimestampMs = TimestampMs(1_000_000);

fn compact_config() -> LogConfig {
    LogConfig {
        segment_bytes: 4 << 10,
        index_interval_bytes: 256,
        cleanup_policy: CleanupPolicy::Compact,
        compaction: CompactionConfig {
            min_cleanable_dirty_ratio: 0.0,
            delete_retention: Duration::from_millis(100),
            ..CompactionConfig::default()
        },
        retention_ms: None,
        ..LogConfig::default()
    }
}

fn buffers(map_bytes: usize) -> CleanerBuffers {
    CleanerBuffers {
        map: OffsetMap::with_budget(map_bytes),
        io_buffer_bytes: 8 << 10,
        io_max_bytes_per_second: None,
        codec: std::rc::Rc::new(storage::NoCodec),
    }
}

fn kv(key: &str, value: Option<&str>) -> Bytes {
    build_batch_kv(NOW, &[(Some(key.as_bytes()), value.map(str::as_bytes))])
}

/// A batch of an idempotent producer: `build_batch_kv` with producer id, epoch 0, `seq`.
fn idempotent(key: &str, value: &str, producer: i64, seq: i32) -> Bytes {
    let mut b = kv(key, Some(value)).to_vec();
    b[43..51].copy_from_slice(&producer.to_be_bytes());
    b[51..53].copy_from_slice(&0i16.to_be_bytes());
    b[53..57].copy_from_slice(&seq.to_be_bytes());
    let crc = batch_crc(&b);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(b)
}

/// Every record of the log: offset → (key, value).
async fn all_records(log: &PartitionLog) -> BTreeMap<i64, (String, Option<String>)> {
    let mut out = BTreeMap::new();
    let mut offset = log.log_start_offset();
    let end = log.log_end_offset();
    while offset < end {
        let batches = log.read(offset, 1 << 20, end).await.unwrap();
        let Some(last) = batches.last() else { break };
        let next = last.header().last_offset().plus(1);
        for b in &batches {
            let bytes = b.to_vec();
            for r in records_of(&bytes).unwrap() {
                let key = String::from_utf8(r.key.unwrap().to_vec()).unwrap();
                let value = r.value.map(|v| String::from_utf8(v.to_vec()).unwrap());
                assert!(
                    out.insert(r.offset.0, (key, value)).is_none(),
                    "offset {} read twice",
                    r.offset.0
                );
            }
        }
        offset = next;
    }
    out
}

/// The latest record per key of `records`.
fn latest(
    records: &BTreeMap<i64, (String, Option<String>)>,
) -> BTreeMap<String, (i64, Option<String>)> {
    let mut out = BTreeMap::new();
    for (offset, (key, value)) in records {
        out.insert(key.clone(), (*offset, value.clone()));
    }
    out
}

/// Appends `rounds` values of `keys` keys, then rolls so everything is in closed segments.
async fn fill(log: &PartitionLog, keys: usize, rounds: usize) {
    for round in 0..rounds {
        for k in 0..keys {
            let v = format!("v{round}-{}", "x".repeat(40));
            log.append(kv(&format!("k{k}"), Some(&v)), LeaderEpoch(1))
                .await
                .unwrap();
        }
    }
    log.roll().await.unwrap();
    log.flush().await.unwrap();
    log.set_high_watermark(log.log_end_offset());
}

#[test]
fn a_pass_keeps_the_latest_record_of_every_key_at_its_offset() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let log = open(&path, compact_config(), 1 << 20).await;
        fill(&log, 10, 30).await;
        // A record in the active segment: never cleaned, even though it supersedes k0.
        log.append(kv("k0", Some("active")), LeaderEpoch(1))
            .await
            .unwrap();
        log.flush().await.unwrap();
        log.set_high_watermark(log.log_end_offset());
        let before = all_records(&log).await;
        let segments_before = log.segment_count();
        let size_before = log.size_bytes();
        let dirtiness = log.dirtiness(NOW).await.unwrap().unwrap();
        assert!(dirtiness.dirty_bytes > 0 && dirtiness.clean_bytes == 0);
        assert!(dirtiness.is_cleanable(0.5));

        let report = log
            .clean(NOW, &mut buffers(1 << 20))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(report.cleaned_to, dirtiness.cleanable_end);
        assert!(report.bytes_after < report.bytes_before);
        let after = all_records(&log).await;
        assert_eq!(
            latest(&after),
            latest(&before),
            "latest value of every key kept"
        );
        for (offset, record) in &after {
            assert_eq!(before.get(offset), Some(record), "offsets never change");
        }
        // Closed segments hold one record per key (k0 twice: its active-segment record too).
        assert_eq!(after.len(), 11);
        assert!(log.size_bytes() < size_before);
        // Groups are made by their segments' sizes (Kafka's `groupSegmentsBySize`): the first
        // pass cleans each full segment alone, and a later one merges what they shrank to.
        assert_eq!(log.segment_count(), segments_before);
        assert_eq!(log.first_dirty_offset(), dirtiness.cleanable_end);
        let again = log.dirtiness(NOW).await.unwrap().unwrap();
        assert_eq!(again.dirty_bytes, 0, "nothing dirty after the pass");
        assert!(log
            .clean(NOW, &mut buffers(1 << 20))
            .await
            .unwrap()
            .is_none());
        log.append(kv("k9", Some("late")), LeaderEpoch(1))
            .await
            .unwrap();
        fill(&log, 0, 0).await;
        let before = all_records(&log).await;
        log.clean(NOW, &mut buffers(1 << 20))
            .await
            .unwrap()
            .unwrap();
        let after = all_records(&log).await;
        assert_eq!(latest(&after), latest(&before));
        assert!(
            log.segment_count() < segments_before,
            "small cleaned segments merged"
        );
        let cleaned_to = log.first_dirty_offset();

        // Reads by any offset in a gap land on the next kept batch.
        let gap = (0..before.len() as i64)
            .find(|o| !after.contains_key(o))
            .unwrap();
        let got = log
            .read(Offset(gap), 1 << 20, log.log_end_offset())
            .await
            .unwrap();
        assert!(got[0].header().base_offset.0 > gap);
        log.close().await.unwrap();

        // Reopened: same records, same first dirty offset.
        let log = open(&path, compact_config(), 1 << 20).await;
        assert_eq!(all_records(&log).await, after);
        assert_eq!(log.first_dirty_offset(), cleaned_to);
        // Appends go on after the cleaned log.
        let end = log.log_end_offset();
        let info = log
            .append(kv("k1", Some("new")), LeaderEpoch(1))
            .await
            .unwrap();
        assert_eq!(info.base_offset, end);
        log.close().await.unwrap();
    });
}

#[test]
fn a_small_map_cleans_in_several_passes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let log = open(&path, compact_config(), 1 << 20).await;
        fill(&log, 40, 8).await;
        let before = all_records(&log).await;
        // 40 slots hold 36 keys: a pass covers part of the dirty section.
        let mut small = buffers(40 * storage::SLOT_BYTES);
        let mut passes = 0;
        while let Some(report) = log.clean(NOW, &mut small).await.unwrap() {
            passes += 1;
            assert!(report.cleaned_to > report.first_dirty);
            assert_eq!(latest(&all_records(&log).await), latest(&before));
            assert!(passes < 50);
        }
        assert!(passes > 1);
        log.close().await.unwrap();
    });
}

#[test]
fn tombstones_stay_delete_retention_ms_then_go() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let log = open(&path, compact_config(), 1 << 20).await;
        fill(&log, 5, 10).await;
        log.append(kv("k2", None), LeaderEpoch(1)).await.unwrap();
        fill(&log, 0, 0).await;
        log.clean(NOW, &mut buffers(1 << 20))
            .await
            .unwrap()
            .unwrap();
        let after = latest(&all_records(&log).await);
        assert_eq!(
            after["k2"].1, None,
            "the tombstone is kept on its first clean"
        );
        // More dirty data, a clean before the horizon: still there.
        fill(&log, 1, 1).await;
        log.clean(TimestampMs(NOW.0 + 50), &mut buffers(1 << 20))
            .await
            .unwrap()
            .unwrap();
        assert!(latest(&all_records(&log).await).contains_key("k2"));
        // After the horizon (delete.retention.ms = 100 after the first clean): gone, and no
        // older value of k2 comes back.
        fill(&log, 1, 1).await;
        log.clean(TimestampMs(NOW.0 + 150), &mut buffers(1 << 20))
            .await
            .unwrap()
            .unwrap();
        let last = latest(&all_records(&log).await);
        assert!(!last.contains_key("k2"), "{last:?}");
        assert_eq!(last.len(), 4);
        log.close().await.unwrap();
    });
}

#[test]
fn a_producers_last_batch_is_kept_so_its_sequence_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let log = open(&path, compact_config(), 1 << 20).await;
        log.append(idempotent("p", "0", 7, 0), LeaderEpoch(1))
            .await
            .unwrap();
        log.append(idempotent("p", "1", 7, 1), LeaderEpoch(1))
            .await
            .unwrap();
        // Others overwrite key "p": the producer's last batch loses its record but stays.
        log.append(kv("p", Some("other")), LeaderEpoch(1))
            .await
            .unwrap();
        fill(&log, 3, 20).await;
        log.clean(NOW, &mut buffers(1 << 20))
            .await
            .unwrap()
            .unwrap();
        let batches = log
            .read(Offset(0), 1 << 20, log.log_end_offset())
            .await
            .unwrap();
        let kept = batches
            .iter()
            .find(|b| b.header().producer_id == 7)
            .expect("the producer's last batch is kept");
        assert_eq!(kept.header().base_offset, Offset(1));
        assert_eq!(kept.header().records_count, 0, "kept empty");
        log.close().await.unwrap();
        // Reopened (producer state rebuilt from the cleaned log): the next sequence appends,
        // a retry of the last batch is a duplicate.
        let log = open(&path, compact_config(), 1 << 20).await;
        let dup = log
            .append(idempotent("p", "1", 7, 1), LeaderEpoch(1))
            .await
            .unwrap();
        assert!(dup.duplicate);
        let next = log
            .append(idempotent("p", "2", 7, 2), LeaderEpoch(1))
            .await
            .unwrap();
        assert!(!next.duplicate);
        log.close().await.unwrap();
    });
}

#[test]
fn a_follower_copies_a_compacted_leaders_gaps_and_reopens_with_them() {
    let dir = tempfile::tempdir().unwrap();
    let leader_dir = dir.path().join("leader");
    let follower_dir = dir.path().join("follower");
    run(move || async move {
        let leader = open(&leader_dir, compact_config(), 1 << 20).await;
        fill(&leader, 6, 20).await;
        leader
            .clean(NOW, &mut buffers(1 << 20))
            .await
            .unwrap()
            .unwrap();
        let follower = open(&follower_dir, compact_config(), 1 << 20).await;
        let mut offset = Offset(0);
        let end = leader.log_end_offset();
        while offset < end {
            let batches = leader.read(offset, 1 << 10, end).await.unwrap();
            let mut wire = Vec::new();
            for b in &batches {
                wire.extend_from_slice(&b.to_vec());
            }
            follower
                .append_as_follower(Bytes::from(wire))
                .await
                .unwrap();
            offset = follower.log_end_offset();
        }
        assert_eq!(follower.log_end_offset(), end);
        let copied = all_records(&follower).await;
        assert_eq!(copied, all_records(&leader).await);
        // A batch that would go back below the follower's log end is refused.
        let old = leader.read(Offset(0), 1, end).await.unwrap();
        assert!(matches!(
            follower
                .append_as_follower(Bytes::from(old[0].to_vec()))
                .await,
            Err(StorageError::UnexpectedAppendOffset { .. })
        ));
        // Not closed cleanly: the reopen scans the active segment, gaps and all.
        drop(follower);
        let follower = open(&follower_dir, compact_config(), 1 << 20).await;
        assert_eq!(follower.log_end_offset(), end);
        assert_eq!(all_records(&follower).await, copied);
        leader.close().await.unwrap();
        follower.close().await.unwrap();
    });
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

fn stem(base: Offset) -> String {
    format!("{:020}", base.0)
}

/// The swap cut after each of its file steps, on real files: the cleaned segment is what a
/// full pass on a copy of the directory produced; the steps run by hand up to the cut (a
/// SIGKILL keeps every completed step); then the log opens, and must hold either exactly the
/// records before the clean or exactly those after it, each at its offset, once.
#[test]
fn a_swap_cut_after_any_step_opens_as_the_old_log_or_the_cleaned_one() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    run(move || async move {
        let original = root.join("original");
        let log = open(&original, compact_config(), 1 << 20).await;
        fill(&log, 8, 25).await;
        let bases_before: Vec<Offset> = segment_bases(&original);
        let old_records = all_records(&log).await;
        log.close().await.unwrap();

        let cleaned_dir = root.join("cleaned");
        copy_dir(&original, &cleaned_dir);
        // Segments large enough that the pass makes one group of every closed segment.
        let merging = LogConfig {
            segment_bytes: 1 << 20,
            ..compact_config()
        };
        let log = open(&cleaned_dir, merging, 1 << 20).await;
        log.clean(NOW, &mut buffers(1 << 20))
            .await
            .unwrap()
            .unwrap();
        let new_records = all_records(&log).await;
        log.close().await.unwrap();
        let bases_after = segment_bases(&cleaned_dir);
        // One group here: every closed segment became one.
        let active = *bases_before.last().unwrap();
        assert_eq!(bases_after, vec![Offset(0), active]);
        let old_bases: Vec<Offset> = bases_before[..bases_before.len() - 1].to_vec();

        let steps = swap_steps(&old_bases);
        for cut in 0..=steps.len() {
            let trial = root.join(format!("cut{cut}"));
            copy_dir(&original, &trial);
            // The cleaned files, as the pass writes them.
            for ext in ["log", "index", "timeindex"] {
                std::fs::copy(
                    cleaned_dir.join(format!("{}.{ext}", stem(Offset(0)))),
                    trial.join(format!("{}.{ext}.cleaned", stem(Offset(0)))),
                )
                .unwrap();
            }
            for step in &steps[..cut] {
                match step {
                    FsStep::Write(_) | FsStep::SyncDir => {}
                    FsStep::Rename { from, to } => {
                        std::fs::rename(trial.join(from), trial.join(to)).unwrap()
                    }
                    FsStep::Unlink(name) => std::fs::remove_file(trial.join(name)).unwrap(),
                }
            }
            let log = open(&trial, compact_config(), 1 << 20).await;
            let got = all_records(&log).await;
            assert!(
                got == old_records || got == new_records,
                "cut after {cut} steps: {} records, neither the old log nor the cleaned one",
                got.len()
            );
            let committed = steps[..cut]
                .iter()
                .any(|s| matches!(s, FsStep::Rename { to, .. } if to.ends_with(".log.swap")));
            assert_eq!(
                got == new_records,
                committed,
                "cut after {cut}: the commit point decides"
            );
            let leftovers: Vec<String> = std::fs::read_dir(&trial)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| {
                    n.ends_with(".cleaned") || n.ends_with(".swap") || n.ends_with(".deleted")
                })
                .collect();
            assert!(leftovers.is_empty(), "cut after {cut}: {leftovers:?} left");
            log.close().await.unwrap();
        }
    });
}

fn segment_bases(dir: &Path) -> Vec<Offset> {
    let mut bases: Vec<Offset> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let n = e.unwrap().file_name().to_string_lossy().into_owned();
            n.strip_suffix(".log")?.parse().ok().map(Offset)
        })
        .collect();
    bases.sort();
    bases
}

/// The round's last batch stays even when cleaning empties it (Kafka's `cleanInto`): here a
/// keyless record, written before the topic became compacted, ends the closed segments and
/// the active one is empty. Without that batch a reader at its offset would find nothing up
/// to the high watermark and never reach it.
#[test]
fn the_last_batch_of_a_round_stays_even_empty() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let log = open(&path, compact_config(), 1 << 20).await;
        for i in 0..3 {
            log.append(kv("k", Some(&format!("v{i}"))), LeaderEpoch(1))
                .await
                .unwrap();
        }
        log.append(
            build_batch_kv(NOW, &[(None, Some(&b"no key"[..]))]),
            LeaderEpoch(1),
        )
        .await
        .unwrap();
        log.roll().await.unwrap();
        log.flush().await.unwrap();
        let end = log.log_end_offset();
        assert_eq!(end, Offset(4));
        log.set_high_watermark(end);
        log.clean(NOW, &mut buffers(1 << 20))
            .await
            .unwrap()
            .unwrap();
        // k's older values are gone; the keyless record is gone, its batch stays empty.
        let batches = log.read(Offset(3), 1 << 20, end).await.unwrap();
        let last = batches.last().expect("a batch at the round's end");
        assert_eq!(last.header().last_offset(), Offset(3));
        assert_eq!(last.header().records_count, 0);
        let records = all_records(&log).await;
        assert_eq!(records.keys().copied().collect::<Vec<_>>(), [2]);
        log.close().await.unwrap();
    });
}

/// A truncation to an offset inside a gap compaction left ends the log at that offset, never
/// past it (Kafka's `truncateTo`): a follower truncating there fetches the leader's records
/// from it, and skips none.
#[test]
fn a_truncation_into_a_gap_ends_the_log_at_the_target() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let log = open(&path, compact_config(), 1 << 20).await;
        // k0 at 0, k1 at 1..=10, k2 at 11: cleaning keeps 0, 10 and 11.
        log.append(kv("k0", Some("a")), LeaderEpoch(1))
            .await
            .unwrap();
        for i in 0..10 {
            log.append(kv("k1", Some(&format!("v{i}"))), LeaderEpoch(1))
                .await
                .unwrap();
        }
        log.append(kv("k2", Some("b")), LeaderEpoch(1))
            .await
            .unwrap();
        log.roll().await.unwrap();
        log.flush().await.unwrap();
        log.set_high_watermark(log.log_end_offset());
        log.clean(NOW, &mut buffers(1 << 20))
            .await
            .unwrap()
            .unwrap();
        let kept: Vec<i64> = all_records(&log).await.keys().copied().collect();
        assert_eq!(kept, [0, 10, 11]);
        let gap = 5;
        log.truncate_to(Offset(gap)).await.unwrap();
        assert_eq!(log.log_end_offset(), Offset(gap));
        log.close().await.unwrap();
    });
}

/// A batch cleaning emptied (kept as its producer's last) keeps the max timestamp of records
/// that are gone: a lookup by timestamp passes over it to the first batch with a record, as
/// Kafka's `searchForTimestamp` does (found by `compact_model.rs`: ListOffsets answered the
/// empty batch's offset and the timestamp of a removed record).
#[test]
fn a_lookup_by_timestamp_passes_over_a_batch_cleaning_emptied() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let log = open(&path, compact_config(), 1 << 20).await;
        // Producer 7's only batch (at NOW) loses its record to a later value of its key.
        log.append(idempotent("a", "0", 7, 0), LeaderEpoch(1))
            .await
            .unwrap();
        let later = build_batch_kv(TimestampMs(NOW.0 + 10), &[(Some(b"a"), Some(b"1"))]);
        log.append(later, LeaderEpoch(1)).await.unwrap();
        fill(&log, 0, 0).await;
        log.clean(NOW, &mut buffers(1 << 20))
            .await
            .unwrap()
            .unwrap();
        let kept = log.read(Offset(0), 1, log.log_end_offset()).await.unwrap();
        assert_eq!(kept[0].header().base_offset, Offset(0));
        assert_eq!(kept[0].header().records_count, 0, "kept empty");
        let found = log.find_offset_by_timestamp(NOW).await.unwrap().unwrap();
        assert_eq!(found.header.base_offset, Offset(1));
        assert_eq!(found.header.max_timestamp, TimestampMs(NOW.0 + 10));
        log.close().await.unwrap();
    });
}

/// The recovery of a swap cut after its commit point rebuilds the cleaned segment's indexes
/// from its log; the time index must end with the segment's max timestamp, as the cleaner's
/// and a roll's do, since a closed segment's max timestamp is read back from that last entry
/// (found by `compact_model.rs`: without it every lookup by timestamp skipped the segment).
#[test]
fn a_recovered_swap_keeps_the_segments_max_timestamp() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let log = open(&path, compact_config(), 1 << 20).await;
        for i in 0..12i64 {
            let key = format!("k{}", i % 3);
            let batch = build_batch_kv(
                TimestampMs(NOW.0 + i),
                &[(Some(key.as_bytes()), Some(b"v"))],
            );
            log.append(batch, LeaderEpoch(1)).await.unwrap();
        }
        fill(&log, 0, 0).await;
        // Cut before the fourth file step: the three `.cleaned` files are `.swap`, committed.
        cut_at(Some(("clean.swap", 4)));
        let cut = log.clean(NOW, &mut buffers(1 << 20)).await;
        cut_at(None);
        assert!(cut.is_err(), "the swap was cut");
        drop(log);
        let log = open(&path, compact_config(), 1 << 20).await;
        assert!(
            log.stats().open_swap_steps > 0,
            "the open finished the swap"
        );
        let kept: Vec<i64> = all_records(&log).await.keys().copied().collect();
        assert_eq!(kept, [9, 10, 11]);
        let found = log
            .find_offset_by_timestamp(TimestampMs(NOW.0 + 11))
            .await
            .unwrap()
            .expect("the newest record is found by its timestamp");
        assert_eq!(found.header.base_offset, Offset(11));
        log.close().await.unwrap();
    });
}

/// A group whose every batch cleaning removes still ends its cleaned segment with its last
/// batch (kept empty): recovery of a swap cut after its commit point replaces every old segment
/// based up to the cleaned segment's last offset, so a cleaned segment ending early would leave
/// the group's later segments in the log beside it (found by `compact_model.rs`: superseded
/// records came back, and the next swap failed on a retired index file).
#[test]
fn a_swap_cut_after_its_commit_replaces_a_whole_emptied_group() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let log = open(&path, compact_config(), 1 << 20).await;
        // Segments [0: k0], [1: k1], [2: k1 (large), 3: k0]: the first two make one group
        // (the third is too large to join it), and cleaning removes both their records.
        log.append(kv("k0", Some("a")), LeaderEpoch(1))
            .await
            .unwrap();
        log.roll().await.unwrap();
        log.append(kv("k1", Some("b")), LeaderEpoch(1))
            .await
            .unwrap();
        log.roll().await.unwrap();
        let large = "c".repeat(4000);
        let last = build_batch_kv(
            NOW,
            &[
                (Some(b"k1"), Some(large.as_bytes())),
                (Some(b"k0"), Some(b"d")),
            ],
        );
        log.append(last, LeaderEpoch(1)).await.unwrap();
        fill(&log, 0, 0).await;
        // Cut before the fifth file step: committed, no old segment retired yet.
        cut_at(Some(("clean.swap", 5)));
        let cut = log.clean(NOW, &mut buffers(1 << 20)).await;
        cut_at(None);
        assert!(cut.is_err(), "the swap was cut");
        drop(log);
        let log = open(&path, compact_config(), 1 << 20).await;
        let kept: Vec<i64> = all_records(&log).await.keys().copied().collect();
        assert_eq!(kept, [2, 3], "the whole first group replaced");
        // The next pass swaps again without tripping over the first group's files.
        log.set_high_watermark(log.log_end_offset());
        log.clean(NOW, &mut buffers(1 << 20)).await.unwrap();
        assert_eq!(
            all_records(&log).await.keys().copied().collect::<Vec<_>>(),
            [2, 3]
        );
        log.close().await.unwrap();
    });
}
