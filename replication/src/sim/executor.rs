//! The simulation's executor and clock: one thread, a seeded choice among ready tasks, and a
//! fake clock that jumps to the next timer when nothing can run. Nothing here reads the real
//! clock, so a run is a function of its seed.

use crate::runtime::{Clock, LocalBoxFuture, MonotonicTime, Runtime};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

/// Wakes one task: puts its id on the ready list. (`Waker` must be `Send`; the simulation is
/// single-threaded, so the mutex is never contended.)
struct TaskWaker {
    id: usize,
    ready: Arc<Mutex<Vec<usize>>>,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        if let Ok(mut ready) = self.ready.lock() {
            ready.push(self.id);
        }
    }
}

struct Timers {
    /// Pending timers by (deadline, sequence number): fired in deadline order, ties by
    /// creation order.
    pending: BTreeMap<(MonotonicTime, u64), Waker>,
    next_seq: u64,
}

struct Shared {
    now: Cell<MonotonicTime>,
    timers: RefCell<Timers>,
    spawned: RefCell<Vec<LocalBoxFuture<()>>>,
    rng: RefCell<fastrand::Rng>,
}

/// The simulated runtime handed to the code under test (cheap to clone).
#[derive(Clone)]
pub struct SimRuntime {
    shared: Rc<Shared>,
}

impl SimRuntime {
    /// A seeded random number in `range`, from the run's one generator.
    pub fn random(&self, range: std::ops::Range<u64>) -> u64 {
        self.shared.rng.borrow_mut().u64(range)
    }

    /// `true` with probability `percent` / 100.
    pub fn chance(&self, percent: u64) -> bool {
        self.random(0..100) < percent
    }
}

impl Clock for SimRuntime {
    fn now(&self) -> MonotonicTime {
        self.shared.now.get()
    }
}

impl Runtime for SimRuntime {
    fn sleep(&self, duration: Duration) -> LocalBoxFuture<()> {
        Box::pin(Sleep {
            shared: self.shared.clone(),
            deadline: self.now() + duration,
            key: None,
        })
    }

    fn spawn(&self, task: LocalBoxFuture<()>) {
        self.shared.spawned.borrow_mut().push(task);
    }
}

struct Sleep {
    shared: Rc<Shared>,
    deadline: MonotonicTime,
    key: Option<(MonotonicTime, u64)>,
}

impl Future for Sleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.shared.now.get() >= self.deadline {
            return Poll::Ready(());
        }
        let mut timers = self.shared.timers.borrow_mut();
        let key = match self.key {
            Some(key) => key,
            None => {
                let key = (self.deadline, timers.next_seq);
                timers.next_seq += 1;
                key
            }
        };
        timers.pending.insert(key, cx.waker().clone());
        drop(timers);
        self.key = Some(key);
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some(key) = self.key {
            self.shared.timers.borrow_mut().pending.remove(&key);
        }
    }
}

/// Why [`Executor::run_until`] stopped without the future completing.
#[derive(Debug, PartialEq, Eq)]
pub enum Stuck {
    /// No task can run and no timer is pending: a deadlock.
    Deadlock,
    /// More than the step bound were taken (a livelock or a runaway loop).
    StepLimit,
}

/// Most task polls one [`Executor::run_until`] makes before it reports [`Stuck::StepLimit`].
pub const STEPS_MAX: u64 = 10_000_000;

/// The deterministic executor.
pub struct Executor {
    runtime: SimRuntime,
    tasks: Vec<Option<LocalBoxFuture<()>>>,
    ready: Arc<Mutex<Vec<usize>>>,
}

impl Executor {
    /// An executor whose every choice comes from `seed`.
    pub fn new(seed: u64) -> Executor {
        Executor {
            runtime: SimRuntime {
                shared: Rc::new(Shared {
                    now: Cell::new(MonotonicTime::default()),
                    timers: RefCell::new(Timers {
                        pending: BTreeMap::new(),
                        next_seq: 0,
                    }),
                    spawned: RefCell::new(Vec::new()),
                    rng: RefCell::new(fastrand::Rng::with_seed(seed)),
                }),
            },
            tasks: Vec::new(),
            ready: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// The runtime the code under test uses.
    pub fn runtime(&self) -> SimRuntime {
        self.runtime.clone()
    }

    fn adopt_spawned(&mut self) {
        let spawned: Vec<_> = self.runtime.shared.spawned.borrow_mut().drain(..).collect();
        for task in spawned {
            let id = self.tasks.len();
            self.tasks.push(Some(task));
            self.wake(id);
        }
    }

    fn wake(&self, id: usize) {
        if let Ok(mut ready) = self.ready.lock() {
            ready.push(id);
        }
    }

    /// Runs every task, in a seeded order, until `fut` completes; background tasks keep their
    /// state for the next call. Errors: [`Stuck`] when `fut` can never complete.
    pub fn run_until<T: 'static>(
        &mut self,
        fut: impl Future<Output = T> + 'static,
    ) -> Result<T, Stuck> {
        let out: Rc<RefCell<Option<T>>> = Rc::new(RefCell::new(None));
        let slot = out.clone();
        self.runtime.spawn(Box::pin(async move {
            let value = fut.await;
            *slot.borrow_mut() = Some(value);
        }));
        for _ in 0..STEPS_MAX {
            if let Some(value) = out.borrow_mut().take() {
                return Ok(value);
            }
            self.adopt_spawned();
            let id = {
                let Ok(mut ready) = self.ready.lock() else {
                    return Err(Stuck::Deadlock);
                };
                ready.sort_unstable();
                ready.dedup();
                if ready.is_empty() {
                    None
                } else {
                    let pick = self.runtime.random(0..ready.len() as u64);
                    Some(ready.swap_remove(usize::try_from(pick).unwrap_or(0)))
                }
            };
            match id {
                Some(id) => self.poll_task(id),
                None => {
                    if !self.fire_next_timer() {
                        return Err(Stuck::Deadlock);
                    }
                }
            }
        }
        Err(Stuck::StepLimit)
    }

    fn poll_task(&mut self, id: usize) {
        let Some(mut task) = self.tasks.get_mut(id).and_then(Option::take) else {
            return; // Finished already; a stale wake.
        };
        let waker = Waker::from(Arc::new(TaskWaker {
            id,
            ready: self.ready.clone(),
        }));
        let mut cx = Context::from_waker(&waker);
        if task.as_mut().poll(&mut cx).is_pending() {
            self.tasks[id] = Some(task);
        }
    }

    /// Moves the clock to the earliest pending timer and wakes every timer due then; `false`
    /// when none is pending.
    fn fire_next_timer(&self) -> bool {
        let shared = &self.runtime.shared;
        let mut timers = shared.timers.borrow_mut();
        let Some((&(deadline, _), _)) = timers.pending.first_key_value() else {
            return false;
        };
        shared.now.set(shared.now.get().max(deadline));
        while let Some(entry) = timers.pending.first_entry() {
            if entry.key().0 > deadline {
                break;
            }
            entry.remove().wake();
        }
        true
    }
}
