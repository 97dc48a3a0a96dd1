//! Append benchmark of the partition log against the raw device, measured in one run, on one
//! pinned glommio executor, in one data directory (DESIGN.md §3, §5, §8).
//!
//! What it measures:
//! 1. Raw sequential O_DIRECT write bandwidth: `DmaFile::write_rc_at`, 1 MiB writes, 16 in
//!    flight, into a preallocated file, then one `fdatasync` (the ceiling for 2.).
//! 2. `PartitionLog::append` throughput for 1 KiB records in 16-record batches (~16 KiB) and in
//!    1 MiB batches, then one `flush()`; MiB/s of batch bytes and the ratio to 1. The task
//!    yields once after each append, as a produce handler does between requests.
//! 3. Latency at queue depth 1: append + `flush_to(last_offset + 1)` of one 1 KiB-record batch
//!    (acks=all with flush.messages=1), the append alone (returns once in memory), raw 4 KiB
//!    O_DIRECT write + `fdatasync` (new blocks of a preallocated file: each sync also commits an
//!    extent conversion), the same without sync, and a 4 KiB overwrite + `fdatasync` of one
//!    written block (data only). The log's 1 KiB appends rewrite their tail block ~4 times, so
//!    they mix both kinds of sync; the ratio row compares with the first.
//!
//! Rounds of (raw, 16 KiB, 1 MiB) are interleaved so drift hits all three alike; the median
//! round is reported. Each run uses fresh, preallocated files (the log preallocates
//! `segment.bytes`, 1 GiB by default, like the raw file) and deletes them afterwards.
//!
//! Environment:
//! - `SLUICE_BENCH_DIR`: parent of the temporary data directory (default
//!   `<workspace>/target/bench-data`; must be a real disk, not tmpfs).
//! - `SLUICE_BENCH_BYTES`: bytes per throughput run, `1073741824`, `1G`, `64M`… (default 1 GiB).
//! - `SLUICE_BENCH_QUICK=1`: 64 MiB, 1 round, 500 latency samples: a smoke test of seconds.
//! - `SLUICE_BENCH_ROUNDS`, `SLUICE_BENCH_SAMPLES`: override rounds and latency samples.
//! - `SLUICE_BENCH_CPU`: the CPU the executor is pinned to (default 1).
//! - `SLUICE_BENCH_APPENDS_PER_YIELD`: appends between yields in the throughput runs (default 1,
//!   one produce request per batch; larger values model several producers per wakeup).
//!
//! Output: a table on stdout, and the same figures as JSON in `<workspace>/target/bench-append.json`.
//! The machine's load is printed at start and end: figures taken beside a build are worthless
//! on this 2-core VM (DESIGN.md §8).

use bytes::Bytes;
use glommio::io::{DmaBuffer, DmaFile, OpenOptions};
use glommio::{LocalExecutorBuilder, Placement};
use hdrhistogram::Histogram;
use std::collections::VecDeque;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};
use storage::{build_batch, BatchCache, LeaderEpoch, LogConfig, PartitionLog, TimestampMs};

/// Raw sequential write size (the log writes in `LogConfig::write_chunk_bytes` chunks).
const RAW_WRITE_BYTES: usize = 1 << 20;
/// Raw sequential writes in flight, and the log's default `writes_in_flight_max`.
const RAW_WRITES_IN_FLIGHT: usize = 16;
/// O_DIRECT block, the unit of the latency tests' raw writes.
const BLOCK_BYTES: usize = 4096;
/// Record value size.
const RECORD_BYTES: usize = 1024;
/// Records per small batch (16 × 1 KiB ≈ 16 KiB).
const RECORDS_PER_SMALL_BATCH: usize = 16;
/// Records per large batch: as many 1 KiB records as fit in 1 MiB with the record framing.
const RECORDS_PER_LARGE_BATCH: usize = 1000;
/// Distinct batches built per size and appended round-robin (appends copy them anyway).
const DISTINCT_BATCHES: usize = 32;
/// Batch cache of the shard in the benchmark.
const CACHE_BYTES: usize = 64 << 20;
/// Latency samples discarded before recording.
const WARMUP_SAMPLES: usize = 100;

type BenchResult<T> = Result<T, String>;

/// `map_err` helper: "what: error".
fn err<E: std::fmt::Display>(what: &str) -> impl Fn(E) -> String + '_ {
    move |e| format!("{what}: {e}")
}

struct Settings {
    data_parent: PathBuf,
    json_path: PathBuf,
    bytes: u64,
    quick: bool,
    rounds: usize,
    samples: usize,
    cpu: usize,
    /// Appends between yields in the throughput runs (1: one produce request per batch).
    appends_per_yield: u64,
}

impl Settings {
    fn from_env() -> BenchResult<Settings> {
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .ok_or("no workspace directory")?
            .to_path_buf();
        // `cargo bench` passes `--bench`; `cargo test --all-targets` runs this binary without
        // it, and then it is a smoke test of the bench code: quick mode.
        let under_cargo_test = !std::env::args().any(|a| a == "--bench");
        let quick = under_cargo_test || std::env::var("SLUICE_BENCH_QUICK").is_ok_and(|v| v == "1");
        let bytes = match std::env::var("SLUICE_BENCH_BYTES") {
            Ok(v) => parse_bytes(&v).ok_or(format!("SLUICE_BENCH_BYTES={v}: not a size"))?,
            Err(_) if quick => 64 << 20,
            Err(_) => 1 << 30,
        };
        let bytes = bytes - bytes % RAW_WRITE_BYTES as u64;
        if bytes == 0 {
            return Err("SLUICE_BENCH_BYTES must be at least 1 MiB".into());
        }
        Ok(Settings {
            data_parent: std::env::var_os("SLUICE_BENCH_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| workspace.join("target").join("bench-data")),
            json_path: workspace.join("target").join("bench-append.json"),
            bytes,
            quick,
            rounds: env_usize("SLUICE_BENCH_ROUNDS")?.unwrap_or(if quick { 1 } else { 3 }),
            samples: env_usize("SLUICE_BENCH_SAMPLES")?.unwrap_or(if quick { 500 } else { 20_000 }),
            cpu: env_usize("SLUICE_BENCH_CPU")?.unwrap_or(1),
            appends_per_yield: env_usize("SLUICE_BENCH_APPENDS_PER_YIELD")?
                .unwrap_or(1)
                .max(1) as u64,
        })
    }
}

fn env_usize(name: &str) -> BenchResult<Option<usize>> {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .map(Some)
            .map_err(|_| format!("{name}={v}: not a number")),
        Err(_) => Ok(None),
    }
}

/// `123`, `64K`, `64M`, `1G` (binary multiples).
fn parse_bytes(s: &str) -> Option<u64> {
    let s = s.trim();
    let (digits, shift) = match s.chars().last()?.to_ascii_uppercase() {
        'K' => (&s[..s.len() - 1], 10),
        'M' => (&s[..s.len() - 1], 20),
        'G' => (&s[..s.len() - 1], 30),
        _ => (s, 0),
    };
    digits.parse::<u64>().ok()?.checked_mul(1 << shift)
}

/// CPU time (user + system) of the calling thread: the executor's busy time.
fn thread_cpu_time() -> Duration {
    // SAFETY: zeroed rusage is a valid out-parameter.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is valid for writes for the duration of the call.
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) } != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.unsigned_abs())
            + Duration::from_micros(t.tv_usec.unsigned_abs())
    };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|e| format!("unavailable ({e})"))
}

/// Filesystem type of `dir` from statfs(2); tmpfs has no O_DIRECT and no disk, so it is refused.
fn filesystem_of(dir: &Path) -> BenchResult<&'static str> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).map_err(|e| e.to_string())?;
    // SAFETY: zeroed statfs is a valid out-parameter; `c` is a NUL-terminated path.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid for the duration of the call.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return Err(format!(
            "statfs {}: {}",
            dir.display(),
            std::io::Error::last_os_error()
        ));
    }
    #[allow(clippy::unnecessary_cast)]
    Ok(match st.f_type as i64 {
        0xEF53 => "ext4",
        0x5846_5342 => "xfs",
        0x9123_683E => "btrfs",
        0x0102_1994 => "tmpfs",
        0x794C_7630 => "overlayfs",
        _ => "other",
    })
}

/// One point of the throughput figures.
struct Throughput {
    name: &'static str,
    bytes: u64,
    mib_per_s: Vec<f64>,
    /// Executor thread CPU time / wall time of each run: near 1.0 means CPU-bound.
    cpu_share: Vec<f64>,
    /// Bytes the log submitted to the device / bytes appended (tail-block rewrites).
    device_bytes_ratio: Option<f64>,
    syncs: Option<u64>,
}

impl Throughput {
    fn median(&self) -> f64 {
        let mut v = self.mib_per_s.clone();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    }
}

/// One latency distribution, recorded in nanoseconds.
struct Latency {
    name: &'static str,
    hist: Histogram<u64>,
}

impl Latency {
    fn new(name: &'static str) -> Latency {
        Latency {
            name,
            // 1 ns .. 60 s, 3 significant digits.
            hist: Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds"),
        }
    }

    fn record(&mut self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.hist.saturating_record(ns.max(1));
    }

    fn us(&self, q: f64) -> f64 {
        self.hist.value_at_quantile(q) as f64 / 1000.0
    }

    fn max_us(&self) -> f64 {
        self.hist.max() as f64 / 1000.0
    }
}

const QUANTILES: [(&str, f64); 4] = [("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p99.9", 0.999)];

struct Report {
    throughput: Vec<Throughput>,
    latency: Vec<Latency>,
}

fn main() {
    if let Err(e) = run() {
        eprintln!("append bench failed: {e}");
        std::process::exit(1);
    }
}

fn run() -> BenchResult<()> {
    let settings = Settings::from_env()?;
    std::fs::create_dir_all(&settings.data_parent)
        .map_err(|e| format!("creating {}: {e}", settings.data_parent.display()))?;
    let fs = filesystem_of(&settings.data_parent)?;
    if fs == "tmpfs" {
        return Err(format!(
            "{} is on tmpfs: set SLUICE_BENCH_DIR to a directory on the real disk",
            settings.data_parent.display()
        ));
    }
    let data = tempfile::Builder::new()
        .prefix("append-")
        .tempdir_in(&settings.data_parent)
        .map_err(|e| format!("creating temp dir: {e}"))?;
    let load_start = loadavg();
    println!("sluice-storage append bench");
    println!(
        "  mode {} | {} MiB per throughput run | {} round(s) | {} latency samples | cpu {} | {} append(s) per yield",
        if settings.quick { "QUICK (smoke test, figures not meaningful)" } else { "full" },
        settings.bytes >> 20,
        settings.rounds,
        settings.samples,
        settings.cpu,
        settings.appends_per_yield
    );
    println!("  data dir {} ({fs})", data.path().display());
    println!("  loadavg at start: {load_start}");

    let dir = data.path().to_path_buf();
    let params = Params {
        bytes: settings.bytes,
        rounds: settings.rounds,
        samples: settings.samples,
        appends_per_yield: settings.appends_per_yield,
    };
    let report = LocalExecutorBuilder::new(Placement::Fixed(settings.cpu))
        .name("sluice-bench")
        .spawn(move || async move { bench(&dir, params).await })
        .map_err(err("starting executor"))
        .and_then(|h| h.join().map_err(err("executor")))??;

    let load_end = loadavg();
    println!("  loadavg at end:   {load_end}");
    print_table(&report);
    let json = to_json(&settings, fs, &load_start, &load_end, &report);
    if let Some(parent) = settings.json_path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("creating {}: {e}", parent.display()))?;
    }
    std::fs::write(&settings.json_path, json)
        .map_err(|e| format!("writing {}: {e}", settings.json_path.display()))?;
    println!("\nJSON written to {}", settings.json_path.display());
    Ok(())
}

/// What the executor needs from [`Settings`].
#[derive(Clone, Copy)]
struct Params {
    bytes: u64,
    rounds: usize,
    samples: usize,
    appends_per_yield: u64,
}

async fn bench(dir: &Path, params: Params) -> BenchResult<Report> {
    let Params {
        bytes,
        rounds,
        samples,
        appends_per_yield,
    } = params;
    probe_iopoll(dir).await?;
    let small = batches(RECORDS_PER_SMALL_BATCH);
    let large = batches(RECORDS_PER_LARGE_BATCH);
    let mut raw = Throughput::new("raw O_DIRECT 1 MiB x16");
    let mut log_small = Throughput::new("log append 16 x 1 KiB batches");
    let mut log_large = Throughput::new("log append 1 MiB batches");
    for round in 0..rounds {
        let run = dir.join(format!("round-{round}"));
        raw.add(raw_write_throughput(&run, bytes).await?);
        log_small.add_log(log_append_throughput(&run, &small, bytes, appends_per_yield).await?);
        log_large.add_log(log_append_throughput(&run, &large, bytes, appends_per_yield).await?);
    }
    let mut latency = Vec::new();
    let (acks_all, append_only) = log_latency(&dir.join("latency-log"), samples).await?;
    latency.push(acks_all);
    latency.push(raw_latency(&dir.join("latency-raw-sync"), samples, RawMode::WriteSync).await?);
    latency.push(raw_latency(&dir.join("latency-raw"), samples, RawMode::Write).await?);
    latency.push(
        raw_latency(
            &dir.join("latency-raw-over"),
            samples,
            RawMode::OverwriteSync,
        )
        .await?,
    );
    latency.push(append_only);
    Ok(Report {
        throughput: vec![raw, log_small, log_large],
        latency,
    })
}

/// glommio 0.9 decides on polled I/O by reading the first DMA file an executor opens, and gets
/// it wrong for an empty file (DESIGN.md §8): open a file holding one block first.
async fn probe_iopoll(dir: &Path) -> BenchResult<()> {
    let path = dir.join(".iopoll-probe");
    std::fs::write(&path, [0u8; BLOCK_BYTES]).map_err(err("writing probe file"))?;
    let f = DmaFile::open(&path)
        .await
        .map_err(err("opening probe file"))?;
    f.close().await.map_err(err("closing probe file"))?;
    std::fs::remove_file(&path).map_err(err("removing probe file"))
}

/// `DISTINCT_BATCHES` batches of `records` 1 KiB records each, with varied payload bytes.
fn batches(records: usize) -> Vec<Bytes> {
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    (0..DISTINCT_BATCHES)
        .map(|_| {
            let values: Vec<Vec<u8>> = (0..records)
                .map(|_| {
                    (0..RECORD_BYTES)
                        .map(|_| xorshift(&mut seed) as u8)
                        .collect()
                })
                .collect();
            let refs: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
            build_batch(TimestampMs(1_700_000_000_000), &refs)
        })
        .collect()
}

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

impl Throughput {
    fn new(name: &'static str) -> Throughput {
        Throughput {
            name,
            bytes: 0,
            mib_per_s: Vec::new(),
            cpu_share: Vec::new(),
            device_bytes_ratio: None,
            syncs: None,
        }
    }

    fn add(&mut self, run: Run) {
        self.bytes = run.bytes;
        self.mib_per_s.push(mib_per_s(run.bytes, run.elapsed));
        self.cpu_share
            .push(run.cpu.as_secs_f64() / run.elapsed.as_secs_f64());
    }

    fn add_log(&mut self, run: LogRun) {
        self.add(run.run);
        self.device_bytes_ratio = Some(run.write_bytes as f64 / self.bytes as f64);
        self.syncs = Some(run.syncs);
    }
}

fn mib_per_s(bytes: u64, elapsed: Duration) -> f64 {
    bytes as f64 / (1u64 << 20) as f64 / elapsed.as_secs_f64()
}

async fn open_dma(path: &Path) -> BenchResult<DmaFile> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .dma_open(path)
        .await
        .map_err(|e| format!("opening {}: {e}", path.display()))
}

/// A new DMA file preallocated to `file_bytes`, and one write buffer of `buffer_bytes` filled
/// with pseudo-random bytes from `seed`, shared by the raw baselines.
async fn raw_file_and_buffer(
    path: &Path,
    file_bytes: u64,
    buffer_bytes: usize,
    mut seed: u64,
) -> BenchResult<(DmaFile, Rc<DmaBuffer>)> {
    let file = open_dma(path).await?;
    file.pre_allocate(file_bytes, false)
        .await
        .map_err(err("preallocating raw file"))?;
    let mut buf = file.alloc_dma_buffer(buffer_bytes);
    buf.as_bytes_mut().fill_with(|| xorshift(&mut seed) as u8);
    Ok((file, Rc::new(buf)))
}

/// Sequential 1 MiB O_DIRECT writes, 16 in flight, into a preallocated file, then fdatasync.
/// One timed throughput run.
struct Run {
    bytes: u64,
    elapsed: Duration,
    /// Executor thread CPU time during the run.
    cpu: Duration,
}

async fn raw_write_throughput(dir: &Path, bytes: u64) -> BenchResult<Run> {
    std::fs::create_dir_all(dir).map_err(err("creating run dir"))?;
    let path = dir.join("raw-sequential.dat");
    let (file, buf) = raw_file_and_buffer(&path, bytes, RAW_WRITE_BYTES, 1).await?;
    let file = Rc::new(file);
    let (start, cpu_start) = (Instant::now(), thread_cpu_time());
    let mut in_flight = VecDeque::with_capacity(RAW_WRITES_IN_FLIGHT);
    let mut pos = 0u64;
    while pos < bytes || !in_flight.is_empty() {
        if pos < bytes && in_flight.len() < RAW_WRITES_IN_FLIGHT {
            let (f, b) = (file.clone(), buf.clone());
            in_flight.push_back(glommio::spawn_local(
                async move { f.write_rc_at(b, pos).await },
            ));
            pos += RAW_WRITE_BYTES as u64;
            continue;
        }
        let task = in_flight.pop_front().expect("non-empty");
        let written = task.await.map_err(err("raw write"))?;
        if written != RAW_WRITE_BYTES {
            return Err(format!("short raw write: {written} bytes"));
        }
    }
    file.fdatasync().await.map_err(err("raw fdatasync"))?;
    let (elapsed, cpu) = (start.elapsed(), thread_cpu_time() - cpu_start);
    drop(buf);
    Rc::try_unwrap(file)
        .map_err(|_| "raw file still shared".to_string())?
        .close()
        .await
        .map_err(err("closing raw file"))?;
    std::fs::remove_file(&path).map_err(err("removing raw file"))?;
    Ok(Run {
        bytes,
        elapsed,
        cpu,
    })
}

struct LogRun {
    run: Run,
    write_bytes: u64,
    syncs: u64,
}

/// Appends batches round-robin from `batches` while they fit in `bytes`, then flushes.
async fn log_append_throughput(
    dir: &Path,
    batches: &[Bytes],
    bytes: u64,
    appends_per_yield: u64,
) -> BenchResult<LogRun> {
    let log_dir = dir.join("bench-0");
    let cache = BatchCache::new(CACHE_BYTES);
    let log = PartitionLog::open(&log_dir, LogConfig::default(), &cache)
        .await
        .map_err(err("opening log"))?;
    let batch_bytes = batches[0].len() as u64;
    let count = bytes / batch_bytes;
    let (start, cpu_start) = (Instant::now(), thread_cpu_time());
    for i in 0..count {
        let batch = batches[usize::try_from(i).expect("fits") % batches.len()].clone();
        log.append(batch, LeaderEpoch(0))
            .await
            .map_err(err("append"))?;
        // A produce handler awaits its next request here: let the write tasks run.
        if (i + 1) % appends_per_yield == 0 {
            glommio::executor().yield_now().await;
        }
    }
    log.flush().await.map_err(err("flush"))?;
    let (elapsed, cpu) = (start.elapsed(), thread_cpu_time() - cpu_start);
    let stats = log.stats();
    log.close().await.map_err(err("closing log"))?;
    drop(log);
    std::fs::remove_dir_all(&log_dir).map_err(err("removing log dir"))?;
    Ok(LogRun {
        run: Run {
            bytes: count * batch_bytes,
            elapsed,
            cpu,
        },
        write_bytes: stats.write_bytes,
        syncs: stats.syncs,
    })
}

/// Append + flush_to of single 1 KiB-record batches at queue depth 1; also the append alone.
async fn log_latency(dir: &Path, samples: usize) -> BenchResult<(Latency, Latency)> {
    let cache = BatchCache::new(CACHE_BYTES);
    let log = PartitionLog::open(dir, LogConfig::default(), &cache)
        .await
        .map_err(err("opening log"))?;
    let batch = batches(1).swap_remove(0);
    let mut acks_all = Latency::new("append + flush_to, 1 x 1 KiB");
    let mut append_only = Latency::new("append returns (in memory)");
    for i in 0..WARMUP_SAMPLES + samples {
        let t0 = Instant::now();
        let info = log
            .append(batch.clone(), LeaderEpoch(0))
            .await
            .map_err(err("append"))?;
        let t1 = Instant::now();
        log.flush_to(info.last_offset.plus(1))
            .await
            .map_err(err("flush_to"))?;
        let t2 = Instant::now();
        if i >= WARMUP_SAMPLES {
            append_only.record(t1 - t0);
            acks_all.record(t2 - t0);
        }
    }
    log.close().await.map_err(err("closing log"))?;
    drop(log);
    std::fs::remove_dir_all(dir).map_err(err("removing log dir"))?;
    Ok((acks_all, append_only))
}

/// Sequential 4 KiB O_DIRECT writes at queue depth 1 into a preallocated file, each followed by
/// fdatasync when `sync`.
/// The raw queue-depth-1 latency tests.
#[derive(Clone, Copy, PartialEq, Eq)]
enum RawMode {
    /// Sequential blocks of a preallocated file, each followed by fdatasync. Every block is
    /// written for the first time, so each sync also commits an unwritten-extent conversion,
    /// like the log's first write into each block of a preallocated segment.
    WriteSync,
    /// Sequential blocks, no sync.
    Write,
    /// One already-written block, rewritten and synced each time: no metadata to commit, like
    /// the log's rewrites of its partial tail block.
    OverwriteSync,
}

async fn raw_latency(dir: &Path, samples: usize, mode: RawMode) -> BenchResult<Latency> {
    let sync = mode != RawMode::Write;
    std::fs::create_dir_all(dir).map_err(err("creating dir"))?;
    let path = dir.join("raw-4k.dat");
    let total = WARMUP_SAMPLES + samples;
    let (file, buf) =
        raw_file_and_buffer(&path, (total * BLOCK_BYTES) as u64, BLOCK_BYTES, 7).await?;
    let mut lat = Latency::new(match mode {
        RawMode::WriteSync => "raw 4 KiB O_DIRECT write + fdatasync",
        RawMode::Write => "raw 4 KiB O_DIRECT write",
        RawMode::OverwriteSync => "raw 4 KiB O_DIRECT overwrite + fdatasync",
    });
    if mode == RawMode::OverwriteSync {
        file.write_rc_at(buf.clone(), 0)
            .await
            .map_err(err("raw write"))?;
        file.fdatasync().await.map_err(err("raw fdatasync"))?;
    }
    for i in 0..total {
        let pos = if mode == RawMode::OverwriteSync {
            0
        } else {
            (i * BLOCK_BYTES) as u64
        };
        let t0 = Instant::now();
        let written = file
            .write_rc_at(buf.clone(), pos)
            .await
            .map_err(err("raw write"))?;
        if written != BLOCK_BYTES {
            return Err(format!("short raw write: {written} bytes"));
        }
        if sync {
            file.fdatasync().await.map_err(err("raw fdatasync"))?;
        }
        if i >= WARMUP_SAMPLES {
            lat.record(t0.elapsed());
        }
    }
    drop(buf);
    file.close().await.map_err(err("closing"))?;
    std::fs::remove_dir_all(dir).map_err(err("removing dir"))?;
    Ok(lat)
}

fn print_table(report: &Report) {
    let raw = report.throughput[0].median();
    println!("\nThroughput (median of rounds; MiB = 2^20 bytes of batches; cpu = max executor");
    println!("  thread CPU time / wall time over rounds; dev bytes = bytes written / appended)");
    println!(
        "  {:<34} {:>6} {:>8} {:>8} {:>6} {:>10} {:>6}  runs MiB/s",
        "", "MiB", "MiB/s", "vs raw", "cpu", "dev bytes", "syncs"
    );
    for t in &report.throughput {
        let runs: Vec<String> = t.mib_per_s.iter().map(|v| format!("{v:.0}")).collect();
        println!(
            "  {:<34} {:>6} {:>8.0} {:>7.1}% {:>5.0}% {:>10} {:>6}  [{}]",
            t.name,
            t.bytes >> 20,
            t.median(),
            100.0 * t.median() / raw,
            100.0 * t.cpu_share.iter().copied().fold(0.0, f64::max),
            t.device_bytes_ratio
                .map_or("-".into(), |r| format!("{r:.3}x")),
            t.syncs.map_or("-".into(), |s| s.to_string()),
            runs.join(", ")
        );
    }
    if let Some(large) = report.throughput.get(2) {
        let pct = 100.0 * large.median() / raw;
        println!(
            "  1 MiB batches at {pct:.1}% of raw: target >= 85% {}",
            if pct >= 85.0 { "MET" } else { "NOT MET" }
        );
    }
    println!("\nLatency at queue depth 1 (us)");
    print!("  {:<40} {:>8}", "", "samples");
    for (q, _) in QUANTILES {
        print!(" {q:>8}");
    }
    println!(" {:>8}", "max");
    for l in &report.latency {
        print!("  {:<40} {:>8}", l.name, l.hist.len());
        for (_, q) in QUANTILES {
            print!(" {:>8.1}", l.us(q));
        }
        println!(" {:>8.1}", l.max_us());
    }
    let (acks, sync) = (&report.latency[0], &report.latency[1]);
    print!("  {:<40} {:>8}", "ratio append+flush / raw write+sync", "");
    for (_, q) in QUANTILES {
        print!(" {:>7.2}x", acks.us(q) / sync.us(q));
    }
    println!(" {:>7.2}x", acks.max_us() / sync.max_us());
}

fn to_json(s: &Settings, fs: &str, load_start: &str, load_end: &str, report: &Report) -> String {
    let raw = report.throughput[0].median();
    let mut j = String::from("{\n");
    let _ = writeln!(j, "  \"quick\": {},", s.quick);
    let _ = writeln!(j, "  \"cpu\": {},", s.cpu);
    let _ = writeln!(
        j,
        "  \"data_dir_parent\": {},",
        json_str(&s.data_parent.display().to_string())
    );
    let _ = writeln!(j, "  \"filesystem\": {},", json_str(fs));
    let _ = writeln!(j, "  \"bytes_per_run\": {},", s.bytes);
    let _ = writeln!(j, "  \"rounds\": {},", s.rounds);
    let _ = writeln!(j, "  \"latency_samples\": {},", s.samples);
    let _ = writeln!(j, "  \"appends_per_yield\": {},", s.appends_per_yield);
    let _ = writeln!(j, "  \"loadavg_start\": {},", json_str(load_start));
    let _ = writeln!(j, "  \"loadavg_end\": {},", json_str(load_end));
    j.push_str("  \"throughput\": [\n");
    for (i, t) in report.throughput.iter().enumerate() {
        let runs: Vec<String> = t.mib_per_s.iter().map(|v| format!("{v:.1}")).collect();
        let _ = write!(
            j,
            "    {{\"name\": {}, \"bytes\": {}, \"mib_per_s_median\": {:.1}, \"mib_per_s_runs\": [{}], \"ratio_to_raw\": {:.4}, \"executor_cpu_share_runs\": [{}], \"device_bytes_ratio\": {}, \"syncs\": {}}}",
            json_str(t.name),
            t.bytes,
            t.median(),
            runs.join(", "),
            t.median() / raw,
            t.cpu_share
                .iter()
                .map(|v| format!("{v:.3}"))
                .collect::<Vec<_>>()
                .join(", "),
            t.device_bytes_ratio.map_or("null".into(), |r| format!("{r:.4}")),
            t.syncs.map_or("null".into(), |v| v.to_string()),
        );
        j.push_str(if i + 1 < report.throughput.len() {
            ",\n"
        } else {
            "\n"
        });
    }
    j.push_str("  ],\n  \"latency_us\": [\n");
    for (i, l) in report.latency.iter().enumerate() {
        let _ = write!(
            j,
            "    {{\"name\": {}, \"samples\": {}, \"p50\": {:.1}, \"p90\": {:.1}, \"p99\": {:.1}, \"p99_9\": {:.1}, \"max\": {:.1}}}",
            json_str(l.name),
            l.hist.len(),
            l.us(0.5),
            l.us(0.9),
            l.us(0.99),
            l.us(0.999),
            l.max_us()
        );
        j.push_str(if i + 1 < report.latency.len() {
            ",\n"
        } else {
            "\n"
        });
    }
    let (acks, sync) = (&report.latency[0], &report.latency[1]);
    let _ = writeln!(
        j,
        "  ],\n  \"append_flush_vs_raw_write_sync\": {{\"p50\": {:.3}, \"p99\": {:.3}, \"p99_9\": {:.3}}}",
        acks.us(0.5) / sync.us(0.5),
        acks.us(0.99) / sync.us(0.99),
        acks.us(0.999) / sync.us(0.999)
    );
    j.push_str("}\n");
    j
}

fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
