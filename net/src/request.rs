//! Request decoding: header (KIP-482 header versions) and body, from one frame.
//!
//! A request is `api_key: i16, api_version: i16, correlation_id: i32` (the same 8 bytes in every
//! request header version), then `client_id` (header v1+), then tagged fields (header v2, the
//! flexible versions), then the body for `(api_key, api_version)`. [`decode_request`] reads the
//! fixed 8 bytes itself so that the correlation id is known for every later error, then lets
//! `kafka-protocol` decode the rest from the frame's `Bytes`, so byte fields (produce records,
//! SASL tokens, member metadata) are slices of the frame, not copies.

use bytes::{Buf, Bytes};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind};
use kafka_protocol::protocol::Decodable;

use crate::{ApiVersionTable, NetError};

/// Bytes of the fixed header prefix: api key (2), api version (2), correlation id (4).
const HEADER_PREFIX_BYTES: usize = 8;

/// A decoded request.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The API, already validated against the broker's [`ApiVersionTable`].
    pub api_key: ApiKey,
    /// The request (and response) version.
    pub api_version: i16,
    /// The full request header (`correlation_id`, `client_id`, unknown tagged fields).
    pub header: RequestHeader,
    /// The decoded body. Byte fields point into the request frame.
    pub body: RequestKind,
}

impl Request {
    /// The correlation id the response must carry.
    pub fn correlation_id(&self) -> i32 {
        self.header.correlation_id
    }

    /// The client id (`None` when the client sent a null string).
    pub fn client_id(&self) -> Option<&str> {
        self.header.client_id.as_deref()
    }
}

/// Decodes one request frame (as returned by [`crate::decode_frame`], without the size prefix).
///
/// The version is checked against `supported` before the body is decoded. Trailing bytes after
/// the body are ignored, as Kafka's broker does.
///
/// # Errors
/// - [`NetError::HeaderTruncated`]: fewer than 8 bytes; no correlation id.
/// - [`NetError::UnknownApiKey`]: an API key Kafka does not define.
/// - [`NetError::UnsupportedVersion`]: `supported` does not list this version (or this API). For
///   `ApiVersions` answer with [`crate::encode_api_versions_unsupported`] (KIP-511).
/// - [`NetError::MalformedHeader`], [`NetError::MalformedBody`]: truncated or invalid fields.
///
/// Every error except `UnsupportedVersion` of `ApiVersions` means the connection should be
/// closed. The function never panics, whatever `frame` holds.
pub fn decode_request(frame: Bytes, supported: &ApiVersionTable) -> Result<Request, NetError> {
    let Some(prefix) = frame.first_chunk::<HEADER_PREFIX_BYTES>() else {
        return Err(NetError::HeaderTruncated {
            frame_bytes: frame.len(),
        });
    };
    let mut prefix = &prefix[..];
    let raw_api_key = prefix.get_i16();
    let api_version = prefix.get_i16();
    let correlation_id = prefix.get_i32();

    let api_key = ApiKey::try_from(raw_api_key).map_err(|()| NetError::UnknownApiKey {
        api_key: raw_api_key,
        api_version,
        correlation_id,
    })?;
    if !supported.supports(api_key, api_version) {
        return Err(NetError::UnsupportedVersion {
            api_key,
            api_version,
            correlation_id,
            supported: supported.get(api_key).map(|range| (range.min, range.max)),
        });
    }

    let mut buf = frame;
    let header_version = api_key.request_header_version(api_version);
    let header = RequestHeader::decode(&mut buf, header_version).map_err(|err| {
        NetError::MalformedHeader {
            api_key,
            api_version,
            correlation_id,
            detail: format!("header v{header_version}: {err:#}"),
        }
    })?;
    let body = RequestKind::decode(api_key, &mut buf, api_version).map_err(|err| {
        NetError::MalformedBody {
            api_key,
            api_version,
            correlation_id,
            detail: format!("{err:#}"),
        }
    })?;
    Ok(Request {
        api_key,
        api_version,
        header,
        body,
    })
}
