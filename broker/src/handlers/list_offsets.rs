//! ListOffsets (key 2): latest (-1, the high watermark; for a request that is not a client's,
//! `replica_id` ≠ -1 — e.g. a follower's — the log end offset), earliest (-2, the log start
//! offset), max timestamp (-3, KIP-734), or the first offset whose timestamp is ≥ T (-1 when none),
//! each with the leader epoch of the offset (v4+), after KIP-320's check of the request's
//! current leader epoch; OFFSET_NOT_AVAILABLE (v5+, else LEADER_NOT_AVAILABLE) while a new
//! leader's high watermark is below its epoch's start (see `crate::partitions::leader_epoch`).
//!
//! `isolation_level` 1 (read_committed, v2+, KIP-98) bounds a client's answers by the last
//! stable offset instead of the high watermark, as Kafka's `fetchOffsetForTimestamp`: latest
//! is the LSO, and a timestamp's or the max timestamp's offset at or past the LSO is -1.

use super::wire::topic_name;
use crate::authz::{self, AclOperation};
use crate::errors::{code, partition_op_error_code};
use crate::partitions::{epoch_check, PartitionOp, PartitionOpError, PartitionReply};
use crate::session::Session;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use net::kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
use replication::{Isolation, OffsetSpec};
use std::rc::Rc;
use storage::{TimestampMs, TopicPartition};

/// First ListOffsets version whose response carries the leader epoch (and whose request
/// carries the current leader epoch, KIP-320).
const LEADER_EPOCH_VERSION: i16 = 4;

/// First ListOffsets version answered OFFSET_NOT_AVAILABLE (older ones get
/// LEADER_NOT_AVAILABLE), as Kafka's `ReplicaManager.fetchOffset`.
const OFFSET_NOT_AVAILABLE_VERSION: i16 = 5;

pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: ListOffsetsRequest,
    version: i16,
) -> ListOffsetsResponse {
    let mut response = ListOffsetsResponse::default();
    let isolation = isolation_of(req.replica_id.0, req.isolation_level);
    for topic in req.topics {
        let name = topic.name.0.to_string();
        let mut out = ListOffsetsTopicResponse::default();
        out.name = topic_name(&name);
        let describable = authz::topic(shard, session, AclOperation::Describe, &name);
        for p in topic.partitions {
            let tp = TopicPartition {
                topic: name.clone(),
                partition: p.partition_index,
            };
            let mut r = ListOffsetsPartitionResponse::default();
            r.partition_index = p.partition_index;
            // Kafka: DESCRIBE on the topic (`crate::authz`).
            if !describable {
                r.error_code = code(ResponseError::TopicAuthorizationFailed);
                r.offset = -1;
                r.timestamp = -1;
                out.partitions.push(r);
                continue;
            }
            let reply = match offset_spec(p.timestamp) {
                Some(spec) => {
                    let op = PartitionOp::ListOffsets { spec, isolation };
                    let epoch = replication::requested_leader_epoch(p.current_leader_epoch);
                    epoch_check::call_checked(shard, tp, epoch, op).await
                }
                None => {
                    r.error_code = code(ResponseError::InvalidRequest);
                    r.offset = -1;
                    r.timestamp = -1;
                    out.partitions.push(r);
                    continue;
                }
            };
            match reply {
                PartitionReply::Offset {
                    offset,
                    timestamp,
                    leader_epoch,
                } => {
                    r.offset = offset;
                    r.timestamp = timestamp;
                    if version >= LEADER_EPOCH_VERSION {
                        r.leader_epoch = leader_epoch;
                    }
                }
                PartitionReply::Error(PartitionOpError::OffsetNotAvailable(_))
                    if version < OFFSET_NOT_AVAILABLE_VERSION =>
                {
                    // Kafka answers older clients with a code they know and retry on.
                    r.error_code = code(ResponseError::LeaderNotAvailable);
                    r.offset = -1;
                    r.timestamp = -1;
                }
                PartitionReply::Error(error) => {
                    r.error_code = partition_op_error_code(&error);
                    r.offset = -1;
                    r.timestamp = -1;
                }
                other => {
                    tracing::error!(?other, "unexpected reply to list offsets");
                    r.error_code = code(ResponseError::UnknownServerError);
                }
            }
            out.partitions.push(r);
        }
        response.topics.push(out);
    }
    response
}

/// The bound of a request from `replica_id`: a client's (-1) reads up to the high watermark;
/// any other's — a broker's (≥ 0: a follower asking its leader's range, Kafka's
/// `ReplicaFetcherThread` after OFFSET_OUT_OF_RANGE) or Kafka's debugging id (-2) — up to the
/// log end offset, as Kafka's `KafkaApis` gives only client requests (`replicaId ==
/// CONSUMER_REPLICA_ID`) an isolation level; a client's read_committed (`isolation_level` 1)
/// reads up to the last stable offset.
fn isolation_of(replica_id: i32, isolation_level: i8) -> Isolation {
    const CONSUMER_REPLICA_ID: i32 = -1;
    const READ_COMMITTED: i8 = 1;
    match (replica_id, isolation_level) {
        (CONSUMER_REPLICA_ID, READ_COMMITTED) => Isolation::LastStable,
        (CONSUMER_REPLICA_ID, _) => Isolation::HighWatermark,
        _ => Isolation::LogEnd,
    }
}

/// The request's `timestamp`: -1 latest, -2 earliest, -3 max timestamp, else the first offset
/// whose timestamp is ≥ this (ms); `None` for another negative value (`INVALID_REQUEST`).
fn offset_spec(timestamp: i64) -> Option<OffsetSpec> {
    const LATEST: i64 = -1;
    const EARLIEST: i64 = -2;
    const MAX_TIMESTAMP: i64 = -3;
    match timestamp {
        LATEST => Some(OffsetSpec::Latest),
        EARLIEST => Some(OffsetSpec::Earliest),
        MAX_TIMESTAMP => Some(OffsetSpec::MaxTimestamp),
        t if t < 0 => None,
        t => Some(OffsetSpec::Timestamp(TimestampMs(t))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_clients_request_is_bounded_by_the_high_watermark() {
        assert_eq!(isolation_of(-1, 0), Isolation::HighWatermark);
        assert_eq!(isolation_of(-1, 1), Isolation::LastStable, "read_committed");
        assert_eq!(
            isolation_of(-2, 0),
            Isolation::LogEnd,
            "Kafka's debugging replica id"
        );
        assert_eq!(isolation_of(0, 0), Isolation::LogEnd);
        assert_eq!(
            isolation_of(3, 1),
            Isolation::LogEnd,
            "a replica reads everything"
        );
    }
}
