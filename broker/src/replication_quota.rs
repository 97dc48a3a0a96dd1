//! The replication throttles (KIP-73; Kafka's `ReplicationQuotaManager`): the bytes moved for
//! throttled replicas — those a topic lists in `*.replication.throttled.replicas`
//! (`partition:broker` items, or `*` for all) while they are not in the ISR — are measured as
//! a rate over a window of one-second samples; while that rate is above the broker's
//! `*.replication.throttled.rate`, the throttled partitions move nothing (in-sync replicas and
//! the others move as usual). Pure: the clock comes in.
//!
//! Two sides, as Kafka's `ReplicaFetcherThread` and `ReplicaManager.readFromLog`:
//! - the follower's (`follower.*`, `crate::replica_fetcher`): one [`ReplicationQuota`] per
//!   broker, on the fetchers' shard, shared by every fetcher (per broker, as Kafka's); over
//!   the rate, its fetches leave the throttled partitions out;
//! - the leader's (`leader.*`, `crate::handlers::fetch`; the list names the serving broker's
//!   replicas, throttled for followers out of the ISR): one [`ReplicationQuota`] per shard,
//!   metering the follower fetches that shard serves against `rate / shards`. The bound: the
//!   broker sends throttled replicas at most about the rate in all (each shard its share;
//!   less when the followers' connections sit on fewer shards than all); over its share, a
//!   shard answers a throttled partition with no records (its offsets as usual).
//!
//! Bounded: at most [`QUOTA_WINDOW_SAMPLES`] samples per quota.

use std::collections::VecDeque;

/// Samples of the rate's window (Kafka's `replication.quota.window.num` default).
pub const QUOTA_WINDOW_SAMPLES: u64 = 11;
/// One sample's length, ms (Kafka's `replication.quota.window.size.seconds` default, 1 s).
pub const QUOTA_SAMPLE_MS: u64 = 1_000;

/// The topic config naming the replicas whose follower fetches are throttled.
pub const FOLLOWER_THROTTLED_REPLICAS: &str = "follower.replication.throttled.replicas";
/// The broker config of the follower's throttle, bytes per second.
pub const FOLLOWER_THROTTLED_RATE: &str = "follower.replication.throttled.rate";
/// The topic config naming the replicas whose fetches their leader throttles.
pub const LEADER_THROTTLED_REPLICAS: &str = "leader.replication.throttled.replicas";
/// The broker config of the leader's throttle, bytes per second.
pub const LEADER_THROTTLED_RATE: &str = "leader.replication.throttled.rate";

/// The bytes moved for throttled replicas over the last [`QUOTA_WINDOW_SAMPLES`] seconds.
#[derive(Debug, Default)]
pub struct ReplicationQuota {
    /// (sample start ms, bytes), oldest first; at most [`QUOTA_WINDOW_SAMPLES`].
    samples: VecDeque<(u64, u64)>,
}

impl ReplicationQuota {
    /// Counts `bytes` moved at `now_ms`.
    pub fn record(&mut self, bytes: u64, now_ms: u64) {
        let start = now_ms - now_ms % QUOTA_SAMPLE_MS;
        match self.samples.back_mut() {
            Some((s, b)) if *s == start => *b = b.saturating_add(bytes),
            _ => self.samples.push_back((start, bytes)),
        }
        self.expire(now_ms);
        assert!(self.samples.len() <= usize::try_from(QUOTA_WINDOW_SAMPLES).unwrap_or(usize::MAX));
    }

    /// Drops the samples that left the window at `now_ms`.
    fn expire(&mut self, now_ms: u64) {
        let window_ms = QUOTA_WINDOW_SAMPLES * QUOTA_SAMPLE_MS;
        while let Some(&(start, _)) = self.samples.front() {
            let full =
                self.samples.len() > usize::try_from(QUOTA_WINDOW_SAMPLES).unwrap_or(usize::MAX);
            if full || now_ms.saturating_sub(start) >= window_ms {
                self.samples.pop_front();
            } else {
                break;
            }
        }
    }

    /// The rate at `now_ms`, bytes per second, as Kafka's `Rate`: the window's bytes over the
    /// time since its oldest sample began, counted as at least all but one sample's length
    /// (so a first burst is spread over the window, not over its first second).
    pub fn rate(&self, now_ms: u64) -> f64 {
        let window_ms = QUOTA_WINDOW_SAMPLES * QUOTA_SAMPLE_MS;
        let live = self
            .samples
            .iter()
            .filter(|(start, _)| now_ms.saturating_sub(*start) < window_ms);
        let (mut oldest, mut bytes) = (None, 0u64);
        for &(start, b) in live {
            oldest.get_or_insert(start);
            bytes = bytes.saturating_add(b);
        }
        let Some(oldest) = oldest else {
            return 0.0;
        };
        let elapsed_ms = now_ms
            .saturating_sub(oldest)
            .max((QUOTA_WINDOW_SAMPLES - 1) * QUOTA_SAMPLE_MS);
        // Precision: rates are compared with a limit; bytes and ms far below 2^52.
        #[allow(clippy::cast_precision_loss)]
        let rate = bytes as f64 * 1000.0 / elapsed_ms as f64;
        rate
    }

    /// Whether the rate at `now_ms` is above `limit_bytes_per_s` (Kafka's
    /// `isQuotaExceeded`).
    pub fn is_exceeded(&self, now_ms: u64, limit_bytes_per_s: u64) -> bool {
        #[allow(clippy::cast_precision_loss)]
        let limit = limit_bytes_per_s as f64;
        self.rate(now_ms) > limit
    }
}

/// Whether replica `broker` of `partition` is throttled (Kafka's `isThrottled` and not
/// `isReplicaInSync`): `list`, its topic's `*.replication.throttled.replicas` (`None`: unset),
/// names it and it is not in `isr`.
pub fn is_follower_throttled(list: Option<&str>, partition: i32, broker: i32, isr: &[i32]) -> bool {
    list.is_some_and(|list| lists_replica(list, partition, broker)) && !isr.contains(&broker)
}

/// Whether the leader, broker `leader`, throttles its fetches of `partition` for follower
/// `follower` (Kafka's `ReplicaManager.shouldLeaderThrottle` without the rate): `list`, the
/// topic's `leader.replication.throttled.replicas`, names the leader's replica (Kafka's
/// `TopicConfigHandler` keeps the items naming the broker it runs on) and the follower is not
/// in `isr`.
pub fn is_leader_throttled(
    list: &str,
    partition: i32,
    leader: i32,
    follower: i32,
    isr: &[i32],
) -> bool {
    lists_replica(list, partition, leader) && !isr.contains(&follower)
}

/// Whether `list`, a `*.replication.throttled.replicas` value, names replica `broker` of
/// `partition`: `*`, or a `partition:broker` item (Kafka's `ThrottledReplicaListValidator`
/// shape; an item that does not parse names nothing).
pub fn lists_replica(list: &str, partition: i32, broker: i32) -> bool {
    let list = list.trim();
    if list == "*" {
        return true;
    }
    list.split(',').any(|item| {
        item.split_once(':').is_some_and(|(p, b)| {
            p.trim().parse::<i32>() == Ok(partition) && b.trim().parse::<i32>() == Ok(broker)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_spreads_a_first_burst_over_the_window_and_forgets_old_samples() {
        let mut q = ReplicationQuota::default();
        assert!(
            !q.is_exceeded(0, 0),
            "nothing fetched: not exceeded, even at 0"
        );
        q.record(10_000, 500);
        // 10,000 bytes over at least 10 s: 1,000 B/s.
        assert!((q.rate(900) - 1_000.0).abs() < 1e-9);
        assert!(q.is_exceeded(900, 999));
        assert!(!q.is_exceeded(900, 1_000));
        q.record(10_000, 12_500);
        // Now 12 s past the first sample: the window is [2000, 13000), the first is gone.
        assert!((q.rate(12_600) - 1_000.0).abs() < 1e-9);
        assert!(q.rate(40_000) < 1e-9, "every sample left the window");
        for second in 41..90 {
            q.record(1, second * 1_000);
        }
        assert!(q.samples.len() <= 11);
    }

    #[test]
    fn only_listed_replicas_out_of_the_isr_are_throttled() {
        assert!(is_follower_throttled(Some("0:3"), 0, 3, &[1, 2]));
        assert!(is_follower_throttled(Some("*"), 5, 3, &[1]));
        assert!(
            !is_follower_throttled(Some("0:3"), 0, 3, &[1, 2, 3]),
            "in sync: not throttled"
        );
        assert!(
            !is_follower_throttled(Some("0:3"), 1, 3, &[1]),
            "another partition"
        );
        assert!(
            !is_follower_throttled(Some("0:2"), 0, 3, &[1]),
            "another broker"
        );
        assert!(!is_follower_throttled(None, 0, 3, &[1]), "no list set");
    }

    #[test]
    fn a_leader_throttles_its_listed_replicas_for_followers_out_of_the_isr() {
        assert!(is_leader_throttled("0:1,0:2", 0, 1, 3, &[1, 2]));
        assert!(is_leader_throttled("*", 4, 1, 3, &[1, 2]));
        assert!(
            !is_leader_throttled("0:1,0:2", 0, 1, 2, &[1, 2]),
            "a follower in sync is not throttled"
        );
        assert!(
            !is_leader_throttled("0:3", 0, 1, 3, &[1]),
            "the list names the serving broker, not the follower"
        );
        assert!(
            !is_leader_throttled("1:1", 0, 1, 3, &[1]),
            "another partition"
        );
    }

    #[test]
    fn throttled_replica_lists_name_partition_and_broker_pairs_or_all() {
        assert!(lists_replica("*", 3, 7));
        assert!(lists_replica(" 0:1, 1:2 ", 1, 2));
        assert!(!lists_replica("0:1,1:2", 1, 1));
        assert!(!lists_replica("", 0, 1));
        assert!(!lists_replica("x:y,0", 0, 1));
    }
}
