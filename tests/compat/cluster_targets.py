"""A multi-node cluster of the target under test, the same calls for both targets: Sluice nodes
(sluice_cluster.py) or combined KRaft nodes of Apache Kafka 4.4 (scripts/kafka_ref.py).

`start_cluster(request, tmp_path, nodes, settings)` starts one and returns it; a test's fixture
yields it and calls `finish(cluster)` afterwards, which stops the nodes and fails the test if a
node exited by itself (a crash rather than a kill)."""

import os

from conftest import TARGET, _die_with_parent


class SluiceClusterTarget:
    """`nodes` Sluice nodes, every one a broker and a controller voter."""

    def __init__(self, binary, directory, nodes, settings):
        from sluice_cluster import SluiceCluster
        self.cluster = SluiceCluster(binary, directory, nodes=nodes, settings=settings,
                                     preexec_fn=_die_with_parent)

    def start(self):
        self.cluster.start()

    def bootstrap(self, exclude=()):
        return self.cluster.bootstrap(exclude=exclude)

    def node_bootstrap(self, node_id):
        return self.cluster.nodes[node_id].bootstrap

    def kill(self, node_id):
        self.cluster.kill(node_id)

    def restart(self, node_id):
        self.cluster.start_node(node_id)

    def partition_dirs(self, node_id, topic):
        """The directories of `topic`'s partitions (deleted ones included) on `node_id`."""
        data = self.cluster.nodes[node_id].dir / "data"
        return sorted(p.name for p in data.iterdir() if p.name.startswith(f"{topic}-"))

    def stop(self):
        self.cluster.stop()

    def exited_badly(self):
        return [n.node_id for n in self.cluster.nodes.values()
                if n.proc is not None and n.proc.poll() not in (None, 0, -9)]

    def describe(self):
        return self.cluster.describe()


class KafkaClusterTarget:
    """`nodes` combined KRaft nodes of Apache Kafka 4.4 (scripts/kafka_ref.py)."""

    def __init__(self, directory, nodes, settings):
        import kafka_ref
        self.ref = kafka_ref
        os.environ.setdefault("KAFKA_HEAP_OPTS", "-Xmx512m -Xms512m")
        self.cluster = kafka_ref.KafkaCluster(directory, nodes, settings, shipped=False)
        self.nodes = {n.node_id: n for n in self.cluster.nodes}

    def start(self):
        self.cluster.start(preexec_fn=_die_with_parent)

    def bootstrap(self, exclude=()):
        return ",".join(f"{n.host}:{n.port}" for i, n in self.nodes.items() if i not in exclude)

    def node_bootstrap(self, node_id):
        n = self.nodes[node_id]
        return f"{n.host}:{n.port}"

    def kill(self, node_id):
        self.cluster._kill_node(self.nodes[node_id])

    def restart(self, node_id):
        self.nodes[node_id].start(self.ref.classpath(quiet=True), _die_with_parent)
        self.cluster.wait_ready()

    def partition_dirs(self, node_id, topic):
        return None  # Kafka's log directories are its own business: not checked.

    def stop(self):
        self.cluster.kill()

    def exited_badly(self):
        return []

    def describe(self):
        return "\n".join(f"--- node {i}: {n.log_path}\n{n.log_tail()}"
                         for i, n in self.nodes.items())


def start_cluster(request, tmp_path, nodes, settings):
    """A started cluster of `nodes` nodes of the target under test with broker `settings`."""
    if TARGET == "kafka":
        request.getfixturevalue("kafka_classpath")
        t = KafkaClusterTarget(tmp_path / "kafka", nodes, settings)
    else:
        t = SluiceClusterTarget(request.getfixturevalue("sluice_bin"), tmp_path / "cluster",
                                nodes, settings)
    try:
        t.start()
    except Exception:
        t.stop()
        raise
    return t


def finish(t):
    """Stops `t`'s nodes; fails when one of them exited by itself."""
    bad = t.exited_badly()
    t.stop()
    assert not bad, f"nodes {bad} exited by themselves\n{t.describe()}"
