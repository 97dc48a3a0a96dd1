//! Broker lifecycle on every broker, as KRaft runs it (KIP-631; Kafka's
//! BrokerLifecycleManager): [`run_broker`] registers this incarnation (a random incarnation
//! id; the controller hands out the broker epoch), then heartbeats every
//! `broker.heartbeat.interval.ms`, registering again when the controller no longer knows the
//! epoch; [`controlled_shutdown`] asks to shut down at SIGTERM and waits until this broker
//! leads nothing (bounded by the session timeout). The controller side is [`super::fencing`].

use super::channel::{call_answer, request, unexpected};
use super::state::Controller;
use crate::metadata::SECURITY_PROTOCOL_PLAINTEXT;
use crate::shard::Shard;
use replication::metadata::{
    BrokerEndpoint, ControllerAnswer, ControllerError, ControllerOp, ControllerReply,
    ControllerRequest,
};
use std::rc::Rc;
use std::time::Duration;

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
pub(crate) async fn run_broker(shard: &Rc<Shard>) {
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
        let broker_epoch = match call_answer(shard, op).await {
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
            let offline = shard.log_dir.failed() && super::active::has_other_live_brokers(shard);
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
        crate::rt::sleep(bound).await;
        Err(ControllerError::Unavailable)
    };
    match futures_lite::future::or(request(shard, heartbeat), timeout).await? {
        ControllerReply::Heartbeat {
            is_fenced,
            should_shut_down,
        } => Ok((is_fenced, should_shut_down)),
        other => Err(unexpected(&other)),
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
            crate::rt::sleep(retry).await;
        }
    };
    let timeout = async {
        crate::rt::sleep(bound).await;
        false
    };
    futures_lite::future::or(ask, timeout).await
}
