//! The compaction swap protocol as data (issue #27, docs/storage-format.md §6.8): the file
//! steps that replace a group of closed segments with one cleaned segment, and the steps
//! recovery takes when it finds a half-done swap. Both are pure functions of file names, so
//! the crash argument is checked by crashing after every step in a simulated directory
//! (`storage/tests/clean_swap.rs`); `log/compact.rs` runs them with the log's I/O, and
//! `storage/tests/compact.rs` cuts that on real files after every step.
//!
//! Commit point: the rename of `<base>.log.cleaned` to `<base>.log.swap`. Before it recovery
//! undoes (unlinks `.cleaned` and index `.swap` files); after it recovery finishes.

use crate::segment::file_stem;
use crate::types::Offset;
use std::collections::BTreeSet;

/// The files of one segment, in the order a swap renames them: the log last, so its rename is
/// the commit point.
const EXTENSIONS: [&str; 3] = ["index", "timeindex", "log"];
const CLEANED: &str = ".cleaned";
const SWAP: &str = ".swap";
const DELETED: &str = ".deleted";

/// One durable file-system step, file names relative to the partition directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FsStep {
    /// Write the file whole (O_DIRECT) and `fdatasync` it.
    Write(String),
    /// `rename(from, to)`, replacing `to` if present.
    Rename { from: String, to: String },
    /// `unlink`.
    Unlink(String),
    /// `fsync` the partition directory.
    SyncDir,
}

fn name(base: Offset, ext: &str, suffix: &str) -> String {
    format!("{}.{ext}{suffix}", file_stem(base))
}

/// The steps that replace closed segments `old_bases` (ascending, consecutive in the log,
/// never the active segment) with one cleaned segment that starts at `old_bases[0]`.
///
/// # Panics
/// When `old_bases` is empty or not ascending.
pub fn swap_steps(old_bases: &[Offset]) -> Vec<FsStep> {
    assert!(
        !old_bases.is_empty(),
        "a swap replaces at least one segment"
    );
    assert!(
        old_bases.windows(2).all(|w| w[0] < w[1]),
        "segment bases ascend"
    );
    let base = old_bases[0];
    let mut steps: Vec<FsStep> = EXTENSIONS
        .iter()
        .map(|ext| FsStep::Write(name(base, ext, CLEANED)))
        .collect();
    for ext in EXTENSIONS {
        steps.push(FsStep::Rename {
            from: name(base, ext, CLEANED),
            to: name(base, ext, SWAP),
        });
    }
    steps.push(FsStep::SyncDir);
    steps.extend(retire(old_bases));
    steps.extend(finish(base, old_bases));
    steps
}

/// Step 3: the old segments' files become `.deleted`.
fn retire(old_bases: &[Offset]) -> Vec<FsStep> {
    let mut steps = Vec::new();
    for old in old_bases {
        for ext in EXTENSIONS {
            steps.push(FsStep::Rename {
                from: name(*old, ext, ""),
                to: name(*old, ext, DELETED),
            });
        }
    }
    steps.push(FsStep::SyncDir);
    steps
}

/// Step 4: the `.swap` files take their final names, then the `.deleted` files go.
fn finish(base: Offset, old_bases: &[Offset]) -> Vec<FsStep> {
    let mut steps: Vec<FsStep> = EXTENSIONS
        .iter()
        .map(|ext| FsStep::Rename {
            from: name(base, ext, SWAP),
            to: name(base, ext, ""),
        })
        .collect();
    steps.push(FsStep::SyncDir);
    for old in old_bases {
        for ext in EXTENSIONS {
            steps.push(FsStep::Unlink(name(*old, ext, DELETED)));
        }
    }
    steps
}

/// Segment base offset and extension+suffix of a segment file name (`None` for other files).
fn parse(file: &str) -> Option<(Offset, &str)> {
    let (stem, rest) = file.split_once('.')?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((Offset(stem.parse().ok()?), rest))
}

/// What recovery does with the files it finds in a partition directory, before the segments
/// are opened. `swap_end` gives, for a `<base>.log.swap`, the last offset its batches hold
/// (found by scanning it): the swap replaced every segment based in `[base, swap_end]`.
/// Running the result, crashing part way and running recovery again reaches the same end.
pub fn recovery_steps(
    files: &BTreeSet<String>,
    swap_end: impl Fn(Offset) -> Offset,
) -> Vec<FsStep> {
    let mut steps = Vec::new();
    let committed: Vec<Offset> = files
        .iter()
        .filter_map(|f| parse(f))
        .filter(|(_, rest)| *rest == "log.swap")
        .map(|(base, _)| base)
        .collect();
    for file in files {
        let Some((base, rest)) = parse(file) else {
            continue;
        };
        let precommit_swap = rest.ends_with(SWAP) && !committed.contains(&base);
        if rest.ends_with(CLEANED) || precommit_swap {
            steps.push(FsStep::Unlink(file.clone()));
        }
    }
    for base in &committed {
        let end = swap_end(*base);
        assert!(end >= *base, "a swap segment ends at or after its base");
        let replaced: Vec<Offset> = files
            .iter()
            .filter_map(|f| parse(f))
            .filter(|(b, rest)| (*base..=end).contains(b) && EXTENSIONS.contains(rest))
            .map(|(b, _)| b)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        for old in replaced {
            for ext in EXTENSIONS {
                let from = name(old, ext, "");
                // At `base` a final name whose `.swap` is gone already holds the new file
                // (step 4 began, so step 3 had retired every old file).
                let is_new = old == *base && !files.contains(&name(old, ext, SWAP));
                if files.contains(&from) && !is_new {
                    let to = name(old, ext, DELETED);
                    steps.push(FsStep::Rename { from, to });
                }
            }
        }
        steps.push(FsStep::SyncDir);
        for ext in EXTENSIONS {
            let from = name(*base, ext, SWAP);
            if files.contains(&from) {
                let to = name(*base, ext, "");
                steps.push(FsStep::Rename { from, to });
            }
        }
    }
    steps.push(FsStep::SyncDir);
    let mut deleted: BTreeSet<String> = files
        .iter()
        .filter(|f| parse(f).is_some_and(|(_, rest)| rest.ends_with(DELETED)))
        .cloned()
        .collect();
    for step in &steps {
        if let FsStep::Rename { to, .. } = step {
            if to.ends_with(DELETED) {
                deleted.insert(to.clone());
            }
        }
    }
    steps.extend(deleted.into_iter().map(FsStep::Unlink));
    steps
}
