"""Admin APIs with real clients: DescribeConfigs, IncrementalAlterConfigs, CreatePartitions,
DeleteTopics and DescribeCluster through confluent-kafka's AdminClient (librdkafka 2.16), and
DescribeConfigs / CreatePartitions through kafka-python's KafkaAdminClient."""

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource,
                                   NewPartitions, NewTopic, ResourceType)

import kafka_wire as kw
from compat_util import admin, create_topic, producer, wait_for_topic, wait_until

TIMEOUT_S = 30

# Every topic property Apache Kafka 4.4 lists in DescribeConfigs, with its built-in default
# (read from a real Kafka 4.4.0 with scripts/kafka-ref).
DEFAULTS = {
    "cleanup.policy": "delete",
    "compression.gzip.level": "-1",
    "compression.lz4.level": "9",
    "compression.type": "producer",
    "compression.zstd.level": "3",
    "delete.retention.ms": "86400000",
    "errors.deadletterqueue.group.enable": "false",
    "file.delete.delay.ms": "60000",
    "flush.messages": "9223372036854775807",
    "flush.ms": "9223372036854775807",
    "follower.replication.throttled.replicas": "",
    "index.interval.bytes": "4096",
    "leader.replication.throttled.replicas": "",
    "local.retention.bytes": "-2",
    "local.retention.ms": "-2",
    "max.compaction.lag.ms": "9223372036854775807",
    "max.decompressed.message.bytes": "2147483639",
    "max.message.bytes": "1048588",
    "message.timestamp.after.max.ms": "3600000",
    "message.timestamp.before.max.ms": "9223372036854775807",
    "message.timestamp.type": "CreateTime",
    "min.cleanable.dirty.ratio": "0.5",
    "min.compaction.lag.ms": "0",
    "min.insync.replicas": "1",
    "preallocate": "false",
    "remote.copy.lag.bytes": "-1",
    "remote.copy.lag.ms": "0",
    "remote.log.copy.disable": "false",
    "remote.log.delete.on.disable": "false",
    "remote.storage.enable": "false",
    "retention.bytes": "-1",
    "retention.ms": "604800000",
    "segment.bytes": "1073741824",
    "segment.index.bytes": "10485760",
    "segment.jitter.ms": "0",
    "segment.ms": "604800000",
    "unclean.leader.election.enable": "false",
}

# The first broker-level property that sets a topic property's default (Kafka's synonym), for
# the ones the tests set at broker level.
BROKER_SYNONYM = {
    "retention.ms": "log.retention.ms",
    "segment.bytes": "log.segment.bytes",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "max.message.bytes": "message.max.bytes",
}

# Kafka 4.4's controller writes min.insync.replicas as a cluster-wide dynamic default when it
# bootstraps (for eligible leader replicas), so Kafka reports DYNAMIC_DEFAULT_BROKER_CONFIG
# where a broker without dynamic configs (Sluice) reports DEFAULT_CONFIG.
CLUSTER_DEFAULT_SOURCE = {"min.insync.replicas": ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value}


def broker_defaults(broker):
    """{topic property: (value, ConfigSource code)} a topic of `broker` inherits: the broker's
    --set value (STATIC_BROKER_CONFIG) where it sets the synonym, else Kafka's default."""
    out = {}
    for name, default in DEFAULTS.items():
        if name in BROKER_SYNONYM and BROKER_SYNONYM[name] in broker.settings:
            out[name] = (str(broker.settings[BROKER_SYNONYM[name]]),
                         ConfigSource.STATIC_BROKER_CONFIG.value)
        else:
            out[name] = (default, ConfigSource.DEFAULT_CONFIG.value)
    return out


# Set on the topic at creation; everything else stays a default.
CREATED_WITH = {
    "retention.ms": "3600000",
    "segment.bytes": "1048576",
    "cleanup.policy": "delete",
    "message.timestamp.type": "LogAppendTime",
    "max.message.bytes": "2000000",
    "flush.messages": "1000",
    "flush.ms": "5000",
    "retention.bytes": "104857600",
    "segment.ms": "86400000",
}


def result(future):
    return future.result(timeout=TIMEOUT_S)


def error_code(future):
    """The KafkaError code `future` fails with (fails the test if it succeeds)."""
    with pytest.raises(KafkaException) as info:
        result(future)
    return info.value.args[0].code()


def describe_topic(a, topic):
    """{name: ConfigEntry} of `topic` (librdkafka always asks for synonyms)."""
    resource = ConfigResource(ResourceType.TOPIC, topic)
    futures = a.describe_configs([resource], request_timeout=TIMEOUT_S)
    return result(futures[resource])


def alter_topic(a, topic, entries, validate_only=False):
    """Applies [(name, AlterConfigOpType, value)] with IncrementalAlterConfigs."""
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=op) for name, op, value in entries])
    futures = a.incremental_alter_configs([resource], validate_only=validate_only,
                                          request_timeout=TIMEOUT_S)
    return futures[resource]


def assert_configs(broker, configs, overrides):
    """`configs` lists every known key, `overrides` as TOPIC_CONFIG and the rest as the
    broker's defaults."""
    assert set(configs) == set(DEFAULTS), sorted(configs)
    for name, inherited in broker_defaults(broker).items():
        entry = configs[name]
        if name in overrides:
            assert (entry.value, entry.source) == (overrides[name],
                                                   ConfigSource.DYNAMIC_TOPIC_CONFIG.value), name
        elif name in CLUSTER_DEFAULT_SOURCE and entry.source == CLUSTER_DEFAULT_SOURCE[name]:
            assert entry.value == inherited[0], name
        else:
            assert (entry.value, entry.source) == inherited, name
        assert not entry.is_read_only, name
        assert not entry.is_sensitive, name


def produce_one(bootstrap, topic, partition, value=b"v", **conf):
    """Produces one record; returns (error or None, offset)."""
    reports = []
    p = producer(bootstrap, **conf)
    p.produce(topic, value=value, partition=partition,
              on_delivery=lambda err, msg: reports.append((err, msg.offset())))
    assert p.flush(TIMEOUT_S + 10) == 0, "delivery report never came"
    return reports[0]


def test_describe_and_alter_topic_configs(broker):
    topic = "admin-configs"
    a = admin(broker.bootstrap)
    futures = a.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1,
                                        config=CREATED_WITH)], request_timeout=TIMEOUT_S)
    result(futures[topic])
    wait_for_topic(broker.bootstrap, topic, 2)

    overrides = dict(CREATED_WITH)
    assert_configs(broker, describe_topic(a, topic), overrides)

    # Synonyms, as Kafka lists them: the topic override, then the broker-level ones. For
    # retention.ms (log.retention.{ms,minutes,hours}) Kafka lists broker synonyms only when
    # log.retention.ms is set; a one-synonym key lists its built-in default.
    configs = describe_topic(a, topic)
    assert [(s.name, s.value, s.source) for s in configs["retention.ms"].synonyms.values()] == [
        ("retention.ms", "3600000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value),
    ]
    assert [(s.name, s.value, s.source) for s in configs["flush.messages"].synonyms.values()] == [
        ("flush.messages", "1000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value),
        ("log.flush.interval.messages", "9223372036854775807",
         ConfigSource.DEFAULT_CONFIG.value),
    ]

    # SET one key, DELETE another (back to the default), SET a default one.
    result(alter_topic(a, topic, [
        ("retention.ms", AlterConfigOpType.SET, "7200000"),
        ("segment.bytes", AlterConfigOpType.DELETE, None),
        ("index.interval.bytes", AlterConfigOpType.SET, "8192"),
    ]))
    overrides["retention.ms"] = "7200000"
    overrides["index.interval.bytes"] = "8192"
    del overrides["segment.bytes"]
    assert_configs(broker, describe_topic(a, topic), overrides)

    # validate_only changes nothing.
    result(alter_topic(a, topic, [("retention.ms", AlterConfigOpType.SET, "1")],
                       validate_only=True))
    assert describe_topic(a, topic)["retention.ms"].value == "7200000"

    # Keys of Kafka features Sluice lacks are stored and described all the same, as Kafka
    # accepts them on a delete-policy topic.
    result(alter_topic(a, topic, [
        ("delete.retention.ms", AlterConfigOpType.SET, "1000"),
        ("min.compaction.lag.ms", AlterConfigOpType.SET, "5"),
        ("leader.replication.throttled.replicas", AlterConfigOpType.SET, "*"),
    ]))
    overrides.update({"delete.retention.ms": "1000", "min.compaction.lag.ms": "5",
                      "leader.replication.throttled.replicas": "*"})
    assert_configs(broker, describe_topic(a, topic), overrides)

    # Invalid values (Kafka's ranges) and unknown keys are INVALID_CONFIG; nothing changes.
    for entries in (
        [("retention.ms", AlterConfigOpType.SET, "forever")],
        [("segment.bytes", AlterConfigOpType.SET, "1048575")],  # Kafka 4's minimum is 1 MiB
        [("cleanup.policy", AlterConfigOpType.SET, "bogus")],
        [("min.insync.replicas", AlterConfigOpType.SET, "0")],
        [("min.cleanable.dirty.ratio", AlterConfigOpType.SET, "1.5")],
        [("compression.gzip.level", AlterConfigOpType.SET, "0")],
        [("leader.replication.throttled.replicas", AlterConfigOpType.SET, "x")],
        # Removed in Kafka 4 (message.timestamp.before/after.max.ms replace it).
        [("message.timestamp.difference.max.ms", AlterConfigOpType.SET, "1000")],
        [("retention.ms", AlterConfigOpType.SET, "1"),
         ("retention.mss", AlterConfigOpType.SET, "1")],
    ):
        assert error_code(alter_topic(a, topic, entries)) == KafkaError.INVALID_CONFIG, entries
    assert_configs(broker, describe_topic(a, topic), overrides)

    # Unknown topic.
    assert error_code(alter_topic(a, "admin-no-such-topic",
                                  [("retention.ms", AlterConfigOpType.SET, "1")])) \
        == KafkaError.UNKNOWN_TOPIC_OR_PART
    resource = ConfigResource(ResourceType.TOPIC, "admin-no-such-topic")
    assert error_code(a.describe_configs([resource], request_timeout=TIMEOUT_S)[resource]) \
        == KafkaError.UNKNOWN_TOPIC_OR_PART

    # The altered config is durable.
    broker.restart()
    a = admin(broker.bootstrap)
    assert_configs(broker, describe_topic(a, topic), overrides)


def test_altered_config_reaches_the_log(broker):
    """max.message.bytes lowered by IncrementalAlterConfigs is enforced on the next produce."""
    topic = "admin-max-message"
    create_topic(broker.bootstrap, topic, 1)
    big = b"x" * 20_000
    assert produce_one(broker.bootstrap, topic, 0, big)[0] is None
    a = admin(broker.bootstrap)
    result(alter_topic(a, topic, [("max.message.bytes", AlterConfigOpType.SET, "10000")]))
    err, _ = produce_one(broker.bootstrap, topic, 0, big, retries=0)
    assert err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE, err
    result(alter_topic(a, topic, [("max.message.bytes", AlterConfigOpType.DELETE, None)]))
    assert produce_one(broker.bootstrap, topic, 0, big) == (None, 1)


@pytest.mark.sluice(settings={"log.retention.ms": "86400000"})
def test_broker_default_shows_as_static_broker_config(broker):
    from kafka.admin import ConfigResource as KpConfigResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient

    topic = "admin-broker-default"
    create_topic(broker.bootstrap, topic, 1)
    a = admin(broker.bootstrap)
    entry = describe_topic(a, topic)["retention.ms"]
    assert (entry.value, entry.source) == ("86400000", ConfigSource.STATIC_BROKER_CONFIG.value)

    # librdkafka keys synonyms by name, and the broker-level synonyms share one: read the
    # whole list with kafka-python.
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=TIMEOUT_S * 1000)
    try:
        described = kp.describe_configs([KpConfigResource(ConfigResourceType.TOPIC, topic)],
                                        include_synonyms=True, config_filter="all")
    finally:
        kp.close()
    entry = described["topic"][topic]["retention.ms"]
    assert entry["config_source"] == "STATIC_BROKER_CONFIG"
    # Kafka's order: each broker synonym set (in its own unit), then the built-in default of
    # the one that has a default (log.retention.ms has none; log.retention.hours is 168).
    assert [(s["name"], s["value"], s["source"]) for s in entry["synonyms"]] == [
        ("log.retention.ms", "86400000", "STATIC_BROKER_CONFIG"),
        ("log.retention.hours", "168", "DEFAULT_CONFIG"),
    ]


def node_id(bootstrap):
    """The id of the (only) broker, as Metadata names it."""
    (node,) = admin(bootstrap).list_topics(timeout=10).brokers
    return node


def test_describe_broker_configs(broker):
    a = admin(broker.bootstrap)
    resource = ConfigResource(ResourceType.BROKER, str(node_id(broker.bootstrap)))
    configs = result(a.describe_configs([resource], request_timeout=TIMEOUT_S)[resource])
    # Kafka lists every listener (its KRaft node has a CONTROLLER one too).
    assert f"PLAINTEXT://{broker.bootstrap}" in configs["listeners"].value.split(",")
    assert configs["num.partitions"].value == "1"
    assert configs["num.partitions"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["log.segment.bytes"].value == str(64 << 20)  # conftest's setting
    assert configs["log.segment.bytes"].source == ConfigSource.STATIC_BROKER_CONFIG.value


@pytest.mark.sluice_only("Sluice's node id 0 and its start-up defaults (Kafka's bootstrap "
                         "writes min.insync.replicas as a dynamic default)")
def test_broker_keys_fixed_at_start_up_are_read_only(broker):
    a = admin(broker.bootstrap)
    resource = ConfigResource(ResourceType.BROKER, "0")
    configs = result(a.describe_configs([resource], request_timeout=TIMEOUT_S)[resource])
    assert configs["listeners"].is_read_only
    assert configs["log.retention.ms"].value == DEFAULTS["retention.ms"]
    assert configs["log.retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    # Dynamic (test_dynamic_broker_configs.py), so not read-only; listeners are fixed.
    assert not configs["log.retention.ms"].is_read_only
    resource = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[
        ConfigEntry("listeners", "PLAINTEXT://127.0.0.1:1", incremental_operation=AlterConfigOpType.SET)])
    future = a.incremental_alter_configs([resource], request_timeout=TIMEOUT_S)[resource]
    assert error_code(future) == KafkaError.INVALID_REQUEST


@pytest.mark.sluice(settings={"auto.create.topics.enable": False})
def test_delete_topics(broker):
    topic = "admin-delete"
    create_topic(broker.bootstrap, topic, 2)
    for i in range(3):
        assert produce_one(broker.bootstrap, topic, 1) == (None, i)
    a = admin(broker.bootstrap)
    result(a.delete_topics([topic], request_timeout=TIMEOUT_S)[topic])
    # Kafka's brokers drop the topic from Metadata when the controller's deletion reaches them.
    wait_until(lambda: topic not in a.list_topics(timeout=10).topics, TIMEOUT_S, what="deletion")

    # No auto-create here: producing to the deleted topic fails.
    err, _ = produce_one(broker.bootstrap, topic, 1, **{"message.timeout.ms": 3000})
    assert err is not None and err.code() in (
        KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC,
        KafkaError._MSG_TIMED_OUT), err

    assert error_code(a.delete_topics([topic], request_timeout=TIMEOUT_S)[topic]) \
        == KafkaError.UNKNOWN_TOPIC_OR_PART

    # Re-created under the same name, the topic starts empty at offset 0.
    create_topic(broker.bootstrap, topic, 2)
    assert produce_one(broker.bootstrap, topic, 1) == (None, 0)
    broker.restart()
    assert produce_one(broker.bootstrap, topic, 1) == (None, 1)


def test_deleted_topic_is_recreated_empty_by_auto_create(broker):
    topic = "admin-delete-auto"
    create_topic(broker.bootstrap, topic, 1)
    for i in range(3):
        assert produce_one(broker.bootstrap, topic, 0) == (None, i)
    a = admin(broker.bootstrap)
    result(a.delete_topics([topic], request_timeout=TIMEOUT_S)[topic])
    wait_until(lambda: topic not in a.list_topics(timeout=10).topics, TIMEOUT_S, what="deletion")
    assert produce_one(broker.bootstrap, topic, 0) == (None, 0)


def test_describe_cluster(broker):
    a = admin(broker.bootstrap)
    cluster = result(a.describe_cluster(request_timeout=TIMEOUT_S))
    metadata = a.list_topics(timeout=10)
    assert cluster.cluster_id == metadata.cluster_id
    assert cluster.cluster_id
    assert len(cluster.nodes) == 1
    node = cluster.nodes[0]
    # The broker's node.id (Sluice's default 0; the Kafka reference's KRaft node is 1).
    assert (node.id, node.host, node.port) == (node_id(broker.bootstrap), "127.0.0.1",
                                               broker.port)
    assert cluster.controller.id == node.id


def test_kafka_python_describe_configs_and_create_partitions(broker):
    from kafka.admin import ConfigResource as KpConfigResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient

    topic = "admin-kafka-python"
    a = admin(broker.bootstrap)
    result(a.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1,
                                     config={"retention.ms": "123456"})],
                           request_timeout=TIMEOUT_S)[topic])
    wait_for_topic(broker.bootstrap, topic, 1)

    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=TIMEOUT_S * 1000)
    try:
        described = kp.describe_configs([KpConfigResource(ConfigResourceType.TOPIC, topic)],
                                        include_synonyms=True, config_filter="all")
        configs = described["topic"][topic]
        assert set(configs) == set(DEFAULTS)
        assert configs["retention.ms"]["value"] == "123456"
        assert configs["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert configs["segment.ms"]["config_source"] == "DEFAULT_CONFIG"
        assert configs["segment.ms"]["value"] == DEFAULTS["segment.ms"]
        # The default filter ("modified") leaves only the override.
        modified = kp.describe_configs([KpConfigResource(ConfigResourceType.TOPIC, topic)])
        assert set(modified["topic"][topic]) == {"retention.ms"}

        kp.create_partitions({topic: 4})
        wait_for_topic(broker.bootstrap, topic, 4)
        assert produce_one(broker.bootstrap, topic, 3) == (None, 0)
    finally:
        kp.close()


# Versions of the admin APIs exercised below; the broker must advertise at least these (Kafka
# 4.4 advertises more: DeleteTopics up to v6, DescribeCluster up to v2).
ADMIN_VERSIONS = {
    20: (1, 5),  # DeleteTopics
    32: (1, 4),  # DescribeConfigs
    37: (0, 3),  # CreatePartitions
    44: (0, 1),  # IncrementalAlterConfigs
    60: (0, 1),  # DescribeCluster
}


def raw_call(bootstrap, request_cls, response_cls, version, **fields):
    """One request at exactly `version`, encoded and decoded by kafka-python's protocol classes
    (independent of the broker's codec); a closed connection fails the test."""
    request = request_cls[version](**fields)
    request.with_header(correlation_id=version + 100)
    with kw.connect(bootstrap) as sock:
        sock.sendall(request.encode(header=True, framed=True))
        payload = kw.read_frame(sock)
    return response_cls.decode(payload, version=version, header=True)


def test_every_advertised_admin_version(broker):
    from kafka.protocol.admin import (CreatePartitionsRequest, CreatePartitionsResponse,
                                      DeleteTopicsRequest, DeleteTopicsResponse,
                                      DescribeClusterRequest, DescribeClusterResponse,
                                      DescribeConfigsRequest, DescribeConfigsResponse,
                                      IncrementalAlterConfigsRequest,
                                      IncrementalAlterConfigsResponse)

    with kw.connect(broker.bootstrap) as sock:
        sock.sendall(kw.api_versions_v0(1))
        _, err, advertised = kw.parse_api_versions_v0(kw.read_frame(sock))
    assert err == 0
    for key, (lo, hi) in ADMIN_VERSIONS.items():
        assert key in advertised and advertised[key][0] <= lo and hi <= advertised[key][1], \
            (key, advertised.get(key))
    node = node_id(broker.bootstrap)

    b = broker.bootstrap
    topic = "admin-raw"
    create_topic(b, topic, 1)

    for v in range(ADMIN_VERSIONS[60][0], ADMIN_VERSIONS[60][1] + 1):
        r = raw_call(b, DescribeClusterRequest, DescribeClusterResponse, v)
        assert (r.error_code, r.controller_id, len(r.brokers)) == (0, node, 1), v
        assert (r.brokers[0].host, r.brokers[0].port) == ("127.0.0.1", broker.port), v
        assert r.cluster_id, v

    for v in range(ADMIN_VERSIONS[44][0], ADMIN_VERSIONS[44][1] + 1):
        value = str(1000 + v)
        r = raw_call(b, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, v,
                     resources=[(2, topic, [("retention.ms", 0, value)])], validate_only=False)
        assert [(x.error_code, x.resource_name) for x in r.responses] == [(0, topic)], v
        r = raw_call(b, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, v,
                     resources=[(2, topic, [("segment.bytes", 0, "1")])], validate_only=False)
        assert r.responses[0].error_code == 40, v  # INVALID_CONFIG
        assert "segment.bytes" in r.responses[0].error_message, v

        for dv in range(ADMIN_VERSIONS[32][0], ADMIN_VERSIONS[32][1] + 1):
            r = raw_call(b, DescribeConfigsRequest, DescribeConfigsResponse, dv,
                         resources=[(2, topic, ["retention.ms", "segment.ms", "cleanup.policy"])],
                         include_synonyms=True)
            (res,) = r.results
            assert res.error_code == 0, dv
            got = {c.name: c for c in res.configs}
            assert set(got) == {"retention.ms", "segment.ms", "cleanup.policy"}, dv
            assert (got["retention.ms"].value, got["retention.ms"].config_source) == (value, 1)
            assert (got["segment.ms"].value, got["segment.ms"].config_source) == ("604800000", 5)
            assert [(s.name, s.source) for s in got["retention.ms"].synonyms] == [
                ("retention.ms", 1)], dv
            assert [(s.name, s.source) for s in got["cleanup.policy"].synonyms] == [
                ("log.cleanup.policy", 5)], dv
            if dv >= 3:
                assert got["retention.ms"].config_type == 5, dv  # LONG
                assert got["cleanup.policy"].config_type == 7, dv  # LIST

    for v in range(ADMIN_VERSIONS[37][0], ADMIN_VERSIONS[37][1] + 1):
        r = raw_call(b, CreatePartitionsRequest, CreatePartitionsResponse, v,
                     topics=[(topic, v + 2, None)], timeout_ms=30000, validate_only=False)
        assert [(x.name, x.error_code) for x in r.results] == [(topic, 0)], v
        r = raw_call(b, CreatePartitionsRequest, CreatePartitionsResponse, v,
                     topics=[(topic, v + 2, None)], timeout_ms=30000, validate_only=False)
        assert r.results[0].error_code == 37, v  # INVALID_PARTITIONS
        assert r.results[0].error_message, v
    wait_for_topic(b, topic, ADMIN_VERSIONS[37][1] + 2)

    for v in range(ADMIN_VERSIONS[20][0], ADMIN_VERSIONS[20][1] + 1):
        name = f"admin-raw-delete-{v}"
        create_topic(b, name, 1)
        r = raw_call(b, DeleteTopicsRequest, DeleteTopicsResponse, v,
                     topic_names=[name, "admin-raw-missing"], timeout_ms=30000)
        got = {x.name: x for x in r.responses}
        assert got[name].error_code == 0, v
        assert got["admin-raw-missing"].error_code == 3, v  # UNKNOWN_TOPIC_OR_PARTITION
        if v >= 5:
            assert got["admin-raw-missing"].error_message, v
        assert name not in admin(b).list_topics(timeout=10).topics, v


def test_elect_leaders_on_a_single_broker(broker):
    """ElectLeaders (KIP-183/KIP-460) where every partition has one replica, its leader: a
    named partition needs no election, an unknown one is UNKNOWN_TOPIC_OR_PARTITION, an
    election of every partition lists none of them; v0 has no top-level error code, and an
    unknown election type is INVALID_REQUEST at the top and on each partition."""
    from confluent_kafka import ElectionType, TopicPartition

    b = broker.bootstrap
    topic = "elect-one"
    create_topic(b, topic, 2)
    a = admin(b)

    def names(result):
        return {(tp.topic, tp.partition): None if e is None else
                (e.args[0] if isinstance(e, KafkaException) else e).name()
                for tp, e in result.items()}

    tps = [TopicPartition(topic, 1), TopicPartition(topic, 7)]
    for election_type in (ElectionType.PREFERRED, ElectionType.UNCLEAN):
        assert names(a.elect_leaders(election_type, tps).result()) == {
            (topic, 1): "ELECTION_NOT_NEEDED", (topic, 7): "UNKNOWN_TOPIC_OR_PART"}
    assert a.elect_leaders(ElectionType.PREFERRED, None).result() == {}

    def elect(version, election_type, partitions):
        body = b""
        if version >= 1:
            body += kw.i8(election_type)
        body += kw.i32(1) + kw.string(topic) + kw.i32(len(partitions))
        body += b"".join(kw.i32(p) for p in partitions) + kw.i32(30000)
        with kw.connect(b) as sock:
            r = kw.Reader(kw.request(sock, kw.frame(kw.header_v1(43, version, 9) + body)))
        assert r.i32() == 9
        r.i32()  # throttle_time_ms
        top = r.i16() if version >= 1 else None
        results = r.array(lambda r: (r.string(), r.array(lambda r: (r.i32(), r.i16(), r.string()))))
        assert r.remaining() == 0
        return top, results

    top, results = elect(0, 0, [0])
    assert top is None
    assert results == [(topic, [(0, 84, "Leader election not needed for topic partition.")])]
    top, results = elect(1, 5, [0])
    assert top == 42  # INVALID_REQUEST
    assert [(t, [(p, c) for p, c, _ in ps]) for t, ps in results] == [(topic, [(0, 42)])]
