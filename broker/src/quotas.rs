//! Client quotas enforced per broker, as Kafka: byte rates (KIP-13, KIP-55, KIP-219) and
//! request time (`request_percentage`, KIP-124). Each shard meters, for every (user, client
//! id) it serves, the produce request bytes, the fetch response bytes and the time its
//! handlers spent on the client's requests over Kafka's window — `quota.window.num` (11)
//! samples of `quota.window.size.seconds` (1 s) — and a request that takes the broker's rate
//! above the quota resolved from the metadata (`replication::metadata::quotas::resolve`,
//! Kafka's order of entity matches) is answered with `throttle_time_ms` = how long the client
//! must pause to fall back to the quota (for request time at most one sample, as Kafka bounds
//! it), and its connection reads nothing more for that long (KIP-219's muted channel).
//!
//! The broker's rate, shards staying share-nothing: every [`QUOTA_REPORT_INTERVAL_MS`], while
//! the metadata has client quotas, each shard sends the others the samples of the meters that
//! moved since its last report ([`QuotaMeters::take_reports`], at most
//! [`QUOTA_REPORT_METERS_MAX`] meters a message); each shard keeps the latest samples every
//! other shard reported per meter ([`QuotaMeters::apply_report`]), and a rate is the local
//! samples plus the reported ones still in the window, over the same window
//! ([`window_rate`]). The rate a shard sees therefore lags the broker's by at most one report
//! interval (plus the mesh's delivery): a client whose connections are spread over the
//! shards can pass its quota by what it sends on the other shards in one interval before it
//! is throttled — the throttle then brings the broker-wide rate back to the quota.
//!
//! Request time is in Kafka's unit: percent of one handler thread's time. Kafka records every
//! request handler thread's time for a client into one sensor per broker and compares the sum
//! with the quota as is (`ClientRequestQuotaManager`); here the shards' handler times are
//! summed the same way, so `request_percentage=100` is one shard's worth of time, however it
//! is spread. `controller_mutation_rate` is stored and described, not enforced.
//!
//! What a meter is for follows the quota that matched, as Kafka's metric tags (KIP-55,
//! `DefaultQuotaCallback.quotaMetricTags`): the user if the matched entity names a user or
//! the default user, the client id if it names a client id or the default one. So a quota of
//! a user alone meters all of that user's client ids together, a quota of user + client id
//! each client id of the user apart, and a quota of a client id alone all its users together.

use crate::session::Session;
use replication::metadata::quotas::{
    resolve_matched, ClientQuotas, CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE,
};
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Samples per rate window (Kafka's `quota.window.num` default).
const SAMPLES: usize = 11;
/// One sample's length, ms (Kafka's `quota.window.size.seconds` default, 1 s).
const SAMPLE_MS: u64 = 1000;
/// Most meters one shard keeps per direction; past it the idlest are dropped (a meter is
/// re-created empty, so a client can only gain by it after being idle a whole window). Bounds
/// the other shards' reported meters kept by a shard too.
const METERS_MAX: usize = 10_000;
/// How often each shard reports its moved meters to the other shards, ms: how stale the other
/// shards' part of a broker-wide rate may be.
pub const QUOTA_REPORT_INTERVAL_MS: u64 = 200;
/// Most meters in one [`QuotaReport`] message, in meters (more go in further messages).
pub const QUOTA_REPORT_METERS_MAX: usize = 512;
/// The window, ms: [`SAMPLES`] samples of [`SAMPLE_MS`].
const WINDOW_MS: u64 = SAMPLE_MS * SAMPLES as u64;
// The other shards' part of a rate is less than a sample stale, and a report's meters are
// among those a shard keeps.
const _: () = assert!(QUOTA_REPORT_INTERVAL_MS < SAMPLE_MS);
const _: () = assert!(QUOTA_REPORT_METERS_MAX <= METERS_MAX);

/// A sample: (its start, ms since its shard's meters' epoch; its value).
type Sample = (u64, f64);
/// What a meter counts, for the user and the client id its quota's entity names (None: the
/// entity does not name it, so the meter spans all of them).
type MeterKey = (Metered, Option<String>, Option<String>);

/// One shard's samples of one meter: Kafka's `SampledStat` samples of [`SAMPLE_MS`], of which
/// those in the last [`SAMPLES`] count.
#[derive(Clone, Debug)]
struct Meter {
    /// Oldest first; at most [`SAMPLES`] (older ones are dropped as a sample is added).
    samples: Vec<Sample>,
}

impl Meter {
    fn new() -> Meter {
        Meter {
            samples: Vec::with_capacity(SAMPLES),
        }
    }

    /// Adds `value` at `now_ms`, dropping the samples that left the window.
    fn add(&mut self, value: f64, now_ms: u64) {
        self.samples
            .retain(|(start, _)| now_ms.saturating_sub(*start) < WINDOW_MS);
        match self.samples.last_mut() {
            Some((start, v)) if now_ms.saturating_sub(*start) < SAMPLE_MS => *v += value,
            _ => self.samples.push((now_ms - now_ms % SAMPLE_MS, value)),
        }
        assert!(
            self.samples.len() <= SAMPLES,
            "a sample per {SAMPLE_MS} ms of the window"
        );
    }

    /// Whether the meter has a sample in the window at `now_ms`.
    fn is_live(&self, now_ms: u64) -> bool {
        self.samples
            .last()
            .is_some_and(|(start, _)| now_ms.saturating_sub(*start) < WINDOW_MS)
    }
}

/// The rate per second at `now_ms`, and the window length it is over in ms, of a meter whose
/// samples on this shard are `local` and on the other shards `remote` (Kafka's `Rate` over
/// `SampledStat`): the total of the samples still in the window divided by the window's
/// length, from the oldest sample counted and at least `SAMPLES - 1` samples long (Kafka's
/// `Rate.windowSize`). Samples that left the window (a report older than it) do not count.
fn window_rate<'a>(
    local: &'a [Sample],
    remote: impl Iterator<Item = &'a [Sample]>,
    now_ms: u64,
) -> (f64, u64) {
    let (mut total, mut oldest) = (0.0, now_ms);
    for (start, value) in local.iter().chain(remote.flatten()) {
        if now_ms.saturating_sub(*start) < WINDOW_MS {
            total += value;
            oldest = oldest.min(*start);
        }
    }
    let mut elapsed_ms = now_ms - oldest;
    let full = elapsed_ms / SAMPLE_MS;
    let min_full = SAMPLES as u64 - 1;
    if full < min_full {
        elapsed_ms += (min_full - full) * SAMPLE_MS;
    }
    let elapsed_ms = elapsed_ms.max(1);
    assert!(
        elapsed_ms <= WINDOW_MS + SAMPLE_MS,
        "the window is at most its samples"
    );
    (total * 1000.0 / elapsed_ms as f64, elapsed_ms)
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

/// One meter's samples as a shard reports them to the others.
#[derive(Clone, Debug)]
struct MeterReport {
    key: MeterKey,
    /// In the reporting shard's time (ms since its [`QuotaReport::epoch`]), oldest first.
    samples: Vec<Sample>,
}

/// The meters that moved on shard `from_shard` since its last report: what
/// [`ShardMsg::QuotaReport`](crate::messages::ShardMsg) carries, once for every other shard.
#[derive(Clone, Debug)]
pub struct QuotaReport {
    /// The reporting shard.
    pub from_shard: usize,
    /// The reporting shard's meters' epoch, which its samples' times count from.
    epoch: Instant,
    /// At most [`QUOTA_REPORT_METERS_MAX`].
    meters: Vec<MeterReport>,
}

/// One shard's meters, by what they count and for whom ([`MeterKey`]), with the latest samples the
/// other shards reported for them.
#[derive(Debug)]
pub struct QuotaMeters {
    epoch: Instant,
    meters: RefCell<HashMap<MeterKey, Meter>>,
    /// The meters that took a sample since the last [`QuotaMeters::take_reports`] (a subset of
    /// `meters`' keys, so bounded as they are).
    moved: RefCell<HashSet<MeterKey>>,
    /// Per meter, per other shard, its latest reported samples in this shard's time; at most
    /// [`METERS_MAX`] meters.
    remote: RefCell<HashMap<MeterKey, HashMap<usize, Vec<Sample>>>>,
}

impl Default for QuotaMeters {
    fn default() -> Self {
        QuotaMeters::with_epoch(Instant::now())
    }
}

impl QuotaMeters {
    fn with_epoch(epoch: Instant) -> QuotaMeters {
        QuotaMeters {
            epoch,
            meters: RefCell::default(),
            moved: RefCell::default(),
            remote: RefCell::default(),
        }
    }

    /// Now, in ms since this shard's epoch.
    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Meters `amount` of `metered` (bytes, or [`request_time_percent`]) for the session's
    /// (user, client id) against `quotas` (the metadata's) and returns the throttle time to
    /// answer, ms (0: within its quota, or no quota), from the broker's rate: this shard's
    /// samples and the other shards' reported ones. A throttled session's connection reads
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
        let throttle = self.record_at(
            quotas,
            session.user(),
            client_id,
            metered,
            amount,
            self.now_ms(),
        );
        if throttle > 0 {
            session.throttle_for(Duration::from_millis(throttle));
        }
        i32::try_from(throttle).unwrap_or(i32::MAX)
    }

    /// [`QuotaMeters::record`] at `now_ms`, for `user`: the throttle time, ms.
    fn record_at(
        &self,
        quotas: &ClientQuotas,
        user: &str,
        client_id: &str,
        metered: Metered,
        amount: f64,
        now_ms: u64,
    ) -> u64 {
        let Some(quota) = resolve_matched(quotas, user, client_id, metered.quota_key()) else {
            return 0;
        };
        let (metered_user, metered_client_id) = quota.metered_as(user, client_id);
        let key = (
            metered,
            metered_user.map(str::to_string),
            metered_client_id.map(str::to_string),
        );
        let mut all = self.meters.borrow_mut();
        if all.len() >= METERS_MAX {
            all.retain(|_, m| m.is_live(now_ms));
            self.moved.borrow_mut().retain(|k| all.contains_key(k));
        }
        let meter = all.entry(key.clone()).or_insert_with(Meter::new);
        meter.add(amount, now_ms);
        let remote = self.remote.borrow();
        let reported = remote
            .get(&key)
            .into_iter()
            .flat_map(|by_shard| by_shard.values());
        let (rate, window_ms) = window_rate(&meter.samples, reported.map(Vec::as_slice), now_ms);
        self.moved.borrow_mut().insert(key);
        throttle_ms(rate, quota.value, window_ms).min(metered.throttle_max_ms())
    }

    /// The reports of shard `from_shard` for the other shards: the samples of every meter
    /// that moved since the last call, [`QUOTA_REPORT_METERS_MAX`] meters a report. None
    /// when `quotas` (the metadata's) is empty: without quotas nothing is metered or sent.
    pub fn take_reports(&self, quotas: &ClientQuotas, from_shard: usize) -> Vec<Arc<QuotaReport>> {
        let moved: Vec<MeterKey> = self.moved.borrow_mut().drain().collect();
        if quotas.is_empty() {
            return Vec::new();
        }
        let meters = self.meters.borrow();
        let moved: Vec<MeterReport> = moved
            .into_iter()
            .filter_map(|key| {
                let samples = meters.get(&key)?.samples.clone();
                Some(MeterReport { key, samples })
            })
            .collect();
        moved
            .chunks(QUOTA_REPORT_METERS_MAX)
            .map(|chunk| {
                assert!(chunk.len() <= QUOTA_REPORT_METERS_MAX);
                Arc::new(QuotaReport {
                    from_shard,
                    epoch: self.epoch,
                    meters: chunk.to_vec(),
                })
            })
            .collect()
    }

    /// Keeps another shard's report: its samples replace the ones it reported before for the
    /// same meters.
    pub fn apply_report(&self, report: &QuotaReport) {
        self.apply_report_at(report, self.now_ms());
    }

    /// [`QuotaMeters::apply_report`] at `now_ms`: samples older than the window are dropped,
    /// and a meter left without any is forgotten.
    fn apply_report_at(&self, report: &QuotaReport, now_ms: u64) {
        let mut remote = self.remote.borrow_mut();
        for meter in &report.meters {
            // The sample's start in this shard's time; one before this shard's epoch is older
            // than any of its windows.
            let samples: Vec<Sample> = meter
                .samples
                .iter()
                .rev()
                .take(SAMPLES)
                .filter_map(|(start, value)| {
                    let at = report.epoch.checked_add(Duration::from_millis(*start))?;
                    let ms =
                        u64::try_from(at.checked_duration_since(self.epoch)?.as_millis()).ok()?;
                    (now_ms.saturating_sub(ms) < WINDOW_MS).then_some((ms, *value))
                })
                .collect();
            if samples.is_empty() {
                if let Some(by_shard) = remote.get_mut(&meter.key) {
                    by_shard.remove(&report.from_shard);
                    if by_shard.is_empty() {
                        remote.remove(&meter.key);
                    }
                }
                continue;
            }
            if remote.len() >= METERS_MAX && !remote.contains_key(&meter.key) {
                remote.retain(|_, by_shard| {
                    by_shard.retain(|_, s| {
                        s.iter()
                            .any(|(start, _)| now_ms.saturating_sub(*start) < WINDOW_MS)
                    });
                    !by_shard.is_empty()
                });
                if remote.len() >= METERS_MAX {
                    continue;
                }
            }
            remote
                .entry(meter.key.clone())
                .or_default()
                .insert(report.from_shard, samples);
        }
        assert!(
            remote.len() <= METERS_MAX,
            "the other shards' meters are bounded"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use replication::metadata::quotas::{QuotaValue, ENTITY_CLIENT_ID, ENTITY_USER};

    /// `key`=`value` for the entity `pairs` (entity type, name; None: the default).
    fn quota(pairs: &[(&str, Option<&str>)], key: &str, value: f64) -> ClientQuotas {
        let mut quotas = ClientQuotas::default();
        let entity = pairs
            .iter()
            .map(|(kind, name)| (kind.to_string(), name.map(str::to_string)))
            .collect();
        quotas
            .entry(entity)
            .or_default()
            .insert(key.to_string(), QuotaValue(value));
        quotas
    }

    /// `key`=`value` for client id `client_id`.
    fn client_quota(client_id: &str, key: &str, value: f64) -> ClientQuotas {
        quota(&[(ENTITY_CLIENT_ID, Some(client_id))], key, value)
    }

    /// Sends every report of `from` (shard `from_id`) to `to`, at `now_ms`.
    fn report(from: &QuotaMeters, from_id: usize, to: &QuotaMeters, q: &ClientQuotas, now_ms: u64) {
        for r in from.take_reports(q, from_id) {
            to.apply_report_at(&r, now_ms);
        }
    }

    fn rate(samples: &[Sample], now_ms: u64) -> (f64, u64) {
        window_rate(samples, std::iter::empty(), now_ms)
    }

    #[test]
    fn the_rate_spans_at_least_ten_samples_and_throttles_back_to_the_quota() {
        let mut m = Meter::new();
        // 11 000 bytes at once: over the minimum window of 10 s, 1 100 B/s.
        m.add(11_000.0, 0);
        let (r, window) = rate(&m.samples, 0);
        assert_eq!(window, 10_000);
        assert!((r - 1100.0).abs() < 1e-9);
        // A quota of 1 000 B/s: pause 1 s, after which 11 000 B over 11 s is the quota.
        assert_eq!(throttle_ms(r, 1000.0, window), 1000);
        assert_eq!(throttle_ms(900.0, 1000.0, window), 0);
        // Samples older than the window are forgotten.
        m.add(0.0, 11_500);
        assert_eq!(rate(&m.samples, 11_500).0, 0.0);
        m.add(500.0, 11_600);
        let (r, window) = rate(&m.samples, 11_600);
        assert_eq!(window, 10_600);
        assert!(r > 0.0 && r < 100.0);
    }

    #[test]
    fn request_time_is_in_percent_of_a_second_and_its_throttle_is_at_most_one_sample() {
        assert!((request_time_percent(Duration::from_millis(5)) - 0.5).abs() < 1e-9);
        let mut m = Meter::new();
        // 2 s of handling in the minimum 10 s window: 20 %, against a quota of 1 %.
        m.add(request_time_percent(Duration::from_secs(2)), 0);
        let (r, window) = rate(&m.samples, 0);
        assert!((r - 20.0).abs() < 1e-9);
        assert_eq!(throttle_ms(r, 1.0, window), 190_000);
        assert_eq!(Metered::RequestTime.throttle_max_ms(), 1000);
        assert_eq!(Metered::Produce.throttle_max_ms(), u64::MAX);
    }

    #[test]
    fn two_shards_each_taking_half_a_clients_bytes_throttle_it_at_the_brokers_quota() {
        // 1 000 B/s for "c"; each shard takes 3 000 B a second for 2 s: 600 B/s over the
        // minimum 10 s window alone, 1 200 B/s for the broker.
        let q = client_quota("c", PRODUCER_BYTE_RATE, 1000.0);
        let epoch = Instant::now();
        let (a, b) = (
            QuotaMeters::with_epoch(epoch),
            QuotaMeters::with_epoch(epoch),
        );
        let alone = QuotaMeters::with_epoch(epoch);
        for second in 0..2 {
            let at = second * 1000;
            assert_eq!(
                alone.record_at(&q, "u", "c", Metered::Produce, 3000.0, at),
                0
            );
            assert_eq!(a.record_at(&q, "u", "c", Metered::Produce, 3000.0, at), 0);
            report(&a, 0, &b, &q, at + 100);
            let throttle = b.record_at(&q, "u", "c", Metered::Produce, 3000.0, at + 100);
            report(&b, 1, &a, &q, at + 200);
            assert_eq!(throttle > 0, second == 1, "second {second}: {throttle} ms");
        }
        // Shard a, with b's report, throttles too: 12 000 B over 10.3 s is 1 165 B/s, 1.7 s
        // of pause from 1 000 B/s.
        let throttle = a.record_at(&q, "u", "c", Metered::Produce, 0.0, 1300);
        assert_eq!(throttle, 1700);
        // Shard a alone would not have: 6 000 B over 10.3 s.
        assert_eq!(
            alone.record_at(&q, "u", "c", Metered::Produce, 0.0, 1300),
            0
        );
        // Another client is metered on its own.
        let q2 = client_quota("d", PRODUCER_BYTE_RATE, 1000.0);
        assert_eq!(a.record_at(&q2, "u", "d", Metered::Produce, 100.0, 1300), 0);
    }

    #[test]
    fn a_users_quota_meters_all_its_client_ids_together() {
        // 1 000 B/s for user "u" alone: two client ids taking 6 000 B each in the minimum
        // 10 s window are 1 200 B/s together, over it; each alone would be within it.
        let q = quota(&[(ENTITY_USER, Some("u"))], PRODUCER_BYTE_RATE, 1000.0);
        let a = QuotaMeters::default();
        assert_eq!(a.record_at(&q, "u", "c1", Metered::Produce, 6000.0, 0), 0);
        assert!(a.record_at(&q, "u", "c2", Metered::Produce, 6000.0, 0) > 0);
        // The default user's quota is metered per user, each user apart.
        let q = quota(&[(ENTITY_USER, None)], PRODUCER_BYTE_RATE, 1000.0);
        let b = QuotaMeters::default();
        assert_eq!(b.record_at(&q, "v", "c1", Metered::Produce, 6000.0, 0), 0);
        assert_eq!(b.record_at(&q, "w", "c1", Metered::Produce, 6000.0, 0), 0);
        assert!(b.record_at(&q, "v", "c2", Metered::Produce, 6000.0, 0) > 0);
        // A user + default client id quota: each client id of the user apart.
        let q = quota(
            &[(ENTITY_USER, Some("u")), (ENTITY_CLIENT_ID, None)],
            PRODUCER_BYTE_RATE,
            1000.0,
        );
        let c = QuotaMeters::default();
        assert_eq!(c.record_at(&q, "u", "c1", Metered::Produce, 6000.0, 0), 0);
        assert_eq!(c.record_at(&q, "u", "c2", Metered::Produce, 6000.0, 0), 0);
    }

    #[test]
    fn reports_older_than_the_window_do_not_count() {
        let q = client_quota("c", PRODUCER_BYTE_RATE, 1000.0);
        let epoch = Instant::now();
        let (a, b) = (
            QuotaMeters::with_epoch(epoch),
            QuotaMeters::with_epoch(epoch),
        );
        // Shard a took 20 000 B at 0 and reported it: on b that alone is over the quota.
        a.record_at(&q, "u", "c", Metered::Produce, 20_000.0, 0);
        report(&a, 0, &b, &q, 100);
        assert!(b.record_at(&q, "u", "c", Metered::Produce, 0.0, 200) > 0);
        // A whole window later a's samples have left it: b no longer counts them.
        assert_eq!(
            b.record_at(&q, "u", "c", Metered::Produce, 0.0, WINDOW_MS + 100),
            0
        );
        // A report that arrives after its samples left the window is dropped on arrival.
        let c = QuotaMeters::with_epoch(epoch);
        a.record_at(&q, "u", "c", Metered::Produce, 0.0, 500);
        report(&a, 0, &c, &q, WINDOW_MS + 600);
        assert!(c.remote.borrow().is_empty());
        // Only the meters that moved since the last report are reported.
        assert!(a.take_reports(&q, 0).is_empty());
    }

    #[test]
    fn with_no_quotas_nothing_is_metered_or_sent() {
        let none = ClientQuotas::default();
        let q = client_quota("c", PRODUCER_BYTE_RATE, 1000.0);
        let a = QuotaMeters::default();
        assert_eq!(a.record_at(&q, "u", "other", Metered::Produce, 1e9, 0), 0);
        assert!(
            a.take_reports(&q, 0).is_empty(),
            "no quota for the client: no meter"
        );
        a.record_at(&q, "u", "c", Metered::Produce, 10.0, 0);
        assert!(
            a.take_reports(&none, 0).is_empty(),
            "quotas removed: nothing sent"
        );
        assert!(
            a.take_reports(&q, 0).is_empty(),
            "and the moved meters forgotten"
        );
    }

    #[test]
    fn a_report_carries_at_most_its_bound_of_meters() {
        let q = quota(&[(ENTITY_CLIENT_ID, None)], PRODUCER_BYTE_RATE, 1000.0);
        let a = QuotaMeters::default();
        for client_id in 0..QUOTA_REPORT_METERS_MAX + 1 {
            a.record_at(&q, "u", &client_id.to_string(), Metered::Produce, 1.0, 0);
        }
        let reports = a.take_reports(&q, 3);
        assert_eq!(reports.len(), 2);
        assert_eq!(reports[0].meters.len(), QUOTA_REPORT_METERS_MAX);
        assert_eq!(reports[1].meters.len(), 1);
        assert!(reports.iter().all(|r| r.from_shard == 3));
    }
}
