"""The transactions kill test (issue #28 point 5): a transactional consume-transform-produce
loop on a 3-node cluster while the transaction coordinator's broker and the output partitions'
leaders are SIGKILLed in turn and restarted.

Setup: topics `txnkill-in` and `txnkill-out`, 3 partitions each, replication factor 3,
min.insync.replicas 2. A plain idempotent acks=all producer feeds the input during the run
(at most BACKLOG_MAX records ahead of the loop).
The loop (confluent-kafka, one transactional.id) is a read_committed group consumer (auto
commit off) and a transactional producer: each transaction takes a random 1-100 input records,
writes each to the output partition of its input partition with a header `txn` naming the
transaction (unique per attempt), and commits the consumed positions with
`send_offsets_to_transaction`. It recovers as real applications do: an abortable error aborts
the transaction and rewinds the consumer to the group's committed offsets; a retriable error
on commit retries the commit; a fatal error (fenced, timed out) closes the producer and a new
one calls `init_transactions` (which fences the old one and finishes its transaction) before
the rewind. The loop logs each transaction as committed (commit returned), aborted (commit
never called, or the abort returned) or in doubt (commit called, neither outcome seen).

The killer, in turn: the coordinator (FindCoordinator key_type 1 for the transactional id),
then the leader of output partition 0, 1, 2 (one per turn), each SIGKILLed after a random
1-3 s of load, down 1-3 s, restarted, and back in every ISR before the next kill.
`SLUICE_TXN_KILLS` sets the number of kills (default 3, the README's full run is 20),
`SLUICE_TXN_KILL_SEED` the seed.

Checks:
1. Every committed transaction is read exactly once by read_committed consumers: each
   committed tag appears, with all its records, once (no offset repeats a tag's record).
2. No aborted or uncommitted record is ever returned to them: no record with the tag of an
   aborted transaction is read; a transaction in doubt is all or nothing.
3. The LSO never passes an open transaction: a read_committed consumer polling during the run
   (across the kills) only returns records that the final read holds at the same offsets, of
   transactions that committed (or were in doubt and are in the final read).
4. No transaction hangs past its timeout: at the end every output partition's LSO reaches its
   high watermark within transaction.timeout.ms (plus the abort interval), and
   `kafka-transactions.sh list` shows nothing Ongoing/Prepare* for the loop's id.
5. The output has each input record exactly once, and the group's committed offsets are the
   input's end offsets.

Runs against Apache Kafka 4.4 too (SLUICE_COMPAT_TARGET=kafka: a 3-node KRaft cluster from
scripts/kafka_ref.py).
"""

import os
import random
import re
import sys
import threading
import time
from collections import Counter

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

import kafka_wire as kw
from compat_util import admin, wait_until
from cluster_targets import finish, start_cluster

KILLS = int(os.environ.get("SLUICE_TXN_KILLS", "3"))
SEED = int(os.environ.get("SLUICE_TXN_KILL_SEED", str(random.randrange(1 << 30))))
NODES = (1, 2, 3)
PARTITIONS = 3
IN, OUT = "txnkill-in", "txnkill-out"
GROUP, TXN_ID = "txnkill-group", "txnkill-loop"
TXN_TIMEOUT_MS = 10_000
ABORT_INTERVAL_MS = 1_000
# Input records a second from the feeder: enough for transactions of up to 100 records.
FEED_PER_S = 150
# The feeder pauses while the loop is this many input records behind, so that the loop stays
# busy during the kills and drains in a bounded time after them.
BACKLOG_MAX = 600
# Bounds of the waits (a loaded 2-core machine); nothing asserts a duration.
NODE_BACK_S = 90
DRAIN_S = 120
CLIENT_S = 30
# How long a new producer may retry init_transactions (the previous transaction completes).
INIT_S = 90
STATE_PARTITIONS = 50  # __transaction_state's and __consumer_offsets' default partition count

SETTINGS = {
    "broker.heartbeat.interval.ms": 500,
    "broker.session.timeout.ms": 2000,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": ABORT_INTERVAL_MS,
    "group.initial.rebalance.delay.ms": 0,
    "log.segment.bytes": 64 << 20,
}
OPEN_STATES = ("Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence")


@pytest.fixture
def target(request, tmp_path):
    t = start_cluster(request, tmp_path, len(NODES), SETTINGS)
    yield t
    finish(t)


# ---- cluster views ---------------------------------------------------------------------------

def java_hash_partition(key):
    """Kafka's placement of a group or transactional id: abs(javaHashCode(id)) % 50."""
    h = 0
    for unit in key.encode("utf-16-be").hex(" ", 2).split():
        h = (h * 31 + int(unit, 16)) & 0xFFFFFFFF
    if h >= 1 << 31:
        h -= 1 << 32
    return (0 if h == -(1 << 31) else abs(h)) % STATE_PARTITIONS


def find_txn_coordinator(target, alive):
    """FindCoordinator v1 with key_type 1 (transaction) for TXN_ID, asked of each live node:
    the coordinator's node id, or None while none is known."""
    for node in sorted(alive):
        try:
            with kw.connect(target.node_bootstrap(node), timeout=5) as sock:
                payload = kw.request(sock, kw.frame(
                    kw.header_v1(kw.API_FIND_COORDINATOR, 1, 7) + kw.string(TXN_ID) + kw.i8(1)))
        except OSError:
            continue
        r = kw.Reader(payload)
        r.i32()  # correlation id
        r.i32()  # throttle_time_ms
        error = r.i16()
        r.string()  # error_message
        node_id = r.i32()
        if error == 0 and node_id in NODES:
            return node_id
    return None


def partitions(bootstrap, topic):
    """{partition: (leader, isr)} of `topic`, or None while unknown."""
    try:
        t = admin(bootstrap).list_topics(topic, timeout=10).topics.get(topic)
    except KafkaException:
        return None
    if t is None or t.error is not None:
        return None
    return {p: (x.leader, sorted(x.isrs)) for p, x in t.partitions.items()}


def fully_replicated(bootstrap):
    """Every partition the loop depends on has a leader and all three replicas in its ISR."""
    watched = [(IN, None), (OUT, None),
               ("__transaction_state", java_hash_partition(TXN_ID)),
               ("__consumer_offsets", java_hash_partition(GROUP))]
    for topic, only in watched:
        parts = partitions(bootstrap, topic)
        if not parts:
            return False
        for p, (leader, isr) in parts.items():
            if (only is None or p == only) and (leader not in NODES or isr != list(NODES)):
                return False
    return True


# ---- the loop --------------------------------------------------------------------------------

class Log:
    """What the loop knows of its transactions: tag -> number of records, by outcome."""

    def __init__(self):
        self.committed, self.aborted, self.in_doubt = {}, {}, {}
        self.producers = 0
        self.rewinds = 0
        self.errors = []  # (phase, error) the loop recovered from
        self.started = time.monotonic()

    def error(self, entry):
        self.errors.append(entry)
        self.note(f"recovering from {entry}")

    def note(self, what):
        """Progress on stderr (seen with -s), with the time since the start."""
        print(f"[txnkill {time.monotonic() - self.started:6.1f} s] {what}", file=sys.stderr,
              flush=True)


class Loop:
    def __init__(self, bootstrap, rng, log):
        self.bootstrap, self.rng, self.log = bootstrap, rng, log
        self.rebalanced = False
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": GROUP,
            "isolation.level": "read_committed", "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "session.timeout.ms": 10_000,
            "heartbeat.interval.ms": 1_000, "reconnect.backoff.max.ms": 1_000,
        })
        self.consumer.subscribe([IN], on_assign=self._on_rebalance,
                                on_revoke=self._on_rebalance, on_lost=self._on_rebalance)
        self.producer = None
        self.attempt = 0
        self.new_producer()

    def _on_rebalance(self, _consumer, _partitions):
        self.rebalanced = True

    def new_producer(self):
        """A fresh transactional producer; `init_transactions` fences the previous one and
        completes (or aborts) its transaction first."""
        if self.producer is not None:
            try:
                self.producer.purge()
            except KafkaException:
                pass
            self.producer = None
        self.log.producers += 1
        self.producer = Producer({
            "bootstrap.servers": self.bootstrap, "transactional.id": TXN_ID,
            "transaction.timeout.ms": TXN_TIMEOUT_MS, "linger.ms": 5,
            "reconnect.backoff.max.ms": 1_000,
        })
        deadline = time.monotonic() + INIT_S
        while True:
            try:
                self.producer.init_transactions(CLIENT_S)
                return
            except KafkaException as e:
                self.log.error(("init", str(e.args[0])))
                if e.args[0].fatal() or time.monotonic() > deadline:
                    raise AssertionError(f"init_transactions: {e.args[0]}; "
                                         f"errors so far: {self.log.errors[-20:]}") from e

    def rewind(self):
        """Seeks the assigned input partitions back to the group's committed offsets."""
        self.log.rewinds += 1
        assignment = self.consumer.assignment()
        if not assignment:
            return
        for tp in self.consumer.committed(assignment, timeout=CLIENT_S):
            tp.offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
            self.consumer.seek(tp)

    def step(self):
        """One transaction of 1-100 input records (or nothing, if none came); returns the
        {partition: next offset} it committed, or None."""
        self.rebalanced = False
        batch = [m for m in self.consumer.consume(self.rng.randint(1, 100), 0.5)
                 if m.error() is None]
        if self.rebalanced:
            self._retry(self.rewind)
            return None
        if not batch:
            return None
        self.attempt += 1
        tag = f"p{self.log.producers}-t{self.attempt}"
        positions = {}
        for m in batch:
            positions[m.partition()] = m.offset() + 1
        p = self.producer
        committing = False
        try:
            p.begin_transaction()
            for m in batch:
                p.produce(OUT, m.value(), partition=m.partition(), headers=[("txn", tag)])
            p.send_offsets_to_transaction(
                [TopicPartition(IN, n, o) for n, o in positions.items()],
                self.consumer.consumer_group_metadata(), CLIENT_S)
            committing = True
            self._commit(p)
            self.log.committed[tag] = len(batch)
            if len(self.log.committed) % 50 == 0:
                self.log.note(f"{len(self.log.committed)} transactions committed")
            return positions
        except KafkaException as e:
            err = e.args[0]
            self.log.error(("commit" if committing else "transaction", str(err)))
            if not err.fatal() and self._abort(p):
                self.log.aborted[tag] = len(batch)
            elif committing:
                self.log.in_doubt[tag] = len(batch)
                self.new_producer()
            else:
                self.log.aborted[tag] = len(batch)
                self.new_producer()
            self._retry(self.rewind)
            return None

    def _commit(self, p):
        for attempt in range(4):
            try:
                p.commit_transaction(CLIENT_S)
                return
            except KafkaException as e:
                if not e.args[0].retriable() or attempt == 3:
                    raise
                self.log.error(("commit retried", str(e.args[0])))

    def _abort(self, p):
        """Aborts the open transaction; False if the producer cannot (fatal error)."""
        for _ in range(3):
            try:
                p.abort_transaction(CLIENT_S)
                return True
            except KafkaException as e:
                self.log.error(("abort", str(e.args[0])))
                if e.args[0].fatal() or not e.args[0].retriable():
                    return False
        return False

    def _retry(self, action):
        for _ in range(10):
            try:
                return action()
            except KafkaException as e:
                self.log.error((action.__name__, str(e.args[0])))
                time.sleep(0.5)
        return action()

    def close(self):
        self.consumer.close()
        self.producer = None


# ---- load, observer, killer ------------------------------------------------------------------

class Feeder(threading.Thread):
    """Writes `in-NNNNNNN` records round-robin over the input partitions (idempotent, acks=all)
    until stopped, at most BACKLOG_MAX ahead of `consumed()` (the loop's committed count)."""

    def __init__(self, bootstrap, consumed):
        super().__init__(daemon=True)
        self.bootstrap, self.consumed = bootstrap, consumed
        self.stopped = threading.Event()
        self.sent = 0
        self.failure = None

    def run(self):
        try:
            p = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True,
                          "acks": "all", "linger.ms": 5, "message.timeout.ms": 120_000,
                          "reconnect.backoff.max.ms": 1_000})
            start = time.monotonic()
            while not self.stopped.is_set():
                due = min(int((time.monotonic() - start) * FEED_PER_S), self.sent + FEED_PER_S)
                while self.sent < due and self.sent - self.consumed() < BACKLOG_MAX:
                    p.produce(IN, b"in-%07d" % self.sent, partition=self.sent % PARTITIONS)
                    self.sent += 1
                p.poll(0.02)
            assert p.flush(180) == 0, "the feeder's records were not all delivered"
        except BaseException as e:  # reported by the test
            self.failure = e


class Observer(threading.Thread):
    """A read_committed consumer that polls the output during the whole run."""

    def __init__(self, bootstrap):
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.stopped = threading.Event()
        self.seen = []  # (partition, offset, value, tag)
        self.failure = None

    def run(self):
        try:
            c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "txnkill-observer",
                          "isolation.level": "read_committed", "enable.auto.commit": False,
                          "reconnect.backoff.max.ms": 1_000})
            c.assign([TopicPartition(OUT, n, OFFSET_BEGINNING) for n in range(PARTITIONS)])
            while not self.stopped.is_set():
                m = c.poll(0.2)
                if m is not None and m.error() is None:
                    self.seen.append((m.partition(), m.offset(), m.value(), tag_of(m)))
            c.close()
        except BaseException as e:
            self.failure = e


def tag_of(m):
    return dict(m.headers() or []).get("txn", b"").decode()


class Killer:
    """SIGKILLs, in turn, the transaction coordinator and an output partition's leader, and
    restarts each, waiting for full ISRs in between. Runs in the test's main thread: the nodes
    it restarts die with the thread that started them (PR_SET_PDEATHSIG is per thread)."""

    def __init__(self, target, rng, log):
        self.target, self.rng, self.log = target, rng, log
        self.kills = []  # (what, node)

    def run(self):
        for i in range(KILLS):
            time.sleep(self.rng.uniform(1, 3))
            alive = set(NODES)
            victim, what = None, "coordinator"
            if i % 2 == 1:
                part = (i // 2) % PARTITIONS
                now = partitions(self.target.bootstrap(), OUT) or {}
                victim, what = now.get(part, (None, None))[0], f"leader of {OUT}-{part}"
            if victim not in NODES:
                victim = wait_until(lambda: find_txn_coordinator(self.target, alive), 30,
                                    0.2, what="the transaction coordinator")
                what = "coordinator"
            self.target.kill(victim)
            self.kills.append((what, victim))
            self.log.note(f"kill {i + 1}: SIGKILL node {victim}, the {what}")
            time.sleep(self.rng.uniform(1, 3))
            self.target.restart(victim)
            self.log.note(f"kill {i + 1}: node {victim} restarted")
            wait_until(lambda: fully_replicated(self.target.bootstrap()), NODE_BACK_S, 0.5,
                       what=f"node {victim} back in every ISR after kill {i + 1}")


class LoopThread(threading.Thread):
    """Runs the loop's transactions until told the input's end offsets and reaching them."""

    def __init__(self, loop):
        super().__init__(daemon=True)
        self.loop = loop
        self.ends_in = None  # set once the feeder stopped
        self.done = {}
        self.failure = None

    def finished(self):
        ends = self.ends_in
        return ends is not None and all(self.done.get(n, 0) >= ends[n] for n in ends)

    def run(self):
        try:
            while not self.finished():
                self.done.update(self.loop.step() or {})
        except BaseException as e:
            self.failure = e
        finally:
            self.loop.close()


# ---- reading the result ----------------------------------------------------------------------

def watermarks(bootstrap, isolation):
    """{partition: end offset} of the output at `isolation` (read_committed: the LSO)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "txnkill-marks",
                  "isolation.level": isolation})
    try:
        return {n: c.get_watermark_offsets(TopicPartition(OUT, n), timeout=10)[1]
                for n in range(PARTITIONS)}
    finally:
        c.close()


def read_to(bootstrap, topic, ends, isolation="read_committed"):
    """[(partition, offset, value, tag)] of `topic` up to `ends`."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"txnkill-read-{topic}",
                  "isolation.level": isolation, "enable.auto.commit": False})
    got = []
    try:
        tps = [TopicPartition(topic, n, OFFSET_BEGINNING) for n in range(PARTITIONS)]
        c.assign(tps)
        at = {n: 0 for n in range(PARTITIONS)}
        deadline = time.monotonic() + DRAIN_S
        while any(at[n] < ends[n] for n in range(PARTITIONS)):
            assert time.monotonic() < deadline, f"reading {topic}: at {at}, ends {ends}"
            m = c.poll(0.2)
            if m is None or m.error() is not None:
                # Control records and aborted ones move the position without a message.
                for tp in c.position([TopicPartition(topic, n) for n in range(PARTITIONS)]):
                    if tp.offset >= 0:
                        at[tp.partition] = max(at[tp.partition], tp.offset)
                continue
            if m.offset() < ends[m.partition()]:
                got.append((m.partition(), m.offset(), m.value(), tag_of(m)))
            at[m.partition()] = m.offset() + 1
        return got
    finally:
        c.close()


def transactions_listed(classpath, bootstrap):
    """{transactional id: state} from `kafka-transactions.sh list`."""
    from jvm import check_java, run_java
    out = check_java(run_java(classpath, "org.apache.kafka.tools.TransactionsCommand",
                              ["--bootstrap-server", bootstrap, "list"], timeout=90))
    states = {}
    for line in out.splitlines():
        fields = line.split()
        if len(fields) == 4 and re.fullmatch(r"\d+", fields[1]):
            states[fields[0]] = fields[3]
    return states


@pytest.mark.long("a transactional loop through coordinator and leader SIGKILLs on 3 nodes")
@pytest.mark.timeout(300 + 60 * KILLS)
def test_transactional_loop_survives_coordinator_and_leader_kills(target, kafka_classpath):
    rng = random.Random(SEED)
    client = admin(target.bootstrap())  # alive until the futures complete
    futures = client.create_topics(
        [NewTopic(t, num_partitions=PARTITIONS, replication_factor=3,
                  config={"min.insync.replicas": "2"}) for t in (IN, OUT)],
        operation_timeout=30, request_timeout=30)
    for f in futures.values():
        f.result()
    log = Log()
    loop = Loop(target.bootstrap(), rng, log)
    worker = LoopThread(loop)
    feeder = Feeder(target.bootstrap(), lambda: sum(dict(worker.done).values()))
    feeder.start()
    # Every partition the loop uses exists and is fully replicated before the first kill.
    wait_until(lambda: fully_replicated(target.bootstrap()), NODE_BACK_S, 0.5,
               what="a fully replicated start")
    observer = Observer(target.bootstrap())
    observer.start()
    killer = Killer(target, random.Random(SEED + 1), log)
    started = time.monotonic()
    worker.start()
    try:
        killer.run()
    finally:
        feeder.stopped.set()
        feeder.join()
        assert feeder.failure is None, f"feeder: {feeder.failure!r}"
        c = Consumer({"bootstrap.servers": target.bootstrap(), "group.id": "txnkill-marks"})
        worker.ends_in = {n: c.get_watermark_offsets(TopicPartition(IN, n), timeout=10)[1]
                          for n in range(PARTITIONS)}
        c.close()
    ends_in = worker.ends_in
    worker.join(DRAIN_S)
    assert worker.failure is None, f"the loop failed: {worker.failure!r}\n{target.describe()}"
    assert not worker.is_alive(), \
        f"the loop drained to {worker.done}, input ends {ends_in}\n{target.describe()}"
    duration = time.monotonic() - started

    # 4. No transaction hangs: the LSO reaches the high watermark within the timeout.
    hw = watermarks(target.bootstrap(), "read_uncommitted")
    wait_until(lambda: watermarks(target.bootstrap(), "read_committed") == hw,
               (TXN_TIMEOUT_MS + ABORT_INTERVAL_MS) / 1000 + 30, 0.5,
               what=f"the LSO at the high watermark {hw}")
    states = transactions_listed(kafka_classpath, target.bootstrap())
    assert TXN_ID in states and states[TXN_ID] not in OPEN_STATES, states
    observer.stopped.set()
    observer.join()
    assert observer.failure is None, f"observer: {observer.failure!r}"

    out = read_to(target.bootstrap(), OUT, hw)
    inputs = read_to(target.bootstrap(), IN, ends_in, "read_uncommitted")
    by_tag = {}
    for _p, _o, _v, tag in out:
        by_tag[tag] = by_tag.get(tag, 0) + 1
    summary = (f"seed {SEED}, {len(killer.kills)} kills {killer.kills}, "
               f"{len(log.committed)} committed, {len(log.aborted)} aborted, "
               f"{len(log.in_doubt)} in doubt {log.in_doubt}, {log.producers} producers, "
               f"{log.rewinds} rewinds, {len(inputs)} inputs, {len(out)} outputs, "
               f"{duration:.0f} s; errors recovered from: {log.errors[:20]}")
    print(f"\ntxn kill: {summary}")

    # 1. Every committed transaction is read, with all its records, exactly once.
    wrong = {t: (n, by_tag.get(t, 0)) for t, n in log.committed.items() if by_tag.get(t) != n}
    assert not wrong, f"committed transactions read wrongly (tag: (sent, read)): {wrong}\n{summary}"
    # 2. Nothing aborted is read; a transaction in doubt is all or nothing; nothing unknown.
    aborted = {t: by_tag[t] for t in log.aborted if t in by_tag}
    assert not aborted, f"records of aborted transactions read: {aborted}\n{summary}"
    partial = {t: (n, by_tag[t]) for t, n in log.in_doubt.items() if by_tag.get(t, n) != n}
    assert not partial, f"transactions in doubt read in part: {partial}\n{summary}"
    unknown = set(by_tag) - set(log.committed) - set(log.in_doubt)
    assert not unknown, f"records of transactions the loop never committed: {unknown}\n{summary}"
    # 3. What read_committed returned during the run is what the final read holds there.
    final = {(p, o): (v, t) for p, o, v, t in out}
    moved = [s for s in observer.seen if final.get((s[0], s[1])) != (s[2], s[3])]
    assert not moved, (f"read_committed returned records during the run that are not "
                       f"committed there: {moved[:10]}\n{summary}")
    assert not {s[3] for s in observer.seen} & set(log.aborted), summary
    # 5. Each input record exactly once in the output; the group's offsets at the input's end.
    values = Counter(v for _p, _o, v, _t in out)
    duplicated = sorted(v for v, n in values.items() if n > 1)
    missing = sorted({v for _p, _o, v, _t in inputs} - set(values))
    assert not duplicated and not missing and len(values) == len(inputs), (
        f"output differs from input: {len(values)} distinct of {len(inputs)} inputs, "
        f"duplicated {duplicated[:10]}, missing {missing[:10]}\n{summary}")
    g = Consumer({"bootstrap.servers": target.bootstrap(), "group.id": GROUP,
                  "isolation.level": "read_committed"})
    committed = {tp.partition: tp.offset for tp in g.committed(
        [TopicPartition(IN, n) for n in range(PARTITIONS)], timeout=CLIENT_S)}
    g.close()
    assert committed == ends_in, summary
    assert len(killer.kills) == KILLS and log.committed, summary
