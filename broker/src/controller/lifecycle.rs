//! Broker lifecycle on every broker, as KRaft runs it (KIP-631; Kafka's
//! BrokerLifecycleManager): [`run_broker`] registers this incarnation (a random incarnation
//! id; the controller hands out the broker epoch), then heartbeats every
//! `broker.heartbeat.interval.ms`, registering again when the controller no longer knows the
//! epoch; [`controlled_shutdown`] asks to shut down at SIGTERM and waits until this broker
//! leads nothing (bounded by the session timeout). The controller side is [`super::fencing`].
//!
//! Both loops run over a [`LifecycleHost`] (the controller's call and request, timers, the
//! stop signal, this broker's [`BrokerLifecycle`]): shard 0 in production
//! ([`ShardLifecycle`]), the deterministic simulation in `lifecycle_sim_tests`.

use super::channel::{call_answer, unexpected};
use super::state::{BrokerLifecycle, Controller};
use crate::shard::Shard;
use replication::metadata::{
    BrokerEndpoint, ControllerAnswer, ControllerError, ControllerOp, ControllerReply,
    ControllerRequest,
};
use std::rc::Rc;
use std::time::Duration;

/// What the broker side of the lifecycle needs from the world: the active controller (here
/// or forwarded), the timers, the stop signal and the broker's own state. The shard
/// ([`ShardLifecycle`]) is the host in production; `lifecycle_sim_tests.rs` hosts the same
/// loop on `replication::sim`'s clock with a simulated controller.
pub(crate) trait LifecycleHost {
    /// This broker's id (`node.id`).
    fn broker_id(&self) -> i32;
    /// The broker's side of the lifecycle.
    fn lifecycle(&self) -> &BrokerLifecycle;
    /// This broker's registration (a [`ControllerOp::RegisterBroker`] for its incarnation).
    fn registration(&self) -> ControllerOp;
    /// `broker.heartbeat.interval.ms`.
    fn heartbeat_interval(&self) -> Duration;
    /// `broker.session.timeout.ms`.
    fn session_timeout(&self) -> Duration;
    /// Whether this broker's replicas are to be taken offline (its log directory failed and
    /// another broker can take them).
    fn replicas_offline(&self) -> bool;
    /// The metadata offset this broker's shards have installed.
    fn published_offset(&self) -> u64;
    /// A heartbeat answer arrived: wake what waits for this broker to serve.
    fn heartbeat_answered(&self);
    /// Runs `op` on the active controller and returns its answer.
    async fn call_answer(&self, op: ControllerOp) -> Result<ControllerAnswer, ControllerError>;
    /// Sends `request` to the active controller.
    async fn request(&self, request: ControllerRequest)
        -> Result<ControllerReply, ControllerError>;
    /// Completes after `duration`.
    async fn sleep(&self, duration: Duration);
    /// Sleeps `duration`; `true` (at once) when the broker stops meanwhile.
    async fn sleep_unless_stopped(&self, duration: Duration) -> bool;
}

/// Shard 0 as the lifecycle's host.
struct ShardLifecycle<'a> {
    shard: &'a Rc<Shard>,
    controller: &'a Controller,
}

impl LifecycleHost for ShardLifecycle<'_> {
    fn broker_id(&self) -> i32 {
        self.shard.config.node_id
    }

    fn lifecycle(&self) -> &BrokerLifecycle {
        &self.controller.broker
    }

    fn registration(&self) -> ControllerOp {
        ControllerOp::RegisterBroker {
            broker_id: self.shard.config.node_id,
            incarnation_id: self.controller.broker.incarnation_id,
            end_points: end_points(self.shard),
            rack: self.shard.config.broker_rack.clone(),
        }
    }

    fn heartbeat_interval(&self) -> Duration {
        Duration::from_millis(self.shard.config.broker_heartbeat_interval_ms)
    }

    fn session_timeout(&self) -> Duration {
        Duration::from_millis(self.shard.config.broker_session_timeout_ms)
    }

    fn replicas_offline(&self) -> bool {
        // A failed log directory takes this broker's replicas offline: the controller
        // moves its leaderships and takes it out of the ISRs (crate::log_dir).
        self.shard.log_dir.failed() && super::active::has_other_live_brokers(self.shard)
    }

    fn published_offset(&self) -> u64 {
        self.controller.published.get().0
    }

    fn heartbeat_answered(&self) {
        self.controller.published_changed.notify_all();
    }

    async fn call_answer(&self, op: ControllerOp) -> Result<ControllerAnswer, ControllerError> {
        call_answer(self.shard, op).await
    }

    async fn request(
        &self,
        request: ControllerRequest,
    ) -> Result<ControllerReply, ControllerError> {
        super::channel::request(self.shard, request).await
    }

    async fn sleep(&self, duration: Duration) {
        crate::rt::sleep(duration).await;
    }

    async fn sleep_unless_stopped(&self, duration: Duration) -> bool {
        self.shard.sleep_unless_stopped(duration).await
    }
}

/// This broker's endpoints as registered: one per listener, as advertised.
fn end_points(shard: &Shard) -> Vec<BrokerEndpoint> {
    shard
        .config
        .advertised_endpoints()
        .into_iter()
        .map(|a| BrokerEndpoint {
            name: a.name,
            host: a.host_port.host,
            port: a.host_port.port,
            security_protocol: a.security_protocol.id(),
        })
        .collect()
}

/// On shard 0, for as long as the broker runs: registers this incarnation and heartbeats
/// (see the module docs).
pub(crate) async fn run_broker(shard: &Rc<Shard>) {
    let Some(controller) = shard.controller.get() else {
        return;
    };
    run_broker_on(&ShardLifecycle { shard, controller }).await;
}

/// [`run_broker`] on `host`.
pub(crate) async fn run_broker_on<H: LifecycleHost>(host: &H) {
    let state = host.lifecycle();
    let interval = host.heartbeat_interval();
    // Retries come faster than heartbeats at start, so that a one-node broker serves at once.
    let retry = interval.min(Duration::from_millis(100));
    // The last refusal logged at WARN (once each, not at every retry).
    let mut warned: Option<String> = None;
    loop {
        let broker_epoch = match host.call_answer(host.registration()).await {
            Ok(ControllerAnswer::Registered { broker_epoch }) => broker_epoch,
            Ok(other) => {
                tracing::warn!(answer = ?other, "unexpected answer to the broker registration");
                if host.sleep_unless_stopped(retry).await {
                    return;
                }
                continue;
            }
            Err(e) => {
                // No controller yet is the normal start; a refusal (a duplicate node.id, …)
                // is the operator's business.
                let transient = matches!(
                    e,
                    ControllerError::NotController { .. } | ControllerError::Unavailable
                );
                let said = e.to_string();
                if !transient && warned.as_deref() != Some(said.as_str()) {
                    tracing::warn!(error = %e, "the controller refuses this broker's registration; retrying");
                    warned = Some(said);
                } else {
                    tracing::debug!(error = %e, "broker registration; retrying");
                }
                if host.sleep_unless_stopped(retry).await {
                    return;
                }
                continue;
            }
        };
        state.broker_epoch.set(Some(broker_epoch));
        tracing::info!(
            broker_id = host.broker_id(),
            broker_epoch,
            "registered with the controller"
        );
        let mut wait = Duration::ZERO;
        loop {
            if host.sleep_unless_stopped(wait).await {
                return;
            }
            let offline = host.replicas_offline();
            match send_heartbeat(host, broker_epoch, offline).await {
                Ok((is_fenced, moved)) => {
                    if offline && moved && !state.replicas_offline.replace(true) {
                        tracing::warn!(
                            "the log directory failed: the controller moved this broker's \
                             leaderships and took it out of the in-sync replicas"
                        );
                    }
                    state.fenced.set(is_fenced);
                    host.heartbeat_answered();
                    // A fenced broker heartbeats at the retry pace until unfenced.
                    wait = if is_fenced { retry } else { interval };
                }
                Err(
                    ControllerError::StaleBrokerEpoch { .. }
                    | ControllerError::UnknownBroker { .. },
                ) => {
                    state.broker_epoch.set(None);
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
async fn send_heartbeat<H: LifecycleHost>(
    host: &H,
    broker_epoch: i64,
    want_shut_down: bool,
) -> Result<(bool, bool), ControllerError> {
    let heartbeat = ControllerRequest::Heartbeat {
        broker_id: host.broker_id(),
        broker_epoch,
        metadata_offset: host.published_offset(),
        want_shut_down,
    };
    let bound = heartbeat_attempt_bound(host, want_shut_down);
    let timeout = async {
        host.sleep(bound).await;
        Err(ControllerError::Unavailable)
    };
    match futures_lite::future::or(host.request(heartbeat), timeout).await? {
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
fn heartbeat_attempt_bound<H: LifecycleHost>(host: &H, want_shut_down: bool) -> Duration {
    if want_shut_down {
        host.session_timeout()
    } else {
        host.heartbeat_interval().max(Duration::from_millis(100))
    }
}

/// On shard 0 at SIGTERM: asks the active controller to move this broker's leaderships to the
/// other in-sync replicas and waits until it leads nothing, or `broker.session.timeout.ms`
/// has passed (then it stops anyway, as after a crash the controller fences it). `true` when
/// the controller agreed.
pub async fn controlled_shutdown(shard: &Rc<Shard>) -> bool {
    let Some(controller) = shard.controller.get() else {
        return false;
    };
    controlled_shutdown_on(&ShardLifecycle { shard, controller }).await
}

/// [`controlled_shutdown`] on `host`.
pub(crate) async fn controlled_shutdown_on<H: LifecycleHost>(host: &H) -> bool {
    let Some(broker_epoch) = host.lifecycle().broker_epoch.get() else {
        return false;
    };
    let bound = host.session_timeout();
    let retry = host.heartbeat_interval().min(Duration::from_millis(100));
    let ask = async {
        loop {
            match send_heartbeat(host, broker_epoch, true).await {
                Ok((_, true)) => return true,
                Ok((_, false)) => {}
                Err(e) => tracing::debug!(error = %e, "controlled shutdown request"),
            }
            host.sleep(retry).await;
        }
    };
    let timeout = async {
        host.sleep(bound).await;
        false
    };
    futures_lite::future::or(ask, timeout).await
}
