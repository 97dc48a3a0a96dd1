//! Metadata (key 3): the live brokers, the active controller, topics and partitions (leader,
//! leader epoch, replicas, ISR, offline replicas, from the metadata image), with
//! auto-creation as Kafka does it: when `auto.create.topics.enable` is on and the request
//! allows it (`allow_auto_topic_creation`, v4+; always allowed below v4), a requested topic
//! that does not exist is created with `num.partitions`. With an authorizer (`crate::authz`,
//! as Kafka's `handleTopicMetadataRequest`): only topics the principal may DESCRIBE are
//! listed, a named one it may not answers TOPIC_AUTHORIZATION_FAILED, and auto-creation needs
//! CREATE on the cluster or on the topic.

use super::authorized_operations;
use super::wire::{str_bytes, topic_name};
use crate::authz::{self, AclOperation};
use crate::errors::{code, controller_error};
use crate::metadata::LiveBroker;
use crate::session::Session;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use net::kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse};
use replication::metadata::{
    is_internal, validate_topic_name, ControllerError, ControllerOp, PartitionImage,
};
use std::collections::HashMap;
use std::rc::Rc;

/// First Metadata version whose partitions carry the leader epoch.
const LEADER_EPOCH_VERSION: i16 = 7;

pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: MetadataRequest,
    version: i16,
) -> MetadataResponse {
    let include_topic_operations = req.include_topic_authorized_operations;
    // Cluster operations moved to DescribeCluster after Metadata v10 (KIP-700).
    let include_cluster_operations = req.include_cluster_authorized_operations && version <= 10;
    let requested: Option<Vec<String>> = req.topics.as_ref().map(|topics| {
        topics
            .iter()
            .filter_map(|t| t.name.as_ref().map(|n| n.0.to_string()))
            .collect()
    });
    let allow_create =
        shard.config.auto_create_topics_enable && (version < 4 || req.allow_auto_topic_creation);
    let describable = |name: &str| authz::topic(shard, session, AclOperation::Describe, name);
    let mut create_errors = HashMap::new();
    if let (Some(names), true) = (&requested, allow_create) {
        // Kafka's `handleTopicMetadataRequest`: a topic may be created by a principal that may
        // CREATE on the cluster or on the topic; for the others it is unauthorized.
        let create_all = authz::cluster(shard, session, AclOperation::Create);
        let mut creatable = Vec::new();
        for name in names.iter().filter(|n| describable(n)) {
            if create_all || authz::topic(shard, session, AclOperation::Create, name) {
                creatable.push(name.clone());
            } else if !shard.metadata().topics.contains_key(name) {
                create_errors.insert(name.clone(), code(ResponseError::TopicAuthorizationFailed));
            }
        }
        create_errors.extend(auto_create(shard, &creatable).await);
    }
    let meta = shard.metadata();
    let live = crate::metadata::live_brokers(&meta, &shard.config, &session.listener);
    // Every topic: only those the principal may DESCRIBE. Named ones: the others answer
    // TOPIC_AUTHORIZATION_FAILED and nothing else.
    let names: Vec<String> = requested.unwrap_or_else(|| {
        meta.topics
            .keys()
            .filter(|n| describable(n))
            .cloned()
            .collect()
    });
    let topics = names
        .into_iter()
        .map(|name| {
            let mut topic = MetadataResponseTopic::default();
            topic.name = Some(topic_name(&name));
            if !describable(&name) {
                topic.error_code = code(ResponseError::TopicAuthorizationFailed);
                return topic;
            }
            topic.topic_authorized_operations = authorized_operations::reported(
                include_topic_operations,
                shard,
                session,
                &authorized_operations::TOPIC,
                &name,
            );
            topic.is_internal = is_internal(&meta, &name);
            match meta.topics.get(&name) {
                Some(t) => {
                    topic.topic_id = t.id;
                    topic.partitions = t
                        .partitions
                        .iter()
                        .enumerate()
                        .map(|(p, image)| partition_response(p, image, version, &live))
                        .collect();
                }
                None => {
                    topic.error_code = create_errors.get(&name).copied().unwrap_or_else(|| {
                        if validate_topic_name(&name).is_err() {
                            code(ResponseError::InvalidTopicException)
                        } else {
                            code(ResponseError::UnknownTopicOrPartition)
                        }
                    });
                }
            }
            topic
        })
        .collect();
    let mut response = MetadataResponse::default();
    response.brokers = live.iter().map(broker_response).collect();
    response.cluster_id = Some(str_bytes(meta.cluster_id.clone()));
    response.controller_id = BrokerId(crate::metadata::controller_for_clients(&meta, &live));
    response.topics = topics;
    response.cluster_authorized_operations = authorized_operations::reported(
        include_cluster_operations,
        shard,
        session,
        &authorized_operations::CLUSTER,
        "",
    );
    response
}

/// Creates each of `names` that does not exist yet (the offsets topic as the coordinator needs
/// it); returns the error code of each creation that failed.
async fn auto_create(shard: &Rc<Shard>, names: &[String]) -> HashMap<String, i16> {
    let mut create_errors = HashMap::new();
    for name in names {
        let current = shard.metadata();
        if current.topics.contains_key(name) {
            continue;
        }
        if is_internal(&current, name) {
            // The offsets topic: created as the coordinator needs it (as Kafka does).
            if let Err(error) = crate::groups::service::ensure_offsets_topic(shard).await {
                create_errors.insert(name.clone(), crate::errors::group_error_code(error));
            }
            continue;
        }
        let op = ControllerOp::CreateTopic {
            assignment: None,
            name: name.clone(),
            partitions: shard.config.num_partitions,
            replication_factor: -1,
            overrides: Default::default(),
            internal: false,
            validate_only: false,
        };
        match crate::controller::call(shard, op).await {
            Ok(()) | Err(ControllerError::TopicAlreadyExists { .. }) => {}
            Err(e) => {
                create_errors.insert(name.clone(), controller_error(&e).0);
            }
        }
    }
    create_errors
}

/// Partition `p` of a topic as the image has it; its offline replicas are those not in `live`.
fn partition_response(
    p: usize,
    image: &PartitionImage,
    version: i16,
    live: &[LiveBroker],
) -> MetadataResponsePartition {
    let mut partition = MetadataResponsePartition::default();
    partition.partition_index = i32::try_from(p).expect("partition counts fit i32");
    partition.leader_id = BrokerId(image.leader);
    if image.leader < 0 {
        partition.error_code = code(ResponseError::LeaderNotAvailable);
    }
    if version >= LEADER_EPOCH_VERSION {
        partition.leader_epoch = image.leader_epoch;
    }
    partition.replica_nodes = image.replicas.iter().copied().map(BrokerId).collect();
    partition.isr_nodes = image.isr.iter().copied().map(BrokerId).collect();
    partition.offline_replicas = image
        .replicas
        .iter()
        .filter(|r| !live.iter().any(|b| b.id == **r))
        .copied()
        .map(BrokerId)
        .collect();
    partition
}

/// One live broker's entry.
fn broker_response(b: &LiveBroker) -> MetadataResponseBroker {
    let mut broker = MetadataResponseBroker::default();
    broker.node_id = BrokerId(b.id);
    broker.host = str_bytes(b.host.clone());
    broker.port = i32::from(b.port);
    broker.rack = b.rack.clone().map(str_bytes);
    broker
}
