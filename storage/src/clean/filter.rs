//! One batch through the cleaner (issue #27): which records of a RecordBatch v2 survive a
//! clean, and the rewritten batch, following Kafka's `MemoryRecords.filterTo` for magic 2.
//!
//! A record survives when it has a key, no later offset for its key is in the [`OffsetMap`],
//! and it is not a tombstone (null value) whose delete horizon has passed. The rewritten batch
//! keeps `baseOffset`, `lastOffsetDelta`, `partitionLeaderEpoch`, the producer id, epoch and
//! base sequence, so offsets never change and idempotent producers keep their sequence state;
//! `recordsCount`, `maxTimestamp` (of the kept records), `batchLength` and the CRC-32C are
//! recomputed. The last batch of a producer id is kept even when no record survives (an empty
//! batch, as Kafka's `RETAIN_EMPTY`).
//!
//! Tombstones follow KIP-534: the first clean of a batch holding a tombstone keeps it and sets
//! the batch's delete horizon (`attributes` bit 6, the horizon in ms in `baseTimestamp`, the
//! record timestamp deltas re-based so every record keeps its timestamp); a later clean drops
//! tombstones once the clean's time has reached the horizon.
//!
//! A compressed batch is decompressed through [`CleanRules::codec`], filtered as above, and
//! its kept records compressed again with the batch's own codec (Kafka's `filterTo`). Control
//! batches are kept whole. A batch of an aborted transaction goes whole
//! ([`discard_batch`]; the caller knows which, `clean::txn`).

use super::codec::{recompressed, uncompressed, RecordsCodec};
use crate::batch::{varint, BatchHeader, BATCH_HEADER_BYTES, LOG_OVERHEAD_BYTES};
use crate::error::BatchError;
use crate::offset_map::OffsetMap;
use crate::types::TimestampMs;
use bytes::{Bytes, BytesMut};

use crate::batch::CONTROL_BIT;
/// `attributes` bit 6 (KIP-534): `baseTimestamp` holds the batch's delete horizon.
pub const DELETE_HORIZON_BIT: i16 = 0x40;
const ATTRIBUTES_AT: usize = 21;
const BASE_TIMESTAMP_AT: usize = 27;
const MAX_TIMESTAMP_AT: usize = 35;
const RECORDS_COUNT_AT: usize = 57;
const BATCH_LENGTH_AT: usize = 8;
const CRC_AT: usize = 17;

/// What a clean does with one batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cleaned {
    /// Every record survives and no horizon is set: copy the batch as it is.
    Unchanged,
    /// No record survives and the batch is not its producer's last: drop it.
    Removed,
    /// The batch as rewritten (same base offset and last offset delta).
    Rewritten(Bytes),
}

/// The clean's inputs that are the same for every batch of one pass.
#[derive(Clone, Copy, Debug)]
pub struct CleanRules<'a> {
    /// Latest offset per key over the dirty section.
    pub map: &'a OffsetMap,
    /// Wall-clock time of the clean, in ms.
    pub now: TimestampMs,
    /// `delete.retention.ms`: how long a tombstone stays after its batch is first cleaned.
    pub delete_retention_ms: i64,
    /// The codecs of compressed batches.
    pub codec: &'a dyn RecordsCodec,
}

/// One record's parsed fields and raw tail, borrowed from the batch.
struct RawRecord<'a> {
    attributes: u8,
    timestamp: i64,
    offset_delta: i64,
    key: Option<&'a [u8]>,
    has_value: bool,
    /// `keyLength key valueLength value headers`, copied as they are.
    tail: &'a [u8],
}

/// Decides `batch`'s fate (a whole, CRC-checked batch as stored). `keep_if_empty` is true for
/// a batch kept even when no record of it stays: the last batch in the log of its producer id
/// (≥ 0), and the last batch of the cleaning round (Kafka's `cleanInto`).
///
/// # Errors
/// [`BatchError`] when the header or a record does not parse: the cleaner stops on that
/// partition rather than guess.
pub fn clean_batch(
    batch: &[u8],
    rules: CleanRules<'_>,
    keep_if_empty: bool,
) -> Result<Cleaned, BatchError> {
    let header = BatchHeader::parse(batch)?;
    if header.attributes & CONTROL_BIT != 0 {
        return Ok(Cleaned::Unchanged);
    }
    let compression = header.compression();
    if compression != 0 {
        let plain = uncompressed(batch, &header, rules.codec)?;
        return match clean_batch(&plain, rules, keep_if_empty)? {
            Cleaned::Rewritten(kept) => Ok(Cleaned::Rewritten(recompressed(
                &kept,
                compression,
                rules.codec,
            )?)),
            unchanged_or_removed => Ok(unchanged_or_removed),
        };
    }
    let records = raw_records(batch, &header)?;
    let horizon = (header.attributes & DELETE_HORIZON_BIT != 0).then_some(header.base_timestamp.0);
    let mut kept = Vec::with_capacity(records.len());
    let mut has_tombstone = false;
    for record in &records {
        let Some(key) = record.key else { continue };
        let offset = header.base_offset.plus(record.offset_delta);
        // Past what the map covers (a pass that stopped with a full map): kept as it is, as
        // Kafka's `pastLatestOffset`; dropping an expired tombstone there would bring back
        // the older value the map holds for its key.
        if rules.map.covers_below().is_none_or(|end| offset >= end) {
            kept.push(record);
            continue;
        }
        if rules.map.get(key).is_some_and(|latest| latest > offset) {
            continue;
        }
        if !record.has_value {
            if horizon.is_some_and(|h| rules.now.0 >= h) {
                continue;
            }
            has_tombstone = true;
        }
        kept.push(record);
    }
    let new_horizon = match horizon {
        None if has_tombstone => Some(rules.now.0.saturating_add(rules.delete_retention_ms)),
        _ => None,
    };
    if kept.len() == records.len() && new_horizon.is_none() {
        return Ok(Cleaned::Unchanged);
    }
    if kept.is_empty() && !keep_if_empty {
        return Ok(Cleaned::Removed);
    }
    Ok(Cleaned::Rewritten(rewrite(
        batch,
        &header,
        &kept,
        new_horizon,
    )?))
}

/// The fate of a batch of an aborted transaction (KIP-98): removed, or kept with no record
/// when `keep_if_empty` (its producer's last batch: sequence state survives, as Kafka's
/// `RETAIN_EMPTY`). The empty batch is uncompressed whatever the original codec.
///
/// # Errors
/// [`BatchError`] when the header does not parse.
pub fn discard_batch(batch: &[u8], keep_if_empty: bool) -> Result<Cleaned, BatchError> {
    let header = BatchHeader::parse(batch)?;
    assert!(
        header.attributes & CONTROL_BIT == 0,
        "markers are never discarded here"
    );
    if !keep_if_empty {
        return Ok(Cleaned::Removed);
    }
    let plain = BatchHeader {
        attributes: header.attributes & !0x07,
        ..header
    };
    Ok(Cleaned::Rewritten(rewrite(batch, &plain, &[], None)?))
}

/// The fate of a marker (Kafka's `isBatchRetained` for control batches with KIP-534): kept
/// as it is while `retain` (a batch of its transaction is still in the log, or it must stay as
/// the round's last batch); otherwise its delete horizon is set at the first clean
/// (`now + delete.retention.ms`, `attributes` bit 6, the horizon in `baseTimestamp`) and it is
/// removed by a clean at or after the horizon.
///
/// # Errors
/// [`BatchError`] when the batch or its record does not parse.
pub fn clean_marker(
    batch: &[u8],
    retain: bool,
    now: TimestampMs,
    delete_retention_ms: i64,
) -> Result<Cleaned, BatchError> {
    let header = BatchHeader::parse(batch)?;
    assert!(
        header.attributes & CONTROL_BIT != 0,
        "a marker is a control batch"
    );
    if retain {
        return Ok(Cleaned::Unchanged);
    }
    if header.attributes & DELETE_HORIZON_BIT != 0 {
        return Ok(if now.0 >= header.base_timestamp.0 {
            Cleaned::Removed
        } else {
            Cleaned::Unchanged
        });
    }
    let records = raw_records(batch, &header)?;
    let all: Vec<&RawRecord<'_>> = records.iter().collect();
    let horizon = now.0.saturating_add(delete_retention_ms);
    Ok(Cleaned::Rewritten(rewrite(
        batch,
        &header,
        &all,
        Some(horizon),
    )?))
}

/// The batch with only `kept`, re-based on `new_horizon` when one is set.
fn rewrite(
    batch: &[u8],
    header: &BatchHeader,
    kept: &[&RawRecord<'_>],
    new_horizon: Option<i64>,
) -> Result<Bytes, BatchError> {
    let base_timestamp = new_horizon.unwrap_or(header.base_timestamp.0);
    let mut section = Vec::new();
    let mut body = Vec::new();
    for record in kept {
        body.clear();
        body.push(record.attributes);
        put_varint(&mut body, record.timestamp.wrapping_sub(base_timestamp));
        put_varint(&mut body, record.offset_delta);
        body.extend_from_slice(record.tail);
        put_varint(&mut section, i64::try_from(body.len()).unwrap_or(i64::MAX));
        section.extend_from_slice(&body);
    }
    let size = BATCH_HEADER_BYTES + section.len();
    let too_large = || BatchError::TooLarge {
        size,
        max: usize::try_from(i32::MAX).unwrap_or(usize::MAX),
    };
    let length = i32::try_from(size - LOG_OVERHEAD_BYTES).map_err(|_| too_large())?;
    let count = i32::try_from(kept.len()).map_err(|_| too_large())?;
    let max_timestamp = if header.is_log_append_time() || kept.is_empty() {
        header.max_timestamp.0
    } else {
        kept.iter()
            .map(|r| r.timestamp)
            .max()
            .unwrap_or(header.max_timestamp.0)
    };
    let mut attributes = header.attributes;
    if new_horizon.is_some() {
        attributes |= DELETE_HORIZON_BIT;
    }
    let mut out = BytesMut::with_capacity(size);
    out.extend_from_slice(&batch[..BATCH_HEADER_BYTES]);
    out.extend_from_slice(&section);
    out[BATCH_LENGTH_AT..BATCH_LENGTH_AT + 4].copy_from_slice(&length.to_be_bytes());
    out[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&attributes.to_be_bytes());
    out[BASE_TIMESTAMP_AT..BASE_TIMESTAMP_AT + 8].copy_from_slice(&base_timestamp.to_be_bytes());
    out[MAX_TIMESTAMP_AT..MAX_TIMESTAMP_AT + 8].copy_from_slice(&max_timestamp.to_be_bytes());
    out[RECORDS_COUNT_AT..RECORDS_COUNT_AT + 4].copy_from_slice(&count.to_be_bytes());
    let crc = crate::batch::batch_crc(&out);
    out[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    let out = out.freeze();
    let check = BatchHeader::parse(&out)?;
    assert_eq!(check.base_offset, header.base_offset, "base offset kept");
    assert_eq!(
        check.last_offset_delta, header.last_offset_delta,
        "last offset delta kept"
    );
    assert_eq!(
        check.size_bytes(),
        out.len(),
        "batch length matches the bytes"
    );
    Ok(out)
}

/// Every record of an uncompressed batch, with its raw key/value/headers bytes.
fn raw_records<'a>(
    batch: &'a [u8],
    header: &BatchHeader,
) -> Result<Vec<RawRecord<'a>>, BatchError> {
    crate::batch::record_bodies(batch, header)?
        .into_iter()
        .map(|body| raw_record(body, header))
        .collect()
}

/// One record body (`attributes` to the end of its headers).
fn raw_record<'a>(body: &'a [u8], header: &BatchHeader) -> Result<RawRecord<'a>, BatchError> {
    let malformed = || BatchError::Malformed("record field");
    let attributes = *body.first().ok_or_else(malformed)?;
    let mut pos = 1;
    let next = |pos: &mut usize| -> Result<i64, BatchError> {
        let (v, n) = varint(body.get(*pos..).unwrap_or(&[])).ok_or_else(malformed)?;
        *pos += n;
        Ok(v)
    };
    let timestamp_delta = next(&mut pos)?;
    let offset_delta = next(&mut pos)?;
    let tail_start = pos;
    let key_len = next(&mut pos)?;
    let key = if key_len < 0 {
        None
    } else {
        let len = usize::try_from(key_len).map_err(|_| malformed())?;
        let key = body
            .get(pos..pos.saturating_add(len))
            .ok_or_else(malformed)?;
        pos += len;
        Some(key)
    };
    let value_len = next(&mut pos)?;
    Ok(RawRecord {
        attributes,
        timestamp: header.base_timestamp.0.wrapping_add(timestamp_delta),
        offset_delta,
        key,
        has_value: value_len >= 0,
        tail: &body[tail_start..],
    })
}

fn put_varint(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    loop {
        let byte = u8::try_from(z & 0x7f).unwrap_or(0);
        z >>= 7;
        if z == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{build_batch_kv, records_of};
    use crate::types::Offset;

    fn rules(map: &OffsetMap, now: i64) -> CleanRules<'_> {
        CleanRules {
            map,
            now: TimestampMs(now),
            delete_retention_ms: 100,
            codec: &super::super::codec::NoCodec,
        }
    }

    /// `batch` re-stamped as producer 7's, CRC fixed.
    fn with_producer(batch: &[u8]) -> Vec<u8> {
        let mut batch = batch.to_vec();
        batch[43..51].copy_from_slice(&7i64.to_be_bytes());
        let crc = crate::batch::batch_crc(&batch);
        batch[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
        batch
    }

    #[test]
    fn keyless_and_superseded_records_go_and_the_rest_keep_their_offsets() {
        let batch = build_batch_kv(
            TimestampMs(50),
            &[
                (None, Some(b"x")),
                (Some(b"k"), Some(b"old")),
                (Some(b"j"), Some(b"v")),
            ],
        );
        let mut map = OffsetMap::with_budget(64 * crate::offset_map::SLOT_BYTES);
        map.put(b"k", Offset(9)).unwrap();
        let Cleaned::Rewritten(out) = clean_batch(&batch, rules(&map, 0), false).unwrap() else {
            panic!("one record survives");
        };
        let records = records_of(&out).unwrap();
        assert_eq!(records.len(), 1);
        assert_eq!(
            (records[0].offset, records[0].key),
            (Offset(2), Some(&b"j"[..]))
        );
        assert_eq!(records[0].timestamp, TimestampMs(52));
        let header = BatchHeader::parse(&out).unwrap();
        assert_eq!(header.last_offset_delta, 2, "last offset delta kept");
        assert_eq!(header.max_timestamp, TimestampMs(52));
    }

    #[test]
    fn a_producers_last_batch_stays_empty_and_others_go() {
        let batch = with_producer(&build_batch_kv(TimestampMs(0), &[(Some(b"k"), Some(b"v"))]));
        let mut map = OffsetMap::with_budget(64 * crate::offset_map::SLOT_BYTES);
        map.put(b"k", Offset(5)).unwrap();
        assert_eq!(
            clean_batch(&batch, rules(&map, 0), false).unwrap(),
            Cleaned::Removed
        );
        let Cleaned::Rewritten(out) = clean_batch(&batch, rules(&map, 0), true).unwrap() else {
            panic!("the last batch of a producer is kept");
        };
        let header = BatchHeader::parse(&out).unwrap();
        assert_eq!((header.records_count, header.producer_id), (0, 7));
        assert_eq!(
            crate::batch::batch_crc(&out),
            header.crc,
            "CRC-32C recomputed"
        );
    }

    /// A reversible stand-in for a real codec: "compresses" by flipping every bit.
    struct FlipCodec;

    impl RecordsCodec for FlipCodec {
        fn decompress(&self, _codec: u8, data: &[u8]) -> Result<Vec<u8>, String> {
            Ok(data.iter().map(|b| !b).collect())
        }
        fn compress(&self, _codec: u8, raw: &[u8]) -> Result<Vec<u8>, String> {
            Ok(raw.iter().map(|b| !b).collect())
        }
    }

    #[test]
    fn a_compressed_batch_is_filtered_and_compressed_again_with_its_codec() {
        let plain = build_batch_kv(
            TimestampMs(5),
            &[
                (Some(b"a"), Some(b"1")),
                (Some(b"b"), Some(b"2")),
                (Some(b"a"), Some(b"3")),
            ],
        );
        let packed = crate::batch::replace_records(
            &plain,
            4,
            &FlipCodec.compress(4, &plain[BATCH_HEADER_BYTES..]).unwrap(),
        )
        .unwrap();
        let mut map = OffsetMap::with_budget(64 * crate::offset_map::SLOT_BYTES);
        assert_eq!(
            crate::clean::fill_map(&mut map, [&packed[..]], &FlipCodec).unwrap(),
            1
        );
        assert_eq!(
            map.get(b"a"),
            Some(Offset(2)),
            "keys read through the codec"
        );
        let with_flip = CleanRules {
            codec: &FlipCodec,
            ..rules(&map, 0)
        };
        let Cleaned::Rewritten(out) = clean_batch(&packed, with_flip, false).unwrap() else {
            panic!("the superseded a=1 goes");
        };
        let header = BatchHeader::parse(&out).unwrap();
        assert_eq!(header.compression(), 4, "the batch's own codec");
        assert_eq!(crate::batch::batch_crc(&out), header.crc);
        assert_eq!((header.records_count, header.last_offset_delta), (2, 2));
        let unpacked = super::super::codec::uncompressed(&out, &header, &FlipCodec).unwrap();
        let kept: Vec<_> = records_of(&unpacked)
            .unwrap()
            .iter()
            .map(|r| (r.offset, r.key.map(<[u8]>::to_vec)))
            .collect();
        assert_eq!(
            kept,
            [
                (Offset(1), Some(b"b".to_vec())),
                (Offset(2), Some(b"a".to_vec()))
            ]
        );
        // Without a codec that knows it, a compressed batch is an error, never kept as is.
        assert!(matches!(
            clean_batch(&packed, rules(&map, 0), false),
            Err(BatchError::Codec { compression: 4, .. })
        ));
    }

    #[test]
    fn a_tombstone_gets_a_horizon_then_goes_after_it() {
        let batch = build_batch_kv(TimestampMs(10), &[(Some(b"k"), None)]);
        let mut map = OffsetMap::with_budget(64 * crate::offset_map::SLOT_BYTES);
        assert_eq!(
            clean_batch(&batch, rules(&map, 1_000), false).unwrap(),
            Cleaned::Unchanged,
            "a record past what the map covers is kept as it is"
        );
        // A pass's map holds the tombstone itself: it is its key's latest record.
        map.put(b"k", Offset(0)).unwrap();
        let Cleaned::Rewritten(first) = clean_batch(&batch, rules(&map, 1_000), false).unwrap()
        else {
            panic!("the first clean sets the horizon");
        };
        let header = BatchHeader::parse(&first).unwrap();
        assert_ne!(header.attributes & DELETE_HORIZON_BIT, 0);
        assert_eq!(header.base_timestamp, TimestampMs(1_100));
        assert_eq!(records_of(&first).unwrap()[0].timestamp, TimestampMs(10));
        assert_eq!(
            clean_batch(&first, rules(&map, 1_099), false).unwrap(),
            Cleaned::Unchanged
        );
        assert_eq!(
            clean_batch(&first, rules(&map, 1_100), false).unwrap(),
            Cleaned::Removed
        );
    }
}
