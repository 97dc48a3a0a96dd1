//! The transaction service's messages: the typed [`TxnOp`] the shard owning a transactional
//! id's `__transaction_state` partition runs, and its [`TxnReply`] (Kafka codes are chosen
//! from [`TxnError`] at the edge, `crate::errors::txn_error_code`).

use super::TxnError;
use storage::TopicPartition;

/// An operation on one transactional id.
#[derive(Debug)]
pub enum TxnOp {
    /// InitProducerId with a transactional id; `expected` is the producer's current id and
    /// epoch (KIP-360), when it names them.
    InitProducerId {
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
    },
    /// AddPartitionsToTxn (v0–3, or v4+ without `verify_only`) and AddOffsetsToTxn.
    AddPartitions {
        producer_id: i64,
        producer_epoch: i16,
        partitions: Vec<TopicPartition>,
    },
    /// AddPartitionsToTxn v4+ with `verify_only` (KIP-890 part 1).
    Verify {
        producer_id: i64,
        producer_epoch: i16,
        partitions: Vec<TopicPartition>,
    },
    EndTxn {
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
    },
}

/// The coordinating shard's answer to a [`TxnOp`].
#[derive(Debug)]
pub enum TxnReply {
    /// InitProducerId: the producer id and epoch.
    ProducerId(Result<(i64, i16), TxnError>),
    /// AddPartitions, EndTxn.
    Done(Result<(), TxnError>),
    /// Verify: per partition in request order, or one error for all.
    Verified(Result<Vec<Result<(), TxnError>>, TxnError>),
}

impl TxnReply {
    /// The reply of `op` failing as a whole with `error`.
    pub fn error(op: &TxnOp, error: TxnError) -> TxnReply {
        match op {
            TxnOp::InitProducerId { .. } => TxnReply::ProducerId(Err(error)),
            TxnOp::AddPartitions { .. } | TxnOp::EndTxn { .. } => TxnReply::Done(Err(error)),
            TxnOp::Verify { .. } => TxnReply::Verified(Err(error)),
        }
    }
}
