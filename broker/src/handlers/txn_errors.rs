//! The transaction coordinator's errors as Kafka codes (shared by its handlers).

use crate::errors::code;
use crate::txn::TxnError;
use net::kafka_protocol::error::ResponseError;

/// The Kafka code of `e`. `PRODUCER_FENCED` is answered `INVALID_PRODUCER_EPOCH` when
/// `fenced_is_invalid_epoch` (a request version older than KIP-588's, as Kafka does).
pub fn txn_error_code(e: TxnError, fenced_is_invalid_epoch: bool) -> i16 {
    code(match e {
        TxnError::ConcurrentTransactions => ResponseError::ConcurrentTransactions,
        TxnError::InvalidTxnState => ResponseError::InvalidTxnState,
        TxnError::ProducerFenced if fenced_is_invalid_epoch => ResponseError::InvalidProducerEpoch,
        TxnError::ProducerFenced => ResponseError::ProducerFenced,
        TxnError::InvalidProducerIdMapping => ResponseError::InvalidProducerIdMapping,
        TxnError::InvalidTransactionTimeout => ResponseError::InvalidTransactionTimeout,
        TxnError::TransactionAbortable => ResponseError::TransactionAbortable,
        TxnError::InvalidRequest => ResponseError::InvalidRequest,
        TxnError::TransactionalIdNotFound => ResponseError::TransactionalIdNotFound,
        TxnError::NotCoordinator => ResponseError::NotCoordinator,
        TxnError::CoordinatorLoadInProgress => ResponseError::CoordinatorLoadInProgress,
        TxnError::CoordinatorNotAvailable => ResponseError::CoordinatorNotAvailable,
        // Kafka throws when the epochs run out where it cannot rotate the id.
        TxnError::EpochExhausted => ResponseError::UnknownServerError,
    })
}

/// The code of `result` (0 for success), as [`txn_error_code`].
pub fn txn_result_code(result: Result<(), TxnError>, fenced_is_invalid_epoch: bool) -> i16 {
    result
        .err()
        .map_or(0, |e| txn_error_code(e, fenced_is_invalid_epoch))
}
