//! CPU lists for `--cores` / `sluice.cores` in taskset's syntax, and the CPUs this process
//! may run on.

use std::collections::BTreeSet;

/// Largest CPU id `--cores` accepts (`CPU_SETSIZE`).
const CPU_ID_LIMIT: usize = 1024;

/// Parses a `--cores` value in taskset's list syntax: CPU ids and ranges, `0`, `0-3`, `0,2`,
/// `0,4-7` = exactly those CPUs, in that order (`0` is CPU 0; the count flag is `--smp`).
/// Rejects duplicates, empty lists and ids >= 1024.
pub fn parse_cores(s: &str) -> Result<Vec<usize>, String> {
    let s = s.trim();
    if s.is_empty() {
        return Err("expected CPU ids as taskset lists them: `0`, `0-3`, `0,2`".to_owned());
    }
    let mut cores = Vec::new();
    let mut seen = BTreeSet::new();
    for part in s.split(',') {
        let part = part.trim();
        let parse_id = |t: &str| -> Result<usize, String> {
            let id: usize = t
                .trim()
                .parse()
                .map_err(|_| format!("`{t}` is not a CPU id"))?;
            if id >= CPU_ID_LIMIT {
                return Err(format!("CPU id {id} is not below {CPU_ID_LIMIT}"));
            }
            Ok(id)
        };
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (parse_id(a)?, parse_id(b)?),
            None => {
                let id = parse_id(part)?;
                (id, id)
            }
        };
        if lo > hi {
            return Err(format!("range `{part}` is backwards"));
        }
        for id in lo..=hi {
            if !seen.insert(id) {
                return Err(format!("CPU {id} is listed twice"));
            }
            cores.push(id);
        }
    }
    Ok(cores)
}

/// Renders cores as `parse_cores` reads them (taskset's list syntax, runs as ranges).
pub(super) fn render_cores(cores: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < cores.len() {
        let start = cores[i];
        let mut j = i;
        while j + 1 < cores.len() && cores[j + 1] == cores[j] + 1 {
            j += 1;
        }
        if j == i {
            parts.push(start.to_string());
        } else {
            parts.push(format!("{start}-{}", cores[j]));
        }
        i = j + 1;
    }
    parts.join(",")
}

/// CPUs this process may run on (its affinity mask), falling back to
/// `0..available_parallelism()`. Under `taskset -c 2,3` this is `[2, 3]`, not `[0, 1]`.
pub fn available_cores() -> Vec<usize> {
    // SAFETY: `cpu_set_t` is a plain bit array; all-zero is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable `cpu_set_t` and the size passed is its size.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc == 0 {
        // SAFETY: `cpu < CPU_ID_LIMIT` = CPU_SETSIZE, the bit count of `cpu_set_t`.
        let cores: Vec<usize> = (0..CPU_ID_LIMIT)
            .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
            .collect();
        if !cores.is_empty() {
            return cores;
        }
    }
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    (0..n).collect()
}
