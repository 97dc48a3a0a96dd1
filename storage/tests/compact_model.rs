//! Model test of log compaction on disk (issue #27 point 4): random keyed appends (several
//! keys, tombstones, three idempotent producers and a non-idempotent one, rising timestamps),
//! rolls, clock advances, cleaning passes (offset maps small enough that a pass often covers
//! only part of the dirty section), cleans whose swap is cut after a random file step (and
//! sometimes the next open's recovery cut too) followed by a reopen without a clean close,
//! plain crashes, clean reopens and reopens without producer-state snapshots (producer state
//! rebuilt from the cleaned log alone), on a real [`PartitionLog`] in a temp directory. A failure
//! prints the shrunk operation sequence (proptest); each assertion names its step.
//!
//! The reference holds every record ever appended (offset, key, value, timestamp), which of
//! them and which batches are still in the log, each batch's KIP-534 delete horizon, each
//! producer's epoch, next sequence and last batch, the first dirty offset and the clock. A
//! pass is predicted from it: the map's reach from the cleanable segments (the directory's
//! `.log` files) and the map's key budget, then `filter.rs`'s rules batch by batch (superseded
//! records go, a tombstone goes once the clean's time reached its batch's horizon, the first
//! clean keeping a tombstone sets the horizon to its time + `delete.retention.ms`, an emptied
//! batch goes unless it is its producer's last, the round's last or its group's last; groups
//! are made from the closed segments' file sizes as `group_by_size` does). After every step
//! the checker verifies:
//! - the log end and log start offsets; reading the whole log gives ascending offsets, none
//!   twice, and exactly the reference's surviving records, each at its original offset with its
//!   original key, value and timestamp, in exactly the reference's surviving batches (base,
//!   last offset, delete horizon);
//! - independently of the prediction: every key's latest record ever appended is there, unless
//!   it is a tombstone whose batch's delete horizon the clock has reached, and then no older
//!   record of its key is;
//! - below the first dirty offset (which equals the reference's) at most one record per key;
//! - the directory holds no `.cleaned`, `.swap` or `.deleted` file, and every closed segment
//!   has its `.index` and `.timeindex`;
//! - each pass's new first dirty offset equals the predicted reach of its map, and it makes the
//!   predicted number of groups;
//! - after a swap cut after any file step, and its recovery (itself cut or not), the log holds
//!   for every group of the pass exactly the old segments' records or exactly the cleaned ones,
//!   the groups before the cut cleaned and those after it not (never a mix, never a loss);
//! - each idempotent producer: a retry of its last batch is a duplicate answered with that
//!   batch's offsets, a sequence gap is refused with the reference's next sequence, an older
//!   epoch is refused with the reference's epoch;
//! - offset-for-timestamp lookups (what ListOffsets uses, plus the broker's pick of the first
//!   record at or after the time in the batch found) give the first surviving record whose
//!   timestamp is ≥ t, for several t per step.
//!
//! Not verified: compressed batches, control batches and transactions, LogAppendTime,
//! `min.compaction.lag.ms` and `max.compaction.lag.ms`, retention or truncation racing a clean
//! (one task runs everything, so no group is ever skipped), power loss (a dropped log keeps
//! every completed write; every crash here follows a flush, so no acknowledged write is lost
//! to it), the leader-epoch cache, the cleaner's I/O rate and the dirty ratio (every pass is
//! forced), and offset-map hash collisions (the reference maps keys exactly).

mod common;

use bytes::Bytes;
use common::*;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;
use storage::{
    batch_crc, build_batch_kv, cut_at, records_of, BatchCache, BatchHeader, CleanerBuffers,
    CleanupPolicy, CompactionConfig, KeyValue, LeaderEpoch, LogConfig, Offset, OffsetMap,
    PartitionLog, StorageError, TimestampMs, DELETE_HORIZON_BIT, SLOT_BYTES,
};

/// Keys `k0`..`k3`: few, so cleaning often empties whole batches and segments.
const KEYS: u8 = 4;
/// Idempotent producers (ids `PRODUCER_ID_BASE + i`); appends name one more, the
/// non-idempotent producer (id −1).
const PRODUCERS: usize = 3;
const PRODUCER_ID_BASE: i64 = 100;
const DELETE_RETENTION_MS: i64 = 100;
/// Offset-map slots of a pass: the smaller ones hold a few keys, so a pass often stops early.
const MAP_SLOTS: [usize; 3] = [6, 12, 1024];
const CACHE_BYTES: usize = 16 << 10;
const START_MS: i64 = 1_000_000;
/// `segment.bytes`: small, so appends roll often and a pass cleans several groups.
const SEGMENT_BYTES: u64 = 1024;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: SEGMENT_BYTES,
        index_interval_bytes: 128,
        cleanup_policy: CleanupPolicy::Compact,
        compaction: CompactionConfig {
            min_cleanable_dirty_ratio: 0.0,
            delete_retention: Duration::from_millis(DELETE_RETENTION_MS.unsigned_abs()),
            ..CompactionConfig::default()
        },
        retention_ms: None,
        zero_ahead_bytes: 0,
        ..LogConfig::default()
    }
}

fn buffers(slots: usize) -> CleanerBuffers {
    CleanerBuffers {
        map: OffsetMap::with_budget(slots * SLOT_BYTES),
        io_buffer_bytes: 4 << 10,
        io_max_bytes_per_second: None,
        codec: std::rc::Rc::new(storage::NoCodec),
    }
}

#[derive(Clone, Debug)]
enum Op {
    /// One batch from `producer` (`PRODUCERS`: the non-idempotent one) of records `(key,
    /// value length)`, `None` a tombstone; `new_epoch` bumps the producer's epoch first.
    Append {
        producer: usize,
        records: Vec<(u8, Option<u8>)>,
        new_epoch: bool,
    },
    Roll,
    /// The clock moves on `ms` (tombstone horizons, record timestamps).
    Advance {
        ms: i64,
    },
    /// A full pass with a map of `MAP_SLOTS[map]` slots.
    Clean {
        map: usize,
    },
    /// A pass whose swap is cut after `steps` file steps, then a crash (no clean close) and a
    /// reopen; with `recover_cut`, that reopen's recovery is cut after so many steps and the
    /// log opened once more.
    CutClean {
        map: usize,
        steps: u64,
        recover_cut: Option<u64>,
    },
    /// Flush (everything acknowledged is durable), drop without closing, reopen.
    Crash,
    /// Close cleanly, reopen.
    Reopen,
    /// Close cleanly, delete the producer-state snapshots, reopen: producer state is rebuilt
    /// from the (cleaned) log alone, as a replica copying it rebuilds it.
    LoseSnapshots,
}

fn op() -> impl Strategy<Value = Op> {
    let record = (0..KEYS, proptest::option::weighted(0.8, 0u8..60));
    prop_oneof![
        10 => (0..=PRODUCERS, proptest::collection::vec(record, 1..4), proptest::bool::weighted(0.1))
            .prop_map(|(producer, records, new_epoch)| Op::Append { producer, records, new_epoch }),
        2 => Just(Op::Roll),
        2 => (0i64..160).prop_map(|ms| Op::Advance { ms }),
        3 => (0..MAP_SLOTS.len()).prop_map(|map| Op::Clean { map }),
        3 => (0..MAP_SLOTS.len(), 0u64..30, proptest::option::weighted(0.3, 0u64..12))
            .prop_map(|(map, steps, recover_cut)| Op::CutClean { map, steps, recover_cut }),
        1 => Just(Op::Crash),
        1 => Just(Op::Reopen),
        1 => Just(Op::LoseSnapshots),
    ]
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Rec {
    key: u8,
    value: Option<Vec<u8>>,
    ts: i64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct ModelBatch {
    base: i64,
    last: i64,
    /// Producer id, −1 for none.
    producer: i64,
    /// Offsets of its records still in the log.
    live: Vec<i64>,
    /// KIP-534 delete horizon, set by the first clean that kept one of its tombstones.
    horizon: Option<i64>,
    /// Still in the log (possibly empty).
    present: bool,
}

#[derive(Clone, Debug, Default)]
struct Producer {
    epoch: i16,
    next_seq: i32,
    /// The last batch as sent, and its offsets.
    last: Option<(Bytes, i64, i64)>,
}

#[derive(Clone, Debug)]
struct Model {
    /// Every record ever appended.
    records: BTreeMap<i64, Rec>,
    /// Every batch ever appended, in offset order.
    batches: Vec<ModelBatch>,
    producers: [Producer; PRODUCERS],
    now: i64,
    log_end: i64,
    first_dirty: i64,
}

/// What the log shows: its batches (base, last offset, horizon, records).
type View = Vec<(i64, i64, Option<i64>, Vec<(i64, Rec)>)>;

fn key_bytes(key: u8) -> Vec<u8> {
    format!("k{key}").into_bytes()
}

impl Model {
    fn new() -> Model {
        Model {
            records: BTreeMap::new(),
            batches: Vec::new(),
            producers: Default::default(),
            now: START_MS,
            log_end: 0,
            first_dirty: 0,
        }
    }

    fn view(&self) -> View {
        self.batches
            .iter()
            .filter(|b| b.present)
            .map(|b| {
                let records = b.live.iter().map(|o| (*o, self.records[o].clone()));
                (b.base, b.last, b.horizon, records.collect())
            })
            .collect()
    }

    fn live_records(&self) -> BTreeMap<i64, &Rec> {
        self.batches
            .iter()
            .filter(|b| b.present)
            .flat_map(|b| b.live.iter().map(|o| (*o, &self.records[o])))
            .collect()
    }

    /// A pass over the closed segments `segments` with a map of `keys_max` keys at the
    /// model's clock: the log after it, the new first dirty offset, and the base of each group
    /// of segments it cleans into one; `None` when no closed segment is dirty (the pass does
    /// nothing).
    fn predict_clean(&self, segments: &[Closed], keys_max: usize) -> Option<Pass> {
        let first_dirty = self.first_dirty;
        if segments.iter().all(|s| s.next <= first_dirty) {
            return None;
        }
        // 1. The offset map: whole batches from the first dirty offset while they fit.
        let mut map: BTreeMap<u8, i64> = BTreeMap::new();
        let mut covered_end = first_dirty;
        let mut round_last_end = first_dirty;
        'fill: for Closed { base, next, .. } in segments {
            if *next <= first_dirty {
                continue;
            }
            let in_segment = self
                .batches
                .iter()
                .filter(|b| b.present && b.base >= *base && b.base < *next);
            for batch in in_segment {
                if batch.last < first_dirty {
                    continue;
                }
                if batch.live.len() > keys_max - map.len() {
                    break 'fill;
                }
                for offset in &batch.live {
                    map.insert(self.records[offset].key, *offset);
                }
                covered_end = batch.last + 1;
                round_last_end = covered_end;
            }
            covered_end = covered_end.max(*next);
        }
        assert!(
            covered_end > first_dirty,
            "the first dirty batch fits a map"
        );
        let covers_below = map.values().max().map(|o| o + 1);
        let last_batches: BTreeSet<i64> = self
            .producers
            .iter()
            .filter_map(|p| p.last.as_ref().map(|(_, base, _)| *base))
            .collect();
        // The segments in reach, grouped as `group_by_size` does; each group's last batch
        // stays, empty if need be.
        let mut groups: Vec<(i64, i64)> = Vec::new();
        let mut group_bytes = 0;
        for segment in segments.iter().filter(|s| s.base < covered_end) {
            match groups.last_mut() {
                Some(group) if group_bytes + segment.size_bytes <= SEGMENT_BYTES => {
                    group.1 = segment.next;
                    group_bytes += segment.size_bytes;
                }
                _ => {
                    groups.push((segment.base, segment.next));
                    group_bytes = segment.size_bytes;
                }
            }
        }
        let group_lasts: BTreeSet<i64> = groups
            .iter()
            .filter_map(|(base, next)| {
                let mut in_group = self
                    .batches
                    .iter()
                    .filter(|b| b.present && b.base >= *base && b.base < *next);
                in_group.next_back().map(|b| b.base)
            })
            .collect();
        // 2. Every batch in reach through `filter.rs`'s rules.
        let mut out = self.clone();
        for batch in out.batches.iter_mut() {
            if !batch.present || batch.last >= covered_end {
                continue;
            }
            let mut kept = Vec::new();
            let mut has_tombstone = false;
            for offset in &batch.live {
                let rec = &self.records[offset];
                if covers_below.is_none_or(|end| *offset >= end) {
                    kept.push(*offset);
                    continue;
                }
                if map.get(&rec.key).is_some_and(|latest| latest > offset) {
                    continue;
                }
                if rec.value.is_none() {
                    if batch.horizon.is_some_and(|h| self.now >= h) {
                        continue;
                    }
                    has_tombstone = true;
                }
                kept.push(*offset);
            }
            let new_horizon = (batch.horizon.is_none() && has_tombstone)
                .then_some(self.now + DELETE_RETENTION_MS);
            if kept.len() == batch.live.len() && new_horizon.is_none() {
                continue;
            }
            let keep_if_empty = (batch.producer >= 0 && last_batches.contains(&batch.base))
                || batch.last + 1 == round_last_end
                || group_lasts.contains(&batch.base);
            if kept.is_empty() && !keep_if_empty {
                batch.present = false;
            }
            batch.live = kept;
            batch.horizon = batch.horizon.or(new_horizon);
        }
        out.first_dirty = covered_end;
        Some(Pass {
            after: out,
            reach: covered_end,
            group_bases: groups.iter().map(|(base, _)| *base).collect(),
        })
    }

    /// `new` (this pass's prediction) below `boundary`, `self` (before it) from it.
    fn merged(&self, new: &Model, boundary: i64) -> Model {
        let mut out = self.clone();
        for (batch, cleaned) in out.batches.iter_mut().zip(&new.batches) {
            if batch.base < boundary {
                *batch = cleaned.clone();
            }
        }
        out
    }
}

/// A closed segment as the directory shows it.
struct Closed {
    base: i64,
    next: i64,
    /// Its `.log` file's length (cut to size when the segment was closed).
    size_bytes: u64,
}

/// What a pass does, predicted.
struct Pass {
    after: Model,
    /// The new first dirty offset.
    reach: i64,
    /// The base of each group of segments cleaned into one, ascending.
    group_bases: Vec<i64>,
}

/// The closed segments, from the directory's `.log` files: every segment but the active
/// (last) one.
fn closed_segments(dir: &Path) -> Vec<Closed> {
    let mut bases: Vec<(i64, u64)> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let e = e.unwrap();
            let n = e.file_name().to_string_lossy().into_owned();
            let base = n.strip_suffix(".log")?.parse().ok()?;
            Some((base, e.metadata().unwrap().len()))
        })
        .collect();
    bases.sort_unstable();
    bases
        .windows(2)
        .map(|w| Closed {
            base: w[0].0,
            next: w[1].0,
            size_bytes: w[0].1,
        })
        .collect()
}

fn horizon_of(header: &BatchHeader) -> Option<i64> {
    (header.attributes & DELETE_HORIZON_BIT != 0).then_some(header.base_timestamp.0)
}

/// The whole log read batch by batch, offsets checked to ascend and never repeat.
async fn read_log(log: &PartitionLog, step: usize) -> View {
    let mut out: View = Vec::new();
    let mut offset = log.log_start_offset();
    let end = log.log_end_offset();
    let mut previous: Option<i64> = None;
    while offset < end {
        let batches = log.read(offset, 1 << 20, end).await.unwrap();
        let Some(last) = batches.last() else { break };
        offset = last.header().last_offset().plus(1);
        for batch in &batches {
            let header = batch.header();
            let bytes = batch.to_vec();
            let mut records = Vec::new();
            for r in records_of(&bytes).unwrap() {
                assert!(
                    previous.is_none_or(|p| r.offset.0 > p),
                    "step {step}: offset {} after {previous:?}",
                    r.offset.0
                );
                assert!(
                    r.offset >= header.base_offset && r.offset <= header.last_offset(),
                    "step {step}: record {} outside its batch",
                    r.offset.0
                );
                previous = Some(r.offset.0);
                let key = r.key.expect("every record has a key");
                assert!(key.len() == 2 && key[0] == b'k', "step {step}: key {key:?}");
                let rec = Rec {
                    key: key[1] - b'0',
                    value: r.value.map(<[u8]>::to_vec),
                    ts: r.timestamp.0,
                };
                records.push((r.offset.0, rec));
            }
            let base = header.base_offset.0;
            assert!(
                out.last().is_none_or(|b| base > b.1),
                "step {step}: batch at {base} overlaps the previous one"
            );
            out.push((base, header.last_offset().0, horizon_of(&header), records));
        }
    }
    out
}

/// The batch as `producer` (≥ 0) sends it: `build_batch_kv`'s with its id, epoch and sequence.
fn with_producer(batch: &[u8], producer: i64, epoch: i16, seq: i32) -> Bytes {
    let mut b = batch.to_vec();
    b[43..51].copy_from_slice(&producer.to_be_bytes());
    b[51..53].copy_from_slice(&epoch.to_be_bytes());
    b[53..57].copy_from_slice(&seq.to_be_bytes());
    let crc = batch_crc(&b);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(b)
}

/// Appends one batch of `records` from `producer` (see [`Op::Append`]) and records it.
async fn append(
    log: &PartitionLog,
    model: &mut Model,
    (producer, records, new_epoch): (usize, &[(u8, Option<u8>)], bool),
    step: usize,
) {
    let base = model.log_end;
    let kvs: Vec<(Vec<u8>, Option<Vec<u8>>)> = records
        .iter()
        .enumerate()
        .map(|(i, (key, len))| {
            let value = len.map(|len| {
                let mut v = format!("v{}-", base + i as i64).into_bytes();
                v.resize(v.len() + usize::from(len), b'x');
                v
            });
            (key_bytes(*key), value)
        })
        .collect();
    let refs: Vec<KeyValue<'_>> = kvs
        .iter()
        .map(|(k, v)| (Some(k.as_slice()), v.as_deref()))
        .collect();
    let plain = build_batch_kv(TimestampMs(model.now), &refs);
    let n = records.len() as i64;
    let (bytes, producer_id) = if producer < PRODUCERS {
        let p = &mut model.producers[producer];
        if new_epoch && p.last.is_some() {
            p.epoch += 1;
            p.next_seq = 0;
        }
        let id = PRODUCER_ID_BASE + producer as i64;
        let bytes = with_producer(&plain, id, p.epoch, p.next_seq);
        p.next_seq += i32::try_from(n).unwrap();
        p.last = Some((bytes.clone(), base, base + n - 1));
        (bytes, id)
    } else {
        (plain, -1)
    };
    let info = log.append(bytes, LeaderEpoch(1)).await.unwrap();
    assert!(!info.duplicate, "step {step}: a new batch taken as a retry");
    assert_eq!(info.base_offset.0, base, "step {step}: append offset");
    for (i, (key, len)) in records.iter().enumerate() {
        let (_, value) = &kvs[i];
        assert_eq!(len.is_some(), value.is_some());
        let rec = Rec {
            key: *key,
            value: value.clone(),
            ts: model.now + i as i64,
        };
        model.records.insert(base + i as i64, rec);
    }
    model.batches.push(ModelBatch {
        base,
        last: base + n - 1,
        producer: producer_id,
        live: (base..base + n).collect(),
        horizon: None,
        present: true,
    });
    model.log_end += n;
    model.now += n;
}

/// Every acknowledged record written, and the high watermark at the log end (acks=all): what
/// makes the closed segments cleanable.
async fn settle(log: &PartitionLog, model: &Model) {
    log.wait_written(Offset(model.log_end)).await.unwrap();
    log.set_high_watermark(Offset(model.log_end));
    assert_eq!(log.high_watermark().0, model.log_end);
}

async fn reopen(dir: &Path) -> PartitionLog {
    PartitionLog::open(dir, config(), &BatchCache::new(CACHE_BYTES))
        .await
        .expect("open log")
}

/// A swap was cut (the log is dropped, not closed): reopen, with the recovery itself cut after
/// `recover_cut` steps first when given (then open once more).
async fn reopen_after_cut(dir: &Path, recover_cut: Option<u64>) -> PartitionLog {
    if let Some(steps) = recover_cut {
        cut_at(Some(("clean.recover", steps + 1)));
        let first = PartitionLog::open(dir, config(), &BatchCache::new(CACHE_BYTES)).await;
        cut_at(None);
        match first {
            Ok(log) => return log,
            Err(e) => assert!(
                e.to_string().contains("crash point"),
                "open failed otherwise than by the cut: {e}"
            ),
        }
    }
    reopen(dir).await
}

/// A pass whose swap is cut after `steps` file steps, a crash and a reopen: the log must hold,
/// group by group, the pass's cleaned records before the cut and the old ones after it.
async fn cut_clean(
    log: PartitionLog,
    dir: &Path,
    model: &mut Model,
    (slots, steps, recover_cut): (usize, u64, Option<u64>),
    step: usize,
) -> PartitionLog {
    log.flush().await.unwrap();
    settle(&log, model).await;
    let keys_max = OffsetMap::with_budget(slots * SLOT_BYTES).free_keys();
    let predicted = model.predict_clean(&closed_segments(dir), keys_max);
    cut_at(Some(("clean.swap", steps + 1)));
    let result = log.clean(TimestampMs(model.now), &mut buffers(slots)).await;
    cut_at(None);
    let pass = match (predicted, result) {
        (None, Ok(None)) => return log,
        (Some(pass), Ok(Some(report))) => {
            // The cut fell after the pass's last swap step: the pass completed.
            assert_eq!(
                report.cleaned_to.0, pass.reach,
                "step {step}: the map's reach"
            );
            *model = pass.after;
            return log;
        }
        (Some(predicted), Err(e)) => {
            assert!(
                matches!(e, StorageError::Io { .. }) && e.to_string().contains("crash point"),
                "step {step}: the clean failed otherwise than by the cut: {e}"
            );
            predicted
        }
        (predicted, result) => panic!(
            "step {step}: predicted {:?}, the pass gave {result:?}",
            predicted.map(|p| p.reach)
        ),
    };
    let new = pass.after;
    // A crash there: nothing is closed or flushed.
    drop(log);
    let log = reopen_after_cut(dir, recover_cut).await;
    let got = read_log(&log, step).await;
    // The groups before the cut one are cleaned, the cut one is cleaned if the cut fell past
    // its commit point, the rest are old.
    let boundary = pass
        .group_bases
        .iter()
        .copied()
        .chain([i64::MAX])
        .rev()
        .find(|b| model.merged(&new, *b).view() == got);
    let Some(boundary) = boundary else {
        panic!(
            "step {step}: after a swap cut after {steps} steps (recovery cut {recover_cut:?}) \
             the log is neither the old nor the cleaned one group by group\n\
             got {got:?}\nold {:?}\ncleaned {:?}",
            model.view(),
            new.view()
        );
    };
    *model = model.merged(&new, boundary);
    log
}

/// The directory holds no file of an unfinished swap, and every closed segment has both index
/// files (written when it was closed or cleaned): a segment without them is one a swap's
/// recovery left behind.
fn check_dir(dir: &Path, step: usize) {
    let files: BTreeSet<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for file in &files {
        assert!(
            [".cleaned", ".swap", ".deleted"]
                .iter()
                .all(|suffix| !file.ends_with(suffix)),
            "step {step}: {file} left in the directory: {files:?}"
        );
    }
    for segment in closed_segments(dir) {
        for ext in ["index", "timeindex"] {
            let name = format!("{:020}.{ext}", segment.base);
            assert!(
                files.contains(&name),
                "step {step}: closed segment {} without its {ext}: {files:?}",
                segment.base
            );
        }
    }
}

async fn check(log: &PartitionLog, dir: &Path, model: &Model, step: usize) {
    check_dir(dir, step);
    assert_eq!(log.log_start_offset().0, 0, "step {step}: log start");
    assert_eq!(
        log.log_end_offset().0,
        model.log_end,
        "step {step}: log end"
    );
    let got = read_log(log, step).await;
    let want = model.view();
    assert_eq!(
        got, want,
        "step {step}: the log's batches and records, or the reference's"
    );
    let live = model.live_records();
    // Every key's latest record, whatever the prediction says.
    for key in 0..KEYS {
        let Some((offset, rec)) = model.records.iter().rev().find(|(_, r)| r.key == key) else {
            continue;
        };
        if live.contains_key(offset) {
            continue;
        }
        let batch = model
            .batches
            .iter()
            .find(|b| b.base <= *offset && *offset <= b.last)
            .unwrap();
        assert!(
            rec.value.is_none() && batch.horizon.is_some_and(|h| model.now >= h),
            "step {step}: the latest record of k{key}, at {offset}, is gone"
        );
        assert!(
            live.values().all(|r| r.key != key),
            "step {step}: k{key}'s tombstone at {offset} is gone but an older record is back"
        );
    }
    // The cleaned section holds one record per key.
    let first_dirty = log.first_dirty_offset().0;
    assert_eq!(
        first_dirty, model.first_dirty,
        "step {step}: first dirty offset"
    );
    let mut seen = BTreeSet::new();
    for (offset, rec) in live.range(..first_dirty) {
        assert!(
            seen.insert(rec.key),
            "step {step}: k{} twice below the first dirty offset {first_dirty} (at {offset})",
            rec.key
        );
    }
    check_producers(log, model, step).await;
    check_timestamps(log, model, &live, step).await;
}

/// Each idempotent producer's state as the log sees it, probed through appends that append
/// nothing: a retry, a sequence gap, an older epoch.
async fn check_producers(log: &PartitionLog, model: &Model, step: usize) {
    for (i, p) in model.producers.iter().enumerate() {
        let Some((last, base, last_offset)) = &p.last else {
            continue;
        };
        let id = PRODUCER_ID_BASE + i as i64;
        let retry = log
            .append(last.clone(), LeaderEpoch(1))
            .await
            .unwrap_or_else(|e| panic!("step {step}: producer {id}'s retry refused: {e}"));
        assert!(
            retry.duplicate,
            "step {step}: producer {id}'s retry appended"
        );
        assert_eq!(
            (retry.base_offset.0, retry.last_offset.0),
            (*base, *last_offset),
            "step {step}: producer {id}'s retry answered with other offsets"
        );
        let gap = with_producer(last, id, p.epoch, p.next_seq + 1);
        match log.append(gap, LeaderEpoch(1)).await {
            Err(StorageError::OutOfOrderSequence { expected, .. }) => assert_eq!(
                expected, p.next_seq,
                "step {step}: producer {id}'s next sequence"
            ),
            other => panic!("step {step}: producer {id}'s sequence gap gave {other:?}"),
        }
        if p.epoch > 0 {
            let old = with_producer(last, id, p.epoch - 1, p.next_seq);
            match log.append(old, LeaderEpoch(1)).await {
                Err(StorageError::InvalidProducerEpoch { current, .. }) => {
                    assert_eq!(current, p.epoch, "step {step}: producer {id}'s epoch")
                }
                other => panic!("step {step}: producer {id}'s old epoch gave {other:?}"),
            }
        }
    }
    assert_eq!(
        log.log_end_offset().0,
        model.log_end,
        "step {step}: probes appended"
    );
}

/// ListOffsets by timestamp: the batch storage finds, then the first record in it at or after
/// the time (as the broker's `first_offset_at_or_after`), against the first surviving record
/// whose timestamp is ≥ t.
async fn check_timestamps(
    log: &PartitionLog,
    model: &Model,
    live: &BTreeMap<i64, &Rec>,
    step: usize,
) {
    let mut targets: BTreeSet<i64> = (0..=6)
        .map(|i| START_MS - 1 + (model.now + 1 - START_MS) * i / 6)
        .collect();
    targets.extend(live.values().step_by(3).map(|r| r.ts));
    for t in targets {
        let want = live
            .iter()
            .find(|(_, r)| r.ts >= t)
            .map(|(o, r)| (*o, r.ts));
        let got = log
            .find_offset_by_timestamp(TimestampMs(t))
            .await
            .unwrap()
            .map(|m| {
                let bytes = m.batch.to_vec();
                let records = records_of(&bytes).unwrap();
                records
                    .iter()
                    .find(|r| r.timestamp.0 >= t)
                    .map_or((m.header.base_offset.0, m.header.max_timestamp.0), |r| {
                        (r.offset.0, r.timestamp.0)
                    })
            });
        assert_eq!(got, want, "step {step}: offset for timestamp {t}");
    }
}

async fn run_ops(ops: Vec<Op>) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let mut log = reopen(&dir).await;
    let mut model = Model::new();
    for (step, op) in ops.iter().enumerate() {
        match op {
            Op::Append {
                producer,
                records,
                new_epoch,
            } => append(&log, &mut model, (*producer, records, *new_epoch), step).await,
            Op::Roll => log.roll().await.unwrap(),
            Op::Advance { ms } => model.now += ms,
            Op::Clean { map } => {
                settle(&log, &model).await;
                let slots = MAP_SLOTS[*map];
                let keys_max = OffsetMap::with_budget(slots * SLOT_BYTES).free_keys();
                let predicted = model.predict_clean(&closed_segments(&dir), keys_max);
                let report = log
                    .clean(TimestampMs(model.now), &mut buffers(slots))
                    .await
                    .unwrap();
                match (predicted, report) {
                    (None, None) => {}
                    (Some(pass), Some(report)) => {
                        assert_eq!(
                            report.cleaned_to.0, pass.reach,
                            "step {step}: the map's reach"
                        );
                        assert_eq!(report.groups_skipped, 0, "step {step}");
                        assert_eq!(
                            report.segments_after,
                            pass.group_bases.len(),
                            "step {step}: groups"
                        );
                        model = pass.after;
                    }
                    (predicted, report) => panic!(
                        "step {step}: predicted {:?}, the pass gave {report:?}",
                        predicted.map(|p| p.reach)
                    ),
                }
            }
            Op::CutClean {
                map,
                steps,
                recover_cut,
            } => {
                let cut = (MAP_SLOTS[*map], *steps, *recover_cut);
                log = cut_clean(log, &dir, &mut model, cut, step).await;
            }
            Op::Crash => {
                log.flush().await.unwrap();
                drop(log);
                log = reopen(&dir).await;
            }
            Op::Reopen => {
                log.close().await.unwrap();
                drop(log);
                log = reopen(&dir).await;
            }
            Op::LoseSnapshots => {
                log.close().await.unwrap();
                drop(log);
                for entry in std::fs::read_dir(&dir).unwrap() {
                    let path = entry.unwrap().path();
                    if path.extension().is_some_and(|e| e == "snapshot") {
                        std::fs::remove_file(path).unwrap();
                    }
                }
                log = reopen(&dir).await;
            }
        }
        settle(&log, &model).await;
        check(&log, &dir, &model, step).await;
    }
    log.close().await.unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]
    #[test]
    fn compaction_matches_model(ops in proptest::collection::vec(op(), 1..64)) {
        run(move || run_ops(ops));
    }
}
