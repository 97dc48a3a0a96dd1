//! Reading a process's resource use from procfs: resident memory (VmRSS in
//! /proc/<pid>/status) and CPU time (utime + stime in /proc/<pid>/stat). Used for the local
//! broker and for loadgen itself, so a report can say whether either side ran out of CPU;
//! and each CPU's busy time (/proc/stat), so it can say whether a side's CPUs were taken by
//! other work on a shared machine.

/// VmRSS of a /proc/<pid>/status text, in bytes.
pub fn vm_rss_bytes(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Resident memory of `pid` in bytes.
pub fn rss_bytes(pid: u32) -> Option<u64> {
    vm_rss_bytes(&std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?)
}

/// User + system CPU seconds of a /proc/<pid>/stat text.
fn stat_cpu_seconds(stat: &str) -> Option<f64> {
    // Fields after the parenthesised command name (which may hold spaces): state is field 3,
    // utime and stime are fields 14 and 15 (proc(5)).
    let after_name = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let ticks_per_sec = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (ticks_per_sec > 0).then(|| (utime + stime) as f64 / ticks_per_sec as f64)
}

/// CPU seconds used so far by `pid` (`None`: this process).
pub fn cpu_seconds(pid: Option<u32>) -> Option<f64> {
    let path = match pid {
        Some(pid) => format!("/proc/{pid}/stat"),
        None => "/proc/self/stat".to_string(),
    };
    stat_cpu_seconds(&std::fs::read_to_string(path).ok()?)
}

/// (busy, total) clock ticks of each CPU of a /proc/stat text, indexed by CPU id (a CPU
/// missing from the text counts as (0, 0)). Busy is everything but idle and iowait.
fn stat_cpu_ticks(stat: &str) -> Vec<(u64, u64)> {
    let mut ticks = Vec::new();
    for line in stat.lines() {
        let mut fields = line.split_whitespace();
        let Some(id) = fields
            .next()
            .and_then(|name| name.strip_prefix("cpu"))
            .and_then(|id| id.parse::<usize>().ok())
        else {
            continue;
        };
        let values: Vec<u64> = fields.filter_map(|v| v.parse().ok()).collect();
        // user nice system idle iowait irq softirq steal (guest time is inside user).
        let total: u64 = values.iter().take(8).sum();
        let idle = values.get(3).copied().unwrap_or(0) + values.get(4).copied().unwrap_or(0);
        if ticks.len() <= id {
            ticks.resize(id + 1, (0, 0));
        }
        ticks[id] = (total.saturating_sub(idle), total);
    }
    ticks
}

/// (busy, total) clock ticks of each CPU so far, indexed by CPU id.
pub fn cpu_ticks() -> Option<Vec<(u64, u64)>> {
    Some(stat_cpu_ticks(&std::fs::read_to_string("/proc/stat").ok()?))
}

/// Each CPU's busy share between two [`cpu_ticks`] readings, in %, indexed by CPU id.
pub fn busy_percent(start: &[(u64, u64)], end: &[(u64, u64)]) -> Vec<f64> {
    start
        .iter()
        .zip(end)
        .map(|(&(b0, t0), &(b1, t1))| {
            let total = t1.saturating_sub(t0);
            if total == 0 {
                0.0
            } else {
                b1.saturating_sub(b0) as f64 / total as f64 * 100.0
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rss_and_cpu_time_are_read_from_procfs() {
        let status = "Name:\tsluice\nVmPeak:\t  2000 kB\nVmRSS:\t  1234 kB\nThreads:\t3\n";
        assert_eq!(vm_rss_bytes(status), Some(1234 * 1024));
        assert_eq!(vm_rss_bytes("Name:\tx\n"), None);
        assert!(rss_bytes(std::process::id()).is_some_and(|b| b > 0));
        let stat = "42 (a b) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0";
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        assert_eq!(stat_cpu_seconds(stat), Some(300.0 / hz));
        assert!(cpu_seconds(None).is_some());
    }

    #[test]
    fn per_cpu_busy_shares_come_from_proc_stat() {
        let before = "cpu  9 9 9 9 9 9 9 9 0 0\ncpu0 10 0 10 70 10 0 0 0 0 0\ncpu1 0 0 0 100 0 0 0 0 0 0\nintr 5\n";
        let after =
            "cpu  9 9 9 9 9 9 9 9 0 0\ncpu0 50 0 20 90 20 0 0 0 0 0\ncpu1 0 0 10 190 0 0 0 0 0 0\n";
        let (start, end) = (stat_cpu_ticks(before), stat_cpu_ticks(after));
        assert_eq!(start, vec![(20, 100), (0, 100)]);
        assert_eq!(busy_percent(&start, &end), vec![62.5, 10.0]);
        assert!(cpu_ticks().is_some_and(|t| !t.is_empty()));
    }
}
