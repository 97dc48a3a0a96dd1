//! Latency histograms: µs resolution, 3 significant figures (HdrHistogram), one per consumer,
//! merged at the end.
//!
//! A record's latency is `receipt − intended send time` (see `schedule`): the coordinated-
//! omission-corrected end-to-end latency. Only records whose intended time falls inside the
//! measured window (after warm-up, before the producers stop) are recorded; every record is
//! still counted as received. Values above the histogram's range are clamped to its top.

use hdrhistogram::Histogram;
use serde::Serialize;

/// Smallest distinguishable latency, µs.
const LOWEST_US: u64 = 1;
/// Largest recordable latency, µs (one hour); larger values are clamped.
const HIGHEST_US: u64 = 3_600_000_000;
/// Significant figures kept by every histogram.
const SIGNIFICANT_FIGURES: u8 = 3;

/// An empty latency histogram (µs) with the range every loadgen histogram shares, so any two
/// of them can be merged.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(LOWEST_US, HIGHEST_US, SIGNIFICANT_FIGURES)
        .expect("constant histogram bounds are valid")
}

/// End-to-end latency in µs from the intended send time to receipt; a receipt before the
/// intended time (impossible on one monotonic clock) counts as 0.
pub fn latency_us(intended_ns: u64, receipt_ns: u64) -> u64 {
    receipt_ns.saturating_sub(intended_ns) / 1_000
}

/// Adds `from` into `into`. Both come from `new_histogram`, so the ranges match and nothing
/// is lost.
pub fn merge(into: &mut Histogram<u64>, from: &Histogram<u64>) {
    into.add(from)
        .expect("histograms from new_histogram share one range");
}

/// The intended-time interval whose records are recorded: `[start_ns, end_ns)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub start_ns: u64,
    pub end_ns: u64,
}

/// One consumer's recorder: latencies of in-window records since the last `take_interval`.
pub struct LatencyRecorder {
    window: Window,
    interval: Histogram<u64>,
}

impl LatencyRecorder {
    pub fn new(window: Window) -> LatencyRecorder {
        LatencyRecorder {
            window,
            interval: new_histogram(),
        }
    }

    /// Records one received record; returns whether it was inside the measured window.
    pub fn record(&mut self, intended_ns: u64, receipt_ns: u64) -> bool {
        let in_window = intended_ns >= self.window.start_ns && intended_ns < self.window.end_ns;
        if in_window {
            self.interval
                .saturating_record(latency_us(intended_ns, receipt_ns));
        }
        in_window
    }

    /// The histogram of records since the previous call, leaving an empty one in its place.
    pub fn take_interval(&mut self) -> Histogram<u64> {
        std::mem::replace(&mut self.interval, new_histogram())
    }
}

/// The percentiles every report shows, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Percentiles {
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub p9999_ms: f64,
    pub max_ms: f64,
    /// Records in the histogram.
    pub count: u64,
}

impl Percentiles {
    pub fn of(histogram: &Histogram<u64>) -> Percentiles {
        let ms = |us: u64| us as f64 / 1_000.0;
        let at = |q: f64| ms(histogram.value_at_quantile(q));
        Percentiles {
            p50_ms: at(0.50),
            p90_ms: at(0.90),
            p99_ms: at(0.99),
            p999_ms: at(0.999),
            p9999_ms: at(0.9999),
            max_ms: ms(histogram.max()),
            count: histogram.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::RateSchedule;

    /// 1,000 records/s for 10 s; the producer stalls for one second at t = 5 s and then sends
    /// the backlog at once. Each record takes 100 µs from send to receipt.
    fn stalled_run() -> Vec<(u64, u64, u64)> {
        let schedule = RateSchedule::new(0, 1_000);
        let stall = (5_000_000_000u64, 6_000_000_000u64);
        (0..10_000)
            .map(|i| {
                let intended_ns = schedule.intended_ns(i);
                let sent_ns = if intended_ns >= stall.0 && intended_ns < stall.1 {
                    stall.1
                } else {
                    intended_ns
                };
                (intended_ns, sent_ns, sent_ns + 100_000)
            })
            .collect()
    }

    #[test]
    fn coordinated_omission_is_corrected_by_timing_from_the_intended_send() {
        let window = Window {
            start_ns: 0,
            end_ns: u64::MAX,
        };
        let mut corrected = LatencyRecorder::new(window);
        let mut naive = LatencyRecorder::new(window);
        for (intended_ns, sent_ns, receipt_ns) in stalled_run() {
            corrected.record(intended_ns, receipt_ns);
            naive.record(sent_ns, receipt_ns);
        }
        let corrected = Percentiles::of(&corrected.take_interval());
        let naive = Percentiles::of(&naive.take_interval());
        // Timed from the actual send, the stall vanishes: every record looks like 100 µs.
        assert!((naive.p99_ms - 0.1).abs() < 0.001, "{naive:?}");
        assert!((naive.max_ms - 0.1).abs() < 0.001, "{naive:?}");
        // Timed from the intended send, 10 % of the records waited up to a second: p90 is
        // still fast, p99 sits inside the stall and the max is the whole stall.
        assert!((corrected.p90_ms - 0.1).abs() < 0.001, "{corrected:?}");
        assert!(corrected.p99_ms > 800.0, "{corrected:?}");
        assert!(
            corrected.max_ms > 999.0 && corrected.max_ms < 1_002.0,
            "{corrected:?}"
        );
        assert_eq!(corrected.count, 10_000);
    }

    #[test]
    fn only_records_intended_inside_the_window_are_recorded() {
        let mut recorder = LatencyRecorder::new(Window {
            start_ns: 1_000,
            end_ns: 2_000,
        });
        assert!(!recorder.record(999, 50_000));
        assert!(recorder.record(1_000, 50_000));
        assert!(recorder.record(1_999, 50_000));
        assert!(!recorder.record(2_000, 50_000));
        assert_eq!(recorder.take_interval().len(), 2);
        assert_eq!(recorder.take_interval().len(), 0, "take_interval resets");
    }

    #[test]
    fn merged_histograms_equal_one_histogram_of_all_values() {
        let values: Vec<u64> = (0..20_000u64).map(|i| (i * 7_919) % 50_000 + 1).collect();
        let mut whole = new_histogram();
        let mut parts = [new_histogram(), new_histogram(), new_histogram()];
        for (i, &v) in values.iter().enumerate() {
            whole.record(v).expect("in range");
            parts[i % 3].record(v).expect("in range");
        }
        let mut merged = new_histogram();
        for part in &parts {
            merge(&mut merged, part);
        }
        assert_eq!(merged, whole);
        assert_eq!(Percentiles::of(&merged), Percentiles::of(&whole));
        assert_eq!(merged.len(), 20_000);
    }

    #[test]
    fn huge_and_negative_latencies_are_clamped_not_lost() {
        let mut recorder = LatencyRecorder::new(Window {
            start_ns: 0,
            end_ns: u64::MAX,
        });
        recorder.record(10, 5); // receipt before intent: 0 µs
        recorder.record(0, u64::MAX); // centuries: clamped to the top
        let h = recorder.take_interval();
        assert_eq!(h.len(), 2);
        assert!(h.max() >= HIGHEST_US / 2);
        assert_eq!(latency_us(10, 5), 0);
    }
}
