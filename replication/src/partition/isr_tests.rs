//! Tests of [`LeaderIsr`]: one per rule, then a model test (random operation sequences checked
//! after each step against a reference that tracks the facts independently).

use super::*;
use proptest::prelude::*;

const L: NodeId = NodeId(1);
const F2: NodeId = NodeId(2);
const F3: NodeId = NodeId(3);
const LAG_MS: i64 = 10_000;

fn config(min_insync_replicas: usize) -> IsrConfig {
    IsrConfig {
        min_insync_replicas,
        replica_lag_time_max_ms: LAG_MS,
    }
}

fn leadership(isr: &[NodeId]) -> Leadership {
    Leadership {
        leader_epoch: LeaderEpoch(5),
        partition_epoch: 7,
        replicas: vec![L, F2, F3],
        isr: isr.to_vec(),
    }
}

/// Leader 1 of replicas 1, 2, 3 with ISR `isr`, LEO 10 and HW 4, at time 1000 ms.
fn leader(isr: &[NodeId], min_isr: usize) -> LeaderIsr {
    LeaderIsr::become_leader(
        L,
        config(min_isr),
        leadership(isr),
        Offset(10),
        Offset(4),
        1000,
    )
    .unwrap()
}

#[test]
fn become_leader_starts_the_epoch_at_the_log_end_and_resets_followers() {
    let s = leader(&[L, F2], 1);
    assert_eq!(s.leader_epoch_start_offset(), Offset(10));
    assert_eq!(s.high_watermark(), Offset(4));
    let f2 = s.follower(F2).unwrap();
    assert_eq!(f2.last_caught_up_time_ms, 1000, "ISR member caught up now");
    assert_eq!(f2.log_end_offset, None);
    assert_eq!(s.follower(F3).unwrap().last_caught_up_time_ms, 0);
    assert!(s.follower(L).is_none());
}

#[test]
fn become_leader_alone_in_the_isr_moves_the_hw_to_the_log_end() {
    let s = leader(&[L], 1);
    assert_eq!(s.high_watermark(), Offset(10));
}

#[test]
fn become_leader_refuses_a_bad_isr_or_config() {
    for isr in [vec![F2], vec![L, L], vec![L, NodeId(9)]] {
        let r = LeaderIsr::become_leader(L, config(1), leadership(&isr), Offset(0), Offset(0), 0);
        assert!(matches!(r, Err(IsrError::InvalidIsr { .. })), "{isr:?}");
    }
    let r = LeaderIsr::become_leader(L, config(0), leadership(&[L]), Offset(0), Offset(0), 0);
    assert!(matches!(r, Err(IsrError::InvalidConfig { .. })));
}

#[test]
fn a_fetch_at_the_leader_log_end_is_caught_up_now() {
    let mut s = leader(&[L, F2], 1);
    s.on_follower_fetch(F2, Offset(10), Some(3), 2000).unwrap();
    let f = s.follower(F2).unwrap();
    assert_eq!(f.last_caught_up_time_ms, 2000);
    assert_eq!(f.last_fetch_time_ms, 2000);
    assert_eq!(f.last_fetch_leader_log_end_offset, Some(Offset(10)));
    assert_eq!(f.broker_epoch, Some(3));
}

#[test]
fn a_fetch_at_the_previous_fetch_leader_log_end_is_caught_up_at_that_fetch() {
    let mut s = leader(&[L, F2], 1);
    s.on_follower_fetch(F2, Offset(10), None, 2000).unwrap();
    s.on_leader_append(Offset(20)).unwrap();
    // Behind the LEO (20), at the LEO of the previous fetch (10): caught up at 2000.
    s.on_follower_fetch(F2, Offset(10), None, 3000).unwrap();
    s.on_leader_append(Offset(30)).unwrap();
    // At the previous fetch's leader LEO (20): caught up at 3000.
    s.on_follower_fetch(F2, Offset(20), None, 4000).unwrap();
    assert_eq!(s.follower(F2).unwrap().last_caught_up_time_ms, 3000);
    // Below it (30): unchanged.
    s.on_follower_fetch(F2, Offset(25), None, 5000).unwrap();
    assert_eq!(s.follower(F2).unwrap().last_caught_up_time_ms, 3000);
}

#[test]
fn a_fetch_from_a_non_follower_is_an_error() {
    let mut s = leader(&[L, F2], 1);
    for r in [NodeId(9), L] {
        let e = s.on_follower_fetch(r, Offset(0), None, 0).unwrap_err();
        assert!(matches!(e, IsrError::NotAFollower { .. }), "{r:?}");
    }
}

#[test]
fn a_fetch_with_an_older_broker_epoch_or_beyond_the_log_end_is_an_error() {
    let mut s = leader(&[L, F2], 1);
    s.on_follower_fetch(F2, Offset(5), Some(8), 0).unwrap();
    let e = s.on_follower_fetch(F2, Offset(6), Some(7), 0).unwrap_err();
    assert!(matches!(e, IsrError::StaleBrokerEpoch { known: 8, .. }));
    let e = s.on_follower_fetch(F2, Offset(11), Some(8), 0).unwrap_err();
    assert!(matches!(e, IsrError::FetchOffsetOutOfRange { .. }));
    // A newer epoch (the follower restarted) and a fetch without one are accepted.
    s.on_follower_fetch(F2, Offset(6), Some(9), 0).unwrap();
    s.on_follower_fetch(F2, Offset(6), None, 0).unwrap();
}

#[test]
fn a_fetch_broker_epoch_below_the_registered_one_is_refused_and_only_a_match_joins_the_isr() {
    // KIP-903: registered (alive) epoch 8.
    let e = check_follower_broker_epoch(F2, Some(7), Some(8)).unwrap_err();
    assert!(matches!(
        e,
        IsrError::StaleBrokerEpoch {
            broker_epoch: 7,
            known: 8,
            ..
        }
    ));
    assert_eq!(check_follower_broker_epoch(F2, Some(8), Some(8)), Ok(true));
    // No epoch (-1, or Fetch before v15) skips the check and is eligible.
    assert_eq!(check_follower_broker_epoch(F2, None, Some(8)), Ok(true));
    // An epoch the image has not seen yet is served but not eligible.
    assert_eq!(check_follower_broker_epoch(F2, Some(9), Some(8)), Ok(false));
    // A fenced or unregistered broker (no alive epoch) is served, never eligible.
    assert_eq!(check_follower_broker_epoch(F2, Some(3), None), Ok(false));
    assert_eq!(check_follower_broker_epoch(F2, None, None), Ok(false));
}

#[test]
fn hw_is_the_least_log_end_of_the_isr_and_never_regresses() {
    let mut s = leader(&[L, F2, F3], 1);
    let o = s.on_follower_fetch(F2, Offset(8), None, 0).unwrap();
    assert!(!o.high_watermark_moved, "F3 has not fetched");
    let o = s.on_follower_fetch(F3, Offset(6), None, 0).unwrap();
    assert!(o.high_watermark_moved);
    assert_eq!(s.high_watermark(), Offset(6));
    // F3 truncates: the HW stays.
    s.on_follower_fetch(F3, Offset(5), None, 0).unwrap();
    assert_eq!(s.high_watermark(), Offset(6));
    s.on_follower_fetch(F3, Offset(10), None, 0).unwrap();
    assert_eq!(s.high_watermark(), Offset(8));
}

#[test]
fn the_leader_append_moves_the_hw_only_for_an_isr_of_the_leader_alone() {
    let mut s = leader(&[L], 1);
    assert!(s.on_leader_append(Offset(15)).unwrap());
    assert_eq!(s.high_watermark(), Offset(15));
    let mut s = leader(&[L, F2], 1);
    assert!(!s.on_leader_append(Offset(15)).unwrap());
    let e = s.on_leader_append(Offset(14)).unwrap_err();
    assert!(matches!(e, IsrError::LogEndOffsetRegressed { .. }));
}

#[test]
fn hw_does_not_move_below_min_isr() {
    let mut s = leader(&[L, F2], 3);
    s.on_follower_fetch(F2, Offset(10), None, 0).unwrap();
    assert_eq!(s.high_watermark(), Offset(4));
    // min.insync.replicas above the replica count is capped by it (Kafka's effectiveMinIsr).
    let mut s = leader(&[L, F2, F3], 5);
    s.on_follower_fetch(F2, Offset(10), None, 0).unwrap();
    s.on_follower_fetch(F3, Offset(10), None, 0).unwrap();
    assert_eq!(s.high_watermark(), Offset(10));
}

#[test]
fn a_pending_shrink_keeps_the_hw_waiting_for_the_removed_follower() {
    let mut s = leader(&[L, F2], 1);
    s.on_follower_fetch(F2, Offset(6), None, 0).unwrap();
    assert_eq!(s.high_watermark(), Offset(6));
    let p = s.propose(vec![L]).unwrap();
    assert_eq!(s.maximal_isr(), vec![L, F2]);
    assert!(
        !s.on_leader_append(Offset(20)).unwrap(),
        "cut-off leader waits"
    );
    assert_eq!(s.high_watermark(), Offset(6));
    let o = s.on_alter_committed(p.proposal_id, 8, &[L]).unwrap();
    assert_eq!(
        o,
        AlterOutcome::Committed {
            high_watermark_moved: true
        }
    );
    assert_eq!(s.high_watermark(), Offset(20));
    assert_eq!(s.partition_epoch(), 8);
}

#[test]
fn a_pending_expand_makes_the_hw_wait_for_the_new_member() {
    let mut s = leader(&[L], 1);
    assert_eq!(s.high_watermark(), Offset(10));
    let o = s.on_follower_fetch(F2, Offset(10), None, 0).unwrap();
    assert_eq!(o.expand_candidate, Some(F2));
    s.propose(vec![L, F2]).unwrap();
    assert!(!s.on_leader_append(Offset(20)).unwrap());
    assert!(
        s.on_follower_fetch(F2, Offset(15), None, 0)
            .unwrap()
            .high_watermark_moved
    );
    assert_eq!(s.high_watermark(), Offset(15));
}

/// Metadata at the current leader and partition epochs (the state the leader already holds,
/// e.g. after an answer told it the same) keeps a pending expansion: the controller may still
/// commit it, so the HW keeps waiting for the new member. Found by the ISR simulation (seed
/// 4867090180461559321): dropped, the HW passed records the member then lacked in the
/// controller's ISR.
#[test]
fn metadata_at_the_current_epochs_keeps_a_pending_change() {
    let mut s = leader(&[L], 1);
    s.on_follower_fetch(F2, Offset(10), None, 0).unwrap();
    s.propose(vec![L, F2]).unwrap();
    assert!(!s
        .update_leadership(leadership(&[L]), Offset(20), 0)
        .unwrap());
    assert_eq!(s.pending().map(|p| p.new_isr.clone()), Some(vec![L, F2]));
    assert_eq!(s.high_watermark(), Offset(10), "waits for F2 at 10");
    // A newer partition epoch drops it.
    let mut newer = leadership(&[L, F2]);
    newer.partition_epoch = 8;
    s.update_leadership(newer, Offset(20), 0).unwrap();
    assert!(s.pending().is_none());
    assert_eq!(s.isr(), vec![L, F2]);
}

#[test]
fn shrink_candidates_are_isr_followers_not_caught_up_within_the_lag() {
    let mut s = leader(&[L, F2, F3], 1);
    s.on_follower_fetch(F2, Offset(10), None, 1000).unwrap();
    s.on_leader_append(Offset(20)).unwrap();
    assert!(s.shrink_candidates(1000 + LAG_MS).is_empty());
    assert_eq!(s.shrink_candidates(1001 + LAG_MS), vec![F2, F3]);
    // A follower at the leader's LEO is never out of sync.
    s.on_follower_fetch(F3, Offset(20), None, 1000).unwrap();
    assert_eq!(s.shrink_candidates(i64::MAX), vec![F2]);
    s.propose(vec![L, F3]).unwrap();
    assert!(
        s.shrink_candidates(i64::MAX).is_empty(),
        "nothing while pending"
    );
}

#[test]
fn expand_candidates_have_reached_the_hw_and_the_epoch_start() {
    let mut s = leader(&[L, F2], 1);
    s.on_follower_fetch(F2, Offset(10), None, 0).unwrap();
    assert_eq!(s.high_watermark(), Offset(10));
    s.on_leader_append(Offset(30)).unwrap();
    s.on_follower_fetch(F2, Offset(20), None, 0).unwrap();
    assert_eq!(s.high_watermark(), Offset(20));
    // At the epoch start (10) but below the HW (20): no.
    let o = s.on_follower_fetch(F3, Offset(10), None, 0).unwrap();
    assert_eq!(o.expand_candidate, None);
    let o = s.on_follower_fetch(F3, Offset(20), None, 0).unwrap();
    assert_eq!(o.expand_candidate, Some(F3));
    assert_eq!(s.expand_candidates(), vec![F3]);

    // Above the HW but below the epoch start: no.
    let mut s = leader(&[L, F2], 1);
    assert_eq!(s.high_watermark(), Offset(4));
    let o = s.on_follower_fetch(F3, Offset(9), None, 0).unwrap();
    assert_eq!(o.expand_candidate, None);
    // ISR members and anything while a change is pending: no.
    s.on_follower_fetch(F2, Offset(10), None, 0).unwrap();
    s.propose(vec![L]).unwrap();
    let o = s.on_follower_fetch(F3, Offset(10), None, 0).unwrap();
    assert_eq!(o.expand_candidate, None);
}

#[test]
fn propose_only_when_nothing_is_pending() {
    let mut s = leader(&[L, F2], 1);
    let p = s.propose(vec![L]).unwrap();
    assert_eq!(p.leader_id, L);
    assert_eq!(p.leader_epoch, LeaderEpoch(5));
    assert_eq!(p.partition_epoch, 7);
    assert_eq!(p.new_isr, vec![L]);
    let e = s.propose(vec![L, F3]).unwrap_err();
    assert!(matches!(e, IsrError::AlterPending { .. }));
    let mut s = leader(&[L, F2], 1);
    assert!(matches!(
        s.propose(vec![F2]),
        Err(IsrError::InvalidIsr { .. })
    ));
    assert!(s.pending().is_none());
}

#[test]
fn a_stale_answer_is_ignored() {
    let mut s = leader(&[L, F2], 1);
    let p = s.propose(vec![L]).unwrap();
    assert_eq!(
        s.on_alter_committed(p.proposal_id + 1, 8, &[L]).unwrap(),
        AlterOutcome::Ignored
    );
    assert_eq!(
        s.on_alter_committed(p.proposal_id, 6, &[L]).unwrap(),
        AlterOutcome::Ignored,
        "older partition epoch"
    );
    assert_eq!(
        s.on_alter_refused(p.proposal_id + 1, AlterRefusal::OperationNotAttempted),
        AlterOutcome::Ignored
    );
    assert!(s.pending().is_some());
    s.on_alter_refused(p.proposal_id, AlterRefusal::IneligibleReplica);
    // Answered: a late duplicate changes nothing.
    assert_eq!(
        s.on_alter_committed(p.proposal_id, 8, &[L]).unwrap(),
        AlterOutcome::Ignored
    );
    assert_eq!(s.isr(), vec![L, F2]);
}

#[test]
fn refusals_revert_stay_pending_or_retry_as_kafka() {
    for (refusal, reverted) in [
        (AlterRefusal::OperationNotAttempted, true),
        (AlterRefusal::IneligibleReplica, true),
        (AlterRefusal::UnknownTopicOrPartition, false),
        (AlterRefusal::FencedLeaderEpoch, false),
        (AlterRefusal::InvalidUpdateVersion, false),
        (AlterRefusal::InvalidRequest, false),
        (AlterRefusal::NewLeaderElected, false),
    ] {
        let mut s = leader(&[L, F2], 1);
        let p = s.propose(vec![L]).unwrap();
        let o = s.on_alter_refused(p.proposal_id, refusal);
        if reverted {
            assert!(matches!(o, AlterOutcome::Reverted { .. }), "{refusal:?}");
            assert!(s.pending().is_none());
        } else {
            assert_eq!(o, AlterOutcome::StaysPending, "{refusal:?}");
            assert_eq!(s.pending(), Some(&p));
        }
        assert_eq!(s.isr(), vec![L, F2]);
    }
    let mut s = leader(&[L, F2], 1);
    let p = s.propose(vec![L]).unwrap();
    assert_eq!(
        s.on_alter_refused(p.proposal_id, AlterRefusal::Retriable),
        AlterOutcome::Retry(p)
    );
}

#[test]
fn a_refused_expansion_lets_the_hw_move_without_the_new_member() {
    let mut s = leader(&[L], 1);
    s.on_follower_fetch(F2, Offset(10), None, 0).unwrap();
    let p = s.propose(vec![L, F2]).unwrap();
    s.on_leader_append(Offset(20)).unwrap();
    assert_eq!(s.high_watermark(), Offset(10));
    let o = s.on_alter_refused(p.proposal_id, AlterRefusal::IneligibleReplica);
    assert_eq!(
        o,
        AlterOutcome::Reverted {
            high_watermark_moved: true
        }
    );
    assert_eq!(s.high_watermark(), Offset(20));
}

#[test]
fn new_metadata_replaces_the_isr_and_a_new_epoch_restarts_it() {
    let mut s = leader(&[L, F2], 1);
    s.on_follower_fetch(F2, Offset(10), Some(4), 1000).unwrap();
    s.propose(vec![L]).unwrap();
    s.on_leader_append(Offset(12)).unwrap();
    // An older partition epoch is ignored.
    let mut old = leadership(&[L]);
    old.partition_epoch = 6;
    assert!(!s.update_leadership(old, Offset(12), 2000).unwrap());
    assert!(s.pending().is_some());
    // A new leader epoch: pending dropped, epoch start at the LEO, LEO kept.
    let mut new = leadership(&[L, F2, F3]);
    new.leader_epoch = LeaderEpoch(6);
    new.partition_epoch = 9;
    s.update_leadership(new, Offset(12), 2000).unwrap();
    assert!(s.pending().is_none());
    assert_eq!(s.isr(), vec![L, F2, F3]);
    assert_eq!(s.leader_epoch(), LeaderEpoch(6));
    assert_eq!(s.leader_epoch_start_offset(), Offset(12));
    let f2 = s.follower(F2).unwrap();
    assert_eq!(f2.log_end_offset, Some(Offset(10)));
    assert_eq!(f2.last_caught_up_time_ms, 2000);
    assert_eq!(f2.last_fetch_leader_log_end_offset, Some(Offset(12)));
    assert_eq!(f2.broker_epoch, Some(4));
}

#[test]
fn produce_check_refuses_below_min_isr() {
    let s = leader(&[L, F2], 2);
    s.produce_check().unwrap();
    let s = leader(&[L], 2);
    let e = s.produce_check().unwrap_err();
    assert!(matches!(
        e,
        IsrError::NotEnoughReplicas {
            min_insync_replicas: 2,
            ..
        }
    ));
}

#[test]
fn ack_state_as_check_enough_replicas_reach_offset() {
    let mut s = leader(&[L, F2], 2);
    assert_eq!(s.ack_state(Offset(4)), AckState::Done);
    assert_eq!(s.ack_state(Offset(5)), AckState::Waiting);
    s.on_follower_fetch(F2, Offset(8), None, 0).unwrap();
    assert_eq!(s.ack_state(Offset(8)), AckState::Done);
    // Committed shrink below min ISR: what the HW passed is answered with error 20.
    let p = s.propose(vec![L]).unwrap();
    assert_eq!(
        s.ack_state(Offset(8)),
        AckState::Done,
        "maximal ISR still 2"
    );
    s.on_alter_committed(p.proposal_id, 8, &[L]).unwrap();
    assert_eq!(
        s.ack_state(Offset(8)),
        AckState::NotEnoughReplicasAfterAppend
    );
    assert_eq!(s.ack_state(Offset(9)), AckState::Waiting);
}

// ---- The model test -------------------------------------------------------------------------

#[derive(Clone, Debug)]
enum Op {
    Append(u8),
    /// Follower 2 or 3 fetches at `frac`/255 of the leader's LEO.
    Fetch(bool, u8),
    Tick(u16),
    /// Propose the shrink or the expansion the state machine suggests.
    ProposeShrink,
    ProposeExpand,
    /// Propose an arbitrary ISR holding the leader: bit 0 → 2, bit 1 → 3.
    ProposeAny(u8),
    Commit,
    CommitStale,
    Refuse(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u8..8).prop_map(Op::Append),
        6 => (any::<bool>(), any::<u8>()).prop_map(|(f, o)| Op::Fetch(f, o)),
        2 => (0u16..15_000).prop_map(Op::Tick),
        1 => Just(Op::ProposeShrink),
        1 => Just(Op::ProposeExpand),
        1 => (0u8..4).prop_map(Op::ProposeAny),
        2 => Just(Op::Commit),
        1 => Just(Op::CommitStale),
        1 => (0u8..8).prop_map(Op::Refuse),
    ]
}

const REFUSALS: [AlterRefusal; 8] = [
    AlterRefusal::OperationNotAttempted,
    AlterRefusal::IneligibleReplica,
    AlterRefusal::UnknownTopicOrPartition,
    AlterRefusal::FencedLeaderEpoch,
    AlterRefusal::InvalidUpdateVersion,
    AlterRefusal::InvalidRequest,
    AlterRefusal::NewLeaderElected,
    AlterRefusal::Retriable,
];

/// The reference: the facts as the test's controller and followers know them, kept apart from
/// the state machine's own bookkeeping.
struct Model {
    min_isr: usize,
    leader_leo: i64,
    follower_leo: BTreeMap<NodeId, Option<i64>>,
    committed: BTreeSet<NodeId>,
    pending: Option<(u64, BTreeSet<NodeId>)>,
    partition_epoch: i32,
    hw: i64,
}

impl Model {
    fn maximal(&self) -> BTreeSet<NodeId> {
        let mut m = self.committed.clone();
        if let Some((_, p)) = &self.pending {
            m.extend(p.iter().copied());
        }
        m
    }

    /// Checks the state machine after one step; `hw_before` is the HW before it.
    fn check(&mut self, s: &LeaderIsr, hw_before: i64) {
        let hw = s.high_watermark().0;
        assert!(hw >= hw_before, "HW regressed from {hw_before} to {hw}");
        assert!(hw <= self.leader_leo, "HW {hw} above the leader LEO");
        assert_eq!(s.isr(), self.committed.iter().copied().collect::<Vec<_>>());
        assert_eq!(
            s.maximal_isr(),
            self.maximal().iter().copied().collect::<Vec<_>>()
        );
        if hw > hw_before {
            assert!(
                self.committed.len() >= self.min_isr.min(3),
                "HW moved to {hw} with ISR {:?} below min ISR {}",
                self.committed,
                self.min_isr
            );
            for r in self.maximal() {
                if r == L {
                    continue;
                }
                let leo = self.follower_leo[&r];
                assert!(
                    leo.is_some_and(|l| hw <= l),
                    "HW {hw} above maximal-ISR member {r:?}'s LEO {leo:?}"
                );
            }
        }
        self.hw = hw;
    }
}

fn run(min_isr: usize, start_isr: Vec<NodeId>, ops: Vec<Op>) {
    let mut now_ms = 1000i64;
    let mut s = LeaderIsr::become_leader(
        L,
        config(min_isr),
        leadership(&start_isr),
        Offset(10),
        Offset(0),
        now_ms,
    )
    .unwrap();
    let mut m = Model {
        min_isr,
        leader_leo: 10,
        follower_leo: [(F2, None), (F3, None)].into_iter().collect(),
        committed: start_isr.iter().copied().collect(),
        pending: None,
        partition_epoch: 7,
        hw: 0,
    };
    m.check(&s, 0);
    for op in ops {
        let hw_before = m.hw;
        match op {
            Op::Append(n) => {
                m.leader_leo += i64::from(n);
                s.on_leader_append(Offset(m.leader_leo)).unwrap();
            }
            Op::Fetch(f3, frac) => {
                let f = if f3 { F3 } else { F2 };
                let offset = m.leader_leo * i64::from(frac) / 255;
                s.on_follower_fetch(f, Offset(offset), Some(1), now_ms)
                    .unwrap();
                m.follower_leo.insert(f, Some(offset));
            }
            Op::Tick(ms) => now_ms += i64::from(ms),
            Op::ProposeShrink | Op::ProposeExpand | Op::ProposeAny(_) => {
                let new: BTreeSet<NodeId> = match op {
                    Op::ProposeShrink => {
                        let out = s.shrink_candidates(now_ms);
                        m.committed
                            .iter()
                            .filter(|r| !out.contains(r))
                            .copied()
                            .collect()
                    }
                    Op::ProposeExpand => {
                        let mut isr = m.committed.clone();
                        isr.extend(s.expand_candidates());
                        isr
                    }
                    Op::ProposeAny(bits) => [(L, true), (F2, bits & 1 != 0), (F3, bits & 2 != 0)]
                        .into_iter()
                        .filter(|&(_, keep)| keep)
                        .map(|(r, _)| r)
                        .collect(),
                    _ => unreachable!(),
                };
                match s.propose(new.iter().copied().collect()) {
                    Ok(p) => {
                        assert!(m.pending.is_none());
                        m.pending = Some((p.proposal_id, new));
                    }
                    Err(IsrError::AlterPending { .. }) => assert!(m.pending.is_some()),
                    Err(e) => panic!("{e}"),
                }
            }
            Op::Commit => {
                if let Some((id, isr)) = m.pending.take() {
                    m.partition_epoch += 1;
                    let isr_vec: Vec<_> = isr.iter().copied().collect();
                    let o = s
                        .on_alter_committed(id, m.partition_epoch, &isr_vec)
                        .unwrap();
                    assert!(matches!(o, AlterOutcome::Committed { .. }));
                    m.committed = isr;
                }
            }
            Op::CommitStale => {
                let id = m.pending.as_ref().map_or(0, |(id, _)| id + 1);
                let o = s
                    .on_alter_committed(id, m.partition_epoch + 1, &[L])
                    .unwrap();
                assert_eq!(o, AlterOutcome::Ignored);
            }
            Op::Refuse(k) => {
                if let Some((id, _)) = &m.pending {
                    let refusal = REFUSALS[usize::from(k)];
                    match s.on_alter_refused(*id, refusal) {
                        AlterOutcome::Reverted { .. } => m.pending = None,
                        AlterOutcome::StaysPending | AlterOutcome::Retry(_) => {}
                        o => panic!("{o:?}"),
                    }
                }
            }
        }
        m.check(&s, hw_before);
        // acks=all agrees with the HW and the maximal ISR.
        let ack = s.ack_state(Offset(m.hw));
        let expected = if m.maximal().len() >= min_isr.min(3) {
            AckState::Done
        } else {
            AckState::NotEnoughReplicasAfterAppend
        };
        assert_eq!(ack, expected);
        assert_eq!(s.ack_state(Offset(m.hw + 1)), AckState::Waiting);
    }
}

fn start_isr() -> impl Strategy<Value = Vec<NodeId>> {
    prop_oneof![
        Just(vec![L]),
        Just(vec![L, F2]),
        Just(vec![L, F3]),
        Just(vec![L, F2, F3]),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The HW never regresses, never passes a maximal-ISR member's LEO when it moves, and
    /// never moves while the committed ISR is below min ISR.
    #[test]
    fn hw_rules_hold_over_random_sequences(
        min_isr in 1usize..=3,
        start in start_isr(),
        ops in proptest::collection::vec(op(), 1..80),
    ) {
        run(min_isr, start, ops);
    }
}
