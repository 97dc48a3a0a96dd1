//! The per-shard batch cache: recent batches of every log on the shard, held as `Bytes`,
//! bounded in bytes. A fetch at or near the log end is answered from here with no disk read.
//!
//! Shape: for each log, the cached batches are a *suffix* of that log (contiguous, newest
//! last), so a lookup is one binary search. Eviction is FIFO across the shard: the oldest
//! inserted batch goes first, which is always the front of its log's suffix.
//! Invariant: `used_bytes` = sum of the sizes of all cached batches ≤ `max_bytes`, except that
//! a single batch larger than the whole budget is not cached at all.

use crate::batch::RecordBatch;
use crate::types::Offset;
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

/// Identifies one log within a shard's cache.
pub type LogId = u64;

/// One cached batch.
#[derive(Clone, Debug)]
pub struct CachedBatch {
    pub base_offset: Offset,
    pub last_offset: Offset,
    pub batch: RecordBatch,
}

#[derive(Default)]
struct Inner {
    max_bytes: usize,
    used_bytes: usize,
    logs: HashMap<LogId, VecDeque<CachedBatch>>,
    /// Insertion order across logs: (log, base offset). Entries whose batch was already
    /// removed by truncation are skipped when popped.
    fifo: VecDeque<(LogId, Offset)>,
    next_log_id: LogId,
    hits: u64,
    misses: u64,
}

/// A shard's batch cache; clone the handle to share it between the shard's logs.
#[derive(Clone)]
pub struct BatchCache {
    inner: Rc<RefCell<Inner>>,
}

/// Counters of a [`BatchCache`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub used_bytes: usize,
    pub max_bytes: usize,
    pub hits: u64,
    pub misses: u64,
}

impl BatchCache {
    /// A cache holding at most `max_bytes` bytes of batches.
    pub fn new(max_bytes: usize) -> BatchCache {
        BatchCache {
            inner: Rc::new(RefCell::new(Inner {
                max_bytes,
                ..Inner::default()
            })),
        }
    }

    /// Registers a log and returns its id.
    pub(crate) fn register(&self) -> LogId {
        let mut inner = self.inner.borrow_mut();
        let id = inner.next_log_id;
        inner.next_log_id += 1;
        inner.logs.insert(id, VecDeque::new());
        id
    }

    /// Forgets a log and frees its bytes.
    pub(crate) fn unregister(&self, log: LogId) {
        let mut inner = self.inner.borrow_mut();
        if let Some(batches) = inner.logs.remove(&log) {
            let freed: usize = batches.iter().map(|b| b.batch.len()).sum();
            inner.used_bytes -= freed;
        }
        inner.fifo.retain(|(id, _)| *id != log);
    }

    /// Appends a batch to `log`'s suffix, evicting the oldest batches of the shard as needed.
    pub(crate) fn insert(&self, log: LogId, batch: CachedBatch) {
        let mut guard = self.inner.borrow_mut();
        let inner = &mut *guard;
        let size = batch.batch.len();
        if size > inner.max_bytes {
            // Too big to cache: the suffix must stay contiguous, so drop this log's suffix.
            if let Some(batches) = inner.logs.get_mut(&log) {
                let freed: usize = batches.drain(..).map(|b| b.batch.len()).sum();
                inner.used_bytes -= freed;
            }
            return;
        }
        while inner.used_bytes + size > inner.max_bytes {
            let Some((victim, base)) = inner.fifo.pop_front() else {
                break;
            };
            if let Some(batches) = inner.logs.get_mut(&victim) {
                if batches.front().is_some_and(|b| b.base_offset == base) {
                    let b = batches.pop_front().expect("front checked above");
                    inner.used_bytes -= b.batch.len();
                }
            }
        }
        if let Some(batches) = inner.logs.get_mut(&log) {
            inner.used_bytes += size;
            inner.fifo.push_back((log, batch.base_offset));
            batches.push_back(batch);
        }
    }

    /// Removes `log`'s cached batches with base offset ≥ `from` (truncation).
    pub(crate) fn truncate_from(&self, log: LogId, from: Offset) {
        let mut guard = self.inner.borrow_mut();
        let inner = &mut *guard;
        if let Some(batches) = inner.logs.get_mut(&log) {
            while batches.back().is_some_and(|b| b.last_offset >= from) {
                let b = batches.pop_back().expect("back checked above");
                inner.used_bytes -= b.batch.len();
            }
        }
        inner.compact_fifo();
    }

    /// Removes `log`'s cached batches entirely below `before` (retention, delete-records).
    pub(crate) fn evict_below(&self, log: LogId, before: Offset) {
        let mut guard = self.inner.borrow_mut();
        let inner = &mut *guard;
        if let Some(batches) = inner.logs.get_mut(&log) {
            while batches.front().is_some_and(|b| b.last_offset < before) {
                let b = batches.pop_front().expect("front checked above");
                inner.used_bytes -= b.batch.len();
            }
        }
        inner.compact_fifo();
    }

    /// Batches of `log` from the one holding `offset` onwards, while their total stays within
    /// `max_bytes` (the first batch always comes, KIP-74) and their last offset is below
    /// `upper_bound`. `None` when `offset` is not inside the cached suffix.
    pub(crate) fn read(
        &self,
        log: LogId,
        offset: Offset,
        max_bytes: usize,
        upper_bound: Offset,
    ) -> Option<Vec<RecordBatch>> {
        let mut inner = self.inner.borrow_mut();
        let found = inner.logs.get(&log).and_then(|batches| {
            let first = batches.front()?;
            if offset < first.base_offset {
                return None;
            }
            let start = batches.partition_point(|b| b.last_offset < offset);
            if start == batches.len() {
                return None;
            }
            Some(take_batches(batches.range(start..), max_bytes, upper_bound))
        });
        match found {
            Some(_) => inner.hits += 1,
            None => inner.misses += 1,
        }
        found
    }

    /// Current counters.
    pub fn stats(&self) -> CacheStats {
        let inner = self.inner.borrow();
        CacheStats {
            used_bytes: inner.used_bytes,
            max_bytes: inner.max_bytes,
            hits: inner.hits,
            misses: inner.misses,
        }
    }
}

impl Inner {
    /// Drops FIFO entries whose batch is gone, once they outnumber live ones: keeps the FIFO
    /// bounded by twice the number of cached batches.
    fn compact_fifo(&mut self) {
        let live: usize = self.logs.values().map(VecDeque::len).sum();
        if self.fifo.len() > 2 * live + 64 {
            let logs = &self.logs;
            self.fifo.retain(|(id, base)| {
                logs.get(id)
                    .is_some_and(|b| b.iter().any(|c| c.base_offset == *base))
            });
        }
    }
}

/// Takes whole batches in order while their total stays within `max_bytes` (the first one is
/// always taken, KIP-74) and their last offset is below `upper_bound`.
pub(crate) fn take_batches<'a>(
    batches: impl Iterator<Item = &'a CachedBatch>,
    max_bytes: usize,
    upper_bound: Offset,
) -> Vec<RecordBatch> {
    let mut out = Vec::new();
    let mut total = 0usize;
    for b in batches {
        if b.last_offset >= upper_bound {
            break;
        }
        if !out.is_empty() && total + b.batch.len() > max_bytes {
            break;
        }
        total += b.batch.len();
        out.push(b.batch.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(base: i64, len: usize) -> CachedBatch {
        CachedBatch {
            base_offset: Offset(base),
            last_offset: Offset(base),
            batch: RecordBatch::from_contiguous(bytes::Bytes::from(vec![0u8; len])),
        }
    }

    #[test]
    fn evicts_oldest_across_logs_and_stays_bounded() {
        let cache = BatchCache::new(300);
        let a = cache.register();
        let b = cache.register();
        cache.insert(a, batch(0, 100));
        cache.insert(b, batch(0, 100));
        cache.insert(a, batch(1, 100));
        cache.insert(b, batch(1, 100));
        assert_eq!(cache.stats().used_bytes, 300);
        assert!(cache.read(a, Offset(0), 1000, Offset(10)).is_none());
        assert_eq!(cache.read(a, Offset(1), 1000, Offset(10)).unwrap().len(), 1);
        assert_eq!(cache.read(b, Offset(0), 1000, Offset(10)).unwrap().len(), 2);
        cache.truncate_from(b, Offset(1));
        assert_eq!(cache.stats().used_bytes, 200);
        assert_eq!(cache.read(b, Offset(0), 1, Offset(10)).unwrap().len(), 1);
        cache.insert(a, batch(2, 1000));
        assert!(cache.read(a, Offset(1), 1000, Offset(10)).is_none());
    }
}
