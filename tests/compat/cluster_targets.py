"""A multi-node cluster of the target under test, the same calls for both targets: Sluice nodes
(sluice_cluster.py) or combined KRaft nodes of Apache Kafka 4.4 (scripts/kafka_ref.py).

`start_cluster(request, tmp_path, nodes, settings)` starts one and returns it; a test's fixture
yields it and calls `finish(cluster)` afterwards, which stops the nodes and fails the test if a
node exited by itself (a crash rather than a kill). `make_cluster` returns one not started yet,
for settings that name a node's ports (`listeners`) or differ per node (`node_settings`, e.g.
each node's own key store). `controllers=K` starts nodes 1..K as controllers only and the
rest as brokers only (`process.roles`); `controller_ids` and `broker_ids` say which is
which (every node is both without it)."""

import os
import signal

from conftest import TARGET, _die_with_parent


class NotServing(Exception):
    """A node did not come to serve in the time given, or exited while starting."""


class SluiceClusterTarget:
    """`nodes` Sluice nodes, every one a broker and a controller voter (or `controllers` of
    them controllers only, the others brokers only)."""

    def __init__(self, binary, directory, nodes, settings, controllers=None):
        from sluice_cluster import SluiceCluster
        self.cluster = SluiceCluster(binary, directory, nodes=nodes, settings=settings,
                                     preexec_fn=_die_with_parent, controllers=controllers)
        # {node id: {key: value}} applied after `settings` at each start of that node.
        self.node_settings = self.cluster.node_settings

    @property
    def node_ids(self):
        return sorted(self.cluster.nodes)

    @property
    def controller_ids(self):
        return self.cluster.controller_ids

    @property
    def broker_ids(self):
        return self.cluster.broker_ids

    def add_broker(self, timeout=60):
        """Starts a broker-only node (`process.roles=broker`, the next id) in the running
        cluster and returns its id once it serves."""
        return self.cluster.add_broker(timeout=timeout)

    def add_controller(self, timeout=60):
        """Starts a controller-only node (the next id) that joins the running quorum through
        `controller.quorum.bootstrap.servers` and waits to be added (AddRaftVoter); returns its
        id once it runs."""
        return self.cluster.add_controller(timeout=timeout)

    def command_config(self, node_id):
        """The properties file Kafka's tools read for controller `node_id` (`--command-config`
        of `kafka-metadata-quorum.sh add-controller`)."""
        return self.cluster.command_config(node_id)

    def listeners(self, node_id, name, extra=()):
        """A `listeners` value for node `node_id`: listener `name` on the node's client port,
        then each (name, port) of `extra`. Sluice's voters listen apart (their own port, the
        protocol of `controller.listener.names` in `listener.security.protocol.map`)."""
        n = self.cluster.nodes[node_id]
        return ",".join([f"{name}://{n.bootstrap}"]
                        + [f"{x}://127.0.0.1:{port}" for x, port in extra])

    def start(self):
        self.cluster.start()

    def bootstrap(self, exclude=()):
        return self.cluster.bootstrap(exclude=exclude)

    def node_bootstrap(self, node_id):
        return self.cluster.nodes[node_id].bootstrap

    def controller_address(self, node_id):
        """The `host:port` of a voter's controller listener (its `controller.quorum.voters`
        address)."""
        return f"127.0.0.1:{self.cluster.nodes[node_id].voter_port}"

    def kill(self, node_id):
        self.cluster.kill(node_id)

    def pause(self, node_id):
        """SIGSTOP node `node_id`: it keeps its sockets and answers nothing."""
        self.cluster.pause(node_id)

    def resume(self, node_id):
        self.cluster.resume(node_id)

    def restart(self, node_id, timeout=60):
        """Starts node `node_id` again and waits until it serves; NotServing when it does not
        within `timeout` s."""
        from sluice_cluster import ClusterError
        try:
            self.cluster.start_node(node_id, timeout=timeout)
        except ClusterError as e:
            raise NotServing(str(e)) from e

    def partition_dirs(self, node_id, topic):
        """The directories of `topic`'s partitions (deleted ones included) on `node_id`."""
        data = self.cluster.nodes[node_id].dir / "data"
        return sorted(p.name for p in data.iterdir() if p.name.startswith(f"{topic}-"))

    def stop(self):
        self.cluster.stop()

    def exited_badly(self):
        return [n.node_id for n in self.cluster.nodes.values()
                if n.proc is not None and n.proc.poll() not in (None, 0, -9)]

    def log_text(self, node_id):
        """Everything node `node_id` logged (every start)."""
        return self.cluster.nodes[node_id].log_path.read_text(errors="replace")

    def describe(self):
        return self.cluster.describe()


class KafkaClusterTarget:
    """`nodes` combined KRaft nodes of Apache Kafka 4.4 (scripts/kafka_ref.py)."""

    def __init__(self, directory, nodes, settings, probe_tls=None, controllers=None):
        import kafka_ref
        self.ref = kafka_ref
        os.environ.setdefault("KAFKA_HEAP_OPTS", "-Xmx512m -Xms512m")
        self.cluster = kafka_ref.KafkaCluster(directory, nodes, settings, shipped=False,
                                              probe_tls=probe_tls, controllers=controllers)
        self.nodes = {n.node_id: n for n in self.cluster.nodes}
        self.node_settings = self.cluster.node_settings

    @property
    def node_ids(self):
        return sorted(self.nodes)

    @property
    def controller_ids(self):
        return list(self.cluster.controller_ids)

    @property
    def broker_ids(self):
        return list(self.cluster.broker_ids)

    def add_broker(self, timeout=90):
        """Starts a broker-only node (`process.roles=broker`, the next id, formatted with
        --no-initial-controllers) in the running cluster and returns its id once every broker
        lists it."""
        node_id = self.cluster.add_broker(_die_with_parent, timeout)
        self.nodes = {n.node_id: n for n in self.cluster.nodes}
        return node_id

    def add_controller(self, timeout=90):
        """Starts a controller-only node (the next id, formatted with --no-initial-controllers)
        that joins the running quorum as an observer until AddRaftVoter adds it; returns its
        id."""
        node_id = self.cluster.add_controller(_die_with_parent)
        self.nodes = {n.node_id: n for n in self.cluster.nodes}
        return node_id

    def command_config(self, node_id):
        """The node's server.properties (what Kafka's docs pass to `add-controller`)."""
        return self.nodes[node_id].properties_path

    def listeners(self, node_id, name, extra=()):
        """A `listeners` value for node `node_id`: listener `name` on the node's client port,
        the CONTROLLER listener on its voter port, then each (name, port) of `extra`."""
        n = self.nodes[node_id]
        return ",".join([f"{name}://{n.host}:{n.port}",
                         f"CONTROLLER://{n.host}:{n.controller_port}"]
                        + [f"{x}://{n.host}:{port}" for x, port in extra])

    def start(self):
        self.cluster.start(preexec_fn=_die_with_parent)

    def bootstrap(self, exclude=()):
        return ",".join(f"{self.nodes[i].host}:{self.nodes[i].port}" for i in self.broker_ids
                        if i not in exclude)

    def node_bootstrap(self, node_id):
        n = self.nodes[node_id]
        return f"{n.host}:{n.port}"

    def controller_address(self, node_id):
        """The `host:port` of a voter's CONTROLLER listener."""
        n = self.nodes[node_id]
        return f"{n.host}:{n.controller_port}"

    def kill(self, node_id):
        self.cluster._kill_node(self.nodes[node_id])

    def pause(self, node_id):
        """SIGSTOP node `node_id`: it keeps its sockets and answers nothing."""
        self.nodes[node_id].signal(signal.SIGSTOP)

    def resume(self, node_id):
        self.nodes[node_id].signal(signal.SIGCONT)

    def restart(self, node_id, timeout=90):
        """Starts node `node_id` again (with its settings as they are now) and waits until
        every node lists every broker; NotServing when that does not happen within `timeout`
        s (the nodes keep running)."""
        n = self.nodes[node_id]
        self.cluster.configure(n)
        n.start(self.ref.classpath(quiet=True), _die_with_parent)
        # The nodes running now (a test may have killed others on purpose).
        running = [m for m in self.cluster.nodes if m.alive()]
        try:
            self.cluster.wait_ready(timeout, nodes=running)
        except self.ref.KafkaRefError as e:
            raise NotServing(str(e)) from e

    def partition_dirs(self, node_id, topic):
        return None  # Kafka's log directories are its own business: not checked.

    def stop(self):
        self.cluster.kill()

    def exited_badly(self):
        return []

    def log_text(self, node_id):
        """Everything node `node_id` logged (every start)."""
        return self.nodes[node_id].log_path.read_text(errors="replace")

    def describe(self):
        return "\n".join(f"--- node {i}: {n.log_path}\n{n.log_tail()}"
                         for i, n in self.nodes.items())


def make_cluster(request, tmp_path, nodes, settings, probe_tls=None, controllers=None):
    """A cluster of `nodes` nodes of the target under test with broker `settings`, not started.
    `probe_tls`: the `ssl.SSLContext` Kafka's start-up probe speaks to the nodes' client ports
    with when that listener is SSL (Sluice's nodes say in their logs when they serve).
    `controllers`: see the module documentation."""
    if TARGET == "kafka":
        request.getfixturevalue("kafka_classpath")
        return KafkaClusterTarget(tmp_path / "kafka", nodes, settings, probe_tls, controllers)
    return SluiceClusterTarget(request.getfixturevalue("sluice_bin"), tmp_path / "cluster",
                               nodes, settings, controllers)


def start_cluster(request, tmp_path, nodes, settings, node_settings=None, controllers=None):
    """A started cluster of `nodes` nodes of the target under test with broker `settings`,
    `node_settings` ({node id: {key: value}}) for single nodes, and `controllers` (see the
    module documentation)."""
    t = make_cluster(request, tmp_path, nodes, settings, controllers=controllers)
    for node, extra in (node_settings or {}).items():
        t.node_settings.setdefault(node, {}).update(extra)
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
