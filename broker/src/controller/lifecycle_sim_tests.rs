//! The broker side of the lifecycle under the deterministic simulation (`replication::sim`,
//! issue #26 point 5): the real [`run_broker_on`] and [`controlled_shutdown_on`] loops of
//! three brokers, hosted by [`SimBroker`] on the simulation's clock, against [`SimController`]
//! — a model of the active controller's side (`fencing.rs`: the same order of checks for a
//! heartbeat and its decision, `fencing::heartbeat_change` — unfence once caught up with the
//! registration, or a controlled shutdown then fenced —, and a fence check every
//! `min(heartbeat interval, session / 4)`) built on the real
//! proposer, image and session tracker (`replication::metadata::{propose, MetadataImage,
//! BrokerHeartbeats}`), without Raft (each op applies at once).
//!
//! Per seed: brokers 1, 2 and 3 start at seeded times and register; once all three serve, a
//! topic of [`PARTITIONS`] partitions with three replicas is created. Each broker's link to
//! the controller is cut 0–2 times in the first [`CUTS_END`] of the run for 0.1–3 s (shorter
//! and longer than the session); a cut link loses requests and answers (the broker's call
//! fails after [`REQUEST_TIMEOUT`]), and otherwise each way takes a seeded delay. Each
//! broker installs the controller's metadata offset every 0–50 ms while its link is up. Late
//! in the run one broker shuts down (controlled shutdown, then it stops) and starts again as a
//! new incarnation.
//!
//! Checkers (a failure names the invariant and prints `SLUICE_SIM_SEED=<seed>`):
//! 1. **the broker's view matches the controller's**: once a running broker's link has been up
//!    for [`SETTLE`], it is registered with the broker epoch the image holds for it, and both
//!    it and the image say it is unfenced; a broker's epoch never goes down, and a new
//!    incarnation's is above the old one's;
//! 2. **timely fencing**: a registered broker cut off for longer than the session plus two
//!    fence checks is fenced in the image;
//! 3. **no false fencing**: the controller fences a broker's session only when its link was
//!    cut within the last session;
//! 4. **no leader is fenced or shutting down**: after every change, every partition's leader
//!    is none or an active broker of its ISR;
//! 5. **controlled shutdown moves leadership away**: a controlled shutdown on an up link is
//!    agreed within the session, and then the broker leads nothing, is fenced, and every
//!    partition whose ISR holds another active broker has a leader;
//! 6. **not vacuous**: over the seeds run, brokers were fenced, unfenced and shut down.
//!
//! Not verified: the controller quorum (Raft, failover of the active controller:
//! `replication::metadata::cluster_sim_tests`), the forward path and the shard mesh, ISR
//! expansion (no data plane here, so a fenced broker does not rejoin an ISR), a failed log
//! directory (`replicas_offline` stays false).

use super::fencing::{heartbeat_change, renew_session_in, HeartbeatChange};
use super::lifecycle::{controlled_shutdown_on, run_broker_on, LifecycleHost};
use super::state::BrokerLifecycle;
use replication::metadata::{
    leaderships, propose, BrokerHeartbeats, ControllerAnswer, ControllerError, ControllerOp,
    ControllerReply, ControllerRequest, MetadataImage, ProposeContext,
};
use replication::runtime::{Clock, MonotonicTime, Runtime};
use replication::sim::{seeds, Executor, SeedGuard, SimRuntime};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;
use storage::Notify;
use uuid::Uuid;

/// Seeds `cargo test` runs (`SLUICE_SIM_BASE` / `SLUICE_SIM_COUNT` / `SLUICE_SIM_SEED` choose
/// others).
const SEEDS: u64 = 200;
const BROKERS: [i32; 3] = [1, 2, 3];
const PARTITIONS: i32 = 6;
/// `broker.heartbeat.interval.ms`.
const HEARTBEAT: Duration = Duration::from_millis(200);
/// `broker.session.timeout.ms`.
const SESSION: Duration = Duration::from_millis(1_000);
/// The controller's fence check period, as `fencing::fence_expired` derives it.
const CHECK: Duration = Duration::from_millis(200);
/// Longest one-way delay between a broker and the controller.
const DELAY_MAX: Duration = Duration::from_millis(10);
/// How long a call over a cut link takes to fail.
const REQUEST_TIMEOUT: Duration = Duration::from_millis(500);
/// How long after its link is up a broker's view must match the controller's: a heartbeat
/// cut short (its bound, 200 ms), the retry pace (100 ms), one more round to be unfenced,
/// the metadata install lag (50 ms), delays — well within one session.
const SETTLE: Duration = SESSION;
const RUN: Duration = Duration::from_secs(20);
/// Cuts happen in the first 60% of the run, the controlled shutdown at 70%.
const CUTS_END: Duration = Duration::from_secs(12);
const SHUTDOWN_AT: Duration = Duration::from_secs(14);

fn at(d: Duration) -> MonotonicTime {
    MonotonicTime(d)
}

fn no_topic_check(_: &BTreeMap<String, String>) -> Result<(), String> {
    Ok(())
}

fn no_broker_check(_: &BTreeMap<String, BTreeMap<String, String>>) -> Result<(), String> {
    Ok(())
}

/// One broker's link to the controller (kept across incarnations).
#[derive(Default)]
struct Link {
    cut_until: Cell<MonotonicTime>,
    cut_since: Cell<MonotonicTime>,
    up_since: Cell<MonotonicTime>,
}

/// The model of the active controller (module doc).
struct SimController {
    rt: SimRuntime,
    image: RefCell<MetadataImage>,
    /// Changes applied: the metadata offset brokers install.
    index: Cell<u64>,
    heartbeats: RefCell<BrokerHeartbeats>,
    registered_at: RefCell<BTreeMap<i32, u64>>,
    links: BTreeMap<i32, Rc<Link>>,
    next_topic_id: Cell<u128>,
    fences: Cell<u64>,
    unfences: Cell<u64>,
}

impl SimController {
    /// Proposes `op` against the image and applies its records; returns the images before
    /// and after. Then checker 4.
    fn run(
        &self,
        op: &ControllerOp,
        from: i32,
    ) -> Result<(MetadataImage, MetadataImage), ControllerError> {
        let now = self.rt.now();
        let before = self.image.borrow().clone();
        let live = |broker_id: i32| self.heartbeats.borrow().is_live(broker_id, now, SESSION);
        self.next_topic_id.set(self.next_topic_id.get() + 1);
        let ctx = ProposeContext {
            broker_id: from,
            controller_id: 0,
            broker_epoch: before.brokers.get(&from).map_or(-1, |b| b.broker_epoch),
            new_topic_id: Uuid::from_u128(self.next_topic_id.get()),
            check_topic_config: &no_topic_check,
            check_broker_configs: &no_broker_check,
            default_replication_factor: 3,
            placement_seed: self.rt.random(0..3),
            broker_session_live: &live,
        };
        let records = propose(&before, op, &ctx)?;
        if !records.is_empty() {
            let mut image = self.image.borrow_mut();
            for r in &records {
                image.apply(r).expect("proposed records apply");
            }
            self.index.set(self.index.get() + 1);
        }
        let after = self.image.borrow().clone();
        self.heartbeats.borrow_mut().follow(&after, now);
        check_leaders(&after);
        Ok((before, after))
    }

    /// A change from a broker (`fencing::handle_active`'s `Op`).
    fn op(&self, op: &ControllerOp, from: i32) -> Result<ControllerAnswer, ControllerError> {
        let (before, after) = self.run(op, from)?;
        if let ControllerOp::RegisterBroker { broker_id, .. } = op {
            self.registered_at
                .borrow_mut()
                .insert(*broker_id, self.index.get());
        }
        Ok(op.answer(&before, &after))
    }

    /// A heartbeat, in `fencing::heartbeat`'s order.
    fn heartbeat(&self, request: ControllerRequest) -> Result<ControllerReply, ControllerError> {
        let ControllerRequest::Heartbeat {
            broker_id,
            broker_epoch,
            metadata_offset,
            want_shut_down,
        } = request
        else {
            return Err(ControllerError::Unavailable);
        };
        let now = self.rt.now();
        let image = self.image.borrow().clone();
        renew_session_in(
            &mut self.heartbeats.borrow_mut(),
            &image,
            broker_id,
            broker_epoch,
            now,
        )?;
        let Some(registration) = image.brokers.get(&broker_id) else {
            return Err(ControllerError::UnknownBroker { broker_id });
        };
        let mut should_shut_down = false;
        let change = heartbeat_change(registration, want_shut_down, || {
            metadata_offset
                >= *self
                    .registered_at
                    .borrow_mut()
                    .entry(broker_id)
                    .or_insert(0)
        });
        if change == HeartbeatChange::ControlledShutdown {
            let op = ControllerOp::ControlledShutdown {
                broker_id,
                broker_epoch,
            };
            let (before, after) = self.run(&op, broker_id)?;
            if let ControllerAnswer::ControlledShutdown {
                should_shut_down: done,
            } = op.answer(&before, &after)
            {
                should_shut_down = done;
            }
            if should_shut_down && !after.brokers.get(&broker_id).is_none_or(|b| b.fenced) {
                self.run(&ControllerOp::FenceBroker { broker_id }, broker_id)?;
            }
        } else if change == HeartbeatChange::Unfence {
            let op = ControllerOp::UnfenceBroker {
                broker_id,
                broker_epoch,
            };
            self.run(&op, broker_id)?;
            self.unfences.set(self.unfences.get() + 1);
        }
        let image = self.image.borrow().clone();
        let is_fenced = image.brokers.get(&broker_id).is_none_or(|b| b.fenced);
        Ok(ControllerReply::Heartbeat {
            is_fenced,
            should_shut_down,
        })
    }

    /// `fencing::fence_expired`'s loop; checker 3 at each fence.
    async fn fence_expired(self: Rc<Self>) {
        loop {
            self.rt.sleep(CHECK).await;
            let now = self.rt.now();
            let expired = {
                let image = self.image.borrow().clone();
                let mut heartbeats = self.heartbeats.borrow_mut();
                heartbeats.follow(&image, now);
                heartbeats.expired(now, SESSION)
            };
            for broker_id in expired {
                let link = &self.links[&broker_id];
                let recently_cut = link.cut_until.get() > now
                    || now.saturating_duration_since(link.up_since.get()) < SESSION + CHECK;
                assert!(
                    recently_cut,
                    "invariant 'no false fencing': broker {broker_id} fenced at {now:?}, its \
                     link up since {:?}",
                    link.up_since.get()
                );
                self.run(&ControllerOp::FenceBroker { broker_id }, broker_id)
                    .expect("a registered broker can be fenced");
                self.fences.set(self.fences.get() + 1);
            }
        }
    }
}

/// Checker 4 on `image`.
fn check_leaders(image: &MetadataImage) {
    for (name, topic) in &image.topics {
        for (i, p) in topic.partitions.iter().enumerate() {
            if p.leader == -1 {
                continue;
            }
            let active = image.brokers.get(&p.leader).is_some_and(|b| b.is_active());
            assert!(
                active && p.isr.contains(&p.leader),
                "invariant 'no leader is fenced or shutting down': {name}-{i} led by {} \
                 (ISR {:?}, active {active})",
                p.leader,
                p.isr
            );
        }
    }
}

/// One broker incarnation: the lifecycle's host on the simulation.
struct SimBroker {
    rt: SimRuntime,
    id: i32,
    lifecycle: BrokerLifecycle,
    controller: Rc<SimController>,
    link: Rc<Link>,
    published: Cell<u64>,
    stopped: Cell<bool>,
    stop: Rc<Notify>,
    started: MonotonicTime,
    /// The largest broker epoch this incarnation held.
    epoch_seen: Cell<i64>,
}

impl SimBroker {
    fn cut(&self) -> bool {
        self.link.cut_until.get() > self.rt.now()
    }

    async fn delay(&self) {
        let us = self
            .rt
            .random(0..u64::try_from(DELAY_MAX.as_micros()).unwrap_or(1));
        self.rt.sleep(Duration::from_micros(us)).await;
    }

    /// A round trip to the controller: lost both ways while the link is cut.
    async fn round_trip<T>(
        &self,
        on_controller: impl FnOnce(&SimController) -> Result<T, ControllerError>,
    ) -> Result<T, ControllerError> {
        self.delay().await;
        if self.cut() {
            self.rt.sleep(REQUEST_TIMEOUT).await;
            return Err(ControllerError::Unavailable);
        }
        let answer = on_controller(&self.controller);
        self.delay().await;
        if self.cut() {
            self.rt.sleep(REQUEST_TIMEOUT).await;
            return Err(ControllerError::Unavailable);
        }
        answer
    }
}

impl LifecycleHost for SimBroker {
    fn broker_id(&self) -> i32 {
        self.id
    }

    fn lifecycle(&self) -> &BrokerLifecycle {
        &self.lifecycle
    }

    fn registration(&self) -> ControllerOp {
        ControllerOp::RegisterBroker {
            broker_id: self.id,
            incarnation_id: self.lifecycle.incarnation_id,
            end_points: Vec::new(),
            rack: None,
        }
    }

    fn heartbeat_interval(&self) -> Duration {
        HEARTBEAT
    }

    fn session_timeout(&self) -> Duration {
        SESSION
    }

    fn replicas_offline(&self) -> bool {
        false
    }

    fn published_offset(&self) -> u64 {
        self.published.get()
    }

    fn heartbeat_answered(&self) {}

    async fn call_answer(&self, op: ControllerOp) -> Result<ControllerAnswer, ControllerError> {
        let id = self.id;
        self.round_trip(|c| c.op(&op, id)).await
    }

    async fn request(
        &self,
        request: ControllerRequest,
    ) -> Result<ControllerReply, ControllerError> {
        self.round_trip(|c| c.heartbeat(request)).await
    }

    async fn sleep(&self, duration: Duration) {
        self.rt.sleep(duration).await;
    }

    async fn sleep_unless_stopped(&self, duration: Duration) -> bool {
        if self.stopped.get() {
            return true;
        }
        let stop = self.stop.clone();
        futures_lite::future::or(
            async {
                self.rt.sleep(duration).await;
                false
            },
            async move {
                stop.notified().await;
                true
            },
        )
        .await
    }
}

/// Starts incarnation of broker `id`: its lifecycle loop and its metadata installs.
fn start_broker(
    rt: &SimRuntime,
    controller: &Rc<SimController>,
    id: i32,
    epoch_floor: i64,
) -> Rc<SimBroker> {
    let broker = Rc::new(SimBroker {
        rt: rt.clone(),
        id,
        lifecycle: BrokerLifecycle::new(Uuid::from_u64_pair(rt.random(0..u64::MAX), 1)),
        controller: controller.clone(),
        link: controller.links[&id].clone(),
        published: Cell::new(0),
        stopped: Cell::new(false),
        stop: Rc::new(Notify::default()),
        started: rt.now(),
        epoch_seen: Cell::new(epoch_floor),
    });
    let b = broker.clone();
    rt.spawn(Box::pin(async move { run_broker_on(&*b).await }));
    let b = broker.clone();
    rt.spawn(Box::pin(async move {
        while !b.stopped.get() {
            b.rt.sleep(Duration::from_micros(b.rt.random(1..50_000)))
                .await;
            if !b.cut() {
                b.published.set(b.controller.index.get());
            }
        }
    }));
    broker
}

/// Checkers 1 and 2 on `broker` now.
fn check_broker(broker: &SimBroker) {
    let now = broker.rt.now();
    let image = broker.controller.image.borrow().clone();
    let registered = image.brokers.get(&broker.id);
    let held = broker.lifecycle.broker_epoch.get();
    if let Some(epoch) = held {
        assert!(
            epoch >= broker.epoch_seen.get(),
            "invariant 'view matches': broker {} epoch went from {} to {epoch}",
            broker.id,
            broker.epoch_seen.get()
        );
        broker.epoch_seen.set(epoch);
    }
    if broker.stopped.get() {
        return;
    }
    let link = &broker.link;
    let up_for = now.saturating_duration_since(link.up_since.get());
    let running_for = now.saturating_duration_since(broker.started);
    if !broker.cut() && up_for >= SETTLE && running_for >= SETTLE {
        let Some(r) = registered else {
            panic!(
                "invariant 'view matches': broker {} not registered",
                broker.id
            );
        };
        assert_eq!(
            held,
            Some(r.broker_epoch),
            "invariant 'view matches': broker {} holds epoch {held:?}, the image {}",
            broker.id,
            r.broker_epoch
        );
        assert!(
            !r.fenced && !broker.lifecycle.fenced.get() && broker.lifecycle.serving(),
            "invariant 'view matches': broker {} fenced (image {}, broker {}) with its link \
             up for {up_for:?}",
            broker.id,
            r.fenced,
            broker.lifecycle.fenced.get()
        );
    }
    let cut_for = now.saturating_duration_since(link.cut_since.get());
    if broker.cut() && cut_for > SESSION + CHECK * 2 {
        if let Some(r) = registered.filter(|r| Some(r.broker_epoch) == held) {
            assert!(
                r.fenced,
                "invariant 'timely fencing': broker {} cut off for {cut_for:?} is not fenced",
                broker.id
            );
        }
    }
}

/// Checker 5, once `broker_id`'s controlled shutdown was agreed.
fn check_shut_down(image: &MetadataImage, broker_id: i32) {
    assert_eq!(
        leaderships(image, broker_id),
        0,
        "invariant 'controlled shutdown moves leadership away': {broker_id} still leads"
    );
    assert!(
        image.brokers.get(&broker_id).is_none_or(|b| b.fenced),
        "invariant 'controlled shutdown moves leadership away': {broker_id} not fenced"
    );
    for (name, topic) in &image.topics {
        for (i, p) in topic.partitions.iter().enumerate() {
            let other_active = p
                .isr
                .iter()
                .any(|r| *r != broker_id && image.brokers.get(r).is_some_and(|b| b.is_active()));
            assert!(
                !other_active || p.leader != -1,
                "invariant 'controlled shutdown moves leadership away': {name}-{i} leaderless \
                 with an active ISR member ({:?})",
                p.isr
            );
        }
    }
}

/// Counts of what a seed exercised.
#[derive(Default)]
struct Counts {
    fences: u64,
    unfences: u64,
    shutdowns: u64,
}

fn run(seed: u64) -> Counts {
    let mut ex = Executor::new(seed);
    let rt = ex.runtime();
    let links: BTreeMap<i32, Rc<Link>> = BROKERS
        .iter()
        .map(|&id| (id, Rc::new(Link::default())))
        .collect();
    let controller = Rc::new(SimController {
        rt: rt.clone(),
        image: RefCell::new(MetadataImage::new("sim".to_string())),
        index: Cell::new(0),
        heartbeats: RefCell::new(BrokerHeartbeats::new()),
        registered_at: RefCell::new(BTreeMap::new()),
        links,
        next_topic_id: Cell::new(0),
        fences: Cell::new(0),
        unfences: Cell::new(0),
    });
    rt.spawn(Box::pin(controller.clone().fence_expired()));
    let brokers: Rc<RefCell<BTreeMap<i32, Rc<SimBroker>>>> = Rc::default();
    for &id in &BROKERS {
        let (rt2, c, bs) = (rt.clone(), controller.clone(), brokers.clone());
        rt.spawn(Box::pin(async move {
            rt2.sleep(Duration::from_micros(rt2.random(0..500_000)))
                .await;
            bs.borrow_mut().insert(id, start_broker(&rt2, &c, id, -1));
        }));
        let (rt2, link) = (rt.clone(), controller.links[&id].clone());
        rt.spawn(Box::pin(async move {
            for _ in 0..rt2.random(0..3) {
                let gap = rt2.random(0..u64::try_from(CUTS_END.as_micros() / 3).unwrap_or(1));
                rt2.sleep(Duration::from_micros(gap)).await;
                let length = Duration::from_micros(rt2.random(100_000..3_000_000));
                if rt2.now() + length > at(CUTS_END) {
                    break;
                }
                link.cut_since.set(rt2.now());
                link.cut_until.set(rt2.now() + length);
                rt2.sleep(length).await;
                link.up_since.set(rt2.now());
            }
        }));
    }
    let bs = brokers.clone();
    rt.spawn(Box::pin({
        let rt = rt.clone();
        async move {
            loop {
                rt.sleep(Duration::from_millis(50)).await;
                for b in bs.borrow().values() {
                    check_broker(b);
                }
            }
        }
    }));
    let main = {
        let (rt, controller, brokers) = (rt.clone(), controller.clone(), brokers.clone());
        async move {
            // Once all three serve, a topic over them.
            let create = ControllerOp::CreateTopic {
                name: "t".to_string(),
                partitions: PARTITIONS,
                replication_factor: 3,
                assignment: None,
                overrides: BTreeMap::new(),
                internal: false,
                validate_only: false,
            };
            while controller.run(&create, 1).is_err() {
                rt.sleep(Duration::from_millis(20)).await;
            }
            rt.sleep(at(SHUTDOWN_AT).saturating_duration_since(rt.now()))
                .await;
            let id = BROKERS[usize::try_from(rt.random(0..3)).unwrap_or(0)];
            let broker = brokers.borrow()[&id].clone();
            let started = rt.now();
            let agreed = controlled_shutdown_on(&*broker).await;
            assert!(
                agreed,
                "invariant 'controlled shutdown moves leadership away': broker {id} not \
                 agreed after {:?}",
                rt.now().saturating_duration_since(started)
            );
            check_shut_down(&controller.image.borrow(), id);
            broker.stopped.set(true);
            broker.stop.notify_all();
            rt.sleep(Duration::from_millis(300)).await;
            let floor = broker.epoch_seen.get();
            let next = start_broker(&rt, &controller, id, floor + 1);
            brokers.borrow_mut().insert(id, next);
            rt.sleep(at(RUN).saturating_duration_since(rt.now())).await;
        }
    };
    ex.run_until(main).expect("the run ends");
    Counts {
        fences: controller.fences.get(),
        unfences: controller.unfences.get(),
        shutdowns: 1,
    }
}

#[test]
fn broker_lifecycle_matches_the_controller_under_simulation() {
    let mut total = Counts::default();
    let seeds = seeds(0x6c69_6665_6379, SEEDS);
    for &seed in &seeds {
        let _guard = SeedGuard(seed);
        let counts = run(seed);
        total.fences += counts.fences;
        total.unfences += counts.unfences;
        total.shutdowns += counts.shutdowns;
    }
    eprintln!(
        "{} seeds: {} fenced, {} unfenced, {} controlled shutdowns",
        seeds.len(),
        total.fences,
        total.unfences,
        total.shutdowns
    );
    assert!(total.fences > 0, "not vacuous: sessions expired");
    assert!(total.unfences > 0, "not vacuous: brokers were unfenced");
    assert!(total.shutdowns > 0, "not vacuous: controlled shutdowns ran");
}
