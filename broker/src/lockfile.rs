//! An exclusive lock on the data directory, so two brokers never share one.
//!
//! Why: the shard runtime sets `SO_REUSEPORT` on every listener (DESIGN.md §8), so a second `sluice`
//! started on the same port would bind without error and silently take half the connections —
//! while writing the same partition files. The data directory is the resource that must not be
//! shared, so it carries the lock: `<data_dir>/.lock`, held with `flock(LOCK_EX | LOCK_NB)`.
//!
//! Invariants and limits:
//! - The lock lives as long as the [`DataDirLock`] value (the open file description); dropping
//!   it, or the process exiting for any reason including SIGKILL, releases it. No stale-lock
//!   cleanup is ever needed, and the file itself is never deleted (deleting would let a third
//!   process lock a fresh inode while the second still holds the old one).
//! - The file holds the holder's pid in decimal, for the error message only; it is meaningful
//!   only while the file is locked.
//! - `flock` locks belong to the open file description, so a second acquire in the same
//!   process conflicts too.
//! - Local file systems only (flock over NFS is not reliable).
//!
//! Blocking `std::fs` calls: take the lock on the main thread before any executor starts.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// File name of the lock inside the data directory.
pub const LOCK_FILE_NAME: &str = ".lock";

/// Why the data directory could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another open lock (normally another `sluice` process) holds the data directory.
    #[error(
        "data directory {} is in use by another sluice process ({}); stop it or choose \
         another --data-dir (lock file {})",
        .data_dir.display(),
        holder_text(*.holder_pid),
        .lock_path.display()
    )]
    Held {
        /// The data directory.
        data_dir: PathBuf,
        /// The lock file.
        lock_path: PathBuf,
        /// The pid the holder wrote into the lock file, if readable.
        holder_pid: Option<u32>,
    },
    /// An I/O step failed (creating the directory, opening, locking or writing the file).
    #[error("cannot {operation} {}: {source}", .path.display())]
    Io {
        /// What was being done: "create data directory", "open lock file", ….
        operation: &'static str,
        /// The directory or file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
}

fn holder_text(pid: Option<u32>) -> String {
    match pid {
        Some(pid) => format!("pid {pid}"),
        None => "pid unknown".to_owned(),
    }
}

/// Holds `<data_dir>/.lock` exclusively until dropped.
#[derive(Debug)]
pub struct DataDirLock {
    /// The locked file; closing it (drop) releases the lock.
    file: File,
}

impl DataDirLock {
    /// Creates `data_dir` if missing, then locks `<data_dir>/.lock` without waiting and writes
    /// this process's pid into it.
    ///
    /// # Errors
    /// [`LockError::Held`] if another open lock holds it (with the holder's pid when it
    /// wrote one); [`LockError::Io`] if the directory or file cannot be created, opened,
    /// locked or written.
    pub fn acquire(data_dir: &Path) -> Result<DataDirLock, LockError> {
        let io_err = |operation: &'static str, path: &Path| {
            let path = path.to_owned();
            move |source: io::Error| LockError::Io {
                operation,
                path,
                source,
            }
        };
        std::fs::create_dir_all(data_dir).map_err(io_err("create data directory", data_dir))?;
        let lock_path = data_dir.join(LOCK_FILE_NAME);
        // No truncate: until we hold the lock, the pid in the file belongs to the holder.
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock_path)
            .map_err(io_err("open lock file", &lock_path))?;

        if let Err(e) = flock_exclusive_nonblocking(&file) {
            if e.kind() == io::ErrorKind::WouldBlock {
                return Err(LockError::Held {
                    data_dir: data_dir.to_owned(),
                    holder_pid: read_pid(&mut file),
                    lock_path,
                });
            }
            return Err(io_err("lock", &lock_path)(e));
        }

        let pid = std::process::id();
        file.set_len(0)
            .and_then(|()| file.seek(SeekFrom::Start(0)))
            .and_then(|_| writeln!(file, "{pid}"))
            .map_err(io_err("write pid to lock file", &lock_path))?;
        Ok(DataDirLock { file })
    }
}

impl Drop for DataDirLock {
    fn drop(&mut self) {
        // Closing `file` releases the flock. Clearing the pid first is only cosmetic; an error
        // here cannot matter.
        let _ = self.file.set_len(0);
    }
}

/// `flock(fd, LOCK_EX | LOCK_NB)`, retried on EINTR. `WouldBlock` means held elsewhere.
fn flock_exclusive_nonblocking(file: &File) -> io::Result<()> {
    loop {
        // SAFETY: the fd is open for the duration of the call (borrowed from `file`); flock
        // takes no pointers.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// The holder's pid, if the file holds one (it may be mid-write, or from a crashed writer).
fn read_pid(file: &mut File) -> Option<u32> {
    let mut text = String::new();
    // 32 bytes is ample for a pid; bound the read in case the file is something else.
    file.seek(SeekFrom::Start(0)).ok()?;
    file.take(32).read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_acquire_fails_until_first_is_dropped() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = tmp.path().join("nested").join("data");
        let first = DataDirLock::acquire(&dir).expect("first lock");
        assert!(dir.is_dir(), "the data directory is created");
        let text = std::fs::read_to_string(dir.join(LOCK_FILE_NAME)).expect("lock file readable");
        assert_eq!(text.trim(), std::process::id().to_string());

        let err = DataDirLock::acquire(&dir).expect_err("already held");
        match &err {
            LockError::Held {
                holder_pid,
                data_dir,
                ..
            } => {
                assert_eq!(*holder_pid, Some(std::process::id()));
                assert_eq!(data_dir, &dir);
            }
            other => panic!("wrong error: {other}"),
        }
        let msg = err.to_string();
        assert!(msg.contains("another sluice"), "{msg}");
        assert!(
            msg.contains(&format!("pid {}", std::process::id())),
            "{msg}"
        );
        // The failed attempt must not have clobbered the holder's pid.
        let text = std::fs::read_to_string(dir.join(LOCK_FILE_NAME)).expect("lock file readable");
        assert_eq!(text.trim(), std::process::id().to_string());

        drop(first);
        let again = DataDirLock::acquire(&dir).expect("free after drop");
        drop(again);
    }

    #[test]
    fn unusable_directory_is_an_io_error() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let file = tmp.path().join("not-a-dir");
        std::fs::write(&file, b"x").expect("write");
        let err = DataDirLock::acquire(&file).expect_err("a file is not a directory");
        assert!(matches!(err, LockError::Io { .. }), "{err}");
        assert!(err.to_string().contains("not-a-dir"), "{err}");
    }
}
