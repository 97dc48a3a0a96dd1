//! Small durable checkpoint files (log start offset now; high watermark and leader epochs with
//! replication), in Kafka's text style guarded by a CRC-32C, replaced atomically:
//! write `<name>.tmp`, fsync it, rename over `<name>`, fsync the directory.
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

fn write_blocking(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = tmp_path(path);
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
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
}
