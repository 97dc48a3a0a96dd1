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
    /// AddPartitionsToTxn (v0–3, or v4+ without `verify_only`: a leader adding a partition
    /// for Produce v12 or TxnOffsetCommit v5, KIP-890 part 2) and AddOffsetsToTxn;
    /// `client_transaction_version` as `crate::txn::state::CLIENT_TXN_VERSION_1` / `_2`.
    AddPartitions {
        producer_id: i64,
        producer_epoch: i16,
        partitions: Vec<TopicPartition>,
        client_transaction_version: i16,
    },
    /// AddPartitionsToTxn v4+ with `verify_only` (KIP-890 part 1).
    Verify {
        producer_id: i64,
        producer_epoch: i16,
        partitions: Vec<TopicPartition>,
    },
    /// EndTxn; `client_transaction_version` 2 for v5 (an epoch bump per transaction).
    EndTxn {
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        client_transaction_version: i16,
    },
    /// DescribeTransactions.
    Describe,
}

/// A transactional id as DescribeTransactions shows it.
#[derive(Clone, Debug)]
pub struct TxnDescription {
    pub state: &'static str,
    pub timeout_ms: i32,
    /// -1 when no transaction is open.
    pub start_ms: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub partitions: Vec<TopicPartition>,
}

/// What ListTransactions selects (Kafka's filters; empty ones select all).
#[derive(Clone, Debug, Default)]
pub struct ListFilter {
    /// State names; unknown ones are reported back and select nothing.
    pub states: Vec<String>,
    pub producer_ids: Vec<i64>,
    /// v1: only transactions open longer than this, ms (-1: any).
    pub duration_ms: i64,
}

/// A transactional id as ListTransactions shows it.
#[derive(Clone, Debug)]
pub struct ListedTxn {
    pub transactional_id: String,
    pub producer_id: i64,
    pub state: &'static str,
}

/// The coordinating shard's answer to a [`TxnOp`].
#[derive(Debug)]
pub enum TxnReply {
    /// InitProducerId and EndTxn: the producer id and epoch (EndTxn v5 answers them).
    ProducerId(Result<(i64, i16), TxnError>),
    /// AddPartitions.
    Done(Result<(), TxnError>),
    /// Verify: per partition in request order, or one error for all.
    Verified(Result<Vec<Result<(), TxnError>>, TxnError>),
    Described(Result<TxnDescription, TxnError>),
}

impl TxnReply {
    /// The reply of `op` failing as a whole with `error`.
    pub fn error(op: &TxnOp, error: TxnError) -> TxnReply {
        match op {
            TxnOp::InitProducerId { .. } | TxnOp::EndTxn { .. } => TxnReply::ProducerId(Err(error)),
            TxnOp::AddPartitions { .. } => TxnReply::Done(Err(error)),
            TxnOp::Verify { .. } => TxnReply::Verified(Err(error)),
            TxnOp::Describe => TxnReply::Described(Err(error)),
        }
    }
}
