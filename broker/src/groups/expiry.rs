//! Offset expiry (`offsets.retention.minutes`, KIP-211): which committed offsets of a group
//! have outlived their retention, and when the whole group goes. Pure: the group service
//! ([`super::service::expiry_loop`]) writes the tombstones this decides.
//!
//! Kafka's rule (`ClassicGroup.offsetExpirationCondition`, `cleanupExpiredOffsets`):
//! - a group without a protocol type (a "simple" consumer that only commits): each offset
//!   expires `retention` after its own commit;
//! - an Empty group with a protocol type: every offset expires `retention` after the group
//!   became Empty (its `currentStateTimestamp`);
//! - a Stable group of the consumer protocol: offsets of topics no member subscribes to expire
//!   `retention` after their commit (the subscribed ones never do);
//! - any other group keeps its offsets.
//!
//! An Empty group left with no offsets is removed (its metadata tombstoned), as Kafka's
//! `cleanupGroupMetadata` turns it Dead. A group with a commit being appended is left for the
//! next check, as Kafka does not expire an offset with a pending commit; nor does an offset
//! expire while a transaction's commit for its partition is pending, nor the group go.
//!
//! Not followed: the `expireTimestamp` an OffsetCommit v1 (`commit_timestamp` per partition)
//! could set: Sluice serves OffsetCommit v2+ only, whose `retention_time_ms` Kafka 4 ignores.

use super::group::{Group, GroupState};

/// What the retention rule takes from one group at one check.
#[derive(Debug, PartialEq, Eq)]
pub enum Expiry {
    /// Nothing expires.
    Keep,
    /// These offsets (topic, partition) expire; the group stays.
    Offsets(Vec<(String, i32)>),
    /// The group is Empty and keeps no offset: it goes, with all its offsets.
    Group,
}

/// The expiry of `group` at `now_ms` (ms since the epoch) under `retention_ms`
/// (`offsets.retention.minutes` in ms).
pub fn expiry(group: &Group, now_ms: i64, retention_ms: i64) -> Expiry {
    if group.commits_in_flight > 0 || group.state() == GroupState::Dead {
        return Expiry::Keep;
    }
    let outlived = |since_ms: i64| now_ms.saturating_sub(since_ms) >= retention_ms;
    let expired: Vec<(String, i32)> = match (group.protocol_type(), group.state()) {
        (None, _) => group
            .offsets
            .iter()
            .filter(|(_, o)| outlived(o.commit_timestamp_ms))
            .map(|(key, _)| key.clone())
            .collect(),
        (Some(_), GroupState::Empty) => {
            if outlived(group.state_timestamp_ms()) {
                group.offsets.keys().cloned().collect()
            } else {
                Vec::new()
            }
        }
        (Some("consumer"), GroupState::Stable) => {
            let subscribed = group.subscribed_topics();
            group
                .offsets
                .iter()
                .filter(|((topic, _), o)| {
                    !subscribed.contains(topic) && outlived(o.commit_timestamp_ms)
                })
                .map(|(key, _)| key.clone())
                .collect()
        }
        _ => Vec::new(),
    };
    // Kafka expires no offset with a transaction's commit pending for its partition.
    let expired: Vec<(String, i32)> = expired
        .into_iter()
        .filter(|key| !group.pending_txn.has_pending(key))
        .collect();
    // An Empty group left with no offsets goes; one that had none goes once it has been
    // Empty for the retention (a group that just emptied stays describable meanwhile).
    let empty = group.state() == GroupState::Empty && group.is_empty();
    if empty
        && group.pending_txn.is_empty()
        && expired.len() == group.offsets.len()
        && (!expired.is_empty() || outlived(group.state_timestamp_ms()))
    {
        return Expiry::Group;
    }
    if expired.is_empty() {
        Expiry::Keep
    } else {
        Expiry::Offsets(expired)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::groups::offsets_log::{CommittedOffset, StoredGroup};
    use std::time::Instant;

    const RETENTION_MS: i64 = 1_000;

    fn commit(g: &mut Group, topic: &str, partition: i32, at_ms: i64) {
        g.offsets.insert(
            (topic.to_string(), partition),
            CommittedOffset {
                offset: 7,
                leader_epoch: -1,
                metadata: String::new(),
                commit_timestamp_ms: at_ms,
                record_offset: -1,
            },
        );
    }

    fn empty_consumer_group(since_ms: i64) -> Group {
        let mut g = Group::new("g");
        g.restore(
            StoredGroup {
                protocol_type: "consumer".into(),
                generation: 3,
                protocol: None,
                leader: None,
                current_state_timestamp_ms: since_ms,
                members: Vec::new(),
            },
            Instant::now(),
        );
        g
    }

    #[test]
    fn a_simple_consumers_offsets_expire_one_by_one_then_the_group_goes() {
        let mut g = Group::new("g");
        commit(&mut g, "t", 0, 0);
        commit(&mut g, "t", 1, 500);
        assert_eq!(expiry(&g, 999, RETENTION_MS), Expiry::Keep);
        assert_eq!(
            expiry(&g, 1_000, RETENTION_MS),
            Expiry::Offsets(vec![("t".into(), 0)])
        );
        assert_eq!(expiry(&g, 1_500, RETENTION_MS), Expiry::Group);
    }

    #[test]
    fn an_empty_groups_offsets_expire_together_after_it_became_empty() {
        let mut g = empty_consumer_group(10_000);
        commit(&mut g, "t", 0, 0); // committed long before the group emptied
        assert_eq!(expiry(&g, 10_999, RETENTION_MS), Expiry::Keep);
        assert_eq!(expiry(&g, 11_000, RETENTION_MS), Expiry::Group);
    }

    #[test]
    fn an_empty_group_without_offsets_goes_after_the_retention() {
        let g = empty_consumer_group(10_000);
        assert_eq!(expiry(&g, 10_500, RETENTION_MS), Expiry::Keep);
        assert_eq!(expiry(&g, 11_000, RETENTION_MS), Expiry::Group);
    }

    #[test]
    fn a_pending_commit_keeps_every_offset() {
        let mut g = Group::new("g");
        commit(&mut g, "t", 0, 0);
        g.commits_in_flight = 1;
        assert_eq!(expiry(&g, 1_000_000, RETENTION_MS), Expiry::Keep);
    }

    #[test]
    fn a_dead_group_is_left_to_its_deletion() {
        let mut g = empty_consumer_group(0);
        commit(&mut g, "t", 0, 0);
        g.mark_dead();
        assert_eq!(expiry(&g, 1_000_000, RETENTION_MS), Expiry::Keep);
    }
}
