//! UnregisterBroker (key 64), v0 (KIP-631; Kafka's `ControllerApis.handleUnregisterBroker`):
//! the active controller removes broker `broker_id`'s registration after taking it out of
//! every ISR and leadership, as fencing does
//! (`replication::metadata::ControllerOp::UnregisterBroker`, KRaft's
//! `ReplicationControlManager.unregisterBroker`); a broker that is not the controller forwards
//! it. As Kafka, a live broker is not refused: its next heartbeat finds no registration and it
//! registers again, with a new broker epoch (what an operator decommissioning a stopped broker
//! wants gone is the registration, `kafka-cluster.sh unregister`). A broker that is not
//! registered is `BROKER_ID_NOT_REGISTERED`; the answer carries only the error code, as
//! Kafka's does.

use crate::authz::{self, AclOperation};
use crate::errors::controller_error;
use crate::session::Session;
use crate::shard::Shard;
use net::kafka_protocol::messages::{UnregisterBrokerRequest, UnregisterBrokerResponse};
use replication::metadata::ControllerOp;
use std::rc::Rc;

/// Unregisters the broker on the active controller.
pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: &UnregisterBrokerRequest,
) -> UnregisterBrokerResponse {
    // Kafka: ALTER on the cluster (`crate::authz`).
    if !authz::cluster(shard, session, AclOperation::Alter) {
        let mut response = UnregisterBrokerResponse::default();
        response.error_code = crate::errors::code(
            net::kafka_protocol::error::ResponseError::ClusterAuthorizationFailed,
        );
        return response;
    }
    let op = ControllerOp::UnregisterBroker {
        broker_id: req.broker_id.0,
    };
    let mut response = UnregisterBrokerResponse::default();
    if let Err(e) = crate::controller::call(shard, op).await {
        response.error_code = controller_error(&e).0;
    }
    response
}
