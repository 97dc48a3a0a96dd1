//! Log compaction's pure core (issue #27, DESIGN.md §12, Kafka's `Cleaner`): build the offset
//! map over a log's dirty section, then pass the cleanable batches through it.
//!
//! A pass is two steps over batches in offset order, as Kafka's `Cleaner.doClean`:
//! 1. [`fill_map`] puts every keyed record of the dirty batches (compressed ones through the
//!    owner's [`codec::RecordsCodec`]) into the [`OffsetMap`], whole batches only, and stops before a batch whose records might not fit: the pass then covers
//!    only the offsets below [`OffsetMap::covers_below`], and the next pass continues there.
//! 2. [`clean_section`] runs every batch below that point through [`filter::clean_batch`].
//!
//! Transactions (KIP-98): [`txn::AbortedTxnWalk`] says which batches belong to aborted
//! transactions; the log skips them in step 1 and drops them in step 2
//! ([`filter::discard_batch`]).
//!
//! Both are pure functions of bytes: which segments are cleanable (never the active one), the
//! files, the swap and its crash safety belong to the log (`log/compact.rs`).

pub mod codec;
pub mod filter;
pub mod swap;
pub mod txn;

use crate::batch::{BatchHeader, BATCH_HEADER_BYTES};
use crate::error::BatchError;
use crate::offset_map::OffsetMap;
use crate::types::Offset;
use bytes::Bytes;
use codec::RecordsCodec;
use filter::{clean_batch, CleanRules, Cleaned};
use std::collections::BTreeMap;

/// Puts the keyed records of `batches` (offset order, whole CRC-checked batches) into `map`,
/// stopping before the first batch that might not fit. Compressed batches are read through
/// `codec`; control batches add no keys. Returns how many leading batches were covered.
///
/// # Errors
/// [`BatchError`] when a batch does not parse or does not decompress.
pub fn fill_map<'a>(
    map: &mut OffsetMap,
    batches: impl IntoIterator<Item = &'a [u8]>,
    codec: &dyn RecordsCodec,
) -> Result<usize, BatchError> {
    let mut covered = 0;
    for batch in batches {
        let header = BatchHeader::parse(batch)?;
        let records = usize::try_from(header.records_count).unwrap_or(usize::MAX);
        if records > map.free_keys() {
            break;
        }
        if header.attributes & 0x20 == 0 {
            let plain;
            let batch = if header.compression() == 0 {
                batch
            } else {
                plain = codec::uncompressed(batch, &header, codec)?;
                &plain[..]
            };
            for record in crate::batch::records_of(batch)? {
                if let Some(key) = record.key {
                    map.put(key, record.offset)
                        .expect("a batch is put only when all its records fit");
                }
            }
        }
        covered += 1;
    }
    Ok(covered)
}

/// The cleaned form of `batches` (offset order): every batch run through
/// [`clean_batch`] with `rules`; `last_batch_of_producer` maps each producer id to the base
/// offset of its last batch in the whole log (those batches are kept, empty if need be).
///
/// # Errors
/// [`BatchError`] when a batch does not parse.
pub fn clean_section(
    batches: &[Bytes],
    rules: CleanRules<'_>,
    last_batch_of_producer: &BTreeMap<i64, Offset>,
) -> Result<Vec<Bytes>, BatchError> {
    let mut out = Vec::with_capacity(batches.len());
    let mut previous_last: Option<Offset> = None;
    for batch in batches {
        assert!(
            batch.len() >= BATCH_HEADER_BYTES,
            "stored batches are whole"
        );
        let header = BatchHeader::parse(batch)?;
        assert!(
            previous_last.is_none_or(|last| header.base_offset > last),
            "batches are in offset order"
        );
        previous_last = Some(header.last_offset());
        let last_of_producer = header.producer_id >= 0
            && last_batch_of_producer.get(&header.producer_id) == Some(&header.base_offset);
        match clean_batch(batch, rules, last_of_producer)? {
            Cleaned::Unchanged => out.push(batch.clone()),
            Cleaned::Removed => {}
            Cleaned::Rewritten(bytes) => out.push(bytes),
        }
    }
    Ok(out)
}
