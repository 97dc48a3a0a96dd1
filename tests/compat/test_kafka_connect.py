"""A Kafka Connect distributed worker against the broker (issue #27 point 7): Kafka's own
`ConnectDistributed` (connect-runtime 4.3.1, tests/connect/pom.xml says why not 4.4) with its three internal
topics, which it creates compacted and refuses to start without (`TopicAdmin`'s
`verifyTopicCleanupPolicyOnlyCompact`), runs Kafka's FileStream connectors: a file source into
a topic and that topic into a file sink. After a clean restart of the worker both connectors
resume from the offsets stored in the internal topics: the sink file ends holding every line of
the source file once, in order. Passes against Apache Kafka 4.4 too (SLUICE_COMPAT_TARGET=kafka).
"""

import json
import signal
import subprocess
import urllib.error
import urllib.request

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import ConfigResource

from compat_util import admin, wait_until
from conftest import free_port
from jvm import REPO, maven_classpath

GROUP_SETTINGS = {"group.initial.rebalance.delay.ms": 0}
INTERNAL_TOPICS = ("sluice-connect-configs", "sluice-connect-offsets", "sluice-connect-status")
TOPIC = "connect-lines"
WORKER_START_TIMEOUT_S = 120
STOP_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def connect_classpath():
    """The worker's classpath (tests/connect/pom.xml: Connect 4.3.1 and its FileStream
    connectors), resolved once with Maven."""
    return maven_classpath(REPO / "tests" / "connect")


class Worker:
    """One `ConnectDistributed` JVM with its REST listener on a free loopback port."""

    def __init__(self, classpath, bootstrap, directory):
        self.classpath, self.directory = classpath, directory
        self.rest = f"http://127.0.0.1:{free_port()}"
        self.props = directory / "worker.properties"
        self.props.write_text("\n".join([
            f"bootstrap.servers={bootstrap}",
            "group.id=sluice-connect",
            "key.converter=org.apache.kafka.connect.storage.StringConverter",
            "value.converter=org.apache.kafka.connect.storage.StringConverter",
            f"config.storage.topic={INTERNAL_TOPICS[0]}",
            f"offset.storage.topic={INTERNAL_TOPICS[1]}",
            f"status.storage.topic={INTERNAL_TOPICS[2]}",
            "config.storage.replication.factor=1",
            "offset.storage.replication.factor=1",
            "status.storage.replication.factor=1",
            "offset.flush.interval.ms=1000",
            f"listeners={self.rest}",
            "",
        ]))
        self.proc = None
        self.starts = 0

    def start(self):
        self.starts += 1
        self.log_path = self.directory / f"worker-{self.starts}.log"
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            ["java", "-Xss1m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
             "-cp", self.classpath, "org.apache.kafka.connect.cli.ConnectDistributed",
             str(self.props)],
            stdout=self.log, stderr=subprocess.STDOUT)
        # KIP-1017's readiness endpoint: 200 once the worker has joined its group and read its
        # config topic to the end.
        wait_until(lambda: (self.get("/health") or {}).get("status") == "healthy",
                   WORKER_START_TIMEOUT_S, interval=0.5,
                   what=f"the Connect worker healthy ({self.report()})")

    def stop(self):
        """SIGTERM, as a supervisor stops a worker: it commits its tasks' offsets on the way."""
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(STOP_TIMEOUT_S)
        self.log.close()

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def report(self):
        alive = "running" if self.proc.poll() is None else f"exited {self.proc.returncode}"
        self.log.flush()
        return f"worker {alive}; log tail:\n{self.log_path.read_text()[-6000:]}"

    def get(self, path):
        if self.proc.poll() is not None:
            pytest.fail(f"the Connect worker exited: {self.report()}", pytrace=False)
        try:
            with urllib.request.urlopen(self.rest + path, timeout=5) as r:
                return json.loads(r.read())
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return None

    def put_connector(self, name, config):
        request = urllib.request.Request(
            f"{self.rest}/connectors/{name}/config", data=json.dumps(config).encode(),
            method="PUT", headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as r:
                assert r.status in (200, 201), r.read()
        except urllib.error.HTTPError as e:
            pytest.fail(f"PUT connector {name}: {e.code} {e.read()!r}; {self.report()}",
                        pytrace=False)

    def running(self, name):
        status = self.get(f"/connectors/{name}/status") or {}
        tasks = status.get("tasks") or []
        return (status.get("connector", {}).get("state") == "RUNNING" and bool(tasks)
                and all(t.get("state") == "RUNNING" for t in tasks))


def end_offset(bootstrap):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "sluice-connect-check"})
    try:
        return c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=30)[1]
    finally:
        c.close()


def sink_committed(bootstrap):
    """The committed offset of the sink connector's group (Connect names it connect-<name>)."""
    request = [ConsumerGroupTopicPartitions("connect-file-sink", [TopicPartition(TOPIC, 0)])]
    a = admin(bootstrap)  # kept alive until the result arrives
    result = a.list_consumer_group_offsets(request)["connect-file-sink"].result(30)
    return result.topic_partitions[0].offset


def lines_of(path):
    return path.read_text().splitlines() if path.exists() else []


def append_lines(path, lines):
    with open(path, "a") as f:
        f.write("".join(f"{line}\n" for line in lines))


@pytest.mark.sluice(settings=GROUP_SETTINGS)
def test_connect_file_pipeline_resumes_after_a_worker_restart(broker, connect_classpath, tmp_path):
    source, sink = tmp_path / "source.txt", tmp_path / "sink.txt"
    first = [f"line-{i:04d}" for i in range(500)]
    second = [f"line-{i:04d}" for i in range(500, 1000)]
    append_lines(source, first)
    worker = Worker(connect_classpath, broker.bootstrap, tmp_path)
    try:
        worker.start()
        worker.put_connector("file-source", {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
            "tasks.max": "1", "file": str(source), "topic": TOPIC})
        worker.put_connector("file-sink", {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
            "tasks.max": "1", "file": str(sink), "topics": TOPIC})
        for name in ("file-source", "file-sink"):
            wait_until(lambda: worker.running(name), 60, interval=0.5,
                       what=f"connector {name} RUNNING ({worker.report()})")
        wait_until(lambda: len(lines_of(sink)) >= len(first), 90, interval=0.5,
                   what=f"the first {len(first)} lines in the sink ({worker.report()})")
        assert lines_of(sink) == first

        # The worker created its internal topics compacted, as Kafka requires of them.
        a = admin(broker.bootstrap)
        resources = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in INTERNAL_TOPICS]
        for resource, future in a.describe_configs(resources).items():
            policy = future.result(30)["cleanup.policy"].value
            assert policy == "compact", (resource, policy)

        worker.stop()
        append_lines(source, second)  # written while no worker runs
        worker.start()
        wait_until(lambda: len(lines_of(sink)) >= len(first) + len(second), 120, interval=0.5,
                   what=f"all {len(first) + len(second)} lines in the sink ({worker.report()})")
        # Nothing replayed: the topic holds each line once, and the sink's group has committed
        # all of it, so no line is still to come.
        total = len(first) + len(second)
        wait_until(lambda: sink_committed(broker.bootstrap) == total, 60, interval=0.5,
                   what=f"the sink's committed offset at {total}")
        assert end_offset(broker.bootstrap) == total, "the source replayed lines"
        assert lines_of(sink) == first + second, "lost or repeated lines after the restart"
    finally:
        worker.kill()
