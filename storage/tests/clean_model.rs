//! Model test of the cleaner's pure core (issue #27): random appends (keys, tombstones,
//! several producer ids) and cleans with small offset maps (so passes cover only part of the
//! dirty section) against a reference of every record appended. Checked after every step:
//! offsets and each batch's base offset and last offset delta never change; the latest record
//! of every key is readable with its value and timestamp (a tombstone may be gone once its
//! delete horizon has passed, and only then); the cleaned section holds at most one record per
//! key; every producer's last batch is kept; each batch's `maxTimestamp` is its newest record's.
//!
//! Not covered here: segment files, the swap and crashes (`compact.rs` covers them).
//! A failure prints the shrunk operation sequence.

use bytes::Bytes;
use proptest::prelude::*;
use std::collections::BTreeMap;
use storage::{
    batch_crc, build_batch_kv, clean_section, fill_map, records_of, BatchHeader, CleanRules,
    KeyValue, Offset, OffsetMap, TimestampMs, DELETE_HORIZON_BIT, SLOT_BYTES,
};

const DELETE_RETENTION_MS: i64 = 100;

#[derive(Clone, Debug)]
enum Op {
    /// `producer` 0 is a non-idempotent producer (id -1).
    Append {
        producer: i64,
        records: Vec<(u8, Option<u8>)>,
    },
    Clean {
        map_slots: usize,
    },
    Tick {
        ms: i64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0i64..3, prop::collection::vec((0u8..6, prop::option::weighted(0.8, any::<u8>())), 1..5))
            .prop_map(|(producer, records)| Op::Append { producer, records }),
        2 => (2usize..16).prop_map(|map_slots| Op::Clean { map_slots }),
        1 => (0i64..80).prop_map(|ms| Op::Tick { ms }),
    ]
}

/// One appended record as the reference keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Appended {
    key: u8,
    value: Option<u8>,
    timestamp: i64,
}

#[derive(Default)]
struct Model {
    log: Vec<Bytes>,
    /// Every record ever appended, by offset.
    appended: BTreeMap<i64, Appended>,
    /// Base offset → last offset delta of every batch appended.
    batch_ends: BTreeMap<i64, i32>,
    /// Producer id → base offset of its last batch.
    last_of_producer: BTreeMap<i64, Offset>,
    sequences: BTreeMap<i64, i32>,
    next_offset: i64,
    /// The cleaner checkpoint: offsets below it have been cleaned.
    first_dirty: i64,
    now: i64,
    /// Time of the last pass that cleaned anything.
    last_clean_at: i64,
}

impl Model {
    fn append(&mut self, producer: i64, records: &[(u8, Option<u8>)]) {
        let keys: Vec<[u8; 1]> = records.iter().map(|(k, _)| [*k]).collect();
        let values: Vec<Option<[u8; 1]>> = records.iter().map(|(_, v)| v.map(|v| [v])).collect();
        let kv: Vec<KeyValue<'_>> = keys
            .iter()
            .zip(&values)
            .map(|(k, v)| (Some(&k[..]), v.as_ref().map(|v| &v[..])))
            .collect();
        let mut batch = build_batch_kv(TimestampMs(self.now), &kv).to_vec();
        batch[0..8].copy_from_slice(&self.next_offset.to_be_bytes());
        if producer > 0 {
            let sequence = self.sequences.entry(producer).or_insert(0);
            batch[43..51].copy_from_slice(&producer.to_be_bytes());
            batch[51..53].copy_from_slice(&0i16.to_be_bytes());
            batch[53..57].copy_from_slice(&sequence.to_be_bytes());
            *sequence += i32::try_from(records.len()).unwrap();
            let crc = batch_crc(&batch);
            batch[17..21].copy_from_slice(&crc.to_be_bytes());
            self.last_of_producer
                .insert(producer, Offset(self.next_offset));
        }
        let count = i64::try_from(records.len()).unwrap();
        self.batch_ends
            .insert(self.next_offset, i32::try_from(count - 1).unwrap());
        for (i, (key, value)) in records.iter().enumerate() {
            let i = i64::try_from(i).unwrap();
            let appended = Appended {
                key: *key,
                value: *value,
                timestamp: self.now + i,
            };
            self.appended.insert(self.next_offset + i, appended);
        }
        self.next_offset += count;
        self.log.push(Bytes::from(batch));
    }

    /// One pass: every batch but the last (the active segment) is cleanable.
    fn clean(&mut self, map_slots: usize) {
        let Some(cleanable) = self.log.len().checked_sub(1) else {
            return;
        };
        let dirty_from = self
            .log
            .iter()
            .position(|b| BatchHeader::parse(b).unwrap().base_offset.0 >= self.first_dirty)
            .unwrap_or(self.log.len())
            .min(cleanable);
        let mut map = OffsetMap::with_budget(map_slots * SLOT_BYTES);
        let dirty = self.log[dirty_from..cleanable].iter().map(|b| &b[..]);
        let covered = fill_map(&mut map, dirty, &storage::NoCodec).unwrap();
        if covered == 0 {
            return;
        }
        let end = dirty_from + covered;
        let rules = CleanRules {
            map: &map,
            now: TimestampMs(self.now),
            delete_retention_ms: DELETE_RETENTION_MS,
            codec: &storage::NoCodec,
        };
        let mut cleaned = clean_section(&self.log[..end], rules, &self.last_of_producer).unwrap();
        let next_dirty = BatchHeader::parse(&self.log[end - 1])
            .unwrap()
            .last_offset()
            .0
            + 1;
        cleaned.extend(self.log.drain(end..));
        self.log = cleaned;
        self.first_dirty = next_dirty;
        self.last_clean_at = self.now;
    }

    fn check(&self) {
        let mut last_end = -1;
        let mut latest_seen: BTreeMap<u8, i64> = BTreeMap::new();
        let mut cleaned_keys: BTreeMap<u8, i64> = BTreeMap::new();
        for batch in &self.log {
            let header = BatchHeader::parse(batch).unwrap();
            assert!(header.base_offset.0 > last_end, "offsets increase");
            assert_eq!(
                self.batch_ends.get(&header.base_offset.0),
                Some(&header.last_offset_delta),
                "base offset and last offset delta kept"
            );
            last_end = header.last_offset().0;
            let records = records_of(batch).unwrap();
            assert_eq!(
                records.len(),
                usize::try_from(header.records_count).unwrap()
            );
            if let Some(newest) = records.iter().map(|r| r.timestamp.0).max() {
                assert_eq!(
                    header.max_timestamp.0, newest,
                    "maxTimestamp is the newest record's"
                );
            }
            let horizon =
                (header.attributes & DELETE_HORIZON_BIT != 0).then_some(header.base_timestamp.0);
            for record in records {
                let original = &self.appended[&record.offset.0];
                let key = record.key.unwrap()[0];
                assert_eq!(key, original.key);
                assert_eq!(record.value.map(|v| v[0]), original.value, "value kept");
                assert_eq!(record.timestamp.0, original.timestamp, "timestamp kept");
                latest_seen.insert(key, record.offset.0);
                if record.offset.0 < self.first_dirty {
                    let previous = cleaned_keys.insert(key, record.offset.0);
                    assert_eq!(previous, None, "one record per key in the cleaned section");
                    if record.value.is_none() {
                        let horizon = horizon.expect("a cleaned tombstone's batch has a horizon");
                        assert!(
                            horizon > self.last_clean_at,
                            "a clean drops tombstones past their horizon"
                        );
                        assert!(
                            horizon <= self.last_clean_at + DELETE_RETENTION_MS,
                            "horizon = first clean + delete.retention.ms"
                        );
                    }
                }
            }
        }
        let mut latest: BTreeMap<u8, (i64, &Appended)> = BTreeMap::new();
        for (offset, appended) in &self.appended {
            latest.insert(appended.key, (*offset, appended));
        }
        for (key, (offset, appended)) in latest {
            match (latest_seen.get(&key), appended.value) {
                (Some(seen), _) => assert_eq!(*seen, offset, "key {key}: latest record readable"),
                (None, None) => assert!(
                    offset < self.first_dirty,
                    "a tombstone goes only in a clean"
                ),
                (None, Some(_)) => panic!("key {key}: latest value at {offset} lost"),
            }
        }
        for (producer, base) in &self.last_of_producer {
            let kept = self.log.iter().any(|b| {
                let h = BatchHeader::parse(b).unwrap();
                h.base_offset == *base && h.producer_id == *producer
            });
            assert!(kept, "producer {producer}: last batch at {base:?} kept");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn cleans_agree_with_the_reference(ops in prop::collection::vec(op(), 1..60)) {
        let mut model = Model { now: 1_000, ..Model::default() };
        for op in &ops {
            match op {
                Op::Append { producer, records } => model.append(*producer, records),
                Op::Clean { map_slots } => model.clean(*map_slots),
                Op::Tick { ms } => model.now += ms,
            }
            model.check();
        }
    }
}
