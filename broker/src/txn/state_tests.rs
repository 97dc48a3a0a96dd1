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
    let InitStep::Write(t) = m
        .init_producer_id(60_000, None, None, 1, 1_000)
        .expect("init")
    else {
        panic!("a new id bumps its epoch to 0");
    };
    assert_eq!((t.producer_id, t.producer_epoch), (7, 0));
    m.complete(t).expect("applies");
    m
}

/// `m` with `partitions` added and applied: Ongoing.
fn ongoing(m: &mut TxnMetadata, partitions: &[TopicPartition], now_ms: i64) {
    let t = m
        .add_partitions(
            m.producer_id,
            m.producer_epoch,
            &set(partitions),
            CLIENT_TXN_VERSION_1,
            now_ms,
        )
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
    assert_eq!(
        m.add_partitions(7, 0, &set(&[tp("a", 0)]), CLIENT_TXN_VERSION_1, 2_100),
        Ok(None)
    );
    // Another partition later keeps the start time.
    ongoing(&mut m, &[tp("b", 1)], 2_200);
    assert_eq!(m.start_ms, 2_000);
    assert_eq!(m.partitions, set(&[tp("a", 0), tp("b", 1)]));

    let EndStep::Write(prepare) = m
        .end_txn(7, 0, true, CLIENT_TXN_VERSION_1, None, 3_000)
        .expect("ends")
    else {
        panic!("an open transaction writes PrepareCommit");
    };
    assert_eq!(prepare.state, TxnState::PrepareCommit);
    // While the PrepareCommit is written: everything else waits.
    assert_eq!(
        m.end_txn(7, 0, true, CLIENT_TXN_VERSION_1, None, 3_001),
        Err(TxnError::ConcurrentTransactions)
    );
    assert_eq!(
        m.add_partitions(7, 0, &set(&[tp("c", 0)]), CLIENT_TXN_VERSION_1, 3_001),
        Err(TxnError::ConcurrentTransactions)
    );
    m.complete(prepare).expect("applies");
    // The markers are being sent: a retried commit waits, an abort is refused.
    assert_eq!(
        m.end_txn(7, 0, true, CLIENT_TXN_VERSION_1, None, 3_002),
        Err(TxnError::ConcurrentTransactions)
    );
    assert_eq!(
        m.end_txn(7, 0, false, CLIENT_TXN_VERSION_1, None, 3_002),
        Err(TxnError::InvalidTxnState)
    );
    assert_eq!(
        m.init_producer_id(60_000, None, None, 1, 3_002),
        Err(TxnError::ConcurrentTransactions)
    );
    let complete = m.prepare_complete(3_500).expect("completes");
    assert_eq!(complete.state, TxnState::CompleteCommit);
    assert!(complete.partitions.is_empty());
    m.complete(complete).expect("applies");
    assert_eq!(
        m.end_txn(7, 0, true, CLIENT_TXN_VERSION_1, None, 4_000),
        Ok(EndStep::Done {
            producer_id: 7,
            producer_epoch: 0
        })
    );
    assert_eq!(
        m.end_txn(7, 0, false, CLIENT_TXN_VERSION_1, None, 4_000),
        Err(TxnError::InvalidTxnState)
    );
    // The next transaction starts from CompleteCommit.
    ongoing(&mut m, &[tp("a", 0)], 5_000);
    assert_eq!(m.start_ms, 5_000);
}

#[test]
fn ending_without_a_transaction_or_with_another_producer_is_refused() {
    let mut m = initialised();
    assert_eq!(
        m.end_txn(7, 0, true, CLIENT_TXN_VERSION_1, None, 2_000),
        Err(TxnError::InvalidTxnState)
    );
    assert_eq!(
        m.end_txn(8, 0, true, CLIENT_TXN_VERSION_1, None, 2_000),
        Err(TxnError::InvalidProducerIdMapping)
    );
    assert_eq!(
        m.end_txn(7, 1, true, CLIENT_TXN_VERSION_1, None, 2_000),
        Err(TxnError::ProducerFenced)
    );
    assert_eq!(
        m.add_partitions(7, 3, &set(&[tp("a", 0)]), CLIENT_TXN_VERSION_1, 2_000),
        Err(TxnError::ProducerFenced)
    );
    assert_eq!(
        m.add_partitions(9, 0, &set(&[tp("a", 0)]), CLIENT_TXN_VERSION_1, 2_000),
        Err(TxnError::InvalidProducerIdMapping)
    );
}

#[test]
fn a_second_producer_bumps_the_epoch_and_fences_the_first() {
    let mut m = initialised();
    let InitStep::Write(t) = m
        .init_producer_id(60_000, None, None, 1, 2_000)
        .expect("init")
    else {
        panic!("no transaction open: a plain bump");
    };
    assert_eq!(
        (t.producer_id, t.producer_epoch, t.last_producer_epoch),
        (7, 1, -1)
    );
    m.complete(t).expect("applies");
    // The first producer (epoch 0) is fenced.
    assert_eq!(
        m.add_partitions(7, 0, &set(&[tp("a", 0)]), CLIENT_TXN_VERSION_1, 2_100),
        Err(TxnError::ProducerFenced)
    );
    assert_eq!(
        m.end_txn(7, 0, false, CLIENT_TXN_VERSION_1, None, 2_100),
        Err(TxnError::ProducerFenced)
    );
}

#[test]
fn a_new_producer_aborts_the_open_transaction_at_a_fenced_epoch() {
    let mut m = initialised();
    ongoing(&mut m, &[tp("a", 0)], 2_000);
    let step = m
        .init_producer_id(60_000, None, None, 1, 3_000)
        .expect("fences");
    let InitStep::FenceAndAbort(abort) = step else {
        panic!("an open transaction is aborted first");
    };
    assert_eq!(abort.state, TxnState::PrepareAbort);
    assert_eq!(abort.producer_epoch, 1, "the fence bumps the epoch");
    assert_eq!(abort.partitions, set(&[tp("a", 0)]));
    // The old producer is fenced at once, before the abort is written.
    assert_eq!(
        m.end_txn(7, 0, true, CLIENT_TXN_VERSION_1, None, 3_001),
        Err(TxnError::ProducerFenced)
    );
    // The new producer retries meanwhile: concurrent.
    assert_eq!(
        m.init_producer_id(60_000, None, None, 1, 3_001),
        Err(TxnError::ConcurrentTransactions)
    );
    m.complete(abort).expect("applies");
    let complete = m.prepare_complete(3_100).expect("markers done");
    m.complete(complete).expect("applies");
    assert_eq!(m.state, TxnState::CompleteAbort);
    let InitStep::Write(t) = m
        .init_producer_id(60_000, None, None, 1, 3_200)
        .expect("init")
    else {
        panic!("now a plain bump");
    };
    assert_eq!(t.producer_epoch, 2);
    m.complete(t).expect("applies");
}

#[test]
fn a_failed_fence_does_not_bump_the_epoch_twice() {
    let mut m = initialised();
    ongoing(&mut m, &[tp("a", 0)], 2_000);
    let first = m.prepare_fence_abort(1, None, 3_000).expect("fences");
    assert_eq!(first.producer_epoch, 1);
    m.abandon();
    assert!(m.has_failed_epoch_fence);
    assert_eq!(m.state, TxnState::Ongoing);
    let second = m.prepare_fence_abort(1, None, 3_100).expect("fences again");
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
        .prepare_fence_abort(1, None, 62_001)
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
        .init_producer_id(60_000, Some((7, 0)), None, 1, 2_000)
        .expect("bump")
    else {
        panic!("plain bump");
    };
    assert_eq!((t.producer_epoch, t.last_producer_epoch), (1, 0));
    m.complete(t).expect("applies");
    // A retry of that call (the producer never saw the answer): the same epoch again.
    let InitStep::Write(t) = m
        .init_producer_id(60_000, Some((7, 0)), None, 1, 2_100)
        .expect("retry")
    else {
        panic!("plain");
    };
    assert_eq!((t.producer_epoch, t.last_producer_epoch), (1, 0));
    m.complete(t).expect("applies");
    // Neither the current nor the last epoch: fenced.
    assert_eq!(
        m.init_producer_id(60_000, Some((7, 5)), None, 1, 2_200),
        Err(TxnError::ProducerFenced)
    );
    // Another producer id altogether: fenced.
    assert_eq!(
        m.init_producer_id(60_000, Some((99, 0)), None, 1, 2_200),
        Err(TxnError::ProducerFenced)
    );
}

#[test]
fn exhausted_epochs_rotate_the_producer_id() {
    let mut m = initialised();
    m.producer_epoch = i16::MAX - 1;
    assert_eq!(
        m.init_producer_id(60_000, None, None, 1, 2_000),
        Ok(InitStep::NeedProducerId)
    );
    let InitStep::Write(t) = m
        .init_producer_id(60_000, None, Some(42), 1, 2_000)
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
    let EndStep::Write(t) = m
        .end_txn(7, 0, false, CLIENT_TXN_VERSION_1, None, 3_000)
        .expect("aborts")
    else {
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
        .add_partitions(7, 0, &set(&[tp("a", 0)]), CLIENT_TXN_VERSION_1, 2_000)
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

/// Transaction version 2 (KIP-890 part 2): the end of `m`'s open transaction, written and
/// applied, then its completion: returns what EndTxn answered.
fn end_v2(m: &mut TxnMetadata, commit: bool, next_producer_id: Option<i64>) -> (i64, i16) {
    let step = m
        .end_txn(
            m.producer_id,
            m.producer_epoch,
            commit,
            CLIENT_TXN_VERSION_2,
            next_producer_id,
            3_000,
        )
        .expect("ends");
    let EndStep::Write(t) = step else {
        panic!("writes a prepared end, got {step:?}");
    };
    let answer = if t.next_producer_id >= 0 {
        (t.next_producer_id, 0)
    } else {
        (t.producer_id, t.producer_epoch)
    };
    m.complete(t).expect("applies the prepared end");
    let done = m.prepare_complete(3_100).expect("completes");
    m.complete(done).expect("applies the completion");
    answer
}

#[test]
fn transaction_version_2_bumps_the_epoch_at_every_end_and_markers_carry_it() {
    let mut m = initialised();
    ongoing(&mut m, &[tp("a", 0)], 2_000);
    let EndStep::Write(t) = m
        .end_txn(7, 0, true, CLIENT_TXN_VERSION_2, None, 3_000)
        .expect("ends")
    else {
        panic!("writes");
    };
    // The prepared record carries the next epoch (the markers are sent with it) and the
    // current one as the last.
    assert_eq!(
        (t.state, t.producer_epoch, t.last_producer_epoch),
        (TxnState::PrepareCommit, 1, 0)
    );
    assert_eq!(t.client_transaction_version, CLIENT_TXN_VERSION_2);
    m.complete(t).expect("applies");
    assert_eq!(m.producer_epoch, 1);
    // A retry with the epoch before the bump, while the markers are out: still completing.
    assert_eq!(
        m.end_txn(7, 0, true, CLIENT_TXN_VERSION_2, None, 3_001),
        Err(TxnError::ConcurrentTransactions)
    );
    let done = m.prepare_complete(3_100).expect("completes");
    assert_eq!(
        (done.state, done.producer_epoch),
        (TxnState::CompleteCommit, 1)
    );
    m.complete(done).expect("applies");
    // After completion the retry is answered as the first call was.
    assert_eq!(
        m.end_txn(7, 0, true, CLIENT_TXN_VERSION_2, None, 3_200),
        Ok(EndStep::Done {
            producer_id: 7,
            producer_epoch: 1
        })
    );
    // ... but not the other result, and an epoch two behind is a zombie.
    assert_eq!(
        m.end_txn(7, 0, false, CLIENT_TXN_VERSION_2, None, 3_200),
        Err(TxnError::InvalidTxnState)
    );
    ongoing(&mut m, &[tp("a", 0)], 4_000);
    assert_eq!(end_v2(&mut m, true, None), (7, 2));
    assert_eq!(
        m.end_txn(7, 0, true, CLIENT_TXN_VERSION_2, None, 5_000),
        Err(TxnError::ProducerFenced)
    );
    assert_eq!(
        m.add_partitions(7, 1, &set(&[tp("a", 0)]), CLIENT_TXN_VERSION_2, 5_000),
        Err(TxnError::ProducerFenced),
        "the previous transaction's epoch cannot open a new one"
    );
    // A commit with the current epoch but nothing open is an invalid state; an abort is
    // accepted (the client may not know whether a transaction is open) and bumps too.
    assert_eq!(
        m.end_txn(7, 2, true, CLIENT_TXN_VERSION_2, None, 5_000),
        Err(TxnError::InvalidTxnState)
    );
    let EndStep::Write(t) = m
        .end_txn(7, 2, false, CLIENT_TXN_VERSION_2, None, 5_000)
        .expect("aborts")
    else {
        panic!("writes an empty abort");
    };
    assert!(t.partitions.is_empty());
    assert_eq!(
        (t.state, t.producer_epoch, t.start_ms),
        (TxnState::PrepareAbort, 3, 5_000)
    );
    m.complete(t).expect("applies");
}

#[test]
fn transaction_version_2_moves_to_the_next_producer_id_when_the_epochs_run_out() {
    let mut m = initialised();
    m.producer_epoch = i16::MAX - 1;
    ongoing(&mut m, &[tp("a", 0)], 2_000);
    assert_eq!(
        m.end_txn(7, i16::MAX - 1, true, CLIENT_TXN_VERSION_2, None, 3_000),
        Ok(EndStep::NeedProducerId)
    );
    let EndStep::Write(t) = m
        .end_txn(7, i16::MAX - 1, true, CLIENT_TXN_VERSION_2, Some(42), 3_000)
        .expect("ends")
    else {
        panic!("writes");
    };
    assert_eq!(
        (t.producer_id, t.producer_epoch, t.next_producer_id),
        (7, i16::MAX, 42)
    );
    m.complete(t).expect("applies");
    let done = m.prepare_complete(3_100).expect("completes");
    assert_eq!((done.producer_id, done.producer_epoch), (42, 0));
    assert_eq!((done.previous_producer_id, done.next_producer_id), (7, -1));
    m.complete(done).expect("applies");
    assert_eq!(
        (m.producer_id, m.producer_epoch, m.previous_producer_id),
        (42, 0, 7)
    );
    // The old producer id's retry at the last epoch it saw is answered with the new one.
    assert_eq!(
        m.end_txn(7, i16::MAX - 1, true, CLIENT_TXN_VERSION_2, None, 3_200),
        Ok(EndStep::Done {
            producer_id: 42,
            producer_epoch: 0
        })
    );
}

#[test]
fn a_fence_at_transaction_version_2_bumps_twice_and_fences_the_zombie() {
    let mut m = initialised();
    ongoing(&mut m, &[tp("a", 0)], 2_000);
    assert!(!m.fence_needs_producer_id(2));
    let InitStep::FenceAndAbort(t) = m
        .init_producer_id(60_000, None, None, 2, 3_000)
        .expect("fences")
    else {
        panic!("an open transaction is fenced first");
    };
    // The fence's bump (1), then the abort's own (2), as Kafka's endTransaction does.
    assert_eq!(
        (t.state, t.producer_epoch, t.last_producer_epoch),
        (TxnState::PrepareAbort, 2, 1)
    );
    m.complete(t).expect("applies");
    assert_eq!(
        m.end_txn(7, 0, false, CLIENT_TXN_VERSION_2, None, 3_001),
        Err(TxnError::ProducerFenced)
    );
    let done = m.prepare_complete(3_100).expect("completes");
    m.complete(done).expect("applies");
    let InitStep::Write(t) = m
        .init_producer_id(60_000, None, None, 2, 3_200)
        .expect("inits")
    else {
        panic!("the retry bumps");
    };
    assert_eq!(t.producer_epoch, 3);
}

#[test]
fn a_version_2_end_after_a_version_1_transaction_is_checked_by_its_own_rules() {
    // A retry at version 2 of an end at version 1 (same epoch) is a new abort, as Kafka.
    let mut m = initialised();
    ongoing(&mut m, &[tp("a", 0)], 2_000);
    let EndStep::Write(t) = m
        .end_txn(7, 0, true, CLIENT_TXN_VERSION_1, None, 3_000)
        .expect("ends")
    else {
        panic!("writes");
    };
    assert_eq!(t.producer_epoch, 0, "version 1 keeps the epoch");
    m.complete(t).expect("applies");
    let done = m.prepare_complete(3_100).expect("completes");
    m.complete(done).expect("applies");
    assert_eq!(
        m.end_txn(7, 0, true, CLIENT_TXN_VERSION_2, None, 3_200),
        Err(TxnError::InvalidTxnState)
    );
}
