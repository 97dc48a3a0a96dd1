//! The coordinators' shared runtime (Kafka's `CoordinatorRuntime`): what the group coordinator
//! (`crate::groups`, over `__consumer_offsets`) and the transaction coordinator (`crate::txn`,
//! over `__transaction_state`) both need to live on the partitions of an internal topic.
//!
//! - placement: which partition of the topic holds a key ([`partition_for`], Kafka's
//!   `abs(javaHashCode(key)) % partitions`);
//! - leadership: the coordinator of a partition's keys follows its leadership
//!   ([`CoordinatedPartitions`]: load on election, unload on resignation, the leader epoch as
//!   the coordinator epoch), and elections queue loads for the coordinator's load loop
//!   ([`LoadQueue`]);
//! - the log: a coordinator writes its state as `acks=all` appends, answered once the ISR
//!   has them and they are on this broker's disk ([`log::append`]), and loads it by replaying
//!   the partition from its log start ([`log::replay`]).
//!
//! Each coordinator keeps its own state per shard (the keys of the partitions the shard owns)
//! and its own record format; this module holds no state of its own.

pub mod log;
mod partitions;
mod placement;

pub use partitions::{CoordinatedPartitions, LoadId, LoadQueue, NotServing};
pub use placement::partition_for;
