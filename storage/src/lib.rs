//! Sluice's partition log (DESIGN.md §3): Kafka RecordBatch v2 bytes in preallocated segments
//! written with O_DIRECT through io_uring (`io.rs`, the one module that names the runtime),
//! sparse offset/time indexes, recovery of the active segment's tail,
//! `flush.messages`/`flush.ms` durability with group-committed `fdatasync`, retention, and a
//! per-shard batch cache. For replication (DESIGN.md §9): the leader-epoch
//! cache and its checkpoint, the follower's append of the leader's batches, and the
//! high-watermark checkpoint. For transactions (KIP-98, issue #28): markers, producers' open
//! transactions, the last stable offset and the per-segment aborted-transaction index.
//!
//! Everything here runs on one executor and is owned by one shard: `Rc`/`RefCell`,
//! no locks. Record bytes are `bytes::Bytes`: an append copies a batch twice (once to stamp
//! `baseOffset` into an owned buffer the cache shares, once into the aligned DMA write buffer);
//! reads hand out slices of cached or DMA-read memory and copy nothing.
//! The on-disk format is documented byte by byte in `docs/storage-format.md`.
#![deny(clippy::cast_possible_truncation)]

mod batch;
mod cache;
mod checkpoint;
mod clean;
mod config;
mod crash_point;
mod error;
mod index;
mod io;
mod log;
mod notify;
mod offset_map;
mod producer_state;
mod segment;
mod txn;
mod txn_verification;
mod types;
mod validated;
mod writer;

pub use batch::{
    batch_crc, build_batch, build_batch_kv, count_records, records_of, replace_records,
    split_batches, split_stored_batches, transactional_batch, validate_batch,
    validate_stored_batch, varint, BatchHeader, KeyValue, Record, RecordBatch, BATCH_HEADER_BYTES,
    CONTROL_BIT, TRANSACTIONAL_BIT,
};
pub use cache::{BatchCache, CacheStats};
pub use clean::codec::{NoCodec, RecordsCodec};
pub use clean::filter::{
    clean_batch, clean_marker, discard_batch, CleanRules, Cleaned, DELETE_HORIZON_BIT,
};
pub use clean::swap::{recovery_steps, swap_steps, FsStep};
pub use clean::txn::{AbortedTxnWalk, TxnRole};
pub use clean::{clean_section, fill_map};
pub use config::{CleanerConfig, CleanupPolicy, CompactionConfig, LogConfig};
pub use crash_point::cut_at;
pub use error::{BatchError, Result, StorageError};
pub use log::compact::{CleanReport, CleanerBuffers, Dirtiness};
pub use log::epochs::{EpochEntry, LeaderEpochCache};
pub use log::{
    AppendInfo, AppendUntil, LogStats, PartitionLog, TimestampMatch, SYNC_LATENCY_BUCKETS,
};
pub use notify::{Notified, Notify};
pub use offset_map::{OffsetMap, OffsetMapError, SLOT_BYTES};
pub use producer_state::{BatchMeta, CompletedTxn, ProducerState, ProducerSummary, SequenceCheck};
pub use txn::{
    build_marker_batch, collect_aborted, control_batch_marker, parse_marker, AbortedTxn,
    AbortedTxnEntry, TxnMarker, TxnResult, ABORTED_TXN_BYTES,
};
pub use txn_verification::{VerificationGuard, VerificationStates, VERIFICATION_STATES_MAX};
pub use types::{LeaderEpoch, Offset, TimestampMs, TopicPartition};
pub use validated::{AppendOrigin, ValidatedBatches};

#[cfg(feature = "validation-count")]
pub use batch::validation_passes;
