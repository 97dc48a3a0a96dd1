//! Client quotas enforced where the work is done: byte rates (KIP-13, KIP-55, KIP-219) and
//! request time (`request_percentage`, KIP-124). Each shard meters, for every (user, client
//! id) it serves, the produce request bytes, the fetch response bytes and the time its
//! handlers spent on the client's requests over Kafka's window — `quota.window.num` (11)
//! samples of `quota.window.size.seconds` (1 s) — and a request that takes the rate above the
//! quota resolved from the metadata (`replication::metadata::quotas::resolve`, Kafka's order of
//! entity matches) is answered with `throttle_time_ms` = how long the client must pause to fall
//! back to the quota (for request time at most one sample, as Kafka bounds it), and its
//! connection reads nothing more for that long (KIP-219's muted channel). Request time is in
//! Kafka's unit: percent of one handler thread's time — here of the shard's, which handles all
//! of its connections' requests. Kafka meters per broker; here each shard meters its own
//! connections, so a client whose connections land on several shards of one broker gets the
//! quota on each. `controller_mutation_rate` is stored and described, not enforced.

use crate::session::Session;
use replication::metadata::quotas::{
    resolve, ClientQuotas, CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE,
};
use std::cell::RefCell;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Samples per rate window (Kafka's `quota.window.num` default).
const SAMPLES: usize = 11;
/// One sample's length, ms (Kafka's `quota.window.size.seconds` default, 1 s).
const SAMPLE_MS: u64 = 1000;
/// Most meters one shard keeps per direction; past it the idlest are dropped (a meter is
/// re-created empty, so a client can only gain by it after being idle a whole window).
const METERS_MAX: usize = 10_000;

/// A rate over the last [`SAMPLES`] samples of [`SAMPLE_MS`] (Kafka's `Rate` with
/// `SampledStat`): total of the samples still in the window divided by the window's length,
/// at least `SAMPLES - 1` samples long (Kafka's `Rate.windowSize`).
#[derive(Clone, Debug)]
struct Meter {
    /// (sample start, ms since the meter's epoch; value) — oldest first.
    samples: Vec<(u64, f64)>,
}

impl Meter {
    fn new() -> Meter {
        Meter {
            samples: Vec::with_capacity(SAMPLES),
        }
    }

    /// Adds `value` at `now_ms` and returns (rate per second, window length in ms).
    fn record(&mut self, value: f64, now_ms: u64) -> (f64, u64) {
        let window_ms = SAMPLE_MS * SAMPLES as u64;
        self.samples
            .retain(|(start, _)| now_ms.saturating_sub(*start) < window_ms);
        match self.samples.last_mut() {
            Some((start, v)) if now_ms - *start < SAMPLE_MS => *v += value,
            _ => {
                self.samples.push((now_ms - now_ms % SAMPLE_MS, value));
            }
        }
        let oldest = self.samples.first().map_or(now_ms, |(start, _)| *start);
        let mut elapsed_ms = now_ms - oldest;
        let full = elapsed_ms / SAMPLE_MS;
        let min_full = SAMPLES as u64 - 1;
        if full < min_full {
            elapsed_ms += (min_full - full) * SAMPLE_MS;
        }
        let elapsed_ms = elapsed_ms.max(1);
        let total: f64 = self.samples.iter().map(|(_, v)| v).sum();
        (total * 1000.0 / elapsed_ms as f64, elapsed_ms)
    }
}

/// Kafka's `QuotaUtils.throttleTime`: how long, ms, a client at `rate` must pause for its
/// rate over `window_ms` to fall back to `quota` (0 when it is within it).
fn throttle_ms(rate: f64, quota: f64, window_ms: u64) -> u64 {
    if rate <= quota {
        return 0;
    }
    ((rate - quota) / quota * window_ms as f64).round() as u64
}

/// What a meter counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Metered {
    /// Produce request bytes (`producer_byte_rate`).
    Produce,
    /// Fetch response bytes (`consumer_byte_rate`).
    Fetch,
    /// Handler time on the shard (`request_percentage`, KIP-124).
    RequestTime,
}

impl Metered {
    /// The quota key that bounds this meter.
    fn quota_key(self) -> &'static str {
        match self {
            Metered::Produce => PRODUCER_BYTE_RATE,
            Metered::Fetch => CONSUMER_BYTE_RATE,
            Metered::RequestTime => REQUEST_PERCENTAGE,
        }
    }

    /// The longest throttle this meter asks for, ms: one sample for request time (Kafka's
    /// `ClientRequestQuotaManager` bounds it by `quota.window.size.seconds`), none for bytes.
    fn throttle_max_ms(self) -> u64 {
        match self {
            Metered::Produce | Metered::Fetch => u64::MAX,
            Metered::RequestTime => SAMPLE_MS,
        }
    }
}

/// `time` in the unit of `request_percentage`'s rate: percent of one second (Kafka's
/// `ClientRequestQuotaManager.nanosToPercentage`).
pub fn request_time_percent(time: Duration) -> f64 {
    time.as_secs_f64() * 100.0
}

/// One shard's meters, by what they count and (user, client id).
#[derive(Debug)]
pub struct QuotaMeters {
    epoch: Instant,
    meters: RefCell<HashMap<(Metered, String, String), Meter>>,
}

impl Default for QuotaMeters {
    fn default() -> Self {
        QuotaMeters {
            epoch: Instant::now(),
            meters: RefCell::default(),
        }
    }
}

impl QuotaMeters {
    /// Meters `amount` of `metered` (bytes, or [`request_time_percent`]) for the session's
    /// (user, client id) against `quotas` (the metadata's) and returns the throttle time to
    /// answer, ms (0: within its quota, or no quota). A throttled session's connection reads
    /// nothing more until the throttle time has passed (KIP-219).
    pub fn record(
        &self,
        quotas: &ClientQuotas,
        session: &Session,
        client_id: &str,
        metered: Metered,
        amount: f64,
    ) -> i32 {
        if quotas.is_empty() {
            return 0;
        }
        let user = session.user();
        let Some(quota) = resolve(quotas, user, client_id, metered.quota_key()) else {
            return 0;
        };
        let now_ms = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        let window_ms = SAMPLE_MS * SAMPLES as u64;
        let mut all = self.meters.borrow_mut();
        if all.len() >= METERS_MAX {
            all.retain(|_, m| {
                m.samples
                    .last()
                    .is_some_and(|(s, _)| now_ms - s < window_ms)
            });
        }
        let meter = all
            .entry((metered, user.to_string(), client_id.to_string()))
            .or_insert_with(Meter::new);
        let (rate, window_ms) = meter.record(amount, now_ms);
        let throttle = throttle_ms(rate, quota, window_ms).min(metered.throttle_max_ms());
        if throttle > 0 {
            session.throttle_for(Duration::from_millis(throttle));
        }
        i32::try_from(throttle).unwrap_or(i32::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_spans_at_least_ten_samples_and_throttles_back_to_the_quota() {
        let mut m = Meter::new();
        // 11 000 bytes at once: over the minimum window of 10 s, 1 100 B/s.
        let (rate, window) = m.record(11_000.0, 0);
        assert_eq!(window, 10_000);
        assert!((rate - 1100.0).abs() < 1e-9);
        // A quota of 1 000 B/s: pause 1 s, after which 11 000 B over 11 s is the quota.
        assert_eq!(throttle_ms(rate, 1000.0, window), 1000);
        assert_eq!(throttle_ms(900.0, 1000.0, window), 0);
        // Samples older than the window are forgotten.
        let (rate, _) = m.record(0.0, 11_500);
        assert_eq!(rate, 0.0);
        let (rate, window) = m.record(500.0, 11_600);
        assert_eq!(window, 10_600);
        assert!(rate > 0.0 && rate < 100.0);
    }

    #[test]
    fn request_time_is_in_percent_of_a_second_and_its_throttle_is_at_most_one_sample() {
        assert!((request_time_percent(Duration::from_millis(5)) - 0.5).abs() < 1e-9);
        let mut m = Meter::new();
        // 2 s of handling in the minimum 10 s window: 20 %, against a quota of 1 %.
        let (rate, window) = m.record(request_time_percent(Duration::from_secs(2)), 0);
        assert!((rate - 20.0).abs() < 1e-9);
        assert_eq!(throttle_ms(rate, 1.0, window), 190_000);
        assert_eq!(Metered::RequestTime.throttle_max_ms(), 1000);
        assert_eq!(Metered::Produce.throttle_max_ms(), u64::MAX);
    }
}
