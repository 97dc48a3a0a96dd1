"""The transaction coordinator (issue #28 points 1-2, KIP-98): real transactional clients
against Sluice's coordinator — Kafka's Java client (tests/java/.../Transactions.java) and
confluent-kafka (librdkafka) — committing and aborting over 3 partitions, read_committed
consumers seeing exactly the committed records, a second producer with the same
transactional.id fencing the first and aborting its open transaction, and the
consume-transform-produce loop with the consumed offsets committed in the transaction
(TxnOffsetCommit, KIP-447). Each also runs against Apache Kafka 4.4
(SLUICE_COMPAT_TARGET=kafka)."""

import pytest
from confluent_kafka import KafkaException, TopicPartition

from compat_util import create_topic, producer
from jvm import check_java, run_java

MAIN = "sluice.compat.Transactions"


def java(classpath, broker, name, topic, timeout=180):
    return check_java(run_java(classpath, MAIN, [name, broker.bootstrap, topic], timeout=timeout),
                      expect_line=f"PASS {name}")


def test_java_transactions_commit_and_abort(broker, java_classpath):
    java(java_classpath, broker, "commit-abort", "txn-java-commit-abort")


def test_java_second_producer_fences_the_first(broker, java_classpath):
    java(java_classpath, broker, "fencing", "txn-java-fencing")


def test_java_consume_transform_produce_with_offsets_in_the_transaction(broker, java_classpath):
    """The exactly-once loop (KIP-98, KIP-447): a read_committed group consumer and a
    transactional producer, `sendOffsetsToTransaction(offsets, groupMetadata())` per poll, one
    transaction aborted in the middle (its offsets not committed, its outputs never visible,
    the inputs re-read after seeking back). Output: each input exactly once; the group's
    committed offsets are the input's end offsets."""
    java(java_classpath, broker, "consume-transform-produce", "txn-java-ctp", timeout=240)


def read_all(bootstrap, topic, isolation):
    """Every value of `topic`'s 3 partitions as `isolation` reads them (up to the end offsets,
    which read_committed takes at the LSO), sorted."""
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-{isolation}",
                  "isolation.level": isolation, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    try:
        tps = [TopicPartition(topic, p, 0) for p in range(3)]
        c.assign(tps)
        ends = {}
        for p in range(3):
            _low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            ends[p] = high
        if isolation == "read_committed":
            # The committed end: ListOffsets latest at read_committed is the LSO.
            for p in range(3):
                [tp] = c.offsets_for_times([TopicPartition(topic, p, -1)], timeout=30)
                ends[p] = min(ends[p], tp.offset) if tp.offset >= 0 else ends[p]
        got, positions = [], {p: 0 for p in range(3)}
        import time
        deadline = time.monotonic() + 60
        while any(positions[p] < ends[p] for p in range(3)):
            assert time.monotonic() < deadline, f"read {got}, at {positions}, ends {ends}"
            m = c.poll(0.2)
            if m is None or m.error():
                for tp in c.position(tps):
                    if tp.offset >= 0:
                        positions[tp.partition] = tp.offset
                continue
            got.append(m.value().decode())
            positions[m.partition()] = m.offset() + 1
        return sorted(got)
    finally:
        c.close()


def txn_producer(bootstrap, transactional_id):
    p = producer(bootstrap, **{"transactional.id": transactional_id, "enable.idempotence": True,
                               "transaction.timeout.ms": 60_000, "linger.ms": 5})
    p.init_transactions(60)
    return p


def send(p, topic, values):
    for i, v in enumerate(values):
        p.produce(topic, v.encode(), partition=i % 3)
    assert p.flush(30) == 0


def test_confluent_transactions_commit_abort_and_fencing(broker):
    topic = "txn-confluent"
    create_topic(broker.bootstrap, topic, 3)
    first = txn_producer(broker.bootstrap, "txn-confluent-id")
    first.begin_transaction()
    send(first, topic, ["c1", "c2", "c3"])
    first.commit_transaction(60)
    first.begin_transaction()
    send(first, topic, ["a1", "a2"])
    first.abort_transaction(60)
    first.begin_transaction()
    send(first, topic, ["z1"])
    # Same transactional.id: the first producer is fenced, its open transaction aborted.
    second = txn_producer(broker.bootstrap, "txn-confluent-id")
    with pytest.raises(KafkaException) as fenced:
        first.commit_transaction(60)
    assert fenced.value.args[0].fatal() or "fenced" in str(fenced.value).lower(), fenced.value
    second.begin_transaction()
    send(second, topic, ["c4"])
    second.commit_transaction(60)
    assert read_all(broker.bootstrap, topic, "read_committed") == ["c1", "c2", "c3", "c4"]
    assert read_all(broker.bootstrap, topic, "read_uncommitted") == \
        ["a1", "a2", "c1", "c2", "c3", "c4", "z1"]



def test_confluent_consume_transform_produce_with_send_offsets_to_transaction(broker):
    """librdkafka's exactly-once loop (KIP-447), as the Java scenario: 300 inputs over 3
    partitions; a read_committed group consumer (auto commit off) and a transactional producer,
    `send_offsets_to_transaction(positions, consumer_group_metadata())` per batch; the second
    transaction is aborted (its offsets not committed, its outputs never visible) and the
    consumer seeks back to the group's committed offsets. Output: each input exactly once; the
    group's committed offsets are the input's end offsets."""
    import time
    from confluent_kafka import Consumer, OFFSET_BEGINNING
    topic, source, group = "txn-confluent-ctp", "txn-confluent-ctp-in", "txn-confluent-ctp-group"
    create_topic(broker.bootstrap, source, 3)
    create_topic(broker.bootstrap, topic, 3)
    inputs = [f"r{i:04d}" for i in range(300)]
    plain = producer(broker.bootstrap)
    send(plain, source, inputs)

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                  "isolation.level": "read_committed", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    p = txn_producer(broker.bootstrap, "txn-confluent-ctp-id")
    ends = {n: c.get_watermark_offsets(TopicPartition(source, n), timeout=30)[1]
            for n in range(3)}
    assert sum(ends.values()) == len(inputs)
    try:
        c.subscribe([source])
        transactions, aborted, done = 0, [], {n: 0 for n in range(3)}
        deadline = time.monotonic() + 120
        while any(done[n] < ends[n] for n in range(3)):
            assert time.monotonic() < deadline, f"at {done}, ends {ends}"
            batch = [m for m in c.consume(40, 0.5) if not m.error()]
            if not batch:
                continue
            p.begin_transaction()
            for m in batch:
                p.produce(topic, m.value().upper(), partition=m.partition())
            # In the log before the transaction ends (an abort would drop unsent records).
            assert p.flush(30) == 0
            positions = c.position(c.assignment())
            p.send_offsets_to_transaction(positions, c.consumer_group_metadata(), 60)
            transactions += 1
            if transactions == 2:
                aborted = [m.value().decode() for m in batch]
                p.abort_transaction(60)
                # Back to the group's committed offsets (the start where there are none).
                for tp in c.committed(c.assignment(), timeout=30):
                    tp.offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
                    c.seek(tp)
                done = {n: 0 for n in range(3)}
            else:
                p.commit_transaction(60)
                for tp in positions:
                    if tp.offset >= 0:
                        done[tp.partition] = tp.offset
        assert aborted, "a transaction was aborted"
        committed = {tp.partition: tp.offset for tp in c.committed(
            [TopicPartition(source, n) for n in range(3)], timeout=30)}
    finally:
        c.close()
    assert committed == ends
    assert read_all(broker.bootstrap, topic, "read_committed") == sorted(v.upper() for v in inputs)
    assert len(read_all(broker.bootstrap, topic, "read_uncommitted")) == len(inputs) + len(aborted)


# ---- a three-node cluster: the coordinator fails over ----------------------------------------

CLUSTER_SETTINGS = {"broker.heartbeat.interval.ms": 500, "broker.session.timeout.ms": 2000}
TXN_STATE_PARTITIONS = 50  # transaction.state.log.num.partitions' default


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


def txn_partition(transactional_id):
    """Kafka's placement: abs(javaHashCode(id)) % partitions."""
    h = 0
    for unit in transactional_id.encode("utf-16-be").hex(" ", 2).split():
        h = (h * 31 + int(unit, 16)) & 0xFFFFFFFF
    if h >= 1 << 31:
        h -= 1 << 32
    return (0 if h == -(1 << 31) else abs(h)) % TXN_STATE_PARTITIONS


def leader_of(bootstrap, topic, partition):
    from compat_util import admin
    try:
        t = admin(bootstrap).list_topics(timeout=10).topics.get(topic)
    except KafkaException:
        return None
    if t is None or t.error is not None or partition not in t.partitions:
        return None
    leader = t.partitions[partition].leader
    return leader if leader >= 0 else None


@pytest.mark.sluice_only("starts a multi-process Sluice cluster")
def test_coordinator_failover_keeps_open_transactions_and_fencing(cluster):
    """RF 3 everywhere. A transaction is committed; another is left open (its partitions added:
    Ongoing in __transaction_state) and the coordinator's broker is SIGKILLed. The new
    coordinator loads the id by replay, and the same producer commits the open transaction
    through it (markers to leaders on the other brokers); a second producer with the id then
    fences the first. read_committed sees exactly the committed records."""
    from compat_util import wait_until
    topic = "txn-failover"
    from confluent_kafka.admin import NewTopic
    from compat_util import admin
    a = admin(cluster.bootstrap())
    a.create_topics([NewTopic(topic, num_partitions=3, replication_factor=3)],
                    operation_timeout=20, request_timeout=20)[topic].result()
    txn_id = "failover-txn"
    first = txn_producer(cluster.bootstrap(), txn_id)
    first.begin_transaction()
    send(first, topic, ["c1", "c2", "c3"])
    first.commit_transaction(60)

    first.begin_transaction()
    send(first, topic, ["b1", "b2", "b3"])
    coordinator = wait_until(
        lambda: leader_of(cluster.bootstrap(), "__transaction_state", txn_partition(txn_id)),
        30, what="the transaction coordinator")
    cluster.kill(coordinator)
    wait_until(lambda: (lambda l: l if l not in (None, coordinator) else None)(
        leader_of(cluster.bootstrap(exclude={coordinator}), "__transaction_state",
                  txn_partition(txn_id))), 60, interval=0.5, what="a new coordinator")
    first.commit_transaction(120)

    second = txn_producer(cluster.bootstrap(exclude={coordinator}), txn_id)
    first.begin_transaction()
    first.produce(topic, b"z1", partition=0)
    with pytest.raises(KafkaException):
        first.flush(30)
        first.commit_transaction(60)
    second.begin_transaction()
    send(second, topic, ["c4"])
    second.commit_transaction(60)
    cluster.start_node(coordinator)
    committed = read_all(cluster.bootstrap(), topic, "read_committed")
    assert committed == ["b1", "b2", "b3", "c1", "c2", "c3", "c4"]


@pytest.mark.sluice(settings={"transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000})
def test_a_transaction_past_its_timeout_is_aborted_by_the_coordinator(broker):
    """transaction.timeout.ms 3 s: the coordinator aborts the open transaction (bumping the
    epoch), so the producer cannot commit it and read_committed never sees its records; the
    partition's LSO moves past it (a later transaction of another producer is read)."""
    import time
    topic = "txn-timeout"
    create_topic(broker.bootstrap, topic, 3)
    p = producer(broker.bootstrap, **{"transactional.id": "txn-timeout-id",
                                      "enable.idempotence": True,
                                      "transaction.timeout.ms": 3000, "message.timeout.ms": 3000,
                                      "linger.ms": 5})
    p.init_transactions(60)
    p.begin_transaction()
    send(p, topic, ["t1", "t2", "t3"])
    time.sleep(3 + 1 + 2)  # the timeout, the cleanup interval (1 s, both targets), a margin
    with pytest.raises(KafkaException):
        p.commit_transaction(30)
    other = txn_producer(broker.bootstrap, "txn-timeout-other")
    other.begin_transaction()
    send(other, topic, ["c1", "c2", "c3"])
    other.commit_transaction(60)
    assert read_all(broker.bootstrap, topic, "read_committed") == ["c1", "c2", "c3"]


TRANSACTIONS_COMMAND = "org.apache.kafka.tools.TransactionsCommand"


def transactions_command(classpath, broker, *args):
    return check_java(run_java(classpath, TRANSACTIONS_COMMAND,
                               ["--bootstrap-server", broker.bootstrap, *args], timeout=90))


def test_kafka_transactions_list_and_describe(broker, java_classpath):
    """`kafka-transactions.sh list` and `describe` (ListTransactions, DescribeTransactions): an
    open transaction is Ongoing with its partitions, then CompleteCommit with none."""
    import re
    topic = "txn-tools"
    create_topic(broker.bootstrap, topic, 3)
    p = txn_producer(broker.bootstrap, "txn-tools-id")
    p.begin_transaction()
    send(p, topic, ["o1", "o2"])
    listed = transactions_command(java_classpath, broker, "list")
    # TransactionalId Coordinator ProducerId TransactionState
    assert re.search(r"^txn-tools-id\s+\d+\s+\d+\s+Ongoing\s*$", listed, re.M), listed
    described = transactions_command(java_classpath, broker, "describe", "--transactional-id",
                                     "txn-tools-id")
    # CoordinatorId TransactionalId ProducerId ProducerEpoch TransactionState
    # CurrentTransactionTimeoutMs CurrentTransactionStartTimeMs TransactionDurationMs
    # TopicPartitions
    assert re.search(r"txn-tools-id\s+\d+\s+\d+\s+Ongoing\s+60000\s+\d+\s+\d+\s+"
                     rf"({topic}-[01],?){{2}}\s*$", described, re.M), described
    p.commit_transaction(60)
    import time
    deadline = time.monotonic() + 30
    while True:
        described = transactions_command(java_classpath, broker, "describe",
                                         "--transactional-id", "txn-tools-id")
        if "CompleteCommit" in described or time.monotonic() > deadline:
            break
    assert re.search(r"txn-tools-id\s+\d+\s+\d+\s+CompleteCommit\s+60000\s", described), described
    missing = run_java(java_classpath, TRANSACTIONS_COMMAND,
                       ["--bootstrap-server", broker.bootstrap, "describe", "--transactional-id",
                        "no-such-id"], timeout=90)
    assert missing.returncode != 0 and "could not be found" in missing.output, \
        missing.report()


# Kafka 4.4 and Sluice check a transactional produce with the transaction coordinator
# (KIP-890 part 1) unless told not to: a hanging transaction can only be made with the check off.
HANGING_SETTINGS = {"transaction.partition.verification.enable": "false"}


def hanging_transaction(sock, corr, topic, partition, values):
    """A transaction the coordinator knows nothing of: a transactional batch written straight
    to `topic`-`partition` under an idempotent producer id (no AddPartitionsToTxn) ->
    (producer id, epoch, the batch's offset)."""
    from test_transactions import init_producer_id, produce, txn_batch
    pid, epoch = init_producer_id(sock, corr)
    err, offset = produce(sock, corr + 1, topic, txn_batch(values, pid, epoch, 0),
                          transactional_id=f"{topic}-raw", partition=partition)
    assert err == 0, f"the transactional batch was refused with error {err}"
    return pid, epoch, offset


def hanging_rows(classpath, broker, topic):
    """`kafka-transactions.sh find-hanging --topic` (every open transaction older than 0
    minutes that its coordinator does not list) -> {partition: (producer id, producer epoch,
    coordinator epoch, start offset)}."""
    import re
    out = transactions_command(classpath, broker, "find-hanging", "--topic", topic,
                               "--max-transaction-timeout", "0")
    # Topic Partition ProducerId ProducerEpoch CoordinatorEpoch StartOffset LastTimestamp
    # Duration(min)
    assert re.search(r"^Topic\s+Partition\s+ProducerId\s+ProducerEpoch\s+CoordinatorEpoch\s+"
                     r"StartOffset\s+LastTimestamp\s+Duration\(min\)\s*$", out, re.M), out
    rows = re.findall(rf"^{re.escape(topic)}\s+(\d+)\s+(\d+)\s+(\d+)\s+(-?\d+)\s+(\d+)\s+\d+"
                      r"\s+\d+\s*$", out, re.M)
    return {int(r[0]): tuple(int(x) for x in r[1:]) for r in rows}


@pytest.mark.sluice(settings=HANGING_SETTINGS)
def test_kafka_transactions_find_hanging_and_abort(broker, java_classpath):
    """`kafka-transactions.sh find-hanging` and `abort` (DescribeProducers, ListTransactions
    filtered by producer id, DescribeTransactions; then WriteTxnMarkers from the admin client):
    two transactions written straight to partitions 0 and 2, unknown to any coordinator, hold
    the last stable offset back; an ongoing transaction on partition 1 that its coordinator
    lists is not hanging. find-hanging lists exactly the two; `abort` by producer id, epoch and
    coordinator epoch ends the first, `abort --start-offset` the second; then nothing hangs,
    and read_committed consumers read past them (their records aborted)."""
    import kafka_wire as kw
    from test_transactions import describe_producers
    topic = "txn-hanging"
    create_topic(broker.bootstrap, topic, 3)
    live = txn_producer(broker.bootstrap, "txn-hanging-live")
    live.begin_transaction()
    live.produce(topic, b"live", partition=1)
    assert live.flush(30) == 0
    sock = kw.connect(broker.bootstrap)
    first = hanging_transaction(sock, 10, topic, 0, [b"h0-1", b"h0-2"])
    second = hanging_transaction(sock, 20, topic, 2, [b"h2-1"])

    hanging = hanging_rows(java_classpath, broker, topic)
    assert sorted(hanging) == [0, 2], hanging
    assert hanging[0][0:2] == first[0:2] and hanging[0][3] == first[2], (hanging, first)
    assert hanging[2][0:2] == second[0:2] and hanging[2][3] == second[2], (hanging, second)

    pid, epoch, coordinator_epoch, _start = hanging[0]
    transactions_command(java_classpath, broker, "abort", "--topic", topic, "--partition", "0",
                         "--producer-id", str(pid), "--producer-epoch", str(epoch),
                         "--coordinator-epoch", str(max(coordinator_epoch, 0)))
    transactions_command(java_classpath, broker, "abort", "--topic", topic, "--partition", "2",
                         "--start-offset", str(second[2]))
    assert hanging_rows(java_classpath, broker, topic) == {}
    producers = describe_producers(sock, 30, topic, partitions=(0, 2))
    for partition, (pid, *_rest) in ((0, first), (2, second)):
        err, states = producers[partition]
        assert err == 0
        [state] = [p for p in states if p["producer_id"] == pid]
        assert state["current_txn_start_offset"] == -1, state

    live.commit_transaction(60)
    after = producer(broker.bootstrap)
    for partition in (0, 2):
        after.produce(topic, f"after{partition}".encode(), partition=partition)
    assert after.flush(30) == 0
    assert read_all(broker.bootstrap, topic, "read_committed") == ["after0", "after2", "live"]
    assert read_all(broker.bootstrap, topic, "read_uncommitted") == \
        ["after0", "after2", "h0-1", "h0-2", "h2-1", "live"]


@pytest.fixture
def cluster5(sluice_bin, tmp_path):
    """Five nodes, so that two can be down and the controller quorum keeps its majority; a
    short replica.lag.time.max.ms so a dead follower leaves the ISR soon."""
    from conftest import _die_with_parent
    from sluice_cluster import SluiceCluster
    settings = {**CLUSTER_SETTINGS, "replica.lag.time.max.ms": 3000}
    c = SluiceCluster(sluice_bin, tmp_path / "cluster5", nodes=5, settings=settings,
                      preexec_fn=_die_with_parent)
    try:
        c.start()
        yield c
    finally:
        c.stop()


@pytest.mark.sluice_only("starts a multi-process Sluice cluster")
def test_a_new_coordinator_resumes_the_markers_of_a_prepared_commit(cluster5):
    """The transaction's only partition is on broker L (RF 1). L is SIGKILLed, then the
    producer commits: the coordinator C writes PrepareCommit and answers, but no marker can be
    written while L is down. C is SIGKILLed too; the new coordinator loads PrepareCommit from
    __transaction_state and keeps sending the markers; once L is back the commit completes,
    and read_committed sees the records (only the new coordinator can have written them)."""
    import time
    from compat_util import admin, wait_until
    from confluent_kafka.admin import NewTopic
    cluster = cluster5
    txn_id = "resume-txn"
    p = txn_producer(cluster.bootstrap(), txn_id)
    coordinator = wait_until(
        lambda: leader_of(cluster.bootstrap(), "__transaction_state", txn_partition(txn_id)),
        30, what="the transaction coordinator")
    controller = admin(cluster.bootstrap()).list_topics(timeout=10).controller_id
    holder = next(n for n in cluster.nodes if n not in (coordinator, controller))
    topic = "txn-resume"
    a = admin(cluster.bootstrap())  # alive until the future completes
    a.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[holder]])],
                    operation_timeout=20, request_timeout=20)[topic].result()
    wait_until(lambda: leader_of(cluster.bootstrap(), topic, 0) == holder, 30,
               what="the topic's leader")
    p.begin_transaction()
    for v in ["r1", "r2", "r3"]:
        p.produce(topic, v.encode(), partition=0)
    assert p.flush(30) == 0

    cluster.kill(holder)
    wait_until(lambda: leader_of(cluster.bootstrap(exclude={holder}), topic, 0) is None, 30,
               interval=0.5, what="the partition offline")
    p.commit_transaction(120)  # PrepareCommit written; the marker cannot be
    time.sleep(1)
    cluster.kill(coordinator)
    survivors = {coordinator, holder}
    wait_until(lambda: (lambda l: l if l not in (None, coordinator) else None)(
        leader_of(cluster.bootstrap(exclude=survivors), "__transaction_state",
                  txn_partition(txn_id))), 60, interval=0.5, what="a new coordinator")
    cluster.start_node(holder)
    wait_until(lambda: leader_of(cluster.bootstrap(exclude={coordinator}), topic, 0) == holder,
               60, interval=0.5, what="the partition back")

    def committed():
        got = read_one_partition(cluster.bootstrap(exclude={coordinator}), topic)
        return got if got == ["r1", "r2", "r3"] else None

    wait_until(committed, 60, interval=1, what="the commit completed by the new coordinator")


def read_one_partition(bootstrap, topic):
    """The values read_committed returns from partition 0 within a few seconds."""
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-check",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got = []
        for _ in range(15):
            m = c.poll(0.3)
            if m is not None and not m.error():
                got.append(m.value().decode())
        return sorted(got)
    finally:
        c.close()


@pytest.mark.sluice(settings={"transactional.id.expiration.ms": 2000,
                              "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500,
                              "transaction.remove.expired.transaction.cleanup.interval.ms": 500})
def test_an_idle_transactional_id_expires(broker, java_classpath):
    """transactional.id.expiration.ms: an id whose last transaction completed and that stays
    idle is removed (DescribeTransactions then does not find it)."""
    import time
    from compat_util import wait_until
    topic = "txn-expiry"
    create_topic(broker.bootstrap, topic, 3)
    p = txn_producer(broker.bootstrap, "txn-expiring-id")
    p.begin_transaction()
    send(p, topic, ["e1"])
    p.commit_transaction(60)
    p.flush(5)
    del p
    time.sleep(2)

    def gone():
        run = run_java(java_classpath, TRANSACTIONS_COMMAND,
                       ["--bootstrap-server", broker.bootstrap, "describe",
                        "--transactional-id", "txn-expiring-id"], timeout=90)
        return run.returncode != 0 and "could not be found" in run.output

    wait_until(gone, 60, interval=1, what="the idle transactional id removed")


@pytest.mark.sluice_only("starts a multi-process Sluice cluster")
def test_a_leader_verifies_with_a_coordinator_on_another_broker(cluster):
    """KIP-890 part 1 across brokers: a partition leader that is not the transaction
    coordinator asks it with AddPartitionsToTxn v4 `verify_only` (batched per node). A raw
    transactional produce to an unadded partition led by another broker is refused
    INVALID_TXN_STATE; once the partition is added it is appended; a confluent-kafka
    transaction over partitions on every broker commits."""
    import kafka_wire as kw
    from compat_util import admin, wait_until
    from confluent_kafka.admin import NewTopic
    from test_transactions import txn_batch
    from test_txn_verification import (INVALID_TXN_STATE, add_partitions, find_txn_coordinator,
                                       init_transactional, produce_v8, until_ok)
    topic, txn_id = "txn-remote-verify", "remote-verify-txn"
    a = admin(cluster.bootstrap())
    a.create_topics([NewTopic(topic, num_partitions=6, replication_factor=1)],
                    operation_timeout=20, request_timeout=20)[topic].result()
    sock = kw.connect(cluster.nodes[1].bootstrap)
    until_ok("FindCoordinator", lambda: find_txn_coordinator(sock, 1, txn_id))
    coordinator = wait_until(
        lambda: leader_of(cluster.bootstrap(), "__transaction_state", txn_partition(txn_id)),
        30, what="the transaction coordinator")
    leaders = {p: wait_until(lambda p=p: leader_of(cluster.bootstrap(), topic, p), 30,
                             what=f"a leader of partition {p}") for p in range(6)}
    remote = next((p for p, leader in leaders.items() if leader != coordinator), None)
    assert remote is not None, f"every partition on the coordinator {coordinator}: {leaders}"
    coordinator_sock = kw.connect(cluster.nodes[coordinator].bootstrap)
    pid, epoch = until_ok("InitProducerId",
                          lambda: init_transactional(coordinator_sock, 2, txn_id))
    leader_sock = kw.connect(cluster.nodes[leaders[remote]].bootstrap)
    got = produce_v8(leader_sock, 3, txn_id, topic, remote, txn_batch([b"a"], pid, epoch, 0))
    assert got["error"] == INVALID_TXN_STATE, got
    until_ok("AddPartitionsToTxn",
             lambda: add_partitions(coordinator_sock, 4, txn_id, pid, epoch, topic, [remote]))
    got = produce_v8(leader_sock, 5, txn_id, topic, remote, txn_batch([b"a"], pid, epoch, 0))
    assert got["error"] == 0, got

    p = txn_producer(cluster.bootstrap(), "remote-verify-client")
    p.begin_transaction()
    for partition in range(6):
        p.produce(topic, f"v{partition}".encode(), partition=partition)
    p.commit_transaction(60)


@pytest.mark.sluice_only("starts a multi-process Sluice cluster")
def test_java_transactions_at_version_2_across_brokers(cluster, java_classpath):
    """KIP-890 part 2 across brokers: at transaction version 2 the Java client sends no
    AddPartitionsToTxn; each partition leader (most not the coordinator) adds its partition
    with AddPartitionsToTxn v5 over the listener (Produce v12), and the group's leader its
    offsets partition (TxnOffsetCommit v5). The commit/abort and consume-transform-produce
    scenarios hold as on one broker."""
    from types import SimpleNamespace
    nodes = SimpleNamespace(bootstrap=cluster.bootstrap())
    java(java_classpath, nodes, "commit-abort", "txn-v2-cluster")
    java(java_classpath, nodes, "consume-transform-produce", "txn-v2-cluster-ctp", timeout=240)
