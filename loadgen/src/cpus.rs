//! CPU sets: parsing `0`, `0-1`, `0,2,4-5`; this process's allowed CPUs; pinning the calling
//! thread (threads it starts afterwards inherit the mask, librdkafka's included); and the
//! default split of the machine between a local broker and loadgen, so that neither steals
//! the other's core (DESIGN.md §8: a starved CPU turns microseconds into timer ticks).

use anyhow::{bail, Context as _};
use std::fmt;

/// A sorted set of CPU ids without duplicates; never empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuSet(Vec<usize>);

impl CpuSet {
    pub fn parse(list: &str) -> anyhow::Result<CpuSet> {
        let mut cpus = Vec::new();
        for part in list.split(',').map(str::trim) {
            let (first, last) = match part.split_once('-') {
                Some((a, b)) => (a, b),
                None => (part, part),
            };
            let first: usize = first
                .parse()
                .with_context(|| format!("CPU list {list:?}: {part:?}"))?;
            let last: usize = last
                .parse()
                .with_context(|| format!("CPU list {list:?}: {part:?}"))?;
            if first > last {
                bail!("CPU list {list:?}: range {part:?} runs backwards");
            }
            cpus.extend(first..=last);
        }
        CpuSet::from_ids(cpus).with_context(|| format!("CPU list {list:?}"))
    }

    fn from_ids(mut cpus: Vec<usize>) -> anyhow::Result<CpuSet> {
        cpus.sort_unstable();
        cpus.dedup();
        if cpus.is_empty() {
            bail!("no CPU");
        }
        if let Some(&too_big) = cpus.iter().find(|&&c| c >= libc::CPU_SETSIZE as usize) {
            bail!("CPU {too_big} is beyond CPU_SETSIZE");
        }
        Ok(CpuSet(cpus))
    }

    /// The CPUs this process may run on.
    pub fn available() -> anyhow::Result<CpuSet> {
        // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity fills it.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: pid 0 is this thread; the size is that of `set`.
        let rc =
            unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error()).context("sched_getaffinity");
        }
        let ids = (0..libc::CPU_SETSIZE as usize)
            // SAFETY: `c` is below CPU_SETSIZE, the set's capacity.
            .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
            .collect();
        CpuSet::from_ids(ids)
    }

    /// The CPU ids, ascending.
    pub fn ids(&self) -> &[usize] {
        &self.0
    }

    /// The lowest CPU id of the set.
    pub fn first(&self) -> usize {
        self.0[0]
    }

    /// Number of CPUs in the set.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Default split: the first half (at least one CPU) for the broker, the rest for loadgen;
    /// `None` for loadgen on a single-CPU machine (nothing to keep apart).
    pub fn split(&self) -> (CpuSet, Option<CpuSet>) {
        if self.0.len() < 2 {
            return (self.clone(), None);
        }
        let half = self.0.len() / 2;
        (
            CpuSet(self.0[..half].to_vec()),
            Some(CpuSet(self.0[half..].to_vec())),
        )
    }

    /// These CPUs without those of `other`; `None` when none is left.
    pub fn without(&self, other: &CpuSet) -> Option<CpuSet> {
        let rest: Vec<usize> = self
            .0
            .iter()
            .copied()
            .filter(|c| !other.0.contains(c))
            .collect();
        CpuSet::from_ids(rest).ok()
    }

    /// Restricts the calling thread (and the threads it starts later) to these CPUs.
    pub fn pin_current_thread(&self) -> std::io::Result<()> {
        // SAFETY: a zeroed cpu_set_t is a valid empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for &cpu in &self.0 {
            // SAFETY: every id is below CPU_SETSIZE (checked in `from_ids`).
            unsafe { libc::CPU_SET(cpu, &mut set) };
        }
        // SAFETY: pid 0 is this thread; the size is that of `set`.
        let rc =
            unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }

    /// The value of `sluice --cores`: the CPU ids as a comma list (taskset's syntax).
    pub fn to_sluice_cores(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ids: Vec<String> = self.0.iter().map(usize::to_string).collect();
        f.write_str(&ids.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_and_format_for_sluice() {
        let set = CpuSet::parse("3,0-1,1").expect("valid");
        assert_eq!(set.to_string(), "0,1,3");
        assert_eq!(set.to_sluice_cores(), "0,1,3");
        assert_eq!(CpuSet::parse("0").expect("valid").to_sluice_cores(), "0");
        assert_eq!(
            CpuSet::parse("0-2").expect("valid").to_sluice_cores(),
            "0,1,2"
        );
        assert_eq!(CpuSet::parse("2").expect("valid").to_sluice_cores(), "2");
        assert!(CpuSet::parse("").is_err());
        assert!(CpuSet::parse("2-1").is_err());
        assert!(CpuSet::parse("x").is_err());
        let all = CpuSet::parse("0-3").expect("valid");
        let loadgen = CpuSet::parse("1,3").expect("valid");
        assert_eq!(
            all.without(&loadgen),
            Some(CpuSet::parse("0,2").expect("valid"))
        );
        assert_eq!(loadgen.without(&all), None);
    }

    #[test]
    fn the_machine_is_split_between_broker_and_loadgen() {
        let (broker, loadgen) = CpuSet::parse("0-1").expect("valid").split();
        assert_eq!(broker.to_string(), "0");
        assert_eq!(loadgen.map(|l| l.to_string()), Some("1".to_string()));
        let (broker, loadgen) = CpuSet::parse("5").expect("valid").split();
        assert_eq!(broker.to_string(), "5");
        assert_eq!(loadgen, None);
    }
}
