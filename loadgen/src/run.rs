//! Drives one broker through one scenario: creates the topic, starts the consumers and the
//! producers (one thread each), watches the run (progress, periodic reports, the interval log)
//! and waits until every consumer group has received every acknowledged record.
//!
//! Threads: one per producer (`ThreadedProducer`, fixed-rate schedule or as fast as it takes
//! records), one per consumer (`BaseConsumer` polling), and the calling thread as monitor. A
//! consumer sends its interval histogram to the monitor every `FLUSH_INTERVAL` over a
//! bounded channel; the monitor merges them into the run's total (µs, see `latency`).
//!
//! transactions: the producers are transactional (see `txn`), and only records of committed
//! transactions count as sent, received and in the window's rate.
//!
//! catchup runs in two phases: produce the whole backlog with no consumer, then start the
//! consumers from the beginning and time the read.

use crate::client::{self, CountingContext, DeliveryCounts, Endpoint};
use crate::hdr_log::HdrLog;
use crate::latency::{self, LatencyRecorder, Percentiles, Window};
use crate::payload::{self, Stamp};
use crate::progress::Progress;
use crate::scenario::Params;
use crate::schedule::{record_index, Clock, RateSchedule};
use crate::txn::{self, TxnCounts, TxnFigures, TxnProducer};
use anyhow::Context as _;
use hdrhistogram::Histogram;
use rdkafka::consumer::BaseConsumer;
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};
use serde::Serialize;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

/// How often a consumer hands its interval histogram to the monitor.
const FLUSH_INTERVAL: Duration = Duration::from_millis(200);
/// Interval histograms in flight from consumers to the monitor; a consumer blocks when full.
const HISTOGRAM_CHANNEL_BOUND: usize = 64;
/// Monitor tick.
const TICK: Duration = Duration::from_millis(100);
/// Length of one interval of the HdrHistogram log.
const LOG_INTERVAL: Duration = Duration::from_secs(1);
/// How long a consumer's poll waits for a record before checking whether to stop.
const POLL_TIMEOUT: Duration = Duration::from_millis(50);
/// Delay between the consumers being ready and the first intended send.
const START_DELAY: Duration = Duration::from_millis(20);
/// The record index of a probe: one record per partition sent before the clock starts, so
/// that the run begins with every consumer fetching every partition (connection set-up and
/// the first offset look-ups are not counted as latency). Probes are not counted as sent or
/// received.
const PROBE_INDEX: u64 = u64::MAX;

/// One periodic report (soak, or any run with `--report-every`).
#[derive(Debug, Clone, Serialize)]
pub struct IntervalReport {
    /// End of the interval, seconds since the measured window started.
    pub t_s: f64,
    pub msgs_per_sec: f64,
    #[serde(flatten)]
    pub latency: Percentiles,
}

/// catchup only: the two phases.
#[derive(Debug, Clone, Serialize)]
pub struct CatchupFigures {
    pub produced_bytes: u64,
    pub produce_s: f64,
    pub produce_mb_per_sec: f64,
    pub read_s: f64,
    pub read_mb_per_sec: f64,
}

/// What one broker did in one run.
pub struct RunOutcome {
    pub topic: String,
    pub partitions: u32,
    /// Latency of the records intended inside the measured window (µs).
    pub latency: Histogram<u64>,
    /// Records acknowledged to the producers (transactions: records of committed
    /// transactions).
    pub sent: u64,
    /// Acknowledgement latency (intended send → delivery report) of the window's records (µs).
    pub ack_latency: Histogram<u64>,
    /// Records whose delivery failed.
    pub failed: u64,
    /// Records of this run received, per consumer group.
    pub received_per_group: Vec<u64>,
    /// Poll errors the consumers saw (librdkafka retries them).
    pub consume_errors: u64,
    /// Acknowledged records per second in the measured window (catchup: read rate).
    pub msgs_per_sec: f64,
    /// The same in MB/s (10^6 bytes) of record values.
    pub mb_per_sec: f64,
    pub reports: Vec<IntervalReport>,
    pub catchup: Option<CatchupFigures>,
    pub transactions: Option<TxnFigures>,
}

/// State shared by the consumers of a run and the monitor.
struct Shared {
    stop: AtomicBool,
    /// The measured window, set before the first timed record is produced.
    window: OnceLock<Window>,
    /// Probe records seen, per group.
    probes: Vec<AtomicU64>,
    received: Vec<AtomicU64>,
    /// Clock of the first record received (`u64::MAX` until then), per group.
    first_receipt_ns: Vec<AtomicU64>,
    last_receipt_ns: Vec<AtomicU64>,
    consume_errors: AtomicU64,
}

impl Shared {
    /// Nothing seen yet by any of the `groups` consumer groups.
    fn new(groups: u32) -> Self {
        Self {
            stop: AtomicBool::new(false),
            window: OnceLock::new(),
            probes: (0..groups).map(|_| AtomicU64::new(0)).collect(),
            received: (0..groups).map(|_| AtomicU64::new(0)).collect(),
            first_receipt_ns: (0..groups).map(|_| AtomicU64::new(u64::MAX)).collect(),
            last_receipt_ns: (0..groups).map(|_| AtomicU64::new(0)).collect(),
            consume_errors: AtomicU64::new(0),
        }
    }
}

/// When a producer stops.
#[derive(Clone, Copy)]
enum SendPlan {
    /// Fixed rate until the intended time reaches `end_ns`.
    Fixed { schedule: RateSchedule, end_ns: u64 },
    /// As fast as possible until the clock reaches `end_ns`.
    Unlimited { end_ns: u64 },
    /// As fast as possible until the run's `records` are sent (catchup).
    Count { records: u64 },
}

struct ProducerJob {
    producer: ThreadedProducer<CountingContext>,
    index: u32,
    producers: u32,
    topic: String,
    partitions: u32,
    record_bytes: usize,
    run_id: u64,
    clock: Clock,
    plan: SendPlan,
    flush_timeout: Duration,
}

struct ConsumerJob {
    consumer: BaseConsumer,
    group: usize,
    run_id: u64,
    clock: Clock,
    shared: Arc<Shared>,
    histograms: SyncSender<Histogram<u64>>,
}

/// The identity of one broker's run: the run id stamped into every record, and the topic.
#[derive(Debug, Clone)]
pub struct RunIdentity {
    pub run_id: u64,
    pub topic: String,
}

/// What the phases of one run share.
struct RunContext<'a> {
    endpoint: &'a Endpoint,
    label: &'a str,
    params: &'a Params,
    identity: &'a RunIdentity,
    partitions: u32,
    clock: Clock,
    counts: Arc<DeliveryCounts>,
    /// transactions: the transactional producers' counters.
    txn: Option<Arc<TxnCounts>>,
    shared: Arc<Shared>,
    histograms: SyncSender<Histogram<u64>>,
}

/// Runs `params` against `endpoint`; writes one interval histogram per second to the
/// HdrHistogram log at `hlog_path`.
pub fn run(
    endpoint: &Endpoint,
    label: &str,
    params: &Params,
    identity: &RunIdentity,
    hlog_path: &Path,
) -> anyhow::Result<RunOutcome> {
    let topic = identity.topic.as_str();
    let partitions = client::create_topic(endpoint, topic, params)?;
    let clock = Clock::start();
    let hlog = HdrLog::create(hlog_path, label, SystemTime::now())?;
    let counts = Arc::new(DeliveryCounts::new(clock));
    let txn = params.records_per_txn.map(|_| Arc::new(TxnCounts::new()));
    let producers = connected_producers(endpoint, topic, params, &counts)?;
    let shared = Arc::new(Shared::new(params.groups));
    let (histograms, histograms_rx) = sync_channel(HISTOGRAM_CHANNEL_BOUND);
    let mut monitor = Monitor::new(
        clock,
        histograms_rx,
        Delivered {
            counts: counts.clone(),
            txn: txn.clone(),
        },
        params.report_every,
        hlog,
    );
    let context = RunContext {
        endpoint,
        label,
        params,
        identity,
        partitions,
        clock,
        counts: counts.clone(),
        txn: txn.clone(),
        shared: shared.clone(),
        histograms,
    };
    let outcome = match params.catchup_records() {
        Some(records) => run_catchup(&context, &mut monitor, producers, records)?,
        None => run_timed(&context, &mut monitor, producers)?,
    };
    drop(context);
    monitor.collect()?;
    monitor.flush_log()?;
    let transactions = params
        .records_per_txn
        .zip(txn.as_deref())
        .map(|(n, txn)| TxnFigures::of(n, txn, monitor.window_txn_rate()));
    Ok(RunOutcome {
        topic: topic.to_string(),
        partitions,
        sent: monitor.delivered.records(),
        latency: monitor.total,
        failed: counts.failed.load(Ordering::Relaxed),
        ack_latency: counts
            .ack_latency
            .lock()
            .map_or_else(|_| latency::new_histogram(), |h| h.clone()),
        received_per_group: shared
            .received
            .iter()
            .map(|r| r.load(Ordering::Relaxed))
            .collect(),
        consume_errors: shared.consume_errors.load(Ordering::Relaxed),
        msgs_per_sec: outcome.msgs_per_sec,
        mb_per_sec: outcome.mb_per_sec,
        reports: monitor.reports,
        catchup: outcome.catchup,
        transactions,
    })
}

/// The run's `params.producers` producers, each connected and knowing the leaders of `topic`
/// (before the clock starts); transactional ones (transactions) with their transactions
/// initialised, `transactional.id` `<topic>-<producer>`.
fn connected_producers(
    endpoint: &Endpoint,
    topic: &str,
    params: &Params,
    counts: &Arc<DeliveryCounts>,
) -> anyhow::Result<Vec<ThreadedProducer<CountingContext>>> {
    (0..params.producers)
        .map(|index| {
            let producer = match params.records_per_txn {
                Some(_) => client::transactional_producer(
                    endpoint,
                    params,
                    counts.clone(),
                    &format!("{topic}-{index}"),
                )?,
                None => client::producer(endpoint, params, counts.clone())?,
            };
            // Connects and learns the leaders before the clock starts.
            producer
                .client()
                .fetch_metadata(Some(topic), params.drain_timeout)
                .with_context(|| format!("Metadata for {topic} from {endpoint}"))?;
            Ok(producer)
        })
        .collect()
}

/// catchup: produce the whole backlog with nobody reading, then read it from offset 0.
fn run_catchup(
    ctx: &RunContext,
    monitor: &mut Monitor,
    producers: Vec<ThreadedProducer<CountingContext>>,
    records: u64,
) -> anyhow::Result<Outcome> {
    let start_ns = ctx.clock.now_ns();
    // Every record is in the window: its latency is its age when read.
    let everything = Window {
        start_ns: 0,
        end_ns: u64::MAX,
    };
    set_window(&ctx.shared, &ctx.counts, everything);
    let progress = Progress::new(&format!("{} produce", ctx.label), records, "records");
    let handles = spawn_producers(ctx, producers, SendPlan::Count { records })?;
    monitor.watch(&progress, |m| {
        let acked = m.delivered.records();
        (
            handles.iter().all(JoinHandle::is_finished),
            acked,
            "produce",
        )
    })?;
    join_producers(handles)?;
    let produce_end_ns = ctx.clock.now_ns();
    progress.finish();

    let sent = monitor.delivered.records();
    let read_start_ns = ctx.clock.now_ns();
    let consumers = spawn_consumers(ctx)?;
    let progress = Progress::new(&format!("{} read", ctx.label), sent, "records");
    drain(
        monitor,
        &progress,
        &ctx.shared,
        sent,
        ctx.params.drain_timeout,
        None,
    )?;
    progress.finish();
    join_consumers(consumers, &ctx.shared)?;
    let read_s = read_seconds(&ctx.shared, read_start_ns);
    let produced_bytes = sent * ctx.params.record_bytes as u64;
    let produce_s = seconds_between(start_ns, produce_end_ns);
    let read_mb_per_sec = per_sec(produced_bytes, read_s) / 1e6;
    Ok(Outcome {
        msgs_per_sec: per_sec(sent, read_s),
        mb_per_sec: read_mb_per_sec,
        catchup: Some(CatchupFigures {
            produced_bytes,
            produce_s,
            produce_mb_per_sec: per_sec(produced_bytes, produce_s) / 1e6,
            read_s,
            read_mb_per_sec,
        }),
    })
}

/// The timed scenarios: consumers first, probes, then warm-up and the measured window.
fn run_timed(
    ctx: &RunContext,
    monitor: &mut Monitor,
    producers: Vec<ThreadedProducer<CountingContext>>,
) -> anyhow::Result<Outcome> {
    let params = ctx.params;
    let consumers = spawn_consumers(ctx)?;
    probe(ctx)?;
    let start_ns = ctx.clock.now_ns() + duration_ns(START_DELAY);
    let window_start_ns = start_ns + duration_ns(params.warmup);
    let window = Window {
        start_ns: window_start_ns,
        end_ns: window_start_ns + duration_ns(params.duration),
    };
    let plan = match params.rate_per_sec {
        Some(rate) => SendPlan::Fixed {
            schedule: RateSchedule::new(start_ns, rate),
            end_ns: window.end_ns,
        },
        None => SendPlan::Unlimited {
            end_ns: window.end_ns,
        },
    };
    set_window(&ctx.shared, &ctx.counts, window);
    let total_s = (params.warmup + params.duration).as_secs();
    let progress = Progress::new(ctx.label, total_s, "s");
    let handles = spawn_producers(ctx, producers, plan)?;
    monitor.window = Some(window);
    monitor.watch(&progress, |m| {
        let now_ns = m.clock.now_ns();
        let elapsed_s = now_ns.saturating_sub(start_ns) / 1_000_000_000;
        let phase = if now_ns < window.start_ns {
            "warm-up"
        } else {
            "measure"
        };
        (
            handles.iter().all(JoinHandle::is_finished),
            elapsed_s,
            phase,
        )
    })?;
    join_producers(handles)?;
    let sent = monitor.delivered.records();
    drain(
        monitor,
        &progress,
        &ctx.shared,
        sent,
        params.drain_timeout,
        Some(total_s),
    )?;
    progress.finish();
    join_consumers(consumers, &ctx.shared)?;
    let msgs_per_sec = monitor.window_rate();
    Ok(Outcome {
        msgs_per_sec,
        mb_per_sec: msgs_per_sec * params.record_bytes as f64 / 1e6,
        catchup: None,
    })
}

fn set_window(shared: &Shared, counts: &DeliveryCounts, window: Window) {
    let set = shared.window.set(window);
    assert!(set.is_ok(), "the measured window is set once per run");
    let set = counts.window.set(window);
    assert!(set.is_ok(), "the measured window is set once per run");
}

/// Sends one probe record to every partition (with a producer of its own, so probes are not
/// counted as sent) and waits until every group has received them all.
fn probe(ctx: &RunContext) -> anyhow::Result<()> {
    let (params, identity, shared) = (ctx.params, ctx.identity, &ctx.shared);
    let counts = Arc::new(DeliveryCounts::new(Clock::start()));
    let producer = client::producer(ctx.endpoint, params, counts)?;
    let mut value = payload::filler(params.record_bytes);
    Stamp {
        intended_ns: 0,
        run_id: identity.run_id,
        index: PROBE_INDEX,
    }
    .write_to(&mut value);
    for partition in 0..ctx.partitions {
        let partition = i32::try_from(partition).context("partition id")?;
        let record = BaseRecord::<(), [u8]>::to(&identity.topic)
            .partition(partition)
            .payload(&value[..]);
        client::send(&producer, record, &identity.topic)?;
    }
    producer
        .flush(params.drain_timeout)
        .with_context(|| format!("flushing the probes of {}", identity.topic))?;
    let expected = u64::from(ctx.partitions);
    let deadline = std::time::Instant::now() + params.drain_timeout;
    let seen = || {
        shared
            .probes
            .iter()
            .map(|p| p.load(Ordering::Relaxed))
            .min()
            .unwrap_or(0)
    };
    while seen() < expected {
        if std::time::Instant::now() >= deadline {
            eprintln!(
                "sluice-loadgen: warning: consumers saw {} of {expected} probe records within {:?}; starting anyway",
                seen(),
                params.drain_timeout
            );
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

/// The scenario-specific figures of `run`.
struct Outcome {
    msgs_per_sec: f64,
    mb_per_sec: f64,
    catchup: Option<CatchupFigures>,
}

fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn seconds_between(start_ns: u64, end_ns: u64) -> f64 {
    end_ns.saturating_sub(start_ns) as f64 / 1e9
}

fn per_sec(count: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        count as f64 / seconds
    } else {
        0.0
    }
}

/// Seconds from the first record received (not before `start_ns`) to the last one received
/// by the slowest group.
fn read_seconds(shared: &Shared, start_ns: u64) -> f64 {
    // From the first record: a subscribing consumer first waits for its group's rebalance
    // (3 s of `group.initial.rebalance.delay.ms` on a Kafka-default broker), which is not
    // read time.
    let first_ns = shared
        .first_receipt_ns
        .iter()
        .map(|t| t.load(Ordering::Relaxed))
        .min()
        .filter(|&t| t != u64::MAX)
        .map_or(start_ns, |t| t.max(start_ns));
    let last_ns = shared
        .last_receipt_ns
        .iter()
        .map(|t| t.load(Ordering::Relaxed))
        .max()
        .unwrap_or(first_ns);
    seconds_between(first_ns, last_ns)
}

/// Waits until every group has received `sent` records, or `timeout` passed. The bar stays
/// at `bar_position`, or follows the slowest group's count when that is `None`.
fn drain(
    monitor: &mut Monitor,
    progress: &Progress,
    shared: &Shared,
    sent: u64,
    timeout: Duration,
    bar_position: Option<u64>,
) -> anyhow::Result<()> {
    let deadline_ns = monitor.clock.now_ns() + duration_ns(timeout);
    monitor.watch(progress, |m| {
        let least = shared
            .received
            .iter()
            .map(|r| r.load(Ordering::Relaxed))
            .min()
            .unwrap_or(0);
        let done = least >= sent || m.clock.now_ns() >= deadline_ns;
        (done, bar_position.unwrap_or(least), "drain")
    })?;
    if let Some(least) = shared
        .received
        .iter()
        .map(|r| r.load(Ordering::Relaxed))
        .min()
    {
        if least < sent {
            progress.println(&format!(
                "warning: after {} s a consumer group has {least} of {sent} records",
                timeout.as_secs_f64()
            ));
        }
    }
    Ok(())
}

fn spawn_producers(
    ctx: &RunContext,
    producers: Vec<ThreadedProducer<CountingContext>>,
    plan: SendPlan,
) -> anyhow::Result<Vec<JoinHandle<anyhow::Result<()>>>> {
    if let (Some(records_per_txn), Some(counts)) = (ctx.params.records_per_txn, &ctx.txn) {
        return spawn_transactional(ctx, producers, records_per_txn, counts);
    }
    let (params, count) = (ctx.params, ctx.params.producers);
    producers
        .into_iter()
        .zip(0..)
        .map(|(producer, index)| {
            let job = ProducerJob {
                producer,
                index,
                producers: count,
                topic: ctx.identity.topic.clone(),
                partitions: ctx.partitions,
                record_bytes: params.record_bytes,
                run_id: ctx.identity.run_id,
                clock: ctx.clock,
                plan,
                flush_timeout: params.drain_timeout,
            };
            std::thread::Builder::new()
                .name(format!("producer-{index}"))
                .spawn(move || produce(job))
                .context("spawning a producer thread")
        })
        .collect()
}

/// transactions: one closed-loop transactional producer thread each (see `txn`), until the
/// measured window ends.
fn spawn_transactional(
    ctx: &RunContext,
    producers: Vec<ThreadedProducer<CountingContext>>,
    records_per_txn: u32,
    counts: &Arc<TxnCounts>,
) -> anyhow::Result<Vec<JoinHandle<anyhow::Result<()>>>> {
    let window = *ctx
        .shared
        .window
        .get()
        .context("the measured window is set before the producers start")?;
    producers
        .into_iter()
        .zip(0..)
        .map(|(producer, index)| {
            let job = TxnProducer {
                producer,
                index,
                producers: ctx.params.producers,
                topic: ctx.identity.topic.clone(),
                partitions: ctx.partitions,
                record_bytes: ctx.params.record_bytes,
                records_per_txn,
                run_id: ctx.identity.run_id,
                clock: ctx.clock,
                window,
                timeout: ctx.params.drain_timeout,
                counts: counts.clone(),
            };
            std::thread::Builder::new()
                .name(format!("txn-producer-{index}"))
                .spawn(move || txn::produce(job))
                .context("spawning a transactional producer thread")
        })
        .collect()
}

fn join_producers(handles: Vec<JoinHandle<anyhow::Result<()>>>) -> anyhow::Result<()> {
    for handle in handles {
        handle
            .join()
            .map_err(|_| anyhow::anyhow!("a producer thread panicked"))??;
    }
    Ok(())
}

fn spawn_consumers(ctx: &RunContext) -> anyhow::Result<Vec<JoinHandle<()>>> {
    let (params, identity, partitions) = (ctx.params, ctx.identity, ctx.partitions);
    let mut handles = Vec::new();
    for group in 0..params.groups {
        let group_id = format!("{}-g{group}", identity.topic);
        for member in 0..params.consumers_per_group {
            let mine: Vec<i32> = (0..partitions)
                .filter(|p| p % params.consumers_per_group == member)
                .map(|p| i32::try_from(p).context("partition id"))
                .collect::<anyhow::Result<_>>()?;
            let consumer =
                client::consumer(ctx.endpoint, params, &group_id, &identity.topic, &mine)?;
            let job = ConsumerJob {
                consumer,
                group: group as usize,
                run_id: identity.run_id,
                clock: ctx.clock,
                shared: ctx.shared.clone(),
                histograms: ctx.histograms.clone(),
            };
            let handle = std::thread::Builder::new()
                .name(format!("consumer-{group}-{member}"))
                .spawn(move || consume(job))
                .context("spawning a consumer thread")?;
            handles.push(handle);
        }
    }
    Ok(handles)
}

fn join_consumers(handles: Vec<JoinHandle<()>>, shared: &Shared) -> anyhow::Result<()> {
    shared.stop.store(true, Ordering::Relaxed);
    for handle in handles {
        handle
            .join()
            .map_err(|_| anyhow::anyhow!("a consumer thread panicked"))?;
    }
    Ok(())
}

/// A producer thread: sends its share of the run's records, then flushes.
fn produce(job: ProducerJob) -> anyhow::Result<()> {
    set_timer_slack_ns(1);
    let mut value = payload::filler(job.record_bytes);
    for nth in 0.. {
        let index = record_index(nth, job.index, job.producers);
        let intended_ns = match job.plan {
            SendPlan::Fixed { schedule, end_ns } => {
                let intended_ns = schedule.intended_ns(index);
                if intended_ns >= end_ns {
                    break;
                }
                wait_until(&job, &schedule, index);
                intended_ns
            }
            SendPlan::Unlimited { end_ns } => {
                let now_ns = job.clock.now_ns();
                if now_ns >= end_ns {
                    break;
                }
                now_ns
            }
            SendPlan::Count { records } => {
                if index >= records {
                    break;
                }
                job.clock.now_ns()
            }
        };
        Stamp {
            intended_ns,
            run_id: job.run_id,
            index,
        }
        .write_to(&mut value);
        let partition = i32::try_from(index % u64::from(job.partitions)).context("partition id")?;
        let record = BaseRecord::<(), [u8]>::to(&job.topic)
            .partition(partition)
            .payload(&value[..]);
        client::send(&job.producer, record, &job.topic)?;
    }
    job.producer
        .flush(job.flush_timeout)
        .with_context(|| format!("flushing producer {} of {}", job.index, job.topic))?;
    Ok(())
}

/// Waits for record `index`'s intended time (delivery reports are served meanwhile by the
/// producer's own polling thread, so acknowledgements are timed when they arrive).
fn wait_until(job: &ProducerJob, schedule: &RateSchedule, index: u64) {
    loop {
        let wait = schedule.wait_before(index, job.clock.now_ns());
        if wait.is_zero() {
            return;
        }
        // Sleep, never spin: loadgen shares its core with librdkafka's threads and the
        // consumers, and a spinning producer delays their wake-ups (measured here: p50 0.98 ms
        // spinning against 0.59 ms sleeping at 10,000 msg/s). With 1 ns timer slack the
        // oversleep is a few µs, and it counts as latency, as it should.
        std::thread::sleep(wait);
    }
}

/// Lets this thread's sleeps end within `ns` of their deadline instead of Linux's default 50
/// µs timer slack (best effort: failure only costs precision).
fn set_timer_slack_ns(ns: libc::c_ulong) {
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and touches only this thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, ns, 0, 0, 0);
    }
}

/// A consumer thread: polls until told to stop, timing every record of this run.
fn consume(job: ConsumerJob) {
    // Created when the first timed record arrives: the window is set before any is sent.
    let mut recorder: Option<LatencyRecorder> = None;
    let mut next_flush_ns = job.clock.now_ns() + duration_ns(FLUSH_INTERVAL);
    let received = &job.shared.received[job.group];
    let first_receipt_ns = &job.shared.first_receipt_ns[job.group];
    let last_receipt_ns = &job.shared.last_receipt_ns[job.group];
    while !job.shared.stop.load(Ordering::Relaxed) {
        match job.consumer.poll(POLL_TIMEOUT) {
            Some(Ok(message)) => {
                let receipt_ns = job.clock.now_ns();
                let stamp = message.payload().and_then(Stamp::read_from);
                if let Some(stamp) = stamp.filter(|s| s.run_id == job.run_id) {
                    if stamp.index == PROBE_INDEX {
                        job.shared.probes[job.group].fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    if let Some(window) = job.shared.window.get() {
                        recorder
                            .get_or_insert_with(|| LatencyRecorder::new(*window))
                            .record(stamp.intended_ns, receipt_ns);
                    }
                    received.fetch_add(1, Ordering::Relaxed);
                    first_receipt_ns.fetch_min(receipt_ns, Ordering::Relaxed);
                    last_receipt_ns.fetch_max(receipt_ns, Ordering::Relaxed);
                }
            }
            Some(Err(_)) => {
                job.shared.consume_errors.fetch_add(1, Ordering::Relaxed);
            }
            None => {}
        }
        let now_ns = job.clock.now_ns();
        if now_ns >= next_flush_ns {
            next_flush_ns = now_ns + duration_ns(FLUSH_INTERVAL);
            if let Some(recorder) = recorder.as_mut() {
                if job.histograms.send(recorder.take_interval()).is_err() {
                    return; // the monitor is gone: the run is over
                }
            }
        }
    }
    // The monitor collects this last interval after joining; a send error means it is gone.
    if let Some(mut recorder) = recorder {
        let _ = job.histograms.send(recorder.take_interval());
    }
}

/// (clock ns, records delivered so far, transactions committed so far).
type AckSample = (u64, u64, u64);

/// What counts as delivered: records acknowledged to the producers, or (transactions) records
/// of committed transactions.
struct Delivered {
    counts: Arc<DeliveryCounts>,
    txn: Option<Arc<TxnCounts>>,
}

impl Delivered {
    /// Records delivered so far: the ones every consumer group must receive.
    fn records(&self) -> u64 {
        match &self.txn {
            Some(txn) => txn.committed_records.load(Ordering::Relaxed),
            None => self.counts.acked.load(Ordering::Relaxed),
        }
    }

    /// Transactions committed so far (0 for plain producers).
    fn txns(&self) -> u64 {
        self.txn
            .as_ref()
            .map_or(0, |txn| txn.committed.load(Ordering::Relaxed))
    }
}

/// The calling thread during a run: merges histograms, draws progress, writes the interval
/// log (which it owns), prints periodic reports and measures the rate in the window.
struct Monitor {
    clock: Clock,
    rx: Receiver<Histogram<u64>>,
    delivered: Delivered,
    hlog: HdrLog,
    total: Histogram<u64>,
    log_interval: Histogram<u64>,
    log_interval_start_ns: u64,
    report_every: Option<Duration>,
    report: Histogram<u64>,
    report_start: (u64, u64),
    reports: Vec<IntervalReport>,
    /// The measured window of a timed run (none in catchup).
    window: Option<Window>,
    /// Delivered counts at the first tick inside the window and at the first after it.
    window_samples: (Option<AckSample>, Option<AckSample>),
    last_rate_sample: (u64, u64),
    rate: f64,
}

impl Monitor {
    fn new(
        clock: Clock,
        rx: Receiver<Histogram<u64>>,
        delivered: Delivered,
        report_every: Option<Duration>,
        hlog: HdrLog,
    ) -> Monitor {
        Monitor {
            clock,
            rx,
            delivered,
            hlog,
            total: latency::new_histogram(),
            log_interval: latency::new_histogram(),
            log_interval_start_ns: 0,
            report_every,
            report: latency::new_histogram(),
            report_start: (0, 0),
            reports: Vec::new(),
            window: None,
            window_samples: (None, None),
            last_rate_sample: (0, 0),
            rate: 0.0,
        }
    }

    /// Ticks until `status` says done; `status` gives (done, bar position, phase name).
    fn watch(
        &mut self,
        progress: &Progress,
        mut status: impl FnMut(&Monitor) -> (bool, u64, &'static str),
    ) -> anyhow::Result<()> {
        loop {
            std::thread::sleep(TICK);
            self.collect()?;
            let now_ns = self.clock.now_ns();
            let acked = self.delivered.records();
            let txns = self.delivered.txns();
            self.sample_window(now_ns, acked, txns);
            if now_ns.saturating_sub(self.last_rate_sample.0) >= 1_000_000_000 {
                let (t0, a0) = self.last_rate_sample;
                self.rate = per_sec(acked.saturating_sub(a0), seconds_between(t0, now_ns));
                self.last_rate_sample = (now_ns, acked);
            }
            self.maybe_report(now_ns, acked, progress);
            let (done, position, phase) = status(self);
            let p99_ms = (!self.total.is_empty()).then(|| Percentiles::of(&self.total).p99_ms);
            progress.update(position, self.rate, p99_ms, phase);
            if done {
                return Ok(());
            }
        }
    }

    /// Merges the consumers' interval histograms that have arrived; writes log intervals.
    fn collect(&mut self) -> anyhow::Result<()> {
        while let Ok(h) = self.rx.try_recv() {
            latency::merge(&mut self.total, &h);
            latency::merge(&mut self.log_interval, &h);
            latency::merge(&mut self.report, &h);
        }
        let now_ns = self.clock.now_ns();
        if now_ns.saturating_sub(self.log_interval_start_ns) >= duration_ns(LOG_INTERVAL) {
            self.flush_log()?;
        }
        Ok(())
    }

    /// Writes the current log interval (if it has records) and starts the next.
    fn flush_log(&mut self) -> anyhow::Result<()> {
        let now_ns = self.clock.now_ns();
        if !self.log_interval.is_empty() {
            self.hlog
                .write_interval(&self.log_interval, self.log_interval_start_ns, now_ns)?;
        }
        self.log_interval.reset();
        self.log_interval_start_ns = now_ns;
        Ok(())
    }

    fn sample_window(&mut self, now_ns: u64, acked: u64, txns: u64) {
        let Some(window) = self.window else { return };
        if now_ns >= window.start_ns && self.window_samples.0.is_none() {
            self.window_samples.0 = Some((now_ns, acked, txns));
            self.report_start = (now_ns, acked);
            self.report.reset();
        }
        if now_ns >= window.end_ns && self.window_samples.1.is_none() {
            self.window_samples.1 = Some((now_ns, acked, txns));
        }
    }

    /// Delivered records per second between the window samples.
    fn window_rate(&self) -> f64 {
        match self.window_samples {
            (Some((t0, a0, _)), Some((t1, a1, _))) => {
                per_sec(a1.saturating_sub(a0), seconds_between(t0, t1))
            }
            _ => 0.0,
        }
    }

    /// Committed transactions per second between the window samples.
    fn window_txn_rate(&self) -> f64 {
        match self.window_samples {
            (Some((t0, _, x0)), Some((t1, _, x1))) => {
                per_sec(x1.saturating_sub(x0), seconds_between(t0, t1))
            }
            _ => 0.0,
        }
    }

    fn maybe_report(&mut self, now_ns: u64, acked: u64, progress: &Progress) {
        let Some(every) = self.report_every else {
            return;
        };
        // Timed runs report from the start of the measured window; catchup from its start.
        if self.window.is_some() && self.window_samples.0.is_none() {
            return;
        }
        let (t0, a0) = self.report_start;
        if now_ns.saturating_sub(t0) < duration_ns(every) {
            return;
        }
        let window_start_ns = self.window_samples.0.map_or(0, |(t, _, _)| t);
        let report = IntervalReport {
            t_s: seconds_between(window_start_ns, now_ns),
            msgs_per_sec: per_sec(acked.saturating_sub(a0), seconds_between(t0, now_ns)),
            latency: Percentiles::of(&self.report),
        };
        progress.println(&format!(
            "t={:>7.1} s  {:>9.0} msg/s  p50 {:.3} ms  p99 {:.3} ms  p99.9 {:.3} ms  max {:.3} ms  (total p99 {:.3} ms)",
            report.t_s,
            report.msgs_per_sec,
            report.latency.p50_ms,
            report.latency.p99_ms,
            report.latency.p999_ms,
            report.latency.max_ms,
            Percentiles::of(&self.total).p99_ms,
        ));
        self.reports.push(report);
        self.report.reset();
        self.report_start = (now_ns, acked);
    }
}

/// A file-name-safe form of a broker label.
pub fn slug(label: &str) -> String {
    let s: String = label
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    s.split('-')
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join("-")
}
