//! Typed cross-shard messages (DESIGN.md §2). A request that touches a partition of another
//! shard becomes a [`ShardMsg::Partition`] sent over the bounded glommio channel mesh; record
//! bytes travel as `Bytes` (refcounted, never copied) and the reply comes back on a oneshot.

use crate::metadata::ClusterMetadata;
use crate::partitions::{PartitionOp, PartitionReply};
use futures_channel::oneshot;
use replication::metadata::{ControllerError, ControllerOp};
use std::sync::Arc;
use storage::TopicPartition;

/// Capacity of each shard-to-shard channel, in messages (backpressure beyond it).
pub const SHARD_CHANNEL_CAPACITY: usize = 1024;

/// Every message one shard sends another.
pub enum ShardMsg {
    Partition {
        tp: TopicPartition,
        op: PartitionOp,
        reply: oneshot::Sender<PartitionReply>,
    },
    Controller {
        op: ControllerOp,
        reply: oneshot::Sender<Result<(), ControllerError>>,
    },
    /// Install a new metadata snapshot (open/close logs, apply configs); reply when done.
    Metadata {
        snapshot: Arc<ClusterMetadata>,
        reply: oneshot::Sender<()>,
    },
    /// Allocate a new idempotent-producer id (shard 0).
    AllocateProducerId {
        reply: oneshot::Sender<Result<i64, ControllerError>>,
    },
    /// Run a group operation on the shard owning the group's `__consumer_offsets` partition.
    Group {
        partition: i32,
        group_id: String,
        op: crate::groups::GroupOp,
        reply: oneshot::Sender<crate::groups::GroupReply>,
    },
    /// List this shard's groups (ListGroups).
    ListGroups {
        reply: oneshot::Sender<Vec<crate::groups::ListedGroup>>,
    },
    /// Report this shard's metrics and partition offsets (admin `/metrics`, `/v1/status`).
    Snapshot {
        reply: oneshot::Sender<crate::metrics::ShardSnapshot>,
    },
}
