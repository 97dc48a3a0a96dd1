//! FindCoordinator (key 10), v0–4: a group's coordinator is the broker leading the group's
//! `__consumer_offsets` partition (there, its groups live on the shard owning that partition,
//! reached over the shard mesh).
//! A transactional id's coordinator is the broker leading its `__transaction_state` partition
//! (`crate::txn`). The first key of each type creates its topic, as in Kafka. v4 (KIP-699)
//! batches keys.

use super::wire::str_bytes;
use crate::authz::{self, AclOperation};
use crate::errors::code;
use crate::session::Session;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::find_coordinator_response::Coordinator;
use net::kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use std::rc::Rc;

const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;

pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: FindCoordinatorRequest,
    version: i16,
) -> FindCoordinatorResponse {
    let keys: Vec<String> = if version >= 4 {
        req.coordinator_keys.iter().map(|k| k.to_string()).collect()
    } else {
        vec![req.key.to_string()]
    };
    let mut coordinators = Vec::with_capacity(keys.len());
    for key in keys {
        let mut c = Coordinator::default();
        let error = match req.key_type {
            _ if key.is_empty() => Some((ResponseError::InvalidRequest, "empty coordinator key")),
            // Kafka: DESCRIBE on the group or the transactional id (`crate::authz`).
            KEY_TYPE_GROUP if !authz::group(shard, session, AclOperation::Describe, &key) => {
                Some((ResponseError::GroupAuthorizationFailed, "not authorized"))
            }
            KEY_TYPE_TRANSACTION
                if !authz::allowed(
                    shard,
                    session,
                    AclOperation::Describe,
                    authz::RESOURCE_TRANSACTIONAL_ID,
                    &key,
                ) =>
            {
                Some((
                    ResponseError::TransactionalIdAuthorizationFailed,
                    "not authorized",
                ))
            }
            KEY_TYPE_GROUP => match crate::groups::service::ensure_offsets_topic(shard).await {
                Ok(partitions) => {
                    let partition = crate::groups::partition_for(&key, partitions);
                    match leader_of(
                        shard,
                        crate::groups::OFFSETS_TOPIC,
                        partition,
                        &session.listener,
                    ) {
                        Some(broker) => {
                            c.node_id = BrokerId(broker.id);
                            c.host = str_bytes(broker.host);
                            c.port = i32::from(broker.port);
                            None
                        }
                        None => Some((
                            ResponseError::CoordinatorNotAvailable,
                            "the group's offsets partition has no live leader",
                        )),
                    }
                }
                Err(_) => Some((
                    ResponseError::CoordinatorNotAvailable,
                    "the offsets topic cannot be created",
                )),
            },
            KEY_TYPE_TRANSACTION => match crate::txn::service::ensure_txn_topic(shard).await {
                Ok(partitions) => {
                    let partition = crate::coordinator_runtime::partition_for(&key, partitions);
                    match leader_of(shard, crate::txn::TXN_TOPIC, partition, &session.listener) {
                        Some(broker) => {
                            c.node_id = BrokerId(broker.id);
                            c.host = str_bytes(broker.host);
                            c.port = i32::from(broker.port);
                            None
                        }
                        None => Some((
                            ResponseError::CoordinatorNotAvailable,
                            "the transactional id's partition has no live leader",
                        )),
                    }
                }
                Err(_) => Some((
                    ResponseError::CoordinatorNotAvailable,
                    "the transaction state topic cannot be created",
                )),
            },
            _ => Some((ResponseError::InvalidRequest, "unknown key type")),
        };
        if let Some((e, message)) = error {
            c.node_id = BrokerId(-1);
            c.port = -1;
            c.error_code = code(e);
            c.error_message = Some(str_bytes(message));
        }
        c.key = str_bytes(key);
        coordinators.push(c);
    }
    let mut response = FindCoordinatorResponse::default();
    if version >= 4 {
        response.coordinators = coordinators;
    } else if let Some(c) = coordinators.pop() {
        response.error_code = c.error_code;
        response.error_message = if version >= 1 { c.error_message } else { None };
        response.node_id = c.node_id;
        response.host = c.host;
        response.port = c.port;
    }
    response
}

/// The live broker leading partition `partition` of coordinator topic `topic`, with its
/// endpoint on `listener`.
fn leader_of(
    shard: &Shard,
    topic: &str,
    partition: i32,
    listener: &str,
) -> Option<crate::metadata::LiveBroker> {
    let meta = shard.metadata();
    let leader = meta.partition(topic, partition)?.leader;
    crate::metadata::live_brokers(&meta, &shard.config, listener)
        .into_iter()
        .find(|b| b.id == leader)
}
