//! The replication runtime seam (`replication::runtime`) on the shard runtime (`crate::rt`):
//! what partitions and the metadata state machine reach time, timers and tasks through, so
//! that the simulation can drive the same code with a fake clock.

use replication::runtime::{Clock, LocalBoxFuture, MonotonicTime, Runtime};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The replication runtime seam on the shard runtime: the current executor's timers and
/// tasks, and a monotonic clock whose origin is the process's first look at it — one origin
/// for every shard, so a deadline set on one shard means the same instant on another.
#[derive(Clone, Copy, Debug, Default)]
pub struct ShardRuntime;

/// The origin of [`ShardRuntime`]'s clock.
static CLOCK_ORIGIN: OnceLock<Instant> = OnceLock::new();

impl Clock for ShardRuntime {
    fn now(&self) -> MonotonicTime {
        MonotonicTime(CLOCK_ORIGIN.get_or_init(Instant::now).elapsed())
    }
}

impl Runtime for ShardRuntime {
    fn sleep(&self, duration: Duration) -> LocalBoxFuture<()> {
        Box::pin(async move {
            crate::rt::sleep(duration).await;
        })
    }

    /// Spawns into the current task queue (the one of the task that asks).
    fn spawn(&self, task: LocalBoxFuture<()>) {
        crate::rt::spawn_local(task).detach();
    }
}
