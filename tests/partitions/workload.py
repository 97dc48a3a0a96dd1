"""The workload of a partition test, run from the root namespace (where every node is
reachable) while the nemesis works; everything it sees goes into a `History`:

- a producer (confluent-kafka, `enable.idempotence`, `acks=all`) sends unique values
  "<seq>" round-robin over the topic's partitions at `rate` records/s; every acknowledgement
  is recorded as (time, partition, offset, value);
- a consumer in group `group` reads from the earliest offset and commits its position
  synchronously every second; every record read is (time, partition, offset, value, leader
  epoch), every successful commit (time, partition, offset);
- an observer asks the group's committed offsets (OffsetFetch, from a second consumer that does
  not join) every second, and each node's Metadata v12 (leader and leader epoch of every
  partition) every 0.5 s, directly on the node's address;
- `read_all` at the end reads every partition from its start to its high watermark.
"""

import threading
import time
from dataclasses import dataclass, field

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

import kafka_wire as kw

COMMIT_INTERVAL_S = 1.0
OBSERVE_INTERVAL_S = 0.5


@dataclass
class History:
    acks: list = field(default_factory=list)        # (t, partition, offset, value)
    send_errors: list = field(default_factory=list)  # (t, value, error)
    reads: list = field(default_factory=list)       # (t, partition, offset, value, epoch)
    commits: list = field(default_factory=list)     # (t, partition, offset) acknowledged
    committed: list = field(default_factory=list)   # (t, partition, offset) from OffsetFetch
    leaders: list = field(default_factory=list)     # (t, node, partition, leader, epoch)
    final: dict = field(default_factory=dict)       # partition -> {offset: value}
    notes: list = field(default_factory=list)
    sent: int = 0


class Workload:
    def __init__(self, bootstrap, nodes, topic, partitions, group, rate=200):
        self.bootstrap, self.nodes, self.topic = bootstrap, nodes, topic
        self.partitions, self.group, self.rate = partitions, group, rate
        self.history = History()
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.producing = threading.Event()
        self.producing.set()
        self.threads = [threading.Thread(target=f, daemon=True, name=f.__name__)
                        for f in (self._produce, self._consume, self._observe_commits,
                                  self._observe_leaders)]

    def start(self):
        for t in self.threads:
            t.start()

    def stop_producing(self):
        self.producing.clear()

    def stop(self, timeout=60):
        self.stopping.set()
        for t in self.threads:
            t.join(timeout)

    def _record(self, name, item):
        with self.lock:
            getattr(self.history, name).append(item)

    def _produce(self):
        p = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True,
                      "acks": "all", "linger.ms": 5, "message.timeout.ms": 15000,
                      "request.timeout.ms": 5000, "socket.timeout.ms": 5000,
                      "error_cb": lambda e: self._record("notes", f"producer error_cb: {e}")})

        def delivered(err, msg):
            value = msg.value().decode()
            if err is None:
                self._record("acks", (time.monotonic(), msg.partition(), msg.offset(), value))
            else:
                self._record("send_errors", (time.monotonic(), value, str(err)))

        seq, start = 0, time.monotonic()
        while self.producing.is_set() and not self.stopping.is_set():
            due = start + seq / self.rate
            if due > time.monotonic():
                p.poll(max(0.0, due - time.monotonic()))
                continue
            try:
                p.produce(self.topic, value=str(seq).encode(), partition=seq % self.partitions,
                          on_delivery=delivered)
                seq += 1
                self.history.sent = seq
            except BufferError:
                p.poll(0.1)
            except KafkaException as e:
                self._record("notes", f"produce raised: {e}")
                p.poll(0.1)
            p.poll(0)
        left = p.flush(30)
        if left:
            self._record("notes", f"{left} records still in flight after the final flush")

    def _consume(self):
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                      "auto.offset.reset": "earliest", "enable.auto.commit": False,
                      "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000,
                      "error_cb": lambda e: self._record("notes", f"consumer error_cb: {e}")})
        c.subscribe([self.topic])
        last_commit = time.monotonic()
        try:
            while not self.stopping.is_set():
                msg = c.poll(0.2)
                if msg is not None and msg.error() is None:
                    self._record("reads", (time.monotonic(), msg.partition(), msg.offset(),
                                           msg.value().decode(), msg.leader_epoch()))
                if time.monotonic() - last_commit >= COMMIT_INTERVAL_S:
                    last_commit = time.monotonic()
                    self._commit(c)
            self._commit(c)
        finally:
            c.close()

    def _commit(self, c):
        try:
            done = c.commit(asynchronous=False)
        except KafkaException as e:
            if "NO_OFFSET" not in str(e):
                self._record("notes", f"commit failed: {e}")
            return
        now = time.monotonic()
        for tp in done or ():
            if tp.error is None and tp.offset >= 0:
                self._record("commits", (now, tp.partition, tp.offset))

    def _observe_commits(self):
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                      "enable.auto.commit": False})
        tps = [TopicPartition(self.topic, p) for p in range(self.partitions)]
        try:
            while not self.stopping.wait(COMMIT_INTERVAL_S):
                try:
                    got = c.committed(tps, timeout=5)
                except KafkaException:
                    continue
                now = time.monotonic()
                for tp in got:
                    if tp.error is None and tp.offset >= 0:
                        self._record("committed", (now, tp.partition, tp.offset))
        finally:
            c.close()

    def _observe_leaders(self):
        corr = 0
        while not self.stopping.wait(OBSERVE_INTERVAL_S):
            for node, address in self.nodes.items():
                corr += 1
                try:
                    with kw.connect(address, timeout=1) as s:
                        s.sendall(kw.metadata_v12(corr, [self.topic]))
                        _, topics = kw.parse_metadata_v12(kw.read_frame(s))
                except (OSError, ValueError, KeyError):
                    continue
                now = time.monotonic()
                _, _, parts = topics.get(self.topic, (None, None, {}))
                for p, (err, leader, epoch, _) in parts.items():
                    if err == 0 and leader >= 0:
                        self._record("leaders", (now, node, p, leader, epoch))


def read_all(bootstrap, topic, partitions, timeout_s=60):
    """{partition: {offset: value}}: every record below each partition's high watermark."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "nemesis-final-read",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    out, ends = {p: {} for p in range(partitions)}, {}
    try:
        for p in range(partitions):
            ends[p] = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and any(
                (max(out[p], default=-1) + 1) < ends[p] for p in range(partitions)):
            msg = c.poll(0.5)
            if msg is not None and msg.error() is None:
                out[msg.partition()][msg.offset()] = msg.value().decode()
    finally:
        c.close()
    return out, ends
