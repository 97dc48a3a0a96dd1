//! A [`Partition`] over a [`SimLog`] driven through seeded sequences of appends (acks 0, 1
//! and all, some concurrent), reads, fetches, waits, truncations, DeleteRecords and crash
//! restarts. The checkers, run after every step:
//! - **acknowledged survives**: after a crash and reopen, every record whose append was
//!   acknowledged with acks=1/all (and not since truncated or deleted) is read back at its
//!   offset with its value;
//! - **offsets ordered**: `log_start ≤ high watermark ≤ written ≤ log end`;
//! - **reads exact**: a read returns exactly the records appended, in offset order, with no
//!   gap from the asked offset, nothing at or above the high watermark, and each record's value
//!   the one appended at that offset (records of timed-out appends are learned on first read);
//! - **waits honest**: a wait for an offset returns `Passed` only with the high watermark
//!   above it and `DeadlinePassed` only at or after its deadline on the fake clock with the
//!   high watermark not above it; a fetch returns its `min_bytes`, or waited to its deadline,
//!   or was cancelled first.
//!
//! Not verified: power loss (the fake disk keeps written data), durability of fsync, error
//! paths of the real log, concurrency beyond two appends in flight.

use super::test_records::value_of;
use super::{seeds, Executor, SeedGuard, SimDisk, SimLog, SimRuntime};
use crate::runtime::{Clock, MonotonicTime, NodeId, Runtime};
use crate::{Acks, Isolation, Partition, PartitionError, PartitionStore, WaitOutcome};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::time::Duration;
use storage::{build_batch, Offset, StorageError, TimestampMs};

/// Operations per seed.
const STEPS: usize = 80;
/// Seeds `cargo test` runs.
const SEEDS: u64 = 200;

type SimPartition = Partition<SimLog>;

struct Model {
    /// Value of each record at its offset, as far as known.
    values: BTreeMap<i64, u64>,
    /// Offsets whose append was acknowledged with acks=1/all.
    acked: BTreeSet<i64>,
    /// Values of appends that timed out or failed: their offsets are unknown until read.
    unplaced: BTreeSet<u64>,
    next_value: u64,
}

fn check_offsets(p: &SimPartition) -> Result<(), String> {
    let log = p.log();
    let (start, hw, written, end) = (
        log.log_start_offset(),
        log.high_watermark(),
        log.written_offset(),
        log.log_end_offset(),
    );
    if !(start <= hw && hw <= written && written <= end) {
        return Err(format!(
            "offsets out of order: log start {start}, high watermark {hw}, written {written}, log end {end}"
        ));
    }
    Ok(())
}

/// Checks the records of `read` (from `from`) against the model, learning unplaced values.
fn check_read(
    model: &mut Model,
    from: Offset,
    read: &crate::Read,
    high_watermark: Offset,
) -> Result<(), String> {
    let mut expect = from.0;
    for batch in &read.batches {
        let bytes = batch.to_vec();
        let records = storage::records_of(&bytes).map_err(|e| e.to_string())?;
        for r in records {
            if r.offset.0 < from.0 {
                continue; // The first batch may start before the asked offset.
            }
            if r.offset.0 != expect {
                return Err(format!(
                    "read from {from}: expected offset {expect}, got {}",
                    r.offset
                ));
            }
            if r.offset >= high_watermark {
                return Err(format!(
                    "read returned offset {} at or above the high watermark {high_watermark}",
                    r.offset
                ));
            }
            let value = value_of(r.value.unwrap_or_default())?;
            match model.values.get(&r.offset.0) {
                Some(v) if *v == value => {}
                Some(v) => {
                    return Err(format!(
                        "offset {} holds value {value}, appended {v}",
                        r.offset
                    ))
                }
                None if model.unplaced.remove(&value) => {
                    model.values.insert(r.offset.0, value);
                }
                None => return Err(format!("offset {} holds unknown value {value}", r.offset)),
            }
            expect += 1;
        }
    }
    Ok(())
}

async fn append(
    p: Rc<SimPartition>,
    rt: SimRuntime,
    first_value: u64,
    n: u64,
) -> (Acks, Vec<u64>, Result<crate::Appended, PartitionError>) {
    let values: Vec<u64> = (first_value..first_value + n).collect();
    let encoded: Vec<[u8; 8]> = values.iter().map(|v| v.to_be_bytes()).collect();
    let slices: Vec<&[u8]> = encoded.iter().map(|e| e.as_slice()).collect();
    let batch = build_batch(
        TimestampMs(i64::try_from(first_value).unwrap_or(0)),
        &slices,
    );
    let acks = [Acks::None, Acks::Leader, Acks::All][usize::try_from(rt.random(0..3)).unwrap_or(0)];
    let timeout =
        Duration::from_micros([0, 300, 20_000][usize::try_from(rt.random(0..3)).unwrap_or(0)]);
    let batch = storage::ValidatedBatches::validate(&batch).expect("a valid batch");
    let result = p.append(batch, acks, timeout).await;
    (acks, values, result)
}

fn record_append(
    model: &mut Model,
    (acks, values, result): (Acks, Vec<u64>, Result<crate::Appended, PartitionError>),
) -> Result<(), String> {
    match result {
        Ok(appended) => {
            for (i, v) in values.iter().enumerate() {
                let offset = appended.base_offset.0 + i64::try_from(i).unwrap_or(0);
                model.values.insert(offset, *v);
                if acks != Acks::None {
                    model.acked.insert(offset);
                }
            }
            Ok(())
        }
        Err(PartitionError::RequestTimedOut { .. }) if acks == Acks::All => {
            model.unplaced.extend(values);
            Ok(())
        }
        Err(e) => Err(format!("append with {acks:?} failed: {e}")),
    }
}

fn run(seed: u64) -> Result<(), String> {
    let mut ex = Executor::new(seed);
    let rt = ex.runtime();
    let flush_messages = [1, 5, u64::MAX][usize::try_from(rt.random(0..3)).unwrap_or(0)];
    let disk = SimDisk::default();
    let open = |rt: &SimRuntime| {
        Rc::new(Partition::new(
            SimLog::open(rt.clone(), disk.clone(), flush_messages),
            NodeId(1),
            Rc::new(rt.clone()),
        ))
    };
    let mut p = open(&rt);
    let mut model = Model {
        values: BTreeMap::new(),
        acked: BTreeSet::new(),
        unplaced: BTreeSet::new(),
        next_value: 0,
    };
    let stuck = |what: &'static str| move |s: super::Stuck| format!("{what}: {s:?}");
    for step in 0..STEPS {
        let choice = rt.random(0..100);
        match choice {
            0..=34 => {
                let n = rt.random(1..4);
                let first = model.next_value;
                model.next_value += n;
                if rt.chance(30) {
                    let m = rt.random(1..3);
                    let second = model.next_value;
                    model.next_value += m;
                    let (a, b) = ex
                        .run_until(futures_lite::future::zip(
                            append(p.clone(), rt.clone(), first, n),
                            append(p.clone(), rt.clone(), second, m),
                        ))
                        .map_err(stuck("append"))?;
                    record_append(&mut model, a)?;
                    record_append(&mut model, b)?;
                } else {
                    let r = ex
                        .run_until(append(p.clone(), rt.clone(), first, n))
                        .map_err(stuck("append"))?;
                    record_append(&mut model, r)?;
                }
            }
            35..=54 => {
                let log = p.log();
                let end = log.log_end_offset().0;
                let from = Offset(
                    log.log_start_offset().0
                        + i64::try_from(rt.random(
                            0..u64::try_from(end - log.log_start_offset().0 + 2).unwrap_or(1),
                        ))
                        .unwrap_or(0),
                );
                let max_bytes = usize::try_from(rt.random(1..400)).unwrap_or(1);
                let reader = p.clone();
                let result = ex
                    .run_until(async move {
                        reader.read(from, max_bytes, Isolation::HighWatermark).await
                    })
                    .map_err(stuck("read"))?;
                match result {
                    Ok(read) => {
                        let hw = read.high_watermark;
                        if from > p.log().log_end_offset() {
                            return Err(format!("read at {from} beyond the log end succeeded"));
                        }
                        check_read(&mut model, from, &read, hw)?;
                    }
                    Err(PartitionError::Storage(StorageError::OffsetOutOfRange { .. }))
                        if from > p.log().log_end_offset() => {}
                    Err(e) => return Err(format!("read at {from}: {e}")),
                }
            }
            55..=69 => {
                // A wait, sometimes while an append goes on.
                let offset =
                    Offset(p.high_watermark().0 + i64::try_from(rt.random(0..3)).unwrap_or(0) - 1);
                let deadline = rt.now() + Duration::from_micros(rt.random(0..5_000));
                let wait = checked_wait(p.clone(), rt.clone(), offset, deadline);
                let (outcome, appended) = if rt.chance(50) {
                    let n = rt.random(1..3);
                    let first = model.next_value;
                    model.next_value += n;
                    let (o, a) = ex
                        .run_until(futures_lite::future::zip(
                            wait,
                            append(p.clone(), rt.clone(), first, n),
                        ))
                        .map_err(stuck("wait"))?;
                    (o, Some(a))
                } else {
                    (ex.run_until(wait).map_err(stuck("wait"))?, None)
                };
                // Checked at the wait's return: the append may have gone on after it.
                outcome?;
                if let Some(a) = appended {
                    record_append(&mut model, a)?;
                }
            }
            70..=77 => {
                let from = p.high_watermark();
                let min_bytes = usize::try_from(rt.random(1..300)).unwrap_or(1);
                let deadline = rt.now() + Duration::from_micros(rt.random(0..3_000));
                // Some fetches are cancelled (another partition answered the fetch).
                let cancel_at = rt
                    .chance(30)
                    .then(|| rt.now() + Duration::from_micros(rt.random(0..2_000)));
                let fetcher = p.clone();
                let clock = rt.clone();
                let fetch = async move {
                    let canceller = clock.clone();
                    let cancel = async move {
                        match cancel_at {
                            Some(at) => {
                                let now = canceller.now();
                                canceller.sleep(at.saturating_duration_since(now)).await
                            }
                            None => std::future::pending().await,
                        }
                    };
                    let read = fetcher
                        .fetch(
                            from,
                            1 << 20,
                            min_bytes,
                            Isolation::HighWatermark,
                            deadline,
                            cancel,
                        )
                        .await;
                    (read, clock.now())
                };
                let n = rt.random(1..3);
                let first = model.next_value;
                model.next_value += n;
                let ((read, at), a) = ex
                    .run_until(futures_lite::future::zip(
                        fetch,
                        append(p.clone(), rt.clone(), first, n),
                    ))
                    .map_err(stuck("fetch"))?;
                record_append(&mut model, a)?;
                let read = read.map_err(|e| format!("fetch at {from}: {e}"))?;
                let cancelled = cancel_at.is_some_and(|c| at >= c);
                if read.bytes() < min_bytes && at < deadline && !cancelled {
                    return Err(format!(
                        "fetch answered {} < min_bytes {min_bytes} before its deadline \
                         and uncancelled",
                        read.bytes()
                    ));
                }
                let hw = read.high_watermark;
                check_read(&mut model, from, &read, hw)?;
            }
            78..=83 => {
                let log = p.log();
                let (start, end) = (log.log_start_offset().0, log.log_end_offset().0);
                let to = Offset(
                    start
                        + i64::try_from(rt.random(0..u64::try_from(end - start + 1).unwrap_or(1)))
                            .unwrap_or(0),
                );
                let truncater = p.clone();
                ex.run_until(async move { truncater.truncate_to(to).await })
                    .map_err(stuck("truncate"))?
                    .map_err(|e| format!("truncate to {to}: {e}"))?;
                // A truncation discards on purpose: what it cut is no longer owed.
                let end = p.log().log_end_offset().0;
                model.values.retain(|o, _| *o < end);
                model.acked.retain(|o| *o < end);
            }
            84..=89 => {
                let hw = p.high_watermark().0;
                let before = if rt.chance(20) {
                    None
                } else {
                    Some(Offset(
                        i64::try_from(rt.random(0..u64::try_from(hw + 2).unwrap_or(1)))
                            .unwrap_or(0),
                    ))
                };
                let deleter = p.clone();
                let result = ex
                    .run_until(async move { deleter.delete_records(before).await })
                    .map_err(stuck("delete records"))?;
                // Writes that complete while the call runs may move the high watermark past
                // `hw` (it never moves back here): the refusal names the one it checked, and
                // a success must be within the one after the call.
                let hw_after = p.high_watermark().0;
                match (before, result) {
                    (Some(o), Err(PartitionError::OffsetOutOfRange { high_watermark, .. }))
                        if o > high_watermark && high_watermark.0 >= hw => {}
                    (Some(o), Ok(_)) if o.0 > hw_after => {
                        return Err(format!(
                            "delete records above the high watermark {hw_after} to {o} succeeded"
                        ))
                    }
                    (_, Ok(start)) => {
                        model.acked.retain(|o| *o >= start.0);
                    }
                    (_, Err(e)) => return Err(format!("delete records to {before:?}: {e}")),
                }
            }
            _ => {
                p.log().crash();
                p.close_waiters();
                p = open(&rt);
                let end = p.log().log_end_offset().0;
                if let Some(lost) = model.acked.iter().find(|o| **o >= end) {
                    return Err(format!(
                        "acknowledged offset {lost} lost in a crash (log end now {end})"
                    ));
                }
                model.values.retain(|o, _| *o < end);
                let start = p.log().log_start_offset();
                let reader = p.clone();
                let all = ex
                    .run_until(async move {
                        reader
                            .read(start, usize::MAX, Isolation::HighWatermark)
                            .await
                    })
                    .map_err(stuck("read after crash"))?
                    .map_err(|e| format!("read after crash: {e}"))?;
                let hw = all.high_watermark;
                check_read(&mut model, start, &all, hw)?;
                let mut seen = BTreeSet::new();
                for batch in &all.batches {
                    let bytes = batch.to_vec();
                    for r in storage::records_of(&bytes).map_err(|e| e.to_string())? {
                        seen.insert(r.offset.0);
                    }
                }
                if let Some(missing) = model.acked.iter().find(|o| !seen.contains(o)) {
                    return Err(format!(
                        "acknowledged offset {missing} unreadable after a crash"
                    ));
                }
            }
        }
        check_offsets(&p).map_err(|e| format!("step {step} (choice {choice}): {e}"))?;
    }
    Ok(())
}

/// Checks a wait's outcome at the moment it returned.
async fn checked_wait(
    p: Rc<SimPartition>,
    clock: SimRuntime,
    offset: Offset,
    deadline: MonotonicTime,
) -> Result<(), String> {
    let outcome = p
        .wait_for_offset(offset, deadline, std::future::pending())
        .await;
    let (hw, now) = (p.high_watermark(), clock.now());
    match outcome {
        WaitOutcome::Passed if hw > offset => Ok(()),
        WaitOutcome::DeadlinePassed if now >= deadline && hw <= offset => Ok(()),
        other => Err(format!("wait for {offset} until {deadline:?} returned {other:?} at {now:?} with the high watermark at {hw}")),
    }
}

#[test]
fn partition_under_simulation() {
    for seed in seeds(0x5eed_0012, SEEDS) {
        let _guard = SeedGuard(seed);
        if let Err(e) = run(seed) {
            panic!("SLUICE_SIM_SEED={seed}: {e}");
        }
    }
}
