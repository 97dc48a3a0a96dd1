//! Request decoding: round trips, the abort vector, unknown keys, unsupported versions,
//! truncation.

use bytes::{BufMut, Bytes, BytesMut};
use net::kafka_protocol::messages::{ApiKey, RequestKind};
use net::{decode_frame, decode_request, ApiVersionTable, FrameStatus, NetError};

use crate::common::{all_versions, corpus, encode_request, produce, with_size_prefix};

const ABORT_VECTOR: &[u8] = include_bytes!("../vectors/createtopics-v3-array-len-abort.bin");

#[test]
fn abort_vector_is_an_error_not_an_abort() {
    assert_eq!(ABORT_VECTOR.len(), 64);
    let mut buf = with_size_prefix(ABORT_VECTOR);
    let FrameStatus::Frame(frame) =
        decode_frame(&mut buf, net::SOCKET_REQUEST_MAX_BYTES_DEFAULT).unwrap()
    else {
        panic!("the vector is a complete frame");
    };
    let err = decode_request(frame, &all_versions()).unwrap_err();
    match &err {
        NetError::MalformedBody {
            api_key: ApiKey::CreateTopics,
            api_version: 3,
            correlation_id: 1,
            ..
        } => {}
        other => panic!("unexpected error {other:?}"),
    }
    assert_eq!(err.correlation_id(), Some(1));
}

#[test]
fn abort_vector_body_decodes_to_error_in_patched_kafka_protocol() {
    // The vector straight through kafka-protocol, as the fuzzer found it.
    let mut buf = Bytes::from_static(ABORT_VECTOR);
    let header = net::kafka_protocol::protocol::decode_request_header_from_buffer(&mut buf);
    let header = header.expect("the header is valid");
    assert!(
        RequestKind::decode(ApiKey::CreateTopics, &mut buf, header.request_api_version).is_err()
    );
}

#[test]
fn round_trips_across_apis_and_versions() {
    let table = all_versions();
    for (api_key, version, frame, expected) in corpus() {
        let request = decode_request(frame, &table)
            .unwrap_or_else(|err| panic!("{api_key:?} v{version}: {err}"));
        assert_eq!(request.api_key, api_key);
        assert_eq!(request.api_version, version);
        assert_eq!(request.client_id(), Some("sluice-test"));
        assert_eq!(request.body, expected, "{api_key:?} v{version}");
    }
}

#[test]
fn produce_records_point_into_the_frame() {
    for version in [3, 9, 13] {
        let frame = encode_request(ApiKey::Produce, version, 5, &produce(version));
        let frame_range = frame.as_ptr() as usize..frame.as_ptr() as usize + frame.len();
        let request = decode_request(frame.clone(), &all_versions()).unwrap();
        assert_eq!(request.correlation_id(), 5);
        let RequestKind::Produce(body) = request.body else {
            panic!("expected produce");
        };
        for partition in &body.topic_data[0].partition_data {
            let records = partition.records.as_ref().expect("records present");
            assert!(
                frame_range.contains(&(records.as_ptr() as usize)),
                "records must be a slice of the frame (v{version})"
            );
        }
    }
}

#[test]
fn unknown_api_key_keeps_the_correlation_id() {
    let mut frame = BytesMut::new();
    frame.put_i16(999);
    frame.put_i16(0);
    frame.put_i32(77);
    frame.put_i16(-1);
    let err = decode_request(frame.freeze(), &all_versions()).unwrap_err();
    assert!(matches!(
        err,
        NetError::UnknownApiKey {
            api_key: 999,
            api_version: 0,
            correlation_id: 77
        }
    ));
    assert_eq!(err.correlation_id(), Some(77));
}

#[test]
fn unsupported_versions_are_reported_before_decoding() {
    let table = ApiVersionTable::new()
        .with(ApiKey::ApiVersions, 0, 3)
        .unwrap()
        .with(ApiKey::Produce, 7, 9)
        .unwrap();
    // A version above the table (but decodable by kafka-protocol).
    let frame = encode_request(ApiKey::Produce, 11, 3, &produce(11));
    assert!(matches!(
        decode_request(frame, &table),
        Err(NetError::UnsupportedVersion {
            api_key: ApiKey::Produce,
            api_version: 11,
            correlation_id: 3,
            supported: Some((7, 9))
        })
    ));
    // An API the broker does not serve at all.
    let frame = encode_request(ApiKey::Fetch, 12, 4, &crate::common::fetch(12));
    assert!(matches!(
        decode_request(frame, &table),
        Err(NetError::UnsupportedVersion {
            api_key: ApiKey::Fetch,
            supported: None,
            ..
        })
    ));
    // ApiVersions from the future: header only, the body of v9 is unknown.
    let mut frame = BytesMut::new();
    frame.put_i16(ApiKey::ApiVersions as i16);
    frame.put_i16(9);
    frame.put_i32(21);
    frame.put_i16(-1);
    frame.put_slice(&[0, 0xde, 0xad]);
    assert!(matches!(
        decode_request(frame.freeze(), &table),
        Err(NetError::UnsupportedVersion {
            api_key: ApiKey::ApiVersions,
            api_version: 9,
            correlation_id: 21,
            supported: Some((0, 3))
        })
    ));
}

#[test]
fn every_truncation_of_valid_requests_is_an_error() {
    let table = all_versions();
    for (api_key, version, frame, _) in corpus() {
        for len in 0..frame.len() {
            let result = decode_request(frame.slice(..len), &table);
            // A prefix can only decode if the tail was optional; for these bodies it never is.
            let err = result.expect_err(&format!("{api_key:?} v{version} cut at {len}"));
            if len < 8 {
                assert!(matches!(err, NetError::HeaderTruncated { .. }));
            } else {
                assert!(err.correlation_id().is_some());
            }
        }
    }
}

#[test]
fn huge_array_counts_are_errors() {
    // Metadata v1 with a topics array claiming i32::MAX entries and nothing after it.
    let mut frame = BytesMut::new();
    frame.put_i16(ApiKey::Metadata as i16);
    frame.put_i16(1);
    frame.put_i32(1);
    frame.put_i16(-1);
    frame.put_i32(i32::MAX);
    assert!(matches!(
        decode_request(frame.freeze(), &all_versions()),
        Err(NetError::MalformedBody { .. })
    ));
    // Flexible Metadata v12 with a compact array of u32::MAX - 1 entries.
    let mut frame = BytesMut::new();
    frame.put_i16(ApiKey::Metadata as i16);
    frame.put_i16(12);
    frame.put_i32(1);
    frame.put_i16(-1);
    frame.put_u8(0); // Header tagged fields.
    frame.put_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
    assert!(matches!(
        decode_request(frame.freeze(), &all_versions()),
        Err(NetError::MalformedBody { .. })
    ));
    // A compact string claiming 4 GiB.
    let mut frame = BytesMut::new();
    frame.put_i16(ApiKey::ApiVersions as i16);
    frame.put_i16(3);
    frame.put_i32(1);
    frame.put_i16(-1);
    frame.put_u8(0);
    frame.put_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
    assert!(matches!(
        decode_request(frame.freeze(), &all_versions()),
        Err(NetError::MalformedBody { .. })
    ));
}

#[test]
fn version_table_rejects_ranges_the_codec_cannot_decode() {
    let mut table = ApiVersionTable::new();
    assert!(matches!(
        table.insert(ApiKey::Produce, 0, 9),
        Err(NetError::InvalidVersionRange { codec_min: 3, .. })
    ));
    assert!(table.insert(ApiKey::Produce, 9, 7).is_err());
    assert!(table.insert(ApiKey::Fetch, 4, 99).is_err());
    assert!(table.is_empty());
    table.insert(ApiKey::Fetch, 4, 12).unwrap();
    table.insert(ApiKey::Fetch, 4, 16).unwrap();
    assert_eq!(table.len(), 1);
    assert!(table.supports(ApiKey::Fetch, 16));
    assert!(!table.supports(ApiKey::Fetch, 17));
    assert!(!table.supports(ApiKey::Fetch, 3));
}
