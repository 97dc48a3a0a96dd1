"""KIP-890 part 1 (issue #28 point 1): a partition leader verifies a transactional produce with
the transaction coordinator before it appends, by raw wire. A transactional producer (a
producer id from InitProducerId with a transactional id) that produces to a partition it never
added to its transaction gets Kafka's error: INVALID_TXN_STATE ("Partition was not added to the
transaction") below Produce v11, TRANSACTION_ABORTABLE from v11; nothing is appended. After
AddPartitionsToTxn the same produce is appended. `transaction.partition.verification.enable`
is a dynamic broker config: switched off (IncrementalAlterConfigs on the BROKER resource) an
unadded partition takes the batch, switched on again it refuses. Runs against Apache Kafka 4.4
too (SLUICE_COMPAT_TARGET=kafka)."""

import struct
import time

from confluent_kafka.admin import AlterConfigOpType, ResourceType

import kafka_wire as kw
from compat_util import admin, create_topic, wait_until
from test_dynamic_broker_configs import alter, node_id
from test_transactions import fetch, txn_batch, READ_UNCOMMITTED

API_FIND_COORDINATOR = 10
API_INIT_PRODUCER_ID = 22
API_ADD_PARTITIONS_TO_TXN = 24

INVALID_TXN_STATE = 48
TRANSACTION_ABORTABLE = 120
RETRIABLE_COORDINATOR = {14, 15, 16, 51}  # load in progress, not available, not coordinator,
#                                            concurrent transactions
VERIFICATION = "transaction.partition.verification.enable"


def until_ok(what, call, timeout=60):
    """Calls `call()` -> (error, value) until the error is 0; returns the value."""
    deadline = time.monotonic() + timeout
    while True:
        error, value = call()
        if error == 0:
            return value
        assert error in RETRIABLE_COORDINATOR and time.monotonic() < deadline, \
            f"{what}: error {error}"
        time.sleep(0.2)


def find_txn_coordinator(sock, corr, transactional_id):
    """FindCoordinator v1 for a transactional id (creates `__transaction_state`) -> error."""
    body = kw.string(transactional_id) + kw.i8(1)
    payload = kw.request(sock, kw.frame(kw.header_v1(API_FIND_COORDINATOR, 1, corr) + body))
    _corr, _throttle, error = struct.unpack(">iih", payload[:10])
    return error, None


def init_transactional(sock, corr, transactional_id):
    """InitProducerId v1 with a transactional id -> (error, (producer id, epoch))."""
    body = kw.string(transactional_id) + kw.i32(60_000)
    payload = kw.request(sock, kw.frame(kw.header_v1(API_INIT_PRODUCER_ID, 1, corr) + body))
    _corr, _throttle, error, pid, epoch = struct.unpack(">iihqh", payload[:20])
    return error, (pid, epoch)


def add_partitions(sock, corr, transactional_id, pid, epoch, topic, partitions):
    """AddPartitionsToTxn v1 (the client form) -> (error of the first partition, None)."""
    body = (kw.string(transactional_id) + kw.i64(pid) + kw.i16(epoch) + kw.i32(1)
            + kw.string(topic) + kw.i32(len(partitions))
            + b"".join(kw.i32(p) for p in partitions))
    payload = kw.request(sock, kw.frame(kw.header_v1(API_ADD_PARTITIONS_TO_TXN, 1, corr) + body))
    r = kw.Reader(payload)
    r.i32(), r.i32()  # correlation id, throttle time
    errors = []
    for _ in range(r.i32()):
        r.string()
        for _ in range(r.i32()):
            r.i32()
            errors.append(r.i16())
    return max(errors, key=abs), None


def produce_v8(sock, corr, transactional_id, topic, partition, batch):
    """Produce v8 (acks=all) of one batch -> {"error", "base_offset", "error_message", ...}."""
    body = (kw.string(transactional_id) + kw.i16(-1) + kw.i32(30_000) + kw.i32(1)
            + kw.string(topic) + kw.i32(1) + kw.i32(partition) + kw.bytes_(batch))
    payload = kw.request(sock, kw.frame(kw.header_v1(kw.API_PRODUCE, 8, corr) + body))
    _, results = kw.parse_produce_classic(payload, 8)
    return results[(topic, partition)]


def produce_v11(sock, corr, transactional_id, topic, partition, batch):
    """Produce v11 (flexible, acks=all) of one batch -> the partition's error code."""
    body = (kw.compact_string(transactional_id) + kw.i16(-1) + kw.i32(30_000)
            + kw.uvarint(2) + kw.compact_string(topic)
            + kw.uvarint(2) + kw.i32(partition) + kw.uvarint(len(batch) + 1) + batch
            + kw.uvarint(0)  # partition's tagged fields
            + kw.uvarint(0)  # topic's tagged fields
            + kw.uvarint(0))  # request's tagged fields
    payload = kw.request(sock, kw.frame(kw.header_v2(kw.API_PRODUCE, 11, corr) + body))
    r = kw.Reader(payload)
    assert r.i32() == corr
    kw._tagged_fields(r)
    assert kw._read_uvarint(r) == 2, "one topic"
    assert kw._compact_string(r) == topic
    assert kw._read_uvarint(r) == 2, "one partition"
    assert r.i32() == partition
    return r.i16()


def log_end(sock, corr, topic, partition):
    """The high watermark of `partition` (all it holds, acks=all)."""
    frame = kw.fetch_classic(corr, 4, topic, partition, 0, isolation_level=READ_UNCOMMITTED)
    _, _, out = kw.parse_fetch_classic(kw.request(sock, frame), 4)
    return out[(topic, partition)]["high_watermark"]


def test_a_produce_to_a_partition_not_in_the_transaction_is_refused_as_kafka(broker):
    topic, txn_id = "txn-verify", "txn-verify-id"
    create_topic(broker.bootstrap, topic, 4)
    sock = kw.connect(broker.bootstrap)
    until_ok("FindCoordinator", lambda: find_txn_coordinator(sock, 1, txn_id))
    pid, epoch = until_ok("InitProducerId", lambda: init_transactional(sock, 2, txn_id))

    # Partition 0 was never added: refused, and nothing is appended.
    got = produce_v8(sock, 3, txn_id, topic, 0, txn_batch([b"a"], pid, epoch, 0))
    assert got["error"] == INVALID_TXN_STATE, got
    assert got["error_message"] == "Partition was not added to the transaction", got
    assert produce_v11(sock, 4, txn_id, topic, 0, txn_batch([b"a"], pid, epoch, 0)) \
        == TRANSACTION_ABORTABLE
    assert log_end(sock, 5, topic, 0) == 0

    # Added to the transaction: the same batch goes in.
    until_ok("AddPartitionsToTxn",
             lambda: add_partitions(sock, 6, txn_id, pid, epoch, topic, [0]))
    got = produce_v8(sock, 7, txn_id, topic, 0, txn_batch([b"a"], pid, epoch, 0))
    assert got["error"] == 0 and got["base_offset"] == 0, got
    # Partition 1, in the same open transaction but not added, is still refused.
    got = produce_v8(sock, 8, txn_id, topic, 1, txn_batch([b"b"], pid, epoch, 0))
    assert got["error"] == INVALID_TXN_STATE, got


def test_the_dynamic_switch_lets_an_unverified_produce_in(broker):
    topic, txn_id = "txn-verify-off", "txn-verify-off-id"
    create_topic(broker.bootstrap, topic, 3)
    a = admin(broker.bootstrap)
    node = node_id(a)
    sock = kw.connect(broker.bootstrap)
    until_ok("FindCoordinator", lambda: find_txn_coordinator(sock, 1, txn_id))
    pid, epoch = until_ok("InitProducerId", lambda: init_transactional(sock, 2, txn_id))
    assert produce_v8(sock, 3, txn_id, topic, 0,
                      txn_batch([b"a"], pid, epoch, 0))["error"] == INVALID_TXN_STATE

    assert alter(a, ResourceType.BROKER, node,
                 (VERIFICATION, "false", AlterConfigOpType.SET)) is None
    # Kafka applies a change through its metadata log: wait until the produce goes in.
    got = wait_until(
        lambda: (lambda r: r["error"] == 0 and r)(
            produce_v8(sock, 4, txn_id, topic, 1, txn_batch([b"b"], pid, epoch, 0))),
        30, what="an unverified produce appended with verification off")
    assert got["base_offset"] == 0

    assert alter(a, ResourceType.BROKER, node,
                 (VERIFICATION, "", AlterConfigOpType.DELETE)) is None
    seen = []

    def refused():
        seen.append(produce_v8(sock, 5, txn_id, topic, 2, txn_batch([b"c"], pid, epoch, 0)))
        return seen[-1]["error"] == INVALID_TXN_STATE
    wait_until(refused, 30, what=f"verification on again (last answers {seen[-3:]})")
    assert log_end(sock, 6, topic, 2) == 0
