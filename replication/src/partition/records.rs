//! Reading individual records inside a stored RecordBatch v2, for the few places a partition
//! needs record granularity (ListOffsets by timestamp). Record layout (Kafka protocol guide,
//! "Record"): `length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
//! key | value | headers`, varints zigzag-encoded.

use storage::{varint, RecordBatch};

/// The offset and timestamp of the first record of `batch` whose timestamp is ≥ `target` ms.
/// Falls back to the batch's base offset and max timestamp when the records cannot be read
/// here: compressed batches (decompression comes with the compression issue), LogAppendTime
/// batches (every record carries the batch time), or a malformed record section.
pub(crate) fn first_offset_at_or_after(batch: &RecordBatch, target: i64) -> (i64, i64) {
    let header = batch.header();
    let fallback = (header.base_offset.0, header.max_timestamp.0);
    if header.compression() != 0 || header.is_log_append_time() {
        return fallback;
    }
    let bytes = batch.to_vec();
    let mut at = storage::BATCH_HEADER_BYTES;
    while at < bytes.len() {
        let Some((length, n)) = varint(&bytes[at..]) else {
            return fallback;
        };
        let body_start = at + n;
        let Some(body_end) = usize::try_from(length)
            .ok()
            .and_then(|l| body_start.checked_add(l))
        else {
            return fallback;
        };
        let Some(body) = bytes.get(body_start..body_end) else {
            return fallback;
        };
        let Some((ts_delta, n1)) = body.get(1..).and_then(varint) else {
            return fallback;
        };
        let Some((offset_delta, _)) = body.get(1 + n1..).and_then(varint) else {
            return fallback;
        };
        let timestamp = header.base_timestamp.0.saturating_add(ts_delta);
        if timestamp >= target {
            return (header.base_offset.0 + offset_delta, timestamp);
        }
        at = body_end;
    }
    fallback
}

#[cfg(test)]
mod tests {
    use super::*;
    use storage::{build_batch, TimestampMs};

    #[test]
    fn finds_the_first_record_at_or_after_a_time() {
        // Records at 1000, 1001, 1002 (build_batch spaces them 1 ms apart).
        let batch =
            RecordBatch::from_contiguous(build_batch(TimestampMs(1000), &[b"a", b"b", b"c"]));
        assert_eq!(first_offset_at_or_after(&batch, 1001), (1, 1001));
        assert_eq!(first_offset_at_or_after(&batch, 0), (0, 1000));
        assert_eq!(first_offset_at_or_after(&batch, 1002), (2, 1002));
    }
}
