//! The partition service: the typed operations a shard runs on a partition it owns
//! ([`ops`]), and their routing and handling ([`service`]): run here when this shard owns the
//! partition, else sent over the shard mesh to its owner. The partition itself (its
//! replication policy, high watermark and waiters) is [`replication::Partition`]; the shard
//! context holds it, the partition lifecycle (`crate::partition_lifecycle`) opens and deletes
//! it and applies its role.

pub mod epoch_check;
pub mod isr_changes;
pub mod leader_epoch;
pub mod ops;
#[cfg(test)]
mod produce_tests;
pub mod service;
#[cfg(test)]
mod txn_tests;

pub use ops::{PartitionOp, PartitionOpError, PartitionReply};
