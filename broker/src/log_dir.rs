//! The state of this broker's log directory (`log.dirs`: one per broker here): online, or
//! failed once a write to it failed for want of space or with an I/O error — Kafka's
//! `LogDirFailureChannel` (KIP-112) for Sluice's single directory.
//!
//! What a failure changes, in a cluster (another live broker to lead): shard 0's heartbeats
//! tell the active controller, which moves every leadership this broker holds to another
//! in-sync replica and takes it out of every ISR (the controlled-shutdown records: the
//! failed directory's replicas go offline, as Kafka's controller does for an offline
//! directory), while the broker stays up and answers — NOT_LEADER_OR_FOLLOWER for what it no
//! longer leads, so clients move to the new leaders. The state lasts until the process ends:
//! a restart (once space is back) registers the broker anew and its replicas catch up and
//! rejoin the ISR. On a broker alone nothing moves: writes are refused with
//! KAFKA_STORAGE_ERROR while reads go on, and work again once space returns.

use std::sync::atomic::{AtomicBool, Ordering};
use storage::StorageError;

/// The log directory's state, shared by every shard of the process.
#[derive(Debug, Default)]
pub struct LogDir {
    failed: AtomicBool,
}

impl LogDir {
    /// Records `error` if it is a failure of the directory itself ([`is_dir_failure`]);
    /// `true` the first time the directory fails.
    pub fn note(&self, error: &StorageError) -> bool {
        if !is_dir_failure(error) {
            return false;
        }
        let first = !self.failed.swap(true, Ordering::AcqRel);
        if first {
            tracing::error!(
                error = %error,
                "the log directory failed: this broker's replicas go offline (in a cluster, \
                 its leaderships move to other in-sync replicas); restart once it is repaired"
            );
        }
        first
    }

    /// Whether a write to the directory has failed since the process started.
    pub fn failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }
}

/// Whether `error` says the directory cannot take writes (no space, an I/O error), not that
/// one request was wrong.
pub fn is_dir_failure(error: &StorageError) -> bool {
    matches!(
        error,
        StorageError::DiskFull { .. } | StorageError::Io { .. }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_space_and_io_errors_fail_the_directory_once() {
        let dir = LogDir::default();
        assert!(!dir.note(&StorageError::Closed));
        assert!(!dir.failed());
        let full = StorageError::DiskFull {
            op: "preallocate",
            path: "/d/t-0/1.log".into(),
        };
        assert!(dir.note(&full), "the first failure");
        assert!(!dir.note(&full), "reported once");
        assert!(dir.failed());
    }
}
