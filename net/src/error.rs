//! The crate's error type.
//!
//! Every variant carries the context the broker needs to decide what to do: the correlation id
//! where the header got that far, the API key and version, and a detail string from the
//! `kafka-protocol` decoder. Kafka error codes are not chosen here: the broker maps variants to
//! Kafka error codes (or to closing the connection) with an exhaustive `match`.

use kafka_protocol::messages::ApiKey;

/// Errors of frame decoding, request decoding and response encoding.
///
/// Request-side variants (everything except [`NetError::Encode`], [`NetError::FetchTooLarge`]
/// and [`NetError::InvalidVersionRange`]) mean the client sent bytes the broker cannot serve.
/// Kafka's broker closes the connection for all of them except an `ApiVersions` request at an
/// unsupported version, which it answers with `UNSUPPORTED_VERSION` (see
/// [`crate::encode_api_versions_unsupported`], KIP-511).
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// The 4-byte frame size prefix is negative.
    #[error("frame size {size} is negative")]
    FrameSizeNegative {
        /// The size read from the prefix, in bytes.
        size: i32,
    },

    /// The 4-byte frame size prefix is zero: a request has at least an 8-byte header.
    #[error("frame size is 0")]
    FrameSizeZero,

    /// The frame size exceeds `socket.request.max.bytes`.
    #[error(
        "frame size {size} bytes exceeds socket.request.max.bytes ({socket_request_max_bytes})"
    )]
    FrameTooLarge {
        /// The size read from the prefix, in bytes.
        size: usize,
        /// The configured limit, in bytes.
        socket_request_max_bytes: usize,
    },

    /// The frame is shorter than the fixed request header prefix (api key, api version,
    /// correlation id: 8 bytes), so not even the correlation id is known.
    #[error("request frame of {frame_bytes} bytes is shorter than the 8-byte header prefix")]
    HeaderTruncated {
        /// The frame length, in bytes (without the size prefix).
        frame_bytes: usize,
    },

    /// The API key is not one Kafka defines (as known to `kafka-protocol` 0.18.0).
    /// Kafka closes the connection.
    #[error("unknown api key {api_key} (version {api_version}, correlation id {correlation_id})")]
    UnknownApiKey {
        /// The raw API key.
        api_key: i16,
        /// The raw API version.
        api_version: i16,
        /// The correlation id from the header.
        correlation_id: i32,
    },

    /// The broker does not serve this API at this version (per its [`crate::ApiVersionTable`]).
    ///
    /// For `ApiVersions` the broker answers with [`crate::encode_api_versions_unsupported`];
    /// for any other API Kafka closes the connection.
    #[error(
        "unsupported version {api_version} of {api_key:?} (supported: {supported:?}, \
         correlation id {correlation_id})"
    )]
    UnsupportedVersion {
        /// The API.
        api_key: ApiKey,
        /// The requested version.
        api_version: i16,
        /// The correlation id from the header.
        correlation_id: i32,
        /// The versions the broker serves, `None` when it does not serve the API at all.
        supported: Option<(i16, i16)>,
    },

    /// The request header (client id, tagged fields) could not be decoded.
    #[error(
        "malformed request header of {api_key:?} v{api_version} \
         (correlation id {correlation_id}): {detail}"
    )]
    MalformedHeader {
        /// The API.
        api_key: ApiKey,
        /// The requested version.
        api_version: i16,
        /// The correlation id from the header.
        correlation_id: i32,
        /// What the decoder reported.
        detail: String,
    },

    /// The request body is truncated or malformed.
    #[error(
        "malformed request body of {api_key:?} v{api_version} \
         (correlation id {correlation_id}): {detail}"
    )]
    MalformedBody {
        /// The API.
        api_key: ApiKey,
        /// The requested version.
        api_version: i16,
        /// The correlation id from the header.
        correlation_id: i32,
        /// What the decoder reported.
        detail: String,
    },

    /// A response could not be encoded (a field not representable at this version, or a size
    /// above the protocol's limits). A broker bug, not a client error.
    #[error("cannot encode {api_key:?} v{api_version} response: {detail}")]
    Encode {
        /// The API.
        api_key: ApiKey,
        /// The response version.
        api_version: i16,
        /// What the encoder reported.
        detail: String,
    },

    /// A Fetch response (or one partition's records) is too large for the protocol's i32 sizes.
    #[error("fetch response too large: {detail}")]
    FetchTooLarge {
        /// Which size overflowed.
        detail: String,
    },

    /// An [`crate::ApiVersionTable`] entry is empty or outside what `kafka-protocol` can
    /// decode for this API.
    #[error(
        "invalid version range {min}..={max} for {api_key:?} \
         (kafka-protocol supports {codec_min}..={codec_max})"
    )]
    InvalidVersionRange {
        /// The API.
        api_key: ApiKey,
        /// The requested minimum version.
        min: i16,
        /// The requested maximum version.
        max: i16,
        /// The minimum version the codec supports.
        codec_min: i16,
        /// The maximum version the codec supports.
        codec_max: i16,
    },
}

impl NetError {
    /// The correlation id of the request this error is about, when the header got far enough to
    /// carry one.
    pub fn correlation_id(&self) -> Option<i32> {
        match self {
            NetError::UnknownApiKey { correlation_id, .. }
            | NetError::UnsupportedVersion { correlation_id, .. }
            | NetError::MalformedHeader { correlation_id, .. }
            | NetError::MalformedBody { correlation_id, .. } => Some(*correlation_id),
            NetError::FrameSizeNegative { .. }
            | NetError::FrameSizeZero
            | NetError::FrameTooLarge { .. }
            | NetError::HeaderTruncated { .. }
            | NetError::Encode { .. }
            | NetError::FetchTooLarge { .. }
            | NetError::InvalidVersionRange { .. } => None,
        }
    }
}
