//! The zero-copy Fetch framer, checked against `kafka-protocol`'s own `FetchResponse` decoder
//! for every version it supports.

use bytes::{Buf, Bytes, BytesMut};
use net::kafka_protocol::messages::{ApiKey, FetchResponse, ResponseHeader, TopicName};
use net::kafka_protocol::protocol::{Decodable, StrBytes};
use net::{
    encode_fetch_response, response_header_version, FetchAbortedTransaction, FetchCurrentLeader,
    FetchEpochEndOffset, FetchNodeEndpoint, FetchPartitionData, FetchResponseData, FetchTopicData,
    NetError, FETCH_FRAMER_VERSIONS,
};

use crate::common::fake_records;

fn data(version: i16) -> FetchResponseData {
    let preferred_read_replica = if version >= 11 { 2 } else { -1 };
    let partition = |index: i32, records: Vec<Bytes>, aborted| FetchPartitionData {
        partition_index: index,
        error_code: if index == 2 { 1 } else { 0 },
        high_watermark: 1000 + i64::from(index),
        last_stable_offset: 900 + i64::from(index),
        log_start_offset: if version >= 5 {
            10 + i64::from(index)
        } else {
            -1
        },
        aborted_transactions: aborted,
        preferred_read_replica,
        records,
        // KIP-320's tagged field, on one partition with no records, as a leader answers.
        diverging_epoch: (version >= 12 && index == 1).then_some(FetchEpochEndOffset {
            epoch: 3,
            end_offset: 1234,
        }),
        // KIP-951's tagged field, on a partition with an error (and on one with a diverging
        // epoch too, to check the tag order); Kafka fills it from v16.
        current_leader: (version >= 16 && index >= 1).then_some(FetchCurrentLeader {
            leader_id: 3,
            leader_epoch: 7 + index,
        }),
    };
    FetchResponseData {
        throttle_time_ms: 17,
        error_code: if version >= 7 { 1 } else { 0 },
        session_id: if version >= 7 { 12345 } else { 0 },
        topics: vec![
            FetchTopicData {
                topic: TopicName(StrBytes::from_static_str("orders")),
                topic_id: uuid::Uuid::from_u128(0xfeed_beef_0000_0000_1111_2222_3333_4444),
                partitions: vec![
                    partition(
                        0,
                        vec![fake_records(300), fake_records(61), fake_records(1000)],
                        None,
                    ),
                    partition(1, vec![], Some(vec![])),
                    partition(
                        2,
                        vec![fake_records(5)],
                        Some(vec![FetchAbortedTransaction {
                            producer_id: 7,
                            first_offset: 950,
                        }]),
                    ),
                ],
            },
            FetchTopicData {
                topic: TopicName(StrBytes::from_static_str("")),
                topic_id: uuid::Uuid::nil(),
                partitions: vec![],
            },
            FetchTopicData {
                topic: TopicName(StrBytes::from_static_str("payments")),
                topic_id: uuid::Uuid::from_u128(5),
                partitions: vec![partition(9, vec![Bytes::new(), fake_records(70)], None)],
            },
        ],
        node_endpoints: if version >= 16 {
            vec![
                FetchNodeEndpoint {
                    node_id: 3,
                    host: "broker-3.example".into(),
                    port: 9092,
                    rack: Some("rack-a".into()),
                },
                FetchNodeEndpoint {
                    node_id: 4,
                    host: "127.0.0.1".into(),
                    port: 19_092,
                    rack: None,
                },
            ]
        } else {
            Vec::new()
        },
    }
}

fn concat(chunks: &[Bytes]) -> Bytes {
    let mut out = BytesMut::new();
    for chunk in chunks {
        out.extend_from_slice(chunk);
    }
    out.freeze()
}

#[test]
fn decodes_with_kafka_protocol_for_every_supported_version() {
    for version in FETCH_FRAMER_VERSIONS.min..=FETCH_FRAMER_VERSIONS.max {
        let expected = data(version);
        let chunks = encode_fetch_response(version, 31, &expected).unwrap();
        let mut buf = concat(&chunks);
        let size = buf.get_i32();
        assert_eq!(
            usize::try_from(size).unwrap(),
            buf.len(),
            "v{version} size prefix"
        );
        let header_version = response_header_version(ApiKey::Fetch, version);
        let header = ResponseHeader::decode(&mut buf, header_version).unwrap();
        assert_eq!(header.correlation_id, 31);
        let decoded = FetchResponse::decode(&mut buf, version)
            .unwrap_or_else(|err| panic!("v{version}: {err:#}"));
        assert!(!buf.has_remaining(), "v{version}: trailing bytes");

        assert_eq!(decoded.throttle_time_ms, expected.throttle_time_ms);
        assert_eq!(decoded.error_code, expected.error_code);
        assert_eq!(decoded.session_id, expected.session_id);
        assert_eq!(decoded.responses.len(), expected.topics.len());
        for (got, want) in decoded.responses.iter().zip(&expected.topics) {
            if version >= 13 {
                assert_eq!(got.topic_id, want.topic_id, "v{version}");
            } else {
                assert_eq!(got.topic, want.topic, "v{version}");
            }
            assert_eq!(got.partitions.len(), want.partitions.len());
            for (got, want) in got.partitions.iter().zip(&want.partitions) {
                assert_eq!(got.partition_index, want.partition_index);
                assert_eq!(got.error_code, want.error_code);
                assert_eq!(got.high_watermark, want.high_watermark);
                assert_eq!(got.last_stable_offset, want.last_stable_offset);
                if version >= 5 {
                    assert_eq!(got.log_start_offset, want.log_start_offset);
                }
                let got_aborted = got.aborted_transactions.as_ref().map(|list| {
                    list.iter()
                        .map(|t| (t.producer_id.0, t.first_offset))
                        .collect::<Vec<_>>()
                });
                let want_aborted = want.aborted_transactions.as_ref().map(|list| {
                    list.iter()
                        .map(|t| (t.producer_id, t.first_offset))
                        .collect::<Vec<_>>()
                });
                assert_eq!(got_aborted, want_aborted, "v{version}");
                assert_eq!(got.preferred_read_replica.0, want.preferred_read_replica);
                let got_diverging =
                    (got.diverging_epoch.epoch != -1).then_some(FetchEpochEndOffset {
                        epoch: got.diverging_epoch.epoch,
                        end_offset: got.diverging_epoch.end_offset,
                    });
                assert_eq!(got_diverging, want.diverging_epoch, "v{version}");
                let got_leader =
                    (got.current_leader.leader_id.0 != -1).then_some(FetchCurrentLeader {
                        leader_id: got.current_leader.leader_id.0,
                        leader_epoch: got.current_leader.leader_epoch,
                    });
                assert_eq!(got_leader, want.current_leader, "v{version}");
                assert_eq!(
                    got.records.as_ref().map(|r| r.to_vec()),
                    Some(want.records.concat())
                );
            }
        }
        let got_endpoints: Vec<FetchNodeEndpoint> = decoded
            .node_endpoints
            .iter()
            .map(|n| FetchNodeEndpoint {
                node_id: n.node_id.0,
                host: n.host.to_string(),
                port: n.port,
                rack: n.rack.as_ref().map(ToString::to_string),
            })
            .collect();
        assert_eq!(got_endpoints, expected.node_endpoints, "v{version}");
    }
}

#[test]
fn matches_kafka_protocol_encoder_bytes() {
    // The framer and kafka-protocol's (copying) encoder produce identical frames.
    use net::kafka_protocol::messages::fetch_response::{
        AbortedTransaction, EpochEndOffset, FetchableTopicResponse, LeaderIdAndEpoch, NodeEndpoint,
        PartitionData,
    };
    use net::kafka_protocol::messages::{BrokerId, ProducerId};
    for version in FETCH_FRAMER_VERSIONS.min..=FETCH_FRAMER_VERSIONS.max {
        let input = data(version);
        let topics = input
            .topics
            .iter()
            .map(|topic| {
                let partitions = topic
                    .partitions
                    .iter()
                    .map(|p| {
                        PartitionData::default()
                            .with_partition_index(p.partition_index)
                            .with_error_code(p.error_code)
                            .with_high_watermark(p.high_watermark)
                            .with_last_stable_offset(p.last_stable_offset)
                            .with_log_start_offset(p.log_start_offset)
                            .with_aborted_transactions(p.aborted_transactions.as_ref().map(|l| {
                                l.iter()
                                    .map(|t| {
                                        AbortedTransaction::default()
                                            .with_producer_id(ProducerId(t.producer_id))
                                            .with_first_offset(t.first_offset)
                                    })
                                    .collect()
                            }))
                            .with_preferred_read_replica(BrokerId(p.preferred_read_replica))
                            .with_records(Some(Bytes::from(p.records.concat())))
                            .with_diverging_epoch(p.diverging_epoch.map_or_else(
                                EpochEndOffset::default,
                                |d| {
                                    EpochEndOffset::default()
                                        .with_epoch(d.epoch)
                                        .with_end_offset(d.end_offset)
                                },
                            ))
                            .with_current_leader(p.current_leader.map_or_else(
                                LeaderIdAndEpoch::default,
                                |l| {
                                    LeaderIdAndEpoch::default()
                                        .with_leader_id(BrokerId(l.leader_id))
                                        .with_leader_epoch(l.leader_epoch)
                                },
                            ))
                    })
                    .collect();
                let response = FetchableTopicResponse::default().with_partitions(partitions);
                if version >= 13 {
                    response.with_topic_id(topic.topic_id)
                } else {
                    response.with_topic(topic.topic.clone())
                }
            })
            .collect();
        let response = FetchResponse::default()
            .with_throttle_time_ms(input.throttle_time_ms)
            .with_error_code(input.error_code)
            .with_session_id(input.session_id)
            .with_responses(topics)
            .with_node_endpoints(
                input
                    .node_endpoints
                    .iter()
                    .map(|n| {
                        NodeEndpoint::default()
                            .with_node_id(BrokerId(n.node_id))
                            .with_host(StrBytes::from_string(n.host.clone()))
                            .with_port(n.port)
                            .with_rack(n.rack.clone().map(StrBytes::from_string))
                    })
                    .collect(),
            );
        let reference = net::encode_response(ApiKey::Fetch, version, 8, &response).unwrap();
        let framed = concat(&encode_fetch_response(version, 8, &input).unwrap());
        assert_eq!(framed, reference, "v{version}");
    }
}

#[test]
fn record_batches_are_not_copied() {
    let input = data(12);
    let chunks = encode_fetch_response(12, 1, &input).unwrap();
    let batches: Vec<&Bytes> = input
        .topics
        .iter()
        .flat_map(|t| &t.partitions)
        .flat_map(|p| &p.records)
        .filter(|b| !b.is_empty())
        .collect();
    for batch in &batches {
        assert!(
            chunks
                .iter()
                .any(|c| c.as_ptr() == batch.as_ptr() && c.len() == batch.len()),
            "each batch must appear as its own chunk, same allocation"
        );
    }
    // Each partition with records: one field chunk, then its batches; plus the trailing chunk.
    let partitions_with_records = input
        .topics
        .iter()
        .flat_map(|t| &t.partitions)
        .filter(|p| p.records.iter().any(|b| !b.is_empty()))
        .count();
    assert_eq!(chunks.len(), partitions_with_records + batches.len() + 1);
    assert_eq!(
        &chunks[0][4..8],
        &1_i32.to_be_bytes(),
        "first chunk: prefix and header"
    );
}

#[test]
fn version_limits_are_errors() {
    assert!(matches!(
        encode_fetch_response(3, 1, &data(4)),
        Err(NetError::Encode {
            api_key: ApiKey::Fetch,
            api_version: 3,
            ..
        })
    ));
    assert!(encode_fetch_response(19, 1, &data(18)).is_err());
    // Session id needs v7; preferred read replica needs v11.
    assert!(encode_fetch_response(6, 1, &data(7)).is_err());
    assert!(encode_fetch_response(10, 1, &data(11)).is_err());
    // A diverging epoch needs v12 (a tagged field).
    let mut v11 = data(11);
    v11.topics[0].partitions[1].diverging_epoch = data(12).topics[0].partitions[1].diverging_epoch;
    assert!(v11.topics[0].partitions[1].diverging_epoch.is_some());
    assert!(encode_fetch_response(11, 1, &v11).is_err());
    // So does a current leader; node endpoints need v16.
    let mut v11 = data(11);
    v11.topics[0].partitions[1].current_leader = data(16).topics[0].partitions[1].current_leader;
    assert!(encode_fetch_response(11, 1, &v11).is_err());
    let mut v15 = data(15);
    v15.node_endpoints = data(16).node_endpoints;
    assert!(encode_fetch_response(15, 1, &v15).is_err());
}

#[test]
fn an_unknown_current_leader_is_not_written() {
    // Kafka leaves out a tagged field equal to its default (leader -1, epoch -1).
    let mut unknown = data(16);
    let mut without = data(16);
    for p in unknown.topics.iter_mut().flat_map(|t| &mut t.partitions) {
        p.current_leader = Some(FetchCurrentLeader {
            leader_id: -1,
            leader_epoch: -1,
        });
    }
    for p in without.topics.iter_mut().flat_map(|t| &mut t.partitions) {
        p.current_leader = None;
    }
    assert_eq!(
        concat(&encode_fetch_response(16, 1, &unknown).unwrap()),
        concat(&encode_fetch_response(16, 1, &without).unwrap())
    );
}

#[test]
fn long_topic_name_below_v12_is_an_error() {
    let mut input = data(11);
    input.topics[0].topic = TopicName(StrBytes::from_string("t".repeat(40_000)));
    assert!(matches!(
        encode_fetch_response(11, 1, &input),
        Err(NetError::Encode { .. })
    ));
    // Compact strings have no such limit.
    assert!(encode_fetch_response(12, 1, &input).is_ok());
}
