//! The storage crate's typed errors. Kafka error codes are chosen by the broker at the edge.

use crate::types::Offset;
use std::path::PathBuf;

/// Why a batch handed to [`crate::PartitionLog::append`] was refused. Nothing is appended.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BatchError {
    /// Fewer bytes than the 61-byte RecordBatch v2 header, or than `batchLength` announces.
    #[error("truncated record batch: {have} bytes, need {need}")]
    Truncated { have: usize, need: usize },
    /// `batchLength` + 12 differs from the bytes given (one batch per append).
    #[error("record batch length mismatch: header says {header} bytes, got {actual}")]
    LengthMismatch { header: usize, actual: usize },
    /// Only magic 2 (RecordBatch v2, Kafka ≥ 0.11) is stored.
    #[error("unsupported record batch magic {0}, only 2 is accepted")]
    Magic(i8),
    /// CRC-32C over attributes..end did not match the header's `crc`.
    #[error("record batch CRC-32C mismatch: header {header:#010x}, computed {computed:#010x}")]
    Crc { header: u32, computed: u32 },
    /// `recordsCount` must be `lastOffsetDelta + 1` and at least 1.
    #[error("record count {records} does not match last offset delta {last_offset_delta}")]
    RecordCount {
        records: i32,
        last_offset_delta: i32,
    },
    /// The batch is larger than the topic's `max.message.bytes`.
    #[error("record batch of {size} bytes exceeds max.message.bytes {max}")]
    TooLarge { size: usize, max: usize },
    /// A record inside the batch could not be read (or the batch is compressed, where a
    /// record-level reader was asked for).
    #[error("malformed record in batch: {0}")]
    Malformed(&'static str),
    /// A compressed batch's records could not be decompressed or compressed again (the
    /// cleaner's codec, `clean::codec`).
    #[error("records compressed with codec {compression}: {why}")]
    Codec { compression: u8, why: String },
}

/// Errors from the partition log.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The batch failed validation; nothing was appended.
    #[error("invalid record batch: {0}")]
    InvalidBatch(#[from] BatchError),
    /// A read asked for an offset below the log start offset or above the log end offset.
    #[error("offset {offset} out of range [{log_start}, {log_end}]")]
    OffsetOutOfRange {
        offset: Offset,
        log_start: Offset,
        log_end: Offset,
    },
    /// The device has no space left (ENOSPC/EDQUOT). The log stays readable; appends work again
    /// once space returns.
    #[error("no space left on device while {op} {path}")]
    DiskFull { op: &'static str, path: PathBuf },
    /// Any other I/O failure, with the operation and file.
    #[error("I/O error while {op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Bytes on disk that cannot be what this crate wrote (outside the recoverable tail).
    #[error("corrupt log file {path}: {why}")]
    Corrupt { path: PathBuf, why: String },
    /// The log is closed (dropped by its shard or after a fatal write error).
    /// The cleaner's offset map cannot hold the records of one batch (issue #27): raise
    /// `log.cleaner.dedupe.buffer.size`. The log is left as it was.
    #[error(
        "cleaner offset map too small: {keys} free keys, the batch at offset {offset} needs more"
    )]
    CleanerBufferTooSmall { keys: usize, offset: Offset },

    #[error("partition log is closed")]
    Closed,
    /// An idempotent producer's batch does not follow its last sequence (KIP-98); nothing
    /// was appended.
    #[error("producer {producer_id}: sequence {got}, expected {expected}")]
    OutOfOrderSequence {
        producer_id: i64,
        expected: i32,
        got: i32,
    },
    /// An idempotent producer's epoch is older than one already seen (a fenced producer).
    #[error("producer {producer_id}: epoch {got} is older than {current}")]
    InvalidProducerEpoch {
        producer_id: i64,
        current: i16,
        got: i16,
    },
    /// A transactional batch without a producer id, or a non-transactional batch from a
    /// producer whose transaction is open (KIP-98; Kafka's INVALID_TXN_STATE). Nothing was
    /// appended.
    #[error("producer {producer_id}: {why}")]
    InvalidTxnState { producer_id: i64, why: &'static str },
    /// A transaction marker from a coordinator epoch older than the producer's last marker's
    /// (KIP-98; Kafka's TRANSACTION_COORDINATOR_FENCED). Nothing was appended.
    #[error("producer {producer_id}: coordinator epoch {got} is older than {current}")]
    TransactionCoordinatorFenced {
        producer_id: i64,
        current: i32,
        got: i32,
    },
    /// A produce carried a control batch: only the partition leader writes markers, through
    /// [`crate::PartitionLog::append_txn_marker`] (Kafka's INVALID_RECORD). Nothing was
    /// appended.
    #[error("control batch at base offset {base_offset} from a client")]
    ControlBatchFromClient { base_offset: Offset },
    /// A multi-batch append holds a retried batch beside new ones.
    #[error("producer {producer_id}: a duplicate batch among new ones")]
    DuplicateSequence { producer_id: i64 },
    /// A follower's append ([`crate::PartitionLog::append_as_follower`]) does not continue
    /// the log: a batch's base offset is not the log end offset (first batch) or the offset
    /// after the previous batch (Kafka: `UnexpectedAppendOffsetException` /
    /// `OffsetsOutOfOrderException`). Nothing was appended.
    #[error("replicated batch at base offset {got} does not continue the log at {expected}")]
    UnexpectedAppendOffset { expected: Offset, got: Offset },
    /// A replicated batch carries no partition leader epoch (-1): the leader stamps one into
    /// every batch, so this is not a leader's batch. Nothing was appended.
    #[error("replicated batch at base offset {base_offset} has no partition leader epoch")]
    MissingLeaderEpoch { base_offset: Offset },
}

impl StorageError {
    /// Classifies an I/O error: ENOSPC and EDQUOT become [`StorageError::DiskFull`].
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        let path = path.into();
        let full = matches!(
            source.raw_os_error(),
            Some(libc::ENOSPC) | Some(libc::EDQUOT)
        ) || matches!(
            source.kind(),
            std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
        );
        if full {
            StorageError::DiskFull { op, path }
        } else {
            StorageError::Io { op, path, source }
        }
    }

    /// The errno a sticky write error records for this error (ENOSPC for a full disk, the OS
    /// error of an I/O failure, EIO otherwise).
    pub(crate) fn errno(&self) -> i32 {
        match self {
            StorageError::DiskFull { .. } => libc::ENOSPC,
            StorageError::Io { source, .. } => source.raw_os_error().unwrap_or(libc::EIO),
            _ => libc::EIO,
        }
    }
}

/// Result alias for this crate.
pub type Result<T> = std::result::Result<T, StorageError>;
