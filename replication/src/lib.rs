//! Leader/follower log replication (ISR, high watermark) and the controller's metadata state
//! machine.
//!
//! `metadata`: the cluster metadata image, its KRaft-shaped records, the pure `apply`, the
//! proposer, and the record log + snapshot that persist it. Partition replication comes with
//! the replication issue: the storage crate already exposes what it will need (leader epoch
//! on append, a caller-moved high watermark, `truncate_to`).

pub mod metadata;
