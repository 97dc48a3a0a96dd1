//! Newtypes for the numbers the log hands out, so a record offset is never confused with a
//! byte position or an epoch.

use std::fmt;

/// A Kafka record offset: the position of a record in its partition, counted in records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Offset(pub i64);

impl Offset {
    /// The offset `n` records after this one.
    pub fn plus(self, n: i64) -> Offset {
        Offset(self.0 + n)
    }
}

impl fmt::Display for Offset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A partition leader epoch (KIP-101), stamped into every appended batch header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LeaderEpoch(pub i32);

/// Milliseconds since the Unix epoch, as Kafka timestamps are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TimestampMs(pub i64);

/// A topic partition: the unit one shard owns and one [`crate::PartitionLog`] stores.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    /// Topic name (validated by the broker with Kafka's rules).
    pub topic: String,
    /// Partition index, from 0.
    pub partition: i32,
}

impl TopicPartition {
    /// The directory name Kafka uses for this partition: `<topic>-<partition>`.
    pub fn dir_name(&self) -> String {
        format!("{}-{}", self.topic, self.partition)
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}
