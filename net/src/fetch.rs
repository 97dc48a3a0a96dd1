//! Zero-copy Fetch response framing (Kafka protocol guide, `FetchResponse` v4–v18; KIP-482
//! flexible versions from v12, KIP-516 topic ids from v13).
//!
//! `kafka-protocol`'s `FetchResponse` encoder copies every partition's records into the output
//! buffer. [`encode_fetch_response`] instead encodes only the small fields and returns them as
//! chunks interleaved with the caller's record batch `Bytes`, untouched: the connection loop
//! writes the chunks in order (io_uring batches the writes), and no record byte is copied in user
//! space (DESIGN.md §3, §8).
//!
//! Layout written, per version (a tagged field is written only when set, as Kafka's generated
//! encoders leave out a tagged field equal to its default; `snapshot_id` is never set here):
//!
//! ```text
//! size i32 | correlation_id i32 | [v12+ header tagged fields]
//! throttle_time_ms i32 | [v7+ error_code i16, session_id i32]
//! topics: array of
//!   [v4-12 topic name] [v13+ topic_id uuid]
//!   partitions: array of
//!     partition_index i32, error_code i16, high_watermark i64, last_stable_offset i64,
//!     [v5+ log_start_offset i64], aborted_transactions nullable array of
//!     (producer_id i64, first_offset i64), [v11+ preferred_read_replica i32],
//!     records bytes  <- the batches, as given
//!     [v12+ tagged fields: 0 diverging_epoch, 1 current_leader (KIP-951)]
//! [v16+ tagged field 0: node_endpoints (KIP-951)]
//! ```
//!
//! v12+ use compact (unsigned varint, +1) lengths and end every struct with a tagged field
//! section (empty unless a tagged field is set).

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, TopicName};
use kafka_protocol::protocol::VersionRange;
use uuid::Uuid;

use crate::frame::FRAME_SIZE_PREFIX_BYTES;
use crate::response::response_header_version;
use crate::NetError;

/// The Fetch versions [`encode_fetch_response`] can frame.
pub const FETCH_FRAMER_VERSIONS: VersionRange = VersionRange { min: 4, max: 18 };

/// First flexible (compact lengths, tagged fields) Fetch version.
const FIRST_FLEXIBLE_VERSION: i16 = 12;
/// First Fetch version that names topics by id instead of name (KIP-516).
const FIRST_TOPIC_ID_VERSION: i16 = 13;

/// The top-level fields of a Fetch response.
#[derive(Debug, Clone, PartialEq)]
pub struct FetchResponseData {
    /// Quota throttle time, in milliseconds.
    pub throttle_time_ms: i32,
    /// Top-level error code (v7+; must be 0 for v4–v6).
    pub error_code: i16,
    /// Fetch session id (KIP-227, v7+; must be 0 for v4–v6).
    pub session_id: i32,
    /// Per-topic responses, in the order to write them.
    pub topics: Vec<FetchTopicData>,
    /// KIP-951: the endpoints of the leaders named in the partitions' `current_leader`
    /// (tagged field 0, v16+; written when non-empty).
    pub node_endpoints: Vec<FetchNodeEndpoint>,
}

/// One broker of a Fetch response's `node_endpoints` (KIP-951, v16+).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchNodeEndpoint {
    /// The broker's node id.
    pub node_id: i32,
    /// The host of its listener.
    pub host: String,
    /// The port of its listener.
    pub port: i32,
    /// Its rack, `None` when it has none.
    pub rack: Option<String>,
}

/// One topic of a Fetch response.
#[derive(Debug, Clone, PartialEq)]
pub struct FetchTopicData {
    /// The topic name, written for v4–v12.
    pub topic: TopicName,
    /// The topic id, written for v13+ (KIP-516).
    pub topic_id: Uuid,
    /// Per-partition responses, in the order to write them.
    pub partitions: Vec<FetchPartitionData>,
}

/// One partition of a Fetch response.
#[derive(Debug, Clone, PartialEq)]
pub struct FetchPartitionData {
    /// The partition index.
    pub partition_index: i32,
    /// The partition's error code (0 for none).
    pub error_code: i16,
    /// The high watermark (offset).
    pub high_watermark: i64,
    /// The last stable offset (offset; equals the high watermark without transactions).
    pub last_stable_offset: i64,
    /// The log start offset (offset; written for v5+).
    pub log_start_offset: i64,
    /// Aborted transactions in the returned range; `None` is written as a null array, as Kafka
    /// does for `READ_UNCOMMITTED` fetches.
    pub aborted_transactions: Option<Vec<FetchAbortedTransaction>>,
    /// The preferred read replica (KIP-392, v11+; must be -1 below v11), -1 for none.
    pub preferred_read_replica: i32,
    /// Whole RecordBatch v2 byte strings, written back to back and never copied. Empty for no
    /// records (written as zero-length, non-null records).
    pub records: Vec<Bytes>,
    /// KIP-320: the epoch at which a follower's log diverges from the leader's and its end
    /// offset on the leader (tagged field 0, v12+); `None` for none.
    pub diverging_epoch: Option<FetchEpochEndOffset>,
    /// KIP-951: the partition's current leader and its epoch, given with
    /// NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH (tagged field 1, v12+; Kafka fills it
    /// from v16). `None`, or leader and epoch both -1 (the default), is not written.
    pub current_leader: Option<FetchCurrentLeader>,
}

/// A Fetch response's `current_leader` (Kafka's `LeaderIdAndEpoch`, KIP-951).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchCurrentLeader {
    /// The leader's node id, -1 when unknown.
    pub leader_id: i32,
    /// The leader epoch, -1 when unknown.
    pub leader_epoch: i32,
}

impl FetchCurrentLeader {
    /// Kafka's default `LeaderIdAndEpoch`, which is never written.
    const UNKNOWN: FetchCurrentLeader = FetchCurrentLeader {
        leader_id: -1,
        leader_epoch: -1,
    };
}

/// Bytes of a `current_leader` struct: leader id i32, leader epoch i32, empty tagged fields.
const LEADER_ID_AND_EPOCH_BYTES: u32 = 4 + 4 + 1;
/// First Fetch version with `node_endpoints` (KIP-951).
const FIRST_NODE_ENDPOINTS_VERSION: i16 = 16;

/// A Fetch response's `diverging_epoch` (Kafka's `EpochEndOffset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchEpochEndOffset {
    /// The leader epoch.
    pub epoch: i32,
    /// Its end offset on the leader (offset).
    pub end_offset: i64,
}

/// Bytes of a `diverging_epoch` struct: epoch i32, end offset i64, empty tagged fields.
const EPOCH_END_OFFSET_BYTES: u32 = 4 + 8 + 1;

/// One aborted transaction of a partition's fetch response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchAbortedTransaction {
    /// The producer id of the aborted transaction.
    pub producer_id: i64,
    /// The first offset of the aborted transaction.
    pub first_offset: i64,
}

/// Encodes a Fetch response of `api_version` for `correlation_id` as a list of chunks whose
/// concatenation is the complete response frame (size prefix included).
///
/// The first chunk holds the size prefix, the response header (v1 for flexible versions) and
/// the fields up to the first partition's records; then each non-empty record batch follows as
/// the caller's own `Bytes` (same allocation, no copy), separated by encoded field chunks.
///
/// # Errors
/// - [`NetError::Encode`]: `api_version` outside [`FETCH_FRAMER_VERSIONS`], a field the version
///   cannot carry (non-zero `error_code`/`session_id` below v7, a preferred read replica below
///   v11), or a topic name longer than `i16::MAX` bytes below v12.
/// - [`NetError::FetchTooLarge`]: a partition's records, an array, or the whole frame larger than
///   the protocol's `i32` sizes allow.
pub fn encode_fetch_response(
    api_version: i16,
    correlation_id: i32,
    response: &FetchResponseData,
) -> Result<Vec<Bytes>, NetError> {
    let encode_error = |detail: String| encode_error(api_version, detail);
    if !(FETCH_FRAMER_VERSIONS.min..=FETCH_FRAMER_VERSIONS.max).contains(&api_version) {
        return Err(encode_error(format!(
            "the fetch framer supports versions {}..={}",
            FETCH_FRAMER_VERSIONS.min, FETCH_FRAMER_VERSIONS.max
        )));
    }
    let flexible = api_version >= FIRST_FLEXIBLE_VERSION;

    // All encoded fields go into one buffer; `cuts` remembers where each partition's records go.
    let mut fields = BytesMut::with_capacity(64 + 64 * partition_count(response));
    let mut cuts: Vec<(usize, &[Bytes])> = Vec::new();
    let mut records_total_bytes: usize = 0;

    fields.put_i32(0); // Size prefix, filled in below.
    fields.put_i32(correlation_id);
    if response_header_version(ApiKey::Fetch, api_version) >= 1 {
        put_empty_tagged_fields(&mut fields);
    }

    fields.put_i32(response.throttle_time_ms);
    if api_version >= 7 {
        fields.put_i16(response.error_code);
        fields.put_i32(response.session_id);
    } else if response.error_code != 0 || response.session_id != 0 {
        return Err(encode_error(
            "error_code and session_id need version 7 or later".to_owned(),
        ));
    }

    put_array_len(&mut fields, response.topics.len(), flexible)?;
    for topic in &response.topics {
        if api_version < FIRST_TOPIC_ID_VERSION {
            put_string(&mut fields, &topic.topic, flexible).map_err(encode_error)?;
        } else {
            fields.put_slice(topic.topic_id.as_bytes());
        }
        put_array_len(&mut fields, topic.partitions.len(), flexible)?;
        for partition in &topic.partitions {
            encode_partition(
                api_version,
                &mut fields,
                partition,
                &mut cuts,
                &mut records_total_bytes,
            )?;
        }
        if flexible {
            put_empty_tagged_fields(&mut fields);
        }
    }
    put_response_tagged_fields(api_version, &mut fields, &response.node_endpoints)?;

    let frame_bytes = (fields.len() - FRAME_SIZE_PREFIX_BYTES)
        .checked_add(records_total_bytes)
        .and_then(|total| i32::try_from(total).ok())
        .ok_or_else(|| too_large("response frame exceeds i32::MAX bytes"))?;
    fields[..FRAME_SIZE_PREFIX_BYTES].copy_from_slice(&frame_bytes.to_be_bytes());

    Ok(split_at_cuts(fields.freeze(), cuts))
}

/// One partition of a Fetch response: its fields into `fields`, and where its records go
/// (`cuts`, `records_total_bytes`) when it has any.
fn encode_partition<'a>(
    api_version: i16,
    fields: &mut BytesMut,
    partition: &'a FetchPartitionData,
    cuts: &mut Vec<(usize, &'a [Bytes])>,
    records_total_bytes: &mut usize,
) -> Result<(), NetError> {
    let flexible = api_version >= FIRST_FLEXIBLE_VERSION;
    fields.put_i32(partition.partition_index);
    fields.put_i16(partition.error_code);
    fields.put_i64(partition.high_watermark);
    fields.put_i64(partition.last_stable_offset);
    if api_version >= 5 {
        fields.put_i64(partition.log_start_offset);
    }
    put_aborted_transactions(fields, partition.aborted_transactions.as_deref(), flexible)?;
    if api_version >= 11 {
        fields.put_i32(partition.preferred_read_replica);
    } else if partition.preferred_read_replica != -1 {
        return Err(encode_error(
            api_version,
            "preferred_read_replica needs version 11 or later".to_owned(),
        ));
    }

    let records_bytes = partition
        .records
        .iter()
        .try_fold(0usize, |sum, batch| sum.checked_add(batch.len()))
        .ok_or_else(|| too_large("partition records length overflows usize"))?;
    if flexible {
        put_compact_len(fields, records_bytes)?;
    } else {
        fields.put_i32(i32::try_from(records_bytes).map_err(|_| {
            too_large(format!(
                "partition {} records of {records_bytes} bytes exceed i32::MAX",
                partition.partition_index
            ))
        })?);
    }
    if records_bytes > 0 {
        cuts.push((fields.len(), &partition.records));
        *records_total_bytes = records_total_bytes
            .checked_add(records_bytes)
            .ok_or_else(|| too_large("records length overflows usize"))?;
    }
    put_partition_tagged_fields(api_version, fields, partition)
}

/// A partition's tagged fields (v12+): diverging_epoch and current_leader; below v12 neither
/// may be set.
fn put_partition_tagged_fields(
    api_version: i16,
    fields: &mut BytesMut,
    partition: &FetchPartitionData,
) -> Result<(), NetError> {
    let flexible = api_version >= FIRST_FLEXIBLE_VERSION;
    let current_leader = partition
        .current_leader
        .filter(|leader| *leader != FetchCurrentLeader::UNKNOWN);
    if !flexible {
        if partition.diverging_epoch.is_some() || current_leader.is_some() {
            return Err(encode_error(
                api_version,
                "diverging_epoch and current_leader need version 12 or later".to_owned(),
            ));
        }
        return Ok(());
    }
    let tagged =
        u32::from(partition.diverging_epoch.is_some()) + u32::from(current_leader.is_some());
    put_uvarint(fields, tagged);
    if let Some(diverging) = partition.diverging_epoch {
        put_uvarint(fields, 0); // Tag 0, diverging_epoch.
        put_uvarint(fields, EPOCH_END_OFFSET_BYTES);
        fields.put_i32(diverging.epoch);
        fields.put_i64(diverging.end_offset);
        put_empty_tagged_fields(fields);
    }
    if let Some(leader) = current_leader {
        put_uvarint(fields, 1); // Tag 1, current_leader.
        put_uvarint(fields, LEADER_ID_AND_EPOCH_BYTES);
        fields.put_i32(leader.leader_id);
        fields.put_i32(leader.leader_epoch);
        put_empty_tagged_fields(fields);
    }
    Ok(())
}

/// A partition's aborted transactions: a (compact) nullable array.
fn put_aborted_transactions(
    fields: &mut BytesMut,
    aborted: Option<&[FetchAbortedTransaction]>,
    flexible: bool,
) -> Result<(), NetError> {
    match aborted {
        None if flexible => put_uvarint(fields, 0),
        None => fields.put_i32(-1),
        Some(aborted) => {
            put_array_len(fields, aborted.len(), flexible)?;
            for transaction in aborted {
                fields.put_i64(transaction.producer_id);
                fields.put_i64(transaction.first_offset);
                if flexible {
                    put_empty_tagged_fields(fields);
                }
            }
        }
    }
    Ok(())
}

/// The response's tagged fields (v12+): node_endpoints (v16+, only when there are any).
fn put_response_tagged_fields(
    api_version: i16,
    fields: &mut BytesMut,
    node_endpoints: &[FetchNodeEndpoint],
) -> Result<(), NetError> {
    let flexible = api_version >= FIRST_FLEXIBLE_VERSION;
    if api_version >= FIRST_NODE_ENDPOINTS_VERSION && !node_endpoints.is_empty() {
        let mut endpoints = BytesMut::new();
        put_node_endpoints(&mut endpoints, node_endpoints)?;
        let endpoints_bytes = u32::try_from(endpoints.len())
            .map_err(|_| too_large("node_endpoints exceed u32::MAX bytes"))?;
        put_uvarint(fields, 1); // One tagged field:
        put_uvarint(fields, 0); // tag 0, node_endpoints.
        put_uvarint(fields, endpoints_bytes);
        fields.put_slice(&endpoints);
    } else if !node_endpoints.is_empty() {
        return Err(encode_error(
            api_version,
            "node_endpoints need version 16 or later".to_owned(),
        ));
    } else if flexible {
        put_empty_tagged_fields(fields);
    }
    Ok(())
}

/// An encoding error of a Fetch response of `api_version`.
fn encode_error(api_version: i16, detail: String) -> NetError {
    NetError::Encode {
        api_key: ApiKey::Fetch,
        api_version,
        detail,
    }
}

/// The encoded fields cut where each partition's records go, with the records in between.
fn split_at_cuts(fields: Bytes, cuts: Vec<(usize, &[Bytes])>) -> Vec<Bytes> {
    let mut chunks = Vec::with_capacity(1 + 2 * cuts.len() + records_chunk_count(&cuts));
    let mut start = 0;
    for (cut, batches) in cuts {
        if cut > start {
            chunks.push(fields.slice(start..cut));
        }
        chunks.extend(batches.iter().filter(|batch| !batch.is_empty()).cloned());
        start = cut;
    }
    if fields.len() > start {
        chunks.push(fields.slice(start..));
    }
    chunks
}

/// `node_endpoints` as a compact array of `NodeEndpoint` (node id i32, host compact string,
/// port i32, rack compact nullable string, empty tagged fields).
fn put_node_endpoints(buf: &mut BytesMut, endpoints: &[FetchNodeEndpoint]) -> Result<(), NetError> {
    put_compact_len(buf, endpoints.len())?;
    for endpoint in endpoints {
        buf.put_i32(endpoint.node_id);
        put_compact_len(buf, endpoint.host.len())?;
        buf.put_slice(endpoint.host.as_bytes());
        buf.put_i32(endpoint.port);
        match &endpoint.rack {
            None => put_uvarint(buf, 0),
            Some(rack) => {
                put_compact_len(buf, rack.len())?;
                buf.put_slice(rack.as_bytes());
            }
        }
        put_empty_tagged_fields(buf);
    }
    Ok(())
}

fn partition_count(response: &FetchResponseData) -> usize {
    response
        .topics
        .iter()
        .map(|topic| topic.partitions.len())
        .sum()
}

fn records_chunk_count(cuts: &[(usize, &[Bytes])]) -> usize {
    cuts.iter().map(|(_, batches)| batches.len()).sum()
}

fn too_large(detail: impl Into<String>) -> NetError {
    NetError::FetchTooLarge {
        detail: detail.into(),
    }
}

/// Unsigned varint (protobuf style, 7 bits per byte, low bits first), as Kafka's
/// `ByteUtils.writeUnsignedVarint`.
fn put_uvarint(buf: &mut BytesMut, mut value: u32) {
    while value >= 0x80 {
        // The mask keeps 7 bits, so the cast is exact.
        buf.put_u8(u8::try_from(value & 0x7f).unwrap_or(0) | 0x80);
        value >>= 7;
    }
    buf.put_u8(u8::try_from(value).unwrap_or(0));
}

/// An empty tagged field section: a count of 0.
fn put_empty_tagged_fields(buf: &mut BytesMut) {
    put_uvarint(buf, 0);
}

/// A compact length (`len + 1` as an unsigned varint) for a non-null array, string or bytes.
fn put_compact_len(buf: &mut BytesMut, len: usize) -> Result<(), NetError> {
    let encoded = len
        .checked_add(1)
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| too_large(format!("compact length {len} exceeds u32::MAX - 1")))?;
    put_uvarint(buf, encoded);
    Ok(())
}

/// A non-null array length: compact for flexible versions, else `i32`.
fn put_array_len(buf: &mut BytesMut, len: usize, flexible: bool) -> Result<(), NetError> {
    if flexible {
        return put_compact_len(buf, len);
    }
    let len = i32::try_from(len)
        .map_err(|_| too_large(format!("array of {len} elements exceeds i32::MAX")))?;
    buf.put_i32(len);
    Ok(())
}

/// A non-null string: compact for flexible versions, else `i16` length.
fn put_string(buf: &mut BytesMut, value: &str, flexible: bool) -> Result<(), String> {
    if flexible {
        return put_compact_len(buf, value.len())
            .map_err(|err| err.to_string())
            .map(|()| {
                buf.put_slice(value.as_bytes());
            });
    }
    let len = i16::try_from(value.len())
        .map_err(|_| format!("string of {} bytes exceeds i16::MAX", value.len()))?;
    buf.put_i16(len);
    buf.put_slice(value.as_bytes());
    Ok(())
}
