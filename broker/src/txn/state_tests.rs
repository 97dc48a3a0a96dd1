//! The transaction state machine's transitions and errors, against Kafka's
//! `TransactionMetadata` / `TransactionCoordinator` behaviour.

use super::*;

fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition {
        topic: topic.to_string(),
        partition,
    }
}

fn set(tps: &[TopicPartition]) -> BTreeSet<TopicPartition> {
    tps.iter().cloned().collect()
}

/// A new id after its first InitProducerId: producer 7, epoch 0, Empty.
fn initialised() -> TxnMetadata {
    let mut m = TxnMetadata::new("t", 7, 60_000, 1_000);
    let InitStep::Write(t) = m.init_producer_id(60_000, None, None, 1_000).expect("init") else {
        panic!("a new id bumps its epoch to 0");
    };
    assert_eq!((t.producer_id, t.producer_epoch), (7, 0));
    m.complete(t).expect("applies");
    m
}

/// `m` with `partitions` added and applied: Ongoing.
fn ongoing(m: &mut TxnMetadata, partitions: &[TopicPartition], now_ms: i64) {
    let t = m
        .add_partitions(m.producer_id, m.producer_epoch, &set(partitions), now_ms)
        .expect("adds")
        .expect("new partitions write");
    m.complete(t).expect("applies");
    assert_eq!(m.state, TxnState::Ongoing);
}

#[test]
fn states_have_kafkas_ids_names_and_previous_states() {
    for id in 0..8 {
        let s = TxnState::from_id(id).expect("Kafka defines ids 0-7");
        assert_eq!(s.id(), id);
    }
    assert_eq!(TxnState::from_id(8), None);
    assert_eq!(TxnState::PrepareEpochFence.name(), "PrepareEpochFence");
    assert!(TxnState::PrepareAbort
        .valid_previous()
        .contains(&TxnState::PrepareEpochFence));
    assert!(!TxnState::PrepareCommit
        .valid_previous()
        .contains(&TxnState::Empty));
    assert!(TxnState::CompleteAbort.expiration_allowed());
    assert!(!TxnState::Ongoing.expiration_allowed());
}

#[test]
fn the_timeout_is_checked_against_the_maximum() {
    assert_eq!(check_timeout(60_000, 900_000), Ok(()));
    assert_eq!(check_timeout(900_000, 900_000), Ok(()));
    for bad in [0, -1, 900_001] {
        assert_eq!(
            check_timeout(bad, 900_000),
            Err(TxnError::InvalidTransactionTimeout)
        );
    }
}

#[test]
fn a_commit_goes_ongoing_prepare_complete_and_a_retry_is_answered_as_done() {
    let mut m = initialised();
    ongoing(&mut m, &[tp("a", 0)], 2_000);
    assert_eq!(m.start_ms, 2_000);
    // Adding a partition already in: nothing to write.
    assert_eq!(m.add_partitions(7, 0, &set(&[tp("a", 0)]), 2_100), Ok(None));
    // Another partition later keeps the start time.
    ongoing(&mut m, &[tp("b", 1)], 2_200);
    assert_eq!(m.start_ms, 2_000);
    assert_eq!(m.partitions, set(&[tp("a", 0), tp("b", 1)]));

    let EndStep::Write(prepare) = m.end_txn(7, 0, true, 3_000).expect("ends") else {
        panic!("an open transaction writes PrepareCommit");
    };
    assert_eq!(prepare.state, TxnState::PrepareCommit);
    // While the PrepareCommit is written: everything else waits.
    assert_eq!(
        m.end_txn(7, 0, true, 3_001),
        Err(TxnError::ConcurrentTransactions)
    );
    assert_eq!(
        m.add_partitions(7, 0, &set(&[tp("c", 0)]), 3_001),
        Err(TxnError::ConcurrentTransactions)
    );
    m.complete(prepare).expect("applies");
    // The markers are being sent: a retried commit waits, an abort is refused.
    assert_eq!(
        m.end_txn(7, 0, true, 3_002),
        Err(TxnError::ConcurrentTransactions)
    );
    assert_eq!(
        m.end_txn(7, 0, false, 3_002),
        Err(TxnError::InvalidTxnState)
    );
    assert_eq!(
        m.init_producer_id(60_000, None, None, 3_002),
        Err(TxnError::ConcurrentTransactions)
    );
    let complete = m.prepare_complete(3_500).expect("completes");
    assert_eq!(complete.state, TxnState::CompleteCommit);
    assert!(complete.partitions.is_empty());
    m.complete(complete).expect("applies");
    assert_eq!(m.end_txn(7, 0, true, 4_000), Ok(EndStep::Done));
    assert_eq!(
        m.end_txn(7, 0, false, 4_000),
        Err(TxnError::InvalidTxnState)
    );
    // The next transaction starts from CompleteCommit.
    ongoing(&mut m, &[tp("a", 0)], 5_000);
    assert_eq!(m.start_ms, 5_000);
}

#[test]
fn ending_without_a_transaction_or_with_another_producer_is_refused() {
    let mut m = initialised();
    assert_eq!(m.end_txn(7, 0, true, 2_000), Err(TxnError::InvalidTxnState));
    assert_eq!(
        m.end_txn(8, 0, true, 2_000),
        Err(TxnError::InvalidProducerIdMapping)
    );
    assert_eq!(m.end_txn(7, 1, true, 2_000), Err(TxnError::ProducerFenced));
    assert_eq!(
        m.add_partitions(7, 3, &set(&[tp("a", 0)]), 2_000),
        Err(TxnError::ProducerFenced)
    );
    assert_eq!(
        m.add_partitions(9, 0, &set(&[tp("a", 0)]), 2_000),
        Err(TxnError::InvalidProducerIdMapping)
    );
}

#[test]
fn a_second_producer_bumps_the_epoch_and_fences_the_first() {
    let mut m = initialised();
    let InitStep::Write(t) = m.init_producer_id(60_000, None, None, 2_000).expect("init") else {
        panic!("no transaction open: a plain bump");
    };
    assert_eq!(
        (t.producer_id, t.producer_epoch, t.last_producer_epoch),
        (7, 1, -1)
    );
    m.complete(t).expect("applies");
    // The first producer (epoch 0) is fenced.
    assert_eq!(
        m.add_partitions(7, 0, &set(&[tp("a", 0)]), 2_100),
        Err(TxnError::ProducerFenced)
    );
    assert_eq!(m.end_txn(7, 0, false, 2_100), Err(TxnError::ProducerFenced));
}

#[test]
fn a_new_producer_aborts_the_open_transaction_at_a_fenced_epoch() {
    let mut m = initialised();
    ongoing(&mut m, &[tp("a", 0)], 2_000);
    let step = m
        .init_producer_id(60_000, None, None, 3_000)
        .expect("fences");
    let InitStep::FenceAndAbort(abort) = step else {
        panic!("an open transaction is aborted first");
    };
    assert_eq!(abort.state, TxnState::PrepareAbort);
    assert_eq!(abort.producer_epoch, 1, "the fence bumps the epoch");
    assert_eq!(abort.partitions, set(&[tp("a", 0)]));
    // The old producer is fenced at once, before the abort is written.
    assert_eq!(m.end_txn(7, 0, true, 3_001), Err(TxnError::ProducerFenced));
    // The new producer retries meanwhile: concurrent.
    assert_eq!(
        m.init_producer_id(60_000, None, None, 3_001),
        Err(TxnError::ConcurrentTransactions)
    );
    m.complete(abort).expect("applies");
    let complete = m.prepare_complete(3_100).expect("markers done");
    m.complete(complete).expect("applies");
    assert_eq!(m.state, TxnState::CompleteAbort);
    let InitStep::Write(t) = m.init_producer_id(60_000, None, None, 3_200).expect("init") else {
        panic!("now a plain bump");
    };
    assert_eq!(t.producer_epoch, 2);
    m.complete(t).expect("applies");
}

#[test]
fn a_failed_fence_does_not_bump_the_epoch_twice() {
    let mut m = initialised();
    ongoing(&mut m, &[tp("a", 0)], 2_000);
    let first = m.prepare_fence_abort(3_000).expect("fences");
    assert_eq!(first.producer_epoch, 1);
    m.abandon();
    assert!(m.has_failed_epoch_fence);
    assert_eq!(m.state, TxnState::Ongoing);
    let second = m.prepare_fence_abort(3_100).expect("fences again");
    assert_eq!(second.producer_epoch, 1, "the same fenced epoch");
    m.complete(second).expect("applies");
    let complete = m.prepare_complete(3_200).expect("completes");
    m.complete(complete).expect("applies");
    assert!(!m.has_failed_epoch_fence);
}

#[test]
fn an_open_transaction_times_out_and_an_idle_id_expires() {
    let mut m = initialised();
    assert!(!m.timed_out(1_000_000), "nothing open");
    ongoing(&mut m, &[tp("a", 0)], 2_000);
    assert!(!m.timed_out(62_000));
    assert!(m.timed_out(62_001));
    assert!(!m.expired(i64::MAX, 1), "an open transaction never expires");
    let abort = m
        .prepare_fence_abort(62_001)
        .expect("the coordinator aborts");
    assert_eq!(abort.state, TxnState::PrepareAbort);
    assert!(!m.timed_out(100_000), "a transition is pending");
    m.complete(abort).expect("applies");
    let complete = m.prepare_complete(62_100).expect("completes");
    m.complete(complete).expect("applies");
    assert!(!m.expired(62_100 + 999, 1_000));
    assert!(m.expired(62_100 + 1_000, 1_000));
    let dead = m.prepare_dead().expect("expires");
    assert_eq!(dead.state, TxnState::Dead);
}

#[test]
fn kip_360_bumps_for_the_current_epoch_repeats_for_the_last_and_fences_others() {
    let mut m = initialised();
    let InitStep::Write(t) = m
        .init_producer_id(60_000, Some((7, 0)), None, 2_000)
        .expect("bump")
    else {
        panic!("plain bump");
    };
    assert_eq!((t.producer_epoch, t.last_producer_epoch), (1, 0));
    m.complete(t).expect("applies");
    // A retry of that call (the producer never saw the answer): the same epoch again.
    let InitStep::Write(t) = m
        .init_producer_id(60_000, Some((7, 0)), None, 2_100)
        .expect("retry")
    else {
        panic!("plain");
    };
    assert_eq!((t.producer_epoch, t.last_producer_epoch), (1, 0));
    m.complete(t).expect("applies");
    // Neither the current nor the last epoch: fenced.
    assert_eq!(
        m.init_producer_id(60_000, Some((7, 5)), None, 2_200),
        Err(TxnError::ProducerFenced)
    );
    // Another producer id altogether: fenced.
    assert_eq!(
        m.init_producer_id(60_000, Some((99, 0)), None, 2_200),
        Err(TxnError::ProducerFenced)
    );
}

#[test]
fn exhausted_epochs_rotate_the_producer_id() {
    let mut m = initialised();
    m.producer_epoch = i16::MAX - 1;
    assert_eq!(
        m.init_producer_id(60_000, None, None, 2_000),
        Ok(InitStep::NeedProducerId)
    );
    let InitStep::Write(t) = m
        .init_producer_id(60_000, None, Some(42), 2_000)
        .expect("rotates")
    else {
        panic!("a new id");
    };
    assert_eq!((t.producer_id, t.producer_epoch), (42, 0));
    m.complete(t).expect("applies");
    assert_eq!(m.producer_id, 42);
    assert_eq!(m.previous_producer_id, 7);
}

#[test]
fn verification_names_the_partitions_not_in_the_transaction() {
    let mut m = initialised();
    ongoing(&mut m, &[tp("a", 0)], 2_000);
    assert_eq!(
        m.verify(7, 0, &[tp("a", 0), tp("a", 1)]),
        Ok(vec![Ok(()), Err(TxnError::TransactionAbortable)])
    );
    assert_eq!(
        m.verify(8, 0, &[tp("a", 0)]),
        Err(TxnError::InvalidProducerIdMapping)
    );
    assert_eq!(m.verify(7, 1, &[tp("a", 0)]), Err(TxnError::ProducerFenced));
    let EndStep::Write(t) = m.end_txn(7, 0, false, 3_000).expect("aborts") else {
        panic!("abort");
    };
    m.complete(t).expect("applies");
    assert_eq!(
        m.verify(7, 0, &[tp("a", 0)]),
        Err(TxnError::ConcurrentTransactions)
    );
}

#[test]
fn a_transit_that_is_not_the_pending_one_is_refused() {
    let mut m = initialised();
    let t = m
        .add_partitions(7, 0, &set(&[tp("a", 0)]), 2_000)
        .expect("adds")
        .expect("writes");
    let mut wrong = t.clone();
    wrong.state = TxnState::PrepareCommit;
    assert_eq!(m.complete(wrong), Err(TxnError::InvalidTxnState));
    let mut other_epoch = t.clone();
    other_epoch.producer_epoch = 5;
    assert_eq!(m.complete(other_epoch), Err(TxnError::InvalidTxnState));
    assert_eq!(m.state, TxnState::Empty, "unchanged");
    m.abandon();
    assert_eq!(m.pending, None);
    assert_eq!(
        m.complete(t),
        Err(TxnError::InvalidTxnState),
        "not pending now"
    );
}
