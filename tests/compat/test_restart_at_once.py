"""A broker restarted at once on its own ports and data directory (issue #25 point 1).

Back-to-back restarts, alternately after SIGTERM and after SIGKILL, while an idempotent
acks=all producer and a reader run across them:
- every start serves (Kafka port answers, /health 200; a cluster node: says it listens) within
  START_BOUND_S of being launched — it never refuses because its previous process's sockets
  still linger;
- once the previous process has been reaped, its Kafka and admin ports refuse connections:
  no connection is ever accepted into a socket nobody serves (docs/operations.md, "Restart
  at once");
- nothing acknowledged is lost, no record is at two offsets, and an offset never shows two
  values over time;
- a live process listening on the port still stops a start, naming the address and the process.

Cycles: SLUICE_RESTART_CYCLES, else 50 for a single node and 20 for a cluster node with
SLUICE_LONG=1 (scripts/test-long), 6 and 3 in the README test command.
"""

import os
import socket
import subprocess
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from compat_util import consume_all, create_topic, long_or, wait_until
from conftest import _die_with_parent
from sluice_cluster import SluiceCluster

pytestmark = pytest.mark.sluice_only(
    "bounds Sluice's start-up time; Kafka's JVM start alone takes longer than the bound")

START_BOUND_S = 5.0
TOPIC = "restart-at-once"
PARTITIONS = 3


def cycles(full, short):
    """`SLUICE_RESTART_CYCLES`, else `full` under SLUICE_LONG=1 and `short` in the README run."""
    return int(os.environ.get("SLUICE_RESTART_CYCLES", long_or(full, short)))


def refused(port):
    """True when a connect to 127.0.0.1:`port` is refused (nothing listens)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return False
    except ConnectionRefusedError:
        return True


class Workload:
    """An idempotent acks=all producer and a reader from the beginning, in threads, recording
    every acknowledgement and every read."""

    def __init__(self, bootstrap):
        self.bootstrap = bootstrap
        self.acked = {}  # (partition, offset) -> value
        self.acked_twice = []
        self.read = {}  # (partition, offset) -> value first read there
        self.read_conflicts = []
        self.errors = []
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._produce, daemon=True),
                        threading.Thread(target=self._read, daemon=True)]

    def start(self):
        for t in self.threads:
            t.start()

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=120)

    def acks(self):
        with self.lock:
            return len(self.acked)

    def _delivered(self, err, msg):
        with self.lock:
            if err is not None:
                self.errors.append(str(err))
                return
            key = (msg.partition(), msg.offset())
            if key in self.acked:
                self.acked_twice.append(key)
            self.acked[key] = msg.value()

    def _produce(self):
        p = Producer({"bootstrap.servers": self.bootstrap, "acks": "all",
                      "enable.idempotence": True, "linger.ms": 5,
                      "message.timeout.ms": 120000, "reconnect.backoff.ms": 20,
                      "reconnect.backoff.max.ms": 200})
        i = 0
        while not self.stop.is_set():
            try:
                p.produce(TOPIC, value=b"v-%08d" % i, partition=i % PARTITIONS,
                          on_delivery=self._delivered)
                i += 1
            except BufferError:
                pass
            p.poll(0.005)
        p.flush(120)

    def _read(self):
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "restart-reader",
                      "enable.auto.commit": False, "reconnect.backoff.ms": 20,
                      "reconnect.backoff.max.ms": 200})
        c.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        while not self.stop.is_set():
            for m in c.consume(100, timeout=0.2):
                if m.error():
                    continue
                key = (m.partition(), m.offset())
                seen = self.read.setdefault(key, m.value())
                if seen != m.value():
                    self.read_conflicts.append((key, seen, m.value()))
        c.close()

    def check(self, everything):
        """`everything`: {partition: [messages]} read once the run is over."""
        assert not self.acked_twice, f"offsets acknowledged twice: {self.acked_twice[:5]}"
        assert not self.read_conflicts, f"an offset read with two values: {self.read_conflicts[:5]}"
        final = {(p, m.offset()): m.value() for p, ms in everything.items() for m in ms}
        lost = [k for k, v in self.acked.items() if final.get(k) != v]
        assert not lost, f"{len(lost)} acknowledged records lost or changed, e.g. {lost[:5]}"
        values = list(final.values())
        assert len(values) == len(set(values)), "a record at two offsets"
        disagree = [k for k, v in self.read.items() if k in final and final[k] != v]
        assert not disagree, f"offsets read with one value, later another: {disagree[:5]}"


def wait_new_acks(workload, before, what):
    wait_until(lambda: workload.acks() > before, 60, what=what)


def test_back_to_back_restarts_on_the_same_ports_serve_at_once_and_lose_nothing(broker):
    create_topic(broker.bootstrap, TOPIC, PARTITIONS)
    work = Workload(broker.bootstrap)
    work.start()
    starts = []
    try:
        for cycle in range(cycles(50, 6)):
            wait_new_acks(work, work.acks(), f"acknowledgements before stop {cycle}")
            if cycle % 2 == 0:
                status, needed_kill = broker.stop()
                assert not needed_kill and status == broker.clean_exit_status, \
                    f"cycle {cycle}: SIGTERM exit {status}\n{broker.log_tail()}"
            else:
                broker.kill()
            # The process is reaped: nothing may take a connection on its ports now.
            assert refused(broker.port), f"cycle {cycle}: the dead broker's Kafka port accepts"
            assert refused(broker.admin_port), f"cycle {cycle}: the dead broker's admin port accepts"
            port = broker.port
            began = time.monotonic()
            broker.start()
            starts.append(time.monotonic() - began)
            assert broker.port == port, "restarted on other ports"
            assert starts[-1] <= START_BOUND_S, \
                f"cycle {cycle}: start took {starts[-1]:.2f} s\n{broker.log_tail()}"
        wait_new_acks(work, work.acks(), "acknowledgements after the last start")
    finally:
        work.finish()
    assert work.acks() > 0
    work.check(consume_all(broker.bootstrap, TOPIC, PARTITIONS, expected=len(work.acked)))
    print(f"{len(starts)} restarts, start time max {max(starts):.2f} s, "
          f"{work.acks()} records acknowledged")


def test_a_live_listener_on_the_port_still_refuses_the_start_naming_it(broker):
    broker.stop()
    holder = socket.socket()
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    holder.bind(("127.0.0.1", broker.port))
    holder.listen()
    try:
        run = subprocess.run(broker._command(), capture_output=True, text=True, timeout=30,
                             cwd=broker.data_dir.parent)
    finally:
        holder.close()
    assert run.returncode != 0
    last = run.stderr.strip().splitlines()[-1]
    assert f"127.0.0.1:{broker.port}" in last and "address already in use" in last, last
    assert f"process {os.getpid()}" in last, last
    broker.start()  # and once the holder is gone, it starts


def test_a_cluster_node_restarted_back_to_back_serves_at_once_and_loses_nothing(
        sluice_bin, tmp_path):
    c = SluiceCluster(sluice_bin, tmp_path / "cluster", nodes=3,
                      settings={"broker.heartbeat.interval.ms": 500,
                                "broker.session.timeout.ms": 2000},
                      preexec_fn=_die_with_parent)
    c.start()
    try:
        bootstrap = c.bootstrap()
        create_topic(bootstrap, TOPIC, PARTITIONS, replication_factor=3)
        work = Workload(bootstrap)
        work.start()
        node = c.nodes[2]
        try:
            for cycle in range(cycles(20, 3)):
                wait_new_acks(work, work.acks(), f"acknowledgements before stop {cycle}")
                if cycle % 2 == 0:
                    assert c.stop_node(2) == 0, f"cycle {cycle}: SIGTERM exit\n{node.log_tail()}"
                else:
                    c.kill(2)
                for port in (node.port, node.admin_port, node.voter_port):
                    assert refused(port), f"cycle {cycle}: the dead node's port {port} accepts"
                began = time.monotonic()
                c.start_node(2, timeout=START_BOUND_S)
                assert time.monotonic() - began <= START_BOUND_S
            wait_new_acks(work, work.acks(), "acknowledgements after the last start")
        finally:
            work.finish()
        work.check(consume_all(bootstrap, TOPIC, PARTITIONS, expected=len(work.acked)))
    finally:
        c.stop()
