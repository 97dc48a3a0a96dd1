//! Transactions under the deterministic simulation (`replication::sim`, issue #28 point 6):
//! the real coordinator state machine ([`super::state`]), its `__transaction_state` records
//! ([`super::log`], replayed by [`super::service::apply_batch`]) on a [`SimLog`], the real
//! marker retry rule ([`super::markers::MarkerProgress`], [`super::markers::outcome_of`]), and
//! on each partition the real producer state, last stable offset and aborted-transaction
//! entries ([`storage::ProducerState`], [`storage::collect_aborted`]), all on one seeded
//! [`Executor`] and one lossy, reordering [`SimNetwork`].
//!
//! Why here: the coordinator's service (`service.rs`, `store.rs`, `markers.rs`) is bound to
//! the shard (metadata, controller, partition service); this module hosts what those do
//! around the state machine — write the transit, then `complete` it (`abandon` on a failed
//! write or a lost coordinatorship), fence an open transaction and answer
//! CONCURRENT_TRANSACTIONS, send the markers after a prepare and resume them after a load,
//! abort transactions past their timeout — in [`SimCoordinator`], step for step. A change to
//! that glue in the service is not seen here; a change to the state machine, the record
//! codec, the replay, the marker rule or the partition's producer state is.
//!
//! Per seed: [`TXN_IDS`] transactional ids over [`PARTITIONS`] partitions of one topic. A
//! driver per id starts producer instances (InitProducerId, then transactions: AddPartitions,
//! data batches with idempotent sequences, EndTxn commit or abort, sometimes a stall past the
//! transaction timeout); now and then it starts the next instance while the previous one is
//! still running, which fences it. A fenced instance either stops or, as a zombie, keeps
//! writing to its transaction's partitions at its old epoch and then asks to commit. Every
//! request and answer crosses the network (seeded delay and loss; a request is retried with
//! the same sequence when no answer comes). The coordinator fails over one to three times: its
//! process crashes (its log loses what was not written, its tasks and answers die), and after
//! a seeded gap a new coordinator at the next coordinator epoch replays the log from the same
//! simulated disk (answering COORDINATOR_LOAD_IN_PROGRESS meanwhile) and resumes the markers
//! of every prepared transaction. Each partition's high watermark follows its log end one
//! seeded replication round behind (so a marker can be appended and not yet below it), and
//! a read_committed reader per partition fetches, on its own schedule, up to the last stable
//! offset as Kafka's consumer does (the aborted transactions of the range, skipping their
//! batches until their abort marker). After [`RUN`] the producers stop and faults (crashes)
//! end; the run continues until everything settles or [`SETTLE_MAX`] passes.
//!
//! Checkers (a failure names the invariant and prints `SLUICE_SIM_SEED=<seed>`):
//! - [`check_delivery`] — **read_committed stops at the LSO**: a record reaches the reader only
//!   when its producer's next marker in the partition is a commit below the high watermark,
//!   and no record reaches it twice.
//! - [`check_atomicity`] — **atomicity**: per transaction, the reader saw none of its records
//!   or all the partitions appended; a transaction seen was one its producer asked to commit;
//!   a commit acknowledged to its producer is seen whole.
//! - [`check_delivery`] and [`check_atomicity`] — **fencing**: no record a zombie sent after it
//!   learned it was fenced is ever read committed.
//! - [`check_timeouts`] — **no transaction open past its timeout**: while a coordinator
//!   serves, no transaction stays Ongoing longer than its timeout plus a few abort checks.
//! - [`check_settled`] — **liveness**: once faults stop, every transaction completes at the
//!   coordinator, every partition got the markers (no open transaction, LSO at the log end)
//!   and the reader read to the end.
//! - **not vacuous** (over the seeds run): commits seen, aborts, zombie writes (some appended
//!   before the fence's marker), fences by a new instance, aborts by timeout and failovers all
//!   happened.
//!
//! Not modelled: replication of the partitions and of `__transaction_state` (the new
//! coordinator reads the old one's disk; `replication::sim` tests the log's replication),
//! KIP-890 verification (the produce path does not verify yet: a zombie writes only to the
//! partitions its transaction added), TxnOffsetCommit, KIP-360's producer-side epoch bump,
//! transactional id expiry, epoch exhaustion (a new producer id), version 2's implicit add.
//!
//! Transaction version (KIP-890 part 2): half the seeds run at version 2 — every EndTxn bumps
//! the epoch and the instance continues with the answered one (sequences from 0; a retried
//! EndTxn is answered the same epoch), the coordinator's fences bump twice — the others at 1.

use super::log::{encode_key, encode_value};
use super::markers::{outcome_of, MarkerProgress, NextRound, Outcome};
use super::service::apply_batch;
use super::state::{
    check_timeout, EndStep, InitStep, TxnError, TxnMetadata, TxnState, TxnTransit,
    CLIENT_TXN_VERSION_1, CLIENT_TXN_VERSION_2,
};
use crate::coordinator_runtime::log::REPLAY_READ_BYTES;
use crate::errors::storage_error_code;
use bytes::Bytes;
use futures_util::future::{join_all, select, Either};
use replication::runtime::{Clock, NodeId, Runtime, Transport};
use replication::sim::{
    seeds, Endpoint, Executor, LinkFaults, SeedGuard, SimDisk, SimLog, SimNetwork, SimRuntime,
};
use replication::PartitionStore;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;
use std::time::Duration;
use storage::{
    AbortedTxnEntry, BatchHeader, LeaderEpoch, Notify, Offset, ProducerState, SequenceCheck,
    StorageError, TimestampMs, TopicPartition, TxnMarker, TxnResult,
};

/// Seeds `cargo test` runs (`SLUICE_SIM_BASE` / `SLUICE_SIM_COUNT` / `SLUICE_SIM_SEED` choose
/// others).
const SEEDS: u64 = 100;
const TXN_IDS: usize = 3;
const PARTITIONS: usize = 3;
const TOPIC: &str = "t";
/// Simulated time producers run and the coordinator fails over.
const RUN: Duration = Duration::from_secs(3);
/// Longest simulated time to settle after [`RUN`].
const SETTLE_MAX: Duration = Duration::from_secs(60);
const FAULTS: LinkFaults = LinkFaults {
    drop_percent: 10,
    delay_us_max: 4_000,
};
/// How long a caller waits for an answer before it retries (above a round trip's longest
/// delay, so a retry never overtakes its original).
const CALL_TIMEOUT: Duration = Duration::from_millis(10);
/// `transaction.max.timeout.ms` and the producers' `transaction.timeout.ms` range.
const MAX_TIMEOUT_MS: i32 = 2_000;
const TIMEOUT_MS_MIN: u64 = 200;
const TIMEOUT_MS_MAX: u64 = 800;
/// `transaction.abort.timed.out.transaction.cleanup.interval.ms`, scaled down.
const ABORT_INTERVAL: Duration = Duration::from_millis(50);
/// Simulated wall clock at time zero, ms since the epoch.
const EPOCH_MS: i64 = 1_700_000_000_000;

/// One transaction of one producer instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct TxnTag {
    instance: u32,
    number: u32,
}

/// One record: its transaction and its index there (unique in the transaction).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct RecordTag {
    txn: TxnTag,
    index: u32,
}

enum Request {
    InitProducerId {
        transactional_id: String,
        timeout_ms: i32,
    },
    AddPartitions {
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        partitions: BTreeSet<TopicPartition>,
    },
    EndTxn {
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        client_transaction_version: i16,
    },
    /// One transactional data batch (real bytes) and the tags of its records.
    Produce {
        batch: Bytes,
        tags: Vec<RecordTag>,
    },
    WriteTxnMarker {
        marker: TxnMarker,
    },
}

enum Response {
    ProducerId(Result<(i64, i16), TxnError>),
    Done(Result<(), TxnError>),
    /// A partition's Kafka error code for a produce or a marker (0: appended).
    Code(i16),
}

enum Msg {
    Request(u64, Request),
    Response(u64, Response),
}

/// One node's side of the network, with the answers to its own calls.
struct Node {
    endpoint: Endpoint<Msg>,
    waiting: RefCell<BTreeSet<u64>>,
    answers: RefCell<HashMap<u64, Response>>,
    arrived: Rc<Notify>,
    next_call: Cell<u64>,
}

impl Node {
    fn new(net: &SimNetwork<Msg>, id: NodeId) -> Rc<Node> {
        Rc::new(Node {
            endpoint: net.endpoint(id),
            waiting: RefCell::new(BTreeSet::new()),
            answers: RefCell::new(HashMap::new()),
            arrived: Rc::new(Notify::default()),
            next_call: Cell::new(0),
        })
    }

    /// Sends `request` to `to` and waits [`CALL_TIMEOUT`] for its answer (`None`: lost either
    /// way, or never answered).
    async fn call(&self, rt: &SimRuntime, to: NodeId, request: Request) -> Option<Response> {
        let id = self.next_call.get();
        self.next_call.set(id + 1);
        self.waiting.borrow_mut().insert(id);
        if self.endpoint.send(to, Msg::Request(id, request)).is_err() {
            self.waiting.borrow_mut().remove(&id);
            return None;
        }
        let answer = async {
            loop {
                let arrived = self.arrived.notified();
                if let Some(r) = self.answers.borrow_mut().remove(&id) {
                    return r;
                }
                arrived.await;
            }
        };
        let answered = match select(Box::pin(answer), rt.sleep(CALL_TIMEOUT)).await {
            Either::Left((r, _)) => Some(r),
            Either::Right(_) => None,
        };
        self.waiting.borrow_mut().remove(&id);
        answered
    }
}

/// What the node at the other end of a request does.
#[derive(Clone, Copy)]
enum Role {
    Coordinator,
    Partition(usize),
    Client,
}

/// One coordinator process: its log handle, its state, whether it serves yet.
struct SimCoordinator {
    coordinator_epoch: i32,
    log: SimLog,
    txns: RefCell<HashMap<String, TxnMetadata>>,
    /// False once crashed: its tasks stop and its answers never leave.
    alive: Cell<bool>,
    /// Loaded: serving requests.
    serving: Cell<bool>,
    serving_since_ms: Cell<i64>,
}

/// One partition leader: the log (headers, markers, tags) and its real producer state.
struct Partition {
    tp: TopicPartition,
    producers: ProducerState,
    entries: Vec<Entry>,
    /// The `.txnindex` entries of aborted transactions, in marker order.
    aborted: Vec<AbortedTxnEntry>,
    high_watermark: Offset,
    /// The read_committed reader's next offset.
    read_position: Offset,
}

struct Entry {
    header: BatchHeader,
    marker: Option<TxnMarker>,
    tags: Vec<RecordTag>,
}

/// What the producers were told and the readers saw, for the checkers.
#[derive(Default)]
struct Model {
    appended: BTreeMap<TxnTag, BTreeSet<u32>>,
    delivered: BTreeMap<TxnTag, BTreeSet<u32>>,
    commit_sent: BTreeSet<TxnTag>,
    commit_acked: BTreeSet<TxnTag>,
    zombie_records: BTreeSet<RecordTag>,
    /// Per producer id, the epoch below which the coordinator durably fenced every epoch (an
    /// InitProducerId's bump, or a fence's PrepareAbort, written).
    fenced_below: BTreeMap<i64, i16>,
    stats: Stats,
}

/// Counts for the not-vacuous check.
#[derive(Default, Clone, Copy, Debug, PartialEq, Eq)]
struct Stats {
    commits_seen: u64,
    aborts: u64,
    zombie_writes: u64,
    /// Transaction version 2's bumps at EndTxn.
    epoch_bumps: u64,
    /// Zombie batches a partition appended (before the fence's marker reached it).
    zombie_appends: u64,
    fences: u64,
    timeouts: u64,
    loads: u64,
}

struct World {
    rt: SimRuntime,
    net: SimNetwork<Msg>,
    disk: SimDisk,
    coordinator_node: Rc<Node>,
    coordinator: RefCell<Option<Rc<SimCoordinator>>>,
    coordinator_epoch: Cell<i32>,
    next_producer_id: Cell<i64>,
    next_instance: Cell<u32>,
    partitions: Vec<RefCell<Partition>>,
    model: RefCell<Model>,
    /// Producers and crashes stop.
    stopped: Cell<bool>,
    /// The seed's `transaction.version` (1 or 2, KIP-890): the clients' EndTxn and the
    /// coordinator's own fences follow it.
    transaction_version: i16,
}

const COORDINATOR: NodeId = NodeId(0);

fn partition_node(p: usize) -> NodeId {
    NodeId(1 + i32::try_from(p).expect("few partitions"))
}

fn tp(p: usize) -> TopicPartition {
    TopicPartition {
        topic: TOPIC.to_string(),
        partition: i32::try_from(p).expect("few partitions"),
    }
}

impl World {
    fn now_ms(&self) -> i64 {
        EPOCH_MS + i64::try_from(self.rt.now().0.as_millis()).unwrap_or(0)
    }

    async fn sleep_ms(&self, min: u64, max: u64) {
        let ms = self.rt.random(min..max.max(min + 1));
        self.rt.sleep(Duration::from_millis(ms)).await;
    }
}

/// Receives for `node` forever: answers go to its waiting calls, requests to its role.
async fn run_node(world: Rc<World>, node: Rc<Node>, role: Role) {
    loop {
        let (from, msg) = node.endpoint.recv().await;
        match msg {
            Msg::Response(id, response) => {
                if node.waiting.borrow().contains(&id) {
                    node.answers.borrow_mut().insert(id, response);
                    node.arrived.notify_all();
                }
            }
            Msg::Request(id, request) => match role {
                Role::Partition(p) => {
                    let response = {
                        let mut model = world.model.borrow_mut();
                        world.partitions[p].borrow_mut().handle(&mut model, request)
                    };
                    let _ = node.endpoint.send(from, Msg::Response(id, response));
                }
                Role::Coordinator => {
                    let (w, n) = (world.clone(), node.clone());
                    world.rt.spawn(Box::pin(async move {
                        if let Some(response) = coordinate(&w, request).await {
                            let _ = n.endpoint.send(from, Msg::Response(id, response));
                        }
                    }));
                }
                Role::Client => {}
            },
        }
    }
}

// ---- the coordinator host (service.rs / store.rs / markers.rs, step for step) ----

/// One request on the current coordinator; `None` when no coordinator runs, or it crashed
/// before answering (a dead process answers nothing).
async fn coordinate(world: &Rc<World>, request: Request) -> Option<Response> {
    let c = world.coordinator.borrow().clone()?;
    let now_ms = world.now_ms();
    let loading = (!c.serving.get()).then_some(TxnError::CoordinatorLoadInProgress);
    let response = match request {
        Request::InitProducerId {
            transactional_id,
            timeout_ms,
        } => Response::ProducerId(match loading {
            Some(e) => Err(e),
            None => init_producer_id(world, &c, &transactional_id, timeout_ms).await,
        }),
        Request::AddPartitions {
            transactional_id,
            producer_id,
            producer_epoch,
            partitions,
        } => Response::Done(match loading {
            Some(e) => Err(e),
            None => {
                let prepared = with_txn(&c, &transactional_id, |m| {
                    m.add_partitions(
                        producer_id,
                        producer_epoch,
                        &partitions,
                        CLIENT_TXN_VERSION_1,
                        now_ms,
                    )
                });
                match prepared {
                    Ok(None) => Ok(()),
                    Ok(Some(t)) => write(&c, world, &transactional_id, t).await,
                    Err(e) => Err(e),
                }
            }
        }),
        Request::EndTxn {
            transactional_id,
            producer_id,
            producer_epoch,
            commit,
            client_transaction_version,
        } => Response::ProducerId(match loading {
            Some(e) => Err(e),
            None => {
                let prepared = with_txn(&c, &transactional_id, |m| {
                    m.end_txn(
                        producer_id,
                        producer_epoch,
                        commit,
                        client_transaction_version,
                        None,
                        now_ms,
                    )
                });
                match prepared {
                    Ok(EndStep::Done {
                        producer_id,
                        producer_epoch,
                    }) => Ok((producer_id, producer_epoch)),
                    // The seeds' epochs never run out.
                    Ok(EndStep::NeedProducerId) => Err(TxnError::EpochExhausted),
                    Ok(EndStep::Write(t)) => {
                        let answer = (t.producer_id, t.producer_epoch);
                        prepare_end(world, &c, &transactional_id, t)
                            .await
                            .map(|()| answer)
                    }
                    Err(e) => Err(e),
                }
            }
        }),
        Request::Produce { .. } | Request::WriteTxnMarker { .. } => return None,
    };
    c.alive.get().then_some(response)
}

fn with_txn<T>(
    c: &SimCoordinator,
    id: &str,
    f: impl FnOnce(&mut TxnMetadata) -> Result<T, TxnError>,
) -> Result<T, TxnError> {
    match c.txns.borrow_mut().get_mut(id) {
        Some(m) => f(m),
        None => Err(TxnError::InvalidProducerIdMapping),
    }
}

async fn init_producer_id(
    world: &Rc<World>,
    c: &Rc<SimCoordinator>,
    id: &str,
    timeout_ms: i32,
) -> Result<(i64, i16), TxnError> {
    check_timeout(timeout_ms, MAX_TIMEOUT_MS)?;
    let allocate = || {
        let pid = world.next_producer_id.get();
        world.next_producer_id.set(pid + 1);
        pid
    };
    if !c.txns.borrow().contains_key(id) {
        let m = TxnMetadata::new(id, allocate(), timeout_ms, world.now_ms());
        c.txns.borrow_mut().insert(id.to_string(), m);
    }
    let mut fresh_id = None;
    loop {
        let step = with_txn(c, id, |m| {
            m.init_producer_id(
                timeout_ms,
                None,
                fresh_id,
                world.transaction_version,
                world.now_ms(),
            )
        })?;
        match step {
            InitStep::NeedProducerId => fresh_id = Some(allocate()),
            InitStep::Write(t) => {
                let answer = (t.producer_id, t.producer_epoch);
                write(c, world, id, t).await?;
                fenced_below(world, answer);
                return Ok(answer);
            }
            InitStep::FenceAndAbort(t) => {
                let fence = (t.producer_id, t.producer_epoch);
                prepare_end(world, c, id, t).await?;
                fenced_below(world, fence);
                world.model.borrow_mut().stats.fences += 1;
                return Err(TxnError::ConcurrentTransactions);
            }
        }
    }
}

/// Records that every epoch of `producer_id` below `epoch` is durably fenced.
fn fenced_below(world: &World, (producer_id, epoch): (i64, i16)) {
    let mut model = world.model.borrow_mut();
    let below = model.fenced_below.entry(producer_id).or_insert(epoch);
    *below = (*below).max(epoch);
}

/// `store::write`: the transit's record through the real codec, appended and flushed, then
/// applied; abandoned when the write failed or this coordinator died meanwhile.
async fn write(
    c: &SimCoordinator,
    world: &World,
    id: &str,
    transit: TxnTransit,
) -> Result<(), TxnError> {
    let key = encode_key(id);
    let value = encode_value(&transit);
    let batch = storage::build_batch_kv(
        TimestampMs(world.now_ms()),
        &[(Some(key.as_slice()), value.as_deref())],
    );
    let written = async {
        let batches = storage::ValidatedBatches::validate(&batch)?;
        let info = c
            .log
            .append(
                batches,
                LeaderEpoch(c.coordinator_epoch),
                storage::AppendUntil::Written,
            )
            .await?;
        c.log.flush_to(info.last_offset.plus(1)).await?;
        Ok::<(), StorageError>(())
    }
    .await;
    let mut txns = c.txns.borrow_mut();
    let Some(m) = txns.get_mut(id) else {
        return Err(TxnError::NotCoordinator);
    };
    if !c.alive.get() {
        m.abandon();
        return Err(TxnError::NotCoordinator);
    }
    if written.is_err() {
        m.abandon();
        return Err(TxnError::CoordinatorNotAvailable);
    }
    if transit.state == TxnState::Dead {
        txns.remove(id);
        return Ok(());
    }
    let applied = m.complete(transit);
    assert_eq!(applied, Ok(()), "a written transition applies ({id})");
    applied
}

/// `service::prepare_end`: PrepareCommit/PrepareAbort written, then the markers.
async fn prepare_end(
    world: &Rc<World>,
    c: &Rc<SimCoordinator>,
    id: &str,
    t: TxnTransit,
) -> Result<(), TxnError> {
    write(c, world, id, t).await?;
    spawn_markers(world, c, id);
    Ok(())
}

fn spawn_markers(world: &Rc<World>, c: &Rc<SimCoordinator>, id: &str) {
    let (w, c, id) = (world.clone(), c.clone(), id.to_string());
    world.rt.spawn(Box::pin(async move {
        complete_markers(&w, &c, &id).await;
    }));
}

/// `markers::complete`: rounds of WriteTxnMarkers to every partition still without its marker,
/// by the real retry rule, then CompleteCommit/CompleteAbort written (retried while the log is
/// only unavailable).
async fn complete_markers(world: &Rc<World>, c: &Rc<SimCoordinator>, id: &str) {
    let mut progress = MarkerProgress::new();
    loop {
        if !c.alive.get() {
            return;
        }
        let (marker, left) = {
            let txns = c.txns.borrow();
            let Some(m) = txns.get(id) else { return };
            let result = match m.state {
                TxnState::PrepareCommit => TxnResult::Commit,
                TxnState::PrepareAbort => TxnResult::Abort,
                _ => return,
            };
            let marker = TxnMarker {
                producer_id: m.producer_id,
                producer_epoch: m.producer_epoch,
                result,
                coordinator_epoch: c.coordinator_epoch,
            };
            (marker, progress.left(&m.partitions))
        };
        if left.is_empty() {
            break;
        }
        let rounds = left.into_iter().map(|tp| async move {
            let p = usize::try_from(tp.partition).expect("the topic's partition");
            let answer = world
                .coordinator_node
                .call(
                    &world.rt,
                    partition_node(p),
                    Request::WriteTxnMarker { marker },
                )
                .await;
            let outcome = match answer {
                Some(Response::Code(code)) => outcome_of(code),
                _ => Outcome::Retry,
            };
            (tp, outcome)
        });
        match progress.record(join_all(rounds).await) {
            NextRound::Now => {}
            NextRound::After(pause) => world.rt.sleep(pause).await,
            NextRound::Stop => return,
        }
    }
    let mut backoff = super::MARKER_RETRY_BACKOFF_MIN;
    loop {
        if !c.alive.get() {
            return;
        }
        let prepared = with_txn(c, id, |m| m.prepare_complete(world.now_ms()));
        let error = match prepared {
            Ok(t) => match write(c, world, id, t).await {
                Ok(()) => return,
                Err(e) => e,
            },
            Err(e) => e,
        };
        if !matches!(
            error,
            TxnError::CoordinatorNotAvailable | TxnError::ConcurrentTransactions
        ) {
            return;
        }
        world.rt.sleep(backoff).await;
        backoff = (backoff * 2).min(super::MARKER_RETRY_BACKOFF_MAX);
    }
}

/// `service::abort_timed_out`, every [`ABORT_INTERVAL`] while `c` lives.
async fn abort_timed_out(world: Rc<World>, c: Rc<SimCoordinator>) {
    loop {
        world.rt.sleep(ABORT_INTERVAL).await;
        if !c.alive.get() {
            return;
        }
        let now_ms = world.now_ms();
        let mut due: Vec<String> = c
            .txns
            .borrow()
            .values()
            .filter(|m| m.timed_out(now_ms))
            .map(|m| m.transactional_id.clone())
            .collect();
        due.sort();
        for id in due {
            let version = world.transaction_version;
            let Ok(t) = with_txn(&c, &id, |m| {
                m.prepare_fence_abort(version, None, world.now_ms())
            }) else {
                continue;
            };
            let fence = (t.producer_id, t.producer_epoch);
            if prepare_end(&world, &c, &id, t).await.is_ok() {
                fenced_below(&world, fence);
                world.model.borrow_mut().stats.timeouts += 1;
            }
        }
    }
}

/// Crashes the running coordinator (if any), waits a seeded gap, and starts the next one at
/// the next coordinator epoch: it replays the log (load in progress meanwhile), then serves,
/// resumes the markers of prepared transactions and checks timeouts.
async fn fail_over(world: &Rc<World>) {
    let old = world.coordinator.borrow_mut().take();
    if let Some(old) = old {
        old.alive.set(false);
        old.log.crash();
        world.sleep_ms(10, 300).await;
    }
    let epoch = world.coordinator_epoch.get() + 1;
    world.coordinator_epoch.set(epoch);
    let log = SimLog::open(world.rt.clone(), world.disk.clone(), u64::MAX);
    let c = Rc::new(SimCoordinator {
        coordinator_epoch: epoch,
        log: log.clone(),
        txns: RefCell::new(HashMap::new()),
        alive: Cell::new(true),
        serving: Cell::new(false),
        serving_since_ms: Cell::new(0),
    });
    *world.coordinator.borrow_mut() = Some(c.clone());
    let mut loaded = HashMap::new();
    let end = log.log_end_offset();
    let mut at = log.log_start_offset();
    while at < end {
        let batches = log
            .read(at, REPLAY_READ_BYTES, end)
            .await
            .expect("a written log reads back");
        let Some(last) = batches.last() else { break };
        at = last.header().last_offset().plus(1);
        for batch in batches {
            apply_batch(&mut loaded, &batch.to_vec(), 0);
        }
    }
    let mut prepared: Vec<String> = loaded
        .values()
        .filter(|m| matches!(m.state, TxnState::PrepareCommit | TxnState::PrepareAbort))
        .map(|m| m.transactional_id.clone())
        .collect();
    prepared.sort();
    *c.txns.borrow_mut() = loaded;
    c.serving.set(true);
    c.serving_since_ms.set(world.now_ms());
    world.model.borrow_mut().stats.loads += 1;
    for id in prepared {
        spawn_markers(world, &c, &id);
    }
    world
        .rt
        .spawn(Box::pin(abort_timed_out(world.clone(), c.clone())));
}

// ---- the partitions ----

impl Partition {
    fn log_end(&self) -> Offset {
        self.entries
            .last()
            .map_or(Offset(0), |e| e.header.last_offset().plus(1))
    }

    fn last_stable_offset(&self) -> Offset {
        self.producers
            .last_stable_offset(self.high_watermark, Offset(0))
    }

    /// A produce or a marker, as the leader's append checks and records it.
    fn handle(&mut self, model: &mut Model, request: Request) -> Response {
        let base_offset = self.log_end();
        match request {
            Request::Produce { batch, tags } => {
                let header = match storage::validate_batch(&batch) {
                    Ok(h) => BatchHeader { base_offset, ..h },
                    Err(e) => return Response::Code(storage_error_code(&e.into())),
                };
                match self.producers.check(&header) {
                    SequenceCheck::Append => {
                        self.producers.record(&header, None);
                        for t in &tags {
                            model.appended.entry(t.txn).or_default().insert(t.index);
                        }
                        if tags
                            .first()
                            .is_some_and(|t| model.zombie_records.contains(t))
                        {
                            model.stats.zombie_appends += 1;
                        }
                        self.entries.push(Entry {
                            header,
                            marker: None,
                            tags,
                        });
                        Response::Code(0)
                    }
                    SequenceCheck::Duplicate(_) => Response::Code(0),
                    other => Response::Code(storage_error_code(&refusal(&header, other))),
                }
            }
            Request::WriteTxnMarker { marker } => match self.producers.check_marker(&marker) {
                SequenceCheck::Append => {
                    let bytes = storage::build_marker_batch(&marker, TimestampMs(EPOCH_MS));
                    let header = BatchHeader {
                        base_offset,
                        ..BatchHeader::parse(&bytes).expect("a built marker parses")
                    };
                    let completed = self.producers.record(&header, Some(&marker));
                    if let Some(entry) = completed.and_then(|c| c.aborted_entry()) {
                        self.aborted.push(entry);
                    }
                    self.entries.push(Entry {
                        header,
                        marker: Some(marker),
                        tags: Vec::new(),
                    });
                    Response::Code(0)
                }
                other => Response::Code(storage_error_code(&refusal(&header_of(&marker), other))),
            },
            // A coordinator's request sent to a partition: nobody does.
            _ => Response::Code(crate::errors::code(
                net::kafka_protocol::error::ResponseError::InvalidRequest,
            )),
        }
    }

    /// One read_committed fetch from the reader's position to the last stable offset, with
    /// the aborted transactions of that range, filtered as Kafka's consumer does
    /// (`CompletedFetch`): an aborted transaction's producer is skipped from its first offset
    /// until its abort marker; control batches are never returned.
    fn read_committed(&mut self, model: &mut Model) {
        let from = self.read_position;
        let upto = self.last_stable_offset();
        if from >= upto {
            return;
        }
        let mut aborted = Vec::new();
        storage::collect_aborted(&self.aborted, from, upto, &mut aborted);
        aborted.sort_by_key(|a| a.first_offset);
        let mut aborted = aborted.into_iter().peekable();
        let mut aborted_producers = BTreeSet::new();
        for (i, e) in self.entries.iter().enumerate() {
            let h = &e.header;
            if h.base_offset < from {
                continue;
            }
            if h.base_offset >= upto {
                break;
            }
            if h.producer_id >= 0 {
                while let Some(a) = aborted.next_if(|a| a.first_offset <= h.last_offset()) {
                    aborted_producers.insert(a.producer_id);
                }
                if e.marker.is_some_and(|m| m.result == TxnResult::Abort) {
                    aborted_producers.remove(&h.producer_id);
                } else if h.is_transactional()
                    && !h.is_control()
                    && aborted_producers.contains(&h.producer_id)
                {
                    continue;
                }
            }
            if h.is_control() {
                continue;
            }
            check_delivery(self, i, model);
        }
        self.read_position = upto;
    }
}

/// The error `append.rs` answers a refused check with.
fn refusal(h: &BatchHeader, check: SequenceCheck) -> StorageError {
    let producer_id = h.producer_id;
    match check {
        SequenceCheck::Append | SequenceCheck::Duplicate(_) => {
            StorageError::DuplicateSequence { producer_id }
        }
        SequenceCheck::OutOfOrder { expected, got } => StorageError::OutOfOrderSequence {
            producer_id,
            expected,
            got,
        },
        SequenceCheck::StaleEpoch { current, got } => StorageError::InvalidProducerEpoch {
            producer_id,
            current,
            got,
        },
        SequenceCheck::InvalidTxnState(why) => StorageError::InvalidTxnState { producer_id, why },
        SequenceCheck::CoordinatorFenced { current, got } => {
            StorageError::TransactionCoordinatorFenced {
                producer_id,
                current,
                got,
            }
        }
    }
}

fn header_of(marker: &TxnMarker) -> BatchHeader {
    let bytes = storage::build_marker_batch(marker, TimestampMs(EPOCH_MS));
    BatchHeader::parse(&bytes).expect("a built marker parses")
}

/// Checker **read_committed stops at the LSO** and **fencing**, at each record the reader
/// gets: its producer's next marker in the partition is a commit below the high watermark,
/// the record was not read before, and no zombie sent it after learning it was fenced.
fn check_delivery(p: &Partition, i: usize, model: &mut Model) {
    let e = &p.entries[i];
    let h = &e.header;
    if h.is_transactional() {
        let next_marker = p.entries[i + 1..]
            .iter()
            .find(|m| m.header.producer_id == h.producer_id && m.header.is_control());
        let Some(next) = next_marker else {
            panic!(
                "invariant 'read_committed stops at the LSO': {} offset {} of producer {} read \
                 with no marker after it (LSO {})",
                p.tp.partition,
                h.base_offset.0,
                h.producer_id,
                p.last_stable_offset().0
            );
        };
        assert!(
            next.marker.is_some_and(|m| m.result == TxnResult::Commit)
                && next.header.base_offset < p.high_watermark,
            "invariant 'read_committed stops at the LSO': partition {} offset {} read, but its \
             transaction's marker at {} is {:?} (high watermark {})",
            p.tp.partition,
            h.base_offset.0,
            next.header.base_offset.0,
            next.marker.map(|m| m.result),
            p.high_watermark.0
        );
    }
    for t in &e.tags {
        assert!(
            !model.zombie_records.contains(t),
            "invariant 'fencing': a record {t:?} a fenced zombie wrote (producer {} epoch {}) \
             was read committed in partition {}",
            h.producer_id,
            h.producer_epoch,
            p.tp.partition
        );
        let fresh = model.delivered.entry(t.txn).or_default().insert(t.index);
        assert!(fresh, "invariant 'exactly once': record {t:?} read twice");
    }
}

/// Checker **atomicity** (and **fencing** once more, over everything read): per transaction,
/// the reader saw none of its records or every record the partitions appended; a transaction
/// seen was one its producer asked to commit; a commit acknowledged to its producer is seen
/// whole.
fn check_atomicity(model: &Model) {
    for (txn, seen) in &model.delivered {
        let appended = model.appended.get(txn).cloned().unwrap_or_default();
        assert_eq!(
            seen, &appended,
            "invariant 'atomicity': transaction {txn:?} partly read: read {seen:?} of {appended:?}"
        );
        assert!(
            model.commit_sent.contains(txn),
            "invariant 'atomicity': transaction {txn:?} read, but its producer never asked to \
             commit it (aborted, timed out or fenced)"
        );
    }
    for txn in &model.commit_acked {
        let appended = model.appended.get(txn).cloned().unwrap_or_default();
        let seen = model.delivered.get(txn).cloned().unwrap_or_default();
        assert_eq!(
            seen, appended,
            "invariant 'atomicity': commit of {txn:?} acknowledged, but not all of it was read"
        );
    }
    for z in &model.zombie_records {
        assert!(
            !model
                .delivered
                .get(&z.txn)
                .is_some_and(|s| s.contains(&z.index)),
            "invariant 'fencing': zombie record {z:?} read committed"
        );
    }
}

/// Checker **no transaction open past its timeout**: while a coordinator serves, no
/// transaction is Ongoing (and not being written) for longer than its timeout plus three abort
/// checks since it started or since this coordinator loaded, whichever is later.
fn check_timeouts(world: &World) {
    let Some(c) = world.coordinator.borrow().clone() else {
        return;
    };
    if !c.serving.get() {
        return;
    }
    let now_ms = world.now_ms();
    let slack_ms = 3 * i64::try_from(ABORT_INTERVAL.as_millis()).unwrap_or(0);
    for m in c.txns.borrow().values() {
        if m.state != TxnState::Ongoing || m.pending.is_some() {
            continue;
        }
        let due = (m.start_ms + i64::from(m.timeout_ms)).max(c.serving_since_ms.get());
        assert!(
            now_ms <= due + slack_ms,
            "invariant 'no transaction open past its timeout': {} Ongoing since {} ms with a \
             timeout of {} ms, now {} ms",
            m.transactional_id,
            m.start_ms - EPOCH_MS,
            m.timeout_ms,
            now_ms - EPOCH_MS
        );
    }
}

/// Whether everything settled: a coordinator serves with no transaction open or completing,
/// every partition has no open transaction, its LSO at its log end, and the reader there.
fn settled(world: &World) -> bool {
    let Some(c) = world.coordinator.borrow().clone() else {
        return false;
    };
    c.serving.get()
        && c.txns.borrow().values().all(|m| {
            m.pending.is_none()
                && !matches!(
                    m.state,
                    TxnState::Ongoing | TxnState::PrepareCommit | TxnState::PrepareAbort
                )
        })
        && world.partitions.iter().all(|p| {
            let p = p.borrow();
            p.producers.ongoing_transactions().is_empty()
                && p.last_stable_offset() == p.log_end()
                && p.read_position == p.log_end()
        })
}

/// Checker **liveness**: once faults stopped, the run settled within [`SETTLE_MAX`]; names
/// what did not.
fn check_settled(world: &World) {
    if settled(world) {
        return;
    }
    let coordinator = world.coordinator.borrow().clone().map(|c| {
        c.txns
            .borrow()
            .values()
            .map(|m| (m.transactional_id.clone(), m.state.name(), m.pending))
            .collect::<Vec<_>>()
    });
    let partitions: Vec<_> = world
        .partitions
        .iter()
        .map(|p| {
            let p = p.borrow();
            (
                p.tp.partition,
                p.producers.ongoing_transactions(),
                p.last_stable_offset().0,
                p.log_end().0,
            )
        })
        .collect();
    panic!(
        "invariant 'liveness': not settled {SETTLE_MAX:?} after faults stopped: coordinator \
         {coordinator:?}; partitions (partition, open transactions, LSO, log end) {partitions:?}"
    );
}

// ---- the producers ----

/// One producer instance of `transactional_id` (module doc); `done` is set when it ends.
async fn instance(world: Rc<World>, transactional_id: String, done: Rc<Cell<bool>>) {
    let node = Node::new(
        &world.net,
        NodeId(1000 + i32::try_from(world.next_instance.get()).unwrap_or(0)),
    );
    let me = world.next_instance.get();
    world.next_instance.set(me + 1);
    world.rt.spawn(Box::pin(run_node(
        world.clone(),
        node.clone(),
        Role::Client,
    )));
    run_instance(&world, &node, &transactional_id, me).await;
    done.set(true);
}

/// Whether a coordinator error is worth a retry (Kafka's retriable ones).
fn retriable(e: TxnError) -> bool {
    matches!(
        e,
        TxnError::ConcurrentTransactions
            | TxnError::CoordinatorLoadInProgress
            | TxnError::NotCoordinator
            | TxnError::CoordinatorNotAvailable
    )
}

/// Retries `request()` on the coordinator until a final answer; `None` once stopped.
async fn coordinator_call(
    world: &World,
    node: &Node,
    request: impl Fn() -> Request,
) -> Option<Response> {
    loop {
        if world.stopped.get() {
            return None;
        }
        match node.call(&world.rt, COORDINATOR, request()).await {
            Some(Response::ProducerId(Err(e)) | Response::Done(Err(e))) if retriable(e) => {}
            Some(r) => return Some(r),
            None => {}
        }
        world.sleep_ms(1, 20).await;
    }
}

/// How one data batch ended for its producer.
enum Sent {
    Appended,
    Fenced,
    Refused,
}

/// Sends one batch of `producer` (id, epoch), retried with the same sequence until answered
/// (bounded: the partition never goes away, so only a long run of losses ends it). Each
/// attempt made after the coordinator durably fenced the epoch is a zombie's write: its
/// records are recorded as such.
async fn send_batch(
    world: &World,
    node: &Node,
    p: usize,
    batch: Bytes,
    tags: &[RecordTag],
    (producer_id, producer_epoch): (i64, i16),
) -> Sent {
    for _ in 0..200 {
        {
            let mut model = world.model.borrow_mut();
            let fenced = model
                .fenced_below
                .get(&producer_id)
                .is_some_and(|e| producer_epoch < *e);
            if fenced
                && !tags
                    .first()
                    .is_some_and(|t| model.zombie_records.contains(t))
            {
                model.zombie_records.extend(tags.iter().copied());
                model.stats.zombie_writes += 1;
            }
        }
        let request = Request::Produce {
            batch: batch.clone(),
            tags: tags.to_vec(),
        };
        match node.call(&world.rt, partition_node(p), request).await {
            Some(Response::Code(0)) => return Sent::Appended,
            Some(Response::Code(code)) if outcome_of(code) == Outcome::Fenced => {
                return Sent::Fenced
            }
            Some(_) => return Sent::Refused,
            None => {}
        }
    }
    Sent::Refused
}

async fn run_instance(world: &World, node: &Node, transactional_id: &str, me: u32) {
    let timeout_ms = i32::try_from(world.rt.random(TIMEOUT_MS_MIN..TIMEOUT_MS_MAX)).unwrap_or(500);
    // A zombie: told it is fenced, it sends the rest of its transaction anyway and asks to
    // commit it.
    let zombie = world.rt.chance(40);
    let init = || Request::InitProducerId {
        transactional_id: transactional_id.to_string(),
        timeout_ms,
    };
    let producer = match coordinator_call(world, node, init).await {
        Some(Response::ProducerId(Ok(pe))) => pe,
        _ => return,
    };
    let (producer_id, mut producer_epoch) = producer;
    let mut sequences = [0i32; PARTITIONS];
    for number in 0.. {
        if world.stopped.get() {
            return;
        }
        let txn = TxnTag {
            instance: me,
            number,
        };
        let chosen: Vec<usize> = (0..PARTITIONS).filter(|_| world.rt.chance(60)).collect();
        let chosen = if chosen.is_empty() {
            vec![pick(world, PARTITIONS)]
        } else {
            chosen
        };
        let partitions: BTreeSet<TopicPartition> = chosen.iter().map(|p| tp(*p)).collect();
        let add = || Request::AddPartitions {
            transactional_id: transactional_id.to_string(),
            producer_id,
            producer_epoch,
            partitions: partitions.clone(),
        };
        match coordinator_call(world, node, add).await {
            Some(Response::Done(Ok(()))) => {}
            _ => return, // Fenced: this instance ends.
        }
        let mut index = 0u32;
        let mut abortable = false;
        let mut fenced = false;
        for _ in 0..world.rt.random(1..6) {
            let p = chosen[pick(world, chosen.len())];
            let tags: Vec<RecordTag> = (0..world.rt.random(1..4))
                .map(|_| {
                    index += 1;
                    RecordTag { txn, index }
                })
                .collect();
            let producer = (producer_id, producer_epoch);
            let batch = data_batch(producer, sequences[p], tags.len());
            match send_batch(world, node, p, batch, &tags, producer).await {
                Sent::Appended => sequences[p] += i32::try_from(tags.len()).unwrap_or(0),
                Sent::Fenced if zombie => fenced = true,
                Sent::Fenced => return,
                Sent::Refused => {
                    abortable = true;
                    break;
                }
            }
            if world.rt.chance(3) {
                // A stall past the transaction timeout: the coordinator aborts it.
                let stall_ms = u64::try_from(timeout_ms).unwrap_or(0) * 2;
                world.rt.sleep(Duration::from_millis(stall_ms)).await;
            } else {
                world.sleep_ms(0, 5).await;
            }
        }
        let commit = fenced || (!abortable && world.rt.chance(80));
        if commit {
            world.model.borrow_mut().commit_sent.insert(txn);
        }
        let client_transaction_version = if world.transaction_version >= 2 {
            CLIENT_TXN_VERSION_2
        } else {
            CLIENT_TXN_VERSION_1
        };
        let end = || Request::EndTxn {
            transactional_id: transactional_id.to_string(),
            producer_id,
            producer_epoch,
            commit,
            client_transaction_version,
        };
        match coordinator_call(world, node, end).await {
            Some(Response::ProducerId(Ok((id, epoch)))) => {
                let mut model = world.model.borrow_mut();
                if commit {
                    model.commit_acked.insert(txn);
                } else {
                    model.stats.aborts += 1;
                }
                // Transaction version 2: the next transaction runs at the bumped epoch, its
                // sequences from 0 (a retried EndTxn is answered the same epoch).
                assert_eq!(id, producer_id, "the seeds' epochs never run out");
                if epoch != producer_epoch {
                    assert_eq!(world.transaction_version, 2, "version 1 keeps the epoch");
                    assert_eq!(epoch, producer_epoch + 1, "one bump per transaction");
                    model.stats.epoch_bumps += 1;
                    producer_epoch = epoch;
                    sequences = [0; PARTITIONS];
                }
            }
            _ => return,
        }
    }
}

fn pick(world: &World, len: usize) -> usize {
    usize::try_from(world.rt.random(0..len as u64)).unwrap_or(0)
}

/// A transactional data batch of `records` records (real bytes).
fn data_batch((producer_id, producer_epoch): (i64, i16), sequence: i32, records: usize) -> Bytes {
    let values: Vec<&[u8]> = (0..records).map(|_| &b"v"[..]).collect();
    let plain = storage::build_batch(TimestampMs(EPOCH_MS), &values);
    storage::transactional_batch(&plain, producer_id, producer_epoch, sequence)
}

/// Starts instances of `transactional_id` until stopped: the next one once the previous ended
/// or, now and then, while it still runs (fencing it).
async fn driver(world: Rc<World>, transactional_id: String) {
    while !world.stopped.get() {
        let done = Rc::new(Cell::new(false));
        world.rt.spawn(Box::pin(instance(
            world.clone(),
            transactional_id.clone(),
            done.clone(),
        )));
        let impatient = world.rt.chance(30);
        let patience = world.rt.now().0 + Duration::from_millis(world.rt.random(20..400));
        loop {
            let replace = impatient && world.rt.now().0 > patience;
            if done.get() || world.stopped.get() || replace {
                break;
            }
            world.rt.sleep(Duration::from_millis(5)).await;
        }
    }
}

/// One seed: the run, the settling, the checks; the counts for the not-vacuous check.
fn run(seed: u64) -> Stats {
    let mut ex = Executor::new(seed);
    let rt = ex.runtime();
    let net = SimNetwork::new(rt.clone(), FAULTS);
    let coordinator_node = Node::new(&net, COORDINATOR);
    let partitions = (0..PARTITIONS)
        .map(|p| {
            RefCell::new(Partition {
                tp: tp(p),
                producers: ProducerState::default(),
                entries: Vec::new(),
                aborted: Vec::new(),
                high_watermark: Offset(0),
                read_position: Offset(0),
            })
        })
        .collect();
    let world = Rc::new(World {
        rt: rt.clone(),
        net,
        disk: SimDisk::default(),
        coordinator_node: coordinator_node.clone(),
        coordinator: RefCell::new(None),
        coordinator_epoch: Cell::new(0),
        next_producer_id: Cell::new(1000),
        next_instance: Cell::new(0),
        partitions,
        model: RefCell::new(Model::default()),
        stopped: Cell::new(false),
        transaction_version: if rt.chance(50) { 2 } else { 1 },
    });
    rt.spawn(Box::pin(run_node(
        world.clone(),
        coordinator_node,
        Role::Coordinator,
    )));
    for p in 0..PARTITIONS {
        let node = Node::new(&world.net, partition_node(p));
        rt.spawn(Box::pin(run_node(world.clone(), node, Role::Partition(p))));
        // The high watermark follows the log end one replication round behind (the end as
        // the followers last fetched it); the reader fetches on its own schedule.
        let w = world.clone();
        rt.spawn(Box::pin(async move {
            let mut fetched = Offset(0);
            loop {
                w.sleep_ms(0, 6).await;
                let mut part = w.partitions[p].borrow_mut();
                let end = part.log_end();
                if fetched > part.high_watermark {
                    part.high_watermark = fetched;
                    part.producers.on_high_watermark_updated(fetched);
                }
                fetched = end;
            }
        }));
        let w = world.clone();
        rt.spawn(Box::pin(async move {
            loop {
                w.sleep_ms(0, 6).await;
                let mut model = w.model.borrow_mut();
                w.partitions[p].borrow_mut().read_committed(&mut model);
            }
        }));
    }
    let w = world.clone();
    rt.spawn(Box::pin(async move {
        loop {
            w.rt.sleep(ABORT_INTERVAL).await;
            check_timeouts(&w);
        }
    }));
    for i in 0..TXN_IDS {
        rt.spawn(Box::pin(driver(world.clone(), format!("txn-{i}"))));
    }
    let w = world.clone();
    ex.run_until(async move {
        fail_over(&w).await;
        let end = w.rt.now().0 + RUN;
        let failovers = w.rt.random(1..4);
        for _ in 0..failovers {
            let left = end.saturating_sub(w.rt.now().0);
            let at =
                w.rt.random(0..u64::try_from(left.as_millis()).unwrap_or(0).max(1));
            w.rt.sleep(Duration::from_millis(at)).await;
            fail_over(&w).await;
        }
        let left = end.saturating_sub(w.rt.now().0);
        w.rt.sleep(left).await;
        w.stopped.set(true);
        let deadline = w.rt.now().0 + SETTLE_MAX;
        while !settled(&w) && w.rt.now().0 < deadline {
            w.rt.sleep(Duration::from_millis(50)).await;
        }
    })
    .expect("the run completes");
    check_settled(&world);
    let model = world.model.borrow();
    check_atomicity(&model);
    let mut stats = model.stats;
    stats.commits_seen = model.delivered.len() as u64;
    stats
}

#[test]
fn transactions_stay_atomic_fenced_and_live_through_failovers_and_loss() {
    let seeds = seeds(0x7a5e_5eed, SEEDS);
    let mut total = Stats::default();
    for &seed in &seeds {
        let _guard = SeedGuard(seed);
        let s = run(seed);
        if seed == seeds[0] {
            assert_eq!(s, run(seed), "the same seed replays the same run");
        }
        total.commits_seen += s.commits_seen;
        total.aborts += s.aborts;
        total.zombie_writes += s.zombie_writes;
        total.epoch_bumps += s.epoch_bumps;
        total.zombie_appends += s.zombie_appends;
        total.fences += s.fences;
        total.timeouts += s.timeouts;
        total.loads += s.loads;
    }
    if seeds.len() >= 20 {
        assert!(
            total.commits_seen > 0
                && total.aborts > 0
                && total.zombie_writes > 0
                && total.epoch_bumps > 0
                && total.zombie_appends > 0
                && total.fences > 0
                && total.timeouts > 0
                && total.loads > seeds.len() as u64,
            "invariant 'not vacuous': {total:?}"
        );
    }
}
