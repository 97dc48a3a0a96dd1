//! Core probe: which CPUs are online, which share a physical core (SMT siblings), which this
//! process may run on, and which of them get a shard.
//!
//! Sources: `/sys/devices/system/cpu/online`, `/sys/devices/system/cpu/cpuN/topology/
//! thread_siblings_list` and the process affinity mask (`sched_getaffinity`). The parsers take
//! file contents as arguments so they are testable without a real sysfs.
//!
//! Choice: one shard per physical core, on the first allowed sibling of each core. Two shards on
//! SMT siblings share one core's execution units and caches; a shard's latency then depends on
//! its neighbour's load (DESIGN.md §2: one executor per core).

use crate::error::TuneError;
use std::collections::BTreeSet;
use std::path::Path;

/// Largest CPU id accepted from sysfs or the affinity mask (`CPU_SETSIZE`).
const CPU_ID_LIMIT: usize = 1024;

/// What the core probe found, and the CPUs it chose for shards.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuTopology {
    /// Online CPU ids, ascending.
    pub online: Vec<usize>,
    /// CPU ids in this process's affinity mask, ascending.
    pub allowed: Vec<usize>,
    /// SMT sibling groups (one per physical core) among the allowed CPUs, each ascending,
    /// ordered by their first CPU. A group of one means no SMT on that core.
    pub sibling_groups: Vec<Vec<usize>>,
    /// CPUs chosen for shards: the first CPU of each sibling group, ascending.
    pub shard_cpus: Vec<usize>,
}

impl CpuTopology {
    /// Whether any physical core offers more than one allowed hardware thread.
    pub fn has_smt(&self) -> bool {
        self.sibling_groups.iter().any(|g| g.len() > 1)
    }
}

/// Parses a kernel CPU list (`0-3,8,10-11`, as in `online` and `thread_siblings_list`) into
/// ascending, distinct CPU ids.
///
/// # Errors
/// [`TuneError::Parse`] on an empty list, a non-number, a backwards range or an id
/// ≥ 1024.
pub fn parse_cpu_list(text: &str) -> Result<Vec<usize>, TuneError> {
    let bad = |why: String| TuneError::Parse {
        what: "CPU list",
        text: text.trim().to_owned(),
        why,
    };
    let mut out = BTreeSet::new();
    for part in text.trim().split(',') {
        let part = part.trim();
        if part.is_empty() {
            return Err(bad("empty element".to_owned()));
        }
        let id = |t: &str| -> Result<usize, TuneError> {
            let n: usize = t
                .trim()
                .parse()
                .map_err(|_| bad(format!("`{t}` is not a CPU id")))?;
            if n >= CPU_ID_LIMIT {
                return Err(bad(format!("CPU id {n} is not below {CPU_ID_LIMIT}")));
            }
            Ok(n)
        };
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (id(a)?, id(b)?),
            None => (id(part)?, id(part)?),
        };
        if lo > hi {
            return Err(bad(format!("range `{part}` is backwards")));
        }
        out.extend(lo..=hi);
    }
    Ok(out.into_iter().collect())
}

/// Renders CPU ids as the broker's `sluice.cores` reads them: taskset's list syntax,
/// comma-separated CPU ids with runs as ranges (`0-1`, `2`, `0,2-3,5`).
pub fn render_cores(cpus: &[usize]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j + 1 < sorted.len() && sorted[j + 1] == sorted[j] + 1 {
            j += 1;
        }
        if i == j {
            parts.push(sorted[i].to_string());
        } else {
            parts.push(format!("{}-{}", sorted[i], sorted[j]));
        }
        i = j + 1;
    }
    parts.join(",")
}

/// Groups the allowed CPUs into physical cores and picks one shard CPU per core.
///
/// `siblings` maps each CPU to its `thread_siblings_list` (including itself); a CPU missing from
/// it is taken as a core of its own. Siblings outside `allowed` are ignored, so under
/// `taskset -c 1,2` on a 2-way SMT machine with pairs (0,1) and (2,3) the groups are `[1]`, `[2]`.
pub fn choose_shard_cpus(
    online: &[usize],
    allowed: &[usize],
    siblings: &[(usize, Vec<usize>)],
) -> CpuTopology {
    let mut allowed_set: BTreeSet<usize> = allowed.iter().copied().collect();
    if !online.is_empty() {
        allowed_set.retain(|c| online.contains(c));
    }
    let mut seen = BTreeSet::new();
    let mut groups = Vec::new();
    for &cpu in &allowed_set {
        if seen.contains(&cpu) {
            continue;
        }
        let mut group: Vec<usize> = siblings
            .iter()
            .find(|(c, _)| *c == cpu)
            .map(|(_, s)| s.clone())
            .unwrap_or_default();
        group.push(cpu);
        group.retain(|c| allowed_set.contains(c));
        group.sort_unstable();
        group.dedup();
        seen.extend(group.iter().copied());
        groups.push(group);
    }
    groups.sort_by_key(|g| g.first().copied());
    let shard_cpus = groups.iter().filter_map(|g| g.first().copied()).collect();
    CpuTopology {
        online: online.to_vec(),
        allowed: allowed_set.into_iter().collect(),
        sibling_groups: groups,
        shard_cpus,
    }
}

/// CPU ids in this process's affinity mask (`sched_getaffinity`), ascending.
///
/// # Errors
/// [`TuneError::Io`] when the call fails.
pub fn affinity_cpus() -> Result<Vec<usize>, TuneError> {
    // SAFETY: `cpu_set_t` is a plain bit array; all-zero is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable `cpu_set_t` and the size passed is its size.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(TuneError::Io {
            op: "sched_getaffinity",
            path: "(process)".into(),
            source: std::io::Error::last_os_error(),
        });
    }
    // SAFETY: `cpu < CPU_ID_LIMIT` = CPU_SETSIZE, the bit count of `cpu_set_t`.
    Ok((0..CPU_ID_LIMIT)
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect())
}

/// Probes the machine's CPUs under `sysfs_cpu` (normally `/sys/devices/system/cpu`).
///
/// A missing `online` file falls back to the affinity mask; a missing `thread_siblings_list`
/// makes that CPU a core of its own.
///
/// # Errors
/// [`TuneError`] when the affinity mask cannot be read or a sysfs file does not parse.
pub fn probe_cpus(sysfs_cpu: &Path) -> Result<CpuTopology, TuneError> {
    let allowed = affinity_cpus()?;
    let online = match std::fs::read_to_string(sysfs_cpu.join("online")) {
        Ok(text) => parse_cpu_list(&text)?,
        Err(_) => allowed.clone(),
    };
    let mut siblings = Vec::new();
    for &cpu in &allowed {
        let path = sysfs_cpu.join(format!("cpu{cpu}/topology/thread_siblings_list"));
        if let Ok(text) = std::fs::read_to_string(&path) {
            siblings.push((cpu, parse_cpu_list(&text)?));
        }
    }
    Ok(choose_shard_cpus(&online, &allowed, &siblings))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11\n").ok(),
            Some(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(parse_cpu_list("5").ok(), Some(vec![5]));
        assert_eq!(parse_cpu_list("1,0").ok(), Some(vec![0, 1]));
        assert!(parse_cpu_list("").is_err());
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("a").is_err());
        assert!(parse_cpu_list("0,,1").is_err());
        assert!(parse_cpu_list("4096").is_err());
    }

    #[test]
    fn smt_pairs_give_one_shard_per_core() {
        let online = parse_cpu_list("0-7").unwrap_or_default();
        // Linux's usual numbering: sibling of CPU n is n + 4.
        let siblings: Vec<(usize, Vec<usize>)> =
            (0..8).map(|c| (c, vec![c % 4, c % 4 + 4])).collect();
        let t = choose_shard_cpus(&online, &online, &siblings);
        assert_eq!(t.shard_cpus, vec![0, 1, 2, 3]);
        assert_eq!(t.sibling_groups[0], vec![0, 4]);
        assert!(t.has_smt());
    }

    #[test]
    fn affinity_mask_limits_groups() {
        let online: Vec<usize> = (0..4).collect();
        let siblings = vec![
            (0, vec![0, 1]),
            (1, vec![0, 1]),
            (2, vec![2, 3]),
            (3, vec![2, 3]),
        ];
        let t = choose_shard_cpus(&online, &[1, 2], &siblings);
        assert_eq!(t.sibling_groups, vec![vec![1], vec![2]]);
        assert_eq!(t.shard_cpus, vec![1, 2]);
        assert!(!t.has_smt());
    }

    #[test]
    fn cores_render_as_broker_reads_them() {
        assert_eq!(render_cores(&[0, 1]), "0-1");
        assert_eq!(render_cores(&[2]), "2");
        assert_eq!(render_cores(&[0, 2, 3, 5]), "0,2-3,5");
    }
}
