//! ListTransactions (key 66, v0–1, KIP-664): the transactional ids this broker coordinates
//! (every shard's), filtered by state, producer id and (v1, KIP-994) how long their
//! transaction has been open. State names Kafka does not define are answered in
//! `unknown_state_filters`; COORDINATOR_LOAD_IN_PROGRESS while a partition is loading. v2's
//! transactional id pattern (KIP-1152) is not served.

use super::txn_errors::txn_error_code;
use super::wire::str_bytes;
use crate::authz::{self, AclOperation, RESOURCE_TRANSACTIONAL_ID};
use crate::session::Session;
use crate::shard::Shard;
use crate::txn::ops::ListFilter;
use crate::txn::state::TxnState;
use net::kafka_protocol::messages::list_transactions_response::TransactionState;
use net::kafka_protocol::messages::{
    ListTransactionsRequest, ListTransactionsResponse, ProducerId, TransactionalId,
};
use std::rc::Rc;

pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    req: ListTransactionsRequest,
    version: i16,
) -> ListTransactionsResponse {
    let mut response = ListTransactionsResponse::default();
    let states: Vec<String> = req.state_filters.iter().map(|s| s.to_string()).collect();
    response.unknown_state_filters = states
        .iter()
        .filter(|n| {
            !(0..8)
                .filter_map(TxnState::from_id)
                .any(|s| s.name() == n.as_str())
        })
        .map(|n| str_bytes(n.clone()))
        .collect();
    let filter = ListFilter {
        states,
        producer_ids: req.producer_id_filters.iter().map(|p| p.0).collect(),
        duration_ms: if version >= 1 {
            req.duration_filter
        } else {
            -1
        },
    };
    match crate::txn::service::list_all(shard, &filter).await {
        Ok(mut listed) => {
            listed.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
            // Kafka: only the transactional ids the principal may DESCRIBE (`crate::authz`).
            response.transaction_states = listed
                .into_iter()
                .filter(|t| {
                    authz::allowed(
                        shard,
                        session,
                        AclOperation::Describe,
                        RESOURCE_TRANSACTIONAL_ID,
                        &t.transactional_id,
                    )
                })
                .map(|t| {
                    let mut s = TransactionState::default();
                    s.transactional_id = TransactionalId(str_bytes(t.transactional_id));
                    s.producer_id = ProducerId(t.producer_id);
                    s.transaction_state = str_bytes(t.state);
                    s
                })
                .collect();
        }
        Err(e) => response.error_code = txn_error_code(e, false),
    }
    response
}
