//! Zero-ahead (writer.rs): the preallocated space just past the log end is written with zeros
//! in the background, so data writes overwrite written blocks (io_uring does them inline) rather
//! than converting fallocate's unwritten extents (ext4 has io_uring hand those to io-wq worker
//! threads). Checked here: the space ahead is written (FIEMAP: no unwritten extent) and reads
//! as zeros; zeros never land on data; a roll waits for the zero write in flight, so closed
//! segments keep their exact length; a crash part-way through zeroing recovers to the log end;
//! and data writes reuse pooled buffers.

mod common;

use common::*;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::Duration;
use storage::{LeaderEpoch, LogConfig, Offset, PartitionLog};

/// `struct fiemap` with room for `FIEMAP_EXTENTS` extents (linux/fiemap.h).
#[repr(C)]
struct Fiemap {
    fm_start: u64,
    fm_length: u64,
    fm_flags: u32,
    fm_mapped_extents: u32,
    fm_extent_count: u32,
    fm_reserved: u32,
    fm_extents: [FiemapExtent; FIEMAP_EXTENTS],
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct FiemapExtent {
    fe_logical: u64,
    fe_physical: u64,
    fe_length: u64,
    fe_reserved64: [u64; 2],
    fe_flags: u32,
    fe_reserved: [u32; 3],
}

const FIEMAP_EXTENTS: usize = 256;
/// `_IOWR('f', 11, struct fiemap)` (the header's 32-byte struct, without the extents).
const FS_IOC_FIEMAP: libc::c_ulong = 0xC020_660B;
const FIEMAP_EXTENT_UNWRITTEN: u32 = 0x800;
const FIEMAP_FLAG_SYNC: u32 = 1;

/// Bytes of `[from, to)` of the file at `path` that lie in unwritten (allocated, never
/// written) extents, and bytes in written ones.
fn unwritten_and_written_bytes(path: &Path, from: u64, to: u64) -> (u64, u64) {
    let file = std::fs::File::open(path).unwrap();
    let mut map = Fiemap {
        fm_start: from,
        fm_length: to - from,
        fm_flags: FIEMAP_FLAG_SYNC,
        fm_mapped_extents: 0,
        fm_extent_count: FIEMAP_EXTENTS as u32,
        fm_reserved: 0,
        fm_extents: [FiemapExtent::default(); FIEMAP_EXTENTS],
    };
    // SAFETY: `map` is a `struct fiemap` followed by room for `fm_extent_count` extents, and
    // lives across the call; the descriptor is open.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), FS_IOC_FIEMAP, &mut map as *mut Fiemap) };
    assert_eq!(rc, 0, "FIEMAP: {}", std::io::Error::last_os_error());
    assert!(
        (map.fm_mapped_extents as usize) < FIEMAP_EXTENTS,
        "too many extents to check"
    );
    let (mut unwritten, mut written) = (0, 0);
    for e in &map.fm_extents[..map.fm_mapped_extents as usize] {
        let start = e.fe_logical.max(from);
        let end = (e.fe_logical + e.fe_length).min(to);
        if end <= start {
            continue;
        }
        if e.fe_flags & FIEMAP_EXTENT_UNWRITTEN != 0 {
            unwritten += end - start;
        } else {
            written += end - start;
        }
    }
    (unwritten, written)
}

fn segment_path(dir: &Path, base: i64) -> std::path::PathBuf {
    dir.join(format!("{base:020}.log"))
}

/// Lets the background queue run until no zero write is due or in flight.
async fn settle(log: &PartitionLog) {
    let mut seen = u64::MAX;
    loop {
        glommio::timer::sleep(Duration::from_millis(20)).await;
        let now = log.stats().zero_ahead_writes;
        if now == seen {
            return;
        }
        seen = now;
    }
}

async fn append_and_wait(log: &PartitionLog, n: usize, value_bytes: usize) -> Offset {
    let mut last = Offset(0);
    for i in 0..n {
        let info = log
            .append(batch(i as i64, 1, value_bytes), LeaderEpoch(0))
            .await
            .unwrap();
        last = info.last_offset;
    }
    log.wait_written(last.plus(1)).await.unwrap()
}

#[test]
fn the_space_ahead_of_the_log_end_is_written_with_zeros() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let config = LogConfig::default();
        let ahead = config.zero_ahead_bytes;
        let log = open(&path, config, 1 << 20).await;
        append_and_wait(&log, 10, 1000).await;
        settle(&log).await;
        let stats = log.stats();
        assert!(stats.zero_ahead_writes >= 3, "{stats:?}");
        assert_eq!(
            stats.zero_ahead_bytes,
            stats.zero_ahead_writes * (256 << 10)
        );
        let end = log.size_bytes().div_ceil(4096) * 4096;
        // Past a 64 KiB gap for the next appends, the next `zero_ahead_bytes` are written.
        let file = segment_path(&path, 0);
        let (unwritten, written) =
            unwritten_and_written_bytes(&file, end + (64 << 10), end + ahead);
        assert_eq!(unwritten, 0, "space ahead left unwritten");
        assert_eq!(written, ahead - (64 << 10));
        // Further ahead, in the segment's first 2 MiB step, it is still only allocated
        // (zeroing is bounded).
        let far = 3 << 19;
        let (unwritten, _) = unwritten_and_written_bytes(&file, far, far + (1 << 19));
        assert_eq!(unwritten, 1 << 19, "zeroing ran past its bound");
        // It reads as zeros, and the data before it is intact.
        let bytes = std::fs::read(&file).unwrap();
        assert!(bytes[log.size_bytes() as usize..(end + ahead) as usize]
            .iter()
            .all(|&b| b == 0));
        let read = log.read(Offset(0), 1 << 20, Offset(10)).await.unwrap();
        assert_eq!(read.len(), 10);
        log.close().await.unwrap();
    });
}

#[test]
fn appends_through_zeroed_space_keep_their_bytes_and_rolls_keep_exact_lengths() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let config = LogConfig {
            segment_bytes: 2 << 20,
            ..LogConfig::default()
        };
        let log = open(&path, config.clone(), 64 << 20).await;
        // ~5 MiB in 10 KiB batches, without waiting in between: data writes run into zeroed
        // space, catch up with zero writes in flight, and the log rolls twice.
        let mut last = Offset(0);
        let mut expected = Vec::new();
        for i in 0..500 {
            let b = batch(i, 1, 10_000);
            expected.push(b.clone());
            last = log.append(b, LeaderEpoch(0)).await.unwrap().last_offset;
            if i % 7 == 0 {
                glommio::executor().yield_task_queue_now().await;
            }
        }
        log.wait_written(last.plus(1)).await.unwrap();
        settle(&log).await;
        assert!(log.segment_count() >= 3);
        assert!(log.stats().zero_ahead_writes > 0);
        log.close().await.unwrap();
        // Every segment is cut to its exact size (no zero write landed after the cut): the
        // file lengths add up to the bytes appended.
        let mut file_bytes = 0;
        for entry in std::fs::read_dir(&path).unwrap() {
            let name = entry.unwrap().path();
            if name.extension().is_some_and(|e| e == "log") {
                file_bytes += std::fs::metadata(&name).unwrap().len();
            }
        }
        let appended: u64 = expected.iter().map(|b| b.len() as u64).sum();
        assert_eq!(file_bytes, appended);
        let log = open(&path, config, 1 << 20).await;
        assert_eq!(log.log_end_offset(), Offset(500));
        let mut next = 0usize;
        while next < expected.len() {
            let read = log
                .read(Offset(next as i64), 1 << 20, Offset(500))
                .await
                .unwrap();
            assert!(!read.is_empty());
            for b in read {
                assert_eq!(
                    b.to_vec(),
                    stamped(&expected[next], next as i64, 0),
                    "batch {next}"
                );
                next += 1;
            }
        }
        log.close().await.unwrap();
    });
}

#[test]
fn a_roll_right_after_a_zero_write_started_leaves_the_segment_its_exact_length() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let log = open(&path, LogConfig::default(), 1 << 20).await;
        for round in 0..20 {
            let zero_writes = log.stats().zero_ahead_writes;
            let b = batch(round, 1, 1000);
            let batch_bytes = b.len() as u64;
            let base = log.log_end_offset();
            log.append(b, LeaderEpoch(0)).await.unwrap();
            // The append started a zero write (in the background queue); roll at once.
            log.roll().await.unwrap();
            assert!(log.stats().zero_ahead_writes > zero_writes, "round {round}");
            let len = std::fs::metadata(segment_path(&path, base.0))
                .unwrap()
                .len();
            assert_eq!(
                len, batch_bytes,
                "round {round}: closed segment of one batch"
            );
        }
        log.close().await.unwrap();
    });
}

#[test]
fn a_crash_part_way_through_zeroing_recovers_to_the_log_end() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    let p = path.clone();
    run(move || async move {
        let log = open(&p, LogConfig::default(), 1 << 20).await;
        append_and_wait(&log, 20, 1000).await;
        settle(&log).await;
        // One more append starts another zero write; the executor ends with it in flight and
        // no clean close: what a process crash leaves.
        let last = append_and_wait(&log, 300, 1000).await;
        assert_eq!(last, Offset(320));
        std::mem::forget(log);
    });
    run(move || async move {
        let log = open(&path, LogConfig::default(), 1 << 20).await;
        assert!(!log.stats().opened_clean);
        assert_eq!(
            log.log_end_offset(),
            Offset(320),
            "recovery stops at the log end"
        );
        let info = log.append(batch(0, 1, 10), LeaderEpoch(1)).await.unwrap();
        assert_eq!(info.base_offset, Offset(320));
        log.wait_written(Offset(321)).await.unwrap();
        log.close().await.unwrap();
        let log = open(&path, LogConfig::default(), 1 << 20).await;
        assert_eq!(log.log_end_offset(), Offset(321));
        log.close().await.unwrap();
    });
}

#[test]
fn steady_appends_reuse_pooled_write_buffers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let log = open(&path, LogConfig::default(), 1 << 20).await;
        let one_at_a_time = async |n| {
            for i in 0..n {
                let info = log.append(batch(i, 1, 1000), LeaderEpoch(0)).await.unwrap();
                log.wait_written(info.last_offset.plus(1)).await.unwrap();
            }
        };
        one_at_a_time(50).await;
        let before = log.stats();
        one_at_a_time(1000).await;
        let after = log.stats();
        let writes = after.writes - before.writes;
        assert!(writes >= 1000, "one write per waited append: {writes}");
        // Writes here are one or two blocks long: after warming up, each finds a buffer of
        // its length in the pool.
        assert_eq!(
            after.write_buffers_allocated, before.write_buffers_allocated,
            "{after:?}"
        );
        assert_eq!(
            after.write_buffers_reused - before.write_buffers_reused,
            writes
        );
        log.close().await.unwrap();
    });
}
