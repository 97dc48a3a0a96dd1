//! InitProducerId (key 22), v0–5: without a transactional id, a new idempotent-producer id
//! with epoch 0, or — when the client names its current id and epoch (v3+, KIP-360) — the
//! same id with the epoch bumped, which fences the older epoch. With a transactional id, the
//! transaction coordinator answers (`crate::txn`): a new producer id or an epoch bump that
//! fences the previous producer, an open transaction aborted first (CONCURRENT_TRANSACTIONS
//! until it completed), KIP-360's bump after a retriable error. Before v4 PRODUCER_FENCED is
//! answered INVALID_PRODUCER_EPOCH, as Kafka does. v6 (KIP-939's two-phase commit) is not
//! served.

use super::txn_errors::txn_error_code;
use crate::authz::{self, AclOperation, RESOURCE_TRANSACTIONAL_ID};
use crate::errors::{code, controller_error};
use crate::session::Session;
use crate::shard::Shard;
use crate::txn::{TxnOp, TxnReply};
use net::kafka_protocol::error::ResponseError;
use net::kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use std::rc::Rc;

pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: InitProducerIdRequest,
    version: i16,
) -> InitProducerIdResponse {
    let mut response = InitProducerIdResponse::default();
    response.producer_id = ProducerId(-1);
    response.producer_epoch = -1;
    if let Some(transactional_id) = &req.transactional_id {
        // Kafka: WRITE on the transactional id (`crate::authz`).
        if !authz::allowed(
            shard,
            session,
            AclOperation::Write,
            RESOURCE_TRANSACTIONAL_ID,
            &transactional_id.0,
        ) {
            response.error_code = code(ResponseError::TransactionalIdAuthorizationFailed);
            return response;
        }
        let expected = (req.producer_id.0 >= 0).then_some((req.producer_id.0, req.producer_epoch));
        let op = TxnOp::InitProducerId {
            timeout_ms: req.transaction_timeout_ms,
            expected,
        };
        match crate::txn::service::call(shard, &transactional_id.0, op).await {
            TxnReply::ProducerId(Ok((id, epoch))) => {
                response.producer_id = ProducerId(id);
                response.producer_epoch = epoch;
            }
            TxnReply::ProducerId(Err(e)) => response.error_code = txn_error_code(e, version < 4),
            other => tracing::error!(?other, "unexpected reply to InitProducerId"),
        }
        return response;
    }
    // An idempotent producer: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic (Kafka's
    // `authorizeByResourceType`, approximated by `authz::any_topic_writable`).
    if !authz::cluster(shard, session, AclOperation::IdempotentWrite)
        && !authz::any_topic_writable(shard, session)
    {
        response.error_code = code(ResponseError::ClusterAuthorizationFailed);
        return response;
    }
    if req.producer_id.0 >= 0 {
        // Re-initialisation of a known producer: next epoch, same id (epoch wraps like Kafka's
        // exhaustion handling would hand out a new id; here a new id is allocated instead).
        if req.producer_epoch < i16::MAX - 1 && req.producer_epoch >= 0 {
            response.producer_id = req.producer_id;
            response.producer_epoch = req.producer_epoch + 1;
            return response;
        }
    }
    match crate::controller::allocate_producer_id(shard).await {
        Ok(id) => {
            response.producer_id = ProducerId(id);
            response.producer_epoch = 0;
        }
        Err(e) => {
            tracing::warn!(error = %e, "InitProducerId failed");
            response.error_code = controller_error(&e).0;
        }
    }
    response
}
