//! DescribeTransactions (key 65, v0, KIP-664): each transactional id's state, from the
//! transaction coordinator of its `__transaction_state` partition (`crate::txn`) —
//! NOT_COORDINATOR elsewhere, TRANSACTIONAL_ID_NOT_FOUND for an unknown id, as Kafka.

use super::txn_errors::txn_error_code;
use super::wire::{str_bytes, topic_name};
use crate::authz::{self, AclOperation, RESOURCE_TRANSACTIONAL_ID};
use crate::session::Session;
use crate::shard::Shard;
use crate::txn::{TxnError, TxnOp, TxnReply};
use net::kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use net::kafka_protocol::messages::{
    DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId,
};
use std::rc::Rc;

pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: DescribeTransactionsRequest,
) -> DescribeTransactionsResponse {
    let mut response = DescribeTransactionsResponse::default();
    for id in &req.transactional_ids {
        let mut state = TransactionState::default();
        state.transactional_id = id.clone();
        state.producer_id = ProducerId(-1);
        state.producer_epoch = -1;
        state.transaction_start_time_ms = -1;
        // Kafka: DESCRIBE on the transactional id (`crate::authz`).
        if !authz::allowed(
            shard,
            session,
            AclOperation::Describe,
            RESOURCE_TRANSACTIONAL_ID,
            &id.0,
        ) {
            state.error_code = crate::errors::code(
                net::kafka_protocol::error::ResponseError::TransactionalIdAuthorizationFailed,
            );
            response.transaction_states.push(state);
            continue;
        }
        match crate::txn::service::call(shard, &id.0, TxnOp::Describe).await {
            TxnReply::Described(Ok(d)) => {
                state.transaction_state = str_bytes(d.state);
                state.transaction_timeout_ms = d.timeout_ms;
                state.transaction_start_time_ms = d.start_ms;
                state.producer_id = ProducerId(d.producer_id);
                state.producer_epoch = d.producer_epoch;
                for tp in d.partitions {
                    match state.topics.iter_mut().find(|t| *t.topic.0 == *tp.topic) {
                        Some(t) => t.partitions.push(tp.partition),
                        None => {
                            let mut t = TopicData::default();
                            t.topic = topic_name(&tp.topic);
                            t.partitions.push(tp.partition);
                            state.topics.push(t);
                        }
                    }
                }
            }
            TxnReply::Described(Err(e)) => state.error_code = txn_error_code(e, false),
            other => {
                tracing::error!(?other, "unexpected reply to DescribeTransactions");
                state.error_code = txn_error_code(TxnError::CoordinatorNotAvailable, false);
            }
        }
        response.transaction_states.push(state);
    }
    response
}
