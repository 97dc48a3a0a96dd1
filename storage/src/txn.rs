//! Transactions' bytes (KIP-98): the transaction marker control batch, and the aborted-
//! transaction index entry of `<base>.txnindex` (Kafka's `AbortedTxn` / `TransactionIndex`).
//! Pure functions of bytes; the log (`log/txn.rs`, `segment.rs`) does the I/O.
//!
//! A **marker** is a RecordBatch v2 with the control bit (attributes bit 5) and the
//! transactional bit (bit 4) set, the producer id and epoch of the transaction it ends, base
//! sequence −1, and exactly one record whose key is `version i16 = 0 | type i16` (abort 0,
//! commit 1: Kafka's `ControlRecordType`) and whose value is `version i16 = 0 |
//! coordinatorEpoch i32` (Kafka's `EndTransactionMarker`).
//!
//! An **aborted-transaction entry** is 34 bytes, big-endian: `version i16 = 0 | producerId i64
//! | firstOffset i64 | lastOffset i64 | lastStableOffset i64`. `lastOffset` is the abort
//! marker's offset; `lastStableOffset` is the LSO just after the marker was appended (the first
//! offset of the oldest other open transaction, else the marker's offset + 1), which lets a
//! reader stop scanning later entries (Kafka's `TxnIndexSearchResult.isComplete`).

use crate::batch::{
    batch_crc, put_varint, varint, BatchHeader, BATCH_HEADER_BYTES, CONTROL_BIT,
    LOG_OVERHEAD_BYTES, TRANSACTIONAL_BIT,
};
use crate::error::BatchError;
use crate::types::{Offset, TimestampMs};
use bytes::Bytes;

/// Bytes of one `.txnindex` entry (Kafka's `AbortedTxn.TOTAL_SIZE`).
pub const ABORTED_TXN_BYTES: usize = 34;
/// The only `.txnindex` entry version (Kafka's `AbortedTxn.CURRENT_VERSION`).
const ABORTED_TXN_VERSION: i16 = 0;
/// Version of a control record's key, and of an end-transaction marker's value, written here.
const CONTROL_KEY_VERSION: i16 = 0;
const MARKER_VALUE_VERSION: i16 = 0;
/// Key: version i16 + type i16. Value (version 0): version i16 + coordinator epoch i32.
const CONTROL_KEY_BYTES: usize = 4;
const MARKER_VALUE_BYTES: usize = 6;

const _: () = assert!(ABORTED_TXN_BYTES == 2 + 8 + 8 + 8 + 8);

/// How a transaction ended: Kafka's `ControlRecordType` (ABORT 0, COMMIT 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TxnResult {
    Abort,
    Commit,
}

impl TxnResult {
    fn control_type(self) -> i16 {
        match self {
            TxnResult::Abort => 0,
            TxnResult::Commit => 1,
        }
    }
}

/// The content of a transaction marker: what `WriteTxnMarkers` asks a partition leader to
/// append for one producer (KIP-98).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxnMarker {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub result: TxnResult,
    /// The coordinator epoch of the transaction coordinator writing the marker; a marker from
    /// an older coordinator than one already seen for the producer is fenced.
    pub coordinator_epoch: i32,
}

/// Builds the marker control batch for `marker` (base offset 0, no partition leader epoch:
/// the log stamps both), timestamped `timestamp`, with its CRC-32C.
pub fn build_marker_batch(marker: &TxnMarker, timestamp: TimestampMs) -> Bytes {
    let mut record = Vec::with_capacity(32);
    record.push(0u8); // record attributes
    put_varint(&mut record, 0); // timestamp delta
    put_varint(&mut record, 0); // offset delta
    put_varint(&mut record, CONTROL_KEY_BYTES as i64);
    record.extend_from_slice(&CONTROL_KEY_VERSION.to_be_bytes());
    record.extend_from_slice(&marker.result.control_type().to_be_bytes());
    put_varint(&mut record, MARKER_VALUE_BYTES as i64);
    record.extend_from_slice(&MARKER_VALUE_VERSION.to_be_bytes());
    record.extend_from_slice(&marker.coordinator_epoch.to_be_bytes());
    put_varint(&mut record, 0); // headers
    let mut out = Vec::with_capacity(BATCH_HEADER_BYTES + 1 + record.len());
    out.extend_from_slice(&0i64.to_be_bytes()); // base offset
    let length = BATCH_HEADER_BYTES - LOG_OVERHEAD_BYTES + 1 + record.len();
    let length = i32::try_from(length).expect("a marker batch is a few dozen bytes");
    out.extend_from_slice(&length.to_be_bytes());
    out.extend_from_slice(&(-1i32).to_be_bytes()); // partition leader epoch
    out.push(2); // magic
    out.extend_from_slice(&0u32.to_be_bytes()); // crc, set below
    out.extend_from_slice(&(CONTROL_BIT | TRANSACTIONAL_BIT).to_be_bytes());
    out.extend_from_slice(&0i32.to_be_bytes()); // last offset delta
    out.extend_from_slice(&timestamp.0.to_be_bytes()); // base timestamp
    out.extend_from_slice(&timestamp.0.to_be_bytes()); // max timestamp
    out.extend_from_slice(&marker.producer_id.to_be_bytes());
    out.extend_from_slice(&marker.producer_epoch.to_be_bytes());
    out.extend_from_slice(&(-1i32).to_be_bytes()); // base sequence
    out.extend_from_slice(&1i32.to_be_bytes()); // records count
    put_varint(&mut out, i64::try_from(record.len()).expect("small record"));
    out.extend_from_slice(&record);
    let crc = batch_crc(&out);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    let bytes = Bytes::from(out);
    debug_assert_eq!(
        parse_marker(&bytes).ok(),
        Some(*marker),
        "a built marker parses back"
    );
    bytes
}

/// The marker of a stored or replicated control batch, or `None` for a control batch
/// holding no record: compaction emptied it, keeping the batch for its producer's state, so
/// its transaction is gone from the log (Kafka's `ProducerAppendInfo.append` skips it).
///
/// # Errors
/// As [`parse_marker`] for a control batch holding records.
pub fn control_batch_marker(batch: &[u8]) -> Result<Option<TxnMarker>, BatchError> {
    let header = BatchHeader::parse(batch)?;
    if header.is_control() && header.records_count == 0 {
        return Ok(None);
    }
    parse_marker(batch).map(Some)
}

/// Reads the marker of a control batch (`batch` starts at its `baseOffset`; CRC already
/// checked by the caller). Kafka allows one control record per batch. The control key is read
/// as Kafka's `ControlRecordType.parse` does: a version (any non-negative one: later versions
/// may append fields, only the type matters) then the type; a type other than abort/commit
/// is refused.
///
/// # Errors
/// [`BatchError::Malformed`] when the batch is not a transactional control batch, is
/// compressed, holds other than one record, or its key (a negative version) or value does not
/// parse.
pub fn parse_marker(batch: &[u8]) -> Result<TxnMarker, BatchError> {
    let header = BatchHeader::parse(batch)?;
    let malformed = BatchError::Malformed;
    if !header.is_control() || !header.is_transactional() {
        return Err(malformed("not a transactional control batch"));
    }
    if header.compression() != 0 || header.records_count != 1 {
        return Err(malformed("a marker holds one uncompressed record"));
    }
    let end = header.size_bytes().min(batch.len());
    let body = batch
        .get(BATCH_HEADER_BYTES..end)
        .ok_or(malformed("marker record"))?;
    let mut pos = 0usize;
    let next_varint = |pos: &mut usize| -> Result<i64, BatchError> {
        let (v, n) = varint(body.get(*pos..).unwrap_or(&[])).ok_or(malformed("marker record"))?;
        *pos += n;
        Ok(v)
    };
    let _length = next_varint(&mut pos)?;
    pos += 1; // record attributes
    let _timestamp_delta = next_varint(&mut pos)?;
    let _offset_delta = next_varint(&mut pos)?;
    let key_len = next_varint(&mut pos)?;
    let key = take(body, &mut pos, key_len).ok_or(malformed("marker key"))?;
    let value_len = next_varint(&mut pos)?;
    let value = take(body, &mut pos, value_len).ok_or(malformed("marker value"))?;
    if key.len() < CONTROL_KEY_BYTES || i16_be(key, 0) < 0 {
        return Err(malformed("control record key version"));
    }
    let result = match i16_be(key, 2) {
        0 => TxnResult::Abort,
        1 => TxnResult::Commit,
        _ => return Err(malformed("control record type")),
    };
    // Kafka reads the coordinator epoch at every value version (later versions append fields).
    if value.len() < MARKER_VALUE_BYTES || i16_be(value, 0) < 0 {
        return Err(malformed("end transaction marker value"));
    }
    let coordinator_epoch = i32::from_be_bytes([value[2], value[3], value[4], value[5]]);
    Ok(TxnMarker {
        producer_id: header.producer_id,
        producer_epoch: header.producer_epoch,
        result,
        coordinator_epoch,
    })
}

fn take<'a>(body: &'a [u8], pos: &mut usize, len: i64) -> Option<&'a [u8]> {
    let len = usize::try_from(len).ok()?;
    let out = body.get(*pos..pos.checked_add(len)?)?;
    *pos += len;
    Some(out)
}

fn i16_be(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}

/// One aborted transaction as the `.txnindex` stores it (Kafka's `AbortedTxn`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbortedTxnEntry {
    pub producer_id: i64,
    /// Offset of the transaction's first batch in this partition.
    pub first_offset: Offset,
    /// Offset of its abort marker.
    pub last_offset: Offset,
    /// The last stable offset right after the marker (see the module doc).
    pub last_stable_offset: Offset,
}

/// What a read_committed Fetch (v4+) lists in `aborted_transactions`: the producer id and
/// first offset of an aborted transaction whose records may be in the fetched range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: Offset,
}

impl AbortedTxnEntry {
    /// The 34 bytes of this entry.
    pub fn encode(&self) -> [u8; ABORTED_TXN_BYTES] {
        let mut out = [0u8; ABORTED_TXN_BYTES];
        out[0..2].copy_from_slice(&ABORTED_TXN_VERSION.to_be_bytes());
        out[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        out[10..18].copy_from_slice(&self.first_offset.0.to_be_bytes());
        out[18..26].copy_from_slice(&self.last_offset.0.to_be_bytes());
        out[26..34].copy_from_slice(&self.last_stable_offset.0.to_be_bytes());
        out
    }

    /// Reads one entry; `None` for another version or offsets that cannot be an aborted
    /// transaction's (first after last).
    pub fn decode(bytes: &[u8; ABORTED_TXN_BYTES]) -> Option<AbortedTxnEntry> {
        let i64_at = |at: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[at..at + 8]);
            i64::from_be_bytes(b)
        };
        if i16_be(bytes, 0) != ABORTED_TXN_VERSION {
            return None;
        }
        let entry = AbortedTxnEntry {
            producer_id: i64_at(2),
            first_offset: Offset(i64_at(10)),
            last_offset: Offset(i64_at(18)),
            last_stable_offset: Offset(i64_at(26)),
        };
        (entry.first_offset <= entry.last_offset).then_some(entry)
    }
}

/// Encodes a segment's entries as the `.txnindex` file holds them, back to back.
pub fn encode_txn_index(entries: &[AbortedTxnEntry]) -> Vec<u8> {
    entries.iter().flat_map(AbortedTxnEntry::encode).collect()
}

/// Decodes a `.txnindex` file: the longest prefix of valid entries whose last offsets ascend
/// (a partial trailing entry, zero padding or a damaged entry ends it), and whether the whole
/// file was read that way.
pub fn decode_txn_index(bytes: &[u8]) -> (Vec<AbortedTxnEntry>, bool) {
    let mut out: Vec<AbortedTxnEntry> = Vec::with_capacity(bytes.len() / ABORTED_TXN_BYTES);
    let mut chunks = bytes.chunks_exact(ABORTED_TXN_BYTES);
    for chunk in &mut chunks {
        let mut raw = [0u8; ABORTED_TXN_BYTES];
        raw.copy_from_slice(chunk);
        let Some(entry) = AbortedTxnEntry::decode(&raw) else {
            return (out, false);
        };
        if out
            .last()
            .is_some_and(|prev| entry.last_offset <= prev.last_offset)
        {
            return (out, false);
        }
        out.push(entry);
    }
    let whole = chunks.remainder().is_empty();
    (out, whole)
}

/// Kafka's `TransactionIndex.collectAbortedTxns`: the entries of one segment that overlap
/// `[from, upto)` (`last_offset ≥ from` and `first_offset < upto`), and whether the search is
/// complete — an entry's last stable offset reached `upto`, so no later segment can hold an
/// aborted transaction starting below `upto`.
pub fn collect_aborted(
    entries: &[AbortedTxnEntry],
    from: Offset,
    upto: Offset,
    out: &mut Vec<AbortedTxn>,
) -> bool {
    for e in entries {
        if e.last_offset >= from && e.first_offset < upto {
            out.push(AbortedTxn {
                producer_id: e.producer_id,
                first_offset: e.first_offset,
            });
        }
        if e.last_stable_offset >= upto {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::validate_batch;

    /// The marker batch built from Kafka's documented layout by hand, byte by byte.
    fn hand_built_abort(pid: i64, epoch: i16, coordinator_epoch: i32, ts: i64) -> Vec<u8> {
        // The record: attributes 0, timestampDelta 0, offsetDelta 0, keyLength 4 (zigzag 8),
        // key [0,0, 0,0] (version 0, ABORT), valueLength 6 (zigzag 12), value [0,0] +
        // coordinator epoch, headers 0.
        let mut record = vec![0u8, 0, 0, 8, 0, 0, 0, 0, 12, 0, 0];
        record.extend_from_slice(&coordinator_epoch.to_be_bytes());
        record.push(0);
        assert_eq!(record.len(), 16);
        let mut b = Vec::new();
        b.extend_from_slice(&0i64.to_be_bytes()); // baseOffset
        b.extend_from_slice(&(49i32 + 1 + 16).to_be_bytes()); // batchLength
        b.extend_from_slice(&(-1i32).to_be_bytes()); // partitionLeaderEpoch
        b.push(2); // magic
        b.extend_from_slice(&[0; 4]); // crc
        b.extend_from_slice(&0x0030i16.to_be_bytes()); // isControlBatch | isTransactional
        b.extend_from_slice(&0i32.to_be_bytes()); // lastOffsetDelta
        b.extend_from_slice(&ts.to_be_bytes());
        b.extend_from_slice(&ts.to_be_bytes());
        b.extend_from_slice(&pid.to_be_bytes());
        b.extend_from_slice(&epoch.to_be_bytes());
        b.extend_from_slice(&(-1i32).to_be_bytes()); // baseSequence
        b.extend_from_slice(&1i32.to_be_bytes()); // recordsCount
        b.push(32); // record length 16, zigzag
        b.extend_from_slice(&record);
        let crc = crc32c::crc32c(&b[21..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        b
    }

    #[test]
    fn marker_codec_matches_kafkas_layout() {
        let marker = TxnMarker {
            producer_id: 4242,
            producer_epoch: 7,
            result: TxnResult::Abort,
            coordinator_epoch: 3,
        };
        let built = build_marker_batch(&marker, TimestampMs(1_700_000_000_000));
        let by_hand = hand_built_abort(4242, 7, 3, 1_700_000_000_000);
        assert_eq!(&built[..], &by_hand[..]);
        let header = validate_batch(&built).expect("valid batch");
        assert!(header.is_control() && header.is_transactional());
        assert_eq!(parse_marker(&by_hand), Ok(marker));
        let commit = TxnMarker {
            result: TxnResult::Commit,
            ..marker
        };
        let built = build_marker_batch(&commit, TimestampMs(5));
        // Key type at: header 61 + length 1 + attrs/ts/offset 3 + key length 1 + version 2.
        assert_eq!(&built[61 + 1 + 3 + 1 + 2..61 + 1 + 3 + 1 + 4], &[0, 1]);
        assert_eq!(parse_marker(&built), Ok(commit));
        // A data batch is not a marker.
        let data = crate::batch::build_batch(TimestampMs(0), &[b"x"]);
        assert!(parse_marker(&data).is_err());
        // An unknown control type is refused.
        let mut bad = by_hand.clone();
        bad[61 + 1 + 3 + 1 + 3] = 9;
        assert!(parse_marker(&bad).is_err());
        // A later key version is read for its type; a negative one is refused.
        let mut later = by_hand.clone();
        later[61 + 1 + 3 + 1..61 + 1 + 3 + 1 + 2].copy_from_slice(&3i16.to_be_bytes());
        assert_eq!(parse_marker(&later), Ok(marker));
        later[61 + 1 + 3 + 1..61 + 1 + 3 + 1 + 2].copy_from_slice(&(-1i16).to_be_bytes());
        assert!(parse_marker(&later).is_err());
    }

    #[test]
    fn a_control_batch_emptied_by_compaction_has_no_marker() {
        let mut empty = hand_built_abort(9, 0, 1, 5)[..BATCH_HEADER_BYTES].to_vec();
        let length = i32::try_from(BATCH_HEADER_BYTES - LOG_OVERHEAD_BYTES).unwrap();
        empty[8..12].copy_from_slice(&length.to_be_bytes());
        empty[57..61].copy_from_slice(&0i32.to_be_bytes()); // records count
        let crc = batch_crc(&empty);
        empty[17..21].copy_from_slice(&crc.to_be_bytes());
        crate::batch::validate_stored_batch(&empty).expect("a valid stored batch");
        assert_eq!(control_batch_marker(&empty), Ok(None));
        assert!(parse_marker(&empty).is_err(), "it holds no marker");
        let full = hand_built_abort(9, 0, 1, 5);
        assert!(control_batch_marker(&full).unwrap().is_some());
    }

    #[test]
    fn aborted_entries_round_trip_and_search() {
        let e = |pid, first, last, lso| AbortedTxnEntry {
            producer_id: pid,
            first_offset: Offset(first),
            last_offset: Offset(last),
            last_stable_offset: Offset(lso),
        };
        let entries = vec![e(1, 0, 10, 5), e(2, 5, 20, 21), e(3, 22, 30, 31)];
        let bytes = encode_txn_index(&entries);
        assert_eq!(bytes.len(), 3 * ABORTED_TXN_BYTES);
        // Hand-built first entry: version 0, pid 1, first 0, last 10, lso 5.
        let mut first = vec![0u8, 0];
        for v in [1i64, 0, 10, 5] {
            first.extend_from_slice(&v.to_be_bytes());
        }
        assert_eq!(&bytes[..ABORTED_TXN_BYTES], &first[..]);
        assert_eq!(decode_txn_index(&bytes), (entries.clone(), true));
        // A torn tail and zero padding keep the valid prefix.
        assert_eq!(
            decode_txn_index(&bytes[..40]),
            (entries[..1].to_vec(), false)
        );
        let mut padded = bytes.clone();
        padded.extend_from_slice(&[0u8; 100]);
        assert_eq!(decode_txn_index(&padded).0, entries);
        let mut out = Vec::new();
        assert!(collect_aborted(&entries, Offset(11), Offset(21), &mut out));
        assert_eq!(
            out,
            vec![AbortedTxn {
                producer_id: 2,
                first_offset: Offset(5)
            }]
        );
        out.clear();
        assert!(!collect_aborted(&entries, Offset(0), Offset(100), &mut out));
        assert_eq!(out.len(), 3);
    }
}
