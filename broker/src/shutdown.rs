//! Graceful shutdown on SIGTERM/SIGINT (DESIGN.md §6; the metrics/config issue adds more).
//!
//! A dedicated thread waits for the signals (blocked in every other thread, so they are not
//! delivered elsewhere). The first sets a process-wide flag; each shard notices it within
//! [`STOP_POLL`], stops accepting, ends its connections' read sides (responses already
//! queued are still written), waits up to [`DRAIN_TIMEOUT`] for them, then flushes and closes
//! every partition log — which leaves each log's clean-shutdown marker, so the next start
//! reads only the tail after the last index entry. A second signal exits at once.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use storage::Notify;

/// How often a shard looks at the process-wide flag (the signal thread cannot wake a shard
/// executor directly); only the shutdown path waits on this timer.
pub const STOP_POLL: Duration = Duration::from_millis(50);
/// Longest a shard waits for its connections to finish before closing its logs.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(3);

/// Blocks SIGTERM and SIGINT in this thread (and so in every thread it starts later) and starts
/// the thread that waits for them. Returns the flag the first signal sets.
pub fn install() -> anyhow::Result<Arc<AtomicBool>> {
    // SAFETY: sigset_t is plain data initialised by sigemptyset before use.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        set
    };
    // SAFETY: `set` is a valid signal set; the old mask is not needed.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    anyhow::ensure!(
        rc == 0,
        "blocking SIGTERM/SIGINT failed: {}",
        std::io::Error::from_raw_os_error(rc)
    );
    let flag = Arc::new(AtomicBool::new(false));
    let seen = flag.clone();
    std::thread::Builder::new()
        .name("sluice-signals".into())
        .spawn(move || loop {
            let mut signal = 0;
            // SAFETY: `set` is valid and `signal` is a live out-parameter.
            if unsafe { libc::sigwait(&set, &mut signal) } != 0 {
                continue;
            }
            if seen.swap(true, Ordering::SeqCst) {
                eprintln!("sluice: second signal, exiting now");
                std::process::exit(130);
            }
            eprintln!("sluice: shutting down (signal {signal}); a second signal exits at once");
        })?;
    Ok(flag)
}

/// One shard's view of shutdown: whether it was requested, and its open connections.
#[derive(Default)]
pub struct ShardStop {
    requested: Cell<bool>,
    changed: Rc<Notify>,
    connections: Cell<usize>,
}

impl ShardStop {
    /// Whether shutdown was requested.
    pub fn is_requested(&self) -> bool {
        self.requested.get()
    }

    /// Resolves once shutdown is requested.
    pub async fn requested(&self) {
        while !self.requested.get() {
            self.changed.notified().await;
        }
    }

    /// Watches the process-wide `flag` and marks this shard stopping when it is set.
    pub async fn watch(&self, flag: Arc<AtomicBool>) {
        while !flag.load(Ordering::SeqCst) {
            crate::rt::sleep(STOP_POLL).await;
        }
        self.requested.set(true);
        self.changed.notify_all();
    }

    /// Open connections.
    pub fn connections(&self) -> usize {
        self.connections.get()
    }

    /// Counts a connection until the returned guard drops.
    pub fn connection(self: &Rc<Self>) -> ConnectionGuard {
        self.connections.set(self.connections.get() + 1);
        ConnectionGuard { stop: self.clone() }
    }

    /// Waits until every connection has ended, or `timeout`; returns how many remain.
    pub async fn drained(&self, timeout: Duration) -> usize {
        let deadline = Instant::now() + timeout;
        while self.connections.get() > 0 && Instant::now() < deadline {
            let left = deadline.saturating_duration_since(Instant::now());
            futures_lite::future::or(self.changed.notified(), crate::rt::sleep(left)).await;
        }
        self.connections.get()
    }
}

/// Decrements the shard's connection count when the connection ends.
pub struct ConnectionGuard {
    stop: Rc<ShardStop>,
}

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.stop.connections.set(self.stop.connections.get() - 1);
        self.stop.changed.notify_all();
    }
}
