"""Transaction version 2 (KIP-890 part 2, issue #28 point 1): at the finalized
`transaction.version` 2 a new cluster has (as `kafka-storage format` of Kafka 4.4 leaves it),
Kafka's Java client ends every transaction with EndTxn v5 and the coordinator bumps the
producer epoch each time (DescribeTransactions after two commits and an abort shows it three
higher); a zombie with an epoch before the last bump is fenced — its EndTxn PRODUCER_FENCED,
its transactional Produce v12 (which has the leader add the partition) INVALID_PRODUCER_EPOCH
— while a retry of the last EndTxn with the epoch before the bump is answered as the first
call was. After `kafka-features.sh downgrade --feature transaction.version=1` the same client
falls back to the version-1 requests and the epoch stays. Each runs against Apache Kafka 4.4
too (SLUICE_COMPAT_TARGET=kafka)."""

import re
import struct

import kafka_wire as kw
from jvm import check_java, run_java

MAIN = "sluice.compat.Transactions"
FEATURES = "org.apache.kafka.tools.FeatureCommand"
API_PRODUCE = 0
API_END_TXN = 26
NONE, INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE, PRODUCER_FENCED = 0, 47, 48, 90
TRANSACTIONAL = 0x10


def epoch_bump(classpath, broker, topic):
    """Runs the Java `epoch-bump` scenario -> (producer id, [epochs after init and each of
    three transactions], finalized level)."""
    output = check_java(run_java(classpath, MAIN, ["epoch-bump", broker.bootstrap, topic],
                                 timeout=180), expect_line="PASS epoch-bump")
    m = re.search(r"^EPOCHS (\d+) (\d+) (\d+) (\d+) (\d+) (\d+)$", output, re.M)
    assert m, output
    pid, *epochs, level = (int(g) for g in m.groups())
    return pid, epochs, level


def end_txn_v5(sock, corr, transactional_id, pid, epoch, commit):
    """EndTxn v5 -> (error, producer id, producer epoch)."""
    body = (kw.compact_string(transactional_id) + kw.i64(pid) + kw.i16(epoch)
            + kw.i8(1 if commit else 0) + kw.uvarint(0))
    payload = kw.request(sock, kw.frame(kw.header_v2(API_END_TXN, 5, corr) + body))
    r = kw.Reader(payload)
    assert r.i32() == corr
    r.tagged_fields()
    r.i32()  # throttle time
    return r.i16(), r.i64(), r.i16()


def produce_v12(sock, corr, transactional_id, topic, partition, records):
    """Produce v12 (acks=all) of one batch -> the partition's error code."""
    partition_data = kw.i32(partition) + kw.uvarint(len(records) + 1) + records + kw.uvarint(0)
    topic_data = kw.compact_string(topic) + kw.uvarint(2) + partition_data + kw.uvarint(0)
    body = (kw.compact_string(transactional_id) + kw.i16(-1) + kw.i32(30_000)
            + kw.uvarint(2) + topic_data + kw.uvarint(0))
    payload = kw.request(sock, kw.frame(kw.header_v2(API_PRODUCE, 12, corr) + body))
    r = kw.Reader(payload)
    assert r.i32() == corr
    r.tagged_fields()
    assert r.uvarint() == 2 and r.compact_string() == topic
    assert r.uvarint() == 2 and r.i32() == partition
    return r.i16()


def txn_batch(values, pid, epoch, seq):
    batch = bytearray(kw.record_batch(values))
    struct.pack_into(">h", batch, 21, TRANSACTIONAL)
    struct.pack_into(">qhi", batch, 43, pid, epoch, seq)
    struct.pack_into(">I", batch, 17, kw._crc32c(bytes(batch[21:])))
    return bytes(batch)


def test_transaction_version_2_bumps_the_epoch_per_transaction_and_fences_a_zombie(
        broker, java_classpath):
    topic = "txn-v2-epochs"
    pid, epochs, level = epoch_bump(java_classpath, broker, topic)
    assert level == 2, "a new cluster finalizes transaction.version 2, as Kafka 4.4"
    e0 = epochs[0]
    assert epochs == [e0, e0 + 1, e0 + 2, e0 + 3], epochs
    txn_id = f"{topic}-txn"
    with kw.connect(broker.bootstrap) as sock:
        # The last EndTxn (an abort at e0 + 2) retried: answered as it was, with the epoch
        # the producer continues with; the other result is no retry.
        assert end_txn_v5(sock, 1, txn_id, pid, e0 + 2, False) == (NONE, pid, e0 + 3)
        assert end_txn_v5(sock, 2, txn_id, pid, e0 + 2, True)[0] == INVALID_TXN_STATE
        # A zombie from before the last bumps.
        assert end_txn_v5(sock, 3, txn_id, pid, e0 + 1, True) == (PRODUCER_FENCED, -1, -1)
        zombie = txn_batch([b"zombie"], pid, e0 + 1, 0)
        assert produce_v12(sock, 4, txn_id, topic, 0, zombie) == INVALID_PRODUCER_EPOCH


def test_transaction_version_1_after_a_downgrade_keeps_the_epoch(broker, java_classpath):
    run = run_java(java_classpath, FEATURES, ["--bootstrap-server", broker.bootstrap,
                                              "downgrade", "--feature", "transaction.version=1"],
                   timeout=90)
    assert run.returncode == 0 and "transaction.version was downgraded to 1." in run.output, \
        run.report()
    _pid, epochs, level = epoch_bump(java_classpath, broker, "txn-v1-epochs")
    assert level == 1
    assert epochs == [epochs[0]] * 4, epochs
