//! What brokers ask the active controller, and what it answers: the messages a broker's
//! shard 0 sends over its shard mesh and, when another broker is the active controller, over
//! the network (`broker/src/controller/forward.rs`). Serialisable for that reason; the
//! controller service runs them (`broker/src/controller/`).

use super::op::{ControllerAnswer, ControllerOp};
use super::record::MetadataRecord;
use serde::{Deserialize, Serialize};

/// What a broker asks the active controller.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum ControllerRequest {
    /// A metadata change asked by broker `from` (the owner of what it creates for itself).
    Op { from: i32, op: ControllerOp },
    /// A new block of producer ids for broker `from` (KRaft's AllocateProducerIds).
    AllocateProducerIds { from: i32 },
    /// Broker `broker_id`'s heartbeat (KRaft's BrokerHeartbeat): its registration's epoch,
    /// the metadata log index it has installed, and whether it wants to shut down.
    Heartbeat {
        broker_id: i32,
        broker_epoch: i64,
        metadata_offset: u64,
        want_shut_down: bool,
    },
    /// The controller quorum's state as the leader sees it (DescribeQuorum, KIP-595).
    DescribeQuorum,
    /// A broker-only node (`process.roles=broker`, an observer of the metadata log: KRaft's
    /// Fetch from an observer, KIP-595) asks for the committed entries after index `after`
    /// (0: from the start). The active controller answers at once when it has applied more,
    /// else once it does or a bounded wait elapsed (a long poll).
    FetchMetadata { from: i32, after: u64 },
    /// Removes controller `voter_id` from the quorum's voters (KIP-853's RemoveRaftVoter),
    /// answered once the change committed.
    RemoveVoter { voter_id: i32 },
    /// Where the controllers are: asked by a controller joining a running quorum of a
    /// `controller.quorum.bootstrap.servers` controller (any controller answers).
    DescribeVoters,
    /// Adds controller `voter_id`, reached at `endpoint` (`ip:port`), to the quorum's voters
    /// (KIP-853's AddRaftVoter) once it caught up, within `timeout_ms`.
    AddVoter {
        voter_id: i32,
        endpoint: String,
        timeout_ms: u64,
    },
}

/// What the active controller answers a [`ControllerRequest`].
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum ControllerReply {
    /// A metadata change's answer, and the metadata log index of the image it was answered
    /// from (its entry's, for a change): a broker that forwarded the change waits until it has
    /// installed that image itself, so that what was created is usable through it at once.
    Answer {
        answer: ControllerAnswer,
        applied_index: u64,
    },
    /// A block of producer ids, `start..end`, for the requesting broker.
    ProducerIds { start: i64, end: i64 },
    /// A heartbeat's answer (BrokerHeartbeatResponse's fields).
    Heartbeat {
        is_fenced: bool,
        should_shut_down: bool,
    },
    /// The controller quorum's state.
    Quorum(QuorumDescription),
    /// What an observer fetched ([`ControllerRequest::FetchMetadata`]).
    Metadata(MetadataFetch),
    /// A voter change committed.
    VotersChanged,
    /// The controllers' addresses ([`ControllerRequest::DescribeVoters`]): node id and
    /// `ip:port`; and the cluster id the answering node's metadata names (empty: not yet).
    Voters {
        cluster_id: String,
        voters: Vec<(i32, String)>,
    },
}

/// The committed metadata an observer fetched, and the leader that served it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetadataFetch {
    /// The active controller that answered (the Raft leader) and its term.
    pub leader: i32,
    pub term: u64,
    /// The cluster its metadata log names (an observer refuses another cluster's).
    pub cluster_id: String,
    pub batch: FetchedMetadata,
}

/// Entries after the observer's index, or the whole image when the leader no longer keeps
/// them (KRaft's snapshot fetch).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FetchedMetadata {
    /// The committed non-empty entries after the asked index, in index order (none: nothing
    /// newer within the wait).
    Entries(Vec<FetchedEntry>),
    /// The image after the entry at `index`, as records (a snapshot's content).
    Image {
        index: u64,
        cluster_id: String,
        records: Vec<MetadataRecord>,
    },
}

/// One committed entry of the metadata log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FetchedEntry {
    pub index: u64,
    /// Its records; `None` when the entry does not decode (every voter skipped it, and so
    /// does the observer).
    pub records: Option<Vec<MetadataRecord>>,
}

/// The controller quorum as its leader describes it (DescribeQuorumResponse's partition).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuorumDescription {
    pub leader_id: i32,
    /// The leader's term (Kafka's leader epoch).
    pub leader_epoch: i32,
    /// The metadata log's committed end (Raft's commit index).
    pub high_watermark: i64,
    pub voters: Vec<ReplicaDescription>,
    /// Replicas that follow without voting: the broker-only nodes that fetched from this
    /// leader (`process.roles=broker`).
    pub observers: Vec<ReplicaDescription>,
}

/// One replica of the metadata log (DescribeQuorumResponse's `ReplicaState`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaDescription {
    pub replica_id: i32,
    /// Its log end offset as the leader knows it.
    pub log_end_offset: i64,
    /// When the leader last heard from it, ms since the Unix epoch; -1: not known.
    pub last_fetch_timestamp_ms: i64,
    /// When it last had everything the leader had, ms since the Unix epoch; -1: not known.
    pub last_caught_up_timestamp_ms: i64,
}
