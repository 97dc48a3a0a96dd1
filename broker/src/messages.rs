//! Typed cross-shard messages (DESIGN.md §2). A request that touches a partition of another
//! shard becomes a [`ShardMsg::Partition`] sent over the bounded channel mesh (`crate::rt`); record
//! bytes travel as `Bytes` (refcounted, never copied) and the reply comes back on a oneshot.

use crate::metadata::ClusterMetadata;
use crate::partitions::{PartitionOp, PartitionReply};
use futures_channel::oneshot;
use replication::metadata::{ControllerError, ControllerReply, ControllerRequest};
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
    /// A request for the active controller, to shard 0: it runs it when this broker is the
    /// active controller, and forwards it otherwise (unless another broker `forwarded` it).
    Controller {
        request: ControllerRequest,
        forwarded: bool,
        reply: oneshot::Sender<Result<ControllerReply, ControllerError>>,
    },
    /// Install a new metadata snapshot (open/close logs, apply configs); reply when done.
    Metadata {
        snapshot: Arc<ClusterMetadata>,
        reply: oneshot::Sender<()>,
    },
    /// A new idempotent-producer id from this broker's block (shard 0).
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
    /// Run a transaction operation on the shard owning the transactional id's
    /// `__transaction_state` partition.
    Txn {
        partition: i32,
        transactional_id: String,
        op: crate::txn::TxnOp,
        reply: oneshot::Sender<crate::txn::TxnReply>,
    },
    /// List this shard's transactional ids (ListTransactions).
    ListTxns {
        filter: crate::txn::ops::ListFilter,
        reply: oneshot::Sender<Result<Vec<crate::txn::ops::ListedTxn>, crate::txn::TxnError>>,
    },
    /// A transaction marker was written to offsets `partition`, which this shard owns: its
    /// groups' pending transactional offsets end (`groups::service::on_txn_marker`).
    TxnMarker {
        partition: i32,
        producer_id: i64,
        end: storage::TxnResult,
        reply: oneshot::Sender<Result<(), crate::groups::GroupError>>,
    },
    /// List this shard's groups (ListGroups).
    ListGroups {
        reply: oneshot::Sender<Result<Vec<crate::groups::ListedGroup>, crate::groups::GroupError>>,
    },
    /// Report this shard's metrics and partition offsets (admin `/metrics`, `/v1/status`).
    Snapshot {
        reply: oneshot::Sender<crate::metrics::ShardSnapshot>,
    },
    /// Another shard's client-quota meters that moved since its last report (at most
    /// `quotas::QUOTA_REPORT_METERS_MAX`), for the broker-wide rates; no reply.
    QuotaReport {
        report: Arc<crate::quotas::QuotaReport>,
    },
}
