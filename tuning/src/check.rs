//! `sluice tune --check`: host settings that hurt broker latency, each reported as `ok:`,
//! `warn:` (with the command that fixes it) or `skip:` (with why it could not be checked).
//!
//! Every check is a pure function of the text of the system files it needs, so tests feed it
//! fake `/sys` and `/proc` contents; [`run_checks`] reads the real files. A check never fails:
//! an unreadable file is a `skip:`.
//!
//! The checks:
//! - memlock limit: glommio registers its I/O buffers with io_uring and needs `ulimit -l`
//!   ≥ 512 KiB; below that it falls back to unregistered buffers with a warning (DESIGN.md §8).
//!   Root is fine.
//! - CPU frequency governor of the shard CPUs: anything but `performance` ramps the clock down
//!   between bursts and adds wake-up latency.
//! - Transparent huge pages `always`: khugepaged compaction stalls show up as latency spikes.
//! - I/O scheduler of the data dir's block device: `none` or `mq-deadline` for NVMe/virtio;
//!   `bfq`/`kyber` add per-request work and reordering.
//! - Swap: a shard paged out stalls every partition it owns.

use std::fmt;
use std::path::{Path, PathBuf};

/// Smallest `RLIMIT_MEMLOCK` glommio works with unprivileged, in bytes (512 KiB).
pub const MEMLOCK_BYTES_MIN: u64 = 512 << 10;

/// Outcome of one check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckStatus {
    /// The setting is good for latency.
    Ok,
    /// The setting hurts latency; the message says what to do.
    Warn,
    /// Could not be checked (file missing, not a block device, …); the message says why.
    Skip,
}

impl fmt::Display for CheckStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CheckStatus::Ok => "ok",
            CheckStatus::Warn => "warn",
            CheckStatus::Skip => "skip",
        })
    }
}

/// One check's result, printed as `status: name: message`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Check {
    /// Short name (`memlock`, `governor`, `thp`, `scheduler`, `swap`).
    pub name: &'static str,
    /// Ok, warn or skip.
    pub status: CheckStatus,
    /// What was found, and for a warning what to do.
    pub message: String,
}

impl Check {
    fn new(name: &'static str, status: CheckStatus, message: impl Into<String>) -> Self {
        Check {
            name,
            status,
            message: message.into(),
        }
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", self.status, self.name, self.message)
    }
}

/// The selected value of a sysfs choice file such as `always [madvise] never`: the bracketed
/// word, or the whole trimmed text when there are no brackets (e.g. `scaling_governor`).
pub fn selected_choice(text: &str) -> Option<&str> {
    let t = text.trim();
    if let Some(open) = t.find('[') {
        let rest = &t[open + 1..];
        let close = rest.find(']')?;
        let v = rest[..close].trim();
        return (!v.is_empty()).then_some(v);
    }
    (!t.is_empty() && !t.contains(char::is_whitespace)).then_some(t)
}

/// Memlock check. `soft_limit_bytes`: the soft `RLIMIT_MEMLOCK`, `None` for unlimited;
/// `euid`: the effective user id (0 = root, which glommio does not limit).
pub fn check_memlock(soft_limit_bytes: Option<u64>, euid: u32) -> Check {
    let name = "memlock";
    match soft_limit_bytes {
        None => Check::new(name, CheckStatus::Ok, "ulimit -l is unlimited"),
        Some(b) if euid == 0 => Check::new(
            name,
            CheckStatus::Ok,
            format!(
                "ulimit -l is {} KiB, but running as root: io_uring buffer registration is \
                 not limited by it",
                b >> 10
            ),
        ),
        Some(b) if b >= MEMLOCK_BYTES_MIN => Check::new(
            name,
            CheckStatus::Ok,
            format!("ulimit -l is {} KiB (≥ 512 KiB)", b >> 10),
        ),
        Some(b) => Check::new(
            name,
            CheckStatus::Warn,
            format!(
                "ulimit -l is {} KiB, below the 512 KiB glommio needs to register io_uring \
                 buffers (it falls back to slower unregistered buffers): run `ulimit -l \
                 unlimited` before starting sluice, or set `LimitMEMLOCK=infinity` in its \
                 systemd unit / `memlock` in /etc/security/limits.conf",
                b >> 10
            ),
        ),
    }
}

/// Governor check from each shard CPU's `cpufreq/scaling_governor` contents; `per_cpu` empty
/// means no cpufreq (common in VMs) and gives `skip`.
pub fn check_governor(per_cpu: &[(usize, String)]) -> Check {
    let name = "governor";
    if per_cpu.is_empty() {
        return Check::new(
            name,
            CheckStatus::Skip,
            "no /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor (no cpufreq driver, \
             e.g. a VM whose host sets the frequency)",
        );
    }
    let slow: Vec<String> = per_cpu
        .iter()
        .filter(|(_, g)| g.trim() != "performance")
        .map(|(cpu, g)| format!("cpu{cpu}={}", g.trim()))
        .collect();
    if slow.is_empty() {
        Check::new(name, CheckStatus::Ok, "all shard CPUs use `performance`")
    } else {
        Check::new(
            name,
            CheckStatus::Warn,
            format!(
                "{}: the clock ramps down between bursts and wake-ups cost latency; run \
                 `cpupower frequency-set -g performance` (or write `performance` to each \
                 scaling_governor)",
                slow.join(", ")
            ),
        )
    }
}

/// Transparent huge pages check from `/sys/kernel/mm/transparent_hugepage/enabled`.
pub fn check_thp(enabled: &str) -> Check {
    let name = "thp";
    match selected_choice(enabled) {
        Some("always") => Check::new(
            name,
            CheckStatus::Warn,
            "transparent huge pages are `always`: compaction and khugepaged stalls become \
             latency spikes; run `echo never > /sys/kernel/mm/transparent_hugepage/enabled` \
             (or `madvise`)",
        ),
        Some(v) => Check::new(
            name,
            CheckStatus::Ok,
            format!("transparent huge pages: `{v}`"),
        ),
        None => Check::new(
            name,
            CheckStatus::Skip,
            format!("cannot read the setting from `{}`", enabled.trim()),
        ),
    }
}

/// I/O scheduler check for block device `device` (e.g. `vda`) from its `queue/scheduler`.
pub fn check_scheduler(device: &str, scheduler: &str) -> Check {
    let name = "scheduler";
    match selected_choice(scheduler) {
        Some(s @ ("none" | "mq-deadline")) => Check::new(
            name,
            CheckStatus::Ok,
            format!("{device}: I/O scheduler `{s}`"),
        ),
        Some(s) => Check::new(
            name,
            CheckStatus::Warn,
            format!(
                "{device}: I/O scheduler `{s}` adds per-request work and reorders O_DIRECT \
                 writes; run `echo none > /sys/block/{device}/queue/scheduler` (or \
                 mq-deadline for a shared rotating disk)"
            ),
        ),
        None => Check::new(
            name,
            CheckStatus::Skip,
            format!(
                "{device}: cannot read the scheduler from `{}`",
                scheduler.trim()
            ),
        ),
    }
}

/// Swap check from `/proc/swaps` and `/proc/sys/vm/swappiness` (if readable).
pub fn check_swap(proc_swaps: &str, swappiness: Option<&str>) -> Check {
    let name = "swap";
    // First line is the header (`Filename Type Size Used Priority`).
    let devices: Vec<&str> = proc_swaps
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    if devices.is_empty() {
        return Check::new(name, CheckStatus::Ok, "no swap enabled");
    }
    let swappiness = swappiness
        .map(str::trim)
        .and_then(|s| s.parse::<u32>().ok());
    let how = match swappiness {
        Some(v) if v <= 1 => {
            return Check::new(
                name,
                CheckStatus::Ok,
                format!(
                    "swap on {} but vm.swappiness={v}: anonymous memory is swapped only under \
                     real memory pressure",
                    devices.join(", ")
                ),
            )
        }
        Some(v) => format!("vm.swappiness={v}"),
        None => "vm.swappiness unknown".to_owned(),
    };
    Check::new(
        name,
        CheckStatus::Warn,
        format!(
            "swap is on ({}; {how}): a paged-out shard stalls every partition it owns; run \
             `swapoff -a`, or at least `sysctl vm.swappiness=1`",
            devices.join(", ")
        ),
    )
}

/// Where the data dir's I/O scheduler lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockDevice {
    /// Kernel name of the whole disk (`vda`, `nvme0n1`, `dm-0`), never a partition.
    pub name: String,
    /// Its sysfs directory (holding `queue/scheduler`).
    pub sysfs_dir: PathBuf,
}

/// Finds the block device holding `dir` (or its nearest existing ancestor): `stat` → `st_dev`
/// major:minor → `<sys_dev_block>/MAJ:MIN` → for a partition its parent disk. Stacked devices
/// (`dm-*`, `md*`) are returned as they are; their `slaves/` list the disks beneath.
///
/// `sys_dev_block` is normally `/sys/dev/block`.
///
/// # Errors
/// A reason as text: the path has no existing ancestor, it lives on a file system without a
/// block device (overlay, tmpfs, NFS: major 0), or sysfs has no entry.
pub fn block_device_of(dir: &Path, sys_dev_block: &Path) -> Result<BlockDevice, String> {
    use std::os::unix::fs::MetadataExt;
    let mut p = dir.to_path_buf();
    let meta = loop {
        match std::fs::metadata(&p) {
            Ok(m) => break m,
            Err(e) => {
                if !p.pop() || p.as_os_str().is_empty() {
                    return Err(format!("cannot stat {}: {e}", dir.display()));
                }
            }
        }
    };
    let dev = meta.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    if major == 0 {
        return Err(format!(
            "{} is on device {major}:{minor}, a file system without a block device \
             (overlay, tmpfs, NFS, btrfs subvolume)",
            p.display()
        ));
    }
    let link = sys_dev_block.join(format!("{major}:{minor}"));
    let mut real = std::fs::canonicalize(&link)
        .map_err(|e| format!("no sysfs entry {}: {e}", link.display()))?;
    if real.join("partition").exists() {
        real.pop();
    }
    let name = real
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| format!("cannot name the device at {}", real.display()))?;
    Ok(BlockDevice {
        name,
        sysfs_dir: real,
    })
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// Scheduler checks for the data dir's disk and, for a stacked device, the disks beneath it.
fn scheduler_checks(data_dir: &Path) -> Vec<Check> {
    let dev = match block_device_of(data_dir, Path::new("/sys/dev/block")) {
        Ok(d) => d,
        Err(why) => return vec![Check::new("scheduler", CheckStatus::Skip, why)],
    };
    let mut devices = vec![dev.clone()];
    if let Ok(entries) = std::fs::read_dir(dev.sysfs_dir.join("slaves")) {
        for e in entries.flatten() {
            if let Ok(mut real) = std::fs::canonicalize(e.path()) {
                if real.join("partition").exists() {
                    real.pop();
                }
                if let Some(n) = real.file_name() {
                    devices.push(BlockDevice {
                        name: n.to_string_lossy().into_owned(),
                        sysfs_dir: real.clone(),
                    });
                }
            }
        }
    }
    devices
        .iter()
        .map(|d| match read(&d.sysfs_dir.join("queue/scheduler")) {
            Ok(text) => check_scheduler(&d.name, &text),
            Err(why) => Check::new("scheduler", CheckStatus::Skip, format!("{}: {why}", d.name)),
        })
        .collect()
}

fn memlock_limit() -> Option<Option<u64>> {
    // SAFETY: all-zero is a valid `rlimit`.
    let mut rl: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: `rl` is a valid, writable `rlimit`.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut rl) };
    if rc != 0 {
        return None;
    }
    Some((rl.rlim_cur != libc::RLIM_INFINITY).then_some(rl.rlim_cur))
}

/// Runs every check against the real system, for the data dir `data_dir` and the shard CPUs
/// `cpus` (their governors). Never fails: problems become `skip:` lines.
pub fn run_checks(data_dir: &Path, cpus: &[usize]) -> Vec<Check> {
    let mut out = Vec::new();
    match memlock_limit() {
        // SAFETY: geteuid has no preconditions and cannot fail.
        Some(limit) => out.push(check_memlock(limit, unsafe { libc::geteuid() })),
        None => out.push(Check::new(
            "memlock",
            CheckStatus::Skip,
            format!("getrlimit failed: {}", std::io::Error::last_os_error()),
        )),
    }
    let governors: Vec<(usize, String)> = cpus
        .iter()
        .filter_map(|&c| {
            let p = format!("/sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor");
            std::fs::read_to_string(p).ok().map(|g| (c, g))
        })
        .collect();
    out.push(check_governor(&governors));
    let thp = Path::new("/sys/kernel/mm/transparent_hugepage/enabled");
    out.push(match read(thp) {
        Ok(text) => check_thp(&text),
        Err(why) => Check::new("thp", CheckStatus::Skip, why),
    });
    out.extend(scheduler_checks(data_dir));
    out.push(match read(Path::new("/proc/swaps")) {
        Ok(text) => {
            let swappiness = std::fs::read_to_string("/proc/sys/vm/swappiness").ok();
            check_swap(&text, swappiness.as_deref())
        }
        Err(why) => Check::new("swap", CheckStatus::Skip, why),
    });
    out
}
