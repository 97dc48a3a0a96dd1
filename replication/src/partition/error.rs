//! The partition's typed errors; the broker maps them to Kafka codes at its edge.

use crate::partition::IsrError;
use crate::runtime::NodeId;
use std::time::Duration;
use storage::{Offset, StorageError};

/// Why a partition operation failed.
#[derive(Debug, thiserror::Error)]
pub enum PartitionError {
    /// The log refused or failed the operation (invalid batch, I/O, out of range, closed).
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// `acks=all` was not completed by the in-sync replicas within the produce `timeout`;
    /// the records stay appended and the high watermark still follows their write.
    #[error("acks=all not completed within {timeout:?}")]
    RequestTimedOut { timeout: Duration },
    /// DeleteRecords to an offset that is negative or above the high watermark.
    #[error("delete-records offset {offset} outside [0, high watermark {high_watermark}]")]
    OffsetOutOfRange {
        offset: Offset,
        high_watermark: Offset,
    },
    /// The high watermark passed an `acks=all` produce's records while the ISR was below
    /// `min.insync.replicas` (`NOT_ENOUGH_REPLICAS_AFTER_APPEND`, 20); they stay appended.
    #[error("records below {end_offset} replicated with the ISR below min.insync.replicas")]
    NotEnoughReplicasAfterAppend { end_offset: Offset },
    /// A leader's operation on a follower, or a follower's on a leader
    /// (`NOT_LEADER_OR_FOLLOWER`, 6); `leader` is the leader this replica knows, if any.
    #[error("not {wanted} of this partition (leader {leader:?})")]
    NotLeaderOrFollower {
        wanted: &'static str,
        leader: Option<NodeId>,
    },
    /// The ISR state refused the operation: an `acks=all` produce while the ISR is below
    /// `min.insync.replicas` ([`IsrError::NotEnoughReplicas`], nothing appended), a fetch
    /// from a non-replica, a stale broker epoch, a fetch offset out of range, an invalid
    /// leadership.
    #[error(transparent)]
    Isr(#[from] IsrError),
}
