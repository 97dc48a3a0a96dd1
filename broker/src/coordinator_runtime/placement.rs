//! Which partition of a coordinator's internal topic holds a key, as Kafka places it.

/// The partition of `key` among the `partitions` of a coordinator topic (Kafka:
/// `Utils.abs(key.hashCode) % partitionCount`, with Java's `String.hashCode` over UTF-16 code
/// units and `Utils.abs(Integer.MIN_VALUE) = 0`).
pub fn partition_for(key: &str, partitions: usize) -> i32 {
    let hash = key.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    });
    let positive = if hash == i32::MIN { 0 } else { hash.abs() };
    let n = i32::try_from(partitions.max(1)).unwrap_or(i32::MAX);
    positive % n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_land_on_kafkas_partition() {
        // Java: "a".hashCode() = 97; "ab".hashCode() = 3105.
        assert_eq!(partition_for("a", 50), 97 % 50);
        assert_eq!(partition_for("ab", 50), 3105 % 50);
        // "my-transactional-id".hashCode() is -959806496 in Java: Utils.abs, not a mask,
        // picks the partition (959806496 % 50 = 46; a mask would give 2).
        assert_eq!(partition_for("my-transactional-id", 50), 46);
        assert_eq!(partition_for("", 50), 0);
        assert_eq!(partition_for("x", 1), 0);
    }
}
