//! Producer-state snapshots (KIP-98 sequences): `<offset>.snapshot` files written at each roll
//! and at close, and the rebuild of producer state from the newest usable one plus the batches
//! after it.

use super::{list_dir, PartitionLog};
use crate::checkpoint;
use crate::error::Result;
use crate::io::remove_file;
use crate::producer_state::ProducerState;
use crate::types::Offset;
use std::path::PathBuf;

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

    /// Rebuilds producer state from the newest snapshot at or below the log end plus the
    /// batches after it; snapshots beyond the log end (a crash or truncation cut them off) are
    /// removed.
    pub(super) async fn rebuild_producer_state(&self) -> Result<()> {
        let (log_start, log_end) = (self.log_start_offset(), self.log_end_offset());
        let snapshots = self.snapshot_offsets().await?;
        for stale in snapshots.iter().filter(|o| **o > log_end) {
            remove_file(&self.snapshot_path(*stale)).await?;
        }
        let mut state = ProducerState::default();
        let mut from = log_start;
        if let Some(&at) = snapshots.iter().rev().find(|o| **o <= log_end) {
            let path = self.snapshot_path(at);
            match checkpoint::read(&path)
                .await?
                .and_then(|v| ProducerState::decode(&v))
            {
                Some(s) => {
                    state = s;
                    from = at.max(log_start);
                }
                None => {
                    tracing::warn!(path = %path.display(), "unreadable producer snapshot; replaying the log")
                }
            }
        }
        let mut offset = from;
        while offset < log_end {
            let batches = self.read(offset, 1 << 20, log_end).await?;
            let Some(last) = batches.last() else { break };
            for b in &batches {
                state.record(&b.header());
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
