//! Crash safety: a child process appends and flushes, printing each flushed offset; the parent
//! SIGKILLs it at varied points (40 kill points, many of them mid-roll), reopens the log and checks
//! that every acknowledged batch is present and byte-identical, that the log is a contiguous
//! prefix of what the child appended, and that appends continue after it. The leader epoch
//! rises every few dozen batches, so the recovered leader-epoch cache is checked against the
//! epochs of the recovered batches too (checkpoint plus recovery scan, kills mid-roll).

mod common;

use bytes::Bytes;
use common::*;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use storage::{LeaderEpoch, LogConfig, Offset};

const KILL_POINTS: u64 = 40;
const CHILD_ENV: &str = "SLUICE_CRASH_CHILD_DIR";

fn config() -> LogConfig {
    LogConfig {
        // Large enough that recovery scans cross the 1 MiB scan chunk, small enough to roll.
        segment_bytes: 3 << 20,
        index_interval_bytes: 1024,
        ..LogConfig::default()
    }
}

/// The batch the child appends at `base`: its shape depends only on `base`, so the parent
/// can rebuild what any offset must hold.
fn batch_for(base: i64) -> Bytes {
    let records = 1 + (base % 4) as usize;
    let value_bytes = 1 + ((base * 7919) % 3000) as usize;
    let values: Vec<Vec<u8>> = (0..records)
        .map(|i| vec![((base + i as i64) % 251) as u8; value_bytes])
        .collect();
    let refs: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
    storage::build_batch(storage::TimestampMs(base), &refs)
}

/// The leader epoch the child appends the batch at `base` with: rising with the offset.
fn epoch_for(base: i64) -> i32 {
    (base / 97) as i32
}

#[test]
#[ignore = "child process of sigkill_at_many_points_loses_nothing_acknowledged"]
fn crash_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    run(move || async move {
        let log = open(Path::new(&dir), config(), 4 << 20).await;
        let mut out = std::io::stdout();
        writeln!(out, "OPEN {}", log.log_end_offset().0).unwrap();
        out.flush().unwrap();
        let mut round = 0u64;
        loop {
            // A few appends without waiting, then a flush: the kill lands between writes,
            // inside a write, or inside a sync.
            for _ in 0..1 + round % 5 {
                let base = log.log_end_offset().0;
                log.append(batch_for(base), LeaderEpoch(epoch_for(base)))
                    .await
                    .unwrap();
            }
            let durable = log.flush().await.unwrap();
            writeln!(out, "ACK {}", durable.0).unwrap();
            out.flush().unwrap();
            round += 1;
        }
    });
}

/// xorshift64*: deterministic kill points without a dependency.
fn next_random(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

#[test]
fn sigkill_at_many_points_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut seed = 0x5eed_u64;
    let mut acknowledged = 0i64;
    for kill_point in 0..KILL_POINTS {
        let acks_before_kill = next_random(&mut seed) % 40;
        let acknowledged_before = acknowledged;
        let mut child = Command::new(&exe)
            .args([
                "--ignored",
                "--exact",
                "crash_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let mut acks = 0;
        let mut opened_at = None;
        while let Some(Ok(line)) = lines.next() {
            if let Some((_, v)) = line.split_once("OPEN ") {
                opened_at = Some(v.parse::<i64>().unwrap());
            }
            if let Some(v) = line.strip_prefix("ACK ") {
                acknowledged = acknowledged.max(v.parse().unwrap());
                acks += 1;
                if acks >= acks_before_kill {
                    break;
                }
            }
        }
        // SAFETY: plain kill(2) of our own child process.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        child.wait().unwrap();
        let opened_at = opened_at.expect("child printed OPEN");
        assert!(
            opened_at >= acknowledged_before,
            "kill point {kill_point}: child reopened at {opened_at}, below {acknowledged_before}"
        );
        verify(dir.path(), acknowledged, kill_point);
    }
    assert!(acknowledged > 0);
}

/// Reopens the log and checks it against the acknowledged offset.
fn verify(dir: &Path, acknowledged: i64, kill_point: u64) {
    let dir = dir.to_path_buf();
    run(move || async move {
        let log = open(&dir, config(), 0).await;
        let end = log.log_end_offset();
        assert!(
            end.0 >= acknowledged,
            "kill point {kill_point}: log end {end} below acknowledged {acknowledged}"
        );
        let mut offset = Offset(0);
        let mut epochs: Vec<(i32, i64)> = Vec::new();
        while offset < end {
            let batches = log.read(offset, 1 << 20, end).await.unwrap();
            assert!(
                !batches.is_empty(),
                "kill point {kill_point}: hole at {offset}"
            );
            for b in batches {
                let epoch = epoch_for(offset.0);
                let want = stamped(&batch_for(offset.0), offset.0, epoch);
                if epochs.last().map(|(e, _)| *e) != Some(epoch) {
                    epochs.push((epoch, offset.0));
                }
                assert_eq!(
                    b.to_vec(),
                    want,
                    "kill point {kill_point}: batch at {offset} differs"
                );
                let h = storage::validate_batch(&b.to_vec()).unwrap();
                offset = h.last_offset().plus(1);
            }
        }
        assert_eq!(offset, end);
        let recovered = epoch_starts(&log);
        assert_eq!(
            recovered, epochs,
            "kill point {kill_point}: leader-epoch cache differs from the batches' epochs"
        );
    });
}
