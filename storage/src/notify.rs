//! A single-threaded "something changed" signal ([`Notify`]) and the future that waits for it
//! ([`Notified`]).
//!
//! Each waiting [`Notified`] holds one slot of its `Notify`'s waiter list, kept while it waits
//! and given back when it is dropped, so the list holds exactly the futures still waiting.
//! A future dropped before the signal — a fetch whose other partitions answered first, a wait
//! that lost a race with a timer — leaves nothing behind. (Before this module, each poll by a
//! new task pushed its waker and scanned the whole list: the replica fetcher's parked fetches
//! of idle partitions left a waker per fetch on those partitions until they next changed,
//! thousands per partition within seconds, and every new wait scanned them: 18 % of a core in
//! a 3-node cluster at 10,000 msg/s.)

use slab::Slab;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// The signal: [`Notify::notify_all`] wakes every [`Notified`] made before it. Single-threaded
/// (one shard). The waiter list is bounded by the number of `Notified` futures waiting.
#[derive(Default)]
pub struct Notify {
    /// Bumped by each `notify_all`; a `Notified` made before it is ready.
    generation: Cell<u64>,
    /// The wakers of the `Notified` futures of this generation that wait; each knows its key.
    waiters: RefCell<Slab<Waker>>,
    /// An empty list with the capacity of an earlier generation's, swapped in by `notify_all`
    /// so that neither list is allocated again once both have grown.
    spare: Cell<Slab<Waker>>,
}

impl Notify {
    /// Wakes every current waiter; each [`Notified`] made before this call is ready.
    pub fn notify_all(&self) {
        self.generation.set(self.generation.get() + 1);
        // Swapped out before waking, so that nothing is borrowed while a waker runs (glommio's
        // and the simulation's only queue their task, but a waker may run anything).
        let mut woken = std::mem::replace(&mut *self.waiters.borrow_mut(), self.spare.take());
        for waker in woken.drain() {
            waker.wake();
        }
        self.spare.set(woken);
    }

    /// Resolves at the next [`Notify::notify_all`] after this call.
    pub fn notified(self: &Rc<Self>) -> Notified {
        Notified {
            notify: self.clone(),
            generation: self.generation.get(),
            key: None,
        }
    }

    /// The `Notified` futures waiting now (each polled once, not yet notified nor dropped).
    pub fn waiting(&self) -> usize {
        self.waiters.borrow().len()
    }
}

/// Future returned by [`Notify::notified`]. Dropping it before the signal gives its place in
/// the waiter list back.
pub struct Notified {
    notify: Rc<Notify>,
    generation: u64,
    /// This future's slot in `notify.waiters` while it waits in `generation`.
    key: Option<usize>,
}

impl Notified {
    fn notified(&self) -> bool {
        self.notify.generation.get() != self.generation
    }
}

impl Future for Notified {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if this.notified() {
            // `notify_all` took the list, this future's slot with it.
            this.key = None;
            return Poll::Ready(());
        }
        let mut waiters = this.notify.waiters.borrow_mut();
        match this.key {
            Some(key) => {
                let waker = &mut waiters[key];
                if !waker.will_wake(cx.waker()) {
                    waker.clone_from(cx.waker());
                }
            }
            None => this.key = Some(waiters.insert(cx.waker().clone())),
        }
        Poll::Pending
    }
}

impl Drop for Notified {
    fn drop(&mut self) {
        if let Some(key) = self.key {
            if !self.notified() {
                self.notify.waiters.borrow_mut().remove(key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    /// A waker that counts its wakes.
    struct Counting(AtomicUsize);

    impl Wake for Counting {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn counting() -> (Arc<Counting>, Waker) {
        let c = Arc::new(Counting(AtomicUsize::new(0)));
        (c.clone(), Waker::from(c))
    }

    fn poll(f: &mut Notified, waker: &Waker) -> Poll<()> {
        Pin::new(f).poll(&mut Context::from_waker(waker))
    }

    #[test]
    fn a_dropped_waiter_leaves_nothing_behind() {
        let notify = Rc::new(Notify::default());
        for _ in 0..1_000 {
            // A fresh waker each time, as a new task (or a new fetch's future) would have.
            let (_, waker) = counting();
            let mut f = notify.notified();
            assert_eq!(poll(&mut f, &waker), Poll::Pending);
            assert_eq!(notify.waiting(), 1);
        }
        assert_eq!(notify.waiting(), 0);
    }

    #[test]
    fn a_waiter_polled_again_keeps_one_slot_and_the_latest_waker() {
        let notify = Rc::new(Notify::default());
        let (first, first_waker) = counting();
        let (second, second_waker) = counting();
        let mut f = notify.notified();
        assert_eq!(poll(&mut f, &first_waker), Poll::Pending);
        assert_eq!(poll(&mut f, &second_waker), Poll::Pending);
        assert_eq!(poll(&mut f, &second_waker), Poll::Pending);
        assert_eq!(notify.waiting(), 1);
        notify.notify_all();
        assert_eq!(first.0.load(Ordering::SeqCst), 0);
        assert_eq!(second.0.load(Ordering::SeqCst), 1);
        assert_eq!(poll(&mut f, &second_waker), Poll::Ready(()));
    }

    #[test]
    fn notify_all_wakes_every_waiter_and_old_waiters_do_not_touch_new_slots() {
        let notify = Rc::new(Notify::default());
        let (a, a_waker) = counting();
        let (b, b_waker) = counting();
        let mut fa = notify.notified();
        let mut fb = notify.notified();
        assert_eq!(poll(&mut fa, &a_waker), Poll::Pending);
        assert_eq!(poll(&mut fb, &b_waker), Poll::Pending);
        notify.notify_all();
        assert_eq!(a.0.load(Ordering::SeqCst), 1);
        assert_eq!(b.0.load(Ordering::SeqCst), 1);
        assert_eq!(notify.waiting(), 0);
        // A waiter of the new generation takes slot 0, which `fa` held before.
        let (c, c_waker) = counting();
        let mut fc = notify.notified();
        assert_eq!(poll(&mut fc, &c_waker), Poll::Pending);
        // `fb` is ready without being polled again; dropping `fa` must not free `fc`'s slot.
        drop(fa);
        assert_eq!(poll(&mut fb, &b_waker), Poll::Ready(()));
        drop(fb);
        assert_eq!(notify.waiting(), 1);
        notify.notify_all();
        assert_eq!(c.0.load(Ordering::SeqCst), 1);
        assert_eq!(poll(&mut fc, &c_waker), Poll::Ready(()));
    }

    #[test]
    fn a_waiter_made_after_notify_all_waits_for_the_next() {
        let notify = Rc::new(Notify::default());
        notify.notify_all();
        let (_, waker) = counting();
        let mut f = notify.notified();
        assert_eq!(poll(&mut f, &waker), Poll::Pending);
        notify.notify_all();
        assert_eq!(poll(&mut f, &waker), Poll::Ready(()));
    }
}
