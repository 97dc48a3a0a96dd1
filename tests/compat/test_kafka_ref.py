"""The Kafka reference script (scripts/kafka-ref): Apache Kafka 4.4.0 from Maven, formatted
with KRaft's StorageTool and started as one combined node (`start` / `stop`) or as a 3-node
cluster (`run`, stopped by SIGTERM), on 127.0.0.1 ports of its own. Checked with a real client:
the bootstrap it prints serves, a 3-replica topic gets 3 in-sync replicas, a `--node-set` key
lands in its node's server.properties only, and stopping leaves no Kafka process behind.
Needs Java 17+ and Maven (scripts/test-all installs them)."""

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from confluent_kafka.admin import NewTopic

from compat_util import admin, consume_all, producer, wait_for_topic, wait_until
from conftest import REPO

SCRIPT = REPO / "scripts" / "kafka-ref"
START_TIMEOUT_S = 180


def alive(pid):
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    # A zombie is gone for our purpose.
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def round_trip(bootstrap, topic, partitions=1, replicas=1):
    """Creates `topic` with `replicas` replicas, produces 10 records and reads them back."""
    a = admin(bootstrap)
    a.create_topics([NewTopic(topic, partitions, replicas)])[topic].result(60)
    wait_for_topic(bootstrap, topic, partitions, timeout=60)
    p = producer(bootstrap)
    for i in range(10):
        p.produce(topic, value=b"v%d" % i, partition=0)
    assert p.flush(30) == 0
    got = consume_all(bootstrap, topic, partitions, expected=10)
    assert [m.value() for m in got[0]] == [b"v%d" % i for i in range(10)]
    return a


@pytest.mark.timeout(300)
def test_start_prints_a_serving_bootstrap_and_stop_ends_it(tmp_path):
    run_dir = tmp_path / "kafka"
    proc = subprocess.run([str(SCRIPT), "start", "--dir", str(run_dir),
                           "--set", "num.partitions=2"],
                          capture_output=True, text=True, timeout=START_TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr[-4000:]
    bootstrap = proc.stdout.strip().splitlines()[-1]
    host, port = bootstrap.split(":")
    assert host == "127.0.0.1" and int(port) > 0, proc.stdout
    state = json.loads((run_dir / "state.json").read_text())
    (node,) = state["nodes"]
    try:
        assert alive(node["pid"])
        assert "-Xmx1G" in proc.stderr, "the JVM settings are stated"
        props = (run_dir / "node-1" / "server.properties").read_text()
        assert "num.partitions=2" in props and "127.0.0.1" in props
        assert (run_dir / "node-1" / "data" / "meta.properties").is_file(), "formatted"
        round_trip(bootstrap, "ref-single")
    finally:
        stop = subprocess.run([str(SCRIPT), "stop", "--dir", str(run_dir)],
                              capture_output=True, text=True, timeout=120)
    assert stop.returncode == 0, stop.stderr
    wait_until(lambda: not alive(node["pid"]), 30, what="Kafka to exit")


@pytest.mark.long("three Kafka JVMs started and stopped (the reference script, not Sluice)")
@pytest.mark.timeout(400)
def test_run_three_nodes_until_sigterm(tmp_path):
    run_dir = tmp_path / "kafka3"
    err_path = tmp_path / "kafka-ref.stderr"

    def diagnosis():
        # kafka-ref's own words (a node that exited by itself comes with its log's tail), and
        # each node's log tail.
        logs = "\n".join(f"--- {p}:\n" + "\n".join(p.read_text(errors="replace").splitlines()[-30:])
                         for p in sorted(run_dir.glob("node-*/server.log")))
        return f"kafka-ref stderr:\n{err_path.read_text(errors='replace')[-6000:]}\n{logs}"

    with open(err_path, "w") as err:
        proc = subprocess.Popen([str(SCRIPT), "run", "--nodes", "3", "--dir", str(run_dir),
                                 "--set", "broker.rack=rack-a",
                                 "--node-set", "2:broker.rack=rack-b"],
                                stdout=subprocess.PIPE, stderr=err, text=True)
    try:
        line = proc.stdout.readline().strip()
        assert line, f"no bootstrap printed; {diagnosis()}"
        assert len(line.split(",")) == 3, line
        state = json.loads((run_dir / "state.json").read_text())
        assert [n["node_id"] for n in state["nodes"]] == [1, 2, 3]
        racks = {i: [line for line in (run_dir / f"node-{i}" / "server.properties").read_text()
                     .splitlines() if line.startswith("broker.rack=")] for i in (1, 2, 3)}
        assert racks == {1: ["broker.rack=rack-a"], 2: ["broker.rack=rack-b"],
                         3: ["broker.rack=rack-a"]}, racks
        try:
            a = round_trip(line, "ref-three", replicas=3)
        except Exception as e:
            raise AssertionError(f"round trip failed: {e!r}; alive: "
                                 f"{[alive(n['pid']) for n in state['nodes']]}; "
                                 f"{diagnosis()}") from e
        md = a.list_topics(timeout=30)
        assert sorted(md.brokers) == [1, 2, 3]
        wait_until(lambda: all(len(p.isrs) == 3 for p in
                               a.list_topics(timeout=30).topics["ref-three"].partitions.values()),
                   60, what="3 in-sync replicas")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            status = proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert status == 0, diagnosis()
    for n in state["nodes"]:
        wait_until(lambda pid=n["pid"]: not alive(pid), 30, what=f"node {n['node_id']} to exit")
