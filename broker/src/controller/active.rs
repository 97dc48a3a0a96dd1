//! The active controller's side of a metadata change: wait until caught up, propose the op's
//! records against the applied image, append them as one Raft entry and wait until it is
//! committed and installed; the producer-id blocks.

use super::state::Controller;
use crate::dynamic_config;
use crate::metadata::overrides_config;
use crate::shard::Shard;
use replication::metadata::{
    encode_entry, propose, ControllerError, ControllerOp, EntryOutcome, MetadataImage,
    ProposeContext,
};
use replication::raft::RaftIndex;
use replication::runtime::{Clock, NodeId};
use std::collections::BTreeMap;
use std::sync::Arc;
use uuid::Uuid;

pub(super) fn controller(shard: &Shard) -> Result<&Controller, ControllerError> {
    shard.controller.get().ok_or(ControllerError::Unavailable)
}

pub(super) fn not_active(controller: &Controller) -> ControllerError {
    ControllerError::NotController {
        active: controller.active().map(|n| n.0),
    }
}

/// Waits until this active controller's state machine has applied every entry the quorum
/// committed, from the previous terms too (a new leader's first, empty entry commits them),
/// so that a proposal sees the image it will be appended after (the cluster simulation's
/// checker 7 caught proposals computed against an older image). The driver applies Raft's own empty
/// entries without telling the state machine, so this also looks again every
/// [`CATCH_UP_RECHECK`].
async fn caught_up(shard: &Shard, controller: &Controller) -> Result<(), ControllerError> {
    loop {
        let changed = controller.view.borrow().changed();
        let notified = changed.notified();
        let Some(quorum) = controller.voter() else {
            return Err(not_active(controller));
        };
        let status = quorum.status();
        if !controller.is_active(NodeId(shard.config.node_id)) {
            return Err(not_active(controller));
        }
        // Raft §5.4.2: only once an entry of this term has committed is every entry of the
        // earlier terms known committed (or gone); before, a predecessor's last entry may still
        // commit after an image read now.
        if status.commit_term == status.term && status.applied_index >= status.commit_index {
            return Ok(());
        }
        futures_lite::future::or(notified, crate::rt::sleep(CATCH_UP_RECHECK)).await;
    }
}

/// How often [`caught_up`] looks at the driver's applied index when nothing rang.
const CATCH_UP_RECHECK: std::time::Duration = std::time::Duration::from_millis(5);

/// Proposes `op` of broker `from` against the applied image and, unless it only validates or
/// changes nothing, commits its records as one entry and waits until every shard of this
/// broker installed the result; returns the image before and after. Runs under the
/// controller lock, on the active controller.
pub(super) async fn commit(
    shard: &Shard,
    controller: &Controller,
    op: &ControllerOp,
    from: i32,
) -> Result<(Arc<MetadataImage>, Arc<MetadataImage>), ControllerError> {
    caught_up(shard, controller).await?;
    let current = controller.view.borrow().image();
    // Topic configs are checked against the topic defaults in effect: the start-up config
    // with the current dynamic broker configs.
    let defaults = &*dynamic_config::topic_defaults(&shard.config, &current);
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
    let now = crate::seam::ShardRuntime.now();
    let session = std::time::Duration::from_millis(shard.config.broker_session_timeout_ms);
    let session_live = |broker_id: i32| {
        controller.heard.borrow().contains(&broker_id)
            && controller
                .heartbeats
                .borrow()
                .is_live(broker_id, now, session)
    };
    let new_topic_id = Uuid::new_v4();
    let ctx = ProposeContext {
        broker_id: from,
        controller_id: shard.config.node_id,
        broker_epoch: current.brokers.get(&from).map_or(-1, |b| b.broker_epoch),
        new_topic_id,
        check_topic_config: &check,
        check_broker_configs: &check_broker,
        default_replication_factor: shard.config.default_replication_factor,
        placement_seed: new_topic_id.as_u64_pair().0,
        broker_session_live: &session_live,
    };
    let records = propose(&current, op, &ctx)?;
    if op.validate_only() || records.is_empty() {
        return Ok((current.clone(), current));
    }
    let entry = encode_entry(&records).map_err(|e| ControllerError::NotCommitted {
        reason: e.to_string(),
    })?;
    let index = append(shard, controller, entry).await?;
    check_applied(controller, index)?;
    Ok((current, controller.view.borrow().image()))
}

/// Proposes `entry`, waits for its commit and for every shard to install the image after it;
/// returns its index. Errors: [`ControllerError::NotCommitted`], or
/// [`ControllerError::NotController`] when the leadership moved.
pub(super) async fn append(
    shard: &Shard,
    controller: &Controller,
    entry: bytes::Bytes,
) -> Result<RaftIndex, ControllerError> {
    let quorum = controller.voter().ok_or_else(|| not_active(controller))?;
    let proposal = async { Some(quorum.propose(entry).await) };
    let timeout = async {
        crate::rt::sleep(PROPOSAL_TIMEOUT).await;
        None
    };
    let Some(outcome) = futures_lite::future::or(proposal, timeout).await else {
        // Its outcome is unknown (a leader that lost its quorum): like Kafka's request
        // timeout, the caller retries, and a retry of a change that did commit is refused
        // or changes nothing.
        return Err(ControllerError::NotCommitted {
            reason: format!("not committed within {PROPOSAL_TIMEOUT:?}"),
        });
    };
    let committed = outcome.map_err(|e| {
        if let replication::raft::ProposeError::TooLarge {
            entry_bytes,
            entry_bytes_max,
        } = e
        {
            return ControllerError::ChangeTooLarge {
                entry_bytes,
                entry_bytes_max,
            };
        }
        if controller.is_active(NodeId(shard.config.node_id)) {
            ControllerError::NotCommitted {
                reason: e.to_string(),
            }
        } else {
            not_active(controller)
        }
    })?;
    installed(controller, committed.index).await;
    Ok(committed.index)
}

/// How long a change waits for its commit and its installation on this broker's shards.
const PROPOSAL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

fn check_applied(controller: &Controller, index: RaftIndex) -> Result<(), ControllerError> {
    match controller.view.borrow().outcome(index) {
        Some(EntryOutcome::Applied) => Ok(()),
        Some(EntryOutcome::Skipped { reason }) => Err(ControllerError::NotCommitted {
            reason: format!("entry {} skipped: {reason}", index.0),
        }),
        None => Err(ControllerError::NotCommitted {
            reason: format!("the outcome of entry {} is no longer known", index.0),
        }),
    }
}

/// Whether this broker is a registered, unfenced member of the cluster (shard 0; `false`
/// elsewhere and before the controller started).
pub fn serving(shard: &Shard) -> bool {
    shard.controller.get().is_some_and(Controller::serving)
}

/// Whether a broker other than this one is registered and unfenced: only then can a
/// controlled shutdown move this broker's leaderships anywhere.
pub fn has_other_live_brokers(shard: &Shard) -> bool {
    let node = shard.config.node_id;
    shard
        .metadata()
        .brokers
        .iter()
        .any(|(id, b)| *id != node && !b.fenced)
}

/// Waits until this broker's shards have installed the image at `index` (or
/// [`super::forward::FORWARD_TIMEOUT`] has passed: the answer stands, the image follows; only a
/// stalled shard mesh takes that long).
pub(super) async fn installed(controller: &Controller, index: RaftIndex) {
    let wait = async {
        loop {
            let notified = controller.published_changed.notified();
            if controller.published.get() >= index {
                return;
            }
            notified.await;
        }
    };
    futures_lite::future::or(wait, crate::rt::sleep(super::forward::FORWARD_TIMEOUT)).await;
}
