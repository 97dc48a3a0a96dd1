//! Durable metadata: an append-only record log plus a snapshot, in the data directory
//! (byte layout in `docs/storage-format.md`, "Cluster metadata").
//!
//! - `cluster-metadata.log`: a header, then one frame per change (the records of one op, so a
//!   change is applied whole or not at all). Each frame carries its offset (the change's
//!   number, consecutive; the Raft index later) and a CRC-32C. [`MetadataStore::append`]
//!   returns once the frame is fsynced: only then is the change acknowledged.
//! - `cluster-metadata.snapshot`: the image as records, with the offset of the first change
//!   it does not contain. Written atomically (temp file, fsync, rename, directory fsync) when
//!   the log grows past its bound, after which the log restarts empty.
//!
//! Start-up ([`MetadataStore::open`]) loads the snapshot and replays the log's frames from
//! the snapshot's offset on; frames below it (left by a crash between the snapshot's rename
//! and the log's restart) are skipped. A torn or corrupt frame ends the log: it and anything
//! after it are dropped (truncated), never applied — it was never acknowledged, since
//! acknowledgement follows the fsync of the whole frame. An intact frame (its CRC holds)
//! that does not decode or apply is an error, not a tail: the broker refuses to start.
//!
//! Blocking `std::fs`: the broker runs these calls on its executor's blocking pool.

use super::image::MetadataImage;
use super::record::MetadataRecord;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// File name of the record log in the data directory.
pub const LOG_FILE_NAME: &str = "cluster-metadata.log";
/// File name of the snapshot in the data directory.
pub const SNAPSHOT_FILE_NAME: &str = "cluster-metadata.snapshot";

const LOG_MAGIC: &[u8; 8] = b"SLCMDLOG";
const SNAPSHOT_MAGIC: &[u8; 8] = b"SLCMDSNP";
/// Format version of both files.
const FORMAT_VERSION: u32 = 1;
/// Magic + version.
const HEADER_BYTES: usize = 12;
/// Body length u32 + CRC-32C u32.
const FRAME_HEADER_BYTES: usize = 8;
/// Offset u64 at the start of every frame body.
const OFFSET_BYTES: usize = 8;

/// Largest frame or snapshot body, bytes: a topic of `PARTITIONS_PER_TOPIC_MAX` partitions is
/// about 1.5 MiB of records, well inside it; a length above it is corruption.
pub const FRAME_BYTES_MAX: usize = 64 << 20;

/// Log size past which [`MetadataStore::maybe_snapshot`] writes a snapshot and restarts the
/// log, bytes.
pub const SNAPSHOT_LOG_BYTES: u64 = 4 << 20;

/// A metadata file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{op} {}: {source}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {reason}", path.display())]
    Corrupt { path: PathBuf, reason: String },
    #[error("a change of {bytes} bytes exceeds the frame limit of {FRAME_BYTES_MAX} bytes")]
    FrameTooLarge { bytes: usize },
    /// An earlier failed write could not be undone; the log refuses appends until restart.
    #[error("{}: an earlier write failed and could not be undone", path.display())]
    Poisoned { path: PathBuf },
}

/// The snapshot body after its offset.
#[derive(Serialize, Deserialize)]
struct SnapshotBody {
    cluster_id: String,
    records: Vec<MetadataRecord>,
}

/// What [`MetadataStore::open`] found.
pub struct Opened {
    pub store: MetadataStore,
    pub image: MetadataImage,
    /// Bytes of torn or corrupt log tail dropped (0 after a clean stop).
    pub dropped_tail_bytes: u64,
}

/// The open record log of a data directory.
pub struct MetadataStore {
    dir: PathBuf,
    log: File,
    /// Bytes in the log file, header included.
    log_bytes: u64,
    /// Offset the next appended change gets.
    next_offset: u64,
    snapshot_log_bytes: u64,
    poisoned: bool,
}

fn io_error<'a>(
    op: &'static str,
    path: &'a Path,
) -> impl FnOnce(std::io::Error) -> StoreError + 'a {
    move |source| StoreError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

fn header(magic: &[u8; 8]) -> [u8; HEADER_BYTES] {
    let mut h = [0u8; HEADER_BYTES];
    h[..8].copy_from_slice(magic);
    h[8..].copy_from_slice(&FORMAT_VERSION.to_be_bytes());
    h
}

/// `len | crc32c(body) | body` with `body = offset | payload`.
fn frame(offset: u64, payload: &[u8]) -> Result<Vec<u8>, StoreError> {
    let body_len = OFFSET_BYTES + payload.len();
    if body_len > FRAME_BYTES_MAX {
        return Err(StoreError::FrameTooLarge { bytes: body_len });
    }
    let len = u32::try_from(body_len).map_err(|_| StoreError::FrameTooLarge { bytes: body_len })?;
    let mut body = Vec::with_capacity(body_len);
    body.extend_from_slice(&offset.to_be_bytes());
    body.extend_from_slice(payload);
    let mut out = Vec::with_capacity(FRAME_HEADER_BYTES + body_len);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
    out.extend_from_slice(&body);
    Ok(out)
}

/// One frame read from `bytes`: `(offset, payload, frame bytes)`, or `None` when the bytes do
/// not start with a whole, intact frame.
fn read_frame(bytes: &[u8]) -> Option<(u64, &[u8], usize)> {
    let len = usize::try_from(u32::from_be_bytes(bytes.get(..4)?.try_into().ok()?)).ok()?;
    let crc = u32::from_be_bytes(bytes.get(4..8)?.try_into().ok()?);
    if !(OFFSET_BYTES..=FRAME_BYTES_MAX).contains(&len) {
        return None;
    }
    let body = bytes.get(FRAME_HEADER_BYTES..FRAME_HEADER_BYTES + len)?;
    if crc32c::crc32c(body) != crc {
        return None;
    }
    let offset = u64::from_be_bytes(body[..OFFSET_BYTES].try_into().ok()?);
    Some((offset, &body[OFFSET_BYTES..], FRAME_HEADER_BYTES + len))
}

fn check_header(bytes: &[u8], magic: &[u8; 8], path: &Path) -> Result<(), StoreError> {
    let corrupt = |reason: String| StoreError::Corrupt {
        path: path.to_path_buf(),
        reason,
    };
    if bytes.len() < HEADER_BYTES || &bytes[..8] != magic {
        return Err(corrupt("not a Sluice metadata file (bad magic)".into()));
    }
    let version = u32::from_be_bytes(bytes[8..12].try_into().expect("4 bytes"));
    if version != FORMAT_VERSION {
        return Err(corrupt(format!(
            "format version {version}; this broker reads {FORMAT_VERSION}"
        )));
    }
    Ok(())
}

fn read_all(path: &Path) -> Result<Option<Vec<u8>>, StoreError> {
    match File::open(path) {
        Ok(mut f) => {
            let mut bytes = Vec::new();
            f.read_to_end(&mut bytes)
                .map_err(io_error("reading", path))?;
            Ok(Some(bytes))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_error("opening", path)(e)),
    }
}

fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_error("syncing directory", dir))
}

/// Writes `bytes` to `path` atomically: temp file, fsync, rename, directory fsync.
fn write_atomically(dir: &Path, path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut f = File::create(&tmp).map_err(io_error("creating", &tmp))?;
    f.write_all(bytes).map_err(io_error("writing", &tmp))?;
    f.sync_all().map_err(io_error("syncing", &tmp))?;
    std::fs::rename(&tmp, path).map_err(io_error("renaming", &tmp))?;
    sync_dir(dir)
}

/// The snapshot file's bytes for `image`, holding changes below `next_offset`.
fn encode_snapshot(image: &MetadataImage, next_offset: u64) -> Result<Vec<u8>, StoreError> {
    let body = SnapshotBody {
        cluster_id: image.cluster_id.clone(),
        records: image.to_records(),
    };
    let payload = serde_json::to_vec(&body).map_err(|e| StoreError::Corrupt {
        path: PathBuf::from(SNAPSHOT_FILE_NAME),
        reason: format!("encoding: {e}"),
    })?;
    let mut out = header(SNAPSHOT_MAGIC).to_vec();
    out.extend_from_slice(&frame(next_offset, &payload)?);
    Ok(out)
}

/// The image and next offset of snapshot file `bytes`.
fn decode_snapshot(bytes: &[u8], path: &Path) -> Result<(MetadataImage, u64), StoreError> {
    check_header(bytes, SNAPSHOT_MAGIC, path)?;
    let corrupt = |reason: String| StoreError::Corrupt {
        path: path.to_path_buf(),
        reason,
    };
    let rest = &bytes[HEADER_BYTES..];
    let (next_offset, payload, used) =
        read_frame(rest).ok_or_else(|| corrupt("torn or corrupt snapshot (CRC)".into()))?;
    if used != rest.len() {
        return Err(corrupt("bytes after the snapshot".into()));
    }
    let body: SnapshotBody =
        serde_json::from_slice(payload).map_err(|e| corrupt(format!("decoding: {e}")))?;
    let mut image = MetadataImage::new(body.cluster_id);
    for record in &body.records {
        image
            .apply(record)
            .map_err(|e| corrupt(format!("snapshot record does not apply: {e}")))?;
    }
    Ok((image, next_offset))
}

/// What the snapshot file's and the log file's bytes hold, decoded as [`MetadataStore::open`]
/// decodes them, with no I/O: the image, the next change offset, and how many leading log
/// bytes are intact (a torn tail after them is dropped). Errors: as `open` for corrupt
/// contents. The fuzz target `decode_metadata` (replication/fuzz) drives it with arbitrary
/// bytes: it must never panic.
pub fn decode_files(
    snapshot: &[u8],
    log: &[u8],
) -> Result<(MetadataImage, u64, usize), StoreError> {
    let (mut image, snapshot_offset) = decode_snapshot(snapshot, Path::new(SNAPSHOT_FILE_NAME))?;
    let (next_offset, valid_bytes) =
        replay(log, Path::new(LOG_FILE_NAME), &mut image, snapshot_offset)?;
    Ok((image, next_offset, valid_bytes))
}

impl MetadataStore {
    /// Starts the metadata of a new cluster (or one converted from the old format) in `dir`
    /// with `image`: writes its snapshot, then an empty log. Errors: I/O.
    pub fn create(dir: &Path, image: &MetadataImage) -> Result<MetadataStore, StoreError> {
        write_atomically(
            dir,
            &dir.join(SNAPSHOT_FILE_NAME),
            &encode_snapshot(image, 0)?,
        )?;
        MetadataStore::restart_log(dir, 0, SNAPSHOT_LOG_BYTES)
    }

    /// Opens the metadata of `dir`: `None` when it has none (no snapshot, no log). Errors:
    /// I/O, a corrupt snapshot, a log without a snapshot, or a log whose intact frames do not
    /// follow the snapshot.
    pub fn open(dir: &Path) -> Result<Option<Opened>, StoreError> {
        let snapshot_path = dir.join(SNAPSHOT_FILE_NAME);
        let log_path = dir.join(LOG_FILE_NAME);
        let Some(snapshot) = read_all(&snapshot_path)? else {
            // `create` writes the snapshot first, so a log alone was not left by a crash:
            // starting afresh would overwrite it.
            if log_path.exists() {
                return Err(StoreError::Corrupt {
                    path: log_path,
                    reason: format!("a metadata log without its {SNAPSHOT_FILE_NAME}"),
                });
            }
            return Ok(None);
        };
        let (mut image, snapshot_offset) = decode_snapshot(&snapshot, &snapshot_path)?;
        let Some(log) = read_all(&log_path)? else {
            // Lost between a snapshot and the log's restart: the snapshot has everything.
            let store = MetadataStore::restart_log(dir, snapshot_offset, SNAPSHOT_LOG_BYTES)?;
            return Ok(Some(Opened {
                store,
                image,
                dropped_tail_bytes: 0,
            }));
        };
        let (next_offset, valid_bytes) = replay(&log, &log_path, &mut image, snapshot_offset)?;
        let file = OpenOptions::new()
            .write(true)
            .open(&log_path)
            .map_err(io_error("opening", &log_path))?;
        let dropped_tail_bytes = u64::try_from(log.len() - valid_bytes).unwrap_or(u64::MAX);
        let log_bytes = u64::try_from(valid_bytes).unwrap_or(u64::MAX);
        if dropped_tail_bytes > 0 {
            file.set_len(log_bytes)
                .and_then(|()| file.sync_all())
                .map_err(io_error("truncating the torn tail of", &log_path))?;
        }
        let mut store = MetadataStore {
            dir: dir.to_path_buf(),
            log: file,
            log_bytes,
            next_offset,
            snapshot_log_bytes: SNAPSHOT_LOG_BYTES,
            poisoned: false,
        };
        store.seek_end()?;
        Ok(Some(Opened {
            store,
            image,
            dropped_tail_bytes,
        }))
    }

    /// Writes a new empty log holding changes from `next_offset` on, atomically.
    fn restart_log(
        dir: &Path,
        next_offset: u64,
        snapshot_log_bytes: u64,
    ) -> Result<MetadataStore, StoreError> {
        let path = dir.join(LOG_FILE_NAME);
        write_atomically(dir, &path, &header(LOG_MAGIC))?;
        let log = OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(io_error("opening", &path))?;
        let mut store = MetadataStore {
            dir: dir.to_path_buf(),
            log,
            log_bytes: HEADER_BYTES as u64,
            next_offset,
            snapshot_log_bytes,
            poisoned: false,
        };
        store.seek_end()?;
        Ok(store)
    }

    fn seek_end(&mut self) -> Result<(), StoreError> {
        use std::io::{Seek, SeekFrom};
        self.log
            .seek(SeekFrom::Start(self.log_bytes))
            .map(|_| ())
            .map_err(io_error("seeking", &self.dir.join(LOG_FILE_NAME)))
    }

    /// Sets the log size past which [`MetadataStore::maybe_snapshot`] snapshots (tests).
    pub fn set_snapshot_log_bytes(&mut self, bytes: u64) {
        self.snapshot_log_bytes = bytes;
    }

    /// Offset the next appended change gets.
    pub fn next_offset(&self) -> u64 {
        self.next_offset
    }

    /// Appends one change (`records`, applied together) and fsyncs it; returns its offset.
    /// Errors: I/O (the log is cut back to before the frame; if that fails too, the store is
    /// poisoned), or a change too large for one frame.
    pub fn append(&mut self, records: &[MetadataRecord]) -> Result<u64, StoreError> {
        let path = self.dir.join(LOG_FILE_NAME);
        if self.poisoned {
            return Err(StoreError::Poisoned { path });
        }
        let payload = serde_json::to_vec(records).map_err(|e| StoreError::Corrupt {
            path: path.clone(),
            reason: format!("encoding: {e}"),
        })?;
        let offset = self.next_offset;
        let bytes = frame(offset, &payload)?;
        let written = self
            .log
            .write_all(&bytes)
            .and_then(|()| self.log.sync_data());
        if let Err(e) = written {
            let undone = self.log.set_len(self.log_bytes).is_ok() && self.seek_end().is_ok();
            self.poisoned = !undone;
            return Err(io_error("appending to", &path)(e));
        }
        self.log_bytes += u64::try_from(bytes.len()).unwrap_or(u64::MAX);
        self.next_offset += 1;
        Ok(offset)
    }

    /// When the log has grown past its bound, writes `image` (the state after every appended
    /// change) as the snapshot and restarts the log; `true` when it did. Errors: I/O (the log
    /// and the old snapshot stay valid: nothing is lost).
    pub fn maybe_snapshot(&mut self, image: &MetadataImage) -> Result<bool, StoreError> {
        if self.log_bytes <= self.snapshot_log_bytes {
            return Ok(false);
        }
        let snapshot = encode_snapshot(image, self.next_offset)?;
        write_atomically(&self.dir, &self.dir.join(SNAPSHOT_FILE_NAME), &snapshot)?;
        *self = MetadataStore::restart_log(&self.dir, self.next_offset, self.snapshot_log_bytes)?;
        Ok(true)
    }
}

/// Applies the intact frames of log file `bytes` at or above `snapshot_offset` to `image`;
/// returns the next offset and the length of the intact prefix. A torn frame (short, bad
/// length or CRC) ends the log there. Errors: an intact frame out of order, or one that does
/// not decode or apply.
fn replay(
    bytes: &[u8],
    path: &Path,
    image: &mut MetadataImage,
    snapshot_offset: u64,
) -> Result<(u64, usize), StoreError> {
    check_header(bytes, LOG_MAGIC, path)?;
    let mut at = HEADER_BYTES;
    let mut next_offset = snapshot_offset;
    while let Some((offset, payload, used)) = read_frame(&bytes[at..]) {
        if offset < snapshot_offset {
            // Already in the snapshot.
            at += used;
            continue;
        }
        if offset != next_offset {
            return Err(StoreError::Corrupt {
                path: path.to_path_buf(),
                reason: format!(
                    "change {offset} follows change {}",
                    next_offset.wrapping_sub(1)
                ),
            });
        }
        // The CRC held, so these bytes are what was written: a change that does not decode
        // or apply is not a torn write but a bug or a foreign file, and is not dropped.
        let corrupt = |reason: String| StoreError::Corrupt {
            path: path.to_path_buf(),
            reason: format!("change {offset}: {reason}"),
        };
        let records: Vec<MetadataRecord> =
            serde_json::from_slice(payload).map_err(|e| corrupt(format!("decoding: {e}")))?;
        for record in &records {
            image
                .apply(record)
                .map_err(|e| corrupt(format!("does not apply: {e}")))?;
        }
        next_offset += 1;
        at += used;
    }
    Ok((next_offset, at))
}
