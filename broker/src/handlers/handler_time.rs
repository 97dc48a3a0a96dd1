//! How long a request's handler has run on its shard: the time spent polling its future,
//! not the time it waited (for other shards, replication, a long-polling fetch). It is what
//! `request_percentage` meters (KIP-124; `crate::quotas`), as Kafka meters a request's time on
//! its handler thread from dequeue to response and not its time in purgatory.

use std::cell::Cell;
use std::future::Future;
use std::time::{Duration, Instant};

/// One request's handler time so far. Single-threaded: the shard polls the handler.
#[derive(Debug, Default)]
pub struct HandlerTime {
    /// Time of the polls that have returned.
    spent: Cell<Duration>,
    /// When the poll under way began (`None` between polls).
    polling_since: Cell<Option<Instant>>,
}

impl HandlerTime {
    /// Runs `handler`, adding the time of each of its polls to this.
    pub async fn measure<F: Future>(&self, handler: F) -> F::Output {
        let mut handler = std::pin::pin!(handler);
        std::future::poll_fn(|cx| {
            let started = Instant::now();
            self.polling_since.set(Some(started));
            let polled = handler.as_mut().poll(cx);
            self.polling_since.set(None);
            self.spent.set(self.spent.get() + started.elapsed());
            polled
        })
        .await
    }

    /// The handler's time so far, the poll under way included (read from inside it).
    pub fn so_far(&self) -> Duration {
        let current = self
            .polling_since
            .get()
            .map_or(Duration::ZERO, |s| s.elapsed());
        self.spent.get() + current
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_polls_count_not_the_waits_between_them() {
        let time = HandlerTime::default();
        let mut yielded = false;
        let handler = std::future::poll_fn(|cx| {
            std::thread::sleep(Duration::from_millis(5));
            let inside = time.so_far();
            assert!(inside >= Duration::from_millis(5), "{inside:?}");
            if yielded {
                std::task::Poll::Ready(inside)
            } else {
                yielded = true;
                cx.waker().wake_by_ref();
                std::task::Poll::Pending
            }
        });
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        let mut measured = std::pin::pin!(time.measure(handler));
        assert!(measured.as_mut().poll(&mut cx).is_pending());
        // A wait between polls is not handler time (the wait is long beside the polls, so a
        // loaded machine's late wake-ups cannot make up for it).
        std::thread::sleep(Duration::from_millis(300));
        let std::task::Poll::Ready(inside) = measured.as_mut().poll(&mut cx) else {
            panic!("the handler finished on its second poll");
        };
        assert!(inside >= Duration::from_millis(10), "{inside:?}");
        assert!(inside < Duration::from_millis(300), "{inside:?}");
        assert!(time.so_far() >= inside);
    }
}
