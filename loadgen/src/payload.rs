//! The record value loadgen sends: a 24-byte stamp followed by filler up to the record size.
//!
//! Layout (little-endian): bytes 0..8 the intended send time in nanoseconds since the run's
//! clock base (see `schedule`), 8..16 the run id (records of any other run on the same topic
//! are ignored), 16..24 the record's global index in the run. Producer and consumers live in
//! one process and share one monotonic clock base, so receipt − intended needs no clock sync.

/// Bytes of the stamp at the front of every record value; the smallest record size.
pub const STAMP_BYTES: usize = 24;

/// What a record carries so its consumer can time and attribute it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub intended_ns: u64,
    pub run_id: u64,
    pub index: u64,
}

impl Stamp {
    /// Writes the stamp into the front of `value` (at least `STAMP_BYTES` long).
    pub fn write_to(&self, value: &mut [u8]) {
        assert!(
            value.len() >= STAMP_BYTES,
            "record value shorter than the stamp"
        );
        value[0..8].copy_from_slice(&self.intended_ns.to_le_bytes());
        value[8..16].copy_from_slice(&self.run_id.to_le_bytes());
        value[16..24].copy_from_slice(&self.index.to_le_bytes());
    }

    /// The stamp at the front of `value`, or `None` when the value is too short to hold one.
    pub fn read_from(value: &[u8]) -> Option<Stamp> {
        let word = |at: usize| -> Option<u64> {
            let bytes: [u8; 8] = value.get(at..at + 8)?.try_into().ok()?;
            Some(u64::from_le_bytes(bytes))
        };
        Some(Stamp {
            intended_ns: word(0)?,
            run_id: word(8)?,
            index: word(16)?,
        })
    }
}

/// A record value of `record_bytes` (≥ `STAMP_BYTES`) with a compressible-but-not-trivial
/// filler, so compression flags have something realistic to work on.
pub fn filler(record_bytes: usize) -> Vec<u8> {
    assert!(
        record_bytes >= STAMP_BYTES,
        "record size below the stamp size"
    );
    (0..record_bytes)
        .map(|i| b"sluice-loadgen "[i % 15])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamp_round_trips_and_short_values_are_rejected() {
        let stamp = Stamp {
            intended_ns: 1 << 40,
            run_id: 0xdead_beef,
            index: 42,
        };
        let mut value = filler(64);
        stamp.write_to(&mut value);
        assert_eq!(Stamp::read_from(&value), Some(stamp));
        assert_eq!(Stamp::read_from(&value[..STAMP_BYTES - 1]), None);
    }
}
