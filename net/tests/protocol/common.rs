//! Helpers shared by the integration tests: request builders and an encoder for request frames.
#![allow(dead_code)]

use bytes::{BufMut, Bytes, BytesMut};
use net::kafka_protocol::messages::{
    api_versions_request::ApiVersionsRequest,
    create_topics_request::{CreatableTopic, CreatableTopicConfig, CreateTopicsRequest},
    fetch_request::{FetchPartition, FetchRequest, FetchTopic},
    join_group_request::{JoinGroupRequest, JoinGroupRequestProtocol},
    metadata_request::{MetadataRequest, MetadataRequestTopic},
    produce_request::{PartitionProduceData, ProduceRequest, TopicProduceData},
    ApiKey, GroupId, RequestHeader, RequestKind, TopicName,
};
use net::kafka_protocol::protocol::{Encodable, StrBytes};
use net::ApiVersionTable;

/// A table with every API `kafka-protocol` knows at its full range, so tests reach the decoder.
pub fn all_versions() -> ApiVersionTable {
    let mut table = ApiVersionTable::new();
    for api_key in ApiKey::iter() {
        let range = api_key.valid_versions();
        table
            .insert(api_key, range.min, range.max)
            .expect("valid_versions is a valid range");
    }
    table
}

/// Encodes header + body (no size prefix), as a client would.
pub fn encode_request<M: Encodable>(
    api_key: ApiKey,
    api_version: i16,
    correlation_id: i32,
    body: &M,
) -> Bytes {
    let header = RequestHeader::default()
        .with_request_api_key(api_key as i16)
        .with_request_api_version(api_version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("sluice-test")));
    let mut buf = BytesMut::new();
    header
        .encode(&mut buf, api_key.request_header_version(api_version))
        .expect("header encodes");
    body.encode(&mut buf, api_version).expect("body encodes");
    buf.freeze()
}

/// Prefixes `frame` with its 4-byte big-endian size.
pub fn with_size_prefix(frame: &[u8]) -> BytesMut {
    let mut buf = BytesMut::with_capacity(frame.len() + 4);
    buf.put_i32(i32::try_from(frame.len()).expect("test frame fits i32"));
    buf.put_slice(frame);
    buf
}

fn topic_name(name: &'static str) -> TopicName {
    TopicName(StrBytes::from_static_str(name))
}

fn topic_id() -> uuid::Uuid {
    uuid::Uuid::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef)
}

/// Opaque bytes standing in for a record batch (the request decoder does not look inside).
pub fn fake_records(len: usize) -> Bytes {
    (0..len)
        .map(|i| (i % 251) as u8)
        .collect::<Vec<u8>>()
        .into()
}

pub fn produce(version: i16) -> ProduceRequest {
    let topic = TopicProduceData::default().with_partition_data(vec![
        PartitionProduceData::default()
            .with_index(0)
            .with_records(Some(fake_records(100))),
        PartitionProduceData::default()
            .with_index(3)
            .with_records(Some(fake_records(7))),
    ]);
    let topic = if version >= 13 {
        topic.with_topic_id(topic_id())
    } else {
        topic.with_name(topic_name("orders"))
    };
    ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![topic])
}

pub fn fetch(version: i16) -> FetchRequest {
    let topic = FetchTopic::default().with_partitions(vec![FetchPartition::default()
        .with_partition(1)
        .with_fetch_offset(42)
        .with_partition_max_bytes(1 << 20)]);
    let topic = if version >= 13 {
        topic.with_topic_id(topic_id())
    } else {
        topic.with_topic(topic_name("orders"))
    };
    FetchRequest::default()
        .with_max_wait_ms(500)
        .with_min_bytes(1)
        .with_max_bytes(50 << 20)
        .with_topics(vec![topic])
}

pub fn metadata(version: i16) -> MetadataRequest {
    let topic = MetadataRequestTopic::default().with_name(Some(topic_name("orders")));
    let request = MetadataRequest::default().with_topics(Some(vec![topic]));
    if version >= 4 {
        request.with_allow_auto_topic_creation(false)
    } else {
        request
    }
}

pub fn create_topics(version: i16) -> CreateTopicsRequest {
    let request = CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(topic_name("orders"))
            .with_num_partitions(6)
            .with_replication_factor(1)
            .with_configs(vec![CreatableTopicConfig::default()
                .with_name(StrBytes::from_static_str("retention.ms"))
                .with_value(Some(StrBytes::from_static_str("60000")))])])
        .with_timeout_ms(10_000);
    if version >= 1 {
        request.with_validate_only(true)
    } else {
        request
    }
}

pub fn join_group(version: i16) -> JoinGroupRequest {
    let request = JoinGroupRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("group-a")))
        .with_session_timeout_ms(10_000)
        .with_member_id(StrBytes::from_static_str(""))
        .with_protocol_type(StrBytes::from_static_str("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(StrBytes::from_static_str("range"))
            .with_metadata(fake_records(24))]);
    let request = if version >= 1 {
        request.with_rebalance_timeout_ms(60_000)
    } else {
        request
    };
    if version >= 5 {
        request.with_group_instance_id(Some(StrBytes::from_static_str("instance-1")))
    } else {
        request
    }
}

pub fn api_versions(version: i16) -> ApiVersionsRequest {
    if version >= 3 {
        ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("librdkafka"))
            .with_client_software_version(StrBytes::from_static_str("2.16.0"))
    } else {
        ApiVersionsRequest::default()
    }
}

/// `(api_key, version, encoded frame without prefix, expected body)` for a spread of APIs and
/// versions, including flexible and non-flexible ones.
pub fn corpus() -> Vec<(ApiKey, i16, Bytes, RequestKind)> {
    let mut out = Vec::new();
    for version in [3, 7, 8, 9, 11, 12, 13] {
        let body = produce(version);
        out.push((
            ApiKey::Produce,
            version,
            encode_request(ApiKey::Produce, version, 7, &body),
            RequestKind::Produce(body),
        ));
    }
    for version in [4, 7, 11, 12, 13, 15, 16, 17, 18] {
        let body = fetch(version);
        out.push((
            ApiKey::Fetch,
            version,
            encode_request(ApiKey::Fetch, version, 8, &body),
            RequestKind::Fetch(body),
        ));
    }
    for version in [0, 1, 4, 8, 9, 10, 12, 13] {
        let body = metadata(version);
        out.push((
            ApiKey::Metadata,
            version,
            encode_request(ApiKey::Metadata, version, 9, &body),
            RequestKind::Metadata(body),
        ));
    }
    for version in [2, 3, 4, 5, 7] {
        let body = create_topics(version);
        out.push((
            ApiKey::CreateTopics,
            version,
            encode_request(ApiKey::CreateTopics, version, 10, &body),
            RequestKind::CreateTopics(body),
        ));
    }
    for version in [0, 1, 5, 6, 7, 8, 9] {
        let body = join_group(version);
        out.push((
            ApiKey::JoinGroup,
            version,
            encode_request(ApiKey::JoinGroup, version, 11, &body),
            RequestKind::JoinGroup(body),
        ));
    }
    for version in [0, 1, 2, 3, 4] {
        let body = api_versions(version);
        out.push((
            ApiKey::ApiVersions,
            version,
            encode_request(ApiKey::ApiVersions, version, 12, &body),
            RequestKind::ApiVersions(body),
        ));
    }
    out
}
