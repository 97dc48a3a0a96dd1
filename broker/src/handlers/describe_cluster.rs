//! DescribeCluster (key 60), v0–1: this single broker is the whole cluster and its controller.
//! Only the BROKERS endpoint type exists (no separate KRaft controller listener).

use super::authorized_operations;
use super::wire::str_bytes;
use crate::errors::code;
use crate::session::Session;
use crate::shard::Shard;
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use net::kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use std::rc::Rc;

/// KIP-919 endpoint types: the brokers' listener, and the KRaft controllers'.
const ENDPOINT_TYPE_BROKERS: i8 = 1;
const ENDPOINT_TYPE_CONTROLLERS: i8 = 2;

pub fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: &DescribeClusterRequest,
) -> DescribeClusterResponse {
    let mut response = DescribeClusterResponse::default();
    // The response's endpoint type field exists from v1 and must stay 1 (its default) in v0;
    // this broker always answers for its broker listener.
    response.endpoint_type = ENDPOINT_TYPE_BROKERS;
    response.cluster_authorized_operations = authorized_operations::reported(
        req.include_cluster_authorized_operations,
        shard,
        session,
        &authorized_operations::CLUSTER,
        "",
    );
    match req.endpoint_type {
        ENDPOINT_TYPE_BROKERS => {}
        ENDPOINT_TYPE_CONTROLLERS => {
            response.error_code = code(ResponseError::MismatchedEndpointType);
            response.error_message = Some(str_bytes(
                "this is a broker listener; there is no separate controller endpoint",
            ));
            return response;
        }
        other => {
            response.error_code = code(ResponseError::UnsupportedEndpointType);
            response.error_message = Some(str_bytes(format!("unknown endpoint type {other}")));
            return response;
        }
    }
    let meta = shard.metadata();
    let lives = crate::metadata::live_brokers(&meta, &shard.config, &session.listener);
    response.controller_id = BrokerId(crate::metadata::controller_for_clients(&meta, &lives));
    for live in lives {
        let mut broker = DescribeClusterBroker::default();
        broker.broker_id = BrokerId(live.id);
        broker.host = str_bytes(live.host);
        broker.port = i32::from(live.port);
        broker.rack = live.rack.map(str_bytes);
        response.brokers.push(broker);
    }
    response.cluster_id = str_bytes(meta.cluster_id.clone());
    response
}
