//! The transactions scenario's producer loop and its counters (KIP-98 transactions through
//! librdkafka's transactional API).
//!
//! Closed loop, one transaction in flight per producer: `begin_transaction`, send
//! `records_per_txn` records round-robin over the partitions (each stamped with its send
//! time, so a read_committed consumer's latency is send → commit → receipt), wait for their
//! delivery reports, then `commit_transaction`; the next transaction begins when the commit
//! returns. The producer stops at a transaction boundary once the measured window is over.
//!
//! Why wait for the reports first: rdkafka's `commit_transaction` flushes before it calls
//! librdkafka's, and that flush, when a record is still in flight, polls in steps of 100 ms
//! while the `ThreadedProducer`'s own thread takes the delivery reports — every commit would
//! then take 100 ms whatever the broker does (measured: 101–103 ms at the median on Sluice and
//! Kafka alike, at 1–10 % broker CPU). With nothing in flight that flush returns at once.
//!
//! A commit that fails with an abortable error is aborted and counted; a retriable one is
//! retried, at most `COMMIT_ATTEMPTS` times; anything else ends the run with the error. Only
//! records of committed transactions count as sent: they are the ones a read_committed
//! consumer must receive.

use crate::client::{self, CountingContext};
use crate::latency::{self, Percentiles, Window};
use crate::payload::{self, Stamp};
use crate::schedule::{record_index, Clock};
use anyhow::Context as _;
use hdrhistogram::Histogram;
use rdkafka::error::KafkaError;
use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Attempts at one commit whose error librdkafka calls retriable.
const COMMIT_ATTEMPTS: u32 = 3;
/// Sleep between checks that librdkafka has released the transaction's delivered records
/// (it does so just after their delivery report returns: microseconds).
const IN_FLIGHT_RECHECK: Duration = Duration::from_micros(20);

/// Outcomes shared by the transactional producers of a run.
pub struct TxnCounts {
    /// Transactions committed.
    pub committed: AtomicU64,
    /// Records in committed transactions.
    pub committed_records: AtomicU64,
    /// Transactions aborted after an abortable error.
    pub aborted: AtomicU64,
    /// begin → commit returned, µs, of the transactions begun inside the measured window;
    /// each producer adds its own histogram once, when it stops.
    pub commit_latency: Mutex<Histogram<u64>>,
}

impl TxnCounts {
    /// Nothing committed or aborted yet.
    pub fn new() -> TxnCounts {
        TxnCounts {
            committed: AtomicU64::new(0),
            committed_records: AtomicU64::new(0),
            aborted: AtomicU64::new(0),
            commit_latency: Mutex::new(latency::new_histogram()),
        }
    }
}

/// The transactions scenario's own figures of one broker's run.
#[derive(Debug, Clone, Serialize)]
pub struct TxnFigures {
    pub records_per_txn: u32,
    /// Transactions committed over the whole run (warm-up included).
    pub committed: u64,
    /// Transactions aborted over the whole run.
    pub aborted: u64,
    /// Transactions committed per second in the measured window (records per second is the
    /// broker's `msgs_per_sec`).
    pub txns_per_sec: f64,
    /// begin → commit returned, of the transactions begun in the window, in ms.
    pub commit_p50_ms: f64,
    pub commit_p99_ms: f64,
    pub commit_p999_ms: f64,
    pub commit_max_ms: f64,
}

impl TxnFigures {
    /// The figures from a run's counters and its window rate of committed transactions.
    pub fn of(records_per_txn: u32, counts: &TxnCounts, txns_per_sec: f64) -> TxnFigures {
        let commit = counts
            .commit_latency
            .lock()
            .map_or_else(|_| latency::new_histogram(), |h| h.clone());
        let commit = Percentiles::of(&commit);
        TxnFigures {
            records_per_txn,
            committed: counts.committed.load(Ordering::Relaxed),
            aborted: counts.aborted.load(Ordering::Relaxed),
            txns_per_sec,
            commit_p50_ms: commit.p50_ms,
            commit_p99_ms: commit.p99_ms,
            commit_p999_ms: commit.p999_ms,
            commit_max_ms: commit.max_ms,
        }
    }
}

/// One transactional producer thread's job.
pub struct TxnProducer {
    /// Transactions initialised (see `client::transactional_producer`).
    pub producer: ThreadedProducer<CountingContext>,
    /// This producer's number and the run's producer count: record indices stay unique.
    pub index: u32,
    pub producers: u32,
    pub topic: String,
    pub partitions: u32,
    pub record_bytes: usize,
    pub records_per_txn: u32,
    pub run_id: u64,
    pub clock: Clock,
    /// The measured window: commits are timed inside it, and no transaction begins after it.
    pub window: Window,
    /// Limit of one commit or abort (librdkafka's own timeout of the call).
    pub timeout: Duration,
    pub counts: std::sync::Arc<TxnCounts>,
}

/// How one transaction ended.
enum Ending {
    Committed,
    Aborted,
}

/// A transactional producer thread: transactions back to back until the window ends.
pub fn produce(job: TxnProducer) -> anyhow::Result<()> {
    assert!(job.records_per_txn > 0, "a transaction has records");
    assert!(job.partitions > 0, "the topic has partitions");
    let mut value = payload::filler(job.record_bytes);
    let mut commit_latency = latency::new_histogram();
    let mut nth = 0u64;
    while job.clock.now_ns() < job.window.end_ns {
        let begun_ns = job.clock.now_ns();
        job.producer
            .begin_transaction()
            .with_context(|| format!("begin_transaction on {}", job.topic))?;
        let ending = match send_transaction(&job, &mut value, &mut nth) {
            Ok(()) => {
                wait_for_delivery(&job, nth);
                commit(&job)?
            }
            Err(send_error) => {
                abort(&job).with_context(|| format!("after a failed send: {send_error:#}"))?;
                Ending::Aborted
            }
        };
        match ending {
            Ending::Committed => {
                job.counts.committed.fetch_add(1, Ordering::Relaxed);
                job.counts
                    .committed_records
                    .fetch_add(u64::from(job.records_per_txn), Ordering::Relaxed);
                if begun_ns >= job.window.start_ns && begun_ns < job.window.end_ns {
                    commit_latency
                        .saturating_record(latency::latency_us(begun_ns, job.clock.now_ns()));
                }
            }
            Ending::Aborted => {
                job.counts.aborted.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    if let Ok(mut total) = job.counts.commit_latency.lock() {
        latency::merge(&mut total, &commit_latency);
    }
    Ok(())
}

/// Sends one transaction's records, each stamped with its send time; `nth` counts this
/// producer's records sent so far.
fn send_transaction(job: &TxnProducer, value: &mut [u8], nth: &mut u64) -> anyhow::Result<()> {
    for _ in 0..job.records_per_txn {
        let index = record_index(*nth, job.index, job.producers);
        Stamp {
            intended_ns: job.clock.now_ns(),
            run_id: job.run_id,
            index,
        }
        .write_to(value);
        let partition = i32::try_from(index % u64::from(job.partitions)).context("partition id")?;
        let record = BaseRecord::<(), [u8]>::to(&job.topic)
            .partition(partition)
            .payload(&value[..]);
        client::send(&job.producer, record, &job.topic)?;
        // Counts only records librdkafka took: each gets one delivery report.
        *nth += 1;
    }
    Ok(())
}

/// Waits until the producer's `sent` records have their delivery reports and librdkafka holds
/// none of them any more (see the module doc), or the job's timeout passed: then the commit
/// flushes what is left itself.
fn wait_for_delivery(job: &TxnProducer, sent: u64) {
    let deadline = std::time::Instant::now() + job.timeout;
    if !job.producer.context().wait_for_reports(sent, job.timeout) {
        return;
    }
    while job.producer.in_flight_count() > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(IN_FLIGHT_RECHECK);
    }
}

/// Commits the open transaction: retries a retriable error, aborts after an abortable one.
fn commit(job: &TxnProducer) -> anyhow::Result<Ending> {
    let mut attempt = 1;
    loop {
        match job.producer.commit_transaction(job.timeout) {
            Ok(()) => return Ok(Ending::Committed),
            Err(KafkaError::Transaction(e)) if e.txn_requires_abort() => {
                abort(job).with_context(|| format!("after commit_transaction: {e}"))?;
                return Ok(Ending::Aborted);
            }
            Err(KafkaError::Transaction(e)) if e.is_retriable() && attempt < COMMIT_ATTEMPTS => {
                attempt += 1;
            }
            Err(e) => {
                return Err(e).with_context(|| {
                    format!("commit_transaction on {} (attempt {attempt})", job.topic)
                })
            }
        }
    }
}

/// Aborts the open transaction.
fn abort(job: &TxnProducer) -> anyhow::Result<()> {
    job.producer
        .abort_transaction(job.timeout)
        .with_context(|| format!("abort_transaction on {}", job.topic))
}
