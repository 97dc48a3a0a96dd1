"""The leader-side epoch APIs on the wire, as Apache Kafka answers them (KIP-320, KIP-101):
OffsetForLeaderEpoch v2-v4 (the end offset of a leader epoch, undefined as -1/-1), and the
check of a request's current leader epoch in OffsetForLeaderEpoch, ListOffsets v4+ and Fetch
v9+ (older than the partition's: FENCED_LEADER_EPOCH, newer: UNKNOWN_LEADER_EPOCH, per
partition; -1 asks for no check, and so does any negative epoch in a Fetch); ListOffsets'
leader epoch of the offset it returns. A new single-node topic is at leader epoch 0, in
Kafka and in Sluice.

Not checked here (it needs a leader election with a lagging high watermark): ListOffsets'
OFFSET_NOT_AVAILABLE window after an election."""

import pytest

import kafka_wire as kw
from compat_util import create_topic

TOPIC = "epochs"


def produce(sock, corr, values, base_timestamp_ms):
    batch = kw.record_batch(values, base_timestamp_ms=base_timestamp_ms)
    sock.sendall(kw.produce_v3(corr, TOPIC, [(0, batch)]))
    got_corr, results = kw.parse_produce_v3(kw.read_frame(sock))
    assert got_corr == corr
    error, base = results[(TOPIC, 0)]
    assert error == 0
    return base


@pytest.fixture
def five_records(broker):
    """A one-partition topic holding offsets 0-4 in two batches (timestamps 1000 and 2000),
    and a connection to its broker."""
    create_topic(broker.bootstrap, TOPIC, 1)
    sock = kw.connect(broker.bootstrap)
    assert produce(sock, 1, [b"a", b"b", b"c"], 1000) == 0
    assert produce(sock, 2, [b"d", b"e"], 2000) == 3
    yield sock
    sock.close()


def offset_for_leader_epoch(sock, corr, version, partitions, topic=TOPIC):
    sock.sendall(kw.offset_for_leader_epoch(corr, version, topic, partitions))
    got_corr, out = kw.parse_offset_for_leader_epoch(kw.read_frame(sock), version)
    assert got_corr == corr
    return out


@pytest.mark.parametrize("version", [2, 3, 4])
def test_offset_for_leader_epoch_answers_end_offsets_and_checks_the_current_epoch(
        five_records, version):
    sock = five_records
    out = offset_for_leader_epoch(sock, 10, version, [(0, -1, 0)])
    # The current epoch runs to the log end offset.
    assert out[(TOPIC, 0)] == (0, 0, 5)
    # The same, with the current leader epoch checked and matching.
    assert offset_for_leader_epoch(sock, 11, version, [(0, 0, 0)])[(TOPIC, 0)] == (0, 0, 5)
    # An epoch above every epoch of the log is undefined, with no error.
    assert offset_for_leader_epoch(sock, 12, version, [(0, -1, 3)])[(TOPIC, 0)] == (0, -1, -1)
    # Only -1 is undefined: another negative epoch is below every epoch of the log, which is
    # answered with that epoch and the start of the earliest epoch.
    assert offset_for_leader_epoch(sock, 13, version, [(0, -1, -5)])[(TOPIC, 0)] == (0, -5, 0)
    assert offset_for_leader_epoch(sock, 16, version, [(0, -1, -1)])[(TOPIC, 0)] == (0, -1, -1)
    # Newer than the partition's: this broker does not know it yet.
    assert offset_for_leader_epoch(sock, 14, version, [(0, 1, 0)])[(TOPIC, 0)] == (
        kw.UNKNOWN_LEADER_EPOCH, -1, -1)
    # Older than the partition's (only -1 means "no check" here): fenced.
    assert offset_for_leader_epoch(sock, 15, version, [(0, -2, 0)])[(TOPIC, 0)] == (
        kw.FENCED_LEADER_EPOCH, -1, -1)


def test_offset_for_leader_epoch_errors_are_per_partition(five_records):
    sock = five_records
    out = offset_for_leader_epoch(sock, 20, 3, [(0, 0, 0), (7, 0, 0)])
    assert out[(TOPIC, 0)] == (0, 0, 5)
    assert out[(TOPIC, 7)] == (kw.UNKNOWN_TOPIC_OR_PARTITION, -1, -1)
    out = offset_for_leader_epoch(sock, 21, 3, [(0, -1, 0)], topic="no-such-topic")
    assert out[("no-such-topic", 0)] == (kw.UNKNOWN_TOPIC_OR_PARTITION, -1, -1)


def list_offsets(sock, corr, version, partitions):
    sock.sendall(kw.list_offsets(corr, version, TOPIC, partitions))
    got_corr, out = kw.parse_list_offsets(kw.read_frame(sock))
    assert got_corr == corr
    return out[(TOPIC, 0)]


@pytest.mark.parametrize("version", [4, 5])
def test_list_offsets_answers_leader_epochs_and_checks_the_current_epoch(five_records, version):
    sock = five_records
    # (error, timestamp, offset, leader epoch): latest is the high watermark at the current
    # epoch; earliest the log start offset at its record's epoch.
    assert list_offsets(sock, 30, version, [(0, -1, kw.LATEST_TIMESTAMP)]) == (0, -1, 5, 0)
    assert list_offsets(sock, 31, version, [(0, 0, kw.EARLIEST_TIMESTAMP)]) == (0, -1, 0, 0)
    # A timestamp lookup: the first record at or after it, with its batch's epoch.
    assert list_offsets(sock, 32, version, [(0, 0, 1500)]) == (0, 2000, 3, 0)
    # Nothing at or after the timestamp: -1 everywhere, no error.
    assert list_offsets(sock, 33, version, [(0, -1, 5000)]) == (0, -1, -1, -1)
    assert list_offsets(sock, 34, version, [(0, 1, kw.LATEST_TIMESTAMP)]) == (
        kw.UNKNOWN_LEADER_EPOCH, -1, -1, -1)
    assert list_offsets(sock, 35, version, [(0, -2, kw.LATEST_TIMESTAMP)]) == (
        kw.FENCED_LEADER_EPOCH, -1, -1, -1)


def fetch(sock, corr, current_leader_epoch):
    sock.sendall(kw.fetch_v9(corr, TOPIC, 0, 0, current_leader_epoch))
    got_corr, out = kw.parse_fetch_v9(kw.read_frame(sock))
    assert got_corr == corr
    return out[(TOPIC, 0)]


def test_fetch_checks_the_current_leader_epoch(five_records):
    sock = five_records
    # Matching, or any negative epoch (no check in a Fetch): the records.
    for corr, epoch in [(40, 0), (41, -1), (42, -2)]:
        error, hw, records = fetch(sock, corr, epoch)
        assert (error, hw) == (0, 5)
        assert [b["base_offset"] for b in kw.batch_headers(records)] == [0, 3]
    # Newer than the partition's: UNKNOWN_LEADER_EPOCH and no records.
    error, hw, records = fetch(sock, 43, 1)
    assert (error, hw, records) == (kw.UNKNOWN_LEADER_EPOCH, -1, b"")
