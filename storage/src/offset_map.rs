//! The cleaner's offset map (issue #27, DESIGN.md §12): record key → offset of the latest
//! record with that key in the dirty section of one partition log, as Kafka's
//! `SkimpyOffsetMap`.
//!
//! Memory is fixed when the map is made, from a byte budget (`log.cleaner.dedupe.buffer.size`
//! divided among the shard's cleaners): each slot holds a 16-byte key hash and an 8-byte
//! offset, and the map accepts keys only up to [`OffsetMap::LOAD_FACTOR_PERCENT`] of its slots
//! (Kafka's `log.cleaner.io.buffer.load.factor`, 0.9), so probes stay short. When it is full
//! the caller stops at a batch boundary and cleans only the offsets it covers
//! ([`OffsetMap::covers_below`]); the next pass continues from there, as Kafka's cleaner does.
//!
//! Keys are stored as 120-bit hashes, never as bytes (Kafka stores an MD5 of each key); the
//! slot's 16th byte is the generation that put it, so emptying the map between passes touches
//! no slot (the shard's cleaner must not stall its produce and fetch work on a memset of the
//! whole budget). Two keys with the same 120-bit hash would be treated as one; Kafka accepts
//! the same risk at 128 bits.
//! Owned by the shard that owns the partition; no locks.

use crate::types::Offset;
use std::hash::{Hash, Hasher};

/// Bytes one slot costs: a 16-byte key hash and an 8-byte offset.
pub const SLOT_BYTES: usize = 16 + 8;

/// Why a key could not be put.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OffsetMapError {
    /// The map holds as many keys as its load factor allows; clean what it covers.
    #[error("offset map full: {keys} keys in {slots} slots")]
    Full { keys: usize, slots: usize },
}

/// A fixed-size open-addressing hash table from key hash to the latest offset seen.
#[derive(Debug)]
pub struct OffsetMap {
    /// Key hashes, their last byte replaced by the generation that put them: a slot whose
    /// last byte is not [`OffsetMap::generation`] is empty (so `clear` touches no slot).
    hashes: Vec<[u8; 16]>,
    /// `offsets[i]` belongs to `hashes[i]`; meaningless where the slot is empty.
    offsets: Vec<i64>,
    /// Keys held; invariant: `keys <= keys_max < slots`.
    keys: usize,
    keys_max: usize,
    /// One past the highest offset put: every dirty record below it has been seen.
    end: Option<Offset>,
    /// The current generation, never 0 (the byte of a zeroed slot): `clear` moves to the next
    /// one and zeroes the slots only when the byte wraps, once every 255 clears.
    generation: u8,
}

impl OffsetMap {
    /// Share of the slots that may hold keys, in percent (Kafka's load factor 0.9).
    pub const LOAD_FACTOR_PERCENT: usize = 90;

    /// A map using at most `budget_bytes` of memory for its slots.
    ///
    /// # Panics
    /// When the budget holds fewer than two slots (the config checks keep it far above).
    pub fn with_budget(budget_bytes: usize) -> OffsetMap {
        let slots = budget_bytes / SLOT_BYTES;
        assert!(
            slots >= 2,
            "offset map budget {budget_bytes} B holds < 2 slots"
        );
        let keys_max = (slots * Self::LOAD_FACTOR_PERCENT / 100).clamp(1, slots - 1);
        assert!(
            keys_max < slots,
            "one slot always stays empty, so probes end"
        );
        OffsetMap {
            hashes: vec![[0; 16]; slots],
            offsets: vec![0; slots],
            keys: 0,
            keys_max,
            end: None,
            generation: 1,
        }
    }

    /// Keys currently held.
    pub fn len(&self) -> usize {
        self.keys
    }

    /// True when no key has been put.
    pub fn is_empty(&self) -> bool {
        self.keys == 0
    }

    /// Keys that can still be put before the map is full.
    pub fn free_keys(&self) -> usize {
        self.keys_max - self.keys
    }

    /// One past the highest offset put, or `None` for an empty map: a record below it whose
    /// key maps to a higher offset is superseded.
    pub fn covers_below(&self) -> Option<Offset> {
        self.end
    }

    /// Records `offset` as the latest for `key`. The cleaner puts offsets in log order; a
    /// producer's batch whose record offset deltas do not increase (nothing on the produce
    /// path checks them, in Kafka either) puts one out of order: the key then maps to the
    /// offset put last, as Kafka's `SkimpyOffsetMap`, and the map's reach never moves back.
    ///
    /// # Errors
    /// [`OffsetMapError::Full`] when `key` is new and the map is at its load factor.
    pub fn put(&mut self, key: &[u8], offset: Offset) -> Result<(), OffsetMapError> {
        let hash = self.stamped(key);
        let slot = self.find(&hash);
        if self.hashes[slot] != hash {
            if self.keys == self.keys_max {
                return Err(OffsetMapError::Full {
                    keys: self.keys,
                    slots: self.hashes.len(),
                });
            }
            self.hashes[slot] = hash;
            self.keys += 1;
        }
        self.offsets[slot] = offset.0;
        self.end = Some(
            self.end
                .map_or(offset.plus(1), |end| end.max(offset.plus(1))),
        );
        assert!(self.keys <= self.keys_max, "load factor kept");
        assert!(
            self.end.is_some_and(|end| end > offset),
            "the reach covers every offset put"
        );
        Ok(())
    }

    /// The latest offset put for `key`, if any.
    pub fn get(&self, key: &[u8]) -> Option<Offset> {
        let hash = self.stamped(key);
        let slot = self.find(&hash);
        (self.hashes[slot] == hash).then(|| Offset(self.offsets[slot]))
    }

    /// Empties the map for the next pass, keeping its memory.
    pub fn clear(&mut self) {
        self.keys = 0;
        self.end = None;
        // O(1): the slots of older generations read as empty. A full zeroing (one pass over
        // the whole budget) only when the generation byte wraps.
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.hashes.fill([0; 16]);
            self.generation = 1;
        }
        assert_ne!(self.generation, 0, "generation 0 is a zeroed slot's");
    }

    /// The slot holding `hash`, or the empty slot where it would go (linear probing; ends
    /// because at least one slot is always empty).
    fn find(&self, hash: &[u8; 16]) -> usize {
        let slots = self.hashes.len();
        let start = usize::try_from(u64::from_le_bytes(first_half(hash)) % slots as u64)
            .expect("slot index below slots fits usize");
        let mut slot = start;
        loop {
            let here = &self.hashes[slot];
            if here == hash || here[15] != self.generation {
                return slot;
            }
            slot = (slot + 1) % slots;
            assert!(slot != start, "offset map has an empty slot");
        }
    }
}

impl OffsetMap {
    /// `key`'s hash with its last byte set to the current generation.
    fn stamped(&self, key: &[u8]) -> [u8; 16] {
        let mut hash = key_hash(key);
        hash[15] = self.generation;
        hash
    }
}

fn first_half(hash: &[u8; 16]) -> [u8; 8] {
    let mut out = [0; 8];
    out.copy_from_slice(&hash[..8]);
    out
}

/// 128-bit key hash: two SipHash-1-3 runs with fixed, distinct keys (std's `DefaultHasher` is
/// deterministic when made with `new`); the map keeps its first 120 bits.
fn key_hash(key: &[u8]) -> [u8; 16] {
    let half = |salt: u8| {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        salt.hash(&mut h);
        key.hash(&mut h);
        h.finish()
    };
    let mut out = [0; 16];
    out[..8].copy_from_slice(&half(0).to_le_bytes());
    out[8..].copy_from_slice(&half(1).to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latest_offset_wins_and_unknown_keys_are_absent() {
        let mut map = OffsetMap::with_budget(64 * SLOT_BYTES);
        map.put(b"a", Offset(0)).unwrap();
        map.put(b"b", Offset(1)).unwrap();
        map.put(b"a", Offset(5)).unwrap();
        assert_eq!(map.get(b"a"), Some(Offset(5)));
        assert_eq!(map.get(b"b"), Some(Offset(1)));
        assert_eq!(map.get(b"c"), None);
        assert_eq!(map.len(), 2);
        assert_eq!(map.covers_below(), Some(Offset(6)));
    }

    #[test]
    fn an_offset_put_out_of_order_is_taken_and_the_reach_stays() {
        let mut map = OffsetMap::with_budget(16 * SLOT_BYTES);
        map.put(b"a", Offset(5)).unwrap();
        map.put(b"a", Offset(3)).unwrap();
        assert_eq!(
            map.get(b"a"),
            Some(Offset(3)),
            "the offset put last, as Kafka's map"
        );
        assert_eq!(map.covers_below(), Some(Offset(6)));
    }

    #[test]
    fn a_clear_empties_through_generations_and_their_wrap() {
        let mut map = OffsetMap::with_budget(16 * SLOT_BYTES);
        for pass in 0..600i64 {
            assert!(map.is_empty());
            assert_eq!(
                map.get(b"k"),
                None,
                "pass {pass}: nothing of an older pass is seen"
            );
            map.put(b"k", Offset(pass)).unwrap();
            map.put(format!("only-{pass}").as_bytes(), Offset(pass))
                .unwrap();
            assert_eq!(map.get(b"k"), Some(Offset(pass)));
            assert_eq!(map.len(), 2);
            map.clear();
        }
    }

    #[test]
    fn full_at_the_load_factor_then_cleared() {
        let mut map = OffsetMap::with_budget(10 * SLOT_BYTES);
        assert_eq!(map.free_keys(), 9);
        for i in 0..9u8 {
            map.put(&[i], Offset(i64::from(i))).unwrap();
        }
        assert_eq!(
            map.put(b"new", Offset(9)),
            Err(OffsetMapError::Full { keys: 9, slots: 10 })
        );
        // An existing key still updates when full.
        map.put(&[0], Offset(10)).unwrap();
        assert_eq!(map.get(&[0]), Some(Offset(10)));
        map.clear();
        assert!(map.is_empty());
        assert_eq!(map.get(&[0]), None);
        assert_eq!(map.covers_below(), None);
    }
}
