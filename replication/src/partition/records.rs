//! Reading individual records inside a stored RecordBatch v2, for the few places a partition
//! needs record granularity (ListOffsets by timestamp). The records are walked by storage's
//! reader ([`storage::records_of`]), the one parser of the batch layout.

use storage::{records_of, RecordBatch};

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
    let Ok(records) = records_of(&bytes) else {
        return fallback;
    };
    records
        .iter()
        .find(|r| r.timestamp.0 >= target)
        .map_or(fallback, |r| (r.offset.0, r.timestamp.0))
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
