"""Client helpers shared by the compatibility tests (confluent-kafka / librdkafka).

Sluice has no consumer groups or idempotent producer yet: producers set
enable.idempotence=false, consumers use assign() and never commit.
"""

import os
import time

from confluent_kafka import (OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer,
                             TopicPartition)
from confluent_kafka.admin import AdminClient, NewTopic

# SLUICE_LONG=1 (scripts/test-long): the tests marked `long` run, and the loop tests (kill and
# restart cycles) run their full counts instead of the README test command's shorter ones.
LONG = os.environ.get("SLUICE_LONG", "").strip() == "1"


def long_or(full, short):
    """`full` under SLUICE_LONG=1, else `short`: a loop's count within the 30-minute budget."""
    return full if LONG else short


def wait_until(predicate, timeout, interval=0.1, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def producer(bootstrap, **extra):
    conf = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": False,
        "acks": "all",
        "linger.ms": 5,
        "message.timeout.ms": 30000,
    }
    conf.update(extra)
    return Producer(conf)


def consumer(bootstrap, **extra):
    conf = {
        "bootstrap.servers": bootstrap,
        # librdkafka wants a group.id for a Consumer; it is never used: assign() only, no commits.
        "group.id": "sluice-compat-unused",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "error",
        "enable.partition.eof": True,
    }
    conf.update(extra)
    return Consumer(conf)


def admin(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(bootstrap, topic, partitions, timeout=30, replication_factor=1, config=None):
    """Creates `topic` (with topic `config`, a dict of Kafka keys) and waits until Metadata lists
    all its partitions with a leader."""
    a = admin(bootstrap)  # keep the handle alive until the future completes
    futures = a.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=replication_factor,
                  config=config or {})],
        operation_timeout=timeout, request_timeout=timeout)
    futures[topic].result(timeout=timeout)
    wait_for_topic(bootstrap, topic, partitions, timeout)


def wait_for_topic(bootstrap, topic, partitions, timeout=30):
    a = admin(bootstrap)

    def ready():
        md = a.list_topics(topic=topic, timeout=10)
        t = md.topics.get(topic)
        return (t is not None and t.error is None and len(t.partitions) == partitions
                and all(p.leader >= 0 for p in t.partitions.values()))

    wait_until(ready, timeout, 0.2, f"metadata of {topic} with {partitions} partitions")
    wait_partitions_ready(bootstrap, topic, partitions, timeout)


# A partition Metadata lists can still answer these for a moment on Kafka (its replica manager
# becomes leader just after the metadata cache lists the leader); clients retry them.
_NOT_READY_ERRORS = (3, 5, 6)  # UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER


def wait_partitions_ready(bootstrap, topic, partitions, timeout=30):
    """Waits until a raw Fetch of each partition of `topic`, sent to its leader, is answered
    without a not-ready error, so that tests sending raw requests see what a retrying client
    would see."""
    import kafka_wire as kw

    a = admin(bootstrap)
    for p in range(partitions):
        # A leader Metadata names is not always among the brokers it lists (a fenced or
        # starting broker): ask again until it is.
        def listed_leader(p=p):
            md = a.list_topics(topic=topic, timeout=10)
            t = md.topics.get(topic)
            part = t.partitions.get(p) if t is not None else None
            return md.brokers.get(part.leader) if part is not None else None

        leader = wait_until(listed_leader, timeout, 0.2, f"a listed leader of {topic}-{p}")
        with kw.connect(f"{leader.host}:{leader.port}") as s:
            def served(p=p, s=s):
                s.sendall(kw.fetch_v4(1, topic, p, 0, max_wait_ms=0))
                _corr, parts = kw.parse_fetch_v4(kw.read_frame(s))
                return parts[(topic, p)][0] not in _NOT_READY_ERRORS

            wait_until(served, timeout, 0.1, f"partition {topic}-{p} served")


def consume_all(bootstrap, topic, partitions, expected=None, timeout=60):
    """Reads every partition of `topic` from the beginning to its end.

    Returns {partition: [Message, ...]} in the order received. Stops when every partition
    reported EOF and, if `expected` is given, at least that many records came back.
    """
    c = consumer(bootstrap)
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        out = {p: [] for p in range(partitions)}
        eof = set()
        count = 0
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(msg.partition())
                    if len(eof) == partitions and (expected is None or count >= expected):
                        return out
                    continue
                raise KafkaException(msg.error())
            eof.discard(msg.partition())
            out[msg.partition()].append(msg)
            count += 1
        raise AssertionError(
            f"consume_all({topic}): timed out after {timeout} s with {count} records "
            f"(expected {expected}), EOF on partitions {sorted(eof)}")
    finally:
        c.close()


def read_partition(bootstrap, topic, partition=0, timeout=60):
    """Every record of `topic`'s `partition` from its log start to its end, in order:
    [(offset, key, value)]."""
    c = consumer(bootstrap)
    c.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
    out = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is None:
            continue
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF:
                break
            raise AssertionError(m.error())
        out.append((m.offset(), m.key(), m.value()))
    c.close()
    return out
