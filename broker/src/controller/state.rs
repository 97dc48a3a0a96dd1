//! The controller's state on shard 0: the lock that serialises metadata changes, the record
//! log, and the producer ids of the current block. The controller service (`super`) runs the
//! changes; the shard only holds this.

use glommio::sync::{Permit, Semaphore};
use replication::metadata::ControllerError;
use replication::metadata::MetadataStore;
use std::cell::{Cell, RefCell};
use std::ops::Range;

/// Controller state.
pub struct Controller {
    /// Serialises changes: one proposal at a time sees the image it is appended to.
    pub(super) lock: Semaphore,
    /// The record log; out of its cell only while an append runs on the blocking pool (under
    /// `lock`).
    pub(super) store: RefCell<Option<MetadataStore>>,
    /// Producer ids of the current block not handed out yet (empty at start: the first
    /// InitProducerId appends a block).
    pub(super) producer_ids: Cell<Range<i64>>,
}

impl Controller {
    /// Waits for the controller's lock: one change at a time. Errors:
    /// [`ControllerError::Unavailable`] once the controller has stopped.
    pub(super) async fn lock(&self) -> Result<Permit<'_>, ControllerError> {
        self.lock
            .acquire_permit(1)
            .await
            .map_err(|_| ControllerError::Unavailable)
    }

    /// The state of a controller appending to `store`.
    pub fn new(store: MetadataStore) -> Controller {
        Controller {
            lock: Semaphore::new(1),
            store: RefCell::new(Some(store)),
            producer_ids: Cell::new(0..0),
        }
    }
}
