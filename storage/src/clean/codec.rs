//! The codecs the cleaner needs to read and rewrite compressed batches (issue #27). Storage
//! knows no compression codec (the broker owns them, `compression.rs`), so the log's owner
//! hands one in: the cleaner decompresses a batch to read its keys and to filter its records,
//! and compresses the kept records again with the batch's own codec, as Kafka's
//! `MemoryRecords.filterTo` does.

use crate::batch::{replace_records, BatchHeader, BATCH_HEADER_BYTES};
use crate::error::BatchError;
use bytes::Bytes;

/// Compression of a batch's records section, by Kafka's codec numbers (`attributes & 7`: 1
/// gzip, 2 snappy, 3 lz4, 4 zstd).
pub trait RecordsCodec {
    /// The records section `data`, compressed with `codec`, decompressed.
    ///
    /// # Errors
    /// A description of why it does not decompress (malformed, unknown codec, too large).
    fn decompress(&self, codec: u8, data: &[u8]) -> Result<Vec<u8>, String>;

    /// The uncompressed records section `raw`, compressed with `codec`.
    ///
    /// # Errors
    /// A description of why it cannot be compressed (unknown codec).
    fn compress(&self, codec: u8, raw: &[u8]) -> Result<Vec<u8>, String>;
}

impl std::fmt::Debug for dyn RecordsCodec + '_ {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RecordsCodec")
    }
}

/// A codec that knows none: every compressed batch is an error (for storage's own tests and
/// tools that never see one).
pub struct NoCodec;

impl RecordsCodec for NoCodec {
    fn decompress(&self, codec: u8, _data: &[u8]) -> Result<Vec<u8>, String> {
        Err(format!("no codec for compression {codec}"))
    }

    fn compress(&self, codec: u8, _raw: &[u8]) -> Result<Vec<u8>, String> {
        Err(format!("no codec for compression {codec}"))
    }
}

/// `batch` (whole, with `header`) with its records decompressed: same header but for the
/// codec bits, length and CRC-32C.
///
/// # Errors
/// [`BatchError::Codec`] when the records do not decompress.
pub(crate) fn uncompressed(
    batch: &[u8],
    header: &BatchHeader,
    codec: &dyn RecordsCodec,
) -> Result<Bytes, BatchError> {
    let compression = header.compression();
    let raw = codec
        .decompress(
            compression,
            batch.get(BATCH_HEADER_BYTES..).unwrap_or_default(),
        )
        .map_err(|why| BatchError::Codec { compression, why })?;
    replace_records(batch, 0, &raw)
}

/// The uncompressed `plain` batch with its records compressed with `compression` again.
///
/// # Errors
/// [`BatchError::Codec`] when they cannot be compressed.
pub(crate) fn recompressed(
    plain: &[u8],
    compression: u8,
    codec: &dyn RecordsCodec,
) -> Result<Bytes, BatchError> {
    let packed = codec
        .compress(
            compression,
            plain.get(BATCH_HEADER_BYTES..).unwrap_or_default(),
        )
        .map_err(|why| BatchError::Codec { compression, why })?;
    replace_records(plain, compression, &packed)
}
