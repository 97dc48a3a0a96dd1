//! The end-to-end latency interval log a run writes per broker (HdrHistogram's standard
//! `.hlog` text format), for plotting and for merging with other tools' logs.

use anyhow::Context as _;
use hdrhistogram::serialization::interval_log::IntervalLogWriterBuilder;
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::Histogram;
use std::fs::File;
use std::io::{BufWriter, Write as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// A broker's HdrHistogram interval log (the standard `.hlog` text format, V2 deflate
/// histograms, values in µs), one interval per second.
pub struct HdrLog {
    path: PathBuf,
    file: BufWriter<File>,
    serializer: V2DeflateSerializer,
}

impl HdrLog {
    pub fn create(path: &Path, label: &str, start: SystemTime) -> anyhow::Result<HdrLog> {
        let file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
        let mut log = HdrLog {
            path: path.to_path_buf(),
            file: BufWriter::new(file),
            serializer: V2DeflateSerializer::new(),
        };
        IntervalLogWriterBuilder::new()
            .add_comment(&format!("sluice-loadgen end-to-end latency, broker {label}"))
            .add_comment("values in microseconds, from the intended send time (coordinated-omission corrected)")
            .with_start_time(start)
            .begin_log_with(&mut log.file, &mut log.serializer)
            .with_context(|| format!("writing {}", log.path.display()))?;
        Ok(log)
    }

    /// Appends the interval `[start_ns, end_ns)` of the run clock (the log's StartTime).
    pub fn write_interval(
        &mut self,
        h: &Histogram<u64>,
        start_ns: u64,
        end_ns: u64,
    ) -> anyhow::Result<()> {
        IntervalLogWriterBuilder::new()
            .begin_log_with(&mut self.file, &mut self.serializer)
            .and_then(|mut w| {
                w.write_histogram(
                    h,
                    Duration::from_nanos(start_ns),
                    Duration::from_nanos(end_ns.saturating_sub(start_ns)),
                    None,
                )
                .map_err(|e| std::io::Error::other(format!("{e:?}")))
            })
            .with_context(|| format!("writing {}", self.path.display()))?;
        self.file
            .flush()
            .with_context(|| format!("writing {}", self.path.display()))
    }
}
