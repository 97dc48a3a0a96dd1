//! What the broker checks and changes in a produce record set before the log appends it
//! (Kafka's LogValidator, the parts that need the topic config or the codecs): compressed
//! batches are decompressed to check their record count; `compression.type` other than
//! `producer` recompresses batches to that codec; CreateTime topics refuse timestamps more than
//! `message.timestamp.before.max.ms` before or `message.timestamp.after.max.ms` after the
//! broker's clock (Kafka 4's pair; the batch's first and largest timestamps are checked); a
//! topic whose `cleanup.policy` compacts refuses a record without a key (Kafka's
//! "Compacted topic cannot accept message without key"; only those topics pay for the walk over
//! the records). Record bytes are never
//! re-encoded: recompression rewrites only the compressed stream and the header fields it
//! covers (attributes, length, CRC).
//!
//! The batches come split and CRC-checked once ([`ValidatedBatches`], on the owning shard
//! before these checks); the log appends what [`prepare`] returns without checking it again.

use crate::compression::{compress, decompress};
use storage::{count_records, records_of, replace_records, ValidatedBatches, BATCH_HEADER_BYTES};
use tuning::config::{TimestampType, TopicConfig};

/// Why [`prepare`] refused a record set (mapped to Kafka codes in `crate::errors`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProduceCheckError {
    /// A compressed batch does not decompress, or cannot be recompressed.
    #[error("a compressed batch does not decompress")]
    Corrupt,
    /// A compressed batch's record count disagrees with its records.
    #[error("inner record count does not match the batch header")]
    RecordCount,
    /// A CreateTime timestamp outside the topic's allowed window around the broker's clock.
    #[error("timestamp outside message.timestamp.before/after.max.ms")]
    Timestamp,
    /// A record without a key on a compacted topic; `batch_index` is the record's index in
    /// its batch (Kafka's `RecordError.batchIndex`).
    #[error(
        "Compacted topic cannot accept message without key (record {batch_index} of its batch)"
    )]
    KeylessRecord { batch_index: i32 },
}

/// [`ProduceCheckError::KeylessRecord`] for the first record of uncompressed `batch` that has
/// no key. Errors: [`ProduceCheckError::Corrupt`] when its records do not parse.
fn check_keys(batch: &[u8]) -> Result<(), ProduceCheckError> {
    let records = records_of(batch).map_err(|_| ProduceCheckError::Corrupt)?;
    match records.iter().position(|r| r.key.is_none()) {
        Some(i) => Err(ProduceCheckError::KeylessRecord {
            batch_index: i32::try_from(i).unwrap_or(i32::MAX),
        }),
        None => Ok(()),
    }
}

/// Checks `batches` (split and CRC-checked once, where the produce reached the partition's
/// owning shard: [`ValidatedBatches::validate`]) against the topic's config at `now_ms` and
/// recompresses them if the topic asks; returns the set to append (the same batches when
/// nothing changed; a recompressed batch gets its CRC-32C from storage, with no new pass over
/// the others). Errors: [`ProduceCheckError::Corrupt`] (a compressed batch that does not
/// decompress), [`ProduceCheckError::RecordCount`] (its record count is wrong),
/// [`ProduceCheckError::Timestamp`], [`ProduceCheckError::KeylessRecord`] (compacted topics
/// only).
pub fn prepare(
    mut batches: ValidatedBatches,
    config: &TopicConfig,
    now_ms: i64,
) -> Result<ValidatedBatches, ProduceCheckError> {
    let target = config.compression_type.codec();
    let before_max = i64::try_from(config.message_timestamp_before_max_ms).unwrap_or(i64::MAX);
    let after_max = i64::try_from(config.message_timestamp_after_max_ms).unwrap_or(i64::MAX);
    let check_time = config.message_timestamp_type() == TimestampType::CreateTime;
    let check_keys_of = config.log.cleanup_policy.compacts();
    let corrupt = |_| ProduceCheckError::Corrupt;
    // The batches to recompress, found first: the set is changed only after every batch
    // passed (none is, in the common case).
    let mut recompress: Vec<(usize, u8, Vec<u8>)> = Vec::new();
    for (i, (header, bytes)) in batches.iter().enumerate() {
        if check_time {
            let off = |ts: i64| {
                ts < now_ms.saturating_sub(before_max) || ts > now_ms.saturating_add(after_max)
            };
            if off(header.base_timestamp.0) || off(header.max_timestamp.0) {
                return Err(ProduceCheckError::Timestamp);
            }
        }
        let codec = header.compression();
        let recompress_to = target.filter(|t| *t != codec);
        if codec == 0 && check_keys_of {
            check_keys(bytes)?;
        }
        if codec == 0 && recompress_to.is_none() {
            continue;
        }
        let section = &bytes[BATCH_HEADER_BYTES..];
        let raw = decompress(codec, section).map_err(corrupt)?;
        if codec != 0 && count_records(&raw) != Some(i64::from(header.records_count)) {
            // Kafka answers INVALID_RECORD ("inner record count does not match").
            return Err(ProduceCheckError::RecordCount);
        }
        if codec != 0 && check_keys_of {
            // The decompressed records under the batch's header, to walk them (a copy, made
            // only on compacted topics).
            let plain = replace_records(bytes, 0, &raw).map_err(|_| ProduceCheckError::Corrupt)?;
            check_keys(&plain)?;
        }
        if let Some(to) = recompress_to {
            let packed = compress(to, &raw).map_err(corrupt)?;
            recompress.push((i, to, packed));
        }
    }
    for (i, to, packed) in recompress {
        batches
            .replace_records(i, to, &packed)
            .map_err(|_| ProduceCheckError::Corrupt)?;
    }
    Ok(batches)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errors::{code, produce_check_error_code};
    use bytes::Bytes;
    use net::kafka_protocol::error::ResponseError;
    use storage::{build_batch, validate_batch, TimestampMs};

    /// `records` checked, as the owning shard checks a produce before [`prepare`].
    fn checked(records: &Bytes) -> ValidatedBatches {
        ValidatedBatches::validate(records).expect("valid batches")
    }

    /// [`prepare`] of `records`, as one record set.
    fn prepare_bytes(
        records: Bytes,
        config: &TopicConfig,
        now_ms: i64,
    ) -> Result<Bytes, ProduceCheckError> {
        prepare(checked(&records), config, now_ms).map(|b| b.to_bytes())
    }

    /// One uncompressed batch of records with `keys` (`None`: no key), value `v` each.
    fn keyed_batch(keys: &[Option<&[u8]>]) -> Bytes {
        let records: Vec<storage::KeyValue<'_>> =
            keys.iter().map(|k| (*k, Some(&b"v"[..]))).collect();
        storage::build_batch_kv(TimestampMs(1_000), &records)
    }

    #[test]
    fn compacted_topics_refuse_records_without_a_key() {
        let mut config = TopicConfig::default();
        let keyless = keyed_batch(&[Some(b"k"), None]);
        let keyed = keyed_batch(&[Some(b"k"), Some(b"j")]);
        assert!(
            prepare_bytes(keyless.clone(), &config, 1_000).is_ok(),
            "delete: no check"
        );
        for policy in ["compact", "compact,delete"] {
            config.set("cleanup.policy", policy).unwrap();
            assert!(prepare_bytes(keyed.clone(), &config, 1_000).is_ok());
            let err = prepare_bytes(keyless.clone(), &config, 1_000).unwrap_err();
            assert_eq!(err, ProduceCheckError::KeylessRecord { batch_index: 1 });
            assert_eq!(
                produce_check_error_code(&err),
                code(ResponseError::InvalidRecord)
            );
        }
        // A compressed batch is checked on its decompressed records.
        let gzipped = compress(crate::compression::GZIP, &keyless[BATCH_HEADER_BYTES..]).unwrap();
        let packed = replace_records(&keyless, crate::compression::GZIP, &gzipped).unwrap();
        assert_eq!(
            prepare_bytes(packed, &config, 1_000),
            Err(ProduceCheckError::KeylessRecord { batch_index: 1 })
        );
        let gzipped = compress(crate::compression::GZIP, &keyed[BATCH_HEADER_BYTES..]).unwrap();
        let packed = replace_records(&keyed, crate::compression::GZIP, &gzipped).unwrap();
        assert!(prepare_bytes(packed, &config, 1_000).is_ok());
        // build_batch's records have no key.
        let plain = build_batch(TimestampMs(1_000), &[b"a"]);
        assert_eq!(
            prepare_bytes(plain, &config, 1_000),
            Err(ProduceCheckError::KeylessRecord { batch_index: 0 })
        );
    }

    #[test]
    fn recompresses_checks_counts_and_timestamps() {
        let plain = build_batch(TimestampMs(1_000), &[b"a", b"bb", b"ccc"]);
        let mut config = TopicConfig::default();
        assert_eq!(
            prepare_bytes(plain.clone(), &config, 1_000).unwrap(),
            plain,
            "nothing to do"
        );

        config.set("compression.type", "zstd").unwrap();
        let packed = prepare_bytes(plain.clone(), &config, 1_000).unwrap();
        let header = validate_batch(&packed).expect("valid batch");
        assert_eq!(header.compression(), crate::compression::ZSTD);
        assert_eq!(header.records_count, 3);
        let raw = decompress(header.compression(), &packed[BATCH_HEADER_BYTES..]).unwrap();
        assert_eq!(
            raw,
            plain[BATCH_HEADER_BYTES..],
            "records unchanged, only recompressed"
        );

        // Back to uncompressed from zstd, and a compressed batch with a wrong count is refused.
        config.set("compression.type", "uncompressed").unwrap();
        assert_eq!(
            prepare_bytes(packed.clone(), &config, 1_000).unwrap(),
            plain
        );
        let fewer = build_batch(TimestampMs(1_000), &[b"a", b"bb"]);
        let gzipped_two = compress(crate::compression::GZIP, &fewer[BATCH_HEADER_BYTES..]).unwrap();
        // Header of the 3-record batch over the compressed records of the 2-record one.
        let lying = replace_records(&plain, crate::compression::GZIP, &gzipped_two).unwrap();
        config.set("compression.type", "producer").unwrap();
        assert_eq!(
            prepare_bytes(lying, &config, 1_000).map_err(|e| produce_check_error_code(&e)),
            Err(code(ResponseError::InvalidRecord))
        );

        // Kafka's default refuses more than an hour ahead of the broker's clock.
        assert_eq!(
            prepare_bytes(plain.clone(), &TopicConfig::default(), 1_000 - 3_600_001)
                .map_err(|e| produce_check_error_code(&e)),
            Err(code(ResponseError::InvalidTimestamp))
        );
        config
            .set("message.timestamp.before.max.ms", "60000")
            .unwrap();
        config.set("message.timestamp.after.max.ms", "100").unwrap();
        assert!(prepare_bytes(plain.clone(), &config, 30_000).is_ok());
        assert!(prepare_bytes(plain.clone(), &config, 990).is_ok());
        assert_eq!(
            prepare_bytes(plain.clone(), &config, 800).map_err(|e| produce_check_error_code(&e)),
            Err(code(ResponseError::InvalidTimestamp)),
            "after.max.ms"
        );
        assert_eq!(
            prepare_bytes(plain, &config, 1_000_000).map_err(|e| produce_check_error_code(&e)),
            Err(code(ResponseError::InvalidTimestamp)),
            "before.max.ms"
        );
    }
}
