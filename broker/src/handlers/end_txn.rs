//! EndTxn (key 26), v0–5: the producer commits or aborts its transaction. The coordinator
//! writes PrepareCommit or PrepareAbort and answers; the markers follow (`crate::txn`).
//! Before v2 PRODUCER_FENCED is answered INVALID_PRODUCER_EPOCH. v5 is transaction version 2
//! (KIP-890 part 2, Kafka's `transactionVersionForEndTxn`): the coordinator bumps the
//! producer epoch at every end and answers the producer id and epoch to continue with (a
//! new producer id at epoch 0 when the epochs ran out); a retry with the epoch before the
//! bump is answered as the first call was.

use super::txn_errors::txn_error_code;
use crate::authz::{self, AclOperation, RESOURCE_TRANSACTIONAL_ID};
use crate::session::Session;
use crate::shard::Shard;
use crate::txn::state::{CLIENT_TXN_VERSION_1, CLIENT_TXN_VERSION_2};
use crate::txn::{TxnError, TxnOp, TxnReply};

/// The first EndTxn version of transaction version 2 (KIP-890 part 2).
const TRANSACTION_VERSION_2_FIRST: i16 = 5;
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
        client_transaction_version: if version >= TRANSACTION_VERSION_2_FIRST {
            CLIENT_TXN_VERSION_2
        } else {
            CLIENT_TXN_VERSION_1
        },
    };
    let mut response = EndTxnResponse::default();
    response.producer_id = ProducerId(-1);
    response.producer_epoch = -1;
    match crate::txn::service::call(shard, &req.transactional_id.0, op).await {
        // Kafka fills them at transaction version 2 only (v5 is the first to carry them).
        TxnReply::ProducerId(Ok((id, epoch))) => {
            if version >= TRANSACTION_VERSION_2_FIRST {
                response.producer_id = ProducerId(id);
                response.producer_epoch = epoch;
            }
        }
        TxnReply::ProducerId(Err(e)) => response.error_code = txn_error_code(e, version < 2),
        other => {
            tracing::error!(?other, "unexpected reply to EndTxn");
            response.error_code = txn_error_code(TxnError::CoordinatorNotAvailable, false);
        }
    }
    response
}
