//! A single-threaded "something changed" signal for tasks of one glommio executor: waiters
//! remember the generation they saw and are woken when `notify` moves it on.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// The signal. Not `Send`: it lives on the executor that owns the floor's state.
#[derive(Default)]
pub struct Event {
    generation: Cell<u64>,
    wakers: RefCell<Vec<Waker>>,
}

impl Event {
    /// The current generation, to pass to [`Event::changed`].
    pub fn generation(&self) -> u64 {
        self.generation.get()
    }

    /// Moves the generation on and wakes every waiter.
    pub fn notify(&self) {
        self.generation.set(self.generation.get().wrapping_add(1));
        for waker in self.wakers.take() {
            waker.wake();
        }
    }

    /// Resolves once the generation differs from `since`.
    pub fn changed(&self, since: u64) -> Changed<'_> {
        Changed { event: self, since }
    }
}

/// The future of [`Event::changed`].
pub struct Changed<'a> {
    event: &'a Event,
    since: u64,
}

impl Future for Changed<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.event.generation.get() != self.since {
            return Poll::Ready(());
        }
        self.event.wakers.borrow_mut().push(cx.waker().clone());
        Poll::Pending
    }
}
