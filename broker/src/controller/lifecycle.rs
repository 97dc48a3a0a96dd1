//! Broker lifecycle as KRaft runs it (KIP-631), both sides:
//! - on the active controller, [`handle_active`] runs brokers' requests: metadata changes,
//!   producer-id blocks, and heartbeats — a heartbeat renews the broker's session
//!   (`replication::metadata::BrokerHeartbeats`), unfences a fenced broker once it has
//!   installed the metadata up to its registration, and runs a controlled shutdown when the
//!   broker asks for one; [`fence_expired`] fences every broker whose session is older than
//!   `broker.session.timeout.ms` (its leaderships move to the rest of the ISR);
//! - on every broker, [`run_broker`] registers this incarnation (a random incarnation id;
//!   the controller hands out the broker epoch), then heartbeats every
//!   `broker.heartbeat.interval.ms`, registering again when the controller no longer knows
//!   the epoch; [`controlled_shutdown`] asks to shut down at SIGTERM and waits until this
//!   broker leads nothing (bounded by the session timeout).

use super::state::Controller;
use super::{commit, request};
use crate::metadata::SECURITY_PROTOCOL_PLAINTEXT;
use crate::seam::GlommioRuntime;
use crate::shard::Shard;
use replication::metadata::{
    BrokerEndpoint, ControllerAnswer, ControllerError, ControllerOp, ControllerReply,
    ControllerRequest, PRODUCER_ID_BLOCK_SIZE,
};
use replication::runtime::{Clock, NodeId};
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
                .follow(&after, GlommioRuntime.now());
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
    let now = GlommioRuntime.now();
    {
        let image = controller.view.borrow().image();
        let Some(registration) = image.brokers.get(&broker_id) else {
            return Err(ControllerError::UnknownBroker { broker_id });
        };
        let mut heartbeats = controller.heartbeats.borrow_mut();
        heartbeats.follow(&image, now);
        if !heartbeats.heartbeat(broker_id, broker_epoch, now) {
            return Err(ControllerError::StaleBrokerEpoch {
                broker_id,
                broker_epoch,
                current: registration.broker_epoch,
            });
        }
    }
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
    if want_shut_down {
        let _permit = controller.lock().await?;
        let op = ControllerOp::ControlledShutdown {
            broker_id,
            broker_epoch,
        };
        let (before, after) = commit(shard, controller, &op, broker_id).await?;
        if let ControllerAnswer::ControlledShutdown {
            should_shut_down: done,
        } = op.answer(&before, &after)
        {
            should_shut_down = done;
        }
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
    } else if registration.fenced
        && caught_up_with_registration(controller, broker_id, metadata_offset)
    {
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
pub(super) async fn fence_expired(shard: &Rc<Shard>) {
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
        let term = controller.quorum.status().term;
        let now = GlommioRuntime.now();
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
            let now = GlommioRuntime.now();
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

/// This broker's endpoints as registered.
fn end_points(shard: &Shard) -> Vec<BrokerEndpoint> {
    let advertised = shard.config.advertised_listener();
    vec![BrokerEndpoint {
        name: "PLAINTEXT".to_string(),
        host: advertised.host,
        port: advertised.port,
        security_protocol: SECURITY_PROTOCOL_PLAINTEXT,
    }]
}

/// On shard 0, for as long as the broker runs: registers this incarnation and heartbeats
/// (see the module docs).
pub(super) async fn run_broker(shard: &Rc<Shard>) {
    let Some(controller) = shard.controller.get() else {
        return;
    };
    let interval = Duration::from_millis(shard.config.broker_heartbeat_interval_ms);
    // Retries come faster than heartbeats at start, so that a one-node broker serves at once.
    let retry = interval.min(Duration::from_millis(100));
    let broker_id = shard.config.node_id;
    loop {
        let op = ControllerOp::RegisterBroker {
            broker_id,
            incarnation_id: controller.incarnation_id,
            end_points: end_points(shard),
            rack: shard.config.broker_rack.clone(),
        };
        let broker_epoch = match super::call_answer(shard, op).await {
            Ok(ControllerAnswer::Registered { broker_epoch }) => broker_epoch,
            Ok(other) => {
                tracing::warn!(answer = ?other, "unexpected answer to the broker registration");
                if shard.sleep_unless_stopped(retry).await {
                    return;
                }
                continue;
            }
            Err(e) => {
                tracing::debug!(error = %e, "broker registration; retrying");
                if shard.sleep_unless_stopped(retry).await {
                    return;
                }
                continue;
            }
        };
        controller.broker_epoch.set(Some(broker_epoch));
        tracing::info!(broker_id, broker_epoch, "registered with the controller");
        let mut wait = Duration::ZERO;
        loop {
            if shard.sleep_unless_stopped(wait).await {
                return;
            }
            // A failed log directory takes this broker's replicas offline: the controller
            // moves its leaderships and takes it out of the ISRs (crate::log_dir).
            let offline = shard.log_dir.failed() && super::has_other_live_brokers(shard);
            match send_heartbeat(shard, controller, broker_epoch, offline).await {
                Ok((is_fenced, moved)) => {
                    if offline && moved && !controller.replicas_offline.replace(true) {
                        tracing::warn!(
                            "the log directory failed: the controller moved this broker's \
                             leaderships and took it out of the in-sync replicas"
                        );
                    }
                    controller.fenced.set(is_fenced);
                    controller.published_changed.notify_all();
                    // A fenced broker heartbeats at the retry pace until unfenced.
                    wait = if is_fenced { retry } else { interval };
                }
                Err(
                    ControllerError::StaleBrokerEpoch { .. }
                    | ControllerError::UnknownBroker { .. },
                ) => {
                    controller.broker_epoch.set(None);
                    break;
                }
                Err(e) => {
                    tracing::debug!(error = %e, "broker heartbeat");
                    wait = retry;
                }
            }
        }
    }
}

/// One heartbeat to the active controller, given up after [`heartbeat_attempt_bound`] so that
/// the next one goes to whichever voter leads then: a heartbeat forwarded to a controller cut
/// off from this broker (its SYN dropped) used to wait out the forward's 15 s while the new
/// controller fenced this broker after `broker.session.timeout.ms` (found by the network
/// partition harness, docs/partition-findings.md). Errors: the controller's, or
/// [`ControllerError::Unavailable`] past the bound.
async fn send_heartbeat(
    shard: &Rc<Shard>,
    controller: &Controller,
    broker_epoch: i64,
    want_shut_down: bool,
) -> Result<(bool, bool), ControllerError> {
    let heartbeat = ControllerRequest::Heartbeat {
        broker_id: shard.config.node_id,
        broker_epoch,
        metadata_offset: controller.published.get().0,
        want_shut_down,
    };
    let bound = heartbeat_attempt_bound(&shard.config, want_shut_down);
    let timeout = async {
        glommio::timer::sleep(bound).await;
        Err(ControllerError::Unavailable)
    };
    match futures_lite::future::or(request(shard, heartbeat), timeout).await? {
        ControllerReply::Heartbeat {
            is_fenced,
            should_shut_down,
        } => Ok((is_fenced, should_shut_down)),
        other => Err(super::unexpected(&other)),
    }
}

/// How long one heartbeat may take: a plain one `broker.heartbeat.interval.ms` (at least
/// 100 ms; several then fit in a session), one asking to shut down — a metadata change the
/// controller commits — `broker.session.timeout.ms`.
fn heartbeat_attempt_bound(
    config: &tuning::config::BrokerConfig,
    want_shut_down: bool,
) -> Duration {
    let ms = if want_shut_down {
        config.broker_session_timeout_ms
    } else {
        config.broker_heartbeat_interval_ms.max(100)
    };
    Duration::from_millis(ms)
}

/// On shard 0 at SIGTERM: asks the active controller to move this broker's leaderships to the
/// other in-sync replicas and waits until it leads nothing, or `broker.session.timeout.ms`
/// has passed (then it stops anyway, as after a crash the controller fences it). `true` when
/// the controller agreed.
pub async fn controlled_shutdown(shard: &Rc<Shard>) -> bool {
    let Some(controller) = shard.controller.get() else {
        return false;
    };
    let Some(broker_epoch) = controller.broker_epoch.get() else {
        return false;
    };
    let bound = Duration::from_millis(shard.config.broker_session_timeout_ms);
    let retry = Duration::from_millis(shard.config.broker_heartbeat_interval_ms.min(100));
    let ask = async {
        loop {
            match send_heartbeat(shard, controller, broker_epoch, true).await {
                Ok((_, true)) => return true,
                Ok((_, false)) => {}
                Err(e) => tracing::debug!(error = %e, "controlled shutdown request"),
            }
            glommio::timer::sleep(retry).await;
        }
    };
    let timeout = async {
        glommio::timer::sleep(bound).await;
        false
    };
    futures_lite::future::or(ask, timeout).await
}
