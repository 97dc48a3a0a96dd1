//! Disk probe: O_DIRECT latency and bandwidth of the data disk per block size and queue depth,
//! and `fdatasync` latency, within a bounded time.
//!
//! How it runs:
//! 1. Outside any executor, a 4 KiB file is written in the data dir; the probe executor opens it
//!    before any other file. This is the glommio 0.9 iopoll workaround (DESIGN.md §8): the first
//!    DMA file an executor opens decides whether polled I/O is used, and an empty one makes every
//!    later DMA read fail with `EOPNOTSUPP`.
//! 2. One glommio `LocalExecutor`, pinned to one CPU, creates a temp file
//!    (`.sluice-tune-<pid>.tmp`), preallocates it and fills it with data (so reads hit real
//!    blocks, not unwritten extents that read back as zeros without touching the disk).
//! 3. For each block size × queue depth ([`BLOCK_SIZES_BYTES`] × [`QUEUE_DEPTHS`]) it runs a
//!    write cell and a read cell: `depth` tasks each keep one O_DIRECT operation at a random
//!    block-aligned offset in flight, so `depth` operations are in flight at all times. Each
//!    operation's latency (submit to completion, in ns) goes into an HDR histogram.
//! 4. A 4 KiB write followed by `fdatasync`, repeated, gives the flush latency.
//! 5. Both files are removed, also on error or panic (a drop guard).
//!
//! Limits (invariants the caller may rely on):
//! - Time: the fill may take at most [`FILL_BUDGET_FRACTION`] of the budget; every cell's slice
//!   is the time left divided by the cells left, so the whole probe ends near the budget. Each
//!   cell still completes at least one operation per task, so a tiny budget overruns a little
//!   rather than return an empty cell.
//! - Volume: a cell stops at [`DiskProbeConfig::cell_ops_max`] operations or
//!   [`DiskProbeConfig::cell_bytes_max`] bytes, whichever comes first, bounding disk wear.
//! - Figures from a loaded machine are worth little (DESIGN.md §8: a 2-core VM under a build
//!   turned 59 µs writes into 4 ms): the report carries the CPU time other processes used
//!   during the probe, and the load average before and after.
//! - A VM's host may cache the virtual disk: figures then describe the host's cache as much as
//!   the device, for a region of [`DiskProbeConfig::file_bytes`].

use crate::error::TuneError;
use glommio::io::{DmaFile, OpenOptions};
use glommio::{LocalExecutorBuilder, Placement};
use hdrhistogram::Histogram;
use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Block sizes probed, in bytes: 4 KiB, 16 KiB, 64 KiB, 1 MiB.
pub const BLOCK_SIZES_BYTES: [usize; 4] = [4 << 10, 16 << 10, 64 << 10, 1 << 20];
/// Queue depths probed: operations kept in flight at once.
pub const QUEUE_DEPTHS: [usize; 4] = [1, 4, 16, 64];
/// Share of the budget the initial fill of the temp file may take; a fill cut short shrinks the
/// region that cells address instead of failing.
pub const FILL_BUDGET_FRACTION: f64 = 0.15;
/// Block size of the fill and the alignment of every offset, in bytes.
const ALIGN_BYTES: u64 = 4096;
/// Fill writes: size in bytes and how many in flight.
const FILL_CHUNK_BYTES: usize = 1 << 20;
const FILL_DEPTH: usize = 16;
/// Largest latency the histograms hold, in ns (60 s); larger values are clamped.
const LATENCY_NS_MAX: u64 = 60_000_000_000;
/// Cells: two kinds × the size × depth grid, plus the fsync test counted as one more slice.
const SLICES: usize = 2 * BLOCK_SIZES_BYTES.len() * QUEUE_DEPTHS.len() + 1;

const _: () = assert!(FILL_CHUNK_BYTES as u64 % ALIGN_BYTES == 0);
const _: () = assert!(BLOCK_SIZES_BYTES[0] as u64 % ALIGN_BYTES == 0);

/// Direction of one probe cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoKind {
    /// O_DIRECT `write_at` of a full block.
    Write,
    /// O_DIRECT `read_at_aligned` of a full block.
    Read,
}

impl IoKind {
    /// `"write"` or `"read"`.
    pub fn name(self) -> &'static str {
        match self {
            IoKind::Write => "write",
            IoKind::Read => "read",
        }
    }
}

/// What to probe and within which bounds.
#[derive(Clone, Debug)]
pub struct DiskProbeConfig {
    /// Directory on the disk to probe (the broker's data dir); created if missing.
    pub dir: PathBuf,
    /// Wall-clock budget for the whole probe (fill, 32 cells, fsync test).
    pub budget: Duration,
    /// Size of the temp file the random offsets fall in, in bytes (rounded down to 1 MiB).
    /// Shrunk to a quarter of the free space when the disk has less room.
    pub file_bytes: u64,
    /// CPU the probe executor is pinned to; `None` leaves it unpinned.
    pub cpu: Option<usize>,
    /// Most operations one cell performs.
    pub cell_ops_max: u64,
    /// Most bytes one cell transfers.
    pub cell_bytes_max: u64,
}

impl DiskProbeConfig {
    /// Defaults: 1 GiB temp file, at most 200 000 operations or 1 GiB per cell, unpinned.
    pub fn new(dir: impl Into<PathBuf>, budget: Duration) -> Self {
        DiskProbeConfig {
            dir: dir.into(),
            budget,
            file_bytes: 1 << 30,
            cpu: None,
            cell_ops_max: 200_000,
            cell_bytes_max: 1 << 30,
        }
    }
}

/// Latency percentiles of one series of operations, in microseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LatencySummary {
    /// Operations measured.
    pub ops: u64,
    /// Median latency, µs.
    pub p50_us: f64,
    /// 99th percentile latency, µs.
    pub p99_us: f64,
    /// Largest latency, µs.
    pub max_us: f64,
}

impl LatencySummary {
    fn from_histogram_ns(h: &Histogram<u64>) -> Self {
        let us = |ns: u64| ns as f64 / 1000.0;
        LatencySummary {
            ops: h.len(),
            p50_us: us(h.value_at_quantile(0.50)),
            p99_us: us(h.value_at_quantile(0.99)),
            max_us: us(h.max()),
        }
    }
}

/// Result of one block size × depth × direction cell.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CellResult {
    /// Write or read.
    pub kind: IoKind,
    /// Bytes per operation.
    pub block_bytes: usize,
    /// Operations kept in flight.
    pub depth: usize,
    /// Wall time the cell ran.
    pub elapsed: Duration,
    /// Bandwidth over the cell, MiB/s (bytes transferred / elapsed).
    pub mib_per_sec: f64,
    /// Per-operation latency, submit to completion.
    pub latency: LatencySummary,
}

/// Result of the flush test: a 4 KiB O_DIRECT write, then `fdatasync`, repeated.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FsyncResult {
    /// Latency of the `fdatasync` call alone.
    pub fdatasync: LatencySummary,
    /// Latency of write + `fdatasync` together (what a durable append of one block costs).
    pub write_and_fdatasync: LatencySummary,
}

/// Everything the disk probe measured.
#[derive(Clone, Debug, PartialEq)]
pub struct DiskReport {
    /// The directory probed.
    pub dir: PathBuf,
    /// CPU the executor ran on, if pinned.
    pub cpu: Option<usize>,
    /// Bytes of the temp file the cells addressed (after any shortened fill).
    pub region_bytes: u64,
    /// Time the fill took.
    pub fill_elapsed: Duration,
    /// Sequential fill bandwidth (1 MiB writes, 16 in flight), MiB/s.
    pub fill_mib_per_sec: f64,
    /// One entry per direction × block size × depth, writes and reads interleaved per
    /// size/depth, in [`BLOCK_SIZES_BYTES`] then [`QUEUE_DEPTHS`] order.
    pub cells: Vec<CellResult>,
    /// The flush test.
    pub fsync: FsyncResult,
    /// Wall time of the whole probe.
    pub elapsed: Duration,
    /// 1-minute load average before and after the probe (`/proc/loadavg`), if readable. It
    /// lags by a minute: a build that just ended still shows.
    pub loadavg_1m: (Option<f64>, Option<f64>),
    /// CPU time other processes used during the probe, in cores (busy CPU-seconds of the whole
    /// machine from `/proc/stat`, minus this process's own, divided by the wall time); `None`
    /// if unreadable. The figure to judge the probe by: above ~0.25 the latencies are inflated.
    pub other_cpu_cores: Option<f64>,
}

impl DiskReport {
    /// The cell for `kind`, `block_bytes`, `depth`, if it was probed.
    pub fn cell(&self, kind: IoKind, block_bytes: usize, depth: usize) -> Option<&CellResult> {
        self.cells
            .iter()
            .find(|c| c.kind == kind && c.block_bytes == block_bytes && c.depth == depth)
    }
}

/// The 1-minute load average from `/proc/loadavg` text.
pub fn parse_loadavg_1m(text: &str) -> Option<f64> {
    text.split_whitespace().next()?.parse().ok()
}

fn loadavg_1m() -> Option<f64> {
    parse_loadavg_1m(&std::fs::read_to_string("/proc/loadavg").ok()?)
}

/// Busy and total clock ticks of all CPUs from the `cpu ` line of `/proc/stat` text. Idle time
/// is `idle` + `iowait`; `guest` fields are already inside `user`/`nice` and are skipped.
pub fn parse_proc_stat_ticks(text: &str) -> Option<(u64, u64)> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    if v.len() < 4 {
        return None;
    }
    let total: u64 = v.iter().sum();
    let idle = v[3] + v.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}

/// A snapshot for measuring other processes' CPU use over an interval.
struct CpuSnapshot {
    busy_ticks: u64,
    own_cpu: Duration,
}

fn own_cpu_time() -> Option<Duration> {
    // SAFETY: all-zero is a valid `rusage`.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable `rusage`.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return None;
    }
    let tv = |t: libc::timeval| {
        Duration::from_secs(u64::try_from(t.tv_sec).unwrap_or(0))
            + Duration::from_micros(u64::try_from(t.tv_usec).unwrap_or(0))
    };
    Some(tv(ru.ru_utime) + tv(ru.ru_stime))
}

fn cpu_snapshot() -> Option<CpuSnapshot> {
    let (busy_ticks, _) = parse_proc_stat_ticks(&std::fs::read_to_string("/proc/stat").ok()?)?;
    Some(CpuSnapshot {
        busy_ticks,
        own_cpu: own_cpu_time()?,
    })
}

/// Other processes' CPU use between two snapshots `wall` apart, in cores.
fn other_cpu_cores(before: &CpuSnapshot, after: &CpuSnapshot, wall: Duration) -> Option<f64> {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz <= 0 || wall.is_zero() {
        return None;
    }
    let busy = after.busy_ticks.saturating_sub(before.busy_ticks) as f64 / hz as f64;
    let own = after.own_cpu.saturating_sub(before.own_cpu).as_secs_f64();
    Some(((busy - own) / wall.as_secs_f64()).max(0.0))
}

/// Removes the probe's files when dropped, whatever happened on the executor.
struct RemoveOnDrop(Vec<PathBuf>);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        for p in &self.0 {
            // Best effort: a file that is already gone is fine.
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Bytes available to an unprivileged user on the file system holding `dir`.
pub(crate) fn free_bytes(dir: &Path) -> Result<u64, TuneError> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|e| TuneError::io("statvfs", dir, std::io::Error::other(e)))?;
    // SAFETY: all-zero is a valid `statvfs` (plain integers).
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `st` a valid, writable `statvfs`.
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    if rc != 0 {
        return Err(TuneError::io(
            "statvfs",
            dir,
            std::io::Error::last_os_error(),
        ));
    }
    // The field types vary by target (u32 on some 32-bit ones); `from` is lossless on all.
    #[allow(clippy::useless_conversion)]
    let bytes = u64::from(st.f_bavail).saturating_mul(u64::from(st.f_frsize));
    Ok(bytes)
}

/// Runs the disk probe. Blocks the calling thread (which must not be a glommio executor) until
/// the probe ends, about `cfg.budget` later.
///
/// # Errors
/// [`TuneError`] when the directory cannot be created, has too little room (< 64 MiB free),
/// does not support O_DIRECT, or an I/O fails. The temp files are removed in every case.
pub fn probe_disk(cfg: &DiskProbeConfig) -> Result<DiskReport, TuneError> {
    if cfg.budget.is_zero() {
        return Err(TuneError::Setup(
            "the time budget must be above zero".into(),
        ));
    }
    if cfg.cell_ops_max == 0 || cfg.cell_bytes_max == 0 {
        return Err(TuneError::Setup(
            "per-cell bounds must be above zero".into(),
        ));
    }
    std::fs::create_dir_all(&cfg.dir).map_err(|e| TuneError::io("creating", &cfg.dir, e))?;
    let free = free_bytes(&cfg.dir)?;
    let largest_block = BLOCK_SIZES_BYTES[BLOCK_SIZES_BYTES.len() - 1] as u64;
    let mib = 1u64 << 20;
    let file_bytes = (cfg.file_bytes.min(free / 4) / mib) * mib;
    if file_bytes < 16 * largest_block {
        return Err(TuneError::Setup(format!(
            "{}: {} MiB free, the probe needs a temp file of at least 16 MiB (a quarter of free)",
            cfg.dir.display(),
            free / mib
        )));
    }

    let pid = std::process::id();
    let iopoll_path = cfg.dir.join(format!(".sluice-tune-iopoll-{pid}"));
    let data_path = cfg.dir.join(format!(".sluice-tune-{pid}.tmp"));
    let _guard = RemoveOnDrop(vec![iopoll_path.clone(), data_path.clone()]);
    // Blocking write on this (non-executor) thread: the iopoll workaround file, ≥ 4 KiB of data.
    std::fs::write(&iopoll_path, [0x5au8; ALIGN_BYTES as usize])
        .map_err(|e| TuneError::io("writing", &iopoll_path, e))?;

    let load_before = loadavg_1m();
    let cpu_before = cpu_snapshot();
    let wall_start = Instant::now();
    let placement = match cfg.cpu {
        Some(cpu) => Placement::Fixed(cpu),
        None => Placement::Unbound,
    };
    let run = ProbeRun {
        dir: cfg.dir.clone(),
        iopoll_path,
        data_path: data_path.clone(),
        budget: cfg.budget,
        file_bytes,
        cell_ops_max: cfg.cell_ops_max,
        cell_bytes_max: cfg.cell_bytes_max,
        cpu: cfg.cpu,
    };
    let handle = LocalExecutorBuilder::new(placement)
        .name("sluice-tune")
        .spawn(move || async move { run.run().await })
        .map_err(|e| TuneError::glommio("starting the probe executor for", &data_path, e))?;
    let mut report = handle
        .join()
        .map_err(|e| TuneError::glommio("running the probe executor for", &data_path, e))??;
    report.loadavg_1m = (load_before, loadavg_1m());
    report.other_cpu_cores = match (cpu_before, cpu_snapshot()) {
        (Some(b), Some(a)) => other_cpu_cores(&b, &a, wall_start.elapsed()),
        _ => None,
    };
    Ok(report)
}

/// Everything the executor needs, moved onto it.
struct ProbeRun {
    dir: PathBuf,
    iopoll_path: PathBuf,
    data_path: PathBuf,
    budget: Duration,
    file_bytes: u64,
    cell_ops_max: u64,
    cell_bytes_max: u64,
    cpu: Option<usize>,
}

impl ProbeRun {
    async fn run(self) -> Result<DiskReport, TuneError> {
        let start = Instant::now();
        let deadline = start + self.budget;
        let path = self.data_path.clone();
        let file = self.create_data_file().await?;

        let fill_deadline = start + self.budget.mul_f64(FILL_BUDGET_FRACTION);
        let fill_start = Instant::now();
        let region_bytes = fill(&file, &path, self.file_bytes, fill_deadline).await?;
        let fill_elapsed = fill_start.elapsed();
        let fill_mib_per_sec = mib_per_sec(region_bytes, fill_elapsed);

        let cells = self.run_cells(&file, region_bytes, deadline).await?;
        let fsync_deadline = deadline.max(Instant::now() + Duration::from_millis(10));
        let fsync = fsync_test(
            &file,
            &path,
            region_bytes,
            fsync_deadline,
            self.cell_ops_max,
        )
        .await?;

        match Rc::try_unwrap(file) {
            Ok(f) => {
                let _ = f.close().await;
            }
            Err(rc) => drop(rc),
        }
        Ok(DiskReport {
            dir: self.dir,
            cpu: self.cpu,
            region_bytes,
            fill_elapsed,
            fill_mib_per_sec,
            cells,
            fsync,
            elapsed: start.elapsed(),
            loadavg_1m: (None, None),
            other_cpu_cores: None,
        })
    }

    /// Opens the iopoll probe file first (the iopoll workaround: it must be the first DMA file
    /// the executor opens), then creates and preallocates the data file.
    async fn create_data_file(&self) -> Result<Rc<DmaFile>, TuneError> {
        let probe = DmaFile::open(&self.iopoll_path)
            .await
            .map_err(|e| TuneError::glommio("opening", &self.iopoll_path, e))?;
        let _ = probe.close().await;

        let path = &self.data_path;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .dma_open(path)
            .await
            .map_err(|e| TuneError::glommio("creating", path, e))?;
        file.pre_allocate(self.file_bytes, false)
            .await
            .map_err(|e| TuneError::glommio("preallocating", path, e))?;
        Ok(Rc::new(file))
    }

    /// Every cell of the grid (block size × queue depth × write/read) in turn, each in an equal
    /// slice of the time left before `deadline`.
    async fn run_cells(
        &self,
        file: &Rc<DmaFile>,
        region_bytes: u64,
        deadline: Instant,
    ) -> Result<Vec<CellResult>, TuneError> {
        let path = &self.data_path;
        let mut cells = Vec::with_capacity(SLICES - 1);
        let mut slices_left = SLICES;
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64 ^ u64::from(std::process::id());
        for &block_bytes in &BLOCK_SIZES_BYTES {
            for &depth in &QUEUE_DEPTHS {
                for kind in [IoKind::Write, IoKind::Read] {
                    let slice = deadline
                        .saturating_duration_since(Instant::now())
                        .checked_div(u32::try_from(slices_left).unwrap_or(u32::MAX))
                        .unwrap_or_default();
                    slices_left -= 1;
                    seed = splitmix64(&mut seed);
                    let spec = CellSpec {
                        kind,
                        block_bytes,
                        depth,
                        region_bytes,
                        deadline: Instant::now() + slice,
                        ops_max: self
                            .cell_ops_max
                            .min(self.cell_bytes_max / block_bytes as u64)
                            .max(depth as u64),
                        seed,
                    };
                    cells.push(run_cell(file, path, spec).await?);
                }
            }
        }
        Ok(cells)
    }
}

fn mib_per_sec(bytes: u64, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs <= 0.0 {
        return 0.0;
    }
    bytes as f64 / secs / f64::from(1u32 << 20)
}

/// SplitMix64: a small, good-enough generator for offsets; no dependency needed.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn new_histogram() -> Result<Histogram<u64>, TuneError> {
    Histogram::new_with_bounds(1, LATENCY_NS_MAX, 3)
        .map_err(|e| TuneError::Setup(format!("latency histogram: {e}")))
}

fn record(h: &mut Histogram<u64>, d: Duration) {
    let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1);
    h.saturating_record(ns.min(LATENCY_NS_MAX));
}

/// Writes the temp file sequentially with 1 MiB writes, [`FILL_DEPTH`] in flight, until it is
/// full or `deadline` passes. Returns the bytes filled from offset 0 (a multiple of 1 MiB, at
/// least 16 MiB even if that overruns the deadline, so every block size has room).
async fn fill(
    file: &Rc<DmaFile>,
    path: &Path,
    file_bytes: u64,
    deadline: Instant,
) -> Result<u64, TuneError> {
    let chunk = FILL_CHUNK_BYTES as u64;
    let minimum = (16 * chunk).min(file_bytes);
    let next = Rc::new(Cell::new(0u64));
    let mut tasks = Vec::with_capacity(FILL_DEPTH);
    for _ in 0..FILL_DEPTH {
        let file = Rc::clone(file);
        let next = Rc::clone(&next);
        let path = path.to_path_buf();
        tasks.push(glommio::spawn_local(async move {
            let mut done = Vec::new();
            loop {
                let pos = next.get();
                if pos + chunk > file_bytes || (pos >= minimum && Instant::now() >= deadline) {
                    return Ok::<_, TuneError>(done);
                }
                next.set(pos + chunk);
                let mut buf = file.alloc_dma_buffer(FILL_CHUNK_BYTES);
                buf.as_bytes_mut().fill(0xa5);
                let n = file
                    .write_at(buf, pos)
                    .await
                    .map_err(|e| TuneError::glommio("filling", &path, e))?;
                if n != FILL_CHUNK_BYTES {
                    return Err(short("filling", &path, n, FILL_CHUNK_BYTES));
                }
                done.push(pos);
            }
        }));
    }
    let mut written = Vec::new();
    for t in tasks {
        written.extend(t.await?);
    }
    // Writes were issued in offset order but may finish out of order; the region is the
    // contiguous prefix that was written.
    written.sort_unstable();
    let mut region = 0;
    for pos in written {
        if pos != region {
            break;
        }
        region += chunk;
    }
    Ok(region)
}

fn short(op: &'static str, path: &Path, got: usize, want: usize) -> TuneError {
    TuneError::io(
        op,
        path,
        std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("short O_DIRECT transfer: {got} of {want} bytes"),
        ),
    )
}

/// One cell's parameters.
#[derive(Clone, Copy)]
struct CellSpec {
    kind: IoKind,
    block_bytes: usize,
    depth: usize,
    region_bytes: u64,
    deadline: Instant,
    ops_max: u64,
    seed: u64,
}

/// Runs `spec.depth` tasks, each keeping one operation in flight, until the deadline or the
/// operation bound; every task completes at least one operation.
async fn run_cell(
    file: &Rc<DmaFile>,
    path: &Path,
    spec: CellSpec,
) -> Result<CellResult, TuneError> {
    let blocks = spec.region_bytes / spec.block_bytes as u64;
    if blocks == 0 {
        return Err(TuneError::Setup(format!(
            "region of {} bytes holds no {}-byte block",
            spec.region_bytes, spec.block_bytes
        )));
    }
    let started = Rc::new(Cell::new(0u64));
    let mut tasks = Vec::with_capacity(spec.depth);
    let cell_start = Instant::now();
    for worker in 0..spec.depth {
        let file = Rc::clone(file);
        let started = Rc::clone(&started);
        let path = path.to_path_buf();
        let mut rng = spec.seed ^ (worker as u64).wrapping_mul(0xd1b5_4a32_d192_ed03);
        tasks.push(glommio::spawn_local(async move {
            let mut h = new_histogram()?;
            loop {
                let n = started.get();
                let over = n >= spec.ops_max || Instant::now() >= spec.deadline;
                if over && !h.is_empty() {
                    return Ok::<_, TuneError>(h);
                }
                started.set(n + 1);
                let pos = (splitmix64(&mut rng) % blocks) * spec.block_bytes as u64;
                match spec.kind {
                    IoKind::Write => {
                        timed_write(&file, &path, pos, spec.block_bytes, n, &mut h).await?;
                    }
                    IoKind::Read => timed_read(&file, &path, pos, spec.block_bytes, &mut h).await?,
                }
            }
        }));
    }
    let mut total = new_histogram()?;
    for t in tasks {
        let h = t.await?;
        total
            .add(&h)
            .map_err(|e| TuneError::Setup(format!("merging latency histograms: {e:?}")))?;
    }
    let elapsed = cell_start.elapsed();
    let bytes = total.len() * spec.block_bytes as u64;
    Ok(CellResult {
        kind: spec.kind,
        block_bytes: spec.block_bytes,
        depth: spec.depth,
        elapsed,
        mib_per_sec: mib_per_sec(bytes, elapsed),
        latency: LatencySummary::from_histogram_ns(&total),
    })
}

/// One write of `block_bytes` at `pos`, its latency recorded in `h`; the operation number `n`
/// varies the content.
async fn timed_write(
    file: &DmaFile,
    path: &Path,
    pos: u64,
    block_bytes: usize,
    n: u64,
    h: &mut Histogram<u64>,
) -> Result<(), TuneError> {
    let mut buf = file.alloc_dma_buffer(block_bytes);
    // Cheap non-zero, non-constant-per-op content.
    buf.as_bytes_mut().fill((n & 0xff) as u8 | 1);
    let t0 = Instant::now();
    let got = file
        .write_at(buf, pos)
        .await
        .map_err(|e| TuneError::glommio("writing", path, e))?;
    record(h, t0.elapsed());
    if got != block_bytes {
        return Err(short("writing", path, got, block_bytes));
    }
    Ok(())
}

/// One read of `block_bytes` at `pos`, its latency recorded in `h`.
async fn timed_read(
    file: &DmaFile,
    path: &Path,
    pos: u64,
    block_bytes: usize,
    h: &mut Histogram<u64>,
) -> Result<(), TuneError> {
    let t0 = Instant::now();
    let got = file
        .read_at_aligned(pos, block_bytes)
        .await
        .map_err(|e| TuneError::glommio("reading", path, e))?;
    record(h, t0.elapsed());
    if got.len() != block_bytes {
        return Err(short("reading", path, got.len(), block_bytes));
    }
    Ok(())
}

/// A 4 KiB write then `fdatasync`, repeated until `deadline` or `ops_max` (at least once).
async fn fsync_test(
    file: &Rc<DmaFile>,
    path: &Path,
    region_bytes: u64,
    deadline: Instant,
    ops_max: u64,
) -> Result<FsyncResult, TuneError> {
    let block = BLOCK_SIZES_BYTES[0];
    let blocks = (region_bytes / block as u64).max(1);
    let mut sync_h = new_histogram()?;
    let mut both_h = new_histogram()?;
    let mut rng = 0x2545_f491_4f6c_dd1d_u64;
    let mut n = 0u64;
    while n == 0 || (n < ops_max && Instant::now() < deadline) {
        n += 1;
        let pos = (splitmix64(&mut rng) % blocks) * block as u64;
        let mut buf = file.alloc_dma_buffer(block);
        buf.as_bytes_mut().fill((n & 0xff) as u8 | 1);
        let t0 = Instant::now();
        let got = file
            .write_at(buf, pos)
            .await
            .map_err(|e| TuneError::glommio("writing", path, e))?;
        if got != block {
            return Err(short("writing", path, got, block));
        }
        let t1 = Instant::now();
        file.fdatasync()
            .await
            .map_err(|e| TuneError::glommio("fdatasync of", path, e))?;
        record(&mut sync_h, t1.elapsed());
        record(&mut both_h, t0.elapsed());
    }
    Ok(FsyncResult {
        fdatasync: LatencySummary::from_histogram_ns(&sync_h),
        write_and_fdatasync: LatencySummary::from_histogram_ns(&both_h),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loadavg_parses() {
        assert_eq!(parse_loadavg_1m("0.20 0.93 0.97 1/123 456\n"), Some(0.20));
        assert_eq!(parse_loadavg_1m(""), None);
    }

    #[test]
    fn proc_stat_parses() {
        let text = "cpu  100 5 50 1000 20 3 2 0 0 0\ncpu0 50 2 25 500 10 1 1 0 0 0\n";
        assert_eq!(parse_proc_stat_ticks(text), Some((160, 1180)));
        assert_eq!(parse_proc_stat_ticks("cpu0 1 2 3 4\n"), None);
    }

    #[test]
    fn splitmix_spreads() {
        let mut s = 1;
        let a = splitmix64(&mut s);
        let b = splitmix64(&mut s);
        assert_ne!(a, b);
    }
}
