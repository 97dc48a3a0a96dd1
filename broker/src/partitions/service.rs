//! Routing and handling of partition operations: [`call`] runs an op on the partition's
//! owning shard (here, or over the mesh as `ShardMsg::Partition`), [`call_placed`] with the
//! placement the handler resolved from its request's one metadata snapshot; [`run_here`]
//! runs it on this shard's [`replication::Partition`], with the produce's one validation
//! pass and checks before an append ([`check_produce`]);
//! [`owned_partition`] finds the open partition an op runs on (Kafka's
//! `ReplicaManager.getPartitionOrError`), reopening a log that failed to open earlier.

use super::ops::{PartitionOp, PartitionOpError, PartitionReply};
use crate::messages::ShardMsg;
use crate::metadata::Placement;
use crate::shard::{LocalPartition, Shard};
use futures_channel::oneshot;
use std::rc::Rc;
use storage::TopicPartition;

/// Runs `op` on the partition's owning shard: here, or over the mesh, as the current
/// metadata snapshot places it ([`call_placed`]).
pub async fn call(shard: &Rc<Shard>, tp: TopicPartition, op: PartitionOp) -> PartitionReply {
    let placement = shard.metadata().placement_of(&tp.topic, tp.partition);
    call_placed(shard, tp, placement, op).await
}

/// Runs `op` on the partition's owning shard, here or over the mesh, as `placement` — the
/// partition resolved once from the request's metadata snapshot
/// ([`crate::metadata::ClusterMetadata::placement`]; `None`: no such partition) — says: no
/// lookup here. Errors: [`PartitionOpError::UnknownTopicOrPartition`] without a placement,
/// [`PartitionOpError::NotLeaderOrFollower`] when the partition exists but this broker does
/// not lead it (every op here is a leader's: produce, fetch, offsets, record deletion; a
/// consumer's Fetch v11+ goes by [`call_hosted`], KIP-392).
pub async fn call_placed(
    shard: &Rc<Shard>,
    tp: TopicPartition,
    placement: Option<Placement>,
    op: PartitionOp,
) -> PartitionReply {
    let Some(placement) = placement else {
        return PartitionReply::Error(PartitionOpError::UnknownTopicOrPartition);
    };
    let (Some(owner), true) = (placement.owner, placement.leads) else {
        return PartitionReply::Error(PartitionOpError::NotLeaderOrFollower);
    };
    on_owner(shard, owner, tp, op).await
}

/// Runs `op` on the partition's owning shard, here or over the mesh, when this broker is one
/// of its replicas, leader or follower (a consumer's Fetch v11+ that a follower serves,
/// KIP-392) — `placement` resolved as for [`call_placed`]. Errors:
/// [`PartitionOpError::UnknownTopicOrPartition`] without a placement,
/// [`PartitionOpError::NotLeaderOrFollower`] when this broker holds no replica of it (Kafka's
/// `ReplicaManager.getPartitionOrError` for a partition hosted elsewhere).
pub async fn call_hosted(
    shard: &Rc<Shard>,
    tp: TopicPartition,
    placement: Option<Placement>,
    op: PartitionOp,
) -> PartitionReply {
    let Some(placement) = placement else {
        return PartitionReply::Error(PartitionOpError::UnknownTopicOrPartition);
    };
    let Some(owner) = placement.owner else {
        return PartitionReply::Error(PartitionOpError::NotLeaderOrFollower);
    };
    on_owner(shard, owner, tp, op).await
}

/// Runs a follower's `op` ([`PartitionOp::FollowerPosition`], [`PartitionOp::AppendAsFollower`],
/// [`PartitionOp::TruncateToDivergingEpoch`], [`PartitionOp::HandleOutOfRange`]) on the partition's owning shard, here or over
/// the mesh, whoever leads it (the partition's own role decides). Errors:
/// [`PartitionOpError::UnknownTopicOrPartition`] when this broker is not one of its replicas.
pub async fn call_replica(
    shard: &Rc<Shard>,
    tp: TopicPartition,
    op: PartitionOp,
) -> PartitionReply {
    let Some(owner) = shard.metadata().owner(&tp.topic, tp.partition) else {
        return PartitionReply::Error(PartitionOpError::UnknownTopicOrPartition);
    };
    if owner != shard.id {
        return on_owner(shard, owner, tp, op).await;
    }
    // Here too the op runs as a task of its own, as a mesh message does on its owner: the
    // fetcher asking may be dropped (its leader's partitions moved, or shutdown), and dropping
    // an append or a truncation half-way would leave the log's maintenance lock taken.
    let (reply, answer) = oneshot::channel();
    let owner_shard = Rc::clone(shard);
    crate::shard::spawn_into(None, async move {
        let _ = reply.send(run_here(&owner_shard, &tp, op).await);
    });
    answer
        .await
        .unwrap_or(PartitionReply::Error(PartitionOpError::ShardUnavailable))
}

/// Runs `op` on shard `owner`: here, or sent over the mesh as `ShardMsg::Partition` and
/// answered on a oneshot. Errors: [`PartitionOpError::ShardUnavailable`] when the owner's
/// queue or answer is gone (it is stopping).
async fn on_owner(
    shard: &Rc<Shard>,
    owner: usize,
    tp: TopicPartition,
    op: PartitionOp,
) -> PartitionReply {
    if owner == shard.id {
        return run_here(shard, &tp, op).await;
    }
    let (reply, answer) = oneshot::channel();
    if shard
        .send(owner, ShardMsg::Partition { tp, op, reply })
        .await
        .is_err()
    {
        return PartitionReply::Error(PartitionOpError::ShardUnavailable);
    }
    answer
        .await
        .unwrap_or(PartitionReply::Error(PartitionOpError::ShardUnavailable))
}

/// Runs `op` on partition `tp`, which this shard owns.
pub async fn run_here(shard: &Shard, tp: &TopicPartition, op: PartitionOp) -> PartitionReply {
    match run(shard, tp, op).await {
        Ok(reply) => reply,
        Err(e) => PartitionReply::Error(e),
    }
}

/// The open partition `tp`, opening it again (through the partition lifecycle's
/// [`Shard::open_partition`]) if this shard owns it but its log failed to open earlier (e.g.
/// a full disk at start-up). Errors: [`PartitionOpError::UnknownTopicOrPartition`] when not
/// owned here, [`PartitionOpError::LogUnavailable`] when the log still cannot be opened.
pub(crate) async fn owned_partition(
    shard: &Shard,
    tp: &TopicPartition,
) -> Result<Rc<LocalPartition>, PartitionOpError> {
    if let Some(owned) = shard.partitions.borrow().get(tp).cloned() {
        return Ok(owned);
    }
    let meta = shard.metadata();
    let owner = meta.owner(&tp.topic, tp.partition);
    let topic = meta.topics.get(&tp.topic);
    let (Some(owner), Some(topic)) = (owner, topic) else {
        return Err(PartitionOpError::UnknownTopicOrPartition);
    };
    if owner != shard.id {
        return Err(PartitionOpError::UnknownTopicOrPartition);
    }
    let defaults = crate::dynamic_config::topic_defaults(&shard.config, &meta.image);
    let config = crate::metadata::topic_config(topic, &defaults);
    (shard.open_partition)(shard, tp, config)
        .await
        .map_err(|e| {
            tracing::warn!(%tp, error = %e, "partition log still cannot be opened");
            PartitionOpError::LogUnavailable(e)
        })
}

async fn run(
    shard: &Shard,
    tp: &TopicPartition,
    op: PartitionOp,
) -> Result<PartitionReply, PartitionOpError> {
    let partition = owned_partition(shard, tp).await?;
    match op {
        PartitionOp::Produce {
            records,
            acks,
            timeout,
            origin,
            verification,
        } => {
            let append = Append {
                acks,
                timeout,
                origin,
                verification,
            };
            produce(shard, tp, &partition, records, append).await
        }
        PartitionOp::StartTxnVerification {
            producer_id,
            producer_epoch,
            base_sequence,
        } => {
            if partition.leader() != partition_node(shard) {
                return Err(PartitionOpError::NotLeaderOrFollower);
            }
            let guard =
                partition
                    .log()
                    .start_txn_verification(producer_id, base_sequence, producer_epoch);
            Ok(PartitionReply::VerificationStarted(guard))
        }
        op @ PartitionOp::Fetch { .. } => fetch(shard, tp, partition, op).await,
        op @ PartitionOp::ReplicaFetch { .. } => replica_fetch(shard, tp, &partition, op).await,
        PartitionOp::FollowerPosition => {
            if partition.leader() == partition_node(shard) {
                return Err(PartitionOpError::NotLeaderOrFollower);
            }
            follower_position(&partition).await
        }
        PartitionOp::AppendAsFollower {
            fetched_at,
            records,
            leader_high_watermark,
            leader_log_start_offset,
        } => {
            following_at(&partition, fetched_at)?;
            let leader = (leader_high_watermark, leader_log_start_offset);
            append_as_follower(shard, &partition, records, leader).await
        }
        PartitionOp::HandleOutOfRange {
            fetched_at,
            leader_log_start_offset,
            leader_log_end_offset,
        } => {
            following_at(&partition, fetched_at)?;
            partition
                .handle_out_of_range(leader_log_start_offset, leader_log_end_offset)
                .await?;
            follower_position(&partition).await
        }
        PartitionOp::TruncateToDivergingEpoch {
            fetched_at,
            epoch,
            end_offset,
        } => {
            following_at(&partition, fetched_at)?;
            partition
                .truncate_to_diverging_epoch(epoch, end_offset)
                .await?;
            follower_position(&partition).await
        }
        PartitionOp::ListOffsets { spec, isolation } => {
            super::leader_epoch::list_offsets(shard, tp, &partition, spec, isolation).await
        }
        PartitionOp::OffsetForLeaderEpoch { leader_epoch } => Ok(
            super::leader_epoch::offset_for_leader_epoch(&partition, leader_epoch),
        ),
        PartitionOp::DeleteRecordsBefore { before } => {
            let log_start = partition.delete_records(before).await?;
            Ok(PartitionReply::LogStart {
                log_start_offset: log_start.0,
            })
        }
        PartitionOp::WriteTxnMarker { marker, timeout } => {
            write_txn_marker(shard, &partition, marker, timeout).await
        }
        PartitionOp::DescribeProducers => describe_producers(&partition).await,
    }
}

/// A follower's append of the leader's batches, with the leader's (high watermark, log start
/// offset) from the same fetch; a failed directory is noted.
async fn append_as_follower(
    shard: &Shard,
    partition: &crate::shard::LocalPartition,
    records: bytes::Bytes,
    (leader_high_watermark, leader_log_start_offset): (storage::Offset, storage::Offset),
) -> Result<PartitionReply, PartitionOpError> {
    partition
        .append_as_follower(records, leader_high_watermark, leader_log_start_offset)
        .await
        .inspect_err(|e| note_dir_failure(shard, e))?;
    follower_position(partition).await
}

/// WriteTxnMarkers on the leader: the marker appended, written and replicated (or refused).
async fn write_txn_marker(
    shard: &Shard,
    partition: &crate::shard::LocalPartition,
    marker: storage::TxnMarker,
    timeout: std::time::Duration,
) -> Result<PartitionReply, PartitionOpError> {
    let appended = partition
        .append_txn_marker(marker, timeout)
        .await
        .inspect_err(|e| note_dir_failure(shard, e))?;
    Ok(PartitionReply::MarkerWritten {
        offset: appended.base_offset.0,
    })
}

/// DescribeProducers on any replica, leader or follower (Kafka's
/// `ReplicaManager.activeProducerState` reads whichever log this broker has): every producer
/// the log knows, its last timestamp that of its last batch, data or marker (as Kafka's
/// `lastTimestamp`); for a producer restored from a snapshot that did not keep it, read from
/// its last remembered data batch (-1 when that batch is gone or none is remembered).
async fn describe_producers(
    partition: &crate::shard::LocalPartition,
) -> Result<PartitionReply, PartitionOpError> {
    let log = partition.log();
    let mut out = Vec::new();
    for p in log.active_producers() {
        let last_timestamp = match p.last_batch_base {
            _ if p.last_timestamp_ms >= 0 => p.last_timestamp_ms,
            // Restored from a version-1 snapshot: its last data batch says.
            Some(base) if base >= log.log_start_offset() && base < log.log_end_offset() => log
                .read(base, 1, log.log_end_offset())
                .await
                .ok()
                .and_then(|batches| batches.first().map(|b| b.header()))
                .filter(|h| h.base_offset == base)
                .map_or(-1, |h| h.max_timestamp.0),
            _ => -1,
        };
        out.push(super::ops::ActiveProducer {
            producer_id: p.producer_id,
            producer_epoch: p.epoch,
            last_sequence: p.last_sequence,
            last_timestamp,
            coordinator_epoch: p.coordinator_epoch,
            current_txn_start_offset: p.current_txn_first_offset.map_or(-1, |o| o.0),
        });
    }
    Ok(PartitionReply::Producers(out))
}

/// How a produced record set is appended (the fields of [`PartitionOp::Produce`] past its
/// records).
struct Append {
    acks: replication::Acks,
    timeout: std::time::Duration,
    origin: storage::AppendOrigin,
    verification: Option<storage::VerificationGuard>,
}

/// Produce: the record set split and checked once ([`storage::ValidatedBatches`]: lengths,
/// magic, counts, CRC-32C; CORRUPT_MESSAGE and the like when it fails), then checked against
/// the topic's config (`produce_checks`), then appended — the log takes the checked set and
/// checks nothing again. Here, on the owning shard, rather than in the handler: the topic's
/// config and the log are here, so is every other way in (the group coordinator's
/// `__consumer_offsets` appends), and a remote partition's checks cost its own shard, not
/// the connection's.
async fn produce(
    shard: &Shard,
    tp: &TopicPartition,
    partition: &Rc<LocalPartition>,
    records: bytes::Bytes,
    append: Append,
) -> Result<PartitionReply, PartitionOpError> {
    let Append {
        acks,
        timeout,
        origin,
        verification,
    } = append;
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let batches = match shard.topic_configs.borrow().get(tp) {
        Some(config) => {
            let checked = check_produce(&records, config, now_ms)?.with_origin(origin);
            match verification {
                Some(guard) => checked.with_verification(guard),
                None => checked,
            }
        }
        // Closed while the request was on its way (the log refuses it too).
        None => return Err(PartitionOpError::UnknownTopicOrPartition),
    };
    let appended = partition
        .append(batches, acks, timeout)
        .await
        .inspect_err(|e| note_dir_failure(shard, e))?;
    Ok(PartitionReply::Produced {
        base_offset: appended.base_offset.0,
        log_start_offset: appended.log_start_offset.0,
        log_append_time_ms: appended.log_append_time.map_or(-1, |t| t.0),
    })
}

/// The one pass over a produced record set before its append: split and CRC-checked
/// ([`storage::ValidatedBatches::validate`]), then the topic's checks
/// ([`crate::produce_checks::prepare`]). Errors: an invalid batch as the log's
/// [`storage::StorageError::InvalidBatch`] (CORRUPT_MESSAGE, INVALID_RECORD for a wrong record
/// count), then the produce checks' refusals.
pub(crate) fn check_produce(
    records: &bytes::Bytes,
    config: &tuning::config::TopicConfig,
    now_ms: i64,
) -> Result<storage::ValidatedBatches, PartitionOpError> {
    let batches = storage::ValidatedBatches::validate(records)
        .map_err(|e| replication::PartitionError::from(storage::StorageError::from(e)))?;
    Ok(crate::produce_checks::prepare(batches, config, now_ms)?)
}

/// A consumer's Fetch (`op`, as [`run`] passes only a Fetch), parked until `min_bytes` or
/// its deadline — or, on a leader with a replica of the consumer's rack to point to (KIP-392),
/// answered at once with that replica and the offsets.
async fn fetch(
    shard: &Shard,
    tp: &TopicPartition,
    partition: Rc<LocalPartition>,
    op: PartitionOp,
) -> Result<PartitionReply, PartitionOpError> {
    let PartitionOp::Fetch {
        offset,
        read_replica_candidates,
        max_bytes,
        min_bytes,
        isolation,
        deadline,
        cancel,
    } = op
    else {
        unreachable!("run passes only a Fetch to fetch");
    };
    if let Some(replica) = partition.preferred_read_replica(&read_replica_candidates, offset) {
        let log = partition.log();
        return Ok(PartitionReply::ReadElsewhere {
            preferred_read_replica: replica.0,
            high_watermark: log.high_watermark().0,
            last_stable_offset: log.last_stable_offset().0,
            log_start_offset: log.log_start_offset().0,
        });
    }
    let parked = &shard.metrics.parked_fetches;
    parked.set(parked.get() + 1);
    let cancelled = async {
        let _ = cancel.await;
    };
    let read = partition
        .fetch(offset, max_bytes, min_bytes, isolation, deadline, cancelled)
        .await;
    parked.set(parked.get() - 1);
    let still_here = shard
        .partitions
        .borrow()
        .get(tp)
        .is_some_and(|p| Rc::ptr_eq(p, &partition));
    let read = if still_here {
        read?
    } else {
        // Closed while parked (topic deleted, shard stopping): answer as a read
        // arriving now would.
        owned_partition(shard, tp)
            .await?
            .read(offset, max_bytes, isolation)
            .await?
    };
    Ok(read.into())
}

/// A follower's Fetch (`op`, as [`run`] passes only a ReplicaFetch): its broker epoch
/// checked (KIP-903), parked like a consumer's, and the ISR expanded when it caught up.
async fn replica_fetch(
    shard: &Shard,
    tp: &TopicPartition,
    partition: &Rc<LocalPartition>,
    op: PartitionOp,
) -> Result<PartitionReply, PartitionOpError> {
    let PartitionOp::ReplicaFetch {
        replica,
        fetch_offset,
        last_fetched_epoch,
        broker_epoch,
        alive_epoch,
        max_bytes,
        min_bytes,
        deadline,
        cancel,
    } = op
    else {
        unreachable!("run passes only a ReplicaFetch to replica_fetch");
    };
    let cancelled = async {
        let _ = cancel.await;
    };
    // KIP-903: against the epoch the image registers for the follower while it is not fenced
    // (resolved with the request's topics, no lookup here).
    let isr_eligible = replication::check_follower_broker_epoch(replica, broker_epoch, alive_epoch)
        .map_err(replication::PartitionError::from)?;
    let read = partition
        .replica_fetch_parked(
            replica,
            fetch_offset,
            last_fetched_epoch,
            broker_epoch,
            max_bytes,
            min_bytes,
            deadline,
            cancelled,
        )
        .await?;
    let candidate = read.expand_candidate.filter(|_| isr_eligible);
    if let (Some(candidate), Some(shard)) = (candidate, shard.rc()) {
        super::isr_changes::maybe_expand(&shard, tp, partition, candidate);
    }
    Ok(PartitionReply::ReplicaRead {
        high_watermark: read.high_watermark.0,
        log_start_offset: read.log_start_offset.0,
        batches: read.batches,
        diverging_epoch: read.diverging_epoch,
    })
}

/// This broker as the partitions know it.
fn partition_node(shard: &Shard) -> replication::runtime::NodeId {
    replication::runtime::NodeId(shard.config.node_id)
}

/// A follower's next fetch position once its log's tail is written (its fetch offset
/// acknowledges what it has, DESIGN.md §3).
async fn follower_position(
    partition: &crate::shard::LocalPartition,
) -> Result<PartitionReply, PartitionOpError> {
    let log = partition.log();
    let written = log
        .wait_written(log.log_end_offset())
        .await
        .map_err(replication::PartitionError::from)?;
    Ok(PartitionReply::FollowerPosition {
        fetch_offset: written,
        last_fetched_epoch: log.latest_leader_epoch(),
        log_start_offset: log.log_start_offset(),
    })
}

/// Whether `partition` is at `fetched_at`, the leader epoch a fetcher's answer was asked at:
/// a follower's op applies only then (Kafka's fetcher drops a response whose partition state
/// changed meanwhile), so a former leader's answer, still in flight when the replica moved to
/// a new leader, cannot truncate or extend its log. (On a leader the follower's ops refuse by
/// themselves.) Errors: `LeaderEpoch`, fenced when the answer is older, unknown when newer.
fn following_at(
    partition: &crate::shard::LocalPartition,
    fetched_at: storage::LeaderEpoch,
) -> Result<(), PartitionOpError> {
    replication::check_current_leader_epoch(Some(fetched_at), partition.leader_epoch())?;
    Ok(())
}

/// Tells the log directory's state of a failed write (see [`crate::log_dir`]).
fn note_dir_failure(shard: &Shard, error: &replication::PartitionError) {
    if let replication::PartitionError::Storage(e) = error {
        shard.log_dir.note(e);
    }
}
