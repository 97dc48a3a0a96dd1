//! Where each partition of a coordinator topic stands on this shard, and the loads its
//! elections queue (Kafka's `CoordinatorRuntime.scheduleLoadOperation` /
//! `scheduleUnloadOperation`, driven by `onElection` / `onResignation` with the partition's
//! leader epoch as the coordinator epoch):
//!
//! 1. elected (this broker became the leader): the partition is *loading* while its log is
//!    replayed; its keys answer `COORDINATOR_LOAD_IN_PROGRESS`;
//! 2. the replay finished: *active*, its keys are served;
//! 3. resigned (another broker leads, or the partition is gone): every op answers
//!    `NOT_COORDINATOR`, and the coordinator unloads the partition's keys.
//!
//! Pure state: the partition lifecycle records elections and resignations without I/O; the
//! coordinator's load loop waits on the [`LoadQueue`] and replays.

use std::cell::RefCell;
use std::collections::HashMap;

/// Why a coordinator partition's keys cannot be served here now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotServing {
    /// Elected, its log still being replayed (Kafka's COORDINATOR_LOAD_IN_PROGRESS).
    #[error("the coordinator partition is still being loaded")]
    LoadInProgress,
    /// Not led here, or its load failed (Kafka's NOT_COORDINATOR).
    #[error("this broker does not coordinate the partition")]
    NotCoordinator,
}

/// Where a coordinated partition stands (Kafka's `CoordinatorState`, without the states that
/// need no entry: not coordinated = absent).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CoordinatorState {
    /// Its log is being replayed; ops answer `COORDINATOR_LOAD_IN_PROGRESS`.
    Loading,
    /// Its keys are served.
    Active,
    /// Its log could not be replayed; ops answer `NOT_COORDINATOR` until an election at a
    /// newer leader epoch loads it again (Kafka's FAILED).
    Failed,
}

/// Names one load, so a load that finishes after its partition was resigned (and perhaps
/// elected again, with a new load) is told apart and dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadId(u64);

#[derive(Clone, Copy, Debug)]
struct PartitionCoordinator {
    /// The coordinator epoch: the leader epoch it was elected with (the highest seen).
    leader_epoch: i32,
    state: CoordinatorState,
    load: LoadId,
}

/// The coordinator partitions this shard coordinates, by partition index: a state machine
/// without I/O, driven by elections, resignations and finished loads.
#[derive(Debug, Default)]
pub struct CoordinatedPartitions {
    coordinators: HashMap<i32, PartitionCoordinator>,
    next_load: u64,
}

impl CoordinatedPartitions {
    /// This broker became the leader of `partition` with `leader_epoch` (Kafka's
    /// `onElection`). Returns the load to run when the partition was not coordinated here, or
    /// its load failed and `leader_epoch` is newer; `None` when it is already loading or
    /// active (the epoch is raised, nothing reloads: this broker's log stayed the partition's
    /// log) or failed at this epoch.
    pub fn elect(&mut self, partition: i32, leader_epoch: i32) -> Option<LoadId> {
        if let Some(c) = self.coordinators.get_mut(&partition) {
            let retry = c.state == CoordinatorState::Failed && leader_epoch > c.leader_epoch;
            c.leader_epoch = c.leader_epoch.max(leader_epoch);
            if !retry {
                return None;
            }
        }
        let load = LoadId(self.next_load);
        self.next_load += 1;
        self.coordinators.insert(
            partition,
            PartitionCoordinator {
                leader_epoch,
                state: CoordinatorState::Loading,
                load,
            },
        );
        Some(load)
    }

    /// This broker no longer leads `partition` (Kafka's `onResignation`): from `leader_epoch`
    /// on, or at all when `None` (the partition is gone). Returns whether it was coordinated
    /// here, so its keys must be unloaded. A resignation older than the coordinator's
    /// epoch is ignored, as Kafka ignores it.
    pub fn resign(&mut self, partition: i32, leader_epoch: Option<i32>) -> bool {
        let Some(c) = self.coordinators.get(&partition) else {
            return false;
        };
        if leader_epoch.is_some_and(|e| e <= c.leader_epoch) {
            return false;
        }
        self.coordinators.remove(&partition);
        true
    }

    /// `load` of `partition` replayed its log. Returns whether its keys are to be installed
    /// (the partition is active from now on); `false` when the load is stale (the partition
    /// was resigned since).
    pub fn finish_load(&mut self, partition: i32, load: LoadId) -> bool {
        match self.coordinators.get_mut(&partition) {
            Some(c) if c.load == load && c.state == CoordinatorState::Loading => {
                c.state = CoordinatorState::Active;
                true
            }
            _ => false,
        }
    }

    /// `load` of `partition` could not read its log: the partition is
    /// [`CoordinatorState::Failed`] until an election at a newer leader epoch.
    pub fn fail_load(&mut self, partition: i32, load: LoadId) {
        if let Some(c) = self
            .coordinators
            .get_mut(&partition)
            .filter(|c| c.load == load)
        {
            c.state = CoordinatorState::Failed;
        }
    }

    /// Where `partition` stands here; `None` when this broker was not elected its leader.
    pub fn state(&self, partition: i32) -> Option<CoordinatorState> {
        self.coordinators.get(&partition).map(|c| c.state)
    }

    /// The coordinator epoch of `partition` (the leader epoch it was elected with), while it
    /// is coordinated here.
    pub fn epoch(&self, partition: i32) -> Option<i32> {
        self.coordinators.get(&partition).map(|c| c.leader_epoch)
    }

    /// Whether `partition`'s keys may be served now. Errors: [`NotServing::LoadInProgress`]
    /// while loading, [`NotServing::NotCoordinator`] when not coordinated here or its load
    /// failed.
    pub fn check(&self, partition: i32) -> Result<(), NotServing> {
        match self.state(partition) {
            Some(CoordinatorState::Active) => Ok(()),
            Some(CoordinatorState::Loading) => Err(NotServing::LoadInProgress),
            Some(CoordinatorState::Failed) | None => Err(NotServing::NotCoordinator),
        }
    }
}

/// The loads elected but not started yet, and the wake-up of the coordinator's load loop.
pub struct LoadQueue {
    /// At most one per coordinator partition this shard owns (an election queues a load only
    /// for a partition not coordinated here).
    to_start: RefCell<Vec<(i32, LoadId)>>,
    /// One permit per queued load: what the load loop waits on. Closed at shutdown.
    queued: crate::rt::Semaphore,
}

impl Default for LoadQueue {
    fn default() -> LoadQueue {
        LoadQueue {
            to_start: RefCell::new(Vec::new()),
            queued: crate::rt::Semaphore::new(0),
        }
    }
}

impl LoadQueue {
    /// Queues `load` of `partition` and wakes the load loop.
    pub fn push(&self, partition: i32, load: LoadId) {
        self.to_start.borrow_mut().push((partition, load));
        self.queued.signal(1);
    }

    /// Takes back the queued load of `partition` (it was resigned before its load started).
    pub fn cancel(&self, partition: i32) {
        self.to_start.borrow_mut().retain(|(p, _)| *p != partition);
    }

    /// Waits until a load is queued, then returns every queued load (possibly none: a
    /// resignation may have taken them back), to be started now. `None` once
    /// [`LoadQueue::stop`] was called.
    pub async fn next(&self) -> Option<Vec<(i32, LoadId)>> {
        self.queued.acquire(1).await.ok()?;
        Some(std::mem::take(&mut *self.to_start.borrow_mut()))
    }

    /// The broker is stopping: [`LoadQueue::next`] returns `None` from now on.
    pub fn stop(&self) {
        self.queued.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_elected_partition_loads_then_serves_and_a_resigned_one_is_not_coordinated() {
        let mut p = CoordinatedPartitions::default();
        assert_eq!(p.check(3), Err(NotServing::NotCoordinator));
        let load = p.elect(3, 5).expect("a new election loads");
        assert_eq!(p.check(3), Err(NotServing::LoadInProgress));
        assert_eq!(p.elect(3, 5), None, "one load per election");
        assert!(p.finish_load(3, load));
        assert_eq!(p.check(3), Ok(()));
        assert_eq!(p.epoch(3), Some(5));
        // Still the leader with a newer epoch: the same log, no reload.
        assert_eq!(p.elect(3, 6), None);
        assert_eq!(p.check(3), Ok(()));
        assert_eq!(p.epoch(3), Some(6));
        // A resignation from an epoch the coordinator already has is stale.
        assert!(!p.resign(3, Some(6)));
        assert_eq!(p.check(3), Ok(()));
        assert!(p.resign(3, Some(7)));
        assert_eq!(p.check(3), Err(NotServing::NotCoordinator));
        assert!(!p.resign(3, Some(8)), "nothing left to unload");
        // Leader again later: the log is replayed again (it holds the other leader's writes).
        assert!(p.elect(3, 9).is_some());
        assert_eq!(p.check(3), Err(NotServing::LoadInProgress));
        assert!(
            p.resign(3, None),
            "a deleted partition resigns whatever its epoch"
        );
        assert_eq!(p.check(3), Err(NotServing::NotCoordinator));
    }

    #[test]
    fn a_load_that_finishes_after_its_partition_moved_is_dropped() {
        let mut p = CoordinatedPartitions::default();
        let first = p.elect(0, 1).expect("loads");
        assert!(p.resign(0, Some(2)));
        assert!(!p.finish_load(0, first), "resigned while loading");
        let second = p.elect(0, 3).expect("loads again");
        assert_ne!(first, second);
        assert!(!p.finish_load(0, first), "the earlier load is stale");
        assert_eq!(p.check(0), Err(NotServing::LoadInProgress));
        // A stale load's failure leaves the current one alone.
        p.fail_load(0, first);
        assert_eq!(p.check(0), Err(NotServing::LoadInProgress));
        assert!(p.finish_load(0, second));
        assert_eq!(p.check(0), Ok(()));
        // A failed load leaves the partition uncoordinated until an election at a newer
        // leader epoch (a role re-applied at the same epoch, e.g. an ISR change, does not).
        assert!(p.resign(0, Some(4)));
        let third = p.elect(0, 5).expect("loads");
        p.fail_load(0, third);
        assert_eq!(p.state(0), Some(CoordinatorState::Failed));
        assert_eq!(p.check(0), Err(NotServing::NotCoordinator));
        assert_eq!(p.elect(0, 5), None, "same epoch: no reload");
        assert_eq!(p.check(0), Err(NotServing::NotCoordinator));
        let fourth = p.elect(0, 6).expect("a newer election retries the load");
        assert_eq!(p.check(0), Err(NotServing::LoadInProgress));
        assert!(p.finish_load(0, fourth));
        assert_eq!(p.check(0), Ok(()));
    }
}
