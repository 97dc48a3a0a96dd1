//! What ListOffsets asks a partition for, and its answer.

use storage::{Offset, TimestampMs};

/// What ListOffsets asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffsetSpec {
    /// The high watermark (Kafka's "latest").
    Latest,
    /// The log start offset.
    Earliest,
    /// The record with the largest timestamp (KIP-734).
    MaxTimestamp,
    /// The first record whose timestamp is ≥ this.
    Timestamp(TimestampMs),
}

/// ListOffsets' answer: `None` where no record matches (Kafka's -1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListedOffset {
    pub offset: Option<Offset>,
    pub timestamp: Option<TimestampMs>,
}

impl ListedOffset {
    pub(super) const NONE: ListedOffset = ListedOffset {
        offset: None,
        timestamp: None,
    };
}
