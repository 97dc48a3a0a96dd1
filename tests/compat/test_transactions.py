"""Transactions, the partition side (issue #28, KIP-98): transactional batches produced by raw
wire (a producer id from InitProducerId, the transactional attribute, a `transactional_id` in
the request), ended by commit/abort markers written with WriteTxnMarkers (API 27, v1) by raw
wire. Checked: a read_committed consumer — confluent-kafka with `isolation.level=
read_committed`, and a raw Fetch with isolation_level 1 — sees committed records only, aborted
ones filtered (the response lists the aborted transactions of the range), and stops at the
last stable offset (LSO) of an open transaction; ListOffsets latest read_committed is the LSO;
read_uncommitted sees everything; a parked read_committed fetch is woken by the commit
marker; DescribeProducers (API 61, v0) shows the producers and their open transactions;
WriteTxnMarkers' and Produce's per-partition errors are Kafka's.

Two tests run against Kafka too: DescribeProducers of an idempotent producer (raw wire and
`kafka-transactions.sh describe-producers`, Kafka 4.4's TransactionsCommand), and the consumer
side of committed, aborted and open transactions (read_committed and read_uncommitted
consumers, the raw Fetch's LSO and aborted list, ListOffsets, DescribeProducers' open
transaction, a parked read_committed fetch woken by the commit), whose transactions are
written by confluent-kafka transactional producers through the broker's transaction
coordinator (`ClientTxns`) on both. The others are Sluice-only (the `sluice_only` marker): they
play the coordinator's part by writing the markers themselves with WriteTxnMarkers under a
producer id from an idempotent InitProducerId, which Apache Kafka 4.4 does not
allow: it verifies a transactional produce against its transaction coordinator (KIP-890,
`transaction.partition.verification.enable`), which knows no transaction for a raw producer,
and WriteTxnMarkers is an inter-broker API (CLUSTER_ACTION). Sluice verifies too, so these
tests switch the verification off (test_txn_verification.py tests it). The coordinator itself is tested
in test_txn_coordinator.py."""

import re
import struct
import threading
import time

import pytest
from confluent_kafka import KafkaError, TopicPartition

import kafka_wire as kw
from compat_util import consumer, create_topic, producer, wait_until
from jvm import check_java, run_java

SLUICE_ONLY = pytest.mark.sluice_only(
    "the test writes the markers itself with WriteTxnMarkers "
    "(see the module docstring)")
# The Sluice-only tests write transactional batches under a producer id no coordinator knows:
# KIP-890's verification (on by default, as Kafka's) is switched off for them.
UNVERIFIED_SETTINGS = {"transaction.partition.verification.enable": "false"}
UNVERIFIED = pytest.mark.sluice(settings=UNVERIFIED_SETTINGS)
TRANSACTIONS_COMMAND = "org.apache.kafka.tools.TransactionsCommand"

API_INIT_PRODUCER_ID = 22
API_WRITE_TXN_MARKERS = 27
API_DESCRIBE_PRODUCERS = 61

UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_PRODUCER_EPOCH = 47
TRANSACTION_COORDINATOR_FENCED = 52
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
INVALID_RECORD = 87

READ_UNCOMMITTED = 0
READ_COMMITTED = 1
TRANSACTIONAL = 0x10
CONTROL = 0x20
TXN_ID = "compat-txn"


# ---- wire helpers --------------------------------------------------------------------------

def init_producer_id(sock, corr):
    """An idempotent producer id (InitProducerId v0 without a transactional id)."""
    deadline = time.monotonic() + 30
    while True:
        body = kw.string(None) + kw.i32(60_000)
        payload = kw.request(sock, kw.frame(kw.header_v1(API_INIT_PRODUCER_ID, 0, corr) + body))
        _corr, _throttle, error, pid, epoch = struct.unpack(">iihqh", payload[:20])
        if error == 0:
            return pid, epoch
        assert time.monotonic() < deadline, f"InitProducerId error {error}"
        time.sleep(0.2)


def txn_batch(values, pid, epoch, seq, attributes=TRANSACTIONAL):
    """A RecordBatch of `values` from producer `pid`/`epoch` at sequence `seq`, with
    `attributes` (transactional by default)."""
    batch = bytearray(kw.record_batch(values))
    struct.pack_into(">h", batch, 21, attributes)
    struct.pack_into(">qhi", batch, 43, pid, epoch, seq)
    struct.pack_into(">I", batch, 17, kw._crc32c(bytes(batch[21:])))
    return bytes(batch)


def produce(sock, corr, topic, batch, transactional_id=TXN_ID, partition=0):
    """Produce v3 (acks=all) of one batch -> (error, base offset)."""
    body = (kw.string(transactional_id) + kw.i16(-1) + kw.i32(30_000) + kw.i32(1)
            + kw.string(topic) + kw.i32(1) + kw.i32(partition) + kw.bytes_(batch))
    payload = kw.request(sock, kw.frame(kw.header_v1(kw.API_PRODUCE, 3, corr) + body))
    _, results = kw.parse_produce_v3(payload)
    return results[(topic, partition)]


def compact_array(items):
    return kw.uvarint(len(items) + 1) + b"".join(items)


def write_txn_markers(sock, corr, markers):
    """WriteTxnMarkers v1 (flexible); `markers`: [(pid, epoch, commit, coordinator epoch,
    {topic: [partitions]})] -> [(pid, {(topic, partition): error})]."""
    body = compact_array([
        kw.i64(pid) + kw.i16(epoch) + kw.i8(1 if commit else 0)
        + compact_array([kw.compact_string(t) + compact_array([kw.i32(p) for p in ps])
                         + kw.uvarint(0) for t, ps in topics.items()])
        + kw.i32(coordinator_epoch) + kw.uvarint(0)
        for pid, epoch, commit, coordinator_epoch, topics in markers]) + kw.uvarint(0)
    payload = kw.request(sock, kw.frame(kw.header_v2(API_WRITE_TXN_MARKERS, 1, corr) + body))
    r = kw.Reader(payload)
    assert r.i32() == corr
    kw._tagged_fields(r)
    out = []
    for _ in range(kw._read_uvarint(r) - 1):
        pid = r.i64()
        errors = {}
        for _ in range(kw._read_uvarint(r) - 1):
            name = kw._compact_string(r)
            for _ in range(kw._read_uvarint(r) - 1):
                p, err = r.i32(), r.i16()
                kw._tagged_fields(r)
                errors[(name, p)] = err
            kw._tagged_fields(r)
        kw._tagged_fields(r)
        out.append((pid, errors))
    kw._tagged_fields(r)
    assert not r.remaining()
    return out


def marker(sock, corr, topic, pid, epoch, commit, coordinator_epoch=0, partition=0):
    """Writes one marker -> its error code."""
    [(got_pid, errors)] = write_txn_markers(
        sock, corr, [(pid, epoch, commit, coordinator_epoch, {topic: [partition]})])
    assert got_pid == pid
    return errors[(topic, partition)]


def describe_producers(sock, corr, topic, partitions=(0,)):
    """DescribeProducers v0 -> {partition: (error, [{producer fields}])}."""
    body = compact_array([kw.compact_string(topic)
                          + compact_array([kw.i32(p) for p in partitions])
                          + kw.uvarint(0)]) + kw.uvarint(0)
    payload = kw.request(sock, kw.frame(kw.header_v2(API_DESCRIBE_PRODUCERS, 0, corr) + body))
    r = kw.Reader(payload)
    assert r.i32() == corr
    kw._tagged_fields(r)
    r.i32()  # throttle time
    out = {}
    for _ in range(kw._read_uvarint(r) - 1):
        kw._compact_string(r)
        for _ in range(kw._read_uvarint(r) - 1):
            p, err = r.i32(), r.i16()
            kw._compact_string(r)  # error message
            producers = []
            for _ in range(kw._read_uvarint(r) - 1):
                producers.append({
                    "producer_id": r.i64(), "producer_epoch": r.i32(),
                    "last_sequence": r.i32(), "last_timestamp": r.i64(),
                    "coordinator_epoch": r.i32(), "current_txn_start_offset": r.i64()})
                kw._tagged_fields(r)
            kw._tagged_fields(r)
            out[p] = (err, producers)
        kw._tagged_fields(r)
    kw._tagged_fields(r)
    assert not r.remaining()
    return out


def fetch(sock, corr, topic, offset, isolation, max_wait_ms=0, version=4):
    """A raw Fetch of partition 0 -> the partition's answer (parse_fetch_classic's dict)."""
    frame = kw.fetch_classic(corr, version, topic, 0, offset, isolation_level=isolation,
                             max_wait_ms=max_wait_ms)
    _, _, out = kw.parse_fetch_classic(kw.request(sock, frame), version)
    return out[(topic, 0)]


def list_latest(sock, corr, topic, isolation):
    """ListOffsets v4 latest (-1) of partition 0 at `isolation` -> offset."""
    body = (kw.i32(-1) + kw.i8(isolation) + kw.i32(1) + kw.string(topic) + kw.i32(1)
            + kw.i32(0) + kw.i32(-1) + kw.i64(kw.LATEST_TIMESTAMP))
    payload = kw.request(sock, kw.frame(kw.header_v1(kw.API_LIST_OFFSETS, 4, corr) + body))
    _, out = kw.parse_list_offsets(payload)
    err, _ts, offset, _epoch = out[(topic, 0)]
    assert err == 0
    return offset


def values_read(bootstrap, topic, isolation, expected, settle_s=1.5, timeout=30):
    """Values a confluent-kafka consumer at `isolation` reads from partition 0's start: waits
    for `expected` of them, then `settle_s` more for any extra."""
    c = consumer(bootstrap, **{"isolation.level": isolation, "enable.partition.eof": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got = []
        deadline = time.monotonic() + timeout
        settle_until = None
        while time.monotonic() < (settle_until or deadline):
            m = c.poll(0.2)
            if m is not None:
                assert not m.error() or m.error().code() == KafkaError._PARTITION_EOF, m.error()
                if not m.error():
                    got.append(m.value())
            if settle_until is None and len(got) >= expected:
                settle_until = time.monotonic() + settle_s
        return got
    finally:
        c.close()


# ---- tests -----------------------------------------------------------------------------------

@SLUICE_ONLY
def test_api_versions_advertise_write_txn_markers_and_describe_producers(broker):
    """Kafka 4.4 serves WriteTxnMarkers v1-v2 (v2: KIP-1228's transaction version, for its
    coordinator's TV2 markers); Sluice v1, which its own coordinator will use."""
    sock = kw.connect(broker.bootstrap)
    _, err, apis = kw.parse_api_versions_v0(kw.request(sock, kw.api_versions_v0(1)))
    assert err == 0
    assert apis[API_WRITE_TXN_MARKERS] == (1, 1)  # Kafka 4.4: (1, 2)
    assert apis[API_DESCRIBE_PRODUCERS] == (0, 0)


@SLUICE_ONLY
@UNVERIFIED
def test_read_committed_sees_committed_only_and_stops_at_the_lso(broker):
    topic = "txn-rc"
    create_topic(broker.bootstrap, topic, 1)
    sock = kw.connect(broker.bootstrap)
    (a, ea), (b, eb), (c, ec) = (init_producer_id(sock, i) for i in (1, 2, 3))
    assert produce(sock, 10, topic, kw.record_batch([b"p0"]), transactional_id=None) == (0, 0)
    assert produce(sock, 11, topic, txn_batch([b"a1", b"a2"], a, ea, 0)) == (0, 1)
    assert marker(sock, 12, topic, a, ea, commit=True) == 0                       # offset 3
    assert produce(sock, 13, topic, txn_batch([b"b1"], b, eb, 0)) == (0, 4)
    assert marker(sock, 14, topic, b, eb, commit=False) == 0                      # offset 5
    assert produce(sock, 15, topic, txn_batch([b"c1"], c, ec, 0)) == (0, 6)       # stays open
    assert produce(sock, 16, topic, txn_batch([b"a3"], a, ea, 2)) == (0, 7)
    assert marker(sock, 17, topic, a, ea, commit=True) == 0                       # offset 8

    # read_committed: up to the LSO (c's first offset, 6), b's aborted transaction listed.
    rc = fetch(sock, 20, topic, 0, READ_COMMITTED)
    assert rc["error"] == 0
    assert (rc["high_watermark"], rc["last_stable_offset"]) == (9, 6)
    assert rc["aborted_transactions"] == [(b, 4)]
    headers = kw.batch_headers(rc["records"])
    assert [h["base_offset"] for h in headers] == [0, 1, 3, 4, 5]
    assert [bool(h["attributes"] & CONTROL) for h in headers] == [False, False, True, False, True]
    # From past the aborted transaction's marker nothing aborted is in range.
    assert fetch(sock, 21, topic, 6, READ_COMMITTED)["aborted_transactions"] == []
    assert fetch(sock, 22, topic, 6, READ_COMMITTED)["records"] == b""
    # read_uncommitted: everything below the high watermark, no aborted list, the real LSO.
    ru = fetch(sock, 23, topic, 0, READ_UNCOMMITTED)
    assert (ru["high_watermark"], ru["last_stable_offset"]) == (9, 6)
    assert ru["aborted_transactions"] is None
    assert [h["base_offset"] for h in kw.batch_headers(ru["records"])] == [0, 1, 3, 4, 5, 6, 7, 8]
    # ListOffsets latest: the LSO for read_committed, the high watermark for read_uncommitted.
    assert list_latest(sock, 24, topic, READ_COMMITTED) == 6
    assert list_latest(sock, 25, topic, READ_UNCOMMITTED) == 9

    # DescribeProducers: c's transaction is open at 6; a's and b's are closed.
    err, producers = describe_producers(sock, 26, topic)[0]
    assert err == 0
    by_pid = {p["producer_id"]: p for p in producers}
    assert set(by_pid) == {a, b, c}
    assert by_pid[c]["current_txn_start_offset"] == 6
    assert by_pid[a]["current_txn_start_offset"] == -1
    assert by_pid[b]["current_txn_start_offset"] == -1
    assert by_pid[a]["last_sequence"] == 2 and by_pid[c]["last_sequence"] == 0
    assert by_pid[a]["coordinator_epoch"] == 0
    assert by_pid[a]["last_timestamp"] > 0

    # confluent-kafka (librdkafka) as a read_committed consumer stops at the LSO and drops b1.
    assert values_read(broker.bootstrap, topic, "read_committed", 3) == [b"p0", b"a1", b"a2"]
    assert values_read(broker.bootstrap, topic, "read_uncommitted", 6) == \
        [b"p0", b"a1", b"a2", b"b1", b"c1", b"a3"]

    assert marker(sock, 30, topic, c, ec, commit=True) == 0                       # offset 9
    assert list_latest(sock, 31, topic, READ_COMMITTED) == 10
    rc = fetch(sock, 32, topic, 0, READ_COMMITTED)
    assert (rc["high_watermark"], rc["last_stable_offset"]) == (10, 10)
    assert rc["aborted_transactions"] == [(b, 4)]
    assert values_read(broker.bootstrap, topic, "read_committed", 5) == \
        [b"p0", b"a1", b"a2", b"c1", b"a3"]
    err, producers = describe_producers(sock, 33, topic)[0]
    assert all(p["current_txn_start_offset"] == -1 for p in producers)


@SLUICE_ONLY
@UNVERIFIED
def test_parked_read_committed_fetch_is_woken_by_the_commit_marker(broker):
    topic = "txn-park"
    create_topic(broker.bootstrap, topic, 1)
    sock = kw.connect(broker.bootstrap)
    pid, epoch = init_producer_id(sock, 1)
    assert produce(sock, 2, topic, txn_batch([b"x"], pid, epoch, 0)) == (0, 0)
    # The record is below the high watermark but above the LSO: read_committed waits.
    assert fetch(sock, 3, topic, 0, READ_COMMITTED)["records"] == b""
    result = {}

    def parked():
        s = kw.connect(broker.bootstrap)
        started = time.monotonic()
        result["answer"] = fetch(s, 4, topic, 0, READ_COMMITTED, max_wait_ms=20_000)
        result["waited"] = time.monotonic() - started

    t = threading.Thread(target=parked)
    t.start()
    time.sleep(1.0)
    assert "answer" not in result, "a read_committed fetch is parked below the LSO"
    assert marker(sock, 5, topic, pid, epoch, commit=True) == 0
    t.join(30)
    answer = result["answer"]
    assert result["waited"] < 10, "woken by the marker, not the 20 s deadline"
    # Woken when the marker is appended: the LSO is past the record (at the marker once that
    # is written).
    assert answer["last_stable_offset"] in (1, 2)
    assert [h["base_offset"] for h in kw.batch_headers(answer["records"])][:1] == [0]


@SLUICE_ONLY
@UNVERIFIED
def test_write_txn_markers_and_produce_errors(broker):
    topic = "txn-errors"
    create_topic(broker.bootstrap, topic, 1)
    sock = kw.connect(broker.bootstrap)
    pid, _ = init_producer_id(sock, 1)
    # Unknown topic and partition.
    [(_, errors)] = write_txn_markers(sock, 2, [(pid, 0, True, 0, {"no-such-topic": [0],
                                                                   topic: [7]})])
    assert errors == {("no-such-topic", 0): UNKNOWN_TOPIC_OR_PARTITION,
                      (topic, 7): UNKNOWN_TOPIC_OR_PARTITION}
    # A marker older than the producer's epoch.
    assert produce(sock, 3, topic, txn_batch([b"e1"], pid, 1, 0)) == (0, 0)
    assert marker(sock, 4, topic, pid, 0, commit=True) == INVALID_PRODUCER_EPOCH
    # A coordinator older than the one that wrote the producer's last marker.
    assert marker(sock, 5, topic, pid, 1, commit=True, coordinator_epoch=5) == 0
    assert produce(sock, 6, topic, txn_batch([b"e2"], pid, 1, 1)) == (0, 2)
    assert marker(sock, 7, topic, pid, 1, commit=False, coordinator_epoch=3) == \
        TRANSACTION_COORDINATOR_FENCED
    assert marker(sock, 8, topic, pid, 1, commit=False, coordinator_epoch=5) == 0
    # Kafka refuses transactional records without a transactional id, and client markers.
    assert produce(sock, 9, topic, txn_batch([b"e3"], pid, 1, 2), transactional_id=None)[0] \
        == TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    control = txn_batch([b"\x00\x00\x00\x01"], pid, 1, 2, attributes=TRANSACTIONAL | CONTROL)
    assert produce(sock, 10, topic, control)[0] == INVALID_RECORD
    rc = fetch(sock, 11, topic, 0, READ_COMMITTED)
    assert rc["last_stable_offset"] == 4 and rc["aborted_transactions"] == [(pid, 2)]


def test_describe_producers_of_an_idempotent_producer(broker, java_classpath):
    """DescribeProducers (raw v0, and `kafka-transactions.sh describe-producers`) of a producer
    with two idempotent batches: its id, epoch 0, last sequence 2, a last timestamp, no
    coordinator epoch and no open transaction. Runs against Kafka too."""
    topic = "txn-describe"
    create_topic(broker.bootstrap, topic, 1)
    sock = kw.connect(broker.bootstrap)
    pid, epoch = init_producer_id(sock, 1)
    before_ms = int(time.time() * 1000) - 60_000
    assert produce(sock, 2, topic, txn_batch([b"i1", b"i2"], pid, epoch, 0, attributes=0),
                   transactional_id=None) == (0, 0)
    assert produce(sock, 3, topic, txn_batch([b"i3"], pid, epoch, 2, attributes=0),
                   transactional_id=None) == (0, 2)
    err, producers = describe_producers(sock, 4, topic)[0]
    assert err == 0
    [p] = [p for p in producers if p["producer_id"] == pid]
    assert (p["producer_epoch"], p["last_sequence"], p["coordinator_epoch"],
            p["current_txn_start_offset"]) == (epoch, 2, -1, -1)
    assert p["last_timestamp"] >= before_ms
    assert describe_producers(sock, 5, topic, partitions=(9,))[9][0] == UNKNOWN_TOPIC_OR_PARTITION

    run = run_java(java_classpath, TRANSACTIONS_COMMAND,
                   ["--bootstrap-server", broker.bootstrap, "describe-producers", "--topic",
                    topic, "--partition", "0"], timeout=90)
    out = check_java(run)
    # ProducerId ProducerEpoch LatestCoordinatorEpoch LastSequence LastTimestamp
    # CurrentTransactionStartOffset
    assert re.search(rf"^{pid}\s+{epoch}\s+(-1|None)\s+2\s+\d+\s+(-1|None)\s*$", out, re.M), out


@SLUICE_ONLY
@UNVERIFIED
def test_kafka_transactions_describe_producers_shows_an_open_transaction(broker, java_classpath):
    """`kafka-transactions.sh describe-producers` shows a transaction's start offset while it
    is open (Sluice-only: the transaction is opened by raw wire, see the module docstring)."""
    topic = "txn-describe-open"
    create_topic(broker.bootstrap, topic, 1)
    sock = kw.connect(broker.bootstrap)
    pid, epoch = init_producer_id(sock, 1)
    assert produce(sock, 2, topic, kw.record_batch([b"plain"]), transactional_id=None) == (0, 0)
    assert produce(sock, 3, topic, txn_batch([b"t1"], pid, epoch, 0)) == (0, 1)
    run = run_java(java_classpath, TRANSACTIONS_COMMAND,
                   ["--bootstrap-server", broker.bootstrap, "describe-producers", "--topic",
                    topic, "--partition", "0"], timeout=90)
    out = check_java(run)
    assert re.search(rf"^{pid}\s+{epoch}\s+(-1|None)\s+0\s+\d+\s+1\s*$", out, re.M), out


# ---- the same transactions on either target -------------------------------------------------

class ClientTxns:
    """confluent-kafka transactional producers through the broker's transaction coordinator."""

    def __init__(self, bootstrap, topic):
        self.bootstrap = bootstrap
        self.topic = topic
        self.producers = []

    def producer(self, name):
        p = producer(self.bootstrap, **{"transactional.id": f"{self.topic}-{name}",
                                        "enable.idempotence": True, "linger.ms": 50})
        p.init_transactions(30)
        self.producers.append(p)
        return {"p": p, "open": False}

    def send(self, h, values):
        if not h["open"]:
            h["p"].begin_transaction()
            h["open"] = True
        offsets = []

        def delivered(err, msg):
            assert err is None, err
            offsets.append(msg.offset())

        for v in values:
            h["p"].produce(self.topic, v, partition=0, on_delivery=delivered)
        assert h["p"].flush(30) == 0
        return min(offsets)

    def end(self, h, commit):
        if commit:
            h["p"].commit_transaction(30)
        else:
            h["p"].abort_transaction(30)
        h["open"] = False

    def pid(self, _h):
        return None  # librdkafka does not tell

    def close(self):
        for p in self.producers:
            p.flush(5)


def end_and_wait(txns, sock, topic, h, commit):
    """Ends `h`'s transaction and waits until its marker is below the high watermark (Kafka
    writes markers after EndTxn answers)."""
    before = list_latest(sock, 900, topic, READ_UNCOMMITTED)
    txns.end(h, commit)
    wait_until(lambda: list_latest(sock, 901, topic, READ_UNCOMMITTED) > before, 30,
               what="the transaction marker")


def test_consumers_see_committed_aborted_and_open_transactions(broker):
    """read_committed sees committed records only and stops at the open transaction (the
    LSO); read_uncommitted sees everything; the raw Fetch and ListOffsets answer the LSO and
    the aborted transaction; DescribeProducers shows the open transaction; the commit lets
    read_committed through. Against Kafka too (transactions by confluent-kafka there)."""
    topic = "txn-consumers"
    create_topic(broker.bootstrap, topic, 1)
    sock = kw.connect(broker.bootstrap)
    txns = ClientTxns(broker.bootstrap, topic)
    try:
        a, b, c = txns.producer("a"), txns.producer("b"), txns.producer("c")
        plain = producer(broker.bootstrap)
        plain.produce(topic, b"p0", partition=0)
        assert plain.flush(30) == 0
        txns.send(a, [b"a1", b"a2"])
        end_and_wait(txns, sock, topic, a, commit=True)
        b_offset = txns.send(b, [b"b1"])
        end_and_wait(txns, sock, topic, b, commit=False)
        c_offset = txns.send(c, [b"c1"])
        txns.send(a, [b"a3"])
        end_and_wait(txns, sock, topic, a, commit=True)
        high_watermark = list_latest(sock, 1, topic, READ_UNCOMMITTED)

        assert list_latest(sock, 2, topic, READ_COMMITTED) == c_offset
        rc = fetch(sock, 3, topic, 0, READ_COMMITTED)
        assert (rc["high_watermark"], rc["last_stable_offset"]) == (high_watermark, c_offset)
        assert [first for _, first in rc["aborted_transactions"]] == [b_offset]
        if txns.pid(b) is not None:
            assert rc["aborted_transactions"] == [(txns.pid(b), b_offset)]
        assert max(h["last_offset"] for h in kw.batch_headers(rc["records"])) < c_offset
        ru = fetch(sock, 4, topic, 0, READ_UNCOMMITTED)
        assert ru["aborted_transactions"] is None and ru["last_stable_offset"] == c_offset
        err, producers = describe_producers(sock, 5, topic)[0]
        assert err == 0
        assert [p["current_txn_start_offset"] for p in producers
                if p["current_txn_start_offset"] >= 0] == [c_offset]

        assert values_read(broker.bootstrap, topic, "read_committed", 3) == [b"p0", b"a1", b"a2"]
        assert values_read(broker.bootstrap, topic, "read_uncommitted", 6) == \
            [b"p0", b"a1", b"a2", b"b1", b"c1", b"a3"]

        # A read_committed fetch parked at the LSO is woken by c's commit.
        result = {}

        def parked():
            s = kw.connect(broker.bootstrap)
            started = time.monotonic()
            result["answer"] = fetch(s, 6, topic, c_offset, READ_COMMITTED, max_wait_ms=20_000)
            result["waited"] = time.monotonic() - started

        t = threading.Thread(target=parked)
        t.start()
        time.sleep(1.0)
        assert "answer" not in result, "a read_committed fetch is parked at the LSO"
        txns.end(c, commit=True)
        t.join(30)
        assert result["waited"] < 10, "woken by the commit, not the 20 s deadline"
        assert kw.batch_headers(result["answer"]["records"])[0]["base_offset"] == c_offset
        wait_until(lambda: list_latest(sock, 7, topic, READ_COMMITTED) > high_watermark, 30,
                   what="the LSO past c's marker")
        assert values_read(broker.bootstrap, topic, "read_committed", 5) == \
            [b"p0", b"a1", b"a2", b"c1", b"a3"]
    finally:
        txns.close()


# ---- a three-node cluster: markers wait for the ISR, followers keep the transactions --------

NOT_ENOUGH_REPLICAS = 19
NOT_LEADER_OR_FOLLOWER = 6
CLUSTER_SETTINGS = {"broker.heartbeat.interval.ms": 500, "broker.session.timeout.ms": 2000,
                    **UNVERIFIED_SETTINGS}


@pytest.fixture
def cluster(sluice_bin, tmp_path):
    from conftest import _die_with_parent
    from sluice_cluster import SluiceCluster
    c = SluiceCluster(sluice_bin, tmp_path / "cluster", nodes=3, settings=CLUSTER_SETTINGS,
                      preexec_fn=_die_with_parent)
    try:
        c.start()
        yield c
    finally:
        c.stop()


def partition_state(bootstrap, topic):
    """(leader, replicas, isr) of partition 0, or None."""
    from confluent_kafka import KafkaException
    from compat_util import admin
    try:
        t = admin(bootstrap).list_topics(timeout=10).topics.get(topic)
    except KafkaException:
        return None  # e.g. while a new controller is elected
    if t is None or t.error is not None or 0 not in t.partitions:
        return None
    p = t.partitions[0]
    return p.leader, list(p.replicas), list(p.isrs)


@SLUICE_ONLY
def test_markers_wait_for_the_isr_and_a_new_leader_keeps_the_transactions(cluster):
    """RF 3, min.insync.replicas 3: a marker is refused NOT_ENOUGH_REPLICAS while a follower
    is out of the ISR (Kafka writes markers with acks=all) and the transaction stays open (LSO
    at its start); once the follower is back in the ISR the commit is written; after the
    leader's SIGKILL the new leader, elected from the ISR, has the marker and the aborted
    transaction: once the old leader is back in the ISR (its high watermark waits for
    min.insync.replicas), its read_committed fetch lists the abort and its LSO is past both."""
    topic = "txn-cluster"
    from confluent_kafka.admin import NewTopic
    from compat_util import admin
    a = admin(cluster.bootstrap())  # alive until the future completes
    a.create_topics(
        [NewTopic(topic, num_partitions=1, replication_factor=3,
                  config={"min.insync.replicas": "3"})],
        operation_timeout=20, request_timeout=20)[topic].result()
    leader, replicas, _ = wait_until(
        lambda: (lambda s: s if s and s[0] >= 0 and len(s[2]) == 3 else None)(
            partition_state(cluster.bootstrap(), topic)), 30, what="the topic's full ISR")
    sock = kw.connect(cluster.nodes[leader].bootstrap)
    a, ea = init_producer_id(sock, 1)
    b, eb = init_producer_id(sock, 2)
    assert produce(sock, 3, topic, txn_batch([b"b1"], b, eb, 0)) == (0, 0)
    assert marker(sock, 4, topic, b, eb, commit=False) == 0                       # offset 1
    assert produce(sock, 5, topic, txn_batch([b"a1"], a, ea, 0)) == (0, 2)

    controller = admin(cluster.bootstrap()).list_topics(timeout=10).controller_id
    victim = next(r for r in replicas if r not in (leader, controller))
    cluster.kill(victim)
    wait_until(lambda: victim not in (partition_state(cluster.bootstrap(exclude={victim}),
                                                      topic) or (0, [], [victim]))[2],
               30, what="the killed follower out of the ISR")
    time.sleep(1.0)  # the leader learns the committed ISR from the controller's answer
    assert marker(sock, 6, topic, a, ea, commit=True) == NOT_ENOUGH_REPLICAS
    assert fetch(sock, 7, topic, 0, READ_COMMITTED)["last_stable_offset"] == 2

    cluster.start_node(victim)
    wait_until(lambda: len((partition_state(cluster.bootstrap(), topic) or (0, [], []))[2]) == 3,
               60, what="the follower back in the ISR")
    assert marker(sock, 8, topic, a, ea, commit=True) == 0                        # offset 3
    rc = fetch(sock, 9, topic, 0, READ_COMMITTED)
    assert (rc["high_watermark"], rc["last_stable_offset"]) == (4, 4)

    # (When the leader is also the active controller, the quorum elects another too.)
    cluster.kill(leader)
    new_leader = wait_until(
        lambda: (lambda s: s[0] if s and s[0] not in (-1, leader) else None)(
            partition_state(cluster.bootstrap(exclude={leader}), topic)),
        60, interval=0.5, what="a new leader")
    s2 = kw.connect(cluster.nodes[new_leader].bootstrap)
    # With two of three replicas the ISR is below min.insync.replicas and the new leader's high
    # watermark stays put (as Kafka's, KIP-966): the old leader comes back as a follower.
    cluster.start_node(leader)

    seen = []

    def committed_read():
        r = fetch(s2, 10, topic, 0, READ_COMMITTED)
        seen[:] = [r, partition_state(cluster.bootstrap(exclude={leader}), topic)]
        return r if r["error"] == 0 and r["last_stable_offset"] == 4 else None

    try:
        rc = wait_until(committed_read, 60, interval=0.5, what="the new leader's LSO past the commit")
    except AssertionError:
        raise AssertionError(f"last answer {seen}")
    assert rc["aborted_transactions"] == [(b, 0)]
    assert [h["base_offset"] for h in kw.batch_headers(rc["records"])] == [0, 1, 2, 3]
    assert list_latest(s2, 11, topic, READ_COMMITTED) == 4


# ---- TxnOffsetCommit (API 28) --------------------------------------------------------------

API_TXN_OFFSET_COMMIT = 28
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
UNSTABLE_OFFSET_COMMIT = 88
OFFSETS_TOPIC = "__consumer_offsets"


def offsets_partition(group, partitions):
    """Kafka's placement of `group`: abs(Java String.hashCode) % partitions."""
    h = 0
    for unit in group.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return (h & 0x7FFFFFFF) % partitions


def offsets_partition_count(sock, corr):
    payload = kw.request(sock, kw.metadata_v1(corr, [OFFSETS_TOPIC]))
    _, _, _, topics = kw.parse_metadata_v1(payload)
    err, partitions = topics[OFFSETS_TOPIC]
    assert err == 0
    return len(partitions)


def txn_offset_commit(sock, corr, group, pid, epoch, topic, offset, generation=-1,
                      member_id=""):
    """TxnOffsetCommit v3 (flexible) of partition 0's `offset` -> its error code."""
    body = (kw.compact_string(TXN_ID) + kw.compact_string(group) + kw.i64(pid) + kw.i16(epoch)
            + kw.i32(generation) + kw.compact_string(member_id) + kw.uvarint(0)  # no instance
            + compact_array([kw.compact_string(topic) + compact_array([
                kw.i32(0) + kw.i64(offset) + kw.i32(-1) + kw.compact_string("") + kw.uvarint(0)])
                + kw.uvarint(0)])
            + kw.uvarint(0))
    payload = kw.request(sock, kw.frame(kw.header_v2(API_TXN_OFFSET_COMMIT, 3, corr) + body))
    r = kw.Reader(payload)
    assert r.i32() == corr
    kw._tagged_fields(r)
    r.i32()  # throttle time
    errors = {}
    for _ in range(kw._read_uvarint(r) - 1):
        name = kw._compact_string(r)
        for _ in range(kw._read_uvarint(r) - 1):
            p, err = r.i32(), r.i16()
            kw._tagged_fields(r)
            errors[(name, p)] = err
        kw._tagged_fields(r)
    kw._tagged_fields(r)
    assert not r.remaining()
    return errors[(topic, 0)]


def offset_fetch(sock, corr, group, topic, require_stable):
    """OffsetFetch v7 (flexible, KIP-447's require_stable) of partition 0 -> (offset, error);
    the group's error must be none."""
    offset, err, group_err = offset_fetch_any(sock, corr, group, topic, require_stable)
    assert group_err == 0
    return offset, err


def offset_fetch_any(sock, corr, group, topic, require_stable):
    """As `offset_fetch` -> (offset, partition error, group error)."""
    body = (kw.compact_string(group)
            + compact_array([kw.compact_string(topic) + compact_array([kw.i32(0)])
                             + kw.uvarint(0)])
            + kw.i8(1 if require_stable else 0) + kw.uvarint(0))
    payload = kw.request(sock, kw.frame(kw.header_v2(kw.API_OFFSET_FETCH, 7, corr) + body))
    r = kw.Reader(payload)
    assert r.i32() == corr
    kw._tagged_fields(r)
    r.i32()  # throttle time
    out = {}
    for _ in range(kw._read_uvarint(r) - 1):
        name = kw._compact_string(r)
        for _ in range(kw._read_uvarint(r) - 1):
            p, offset, _epoch = r.i32(), r.i64(), r.i32()
            kw._compact_string(r)  # metadata
            err = r.i16()
            kw._tagged_fields(r)
            out[(name, p)] = (offset, err)
        kw._tagged_fields(r)
    group_err = r.i16()
    kw._tagged_fields(r)
    assert not r.remaining()
    offset, err = out.get((topic, 0), (-1, 0))
    return offset, err, group_err


def simple_commit(sock, corr, group, topic, offset):
    """A simple OffsetCommit v2 of partition 0, retried while the coordinator loads."""
    deadline = time.monotonic() + 30
    while True:
        frame = kw.offset_commit_v2(corr, group, -1, "", {topic: [(0, offset, "")]})
        _, errors = kw.parse_offset_commit_v2(kw.request(sock, frame))
        err = errors[(topic, 0)]
        if err == 0:
            return
        assert err in (COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR)
        assert time.monotonic() < deadline, f"OffsetCommit error {err}"
        time.sleep(0.2)


@SLUICE_ONLY
@UNVERIFIED
def test_txn_offset_commit_is_pending_until_the_marker_on_the_offsets_partition(broker):
    """TxnOffsetCommit's offsets stay pending: OffsetFetch answers the last committed offset,
    or UNSTABLE_OFFSET_COMMIT with require_stable, until WriteTxnMarkers writes the producer's
    marker to the group's `__consumer_offsets` partition: an abort discards them, a commit
    makes them the group's committed offset."""
    topic, group = "txnoff-in", "txnoff-group"
    create_topic(broker.bootstrap, topic, 1)
    sock = kw.connect(broker.bootstrap)
    _, err, apis = kw.parse_api_versions_v0(kw.request(sock, kw.api_versions_v0(1)))
    assert err == 0 and apis[API_TXN_OFFSET_COMMIT] == (0, 5)  # Kafka 4.4's range
    pid, epoch = init_producer_id(sock, 2)
    simple_commit(sock, 3, group, topic, 5)
    partition = offsets_partition(group, offsets_partition_count(sock, 4))

    def end(corr, commit):
        errors = write_txn_markers(
            sock, corr, [(pid, epoch, commit, 0, {OFFSETS_TOPIC: [partition]})])
        assert errors == [(pid, {(OFFSETS_TOPIC, partition): 0})]

    assert txn_offset_commit(sock, 10, group, pid, epoch, topic, 10) == 0
    assert offset_fetch(sock, 11, group, topic, require_stable=False) == (5, 0)
    assert offset_fetch(sock, 12, group, topic, require_stable=True) == \
        (-1, UNSTABLE_OFFSET_COMMIT)
    end(13, commit=False)
    assert offset_fetch(sock, 14, group, topic, require_stable=True) == (5, 0)

    assert txn_offset_commit(sock, 20, group, pid, epoch, topic, 20) == 0
    assert offset_fetch(sock, 21, group, topic, require_stable=True) == \
        (-1, UNSTABLE_OFFSET_COMMIT)
    end(22, commit=True)
    assert offset_fetch(sock, 23, group, topic, require_stable=True) == (20, 0)
    assert offset_fetch(sock, 24, group, topic, require_stable=False) == (20, 0)

    # The producer's next transaction is pending when the broker is SIGKILLed: the coordinator's
    # replay of the offsets log keeps it pending; its commit marker then materialises it.
    assert txn_offset_commit(sock, 25, group, pid, epoch, topic, 25) == 0
    broker.restart(kill=True)
    sock = kw.connect(broker.bootstrap)
    stable = wait_until(
        lambda: (lambda r: r if r[2] == 0 else None)(
            offset_fetch_any(sock, 26, group, topic, require_stable=True)),
        30, what="the coordinator loaded")
    assert stable == (-1, UNSTABLE_OFFSET_COMMIT, 0)
    assert offset_fetch(sock, 27, group, topic, require_stable=False) == (20, 0)
    end(28, commit=True)
    assert offset_fetch(sock, 29, group, topic, require_stable=True) == (25, 0)

    # v3+ member checks: a generation for a group that does not exist, an unknown member.
    assert txn_offset_commit(sock, 30, "txnoff-none", pid, epoch, topic, 1, generation=4,
                             member_id="m-1") == 22  # ILLEGAL_GENERATION
    assert txn_offset_commit(sock, 31, group, pid, epoch, topic, 1, generation=4,
                             member_id="m-1") == 25  # UNKNOWN_MEMBER_ID
    # A partition that does not exist.
    assert txn_offset_commit(sock, 32, group, pid, epoch, "txnoff-missing", 1) == \
        UNKNOWN_TOPIC_OR_PARTITION
    # A bumped epoch fences the producer's older one (the offsets partition's producer state).
    assert txn_offset_commit(sock, 33, group, pid, epoch + 1, topic, 40) == 0
    assert txn_offset_commit(sock, 34, group, pid, epoch, topic, 41) == INVALID_PRODUCER_EPOCH


@SLUICE_ONLY
def test_describe_producers_on_a_follower_and_a_markers_timestamp(cluster, java_classpath):
    """DescribeProducers is answered from any replica's log, as Kafka's
    `ReplicaManager.activeProducerState` (`kafka-transactions.sh describe-producers
    --broker-id`): a follower lists the producers it replicated; a broker with no replica
    answers NOT_LEADER_OR_FOLLOWER. A producer's last timestamp is its last batch's, the
    marker's included (Kafka's `lastTimestamp`)."""
    topic = "txn-follower-producers"
    from confluent_kafka.admin import NewTopic
    from compat_util import admin
    a = admin(cluster.bootstrap())
    a.create_topics([NewTopic(topic, num_partitions=1, replication_factor=2)],
                    operation_timeout=20, request_timeout=20)[topic].result()
    leader, replicas, _ = wait_until(
        lambda: (lambda s: s if s and s[0] >= 0 and len(s[2]) == 2 else None)(
            partition_state(cluster.bootstrap(), topic)), 30, what="the topic's full ISR")
    sock = kw.connect(cluster.nodes[leader].bootstrap)
    pid, epoch = init_producer_id(sock, 1)
    # A data batch stamped ten minutes ago, then the commit marker (stamped now).
    old_ms = int(time.time() * 1000) - 600_000
    batch = bytearray(kw.record_batch([b"x"], base_timestamp_ms=old_ms))
    struct.pack_into(">h", batch, 21, TRANSACTIONAL)
    struct.pack_into(">qhi", batch, 43, pid, epoch, 0)
    struct.pack_into(">I", batch, 17, kw._crc32c(bytes(batch[21:])))
    assert produce(sock, 2, topic, bytes(batch)) == (0, 0)
    before_marker_ms = int(time.time() * 1000)
    assert marker(sock, 3, topic, pid, epoch, commit=True) == 0

    def described(node):
        s = kw.connect(cluster.nodes[node].bootstrap)
        err, producers = describe_producers(s, 4, topic)[0]
        return err, {p["producer_id"]: p for p in producers}

    err, on_leader = described(leader)
    assert err == 0
    assert on_leader[pid]["current_txn_start_offset"] == -1
    assert on_leader[pid]["last_sequence"] == 0
    assert on_leader[pid]["last_timestamp"] >= before_marker_ms - 1000, \
        "the marker's timestamp, not the data batch's"

    follower = next(r for r in replicas if r != leader)
    on_follower = wait_until(
        lambda: (lambda d: d[1] if d[0] == 0 and pid in d[1]
                 and d[1][pid]["last_timestamp"] == on_leader[pid]["last_timestamp"]
                 else None)(described(follower)),
        30, what="the follower's producer state")
    assert on_follower[pid] == on_leader[pid]
    outsider = next(n for n in cluster.nodes if n not in replicas)
    err, _ = described(outsider)
    assert err == NOT_LEADER_OR_FOLLOWER
    # `kafka-transactions.sh describe-producers --broker-id` asks that broker.
    run = run_java(java_classpath, TRANSACTIONS_COMMAND,
                   ["--bootstrap-server", cluster.bootstrap(), "describe-producers", "--topic",
                    topic, "--partition", "0", "--broker-id", str(follower)], timeout=90)
    out = check_java(run)
    assert re.search(rf"^{pid}\s+{epoch}\s+0\s+0\s+\d+\s+(-1|None)\s*$", out, re.M), out
