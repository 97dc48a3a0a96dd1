"""confluent-kafka (librdkafka 2.16): produce with acks=all, assign-and-read, ListOffsets by time,
Metadata, and CreateTopics errors."""

import time

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import NewTopic

from compat_util import admin, consume_all, consumer, create_topic, producer

COUNT = 1000
PARTITIONS = 3


def produce_with_reports(bootstrap, topic, messages, **conf):
    """`messages`: [(partition, key, value, timestamp ms)]. Returns the delivery reports in
    delivery order as [(error, partition, offset, value, timestamp)]."""
    reports = []

    def on_delivery(err, msg):
        reports.append((err, msg.partition(), msg.offset(), msg.value(), msg.timestamp()[1]))

    p = producer(bootstrap, **conf)
    for partition, key, value, ts in messages:
        p.produce(topic, value=value, key=key, partition=partition, timestamp=ts,
                  on_delivery=on_delivery)
        p.poll(0)
    remaining = p.flush(60)
    assert remaining == 0, f"{remaining} messages still undelivered after 60 s"
    return reports


def test_produce_acks_all_and_read_back(broker):
    topic = "confluent-acks-all"
    create_topic(broker.bootstrap, topic, PARTITIONS)

    base_ts = int(time.time() * 1000) - 3_600_000  # an hour ago, 10 ms apart
    messages = [(i % PARTITIONS, f"k{i}".encode(), f"value-{i:04d}".encode() * 3, base_ts + 10 * i)
                for i in range(COUNT)]
    reports = produce_with_reports(broker.bootstrap, topic, messages, acks="all")

    assert len(reports) == COUNT
    errors = [r for r in reports if r[0] is not None]
    assert not errors, f"{len(errors)} failed deliveries, first: {errors[0]}"
    by_partition = {p: sorted((off, val, ts) for _, part, off, val, ts in reports if part == p)
                    for p in range(PARTITIONS)}
    for p, items in by_partition.items():
        assert [off for off, _, _ in items] == list(range(len(items))), f"partition {p} offsets"
        # One producer, one partition: offsets follow the order of produce().
        assert [val for _, val, _ in items] == [m[2] for m in messages if m[0] == p]

    # Read everything back with assign() from the beginning.
    got = consume_all(broker.bootstrap, topic, PARTITIONS, expected=COUNT)
    for p, items in by_partition.items():
        msgs = got[p]
        assert [(m.offset(), m.value(), m.timestamp()[1]) for m in msgs] == items, f"partition {p}"
        assert all(m.key() == f"k{int(m.value()[6:10])}".encode() for m in msgs)

    c = consumer(broker.bootstrap)
    try:
        # Watermarks (ListOffsets earliest / latest).
        for p, items in by_partition.items():
            lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            assert (lo, hi) == (0, len(items)), f"partition {p} watermarks"

        # ListOffsets by timestamp: first offset whose timestamp >= the target.
        target = base_ts + 10 * (COUNT // 2) + 5  # between two records
        future = int(time.time() * 1000) + 3_600_000
        for ts, name in ((target, "middle"), (base_ts - 1000, "before"), (future, "future")):
            res = c.offsets_for_times([TopicPartition(topic, p, ts) for p in range(PARTITIONS)],
                                      timeout=10)
            for tp in res:
                assert tp.error is None, f"{name}: {tp}"
                items = by_partition[tp.partition]
                matches = [off for off, _, t in items if t >= ts]
                expected = matches[0] if matches else -1  # -1 = OFFSET_END: no such record
                assert tp.offset == expected, f"{name} ts {ts} partition {tp.partition}: {tp}"
    finally:
        c.close()


def test_list_topics_shows_partitions(broker):
    topic = "confluent-metadata"
    create_topic(broker.bootstrap, topic, 4)
    md = admin(broker.bootstrap).list_topics(timeout=10)
    assert topic in md.topics, sorted(md.topics)
    t = md.topics[topic]
    assert t.error is None
    assert sorted(t.partitions) == [0, 1, 2, 3]
    assert len(md.brokers) == 1
    (broker_id,) = md.brokers
    assert md.brokers[broker_id].port == broker.port
    for p in t.partitions.values():
        assert p.error is None and p.leader == broker_id
        assert p.replicas == [broker_id] and p.isrs == [broker_id]


def create_error(bootstrap, new_topic):
    a = admin(bootstrap)  # keep the handle alive until the future completes
    fut = a.create_topics([new_topic], operation_timeout=10, request_timeout=15)
    with pytest.raises(KafkaException) as exc:
        fut[new_topic.topic].result(timeout=30)
    return exc.value.args[0]


def test_create_topic_replication_factor_2_fails(broker):
    err = create_error(broker.bootstrap, NewTopic("rf-two", num_partitions=1, replication_factor=2))
    assert err.code() == KafkaError.INVALID_REPLICATION_FACTOR, err


def test_create_topic_invalid_name_fails(broker):
    for name in ("bad name!", "a" * 250, ".."):
        err = create_error(broker.bootstrap, NewTopic(name, num_partitions=1, replication_factor=1))
        assert err.code() == KafkaError.TOPIC_EXCEPTION, f"{name!r}: {err}"
