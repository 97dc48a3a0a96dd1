//! Crash points: the places where a crash test makes the process die as a SIGKILL would, at a
//! chosen step of a multi-file change (issue #27 point 4: a compaction swap and its recovery).
//!
//! `SLUICE_CRASH_AT=<point>:<n>` in the environment makes the process send SIGKILL to itself
//! the `n`-th time (1-based, counted over the whole process) it reaches crash point `<point>`,
//! before the step there runs. A SIGKILL, not a panic or an abort: nothing is unwound or
//! flushed, completed writes and renames stay, exactly as when an operator's `kill -9` or the
//! OOM killer lands there. Without the variable (always, outside those tests) reaching a crash
//! point costs one load of a `OnceLock` and a string comparison; the points sit on rare paths
//! (a clean's swap, the recovery of an interrupted one), never on the produce or fetch path.
//!
//! The points: `clean.swap` (before each file step of a clean's swap, `log/compact.rs`) and
//! `clean.recover` (before each step of the recovery of an interrupted swap).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The environment variable naming the crash point and its count.
pub const CRASH_AT_VAR: &str = "SLUICE_CRASH_AT";

/// `(point, n)` from [`CRASH_AT_VAR`], read once; `None` when unset or malformed.
fn target() -> Option<&'static (String, u64)> {
    static TARGET: OnceLock<Option<(String, u64)>> = OnceLock::new();
    TARGET
        .get_or_init(|| {
            let value = std::env::var(CRASH_AT_VAR).ok()?;
            let (point, n) = value.rsplit_once(':')?;
            let n: u64 = n.parse().ok().filter(|n| *n > 0)?;
            Some((point.to_string(), n))
        })
        .as_ref()
}

/// Times the process reached the targeted point so far.
static REACHED: AtomicU64 = AtomicU64::new(0);

/// Marks crash point `point`: the process is SIGKILLed here when [`CRASH_AT_VAR`] names this
/// point and this is its `n`-th time.
pub(crate) fn reach(point: &str) {
    let Some((target, n)) = target() else {
        return;
    };
    if target != point {
        return;
    }
    let count = REACHED.fetch_add(1, Ordering::Relaxed) + 1;
    if count == *n {
        tracing::warn!(
            point,
            count,
            "crash point reached: SIGKILL ({CRASH_AT_VAR})"
        );
        // SAFETY: kill(2) on our own pid with a valid signal number; it does not return.
        unsafe {
            libc::kill(libc::getpid(), libc::SIGKILL);
        }
    }
}
