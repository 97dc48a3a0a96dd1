//! [`RaftStorage`] on a simulated disk: [`SimRaftDisk`] is what survives a crash, and each
//! process incarnation opens a [`SimRaftStorage`] on it. Every call completes after a seeded
//! delay (the write plus its fsync); only then does its effect reach the disk, so a
//! [`SimRaftStorage::crash`] loses every call still in flight and no later call of that
//! incarnation completes.
//!
//! What it models: fsync latency, a process crash or power loss between calls (unsynced data is
//! lost: a call is durable all at once when it resolves). What it does not: torn writes inside
//! one call, corruption, I/O errors, disk-full.

use super::storage::{Persist, RaftStorage, RaftStorageError, Recovered};
use crate::runtime::Runtime;
use crate::sim::SimRuntime;
use raft::eraftpb::Snapshot;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

/// Longest simulated write + fsync, in µs.
const SYNC_DELAY_US_MAX: u64 = 3_000;

/// The durable Raft state of one node (cheap to clone: a handle to the same disk).
#[derive(Clone, Default)]
pub struct SimRaftDisk {
    image: Rc<RefCell<Recovered>>,
}

impl SimRaftDisk {
    /// A handle for a new process incarnation on this disk.
    pub fn open(&self, runtime: SimRuntime) -> SimRaftStorage {
        SimRaftStorage {
            runtime,
            disk: self.clone(),
            crashed: Rc::new(Cell::new(false)),
        }
    }

    /// What is on the disk now (a copy).
    pub fn image(&self) -> Recovered {
        self.image.borrow().clone()
    }
}

/// One incarnation's handle on a [`SimRaftDisk`].
pub struct SimRaftStorage {
    runtime: SimRuntime,
    disk: SimRaftDisk,
    crashed: Rc<Cell<bool>>,
}

impl SimRaftStorage {
    /// A handle that crashes this incarnation when called (the handle itself moves into the
    /// node).
    pub fn crash_switch(&self) -> CrashSwitch {
        CrashSwitch(self.crashed.clone())
    }

    async fn sync(&self) -> Result<(), RaftStorageError> {
        let delay = Duration::from_micros(self.runtime.random(1..SYNC_DELAY_US_MAX));
        self.runtime.sleep(delay).await;
        if self.crashed.get() {
            return Err(RaftStorageError::Closed);
        }
        Ok(())
    }
}

/// Crashes one [`SimRaftStorage`] incarnation: calls in flight and later calls fail with
/// [`RaftStorageError::Closed`] and leave the disk as it is.
#[derive(Clone)]
pub struct CrashSwitch(Rc<Cell<bool>>);

impl CrashSwitch {
    /// Crashes the incarnation.
    pub fn crash(&self) {
        self.0.set(true);
    }
}

impl RaftStorage for SimRaftStorage {
    async fn recover(&mut self) -> Result<Recovered, RaftStorageError> {
        if self.crashed.get() {
            return Err(RaftStorageError::Closed);
        }
        Ok(self.disk.image())
    }

    async fn persist(&mut self, step: Persist<'_>) -> Result<(), RaftStorageError> {
        self.sync().await?;
        let mut image = self.disk.image.borrow_mut();
        if let Some(snapshot) = step.snapshot {
            image.snapshot = snapshot.clone();
            image.entries.clear();
            image.conf_state = snapshot.get_metadata().get_conf_state().clone();
        }
        if let Some(first) = step.entries.first() {
            let first_stored = image.snapshot.get_metadata().index + 1;
            let keep =
                first
                    .index
                    .checked_sub(first_stored)
                    .ok_or_else(|| RaftStorageError::Corrupt {
                        reason: format!("append at {} below the snapshot", first.index),
                    })?;
            image
                .entries
                .truncate(usize::try_from(keep).unwrap_or(usize::MAX));
            image.entries.extend_from_slice(step.entries);
        }
        if let Some(hard_state) = step.hard_state {
            image.hard_state = hard_state.clone();
        }
        if let Some(conf_state) = step.conf_state {
            image.conf_state = conf_state.clone();
        }
        Ok(())
    }

    async fn compact(&mut self, snapshot: &Snapshot) -> Result<(), RaftStorageError> {
        self.sync().await?;
        let mut image = self.disk.image.borrow_mut();
        let index = snapshot.get_metadata().index;
        image.entries.retain(|e| e.index > index);
        image.snapshot = snapshot.clone();
        Ok(())
    }
}
