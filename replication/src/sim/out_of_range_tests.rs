//! A follower whose fetch offset is out of its leader's range, step by step over the
//! simulated disk (one leader, one follower, leader epoch 1, the follower out of the ISR):
//! - the leader answers a fetch below its log start offset with `OffsetOutOfRange` (Kafka's
//!   OFFSET_OUT_OF_RANGE), with or without a last fetched epoch;
//! - [`Partition::handle_out_of_range`] with the leader's log start above the follower's log
//!   end truncates the follower fully and starts it at the leader's log start (empty
//!   leader-epoch cache); the next fetch from there replicates the rest, byte for byte, and
//!   makes the follower an ISR candidate; with the leader's range covering the follower's
//!   end it changes nothing; with the leader's end below the follower's it truncates there;
//! - the follower's log start offset follows the leader's from each fetch answer
//!   ([`Partition::append_as_follower`]), and refuses one above its high watermark;
//! - a follower started at a leader's log start that falls inside a batch gets the batch
//!   whole and starts its log again at the batch's base (Kafka's
//!   `appendRecordsToFollowerOrFutureReplica`), its log start then back at the leader's.
//!
//! Not verified here: crashes part-way (storage's tests make those states by hand), the wire
//! (the broker's fetcher and the cluster test).

use super::test_records::records;
use super::{seeds, Executor, SeedGuard, SimDisk, SimLog, SimRuntime};
use crate::runtime::{Clock, NodeId};
use crate::{Acks, IsrConfig, Leadership, Partition, PartitionError, PartitionStore};
use bytes::{Bytes, BytesMut};
use std::rc::Rc;
use std::time::Duration;
use storage::{build_batch, LeaderEpoch, Offset, StorageError, TimestampMs};

type SimPartition = Partition<SimLog>;

const LEADER: NodeId = NodeId(1);
const FOLLOWER: NodeId = NodeId(2);

fn open(rt: &SimRuntime, id: NodeId) -> Rc<SimPartition> {
    Rc::new(Partition::new(
        SimLog::open(rt.clone(), SimDisk::default(), u64::MAX),
        id,
        Rc::new(rt.clone()),
    ))
}

/// Appends `n` one-record batches of values from `first` on the leader, acks=1.
async fn produce(leader: &Rc<SimPartition>, first: u64, n: u64) {
    for v in first..first + n {
        let value = v.to_be_bytes();
        let batch = build_batch(TimestampMs(0), &[value.as_slice()]);
        leader
            .append(
                storage::ValidatedBatches::validate(&batch).expect("a valid batch"),
                Acks::Leader,
                Duration::from_secs(1),
            )
            .await
            .expect("leader append");
    }
}

/// One follower fetch at its written offset and latest epoch, appended as the fetcher does.
/// Returns the fetch's expansion candidate.
async fn fetch_and_append(
    leader: &SimPartition,
    follower: &SimPartition,
    rt: &SimRuntime,
) -> Result<Option<NodeId>, PartitionError> {
    let read = leader
        .replica_fetch(
            FOLLOWER,
            follower.log().written_offset(),
            follower.log().latest_leader_epoch(),
            None,
            1 << 20,
            rt.now(),
        )
        .await?;
    assert_eq!(
        read.diverging_epoch, None,
        "one leader epoch: no divergence"
    );
    let mut bytes = BytesMut::new();
    for batch in &read.batches {
        bytes.extend_from_slice(&batch.to_vec());
    }
    follower
        .append_as_follower(bytes.freeze(), read.high_watermark, read.log_start_offset)
        .await?;
    Ok(read.expand_candidate)
}

fn out_of_range(result: &Result<impl std::fmt::Debug, PartitionError>) -> bool {
    matches!(
        result,
        Err(PartitionError::Storage(
            StorageError::OffsetOutOfRange { .. }
        ))
    )
}

/// The whole readable log of `p`: (offset, value, epoch) per record.
async fn whole(p: &SimPartition) -> Vec<(i64, u64, i32)> {
    let log = p.log();
    let batches = log
        .read(log.log_start_offset(), usize::MAX, log.log_end_offset())
        .await
        .expect("read the whole log");
    records(&batches).expect("records decode")
}

/// A leader at epoch 1 (ISR: itself) and its follower, both empty.
async fn leader_and_follower(rt: &SimRuntime) -> (Rc<SimPartition>, Rc<SimPartition>) {
    let leader = open(rt, LEADER);
    let follower = open(rt, FOLLOWER);
    let leadership = Leadership {
        leader_epoch: LeaderEpoch(1),
        partition_epoch: 1,
        replicas: vec![LEADER, FOLLOWER],
        isr: vec![LEADER],
    };
    let config = IsrConfig {
        min_insync_replicas: 1,
        replica_lag_time_max_ms: 30_000,
    };
    leader
        .become_leader(leadership, config, rt.now())
        .await
        .expect("become leader");
    follower.become_follower(LEADER, LeaderEpoch(1));
    (leader, follower)
}

async fn scenario(rt: SimRuntime) {
    let (leader, follower) = leader_and_follower(&rt).await;

    // The follower replicates offsets 0..4, then is away while the leader goes on to 10 and
    // DeleteRecords moves its log start to 7, past the follower's log end.
    produce(&leader, 0, 4).await;
    fetch_and_append(&leader, &follower, &rt)
        .await
        .expect("first fetch");
    assert_eq!(follower.log().log_end_offset(), Offset(4));
    produce(&leader, 4, 6).await;
    assert_eq!(
        leader
            .delete_records(Some(Offset(7)))
            .await
            .expect("delete"),
        Offset(7)
    );

    // Below the leader's log start: OFFSET_OUT_OF_RANGE, with or without a fetched epoch.
    for epoch in [Some(LeaderEpoch(1)), None] {
        let read = leader
            .replica_fetch(FOLLOWER, Offset(4), epoch, None, 1 << 20, rt.now())
            .await;
        assert!(
            out_of_range(&read),
            "fetch at 4 (epoch {epoch:?}): {read:?}"
        );
    }

    // Kafka's fetchOffsetAndTruncate: the leader's log start (7) is above the follower's log
    // end (4): truncate fully and start at 7.
    let leader_start = leader.log().log_start_offset();
    let leader_end = leader.log().written_offset();
    assert_eq!((leader_start, leader_end), (Offset(7), Offset(10)));
    let next = follower
        .handle_out_of_range(leader_start, leader_end)
        .await
        .expect("handle out of range");
    assert_eq!(next, Offset(7));
    let log = follower.log();
    assert_eq!(
        (
            log.log_start_offset(),
            log.log_end_offset(),
            log.high_watermark()
        ),
        (Offset(7), Offset(7), Offset(7))
    );
    assert_eq!(log.latest_leader_epoch(), None, "the epoch cache emptied");
    // From there the follower replicates the rest and becomes an ISR candidate.
    let candidate = fetch_and_append(&leader, &follower, &rt)
        .await
        .expect("fetch at 7");
    assert_eq!(follower.log().log_end_offset(), Offset(10));
    let candidate = match candidate {
        Some(c) => Some(c),
        None => fetch_and_append(&leader, &follower, &rt)
            .await
            .expect("fetch at 10"),
    };
    assert_eq!(candidate, Some(FOLLOWER));
    assert_eq!(whole(&follower).await, whole(&leader).await);
    assert_eq!(follower.log().log_start_offset(), Offset(7));
    assert_eq!(follower.log().latest_leader_epoch(), Some(LeaderEpoch(1)));

    // The leader's log start moves again: the follower's follows it from the fetch answer.
    produce(&leader, 10, 2).await;
    fetch_and_append(&leader, &follower, &rt)
        .await
        .expect("fetch at 10");
    leader
        .delete_records(Some(Offset(11)))
        .await
        .expect("delete");
    fetch_and_append(&leader, &follower, &rt)
        .await
        .expect("fetch at 12");
    assert_eq!(follower.log().log_start_offset(), Offset(11));
    assert_eq!(whole(&follower).await, whole(&leader).await);
    // A leader log start above the follower's high watermark is refused, nothing moves.
    let above = follower
        .append_as_follower(Bytes::new(), follower.high_watermark(), Offset(13))
        .await;
    assert!(
        matches!(
            above,
            Err(PartitionError::OffsetOutOfRange {
                offset: Offset(13),
                ..
            })
        ),
        "{above:?}"
    );
    assert_eq!(follower.log().log_start_offset(), Offset(11));

    // The leader's range covers the follower's end: nothing to truncate.
    let end = follower.log().log_end_offset();
    let next = follower
        .handle_out_of_range(Offset(11), end)
        .await
        .expect("in range");
    assert_eq!((next, follower.log().log_start_offset()), (end, Offset(11)));
    // The leader's end below the follower's (an unclean election): truncate to it, and fully
    // when it is below the follower's log start too.
    let next = follower
        .handle_out_of_range(Offset(11), Offset(11))
        .await
        .expect("truncate to the leader's end");
    assert_eq!(next, Offset(11));
    assert_eq!(follower.log().log_start_offset(), Offset(11));
    let next = follower
        .handle_out_of_range(Offset(0), Offset(5))
        .await
        .expect("truncate fully at the leader's end");
    assert_eq!(
        (next, follower.log().log_start_offset()),
        (Offset(5), Offset(5))
    );
    // Only a follower does this.
    assert!(matches!(
        leader.handle_out_of_range(Offset(0), Offset(0)).await,
        Err(PartitionError::NotLeaderOrFollower { .. })
    ));
}

/// The leader's log start inside a batch: the follower, started there, gets the whole batch
/// (from its base) and starts its log again at the batch's base, then at the leader's log
/// start.
async fn straddling(rt: SimRuntime) {
    let (leader, follower) = leader_and_follower(&rt).await;
    for (first, n) in [(0u64, 4u64), (4, 6)] {
        let values: Vec<[u8; 8]> = (first..first + n).map(u64::to_be_bytes).collect();
        let slices: Vec<&[u8]> = values.iter().map(|v| v.as_slice()).collect();
        leader
            .append(
                storage::ValidatedBatches::validate(&build_batch(TimestampMs(0), &slices))
                    .expect("a valid batch"),
                Acks::Leader,
                Duration::from_secs(1),
            )
            .await
            .expect("leader append");
    }
    leader
        .delete_records(Some(Offset(7)))
        .await
        .expect("delete");
    assert!(out_of_range(
        &fetch_and_append(&leader, &follower, &rt).await
    ));
    follower
        .handle_out_of_range(Offset(7), Offset(10))
        .await
        .expect("truncate fully at 7");
    assert_eq!(follower.log().log_end_offset(), Offset(7));
    // The leader's read from 7 starts at the batch's base, 4.
    fetch_and_append(&leader, &follower, &rt)
        .await
        .expect("the straddling batch is taken whole");
    let log = follower.log();
    assert_eq!(
        (log.log_start_offset(), log.log_end_offset()),
        (Offset(7), Offset(10))
    );
    assert_eq!(whole(&follower).await, whole(&leader).await);
    // Only an empty log restarts: a batch below a non-empty log's end is refused.
    let stale = leader
        .log()
        .read(Offset(7), 1 << 20, Offset(10))
        .await
        .expect("read");
    let refused = follower
        .append_as_follower(
            Bytes::from(stale[0].to_vec()),
            follower.high_watermark(),
            Offset(7),
        )
        .await;
    assert!(
        matches!(
            refused,
            Err(PartitionError::Storage(
                StorageError::UnexpectedAppendOffset { .. }
            ))
        ),
        "{refused:?}"
    );
}

#[test]
fn a_follower_started_inside_the_leaders_first_batch_takes_it_whole() {
    for seed in seeds(0x5742_dd1e, 8) {
        let _guard = SeedGuard(seed);
        let mut ex = Executor::new(seed);
        let rt = ex.runtime();
        ex.run_until(straddling(rt))
            .expect("the scenario completes");
    }
}

#[test]
fn a_follower_below_the_leaders_log_start_truncates_fully_and_catches_up() {
    for seed in seeds(0x0f0f_2a9e, 8) {
        let _guard = SeedGuard(seed);
        let mut ex = Executor::new(seed);
        let rt = ex.runtime();
        ex.run_until(scenario(rt)).expect("the scenario completes");
    }
}
