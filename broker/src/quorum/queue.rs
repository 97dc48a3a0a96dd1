//! [`FrameQueue`]: a bounded FIFO of `(node, frame)` pairs with one waiting consumer, the
//! queue between the raft driver and the transport's tasks in either direction.
//!
//! Invariants: at most `frames_max` frames and `bytes_max` bytes are queued; a push beyond
//! either is refused (the newest frame is the one dropped). [`FrameQueue::pop`] is
//! cancel-safe: a frame leaves the queue only in the poll that returns it, so dropping the
//! future loses nothing. One consumer: a second concurrent `pop` replaces the first's waker.

use bytes::Bytes;
use replication::runtime::NodeId;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::rc::Rc;
use std::task::{Poll, Waker};

/// The queue refused a frame: it holds its bound of frames or bytes.
#[derive(Debug, PartialEq, Eq)]
pub struct QueueFull;

struct State {
    frames: VecDeque<(NodeId, Bytes)>,
    bytes: usize,
    waker: Option<Waker>,
}

/// A bounded queue of frames shared by one producer side and one consumer task (`!Send`).
#[derive(Clone)]
pub struct FrameQueue {
    state: Rc<RefCell<State>>,
    frames_max: usize,
    bytes_max: usize,
}

impl FrameQueue {
    /// An empty queue of at most `frames_max` frames and `bytes_max` bytes.
    pub fn new(frames_max: usize, bytes_max: usize) -> FrameQueue {
        assert!(frames_max > 0, "a queue holds at least one frame");
        FrameQueue {
            state: Rc::new(RefCell::new(State {
                frames: VecDeque::new(),
                bytes: 0,
                waker: None,
            })),
            frames_max,
            bytes_max,
        }
    }

    /// Queues `frame` from or for `node`, and wakes the consumer. Errors: [`QueueFull`]
    /// (the frame is dropped, the queue unchanged).
    pub fn push(&self, node: NodeId, frame: Bytes) -> Result<(), QueueFull> {
        let mut state = self.state.borrow_mut();
        let full = state.frames.len() >= self.frames_max
            || state.bytes.saturating_add(frame.len()) > self.bytes_max;
        if full {
            return Err(QueueFull);
        }
        state.bytes += frame.len();
        state.frames.push_back((node, frame));
        if let Some(waker) = state.waker.take() {
            waker.wake();
        }
        Ok(())
    }

    /// The oldest frame, once there is one (cancel-safe).
    pub fn pop(&self) -> impl Future<Output = (NodeId, Bytes)> + 'static {
        let state = self.state.clone();
        std::future::poll_fn(move |cx| {
            let mut state = state.borrow_mut();
            match state.frames.pop_front() {
                Some((node, frame)) => {
                    state.bytes -= frame.len();
                    Poll::Ready((node, frame))
                }
                None => {
                    state.waker = Some(cx.waker().clone());
                    Poll::Pending
                }
            }
        })
    }

    /// Drops every queued frame (they went stale: the peer could not be reached).
    pub fn clear(&self) {
        let mut state = self.state.borrow_mut();
        state.frames.clear();
        state.bytes = 0;
    }

    /// Whether no frame is queued.
    pub fn is_empty(&self) -> bool {
        self.state.borrow().frames.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_lite::future::{block_on, poll_once};

    #[test]
    fn bounded_fifo_and_cancel_safe() {
        let queue = FrameQueue::new(2, 10);
        let n = NodeId(1);
        // A pop dropped before anything arrived loses nothing.
        assert!(block_on(poll_once(queue.pop())).is_none());
        queue.push(n, Bytes::from_static(b"abc")).expect("room");
        queue.push(n, Bytes::from_static(b"de")).expect("room");
        assert_eq!(queue.push(n, Bytes::from_static(b"f")), Err(QueueFull));
        assert_eq!(block_on(queue.pop()).1, Bytes::from_static(b"abc"));
        assert_eq!(
            queue.push(n, Bytes::from(vec![0; 9])),
            Err(QueueFull),
            "2 + 9 bytes exceed 10"
        );
        queue
            .push(n, Bytes::from(vec![0; 8]))
            .expect("2 + 8 bytes fit");
        assert_eq!(block_on(queue.pop()).1, Bytes::from_static(b"de"));
        queue.clear();
        assert!(queue.is_empty());
        queue
            .push(n, Bytes::from(vec![0; 10]))
            .expect("empty again");
    }
}
