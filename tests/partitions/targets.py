"""The clusters under test, each node in its own namespace of a `netns.Net`: Sluice
(scripts/sluice_cluster.py) or Apache Kafka 4.4 (scripts/kafka_ref.py), with the same timing
settings, started through `ip netns exec` on the node's address (10.251.0.N, fixed ports).

Each target answers what the nemesis needs: its bootstrap list, the leader of a partition and
the active controller (Sluice names it in Metadata; Kafka's Metadata names a random broker,
so it is asked with Kafka's MetadataQuorumCommand).
"""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO / "tests" / "compat"))

import kafka_ref  # noqa: E402
from sluice_cluster import SluiceCluster, SluiceNode  # noqa: E402

KAFKA_PORT = 9092
ADMIN_PORT = 9644
VOTER_PORT = 9093
# The same failure-detection timing for both (Kafka's names): a lost broker is fenced after
# 2 s, a follower leaves the ISR after 5 s without catching up.
SETTINGS = {
    "broker.heartbeat.interval.ms": 500,
    "broker.session.timeout.ms": 2000,
    "replica.lag.time.max.ms": 5000,
    "min.insync.replicas": 2,
    "default.replication.factor": 3,
    "offsets.topic.replication.factor": 3,
}
SLUICE_ONLY = {"log.segment.bytes": 64 << 20}
KAFKA_ONLY = {"log.segment.bytes": 64 << 20, "group.initial.rebalance.delay.ms": 0,
              "offsets.topic.num.partitions": 3}
# Five JVMs on a 2-core, 24 GiB machine: a smaller heap than Kafka's 1 GiB default.
KAFKA_HEAP = "-Xmx512m -Xms512m"


def _die_with_parent():
    """preexec_fn: the node gets SIGKILL when the harness dies (PR_SET_PDEATHSIG)."""
    import ctypes
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, 9)


class _NsSluiceNode(SluiceNode):
    def __init__(self, node_id, directory, host):
        super().__init__(node_id, directory)
        self.host = host
        self.port, self.admin_port, self.voter_port = KAFKA_PORT, ADMIN_PORT, VOTER_PORT

    @property
    def bootstrap(self):
        return f"{self.host}:{self.port}"


class _NsSluiceCluster(SluiceCluster):
    def __init__(self, binary, directory, net):
        super().__init__(binary, directory, nodes=len(net.ids),
                         settings={**SETTINGS, **SLUICE_ONLY}, preexec_fn=_die_with_parent)
        self.net = net
        self.nodes = {i: _NsSluiceNode(i, self.dir / f"node-{i}", net.ip(i)) for i in net.ids}

    @property
    def voters(self):
        return ",".join(f"{n.node_id}@{n.host}:{n.voter_port}" for n in self.nodes.values())

    def command(self, node):
        cmd = super().command(node)
        cmd[cmd.index("--admin-listen") + 1] = f"{node.host}:{node.admin_port}"
        return self.net.exec_prefix(node.node_id) + cmd


class SluiceTarget:
    name = "sluice"

    def __init__(self, binary, directory, net):
        self.net = net
        self.cluster = _NsSluiceCluster(binary, directory, net)

    @property
    def bootstrap(self):
        return self.cluster.bootstrap()

    def start(self):
        self.cluster.start(timeout=90)

    def stop(self):
        self.cluster.stop()

    def controller(self, admin):
        return admin.list_topics(timeout=10).controller_id

    def logs(self):
        return {n.node_id: n.log_path for n in self.cluster.nodes.values()}


class _NsKafkaNode(kafka_ref.KafkaNode):
    def __init__(self, node_id, directory, host, net):
        super().__init__(node_id, directory, KAFKA_PORT, VOTER_PORT)
        self.host = host
        self.net = net

    def _java(self, cp, main, args):
        return self.net.exec_prefix(self.node_id) + super()._java(cp, main, args)


class KafkaTarget:
    name = "kafka"

    def __init__(self, directory, net):
        self.net = net
        os.environ.setdefault("KAFKA_HEAP_OPTS", KAFKA_HEAP)
        self.cluster = kafka_ref.KafkaCluster(directory, nodes=len(net.ids),
                                              settings={**SETTINGS, **KAFKA_ONLY})
        self.cluster.nodes = [_NsKafkaNode(i, Path(directory) / f"node-{i}", net.ip(i), net)
                              for i in net.ids]

    @property
    def bootstrap(self):
        return self.cluster.bootstrap

    def start(self):
        self.cluster.start(preexec_fn=_die_with_parent, timeout=180)

    def stop(self):
        self.cluster.stop(grace=20)

    def controller(self, admin):
        """The KRaft quorum leader, from MetadataQuorumCommand (`LeaderId: N`)."""
        cmd = [kafka_ref.java_bin(), "-Xmx128m", "-XX:TieredStopAtLevel=1", "-cp",
               kafka_ref.classpath(quiet=True), "org.apache.kafka.tools.MetadataQuorumCommand",
               "--bootstrap-server", self.bootstrap, "describe", "--status"]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout
        for line in out.splitlines():
            if line.strip().startswith("LeaderId:"):
                return int(line.split(":", 1)[1])
        raise RuntimeError(f"no LeaderId in MetadataQuorumCommand output:\n{out}")

    def logs(self):
        return {n.node_id: n.log_path for n in self.cluster.nodes}
