//! Response encoding: size prefix, response header, body (Kafka protocol guide, "Common Request
//! and Response Structure"; KIP-482 flexible header versions; KIP-511 for `ApiVersions`).
//!
//! A response frame is `size: i32` (bytes after the prefix), then the response header
//! (v0: `correlation_id`; v1: `correlation_id` + tagged fields), then the body at the request's
//! version. The header version follows from (api key, version) via [`response_header_version`].

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{ApiKey, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::Encodable;

use crate::frame::FRAME_SIZE_PREFIX_BYTES;

/// Room for the size prefix and a response header (v1: correlation id and empty tagged
/// fields), in bytes.
const HEADER_BYTES_MAX: usize = 16;
use crate::{ApiVersionTable, NetError};

/// The response header version for `api_key` at `api_version`: 1 for flexible versions, else 0.
///
/// `ApiVersions` responses always use header v0, whatever the version (KIP-511): a client that
/// sent a version the broker does not know must still be able to parse the answer.
pub fn response_header_version(api_key: ApiKey, api_version: i16) -> i16 {
    if api_key == ApiKey::ApiVersions {
        return 0;
    }
    api_key.response_header_version(api_version)
}

/// Encodes a complete response frame (size prefix, header, body) for a request of `api_key` at
/// `api_version` with `correlation_id`. `body` must be the response type of `api_key`.
///
/// # Errors
/// [`NetError::Encode`] when `kafka-protocol` rejects the body at this version (a field set that
/// the version cannot carry, a version outside its range) or the frame exceeds `i32::MAX` bytes.
pub fn encode_response<M: Encodable>(
    api_key: ApiKey,
    api_version: i16,
    correlation_id: i32,
    body: &M,
) -> Result<Bytes, NetError> {
    let body_bytes = body
        .compute_size(api_version)
        .map_err(|err| NetError::Encode {
            api_key,
            api_version,
            detail: format!("{err:#}"),
        })?;
    encode_with(api_key, api_version, correlation_id, body_bytes, |buf| {
        body.encode(buf, api_version)
            .map_err(|err| format!("{err:#}"))
    })
}

/// As [`encode_response`], for a body held as a [`ResponseKind`].
///
/// # Errors
/// As [`encode_response`].
pub fn encode_response_kind(
    api_key: ApiKey,
    api_version: i16,
    correlation_id: i32,
    body: &ResponseKind,
) -> Result<Bytes, NetError> {
    encode_with(api_key, api_version, correlation_id, 0, |buf| {
        body.encode(buf, api_version)
            .map_err(|err| format!("{err:#}"))
    })
}

/// The answer to an `ApiVersions` request at a version the broker does not serve (KIP-511):
/// error code 35 (`UNSUPPORTED_VERSION`) and the supported API ranges from `table`, encoded in
/// the v0 layout with response header v0, so that any client version can parse it and retry
/// with a version from the list.
///
/// # Errors
/// [`NetError::Encode`] only if the v0 encoder rejects the response (it cannot for a table built
/// by [`ApiVersionTable`]).
pub fn encode_api_versions_unsupported(
    correlation_id: i32,
    table: &ApiVersionTable,
) -> Result<Bytes, NetError> {
    let body = table.to_api_versions_response(ResponseError::UnsupportedVersion.code(), 0);
    encode_response(ApiKey::ApiVersions, 0, correlation_id, &body)
}

/// Writes prefix and header, lets `encode_body` append the body (reporting `kafka-protocol`'s
/// error as text), then fills in the prefix. `body_bytes`: the body's size where known (one
/// allocation for the whole frame), else 0.
fn encode_with(
    api_key: ApiKey,
    api_version: i16,
    correlation_id: i32,
    body_bytes: usize,
    encode_body: impl FnOnce(&mut BytesMut) -> Result<(), String>,
) -> Result<Bytes, NetError> {
    let encode_error = |detail: String| NetError::Encode {
        api_key,
        api_version,
        detail,
    };
    let header_version = response_header_version(api_key, api_version);
    let header = ResponseHeader::default().with_correlation_id(correlation_id);

    let mut buf = BytesMut::with_capacity(HEADER_BYTES_MAX + body_bytes);
    buf.put_i32(0); // Size prefix, filled in below.
    header
        .encode(&mut buf, header_version)
        .map_err(|err| encode_error(format!("header v{header_version}: {err:#}")))?;
    encode_body(&mut buf).map_err(encode_error)?;

    let frame_bytes = buf.len() - FRAME_SIZE_PREFIX_BYTES;
    let size = i32::try_from(frame_bytes)
        .map_err(|_| encode_error(format!("frame of {frame_bytes} bytes exceeds i32::MAX")))?;
    buf[..FRAME_SIZE_PREFIX_BYTES].copy_from_slice(&size.to_be_bytes());
    Ok(buf.freeze())
}
