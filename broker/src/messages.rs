//! Typed cross-shard messages (DESIGN.md §2). A request that touches a partition of another
//! shard becomes a [`ShardMsg::Partition`] sent over the bounded glommio channel mesh; record
//! bytes travel as `Bytes` (refcounted, never copied) and the reply comes back on a oneshot.

use crate::metadata::ClusterMetadata;
use bytes::Bytes;
use futures_channel::oneshot;
use replication::metadata::{ControllerError, ControllerOp};
use std::sync::Arc;
use std::time::{Duration, Instant};
use storage::{RecordBatch, TopicPartition};

/// Capacity of each shard-to-shard channel, in messages (backpressure beyond it).
pub const SHARD_CHANNEL_CAPACITY: usize = 1024;

/// An operation on one partition, run by its owning shard.
#[derive(Debug)]
pub enum PartitionOp {
    /// Append a produce request's record set, answering as `acks` asks (see
    /// [`crate::partition::OwnedPartition::produce`]) or with `REQUEST_TIMED_OUT` after
    /// `timeout` (the request's `timeout_ms`).
    Produce {
        records: Bytes,
        acks: Acks,
        timeout: Duration,
    },
    /// Read batches from `offset`, at most `max_bytes` (first batch whole, KIP-74), below the
    /// high watermark.
    Read { offset: i64, max_bytes: usize },
    /// Resolve once the high watermark passes `offset`, at `deadline`, or when the fetch that
    /// asked drops `cancel` (it was answered thanks to another partition).
    WaitForData {
        offset: i64,
        deadline: Instant,
        cancel: oneshot::Receiver<()>,
    },
    /// ListOffsets: -1 latest, -2 earliest, -3 max timestamp, else the first offset whose
    /// timestamp is ≥ this (ms).
    ListOffsets { timestamp: i64 },
    /// DeleteRecords (KIP-107): move the log start offset to `offset` (-1: the high
    /// watermark); answered with [`PartitionReply::LogStart`].
    DeleteRecordsBefore { offset: i64 },
}

/// A Produce request's `acks`: what its answer waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acks {
    /// `acks=0`: no answer is sent; the append is not awaited.
    None,
    /// `acks=1`: the leader's own write has completed.
    Leader,
    /// `acks=-1` (all): the write has completed on every in-sync replica (single node: here).
    All,
}

impl Acks {
    /// The wire value's meaning; `None` for a value Kafka refuses (`INVALID_REQUIRED_ACKS`).
    pub fn from_wire(acks: i16) -> Option<Acks> {
        match acks {
            0 => Some(Acks::None),
            1 => Some(Acks::Leader),
            -1 => Some(Acks::All),
            _ => None,
        }
    }
}

/// The owning shard's answer to a [`PartitionOp`].
#[derive(Debug)]
pub enum PartitionReply {
    Produced {
        base_offset: i64,
        log_start_offset: i64,
        /// The append time stamped into LogAppendTime batches (ms), else -1.
        log_append_time_ms: i64,
    },
    Read {
        high_watermark: i64,
        log_start_offset: i64,
        batches: Vec<RecordBatch>,
    },
    /// The awaited data arrived, or the deadline passed.
    Waited,
    Offset {
        offset: i64,
        timestamp: i64,
    },
    /// The log start offset after a DeleteRecords (Kafka's "low watermark").
    LogStart {
        log_start_offset: i64,
    },
    /// A Kafka error code for this partition.
    Error(i16),
}

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
