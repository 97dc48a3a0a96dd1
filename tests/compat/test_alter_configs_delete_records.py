"""AlterConfigs (API 33) v0–2 and DeleteRecords (API 21) v0–2 on the wire, every advertised
version, encoded by kafka-python's protocol classes (independent of the broker's codec).

AlterConfigs replaces a topic's whole set of overrides, as Kafka does: a key left out of the
request returns to its default. DeleteRecords moves the log start offset (KIP-107)."""

import kafka_wire as kw
from compat_util import create_topic, producer
from test_admin import raw_call

TOPIC, BROKER = 2, 4  # Kafka's ConfigResource.Type codes


def advertised(broker):
    with kw.connect(broker.bootstrap) as sock:
        sock.sendall(kw.api_versions_v0(1))
        _, err, versions = kw.parse_api_versions_v0(kw.read_frame(sock))
    assert err == 0
    return versions


def overrides(b, topic):
    """{key: value} of the topic's DYNAMIC_TOPIC_CONFIG entries (DescribeConfigs v1)."""
    from kafka.protocol.admin import DescribeConfigsRequest, DescribeConfigsResponse
    r = raw_call(b, DescribeConfigsRequest, DescribeConfigsResponse, 1,
                 resources=[(TOPIC, topic, None)], include_synonyms=False)
    (res,) = r.results
    assert res.error_code == 0
    return {c.name: c.value for c in res.configs if c.config_source == 1}


def test_alter_configs_replaces_the_whole_set(broker):
    from kafka.protocol.admin import AlterConfigsRequest, AlterConfigsResponse
    assert advertised(broker).get(33) == (0, 2)
    b = broker.bootstrap
    topic = "alter-configs"
    create_topic(b, topic, 1)
    for v in range(0, 3):
        r = raw_call(b, AlterConfigsRequest, AlterConfigsResponse, v,
                     resources=[(TOPIC, topic, [("retention.ms", "3600000"),
                                                ("max.message.bytes", "2000000")])],
                     validate_only=False)
        assert [(x.error_code, x.resource_name) for x in r.responses] == [(0, topic)], v
        assert overrides(b, topic) == {"retention.ms": "3600000", "max.message.bytes": "2000000"}
        # The next request names only segment.ms: the other overrides are removed.
        r = raw_call(b, AlterConfigsRequest, AlterConfigsResponse, v,
                     resources=[(TOPIC, topic, [("segment.ms", "60000")])], validate_only=False)
        assert r.responses[0].error_code == 0, v
        assert overrides(b, topic) == {"segment.ms": "60000"}, v
        # validate_only checks and changes nothing.
        r = raw_call(b, AlterConfigsRequest, AlterConfigsResponse, v,
                     resources=[(TOPIC, topic, [])], validate_only=True)
        assert r.responses[0].error_code == 0, v
        assert overrides(b, topic) == {"segment.ms": "60000"}, v
        # A bad value or an unknown key: INVALID_CONFIG (40), naming the key; nothing changes.
        for bad in (("segment.bytes", "1"), ("no.such.key", "1")):
            r = raw_call(b, AlterConfigsRequest, AlterConfigsResponse, v,
                         resources=[(TOPIC, topic, [bad])], validate_only=False)
            assert r.responses[0].error_code == 40, (v, bad)
            assert bad[0] in r.responses[0].error_message, (v, bad)
        assert overrides(b, topic) == {"segment.ms": "60000"}, v
        # An empty set removes every override.
        r = raw_call(b, AlterConfigsRequest, AlterConfigsResponse, v,
                     resources=[(TOPIC, topic, [])], validate_only=False)
        assert r.responses[0].error_code == 0, v
        assert overrides(b, topic) == {}, v

    r = raw_call(b, AlterConfigsRequest, AlterConfigsResponse, 1,
                 resources=[(TOPIC, "no-such-topic", [])], validate_only=False)
    assert r.responses[0].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
    # The broker resource (its node id from Metadata): AlterConfigs replaces its dynamic set;
    # a key fixed at start-up is INVALID_REQUEST (42) "Cannot update these configs
    # dynamically: [key]", as in Kafka (tests/compat/test_dynamic_broker_configs.py has more).
    from compat_util import admin
    node = str(next(iter(admin(b).list_topics(timeout=10).brokers)))
    r = raw_call(b, AlterConfigsRequest, AlterConfigsResponse, 1,
                 resources=[(BROKER, node, [])], validate_only=False)
    assert r.responses[0].error_code == 0
    r = raw_call(b, AlterConfigsRequest, AlterConfigsResponse, 1,
                 resources=[(BROKER, node, [("num.partitions", "3")])], validate_only=False)
    assert r.responses[0].error_code == 42
    assert "Cannot update these configs dynamically: [num.partitions]" in \
        r.responses[0].error_message


def test_delete_records_every_version(broker):
    from kafka.protocol.admin import DeleteRecordsRequest, DeleteRecordsResponse
    assert advertised(broker).get(21) == (0, 2)
    b = broker.bootstrap
    topic = "delete-records"
    create_topic(b, topic, 1)
    p = producer(b)
    for i in range(100):
        p.produce(topic, value=b"v%d" % i, partition=0)
    assert p.flush(30) == 0

    def delete(v, offset, name=topic, partition=0):
        r = raw_call(b, DeleteRecordsRequest, DeleteRecordsResponse, v,
                     topics=[(name, [(partition, offset)])], timeout_ms=10000)
        ((_, ((_, low, err),)),) = [(t.name, [(x.partition_index, x.low_watermark, x.error_code)
                                              for x in t.partitions]) for t in r.topics]
        return low, err

    assert delete(0, 10) == (10, 0)
    assert delete(1, 20) == (20, 0)
    assert delete(2, 30) == (30, 0)
    assert delete(2, 25) == (30, 0)  # below the log start: nothing to do
    assert delete(2, 101)[1] == 1   # past the high watermark: OFFSET_OUT_OF_RANGE
    assert delete(2, -5)[1] == 1
    assert delete(2, 0, partition=7)[1] == 3  # UNKNOWN_TOPIC_OR_PARTITION
    assert delete(2, 0, name="__consumer_offsets")[1] == 17  # INVALID_TOPIC_EXCEPTION
    assert delete(2, -1) == (100, 0)  # -1: up to the high watermark
