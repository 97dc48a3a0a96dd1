//! A shard's group coordinator state: the groups of the `__consumer_offsets` partitions it
//! owns, and which of those partitions were replayed. Pure state; the service
//! ([`super::service`]) runs the ops and the appends.

use super::group::{Group, GroupConfig};
use super::offsets_log::OffsetsRecord;
use super::ops::CommittedStatus;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::time::Instant;

/// Per-shard coordinator state: the groups of the offsets partitions this shard owns.
pub struct GroupCoordinator {
    pub(super) groups: RefCell<HashMap<String, Group>>,
    /// Offsets partitions replayed into `groups`.
    pub(super) loaded: RefCell<HashSet<i32>>,
    pub(super) load_lock: glommio::sync::Semaphore,
    pub(super) config: GroupConfig,
}

impl GroupCoordinator {
    pub fn new(config: GroupConfig) -> GroupCoordinator {
        GroupCoordinator {
            groups: RefCell::new(HashMap::new()),
            loaded: RefCell::new(HashSet::new()),
            load_lock: glommio::sync::Semaphore::new(1),
            config,
        }
    }

    /// Every committed offset of this shard's groups.
    pub fn committed(&self) -> Vec<CommittedStatus> {
        let groups = self.groups.borrow();
        let mut out = Vec::new();
        for (id, g) in groups.iter() {
            for ((topic, partition), c) in &g.offsets {
                out.push(CommittedStatus {
                    group: id.clone(),
                    topic: topic.clone(),
                    partition: *partition,
                    offset: c.offset,
                });
            }
        }
        out
    }

    /// Applies one replayed record.
    pub(super) fn apply(&self, record: OffsetsRecord, now: Instant) {
        let mut groups = self.groups.borrow_mut();
        match record {
            OffsetsRecord::Offset {
                group,
                topic,
                partition,
                value: Some(value),
            } => {
                groups
                    .entry(group.clone())
                    .or_insert_with(|| Group::new(&group))
                    .offsets
                    .insert((topic, partition), value);
            }
            OffsetsRecord::Offset {
                group,
                topic,
                partition,
                value: None,
            } => {
                if let Some(g) = groups.get_mut(&group) {
                    g.offsets.remove(&(topic, partition));
                }
            }
            OffsetsRecord::Group {
                group,
                value: Some(stored),
            } => groups
                .entry(group.clone())
                .or_insert_with(|| Group::new(&group))
                .restore(stored, now),
            OffsetsRecord::Group { group, value: None } => {
                groups.remove(&group);
            }
        }
    }
}
