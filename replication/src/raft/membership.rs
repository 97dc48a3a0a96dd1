//! Voter changes (KIP-853's AddRaftVoter / RemoveRaftVoter) as Raft single-server changes on
//! raft-rs's `ConfChangeV2`, one at a time: what a requested change means for the
//! configuration in force ([`plan`]), how it is written as a log entry ([`conf_change`]) and
//! read back ([`decode`]). Free of I/O: the driver (`super::node`) proposes and applies.
//!
//! An added node first joins as a learner (it receives the log, votes in nothing), and
//! becomes a voter only once it holds every committed entry, so that adding it never leaves
//! the quorum waiting for a node that is still catching up (Raft thesis §4.2.1). A removal
//! takes effect when its entry is applied; a leader that removed itself hands its leadership
//! to the most caught-up voter. The added node's endpoint travels in the entry's context, so
//! that every member (and the state machine's snapshot) learns where to reach it.

use super::codec;
use crate::runtime::NodeId;
use bytes::Bytes;
use protobuf::Message as _;
use raft::eraftpb::{
    ConfChangeSingle, ConfChangeTransition, ConfChangeType, ConfChangeV2, ConfState, Entry,
    EntryType,
};

/// A requested change of the voter set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VoterChange {
    /// Adds `node`, whose endpoint (opaque to the quorum; the state machine records it) is
    /// `endpoint`: as a learner first, then as a voter once caught up.
    Add { node: NodeId, endpoint: Bytes },
    /// Removes `node` (a voter, or a learner left over from an add that timed out).
    Remove { node: NodeId },
}

impl VoterChange {
    /// The node the change is about.
    pub fn node(&self) -> NodeId {
        match self {
            VoterChange::Add { node, .. } | VoterChange::Remove { node } => *node,
        }
    }
}

/// One applied configuration entry, as the state machine sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppliedVoterChange {
    /// The node the entry is about.
    pub node: NodeId,
    /// What the entry did to it.
    pub kind: ChangeKind,
    /// Its endpoint for an add (learner or voter), empty for a removal.
    pub endpoint: Bytes,
    /// The voters once applied, by node id.
    pub voters: Vec<NodeId>,
    /// The learners once applied, by node id.
    pub learners: Vec<NodeId>,
}

/// What a configuration entry does to its node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    /// Joins as a learner.
    AddLearner,
    /// Becomes a voter.
    AddVoter,
    /// Leaves the configuration.
    Remove,
}

/// The first step of a requested change, given the configuration in force.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum FirstStep {
    /// Propose the node as a learner.
    AddLearner,
    /// It is a learner already (an earlier add timed out): wait for it to catch up.
    CatchUp,
    /// Propose its removal.
    Remove,
}

/// Why a requested change cannot be made under the configuration in force.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Refusal {
    /// An add of a voter.
    AlreadyVoter(NodeId),
    /// A removal of a node that is neither voter nor learner (or a node without a raft id).
    NotAMember(NodeId),
    /// A removal of the last voter.
    LastVoter(NodeId),
}

/// What `change` must do first under `conf`. Errors: the [`Refusal`].
pub(super) fn plan(change: &VoterChange, conf: &ConfState) -> Result<FirstStep, Refusal> {
    let node = change.node();
    let id = codec::raft_id(node).ok_or(Refusal::NotAMember(node))?;
    let voter = conf.voters.contains(&id);
    let learner = conf.learners.contains(&id);
    match change {
        VoterChange::Add { .. } if voter => Err(Refusal::AlreadyVoter(node)),
        VoterChange::Add { .. } if learner => Ok(FirstStep::CatchUp),
        VoterChange::Add { .. } => Ok(FirstStep::AddLearner),
        VoterChange::Remove { .. } if voter && conf.voters.len() == 1 => {
            Err(Refusal::LastVoter(node))
        }
        VoterChange::Remove { .. } if voter || learner => Ok(FirstStep::Remove),
        VoterChange::Remove { .. } => Err(Refusal::NotAMember(node)),
    }
}

/// The single change `kind` of `node` as raft-rs's `ConfChangeV2` (a simple change: never a
/// joint configuration).
pub(super) fn conf_change(kind: ChangeKind, node: NodeId) -> Option<ConfChangeV2> {
    let change_type = match kind {
        ChangeKind::AddLearner => ConfChangeType::AddLearnerNode,
        ChangeKind::AddVoter => ConfChangeType::AddNode,
        ChangeKind::Remove => ConfChangeType::RemoveNode,
    };
    let mut single = ConfChangeSingle::default();
    single.set_change_type(change_type);
    single.node_id = codec::raft_id(node)?;
    let mut cc = ConfChangeV2::default();
    cc.set_transition(ConfChangeTransition::Auto);
    cc.set_changes(vec![single].into());
    Some(cc)
}

/// The change a committed configuration entry holds, with the added node's endpoint (the
/// entry's context; empty for a removal): `None` for an entry of another type, one that does
/// not parse, or one that is not a single change (this node never proposes those; raft-rs
/// turns a refused one into an empty normal entry).
pub(super) fn decode(entry: &Entry) -> Option<(ConfChangeV2, NodeId, ChangeKind, Bytes)> {
    if entry.get_entry_type() != EntryType::EntryConfChangeV2 {
        return None;
    }
    let cc = ConfChangeV2::parse_from_carllerche_bytes(&entry.data).ok()?;
    let [single] = cc.changes.as_slice() else {
        return None;
    };
    let node = codec::node_id(single.node_id)?;
    let kind = match single.get_change_type() {
        ConfChangeType::AddLearnerNode => ChangeKind::AddLearner,
        ConfChangeType::AddNode => ChangeKind::AddVoter,
        ConfChangeType::RemoveNode => ChangeKind::Remove,
    };
    let endpoint = match kind {
        ChangeKind::Remove => Bytes::new(),
        ChangeKind::AddLearner | ChangeKind::AddVoter => entry.context.clone(),
    };
    Some((cc, node, kind, endpoint))
}

/// The voter change a committed entry of a recovered log holds: its node, what it does, and
/// the added node's endpoint (empty for a removal); `None` for any other entry.
pub fn configuration_entry(entry: &Entry) -> Option<(NodeId, ChangeKind, Bytes)> {
    let (_, node, kind, endpoint) = decode(entry)?;
    Some((node, kind, endpoint))
}

/// Whether `node` is the only voter of a recovered store, for good: its stored configuration
/// has it alone, and no configuration entry follows the snapshot (one could have added a
/// voter). Then every entry it persisted is committed.
pub fn sole_voter(recovered: &super::Recovered, node: NodeId) -> bool {
    let conf = &recovered.conf_state;
    conf.learners.is_empty()
        && codec::raft_id(node).is_some_and(|id| conf.voters == [id])
        && recovered
            .entries
            .iter()
            .all(|e| e.get_entry_type() == EntryType::EntryNormal)
}

/// Node ids of raft ids, sorted.
pub(super) fn node_ids(ids: &[u64]) -> Vec<NodeId> {
    let mut nodes: Vec<NodeId> = ids.iter().filter_map(|&id| codec::node_id(id)).collect();
    nodes.sort_unstable();
    nodes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(voters: &[i32], learners: &[i32]) -> ConfState {
        let ids = |n: &[i32]| {
            n.iter()
                .filter_map(|&i| codec::raft_id(NodeId(i)))
                .collect()
        };
        ConfState {
            voters: ids(voters),
            learners: ids(learners),
            ..ConfState::default()
        }
    }

    fn add(node: i32) -> VoterChange {
        VoterChange::Add {
            node: NodeId(node),
            endpoint: Bytes::from_static(b"host:1"),
        }
    }

    fn remove(node: i32) -> VoterChange {
        VoterChange::Remove { node: NodeId(node) }
    }

    #[test]
    fn a_change_starts_from_the_configuration_in_force() {
        let c = conf(&[1, 2, 3], &[4]);
        assert_eq!(plan(&add(5), &c), Ok(FirstStep::AddLearner));
        assert_eq!(plan(&add(4), &c), Ok(FirstStep::CatchUp));
        assert_eq!(plan(&add(2), &c), Err(Refusal::AlreadyVoter(NodeId(2))));
        assert_eq!(plan(&remove(2), &c), Ok(FirstStep::Remove));
        assert_eq!(plan(&remove(4), &c), Ok(FirstStep::Remove));
        assert_eq!(plan(&remove(9), &c), Err(Refusal::NotAMember(NodeId(9))));
        assert_eq!(
            plan(&remove(1), &conf(&[1], &[])),
            Err(Refusal::LastVoter(NodeId(1)))
        );
        assert_eq!(plan(&add(-1), &c), Err(Refusal::NotAMember(NodeId(-1))));
    }

    #[test]
    fn a_change_reads_back_as_written() {
        for kind in [
            ChangeKind::AddLearner,
            ChangeKind::AddVoter,
            ChangeKind::Remove,
        ] {
            let cc = conf_change(kind, NodeId(7)).expect("a valid node");
            let mut entry = Entry::default();
            entry.set_entry_type(EntryType::EntryConfChangeV2);
            entry.data = cc.write_to_bytes().expect("encodes").into();
            let (read, node, read_kind, _) = decode(&entry).expect("decodes");
            assert_eq!((read, node, read_kind), (cc, NodeId(7), kind));
        }
        let normal = Entry {
            data: Bytes::from_static(b"x"),
            ..Entry::default()
        };
        assert_eq!(decode(&normal), None);
    }
}
