//! The only module that touches glommio: segment and index files, aligned DMA writes, cold
//! reads, fdatasync, and the small single-threaded sync primitive the log waits on. Keeping it
//! here means a move to another io_uring runtime touches this file (DESIGN.md §2).
//!
//! Reads: glommio's read buffers are `Rc`-owned and cannot become `Send` `Bytes`, while fetched
//! batches cross shards. Cold reads therefore `pread` the O_DIRECT file descriptor into an
//! aligned heap buffer on glommio's blocking pool and hand out `Bytes` slices of that buffer —
//! a DMA read into an aligned buffer with no user-space copy of the record bytes.

use crate::error::{Result, StorageError};
use bytes::Bytes;
use glommio::io::{DmaBuffer, DmaFile, OpenOptions};
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// O_DIRECT alignment used for every write and read position and length, in bytes.
pub const BLOCK_BYTES: u64 = BLOCK_USIZE as u64;
/// [`BLOCK_BYTES`] as a buffer length.
pub const BLOCK_USIZE: usize = 4096;

/// Rounds `v` down to a block boundary.
pub fn align_down(v: u64) -> u64 {
    v - v % BLOCK_BYTES
}

/// Rounds `v` up to a block boundary.
pub fn align_up(v: u64) -> u64 {
    align_down(v + BLOCK_BYTES - 1)
}

thread_local! {
    static IOPOLL_PROBED: Cell<bool> = const { Cell::new(false) };
}

/// Works around glommio 0.9's iopoll probe (DESIGN.md §8): the first DMA file an executor opens
/// is read to decide whether the device supports polled I/O, and an empty file makes the probe
/// wrongly succeed, after which every DMA operation fails with EOPNOTSUPP. Opening a file that
/// holds one block of data first makes the probe see the truth. Runs once per thread.
///
/// The probe file (`.sluice-iopoll-probe`, 4 KiB) lives in the parent of the partition
/// directory — the data directory — and is kept, so a restart on a full disk still has it.
async fn probe_iopoll_once(partition_dir: &Path) -> Result<()> {
    if IOPOLL_PROBED.with(|p| p.get()) {
        return Ok(());
    }
    let dir = partition_dir.parent().unwrap_or(partition_dir);
    let path = dir.join(".sluice-iopoll-probe");
    let holds_a_block = std::fs::metadata(&path).is_ok_and(|m| m.len() >= BLOCK_BYTES);
    if !holds_a_block {
        // One 4 KiB blocking write, once per data directory, before any DMA file is opened.
        std::fs::write(&path, [0xa5u8; BLOCK_USIZE])
            .map_err(|e| StorageError::io("writing", &path, e))?;
    }
    let probe = DmaFile::open(&path)
        .await
        .map_err(|e| StorageError::glommio("opening", &path, e))?;
    let _ = probe.close().await;
    IOPOLL_PROBED.with(|p| p.set(true));
    Ok(())
}

/// A file written with aligned O_DIRECT writes and read with aligned O_DIRECT reads.
pub struct DirectFile {
    file: DmaFile,
    path: PathBuf,
}

impl DirectFile {
    /// Opens (creating when `create`) `path` for reading and writing with O_DIRECT.
    pub async fn open(path: &Path, create: bool) -> Result<DirectFile> {
        if let Some(partition_dir) = path.parent() {
            probe_iopoll_once(partition_dir).await?;
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .dma_open(path)
            .await
            .map_err(|e| StorageError::glommio("opening", path, e))?;
        Ok(DirectFile {
            file,
            path: path.to_path_buf(),
        })
    }

    /// A zeroed, aligned buffer of `len` bytes (a multiple of [`BLOCK_BYTES`]) to fill and pass
    /// to [`DirectFile::write_at`].
    pub fn alloc_write_buffer(&self, len: usize) -> DmaBuffer {
        let mut buf = self.file.alloc_dma_buffer(len);
        buf.as_bytes_mut().fill(0);
        buf
    }

    /// An aligned buffer of `len` bytes with unspecified contents: the caller overwrites every
    /// byte (the write pipeline copies data, then zeroes the padding).
    pub fn alloc_write_buffer_unfilled(&self, len: usize) -> DmaBuffer {
        self.file.alloc_dma_buffer(len)
    }

    /// Writes the whole aligned `buf` at aligned byte position `pos`.
    pub async fn write_at(&self, buf: DmaBuffer, pos: u64) -> Result<()> {
        let len = buf.len();
        let written = self
            .file
            .write_at(buf, pos)
            .await
            .map_err(|e| StorageError::glommio("writing", &self.path, e))?;
        if written != len {
            return Err(StorageError::io(
                "writing",
                &self.path,
                std::io::Error::new(std::io::ErrorKind::WriteZero, "short O_DIRECT write"),
            ));
        }
        Ok(())
    }

    /// Writes `data` from aligned position 0, padded with zeros to whole blocks, then truncates
    /// the file to `data.len()` bytes. Used for whole index files.
    pub async fn write_whole(&self, data: &[u8]) -> Result<()> {
        if !data.is_empty() {
            let len = usize::try_from(align_up(data.len() as u64)).unwrap_or(usize::MAX);
            let mut buf = self.alloc_write_buffer(len);
            buf.as_bytes_mut()[..data.len()].copy_from_slice(data);
            self.write_at(buf, 0).await?;
        }
        self.truncate(data.len() as u64).await
    }

    /// Renames the file to `to` (the caller syncs the directory to make it durable).
    pub async fn rename(&mut self, to: &Path) -> Result<()> {
        self.file
            .rename(to)
            .await
            .map_err(|e| StorageError::glommio("renaming", &self.path, e))?;
        self.path = to.to_path_buf();
        Ok(())
    }

    /// `fdatasync(2)`: resolves once written data is on the device.
    pub async fn fdatasync(&self) -> Result<()> {
        self.file
            .fdatasync()
            .await
            .map_err(|e| StorageError::glommio("syncing", &self.path, e))
    }

    /// Allocates `size_bytes` of disk for the file and sets its length (fallocate), so later
    /// writes inside it need no block allocation.
    pub async fn preallocate(&self, size_bytes: u64) -> Result<()> {
        self.file
            .pre_allocate(size_bytes, false)
            .await
            .map_err(|e| StorageError::glommio("preallocating", &self.path, e))
    }

    /// Sets the file length to `size_bytes`.
    pub async fn truncate(&self, size_bytes: u64) -> Result<()> {
        self.file
            .truncate(size_bytes)
            .await
            .map_err(|e| StorageError::glommio("truncating", &self.path, e))
    }

    /// Current file length in bytes.
    pub async fn file_size(&self) -> Result<u64> {
        self.file
            .file_size()
            .await
            .map_err(|e| StorageError::glommio("sizing", &self.path, e))
    }

    /// Reads up to `len` bytes at aligned `pos` (both multiples of [`BLOCK_BYTES`]) with one
    /// O_DIRECT `pread` into a fresh aligned buffer; fewer bytes come back at end of file.
    /// The returned `Bytes` owns that buffer: slicing it copies nothing.
    pub async fn read_aligned(&self, pos: u64, len: usize) -> Result<Bytes> {
        assert_eq!(pos % BLOCK_BYTES, 0, "read position must be block aligned");
        assert_eq!(
            len as u64 % BLOCK_BYTES,
            0,
            "read length must be block aligned"
        );
        // The blocking pool gets its own descriptor: if this future is dropped mid-read, the
        // segment may close its descriptor, and a reused fd number must not be read.
        // SAFETY: dup of a descriptor this struct keeps open for the duration of the call.
        let fd = unsafe { libc::dup(self.file.as_raw_fd()) };
        if fd < 0 {
            return Err(StorageError::io(
                "duplicating",
                &self.path,
                std::io::Error::last_os_error(),
            ));
        }
        let read = glommio::executor()
            .spawn_blocking(move || {
                let result = AlignedBuf::new(len).and_then(|mut buf| {
                    let n = pread_full(fd, buf.as_mut_slice(), pos)?;
                    Ok((buf, n))
                });
                // SAFETY: `fd` is the duplicate made above and owned by this closure alone.
                unsafe { libc::close(fd) };
                result
            })
            .await;
        let (buf, n) = read.map_err(|e| StorageError::io("reading", &self.path, e))?;
        Ok(Bytes::from_owner(buf).slice(..n))
    }

    /// Closes the file, waiting for the kernel to release it.
    pub async fn close(self) -> Result<()> {
        let path = self.path;
        self.file
            .close()
            .await
            .map_err(|e| StorageError::glommio("closing", &path, e))
    }
}

fn pread_full(fd: i32, buf: &mut [u8], pos: u64) -> std::io::Result<usize> {
    let mut done = 0usize;
    while done < buf.len() {
        let at = i64::try_from(pos + done as u64)
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        // SAFETY: the pointer and length describe the unfilled tail of `buf`.
        let n = unsafe { libc::pread(fd, buf[done..].as_mut_ptr().cast(), buf.len() - done, at) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            break;
        }
        done += n.unsigned_abs();
        // O_DIRECT reads stop short only at end of file, and then at a block boundary or the
        // file end; a further read would return 0.
        if done % BLOCK_USIZE != 0 {
            break;
        }
    }
    Ok(done)
}

/// A zeroed heap buffer aligned to [`BLOCK_BYTES`], `Send`, freed on drop.
struct AlignedBuf {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
}

// SAFETY: AlignedBuf uniquely owns its allocation; nothing else aliases it.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    fn new(len: usize) -> std::io::Result<AlignedBuf> {
        let layout = Layout::from_size_align(len.max(1), BLOCK_USIZE)
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        // SAFETY: layout has non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        let ptr = std::ptr::NonNull::new(ptr)
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::OutOfMemory))?;
        Ok(AlignedBuf { ptr, len })
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: ptr is a live allocation of at least len bytes owned by self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl AsRef<[u8]> for AlignedBuf {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: ptr is a live allocation of at least len bytes owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this exact layout (checked there).
        unsafe {
            dealloc(
                self.ptr.as_ptr(),
                Layout::from_size_align_unchecked(self.len.max(1), BLOCK_USIZE),
            )
        };
    }
}

/// Spawns a detached task on the current executor (the shard that owns the log).
pub fn spawn_detached(fut: impl Future<Output = ()> + 'static) {
    glommio::spawn_local(fut).detach();
}

/// Sleeps on the current executor's timer.
pub async fn sleep(d: std::time::Duration) {
    glommio::timer::sleep(d).await;
}

/// Removes a file (used for deleted segments: readers that hold the open descriptor keep
/// reading until they drop it, as POSIX unlink allows).
pub async fn remove_file(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StorageError::io("removing", path, e)),
    }
}

/// A single-threaded "something changed" signal: waiters re-check their condition after each
/// [`Notify::notify_all`]. Bounded by the number of tasks waiting.
#[derive(Default)]
pub struct Notify {
    generation: Cell<u64>,
    wakers: RefCell<Vec<Waker>>,
}

impl Notify {
    /// Wakes every current waiter.
    pub fn notify_all(&self) {
        self.generation.set(self.generation.get() + 1);
        for w in self.wakers.borrow_mut().drain(..) {
            w.wake();
        }
    }

    /// Resolves at the next [`Notify::notify_all`] after this call.
    pub fn notified(self: &Rc<Self>) -> Notified {
        Notified {
            notify: self.clone(),
            generation: self.generation.get(),
        }
    }
}

/// Future returned by [`Notify::notified`].
pub struct Notified {
    notify: Rc<Notify>,
    generation: u64,
}

impl Future for Notified {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.notify.generation.get() != self.generation {
            return Poll::Ready(());
        }
        let mut wakers = self.notify.wakers.borrow_mut();
        if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
            wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }
}
