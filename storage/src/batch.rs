//! Kafka RecordBatch v2 header: parsing, validation and the fields the log stamps on append.
//!
//! Layout (Kafka protocol guide, "Record Batch"), all big-endian:
//! `baseOffset i64 | batchLength i32 | partitionLeaderEpoch i32 | magic i8 | crc u32 |
//! attributes i16 | lastOffsetDelta i32 | baseTimestamp i64 | maxTimestamp i64 |
//! producerId i64 | producerEpoch i16 | baseSequence i32 | recordsCount i32 | records...`.
//! `batchLength` counts the bytes after itself; the CRC-32C covers `attributes` to the end, so
//! the log can rewrite `baseOffset` and `partitionLeaderEpoch` without recomputing it.

use crate::error::BatchError;
use crate::types::{LeaderEpoch, Offset, TimestampMs};
use bytes::{Bytes, BytesMut};

/// Size of the RecordBatch v2 header, in bytes.
pub const BATCH_HEADER_BYTES: usize = 61;
/// Bytes before the `batchLength` field's coverage starts (`baseOffset` + `batchLength`).
pub const LOG_OVERHEAD_BYTES: usize = 12;
const MAGIC_AT: usize = 16;
const CRC_AT: usize = 17;
const CRC_COVERS_FROM: usize = 21;
const ATTRIBUTES_AT: usize = 21;
const LAST_OFFSET_DELTA_AT: usize = 23;
const BASE_TIMESTAMP_AT: usize = 27;
const MAX_TIMESTAMP_AT: usize = 35;
const PRODUCER_ID_AT: usize = 43;
const PRODUCER_EPOCH_AT: usize = 51;
const BASE_SEQUENCE_AT: usize = 53;
const RECORDS_COUNT_AT: usize = 57;
const LEADER_EPOCH_AT: usize = 12;
const BATCH_LENGTH_AT: usize = 8;

/// `attributes` bit 4: the batch belongs to a transaction (KIP-98).
pub const TRANSACTIONAL_BIT: i16 = 0x10;
/// `attributes` bit 5: a control batch (a transaction marker, KIP-98).
pub const CONTROL_BIT: i16 = 0x20;

/// The parsed fixed header of one RecordBatch v2.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: Offset,
    /// Bytes after the `batchLength` field; the whole batch is `batch_length + 12` bytes.
    pub batch_length: i32,
    pub partition_leader_epoch: LeaderEpoch,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: TimestampMs,
    pub max_timestamp: TimestampMs,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
}

impl BatchHeader {
    /// Whole batch size in bytes, including `baseOffset` and `batchLength`.
    pub fn size_bytes(&self) -> usize {
        // batch_length is checked non-negative by `parse`.
        LOG_OVERHEAD_BYTES + usize::try_from(self.batch_length).unwrap_or(0)
    }

    /// Offset of the last record in the batch.
    pub fn last_offset(&self) -> Offset {
        self.base_offset.plus(i64::from(self.last_offset_delta))
    }

    /// Compression codec id from the attributes (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
    pub fn compression(&self) -> u8 {
        // Masked to 3 bits, so the narrowing cannot lose information.
        (self.attributes & 0x07) as u8
    }

    /// Whether `attributes` bit 3 (timestamp type) says LogAppendTime.
    pub fn is_log_append_time(&self) -> bool {
        self.attributes & 0x08 != 0
    }

    /// Whether `attributes` bit 4 says the batch belongs to a transaction (KIP-98).
    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_BIT != 0
    }

    /// Whether `attributes` bit 5 says the batch is a control batch (a transaction marker).
    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_BIT != 0
    }

    /// Parses the fixed header from the start of `buf`. Checks only that 61 bytes exist and
    /// that `batchLength` is at least the header's remainder; see [`validate_batch`] for the rest.
    pub fn parse(buf: &[u8]) -> Result<BatchHeader, BatchError> {
        if buf.len() < BATCH_HEADER_BYTES {
            return Err(BatchError::Truncated {
                have: buf.len(),
                need: BATCH_HEADER_BYTES,
            });
        }
        let header = BatchHeader {
            base_offset: Offset(i64_at(buf, 0)),
            batch_length: i32_at(buf, BATCH_LENGTH_AT),
            partition_leader_epoch: LeaderEpoch(i32_at(buf, LEADER_EPOCH_AT)),
            magic: i8::from_be_bytes([buf[MAGIC_AT]]),
            crc: u32::from_be_bytes(array_at(buf, CRC_AT)),
            attributes: i16::from_be_bytes(array_at(buf, ATTRIBUTES_AT)),
            last_offset_delta: i32_at(buf, LAST_OFFSET_DELTA_AT),
            base_timestamp: TimestampMs(i64_at(buf, BASE_TIMESTAMP_AT)),
            max_timestamp: TimestampMs(i64_at(buf, MAX_TIMESTAMP_AT)),
            producer_id: i64_at(buf, PRODUCER_ID_AT),
            producer_epoch: i16::from_be_bytes(array_at(buf, PRODUCER_EPOCH_AT)),
            base_sequence: i32_at(buf, BASE_SEQUENCE_AT),
            records_count: i32_at(buf, RECORDS_COUNT_AT),
        };
        let min_length = BATCH_HEADER_BYTES - LOG_OVERHEAD_BYTES;
        if usize::try_from(header.batch_length).map_or(true, |l| l < min_length) {
            return Err(BatchError::LengthMismatch {
                header: usize::try_from(header.batch_length).unwrap_or(0) + LOG_OVERHEAD_BYTES,
                actual: buf.len(),
            });
        }
        Ok(header)
    }
}

fn array_at<const N: usize>(buf: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&buf[at..at + N]);
    out
}

fn i32_at(buf: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(array_at(buf, at))
}

fn i64_at(buf: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(array_at(buf, at))
}

/// `batch` (one whole batch, e.g. from [`build_batch_kv`]) made a transactional batch of
/// `producer_id` at `producer_epoch` from `base_sequence`: the transactional attribute bit
/// and the producer fields set, the CRC-32C computed again (what Kafka's coordinators write
/// for a TxnOffsetCommit).
///
/// # Panics
/// When `batch` is shorter than a batch header.
pub fn transactional_batch(
    batch: &[u8],
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
) -> Bytes {
    assert!(batch.len() >= BATCH_HEADER_BYTES, "a whole batch");
    let mut b = batch.to_vec();
    let attributes = i16::from_be_bytes([b[ATTRIBUTES_AT], b[ATTRIBUTES_AT + 1]]);
    b[ATTRIBUTES_AT..ATTRIBUTES_AT + 2]
        .copy_from_slice(&(attributes | TRANSACTIONAL_BIT).to_be_bytes());
    b[PRODUCER_ID_AT..PRODUCER_ID_AT + 8].copy_from_slice(&producer_id.to_be_bytes());
    b[PRODUCER_EPOCH_AT..PRODUCER_EPOCH_AT + 2].copy_from_slice(&producer_epoch.to_be_bytes());
    b[BASE_SEQUENCE_AT..BASE_SEQUENCE_AT + 4].copy_from_slice(&base_sequence.to_be_bytes());
    let crc = batch_crc(&b);
    b[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(b)
}

/// CRC-32C (Castagnoli) of a batch's covered bytes, as Kafka computes it.
pub fn batch_crc(batch: &[u8]) -> u32 {
    crc32c::crc32c(&batch[CRC_COVERS_FROM..])
}

/// Fully validates one batch occupying exactly `batch` as a producer sends it: header, magic 2,
/// `batchLength` equal to the bytes given, `recordsCount == lastOffsetDelta + 1`, and the
/// CRC-32C.
pub fn validate_batch(batch: &[u8]) -> Result<BatchHeader, BatchError> {
    let header = validate_stored_batch(batch)?;
    if header.records_count < 1
        || header.last_offset_delta.checked_add(1) != Some(header.records_count)
    {
        return Err(BatchError::RecordCount {
            records: header.records_count,
            last_offset_delta: header.last_offset_delta,
        });
    }
    Ok(header)
}

/// Validates one batch as a log may hold it after compaction (issue #27): as
/// [`validate_batch`], except that the cleaner may have removed records, so `recordsCount`
/// may be anything from 0 (a producer's last batch kept empty, Kafka's `RETAIN_EMPTY`) to
/// `lastOffsetDelta + 1`. What the records section holds must still match `recordsCount`.
pub fn validate_stored_batch(batch: &[u8]) -> Result<BatchHeader, BatchError> {
    let header = BatchHeader::parse(batch)?;
    if header.magic != 2 {
        return Err(BatchError::Magic(header.magic));
    }
    if header.size_bytes() != batch.len() {
        return Err(BatchError::LengthMismatch {
            header: header.size_bytes(),
            actual: batch.len(),
        });
    }
    if header.records_count < 0
        || header.last_offset_delta < 0
        || i64::from(header.records_count) > i64::from(header.last_offset_delta) + 1
    {
        return Err(BatchError::RecordCount {
            records: header.records_count,
            last_offset_delta: header.last_offset_delta,
        });
    }
    count_validation_pass();
    let computed = batch_crc(batch);
    if computed != header.crc {
        return Err(BatchError::Crc {
            header: header.crc,
            computed,
        });
    }
    if header.compression() == 0 {
        let found = count_records(&batch[BATCH_HEADER_BYTES..]);
        if found != Some(i64::from(header.records_count)) {
            return Err(BatchError::RecordCount {
                records: header.records_count,
                last_offset_delta: header.last_offset_delta,
            });
        }
    }
    Ok(header)
}

#[cfg(any(test, feature = "validation-count"))]
thread_local! {
    /// CRC-32C checks of a batch made on this thread (see [`validation_passes`]).
    static VALIDATION_PASSES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many batches this thread has checked ([`validate_stored_batch`], under
/// [`validate_batch`] too: one CRC-32C pass each) — for tests that count the passes of a
/// produce (feature `validation-count`; never in the `sluice` binary).
#[cfg(any(test, feature = "validation-count"))]
pub fn validation_passes() -> u64 {
    VALIDATION_PASSES.with(std::cell::Cell::get)
}

#[cfg(any(test, feature = "validation-count"))]
fn count_validation_pass() {
    VALIDATION_PASSES.with(|n| n.set(n.get() + 1));
}

#[cfg(not(any(test, feature = "validation-count")))]
fn count_validation_pass() {}

/// Counts the length-prefixed records of an uncompressed record section; `None` when the
/// lengths do not tile it exactly. (Compressed sections are checked by the broker, which holds
/// the codecs, on the decompressed bytes.)
pub fn count_records(mut records: &[u8]) -> Option<i64> {
    let mut count = 0i64;
    while !records.is_empty() {
        let (length, used) = varint(records)?;
        let end = used.checked_add(usize::try_from(length).ok()?)?;
        records = records.get(end..)?;
        count += 1;
    }
    Some(count)
}

/// Decodes a zigzag varint (Kafka's record fields, up to 10 bytes): the value and the bytes
/// used, or `None` when malformed.
pub fn varint(buf: &[u8]) -> Option<(i64, usize)> {
    let mut raw: u64 = 0;
    for (i, b) in buf.iter().take(10).enumerate() {
        raw |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            let value = i64::try_from(raw >> 1).ok()? ^ -i64::try_from(raw & 1).ok()?;
            return Some((value, i + 1));
        }
    }
    None
}

/// Splits `records` (a produce request's record set for one partition: one or more whole
/// batches back to back) into validated batches ([`validate_batch`]). Any truncated or invalid
/// batch fails the whole set, so an append is all or nothing.
pub fn split_batches(records: &Bytes) -> Result<Vec<(BatchHeader, Bytes)>, BatchError> {
    split_with(records, validate_batch)
}

/// As [`split_batches`] for batches a log already holds (a leader's, to a follower), which a
/// clean may have thinned ([`validate_stored_batch`]).
pub fn split_stored_batches(records: &Bytes) -> Result<Vec<(BatchHeader, Bytes)>, BatchError> {
    split_with(records, validate_stored_batch)
}

fn split_with(
    records: &Bytes,
    validate: fn(&[u8]) -> Result<BatchHeader, BatchError>,
) -> Result<Vec<(BatchHeader, Bytes)>, BatchError> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < records.len() {
        let rest = &records[at..];
        let header = BatchHeader::parse(rest)?;
        let size = header.size_bytes();
        if size > rest.len() {
            return Err(BatchError::Truncated {
                have: rest.len(),
                need: size,
            });
        }
        let header = validate(&rest[..size])?;
        out.push((header, records.slice(at..at + size)));
        at += size;
    }
    if out.is_empty() {
        return Err(BatchError::Truncated {
            have: 0,
            need: BATCH_HEADER_BYTES,
        });
    }
    Ok(out)
}

/// One stored batch as two shared buffers: its 61-byte header, owned by the log so it can be
/// stamped (and, for LogAppendTime, rewritten), and its records, still the producer's bytes.
/// Concatenated they are the batch exactly as on disk and on the wire; a fetch sends both
/// chunks, so no record byte is copied to stamp a batch. Cheap to clone (two refcounts).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordBatch {
    header: Bytes,
    records: Bytes,
}

impl RecordBatch {
    /// A batch read whole from disk or built by a caller: split without copying.
    /// `batch` must hold at least the 61-byte header (as [`validate_batch`] ensures).
    pub fn from_contiguous(batch: Bytes) -> RecordBatch {
        assert!(
            batch.len() >= BATCH_HEADER_BYTES,
            "a record batch holds its header"
        );
        let mut header = batch;
        let records = header.split_off(BATCH_HEADER_BYTES);
        RecordBatch { header, records }
    }

    /// Total size in bytes.
    pub fn len(&self) -> usize {
        self.header.len() + self.records.len()
    }

    /// Always false: a batch holds at least its header.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The parsed header.
    pub fn header(&self) -> BatchHeader {
        BatchHeader::parse(&self.header).expect("stored batches have a valid header")
    }

    /// The two chunks in wire order: header, then records.
    pub fn chunks(&self) -> [&Bytes; 2] {
        [&self.header, &self.records]
    }

    /// Copies bytes `[from, to)` of the batch into `dst` (`dst.len() == to - from`).
    pub fn copy_range(&self, from: usize, to: usize, dst: &mut [u8]) {
        let split = self.header.len();
        let mut at = 0;
        if from < split {
            let end = to.min(split);
            dst[..end - from].copy_from_slice(&self.header[from..end]);
            at = end - from;
        }
        if to > split {
            let start = from.max(split) - split;
            dst[at..].copy_from_slice(&self.records[start..to - split]);
        }
    }

    /// The batch as one contiguous vector (tests, diagnostics: this copies).
    pub fn to_vec(&self) -> Vec<u8> {
        [self.header.as_ref(), self.records.as_ref()].concat()
    }
}

/// The batch `batch` (a whole batch, header first) with its records section replaced by
/// `records`, compressed with codec `compression` (as [`BatchHeader::compression`] numbers
/// them): the codec bits of `attributes`, `batchLength` and the CRC-32C are updated, every other
/// header field is kept. For the broker's recompression (`compression.type`); the records
/// themselves are never re-encoded.
///
/// # Errors
/// [`BatchError::Truncated`] when `batch` is shorter than the 61-byte header;
/// [`BatchError::TooLarge`] when the new batch would exceed `i32::MAX` bytes.
pub fn replace_records(batch: &[u8], compression: u8, records: &[u8]) -> Result<Bytes, BatchError> {
    let Some(header) = batch.get(..BATCH_HEADER_BYTES) else {
        return Err(BatchError::Truncated {
            have: batch.len(),
            need: BATCH_HEADER_BYTES,
        });
    };
    let size = BATCH_HEADER_BYTES.saturating_add(records.len());
    let too_large = || BatchError::TooLarge {
        size,
        max: usize::try_from(i32::MAX).unwrap_or(usize::MAX),
    };
    let length = i32::try_from(size - LOG_OVERHEAD_BYTES).map_err(|_| too_large())?;
    let mut out = BytesMut::with_capacity(size);
    out.extend_from_slice(header);
    out.extend_from_slice(records);
    let attributes = i16::from_be_bytes(array_at(&out, ATTRIBUTES_AT));
    let attributes = (attributes & !0x07) | i16::from(compression & 0x07);
    out[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&attributes.to_be_bytes());
    out[BATCH_LENGTH_AT..BATCH_LENGTH_AT + 4].copy_from_slice(&length.to_be_bytes());
    let crc = batch_crc(&out);
    out[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    Ok(out.freeze())
}

/// `batch` (validated) with `baseOffset` and `partitionLeaderEpoch` set. These fields lie
/// outside the CRC, so it stays valid. With `log_append_time` (topics with
/// `message.timestamp.type=LogAppendTime`), the timestamp-type attribute bit is set and
/// `maxTimestamp` becomes that time, as Kafka does, and the CRC-32C is recomputed (one pass over
/// the records, no copy). Only the 61-byte header is copied; the records stay the request's
/// bytes.
pub fn stamp_batch(
    batch: &Bytes,
    base_offset: Offset,
    leader_epoch: LeaderEpoch,
    log_append_time: Option<TimestampMs>,
) -> RecordBatch {
    let mut header = [0u8; BATCH_HEADER_BYTES];
    header.copy_from_slice(&batch[..BATCH_HEADER_BYTES]);
    header[0..8].copy_from_slice(&base_offset.0.to_be_bytes());
    header[LEADER_EPOCH_AT..LEADER_EPOCH_AT + 4].copy_from_slice(&leader_epoch.0.to_be_bytes());
    let records = batch.slice(BATCH_HEADER_BYTES..);
    if let Some(now) = log_append_time {
        let attributes =
            i16::from_be_bytes([header[ATTRIBUTES_AT], header[ATTRIBUTES_AT + 1]]) | 0x08;
        header[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&attributes.to_be_bytes());
        header[MAX_TIMESTAMP_AT..MAX_TIMESTAMP_AT + 8].copy_from_slice(&now.0.to_be_bytes());
        let crc = crc32c::crc32c_append(crc32c::crc32c(&header[CRC_COVERS_FROM..]), &records);
        header[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    }
    RecordBatch {
        // One allocation, shared by every clone (the cache's, the write queue's, a fetch's):
        // a frozen `BytesMut` would allocate again when first cloned.
        header: Bytes::from_owner(header),
        records,
    }
}

/// Test and benchmark helper: builds a valid uncompressed RecordBatch v2 holding `records`
/// records with the given values and timestamps `base_timestamp + i`, as a producer would.
pub fn build_batch(base_timestamp: TimestampMs, values: &[&[u8]]) -> Bytes {
    let records: Vec<KeyValue<'_>> = values.iter().map(|v| (None, Some(*v))).collect();
    build_batch_kv(base_timestamp, &records)
}

/// One record's key and value for [`build_batch_kv`]; `None` is Kafka's null (a value of
/// `None` is a tombstone).
pub type KeyValue<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

/// Builds a valid uncompressed RecordBatch v2 (base offset 0, no producer id, CRC-32C set)
/// holding `records` with timestamps `base_timestamp + i` ms: what the broker writes to its
/// internal topics, and what tests produce.
///
/// # Panics
/// When `records` is empty or the batch would exceed `i32::MAX` bytes.
pub fn build_batch_kv(base_timestamp: TimestampMs, records: &[KeyValue<'_>]) -> Bytes {
    assert!(
        !records.is_empty(),
        "a record batch holds at least one record"
    );
    let mut section = Vec::new();
    for (i, (key, value)) in records.iter().enumerate() {
        let mut body = Vec::new();
        body.push(0u8); // attributes
        put_varint(&mut body, i as i64); // timestamp delta
        put_varint(&mut body, i as i64); // offset delta
        for field in [key, value] {
            match field {
                Some(bytes) => {
                    put_varint(&mut body, bytes.len() as i64);
                    body.extend_from_slice(bytes);
                }
                None => put_varint(&mut body, -1),
            }
        }
        put_varint(&mut body, 0); // headers
        put_varint(&mut section, body.len() as i64);
        section.extend_from_slice(&body);
    }
    let count = i32::try_from(records.len()).expect("record count fits i32");
    let mut out = Vec::with_capacity(BATCH_HEADER_BYTES + section.len());
    out.extend_from_slice(&0i64.to_be_bytes());
    let batch_length = i32::try_from(BATCH_HEADER_BYTES - LOG_OVERHEAD_BYTES + section.len())
        .expect("record batch fits i32");
    out.extend_from_slice(&batch_length.to_be_bytes());
    out.extend_from_slice(&(-1i32).to_be_bytes()); // partition leader epoch
    out.push(2); // magic
    out.extend_from_slice(&0u32.to_be_bytes()); // crc, set below
    out.extend_from_slice(&0i16.to_be_bytes()); // attributes
    out.extend_from_slice(&(count - 1).to_be_bytes());
    out.extend_from_slice(&base_timestamp.0.to_be_bytes());
    let max_timestamp = base_timestamp.0 + i64::from(count - 1);
    out.extend_from_slice(&max_timestamp.to_be_bytes());
    out.extend_from_slice(&(-1i64).to_be_bytes()); // producer id
    out.extend_from_slice(&(-1i16).to_be_bytes()); // producer epoch
    out.extend_from_slice(&(-1i32).to_be_bytes()); // base sequence
    out.extend_from_slice(&count.to_be_bytes());
    out.extend_from_slice(&section);
    let crc = batch_crc(&out);
    out[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(out)
}

/// One record of an uncompressed batch, as [`records_of`] yields it: its offset, its timestamp
/// and its key and value (`None` = null), borrowed from the batch bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    pub offset: Offset,
    /// `baseTimestamp + timestampDelta`, in ms: the producer's (CreateTime) timestamp. In a
    /// LogAppendTime batch every record's timestamp is the batch's `maxTimestamp` instead.
    pub timestamp: TimestampMs,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
}

/// The bodies of an uncompressed batch's records (each without its length prefix), in order:
/// the one walk of the record layout, for [`records_of`] and the cleaner.
///
/// # Errors
/// [`BatchError::Malformed`] when a record's length runs past the batch.
pub(crate) fn record_bodies<'a>(
    batch: &'a [u8],
    header: &BatchHeader,
) -> Result<Vec<&'a [u8]>, BatchError> {
    let malformed = |why: &'static str| BatchError::Malformed(why);
    let end = header.size_bytes().min(batch.len());
    let mut at = BATCH_HEADER_BYTES;
    let mut out = Vec::new();
    while at < end {
        let (length, n) = varint(&batch[at..end]).ok_or(malformed("record length"))?;
        let body_start = at + n;
        let body_end = usize::try_from(length)
            .ok()
            .and_then(|l| body_start.checked_add(l))
            .filter(|e| *e <= end)
            .ok_or(malformed("record length"))?;
        out.push(&batch[body_start..body_end]);
        at = body_end;
    }
    Ok(out)
}

/// The records of one whole uncompressed batch (`batch` starts at its `baseOffset`).
///
/// # Errors
/// [`BatchError::Malformed`] when the batch is compressed or a record does not parse.
pub fn records_of(batch: &[u8]) -> Result<Vec<Record<'_>>, BatchError> {
    let header = BatchHeader::parse(batch)?;
    let malformed = |why: &'static str| BatchError::Malformed(why);
    if header.compression() != 0 {
        return Err(malformed("compressed batch"));
    }
    let mut out = Vec::new();
    for body in record_bodies(batch, &header)? {
        let mut pos = 1; // attributes
        let mut next = || -> Result<i64, BatchError> {
            let (v, n) = varint(body.get(pos..).unwrap_or(&[])).ok_or(malformed("record field"))?;
            pos += n;
            Ok(v)
        };
        let timestamp_delta = next()?;
        let offset_delta = next()?;
        let field = |pos: &mut usize| -> Result<Option<&[u8]>, BatchError> {
            let (len, n) =
                varint(body.get(*pos..).unwrap_or(&[])).ok_or(malformed("record field"))?;
            *pos += n;
            if len < 0 {
                return Ok(None);
            }
            let len = usize::try_from(len).map_err(|_| malformed("record field"))?;
            let bytes = body
                .get(*pos..*pos + len)
                .ok_or(malformed("record field"))?;
            *pos += len;
            Ok(Some(bytes))
        };
        let key = field(&mut pos)?;
        let value = field(&mut pos)?;
        out.push(Record {
            offset: header.base_offset.plus(offset_delta),
            timestamp: TimestampMs(header.base_timestamp.0.saturating_add(timestamp_delta)),
            key,
            value,
        });
    }
    Ok(out)
}

/// Appends `v` as a zig-zag varint (the record format's lengths, deltas and headers).
pub(crate) fn put_varint(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    loop {
        let byte = (z & 0x7f) as u8;
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

    #[test]
    fn key_value_batches_read_back_record_by_record() {
        let batch = build_batch_kv(
            TimestampMs(5),
            &[
                (Some(b"k1"), Some(b"v1")),
                (Some(b"k2"), None),
                (None, Some(b"")),
            ],
        );
        validate_batch(&batch).expect("valid");
        let stamped = stamp_batch(&batch, Offset(10), LeaderEpoch(0), None).to_vec();
        let records = records_of(&stamped).expect("readable");
        let got: Vec<_> = records
            .iter()
            .map(|r| (r.offset.0, r.key, r.value))
            .collect();
        let times: Vec<i64> = records.iter().map(|r| r.timestamp.0).collect();
        assert_eq!(times, vec![5, 6, 7], "baseTimestamp + timestampDelta");
        assert_eq!(
            got,
            vec![
                (10, Some(&b"k1"[..]), Some(&b"v1"[..])),
                (11, Some(&b"k2"[..]), None),
                (12, None, Some(&b""[..])),
            ]
        );
        let mut torn = stamped.clone();
        torn.truncate(torn.len() - 1);
        assert!(
            records_of(&torn).is_err(),
            "a cut record is an error, not a panic"
        );
    }

    #[test]
    fn built_batch_validates_and_stamping_keeps_crc() {
        let batch = build_batch(TimestampMs(1000), &[b"a", b"bb", b"ccc"]);
        let h = validate_batch(&batch).unwrap();
        assert_eq!(h.records_count, 3);
        assert_eq!(h.max_timestamp, TimestampMs(1002));
        let stamped = stamp_batch(&batch, Offset(42), LeaderEpoch(7), None);
        let h = validate_batch(&stamped.to_vec()).unwrap();
        assert_eq!(stamped.header(), h);
        let appended = stamp_batch(&batch, Offset(1), LeaderEpoch(0), Some(TimestampMs(99_999)));
        let a = validate_batch(&appended.to_vec()).expect("CRC recomputed");
        assert!(a.is_log_append_time());
        assert_eq!(a.max_timestamp, TimestampMs(99_999));
        assert_eq!(a.base_timestamp, TimestampMs(1000));
        let mut middle = vec![0u8; 20];
        stamped.copy_range(50, 70, &mut middle);
        assert_eq!(middle, stamped.to_vec()[50..70]);
        assert_eq!(h.base_offset, Offset(42));
        assert_eq!(h.last_offset(), Offset(44));
        assert_eq!(h.partition_leader_epoch, LeaderEpoch(7));
    }

    #[test]
    fn replaced_records_keep_the_header_and_a_valid_crc() {
        let batch = build_batch(TimestampMs(7), &[b"a", b"bb"]);
        let same = replace_records(&batch, 0, &batch[BATCH_HEADER_BYTES..]).expect("fits");
        assert_eq!(same, batch, "same section, same codec: the same bytes");
        // A section tagged as codec 4 (zstd): only the codec bits, length and CRC change.
        let other = replace_records(&batch, 4, b"xyz").expect("fits");
        assert_eq!(other.len(), BATCH_HEADER_BYTES + 3);
        let h = BatchHeader::parse(&other).expect("header");
        let original = BatchHeader::parse(&batch).expect("header");
        assert_eq!(h.compression(), 4);
        assert_eq!(h.size_bytes(), other.len());
        assert_eq!(h.crc, batch_crc(&other));
        assert_eq!(
            BatchHeader {
                attributes: original.attributes,
                batch_length: original.batch_length,
                crc: original.crc,
                ..h
            },
            original
        );
        assert!(matches!(
            replace_records(&batch[..60], 0, b""),
            Err(BatchError::Truncated { .. })
        ));
    }

    #[test]
    fn bad_batches_are_typed_errors() {
        let batch = build_batch(TimestampMs(0), &[b"x"]);
        assert!(matches!(
            validate_batch(&batch[..30]),
            Err(BatchError::Truncated { .. })
        ));
        let mut wrong_magic = batch.to_vec();
        wrong_magic[MAGIC_AT] = 1;
        assert_eq!(validate_batch(&wrong_magic), Err(BatchError::Magic(1)));
        let mut wrong_crc = batch.to_vec();
        let last = wrong_crc.len() - 1;
        wrong_crc[last] ^= 0xff;
        assert!(matches!(
            validate_batch(&wrong_crc),
            Err(BatchError::Crc { .. })
        ));
        let mut longer = batch.to_vec();
        longer.push(0);
        assert!(matches!(
            validate_batch(&longer),
            Err(BatchError::LengthMismatch { .. })
        ));
        let two = Bytes::from([batch.to_vec(), batch[..batch.len() - 1].to_vec()].concat());
        assert!(matches!(
            split_batches(&two),
            Err(BatchError::Truncated { .. })
        ));
        let mut bad_count = batch.to_vec();
        bad_count[RECORDS_COUNT_AT..RECORDS_COUNT_AT + 4].copy_from_slice(&5i32.to_be_bytes());
        let crc = batch_crc(&bad_count);
        bad_count[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
        assert!(matches!(
            validate_batch(&bad_count),
            Err(BatchError::RecordCount { .. })
        ));
        // A count that agrees with lastOffsetDelta but not with the records inside.
        let mut inflated = batch.to_vec();
        inflated[LAST_OFFSET_DELTA_AT..LAST_OFFSET_DELTA_AT + 4]
            .copy_from_slice(&(i32::MAX - 1).to_be_bytes());
        inflated[RECORDS_COUNT_AT..RECORDS_COUNT_AT + 4].copy_from_slice(&i32::MAX.to_be_bytes());
        let crc = batch_crc(&inflated);
        inflated[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
        assert!(matches!(
            validate_batch(&inflated),
            Err(BatchError::RecordCount { .. })
        ));
        assert_eq!(varint(&[0xac, 0x02]), Some((150, 2)));
        assert_eq!(varint(&[0x01]), Some((-1, 1)));
        assert_eq!(varint(&[0x80; 11]), None);
    }
}
