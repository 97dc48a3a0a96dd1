//! The only module that touches glommio: segment and index files, aligned DMA writes, cold
//! reads, fdatasync, and the small single-threaded sync primitive the log waits on. Keeping it
//! here means a move to another io_uring runtime touches this file (DESIGN.md §2).
//!
//! Reads: glommio's read buffers are `Rc`-owned and cannot become `Send` `Bytes`, while fetched
//! batches cross shards. Cold reads therefore `pread` the O_DIRECT file descriptor into an
//! aligned heap buffer on glommio's blocking pool and hand out `Bytes` slices of that buffer —
//! a DMA read into an aligned buffer with no user-space copy of the record bytes.
//!
//! Write buffers: data writes take their aligned buffer from the shard's write-buffer pool
//! ([`DirectFile::take_write_buffer`]) and give it back when the write completes, so a steady
//! stream of appends allocates no buffer per write. The pool is per executor thread (a buffer
//! from glommio's registered area belongs to that executor's ring) and bounded by
//! [`WRITE_BUFFER_POOL_BUFFERS_MAX`] and [`WRITE_BUFFER_POOL_BYTES_MAX`]; past them the oldest
//! idle buffer is freed. Zero-ahead writes ([`DirectFile::write_zeros`]) all write the
//! executor's one shared zero buffer, filled once.

use crate::error::{Result, StorageError};
use bytes::Bytes;
use glommio::io::{DmaBuffer, DmaFile, OpenOptions};
use glommio::{Latency, Shares, TaskQueueHandle};
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::rc::Rc;

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

/// Most idle write buffers an executor keeps for reuse.
pub const WRITE_BUFFER_POOL_BUFFERS_MAX: usize = 32;
/// Most bytes of idle write buffers an executor keeps for reuse: a fifth of glommio's 10 MiB
/// registered I/O area, so writes in flight still find registered memory.
pub const WRITE_BUFFER_POOL_BYTES_MAX: usize = 2 << 20;
/// Length in bytes of every zero-ahead write: the size of the executor's shared zero buffer.
pub const ZERO_WRITE_BYTES: u64 = ZERO_WRITE_USIZE as u64;
const ZERO_WRITE_USIZE: usize = 256 << 10;
/// Most zero-ahead writes in flight per executor, over all its logs: a shard with many
/// partitions zeroes a few at a time (a log refused a slot tries again at its next append or
/// write completion) instead of putting a zero write of every log on the device at once.
pub const ZERO_WRITES_IN_FLIGHT_MAX: usize = 4;
/// CPU shares of the storage background queue that zero-ahead writes run in (glommio's
/// default shares are 1000): they need little CPU, and never ahead of produce or fetch work.
const BACKGROUND_QUEUE_SHARES: usize = 100;

const _: () = assert!(ZERO_WRITE_USIZE % BLOCK_USIZE == 0);
const _: () = assert!(ZERO_WRITE_USIZE <= WRITE_BUFFER_POOL_BYTES_MAX);

thread_local! {
    static IOPOLL_PROBED: Cell<bool> = const { Cell::new(false) };
    static WRITE_BUFFER_POOL: RefCell<WriteBufferPool> = const {
        RefCell::new(WriteBufferPool { executor_id: None, idle: VecDeque::new(), idle_bytes: 0 })
    };
    /// The executor id and its zeroed buffer of [`ZERO_WRITE_BYTES`].
    static ZERO_BUFFER: RefCell<Option<(usize, Rc<DmaBuffer>)>> = const { RefCell::new(None) };
    /// The executor id and its zero writes in flight (at most [`ZERO_WRITES_IN_FLIGHT_MAX`]).
    static ZERO_WRITES_IN_FLIGHT: Cell<(usize, usize)> = const { Cell::new((usize::MAX, 0)) };
    /// Log data writes (produce's and followers') in flight on this thread's executor.
    static FOREGROUND_WRITES_IN_FLIGHT: Cell<usize> = const { Cell::new(0) };
    /// Moving average of those writes' latency, in ns (0: none yet), and when the last one
    /// completed.
    static FOREGROUND_WRITE_LATENCY: Cell<(u64, Option<std::time::Instant>)> =
        const { Cell::new((0, None)) };
    /// The executor id and its storage background task queue.
    static BACKGROUND_QUEUE: Cell<Option<(usize, TaskQueueHandle)>> = const { Cell::new(None) };
}

/// The right to have one zero-ahead write in flight on this executor; given back on drop.
pub struct ZeroWriteSlot {
    executor_id: usize,
}

impl ZeroWriteSlot {
    /// A slot, unless [`ZERO_WRITES_IN_FLIGHT_MAX`] zero writes are in flight already.
    pub fn take() -> Option<ZeroWriteSlot> {
        let id = glommio::executor().id();
        ZERO_WRITES_IN_FLIGHT.with(|n| {
            let (owner, in_flight) = n.get();
            let in_flight = if owner == id { in_flight } else { 0 };
            (in_flight < ZERO_WRITES_IN_FLIGHT_MAX).then(|| {
                n.set((id, in_flight + 1));
                ZeroWriteSlot { executor_id: id }
            })
        })
    }
}

impl Drop for ZeroWriteSlot {
    fn drop(&mut self) {
        ZERO_WRITES_IN_FLIGHT.with(|n| {
            let (owner, in_flight) = n.get();
            if owner == self.executor_id {
                n.set((owner, in_flight - 1));
            }
        });
    }
}

/// Idle aligned write buffers of one executor, oldest first.
///
/// Invariants: every buffer in `idle` is uniquely owned (`Rc::strong_count == 1`) and has its
/// full allocated length; `idle.len() ≤ WRITE_BUFFER_POOL_BUFFERS_MAX`;
/// `idle_bytes = Σ len ≤ WRITE_BUFFER_POOL_BYTES_MAX`; all come from executor `executor_id`.
struct WriteBufferPool {
    executor_id: Option<usize>,
    idle: VecDeque<Rc<DmaBuffer>>,
    idle_bytes: usize,
}

impl WriteBufferPool {
    /// Forgets buffers of an earlier executor that ran on this thread: their registered
    /// buffer ids mean nothing to the current ring.
    fn for_executor(&mut self, id: usize) -> &mut Self {
        if self.executor_id != Some(id) {
            self.idle.clear();
            self.idle_bytes = 0;
            self.executor_id = Some(id);
        }
        self
    }

    /// An idle buffer of exactly `len` bytes, the most recently returned one first.
    fn take(&mut self, len: usize) -> Option<Rc<DmaBuffer>> {
        let at = self.idle.iter().rposition(|b| b.len() == len)?;
        let buf = self.idle.remove(at)?;
        self.idle_bytes -= len;
        Some(buf)
    }

    /// Keeps `buf` for reuse, freeing the oldest idle buffers past the bounds.
    fn give(&mut self, buf: Rc<DmaBuffer>) {
        let len = buf.len();
        if Rc::strong_count(&buf) != 1 || len > WRITE_BUFFER_POOL_BYTES_MAX {
            return;
        }
        self.idle.push_back(buf);
        self.idle_bytes += len;
        while self.idle.len() > WRITE_BUFFER_POOL_BUFFERS_MAX
            || self.idle_bytes > WRITE_BUFFER_POOL_BYTES_MAX
        {
            let oldest = self
                .idle
                .pop_front()
                .expect("bounds exceeded, so not empty");
            self.idle_bytes -= oldest.len();
        }
    }
}

/// Idle buffers in this executor's write-buffer pool, and their bytes.
#[cfg(test)]
fn write_buffer_pool_idle() -> (usize, usize) {
    WRITE_BUFFER_POOL.with(|p| {
        let p = p.borrow();
        (p.idle.len(), p.idle_bytes)
    })
}

/// An aligned buffer for one data write, from the executor's write-buffer pool: fill every
/// byte with [`WriteBuffer::as_bytes_mut`] (its old contents are a previous write's), then pass
/// it to [`DirectFile::write_pooled`], which returns it to the pool.
pub struct WriteBuffer {
    /// Uniquely owned until written (the pool's invariant).
    buf: Rc<DmaBuffer>,
    reused: bool,
}

impl WriteBuffer {
    /// The whole buffer, to fill.
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        Rc::get_mut(&mut self.buf)
            .expect("a write buffer is uniquely owned until written")
            .as_bytes_mut()
    }

    /// Length in bytes (a multiple of [`BLOCK_BYTES`]).
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether the buffer came from the pool (else it was freshly allocated).
    pub fn reused(&self) -> bool {
        self.reused
    }
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

    /// An aligned buffer of `len` bytes (a multiple of [`BLOCK_BYTES`]) with unspecified
    /// contents, from this executor's write-buffer pool when it holds one of that length, else
    /// freshly allocated (never zeroed: the write pipeline copies data, then zeroes the
    /// padding).
    pub fn take_write_buffer(&self, len: usize) -> WriteBuffer {
        let id = glommio::executor().id();
        let pooled = WRITE_BUFFER_POOL.with(|p| p.borrow_mut().for_executor(id).take(len));
        match pooled {
            Some(buf) => WriteBuffer { buf, reused: true },
            None => WriteBuffer {
                buf: Rc::new(self.file.alloc_dma_buffer(len)),
                reused: false,
            },
        }
    }

    /// Writes the whole `buf` at aligned byte position `pos`, then returns `buf` to the
    /// executor's write-buffer pool. Counted in [`foreground_writes_in_flight`] while it runs.
    pub async fn write_pooled(&self, buf: WriteBuffer, pos: u64) -> Result<()> {
        let len = buf.len();
        let counted = ForegroundWrite::start();
        let result = self.file.write_rc_at(buf.buf.clone(), pos).await;
        drop(counted);
        // glommio dropped its reference when the write completed, so `buf` is unique again.
        let id = glommio::executor().id();
        WRITE_BUFFER_POOL.with(|p| p.borrow_mut().for_executor(id).give(buf.buf));
        self.check_written(result, len)
    }

    /// Writes [`ZERO_WRITE_BYTES`] zeros at aligned `pos` from the executor's shared zero
    /// buffer (allocated and zeroed once per executor).
    pub async fn write_zeros(&self, pos: u64) -> Result<()> {
        let id = glommio::executor().id();
        let zeros = ZERO_BUFFER.with(|z| {
            let mut z = z.borrow_mut();
            match &*z {
                Some((owner, buf)) if *owner == id => buf.clone(),
                _ => {
                    let mut buf = self.file.alloc_dma_buffer(ZERO_WRITE_USIZE);
                    buf.as_bytes_mut().fill(0);
                    let buf = Rc::new(buf);
                    *z = Some((id, buf.clone()));
                    buf
                }
            }
        });
        let result = self.file.write_rc_at(zeros, pos).await;
        self.check_written(result, ZERO_WRITE_USIZE)
    }

    /// Writes the whole aligned `buf` at aligned byte position `pos`.
    pub async fn write_at(&self, buf: DmaBuffer, pos: u64) -> Result<()> {
        let len = buf.len();
        let result = self.file.write_at(buf, pos).await;
        self.check_written(result, len)
    }

    /// Maps a write's result: an error, or a short write of fewer than `len` bytes, is an
    /// error naming this file.
    fn check_written(&self, result: glommio::Result<usize, ()>, len: usize) -> Result<()> {
        let written = result.map_err(|e| StorageError::glommio("writing", &self.path, e))?;
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

    /// Closes a file already unlinked (a retired segment) so that its last close, which frees
    /// its blocks, runs on the blocking pool: freeing a preallocated segment's extents takes
    /// milliseconds per file on ext4, and a close on the executor stalled every partition of
    /// the shard (measured: ~190 ms when a clean retired 16 segments of 64 MiB). A duplicate
    /// of the descriptor keeps the file open while the runtime closes its own; the pool then
    /// closes the duplicate, the last reference.
    pub async fn close_retired(self) -> Result<()> {
        // SAFETY: dup(2) of a descriptor this file owns; the new one is closed below.
        let dup = unsafe { libc::dup(self.file.as_raw_fd()) };
        self.close().await?;
        if dup >= 0 {
            // SAFETY: `dup` is ours alone and closed exactly once.
            spawn_blocking(move || unsafe { libc::close(dup) }).await;
        }
        Ok(())
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

/// Spawns a detached task on the current executor (the shard that owns the log), in the
/// current task queue.
pub fn spawn_detached(fut: impl Future<Output = ()> + 'static) {
    glommio::spawn_local(fut).detach();
}

/// Spawns a detached task at the back of the current task queue: it runs after the tasks
/// already runnable there (glommio's `spawn_local` polls a new task at once, inside the
/// caller, before the caller goes on).
pub fn spawn_deferred(fut: impl Future<Output = ()> + 'static) {
    let ex = glommio::executor();
    // The current task queue is this executor's, which accepts it.
    glommio::spawn_local_into(fut, ex.current_task_queue())
        .expect("the current task queue belongs to this executor")
        .detach();
}

/// Spawns a detached task into the executor's storage background queue (created on first
/// use, [`BACKGROUND_QUEUE_SHARES`] shares, latency not important): work no append waits for.
pub fn spawn_background(fut: impl Future<Output = ()> + 'static) {
    let ex = glommio::executor();
    let id = ex.id();
    let queue = match BACKGROUND_QUEUE.with(Cell::get) {
        Some((owner, queue)) if owner == id => queue,
        _ => {
            let queue = ex.create_task_queue(
                Shares::Static(BACKGROUND_QUEUE_SHARES),
                Latency::NotImportant,
                "storage-background",
            );
            BACKGROUND_QUEUE.with(|q| q.set(Some((id, queue))));
            queue
        }
    };
    // Only a queue of another executor is refused, and this one was made on this executor.
    glommio::spawn_local_into(fut, queue)
        .expect("the storage background queue belongs to this executor")
        .detach();
}

/// Runs `f` on the current executor's blocking thread pool (blocking filesystem calls, so
/// that the shard never blocks on them).
pub fn spawn_blocking<R: Send + 'static>(
    f: impl FnOnce() -> R + Send + 'static,
) -> impl Future<Output = R> {
    glommio::executor().spawn_blocking(f)
}

impl StorageError {
    /// [`StorageError::io`]'s classification for the runtime's error type, which wraps
    /// `std::io::Error`. Here so that only this module names the runtime.
    pub(crate) fn glommio(
        op: &'static str,
        path: impl Into<PathBuf>,
        e: glommio::GlommioError<()>,
    ) -> Self {
        StorageError::io(op, path, std::io::Error::from(e))
    }
}

/// How long [`yield_to_reactor`] parks the calling task.
const REACTOR_YIELD: std::time::Duration = std::time::Duration::from_micros(10);

/// Log data writes in flight on the calling thread's executor: the appends that acks wait for.
/// Background I/O (the cleaner) waits for none to be in flight before it starts a request, so
/// a produce's write never queues on the device behind more than one request of it.
pub fn foreground_writes_in_flight() -> usize {
    FOREGROUND_WRITES_IN_FLIGHT.with(Cell::get)
}

/// Weight of the newest sample in [`foreground_write_latency`]'s moving average: 1/16.
const WRITE_LATENCY_EWMA_SHIFT: u32 = 4;

/// How long after the last log data write completed [`foreground_write_latency`] still
/// answers: an average nobody renews says nothing about the device now.
const WRITE_LATENCY_FRESH: std::time::Duration = std::time::Duration::from_millis(100);

/// The moving average of the latency of this executor's log data writes (submission to
/// completion), or `None` when none completed in the last [`WRITE_LATENCY_FRESH`]. The
/// cleaner paces itself on it: it is how long an append's ack waits for the device.
pub fn foreground_write_latency() -> Option<std::time::Duration> {
    let (ewma_ns, last) = FOREGROUND_WRITE_LATENCY.with(Cell::get);
    let fresh = last.is_some_and(|at| at.elapsed() <= WRITE_LATENCY_FRESH);
    (fresh && ewma_ns > 0).then(|| std::time::Duration::from_nanos(ewma_ns))
}

/// One log data write in flight, counted until dropped (so a cancelled write is uncounted
/// too); its latency goes into [`foreground_write_latency`].
struct ForegroundWrite {
    started: std::time::Instant,
}

impl ForegroundWrite {
    fn start() -> ForegroundWrite {
        FOREGROUND_WRITES_IN_FLIGHT.with(|n| n.set(n.get() + 1));
        ForegroundWrite {
            started: std::time::Instant::now(),
        }
    }
}

impl Drop for ForegroundWrite {
    fn drop(&mut self) {
        FOREGROUND_WRITES_IN_FLIGHT.with(|n| {
            assert!(n.get() > 0, "a foreground write is uncounted twice");
            n.set(n.get() - 1);
        });
        let sample_ns = u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        FOREGROUND_WRITE_LATENCY.with(|l| {
            let (ewma_ns, _) = l.get();
            let next = if ewma_ns == 0 {
                sample_ns
            } else {
                let delta =
                    (i128::from(sample_ns) - i128::from(ewma_ns)) >> WRITE_LATENCY_EWMA_SHIFT;
                u64::try_from(i128::from(ewma_ns) + delta).unwrap_or(ewma_ns)
            };
            l.set((next.max(1), Some(std::time::Instant::now())));
        });
    }
}

/// Parks the calling task for [`REACTOR_YIELD`], so the executor polls its rings (network and
/// disk completions) and runs every queue with work before this task goes on (the cleaner's
/// slices, `log/compact.rs`). glommio's `yield_task_queue_now` is not enough for that: when no
/// other queue has a runnable task *yet* — a produce request still sits unread in the ring —
/// the executor runs the yielding queue again without polling, until its 100 ms preemption
/// timer fires.
pub async fn yield_to_reactor() {
    glommio::timer::sleep(REACTOR_YIELD).await;
}

/// Sleeps on the current executor's timer.
pub async fn sleep(d: std::time::Duration) {
    glommio::timer::sleep(d).await;
}

/// Removes a file (used for deleted segments: readers that hold the open descriptor keep
/// reading until they drop it, as POSIX unlink allows), on the blocking pool: unlinking a
/// preallocated segment frees its extents, milliseconds each on ext4, which on the executor
/// stalled every partition of the shard (measured: a clean's 48 unlinks held the latency
/// profile's p99 at ~180 ms).
pub async fn remove_file(path: &Path) -> Result<()> {
    let owned = path.to_path_buf();
    match spawn_blocking(move || std::fs::remove_file(owned)).await {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StorageError::io("removing", path, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run<T: Send + 'static>(f: impl AsyncFnOnce() -> T + Send + 'static) -> T {
        glommio::LocalExecutorBuilder::default()
            .spawn(async move || f().await)
            .expect("spawn executor")
            .join()
            .expect("executor thread")
    }

    #[test]
    fn write_buffers_are_reused_and_the_pool_stays_bounded() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("segment");
        run(async move || {
            let file = DirectFile::open(&path, true).await.expect("open");
            file.preallocate(8 << 20).await.expect("preallocate");
            // One buffer written again and again: allocated once, then always reused.
            for i in 0..10u8 {
                let mut buf = file.take_write_buffer(BLOCK_USIZE);
                assert_eq!(buf.reused(), i > 0, "write {i}");
                buf.as_bytes_mut().fill(i);
                file.write_pooled(buf, u64::from(i) * BLOCK_BYTES)
                    .await
                    .expect("write");
                assert_eq!(write_buffer_pool_idle(), (1, BLOCK_USIZE));
            }
            // What was written is what was filled in: reuse hands out no stale bytes to disk.
            let data = file
                .read_aligned(9 * BLOCK_BYTES, BLOCK_USIZE)
                .await
                .expect("read");
            assert!(data.iter().all(|&b| b == 9));
            // A length the pool does not hold is allocated.
            assert!(!file.take_write_buffer(2 * BLOCK_USIZE).reused());
            // Many writes in flight at once, of two lengths: afterwards the pool holds no more
            // than its bounds.
            let file = Rc::new(file);
            let lens = [BLOCK_USIZE, 64 * BLOCK_USIZE];
            let writes: Vec<_> = (0..2 * WRITE_BUFFER_POOL_BUFFERS_MAX)
                .map(|i| {
                    let mut buf = file.take_write_buffer(lens[i % 2]);
                    buf.as_bytes_mut().fill(0);
                    let file = file.clone();
                    let pos = (i as u64 % 2) * (1 << 20);
                    glommio::spawn_local(async move { file.write_pooled(buf, pos).await })
                })
                .collect();
            for write in writes {
                write.await.expect("write");
            }
            let (idle, idle_bytes) = write_buffer_pool_idle();
            assert!(idle <= WRITE_BUFFER_POOL_BUFFERS_MAX, "{idle} buffers idle");
            assert!(
                idle_bytes <= WRITE_BUFFER_POOL_BYTES_MAX,
                "{idle_bytes} bytes idle"
            );
            assert!(idle > 0);
            let file = Rc::into_inner(file).expect("no other handle left");
            file.close().await.expect("close");
        });
    }

    #[test]
    fn zero_write_slots_are_bounded_per_executor() {
        run(async move || {
            let mut slots: Vec<_> = (0..ZERO_WRITES_IN_FLIGHT_MAX)
                .map(|_| ZeroWriteSlot::take().expect("a slot under the bound"))
                .collect();
            assert!(ZeroWriteSlot::take().is_none(), "past the bound");
            slots.pop();
            assert!(
                ZeroWriteSlot::take().is_some(),
                "a slot given back is taken again"
            );
        });
        // Another executor starts with every slot free.
        run(async move || assert!(ZeroWriteSlot::take().is_some()));
    }

    #[test]
    fn zero_writes_write_zeros_over_the_given_range_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("segment");
        run(async move || {
            let file = DirectFile::open(&path, true).await.expect("open");
            file.preallocate(2 * ZERO_WRITE_BYTES)
                .await
                .expect("preallocate");
            let mut buf = file.take_write_buffer(BLOCK_USIZE);
            buf.as_bytes_mut().fill(7);
            file.write_pooled(buf, 0).await.expect("write");
            file.write_zeros(BLOCK_BYTES).await.expect("zeros");
            let data = file
                .read_aligned(0, 2 * ZERO_WRITE_USIZE)
                .await
                .expect("read");
            assert!(data[..BLOCK_USIZE].iter().all(|&b| b == 7));
            assert!(data[BLOCK_USIZE..].iter().all(|&b| b == 0));
            file.close().await.expect("close");
        });
    }
}
