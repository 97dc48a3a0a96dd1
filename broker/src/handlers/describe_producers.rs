//! DescribeProducers (key 61, v0, KIP-664): each partition's active producers in this
//! broker's replica of it, leader or follower — producer id and epoch, last sequence, last
//! timestamp (of its last batch, markers included), coordinator epoch and the first offset of
//! its open transaction (-1 when none) — as Kafka's `ReplicaManager.activeProducerState`,
//! asked of the partition's owning shard ([`PartitionOp::DescribeProducers`]). A partition the
//! image does not know answers UNKNOWN_TOPIC_OR_PARTITION, one of which this broker holds no
//! replica NOT_LEADER_OR_FOLLOWER. Kafka's admin client asks the leader unless told a broker
//! (`kafka-transactions.sh describe-producers --broker-id`). Kafka authorizes READ on the
//! topic; this broker has no ACLs yet.

use super::wire::topic_name;
use crate::authz::{self, AclOperation};
use crate::errors::{code, partition_op_error_code};
use crate::partitions::{PartitionOp, PartitionReply};
use crate::session::Session;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use net::kafka_protocol::messages::{
    DescribeProducersRequest, DescribeProducersResponse, ProducerId,
};
use std::rc::Rc;
use storage::TopicPartition;

pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: DescribeProducersRequest,
) -> DescribeProducersResponse {
    let metadata = shard.metadata();
    let mut asks = Vec::new();
    let mut response = DescribeProducersResponse::default();
    for topic in &req.topics {
        let name: &str = &topic.name.0;
        let image = metadata.topics.get(name);
        let mut out = TopicResponse::default();
        out.name = topic_name(name);
        for &index in &topic.partition_indexes {
            let mut p = PartitionResponse::default();
            p.partition_index = index;
            out.partitions.push(p);
            let tp = TopicPartition {
                topic: name.to_owned(),
                partition: index,
            };
            // Kafka: READ on the topic (`crate::authz`); a denied one is not asked.
            let placement = image
                .filter(|_| authz::topic(shard, session, AclOperation::Read, name))
                .and_then(|t| metadata.placement(t, index));
            let op = PartitionOp::DescribeProducers;
            asks.push(crate::partitions::service::call_hosted(
                shard, tp, placement, op,
            ));
        }
        response.topics.push(out);
    }
    drop(metadata);
    let replies = futures_util::future::join_all(asks).await;
    let denied: Vec<bool> = response
        .topics
        .iter()
        .flat_map(|t| {
            let denied = !authz::topic(shard, session, AclOperation::Read, &t.name.0);
            t.partitions.iter().map(move |_| denied)
        })
        .collect();
    let slots = response.topics.iter_mut().flat_map(|t| &mut t.partitions);
    for ((slot, reply), denied) in slots.zip(replies).zip(denied) {
        if denied {
            slot.error_code = code(ResponseError::TopicAuthorizationFailed);
            continue;
        }
        match reply {
            PartitionReply::Producers(producers) => {
                slot.active_producers = producers
                    .into_iter()
                    .map(|p| {
                        let mut s = ProducerState::default();
                        s.producer_id = ProducerId(p.producer_id);
                        s.producer_epoch = i32::from(p.producer_epoch);
                        s.last_sequence = p.last_sequence;
                        s.last_timestamp = p.last_timestamp;
                        s.coordinator_epoch = p.coordinator_epoch;
                        s.current_txn_start_offset = p.current_txn_start_offset;
                        s
                    })
                    .collect();
            }
            PartitionReply::Error(e) => slot.error_code = partition_op_error_code(&e),
            other => {
                tracing::error!(?other, "unexpected reply to describe producers");
                slot.error_code = code(ResponseError::UnknownServerError);
            }
        }
    }
    response
}
