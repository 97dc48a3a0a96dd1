//! Which `__consumer_offsets` partition coordinates a group (Kafka's placement).

/// The `__consumer_offsets` partition of `group_id` among `partitions` (Kafka:
/// `Utils.abs(groupId.hashCode) % groupMetadataTopicPartitionCount`, Java's `String.hashCode`
/// over UTF-16 code units).
pub fn partition_for(group_id: &str, partitions: usize) -> i32 {
    let hash = group_id.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    });
    let positive = hash & 0x7fff_ffff;
    let n = i32::try_from(partitions.max(1)).unwrap_or(i32::MAX);
    positive % n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_land_on_kafkas_partition() {
        // Java: "a".hashCode() = 97; "ab".hashCode() = 97 * 31 + 98 = 3105.
        assert_eq!(partition_for("a", 50), 97 % 50);
        assert_eq!(partition_for("ab", 50), 3105 % 50);
        // Overflowing hashes wrap as Java's int does and are masked positive.
        let long = "a-rather-long-consumer-group-name";
        let p = partition_for(long, 50);
        assert!((0..50).contains(&p));
        assert_eq!(partition_for("", 50), 0);
        assert_eq!(partition_for("x", 1), 0);
    }
}
