//! The metadata controller, on shard 0: runs each metadata change as lock → propose records
//! against the image (`replication::metadata::propose`) → append them durably to the record
//! log (fsynced on the blocking pool) → apply them → publish the new image to every shard
//! before answering (so a topic is usable on every shard as soon as CreateTopics returns).
//! The Raft-replicated controller later appends the same records to a Raft log instead.
//!
//! Producer ids come in blocks of `PRODUCER_ID_BLOCK_SIZE` (a ProducerIdsRecord each, as in
//! KRaft): the controller hands ids out of its current block in memory and appends a record
//! only when the block is used up. A restart starts a new block, skipping the rest of the old
//! one, so no id is handed out twice.

pub mod state;

use crate::dynamic_config;
use crate::messages::ShardMsg;
use crate::metadata::{overrides_config, ClusterMetadata};
use crate::shard::Shard;
use futures_channel::oneshot;
use replication::metadata::{
    propose, ControllerError, ControllerOp, MetadataImage, MetadataRecord, ProposeContext,
};
use state::Controller;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;
use uuid::Uuid;

/// Runs metadata change `op` on the controller (shard 0): here, or over the shard mesh.
/// Errors: the controller's, or [`ControllerError::Unavailable`] when shard 0 does not answer.
pub async fn call(shard: &Rc<Shard>, op: ControllerOp) -> Result<(), ControllerError> {
    if shard.id == 0 {
        return run(shard, op).await;
    }
    let (reply, answer) = oneshot::channel();
    if shard
        .send(0, ShardMsg::Controller { op, reply })
        .await
        .is_err()
    {
        return Err(ControllerError::Unavailable);
    }
    answer.await.unwrap_or(Err(ControllerError::Unavailable))
}

/// A new idempotent-producer id from the controller (shard 0): here, or over the shard mesh.
/// Errors: as [`allocate_producer_id_here`], or [`ControllerError::Unavailable`].
pub async fn allocate_producer_id(shard: &Rc<Shard>) -> Result<i64, ControllerError> {
    if shard.id == 0 {
        return allocate_producer_id_here(shard).await;
    }
    let (reply, answer) = oneshot::channel();
    if shard
        .send(0, ShardMsg::AllocateProducerId { reply })
        .await
        .is_err()
    {
        return Err(ControllerError::Unavailable);
    }
    answer.await.unwrap_or(Err(ControllerError::Unavailable))
}

fn controller(shard: &Shard) -> &Controller {
    shard
        .controller
        .as_ref()
        .expect("controller ops run on shard 0")
}

/// Runs `op`. Errors: the proposer's refusal, or [`ControllerError::Store`] when the records
/// could not be made durable (nothing changed then).
pub async fn run(shard: &Rc<Shard>, op: ControllerOp) -> Result<(), ControllerError> {
    let controller = controller(shard);
    let _permit = controller.lock().await?;
    commit(shard, controller, &op).await.map(|_| ())
}

/// Proposes `op` against the current image and, unless it only validates or changes nothing,
/// appends, applies and publishes its records; returns the image before and after. Runs under
/// the controller lock.
async fn commit(
    shard: &Rc<Shard>,
    controller: &Controller,
    op: &ControllerOp,
) -> Result<(Arc<ClusterMetadata>, Arc<ClusterMetadata>), ControllerError> {
    let current = shard.metadata();
    // Topic configs are checked against the topic defaults in effect: the start-up config
    // with the current dynamic broker configs.
    let defaults = &*dynamic_config::topic_defaults(&shard.config, &current.image);
    let check = |overrides: &BTreeMap<String, String>| {
        overrides_config(overrides, defaults)
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    let check_broker = |configs: &dynamic_config::BrokerConfigs| {
        dynamic_config::effective(&shard.config, configs)
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    let node_id = shard.config.node_id;
    let new_topic_id = Uuid::new_v4();
    // Single node: this broker is the only one, and its session is live while it runs.
    let session_live = |broker_id: i32| broker_id == node_id;
    let ctx = ProposeContext {
        broker_id: node_id,
        broker_epoch: current.brokers.get(&node_id).map_or(-1, |b| b.broker_epoch),
        new_topic_id,
        check_topic_config: &check,
        check_broker_configs: &check_broker,
        default_replication_factor: shard.config.default_replication_factor,
        placement_seed: new_topic_id.as_u64_pair().0,
        broker_session_live: &session_live,
    };
    let records = propose(&current.image, op, &ctx)?;
    if op.validate_only() || records.is_empty() {
        return Ok((current.clone(), current));
    }
    let mut next = current.image.clone();
    for record in &records {
        next.apply(record)?;
    }
    let next = save(controller, records, next).await?;
    let next = Arc::new(ClusterMetadata::new(next, shard.shards));
    shard.publish_metadata(next.clone()).await;
    Ok((current, next))
}

/// Hands out the next producer id from the current block, appending a new block first when it
/// is used up. Errors: as [`run`].
pub async fn allocate_producer_id_here(shard: &Rc<Shard>) -> Result<i64, ControllerError> {
    let controller = controller(shard);
    let _permit = controller.lock().await?;
    let mut block = controller.producer_ids.take();
    if block.is_empty() {
        let (before, after) = commit(shard, controller, &ControllerOp::AllocateProducerIds).await?;
        block = before.producer_ids.next_producer_id..after.producer_ids.next_producer_id;
    }
    let id = block.next().ok_or(ControllerError::ProducerIdsExhausted {
        next_producer_id: block.end,
    })?;
    controller.producer_ids.set(block);
    Ok(id)
}

/// Appends `records` durably (on the blocking pool), then snapshots when the log has grown
/// past its bound; returns `next`, the image with the records applied. Errors:
/// [`ControllerError::Store`] when the append failed (a failed snapshot is only logged: the
/// log still holds everything).
async fn save(
    controller: &Controller,
    records: Vec<MetadataRecord>,
    next: MetadataImage,
) -> Result<MetadataImage, ControllerError> {
    let mut store = controller
        .store
        .borrow_mut()
        .take()
        .ok_or(ControllerError::Unavailable)?;
    let (store, appended, next) = glommio::executor()
        .spawn_blocking(move || {
            let appended = store.append(&records).map(|_| ());
            if appended.is_ok() {
                if let Err(e) = store.maybe_snapshot(&next) {
                    tracing::warn!(error = %e, "cluster metadata snapshot failed; the log keeps growing");
                }
            }
            (store, appended, next)
        })
        .await;
    *controller.store.borrow_mut() = Some(store);
    appended?;
    Ok(next)
}
