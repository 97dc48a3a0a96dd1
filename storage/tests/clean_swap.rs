//! Crash test of the compaction swap protocol (docs/storage-format.md §6.8) in a simulated
//! partition directory: the swap is cut after every one of its steps (a SIGKILL keeps every
//! completed rename and write; power loss is not modelled), recovery runs — and is itself cut
//! after every one of its steps and run again — and the directory must hold exactly the old
//! segments or exactly the new one, beside the untouched active segment.
//!
//! Checks the protocol's steps only; `compact.rs` cuts the swap on real files.

use std::collections::{BTreeMap, BTreeSet};
use storage::{recovery_steps, swap_steps, FsStep, Offset};

/// File name → content tag ("old" / "new" / "active" + the name it was written as).
type Dir = BTreeMap<String, String>;

const OLD_BASES: [i64; 3] = [0, 10, 20];
const ACTIVE_BASE: i64 = 30;

fn stem(base: i64) -> String {
    format!("{base:020}")
}

fn segment_files(dir: &mut Dir, base: i64, tag: &str) {
    for ext in ["log", "index", "timeindex"] {
        dir.insert(format!("{}.{ext}", stem(base)), format!("{tag}:{ext}"));
    }
}

fn initial() -> Dir {
    let mut dir = Dir::new();
    for base in OLD_BASES {
        segment_files(&mut dir, base, &format!("old{base}"));
    }
    segment_files(&mut dir, ACTIVE_BASE, "active");
    dir
}

fn after() -> Dir {
    let mut dir = Dir::new();
    segment_files(&mut dir, 0, "new");
    segment_files(&mut dir, ACTIVE_BASE, "active");
    dir
}

fn apply(dir: &mut Dir, step: &FsStep) {
    match step {
        FsStep::Write(name) => {
            let ext = name.split('.').nth(1).unwrap();
            dir.insert(name.clone(), format!("new:{ext}"));
        }
        FsStep::Rename { from, to } => {
            let content = dir
                .remove(from)
                .unwrap_or_else(|| panic!("rename of missing {from}"));
            dir.insert(to.clone(), content);
        }
        FsStep::Unlink(name) => {
            dir.remove(name)
                .unwrap_or_else(|| panic!("unlink of missing {name}"));
        }
        FsStep::SyncDir => {}
    }
}

fn recover(dir: &Dir) -> Vec<FsStep> {
    let files: BTreeSet<String> = dir.keys().cloned().collect();
    // The swap log holds the cleaned batches of offsets 0..=29.
    recovery_steps(&files, |base| {
        assert_eq!(base, Offset(0));
        Offset(ACTIVE_BASE - 1)
    })
}

#[test]
fn a_crash_after_any_step_recovers_to_old_or_new() {
    let bases: Vec<Offset> = OLD_BASES.iter().map(|b| Offset(*b)).collect();
    let steps = swap_steps(&bases);
    let commit = steps
        .iter()
        .position(|s| matches!(s, FsStep::Rename { to, .. } if to.ends_with(".log.swap")))
        .expect("the swap has a commit point");
    for cut in 0..=steps.len() {
        let mut crashed = initial();
        for step in &steps[..cut] {
            apply(&mut crashed, step);
        }
        let expected = if cut > commit { after() } else { initial() };
        let plan = recover(&crashed);
        for recovery_cut in 0..=plan.len() {
            let mut dir = crashed.clone();
            for step in &plan[..recovery_cut] {
                apply(&mut dir, step);
            }
            for step in recover(&dir) {
                apply(&mut dir, &step);
            }
            assert_eq!(
                dir, expected,
                "swap cut after {cut} steps, recovery after {recovery_cut}"
            );
        }
    }
}

#[test]
fn a_whole_swap_needs_no_recovery() {
    let mut dir = initial();
    for step in swap_steps(&[Offset(0), Offset(10), Offset(20)]) {
        apply(&mut dir, &step);
    }
    assert_eq!(dir, after());
    assert_eq!(recover(&dir), vec![FsStep::SyncDir]);
}
