//! Kafka wire protocol for Sluice: frame codec, request decoding, response encoding, and the
//! zero-copy Fetch response framer.
//!
//! This crate knows nothing of storage, shards or the broker, and depends on no runtime: every
//! function is a pure function over [`bytes::Bytes`] / [`bytes::BytesMut`]. The broker's
//! connection loop (on glommio, one connection per shard) reads into a `BytesMut`, calls
//! [`decode_frame`] until it returns [`FrameStatus::NeedBytes`], hands each frame to
//! [`decode_request`], and writes what [`encode_response`] / [`encode_fetch_response`] return.
//!
//! Message codecs come from the `kafka-protocol` crate (0.18.0, patched in
//! `third_party/kafka-protocol/` so that wire-driven lengths cannot trigger huge allocations;
//! see its `SLUICE-PATCH.md`).
//!
//! Invariants:
//! 1. No input from the network causes a panic or an abort: every malformed frame, header or body
//!    is a [`NetError`] value, and every such error means "close this connection" unless the
//!    variant's docs say the broker can answer it.
//! 2. Record data is never copied: produce records stay `Bytes` slices of the request frame, and
//!    fetch responses carry the log's batch `Bytes` untouched between small encoded chunks.
//! 3. No lossy integer casts on wire sizes (`clippy::cast_possible_truncation` is denied).
#![deny(clippy::cast_possible_truncation)]
#![deny(missing_docs)]

mod error;
mod fetch;
mod frame;
mod request;
mod response;
mod versions;

pub use error::NetError;
pub use fetch::{
    encode_fetch_response, FetchAbortedTransaction, FetchCurrentLeader, FetchEpochEndOffset,
    FetchNodeEndpoint, FetchPartitionData, FetchResponseData, FetchTopicData,
    FETCH_FRAMER_VERSIONS,
};
pub use frame::{
    decode_frame, FrameStatus, FRAME_SIZE_PREFIX_BYTES, SOCKET_REQUEST_MAX_BYTES_DEFAULT,
};
pub use request::{decode_request, Request};
pub use response::{
    encode_api_versions_unsupported, encode_response, encode_response_kind, response_header_version,
};
pub use versions::ApiVersionTable;

/// Re-export of the `kafka-protocol` crate this crate is built on (patched copy), so that the
/// broker names the same message types and version numbers.
pub use kafka_protocol;
