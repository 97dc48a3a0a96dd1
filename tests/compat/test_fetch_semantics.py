"""Fetch and offsets exactly as Kafka defines them, checked on the wire (Produce v3, Fetch v4):
contiguous offsets from 0; a fetch at the log end answers no error and no data; beyond it,
OFFSET_OUT_OF_RANGE; a parked fetch is woken by an append long before its max_wait_ms; the
first batch comes whole even when larger than max_bytes (KIP-74); a follower's fetch from a
broker that is not a replica gets NOT_LEADER_OR_FOLLOWER."""

import threading
import time

import kafka_wire as kw
from compat_util import create_topic

TOPIC = "semantics"
OFFSET_OUT_OF_RANGE = 1
NOT_LEADER_OR_FOLLOWER = 6


def produce(sock, corr, values):
    sock.sendall(kw.produce_v3(corr, TOPIC, [(0, kw.record_batch(values))]))
    got_corr, results = kw.parse_produce_v3(kw.read_frame(sock))
    assert got_corr == corr
    error, base = results[(TOPIC, 0)]
    assert error == 0
    return base


def fetch(sock, corr, offset, max_wait_ms=0, max_bytes=1 << 20):
    sock.sendall(kw.fetch_v4(corr, TOPIC, 0, offset, max_wait_ms=max_wait_ms, max_bytes=max_bytes))
    got_corr, parts = kw.parse_fetch_v4(kw.read_frame(sock))
    assert got_corr == corr
    return parts[(TOPIC, 0)]


def test_offsets_log_end_and_out_of_range(broker):
    create_topic(broker.bootstrap, TOPIC, 1)
    sock = kw.connect(broker.bootstrap)
    assert produce(sock, 1, [b"a", b"b", b"c"]) == 0
    assert produce(sock, 2, [b"d"]) == 3
    assert produce(sock, 3, [b"e", b"f"]) == 4

    error, hw, records = fetch(sock, 4, 0)
    assert (error, hw) == (0, 6)
    batches = kw.batch_headers(records)
    assert [(b["base_offset"], b["last_offset"]) for b in batches] == [(0, 2), (3, 3), (4, 5)]
    assert all(b["crc_ok"] for b in batches)

    # At the log end: no error, no data.
    error, hw, records = fetch(sock, 5, 6, max_wait_ms=100)
    assert (error, hw, records) == (0, 6, b"")
    # Beyond it: OFFSET_OUT_OF_RANGE.
    error, _, records = fetch(sock, 6, 7)
    assert error == OFFSET_OUT_OF_RANGE
    assert records == b""


def test_a_parked_fetch_is_woken_by_an_append(broker):
    create_topic(broker.bootstrap, TOPIC, 1)
    consumer = kw.connect(broker.bootstrap)
    producer = kw.connect(broker.bootstrap)
    answer = {}

    def parked_fetch():
        started = time.monotonic()
        answer["part"] = fetch(consumer, 7, 0, max_wait_ms=20_000)
        answer["waited_s"] = time.monotonic() - started

    t = threading.Thread(target=parked_fetch)
    t.start()
    time.sleep(0.5)  # let the fetch park
    assert "part" not in answer, "the fetch answered before any data existed"
    produce(producer, 8, [b"wake"])
    t.join(30)
    error, hw, records = answer["part"]
    assert (error, hw) == (0, 1)
    assert kw.batch_headers(records)[0]["base_offset"] == 0
    # Woken by the append, not by its 20 s max_wait_ms (wide margin: no timing claim beyond it).
    assert answer["waited_s"] < 15


def test_first_batch_comes_whole_even_above_max_bytes(broker):
    create_topic(broker.bootstrap, TOPIC, 1)
    sock = kw.connect(broker.bootstrap)
    big = [b"x" * 10_000]
    produce(sock, 9, big)
    produce(sock, 10, big)
    error, _, records = fetch(sock, 11, 0, max_bytes=100)
    assert error == 0
    batches = kw.batch_headers(records)
    assert len(batches) == 1, "one whole batch, not a partial one and not two"
    assert len(records) > 10_000


def test_a_replica_fetch_from_a_non_replica_is_refused(broker):
    # Kafka's Partition.followerReplicaOrThrow: a Fetch with replica_id >= 0 from a broker not
    # in the replica set (and, v4, without a current leader epoch) -> NOT_LEADER_OR_FOLLOWER;
    # the same partition still serves a consumer (replica_id -1).
    create_topic(broker.bootstrap, TOPIC, 1)
    sock = kw.connect(broker.bootstrap)
    assert produce(sock, 1, [b"a", b"b"]) == 0
    sock.sendall(kw.fetch_v4(2, TOPIC, 0, 0, max_wait_ms=0, replica_id=4242))
    got_corr, parts = kw.parse_fetch_v4(kw.read_frame(sock))
    assert got_corr == 2
    error, _, records = parts[(TOPIC, 0)]
    assert (error, records) == (NOT_LEADER_OR_FOLLOWER, b"")
    error, hw, records = fetch(sock, 3, 0)
    assert (error, hw) == (0, 2)
    assert len(kw.batch_headers(records)) == 1
