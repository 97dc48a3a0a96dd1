//! Leader/follower log replication (ISR, high watermark) and the Raft controller.
//!
//! Empty until the replication issue: the storage crate already exposes what it will need
//! (leader epoch on append, a caller-moved high watermark, `truncate_to`).
