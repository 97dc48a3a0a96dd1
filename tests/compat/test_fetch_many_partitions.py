"""A consumer's fetch of many partitions in one request, as librdkafka sends every fetch (it has
no fetch sessions, KIP-227): Fetch v11 without a session listing all 40 partitions of a topic.
As Kafka's `ReplicaManager.fetchMessages` answers: at once when any partition has records (the
others answer no error, their offsets and no records); parked when none has, and woken by an
append to any one of them; at `max_wait_ms` with no records when nothing comes; at once when a
partition answers an error (OFFSET_OUT_OF_RANGE). Sluice serves such fetches by looking at the
partitions in place before it reads any (`fetch_scanned` in broker/src/handlers/fetch.rs);
these are its checks, and they pass against Kafka 4.4 too (SLUICE_COMPAT_TARGET=kafka)."""

import threading
import time

import kafka_wire as kw
from compat_util import create_topic

TOPIC = "many-partitions"
PARTITIONS = 40
OFFSET_OUT_OF_RANGE = 1


def produce(sock, corr, partition, values):
    sock.sendall(kw.produce_v3(corr, TOPIC, [(partition, kw.record_batch(values))]))
    got_corr, results = kw.parse_produce_v3(kw.read_frame(sock))
    assert got_corr == corr
    error, base = results[(TOPIC, partition)]
    assert error == 0
    return base


def fetch_all(sock, corr, offsets, max_wait_ms):
    """Fetch v11, no session, every partition at `offsets[p]`: (seconds waited, {partition:
    answer})."""
    started = time.monotonic()
    sock.sendall(kw.fetch_session_v11(corr, 0, -1, [(TOPIC, p, offsets[p]) for p in
                                                    range(PARTITIONS)], max_wait_ms=max_wait_ms))
    error, _, parts = kw.parse_fetch_session_v11(kw.read_frame(sock))
    waited_s = time.monotonic() - started
    assert error == 0
    assert sorted(parts) == [(TOPIC, p) for p in range(PARTITIONS)], "every partition answers"
    return waited_s, {p: parts[(TOPIC, p)] for p in range(PARTITIONS)}


def records_of(part):
    return [(b["base_offset"], b["last_offset"]) for b in kw.batch_headers(part["records"])]


def setup(broker):
    """The topic with records in partitions 3 (one) and 17 (two): (producer socket, consumer
    socket, each partition's log end offset)."""
    create_topic(broker.bootstrap, TOPIC, PARTITIONS)
    producer, consumer = kw.connect(broker.bootstrap), kw.connect(broker.bootstrap)
    assert produce(producer, 1, 3, [b"a"]) == 0
    assert produce(producer, 2, 17, [b"b", b"c"]) == 0
    ends = [0] * PARTITIONS
    ends[3], ends[17] = 1, 2
    return producer, consumer, ends


def test_the_partitions_with_records_answer_at_once_and_the_others_with_their_offsets(broker):
    _, consumer, ends = setup(broker)
    waited_s, parts = fetch_all(consumer, 3, [0] * PARTITIONS, max_wait_ms=20_000)
    # Not parked for its 20 s max_wait_ms (wide margin: no timing claim beyond it).
    assert waited_s < 15
    assert records_of(parts[3]) == [(0, 0)]
    assert records_of(parts[17]) == [(0, 1)]
    for p, part in parts.items():
        assert (part["error"], part["high_watermark"], part["log_start_offset"]) == (0, ends[p], 0)
        if p not in (3, 17):
            assert part["records"] == b""


def test_a_parked_fetch_of_many_partitions_is_woken_by_an_append_to_any_of_them(broker):
    producer, consumer, ends = setup(broker)
    answer = {}

    def parked_fetch():
        answer["fetch"] = fetch_all(consumer, 3, ends, max_wait_ms=20_000)

    t = threading.Thread(target=parked_fetch)
    t.start()
    time.sleep(0.5)  # let the fetch park
    assert "fetch" not in answer, "the fetch answered before any new record existed"
    assert produce(producer, 4, 29, [b"wake"]) == 0
    t.join(30)
    waited_s, parts = answer["fetch"]
    assert waited_s < 15, "woken by the append, not by its 20 s max_wait_ms"
    assert records_of(parts[29]) == [(0, 0)]
    assert parts[29]["high_watermark"] == 1
    assert all(part["records"] == b"" for p, part in parts.items() if p != 29)


def test_with_nothing_new_the_fetch_answers_at_its_max_wait_with_no_records(broker):
    _, consumer, ends = setup(broker)
    _, parts = fetch_all(consumer, 3, ends, max_wait_ms=300)
    for p, part in parts.items():
        assert (part["error"], part["high_watermark"], part["records"]) == (0, ends[p], b"")


def test_a_partition_out_of_range_answers_its_error_at_once(broker):
    _, consumer, ends = setup(broker)
    offsets = list(ends)
    offsets[5] = 7  # beyond partition 5's log end (0)
    waited_s, parts = fetch_all(consumer, 3, offsets, max_wait_ms=20_000)
    assert waited_s < 15, "an error ends the wait, as Kafka's fetchMessages"
    assert parts[5]["error"] == OFFSET_OUT_OF_RANGE
    for p, part in parts.items():
        if p != 5:
            assert (part["error"], part["high_watermark"], part["records"]) == (0, ends[p], b"")
