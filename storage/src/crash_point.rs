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
//!
//! In-process tests cut instead of killing: [`cut_at`] arms, for the calling thread (a shard's
//! executor), a cut at the `n`-th reach of a point; the step there is not run and the
//! operation fails with an I/O error, as if the process had died before it. The test then
//! drops the log without closing it and reopens the directory (`storage/tests/compact_model.rs`).

use crate::error::{Result, StorageError};
use std::cell::Cell;
use std::path::Path;
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

thread_local! {
    /// The cut [`cut_at`] armed on this thread: the point, and how many more reaches of it
    /// run their step (the next one after those is cut).
    static CUT: Cell<Option<(&'static str, u64)>> = const { Cell::new(None) };
}

/// Test hook: the `n`-th time (1-based) this thread reaches crash point `point` from now on, the
/// step there is not run and [`reach`] fails (the steps before it stay done, as a SIGKILL would
/// leave them); the cut then disarms itself. `None` disarms. Only the swap of a clean and the
/// recovery of an interrupted one reach crash points, never the produce or fetch path.
///
/// # Panics
/// When `n` is 0.
pub fn cut_at(cut: Option<(&'static str, u64)>) {
    if let Some((_, n)) = cut {
        assert!(n > 0, "crash point counts are 1-based");
    }
    CUT.with(|c| c.set(cut.map(|(point, n)| (point, n - 1))));
}

/// Marks crash point `point`, before a step on `dir`: the process is SIGKILLed here when
/// [`CRASH_AT_VAR`] names this point and this is its `n`-th time.
///
/// # Errors
/// [`StorageError::Io`] when a cut armed by [`cut_at`] falls here: the step must not run.
pub(crate) fn reach(point: &str, dir: &Path) -> Result<()> {
    let cut_here = CUT.with(|c| match c.get() {
        Some((armed, 0)) if armed == point => {
            c.set(None);
            true
        }
        Some((armed, left)) if armed == point => {
            c.set(Some((armed, left - 1)));
            false
        }
        _ => false,
    });
    if cut_here {
        let cut = std::io::Error::other(format!("cut at crash point {point}"));
        return Err(StorageError::io("stopping at a crash point in", dir, cut));
    }
    let Some((target, n)) = target() else {
        return Ok(());
    };
    if target != point {
        return Ok(());
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
    Ok(())
}
