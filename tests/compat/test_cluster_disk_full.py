"""A full disk in a 3-node cluster (issue #25 point 4): the leader's data directory (a small
tmpfs) fills under acks=all load. Its produce answers are Kafka's errors (KAFKA_STORAGE_ERROR,
or NOT_ENOUGH_REPLICAS / NOT_LEADER_OR_FOLLOWER once the ISR or the leadership changed), the
broker stays up, its leadership moves to an in-sync replica with space (the failed directory's
replicas go offline and the controller is told, as Kafka's log-directory failure handling,
KIP-112), nothing acknowledged is lost, and writes go on at the new leader. Once space is back,
a restart brings the replica back into the ISR.

Needs root (mounts a tmpfs); set SLUICE_SKIP_PRIVILEGED=1 to skip elsewhere."""

import os
import subprocess

import pytest
from confluent_kafka.admin import NewTopic

import kafka_wire as kw
from compat_util import admin, consume_all, producer, wait_until
from conftest import _die_with_parent
from sluice_cluster import SluiceCluster

pytestmark = pytest.mark.sluice_only("a Sluice node's data directory on a small tmpfs")

TOPIC = "cluster-filling"
KAFKA_STORAGE_ERROR = 56
NOT_ENOUGH_REPLICAS = 19
NOT_LEADER_OR_FOLLOWER = 6
BOUND_S = 60
SETTINGS = {"broker.heartbeat.interval.ms": 500, "broker.session.timeout.ms": 2000,
            "log.segment.bytes": 4 << 20}


def mount(path, size):
    path.mkdir(parents=True, exist_ok=True)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)]).returncode:
        if os.environ.get("SLUICE_SKIP_PRIVILEGED"):
            pytest.skip("mounting a tmpfs needs root")
        pytest.fail("mounting a tmpfs needs root; set SLUICE_SKIP_PRIVILEGED=1 to skip")


@pytest.fixture
def cluster(sluice_bin, tmp_path):
    c = SluiceCluster(sluice_bin, tmp_path / "cluster", nodes=3, settings=SETTINGS,
                      preexec_fn=_die_with_parent)
    small = c.nodes[1].dir / "data"
    mount(small, "40m")
    try:
        c.start()
        yield c
    finally:
        c.stop()
        subprocess.run(["umount", "-l", str(small)])


def partition_state(bootstrap):
    """(leader, isr) of partition 0, or None while unknown."""
    md = admin(bootstrap).list_topics(TOPIC, timeout=10)
    t = md.topics.get(TOPIC)
    if t is None or t.error or 0 not in t.partitions:
        return None
    p = t.partitions[0]
    return p.leader, sorted(p.isrs)


def test_a_leaders_full_disk_moves_its_leadership_and_loses_nothing(cluster):
    client = admin(cluster.bootstrap())
    client.create_topics([NewTopic(TOPIC, num_partitions=1,
                                   replica_assignment=[[1, 2, 3]])])[TOPIC].result(30)
    wait_until(lambda: partition_state(cluster.bootstrap()) == (1, [1, 2, 3]), BOUND_S,
               what="node 1 leading with a full ISR")
    # Fill node 1's directory through its leadership, acks=all, one record a request.
    sock = kw.connect(cluster.nodes[1].bootstrap)
    value = b"f" * 60_000
    acked = {}  # offset -> value
    errors = []
    for i in range(2_000):
        v = value[:-8] + b"%08d" % i
        sock.sendall(kw.produce_v3(i, TOPIC, [(0, kw.record_batch([v]))], acks=-1))
        _, results = kw.parse_produce_v3(kw.read_frame(sock))
        error, base = results[(TOPIC, 0)]
        if error:
            errors.append(error)
            if error == NOT_LEADER_OR_FOLLOWER:
                break
            continue
        acked[base] = v
    else:
        pytest.fail(f"a 40 MiB directory must fill; errors {errors[:5]}")
    assert len(acked) > 50
    assert errors[0] == KAFKA_STORAGE_ERROR, errors[:5]
    assert set(errors) <= {KAFKA_STORAGE_ERROR, NOT_ENOUGH_REPLICAS, NOT_LEADER_OR_FOLLOWER}
    # The leadership moved to an in-sync replica with space, and node 1 left the ISR.
    state = wait_until(
        lambda: (s := partition_state(cluster.bootstrap())) and s[0] in (2, 3) and 1 not in s[1]
        and s, BOUND_S, what="the leadership moved off the full node")
    assert cluster.nodes[1].alive(), "the node with the full disk stays up"
    # Writes go on at the new leader, through a client that follows the leadership.
    p = producer(cluster.bootstrap(), acks="all")
    after = []
    for i in range(100):
        p.produce(TOPIC, value=b"after-%d" % i, partition=0,
                  on_delivery=lambda err, msg: after.append((err, msg.offset(), msg.value())))
    assert p.flush(60) == 0
    assert all(err is None for err, _, _ in after), after[:3]
    acked.update({off: v for _, off, v in after})
    got = consume_all(cluster.nodes[state[0]].bootstrap, TOPIC, 1, expected=len(acked))
    read = {m.offset(): m.value() for m in got[0]}
    lost = [off for off, v in acked.items() if read.get(off) != v]
    assert not lost, f"{len(lost)} acknowledged records lost, e.g. offsets {lost[:5]}"
    # Space comes back; a restart brings the replica back into the ISR.
    small = cluster.nodes[1].dir / "data"
    assert subprocess.run(["mount", "-o", "remount,size=512m", str(small)]).returncode == 0
    assert cluster.stop_node(1) is not None
    cluster.start_node(1)
    wait_until(lambda: (s := partition_state(cluster.bootstrap())) and s[1] == [1, 2, 3],
               BOUND_S, what="node 1 back in the ISR")
