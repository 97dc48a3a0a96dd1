//! Producer-state snapshots (KIP-98 sequences and open transactions): `<offset>.snapshot`
//! files written at each roll and at close, and the rebuild of producer state from the newest
//! usable one plus the batches after it — markers included, so the replay also rebuilds the
//! `.txnindex` entries of the aborts it passes (the active segment's are written only at
//! roll, clean close and truncation; after a crash they are found again here).

use super::{list_dir, PartitionLog};
use crate::checkpoint;
use crate::error::Result;
use crate::error::{BatchError, StorageError};
use crate::io::remove_file;
use crate::producer_state::ProducerState;
use crate::segment::Segment;
use crate::txn::control_batch_marker;
use crate::types::Offset;
use std::path::PathBuf;
use std::rc::Rc;

/// Extension of producer-state snapshots, named by the offset they were taken at.
const SNAPSHOT_EXT: &str = "snapshot";
/// Producer-state snapshots kept per partition.
const SNAPSHOTS_KEPT: usize = 3;

impl PartitionLog {
    /// Offsets of the producer-state snapshots in the partition directory, ascending.
    async fn snapshot_offsets(&self) -> Result<Vec<Offset>> {
        let listing = list_dir(&self.shared.dir).await?;
        let mut offsets: Vec<Offset> = listing
            .iter()
            .filter_map(|n| {
                n.strip_suffix(SNAPSHOT_EXT)?
                    .strip_suffix('.')?
                    .parse()
                    .ok()
            })
            .map(Offset)
            .collect();
        offsets.sort();
        Ok(offsets)
    }

    /// Rebuilds producer state from the newest snapshot in `[log start, log end]` plus the
    /// batches after it, or from the log start when there is none. Snapshots outside that
    /// range are removed (Kafka's `ProducerStateManager.truncateAndReload`): beyond the log end
    /// a crash or truncation cut their batches off; below the log start they describe batches
    /// retention or DeleteRecords removed, and replaying from the log start after one would
    /// skip the batches in between (an open transaction whose marker is among them would stay
    /// open forever).
    pub(super) async fn rebuild_producer_state(&self) -> Result<()> {
        let (log_start, log_end) = (self.log_start_offset(), self.log_end_offset());
        let snapshots = self.snapshot_offsets().await?;
        for stale in snapshots
            .iter()
            .filter(|o| **o > log_end || **o < log_start)
        {
            remove_file(&self.snapshot_path(*stale)).await?;
        }
        let mut state = ProducerState::default();
        let mut from = log_start;
        if let Some(&at) = snapshots
            .iter()
            .rev()
            .find(|o| (log_start..=log_end).contains(*o))
        {
            let path = self.snapshot_path(at);
            match checkpoint::read(&path)
                .await?
                .and_then(|v| ProducerState::decode(&v))
            {
                Some(s) => {
                    state = s;
                    from = at;
                }
                None => {
                    tracing::warn!(path = %path.display(), "unreadable producer snapshot; replaying the log")
                }
            }
        }
        // The replayed range's aborts are added again: entries at or after `from` that a
        // `.txnindex` file holds may describe batches a crash or truncation took away.
        let replayed: Vec<Rc<Segment>> = {
            let st = self.shared.state.borrow();
            let first = st
                .segments
                .range(..=from)
                .next_back()
                .map_or(from, |(base, _)| *base);
            st.segments.range(first..).map(|(_, s)| s.clone()).collect()
        };
        for segment in &replayed {
            segment.ensure_txn_index().await?;
            segment.truncate_txn_index(from);
        }
        let mut offset = from;
        while offset < log_end {
            let batches = self.read(offset, 1 << 20, log_end).await?;
            let Some(last) = batches.last() else { break };
            for b in &batches {
                let header = b.header();
                let marker = if header.is_control() {
                    // Markers are few: copying one out of its chunks is cheap.
                    let bytes = b.to_vec();
                    match control_batch_marker(&bytes) {
                        Ok(m) => m,
                        Err(e) => return Err(self.corrupt_batch(header.base_offset, e)),
                    }
                } else {
                    None
                };
                let completed = state.record(&header, marker.as_ref());
                if let Some(entry) = completed.and_then(|c| c.aborted_entry()) {
                    let segment = replayed
                        .iter()
                        .rev()
                        .find(|s| s.base_offset <= entry.last_offset)
                        .expect("the replayed segments hold every replayed marker");
                    segment.push_aborted(entry);
                }
            }
            offset = last.header().last_offset().plus(1);
        }
        self.shared.state.borrow_mut().producers = state;
        Ok(())
    }

    /// Removes every producer-state snapshot (the log is truncated fully: they describe
    /// batches that are gone). Not durable by itself: the caller syncs the directory.
    pub(super) async fn remove_producer_snapshots(&self) -> Result<()> {
        for at in self.snapshot_offsets().await? {
            remove_file(&self.snapshot_path(at)).await?;
        }
        Ok(())
    }

    /// A stored control batch whose marker does not parse: the log holds bytes the leader
    /// could not have written.
    fn corrupt_batch(&self, base_offset: Offset, e: BatchError) -> StorageError {
        StorageError::Corrupt {
            path: self.shared.dir.clone(),
            why: format!("control batch at offset {base_offset}: {e}"),
        }
    }

    fn snapshot_path(&self, offset: Offset) -> PathBuf {
        self.shared.dir.join(format!(
            "{}.{SNAPSHOT_EXT}",
            crate::segment::file_stem(offset)
        ))
    }

    /// Writes the producer state as of the log end (`<log end>.snapshot`) and keeps only the
    /// newest [`SNAPSHOTS_KEPT`] snapshots.
    pub(super) async fn snapshot_producer_state(&self) -> Result<()> {
        let (at, values) = {
            let st = self.shared.state.borrow();
            (st.log_end, st.producers.encode())
        };
        checkpoint::write(&self.snapshot_path(at), &values).await?;
        let snapshots = self.snapshot_offsets().await?;
        let excess = snapshots.len().saturating_sub(SNAPSHOTS_KEPT);
        for old in &snapshots[..excess] {
            remove_file(&self.snapshot_path(*old)).await?;
        }
        Ok(())
    }
}
