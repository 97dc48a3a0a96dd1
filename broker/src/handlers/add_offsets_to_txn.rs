//! AddOffsetsToTxn (key 25), v0–4: the producer will commit a group's offsets in its
//! transaction (`sendOffsetsToTransaction`): the group's `__consumer_offsets` partition joins
//! the transaction, so it gets the transaction's marker. Before v2 PRODUCER_FENCED is
//! answered INVALID_PRODUCER_EPOCH.

use super::txn_errors::{txn_error_code, txn_result_code};
use crate::authz::{self, AclOperation, RESOURCE_TRANSACTIONAL_ID};
use crate::session::Session;
use crate::shard::Shard;
use crate::txn::{TxnError, TxnOp, TxnReply};
use net::kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};
use std::rc::Rc;
use storage::TopicPartition;

pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: AddOffsetsToTxnRequest,
    version: i16,
) -> AddOffsetsToTxnResponse {
    let mut response = AddOffsetsToTxnResponse::default();
    // Kafka: WRITE on the transactional id, READ on the group (`crate::authz`).
    if !authz::allowed(
        shard,
        session,
        AclOperation::Write,
        RESOURCE_TRANSACTIONAL_ID,
        &req.transactional_id.0,
    ) {
        response.error_code = crate::errors::code(
            net::kafka_protocol::error::ResponseError::TransactionalIdAuthorizationFailed,
        );
        return response;
    }
    if !authz::group(shard, session, AclOperation::Read, &req.group_id.0) {
        response.error_code = crate::errors::code(
            net::kafka_protocol::error::ResponseError::GroupAuthorizationFailed,
        );
        return response;
    }
    let partitions = match crate::groups::service::ensure_offsets_topic(shard).await {
        Ok(n) => n,
        Err(_) => {
            response.error_code = txn_error_code(TxnError::CoordinatorNotAvailable, false);
            return response;
        }
    };
    let offsets_partition = TopicPartition {
        topic: crate::groups::OFFSETS_TOPIC.to_string(),
        partition: crate::groups::partition_for(&req.group_id.0, partitions),
    };
    let op = TxnOp::AddPartitions {
        client_transaction_version: crate::txn::state::CLIENT_TXN_VERSION_1,
        producer_id: req.producer_id.0,
        producer_epoch: req.producer_epoch,
        partitions: vec![offsets_partition],
    };
    response.error_code = match crate::txn::service::call(shard, &req.transactional_id.0, op).await
    {
        TxnReply::Done(result) => txn_result_code(result, version < 2),
        other => {
            tracing::error!(?other, "unexpected reply to AddOffsetsToTxn");
            txn_error_code(TxnError::CoordinatorNotAvailable, false)
        }
    };
    response
}
