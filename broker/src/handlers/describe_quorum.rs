//! DescribeQuorum (key 55), v0–2 (KIP-595, KIP-836, KIP-853): the metadata log's quorum —
//! leader, leader epoch (the Raft term), high watermark (the commit index) and each voter's log
//! end offset, last fetch and last caught-up times — from the active controller's raft-rs
//! progress (`crate::controller::describe_quorum`); a broker that is not the active controller
//! forwards it, as Kafka's brokers forward it to the controller
//! (`kafka-metadata-quorum.sh describe --status` / `--replication`).
//!
//! As Kafka's `KafkaRaftClient.handleDescribeQuorumRequest`: only `__cluster_metadata`
//! partition 0 is described (anything else is `UNKNOWN_TOPIC_OR_PARTITION` on the partition);
//! the observers are the broker-only nodes (`process.roles=broker`) that fetched the log from
//! the active controller. v2 lists each current voter's endpoint as its
//! `controller.quorum.voters` address (or the one AddRaftVoter recorded) under the listener name `CONTROLLER` (a single node
//! without voters configured has none), and no directory ids (Sluice keeps none: zero uuid).
//! A controller that cannot be reached answers its error on the partition.

use super::wire::{str_bytes, topic_name};
use crate::authz::{self, AclOperation};
use crate::errors::{code, controller_error};
use crate::session::Session;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::describe_quorum_response::{
    Listener, Node, PartitionData, ReplicaState, TopicData,
};
use net::kafka_protocol::messages::{BrokerId, DescribeQuorumRequest, DescribeQuorumResponse};
use replication::metadata::{QuorumDescription, ReplicaDescription};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::rc::Rc;

/// The metadata log's topic (Kafka's `__cluster_metadata`).
const METADATA_TOPIC: &str = "__cluster_metadata";

/// The listener name the voters' addresses are listed under (Kafka's conventional one).
const CONTROLLER_LISTENER: &str = "CONTROLLER";

/// First version with the `nodes` list and error messages.
const NODES_MIN_VERSION: i16 = 2;

/// Describes the quorum, asking the active controller.
pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: &DescribeQuorumRequest,
    version: i16,
) -> DescribeQuorumResponse {
    // Kafka: DESCRIBE on the cluster (`crate::authz`).
    if !authz::cluster(shard, session, AclOperation::Describe) {
        let mut response = DescribeQuorumResponse::default();
        response.error_code = code(ResponseError::ClusterAuthorizationFailed);
        return response;
    }
    if !names_only_the_metadata_partition(req) {
        return partition_error(req, code(ResponseError::UnknownTopicOrPartition), None);
    }
    match crate::controller::describe_quorum(shard).await {
        Ok(quorum) => {
            let mut response = described(&quorum);
            if version >= NODES_MIN_VERSION {
                response.nodes = nodes(&crate::controller::voter_endpoints(shard), &quorum);
            }
            response
        }
        Err(e) => {
            let (error_code, message) = controller_error(&e);
            let message = (version >= NODES_MIN_VERSION).then_some(message);
            partition_error(req, error_code, message)
        }
    }
}

/// Kafka's `hasValidTopicPartition`: one topic, the metadata log's, with only partition 0.
fn names_only_the_metadata_partition(req: &DescribeQuorumRequest) -> bool {
    match req.topics.as_slice() {
        [topic] => {
            topic.topic_name.0.as_str() == METADATA_TOPIC
                && topic.partitions.len() == 1
                && topic.partitions[0].partition_index == 0
        }
        _ => false,
    }
}

/// Kafka's `DescribeQuorumRequest.getPartitionLevelErrorResponse`: `error_code` on every
/// named partition.
fn partition_error(
    req: &DescribeQuorumRequest,
    error_code: i16,
    message: Option<String>,
) -> DescribeQuorumResponse {
    let mut response = DescribeQuorumResponse::default();
    for t in &req.topics {
        let mut topic = TopicData::default();
        topic.topic_name = t.topic_name.clone();
        for p in &t.partitions {
            let mut partition = PartitionData::default();
            partition.partition_index = p.partition_index;
            partition.error_code = error_code;
            partition.error_message = message.clone().map(str_bytes);
            topic.partitions.push(partition);
        }
        response.topics.push(topic);
    }
    response
}

fn described(quorum: &QuorumDescription) -> DescribeQuorumResponse {
    let mut partition = PartitionData::default();
    partition.partition_index = 0;
    partition.leader_id = BrokerId(quorum.leader_id);
    partition.leader_epoch = quorum.leader_epoch;
    partition.high_watermark = quorum.high_watermark;
    partition.current_voters = quorum.voters.iter().map(replica_state).collect();
    partition.observers = quorum.observers.iter().map(replica_state).collect();
    let mut topic = TopicData::default();
    topic.topic_name = topic_name(METADATA_TOPIC);
    topic.partitions.push(partition);
    let mut response = DescribeQuorumResponse::default();
    response.topics.push(topic);
    response
}

fn replica_state(r: &ReplicaDescription) -> ReplicaState {
    let mut state = ReplicaState::default();
    state.replica_id = BrokerId(r.replica_id);
    state.log_end_offset = r.log_end_offset;
    state.last_fetch_timestamp = r.last_fetch_timestamp_ms;
    state.last_caught_up_timestamp = r.last_caught_up_timestamp_ms;
    state
}

/// Each voter's endpoint (v2's `nodes`).
/// The endpoints of the current voters (`endpoints`: every controller address this node knows:
/// configured, or added by a voter change; a removed voter is not listed).
fn nodes(endpoints: &BTreeMap<i32, SocketAddr>, quorum: &QuorumDescription) -> Vec<Node> {
    endpoints
        .iter()
        .filter(|(id, _)| quorum.voters.iter().any(|r| r.replica_id == **id))
        .map(|(&id, addr)| {
            let mut listener = Listener::default();
            listener.name = str_bytes(CONTROLLER_LISTENER);
            listener.host = str_bytes(addr.ip().to_string());
            listener.port = addr.port();
            let mut node = Node::default();
            node.node_id = BrokerId(id);
            node.listeners.push(listener);
            node
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use net::kafka_protocol::messages::describe_quorum_request::{
        PartitionData as RequestPartition, TopicData as RequestTopic,
    };

    fn request(topic: &str, partitions: &[i32]) -> DescribeQuorumRequest {
        let mut t = RequestTopic::default();
        t.topic_name = topic_name(topic);
        t.partitions = partitions
            .iter()
            .map(|&p| {
                let mut rp = RequestPartition::default();
                rp.partition_index = p;
                rp
            })
            .collect();
        let mut req = DescribeQuorumRequest::default();
        req.topics.push(t);
        req
    }

    #[test]
    fn only_the_metadata_partition_is_described() {
        assert!(names_only_the_metadata_partition(&request(
            "__cluster_metadata",
            &[0]
        )));
        for bad in [
            request("__cluster_metadata", &[1]),
            request("__cluster_metadata", &[0, 0]),
            request("other", &[0]),
            DescribeQuorumRequest::default(),
        ] {
            assert!(!names_only_the_metadata_partition(&bad), "{bad:?}");
        }
        let r = partition_error(&request("other", &[0, 3]), 3, None);
        let codes: Vec<_> = r.topics[0]
            .partitions
            .iter()
            .map(|p| (p.partition_index, p.error_code))
            .collect();
        assert_eq!(codes, [(0, 3), (3, 3)]);
    }

    #[test]
    fn the_description_carries_every_voter() {
        let quorum = QuorumDescription {
            leader_id: 2,
            leader_epoch: 5,
            high_watermark: 40,
            voters: vec![ReplicaDescription {
                replica_id: 1,
                log_end_offset: 40,
                last_fetch_timestamp_ms: 7,
                last_caught_up_timestamp_ms: -1,
            }],
            observers: Vec::new(),
        };
        let r = described(&quorum);
        let p = &r.topics[0].partitions[0];
        assert_eq!(
            (p.leader_id, p.leader_epoch, p.high_watermark),
            (BrokerId(2), 5, 40)
        );
        let v = &p.current_voters[0];
        assert_eq!(
            (
                v.replica_id,
                v.log_end_offset,
                v.last_fetch_timestamp,
                v.last_caught_up_timestamp
            ),
            (BrokerId(1), 40, 7, -1)
        );
        // Controller 3 was removed: it is not listed.
        let endpoints = BTreeMap::from([
            (1, "127.0.0.1:9093".parse().expect("an address")),
            (3, "127.0.0.1:9095".parse().expect("an address")),
        ]);
        let listed = nodes(&endpoints, &quorum);
        assert_eq!(listed.len(), 1);
        let n = &listed[0];
        assert_eq!(n.node_id, BrokerId(1));
        assert_eq!(
            (
                n.listeners[0].name.as_str(),
                n.listeners[0].host.as_str(),
                n.listeners[0].port
            ),
            ("CONTROLLER", "127.0.0.1", 9093)
        );
    }
}
