//! KIP-890 part 1's verification state of one partition (Kafka's `VerificationGuard` and
//! `VerificationStateEntry`, kept by its `ProducerStateManager`): before a leader appends the
//! first transactional batch of a producer's transaction, it asks the transaction coordinator
//! whether the partition is in that transaction. The question is asked under a fresh
//! [`VerificationGuard`] kept here per producer id; the append that follows the answer
//! carries the guard and lands only while the same guard is still kept. A marker or a
//! transactional batch of the producer clears it, so a verification answered before an abort
//! marker cannot let a write in after it (Kafka's ABA case: verify, abort, a new transaction
//! that does not know the partition, the stale "verified").
//!
//! Pure state owned by the partition's shard; not snapshotted (as Kafka: an entry lives for
//! one request's round trip to the coordinator). Bounded by [`VERIFICATION_STATES_MAX`]
//! entries: when full, the oldest entry is dropped (its producer's append fails with
//! INVALID_TXN_STATE, as an expired entry does in Kafka).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// Producers of one partition with a verification under way, at most (Kafka expires entries
/// after `producer.id.expiration.ms` instead; an entry normally lives one round trip).
pub const VERIFICATION_STATES_MAX: usize = 16_384;

/// A unique token for one verification (Kafka's `VerificationGuard`): unique in the process,
/// so a guard handed out before a partition moved or reopened never matches a later one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VerificationGuard(u64);

/// The next guard's value (0 is the sentinel).
static NEXT_GUARD: AtomicU64 = AtomicU64::new(1);

impl VerificationGuard {
    /// No verification: never verifies an append (Kafka's `VerificationGuard.SENTINEL`).
    pub const SENTINEL: VerificationGuard = VerificationGuard(0);

    fn fresh() -> VerificationGuard {
        let guard = VerificationGuard(NEXT_GUARD.fetch_add(1, Ordering::Relaxed));
        assert_ne!(guard, Self::SENTINEL, "guards do not wrap");
        guard
    }

    /// Whether this kept guard lets in an append that carries `request` (Kafka's
    /// `VerificationGuard.verify`): equal, and not the sentinel.
    pub fn verifies(self, request: VerificationGuard) -> bool {
        self != Self::SENTINEL && self == request
    }
}

/// One producer's verification under way (Kafka's `VerificationStateEntry`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    guard: VerificationGuard,
    /// The lowest first sequence of the producer's batches waiting for this verification at
    /// `epoch`: a higher one may not be appended first (it would leave a gap).
    lowest_sequence: i32,
    epoch: i16,
    /// Creation order, for dropping the oldest entry when full.
    created: u64,
}

/// The verifications under way in one partition, by producer id.
#[derive(Clone, Debug, Default)]
pub struct VerificationStates {
    entries: HashMap<i64, Entry>,
    next_created: u64,
}

impl VerificationStates {
    /// The guard of `producer_id`'s verification, created if none is under way (Kafka's
    /// `maybeCreateVerificationStateEntry`); the entry's lowest sequence follows `sequence`
    /// (a lower one at the same epoch, any at a newer epoch).
    pub fn start(&mut self, producer_id: i64, sequence: i32, epoch: i16) -> VerificationGuard {
        if !self.entries.contains_key(&producer_id) && self.entries.len() >= VERIFICATION_STATES_MAX
        {
            self.drop_oldest();
        }
        let created = self.next_created;
        let entry = self.entries.entry(producer_id).or_insert_with(|| Entry {
            guard: VerificationGuard::fresh(),
            lowest_sequence: sequence,
            epoch,
            created,
        });
        if epoch == entry.epoch && sequence < entry.lowest_sequence {
            entry.lowest_sequence = sequence;
        }
        if epoch > entry.epoch {
            entry.epoch = epoch;
            entry.lowest_sequence = sequence;
        }
        let guard = entry.guard;
        self.next_created += 1;
        assert!(self.entries.len() <= VERIFICATION_STATES_MAX, "bounded");
        guard
    }

    /// The guard kept for `producer_id`, or the sentinel when no verification is under way.
    pub fn guard(&self, producer_id: i64) -> VerificationGuard {
        self.entries
            .get(&producer_id)
            .map_or(VerificationGuard::SENTINEL, |e| e.guard)
    }

    /// The lowest sequence waiting for `producer_id`'s verification, if one is under way.
    pub fn lowest_sequence(&self, producer_id: i64) -> Option<i32> {
        self.entries.get(&producer_id).map(|e| e.lowest_sequence)
    }

    /// Forgets `producer_id`'s verification: one of its transactional batches or markers was
    /// appended (its transaction is open here, or over).
    pub fn clear(&mut self, producer_id: i64) {
        self.entries.remove(&producer_id);
    }

    /// The number of verifications under way.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether none is under way.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn drop_oldest(&mut self) {
        let oldest = self
            .entries
            .iter()
            .min_by_key(|(_, e)| e.created)
            .map(|(id, _)| *id);
        if let Some(id) = oldest {
            self.entries.remove(&id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guard_is_kept_until_cleared_and_a_new_one_differs() {
        let mut states = VerificationStates::default();
        assert_eq!(states.guard(7), VerificationGuard::SENTINEL);
        let first = states.start(7, 5, 0);
        assert!(states.guard(7).verifies(first));
        assert_eq!(
            states.start(7, 9, 0),
            first,
            "one verification per producer"
        );
        assert!(!states.guard(7).verifies(VerificationGuard::SENTINEL));
        states.clear(7);
        assert!(
            !states.guard(7).verifies(first),
            "cleared by an append or a marker"
        );
        let second = states.start(7, 0, 0);
        assert_ne!(
            second, first,
            "a stale verification never matches a new one"
        );
        assert!(!VerificationGuard::SENTINEL.verifies(VerificationGuard::SENTINEL));
    }

    #[test]
    fn the_lowest_sequence_follows_lower_sequences_and_newer_epochs() {
        let mut states = VerificationStates::default();
        states.start(1, 10, 3);
        states.start(1, 12, 3);
        assert_eq!(states.lowest_sequence(1), Some(10));
        states.start(1, 4, 3);
        assert_eq!(states.lowest_sequence(1), Some(4));
        states.start(1, 0, 2);
        assert_eq!(
            states.lowest_sequence(1),
            Some(4),
            "an older epoch changes nothing"
        );
        states.start(1, 8, 4);
        assert_eq!(
            states.lowest_sequence(1),
            Some(8),
            "a new epoch starts over"
        );
    }

    #[test]
    fn the_states_are_bounded_and_drop_the_oldest() {
        let mut states = VerificationStates::default();
        let oldest = states.start(0, 0, 0);
        for id in 1..VERIFICATION_STATES_MAX {
            states.start(i64::try_from(id).unwrap(), 0, 0);
        }
        assert_eq!(states.len(), VERIFICATION_STATES_MAX);
        states.start(-5, 0, 0);
        assert_eq!(states.len(), VERIFICATION_STATES_MAX);
        assert!(!states.guard(0).verifies(oldest), "the oldest went");
        assert_ne!(states.guard(-5), VerificationGuard::SENTINEL);
    }
}
