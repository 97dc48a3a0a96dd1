//! Observers of the metadata log (`process.roles=broker`; KIP-631's broker-only nodes,
//! KIP-595's observers): a broker-only node runs no voter. Its shard 0 fetches the committed
//! entries from the active controller ([`run`]) into its own metadata state machine, whose
//! view the publisher installs as on a voter; the active controller answers each fetch
//! ([`serve`]) from the entries its view keeps, or with its whole image when the observer is
//! further behind (`MetadataView::fetch_after`).
//!
//! Wire: a [`ControllerRequest::FetchMetadata`] like any forwarded request
//! ([`super::forward`]), sent to the voter address of `controller.quorum.voters` (the
//! controller listener, secured as `controller.listener.names` says), one connection per
//! fetch. The active controller holds a fetch up to [`FETCH_WAIT_MAX`] while it has nothing
//! newer (a long poll), so an idle observer costs about two exchanges (and connections) per
//! second.
//!
//! Target: the leader the last answer named; none known (at start, after an error), the
//! controllers in turn: the configured voters and those a voter change added (their endpoints
//! in the metadata: `super::voters`). A voter that does not lead answers `NOT_CONTROLLER` with the leader it
//! knows, which is asked next.
//!
//! Invariants: an observer only applies entries the leader applied, and the leader applies
//! only committed ones, so an observer never shows an entry the quorum may lose; it applies
//! them in index order, each once (`MetadataStateMachine::apply_fetched`).
//!
//! Limits: the observer keeps nothing on disk; a restarted broker-only node fetches the image
//! again and opens its partitions once it has it (it registers only after that, like a new
//! node). It never votes and never becomes the active controller.

use super::active::{controller, not_active};
use super::forward;
use super::state::{Controller, ObserverProgress};
use crate::seam::ShardRuntime;
use crate::shard::Shard;
use replication::metadata::{
    ControllerError, ControllerReply, ControllerRequest, MetadataFetch, MetadataStateMachine,
};
use replication::raft::{RaftIndex, RaftTerm, StateMachine};
use replication::runtime::{Clock, NodeId};
use std::rc::Rc;
use std::time::Duration;
use tuning::config::QuorumVoter;

/// Longest the active controller holds a fetch that has nothing newer.
pub const FETCH_WAIT_MAX: Duration = Duration::from_millis(500);
/// How long an observer waits for a fetch's answer, connection included, after an answered
/// one (Kafka's `controller.quorum.fetch.timeout.ms` default): a leader gone without a reset
/// (paused, cut off) is given up after it, so the brokers' heartbeats reach its successor well
/// within a session. It doubles with each fetch that timed out, up to
/// [`FETCH_TIMEOUT_MAX`], so that a whole image of tens of MiB gets through.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(2);
/// The longest wait for one fetch's answer.
pub const FETCH_TIMEOUT_MAX: Duration = Duration::from_secs(32);
/// The wait after a failed fetch (it doubles with each further one), and after a voter that
/// does not lead named another.
pub const FETCH_BACKOFF_MIN: Duration = Duration::from_millis(50);
/// The longest wait between two failed fetches.
pub const FETCH_BACKOFF_MAX: Duration = Duration::from_secs(1);
/// How long the active controller lists an observer that stopped fetching (Kafka's
/// `OBSERVER_SESSION_TIMEOUT_MS`).
pub const OBSERVER_SESSION: Duration = Duration::from_secs(300);
/// How long an observer's fetches may go unanswered before it says so at WARN.
pub const OBSERVER_SILENCE_WARN: Duration = Duration::from_secs(10);
/// How long a voter whose fetch failed is neither asked nor followed to while another may
/// answer: longer than an election (voters name a paused leader until they elect another),
/// bounded so that a voter that failed before it was serving (a controller elected just
/// after this observer's first fetch) is followed again when the others name it.
pub const FAILED_VOTER_AVOIDED_FOR: Duration = Duration::from_secs(5);
/// Most observers the active controller lists at once (further ones are served, not listed).
pub const OBSERVERS_LISTED_MAX: usize = 10_000;

/// The active controller's answer to observer `from`, which has applied everything up to
/// `after`: the entries after it (or the image), once there are any or [`FETCH_WAIT_MAX`]
/// elapsed. Errors: [`ControllerError::NotController`] when this node does not lead (any
/// more, checked again before answering).
pub(super) async fn serve(
    shard: &Shard,
    controller: &Controller,
    from: i32,
    after: RaftIndex,
) -> Result<ControllerReply, ControllerError> {
    let node = NodeId(shard.config.node_id);
    let Some(quorum) = controller.voter().filter(|_| controller.is_active(node)) else {
        return Err(not_active(controller));
    };
    note_observer(shard, controller, quorum.status().term, from, after);
    let deadline = crate::rt::sleep(FETCH_WAIT_MAX);
    futures_lite::pin!(deadline);
    // Whether the wait is over: then the answer may be empty.
    let mut waited = false;
    loop {
        let changed = controller.view.borrow().changed();
        let notified = changed.notified();
        let Some(quorum) = controller.voter().filter(|_| controller.is_active(node)) else {
            return Err(not_active(controller));
        };
        let applied = controller.view.borrow().applied_index();
        if applied > after || waited || shard.stop.is_requested() {
            let view = controller.view.borrow();
            return Ok(ControllerReply::Metadata(MetadataFetch {
                leader: node.0,
                term: quorum.status().term.0,
                cluster_id: view.image().cluster_id.clone(),
                batch: view.fetch_after(after),
            }));
        }
        waited = !futures_lite::future::or(
            async {
                notified.await;
                true
            },
            async {
                (&mut deadline).await;
                false
            },
        )
        .await;
    }
}

/// Records observer `from`'s fetch at `after` for DescribeQuorum (not a voter's, nor a
/// negative id; at most [`OBSERVERS_LISTED_MAX`]), and forgets observers silent for
/// [`OBSERVER_SESSION`], and all of them when `term` is a new leadership's.
fn note_observer(
    shard: &Shard,
    controller: &Controller,
    term: RaftTerm,
    from: i32,
    after: RaftIndex,
) {
    let now = ShardRuntime.now();
    let applied = controller.view.borrow().applied_index();
    let mut observers = controller.observers.borrow_mut();
    if controller.observers_term.replace(term) != term {
        observers.clear();
    }
    observers.retain(|_, o| now.saturating_duration_since(o.last_fetch) < OBSERVER_SESSION);
    let voter = shard
        .config
        .controller_quorum_voters
        .iter()
        .any(|v| v.id == from);
    let full = observers.len() >= OBSERVERS_LISTED_MAX && !observers.contains_key(&from);
    if from < 0 || voter || from == shard.config.node_id || full {
        return;
    }
    let last_caught_up = observers.get(&from).and_then(|o| o.last_caught_up);
    observers.insert(
        from,
        ObserverProgress {
            applied: after,
            last_fetch: now,
            last_caught_up: if after >= applied {
                Some(now)
            } else {
                last_caught_up
            },
        },
    );
}

/// Shard 0 of a broker-only node: keeps `machine` (whose view is the controller state's)
/// following the active controller until the shard stops.
pub(crate) async fn run(shard: &Rc<Shard>, mut machine: MetadataStateMachine) {
    let Ok(controller) = controller(shard) else {
        return;
    };
    let voters = &shard.config.controller_quorum_voters;
    // `check_quorum` refused a broker-only node without voters.
    assert!(!voters.is_empty(), "an observer has voters to follow");
    let mut turn = 0usize;
    let mut backoff = FETCH_BACKOFF_MIN;
    let mut timeout = FETCH_TIMEOUT;
    // The voter whose last fetch failed, and until when it is not asked again (nor followed
    // to) while another voter may answer, so that a paused leader costs one timeout, not one
    // per hint.
    let mut avoid: Option<(i32, std::time::Instant)> = None;
    let avoided = |avoid: Option<(i32, std::time::Instant)>, id: i32| {
        avoid.is_some_and(|(voter, until)| voter == id && std::time::Instant::now() < until)
    };
    // Since when no fetch was answered, and whether that was said at WARN.
    let mut silent_since: Option<std::time::Instant> = None;
    let mut warned = false;
    while !shard.stop.is_requested() {
        let silent_for = silent_since.map_or(Duration::ZERO, |t| t.elapsed());
        if silent_for >= OBSERVER_SILENCE_WARN && !warned {
            warned = true;
            tracing::warn!(?silent_for, voters = %tuning::config::render_quorum_voters(voters), "observer: no controller has answered this broker's metadata fetches (check that the controllers run, that controller.quorum.voters names their addresses, and the controller listener's TLS)");
        }
        let known = controller.active();
        // The leader where it is known: a configured voter, or one a voter change added.
        let leading = known.and_then(|leader| {
            let addr = controller.voters.address(leader.0)?;
            Some(QuorumVoter { id: leader.0, addr })
        });
        // Else the controllers in turn: the configured voters and those a voter change added
        // (once every configured one has been replaced, only the latter answer).
        let target = leading.unwrap_or_else(|| {
            let candidates: Vec<QuorumVoter> = controller
                .voters
                .known()
                .into_iter()
                .map(|(id, addr)| QuorumVoter { id, addr })
                .collect();
            loop {
                turn = turn.wrapping_add(1);
                let voter = &candidates[turn % candidates.len()];
                if candidates.len() == 1 || !avoided(avoid, voter.id) {
                    break *voter;
                }
            }
        });
        let target = &target;
        let (applied, term) = {
            let view = controller.view.borrow();
            (view.applied_index(), view.leader().1)
        };
        let Some(fetched) = fetch(shard, controller, target, applied, timeout).await else {
            if shard.stop.is_requested() {
                return;
            }
            // No answer in time: a leader paused or cut off. Ask the others; a whole image
            // may need longer, so the next wait doubles.
            silent_since.get_or_insert_with(std::time::Instant::now);
            tracing::debug!(
                from = target.id,
                ?timeout,
                "observer: a metadata fetch timed out"
            );
            timeout = (timeout * 2).min(FETCH_TIMEOUT_MAX);
            avoid = Some((
                target.id,
                std::time::Instant::now() + FAILED_VOTER_AVOIDED_FOR,
            ));
            if known.is_some() {
                machine.leader_changed(None, term);
            }
            continue;
        };
        timeout = FETCH_TIMEOUT;
        if !matches!(fetched, Ok(ControllerReply::Metadata(_))) {
            silent_since.get_or_insert_with(std::time::Instant::now);
        }
        // The wait before the next fetch: none after an answer; a short, flat one after a
        // voter named another leader (during an election voters may name each other, or the
        // dead leader, for a while: the successor must be found well within a broker
        // session); a doubling one after a failure.
        let wait = match fetched {
            Ok(ControllerReply::Metadata(fetch)) => {
                avoid = None;
                if warned {
                    tracing::info!(from = target.id, "observer: a controller answers again");
                }
                (silent_since, warned) = (None, false);
                let (leader, term) = (NodeId(fetch.leader), RaftTerm(fetch.term));
                match machine.apply_fetched(leader, term, &fetch.cluster_id, fetch.batch) {
                    Ok(()) => Wait::None,
                    Err(e) => {
                        tracing::warn!(from = target.id, error = %e, "observer: the fetched metadata does not apply; fetching again");
                        Wait::Backoff
                    }
                }
            }
            Ok(other) => {
                tracing::warn!(from = target.id, reply = ?other, "observer: unexpected answer to a metadata fetch");
                Wait::Backoff
            }
            Err(ControllerError::NotController { active }) => {
                // Follow the hint unless it names the voter that just refused (or one that
                // failed last: voters name a paused leader until they elect another).
                let hint = active
                    .filter(|&id| id != target.id && !avoided(avoid, id))
                    .map(NodeId);
                if hint != known {
                    machine.leader_changed(hint, term);
                }
                Wait::Redirected
            }
            Err(e) => {
                tracing::debug!(from = target.id, error = %e, "observer: fetching the metadata log failed");
                if matches!(e, ControllerError::Unavailable) {
                    avoid = Some((
                        target.id,
                        std::time::Instant::now() + FAILED_VOTER_AVOIDED_FOR,
                    ));
                }
                if known.is_some() {
                    machine.leader_changed(None, term);
                }
                Wait::Backoff
            }
        };
        let pause = match wait {
            Wait::None => {
                backoff = FETCH_BACKOFF_MIN;
                continue;
            }
            Wait::Redirected => {
                backoff = FETCH_BACKOFF_MIN;
                FETCH_BACKOFF_MIN
            }
            Wait::Backoff => {
                let pause = backoff;
                backoff = (backoff * 2).min(FETCH_BACKOFF_MAX);
                pause
            }
        };
        if shard.sleep_unless_stopped(pause).await {
            return;
        }
    }
}

/// What an observer waits for before its next fetch.
enum Wait {
    /// Nothing: the fetch was answered.
    None,
    /// [`FETCH_BACKOFF_MIN`]: a voter named another leader (or none).
    Redirected,
    /// The doubling back-off: the fetch failed.
    Backoff,
}

/// One fetch from voter `target`: its answer, or `None` when `timeout` passed first (or the
/// shard stops). Errors inside: [`ControllerError::Unavailable`] when it could not be
/// reached, or answered nonsense.
async fn fetch(
    shard: &Shard,
    controller: &Controller,
    target: &QuorumVoter,
    applied: RaftIndex,
    timeout: Duration,
) -> Option<Result<ControllerReply, ControllerError>> {
    let request = ControllerRequest::FetchMetadata {
        from: shard.config.node_id,
        after: applied.0,
    };
    let host = target.addr.ip().to_string();
    let exchange =
        async { Some(forward::send(&controller.to_voters, &host, target.addr, &request).await) };
    let bounded = async {
        crate::rt::sleep(timeout).await;
        None
    };
    let stopped = async {
        shard.stop.requested().await;
        None
    };
    futures_lite::future::or(exchange, futures_lite::future::or(bounded, stopped)).await
}
