//! The runtime seam: everything a partition (and later the metadata state machine and the
//! Raft driver) needs from the world — monotonic time, timers, spawning and node-to-node
//! messages — behind three narrow traits, so the same logic runs on a glommio shard in the
//! broker and under the deterministic simulation of `crate::sim`.
//!
//! Limits: tasks are `!Send` and run on the thread that spawned them (one shard, or the one
//! simulation thread); [`MonotonicTime`] is comparable only within one process.

use std::future::Future;
use std::ops::Add;
use std::pin::Pin;
use std::time::Duration;

/// A boxed `!Send` future, as the seam spawns and returns them.
pub type LocalBoxFuture<T> = Pin<Box<dyn Future<Output = T>>>;

/// A point on a monotonic clock: the time since the clock's origin (the process start on a
/// broker, zero in a simulation). Never wall-clock time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MonotonicTime(pub Duration);

impl MonotonicTime {
    /// How long after `earlier` this is; zero when it is not after it.
    pub fn saturating_duration_since(self, earlier: MonotonicTime) -> Duration {
        self.0.saturating_sub(earlier.0)
    }
}

impl Add<Duration> for MonotonicTime {
    type Output = MonotonicTime;
    fn add(self, rhs: Duration) -> MonotonicTime {
        MonotonicTime(self.0.saturating_add(rhs))
    }
}

/// Monotonic time; a simulation moves it only when nothing else can run.
pub trait Clock {
    /// The current time.
    fn now(&self) -> MonotonicTime;
}

/// Timers and spawning on the current thread's executor.
pub trait Runtime: Clock {
    /// Resolves once `duration` has passed on this runtime's clock.
    fn sleep(&self, duration: Duration) -> LocalBoxFuture<()>;
    /// Runs `task` to completion in the background on this thread (detached).
    fn spawn(&self, task: LocalBoxFuture<()>);
}

/// A broker's id in the cluster (Kafka's `node.id`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub i32);

/// Why a message could not be handed to the transport.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TransportError {
    /// The queue towards `to` is full (its bound is the transport's): back off and retry.
    #[error("the queue to node {to:?} is full")]
    QueueFull { to: NodeId },
    /// No route to `to` (unknown or shut down).
    #[error("node {to:?} is unreachable")]
    Unreachable { to: NodeId },
}

/// Node-to-node messages. Delivery is not guaranteed (a message may be lost, delayed or
/// reordered, as over a network that reconnects); protocols on top retry.
pub trait Transport {
    /// What travels between nodes.
    type Message;
    /// Queues `message` for `to` without waiting. Errors: [`TransportError`].
    fn send(&self, to: NodeId, message: Self::Message) -> Result<(), TransportError>;
    /// The next message delivered to this node, with its sender.
    fn recv(&self) -> LocalBoxFuture<(NodeId, Self::Message)>;
}
