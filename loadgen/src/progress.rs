//! Live progress on a terminal (indicatif): rate, p99 so far, elapsed and remaining. When
//! stderr is not a terminal the bar is hidden and only the periodic report lines are printed
//! (to stdout).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::time::Duration;

/// Redraws per second of the bar.
const REFRESH_PER_SEC: u8 = 4;

pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A bar of `len` units (seconds of a timed run, or records of a catchup phase).
    pub fn new(label: &str, len: u64, unit: &str) -> Progress {
        let bar = ProgressBar::with_draw_target(
            Some(len),
            ProgressDrawTarget::stderr_with_hz(REFRESH_PER_SEC),
        );
        let template = format!(
            "{{prefix}} [{{elapsed_precise}}] {{bar:30}} {{pos}}/{{len}} {unit} (~{{eta}} left) {{msg}}"
        );
        let style = ProgressStyle::with_template(&template)
            .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        bar.set_prefix(label.to_string());
        bar.enable_steady_tick(Duration::from_millis(250));
        Progress { bar }
    }

    /// Moves the bar to `position` with the latest rate and p99.
    pub fn update(&self, position: u64, msgs_per_sec: f64, p99_ms: Option<f64>, phase: &str) {
        self.bar.set_position(position);
        let p99 = p99_ms.map_or_else(|| "-".to_string(), |ms| format!("{ms:.3} ms"));
        self.bar.set_message(format!(
            "{phase}: {msgs_per_sec:.0} msg/s, p99 so far {p99}"
        ));
    }

    /// A line that stays: above the bar on a terminal, on stdout otherwise.
    pub fn println(&self, line: &str) {
        if self.bar.is_hidden() {
            println!("{line}");
        } else {
            self.bar.println(line);
        }
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
