//! The partition's typed errors; the broker maps them to Kafka codes at its edge.

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
}
