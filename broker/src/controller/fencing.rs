//! Broker lifecycle on the active controller (KIP-631): [`handle_active`] runs brokers'
//! requests — metadata changes, producer-id blocks, and heartbeats: a heartbeat renews the
//! broker's session (`replication::metadata::BrokerHeartbeats`), unfences a fenced broker once
//! it has installed the metadata up to its registration, and runs a controlled shutdown when
//! the broker asks for one; [`fence_expired`] fences every broker whose session is older than
//! `broker.session.timeout.ms` (its leaderships move to the rest of the ISR). The broker side
//! is [`super::lifecycle`].

use super::active::commit;
use super::state::Controller;
use crate::seam::ShardRuntime;
use crate::shard::Shard;
use replication::metadata::{
    BrokerHeartbeats, BrokerRegistration, ControllerAnswer, ControllerError, ControllerOp,
    ControllerReply, ControllerRequest, MetadataImage, PRODUCER_ID_BLOCK_SIZE,
};
use replication::runtime::{Clock, MonotonicTime, NodeId};
use std::rc::Rc;
use std::time::Duration;

/// Runs `request` on this broker, the active controller.
pub(super) async fn handle_active(
    shard: &Shard,
    controller: &Controller,
    request: ControllerRequest,
) -> Result<ControllerReply, ControllerError> {
    match request {
        ControllerRequest::Op { from, op } => {
            let _permit = controller.lock().await?;
            let (before, after) = commit(shard, controller, &op, from).await?;
            if let ControllerOp::RegisterBroker { broker_id, .. } = &op {
                let index = controller.view.borrow().applied_index();
                controller
                    .registered_at
                    .borrow_mut()
                    .insert(*broker_id, index);
            }
            controller
                .heartbeats
                .borrow_mut()
                .follow(&after, ShardRuntime.now());
            Ok(ControllerReply::Answer {
                answer: op.answer(&before, &after),
                applied_index: controller.view.borrow().applied_index().0,
            })
        }
        ControllerRequest::AllocateProducerIds { from } => {
            let _permit = controller.lock().await?;
            let (before, _) =
                commit(shard, controller, &ControllerOp::AllocateProducerIds, from).await?;
            // Exactly the block this entry handed out (what `after` shows may include a later
            // leader's block already).
            let start = before.producer_ids.next_producer_id;
            Ok(ControllerReply::ProducerIds {
                start,
                end: start.saturating_add(PRODUCER_ID_BLOCK_SIZE),
            })
        }
        ControllerRequest::Heartbeat {
            broker_id,
            broker_epoch,
            metadata_offset,
            want_shut_down,
        } => {
            heartbeat(
                shard,
                controller,
                broker_id,
                broker_epoch,
                metadata_offset,
                want_shut_down,
            )
            .await
        }
        ControllerRequest::DescribeQuorum => {
            super::quorum_state::describe(controller, NodeId(shard.config.node_id))
                .map(ControllerReply::Quorum)
        }
        ControllerRequest::FetchMetadata { from, after } => {
            super::observer::serve(shard, controller, from, replication::raft::RaftIndex(after))
                .await
        }
        ControllerRequest::RemoveVoter { voter_id } => {
            super::quorum_state::remove_voter(controller, voter_id).await
        }
        ControllerRequest::AddVoter {
            voter_id,
            endpoint,
            timeout_ms,
        } => {
            let timeout = std::time::Duration::from_millis(timeout_ms);
            super::quorum_state::add_voter(controller, voter_id, &endpoint, timeout).await
        }
        ControllerRequest::DescribeVoters => Ok(super::voters::describe(&controller.voters)),
    }
}

async fn heartbeat(
    shard: &Shard,
    controller: &Controller,
    broker_id: i32,
    broker_epoch: i64,
    metadata_offset: u64,
    want_shut_down: bool,
) -> Result<ControllerReply, ControllerError> {
    let now = ShardRuntime.now();
    renew_session(controller, broker_id, broker_epoch, now)?;
    controller.heard.borrow_mut().insert(broker_id);
    let registration = controller
        .view
        .borrow()
        .image()
        .brokers
        .get(&broker_id)
        .cloned();
    let Some(registration) = registration else {
        return Err(ControllerError::UnknownBroker { broker_id });
    };
    // A heartbeat that changes nothing is answered without the lock: a slow change must not
    // hold up the renewal of every session (and then fence everyone).
    let mut should_shut_down = false;
    let change = heartbeat_change(&registration, want_shut_down, || {
        caught_up_with_registration(controller, broker_id, metadata_offset)
    });
    if change == HeartbeatChange::ControlledShutdown {
        should_shut_down = controlled_shutdown(shard, controller, broker_id, broker_epoch).await?;
    } else if change == HeartbeatChange::Unfence {
        let _permit = controller.lock().await?;
        let op = ControllerOp::UnfenceBroker {
            broker_id,
            broker_epoch,
        };
        commit(shard, controller, &op, broker_id).await?;
    }
    let image = controller.view.borrow().image();
    controller.heartbeats.borrow_mut().follow(&image, now);
    let is_fenced = image.brokers.get(&broker_id).is_none_or(|b| b.fenced);
    Ok(ControllerReply::Heartbeat {
        is_fenced,
        should_shut_down,
    })
}

/// Renews broker `broker_id`'s session if `broker_epoch` is its current one (following the
/// image's brokers first).
fn renew_session(
    controller: &Controller,
    broker_id: i32,
    broker_epoch: i64,
    now: MonotonicTime,
) -> Result<(), ControllerError> {
    let image = controller.view.borrow().image();
    renew_session_in(
        &mut controller.heartbeats.borrow_mut(),
        &image,
        broker_id,
        broker_epoch,
        now,
    )
}

/// [`renew_session`]'s decision on `heartbeats` and `image`, free of the controller (the
/// lifecycle simulation's controller model calls it too).
pub(super) fn renew_session_in(
    heartbeats: &mut BrokerHeartbeats,
    image: &MetadataImage,
    broker_id: i32,
    broker_epoch: i64,
    now: MonotonicTime,
) -> Result<(), ControllerError> {
    let Some(registration) = image.brokers.get(&broker_id) else {
        return Err(ControllerError::UnknownBroker { broker_id });
    };
    heartbeats.follow(image, now);
    if !heartbeats.heartbeat(broker_id, broker_epoch, now) {
        return Err(ControllerError::StaleBrokerEpoch {
            broker_id,
            broker_epoch,
            current: registration.broker_epoch,
        });
    }
    Ok(())
}

/// Runs a controlled shutdown step for `broker_id` under the controller lock: moves its
/// leaderships; once it leads nothing (the answer is true), fences it.
async fn controlled_shutdown(
    shard: &Shard,
    controller: &Controller,
    broker_id: i32,
    broker_epoch: i64,
) -> Result<bool, ControllerError> {
    let _permit = controller.lock().await?;
    let op = ControllerOp::ControlledShutdown {
        broker_id,
        broker_epoch,
    };
    let (before, after) = commit(shard, controller, &op, broker_id).await?;
    let should_shut_down = match op.answer(&before, &after) {
        ControllerAnswer::ControlledShutdown {
            should_shut_down: done,
        } => done,
        _ => false,
    };
    if should_shut_down && !after.brokers.get(&broker_id).is_none_or(|b| b.fenced) {
        // Done: the broker is fenced now (as Kafka does on SHUTDOWN_NOW), so it is listed
        // no more and its next start registers at once.
        commit(
            shard,
            controller,
            &ControllerOp::FenceBroker { broker_id },
            broker_id,
        )
        .await?;
    }
    Ok(should_shut_down)
}

/// What a heartbeat changes besides renewing the session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum HeartbeatChange {
    None,
    /// It asks to shut down: move its leaderships (then fence it once it leads nothing).
    ControlledShutdown,
    /// It is fenced, has caught up with its registration, and is not shutting down.
    Unfence,
}

/// What a heartbeat of a broker registered as `registration` changes (`caught_up`: whether
/// it has installed the metadata up to its registration, asked only for a fenced broker). A
/// broker in controlled shutdown is never unfenced by a heartbeat: only a new registration
/// takes it out of that state. (Its plain heartbeats race the shutdown's — both loops run on
/// shard 0 — and one sent before the shutdown began used to arrive after the shutdown had
/// fenced it, and unfence it: found by `lifecycle_sim_tests`. Kafka's broker sends one
/// heartbeat at a time, and its controller keeps a broker in controlled shutdown there.)
pub(super) fn heartbeat_change(
    registration: &BrokerRegistration,
    want_shut_down: bool,
    caught_up: impl FnOnce() -> bool,
) -> HeartbeatChange {
    if want_shut_down {
        HeartbeatChange::ControlledShutdown
    } else if registration.fenced && !registration.in_controlled_shutdown && caught_up() {
        HeartbeatChange::Unfence
    } else {
        HeartbeatChange::None
    }
}

/// Whether broker `broker_id`, which has installed the metadata up to `metadata_offset`, has
/// caught up with its registration. The index its registration committed at is known to the
/// controller that took it; a controller that became active since takes its own applied index
/// at the broker's first heartbeat instead (at or past the registration), so a broker is never
/// unfenced on an older image.
fn caught_up_with_registration(
    controller: &Controller,
    broker_id: i32,
    metadata_offset: u64,
) -> bool {
    let applied = controller.view.borrow().applied_index();
    let registered_at = *controller
        .registered_at
        .borrow_mut()
        .entry(broker_id)
        .or_insert(applied);
    metadata_offset >= registered_at.0
}

/// On shard 0, for as long as the broker runs: while this broker is the active controller,
/// fences the brokers whose session expired. A controller that has just become active gives
/// every broker a full session first.
pub(crate) async fn fence_expired(shard: &Rc<Shard>) {
    let Some(controller) = shard.controller.get() else {
        return;
    };
    let node = NodeId(shard.config.node_id);
    let session = Duration::from_millis(shard.config.broker_session_timeout_ms);
    let check = Duration::from_millis(shard.config.broker_heartbeat_interval_ms).min(session / 4);
    // The term this node last led in: a leadership won again in a later term (even within
    // one check interval) starts with fresh sessions too.
    let mut active_term = None;
    loop {
        if shard.sleep_unless_stopped(check).await {
            return;
        }
        let active = controller.is_active(node);
        let Some(quorum) = controller.voter() else {
            return;
        };
        let term = quorum.status().term;
        let now = ShardRuntime.now();
        if active && active_term != Some(term) {
            let image = controller.view.borrow().image();
            let mut heartbeats = controller.heartbeats.borrow_mut();
            heartbeats.follow(&image, now);
            heartbeats.reset_all(now);
            controller.heard.borrow_mut().clear();
        }
        if !active {
            active_term = None;
            continue;
        }
        active_term = Some(term);
        let expired = {
            let image = controller.view.borrow().image();
            let mut heartbeats = controller.heartbeats.borrow_mut();
            heartbeats.follow(&image, now);
            heartbeats.expired(now, session)
        };
        for broker_id in expired {
            let Ok(_permit) = controller.lock().await else {
                return;
            };
            // It may have heartbeated while this waited for the lock.
            let now = ShardRuntime.now();
            let fenced = controller
                .view
                .borrow()
                .image()
                .brokers
                .get(&broker_id)
                .is_none_or(|b| b.fenced);
            if fenced
                || !controller
                    .heartbeats
                    .borrow()
                    .expired(now, session)
                    .contains(&broker_id)
            {
                continue;
            }
            let op = ControllerOp::FenceBroker { broker_id };
            match commit(shard, controller, &op, broker_id).await {
                Ok(_) => tracing::info!(broker_id, "fenced a broker whose session expired"),
                Err(e) => tracing::warn!(broker_id, error = %e, "fencing a broker"),
            }
        }
    }
}
