//! Model test: random appends, reads, rolls, truncations, delete-records, retention, flushes
//! and reopens (clean and not) against an in-memory model of the log. A failure prints the
//! operation sequence (proptest shrinks it) and the seed. The leader epoch rises now and then,
//! and the leader-epoch cache is checked after every step against the epochs of the batches the
//! model holds.

mod common;

use common::*;
use proptest::prelude::*;
use storage::{LeaderEpoch, LogConfig, Offset, PartitionLog, TimestampMs};

#[derive(Clone, Debug)]
enum Op {
    Append {
        records: usize,
        value_bytes: usize,
        new_epoch: bool,
    },
    Read {
        at_permille: u16,
        max_bytes: usize,
    },
    Roll,
    Flush,
    Truncate {
        at_permille: u16,
    },
    DeleteRecords {
        at_permille: u16,
    },
    RetainBytes {
        bytes: u64,
    },
    Reopen {
        clean: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1usize..5, 0usize..3000, proptest::bool::weighted(0.2)).prop_map(|(records, value_bytes, new_epoch)| Op::Append { records, value_bytes, new_epoch }),
        4 => (0u16..1000, 1usize..20_000).prop_map(|(at_permille, max_bytes)| Op::Read { at_permille, max_bytes }),
        1 => Just(Op::Roll),
        1 => Just(Op::Flush),
        1 => (0u16..1000).prop_map(|at_permille| Op::Truncate { at_permille }),
        1 => (0u16..1000).prop_map(|at_permille| Op::DeleteRecords { at_permille }),
        1 => (0u64..60_000).prop_map(|bytes| Op::RetainBytes { bytes }),
        1 => any::<bool>().prop_map(|clean| Op::Reopen { clean }),
    ]
}

/// The model: every batch still in the log (base offset, stored bytes), and the log start;
/// the leader epoch appends use.
#[derive(Default)]
struct Model {
    batches: Vec<(i64, Vec<u8>)>,
    log_start: i64,
    log_end: i64,
    epoch: i32,
}

impl Model {
    fn offset_at(&self, permille: u16) -> i64 {
        self.log_start + (self.log_end - self.log_start) * i64::from(permille) / 1000
    }
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 16 << 10,
        index_interval_bytes: 512,
        retention_ms: None,
        ..LogConfig::default()
    }
}

async fn check(log: &PartitionLog, model: &Model, step: usize) {
    assert_eq!(
        log.log_end_offset().0,
        model.log_end,
        "step {step}: log end"
    );
    assert_eq!(
        log.log_start_offset().0,
        model.log_start,
        "step {step}: log start"
    );
    // The leader-epoch cache: each epoch starts at its first batch still in the log, the first
    // entry at the log start (Kafka's rules, restated over the batches).
    let mut want: Vec<(i32, i64)> = Vec::new();
    for (base, b) in &model.batches {
        let epoch = storage::validate_batch(b).unwrap().partition_leader_epoch.0;
        if want.last().is_none_or(|(e, _)| epoch > *e) {
            want.push((epoch, *base));
        }
    }
    if let Some(first) = want.first_mut() {
        first.1 = first.1.max(model.log_start);
    }
    let mut got = epoch_starts(log);
    if model.batches.is_empty() {
        // All records deleted: Kafka's truncateFromStart leaves one entry at the log end,
        // which the next recovery's truncateFromEnd removes. Either is right.
        got.retain(|(_, start)| *start < model.log_end);
    }
    assert_eq!(got, want, "step {step}: leader-epoch cache");
}

async fn run_ops(ops: Vec<Op>) {
    let dir = tempfile::tempdir().unwrap();
    let cache_bytes = 8 << 10; // small: reads mix cache, write queue and disk
    let mut log = open(dir.path(), config(), cache_bytes).await;
    let mut model = Model::default();
    for (step, op) in ops.into_iter().enumerate() {
        match op {
            Op::Append {
                records,
                value_bytes,
                new_epoch,
            } => {
                if new_epoch {
                    model.epoch += 1;
                }
                let b = batch(step as i64, records, value_bytes);
                let info = log
                    .append(b.clone(), LeaderEpoch(model.epoch))
                    .await
                    .unwrap();
                assert_eq!(info.base_offset.0, model.log_end, "step {step}");
                model
                    .batches
                    .push((model.log_end, stamped(&b, model.log_end, model.epoch)));
                model.log_end += records as i64;
            }
            Op::Read {
                at_permille,
                max_bytes,
            } => {
                let at = model.offset_at(at_permille);
                let got = log
                    .read(Offset(at), max_bytes, Offset(model.log_end))
                    .await
                    .unwrap();
                if at == model.log_end {
                    assert!(got.is_empty());
                    continue;
                }
                let first = model
                    .batches
                    .iter()
                    .position(|(base, b)| {
                        let h = storage::validate_batch(&b.to_vec()).unwrap();
                        *base <= at && at <= h.last_offset().0
                    })
                    .expect("model holds the offset");
                assert!(
                    !got.is_empty(),
                    "step {step}: read at {at} returned nothing"
                );
                let total: usize = got.iter().map(|b| b.len()).sum();
                assert!(
                    got.len() == 1 || total <= max_bytes,
                    "step {step}: max_bytes"
                );
                for (i, b) in got.iter().enumerate() {
                    assert_eq!(
                        b.to_vec(),
                        model.batches[first + i].1,
                        "step {step}: batch {i} at {at}"
                    );
                }
            }
            Op::Roll => log.roll().await.unwrap(),
            Op::Flush => {
                let durable = log.flush().await.unwrap();
                assert_eq!(durable.0, model.log_end);
            }
            Op::Truncate { at_permille } => {
                let at = model.offset_at(at_permille);
                log.truncate_to(Offset(at)).await.unwrap();
                // The batch holding `at` goes whole, and everything after it.
                if let Some(i) = model
                    .batches
                    .iter()
                    .position(|(_, b)| storage::validate_batch(b).unwrap().last_offset().0 >= at)
                {
                    let base = model.batches[i].0;
                    model.batches.truncate(i);
                    model.log_end = base;
                    model.log_start = model.log_start.min(base);
                }
            }
            Op::DeleteRecords { at_permille } => {
                let at = model.offset_at(at_permille);
                log.delete_records_before(Offset(at)).await.unwrap();
                model.log_start = model.log_start.max(at);
                drop_below_start(&mut model);
            }
            Op::RetainBytes { bytes } => {
                log.set_config(LogConfig {
                    retention_bytes: Some(bytes),
                    ..config()
                });
                log.enforce_retention(TimestampMs(0)).await.unwrap();
                log.set_config(config());
                let start = log.log_start_offset().0;
                assert!(
                    start >= model.log_start && start <= model.log_end,
                    "step {step}"
                );
                model.log_start = start;
                drop_below_start(&mut model);
            }
            Op::Reopen { clean } => {
                if clean {
                    log.close().await.unwrap();
                } else {
                    // Unclean: flush (acknowledged-durable state) and drop without closing.
                    log.flush().await.unwrap();
                }
                drop(log);
                log = open(dir.path(), config(), cache_bytes).await;
            }
        }
        check(&log, &model, step).await;
    }
}

fn drop_below_start(model: &mut Model) {
    let start = model.log_start;
    model
        .batches
        .retain(|(_, b)| storage::validate_batch(b).unwrap().last_offset().0 >= start);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 160, failure_persistence: None, ..ProptestConfig::default() })]
    #[test]
    fn log_matches_model(ops in proptest::collection::vec(op(), 1..60)) {
        run(move || run_ops(ops));
    }
}
