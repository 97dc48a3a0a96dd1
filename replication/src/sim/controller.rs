//! [`SimController`]: the simulation's controller, a pure state machine (no I/O, no clock)
//! holding, per partition, the committed leader, leader epoch, partition epoch, replicas and
//! ISR, and the set of fenced brokers. It answers AlterPartition proposals in the order of
//! KRaft's `ReplicationControlManager.alterPartition` (as `metadata::propose` does for the
//! real controller), fences a broker as KRaft's `generateLeaderAndIsrUpdates` (it leaves
//! every ISR unless it is the last member; a partition it led gets a new leader elected from
//! the rest of the committed ISR, clean election only, or none), and elects a leader for a
//! leaderless partition when a broker of its ISR is unfenced (`handleBrokerUnfenced`). Every
//! change bumps the partition epoch; a leader change also bumps the leader epoch.
//!
//! Invariants (asserted after every change): the ISR is a non-empty set of replicas, sorted
//! ascending, holding the leader when there is one; a leader is never fenced.
//!
//! Limits: one replica set per partition, fixed (no reassignment); no broker epochs
//! (KIP-903), no controlled shutdown, no unclean election, no ELR (KIP-966); the test reaches
//! it over the simulated network, and delivers its state to brokers as KRaft's metadata log
//! would (late, never lost: brokers pull it).

use crate::runtime::NodeId;
use crate::{AlterPartitionProposal, AlterRefusal, Leadership};
use std::collections::{BTreeMap, BTreeSet};
use storage::LeaderEpoch;

/// One partition's committed state (Kafka's `PartitionRegistration`, the fields the ISR uses).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionState {
    /// `None`: leaderless (no live ISR member), Kafka's leader -1.
    pub leader: Option<NodeId>,
    pub leader_epoch: LeaderEpoch,
    /// Bumped by every change of the partition's state.
    pub partition_epoch: i32,
    /// The replicas, preferred leader first.
    pub replicas: Vec<NodeId>,
    /// The committed ISR, ascending.
    pub isr: Vec<NodeId>,
}

impl PartitionState {
    /// The leadership the metadata gives `leader` (Kafka's `LeaderAndIsrPartitionState`);
    /// `None` when leaderless.
    pub fn leadership(&self) -> Option<Leadership> {
        self.leader.map(|_| Leadership {
            leader_epoch: self.leader_epoch,
            partition_epoch: self.partition_epoch,
            replicas: self.replicas.clone(),
            isr: self.isr.clone(),
        })
    }
}

/// The simulated controller (module doc).
#[derive(Debug, Default)]
pub struct SimController {
    partitions: BTreeMap<i32, PartitionState>,
    fenced: BTreeSet<NodeId>,
}

impl SimController {
    /// Creates partition `partition` over `replicas` (non-empty, distinct), led by the first
    /// at leader epoch `leader_epoch` and partition epoch 0, every replica in the ISR.
    pub fn create_partition(
        &mut self,
        partition: i32,
        replicas: Vec<NodeId>,
        leader_epoch: LeaderEpoch,
    ) {
        let mut isr = replicas.clone();
        isr.sort_unstable();
        let state = PartitionState {
            leader: replicas.first().copied(),
            leader_epoch,
            partition_epoch: 0,
            replicas,
            isr,
        };
        check(&state, &self.fenced);
        self.partitions.insert(partition, state);
    }

    /// The committed state of `partition`.
    pub fn partition(&self, partition: i32) -> Option<&PartitionState> {
        self.partitions.get(&partition)
    }

    /// Whether `broker` is fenced.
    pub fn is_fenced(&self, broker: NodeId) -> bool {
        self.fenced.contains(&broker)
    }

    /// An AlterPartition from `proposal.leader_id` for `partition`, checked in KRaft's order:
    /// unknown partition (`UNKNOWN_TOPIC_OR_PARTITION`), epochs ahead of the controller's
    /// (Kafka's `NOT_CONTROLLER`, retried), an older leader epoch (`FENCED_LEADER_EPOCH`), a
    /// sender that is not the leader (`INVALID_REQUEST`), an older partition epoch
    /// (`INVALID_UPDATE_VERSION`), an ISR that is not a set of replicas holding the leader
    /// (`INVALID_REQUEST`), a fenced member (`INELIGIBLE_REPLICA`). Then the ISR is replaced
    /// and the partition epoch bumped — unless it is the current ISR, which changes nothing.
    /// Answers the committed `(partition epoch, ISR)`.
    pub fn alter_partition(
        &mut self,
        partition: i32,
        proposal: &AlterPartitionProposal,
    ) -> Result<(i32, Vec<NodeId>), AlterRefusal> {
        let p = self
            .partitions
            .get_mut(&partition)
            .ok_or(AlterRefusal::UnknownTopicOrPartition)?;
        if proposal.leader_epoch > p.leader_epoch || proposal.partition_epoch > p.partition_epoch {
            return Err(AlterRefusal::Retriable);
        }
        if proposal.leader_epoch < p.leader_epoch {
            return Err(AlterRefusal::FencedLeaderEpoch);
        }
        if p.leader != Some(proposal.leader_id) {
            return Err(AlterRefusal::InvalidRequest);
        }
        if proposal.partition_epoch < p.partition_epoch {
            return Err(AlterRefusal::InvalidUpdateVersion);
        }
        let mut new_isr = proposal.new_isr.clone();
        new_isr.sort_unstable();
        let distinct: BTreeSet<_> = new_isr.iter().collect();
        if distinct.len() != new_isr.len()
            || !new_isr.iter().all(|r| p.replicas.contains(r))
            || !new_isr.contains(&proposal.leader_id)
        {
            return Err(AlterRefusal::InvalidRequest);
        }
        if new_isr.iter().any(|r| self.fenced.contains(r)) {
            return Err(AlterRefusal::IneligibleReplica);
        }
        if new_isr != p.isr {
            p.isr = new_isr;
            p.partition_epoch += 1;
        }
        let answer = (p.partition_epoch, p.isr.clone());
        check(p, &self.fenced);
        Ok(answer)
    }

    /// Fences `broker` (its session expired, or it crashed): it leaves every ISR it is in
    /// unless it is the last member, and every partition it led gets the first replica of the
    /// remaining ISR that is not fenced as its leader at the next leader epoch, or none.
    /// Returns the partitions that changed.
    pub fn fence(&mut self, broker: NodeId) -> Vec<i32> {
        self.fenced.insert(broker);
        let mut changed = Vec::new();
        for (&id, p) in self.partitions.iter_mut() {
            let leads = p.leader == Some(broker);
            if !leads && !p.isr.contains(&broker) {
                continue;
            }
            let before = p.clone();
            if p.isr.len() > 1 {
                p.isr.retain(|r| *r != broker);
            }
            if leads {
                p.leader = elect(p, &self.fenced);
                p.leader_epoch = LeaderEpoch(p.leader_epoch.0 + 1);
            }
            if *p != before {
                p.partition_epoch += 1;
                changed.push(id);
            }
            check(p, &self.fenced);
        }
        changed
    }

    /// Unfences `broker` (it registered again): every leaderless partition whose ISR holds it
    /// gets a leader elected from the ISR, at the next leader epoch. Returns the partitions
    /// that changed.
    pub fn unfence(&mut self, broker: NodeId) -> Vec<i32> {
        self.fenced.remove(&broker);
        let mut changed = Vec::new();
        for (&id, p) in self.partitions.iter_mut() {
            if p.leader.is_some() || !p.isr.contains(&broker) {
                continue;
            }
            p.leader = elect(p, &self.fenced);
            p.leader_epoch = LeaderEpoch(p.leader_epoch.0 + 1);
            p.partition_epoch += 1;
            changed.push(id);
            check(p, &self.fenced);
        }
        changed
    }
}

/// Kafka's clean `electLeader`: the first replica (preferred order) in the ISR not fenced.
fn elect(p: &PartitionState, fenced: &BTreeSet<NodeId>) -> Option<NodeId> {
    p.replicas
        .iter()
        .copied()
        .find(|r| p.isr.contains(r) && !fenced.contains(r))
}

/// The module's invariants for `p`.
fn check(p: &PartitionState, fenced: &BTreeSet<NodeId>) {
    assert!(!p.isr.is_empty(), "the ISR is never empty");
    assert!(
        p.isr.windows(2).all(|w| w[0] < w[1]),
        "the ISR is a sorted set"
    );
    assert!(
        p.isr.iter().all(|r| p.replicas.contains(r)),
        "the ISR holds only replicas"
    );
    if let Some(leader) = p.leader {
        assert!(p.isr.contains(&leader), "the ISR holds the leader");
        assert!(!fenced.contains(&leader), "the leader is not fenced");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const R: [NodeId; 3] = [NodeId(1), NodeId(2), NodeId(3)];

    fn proposal(leader_epoch: i32, partition_epoch: i32, isr: &[i32]) -> AlterPartitionProposal {
        AlterPartitionProposal {
            proposal_id: 0,
            leader_id: NodeId(1),
            leader_epoch: LeaderEpoch(leader_epoch),
            partition_epoch,
            new_isr: isr.iter().map(|&r| NodeId(r)).collect(),
        }
    }

    fn controller() -> SimController {
        let mut c = SimController::default();
        c.create_partition(0, R.to_vec(), LeaderEpoch(1));
        c
    }

    /// Each refusal in KRaft's order, then a commit bumping the partition epoch, and a
    /// repeat of the committed ISR changing nothing.
    #[test]
    fn alter_partition_refuses_as_kraft_and_commits() {
        let mut c = controller();
        assert_eq!(
            c.alter_partition(9, &proposal(1, 0, &[1, 2])),
            Err(AlterRefusal::UnknownTopicOrPartition)
        );
        assert_eq!(
            c.alter_partition(0, &proposal(2, 0, &[1, 2])),
            Err(AlterRefusal::Retriable)
        );
        assert_eq!(
            c.alter_partition(0, &proposal(1, 0, &[1, 4])),
            Err(AlterRefusal::InvalidRequest)
        );
        assert_eq!(
            c.alter_partition(0, &proposal(1, 0, &[2, 3])),
            Err(AlterRefusal::InvalidRequest)
        );
        assert_eq!(
            c.alter_partition(0, &proposal(1, 0, &[1, 2])),
            Ok((1, vec![R[0], R[1]]))
        );
        assert_eq!(
            c.alter_partition(0, &proposal(1, 0, &[1])),
            Err(AlterRefusal::InvalidUpdateVersion)
        );
        assert_eq!(
            c.alter_partition(0, &proposal(1, 1, &[2, 1])),
            Ok((1, vec![R[0], R[1]]))
        );
        c.fence(NodeId(3));
        assert_eq!(
            c.alter_partition(0, &proposal(1, 1, &[1, 2, 3])),
            Err(AlterRefusal::IneligibleReplica)
        );
        // The leader is fenced: the next ISR member leads at epoch 2.
        assert_eq!(c.fence(NodeId(1)), vec![0]);
        let p = c.partition(0).expect("created");
        assert_eq!(
            (p.leader, p.leader_epoch, p.isr.clone()),
            (Some(R[1]), LeaderEpoch(2), vec![R[1]])
        );
        assert_eq!(
            c.alter_partition(0, &proposal(1, 1, &[1, 2])),
            Err(AlterRefusal::FencedLeaderEpoch)
        );
    }

    /// The last ISR member stays in the ISR when fenced, leaving the partition leaderless (no
    /// unclean election of an unfenced out-of-sync replica); unfencing it elects it again.
    #[test]
    fn the_last_isr_member_comes_back_as_leader() {
        let mut c = controller();
        assert_eq!(
            c.alter_partition(0, &proposal(1, 0, &[1])),
            Ok((1, vec![R[0]]))
        );
        c.fence(NodeId(1));
        let p = c.partition(0).expect("created").clone();
        assert_eq!(
            (p.leader, p.isr.clone(), p.leader_epoch),
            (None, vec![R[0]], LeaderEpoch(2))
        );
        assert_eq!(
            c.unfence(NodeId(2)),
            Vec::<i32>::new(),
            "2 is not in the ISR"
        );
        assert_eq!(c.unfence(NodeId(1)), vec![0]);
        let p = c.partition(0).expect("created");
        assert_eq!(
            (p.leader, p.leader_epoch, p.partition_epoch),
            (Some(R[0]), LeaderEpoch(3), 3)
        );
    }
}
