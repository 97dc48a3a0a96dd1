//! Record-batch compression as Kafka does it: the records section of a RecordBatch v2 (after
//! the 61-byte header) is one compressed stream — gzip, snappy (raw, or Kafka/Java's xerial
//! framing), lz4 (frame format) or zstd. The broker decompresses only to validate (the record
//! count) and, for topics whose `compression.type` names a codec, to recompress; records are
//! never re-encoded, so record bytes (duplicate header keys included) stay as produced.

use std::io::{Read, Write};

/// Largest decompressed records section accepted, in bytes (a compression bomb is refused as
/// corrupt rather than exhausting memory).
pub const DECOMPRESSED_BYTES_MAX: usize = 256 << 20;

/// Codec ids (attributes bits 0–2).
pub const NONE: u8 = 0;
pub const GZIP: u8 = 1;
pub const SNAPPY: u8 = 2;
pub const LZ4: u8 = 3;
pub const ZSTD: u8 = 4;

const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
const XERIAL_HEADER_BYTES: usize = 16;

/// Decompresses a records section compressed with `codec`. Errors: a malformed stream, an
/// unknown codec, or output above [`DECOMPRESSED_BYTES_MAX`].
pub fn decompress(codec: u8, data: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let limit = u64::try_from(DECOMPRESSED_BYTES_MAX).unwrap_or(u64::MAX) + 1;
    let read = match codec {
        NONE => return Ok(data.to_vec()),
        GZIP => flate2::read::GzDecoder::new(data)
            .take(limit)
            .read_to_end(&mut out),
        SNAPPY => return snappy_decompress(data),
        LZ4 => lz4_flex::frame::FrameDecoder::new(data)
            .take(limit)
            .read_to_end(&mut out),
        ZSTD => {
            zstd::stream::read::Decoder::new(data).and_then(|d| d.take(limit).read_to_end(&mut out))
        }
        other => return Err(format!("unknown compression codec {other}")),
    };
    read.map_err(|e| format!("decompression failed: {e}"))?;
    check_size(out)
}

fn check_size(out: Vec<u8>) -> Result<Vec<u8>, String> {
    if out.len() > DECOMPRESSED_BYTES_MAX {
        return Err(format!(
            "decompresses to more than {DECOMPRESSED_BYTES_MAX} bytes"
        ));
    }
    Ok(out)
}

fn snappy_decompress(data: &[u8]) -> Result<Vec<u8>, String> {
    let raw = |block: &[u8]| -> Result<Vec<u8>, String> {
        let len = snap::raw::decompress_len(block).map_err(|e| e.to_string())?;
        if len > DECOMPRESSED_BYTES_MAX {
            return Err(format!(
                "decompresses to more than {DECOMPRESSED_BYTES_MAX} bytes"
            ));
        }
        snap::raw::Decoder::new()
            .decompress_vec(block)
            .map_err(|e| e.to_string())
    };
    if !data.starts_with(&XERIAL_MAGIC) {
        return raw(data);
    }
    let mut out = Vec::new();
    let mut rest = data
        .get(XERIAL_HEADER_BYTES..)
        .ok_or("truncated xerial header")?;
    while !rest.is_empty() {
        let len_bytes: [u8; 4] = rest
            .get(..4)
            .ok_or("truncated xerial block")?
            .try_into()
            .map_err(|_| "bad length")?;
        let len = usize::try_from(u32::from_be_bytes(len_bytes)).map_err(|_| "bad length")?;
        let block = rest.get(4..4 + len).ok_or("truncated xerial block")?;
        out.extend(raw(block)?);
        if out.len() > DECOMPRESSED_BYTES_MAX {
            return Err(format!(
                "decompresses to more than {DECOMPRESSED_BYTES_MAX} bytes"
            ));
        }
        rest = &rest[4 + len..];
    }
    Ok(out)
}

/// Compresses a records section with `codec` (snappy in the xerial framing Java clients
/// expect; lz4 in the frame format).
pub fn compress(codec: u8, raw: &[u8]) -> Result<Vec<u8>, String> {
    let io = |e: std::io::Error| format!("compression failed: {e}");
    match codec {
        NONE => Ok(raw.to_vec()),
        GZIP => {
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            enc.write_all(raw).map_err(io)?;
            enc.finish().map_err(io)
        }
        SNAPPY => {
            let block = snap::raw::Encoder::new()
                .compress_vec(raw)
                .map_err(|e| e.to_string())?;
            let mut out = Vec::with_capacity(XERIAL_HEADER_BYTES + 4 + block.len());
            out.extend_from_slice(&XERIAL_MAGIC);
            out.extend_from_slice(&1i32.to_be_bytes()); // version
            out.extend_from_slice(&1i32.to_be_bytes()); // minimum compatible version
            let len = u32::try_from(block.len()).map_err(|_| "block too large")?;
            out.extend_from_slice(&len.to_be_bytes());
            out.extend_from_slice(&block);
            Ok(out)
        }
        LZ4 => {
            let mut enc = lz4_flex::frame::FrameEncoder::new(Vec::new());
            enc.write_all(raw).map_err(io)?;
            enc.finish().map_err(|e| e.to_string())
        }
        ZSTD => zstd::stream::encode_all(raw, 3).map_err(io),
        other => Err(format!("unknown compression codec {other}")),
    }
}

/// The broker's codecs, for the log cleaner (storage knows none): it reads and rewrites
/// compressed batches of compacted topics with them.
pub struct Codecs;

impl storage::RecordsCodec for Codecs {
    fn decompress(&self, codec: u8, data: &[u8]) -> Result<Vec<u8>, String> {
        decompress(codec, data)
    }

    fn compress(&self, codec: u8, raw: &[u8]) -> Result<Vec<u8>, String> {
        compress(codec, raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_codec_round_trips_and_bombs_are_refused() {
        let raw: Vec<u8> = (0..10_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        for codec in [NONE, GZIP, SNAPPY, LZ4, ZSTD] {
            let packed = compress(codec, &raw).unwrap();
            assert_eq!(decompress(codec, &packed).unwrap(), raw, "codec {codec}");
        }
        assert_eq!(
            decompress(
                SNAPPY,
                &snap::raw::Encoder::new().compress_vec(&raw).unwrap()
            )
            .unwrap(),
            raw
        );
        assert!(decompress(GZIP, b"not gzip").is_err());
        assert!(decompress(7, b"").is_err());
        let bomb = compress(ZSTD, &vec![0u8; DECOMPRESSED_BYTES_MAX + 10]).unwrap();
        assert!(decompress(ZSTD, &bomb).is_err());
    }
}
