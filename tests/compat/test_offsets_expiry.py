"""Committed offsets expire as Kafka expires them (`offsets.retention.minutes`, KIP-211;
issue #27 point 6): an Empty group's offsets go `offsets.retention.minutes` after it became
Empty, tombstoned in `__consumer_offsets`, and the group goes with them; a Stable group's
offsets of the topics it subscribes to stay. After a restart (the coordinator replays its log)
the expired group stays gone. Passes against Apache Kafka 4.4 too (SLUICE_COMPAT_TARGET=kafka).

`offsets.retention.minutes` cannot be set below 1 in Kafka, so this test waits a minute.
"""

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition

from compat_util import admin, create_topic, producer, wait_until

SETTINGS = {
    "group.initial.rebalance.delay.ms": 0,
    "offsets.retention.minutes": 1,
    "offsets.retention.check.interval.ms": 1000,
}
TOPIC = "expiring-offsets"
RETENTION_WAIT_S = 180  # 60 s of retention, a check every second, and a loaded machine


def committed(bootstrap, group):
    """{partition: committed offset} of `group` on TOPIC (absent: none committed)."""
    a = admin(bootstrap)  # kept alive until the result arrives
    request = [ConsumerGroupTopicPartitions(group, [TopicPartition(TOPIC, 0)])]
    result = a.list_consumer_group_offsets(request)[group].result(30)
    return {tp.partition: tp.offset for tp in result.topic_partitions if tp.offset >= 0}


def listed_groups(bootstrap):
    a = admin(bootstrap)  # kept alive until the result arrives
    return {g.group_id for g in a.list_consumer_groups().result(30).valid}


def consume_and_commit(bootstrap, group, n):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([TOPIC])
    seen = 0
    while seen < n:
        msg = c.poll(1.0)
        if msg is not None and not msg.error():
            seen += 1
    c.commit(asynchronous=False)
    return c


@pytest.mark.long("waits out offsets.retention.minutes twice (about a minute)")
@pytest.mark.sluice(settings=SETTINGS)
def test_an_empty_groups_offsets_expire_and_a_stable_groups_stay(broker):
    create_topic(broker.bootstrap, TOPIC, 1)
    p = producer(broker.bootstrap)
    for i in range(10):
        p.produce(TOPIC, f"v{i}".encode())
    assert p.flush(30) == 0

    kept = consume_and_commit(broker.bootstrap, "stays-stable", 10)
    gone = consume_and_commit(broker.bootstrap, "goes-empty", 10)
    gone.close()  # Empty from now: its offsets expire a minute later
    try:
        assert committed(broker.bootstrap, "goes-empty") == {0: 10}
        wait_until(lambda: "goes-empty" not in listed_groups(broker.bootstrap),
                   RETENTION_WAIT_S, interval=1, what="the Empty group removed by expiry")
        assert committed(broker.bootstrap, "goes-empty") == {}
        kept.poll(0.1)  # the Stable member stays in its group
        assert committed(broker.bootstrap, "stays-stable") == {0: 10}
    finally:
        kept.close()

    broker.restart()
    assert "goes-empty" not in listed_groups(broker.bootstrap)
    assert committed(broker.bootstrap, "goes-empty") == {}
    assert committed(broker.bootstrap, "stays-stable") == {0: 10}
