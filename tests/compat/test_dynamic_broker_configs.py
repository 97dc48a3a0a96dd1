"""IncrementalAlterConfigs with confluent-kafka's AdminClient (librdkafka 2.16): dynamic BROKER
configs (KIP-226) and the list operations APPEND / SUBTRACT (KIP-339) on list-typed configs.

The broker-level defaults of topic properties (`log.retention.ms`, `message.max.bytes`, …)
change at run time and reach every partition that does not override them; every other broker
key is refused per request with Kafka's INVALID_REQUEST "Cannot update these configs
dynamically: [keys]" (checked against Kafka 4.4)."""

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource,
                                   ResourceType)

from compat_util import admin, create_topic, producer, wait_until

SET, DELETE = AlterConfigOpType.SET, AlterConfigOpType.DELETE
APPEND, SUBTRACT = AlterConfigOpType.APPEND, AlterConfigOpType.SUBTRACT


def node_id(a):
    return str(next(iter(a.list_topics(timeout=10).brokers)))


def alter(a, rtype, name, *ops):
    """Runs one IncrementalAlterConfigs; returns None or the KafkaError."""
    entries = [ConfigEntry(k, v, incremental_operation=op) for k, v, op in ops]
    r = ConfigResource(rtype, name, incremental_configs=entries)
    try:
        a.incremental_alter_configs([r])[r].result(timeout=30)
        return None
    except KafkaException as e:
        return e.args[0]


def describe(a, rtype, name, key):
    r = ConfigResource(rtype, name)
    return a.describe_configs([r])[r].result(timeout=30)[key]


def described(a, rtype, name, key, expected, what=None):
    """Waits until DescribeConfigs shows `expected` (value, source) for `key` (Kafka applies a
    change through its metadata log, so a describe right after it may still see the old one)."""
    def check():
        e = describe(a, rtype, name, key)
        return (e.value, e.source) == expected and e
    return wait_until(check, 30, what=what or f"{key} described as {expected}")


def produce_result(bootstrap, topic, partition, size):
    """Produces one record of `size` bytes; returns the delivery error code (or None)."""
    p = producer(bootstrap, **{"message.max.bytes": 4_000_000, "linger.ms": 0,
                               "message.timeout.ms": 10000})
    errors = []
    p.produce(topic, value=b"x" * size, partition=partition,
              on_delivery=lambda err, _msg: errors.append(err))
    p.flush(15)
    assert len(errors) == 1
    return errors[0].code() if errors[0] else None


def test_dynamic_broker_config_reaches_every_partition(broker):
    b = broker.bootstrap
    a = admin(b)
    node = node_id(a)
    topic = "dynamic-broker"
    create_topic(b, topic, 4)  # over both shards of Sluice
    # Before: a 20 kB record fits the default message.max.bytes (1048588).
    for p in range(4):
        assert produce_result(b, topic, p, 20_000) is None

    assert alter(a, ResourceType.BROKER, node, ("message.max.bytes", "10000", SET)) is None
    entry = described(a, ResourceType.BROKER, node, "message.max.bytes",
                      ("10000", ConfigSource.DYNAMIC_BROKER_CONFIG.value))
    assert not entry.is_read_only
    # Every partition of the topic (which does not override it) now refuses the record.
    for p in range(4):
        wait_until(lambda: produce_result(b, topic, p, 20_000) == KafkaError.MSG_SIZE_TOO_LARGE,
                   30, what=f"partition {p} refusing a record above the dynamic limit")
    described(a, ResourceType.TOPIC, topic, "max.message.bytes",
              ("10000", ConfigSource.DYNAMIC_BROKER_CONFIG.value))

    # DELETE returns to the start-up value, everywhere.
    assert alter(a, ResourceType.BROKER, node, ("message.max.bytes", None, DELETE)) is None
    wait_until(lambda: describe(a, ResourceType.BROKER, node, "message.max.bytes").source
               != ConfigSource.DYNAMIC_BROKER_CONFIG.value, 30, what="the dynamic value gone")
    assert describe(a, ResourceType.BROKER, node, "message.max.bytes").value == "1048588"
    for p in range(4):
        wait_until(lambda: produce_result(b, topic, p, 20_000) is None, 30,
                   what=f"partition {p} accepting the record again")


def test_broker_keys_fixed_at_start_up_are_refused(broker):
    a = admin(broker.bootstrap)
    node = node_id(a)
    assert alter(a, ResourceType.BROKER, node, ("log.retention.ms", "3600000", SET)) is None
    described(a, ResourceType.BROKER, node, "log.retention.ms",
              ("3600000", ConfigSource.DYNAMIC_BROKER_CONFIG.value))
    for key, value in (("num.partitions", "3"), ("log.retention.check.interval.ms", "1000"),
                       ("log.retention.hours", "5"), ("auto.create.topics.enable", "false"),
                       ("replica.lag.time.max.ms", "10000")):
        err = alter(a, ResourceType.BROKER, node, (key, value, SET))
        assert err is not None and err.code() == KafkaError.INVALID_REQUEST, key
        assert f"Cannot update these configs dynamically: [{key}]" in err.str(), key
    for key in ("num.partitions", "log.retention.check.interval.ms", "replica.lag.time.max.ms"):
        assert describe(a, ResourceType.BROKER, node, key).is_read_only, key
    assert describe(a, ResourceType.BROKER, node, "replica.lag.time.max.ms").value == "30000"
    # One refused key refuses the whole resource: log.retention.ms keeps its value.
    err = alter(a, ResourceType.BROKER, node, ("log.retention.ms", "1000", SET),
                ("num.partitions", "3", SET))
    assert err.code() == KafkaError.INVALID_REQUEST
    assert describe(a, ResourceType.BROKER, node, "log.retention.ms").value == "3600000"
    # A value out of range: INVALID_REQUEST (Kafka's answer for a broker resource).
    err = alter(a, ResourceType.BROKER, node, ("log.segment.bytes", "100", SET))
    assert err.code() == KafkaError.INVALID_REQUEST and "log.segment.bytes" in err.str()
    # APPEND to a key that is not a list.
    err = alter(a, ResourceType.BROKER, node, ("log.retention.ms", "1", APPEND))
    assert err.code() == KafkaError.INVALID_CONFIG
    assert alter(a, ResourceType.BROKER, node, ("log.retention.ms", None, DELETE)) is None
    wait_until(lambda: describe(a, ResourceType.BROKER, node, "log.retention.ms").source
               != ConfigSource.DYNAMIC_BROKER_CONFIG.value, 30, what="the dynamic value gone")


def test_append_and_subtract_on_list_topic_configs(broker):
    b = broker.bootstrap
    a = admin(b)
    topic = "list-configs"
    create_topic(b, topic, 1)

    def value(key):
        return describe(a, ResourceType.TOPIC, topic, key).value

    def expect(key, v):
        wait_until(lambda: value(key) == v, 30, what=f"{key} = {v!r}")

    def ok(*ops):
        err = alter(a, ResourceType.TOPIC, topic, *ops)
        assert err is None, err

    expect("cleanup.policy", "delete")
    ok(("cleanup.policy", "delete", SUBTRACT))
    expect("cleanup.policy", "")
    ok(("cleanup.policy", "delete", APPEND))
    expect("cleanup.policy", "delete")
    ok(("cleanup.policy", "delete", APPEND))  # already there: unchanged
    expect("cleanup.policy", "delete")

    key = "follower.replication.throttled.replicas"
    ok((key, "0:0", APPEND))
    expect(key, "0:0")
    ok((key, "1:0", APPEND))
    expect(key, "0:0,1:0")
    ok((key, "0:0", SUBTRACT))
    expect(key, "1:0")
    # A list value is checked as a SET of it would be.
    err = alter(a, ResourceType.TOPIC, topic, (key, "nonsense", APPEND))
    assert err.code() == KafkaError.INVALID_CONFIG
    expect(key, "1:0")
    # Not a list.
    err = alter(a, ResourceType.TOPIC, topic, ("retention.ms", "1", APPEND))
    assert err.code() == KafkaError.INVALID_CONFIG
    assert "Can't APPEND to key retention.ms because its type is not LIST." in err.str()
    err = alter(a, ResourceType.BROKER, node_id(a), ("log.retention.ms", "1", SUBTRACT))
    assert err.code() == KafkaError.INVALID_CONFIG
    assert "Config value subtract is not allowed for config key: log.retention.ms" in err.str()


def test_cluster_default_with_kafka_configs_survives_restart(broker, kafka_classpath):
    """Kafka's own `kafka-configs.sh --entity-type brokers --entity-default` (ConfigCommand,
    the BROKER resource with the empty name): the cluster-wide default reaches a topic, is kept
    across a restart, and `--delete-config` removes it."""
    from jvm import check_java, run_java

    def configs(*args):
        return check_java(run_java(kafka_classpath, "org.apache.kafka.tools.ConfigCommand",
                                   ["--bootstrap-server", broker.bootstrap, "--entity-type",
                                    "brokers", "--entity-default", *args]))

    b = broker.bootstrap
    topic = "dynamic-default"
    create_topic(b, topic, 2)
    configs("--alter", "--add-config", "log.retention.ms=7200000")
    a = admin(b)
    expected = ("7200000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    described(a, ResourceType.TOPIC, topic, "retention.ms", expected)
    assert "log.retention.ms=7200000" in configs("--describe")

    broker.restart()
    a = admin(broker.bootstrap)
    described(a, ResourceType.TOPIC, topic, "retention.ms", expected, what="kept across restart")
    configs("--alter", "--delete-config", "log.retention.ms")
    described(a, ResourceType.TOPIC, topic, "retention.ms",
              ("604800000", ConfigSource.DEFAULT_CONFIG.value))
