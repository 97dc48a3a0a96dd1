//! Turns per key: tasks that take a turn on the same key run one after another, tasks on
//! different keys run at once. The partition lifecycle takes one per partition around a log's
//! open, so a log is never opened twice while opens of different partitions overlap.
//!
//! State: the keys with a turn held or awaited, each with its one-permit semaphore; a key's
//! entry exists exactly while some task holds or awaits a turn on it (the last turn to end,
//! or a waiter cancelled last, removes it), so the map never holds more keys than there are
//! tasks on it. Executor-local (not `Send`).

use crate::rt::{Semaphore, StaticPermit};
use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::Hash;
use std::rc::Rc;

/// The keys with a turn held or awaited (see the module doc).
pub struct KeyedTurns<K> {
    turns: RefCell<HashMap<K, Rc<Semaphore>>>,
}

impl<K: Hash + Eq + Clone> Default for KeyedTurns<K> {
    fn default() -> Self {
        KeyedTurns {
            turns: RefCell::new(HashMap::new()),
        }
    }
}

impl<K: Hash + Eq + Clone> KeyedTurns<K> {
    /// Waits until no other task holds a turn on `key`, then holds it until the returned
    /// [`Turn`] is dropped. Turns on one key are granted in the order they were asked for
    /// (the semaphore's FIFO). Never fails: nothing closes the semaphores.
    pub async fn take(&self, key: &K) -> Turn<'_, K> {
        let gate = self
            .turns
            .borrow_mut()
            .entry(key.clone())
            .or_insert_with(|| Rc::new(Semaphore::new(1)))
            .clone();
        // Built before the wait, so that a cancelled waiter gives its entry up too.
        let mut turn = Turn {
            owner: self,
            key: key.clone(),
            gate,
            permit: None,
        };
        let permit = turn.gate.acquire_static_permit(1).await;
        turn.permit = Some(permit.expect("a KeyedTurns semaphore is never closed"));
        turn
    }

    /// Keys with a turn held or awaited.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.turns.borrow().len()
    }
}

/// A task's turn on one key of a [`KeyedTurns`] (or its wait for it, while being built).
pub struct Turn<'a, K: Hash + Eq + Clone> {
    owner: &'a KeyedTurns<K>,
    key: K,
    gate: Rc<Semaphore>,
    permit: Option<StaticPermit>,
}

impl<K: Hash + Eq + Clone> Drop for Turn<'_, K> {
    fn drop(&mut self) {
        // The permit holds a reference to the semaphore too. Releasing it first wakes the
        // next waiter, which runs only after this returns (one executor thread).
        self.permit.take();
        let mut turns = self.owner.turns.borrow_mut();
        assert!(
            turns
                .get(&self.key)
                .is_some_and(|gate| Rc::ptr_eq(gate, &self.gate)),
            "every turn on a key holds the semaphore its entry names"
        );
        // The map's reference and this one: no other task holds or awaits a turn on the key.
        if Rc::strong_count(&self.gate) == 2 {
            turns.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn run<F: std::future::Future<Output = ()> + 'static>(f: impl FnOnce() -> F + Send + 'static) {
        crate::rt::LocalExecutorBuilder::default()
            .spawn(f)
            .expect("executor")
            .join()
            .expect("test body");
    }

    #[test]
    fn turns_on_one_key_run_one_at_a_time_in_order_and_leave_no_entry() {
        run(|| async {
            let turns = Rc::new(KeyedTurns::<u32>::default());
            let inside = Rc::new(Cell::new(0u32));
            let order = Rc::new(RefCell::new(Vec::new()));
            let tasks: Vec<_> = (0..4)
                .map(|i| {
                    let (turns, inside, order) = (turns.clone(), inside.clone(), order.clone());
                    crate::rt::spawn_local(async move {
                        let _turn = turns.take(&7).await;
                        inside.set(inside.get() + 1);
                        assert_eq!(inside.get(), 1, "two tasks hold a turn on one key");
                        order.borrow_mut().push(i);
                        crate::rt::sleep(std::time::Duration::from_millis(2)).await;
                        inside.set(inside.get() - 1);
                    })
                })
                .collect();
            for task in tasks {
                task.await;
            }
            assert_eq!(*order.borrow(), vec![0, 1, 2, 3]);
            assert_eq!(turns.len(), 0);
        });
    }

    #[test]
    fn turns_on_different_keys_overlap() {
        run(|| async {
            let turns = Rc::new(KeyedTurns::<u32>::default());
            let inside = Rc::new(Cell::new(0u32));
            let most = Rc::new(Cell::new(0u32));
            let tasks: Vec<_> = (0..4)
                .map(|key| {
                    let (turns, inside, most) = (turns.clone(), inside.clone(), most.clone());
                    crate::rt::spawn_local(async move {
                        let _turn = turns.take(&key).await;
                        inside.set(inside.get() + 1);
                        most.set(most.get().max(inside.get()));
                        crate::rt::sleep(std::time::Duration::from_millis(2)).await;
                        inside.set(inside.get() - 1);
                    })
                })
                .collect();
            for task in tasks {
                task.await;
            }
            assert_eq!(most.get(), 4);
            assert_eq!(turns.len(), 0);
        });
    }

    #[test]
    fn a_cancelled_waiter_gives_its_place_up_and_the_entry_goes_with_the_last_turn() {
        run(|| async {
            let turns = Rc::new(KeyedTurns::<u32>::default());
            let held = turns.take(&1).await;
            let waiter = {
                let turns = turns.clone();
                crate::rt::spawn_local(async move {
                    let _turn = turns.take(&1).await;
                })
            };
            crate::rt::sleep(std::time::Duration::from_millis(1)).await;
            assert_eq!(turns.len(), 1);
            // Cancelled while it waits (its future is dropped on the executor's next turn):
            // once both are gone the entry is too.
            drop(waiter);
            drop(held);
            crate::rt::sleep(std::time::Duration::from_millis(1)).await;
            assert_eq!(turns.len(), 0);
            // And the key can be taken again.
            drop(turns.take(&1).await);
            assert_eq!(turns.len(), 0);
        });
    }
}
