//! The group service's messages: the typed [`GroupOp`] a shard runs for a group it
//! coordinates, and the [`GroupReply`] it answers with (Kafka codes are chosen from
//! [`GroupError`] at the edge, `crate::errors`).

use super::error::GroupError;
use super::group::{JoinParams, JoinResult, SyncParams, SyncResult};
use super::offsets_log::CommittedOffset;
use bytes::Bytes;

/// One partition's commit in an OffsetCommit.
#[derive(Clone, Debug)]
pub struct OffsetCommitEntry {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
}

/// The transactional producer a TxnOffsetCommit writes for (KIP-98).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxnProducer {
    pub producer_id: i64,
    pub producer_epoch: i16,
}

/// An operation on one group, run by the shard that coordinates it.
#[derive(Debug)]
pub enum GroupOp {
    Join(JoinParams),
    Sync(SyncParams),
    Heartbeat {
        member_id: String,
        group_instance_id: Option<String>,
        generation: i32,
    },
    /// (member id, `group.instance.id`) of each leaving member.
    Leave {
        members: Vec<(String, Option<String>)>,
    },
    Commit {
        member_id: String,
        group_instance_id: Option<String>,
        generation: i32,
        offsets: Vec<OffsetCommitEntry>,
    },
    /// TxnOffsetCommit (KIP-98): offsets committed inside `producer`'s transaction, pending
    /// until its marker reaches the group's offsets partition. Member fields as `Commit`'s
    /// (empty, `None` and -1 before v3).
    TxnCommit {
        producer: TxnProducer,
        member_id: String,
        group_instance_id: Option<String>,
        generation: i32,
        offsets: Vec<OffsetCommitEntry>,
    },
    /// `None`: every committed offset of the group. `require_stable` (KIP-447): a partition
    /// with a transaction's offset pending answers `UNSTABLE_OFFSET_COMMIT`.
    FetchOffsets {
        partitions: Option<Vec<(String, Vec<i32>)>>,
        require_stable: bool,
    },
    Describe,
    Delete,
    DeleteOffsets {
        partitions: Vec<(String, Vec<i32>)>,
    },
}

/// A member as DescribeGroups shows it.
#[derive(Clone, Debug)]
pub struct DescribedMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub metadata: Bytes,
    pub assignment: Bytes,
}

/// A group as DescribeGroups shows it.
#[derive(Clone, Debug)]
pub struct GroupDescription {
    pub state: &'static str,
    pub protocol_type: String,
    /// The chosen assignor (empty unless Stable, as in Kafka).
    pub protocol: String,
    pub members: Vec<DescribedMember>,
}

/// A group as ListGroups shows it.
#[derive(Clone, Debug)]
pub struct ListedGroup {
    pub group_id: String,
    pub protocol_type: String,
    pub state: &'static str,
}

/// One committed offset, for the consumer-lag metric.
#[derive(Clone, Debug)]
pub struct CommittedStatus {
    pub group: String,
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
}

/// The coordinating shard's answer to a [`GroupOp`].
#[derive(Debug)]
pub enum GroupReply {
    Join(JoinResult),
    Sync(SyncResult),
    /// A Heartbeat or DeleteGroups that succeeded.
    Done,
    /// The op failed as a whole.
    Error(GroupError),
    /// Per leaving member, in request order.
    Leave(Vec<Result<(), GroupError>>),
    /// (topic, partition, result) per committed or deleted partition, in request order.
    PartitionErrors(Vec<(String, i32, Result<(), GroupError>)>),
    /// (topic, partition, committed offset or `None`, or the partition's error).
    Offsets(Vec<(String, i32, Result<Option<CommittedOffset>, GroupError>)>),
    Described(GroupDescription),
}
