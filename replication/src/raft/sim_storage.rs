//! [`RaftStorage`] on a simulated disk: [`SimRaftDisk`] is what survives a crash, and each
//! process incarnation opens a [`SimRaftStorage`] on it. Every call completes after a seeded
//! delay (the write plus its fsync); only then does its effect reach the disk, so a
//! [`SimRaftStorage::crash`] loses every call still in flight and no later call of that
//! incarnation completes.
//!
//! What it models: fsync latency, a process crash or power loss between calls (unsynced data is
//! lost: a call is durable all at once when it resolves). What it does not: torn writes inside
//! one call, corruption, I/O errors, disk-full.
//!
//! [`SimDir`] is a simulated [`DurableDir`] under [`super::FileRaftStorage`], so the record
//! file's format and recovery run in the simulation too: an append in flight at a crash leaves
//! a seeded prefix of its bytes (a torn write), a replace leaves the old or the new file.

use super::file_storage::DurableDir;
use super::storage::{Persist, RaftStorage, RaftStorageError, Recovered};
use crate::runtime::Runtime;
use crate::sim::SimRuntime;
use bytes::Bytes;
use raft::eraftpb::Snapshot;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
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
        CrashSwitch {
            crashed: self.crashed.clone(),
            torn_write: None,
        }
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

/// Crashes one incarnation of a [`SimRaftStorage`] or a [`SimDir`]: calls in flight and later
/// calls fail with [`RaftStorageError::Closed`]; what they leave on the disk is decided at the
/// crash (nothing, or a torn prefix of a [`SimDir`] append), never later, when a new
/// incarnation may already be writing.
#[derive(Clone)]
pub struct CrashSwitch {
    crashed: Rc<Cell<bool>>,
    torn_write: Option<Rc<dyn Fn()>>,
}

impl CrashSwitch {
    /// Crashes the incarnation.
    pub fn crash(&self) {
        if !self.crashed.replace(true) {
            if let Some(tear) = &self.torn_write {
                tear();
            }
        }
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
        image.conf_state = snapshot.get_metadata().get_conf_state().clone();
        Ok(())
    }
}

/// The files of one node's directory that survive a crash (cheap to clone: a handle).
#[derive(Clone, Default)]
pub struct SimDirDisk {
    files: Rc<RefCell<BTreeMap<String, Vec<u8>>>>,
}

impl SimDirDisk {
    /// A handle for a new process incarnation on this directory.
    pub fn open(&self, runtime: SimRuntime) -> SimDir {
        SimDir {
            runtime,
            disk: self.clone(),
            crashed: Rc::new(Cell::new(false)),
            in_flight: Rc::new(RefCell::new(None)),
        }
    }
}

/// One incarnation's handle on a [`SimDirDisk`].
pub struct SimDir {
    runtime: SimRuntime,
    disk: SimDirDisk,
    crashed: Rc<Cell<bool>>,
    /// The append being written: (file, bytes). At most one (the driver awaits each call).
    in_flight: Rc<RefCell<Option<(String, Bytes)>>>,
}

impl SimDir {
    /// A handle that crashes this incarnation (see [`CrashSwitch`]).
    pub fn crash_switch(&self) -> CrashSwitch {
        let (in_flight, disk, runtime) = (
            self.in_flight.clone(),
            self.disk.clone(),
            self.runtime.clone(),
        );
        let tear = move || {
            // The crash came mid-write: a seeded prefix of the append reached the disk.
            if let Some((name, bytes)) = in_flight.borrow_mut().take() {
                let torn = usize::try_from(runtime.random(0..bytes.len() as u64 + 1))
                    .unwrap_or(0)
                    .min(bytes.len());
                let mut files = disk.files.borrow_mut();
                files
                    .entry(name)
                    .or_default()
                    .extend_from_slice(&bytes[..torn]);
            }
        };
        CrashSwitch {
            crashed: self.crashed.clone(),
            torn_write: Some(Rc::new(tear)),
        }
    }

    async fn io(&self) {
        let delay = Duration::from_micros(self.runtime.random(1..SYNC_DELAY_US_MAX));
        self.runtime.sleep(delay).await;
    }
}

impl DurableDir for SimDir {
    async fn read(&mut self, name: &str) -> Result<Option<Bytes>, RaftStorageError> {
        if self.crashed.get() {
            return Err(RaftStorageError::Closed);
        }
        Ok(self.disk.files.borrow().get(name).cloned().map(Bytes::from))
    }

    async fn append(&mut self, name: &str, bytes: Bytes) -> Result<(), RaftStorageError> {
        if self.crashed.get() {
            return Err(RaftStorageError::Closed);
        }
        *self.in_flight.borrow_mut() = Some((name.to_string(), bytes));
        self.io().await;
        let written = self.in_flight.borrow_mut().take();
        match written {
            Some((name, bytes)) if !self.crashed.get() => {
                let mut files = self.disk.files.borrow_mut();
                files.entry(name).or_default().extend_from_slice(&bytes);
                Ok(())
            }
            // Crashed while writing: the crash switch tore the write.
            _ => Err(RaftStorageError::Closed),
        }
    }

    async fn replace(&mut self, name: &str, bytes: Bytes) -> Result<(), RaftStorageError> {
        self.io().await;
        if self.crashed.get() {
            return Err(RaftStorageError::Closed);
        }
        self.disk
            .files
            .borrow_mut()
            .insert(name.to_string(), bytes.to_vec());
        Ok(())
    }
}
