//! The tuned config writer: turns the probe figures into a commented `sluice.toml`.
//!
//! Invariants:
//! - Only keys in [`ALLOWED_KEYS`] are emitted as values, all the broker's own keys; every other
//!   observation is a comment.
//! - Keys are quoted (`"sluice.cores" = …`) so the dotted Kafka names stay single keys; values
//!   have the types the broker's loader accepts: `sluice.cores` a string in its CPU-list form,
//!   the rest integers.
//! - Each chosen value has its reason, with the measured figure, in the comment above it.

use crate::check::Check;
use crate::cpu::{render_cores, CpuTopology};
use crate::disk::{CellResult, DiskReport, IoKind, BLOCK_SIZES_BYTES, QUEUE_DEPTHS};
use std::fmt::Write as _;

/// Keys the broker accepts that `sluice tune` may set.
pub const ALLOWED_KEYS: [&str; 6] = [
    "sluice.cores",
    "sluice.batch.cache.bytes",
    "log.segment.bytes",
    "log.flush.interval.messages",
    "log.flush.interval.ms",
    "num.partitions",
];

/// Largest batch cache chosen per shard, in bytes (1 GiB).
pub const BATCH_CACHE_BYTES_MAX: u64 = 1 << 30;
/// Smallest batch cache chosen per shard, in bytes (16 MiB).
pub const BATCH_CACHE_BYTES_MIN: u64 = 16 << 20;
/// Kafka's default and the largest segment size chosen, in bytes (1 GiB).
pub const SEGMENT_BYTES_MAX: u64 = 1 << 30;
/// Smallest segment size chosen, in bytes (64 MiB).
pub const SEGMENT_BYTES_MIN: u64 = 64 << 20;
/// Active segments (each preallocated to `segment.bytes`) the free space should hold.
pub const ACTIVE_SEGMENTS_PLANNED: u64 = 64;
/// fdatasync p99 below which a per-message flush is called affordable, in µs (1 ms).
pub const FSYNC_AFFORDABLE_P99_US: f64 = 1000.0;
/// CPU use by other processes during the probe, in cores, above which the figures are flagged.
pub const BUSY_OTHER_CPU_CORES: f64 = 0.25;
/// glommio's default registered I/O memory per executor, in bytes (10 MiB); larger amounts of
/// writes in flight use heap buffers (storage `LogConfig::write_chunk_bytes` note).
pub const GLOMMIO_IO_MEMORY_BYTES: usize = 10 << 20;
/// The storage log's write pattern (storage `LogConfig` defaults): bytes per write.
pub const LOG_WRITE_CHUNK_BYTES: usize = 256 << 10;
/// The storage log's writes in flight per log.
pub const LOG_WRITES_IN_FLIGHT: usize = 16;

/// What the config writer works from.
#[derive(Clone, Copy, Debug)]
pub struct TuneInputs<'a> {
    /// Core probe result.
    pub cpus: &'a CpuTopology,
    /// Disk probe result.
    pub disk: &'a DiskReport,
    /// `MemTotal` from `/proc/meminfo`, in bytes, if read.
    pub mem_total_bytes: Option<u64>,
    /// Free bytes on the data dir's file system (after the probe), if read.
    pub free_bytes: Option<u64>,
    /// `--check` results to copy into the header as comments.
    pub checks: &'a [Check],
}

/// `MemTotal` in bytes from `/proc/meminfo` text (`MemTotal:  24684084 kB`).
pub fn parse_meminfo_total_bytes(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let mut parts = line.split_whitespace().skip(1);
    let n: u64 = parts.next()?.parse().ok()?;
    match parts.next() {
        Some("kB") => n.checked_mul(1024),
        None => Some(n),
        Some(_) => None,
    }
}

/// Batch cache per shard: an eighth of memory split over the shards, within
/// [[`BATCH_CACHE_BYTES_MIN`], [`BATCH_CACHE_BYTES_MAX`]], rounded down to MiB.
pub fn batch_cache_bytes(mem_total_bytes: u64, shards: usize) -> u64 {
    let per_shard = mem_total_bytes / 8 / (shards.max(1) as u64);
    let mib = 1u64 << 20;
    (per_shard.clamp(BATCH_CACHE_BYTES_MIN, BATCH_CACHE_BYTES_MAX) / mib) * mib
}

/// Segment size: the largest power of two such that [`ACTIVE_SEGMENTS_PLANNED`] preallocated
/// segments fit in the free space, within [[`SEGMENT_BYTES_MIN`], [`SEGMENT_BYTES_MAX`]].
pub fn segment_bytes(free_bytes: u64) -> u64 {
    let want = free_bytes / ACTIVE_SEGMENTS_PLANNED;
    if want < SEGMENT_BYTES_MIN {
        return SEGMENT_BYTES_MIN;
    }
    let pow2 = 1u64 << (63 - want.leading_zeros());
    pow2.clamp(SEGMENT_BYTES_MIN, SEGMENT_BYTES_MAX)
}

fn human_bytes(b: u64) -> String {
    const GIB: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;
    const KIB: u64 = 1 << 10;
    if b >= GIB && b % GIB == 0 {
        format!("{} GiB", b / GIB)
    } else if b >= GIB {
        format!("{:.1} GiB", b as f64 / GIB as f64)
    } else if b >= MIB {
        format!("{} MiB", b / MIB)
    } else {
        format!("{} KiB", b / KIB)
    }
}

fn groups_text(groups: &[Vec<usize>]) -> String {
    groups
        .iter()
        .map(|g| {
            let ids: Vec<String> = g.iter().map(usize::to_string).collect();
            format!("[{}]", ids.join(","))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Renders the tuned config: a header with the machine's figures, then the chosen keys, each
/// after the comment that justifies it, then the disk table.
pub fn render_config(inp: &TuneInputs<'_>) -> String {
    let mut s = String::new();
    // `writeln!` into a String cannot fail; the results are ignored deliberately.
    let w = &mut s;
    render_header(w, inp);
    render_cores_section(w, inp);
    render_partitions(w, inp);
    render_batch_cache(w, inp);
    render_segments(w, inp);
    render_flush(w, inp);
    render_disk_table(w, inp);
    s
}

/// Shards the tuned file plans for: one per shard CPU, at least one.
fn shard_count(inp: &TuneInputs<'_>) -> usize {
    inp.cpus.shard_cpus.len().max(1)
}

/// The file's opening comments: where the figures come from, the machine's load during the
/// probe (a warning when it was busy) and the host checks.
fn render_header(w: &mut String, inp: &TuneInputs<'_>) {
    let cpus = inp.cpus;
    let disk = inp.disk;
    let _ = writeln!(
        w,
        "# sluice.toml written by `sluice tune`. Figures are from this machine;"
    );
    let _ = writeln!(
        w,
        "# rerun after changing hardware, kernel settings or the data disk."
    );
    let load = |v: Option<f64>| v.map_or_else(|| "?".to_owned(), |l| format!("{l:.2}"));
    let _ = writeln!(
        w,
        "# Disk probe: {} in {:.1} s on CPU {}; load average (1 min) before {} / after {}.",
        disk.dir.display(),
        disk.elapsed.as_secs_f64(),
        disk.cpu
            .map_or_else(|| "unpinned".to_owned(), |c| c.to_string()),
        load(disk.loadavg_1m.0),
        load(disk.loadavg_1m.1),
    );
    if let Some(other) = disk.other_cpu_cores {
        let _ = writeln!(
            w,
            "# Other processes used {other:.2} of {} CPU(s) on average during the probe.",
            cpus.online.len().max(cpus.allowed.len())
        );
    }
    let busy = match disk.other_cpu_cores {
        Some(other) => other > BUSY_OTHER_CPU_CORES,
        None => [disk.loadavg_1m.0, disk.loadavg_1m.1]
            .iter()
            .flatten()
            .any(|&l| l > 0.5 * cpus.allowed.len().max(1) as f64),
    };
    if busy {
        let _ = writeln!(
            w,
            "# WARNING: the machine was busy during the probe; latency figures are inflated \
             (on 2 cores a build turns 60 µs writes into 4 ms). Rerun on an idle machine."
        );
    }
    if !inp.checks.is_empty() {
        let _ = writeln!(w, "#");
        let _ = writeln!(w, "# Host checks (`sluice tune --check`):");
        for c in inp.checks {
            let _ = writeln!(w, "#   {c}");
        }
    }
}

/// The `sluice.cores` choice: the CPU topology, SMT, and the warning for few cores.
fn render_cores_section(w: &mut String, inp: &TuneInputs<'_>) {
    let cpus = inp.cpus;
    let shards = shard_count(inp);
    let cores = render_cores(&cpus.shard_cpus);
    let _ = writeln!(w);
    let _ = writeln!(
        w,
        "# Cores: {} online, {} allowed by the affinity mask, {} physical core(s): {}.",
        cpus.online.len(),
        cpus.allowed.len(),
        cpus.sibling_groups.len(),
        groups_text(&cpus.sibling_groups)
    );
    if cpus.has_smt() {
        let _ = writeln!(
            w,
            "# SMT: one shard per physical core, on its first sibling; two shards on siblings \
             would share one core's execution units and caches."
        );
    } else {
        let _ = writeln!(
            w,
            "# No SMT siblings: every allowed CPU is its own core and gets a shard."
        );
    }
    if shards <= 2 {
        let _ = writeln!(
            w,
            "# Few cores: pin a load generator or other busy process to a CPU without a shard \
             (e.g. run the broker with `--cores` on fewer CPUs), never beside a build."
        );
    }
    let _ = writeln!(w, "\"sluice.cores\" = \"{cores}\"");
}

/// `num.partitions`: one partition per shard.
fn render_partitions(w: &mut String, inp: &TuneInputs<'_>) {
    let shards = shard_count(inp);
    let _ = writeln!(w);
    let _ = writeln!(
        w,
        "# One partition per shard, so an auto-created topic spreads over all {shards} shard(s) \
         (Kafka's default is 1)."
    );
    let _ = writeln!(w, "\"num.partitions\" = {shards}");
}

/// `sluice.batch.cache.bytes` from MemTotal, or why the default stays.
fn render_batch_cache(w: &mut String, inp: &TuneInputs<'_>) {
    let shards = shard_count(inp);
    let _ = writeln!(w);
    match inp.mem_total_bytes {
        Some(mem) => {
            let cache = batch_cache_bytes(mem, shards);
            let _ = writeln!(
                w,
                "# Batch cache per shard: MemTotal {} / 8 / {shards} shard(s) = {}, kept within \
                 {}..{} per shard.",
                human_bytes(mem),
                human_bytes(mem / 8 / shards as u64),
                human_bytes(BATCH_CACHE_BYTES_MIN),
                human_bytes(BATCH_CACHE_BYTES_MAX),
            );
            let _ = writeln!(w, "\"sluice.batch.cache.bytes\" = {cache}");
        }
        None => {
            let _ = writeln!(
                w,
                "# Batch cache: MemTotal unreadable, the broker's default (64 MiB per shard) stays."
            );
        }
    }
}

/// `log.segment.bytes` from the data disk's free space, or why the default stays.
fn render_segments(w: &mut String, inp: &TuneInputs<'_>) {
    let _ = writeln!(w);
    match inp.free_bytes {
        Some(free) => {
            let seg = segment_bytes(free);
            let _ = writeln!(
                w,
                "# Segments are preallocated: {} free on the data disk holds {ACTIVE_SEGMENTS_PLANNED} \
                 active segments of {} (Kafka's default is 1 GiB).",
                human_bytes(free),
                human_bytes(seg)
            );
            let _ = writeln!(w, "\"log.segment.bytes\" = {seg}");
        }
        None => {
            let _ = writeln!(
                w,
                "# Segments: free space unknown, Kafka's 1 GiB default stays."
            );
        }
    }
}

/// The fdatasync figures and what they mean for `flush.messages`.
fn render_flush(w: &mut String, inp: &TuneInputs<'_>) {
    let disk = inp.disk;
    let f = &disk.fsync;
    let _ = writeln!(w);
    let _ = writeln!(
        w,
        "# fdatasync after a 4 KiB O_DIRECT write ({} runs): fdatasync p50 {:.0} µs / p99 {:.0} µs; \
         write + fdatasync p50 {:.0} µs / p99 {:.0} µs.",
        f.fdatasync.ops,
        f.fdatasync.p50_us,
        f.fdatasync.p99_us,
        f.write_and_fdatasync.p50_us,
        f.write_and_fdatasync.p99_us,
    );
    if f.fdatasync.p99_us < FSYNC_AFFORDABLE_P99_US {
        let _ = writeln!(
            w,
            "# p99 is under 1 ms: `flush.messages=1` on a topic that needs durable acks is \
             affordable (each flush adds about {:.0} µs at p99). The broker-wide default stays \
             Kafka's (never: durability from replication), so log.flush.interval.messages and \
             log.flush.interval.ms are not set here.",
            f.fdatasync.p99_us
        );
    } else {
        let _ = writeln!(
            w,
            "# p99 is {:.1} ms, at or above 1 ms: a per-message flush would dominate the latency \
             budget; keep Kafka's default (never) and rely on replication, or group commits via \
             log.flush.interval.ms on the topics that need them.",
            f.fdatasync.p99_us / 1000.0
        );
    }
}

/// The O_DIRECT table per block size and queue depth, then the write-pattern reasoning.
fn render_disk_table(w: &mut String, inp: &TuneInputs<'_>) {
    let disk = inp.disk;
    let _ = writeln!(w);
    let _ = writeln!(
        w,
        "# O_DIRECT random I/O on {} of a preallocated, filled file (sequential fill: {:.0} MiB/s):",
        human_bytes(disk.region_bytes),
        disk.fill_mib_per_sec
    );
    let _ = writeln!(
        w,
        "#   block   depth |  write MiB/s  p50 µs  p99 µs |   read MiB/s  p50 µs  p99 µs"
    );
    for &bs in &BLOCK_SIZES_BYTES {
        for &qd in &QUEUE_DEPTHS {
            let cell = |k| {
                disk.cell(k, bs, qd).map_or_else(
                    || format!("{:>12} {:>7} {:>7}", "-", "-", "-"),
                    |c| {
                        format!(
                            "{:>12.1} {:>7.0} {:>7.0}",
                            c.mib_per_sec, c.latency.p50_us, c.latency.p99_us
                        )
                    },
                )
            };
            let _ = writeln!(
                w,
                "#   {:>7} {:>5} | {} | {}",
                human_bytes(bs as u64),
                qd,
                cell(IoKind::Write),
                cell(IoKind::Read)
            );
        }
    }
    let _ = writeln!(w, "#");
    for line in write_pattern_reasoning(disk) {
        let _ = writeln!(w, "# {line}");
    }
}

/// Whether the figures support the log's write pattern (256 KiB writes, 16 in flight), as
/// comment lines.
///
/// 256 KiB × 16 keeps 4 MiB in flight. The probed cells with the same bytes in flight,
/// 64 KiB × 64 and 1 MiB × 4, bracket it (smaller and larger writes); the pattern is supported
/// when both reach 80 % of the peak write bandwidth, likely supported when one does.
pub fn write_pattern_reasoning(disk: &DiskReport) -> Vec<String> {
    let writes = || disk.cells.iter().filter(|c| c.kind == IoKind::Write);
    let Some(peak) = writes().max_by(|a, b| a.mib_per_sec.total_cmp(&b.mib_per_sec)) else {
        return vec!["No write cells were measured.".to_owned()];
    };
    let peak_bw = peak.mib_per_sec.max(f64::MIN_POSITIVE);
    let in_flight = LOG_WRITE_CHUNK_BYTES * LOG_WRITES_IN_FLIGHT;
    let mut out = vec![format!(
        "The log writes {} chunks with {LOG_WRITES_IN_FLIGHT} in flight ({} in flight; not a \
         config key). Peak write bandwidth: {:.0} MiB/s at {} × {}.",
        human_bytes(LOG_WRITE_CHUNK_BYTES as u64),
        human_bytes(in_flight as u64),
        peak.mib_per_sec,
        human_bytes(peak.block_bytes as u64),
        peak.depth
    )];
    let same: Vec<&CellResult> = writes()
        .filter(|c| c.block_bytes * c.depth == in_flight)
        .collect();
    if same.is_empty() {
        out.push("No probed cell has the same bytes in flight; cannot judge.".to_owned());
        return out;
    }
    out.push(same_in_flight_verdict(&same, peak_bw));
    out.extend(large_write_depth_note(writes()));
    out.extend(small_write_latency_note(disk));
    out
}

/// The cells with the log's bytes in flight as % of the peak write bandwidth `peak_bw`, and
/// whether they support the log's write pattern.
fn same_in_flight_verdict(same: &[&CellResult], peak_bw: f64) -> String {
    let desc: Vec<String> = same
        .iter()
        .map(|c| {
            format!(
                "{} × {} → {:.0} MiB/s ({:.0} %)",
                human_bytes(c.block_bytes as u64),
                c.depth,
                c.mib_per_sec,
                100.0 * c.mib_per_sec / peak_bw
            )
        })
        .collect();
    let good = same
        .iter()
        .filter(|c| c.mib_per_sec >= 0.8 * peak_bw)
        .count();
    let verdict = if good == same.len() {
        "the figures support 256 KiB × 16"
    } else if good > 0 {
        "256 KiB × 16 lies between them; the figures likely support it"
    } else {
        "the figures do not support 256 KiB × 16 (it stays under 80 % of peak)"
    };
    format!(
        "Cells with the same bytes in flight, % of peak: {}: {verdict}.",
        desc.join(", ")
    )
}

/// A note when 1 MiB writes get slower with depth: more in flight than the registered pool
/// holds.
fn large_write_depth_note<'a>(writes: impl Iterator<Item = &'a CellResult>) -> Option<String> {
    let big: Vec<&CellResult> = writes.filter(|c| c.block_bytes == 1 << 20).collect();
    let best = big
        .iter()
        .max_by(|a, b| a.mib_per_sec.total_cmp(&b.mib_per_sec))?;
    let deep = big
        .iter()
        .filter(|c| c.depth > best.depth && c.mib_per_sec < 0.8 * best.mib_per_sec)
        .min_by_key(|c| c.depth)?;
    Some(format!(
        "1 MiB writes peak at depth {} ({:.0} MiB/s) and fall to {:.0} MiB/s at depth {}: \
         beyond glommio's {} of registered I/O memory buffers come from the heap, so \
         more bytes in flight than that does not pay.",
        best.depth,
        best.mib_per_sec,
        deep.mib_per_sec,
        deep.depth,
        human_bytes(GLOMMIO_IO_MEMORY_BYTES as u64)
    ))
}

/// A warning when a 4 KiB write at depth 1 has a p99 above the 1 ms budget.
fn small_write_latency_note(disk: &DiskReport) -> Option<String> {
    let c = disk.cell(IoKind::Write, 4 << 10, 1)?;
    (c.latency.p99_us > 1000.0).then(|| {
        format!(
            "4 KiB write at depth 1 has p99 {:.1} ms: above the 1 ms budget without fsync \
             (DESIGN.md §5); check machine load and the disk before trusting latency targets.",
            c.latency.p99_us / 1000.0
        )
    })
}
