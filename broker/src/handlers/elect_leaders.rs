//! ElectLeaders (key 43), v0–2 (KIP-183, KIP-460): each partition has one replica, this
//! broker, which always leads it; so no election is ever needed. Named partitions are answered
//! `ELECTION_NOT_NEEDED` (84), unknown ones `UNKNOWN_TOPIC_OR_PARTITION`; a request for all
//! partitions (null list) gets an empty result, since Kafka's controller leaves out the
//! partitions that already have their leader. Election type 0 (preferred) and 1 (unclean) are
//! the two Kafka knows; any other is `INVALID_REQUEST`.

use super::str_bytes;
use crate::errors::code;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::elect_leaders_response::{
    PartitionResult, ReplicaElectionResult,
};
use net::kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse};

const PREFERRED: i8 = 0;
const UNCLEAN: i8 = 1;

pub fn handle(shard: &Shard, req: ElectLeadersRequest) -> ElectLeadersResponse {
    let mut response = ElectLeadersResponse::default();
    if req.election_type != PREFERRED && req.election_type != UNCLEAN {
        response.error_code = code(ResponseError::InvalidRequest);
        return response;
    }
    let metadata = shard.metadata();
    for topic in req.topic_partitions.unwrap_or_default() {
        let partitions = metadata
            .topics
            .get(topic.topic.0.as_str())
            .map_or(0, |t| t.partitions.len());
        let mut out = ReplicaElectionResult::default();
        out.topic = topic.topic.clone();
        for p in topic.partitions {
            let mut r = PartitionResult::default();
            r.partition_id = p;
            let known = usize::try_from(p).is_ok_and(|i| i < partitions);
            let (error, message) = if known {
                (
                    ResponseError::ElectionNotNeeded,
                    "Leader election not needed for topic partition",
                )
            } else {
                (
                    ResponseError::UnknownTopicOrPartition,
                    "The partition does not exist",
                )
            };
            r.error_code = code(error);
            r.error_message = Some(str_bytes(message));
            out.partition_result.push(r);
        }
        response.replica_election_results.push(out);
    }
    response
}
