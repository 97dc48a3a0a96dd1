"""Partition reassignment (KIP-455, issue #30 point 1) driven by Kafka's own tool,
kafka-reassign-partitions.sh (`org.apache.kafka.tools.reassign.ReassignPartitionsCommand`, run as
the script runs it), on a 3-node cluster that grows to 4, while an idempotent acks=all
confluent-kafka producer writes and a consumer reads:

1. a fourth broker joins the running cluster: a broker-only node (`process.roles=broker`,
   KIP-631; the three voters stay);
2. `--generate` proposes an assignment of the topic over brokers 2, 3 and 4;
3. half of the topic's partitions (spread over brokers 1–3) are moved onto broker 4 with
   `--execute`, `--verify` repeated until every move is completed;
4. broker 1 is decommissioned: the `--generate` proposal moves every partition off it, with
   a replication throttle (`--throttle`, KIP-73) that `--verify` clears at the end;
5. nothing acknowledged is lost, the live consumer and a final read from the beginning read
   every acknowledged record, Metadata lists exactly the new replicas all in sync, and (Sluice)
   broker 1 no longer holds a directory of the topic.

A second test stalls a reassignment (its new replica's broker is down), sees it with `--list`
and `--verify`, cancels it with `--cancel`, and checks Kafka's per-partition errors through
kafka-python's admin client (NO_REASSIGNMENT_IN_PROGRESS, INVALID_REPLICA_ASSIGNMENT,
UNKNOWN_TOPIC_OR_PARTITION).

Both run against Apache Kafka 4.4 too (SLUICE_COMPAT_TARGET=kafka: a 3-node KRaft cluster from
scripts/kafka_ref.py, its fourth broker formatted with --no-initial-controllers). Waits are bounded widely; nothing asserts a duration."""

import json
import threading

import pytest
from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition
from confluent_kafka.admin import NewTopic

from compat_util import admin, consume_all, consumer, producer, wait_until
from cluster_targets import finish, start_cluster
from jvm import run_java

REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
NODES = (1, 2, 3)
SETTINGS = {
    "broker.heartbeat.interval.ms": 500,
    "broker.session.timeout.ms": 2000,
    "log.segment.bytes": 64 << 20,
}
TOPIC = "moves"
PARTITIONS = 6
# Bounds of the waits (a loaded 2-core machine); nothing asserts a duration.
MOVE_S = 120
CLIENT_S = 60
TOOL_S = 120


@pytest.fixture
def target(request, tmp_path):
    t = start_cluster(request, tmp_path, len(NODES), SETTINGS)
    yield t
    finish(t)


# ---- the tool --------------------------------------------------------------------------------

def reassign_tool(cp, target, *args):
    """Runs the tool; fails the test (with its output and the nodes' logs) on a non-zero exit."""
    run = run_java(cp, REASSIGN, ["--bootstrap-server", target.bootstrap(), *args],
                   timeout=TOOL_S)
    if run.returncode != 0:
        pytest.fail(f"{run.report()}\n{target.describe()}", pytrace=False)
    return run.output


def plan_file(tmp_path, name, assignment):
    """A reassignment JSON file moving each (topic, partition) to its replica list."""
    path = tmp_path / name
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": replicas}
        for (t, p), replicas in sorted(assignment.items())]}))
    return path


def json_after(output, heading):
    """The JSON line that follows `heading` in the tool's output."""
    lines = output.splitlines()
    at = next(i for i, l in enumerate(lines) if l.startswith(heading))
    return json.loads(next(l for l in lines[at + 1:] if l.startswith("{")))


def verify_until_completed(cp, target, plan):
    """`--verify` until it reports every partition of `plan` completed; returns its output."""
    def completed():
        out = reassign_tool(cp, target, "--reassignment-json-file", plan, "--verify")
        return out if "is still in progress" not in out else None

    out = wait_until(completed, MOVE_S, interval=1.0, what=f"--verify of {plan.name} completed")
    assert "Status of partition reassignment:" in out, out
    return out


def assignment(bootstrap, topic):
    """{partition: (replicas sorted, ISR sorted, leader)} as Metadata lists them."""
    md = admin(bootstrap).list_topics(topic=topic, timeout=10)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return {}
    return {p: (sorted(x.replicas), sorted(x.isrs), x.leader) for p, x in t.partitions.items()}


def wait_assignment(bootstrap, topic, want):
    """Waits until every partition of `want` lists exactly those replicas, all in the ISR,
    with a leader among them."""
    def matches():
        got = assignment(bootstrap, topic)
        return all(p in got and got[p][0] == sorted(r) and got[p][1] == sorted(r)
                   and got[p][2] in r for p, r in want.items())

    wait_until(matches, MOVE_S, interval=0.5, what=f"Metadata listing {want}")


# ---- the load --------------------------------------------------------------------------------

class Load:
    """An idempotent acks=all producer writing numbered records to every partition, and a
    consumer reading every partition from the beginning, each in a thread of its own."""

    def __init__(self, bootstrap, topic, partitions):
        self.topic, self.partitions = topic, partitions
        self.acked, self.failed, self.read = set(), [], set()
        self.stop_producing, self.stop_reading = threading.Event(), threading.Event()
        self.errors = []
        self.prod = producer(bootstrap, **{"enable.idempotence": True, "linger.ms": 2,
                                           "message.timeout.ms": 120000})
        self.cons = consumer(bootstrap, **{"auto.offset.reset": "earliest",
                                           "enable.partition.eof": False})
        self.threads = [threading.Thread(target=self._produce, daemon=True),
                        threading.Thread(target=self._read, daemon=True)]

    def start(self):
        for t in self.threads:
            t.start()

    def _delivered(self, err, msg):
        if err is None:
            self.acked.add(msg.value())
        else:
            self.failed.append(str(err))

    def _produce(self):
        i = 0
        try:
            while not self.stop_producing.is_set():
                for _ in range(20):
                    self.prod.produce(self.topic, value=b"r-%d" % i,
                                      partition=i % self.partitions, on_delivery=self._delivered)
                    i += 1
                self.prod.poll(0.02)
            assert self.prod.flush(CLIENT_S * 2) == 0, "records left unacknowledged"
        except Exception as e:  # reported by stop()
            self.errors.append(repr(e))

    def _read(self):
        try:
            self.cons.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING)
                              for p in range(self.partitions)])
            while not self.stop_reading.is_set():
                msg = self.cons.poll(0.2)
                if msg is None:
                    continue
                if msg.error():
                    if msg.error().code() != KafkaError._PARTITION_EOF:
                        self.errors.append(str(msg.error()))
                    continue
                self.read.add(msg.value())
        except Exception as e:
            self.errors.append(repr(e))
        finally:
            self.cons.close()

    def wait_acked(self, count):
        wait_until(lambda: len(self.acked) >= count, CLIENT_S, what=f"{count} records acked")

    def stop(self):
        """Stops producing, waits until the consumer has read every acknowledged record."""
        self.stop_producing.set()
        self.threads[0].join(CLIENT_S * 3)
        wait_until(lambda: self.acked <= self.read, CLIENT_S,
                   what="the live consumer reading every acknowledged record")
        self.stop_reading.set()
        self.threads[1].join(CLIENT_S)
        assert not self.errors, self.errors


# ---- the tests -------------------------------------------------------------------------------

def create_on(bootstrap, topic, replica_lists):
    a = admin(bootstrap)
    futures = a.create_topics([NewTopic(topic, num_partitions=len(replica_lists),
                                       replica_assignment=replica_lists)],
                              operation_timeout=30, request_timeout=30)
    futures[topic].result(timeout=60)
    want = {p: r for p, r in enumerate(replica_lists)}
    wait_assignment(bootstrap, topic, want)


@pytest.mark.long("about 45 s: a fourth broker, moves and a decommission under load; the "
                  "README command keeps the listing and cancellation test below")
def test_reassign_tool_moves_partitions_under_load_then_decommissions_a_broker(
        target, java_classpath, tmp_path):
    cp = java_classpath
    bootstrap = target.bootstrap()
    spread = [[1, 2], [2, 3], [3, 1]]
    create_on(bootstrap, TOPIC, [spread[p % 3] for p in range(PARTITIONS)])
    load = Load(bootstrap, TOPIC, PARTITIONS)
    load.start()
    load.wait_acked(500)

    # 1. A fourth broker joins: broker-only, the voters stay.
    assert target.add_broker() == 4
    assert sorted(admin(bootstrap).list_topics(timeout=10).brokers) == [1, 2, 3, 4]

    # 2. --generate: a proposal over brokers 2, 3 and 4 only.
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": TOPIC}]}))
    out = reassign_tool(cp, target, "--topics-to-move-json-file", topics, "--broker-list",
                        "2,3,4", "--generate")
    current = json_after(out, "Current partition replica assignment")
    proposed = json_after(out, "Proposed partition reassignment configuration")
    assert sorted(p["partition"] for p in current["partitions"]) == list(range(PARTITIONS)), out
    assert all(len(set(p["replicas"])) == 2 and set(p["replicas"]) <= {2, 3, 4}
               for p in proposed["partitions"]), out

    # 3. Half the partitions move onto broker 4 (the new broker): each one's first replica.
    half = {(TOPIC, p): [4, spread[p % 3][1]] for p in range(PARTITIONS // 2)}
    plan = plan_file(tmp_path, "half.json", half)
    out = reassign_tool(cp, target, "--reassignment-json-file", plan, "--execute")
    assert "Successfully started partition reassignment" in out, out
    out = verify_until_completed(cp, target, plan)
    for p in range(PARTITIONS // 2):
        assert f"Reassignment of partition {TOPIC}-{p} is completed" in out, out
    wait_assignment(bootstrap, TOPIC, {p: r for (_, p), r in half.items()})
    load.wait_acked(len(load.acked) + 500)

    # 4. Decommission broker 1: the --generate proposal moves everything off it.
    rest = plan_file(tmp_path, "off-1.json", {(p["topic"], p["partition"]): p["replicas"]
                                              for p in proposed["partitions"]})
    # With a replication throttle (KIP-73) far above the load: set on the topic and the
    # brokers, honoured by the followers, cleared by the --verify that sees all completed.
    out = reassign_tool(cp, target, "--reassignment-json-file", rest, "--execute",
                        "--throttle", "50000000")
    assert "Successfully started partition reassignment" in out, out
    assert "The inter-broker throttle limit was set to 50000000 B/s" in out, out
    out = verify_until_completed(cp, target, rest)
    assert "Clearing broker-level throttles on broker" in out, out
    assert f"Clearing topic-level throttles on topic {TOPIC}" in out, out
    wait_assignment(bootstrap, TOPIC, {p["partition"]: p["replicas"]
                                       for p in proposed["partitions"]})
    load.wait_acked(len(load.acked) + 500)
    load.stop()

    # 5. Nothing acknowledged lost; everything read; broker 1 holds nothing of the topic.
    assert not load.failed, load.failed[:5]
    got = consume_all(bootstrap, TOPIC, PARTITIONS, expected=len(load.acked), timeout=CLIENT_S)
    values = {m.value() for msgs in got.values() for m in msgs}
    assert load.acked <= values, f"{len(load.acked - values)} acknowledged records lost"
    assert all(1 not in r for r, _, _ in assignment(bootstrap, TOPIC).values())
    if target.partition_dirs(1, TOPIC) is not None:
        wait_until(lambda: target.partition_dirs(1, TOPIC) == [], MOVE_S,
                   what="broker 1 deleting its replicas of the topic")
    out = reassign_tool(cp, target, "--list")
    assert "No partition reassignments found." in out, out


def test_a_stalled_reassignment_is_listed_and_cancelled_and_errors_are_kafkas(
        target, java_classpath, tmp_path):
    from kafka import TopicPartition as KTopicPartition
    from kafka import errors as kerrors
    from kafka.admin import KafkaAdminClient

    cp = java_classpath
    bootstrap = target.bootstrap()
    create_on(bootstrap, "stalled", [[1, 2]])
    create_on(bootstrap, "errors", [[1, 2]] * 4)
    prod = producer(bootstrap, **{"enable.idempotence": True})
    for i in range(100):
        prod.produce("stalled", value=b"s-%d" % i, partition=0)
    assert prod.flush(CLIENT_S) == 0

    # Broker 3 is down (still registered): a move onto it cannot catch up. The tool refuses
    # a plan naming a broker DescribeCluster does not list (a fenced one), so the move is
    # started through the admin API, which the controller accepts (the broker is registered).
    target.kill(3)
    survivors = target.bootstrap(exclude={3})
    def settled():
        md = admin(survivors).list_topics(timeout=10)
        return md.controller_id in (1, 2) and 3 not in md.brokers

    wait_until(settled, MOVE_S, what="broker 3 fenced and a controller among the survivors")
    plan = plan_file(tmp_path, "stalled.json", {("stalled", 0): [3, 2]})
    client = KafkaAdminClient(bootstrap_servers=survivors.split(","))
    try:
        started = client.alter_partition_reassignments({KTopicPartition("stalled", 0): [3, 2]})
        assert started == {KTopicPartition("stalled", 0): None}, started
    finally:
        client.close()
    listed = run_java(cp, REASSIGN, ["--bootstrap-server", survivors, "--list"], timeout=TOOL_S)
    assert listed.returncode == 0 and "stalled-0" in listed.output, listed.report()
    verify = run_java(cp, REASSIGN, ["--bootstrap-server", survivors, "--reassignment-json-file",
                                     plan, "--verify"], timeout=TOOL_S)
    assert "Reassignment of partition stalled-0 is still in progress" in verify.output, \
        verify.report()

    client = KafkaAdminClient(bootstrap_servers=survivors.split(","))
    try:
        ongoing = client.list_partition_reassignments()
        moving = ongoing[KTopicPartition("stalled", 0)]
        assert (moving["replicas"], moving["adding_replicas"], moving["removing_replicas"]) == \
            ([3, 2, 1], [3], [1]), ongoing
        # Per partition: a partition or topic that does not exist, a cancellation with nothing
        # in progress, a broker twice, an unregistered broker (an empty list kafka-python
        # refuses itself; the unit tests cover it).
        results = client.alter_partition_reassignments({
            KTopicPartition("stalled", 1): [1, 2],
            KTopicPartition("no-such-topic", 0): [1, 2],
            KTopicPartition("errors", 0): None,
            KTopicPartition("errors", 1): [1, 1],
            KTopicPartition("errors", 2): [1, 9],
        })
        unknown = kerrors.UnknownTopicOrPartitionError
        assert results[KTopicPartition("stalled", 1)] is unknown, results
        assert results[KTopicPartition("no-such-topic", 0)] is unknown, results
        assert results[KTopicPartition("errors", 0)] is kerrors.NoReassignmentInProgressError
        for p in (1, 2):
            assert results[KTopicPartition("errors", p)] is \
                kerrors.InvalidReplicationAssignmentError, results
        assert all(r == [1, 2] for r, _, _ in assignment(survivors, "errors").values()), \
            "refused reassignments change nothing"
    finally:
        client.close()

    # --preserve-throttles: clearing them would send broker 3's config change to broker 3,
    # which is down (Kafka's tool fails there the same way).
    out = run_java(cp, REASSIGN, ["--bootstrap-server", survivors, "--reassignment-json-file",
                                  plan, "--cancel", "--preserve-throttles"], timeout=TOOL_S)
    assert out.returncode == 0 and "stalled-0" in out.output, out.report()
    wait_assignment(survivors, "stalled", {0: [1, 2]})
    listed = run_java(cp, REASSIGN, ["--bootstrap-server", survivors, "--list"], timeout=TOOL_S)
    assert "No partition reassignments found." in listed.output, listed.report()
    got = consume_all(survivors, "stalled", 1, expected=100, timeout=CLIENT_S)
    assert sorted(m.value() for m in got[0]) == sorted(b"s-%d" % i for i in range(100))
    target.restart(3)

