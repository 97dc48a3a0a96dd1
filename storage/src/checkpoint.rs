//! Small durable checkpoint files (log start offset now; high watermark and leader epochs with
//! replication), in Kafka's text style guarded by a CRC-32C, replaced atomically:
//! write `<name>.tmp`, fsync it, swap it with `<name>` (rename it the first time), fsync the
//! directory. The temp file stays, holding the previous contents (see `write_blocking`).
//!
//! Format (UTF-8 lines): `0` (version), then one value per line, then the CRC-32C of all bytes
//! before the CRC line as 8 hex digits. A file that fails to parse or whose CRC differs is
//! reported as corrupt, never silently used.

use crate::error::{Result, StorageError};
use std::io::Write;
use std::path::{Path, PathBuf};

const VERSION_LINE: &str = "0";

/// Writes `values` to `path` atomically and durably. Runs the blocking file calls on the
/// executor's blocking pool.
pub async fn write(path: &Path, values: &[i64]) -> Result<()> {
    let mut body = String::from(VERSION_LINE);
    body.push('\n');
    for v in values {
        body.push_str(&v.to_string());
        body.push('\n');
    }
    let crc = crc32c::crc32c(body.as_bytes());
    body.push_str(&format!("{crc:08x}\n"));
    let path = path.to_path_buf();
    crate::io::spawn_blocking(move || write_blocking(&path, body.as_bytes()).map_err(|e| (path, e)))
        .await
        .map_err(|(path, e)| StorageError::io("writing checkpoint", path, e))
}

/// Replaces `path`'s contents with `bytes`: the bytes go to `<name>.tmp`, are synced, and the
/// two names are swapped (`renameat2(RENAME_EXCHANGE)`, then the directory is synced), so that
/// `path` names the old or the new contents whole at every instant. Once both files exist the
/// file system allocates and frees no inode per write: the old contents stay behind as the
/// temp file, truncated by the next write. (Renaming the temp file over `path` freed an inode
/// per write, and ext4 skips inodes freed within the last minute or more when it allocates one
/// (`recently_deleted`): with 4,000 partitions rewriting their high watermark every 5 s, 27 % of
/// the shard's samples were in that scan.) The first write of a file,
/// and file systems that cannot exchange, rename.
fn write_blocking(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = tmp_path(path);
    // An existing temp file keeps its inode: truncated, not replaced.
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    if !exchange(&tmp, path)? {
        std::fs::rename(&tmp, path)?;
    }
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// Swaps the names `a` and `b` atomically. `Ok(false)` when `b` does not exist (nothing to
/// swap with) or the file system cannot exchange names (`EINVAL`).
fn exchange(a: &Path, b: &Path) -> std::io::Result<bool> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))
    };
    let (a, b) = (c_path(a)?, c_path(b)?);
    // SAFETY: both paths are NUL-terminated C strings that outlive the call.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if rc == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::ENOENT | libc::EINVAL) => Ok(false),
        _ => Err(e),
    }
}

fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    path.with_file_name(name)
}

/// Reads a checkpoint: `Ok(None)` when the file does not exist.
pub async fn read(path: &Path) -> Result<Option<Vec<i64>>> {
    let owned = path.to_path_buf();
    let text = crate::io::spawn_blocking(move || std::fs::read_to_string(&owned)).await;
    let text = match text {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StorageError::io("reading checkpoint", path, e)),
    };
    parse(&text).map(Some).ok_or_else(|| StorageError::Corrupt {
        path: path.to_path_buf(),
        why: "checkpoint does not parse or its CRC-32C differs".into(),
    })
}

fn parse(text: &str) -> Option<Vec<i64>> {
    let body_end = text.trim_end_matches('\n').rfind('\n')? + 1;
    let (body, crc_line) = text.split_at(body_end);
    let crc = u32::from_str_radix(crc_line.trim(), 16).ok()?;
    if crc32c::crc32c(body.as_bytes()) != crc {
        return None;
    }
    let mut lines = body.lines();
    if lines.next()? != VERSION_LINE {
        return None;
    }
    lines.map(|l| l.parse().ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_checks_crc_and_version() {
        let body = "0\n42\n-1\n";
        let good = format!("{body}{:08x}\n", crc32c::crc32c(body.as_bytes()));
        assert_eq!(parse(&good), Some(vec![42, -1]));
        assert_eq!(parse(&good.replace("42", "43")), None);
        assert_eq!(parse("garbage"), None);
    }

    fn read_blocking(path: &Path) -> Option<Vec<i64>> {
        parse(&std::fs::read_to_string(path).expect("checkpoint file"))
    }

    fn body(values: &[i64]) -> Vec<u8> {
        let mut body = String::from("0\n");
        for v in values {
            body.push_str(&format!("{v}\n"));
        }
        let crc = crc32c::crc32c(body.as_bytes());
        format!("{body}{crc:08x}\n").into_bytes()
    }

    #[test]
    fn rewrites_swap_two_inodes_and_free_none() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("high-watermark");
        let tmp = tmp_path(&path);
        let inodes = || {
            let mut v = [&path, &tmp].map(|p| std::fs::metadata(p).expect("exists").ino());
            v.sort_unstable();
            v
        };
        write_blocking(&path, &body(&[1])).expect("first write");
        assert!(!tmp.exists(), "the first write renames its temp file");
        write_blocking(&path, &body(&[2])).expect("second write");
        let pair = inodes();
        for v in 3..10 {
            write_blocking(&path, &body(&[v])).expect("rewrite");
            assert_eq!(read_blocking(&path), Some(vec![v]));
            assert_eq!(
                read_blocking(&tmp),
                Some(vec![v - 1]),
                "the previous contents"
            );
            assert_eq!(inodes(), pair, "no inode allocated or freed");
        }
    }

    #[test]
    fn a_torn_temp_file_from_a_crash_leaves_the_checkpoint_whole() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("leader-epoch-checkpoint");
        write_blocking(&path, &body(&[7, 8])).expect("write");
        write_blocking(&path, &body(&[9, 10])).expect("write");
        // A crash after the temp file was truncated and half written, before the swap.
        std::fs::write(tmp_path(&path), b"0\n11\n").expect("torn temp file");
        assert_eq!(read_blocking(&path), Some(vec![9, 10]));
        write_blocking(&path, &body(&[12])).expect("the next write");
        assert_eq!(read_blocking(&path), Some(vec![12]));
    }
}
