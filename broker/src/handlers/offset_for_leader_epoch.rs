//! OffsetForLeaderEpoch (key 23), v2–4 (v3 adds `replica_id`, v4 is flexible): for each
//! partition, the largest leader epoch ≤ the requested one in the leader's epoch cache and
//! where it ends (KIP-101, KIP-279), after KIP-320's check of `current_leader_epoch`.
//! Followers truncate by it; consumers (librdkafka ≥ 2.1, the Java client) validate their
//! position with it after a leader change. Served on the partition's owning shard from the
//! log's leader-epoch cache, by the leader only, as Kafka's `ReplicaManager` does for every
//! caller (`fetchOnlyFromLeader = true`, whatever `replica_id`).
//!
//! Errors per partition, as Kafka's: UNKNOWN_TOPIC_OR_PARTITION for a partition not in the
//! metadata, NOT_LEADER_OR_FOLLOWER off the leader, FENCED_LEADER_EPOCH /
//! UNKNOWN_LEADER_EPOCH when `current_leader_epoch` (-1: no check) is older / newer than the
//! partition's. An undefined answer is error 0 with epoch -1 and end offset -1.

use super::wire::topic_name;
use crate::authz::{self, AclOperation};
use crate::errors::{code, partition_op_error_code};
use crate::partitions::{epoch_check, PartitionOp, PartitionReply};
use crate::session::Session;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use net::kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};
use std::rc::Rc;
use storage::{LeaderEpoch, TopicPartition};

pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    let mut response = OffsetForLeaderEpochResponse::default();
    // Kafka: a follower (replica id >= 0) needs CLUSTER_ACTION on the cluster, a consumer
    // DESCRIBE on each topic; else TOPIC_AUTHORIZATION_FAILED (`crate::authz`).
    let follower_allowed =
        req.replica_id.0 < 0 || authz::cluster(shard, session, AclOperation::ClusterAction);
    for topic in req.topics {
        let name = topic.topic.0.to_string();
        let mut out = OffsetForLeaderTopicResult::default();
        out.topic = topic_name(&name);
        let allowed = follower_allowed
            && (req.replica_id.0 >= 0
                || authz::topic(shard, session, AclOperation::Describe, &name));
        for p in topic.partitions {
            if !allowed {
                let mut r = EpochEndOffset::default();
                r.partition = p.partition;
                r.error_code = code(ResponseError::TopicAuthorizationFailed);
                out.partitions.push(r);
                continue;
            }
            let tp = TopicPartition {
                topic: name.clone(),
                partition: p.partition,
            };
            let op = PartitionOp::OffsetForLeaderEpoch {
                leader_epoch: LeaderEpoch(p.leader_epoch),
            };
            let epoch = replication::requested_leader_epoch(p.current_leader_epoch);
            let reply = epoch_check::call_checked(shard, tp, epoch, op).await;
            let mut r = EpochEndOffset::default();
            r.partition = p.partition; // Epoch and end offset default to -1 (undefined).
            match reply {
                PartitionReply::EpochEndOffset {
                    leader_epoch,
                    end_offset,
                } => {
                    r.leader_epoch = leader_epoch;
                    r.end_offset = end_offset;
                }
                PartitionReply::Error(error) => r.error_code = partition_op_error_code(&error),
                other => {
                    tracing::error!(?other, "unexpected reply to offset for leader epoch");
                    r.error_code = code(ResponseError::UnknownServerError);
                }
            }
            out.partitions.push(r);
        }
        response.topics.push(out);
    }
    response
}
