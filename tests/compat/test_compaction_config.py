"""Log compaction's configuration and produce-side rules, as Kafka 4.4 has them (issue #27,
points 1 and 2): `cleanup.policy` takes `compact` and `compact,delete`; the compaction keys
(`min.cleanable.dirty.ratio`, `min.compaction.lag.ms`, `max.compaction.lag.ms`,
`delete.retention.ms`) are set, described and checked as Kafka checks them; a compacted topic
refuses a record without a key (INVALID_RECORD); `__consumer_offsets` is a compacted topic.
Passes against Apache Kafka 4.4 too (SLUICE_COMPAT_TARGET=kafka).
"""

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource,
                                   NewTopic, ResourceType)

from compat_util import admin, create_topic, producer, wait_until

SET, DELETE = AlterConfigOpType.SET, AlterConfigOpType.DELETE
APPEND, SUBTRACT = AlterConfigOpType.APPEND, AlterConfigOpType.SUBTRACT
TOPIC_SOURCE = ConfigSource.DYNAMIC_TOPIC_CONFIG.value
DEFAULT_SOURCE = ConfigSource.DEFAULT_CONFIG.value
COMPACTION = {
    "cleanup.policy": "compact",
    "min.cleanable.dirty.ratio": "0.25",
    "min.compaction.lag.ms": "1000",
    "max.compaction.lag.ms": "60000",
    "delete.retention.ms": "5000",
}


def alter(a, topic, *ops):
    """Runs one IncrementalAlterConfigs on `topic`; returns None or the KafkaError."""
    entries = [ConfigEntry(k, v, incremental_operation=op) for k, v, op in ops]
    r = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)
    try:
        a.incremental_alter_configs([r])[r].result(timeout=30)
        return None
    except KafkaException as e:
        return e.args[0]


def describe(a, topic):
    r = ConfigResource(ResourceType.TOPIC, topic)
    return a.describe_configs([r])[r].result(timeout=30)


def described(a, topic, key, expected):
    """Waits until DescribeConfigs shows `expected` (value, source) for `key` (Kafka applies a
    change through its metadata log, so a describe right after it may still see the old one)."""
    def check():
        e = describe(a, topic)[key]
        return (e.value, e.source) == expected
    wait_until(check, 30, what=f"{topic} {key} described as {expected}")


def test_compacted_topic_describes_its_compaction_keys(broker):
    b = broker.bootstrap
    a = admin(b)
    create_topic(b, "compacted", 1, config=COMPACTION)
    configs = describe(a, "compacted")
    for key, value in COMPACTION.items():
        assert (configs[key].value, configs[key].source) == (value, TOPIC_SOURCE), key
    # Not set: Kafka's defaults.
    other = describe(a, "compacted")["segment.ms"]
    assert other.source == DEFAULT_SOURCE

    create_topic(b, "compacted-deleting", 1, config={"cleanup.policy": "compact,delete"})
    e = describe(a, "compacted-deleting")["cleanup.policy"]
    assert (e.value, e.source) == ("compact,delete", TOPIC_SOURCE)

    # min.compaction.lag.ms may not exceed max.compaction.lag.ms.
    futures = a.create_topics([NewTopic("lag-conflict", 1, 1, config={
        "min.compaction.lag.ms": "2000", "max.compaction.lag.ms": "1000"})])
    try:
        futures["lag-conflict"].result(timeout=30)
        raise AssertionError("min.compaction.lag.ms > max.compaction.lag.ms accepted")
    except KafkaException as e:
        assert e.args[0].code() == KafkaError.INVALID_CONFIG, e


def test_cleanup_policy_set_append_subtract(broker):
    b = broker.bootstrap
    a = admin(b)
    topic = "policy-ops"
    create_topic(b, topic, 1)
    assert alter(a, topic, ("cleanup.policy", "compact", APPEND)) is None
    described(a, topic, "cleanup.policy", ("delete,compact", TOPIC_SOURCE))
    assert alter(a, topic, ("cleanup.policy", "delete", SUBTRACT)) is None
    described(a, topic, "cleanup.policy", ("compact", TOPIC_SOURCE))
    assert alter(a, topic, ("cleanup.policy", "compact,delete", SET)) is None
    described(a, topic, "cleanup.policy", ("compact,delete", TOPIC_SOURCE))
    assert alter(a, topic, ("cleanup.policy", "", SET)) is None
    described(a, topic, "cleanup.policy", ("", TOPIC_SOURCE))
    assert alter(a, topic, ("cleanup.policy", None, DELETE)) is None
    described(a, topic, "cleanup.policy", ("delete", DEFAULT_SOURCE))

    for key, value in [
        ("cleanup.policy", "compacted"),
        ("min.cleanable.dirty.ratio", "1.5"),
        ("min.cleanable.dirty.ratio", "-0.1"),
        ("min.compaction.lag.ms", "-1"),
        ("max.compaction.lag.ms", "0"),
        ("delete.retention.ms", "-1"),
    ]:
        err = alter(a, topic, (key, value, SET))
        assert err is not None and err.code() == KafkaError.INVALID_CONFIG, (key, value, err)
        assert key in err.str(), err.str()
    assert alter(a, topic, ("cleanup.policy", "nope", APPEND)).code() == KafkaError.INVALID_CONFIG

    assert alter(a, topic, ("max.compaction.lag.ms", "1000", SET)) is None
    described(a, topic, "max.compaction.lag.ms", ("1000", TOPIC_SOURCE))
    err = alter(a, topic, ("min.compaction.lag.ms", "1001", SET))
    assert err is not None and err.code() == KafkaError.INVALID_CONFIG, err
    described(a, topic, "min.compaction.lag.ms", ("0", DEFAULT_SOURCE))


def produce_one(b, topic, key):
    p = producer(b, **{"linger.ms": 0, "message.timeout.ms": 10000, "retries": 0})
    errors = []
    p.produce(topic, value=b"v", key=key, on_delivery=lambda err, _msg: errors.append(err))
    p.flush(15)
    assert len(errors) == 1
    return errors[0]


def test_compacted_topic_refuses_a_record_without_key(broker):
    b = broker.bootstrap
    create_topic(b, "compacted-keys", 1, config={"cleanup.policy": "compact"})
    assert produce_one(b, "compacted-keys", b"k") is None
    err = produce_one(b, "compacted-keys", None)
    assert err is not None and err.code() == KafkaError.INVALID_RECORD, err
    # A compressed batch is checked as well.
    p = producer(b, **{"linger.ms": 0, "compression.type": "lz4", "message.timeout.ms": 10000})
    errors = []
    p.produce("compacted-keys", value=b"v" * 100, on_delivery=lambda e, _m: errors.append(e))
    p.flush(15)
    assert errors[0] is not None and errors[0].code() == KafkaError.INVALID_RECORD, errors
    # A topic that only deletes takes it.
    create_topic(b, "deleting-keys", 1)
    assert produce_one(b, "deleting-keys", None) is None


def test_consumer_offsets_is_compacted(broker):
    b = broker.bootstrap
    create_topic(b, "committed", 1)
    c = Consumer({"bootstrap.servers": b, "group.id": "compaction-config",
                  "enable.auto.commit": False})
    def commit():
        # The coordinator may still be loading its partition (NOT_COORDINATOR): retry.
        try:
            c.commit(offsets=[TopicPartition("committed", 0, 0)], asynchronous=False)
            return True
        except KafkaException as e:
            if not e.args[0].retriable() and e.args[0].code() not in (
                    KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                    KafkaError.COORDINATOR_NOT_AVAILABLE):
                raise
            return False
    try:
        wait_until(commit, 30, 0.5, "a committed offset")
    finally:
        c.close()
    a = admin(b)
    e = describe(a, "__consumer_offsets")["cleanup.policy"]
    assert (e.value, e.source) == ("compact", TOPIC_SOURCE)
    e = describe(a, "__consumer_offsets")["compression.type"]
    assert (e.value, e.source) == ("producer", TOPIC_SOURCE)
    e = describe(a, "__consumer_offsets")["segment.bytes"]
    assert (e.value, e.source) == ("104857600", TOPIC_SOURCE)


def test_broker_describes_the_cleaners_keys(broker):
    a = admin(broker.bootstrap)
    node = str(next(iter(a.list_topics(timeout=10).brokers)))
    r = ConfigResource(ResourceType.BROKER, node)
    configs = a.describe_configs([r])[r].result(timeout=30)
    for key, value in [
        ("log.cleaner.enable", "true"),
        ("log.cleaner.threads", "1"),
        ("log.cleaner.backoff.ms", "15000"),
        ("log.cleaner.dedupe.buffer.size", "134217728"),
        ("log.cleaner.io.buffer.size", "524288"),
        ("log.cleaner.io.max.bytes.per.second", "1.7976931348623157E308"),
        ("log.cleaner.min.cleanable.ratio", "0.5"),
        ("log.cleaner.delete.retention.ms", "86400000"),
    ]:
        assert key in configs, key
        assert configs[key].value == value, (key, configs[key].value)
