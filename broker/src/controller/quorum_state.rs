//! DescribeQuorum on the active controller (KIP-595; Kafka's `LeaderState.describeQuorum`):
//! the quorum's leader, term and high watermark (Raft's commit index) and each voter's (and
//! each controller being added's, as an observer) log end with when it was last heard from and
//! last caught up, from this node's raft-rs progress
//! (`replication::raft::QuorumStatus::voters`). Raft-rs keeps its times on the monotonic
//! clock; they are given as wall-clock ms here, as Kafka's are.

use super::active::not_active;
use super::state::Controller;
use crate::seam::ShardRuntime;
use replication::metadata::{
    ControllerError, ControllerReply, QuorumDescription, ReplicaDescription,
};
use replication::raft::{ProposeError, Role, VoterChange, VoterProgress};
use replication::runtime::{Clock, MonotonicTime, NodeId};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The quorum as this node, its leader, sees it. Errors: [`ControllerError::NotController`]
/// when it does not lead.
pub(super) fn describe(
    controller: &Controller,
    node: NodeId,
) -> Result<QuorumDescription, ControllerError> {
    let Some(quorum) = controller.voter() else {
        return Err(not_active(controller));
    };
    let status = quorum.status();
    if status.role != Role::Leader || status.leader != Some(node) || status.stopped.is_some() {
        return Err(not_active(controller));
    }
    let now = ShardRuntime.now();
    let wall_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO);
    let voters = status
        .voters
        .iter()
        .map(|v| replica(v, now, wall_ms))
        .collect();
    // A controller being added (a Raft learner, KIP-853) is listed among the observers, as
    // Kafka lists a controller that fetches before it is a voter.
    let mut observers = observers(controller, now, wall_ms);
    observers.extend(status.learners.iter().map(|l| replica(l, now, wall_ms)));
    Ok(QuorumDescription {
        leader_id: node.0,
        leader_epoch: i32::try_from(status.term.0).unwrap_or(i32::MAX),
        high_watermark: i64::try_from(status.commit_index.0).unwrap_or(i64::MAX),
        voters,
        observers,
    })
}

/// The observers that fetched from this controller (`super::observer`), as replicas whose
/// log end is what they had applied at their last fetch.
fn observers(
    controller: &Controller,
    now: MonotonicTime,
    wall: Duration,
) -> Vec<ReplicaDescription> {
    controller
        .observers
        .borrow()
        .iter()
        .map(|(&id, o)| {
            let progress = VoterProgress {
                node: NodeId(id),
                log_end: o.applied,
                last_fetch: Some(o.last_fetch),
                last_caught_up: o.last_caught_up,
            };
            replica(&progress, now, wall)
        })
        .collect()
}

/// How long a voter change may take on the active controller before it answers
/// `REQUEST_TIMED_OUT` (below the 15 s a forwarding broker waits).
pub(super) const VOTER_CHANGE_TIMEOUT: Duration = Duration::from_secs(10);

/// Removes voter `voter_id` (RemoveRaftVoter, KIP-853; Kafka's `RemoveVoterHandler`), answered
/// once the change committed. A node that is also a registered broker is refused: a removed
/// voter stops receiving the metadata log, and Sluice's combined nodes do not observe it
/// (restart it with `process.roles=broker` to keep its broker). Errors:
/// [`ControllerError::NotController`] when this node does not lead (the raft leader named),
/// [`ControllerError::VoterNotFound`] for a node that is not a voter or the last one,
/// [`ControllerError::VoterChangeFailed`] when another change is in progress or the outcome
/// is unknown, [`ControllerError::VoterChangeRefused`] for a broker.
pub(super) async fn remove_voter(
    controller: &Controller,
    voter_id: i32,
) -> Result<ControllerReply, ControllerError> {
    let Some(quorum) = controller.voter() else {
        return Err(not_active(controller));
    };
    let status = quorum.status();
    let member = status.voter_set.contains(&NodeId(voter_id))
        || status.learner_set.contains(&NodeId(voter_id));
    let broker = controller
        .view
        .borrow()
        .image()
        .brokers
        .contains_key(&voter_id);
    if member && broker {
        return Err(ControllerError::VoterChangeRefused {
            reason: format!(
                "node {voter_id} is also a registered broker: Sluice removes only controllers \
                 (process.roles=controller) from the voters; restart it with \
                 process.roles=broker first"
            ),
        });
    }
    let change = VoterChange::Remove {
        node: NodeId(voter_id),
    };
    match quorum.change_voters(change, VOTER_CHANGE_TIMEOUT).await {
        Ok(_) => Ok(ControllerReply::VotersChanged),
        Err(ProposeError::NotLeader { leader }) => Err(ControllerError::NotController {
            active: leader.map(|n| n.0),
        }),
        Err(e @ (ProposeError::NotAMember { .. } | ProposeError::LastVoter { .. })) => {
            Err(ControllerError::VoterNotFound {
                voter_id,
                reason: e.to_string(),
            })
        }
        Err(e) => Err(ControllerError::VoterChangeFailed {
            reason: e.to_string(),
        }),
    }
}

/// Adds controller `voter_id`, reached at `endpoint` (`ip:port` of its controller listener),
/// to the voters (AddRaftVoter, KIP-853; Kafka's `AddVoterHandler`): first as a learner that
/// receives the log, then as a voter once it holds every committed entry, within `timeout`;
/// answered once that committed. Errors: [`ControllerError::NotController`] when this node
/// does not lead; [`ControllerError::DuplicateVoter`] for a voter;
/// [`ControllerError::VoterChangeRefused`] for an endpoint that is not `ip:port` or is another
/// controller's, or a node id that is a registered broker's;
/// [`ControllerError::VoterChangeFailed`] when it did not catch up in time (it is removed
/// again), another change is in progress or the outcome is unknown.
pub(super) async fn add_voter(
    controller: &Controller,
    voter_id: i32,
    endpoint: &str,
    timeout: Duration,
) -> Result<ControllerReply, ControllerError> {
    let Some(quorum) = controller.voter() else {
        return Err(not_active(controller));
    };
    let refuse = |reason: String| Err(ControllerError::VoterChangeRefused { reason });
    let Ok(addr) = endpoint.parse::<std::net::SocketAddr>() else {
        return refuse(format!(
            "controller {voter_id}'s endpoint {endpoint} is not ip:port (Sluice's voters are \
             reached at IP addresses, as controller.quorum.voters names them)"
        ));
    };
    if controller
        .view
        .borrow()
        .image()
        .brokers
        .contains_key(&voter_id)
    {
        return refuse(format!(
            "node {voter_id} is a registered broker: a controller needs a node.id of its own"
        ));
    }
    if let Some((other, _)) = controller
        .voters
        .known()
        .into_iter()
        .find(|(id, known)| *id != voter_id && *known == addr)
    {
        return refuse(format!(
            "endpoint {endpoint} is controller {other}'s: each controller listens on its own"
        ));
    }
    let change = VoterChange::Add {
        node: NodeId(voter_id),
        endpoint: bytes::Bytes::from(endpoint.to_owned()),
    };
    match quorum.change_voters(change, timeout).await {
        Ok(_) => Ok(ControllerReply::VotersChanged),
        Err(ProposeError::NotLeader { leader }) => Err(ControllerError::NotController {
            active: leader.map(|n| n.0),
        }),
        Err(ProposeError::AlreadyVoter { .. }) => Err(ControllerError::DuplicateVoter { voter_id }),
        Err(e) => Err(ControllerError::VoterChangeFailed {
            reason: e.to_string(),
        }),
    }
}

/// One voter's progress, its monotonic times as wall-clock ms (`now` is `wall` on the
/// monotonic clock).
fn replica(v: &VoterProgress, now: MonotonicTime, wall: Duration) -> ReplicaDescription {
    let wall_ms = |t: Option<MonotonicTime>| {
        t.map_or(-1, |t| {
            let at = wall.saturating_sub(now.saturating_duration_since(t));
            i64::try_from(at.as_millis()).unwrap_or(i64::MAX)
        })
    };
    ReplicaDescription {
        replica_id: v.node.0,
        log_end_offset: i64::try_from(v.log_end.0).unwrap_or(i64::MAX),
        last_fetch_timestamp_ms: wall_ms(v.last_fetch),
        last_caught_up_timestamp_ms: wall_ms(v.last_caught_up),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use replication::raft::RaftIndex;

    #[test]
    fn monotonic_times_become_wall_clock_ms_and_unknown_ones_minus_one() {
        let now = MonotonicTime(Duration::from_secs(100));
        let wall = Duration::from_millis(1_700_000_000_000);
        let v = VoterProgress {
            node: NodeId(2),
            log_end: RaftIndex(41),
            last_fetch: Some(MonotonicTime(Duration::from_millis(99_500))),
            last_caught_up: None,
        };
        assert_eq!(
            replica(&v, now, wall),
            ReplicaDescription {
                replica_id: 2,
                log_end_offset: 41,
                last_fetch_timestamp_ms: 1_699_999_999_500,
                last_caught_up_timestamp_ms: -1,
            }
        );
    }
}
