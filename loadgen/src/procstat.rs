//! Reading a process's resource use from procfs: resident memory (VmRSS in
//! /proc/<pid>/status) and CPU time (utime + stime in /proc/<pid>/stat). Used for the local
//! broker and for loadgen itself, so a report can say whether either side ran out of CPU.

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
}
