//! Writing a transactional id's transitions to its `__transaction_state` partition, and the
//! check that this shard coordinates that partition: what the ops ([`super::service`]) and the
//! marker tasks ([`super::markers`]) both do.

use super::log::{encode_key, encode_value};
use super::state::{TxnError, TxnState, TxnTransit};
use super::{TXN_TOPIC, TXN_WRITE_TIMEOUT};
use crate::partitions::PartitionOpError;
use crate::shard::Shard;
use storage::TopicPartition;

/// Whether this shard may serve the ids of `partition` now (as the group coordinator's
/// check: `CoordinatorLoadInProgress` also while the metadata names this broker the leader
/// but the shard has not applied that role yet).
pub(super) fn coordinating(shard: &Shard, partition: i32) -> Result<(), TxnError> {
    let partitions = shard.txns.partitions.borrow();
    if partitions.state(partition).is_none() && shard.metadata().leads(TXN_TOPIC, partition) {
        return Err(TxnError::CoordinatorLoadInProgress);
    }
    partitions.check(partition).map_err(TxnError::from)
}

/// Writes `transit` of `transactional_id` to `partition` (`acks=all`, flushed), then applies
/// it; a failed write abandons it (Kafka's `appendTransactionToLog`). Errors: the write's
/// (`NotCoordinator` when the leadership or the log was lost, else
/// `CoordinatorNotAvailable`), and `NotCoordinator` when the partition was resigned (or
/// re-elected) during the write: its ids are another coordinator's now.
pub(super) async fn write(
    shard: &Shard,
    partition: i32,
    transactional_id: &str,
    transit: TxnTransit,
) -> Result<(), TxnError> {
    let epoch = shard.txns.partitions.borrow().epoch(partition);
    let key = encode_key(transactional_id);
    let value = encode_value(&transit);
    let batch = storage::build_batch_kv(
        storage::TimestampMs(epoch_ms()),
        &[(Some(key.as_slice()), value.as_deref())],
    );
    let tp = TopicPartition {
        topic: TXN_TOPIC.to_string(),
        partition,
    };
    let written = crate::coordinator_runtime::log::append(shard, &tp, batch, TXN_WRITE_TIMEOUT)
        .await
        .map_err(|e| write_error(&e));
    let still = shard.txns.partitions.borrow().epoch(partition) == epoch
        && coordinating(shard, partition).is_ok();
    let mut txns = shard.txns.txns.borrow_mut();
    let Some(m) = txns.get_mut(transactional_id) else {
        return Err(TxnError::NotCoordinator);
    };
    if !still {
        m.abandon();
        return Err(TxnError::NotCoordinator);
    }
    if let Err(e) = written {
        m.abandon();
        return Err(e);
    }
    if transit.state == TxnState::Dead {
        txns.remove(transactional_id);
        return Ok(());
    }
    m.complete(transit).inspect_err(|e| {
        tracing::error!(transactional_id, error = %e, "a written transition does not apply");
    })
}

/// Kafka's `appendTransactionToLog` error mapping: a leader that lost its leadership or its
/// log is no coordinator any more, anything else leaves the coordinator unavailable for now.
fn write_error(e: &PartitionOpError) -> TxnError {
    use replication::PartitionError;
    use storage::StorageError;
    match e {
        PartitionOpError::NotLeaderOrFollower
        | PartitionOpError::LogUnavailable(_)
        | PartitionOpError::Partition(PartitionError::NotLeaderOrFollower { .. })
        | PartitionOpError::Partition(PartitionError::Storage(
            StorageError::Closed
            | StorageError::Io { .. }
            | StorageError::DiskFull { .. }
            | StorageError::Corrupt { .. },
        )) => TxnError::NotCoordinator,
        other => {
            tracing::warn!(error = %other, "transaction log write failed");
            TxnError::CoordinatorNotAvailable
        }
    }
}

/// Wall-clock milliseconds since the Unix epoch (transaction timestamps, as Kafka's).
pub(super) fn epoch_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
