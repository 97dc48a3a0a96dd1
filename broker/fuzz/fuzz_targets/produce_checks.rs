//! The produce path's batch validation on arbitrary record sets:
//! `storage::ValidatedBatches::validate` (the batches' framing, CRC and record count) then the broker's `produce_checks::prepare`
//! (decompressing each batch to check its record count, the CreateTime window, recompressing
//! to the topic's `compression.type`), then the log's own check of what `prepare` returns.
//! Each must answer `Ok` or a typed error, never panic or abort.
//!
//! Input: byte 0 picks the topic config (bits 0–2 `compression.type`, bit 3 LogAppendTime,
//! bit 4 a one-second CreateTime window, bit 5 fixes up each batch's CRC so that the fuzzer
//! gets past the CRC check as a client computing valid CRCs over hostile contents would);
//! bytes 1..9 the broker's clock (ms, big-endian); the rest is the record set. Seed the corpus
//! with `broker/fuzz/seeds.py` (kafka-python's batches in every codec).
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use storage::{batch_crc, split_batches, ValidatedBatches, BATCH_HEADER_BYTES};
use tuning::config::TopicConfig;

/// Byte offsets in a RecordBatch v2 header (docs/storage-format.md).
const BATCH_LENGTH_AT: usize = 8;
const CRC_AT: usize = 17;
/// The bytes before `attributes`, which a batch length counts from.
const LOG_OVERHEAD_BYTES: usize = 12;

const CODECS: [&str; 8] = [
    "producer",
    "uncompressed",
    "gzip",
    "snappy",
    "lz4",
    "zstd",
    "producer",
    "zstd",
];

/// Rewrites the CRC of every whole batch in `records`, walking them by their length fields.
fn fix_crcs(records: &mut [u8]) {
    let mut at = 0;
    while at + BATCH_HEADER_BYTES <= records.len() {
        let length = &records[at + BATCH_LENGTH_AT..at + BATCH_LENGTH_AT + 4];
        let length = i32::from_be_bytes([length[0], length[1], length[2], length[3]]);
        let Ok(length) = usize::try_from(length) else {
            return;
        };
        let size = LOG_OVERHEAD_BYTES + length;
        if size < BATCH_HEADER_BYTES || at + size > records.len() {
            return;
        }
        let crc = batch_crc(&records[at..at + size]);
        records[at + CRC_AT..at + CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
        at += size;
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let Some((clock, records)) = rest.split_first_chunk::<8>() else {
        return;
    };
    let now_ms = i64::from_be_bytes(*clock);
    let mut config = TopicConfig::default();
    let settings = [
        ("compression.type", CODECS[usize::from(mode & 7)]),
        (
            "message.timestamp.type",
            if mode & 8 != 0 {
                "LogAppendTime"
            } else {
                "CreateTime"
            },
        ),
        (
            "message.timestamp.after.max.ms",
            if mode & 16 != 0 { "1000" } else { "3600000" },
        ),
    ];
    for (key, value) in settings {
        if config.set(key, value).is_err() {
            return;
        }
    }
    let mut records = records.to_vec();
    if mode & 32 != 0 {
        fix_crcs(&mut records);
    }
    let records = Bytes::from(records);
    // What the owning shard runs: the one split and CRC pass, then the topic's checks.
    let Ok(batches) = ValidatedBatches::validate(&records) else {
        return;
    };
    if let Ok(prepared) = sluice_broker::prepare_produce(batches, &config, now_ms) {
        // A set `prepare` changed (recompressed) must still be whole, valid batches.
        let _ = split_batches(&prepared.to_bytes());
    }
});
