"""Kafka Streams (4.4) word count against the broker (issues 17 and #27), with Kafka's default
topology: its count store is backed by a compacted changelog topic.

- at_least_once gives the exact counts;
- exactly_once_v2 (transactions: the consumed offsets, changelog and output committed
  atomically, KIP-447) gives the exact counts to a read_committed consumer;
- the application SIGKILLed once its work is committed, then restarted with an empty state
  directory, restores its store from the changelog alone and goes on counting exactly (in
  both guarantees);
- exactly_once_v2 SIGKILLed mid-run (as soon as it has written output), restarted with an
  empty state directory, still gives exact counts.

The checks live in tests/java/.../StreamsWordCount.java and StreamsRestore.java. The SIGKILL
test passes against Apache Kafka 4.4 too (SLUICE_COMPAT_TARGET=kafka), as does the word count
in both guarantees."""

import subprocess

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import ConfigResource

from compat_util import admin, wait_until
from jvm import check_java, run_java

GROUP_SETTINGS = {"group.initial.rebalance.delay.ms": 0}
RESTORE = "sluice.compat.StreamsRestore"
APPLICATION_ID = "sluice-wordcount-restore"  # StreamsRestore.APPLICATION_ID
CHANGELOG = f"{APPLICATION_ID}-counts-changelog"


@pytest.mark.sluice(settings=GROUP_SETTINGS)
@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_streams_word_count(broker, java_classpath, guarantee):
    run = run_java(java_classpath, "sluice.compat.StreamsWordCount",
                   [broker.bootstrap, guarantee], timeout=150)
    check_java(run, expect_line=f"PASS streams {guarantee}")


def all_committed(bootstrap):
    """True once the application's group has committed every partition it reads (the input
    and the repartition topic) past its last record: nothing it has counted is left to redo.
    (Under exactly_once_v2 a committed offset may stop before a transaction's commit marker,
    so "past the last record" is what a read_committed consumer finds after it.)"""
    a = admin(bootstrap)  # kept alive until the result arrives
    committed = a.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(APPLICATION_ID)])[APPLICATION_ID].result(30)
    tps = committed.topic_partitions
    topics = {tp.topic for tp in tps}
    if "wcr-input" not in topics or not any(t.endswith("-repartition") for t in topics):
        return False
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "sluice-streams-check",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        return all(nothing_after(c, tp) for tp in tps)
    finally:
        c.close()


def nothing_after(c, committed):
    """True if `c` (read_committed) reads no record from the committed offset to the end."""
    tp = TopicPartition(committed.topic, committed.partition)
    high = c.get_watermark_offsets(tp, timeout=30)[1]
    if committed.offset >= high:
        return True
    c.assign([TopicPartition(committed.topic, committed.partition, committed.offset)])
    for _ in range(25):
        m = c.poll(0.2)
        if m is not None and not m.error():
            return False
        [at] = c.position([tp])
        if at.offset >= high:
            return True
    return False


class App:
    """`StreamsRestore run` in its own JVM, so that the test can SIGKILL it."""

    def __init__(self, classpath, bootstrap, state_dir, log_path, guarantee):
        self.log_path = log_path
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(
            ["java", "-Xss1m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", classpath,
             RESTORE, bootstrap, "run", str(state_dir), guarantee],
            stdout=self.log, stderr=subprocess.STDOUT)

    def report(self):
        self.log.flush()
        state = "running" if self.proc.poll() is None else f"exited {self.proc.returncode}"
        return f"streams app {state}; log tail:\n{self.log_path.read_text()[-6000:]}"

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.log.close()


@pytest.mark.long("a store restored from its changelog after SIGKILL")
@pytest.mark.sluice(settings=GROUP_SETTINGS)
@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_streams_state_restored_from_the_changelog_after_sigkill(broker, java_classpath,
                                                                 tmp_path, guarantee):
    def step(*args):
        return check_java(run_java(java_classpath, RESTORE, [broker.bootstrap, *args],
                                   timeout=150), expect_line="PASS")

    step("produce", 0, 300)
    app = App(java_classpath, broker.bootstrap, tmp_path / "state-1", tmp_path / "app-1.log",
              guarantee)
    try:
        step("check", 300)
        wait_until(lambda: all_committed(broker.bootstrap), 60, interval=0.5,
                   what=f"the application's offsets committed to the end ({app.report()})")
    finally:
        app.kill()

    a = admin(broker.bootstrap)  # kept alive until the result arrives
    resource = ConfigResource(ConfigResource.Type.TOPIC, CHANGELOG)
    policy = a.describe_configs([resource])[resource].result(30)["cleanup.policy"].value
    assert policy == "compact", policy

    # A new state directory: the store has only the changelog to restore from.
    step("produce", 300, 600)
    app = App(java_classpath, broker.bootstrap, tmp_path / "state-2", tmp_path / "app-2.log",
              guarantee)
    try:
        step("check", 600)
        assert app.proc.poll() is None, app.report()
    finally:
        app.kill()


def output_written(bootstrap):
    """True once the application has written anything (committed or not) to its output."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "sluice-streams-check"})
    try:
        return any(c.get_watermark_offsets(TopicPartition("wcr-output", n), timeout=30)[1] > 0
                   for n in range(2))
    finally:
        c.close()


@pytest.mark.long("about a minute: SIGKILL mid-run and a restore from the changelog (the README "
                  "command's 30-minute budget)")
@pytest.mark.sluice(settings=GROUP_SETTINGS)
def test_streams_exactly_once_counts_exact_after_a_sigkill_mid_run(broker, java_classpath,
                                                                   tmp_path):
    """exactly_once_v2, SIGKILLed as soon as it has written output (a transaction may be open,
    its offsets, changelog and output uncommitted), then restarted with an empty state
    directory: the killed instance's open transaction is aborted (its transaction timeout), the
    store restored from the committed changelog, and the counts stay exact — nothing counted
    twice, which at_least_once would not promise."""
    def step(*args):
        return check_java(run_java(java_classpath, RESTORE, [broker.bootstrap, *args],
                                   timeout=150), expect_line="PASS")

    step("produce", 0, 300)
    app = App(java_classpath, broker.bootstrap, tmp_path / "state-1", tmp_path / "app-1.log",
              "exactly_once_v2")
    try:
        wait_until(lambda: output_written(broker.bootstrap), 90, interval=0.2,
                   what=f"the application's first output ({app.report()})")
    finally:
        app.kill()

    step("produce", 300, 600)
    app = App(java_classpath, broker.bootstrap, tmp_path / "state-2", tmp_path / "app-2.log",
              "exactly_once_v2")
    try:
        step("check", 600)
        assert app.proc.poll() is None, app.report()
    finally:
        app.kill()
