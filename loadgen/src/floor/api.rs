//! The Kafka APIs the floor answers, at the versions it answers them, and the framing of
//! requests and responses (all codecs from the `kafka-protocol` crate).
//!
//! Served: what librdkafka needs to create a topic, produce with any acks and read with
//! `assign()` — ApiVersions, Metadata, CreateTopics, FindCoordinator (a consumer with a
//! `group.id` looks its coordinator up even when it never joins), Produce, Fetch (without
//! fetch sessions) and ListOffsets. Anything else closes the connection.

use crate::handlers;
use crate::state::Floor;
use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, RequestHeader, RequestKind, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable};

/// (API, lowest version, highest version) served.
const SERVED: [(ApiKey, i16, i16); 7] = [
    (ApiKey::Produce, 3, 9),
    (ApiKey::Fetch, 4, 12),
    (ApiKey::ListOffsets, 1, 7),
    (ApiKey::Metadata, 1, 12),
    (ApiKey::FindCoordinator, 0, 4),
    (ApiKey::ApiVersions, 0, 4),
    (ApiKey::CreateTopics, 2, 7),
];

/// Why a connection is closed.
#[derive(Debug)]
pub enum ApiError {
    /// A frame shorter than a request header, an unknown key or an unserved version.
    Unserved { api_key: i16, api_version: i16 },
    /// The header or body did not decode.
    Malformed(String),
    /// The response did not encode.
    Encode(String),
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApiError::Unserved {
                api_key,
                api_version,
            } => write!(f, "API key {api_key} v{api_version} is not served"),
            ApiError::Malformed(detail) => write!(f, "malformed request: {detail}"),
            ApiError::Encode(detail) => write!(f, "response did not encode: {detail}"),
        }
    }
}

fn served(api_key: ApiKey, api_version: i16) -> bool {
    SERVED
        .iter()
        .any(|&(key, min, max)| key == api_key && (min..=max).contains(&api_version))
}

/// Answers one request frame (without its size prefix); `None` when no answer is due
/// (Produce with acks=0).
///
/// # Errors
/// [`ApiError`]: the connection must be closed.
pub async fn answer(floor: &Floor, frame: Bytes) -> Result<Option<Bytes>, ApiError> {
    if frame.len() < 8 {
        return Err(ApiError::Malformed(format!("{}-byte frame", frame.len())));
    }
    let mut prefix = &frame[..8];
    let raw_key = prefix.get_i16();
    let api_version = prefix.get_i16();
    let correlation_id = prefix.get_i32();
    let unserved = || ApiError::Unserved {
        api_key: raw_key,
        api_version,
    };
    let api_key = ApiKey::try_from(raw_key).map_err(|()| unserved())?;
    if api_key == ApiKey::ApiVersions && !served(api_key, api_version) {
        // KIP-511: a client asking too high gets v0 with UNSUPPORTED_VERSION and the list.
        let body = api_versions(ResponseError::UnsupportedVersion.code());
        return encode(api_key, 0, correlation_id, &body).map(Some);
    }
    if !served(api_key, api_version) {
        return Err(unserved());
    }
    let mut buf = frame;
    RequestHeader::decode(&mut buf, api_key.request_header_version(api_version))
        .map_err(|e| ApiError::Malformed(format!("header: {e:#}")))?;
    let body = RequestKind::decode(api_key, &mut buf, api_version)
        .map_err(|e| ApiError::Malformed(format!("{api_key:?} v{api_version}: {e:#}")))?;
    let encoded = match body {
        RequestKind::ApiVersions(_) => {
            encode(api_key, api_version, correlation_id, &api_versions(0))
        }
        RequestKind::Metadata(request) => {
            let body = handlers::metadata(floor, &request);
            encode(api_key, api_version, correlation_id, &body)
        }
        RequestKind::CreateTopics(request) => {
            let body = handlers::create_topics(floor, &request).await;
            encode(api_key, api_version, correlation_id, &body)
        }
        RequestKind::FindCoordinator(request) => {
            let body = handlers::find_coordinator(floor, &request, api_version);
            encode(api_key, api_version, correlation_id, &body)
        }
        RequestKind::Produce(request) => {
            let acks = request.acks;
            let body = handlers::produce(floor, &request).await;
            if acks == 0 {
                return Ok(None);
            }
            encode(api_key, api_version, correlation_id, &body)
        }
        RequestKind::Fetch(request) => {
            let body = handlers::fetch(floor, &request).await;
            encode(api_key, api_version, correlation_id, &body)
        }
        RequestKind::ListOffsets(request) => {
            let body = handlers::list_offsets(floor, &request);
            encode(api_key, api_version, correlation_id, &body)
        }
        _ => Err(unserved()),
    };
    encoded.map(Some)
}

/// The ApiVersions answer listing [`SERVED`].
fn api_versions(error_code: i16) -> ApiVersionsResponse {
    let mut keys: Vec<ApiVersion> = SERVED
        .iter()
        .map(|&(key, min, max)| {
            ApiVersion::default()
                .with_api_key(key as i16)
                .with_min_version(min)
                .with_max_version(max)
        })
        .collect();
    keys.sort_by_key(|k| k.api_key);
    ApiVersionsResponse::default()
        .with_error_code(error_code)
        .with_api_keys(keys)
}

/// Size prefix, response header and body.
fn encode<M: Encodable>(
    api_key: ApiKey,
    api_version: i16,
    correlation_id: i32,
    body: &M,
) -> Result<Bytes, ApiError> {
    let mut buf = BytesMut::with_capacity(256);
    buf.extend_from_slice(&[0; 4]);
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut buf, api_key.response_header_version(api_version))
        .map_err(|e| ApiError::Encode(format!("header: {e:#}")))?;
    body.encode(&mut buf, api_version)
        .map_err(|e| ApiError::Encode(format!("{api_key:?} v{api_version}: {e:#}")))?;
    let size = i32::try_from(buf.len() - 4)
        .map_err(|_| ApiError::Encode(format!("{}-byte response", buf.len())))?;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    Ok(buf.freeze())
}
