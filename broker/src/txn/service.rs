//! The transaction service: runs a [`TxnOp`] on the shard coordinating its transactional id
//! (routing it over the shard mesh when that is another shard), creates
//! `__transaction_state` on first use, writes each transition to the id's partition before
//! applying and answering it, loads a partition once this broker became its leader
//! (resuming the markers of prepared transactions), and aborts timed-out transactions and
//! removes expired ids.
//!
//! The decisions are the state machine's ([`super::state`]); this file does their I/O. Between
//! a transition's preparation and its write no other transition of the id is prepared (its
//! pending state answers `CONCURRENT_TRANSACTIONS`), so the single-threaded shard needs no
//! lock, as Kafka's `TransactionMetadata.inLock` would give.

use super::log::decode;
use super::markers;
use super::ops::{ListFilter, ListedTxn, TxnDescription, TxnOp, TxnReply};
use super::state::{check_timeout, EndStep, InitStep, TxnError, TxnMetadata, TxnState, TxnTransit};
use super::store::{coordinating, epoch_ms, write};
use super::TXN_TOPIC;
use super::{ADD_PARTITIONS_HELD_MAX, ADD_PARTITIONS_HOLD};
use crate::coordinator_runtime::{partition_for, LoadId};
use crate::messages::ShardMsg;
use crate::shard::Shard;
use futures_channel::oneshot;
use replication::metadata::{ControllerError, ControllerOp};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;
use storage::TopicPartition;

/// Runs `op` for `transactional_id` on the shard coordinating it, creating
/// `__transaction_state` first if this is the cluster's first transactional id.
pub async fn call(shard: &Rc<Shard>, transactional_id: &str, op: TxnOp) -> TxnReply {
    if transactional_id.is_empty() || transactional_id.len() > i16::MAX as usize {
        return TxnReply::error(&op, TxnError::InvalidRequest);
    }
    let partitions = match ensure_txn_topic(shard).await {
        Ok(n) => n,
        Err(error) => return TxnReply::error(&op, error),
    };
    let partition = partition_for(transactional_id, partitions);
    let meta = shard.metadata();
    let (Some(owner), true) = (
        meta.owner(TXN_TOPIC, partition),
        meta.leads(TXN_TOPIC, partition),
    ) else {
        return TxnReply::error(&op, TxnError::NotCoordinator);
    };
    drop(meta);
    if owner == shard.id {
        return run_op(shard, partition, transactional_id, op).await;
    }
    let (reply, answer) = oneshot::channel();
    let unavailable = TxnReply::error(&op, TxnError::CoordinatorNotAvailable);
    let msg = ShardMsg::Txn {
        partition,
        transactional_id: transactional_id.to_string(),
        op,
        reply,
    };
    if shard.send(owner, msg).await.is_err() {
        return unavailable;
    }
    answer.await.unwrap_or(unavailable)
}

/// The partition count of `__transaction_state`, creating it with
/// `transaction.state.log.num.partitions` partitions if it does not exist (Kafka creates it on
/// the first FindCoordinator of a transactional id). Errors: `CoordinatorNotAvailable` when it
/// cannot be created (yet).
pub async fn ensure_txn_topic(shard: &Rc<Shard>) -> Result<usize, TxnError> {
    if let Some(t) = shard.metadata().topics.get(TXN_TOPIC) {
        return Ok(t.partitions.len());
    }
    let replication_factor = txn_replication_factor(shard)?;
    let op = ControllerOp::CreateTopic {
        assignment: None,
        name: TXN_TOPIC.to_string(),
        partitions: shard.config.transaction_state_log_num_partitions,
        replication_factor,
        overrides: txn_topic_overrides(&shard.config, replication_factor),
        internal: true,
        validate_only: false,
    };
    match crate::controller::call(shard, op).await {
        Ok(()) | Err(ControllerError::TopicAlreadyExists { .. }) => {}
        Err(e) => {
            tracing::warn!(error = %e, "cannot create {TXN_TOPIC}");
            return Err(TxnError::CoordinatorNotAvailable);
        }
    }
    shard
        .metadata()
        .topics
        .get(TXN_TOPIC)
        .map(|t| t.partitions.len())
        .ok_or(TxnError::CoordinatorNotAvailable)
}

/// The topic configs `__transaction_state` is created with, Kafka's
/// (`TransactionStateManager.transactionTopicConfigs`): compacted, uncompressed,
/// `segment.bytes` from `transaction.state.log.segment.bytes`, no unclean election, and
/// `min.insync.replicas` from `transaction.state.log.min.isr` — at most `replication_factor`,
/// so a single node's topic (its replication factor capped at 1) can be written.
pub fn txn_topic_overrides(
    config: &tuning::config::BrokerConfig,
    replication_factor: i16,
) -> BTreeMap<String, String> {
    let min_isr = config
        .transaction_state_log_min_isr
        .min(i32::from(replication_factor))
        .max(1);
    BTreeMap::from([
        ("cleanup.policy".to_string(), "compact".to_string()),
        ("compression.type".to_string(), "uncompressed".to_string()),
        ("min.insync.replicas".to_string(), min_isr.to_string()),
        (
            "segment.bytes".to_string(),
            config.transaction_state_log_segment_bytes.to_string(),
        ),
        (
            "unclean.leader.election.enable".to_string(),
            "false".to_string(),
        ),
    ])
}

/// `transaction.state.log.replication.factor`, at most
/// `BrokerConfig::internal_topic_replicas_max` (the larger of the voters and the registered
/// brokers), as `__consumer_offsets`'; `CoordinatorNotAvailable` until that many brokers are active.
fn txn_replication_factor(shard: &Shard) -> Result<i16, TxnError> {
    let nodes = shard
        .config
        .internal_topic_replicas_max(shard.metadata().brokers.len());
    let factor = shard
        .config
        .transaction_state_log_replication_factor
        .min(i16::try_from(nodes).unwrap_or(i16::MAX));
    let active = shard
        .metadata()
        .brokers
        .values()
        .filter(|b| b.is_active())
        .count();
    if active < usize::try_from(factor).unwrap_or(usize::MAX) {
        tracing::info!(
            factor,
            active,
            "{TXN_TOPIC} waits for enough active brokers"
        );
        return Err(TxnError::CoordinatorNotAvailable);
    }
    Ok(factor)
}

/// Runs `op` here, where `partition` of `__transaction_state` is owned.
pub async fn run_op(
    shard: &Rc<Shard>,
    partition: i32,
    transactional_id: &str,
    op: TxnOp,
) -> TxnReply {
    if let Err(error) = coordinating(shard, partition) {
        return TxnReply::error(&op, error);
    }
    let now_ms = epoch_ms();
    match op {
        TxnOp::InitProducerId {
            timeout_ms,
            expected,
        } => TxnReply::ProducerId(
            init_producer_id(shard, partition, transactional_id, timeout_ms, expected).await,
        ),
        TxnOp::AddPartitions {
            producer_id,
            producer_epoch,
            partitions,
            client_transaction_version,
        } => {
            let partitions: BTreeSet<TopicPartition> = partitions.into_iter().collect();
            let add = |now_ms| {
                with_txn(shard, transactional_id, |m| {
                    m.add_partitions(
                        producer_id,
                        producer_epoch,
                        &partitions,
                        client_transaction_version,
                        now_ms,
                    )
                })
            };
            let mut prepared = add(now_ms);
            if completing(&prepared, shard, transactional_id) && hold_until_completed(shard).await {
                prepared = coordinating(shard, partition).and_then(|()| add(epoch_ms()));
            }
            TxnReply::Done(match prepared {
                Ok(None) => Ok(()),
                Ok(Some(t)) => write(shard, partition, transactional_id, t).await,
                Err(e) => Err(e),
            })
        }
        TxnOp::Verify {
            producer_id,
            producer_epoch,
            partitions,
        } => TxnReply::Verified(
            shard
                .txns
                .txns
                .borrow()
                .get(transactional_id)
                .ok_or(TxnError::InvalidProducerIdMapping)
                .and_then(|m| m.verify(producer_id, producer_epoch, &partitions)),
        ),
        TxnOp::Describe => TxnReply::Described(describe(shard, transactional_id)),
        TxnOp::EndTxn {
            producer_id,
            producer_epoch,
            commit,
            client_transaction_version,
        } => {
            let request = EndRequest {
                producer_id,
                producer_epoch,
                commit,
                client_transaction_version,
            };
            TxnReply::ProducerId(end_txn(shard, partition, transactional_id, request).await)
        }
    }
}

/// Whether `prepared` is CONCURRENT_TRANSACTIONS only because the id's previous transaction
/// is still completing (PrepareCommit or PrepareAbort: its markers are being written).
fn completing<T>(prepared: &Result<T, TxnError>, shard: &Shard, transactional_id: &str) -> bool {
    matches!(prepared, Err(TxnError::ConcurrentTransactions))
        && shard
            .txns
            .txns
            .borrow()
            .get(transactional_id)
            .is_some_and(|m| matches!(m.state, TxnState::PrepareCommit | TxnState::PrepareAbort))
}

/// Holds an AddPartitionsToTxn that found the producer's previous transaction completing
/// until a transaction of this shard completes, at most [`ADD_PARTITIONS_HOLD`]; true when
/// one did (the caller tries again). Kafka answers CONCURRENT_TRANSACTIONS at once and the
/// client backs off (librdkafka and the Java client 20 ms), while the markers usually land
/// within a millisecond. At most [`ADD_PARTITIONS_HELD_MAX`] are held per shard; beyond
/// that the answer is immediate.
async fn hold_until_completed(shard: &Rc<Shard>) -> bool {
    let coordinator = &shard.txns;
    if coordinator.held_adds.get() >= ADD_PARTITIONS_HELD_MAX {
        return false;
    }
    coordinator.held_adds.set(coordinator.held_adds.get() + 1);
    let completed = coordinator.completed.notified();
    let woken = futures_lite::future::or(
        async {
            completed.await;
            true
        },
        async {
            crate::rt::sleep(ADD_PARTITIONS_HOLD).await;
            false
        },
    )
    .await;
    coordinator.held_adds.set(coordinator.held_adds.get() - 1);
    woken
}

/// DescribeTransactions of `transactional_id` (Kafka's `handleDescribeTransactions`): an id
/// being expired (Dead) or unknown is `TransactionalIdNotFound`.
fn describe(shard: &Shard, transactional_id: &str) -> Result<TxnDescription, TxnError> {
    let txns = shard.txns.txns.borrow();
    let m = txns
        .get(transactional_id)
        .filter(|m| m.state != super::state::TxnState::Dead)
        .ok_or(TxnError::TransactionalIdNotFound)?;
    Ok(TxnDescription {
        state: m.state.name(),
        timeout_ms: m.timeout_ms,
        start_ms: m.start_ms,
        producer_id: m.producer_id,
        producer_epoch: m.producer_epoch,
        partitions: m.partitions.iter().cloned().collect(),
    })
}

/// This shard's transactional ids that `filter` selects (Kafka's `listTransactionStates`).
/// Errors: `CoordinatorLoadInProgress` while a partition this shard coordinates is loading
/// (the list would be incomplete).
pub fn list_local(shard: &Shard, filter: &ListFilter) -> Result<Vec<ListedTxn>, TxnError> {
    let now_ms = epoch_ms();
    let loading = {
        let partitions = shard.txns.partitions.borrow();
        (0..i32::try_from(shard.txn_partition_count()).unwrap_or(i32::MAX)).any(|p| {
            partitions.check(p) == Err(crate::coordinator_runtime::NotServing::LoadInProgress)
        })
    };
    if loading {
        return Err(TxnError::CoordinatorLoadInProgress);
    }
    let states: Vec<super::state::TxnState> = (0..8)
        .filter_map(super::state::TxnState::from_id)
        .filter(|s| filter.states.iter().any(|n| n == s.name()))
        .collect();
    let selected = |m: &&TxnMetadata| {
        m.state != super::state::TxnState::Dead
            && (filter.producer_ids.is_empty() || filter.producer_ids.contains(&m.producer_id))
            && (filter.states.is_empty() || states.contains(&m.state))
            && (filter.duration_ms < 0 || now_ms.saturating_sub(m.start_ms) > filter.duration_ms)
    };
    Ok(shard
        .txns
        .txns
        .borrow()
        .values()
        .filter(selected)
        .map(|m| ListedTxn {
            transactional_id: m.transactional_id.clone(),
            producer_id: m.producer_id,
            state: m.state.name(),
        })
        .collect())
}

/// Every shard's transactional ids that `filter` selects. Errors: as [`list_local`], from
/// any shard.
pub async fn list_all(shard: &Rc<Shard>, filter: &ListFilter) -> Result<Vec<ListedTxn>, TxnError> {
    let mut out = Vec::new();
    for peer in 0..shard.shards {
        if peer == shard.id {
            out.extend(list_local(shard, filter)?);
            continue;
        }
        let (reply, answer) = oneshot::channel();
        let msg = ShardMsg::ListTxns {
            filter: filter.clone(),
            reply,
        };
        if shard.send(peer, msg).await.is_ok() {
            if let Ok(listed) = answer.await {
                out.extend(listed?);
            }
        }
    }
    Ok(out)
}

/// Runs `f` on the metadata of `transactional_id`; `InvalidProducerIdMapping` when it has
/// none (Kafka: no InitProducerId yet, or expired).
fn with_txn<T>(
    shard: &Shard,
    transactional_id: &str,
    f: impl FnOnce(&mut TxnMetadata) -> Result<T, TxnError>,
) -> Result<T, TxnError> {
    match shard.txns.txns.borrow_mut().get_mut(transactional_id) {
        Some(m) => f(m),
        None => Err(TxnError::InvalidProducerIdMapping),
    }
}

/// InitProducerId with a transactional id (Kafka's `handleInitProducerId`): a new id gets a
/// producer id from the allocator, an existing one an epoch bump (fencing the previous
/// producer), an open transaction is aborted first (`CONCURRENT_TRANSACTIONS`: retry), and
/// exhausted epochs rotate the producer id.
async fn init_producer_id(
    shard: &Rc<Shard>,
    partition: i32,
    transactional_id: &str,
    timeout_ms: i32,
    expected: Option<(i64, i16)>,
) -> Result<(i64, i16), TxnError> {
    check_timeout(timeout_ms, shard.txns.config.max_timeout_ms)?;
    let known = shard.txns.txns.borrow().contains_key(transactional_id);
    if !known {
        let producer_id = allocate_producer_id(shard).await?;
        coordinating(shard, partition)?;
        shard
            .txns
            .txns
            .borrow_mut()
            .entry(transactional_id.to_string())
            .or_insert_with(|| {
                TxnMetadata::new(transactional_id, producer_id, timeout_ms, epoch_ms())
            });
    }
    let mut fresh_id = None;
    loop {
        let version = transaction_version(shard);
        let step = with_txn(shard, transactional_id, |m| {
            m.init_producer_id(timeout_ms, expected, fresh_id, version, epoch_ms())
        })?;
        match step {
            InitStep::NeedProducerId => {
                fresh_id = Some(allocate_producer_id(shard).await?);
                coordinating(shard, partition)?;
            }
            InitStep::Write(t) => {
                let answer = (t.producer_id, t.producer_epoch);
                write(shard, partition, transactional_id, t).await?;
                tracing::info!(
                    transactional_id,
                    producer_id = answer.0,
                    producer_epoch = answer.1,
                    "initialised a transactional producer"
                );
                return Ok(answer);
            }
            InitStep::FenceAndAbort(t) => {
                prepare_end(shard, partition, transactional_id, t).await?;
                return Err(TxnError::ConcurrentTransactions);
            }
        }
    }
}

/// An EndTxn as [`TxnOp::EndTxn`] carries it.
struct EndRequest {
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
    client_transaction_version: i16,
}

/// EndTxn (Kafka's `handleEndTransaction`): PrepareCommit or PrepareAbort written, its markers
/// started, and the producer id and epoch the producer goes on with answered (bumped at
/// transaction version 2; the next producer id once the epochs are exhausted).
async fn end_txn(
    shard: &Rc<Shard>,
    partition: i32,
    transactional_id: &str,
    r: EndRequest,
) -> Result<(i64, i16), TxnError> {
    let mut next_producer_id = None;
    loop {
        let step = with_txn(shard, transactional_id, |m| {
            m.end_txn(
                r.producer_id,
                r.producer_epoch,
                r.commit,
                r.client_transaction_version,
                next_producer_id,
                epoch_ms(),
            )
        })?;
        match step {
            EndStep::Done {
                producer_id,
                producer_epoch,
            } => return Ok((producer_id, producer_epoch)),
            EndStep::NeedProducerId => {
                next_producer_id = Some(allocate_producer_id(shard).await?);
                coordinating(shard, partition)?;
            }
            EndStep::Write(t) => {
                // What the producer continues with once the transaction completed (Kafka
                // answers the next producer id at epoch 0 after an overflow).
                let answer = if t.next_producer_id >= 0 {
                    (t.next_producer_id, 0)
                } else {
                    (t.producer_id, t.producer_epoch)
                };
                prepare_end(shard, partition, transactional_id, t).await?;
                return Ok(answer);
            }
        }
    }
}

/// The cluster's finalized `transaction.version` (KIP-890), which the coordinator applies to
/// the transactions it ends itself.
fn transaction_version(shard: &Shard) -> i16 {
    replication::metadata::transaction_version(&shard.metadata().image)
}

/// A new producer id from this broker's block (the idempotent producers' allocator).
async fn allocate_producer_id(shard: &Rc<Shard>) -> Result<i64, TxnError> {
    crate::controller::allocate_producer_id(shard)
        .await
        .map_err(|e| {
            tracing::warn!(error = %e, "no producer id for a transactional id");
            TxnError::CoordinatorNotAvailable
        })
}

/// Writes a PrepareCommit or PrepareAbort, then starts sending its markers.
async fn prepare_end(
    shard: &Rc<Shard>,
    partition: i32,
    transactional_id: &str,
    t: TxnTransit,
) -> Result<(), TxnError> {
    write(shard, partition, transactional_id, t).await?;
    if let Some(epoch) = shard.txns.partitions.borrow().epoch(partition) {
        markers::spawn_completion(shard, partition, epoch, transactional_id.to_string());
    }
    Ok(())
}

/// Until shutdown: starts each load the coordinator queues (an election) as a task.
pub async fn load_loop(shard: &Rc<Shard>) {
    while let Some(loads) = shard.txns.next_loads().await {
        for (partition, load) in loads {
            let task = Rc::clone(shard);
            crate::shard::spawn_into(None, async move {
                load_partition(&task, partition, load).await;
            });
        }
    }
}

/// Replays `partition` into a new set of ids, installs them unless the partition moved
/// meanwhile, and resumes the markers of every prepared transaction (Kafka's
/// `loadTransactionsForTxnTopicPartition`).
async fn load_partition(shard: &Rc<Shard>, partition: i32, load: LoadId) {
    let tp = TopicPartition {
        topic: TXN_TOPIC.to_string(),
        partition,
    };
    let mut loaded: HashMap<String, TxnMetadata> = HashMap::new();
    let replayed = crate::coordinator_runtime::log::replay(shard, &tp, &mut |batch| {
        apply_batch(&mut loaded, batch, partition)
    })
    .await;
    if let Err(error) = replayed {
        shard
            .txns
            .partitions
            .borrow_mut()
            .fail_load(partition, load);
        tracing::warn!(partition, %error, "cannot load transactional ids");
        return;
    }
    if !shard
        .txns
        .partitions
        .borrow_mut()
        .finish_load(partition, load)
    {
        tracing::info!(partition, "dropping a load whose partition moved meanwhile");
        return;
    }
    let prepared: Vec<String> = loaded
        .values()
        .filter(|m| {
            matches!(
                m.state,
                super::state::TxnState::PrepareCommit | super::state::TxnState::PrepareAbort
            )
        })
        .map(|m| m.transactional_id.clone())
        .collect();
    let count = loaded.len();
    shard.txns.txns.borrow_mut().extend(loaded);
    tracing::info!(
        partition,
        ids = count,
        prepared = prepared.len(),
        "loaded transactional ids"
    );
    let Some(epoch) = shard.txns.partitions.borrow().epoch(partition) else {
        return;
    };
    for id in prepared {
        markers::spawn_completion(shard, partition, epoch, id);
    }
}

/// Applies the records of one stored batch to `loaded` (a later record wins; a tombstone
/// removes the id); unreadable ones are logged and skipped.
pub(super) fn apply_batch(loaded: &mut HashMap<String, TxnMetadata>, bytes: &[u8], partition: i32) {
    let records = match storage::records_of(bytes) {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(partition, error = %e, "skipping unreadable batch");
            return;
        }
    };
    for r in records {
        let Some(key) = r.key else { continue };
        match decode(key, r.value) {
            Ok(Some(record)) => match record.value {
                Some(t) => {
                    let m = TxnMetadata::from_stored(&record.transactional_id, t);
                    loaded.insert(record.transactional_id, m);
                }
                None => {
                    loaded.remove(&record.transactional_id);
                }
            },
            Ok(None) => {}
            Err(why) => {
                tracing::warn!(partition, offset = r.offset.0, %why, "skipping unreadable record")
            }
        }
    }
}

/// Every `transaction.abort.timed.out.transaction.cleanup.interval.ms` until shutdown: open
/// transactions past their timeout are aborted with an epoch bump (Kafka's
/// `abortTimedOutTransactions`), and — every
/// `transaction.remove.expired.transaction.cleanup.interval.ms` — ids idle past
/// `transactional.id.expiration.ms` are tombstoned and removed.
pub async fn timeout_loop(shard: &Rc<Shard>) {
    let config = shard.txns.config;
    let mut since_expiry = std::time::Duration::ZERO;
    loop {
        if shard
            .sleep_unless_stopped(config.abort_timed_out_interval)
            .await
        {
            shard.txns.stop_loads();
            return;
        }
        abort_timed_out(shard).await;
        since_expiry += config.abort_timed_out_interval;
        if since_expiry >= config.remove_expired_interval {
            since_expiry = std::time::Duration::ZERO;
            remove_expired(shard).await;
        }
    }
}

async fn abort_timed_out(shard: &Rc<Shard>) {
    let now_ms = epoch_ms();
    let partitions = shard.txn_partition_count();
    let due: Vec<String> = shard
        .txns
        .txns
        .borrow()
        .values()
        .filter(|m| m.timed_out(now_ms))
        .map(|m| m.transactional_id.clone())
        .collect();
    let version = transaction_version(shard);
    for id in due {
        let partition = partition_for(&id, partitions);
        if coordinating(shard, partition).is_err() {
            continue;
        }
        let needs_id = with_txn(shard, &id, |m| Ok(m.fence_needs_producer_id(version)));
        let next_producer_id = match needs_id {
            Ok(true) => allocate_producer_id(shard).await.ok(),
            _ => None,
        };
        let Ok(t) = with_txn(shard, &id, |m| {
            m.prepare_fence_abort(version, next_producer_id, epoch_ms())
        }) else {
            continue;
        };
        tracing::info!(transactional_id = %id, "aborting a transaction past its timeout");
        if let Err(error) = prepare_end(shard, partition, &id, t).await {
            tracing::warn!(transactional_id = %id, %error, "could not abort a timed-out transaction");
        }
    }
}

async fn remove_expired(shard: &Rc<Shard>) {
    let now_ms = epoch_ms();
    let expiration_ms = shard.txns.config.id_expiration_ms;
    let partitions = shard.txn_partition_count();
    let expired: Vec<String> = shard
        .txns
        .txns
        .borrow()
        .values()
        .filter(|m| m.expired(now_ms, expiration_ms))
        .map(|m| m.transactional_id.clone())
        .collect();
    for id in expired {
        let partition = partition_for(&id, partitions);
        if coordinating(shard, partition).is_err() {
            continue;
        }
        let Ok(t) = with_txn(shard, &id, TxnMetadata::prepare_dead) else {
            continue;
        };
        match write(shard, partition, &id, t).await {
            Ok(()) => tracing::info!(transactional_id = %id, "removed an expired transactional id"),
            Err(error) => {
                tracing::warn!(transactional_id = %id, %error, "could not remove an expired id")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn txn_topic_is_created_as_kafka_with_min_isr_capped_by_replicas() {
        let config = tuning::config::BrokerConfig::default();
        let overrides = txn_topic_overrides(&config, 3);
        assert_eq!(overrides["min.insync.replicas"], "2");
        assert_eq!(txn_topic_overrides(&config, 1)["min.insync.replicas"], "1");
        let topic = crate::metadata::overrides_config(&overrides, &config.topic_defaults)
            .expect("Kafka's transaction topic configs are valid");
        assert_eq!(topic.log.cleanup_policy, storage::CleanupPolicy::Compact);
        assert_eq!(topic.log.segment_bytes, 104_857_600);
    }
}
