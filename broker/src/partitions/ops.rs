//! The partition service's messages: a [`PartitionOp`] for the shard owning a partition, its
//! [`PartitionReply`], and [`PartitionOpError`] (Kafka codes are chosen from it only at the
//! edge, `crate::errors`). Record bytes travel as `Bytes` (refcounted, never copied).

use bytes::Bytes;
use futures_channel::oneshot;
use replication::runtime::{MonotonicTime, NodeId};
use replication::{Acks, Isolation, OffsetSpec};
use std::time::Duration;
use storage::{LeaderEpoch, Offset, RecordBatch};

/// An operation on one partition, run by its owning shard on its [`replication::Partition`].
#[derive(Debug)]
pub enum PartitionOp {
    /// Check once (split and CRC-32C, `storage::ValidatedBatches`; then `produce_checks`) and
    /// append a produce request's record set, answering as
    /// `acks` asks (see [`replication::Partition::append`]) or with `REQUEST_TIMED_OUT` after
    /// `timeout` (the request's `timeout_ms`).
    Produce {
        records: Bytes,
        acks: Acks,
        timeout: Duration,
        /// A client's, or a coordinator's write of its own log (TxnOffsetCommit's
        /// transactional records: sequences not checked, as Kafka's COORDINATOR origin).
        origin: storage::AppendOrigin,
        /// KIP-890 part 1: the guard of the verification made for the set's transactional
        /// batch ([`storage::VerificationGuard::SENTINEL`] when none was needed), when
        /// `transaction.partition.verification.enable` asks the leader to check it; `None`
        /// otherwise.
        verification: Option<storage::VerificationGuard>,
    },
    /// KIP-890 part 1, on the leader: starts the verification of a producer's transactional
    /// batch at `base_sequence` (Kafka's `Partition.maybeStartTransactionVerification`),
    /// answered with [`PartitionReply::VerificationStarted`]. Errors: `NotLeaderOrFollower`
    /// on a follower.
    StartTxnVerification {
        producer_id: i64,
        producer_epoch: i16,
        base_sequence: i32,
    },
    /// A consumer fetch of this partition, answered once (see
    /// [`replication::Partition::fetch`]): batches from `offset`, at most `max_bytes` (first
    /// batch whole, KIP-74), below the high watermark, as soon as at least `min_bytes` are
    /// there, at `deadline`, or — with whatever is there — when the fetch that asked drops
    /// `cancel` (it has enough from other partitions). `isolation` is
    /// [`Isolation::LastStable`] for a read_committed fetch (below the last stable offset,
    /// woken when it moves, with the aborted transactions read), else
    /// [`Isolation::HighWatermark`]. On a leader, when one of `read_replica_candidates` (the
    /// replicas in the consumer's rack, KIP-392) qualifies
    /// ([`replication::Partition::preferred_read_replica`]), answered at once with
    /// [`PartitionReply::ReadElsewhere`] instead.
    Fetch {
        offset: Offset,
        read_replica_candidates: Vec<NodeId>,
        max_bytes: usize,
        min_bytes: usize,
        isolation: Isolation,
        deadline: MonotonicTime,
        cancel: oneshot::Receiver<()>,
    },
    /// A follower's fetch (a Fetch with `replica_id` ≥ 0), answered once with
    /// [`PartitionReply::ReplicaRead`] (see [`replication::Partition::replica_fetch_parked`]):
    /// moves the follower's state in the ISR and reads at most `max_bytes` from
    /// `fetch_offset` below the leader's written offset, or answers the diverging epoch
    /// (KIP-320); parked like [`PartitionOp::Fetch`] until `min_bytes`, `deadline` or
    /// `cancel`, woken by the leader's writes.
    ReplicaFetch {
        replica: NodeId,
        fetch_offset: Offset,
        /// The follower's latest epoch (Fetch v12+ `last_fetched_epoch`; `None`: -1).
        last_fetched_epoch: Option<LeaderEpoch>,
        /// The follower's broker epoch (Fetch v15+ `ReplicaState.ReplicaEpoch`, KIP-903;
        /// `None`: -1 or an older Fetch), checked against the one the metadata registers.
        broker_epoch: Option<i64>,
        /// The broker epoch the request's metadata snapshot registers for `replica` while it
        /// is not fenced (`None`: not registered, or fenced), resolved once by the handler.
        alive_epoch: Option<i64>,
        max_bytes: usize,
        min_bytes: usize,
        deadline: MonotonicTime,
        cancel: oneshot::Receiver<()>,
    },
    /// A follower's position for its fetcher (`crate::replica_fetcher`): once the log's tail
    /// is written, [`PartitionReply::FollowerPosition`] with the written offset and the latest
    /// leader epoch. Errors: `NotLeaderOrFollower` when this broker leads the partition.
    FollowerPosition,
    /// A follower's append of what its fetch from the leader returned (see
    /// [`replication::Partition::append_as_follower`]): `records` (possibly empty) with the
    /// leader's offsets, then the high watermark `min(leader_high_watermark, written)`, then
    /// the log start offset up to `leader_log_start_offset`; answered with
    /// [`PartitionReply::FollowerPosition`] after the write.
    AppendAsFollower {
        /// The leader epoch the fetch was made at (see [`PartitionOp::HandleOutOfRange`]).
        fetched_at: LeaderEpoch,
        records: Bytes,
        leader_high_watermark: Offset,
        leader_log_start_offset: Offset,
    },
    /// A follower's answer to its leader's OFFSET_OUT_OF_RANGE, given the leader's log start
    /// and log end offsets (see [`replication::Partition::handle_out_of_range`]: truncate to
    /// the leader's end, or fully to start at the leader's log start, or nothing); answered
    /// with [`PartitionReply::FollowerPosition`].
    HandleOutOfRange {
        /// The leader epoch the fetch was made at: the op applies only while this replica
        /// follows at that epoch (a fetcher's answer from a former leader is dropped, as Kafka
        /// drops a fetch response whose partition state changed meanwhile); else
        /// `LeaderEpoch` (fenced or unknown) or `NotLeaderOrFollower` on a leader.
        fetched_at: LeaderEpoch,
        leader_log_start_offset: Offset,
        leader_log_end_offset: Offset,
    },
    /// A follower's truncation on the leader's diverging epoch `(epoch, end_offset)` (see
    /// [`replication::Partition::truncate_to_diverging_epoch`]); answered with
    /// [`PartitionReply::FollowerPosition`].
    TruncateToDivergingEpoch {
        /// The leader epoch the fetch was made at (see [`PartitionOp::HandleOutOfRange`]).
        fetched_at: LeaderEpoch,
        epoch: LeaderEpoch,
        end_offset: Offset,
    },
    /// ListOffsets, answered with [`PartitionReply::Offset`] (see
    /// [`crate::partitions::leader_epoch::list_offsets`]): for a client (`isolation`
    /// [`Isolation::HighWatermark`]) below the high watermark; for any other request
    /// (`replica_id` ≠ -1: a follower's, or the debugging id -2; [`Isolation::LogEnd`]) below
    /// the log end offset, as Kafka answers a request without an isolation level.
    ListOffsets {
        spec: OffsetSpec,
        isolation: Isolation,
    },
    /// OffsetForLeaderEpoch (KIP-101/KIP-320): the end offset of `leader_epoch` in this
    /// partition's log, answered with [`PartitionReply::EpochEndOffset`].
    OffsetForLeaderEpoch { leader_epoch: LeaderEpoch },
    /// DeleteRecords (KIP-107): move the log start offset to `before` (`None`: the high
    /// watermark); answered with [`PartitionReply::LogStart`].
    DeleteRecordsBefore { before: Option<Offset> },
    /// WriteTxnMarkers (KIP-98): append `marker` on this leader and answer once the high
    /// watermark passes it, at most `timeout` (see [`replication::Partition::append_txn_marker`]);
    /// answered with [`PartitionReply::MarkerWritten`].
    WriteTxnMarker {
        marker: storage::TxnMarker,
        timeout: Duration,
    },
    /// DescribeProducers (KIP-664): the producers this replica's log knows (leader or
    /// follower), answered with [`PartitionReply::Producers`].
    DescribeProducers,
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
        /// The last stable offset (KIP-98) when read.
        last_stable_offset: i64,
        log_start_offset: i64,
        batches: Vec<RecordBatch>,
        /// A read_committed fetch's aborted transactions in the range read; `None` otherwise.
        aborted: Option<Vec<storage::AbortedTxn>>,
    },
    /// A consumer's [`PartitionOp::Fetch`] pointed to another replica (KIP-392): its id and
    /// the leader's offsets, no records (Kafka's `ReplicaManager.readFromLog` with a preferred
    /// read replica).
    ReadElsewhere {
        preferred_read_replica: i32,
        high_watermark: i64,
        last_stable_offset: i64,
        log_start_offset: i64,
    },
    /// The answer to a [`PartitionOp::ReplicaFetch`].
    ReplicaRead {
        high_watermark: i64,
        log_start_offset: i64,
        batches: Vec<RecordBatch>,
        /// The diverging epoch and its end offset here (KIP-320), when the follower diverged.
        diverging_epoch: Option<(LeaderEpoch, Offset)>,
    },
    Offset {
        offset: i64,
        timestamp: i64,
        /// The leader epoch of the record at `offset` (for latest, the current epoch); -1
        /// when unknown or no record matched.
        leader_epoch: i32,
    },
    /// The largest epoch ≤ the requested one and where it ends (the next epoch's start
    /// offset, or the log end offset for the current epoch); -1 and -1 when undefined.
    EpochEndOffset { leader_epoch: i32, end_offset: i64 },
    /// A follower's position: where its next fetch starts (its written offset), its latest
    /// leader epoch (`None`: none yet) and its log start offset, Fetch v12+ `fetch_offset` /
    /// `last_fetched_epoch` / `log_start_offset`.
    FollowerPosition {
        fetch_offset: Offset,
        last_fetched_epoch: Option<LeaderEpoch>,
        log_start_offset: Offset,
    },
    /// The log start offset after a DeleteRecords (Kafka's "low watermark").
    LogStart { log_start_offset: i64 },
    /// A transaction marker appended at `offset`, below the high watermark.
    MarkerWritten { offset: i64 },
    /// The producers of a partition (DescribeProducers).
    Producers(Vec<ActiveProducer>),
    /// The guard a verified append must carry ([`storage::VerificationGuard::SENTINEL`]: the
    /// producer's transaction is open here already, nothing to verify).
    VerificationStarted(storage::VerificationGuard),
    /// The operation failed; [`crate::errors::partition_op_error_code`] gives its Kafka code.
    Error(PartitionOpError),
}

impl From<replication::Read> for PartitionReply {
    /// A consumer's read (or its offsets and no records) as [`PartitionReply::Read`].
    fn from(read: replication::Read) -> PartitionReply {
        PartitionReply::Read {
            high_watermark: read.high_watermark.0,
            last_stable_offset: read.last_stable_offset.0,
            log_start_offset: read.log_start_offset.0,
            batches: read.batches,
            aborted: read.aborted,
        }
    }
}

/// One producer as DescribeProducers describes it (Kafka's
/// `DescribeProducersResponseData.ProducerState`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ActiveProducer {
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// -1 when no batch of it is remembered.
    pub last_sequence: i32,
    /// The max timestamp of its last remembered batch; -1 when none.
    pub last_timestamp: i64,
    /// -1 before its first marker.
    pub coordinator_epoch: i32,
    /// The first offset of its open transaction; -1 when none is open.
    pub current_txn_start_offset: i64,
}

/// Why a [`PartitionOp`] failed.
#[derive(Debug, thiserror::Error)]
pub enum PartitionOpError {
    /// No shard of this broker hosts the partition (unknown topic, partition or owner).
    #[error("partition not hosted here")]
    UnknownTopicOrPartition,
    /// The partition exists but this broker does not lead it (Kafka's NOT_LEADER_OR_FOLLOWER:
    /// the client refreshes its metadata and goes to the leader).
    #[error("this broker is not the partition's leader")]
    NotLeaderOrFollower,
    /// The partition is hosted here but its log cannot be opened.
    #[error("partition log cannot be opened: {0}")]
    LogUnavailable(storage::StorageError),
    /// The produce checks refused the record set.
    #[error(transparent)]
    Rejected(#[from] crate::produce_checks::ProduceCheckError),
    /// The partition refused or failed the operation.
    #[error(transparent)]
    Partition(#[from] replication::PartitionError),
    /// The request's current leader epoch is not the partition's (KIP-320).
    #[error(transparent)]
    LeaderEpoch(#[from] replication::LeaderEpochError),
    /// ListOffsets right after an election: the high watermark is still below the start
    /// offset of the current leader epoch, so an offset handed out now could go backwards.
    #[error(transparent)]
    OffsetNotAvailable(#[from] replication::OffsetNotAvailable),
    /// The owning shard did not take or answer the message.
    #[error("the owning shard did not answer")]
    ShardUnavailable,
}
