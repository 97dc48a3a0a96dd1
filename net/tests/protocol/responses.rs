//! Response encoding: size prefix, header versions (KIP-482), ApiVersions (KIP-511).

use bytes::{Buf, Bytes};
use net::kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, MetadataResponse, ResponseHeader, ResponseKind,
};
use net::kafka_protocol::protocol::Decodable;
use net::response_header_version;
use net::{
    encode_api_versions_unsupported, encode_response, encode_response_kind, ApiVersionTable,
};

fn table() -> ApiVersionTable {
    ApiVersionTable::new()
        .with(ApiKey::Produce, 3, 11)
        .unwrap()
        .with(ApiKey::Fetch, 4, 16)
        .unwrap()
        .with(ApiKey::Metadata, 0, 12)
        .unwrap()
        .with(ApiKey::ApiVersions, 0, 4)
        .unwrap()
}

/// Checks the size prefix, strips it and the header, returns (correlation id, body).
fn split_frame(frame: &Bytes, header_version: i16) -> (i32, Bytes) {
    let mut buf = frame.clone();
    let size = buf.get_i32();
    assert_eq!(
        usize::try_from(size).unwrap(),
        buf.len(),
        "size prefix must match"
    );
    let header = ResponseHeader::decode(&mut buf, header_version).unwrap();
    (header.correlation_id, buf)
}

#[test]
fn header_versions_follow_flexible_versions() {
    assert_eq!(response_header_version(ApiKey::Metadata, 8), 0);
    assert_eq!(response_header_version(ApiKey::Metadata, 9), 1);
    assert_eq!(response_header_version(ApiKey::Fetch, 11), 0);
    assert_eq!(response_header_version(ApiKey::Fetch, 12), 1);
    assert_eq!(response_header_version(ApiKey::Produce, 8), 0);
    assert_eq!(response_header_version(ApiKey::Produce, 9), 1);
}

#[test]
fn api_versions_response_header_is_always_v0() {
    // KIP-511: even the flexible ApiVersions v3+ responses use header v0.
    for version in 0..=4 {
        assert_eq!(response_header_version(ApiKey::ApiVersions, version), 0);
        assert_eq!(ApiKey::ApiVersions.response_header_version(version), 0);
    }
    let body = table().to_api_versions_response(0, 0);
    let frame = encode_response(ApiKey::ApiVersions, 3, 99, &body).unwrap();
    // size | correlation id | error_code: no tagged-field byte after the correlation id.
    assert_eq!(&frame[4..8], &99_i32.to_be_bytes());
    assert_eq!(&frame[8..10], &0_i16.to_be_bytes());
    let (correlation_id, mut rest) = split_frame(&frame, 0);
    assert_eq!(correlation_id, 99);
    let decoded = ApiVersionsResponse::decode(&mut rest, 3).unwrap();
    assert_eq!(decoded, body);
    assert!(!rest.has_remaining());
}

#[test]
fn flexible_responses_carry_header_tagged_fields() {
    let body = MetadataResponse::default();
    let frame = encode_response(ApiKey::Metadata, 12, 5, &body).unwrap();
    assert_eq!(frame[8], 0, "header v1 has an empty tagged field section");
    let (correlation_id, mut rest) = split_frame(&frame, 1);
    assert_eq!(correlation_id, 5);
    assert_eq!(MetadataResponse::decode(&mut rest, 12).unwrap(), body);

    let frame = encode_response(ApiKey::Metadata, 8, 6, &body).unwrap();
    let (correlation_id, mut rest) = split_frame(&frame, 0);
    assert_eq!(correlation_id, 6);
    assert_eq!(MetadataResponse::decode(&mut rest, 8).unwrap(), body);
}

#[test]
fn response_kind_encodes_like_the_typed_body() {
    let body = MetadataResponse::default().with_throttle_time_ms(3);
    for version in [1, 9, 12] {
        let typed = encode_response(ApiKey::Metadata, version, 1, &body).unwrap();
        let kind = encode_response_kind(
            ApiKey::Metadata,
            version,
            1,
            &ResponseKind::Metadata(body.clone()),
        )
        .unwrap();
        assert_eq!(typed, kind);
    }
}

#[test]
fn unrepresentable_field_is_an_encode_error() {
    // session_id exists only from Fetch v7 (and is not ignorable).
    let body = net::kafka_protocol::messages::FetchResponse::default().with_session_id(3);
    assert!(matches!(
        encode_response(ApiKey::Fetch, 4, 1, &body),
        Err(net::NetError::Encode {
            api_key: ApiKey::Fetch,
            api_version: 4,
            ..
        })
    ));
}

#[test]
fn unsupported_api_versions_is_answered_in_the_v0_layout() {
    let table = table();
    let frame = encode_api_versions_unsupported(42, &table).unwrap();
    let (correlation_id, rest) = split_frame(&frame, 0);
    assert_eq!(correlation_id, 42);
    // v0 layout by hand: error_code i16, api_keys i32-counted array of (key, min, max).
    let mut raw = rest.clone();
    assert_eq!(raw.get_i16(), 35, "UNSUPPORTED_VERSION");
    assert_eq!(raw.get_i32(), 4);
    let mut ranges = Vec::new();
    for _ in 0..4 {
        ranges.push((raw.get_i16(), raw.get_i16(), raw.get_i16()));
    }
    assert!(
        !raw.has_remaining(),
        "v0 has no throttle time or tagged fields"
    );
    assert_eq!(ranges, vec![(0, 3, 11), (1, 4, 16), (3, 0, 12), (18, 0, 4)]);

    let decoded = ApiVersionsResponse::decode(&mut rest.clone(), 0).unwrap();
    assert_eq!(decoded.error_code, 35);
    assert_eq!(decoded.api_keys.len(), 4);
}
