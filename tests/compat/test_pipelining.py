"""Kafka answers the requests of one connection in order, even when they go to different shards.

One connection pipelines 20 requests without waiting: Produce v3 (acks=1) to partitions 0..5 of
a 6-partition topic (spread over both shards with --smp 2), one Produce touching all six, and
Metadata v1 requests; the 20 responses must come back in request order.
"""

import pytest

import kafka_wire as kw
from compat_util import consume_all, create_topic

TOPIC = "pipelined"
PARTITIONS = 6


@pytest.mark.sluice(cores=2)
def test_responses_come_back_in_request_order(broker):
    create_topic(broker.bootstrap, TOPIC, PARTITIONS)

    requests = []  # (correlation id, kind, [(partition, [values])])
    wire = bytearray()
    produced = 0
    for i in range(20):
        corr = 1000 + i * 7  # distinct, not consecutive
        if i % 3 == 2:
            requests.append((corr, "metadata", None))
            wire += kw.metadata_v1(corr)
            continue
        if i == 10:
            parts = [(p, [f"all-{p}-{j}".encode() for j in range(3)]) for p in range(PARTITIONS)]
        else:
            p = produced % PARTITIONS
            parts = [(p, [f"req{i}-p{p}-{j}".encode() for j in range(1 + i % 4)])]
        produced += 1
        requests.append((corr, "produce", parts))
        wire += kw.produce_v3(corr, TOPIC, [(p, kw.record_batch(vals)) for p, vals in parts])

    with kw.connect(broker.bootstrap, timeout=60) as s:
        s.sendall(bytes(wire))
        responses = [kw.read_frame(s) for _ in requests]

    got = [int.from_bytes(r[:4], "big", signed=True) for r in responses]
    assert got == [corr for corr, _, _ in requests], "responses out of request order"

    # Each response is a well-formed answer to its request.
    next_offset = {p: 0 for p in range(PARTITIONS)}
    expected_values = {p: [] for p in range(PARTITIONS)}
    for (corr, kind, parts), payload in zip(requests, responses):
        if kind == "metadata":
            _, brokers, _, topics = kw.parse_metadata_v1(payload)
            assert len(brokers) == 1, brokers
            assert TOPIC in topics, topics
            err, partitions = topics[TOPIC]
            assert err == 0 and sorted(partitions) == list(range(PARTITIONS)), topics[TOPIC]
            assert all(e == 0 and leader == brokers[0][0] for e, leader in partitions.values())
        else:
            _, results = kw.parse_produce_v3(payload)
            assert sorted(results) == sorted((TOPIC, p) for p, _ in parts), results
            for p, values in parts:
                err, base = results[(TOPIC, p)]
                assert err == 0, f"produce to partition {p} (correlation {corr}): error {err}"
                # One connection, in order: each partition's batches get consecutive offsets.
                assert base == next_offset[p], f"partition {p}: base offset {base}"
                next_offset[p] += len(values)
                expected_values[p] += values

    # And the data is there, in that order.
    got = consume_all(broker.bootstrap, TOPIC, PARTITIONS, expected=sum(next_offset.values()))
    for p in range(PARTITIONS):
        assert [m.offset() for m in got[p]] == list(range(next_offset[p]))
        assert [m.value() for m in got[p]] == expected_values[p]
