//! [`QuorumDir`]: the controller quorum's [`DurableDir`] over a real directory,
//! `<log.dirs>/__cluster_metadata-0/` (Kafka's name for the metadata log's partition), with
//! `std::fs` calls on the executor's blocking thread pool (`crate::rt::spawn_blocking`) so that the shard never blocks on them.
//!
//! Durability, per call (what `FileRaftStorage`'s crash argument relies on):
//! - [`DurableDir::append`]: write, then `fdatasync` the file; a file created by this append
//!   also gets its directory entry fsynced;
//! - [`DurableDir::replace`]: write `<name>.tmp`, fsync it, rename it over `<name>`, fsync
//!   the directory — after a crash, `<name>` holds the old or the new contents (a stale
//!   `.tmp` is overwritten by the next replace);
//! - [`DurableDir::read`]: the whole file.
//!
//! One owner: the quorum's driver on one shard; nothing else writes the directory.

use bytes::Bytes;
use replication::raft::{DurableDir, RaftStorageError};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The directory under `log.dirs` that holds the controller quorum's state (Kafka's
/// `__cluster_metadata-0`).
pub const QUORUM_DIR_NAME: &str = "__cluster_metadata-0";

/// A [`DurableDir`] over one real directory (see the module documentation).
#[derive(Clone, Debug)]
pub struct QuorumDir {
    path: PathBuf,
}

fn io_error(operation: &'static str, path: &Path, e: &std::io::Error) -> RaftStorageError {
    RaftStorageError::Io {
        operation,
        reason: format!("{}: {e}", path.display()),
    }
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

impl QuorumDir {
    /// Opens (creating it and its parents if needed) the quorum directory under
    /// `data_dir` (`log.dirs`), and fsyncs `data_dir` so the new entry survives. Errors:
    /// [`RaftStorageError::Io`] naming the operation and the path.
    pub async fn open(data_dir: &Path) -> Result<QuorumDir, RaftStorageError> {
        let data_dir = data_dir.to_path_buf();
        let path = data_dir.join(QUORUM_DIR_NAME);
        let dir = path.clone();
        blocking(move || {
            std::fs::create_dir_all(&dir)
                .map_err(|e| io_error("creating the quorum directory", &dir, &e))?;
            sync_dir(&data_dir).map_err(|e| io_error("fsyncing the data directory", &data_dir, &e))
        })
        .await?;
        Ok(QuorumDir { path })
    }

    /// The directory's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Runs `f` on the executor's blocking thread pool.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    crate::rt::spawn_blocking(f).await
}

impl DurableDir for QuorumDir {
    async fn read(&mut self, name: &str) -> Result<Option<Bytes>, RaftStorageError> {
        let file = self.path.join(name);
        blocking(move || match std::fs::read(&file) {
            Ok(bytes) => Ok(Some(Bytes::from(bytes))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_error("reading", &file, &e)),
        })
        .await
    }

    async fn append(&mut self, name: &str, bytes: Bytes) -> Result<(), RaftStorageError> {
        let (dir, file) = (self.path.clone(), self.path.join(name));
        blocking(move || {
            let created = !file.exists();
            let mut out = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&file)
                .map_err(|e| io_error("opening for append", &file, &e))?;
            out.write_all(&bytes)
                .map_err(|e| io_error("appending", &file, &e))?;
            out.sync_data()
                .map_err(|e| io_error("fdatasyncing an append", &file, &e))?;
            if created {
                sync_dir(&dir).map_err(|e| io_error("fsyncing the directory", &dir, &e))?;
            }
            Ok(())
        })
        .await
    }

    async fn replace(&mut self, name: &str, bytes: Bytes) -> Result<(), RaftStorageError> {
        let (dir, file) = (self.path.clone(), self.path.join(name));
        let temp = self.path.join(format!("{name}.tmp"));
        blocking(move || {
            let mut out = File::create(&temp)
                .map_err(|e| io_error("creating a temporary file", &temp, &e))?;
            out.write_all(&bytes)
                .map_err(|e| io_error("writing a temporary file", &temp, &e))?;
            out.sync_all()
                .map_err(|e| io_error("fsyncing a temporary file", &temp, &e))?;
            drop(out);
            std::fs::rename(&temp, &file).map_err(|e| io_error("renaming over", &file, &e))?;
            sync_dir(&dir).map_err(|e| io_error("fsyncing the directory", &dir, &e))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_append_replace() {
        let data = tempfile::tempdir().expect("temp dir");
        let root = data.path().to_path_buf();
        crate::rt::LocalExecutorBuilder::default()
            .spawn(move || async move {
                let mut dir = QuorumDir::open(&root).await.expect("open");
                assert_eq!(dir.path(), root.join(QUORUM_DIR_NAME));
                assert_eq!(dir.read("f").await.expect("read"), None);
                dir.append("f", Bytes::from_static(b"ab"))
                    .await
                    .expect("append");
                dir.append("f", Bytes::from_static(b"cd"))
                    .await
                    .expect("append");
                assert_eq!(
                    dir.read("f").await.expect("read").as_deref(),
                    Some(&b"abcd"[..])
                );
                dir.replace("f", Bytes::from_static(b"x"))
                    .await
                    .expect("replace");
                assert_eq!(
                    dir.read("f").await.expect("read").as_deref(),
                    Some(&b"x"[..])
                );
                assert!(!dir.path().join("f.tmp").exists(), "renamed away");
                // An error names the operation.
                std::fs::create_dir(dir.path().join("d")).expect("mkdir");
                let err = dir.read("d").await.expect_err("a directory");
                assert!(err.to_string().contains("reading"), "{err}");
                let mut again = QuorumDir::open(&root).await.expect("reopen");
                assert_eq!(
                    again.read("f").await.expect("read").as_deref(),
                    Some(&b"x"[..])
                );
            })
            .expect("executor")
            .join()
            .expect("joined");
    }
}
