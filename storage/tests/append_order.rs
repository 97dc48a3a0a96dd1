//! Appends take offsets in the order `append` was called, also when some of them had to wait
//! (a roll under way, unwritten-bytes backpressure): a call that arrives just as the wait ends
//! must not overtake one that waited. (With 1 MiB segments a produce request arriving while a
//! roll finished took the offsets of the one queued before it: consumers read the records of
//! one batch at the offsets of the previous one; librdkafka's test 0038 failed so.)

mod common;

use bytes::Bytes;
use common::*;
use std::future::Future;
use std::task::Poll;
use std::time::Duration;
use storage::{build_batch, LeaderEpoch, LogConfig, Offset, TimestampMs};

/// One batch of `records` records whose values are the big-endian sequence numbers `first..`.
fn numbered(first: u64, records: u64, value_bytes: usize) -> Bytes {
    let values: Vec<Vec<u8>> = (first..first + records)
        .map(|seq| {
            let mut v = seq.to_be_bytes().to_vec();
            v.resize(value_bytes, 0xab);
            v
        })
        .collect();
    let refs: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
    build_batch(TimestampMs(1_000), &refs)
}

#[test]
fn an_append_that_waited_for_a_roll_is_not_overtaken() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let log = open(&path, small_config(), 1 << 20).await;
        log.append(numbered(0, 1, 100), LeaderEpoch(0))
            .await
            .unwrap();
        log.flush().await.unwrap();
        // A roll starts (busy from its first poll) and waits for its I/O.
        let mut roll = std::pin::pin!(log.roll());
        let first_poll = std::future::poll_fn(|cx| Poll::Ready(roll.as_mut().poll(cx))).await;
        assert!(first_poll.is_pending(), "the roll waits for I/O");
        // Append A is called while the roll runs, and waits for it.
        let waiting = {
            let log = log.clone();
            glommio::spawn_local(async move {
                log.append(numbered(1, 1, 100), LeaderEpoch(0))
                    .await
                    .unwrap()
            })
        };
        glommio::executor().yield_now().await;
        // The roll ends (waking A) and append B is called before A runs again.
        roll.await.unwrap();
        let b = log
            .append(numbered(2, 1, 100), LeaderEpoch(0))
            .await
            .unwrap();
        let a = waiting.await;
        assert_eq!(a.base_offset, Offset(1), "A was called first");
        assert_eq!(b.base_offset, Offset(2), "B was called second");
        log.close().await.unwrap();
    });
}

#[test]
fn concurrent_appends_keep_call_order_through_rolls_and_backpressure() {
    const BATCHES: u64 = 400;
    const RECORDS: u64 = 10;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let config = LogConfig {
            // About 60 batches per segment, and appends wait once 8 KiB are unwritten.
            unwritten_bytes_max: 8 << 10,
            ..small_config()
        };
        let log = open(&path, config, 1 << 20).await;
        // Calls arrive one after another while earlier ones may still wait, with the ring's
        // completions (writes, roll steps) reaped in between, as a connection's pipelined
        // produce requests do.
        let mut tasks = Vec::new();
        for i in 0..BATCHES {
            let log = log.clone();
            tasks.push(glommio::spawn_local(async move {
                log.append(numbered(i * RECORDS, RECORDS, 100), LeaderEpoch(0))
                    .await
                    .unwrap()
            }));
            if i % 2 == 0 {
                glommio::timer::sleep(Duration::from_micros(20)).await;
            }
        }
        for (i, task) in (0..BATCHES).zip(tasks) {
            let info = task.await;
            assert_eq!(info.base_offset, Offset((i * RECORDS) as i64), "call {i}");
        }
        assert!(log.segment_count() > 3, "the log rolled");
        // And every offset holds the record produced for it, read back from the segments.
        log.flush().await.unwrap();
        let mut offset = Offset(0);
        let end = log.log_end_offset();
        while offset < end {
            for batch in log.read(offset, 1 << 20, end).await.unwrap() {
                let h = batch.header();
                let seq = u64::try_from(h.base_offset.0).unwrap();
                assert_eq!(
                    batch.to_vec(),
                    stamped(&numbered(seq, RECORDS, 100), h.base_offset.0, 0),
                    "batch at offset {}",
                    h.base_offset.0
                );
                offset = h.last_offset().plus(1);
            }
        }
        log.close().await.unwrap();
    });
}
