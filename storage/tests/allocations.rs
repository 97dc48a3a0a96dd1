//! Heap allocations on the append path, counted by a counting global allocator on the
//! executor's thread: an append allocates its batch list and one stamped header per batch (the
//! header's one allocation serves every clone), and nothing per write in the writer: data
//! writes take pooled aligned buffers (`LogStats::write_buffers_reused`) and the partial tail
//! block is copied into storage the writer keeps.

mod common;

use common::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use storage::{LeaderEpoch, LogConfig, Offset};

/// Counts allocations made on the current thread.
struct CountingAllocator;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: defers every call to the system allocator; counting touches only a thread-local
// `Cell` (no allocation; `try_with` copes with thread teardown).
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's contract for `alloc` is passed on unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout (above).
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

#[test]
fn appends_allocate_two_small_blocks_each_and_their_write_no_buffer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let log = open(&path, LogConfig::default(), 64 << 20).await;
        let batch = batch(0, 1, 1000);
        // Warm up: the cache's, the write queue's and the pool's storage reach their size,
        // and the segment's reservation passes its 2 and 4 MiB step boundaries, so that the
        // window below lies within one step. (Past a boundary the writer leaves up to 64 KiB
        // unzeroed, whose writes complete later and may hold more buffers at once.)
        for _ in 0..5 {
            let mut last = Offset(0);
            for _ in 0..1000 {
                last = log
                    .append(batch.clone(), LeaderEpoch(0))
                    .await
                    .unwrap()
                    .last_offset;
            }
            log.wait_written(last.plus(1)).await.unwrap();
        }
        let before = allocations();
        let mut last = Offset(0);
        for _ in 0..1000 {
            last = log
                .append(batch.clone(), LeaderEpoch(0))
                .await
                .unwrap()
                .last_offset;
        }
        let per_append = (allocations() - before) as f64 / 1000.0;
        // The batch list (split_batches) and the stamped header; the write's task is one
        // more for the whole burst.
        assert!(per_append <= 2.01, "{per_append} allocations per append");
        let stats_before = log.stats();
        log.wait_written(last.plus(1)).await.unwrap();
        let stats = log.stats();
        assert!(stats.writes > stats_before.writes);
        assert_eq!(
            stats.write_buffers_allocated, stats_before.write_buffers_allocated,
            "{stats:?}"
        );
        log.close().await.unwrap();
    });
}
