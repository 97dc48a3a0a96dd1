//! The acknowledgement rule's storage half (DESIGN.md §3): `wait_written` returns only once the
//! O_DIRECT writes holding the records have completed, the high watermark never passes the
//! written offset, and writes are group-committed — appends made before the write's task runs
//! leave in that one write, and appends that arrive while a write is in flight leave together
//! in the next write, so the partial tail block is written once per burst rather than once per
//! append.

mod common;

use common::*;
use storage::{AppendUntil, LeaderEpoch, LogConfig, Offset};

#[test]
fn wait_written_returns_once_the_write_completed_and_caps_the_high_watermark() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let log = open(&path, LogConfig::default(), 1 << 20).await;
        let info = log.append(batch(0, 3, 100), LeaderEpoch(0)).await.unwrap();
        // In the tail only: nothing is written yet, so the high watermark cannot move.
        assert_eq!(log.written_offset(), Offset(0));
        log.set_high_watermark(Offset(3));
        assert_eq!(log.high_watermark(), Offset(0));
        let written = log.wait_written(info.last_offset.plus(1)).await.unwrap();
        assert_eq!(written, Offset(3));
        assert!(log.stats().writes >= 1);
        log.set_high_watermark(Offset(3));
        assert_eq!(log.high_watermark(), Offset(3));
        // A target past the log end waits only for what exists.
        assert_eq!(log.wait_written(Offset(100)).await.unwrap(), Offset(3));
        log.close().await.unwrap();
    });
}

#[test]
fn appends_during_a_write_share_the_next_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let log = open(&path, LogConfig::default(), 1 << 20).await;
        // The first append schedules a write of the (partial) tail block; yielding lets it go.
        log.append(batch(0, 1, 100), LeaderEpoch(0)).await.unwrap();
        glommio::executor().yield_task_queue_now().await;
        // 50 more arrive once it is submitted (none of these appends yields to the ring).
        let mut last = Offset(0);
        for i in 0..50 {
            last = log
                .append(batch(i, 1, 100), LeaderEpoch(0))
                .await
                .unwrap()
                .last_offset;
        }
        log.wait_written(last.plus(1)).await.unwrap();
        let stats = log.stats();
        // One write for the first append, one for the 50 that waited: not one per append.
        assert_eq!(stats.writes, 2, "{stats:?}");
        // The second write starts at the first one's block and covers the burst's bytes once.
        let burst_bytes = log.size_bytes();
        assert_eq!(
            stats.write_bytes,
            4096 + burst_bytes.div_ceil(4096) * 4096,
            "{stats:?}"
        );
        log.close().await.unwrap();
    });
}

#[test]
fn appends_made_before_the_write_task_runs_leave_in_one_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let log = open(&path, LogConfig::default(), 1 << 20).await;
        // 51 appends with no yield in between, as the produce requests a shard decodes in one
        // round: the write is built when its task runs, after them, so the partial tail block
        // is written once, not once for the first append and again for the rest.
        let mut last = Offset(0);
        for i in 0..51 {
            last = log
                .append(batch(i, 1, 100), LeaderEpoch(0))
                .await
                .unwrap()
                .last_offset;
        }
        assert_eq!(
            log.stats().writes,
            0,
            "no write built before the appends end"
        );
        log.wait_written(last.plus(1)).await.unwrap();
        let stats = log.stats();
        assert_eq!(stats.writes, 1, "{stats:?}");
        assert_eq!(
            stats.write_bytes,
            log.size_bytes().div_ceil(4096) * 4096,
            "{stats:?}"
        );
        log.close().await.unwrap();
    });
}

#[test]
fn append_until_written_returns_the_written_and_log_start_offsets_from_the_one_call() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let log = open(&path, LogConfig::default(), 1 << 20).await;
        let checked = |b| storage::ValidatedBatches::validate(&b).expect("valid");
        let tail = log
            .append_validated(
                checked(batch(0, 2, 100)),
                LeaderEpoch(0),
                AppendUntil::InMemory,
            )
            .await
            .unwrap();
        assert_eq!((tail.base_offset, tail.last_offset), (Offset(0), Offset(1)));
        assert_eq!(tail.written_offset, Offset(0), "in the tail only");
        let written = log
            .append_validated(
                checked(batch(1, 3, 100)),
                LeaderEpoch(0),
                AppendUntil::Written,
            )
            .await
            .unwrap();
        assert_eq!(written.base_offset, Offset(2));
        assert_eq!(
            written.written_offset,
            Offset(5),
            "written, the earlier append too"
        );
        assert_eq!(written.written_offset, log.written_offset());
        assert_eq!(written.log_start_offset, log.log_start_offset());
        assert!(!written.sync_needed, "flush.messages is not set");
        log.close().await.unwrap();
    });
}
