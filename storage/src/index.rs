//! Sparse offset and time indexes of one segment, held in memory and saved as Kafka-shaped
//! files: `.index` entries are `relative offset u32 | position u32`, `.timeindex` entries are
//! `timestamp i64 | relative offset u32`, big-endian (see docs/storage-format.md).
//!
//! Invariants: offsets, positions and timestamps strictly increase from entry to entry. Index
//! files are only ever written whole (at roll and clean shutdown, then synced), so a file that
//! breaks the invariants was damaged outside Sluice; decoding keeps its valid prefix, which
//! still gives correct (if longer) scans.

use crate::types::{Offset, TimestampMs};

/// Bytes per `.index` entry.
pub const OFFSET_ENTRY_BYTES: usize = 8;
/// Bytes per `.timeindex` entry.
pub const TIME_ENTRY_BYTES: usize = 12;

/// One `.index` entry: the batch at relative offset `relative_offset` starts at byte
/// `position` of the segment's `.log`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OffsetEntry {
    pub relative_offset: u32,
    pub position: u32,
}

/// One `.timeindex` entry, as Kafka's: `timestamp` is the largest timestamp in the segment up to
/// the time the entry was added, and `relative_offset` the batch that holds it. Every batch up
/// to that point has a max timestamp ≤ `timestamp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeEntry {
    pub timestamp: TimestampMs,
    pub relative_offset: u32,
}

/// Both indexes of one segment.
#[derive(Clone, Debug, Default)]
pub struct SegmentIndex {
    pub offsets: Vec<OffsetEntry>,
    pub times: Vec<TimeEntry>,
}

impl SegmentIndex {
    /// The byte position to start scanning at for `target` (relative offset): the position of
    /// the last entry at or before it, or 0.
    pub fn position_for(&self, target: u32) -> u32 {
        let i = self
            .offsets
            .partition_point(|e| e.relative_offset <= target);
        if i == 0 {
            0
        } else {
            self.offsets[i - 1].position
        }
    }

    /// The relative offset to start scanning at for the first batch with max timestamp ≥
    /// `target`: the last entry whose timestamp is below it (every earlier batch is below it
    /// too), or 0.
    pub fn relative_offset_for_time(&self, target: TimestampMs) -> u32 {
        let i = self.times.partition_point(|e| e.timestamp < target);
        if i == 0 {
            0
        } else {
            self.times[i - 1].relative_offset
        }
    }

    /// Drops entries at or after relative offset `from` (used by truncation).
    pub fn truncate_from(&mut self, from: u32) {
        self.offsets.retain(|e| e.relative_offset < from);
        self.times.retain(|e| e.relative_offset < from);
    }

    /// Encodes the offset index as file bytes.
    pub fn encode_offsets(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.offsets.len() * OFFSET_ENTRY_BYTES);
        for e in &self.offsets {
            out.extend_from_slice(&e.relative_offset.to_be_bytes());
            out.extend_from_slice(&e.position.to_be_bytes());
        }
        out
    }

    /// Encodes the time index as file bytes.
    pub fn encode_times(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.times.len() * TIME_ENTRY_BYTES);
        for e in &self.times {
            out.extend_from_slice(&e.timestamp.0.to_be_bytes());
            out.extend_from_slice(&e.relative_offset.to_be_bytes());
        }
        out
    }

    /// Decodes index files, keeping the longest prefix that honours the invariants and lies
    /// within `log_size_bytes`; anything after it, and a partial trailing entry, is dropped.
    pub fn decode(offset_file: &[u8], time_file: &[u8], log_size_bytes: u64) -> SegmentIndex {
        let mut index = SegmentIndex::default();
        for chunk in offset_file.chunks_exact(OFFSET_ENTRY_BYTES) {
            let e = OffsetEntry {
                relative_offset: u32::from_be_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]),
                position: u32::from_be_bytes([chunk[4], chunk[5], chunk[6], chunk[7]]),
            };
            let increasing = index
                .offsets
                .last()
                .is_none_or(|p| p.relative_offset < e.relative_offset && p.position < e.position);
            if !increasing || u64::from(e.position) >= log_size_bytes {
                break;
            }
            index.offsets.push(e);
        }
        for chunk in time_file.chunks_exact(TIME_ENTRY_BYTES) {
            let mut ts = [0u8; 8];
            ts.copy_from_slice(&chunk[0..8]);
            let e = TimeEntry {
                timestamp: TimestampMs(i64::from_be_bytes(ts)),
                relative_offset: u32::from_be_bytes([chunk[8], chunk[9], chunk[10], chunk[11]]),
            };
            let increasing = index
                .times
                .last()
                .is_none_or(|p| p.relative_offset < e.relative_offset && p.timestamp < e.timestamp);
            if !increasing {
                break;
            }
            index.times.push(e);
        }
        index
    }
}

/// Converts an absolute offset into a segment-relative one. Segments never hold more than
/// `u32::MAX` offsets (the log rolls first), so this cannot fail for offsets of the segment.
pub fn relative(base: Offset, offset: Offset) -> u32 {
    u32::try_from(offset.0 - base.0).expect("offset within its segment (log rolls at u32::MAX)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_and_decode_round_trip() {
        let mut idx = SegmentIndex::default();
        idx.offsets.push(OffsetEntry {
            relative_offset: 10,
            position: 4100,
        });
        idx.offsets.push(OffsetEntry {
            relative_offset: 20,
            position: 8300,
        });
        idx.times.push(TimeEntry {
            timestamp: TimestampMs(100),
            relative_offset: 10,
        });
        idx.times.push(TimeEntry {
            timestamp: TimestampMs(200),
            relative_offset: 20,
        });
        assert_eq!(idx.position_for(5), 0);
        assert_eq!(idx.position_for(10), 4100);
        assert_eq!(idx.position_for(25), 8300);
        assert_eq!(idx.relative_offset_for_time(TimestampMs(50)), 0);
        assert_eq!(idx.relative_offset_for_time(TimestampMs(150)), 10);
        let mut off = idx.encode_offsets();
        off.extend_from_slice(&[0u8; 8]);
        off.extend_from_slice(&[1u8; 5]);
        // The zero entry breaks the increasing order and ends the decoded prefix.
        let back = SegmentIndex::decode(&off, &idx.encode_times(), 10_000);
        assert_eq!(back.offsets, idx.offsets);
        assert_eq!(back.times, idx.times);
        let short = SegmentIndex::decode(&off, &[], 8000);
        assert_eq!(short.offsets.len(), 1);
    }
}
