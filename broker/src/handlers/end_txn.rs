//! EndTxn (key 26), v0–4: the producer commits or aborts its transaction. The coordinator
//! writes PrepareCommit or PrepareAbort and answers; the markers follow (`crate::txn`).
//! Before v2 PRODUCER_FENCED is answered INVALID_PRODUCER_EPOCH. v5 (transaction version 2,
//! KIP-890 part 2) is not served.

use super::txn_errors::txn_result_code;
use crate::authz::{self, AclOperation, RESOURCE_TRANSACTIONAL_ID};
use crate::session::Session;
use crate::shard::Shard;
use crate::txn::{TxnOp, TxnReply};
use net::kafka_protocol::messages::{EndTxnRequest, EndTxnResponse, ProducerId};
use std::rc::Rc;

pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: EndTxnRequest,
    version: i16,
) -> EndTxnResponse {
    // Kafka: WRITE on the transactional id (`crate::authz`).
    if !authz::allowed(
        shard,
        session,
        AclOperation::Write,
        RESOURCE_TRANSACTIONAL_ID,
        &req.transactional_id.0,
    ) {
        let mut response = EndTxnResponse::default();
        response.producer_id = ProducerId(-1);
        response.producer_epoch = -1;
        response.error_code = crate::errors::code(
            net::kafka_protocol::error::ResponseError::TransactionalIdAuthorizationFailed,
        );
        return response;
    }
    let op = TxnOp::EndTxn {
        producer_id: req.producer_id.0,
        producer_epoch: req.producer_epoch,
        commit: req.committed,
    };
    let mut response = EndTxnResponse::default();
    response.producer_id = ProducerId(-1);
    response.producer_epoch = -1;
    response.error_code = match crate::txn::service::call(shard, &req.transactional_id.0, op).await
    {
        TxnReply::Done(result) => txn_result_code(result, version < 2),
        other => {
            tracing::error!(?other, "unexpected reply to EndTxn");
            txn_result_code(Err(crate::txn::TxnError::CoordinatorNotAvailable), false)
        }
    };
    response
}
