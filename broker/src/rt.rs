//! The shard runtime module (DESIGN.md §2): the one place the broker names glommio, besides
//! `runtime.rs` (the entry, which builds the executors and the mesh from these types) and
//! `seam.rs` (the replication runtime seam, built on these functions). Everything else reaches
//! tasks, task queues, timers, the shard mesh, TCP streams, semaphores, the blocking pool and
//! the executor id through here, so that moving to another io_uring runtime touches these
//! three files.
//!
//! Thin on purpose: type re-exports and one-line functions that call glommio directly, with
//! no extra allocation or indirection, so that the produce and fetch paths are unchanged.
//! Every function must be called on a shard's executor thread (glommio panics otherwise).

use std::future::Future;
use std::time::Duration;

/// The shard mesh: a full mesh of bounded channels between the executors, and one shard's
/// senders into it.
pub use glommio::channels::channel_mesh::{Full, MeshBuilder, Senders};
/// A bounded channel between tasks of one executor.
pub use glommio::channels::local_channel;
/// The shard's TCP connection, and the Unix socket the accept threads hand sockets over.
pub use glommio::net::{TcpStream, UnixStream};
/// An executor-local semaphore (not `Send`) and the permit it hands out.
pub use glommio::sync::{Permit, Semaphore, StaticPermit};
/// A detached task's handle: cancel it, or await its end.
pub use glommio::task::JoinHandle;
/// A spawned task: dropping it cancels the task, [`Task::detach`] lets it run on.
pub use glommio::Task;
/// What starts and pins an executor (the entry, `runtime.rs`, and tests).
pub use glommio::{CpuSet, LocalExecutorBuilder, Placement, PoolPlacement};
/// A task queue of the current executor, with its CPU shares and latency class.
pub use glommio::{Latency, Shares, TaskQueueHandle};

/// Spawns `fut` on the current executor, in the current task queue; it is polled at once.
#[inline]
pub fn spawn_local<T: 'static>(fut: impl Future<Output = T> + 'static) -> Task<T> {
    glommio::spawn_local(fut)
}

/// Spawns `fut` on the current executor, in `queue`. Errors when `queue` belongs to another
/// executor.
#[inline]
pub fn spawn_local_into<T: 'static>(
    fut: impl Future<Output = T> + 'static,
    queue: TaskQueueHandle,
) -> Result<Task<T>, glommio::GlommioError<()>> {
    glommio::spawn_local_into(fut, queue)
}

/// Completes after `duration`, on the executor's timer.
#[inline]
pub fn sleep(duration: Duration) -> impl Future<Output = ()> {
    glommio::timer::sleep(duration)
}

/// Runs `f` on the current executor's blocking thread pool, so that the shard never blocks
/// on a filesystem call or a DNS lookup.
#[inline]
pub fn spawn_blocking<R: Send + 'static>(
    f: impl FnOnce() -> R + Send + 'static,
) -> impl Future<Output = R> {
    glommio::executor().spawn_blocking(f)
}

/// Creates a task queue on the current executor.
#[inline]
pub fn create_task_queue(shares: Shares, latency: Latency, name: &str) -> TaskQueueHandle {
    glommio::executor().create_task_queue(shares, latency, name)
}

/// Runs `test` on a fresh executor of its own and waits for it (unit tests).
#[cfg(test)]
pub fn on_executor<T, F>(test: impl FnOnce() -> F + Send + 'static) -> T
where
    T: Send + 'static,
    F: Future<Output = T> + 'static,
{
    LocalExecutorBuilder::default()
        .spawn(test)
        .expect("executor")
        .join()
        .expect("test ran")
}
