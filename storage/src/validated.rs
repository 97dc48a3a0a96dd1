//! [`ValidatedBatches`]: a produce request's record set for one partition, split into its
//! RecordBatch v2 batches and checked once — header, magic 2, lengths, record counts, CRC-32C
//! ([`crate::validate_batch`]) — where it reaches the partition's owning shard. The leader's
//! append ([`crate::PartitionLog::append_validated`]) takes this type instead of bytes, so it
//! never splits or checksums a batch again, and nothing outside this crate can make one
//! without the check: the only constructor is [`ValidatedBatches::validate`], and the only
//! change is [`ValidatedBatches::replace_records`], whose CRC-32C this crate computes itself
//! (the broker's recompression).
//!
//! Invariants (asserted where a set is taken apart, `into_batches`):
//! 1. At least one batch.
//! 2. Each `(header, bytes)` pair is `bytes` parsed: `header.size_bytes() == bytes.len()`, and
//!    the CRC-32C in `bytes` covers its attributes to its end.
//!
//! The follower's append ([`crate::PartitionLog::append_as_follower`]) takes the leader's
//! bytes as they come over the network and checks them there, once, with the rules of a
//! stored batch (a cleaned batch may hold fewer records than its offsets span).

use crate::batch::{replace_records, split_batches, BatchHeader};
use crate::error::BatchError;
use crate::txn_verification::VerificationGuard;
use bytes::{Bytes, BytesMut};

/// One partition's record set, split and checked once (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidatedBatches {
    batches: Vec<(BatchHeader, Bytes)>,
    origin: AppendOrigin,
    /// KIP-890 part 1: `Some` when the leader must check that a transactional batch belongs
    /// to an open or verified transaction, with the guard of the verification the broker made
    /// for it ([`VerificationGuard::SENTINEL`] when it made none); `None` when verification is
    /// off (`transaction.partition.verification.enable=false`) or the set is not a client's.
    verification: Option<VerificationGuard>,
}

/// Who asks the leader to append a record set (Kafka's `AppendOrigin`, for the leader's
/// appends).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AppendOrigin {
    /// A producer: idempotent sequences are checked and retries answered with their first
    /// offsets.
    #[default]
    Client,
    /// A coordinator writing its own log (`__consumer_offsets`), e.g. a TxnOffsetCommit's
    /// transactional records: only producer epochs are checked, as Kafka checks sequences for
    /// client appends only.
    Coordinator,
}

impl ValidatedBatches {
    /// Splits `records` — one or more whole batches back to back, as a produce request
    /// carries them for one partition — and checks every batch as a producer's
    /// ([`crate::validate_batch`]): one pass over the bytes for the CRC-32C, one over an
    /// uncompressed batch's record lengths. The batches share `records`' memory.
    ///
    /// # Errors
    /// Any truncated or invalid batch refuses the whole set (an append is all or nothing).
    pub fn validate(records: &Bytes) -> Result<ValidatedBatches, BatchError> {
        let batches = split_batches(records)?;
        // split_batches refuses an empty set.
        assert!(
            !batches.is_empty(),
            "invariant 1: a record set holds a batch"
        );
        Ok(ValidatedBatches {
            batches,
            origin: AppendOrigin::Client,
            verification: None,
        })
    }

    /// The same set, appended for `origin`.
    pub fn with_origin(self, origin: AppendOrigin) -> ValidatedBatches {
        ValidatedBatches { origin, ..self }
    }

    /// Who asks for the append.
    pub fn origin(&self) -> AppendOrigin {
        self.origin
    }

    /// The same set, whose transactional batches the leader appends only into a transaction
    /// open in the partition or verified under `guard` (KIP-890 part 1; see
    /// [`crate::PartitionLog::start_txn_verification`]).
    pub fn with_verification(self, guard: VerificationGuard) -> ValidatedBatches {
        ValidatedBatches {
            verification: Some(guard),
            ..self
        }
    }

    /// The verification the leader checks, if any (see [`ValidatedBatches::with_verification`]).
    pub fn verification(&self) -> Option<VerificationGuard> {
        self.verification
    }

    /// The batches in order: each one's parsed header and its bytes.
    pub fn iter(&self) -> impl Iterator<Item = (&BatchHeader, &Bytes)> {
        self.batches.iter().map(|(h, b)| (h, b))
    }

    /// How many batches the set holds (at least one).
    pub fn len(&self) -> usize {
        self.batches.len()
    }

    /// Always false: a set holds at least one batch.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Bytes of all batches.
    pub fn size_bytes(&self) -> usize {
        self.batches.iter().map(|(_, b)| b.len()).sum()
    }

    /// Replaces the records section of batch `index` with `records`, compressed with codec
    /// `compression` (the broker's recompression to the topic's `compression.type`): the codec
    /// bits of its attributes, its `batchLength` and its CRC-32C are computed here, every other
    /// header field is kept ([`crate::replace_records`]). The records themselves are the
    /// caller's to get right (it decompressed and counted them).
    ///
    /// # Errors
    /// [`BatchError::TooLarge`] when the batch would exceed `i32::MAX` bytes.
    ///
    /// # Panics
    /// When `index` is not a batch of the set.
    pub fn replace_records(
        &mut self,
        index: usize,
        compression: u8,
        records: &[u8],
    ) -> Result<(), BatchError> {
        let (_, bytes) = &self.batches[index];
        let replaced = replace_records(bytes, compression, records)?;
        let header = BatchHeader::parse(&replaced)?;
        // Invariant 2 for the new bytes: replace_records sets the length it wrote.
        assert_eq!(header.size_bytes(), replaced.len(), "invariant 2");
        self.batches[index] = (header, replaced);
        Ok(())
    }

    /// The set as one contiguous record set (copies when it holds more than one batch): for
    /// tests and diagnostics.
    pub fn to_bytes(&self) -> Bytes {
        if let [(_, only)] = self.batches.as_slice() {
            return only.clone();
        }
        let mut joined = BytesMut::with_capacity(self.size_bytes());
        for (_, b) in &self.batches {
            joined.extend_from_slice(b);
        }
        joined.freeze()
    }

    /// The batches, for the log's append.
    pub(crate) fn into_batches(self) -> Vec<(BatchHeader, Bytes)> {
        assert!(
            !self.batches.is_empty(),
            "invariant 1: a record set holds a batch"
        );
        for (header, bytes) in &self.batches {
            assert_eq!(header.size_bytes(), bytes.len(), "invariant 2");
        }
        self.batches
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{batch_crc, build_batch, validate_batch, validation_passes};
    use crate::types::TimestampMs;

    #[test]
    fn one_pass_per_batch_and_a_corrupt_batch_refuses_the_set() {
        let a = build_batch(TimestampMs(1), &[b"a", b"bb"]);
        let b = build_batch(TimestampMs(2), &[b"c"]);
        let both = Bytes::from([a.to_vec(), b.to_vec()].concat());
        let before = validation_passes();
        let set = ValidatedBatches::validate(&both).expect("valid");
        assert_eq!(validation_passes() - before, 2, "one CRC pass per batch");
        assert_eq!(set.len(), 2);
        assert_eq!(set.to_bytes(), both);
        let mut corrupt = both.to_vec();
        let last = corrupt.len() - 1;
        corrupt[last] ^= 0xff;
        assert!(matches!(
            ValidatedBatches::validate(&Bytes::from(corrupt)),
            Err(BatchError::Crc { .. })
        ));
        assert!(matches!(
            ValidatedBatches::validate(&Bytes::new()),
            Err(BatchError::Truncated { .. })
        ));
    }

    #[test]
    fn replaced_records_carry_a_crc_computed_here() {
        let a = build_batch(TimestampMs(1), &[b"a", b"bb"]);
        let mut set = ValidatedBatches::validate(&a).expect("valid");
        let section = a[crate::BATCH_HEADER_BYTES..].to_vec();
        set.replace_records(0, 0, &section).expect("fits");
        assert_eq!(set.to_bytes(), a, "the same section: the same batch");
        set.replace_records(0, 4, b"xyz").expect("fits");
        let (header, bytes) = set.iter().next().expect("a batch");
        assert_eq!(header.compression(), 4);
        assert_eq!(header.crc, batch_crc(bytes));
        assert_eq!(header.size_bytes(), bytes.len());
        // A compressed section's records are the broker's to count: the rest checks out.
        assert_eq!(validate_batch(bytes).as_ref(), Ok(header));
    }
}
