//! The machine's own limits, measured in the same run as the broker figures so that each
//! broker figure can be stated as a ratio to them (DESIGN.md §7: benchmarks report ratios
//! against a baseline measured in the same run).
//!
//! - Loopback TCP round trip: 1 KiB ping-pong with an echo thread (on the broker's CPUs when
//!   they are known, else on those `--loadgen-cpus` leaves, so the hop crosses cores as a
//!   request to the broker does).
//! - Disk, in the broker's data directory's filesystem: O_DIRECT sequential write bandwidth
//!   (1 MiB writes, `SEQ_WRITERS` in flight, into a preallocated file, ending with fdatasync),
//!   4 KiB O_DIRECT write latency and 4 KiB O_DIRECT write + fdatasync latency at queue
//!   depth 1 (new blocks of a preallocated file, as a log appends into a preallocated
//!   segment).
//!
//! Each part is bounded in time (about a second); a part that cannot run (tmpfs has no
//! O_DIRECT) is left out with a note rather than failing the run.

use crate::cpus::CpuSet;
use anyhow::Context as _;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::alloc::{self, Layout};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Size of the ping-pong message.
const RTT_MESSAGE_BYTES: usize = 1024;
/// Round trips measured (after `RTT_WARMUP` unmeasured ones), or fewer if `PART_TIME` runs out.
const RTT_SAMPLES: usize = 20_000;
const RTT_WARMUP: usize = 1_000;
/// Time bound of each measured part.
const PART_TIME: Duration = Duration::from_secs(1);
/// O_DIRECT alignment and the small-write size.
const BLOCK_BYTES: usize = 4096;
/// Sequential write size and the number of writer threads (writes in flight).
const SEQ_WRITE_BYTES: usize = 1 << 20;
const SEQ_WRITERS: usize = 4;
/// Bytes preallocated per sequential writer (the part stops earlier when `PART_TIME` is up).
const SEQ_BYTES_PER_WRITER: u64 = 256 << 20;
/// Small-write samples per latency part (or fewer if `PART_TIME` runs out).
const SMALL_WRITE_SAMPLES: usize = 2_000;

#[derive(Debug, Clone, Serialize)]
pub struct Baselines {
    pub tcp: Option<TcpRoundTrip>,
    pub disk: Option<Disk>,
    /// Why a part is missing.
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TcpRoundTrip {
    pub message_bytes: usize,
    pub samples: u64,
    pub p50_us: f64,
    pub p99_us: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Disk {
    pub dir: PathBuf,
    pub write_mb_per_sec: f64,
    pub write_4k_p50_us: f64,
    pub write_4k_p99_us: f64,
    pub write_fdatasync_4k_p50_us: f64,
    pub write_fdatasync_4k_p99_us: f64,
    pub samples: u64,
}

/// Measures every baseline; `disk_dir` is on the broker's data disk.
pub fn measure(disk_dir: &Path, echo_cpus: Option<&CpuSet>) -> Baselines {
    let mut notes = Vec::new();
    let tcp = tcp_round_trip(echo_cpus)
        .map_err(|e| notes.push(format!("loopback TCP baseline failed: {e:#}")))
        .ok();
    let disk = disk(disk_dir)
        .map_err(|e| {
            notes.push(format!(
                "disk baseline in {} failed: {e:#}",
                disk_dir.display()
            ))
        })
        .ok();
    Baselines { tcp, disk, notes }
}

/// A nanosecond histogram for the baselines (1 ns .. 100 s, 3 significant figures).
fn ns_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("constant histogram bounds are valid")
}

fn us_at(h: &Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64 / 1e3
}

fn elapsed_ns(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

fn tcp_round_trip(echo_cpus: Option<&CpuSet>) -> anyhow::Result<TcpRoundTrip> {
    let listener = TcpListener::bind("127.0.0.1:0").context("binding the echo listener")?;
    let addr = listener.local_addr().context("echo listener address")?;
    let echo_cpus = echo_cpus.cloned();
    let echo = std::thread::Builder::new()
        .name("baseline-echo".into())
        .spawn(move || -> std::io::Result<()> {
            if let Some(cpus) = echo_cpus {
                cpus.pin_current_thread()?;
            }
            let (mut stream, _) = listener.accept()?;
            stream.set_nodelay(true)?;
            let mut buf = [0u8; RTT_MESSAGE_BYTES];
            // Echo until the client closes.
            while stream.read_exact(&mut buf).is_ok() {
                stream.write_all(&buf)?;
            }
            Ok(())
        })
        .context("spawning the echo thread")?;
    let mut stream = TcpStream::connect(addr).context("connecting to the echo thread")?;
    stream.set_nodelay(true).context("TCP_NODELAY")?;
    let mut buf = [7u8; RTT_MESSAGE_BYTES];
    let mut h = ns_histogram();
    let started = Instant::now();
    for i in 0..RTT_WARMUP + RTT_SAMPLES {
        let t = Instant::now();
        stream.write_all(&buf).context("echo write")?;
        stream.read_exact(&mut buf).context("echo read")?;
        if i >= RTT_WARMUP {
            h.saturating_record(elapsed_ns(t));
        }
        if started.elapsed() > PART_TIME && !h.is_empty() {
            break;
        }
    }
    drop(stream);
    echo.join()
        .map_err(|_| anyhow::anyhow!("the echo thread panicked"))?
        .context("echo thread")?;
    Ok(TcpRoundTrip {
        message_bytes: RTT_MESSAGE_BYTES,
        samples: h.len(),
        p50_us: us_at(&h, 0.50),
        p99_us: us_at(&h, 0.99),
    })
}

/// A zeroed heap buffer aligned for O_DIRECT.
struct AlignedBuffer {
    ptr: *mut u8,
    layout: Layout,
}

// SAFETY: the buffer is plain bytes owned by this value; sharing `&AlignedBuffer` only
// allows reads.
unsafe impl Sync for AlignedBuffer {}

impl AlignedBuffer {
    fn new(len: usize) -> anyhow::Result<AlignedBuffer> {
        let layout = Layout::from_size_align(len, BLOCK_BYTES).context("buffer layout")?;
        assert!(layout.size() > 0, "an empty O_DIRECT buffer");
        // SAFETY: the layout has a non-zero size (checked above).
        let ptr = unsafe { alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            alloc::handle_alloc_error(layout);
        }
        Ok(AlignedBuffer { ptr, layout })
    }

    fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` points to `layout.size()` initialised (zeroed) bytes owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr, self.layout.size()) }
    }
}

impl Drop for AlignedBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this same layout, freed once.
        unsafe { alloc::dealloc(self.ptr, self.layout) }
    }
}

/// A new file in `dir` opened with O_DIRECT and preallocated to `bytes`.
fn direct_file(dir: &Path, name: &str, bytes: u64) -> anyhow::Result<File> {
    let path = dir.join(name);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path)
        .with_context(|| format!("opening {} with O_DIRECT", path.display()))?;
    let len = libc::off_t::try_from(bytes).context("file size")?;
    // SAFETY: fallocate on a file descriptor we own; mode 0 only allocates.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("preallocating {} bytes of {}", bytes, path.display()));
    }
    Ok(file)
}

fn disk(dir: &Path) -> anyhow::Result<Disk> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let scratch = tempfile::Builder::new()
        .prefix(".sluice-loadgen-baseline")
        .tempdir_in(dir)
        .with_context(|| format!("a scratch directory in {}", dir.display()))?;
    let write_mb_per_sec = sequential_write(scratch.path())?;
    let (plain, plain_samples) = small_writes(scratch.path(), "small-write", false)?;
    let (synced, synced_samples) = small_writes(scratch.path(), "small-write-sync", true)?;
    Ok(Disk {
        dir: dir.to_path_buf(),
        write_mb_per_sec,
        write_4k_p50_us: us_at(&plain, 0.50),
        write_4k_p99_us: us_at(&plain, 0.99),
        write_fdatasync_4k_p50_us: us_at(&synced, 0.50),
        write_fdatasync_4k_p99_us: us_at(&synced, 0.99),
        samples: plain_samples.min(synced_samples),
    })
}

/// MB/s (10^6 bytes) of sequential 1 MiB O_DIRECT writes, `SEQ_WRITERS` threads each writing
/// its own region of one preallocated file, fdatasync included.
fn sequential_write(dir: &Path) -> anyhow::Result<f64> {
    let file = direct_file(dir, "sequential", SEQ_BYTES_PER_WRITER * SEQ_WRITERS as u64)?;
    let buffer = AlignedBuffer::new(SEQ_WRITE_BYTES)?;
    let started = Instant::now();
    let written: u64 = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..SEQ_WRITERS as u64)
            .map(|w| {
                let (file, buffer) = (&file, &buffer);
                scope.spawn(move || -> std::io::Result<u64> {
                    let mut offset = w * SEQ_BYTES_PER_WRITER;
                    let end = offset + SEQ_BYTES_PER_WRITER;
                    while offset < end && started.elapsed() < PART_TIME {
                        file.write_all_at(buffer.as_slice(), offset)?;
                        offset += SEQ_WRITE_BYTES as u64;
                    }
                    Ok(offset - w * SEQ_BYTES_PER_WRITER)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| anyhow::anyhow!("a writer thread panicked"))?
                    .context("O_DIRECT write")
            })
            .sum::<anyhow::Result<u64>>()
    })?;
    file.sync_data().context("fdatasync")?;
    Ok(written as f64 / started.elapsed().as_secs_f64() / 1e6)
}

/// Latency (ns) of 4 KiB O_DIRECT writes to consecutive new blocks at queue depth 1, each
/// followed by fdatasync when `sync`; and the sample count.
fn small_writes(dir: &Path, name: &str, sync: bool) -> anyhow::Result<(Histogram<u64>, u64)> {
    let file = direct_file(dir, name, (SMALL_WRITE_SAMPLES * BLOCK_BYTES) as u64)?;
    let buffer = AlignedBuffer::new(BLOCK_BYTES)?;
    let mut h = ns_histogram();
    let started = Instant::now();
    for i in 0..SMALL_WRITE_SAMPLES {
        let t = Instant::now();
        file.write_all_at(buffer.as_slice(), (i * BLOCK_BYTES) as u64)
            .context("4 KiB O_DIRECT write")?;
        if sync {
            file.sync_data().context("fdatasync")?;
        }
        h.saturating_record(elapsed_ns(t));
        if started.elapsed() > PART_TIME {
            break;
        }
    }
    let samples = h.len();
    Ok((h, samples))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_round_trip_is_measured() {
        let rtt = tcp_round_trip(None).expect("loopback works");
        assert!(rtt.samples > 0);
        assert!(rtt.p99_us >= rtt.p50_us);
    }
}
