//! The metadata controller, on shard 0: this node's voter of the controller quorum (raft-rs,
//! `replication::raft`; one voter, this node, without `controller.quorum.voters`), and the
//! service that runs each metadata change on the active controller as
//! lock → propose records against the applied image (`replication::metadata::propose`) →
//! one Raft entry, committed by a majority of the voters (fsynced on each) → applied by every
//! voter's state machine → installed on every shard of this broker before answering (so a
//! topic is usable on every shard as soon as CreateTopics returns).
//!
//! Every voter's shard 0 publishes the image its state machine applied to its shards
//! ([`publisher`]); a new data directory's first active controller names the cluster and
//! carries over an older single-node store ([`bootstrap`]).
//!
//! Producer ids come in blocks of `PRODUCER_ID_BLOCK_SIZE` (a ProducerIdsRecord each, as in
//! KRaft): the controller hands ids out of its current block in memory and appends a record
//! only when the block is used up. A restart starts a new block, skipping the rest of the old
//! one, so no id is handed out twice.

pub mod bootstrap;
pub mod forward;
mod lifecycle;
mod publisher;
pub mod state;

use crate::dynamic_config;
use crate::messages::ShardMsg;
use crate::metadata::overrides_config;
use crate::shard::Shard;
use futures_channel::oneshot;
use replication::metadata::{
    encode_entry, propose, ControllerAnswer, ControllerError, ControllerOp, ControllerReply,
    ControllerRequest, EntryOutcome, MetadataImage, ProposeContext,
};
use replication::raft::RaftIndex;
use replication::runtime::{Clock, NodeId};
use state::Controller;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;
use uuid::Uuid;

pub use bootstrap::Startup;
pub use lifecycle::controlled_shutdown;

/// Runs metadata change `op` on the active controller (this broker's, or over the
/// network) and returns its answer. Errors: the controller's, [`ControllerError::
/// NotController`] when no active controller is known or reachable yet (retriable), or
/// [`ControllerError::Unavailable`].
pub async fn call_answer(
    shard: &Rc<Shard>,
    op: ControllerOp,
) -> Result<ControllerAnswer, ControllerError> {
    let from = shard.config.node_id;
    match request(shard, ControllerRequest::Op { from, op }).await? {
        ControllerReply::Answer { answer, .. } => Ok(answer),
        other => Err(unexpected(&other)),
    }
}

/// [`call_answer`] for the callers that need only success.
pub async fn call(shard: &Rc<Shard>, op: ControllerOp) -> Result<(), ControllerError> {
    call_answer(shard, op).await.map(|_| ())
}

fn unexpected(reply: &ControllerReply) -> ControllerError {
    ControllerError::NotCommitted {
        reason: format!("unexpected controller reply {reply:?}"),
    }
}

/// Sends `request` to the active controller: through shard 0, which runs it when this
/// broker is the active controller and forwards it otherwise. Errors: as [`call_answer`].
pub async fn request(
    shard: &Rc<Shard>,
    request: ControllerRequest,
) -> Result<ControllerReply, ControllerError> {
    on_shard_0(shard, request, false).await
}

/// Runs a request another broker forwarded to this one: on shard 0, here only when this
/// broker is the active controller (never forwarded again).
pub(crate) async fn handle_here_or_on_shard_0(
    shard: &Rc<Shard>,
    request: ControllerRequest,
) -> Result<ControllerReply, ControllerError> {
    on_shard_0(shard, request, true).await
}

/// [`route`] on shard 0: here, or over the shard mesh.
async fn on_shard_0(
    shard: &Rc<Shard>,
    request: ControllerRequest,
    forwarded: bool,
) -> Result<ControllerReply, ControllerError> {
    if shard.id == 0 {
        return route(shard, request, forwarded).await;
    }
    let (reply, answer) = oneshot::channel();
    let msg = ShardMsg::Controller {
        request,
        forwarded,
        reply,
    };
    if shard.send(0, msg).await.is_err() {
        return Err(ControllerError::Unavailable);
    }
    answer.await.unwrap_or(Err(ControllerError::Unavailable))
}

/// On shard 0: runs `request` when this broker is the active controller; otherwise forwards
/// it to the active one, unless it was `forwarded` here already.
pub(crate) async fn route(
    shard: &Rc<Shard>,
    request: ControllerRequest,
    forwarded: bool,
) -> Result<ControllerReply, ControllerError> {
    let controller = controller(shard)?;
    if let (true, ControllerRequest::Op { op, .. }) = (forwarded, &request) {
        if matches!(
            op,
            ControllerOp::FenceBroker { .. }
                | ControllerOp::UnfenceBroker { .. }
                | ControllerOp::UnregisterBroker { .. }
                | ControllerOp::ControlledShutdown { .. }
        ) {
            return Err(ControllerError::NotForwardable {
                op: format!("{op:?}"),
            });
        }
    }
    if controller.is_active(NodeId(shard.config.node_id)) {
        return lifecycle::handle_active(shard, controller, request).await;
    }
    let active = controller.active();
    if forwarded {
        return Err(not_active(controller));
    }
    let endpoint =
        active.and_then(|node| crate::metadata::broker_endpoint(&shard.metadata(), node.0));
    let Some(endpoint) = endpoint else {
        return Err(not_active(controller));
    };
    let addr = resolve(controller, endpoint)
        .await
        .ok_or_else(|| not_active(controller))?;
    let reply = forward::send(addr, &request).await?;
    if let ControllerReply::Answer { applied_index, .. } = &reply {
        installed(controller, RaftIndex(*applied_index)).await;
    }
    Ok(reply)
}

/// The socket address of a broker's registered `(host, port)`: an IP literal as it is, a host
/// name resolved once on the blocking pool (never on the shard: a slow resolver would stall
/// the voter) and kept. `None` when it does not resolve.
async fn resolve(controller: &Controller, endpoint: (String, u16)) -> Option<std::net::SocketAddr> {
    if let Ok(ip) = endpoint.0.parse::<std::net::IpAddr>() {
        return Some(std::net::SocketAddr::new(ip, endpoint.1));
    }
    if let Some(addr) = controller.resolved.borrow().get(&endpoint) {
        return Some(*addr);
    }
    let lookup = endpoint.clone();
    let addr = glommio::executor()
        .spawn_blocking(move || {
            use std::net::ToSocketAddrs;
            lookup.to_socket_addrs().ok()?.next()
        })
        .await?;
    controller.resolved.borrow_mut().insert(endpoint, addr);
    Some(addr)
}

/// Waits until this broker's shards have installed the image at `index` (or
/// [`forward::FORWARD_TIMEOUT`] has passed: the answer stands, the image follows; only a
/// stalled shard mesh takes that long).
async fn installed(controller: &Controller, index: RaftIndex) {
    let wait = async {
        loop {
            let notified = controller.published_changed.notified();
            if controller.published.get() >= index {
                return;
            }
            notified.await;
        }
    };
    futures_lite::future::or(wait, glommio::timer::sleep(forward::FORWARD_TIMEOUT)).await;
}

/// A new idempotent-producer id for this broker, from its current block (shard 0 keeps it);
/// a used-up block is replaced by a new one from the active controller. Errors: as
/// [`call_answer`].
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

fn controller(shard: &Shard) -> Result<&Controller, ControllerError> {
    shard.controller.get().ok_or(ControllerError::Unavailable)
}

fn not_active(controller: &Controller) -> ControllerError {
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
        let status = controller.quorum.status();
        if !controller.is_active(NodeId(shard.config.node_id)) {
            return Err(not_active(controller));
        }
        // Raft §5.4.2: only once an entry of this term has committed is every entry of the
        // earlier terms known committed (or gone); before, a predecessor's last entry may still
        // commit after an image read now.
        if status.commit_term == status.term && status.applied_index >= status.commit_index {
            return Ok(());
        }
        futures_lite::future::or(notified, glommio::timer::sleep(CATCH_UP_RECHECK)).await;
    }
}

/// How often [`caught_up`] looks at the driver's applied index when nothing rang.
const CATCH_UP_RECHECK: std::time::Duration = std::time::Duration::from_millis(5);

/// Proposes `op` of broker `from` against the applied image and, unless it only validates or
/// changes nothing, commits its records as one entry and waits until every shard of this
/// broker installed the result; returns the image before and after. Runs under the
/// controller lock, on the active controller.
async fn commit(
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
    let now = crate::seam::GlommioRuntime.now();
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
async fn append(
    shard: &Shard,
    controller: &Controller,
    entry: bytes::Bytes,
) -> Result<RaftIndex, ControllerError> {
    let proposal = async { Some(controller.quorum.propose(entry).await) };
    let timeout = async {
        glommio::timer::sleep(PROPOSAL_TIMEOUT).await;
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

/// Hands out the next producer id from this broker's current block, asking the active
/// controller for a new block first when it is used up. Errors: as [`call_answer`].
pub async fn allocate_producer_id_here(shard: &Rc<Shard>) -> Result<i64, ControllerError> {
    let controller = controller(shard)?;
    let _permit = controller.producer_ids_lock.acquire_permit(1).await;
    let mut block = controller.producer_ids.take();
    if block.is_empty() {
        let from = shard.config.node_id;
        match request(shard, ControllerRequest::AllocateProducerIds { from }).await? {
            ControllerReply::ProducerIds { start, end } => block = start..end,
            other => return Err(unexpected(&other)),
        }
    }
    let id = block.next().ok_or(ControllerError::ProducerIdsExhausted {
        next_producer_id: block.end,
    })?;
    controller.producer_ids.set(block);
    Ok(id)
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

/// Starts this node's voter and the controller service on shard 0 from `startup` (what
/// `bootstrap::recover` read from the data directory): the publisher, and the bootstrap of a
/// new metadata log. Errors: the voter could not start (its storage, its listener).
/// `voter`: the listener bound for this node's voter address (see `crate::listener`).
pub async fn start(
    shard: &Rc<Shard>,
    startup: Startup,
    voter: Option<(crate::listener::Handoff, std::net::SocketAddr)>,
) -> anyhow::Result<()> {
    let (machine, view) =
        replication::metadata::MetadataStateMachine::new(MetadataImage::new(String::new()));
    let quorum = crate::quorum::start(&shard.config, machine, voter)
        .await
        .map_err(|e| anyhow::anyhow!("starting the controller quorum voter: {e}"))?;
    if shard.controller.set(Controller::new(quorum, view)).is_err() {
        anyhow::bail!("the controller was started twice");
    }
    let publisher = shard.clone();
    let initial = startup.initial_applied;
    glommio::spawn_local(async move { publisher::run(&publisher, initial).await }).detach();
    let booting = shard.clone();
    glommio::spawn_local(async move { bootstrap::run(&booting, startup).await }).detach();
    let fencing = shard.clone();
    glommio::spawn_local(async move { lifecycle::fence_expired(&fencing).await }).detach();
    let broker = shard.clone();
    glommio::spawn_local(async move { lifecycle::run_broker(&broker).await }).detach();
    Ok(())
}
