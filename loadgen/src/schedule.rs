//! The fixed-rate send schedule: record `i` of a run is *intended* to be sent at
//! `start + i / rate`, whatever happened to the records before it.
//!
//! Latency is measured from this intended time, not from the moment the producer got round
//! to sending, so a stalled producer (or broker backpressure that stalls it) shows up in the
//! latency figures instead of silently lowering the offered load — the coordinated-omission
//! correction (Gil Tene). With several producers, producer `k` of `n` sends the records
//! `i·n + k`: together they keep one evenly spaced schedule.
//!
//! Invariant: `intended_ns` is computed from the index alone (integer arithmetic, no
//! accumulated floating-point step), so the schedule never drifts over a long soak run.

use std::time::{Duration, Instant};

/// Nanoseconds in one second.
const NS_PER_SEC: u128 = 1_000_000_000;

/// The run's clock: nanoseconds since one `Instant`, shared by producers and consumers of the
/// process (monotonic, so receipt − intended is never skewed by wall-clock steps).
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    base: Instant,
}

impl Clock {
    pub fn start() -> Clock {
        Clock {
            base: Instant::now(),
        }
    }

    /// Nanoseconds since the clock started (saturates after ~584 years).
    pub fn now_ns(&self) -> u64 {
        u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

/// When each record of a fixed-rate run should leave the producer, in nanoseconds since the
/// run's clock base.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateSchedule {
    start_ns: u64,
    rate_per_sec: u64,
}

impl RateSchedule {
    /// A schedule of `rate_per_sec` records per second starting at `start_ns`.
    pub fn new(start_ns: u64, rate_per_sec: u64) -> RateSchedule {
        assert!(
            rate_per_sec > 0,
            "a fixed-rate schedule needs a rate above zero"
        );
        RateSchedule {
            start_ns,
            rate_per_sec,
        }
    }

    /// Intended send time of the run's record `index` (0-based, over all producers).
    pub fn intended_ns(&self, index: u64) -> u64 {
        let offset_ns = u128::from(index) * NS_PER_SEC / u128::from(self.rate_per_sec);
        // Saturates only after ~584 years of schedule.
        self.start_ns
            .saturating_add(u64::try_from(offset_ns).unwrap_or(u64::MAX))
    }

    /// How long to wait at `now_ns` before record `index` is due; zero when it is late.
    pub fn wait_before(&self, index: u64, now_ns: u64) -> Duration {
        Duration::from_nanos(self.intended_ns(index).saturating_sub(now_ns))
    }
}

/// The global record index of producer `producer` (of `producers`) sending its `nth` record.
pub fn record_index(nth: u64, producer: u32, producers: u32) -> u64 {
    assert!(producer < producers, "producer {producer} of {producers}");
    nth * u64::from(producers) + u64::from(producer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intended_times_are_evenly_spaced_from_start() {
        let s = RateSchedule::new(5_000, 10_000);
        assert_eq!(s.intended_ns(0), 5_000);
        assert_eq!(s.intended_ns(1), 5_000 + 100_000);
        assert_eq!(s.intended_ns(10_000), 5_000 + 1_000_000_000);
    }

    #[test]
    fn rates_that_do_not_divide_a_second_do_not_drift() {
        // 3 per second: a float step of 333_333_333.33 ns would drift; the index formula
        // lands exactly on whole seconds every third record.
        let s = RateSchedule::new(0, 3);
        assert_eq!(s.intended_ns(3), 1_000_000_000);
        assert_eq!(
            s.intended_ns(3 * 86_400 * 365),
            86_400 * 365 * 1_000_000_000
        );
        assert_eq!(s.intended_ns(1), 333_333_333);
    }

    #[test]
    fn late_records_are_due_at_once() {
        let s = RateSchedule::new(0, 1_000);
        assert_eq!(s.wait_before(2, 1_500_000), Duration::from_micros(500));
        assert_eq!(s.wait_before(2, 2_000_000), Duration::ZERO);
        assert_eq!(s.wait_before(2, 9_000_000), Duration::ZERO);
    }

    #[test]
    fn producers_interleave_into_one_schedule() {
        let mut indices: Vec<u64> = (0..3u32)
            .flat_map(|p| (0..4).map(move |nth| record_index(nth, p, 3)))
            .collect();
        indices.sort_unstable();
        assert_eq!(indices, (0..12).collect::<Vec<_>>());
    }
}
