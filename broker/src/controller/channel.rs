//! The controller channel: what the services call to run a metadata change on the active
//! controller — this broker's (through shard 0) or another's (forwarded over the network,
//! [`super::forward`]) — and the server side of a forwarded request.

use super::active::{controller, installed, not_active};
use super::fencing::handle_active;
use super::forward;
use super::state::Controller;
use crate::messages::ShardMsg;
use crate::response::Response;
use crate::shard::Shard;
use bytes::Bytes;
use futures_channel::oneshot;
use replication::metadata::{
    ControllerAnswer, ControllerError, ControllerOp, ControllerReply, ControllerRequest,
    QuorumDescription,
};
use replication::raft::RaftIndex;
use replication::runtime::NodeId;
use std::rc::Rc;

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

/// The controller quorum as its leader describes it (DescribeQuorum), asked of the active
/// controller here or over the network. Errors: as [`call_answer`].
pub async fn describe_quorum(shard: &Rc<Shard>) -> Result<QuorumDescription, ControllerError> {
    match request(shard, ControllerRequest::DescribeQuorum).await? {
        ControllerReply::Quorum(description) => Ok(description),
        other => Err(unexpected(&other)),
    }
}

/// Removes controller `voter_id` from the quorum's voters (RemoveRaftVoter), on the active
/// controller here or over the network. Errors: as [`call_answer`], and the voter change's
/// ([`ControllerError::VoterNotFound`], [`ControllerError::VoterChangeFailed`],
/// [`ControllerError::VoterChangeRefused`]).
pub async fn remove_voter(shard: &Rc<Shard>, voter_id: i32) -> Result<(), ControllerError> {
    match request(shard, ControllerRequest::RemoveVoter { voter_id }).await? {
        ControllerReply::VotersChanged => Ok(()),
        other => Err(unexpected(&other)),
    }
}

/// Adds controller `voter_id`, reached at `endpoint` (`ip:port`), to the quorum's voters
/// (AddRaftVoter) once it caught up within `timeout`, on the active controller here or over
/// the network. Errors: as [`remove_voter`], and [`ControllerError::DuplicateVoter`].
pub async fn add_voter(
    shard: &Rc<Shard>,
    voter_id: i32,
    endpoint: String,
    timeout: std::time::Duration,
) -> Result<(), ControllerError> {
    let timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
    let request = ControllerRequest::AddVoter {
        voter_id,
        endpoint,
        timeout_ms,
    };
    match self::request(shard, request).await? {
        ControllerReply::VotersChanged => Ok(()),
        other => Err(unexpected(&other)),
    }
}

/// Every controller address this node knows, by node id (configured, added by a voter change,
/// learned from a bootstrap server); empty before the controller started.
pub fn voter_endpoints(shard: &Rc<Shard>) -> std::collections::BTreeMap<i32, std::net::SocketAddr> {
    controller(shard).map_or_else(|_| Default::default(), |c| c.voters.known())
}

/// [`call_answer`] for the callers that need only success.
pub async fn call(shard: &Rc<Shard>, op: ControllerOp) -> Result<(), ControllerError> {
    call_answer(shard, op).await.map(|_| ())
}

pub(super) fn unexpected(reply: &ControllerReply) -> ControllerError {
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
                | ControllerOp::ControlledShutdown { .. }
        ) {
            return Err(ControllerError::NotForwardable {
                op: format!("{op:?}"),
            });
        }
    }
    // Any controller says where the controllers are (a joining one asks).
    if let ControllerRequest::DescribeVoters = request {
        return Ok(super::voters::describe(&controller.voters));
    }
    let node = NodeId(shard.config.node_id);
    if controller.is_active(node) {
        return handle_active(shard, controller, request).await;
    }
    if forwarded {
        return Err(not_active(controller));
    }
    // As Kafka's brokers re-send to the controller they learn next: while no active controller
    // is known, or the one asked stops answering (paused, cut off, killed: the connection is
    // refused) or no longer leads, look again until the forward's timeout, rather than hand the
    // client a NOT_CONTROLLER or REQUEST_TIMED_OUT.
    let deadline = std::time::Instant::now() + forward::FORWARD_TIMEOUT;
    loop {
        match forward_once(shard, controller, &request).await {
            Err(ControllerError::NotController { .. } | ControllerError::Unavailable)
                if std::time::Instant::now() < deadline =>
            {
                crate::rt::sleep(SUPERSEDED_CHECK).await;
                if controller.is_active(node) {
                    return handle_active(shard, controller, request).await;
                }
            }
            Ok(reply) => {
                if let ControllerReply::Answer { applied_index, .. } = &reply {
                    installed(controller, RaftIndex(*applied_index)).await;
                }
                return Ok(reply);
            }
            Err(e) => return Err(e),
        }
    }
}

/// Sends `request` to the active controller this node knows, once. Errors: the controller's;
/// [`ControllerError::NotController`] when none is known, or another became active while
/// it was in flight (it is abandoned).
async fn forward_once(
    shard: &Rc<Shard>,
    controller: &Controller,
    request: &ControllerRequest,
) -> Result<ControllerReply, ControllerError> {
    let Some(active) = controller.active() else {
        return Err(not_active(controller));
    };
    let listener = shard.config.inter_broker_listener_name();
    let endpoint = crate::metadata::broker_endpoint(&shard.metadata(), active.0, &listener);
    let (host, addr, security) = match endpoint {
        // A registered broker: its inter-broker listener.
        Some(endpoint) => {
            let host = endpoint.0.clone();
            let addr = resolve(controller, endpoint)
                .await
                .ok_or_else(|| not_active(controller))?;
            (host, addr, &shard.inter_broker)
        }
        // A controller-only node (`process.roles=controller`): its voter address (configured,
        // or recorded when a voter change added it).
        None => {
            let addr = controller
                .voters
                .address(active.0)
                .ok_or_else(|| not_active(controller))?;
            (addr.ip().to_string(), addr, &controller.to_voters)
        }
    };
    let sent = async { Some(forward::send(security, &host, addr, request).await) };
    let superseded = async {
        loop {
            crate::rt::sleep(SUPERSEDED_CHECK).await;
            if controller.active().is_some_and(|now| now != active) {
                return None;
            }
        }
    };
    futures_lite::future::or(sent, superseded)
        .await
        .unwrap_or_else(|| Err(not_active(controller)))
}

/// How often a forwarded request in flight looks whether another controller became active.
const SUPERSEDED_CHECK: std::time::Duration = std::time::Duration::from_millis(100);

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
    let addr = crate::rt::spawn_blocking(move || {
        use std::net::ToSocketAddrs;
        lookup.to_socket_addrs().ok()?.next()
    })
    .await?;
    controller.resolved.borrow_mut().insert(endpoint, addr);
    Some(addr)
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

/// Serves a forwarded request `frame` on this broker (which must be the active controller,
/// or the request fails with `NOT_CONTROLLER` inside the reply). `Response::Close` when the
/// frame does not decode.
pub async fn serve_forwarded(shard: &Rc<Shard>, frame: Bytes) -> Response {
    match answer_forwarded(shard, frame).await {
        Some(frame) => Response::Whole(frame),
        None => Response::Close,
    }
}

/// [`serve_forwarded`]'s reply frame, `None` when `frame` is not a forwarded request that
/// decodes (the voter listener's handler: `crate::quorum::transport::ForwardedRequests`).
pub async fn answer_forwarded(shard: &Rc<Shard>, frame: Bytes) -> Option<Bytes> {
    if !forward::is_forwarded(&frame) {
        return None;
    }
    let Some((correlation_id, request)) = forward::decode_request(&frame) else {
        tracing::debug!("closing connection: a forwarded controller request does not decode");
        return None;
    };
    let reply = handle_here_or_on_shard_0(shard, request).await;
    let frame = forward::encode(correlation_id, None, &reply);
    if frame.is_none() {
        tracing::warn!(
            max = forward::REPLY_BYTES_MAX,
            "a forwarded request's reply does not encode within the reply bound; closing"
        );
    }
    frame
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
