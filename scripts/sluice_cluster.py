"""A cluster of `sluice` processes on one host (issue #14): N combined broker + controller
nodes on distinct loopback ports, each with its own data directory, every node a voter of
`controller.quorum.voters`; or, with `controllers=K`, nodes 1..K controller-only
(`process.roles=controller`, the voters) and the others broker-only (`process.roles=broker`,
observers of the metadata log). Used by tests/compat/test_cluster.py, tests/compat/test_roles.py
and scripts/cluster-failover.

    cluster = SluiceCluster(binary, directory, nodes=3, settings={...})
    cluster.start()            # every node, then waits until each lists all brokers
    cluster.kill(2)            # SIGKILL node 2 (its data directory stays)
    cluster.start_node(2)      # restarts it on its data directory
    cluster.stop()             # SIGTERM every node (controlled shutdown), SIGKILL past a grace

From the shell (scripts/librdkafka-suite), in the foreground until SIGTERM/SIGINT, printing the
bootstrap address once every node serves:

    python3 scripts/sluice_cluster.py run --binary target/debug/sluice --dir D --nodes 3 \
        [--set KEY=VALUE]...

Ports: each node gets a free Kafka port, admin port and voter port, chosen once, so a
restarted node comes back at the same addresses.
"""

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from kafka_ref import free_port, log_tail

STOP_GRACE_S = 20.0
# The values of `process.roles`.
COMBINED = "broker,controller"
CONTROLLER = "controller"
BROKER = "broker"


class ClusterError(Exception):
    pass


class SluiceNode:
    def __init__(self, node_id, directory):
        self.node_id = node_id
        self.dir = Path(directory)
        self.port = free_port()
        self.admin_port = free_port()
        self.voter_port = free_port()
        self.proc = None
        self.starts = 0

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self):
        return self.dir / "sluice.log"

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines=40):
        return log_tail(self.log_path, lines)


class SluiceCluster:
    """`nodes` Sluice nodes under `directory` (ids 1..nodes)."""

    def __init__(self, binary, directory, nodes=3, settings=None, cores=1, preexec_fn=None,
                 node_settings=None, controllers=None):
        """`settings` go to every node, `node_settings` ({node id: {key: value}}) to one.
        `controllers`: None, every node is both; K, nodes 1..K are controllers only and the
        rest brokers only."""
        if controllers is not None and not 0 < controllers < nodes:
            raise ClusterError(f"controllers={controllers} must leave brokers among {nodes} nodes")
        self.controllers = controllers
        self.binary = str(binary)
        self.dir = Path(directory)
        self.settings = dict(settings or {})
        self.node_settings = dict(node_settings or {})
        self.cores = cores
        self.preexec_fn = preexec_fn
        self.nodes = {i: SluiceNode(i, self.dir / f"node-{i}") for i in range(1, nodes + 1)}
        # `process.roles` of each node.
        self.node_roles = {i: COMBINED if controllers is None
                           else (CONTROLLER if i <= controllers else BROKER)
                           for i in self.nodes}
        # Controllers started to join the running quorum (`add_controller`): not among the
        # voters the others are configured with.
        self.joining = set()

    @property
    def controller_ids(self):
        """The voters' ids."""
        return sorted(i for i, r in self.node_roles.items() if r != BROKER)

    @property
    def broker_ids(self):
        """The ids of the nodes that serve clients."""
        return sorted(i for i, r in self.node_roles.items() if r != CONTROLLER)

    def roles(self, node_id):
        """`process.roles` of node `node_id`."""
        return self.node_roles[node_id]

    def add_broker(self, wait=True, timeout=60):
        """Adds a broker-only node (`process.roles=broker`, the next id) to the running cluster,
        starts it and returns its id: a new broker joins, as in Kafka (the voters stay)."""
        node_id = max(self.nodes) + 1
        self.nodes[node_id] = SluiceNode(node_id, self.dir / f"node-{node_id}")
        self.node_roles[node_id] = BROKER
        self.start_node(node_id, wait=wait, timeout=timeout)
        return node_id

    def add_controller(self, wait=True, timeout=60):
        """Adds a controller-only node (the next id) that joins the running quorum (KIP-853):
        started with `controller.quorum.bootstrap.servers` (the configured voters) and no voters,
        it waits until AddRaftVoter adds it (`kafka-metadata-quorum.sh add-controller`, with
        `command_config`). Returns its id."""
        node_id = max(self.nodes) + 1
        self.nodes[node_id] = SluiceNode(node_id, self.dir / f"node-{node_id}")
        self.node_roles[node_id] = CONTROLLER
        self.joining.add(node_id)
        self.start_node(node_id, wait=wait, timeout=timeout)
        # Kafka's add-controller reads its meta.properties, complete once the node learned the
        # cluster id from a voter.
        meta = self.nodes[node_id].dir / "data" / "meta.properties"
        deadline = time.monotonic() + timeout
        while wait and "cluster.id=" not in (meta.read_text() if meta.exists() else ""):
            if time.monotonic() > deadline:
                raise ClusterError(f"node {node_id} did not learn the cluster id\n"
                                   f"{self.nodes[node_id].log_tail()}")
            time.sleep(0.05)
        return node_id

    def command_config(self, node_id):
        """A Kafka-style properties file describing controller `node_id` for Kafka's tools
        (`kafka-metadata-quorum.sh --command-config`: its id, roles, controller listener and
        data directory, whose meta.properties holds its directory id); returns its path."""
        node = self.nodes[node_id]
        path = node.dir / "controller.properties"
        path.write_text(
            f"node.id={node_id}\nprocess.roles=controller\n"
            f"controller.listener.names=CONTROLLER\n"
            f"listeners=CONTROLLER://127.0.0.1:{node.voter_port}\n"
            f"listener.security.protocol.map=CONTROLLER:PLAINTEXT\n"
            f"log.dirs={node.dir / 'data'}\n")
        return path

    @property
    def voters(self):
        return ",".join(f"{i}@127.0.0.1:{self.nodes[i].voter_port}" for i in self.controller_ids
                        if i not in self.joining)

    def bootstrap(self, exclude=()):
        return ",".join(self.nodes[i].bootstrap for i in self.broker_ids if i not in exclude)

    def command(self, node):
        """The node's command line; settings that name `listeners` replace `--listen` (they
        must keep a listener on the node's port, which the start-up wait probes)."""
        settings = {**self.settings, **self.node_settings.get(node.node_id, {})}
        cmd = [self.binary]
        if node.node_id in self.joining:
            # Kafka's keys of a controller joining a running quorum: its controller listener
            # among `listeners`, the voters it asks where the quorum is.
            bootstrap = ",".join(f"127.0.0.1:{self.nodes[i].voter_port}"
                                 for i in self.controller_ids if i not in self.joining)
            settings = {"controller.quorum.bootstrap.servers": bootstrap,
                        "controller.listener.names": "CONTROLLER",
                        "listeners": f"CONTROLLER://127.0.0.1:{node.voter_port}",
                        "listener.security.protocol.map":
                            "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT", **settings}
        if "listeners" not in settings:
            cmd += ["--listen", node.bootstrap]
        cmd += ["--admin-listen", f"127.0.0.1:{node.admin_port}",
                "--data-dir", str(node.dir / "data"), "--smp", str(self.cores),
                "--set", f"node.id={node.node_id}"]
        if node.node_id not in self.joining:
            cmd += ["--set", f"controller.quorum.voters={self.voters}"]
        if self.roles(node.node_id) != COMBINED:
            cmd += ["--set", f"process.roles={self.roles(node.node_id)}"]
        for key, value in settings.items():
            cmd += ["--set", f"{key}={value}"]
        return cmd

    def start_node(self, node_id, wait=True, timeout=60):
        """Starts node `node_id` (again); with `wait`, returns once it says it serves."""
        node = self.nodes[node_id]
        if node.alive():
            raise ClusterError(f"node {node_id} is already running")
        node.dir.mkdir(parents=True, exist_ok=True)
        node.starts += 1
        with open(node.log_path, "ab") as log:
            log.write(f"\n=== start #{node.starts}: {' '.join(self.command(node))}\n".encode())
            log.flush()
            node.proc = subprocess.Popen(self.command(node), stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=subprocess.STDOUT,
                                         env=dict(os.environ, NO_COLOR="1"),
                                         preexec_fn=self.preexec_fn)
        if wait:
            self.wait_serving(node_id, timeout)

    def wait_serving(self, node_id, timeout=60):
        """Waits until node `node_id` printed its `listening` line for its latest start: a
        broker is registered with the controller and unfenced; a controller-only node has
        started its voter."""
        node = self.nodes[node_id]
        deadline = time.monotonic() + timeout
        marker = f"=== start #{node.starts}:"
        serving = "sluice: controller listening on" if self.roles(node_id) == CONTROLLER \
            else "sluice: listening on"
        while time.monotonic() < deadline:
            if not node.alive():
                raise ClusterError(f"node {node_id} exited ({node.proc.returncode}) while "
                                   f"starting\n{node.log_tail()}")
            text = node.log_path.read_bytes().decode("utf-8", "replace")
            if serving in text.rsplit(marker, 1)[-1]:
                return
            time.sleep(0.05)
        raise ClusterError(f"node {node_id} not serving after {timeout} s\n{node.log_tail()}")

    def start(self, timeout=60):
        """Starts every node (in any order: they wait for a quorum) and waits until each
        serves."""
        for node_id in self.nodes:
            self.start_node(node_id, wait=False)
        for node_id in self.nodes:
            self.wait_serving(node_id, timeout)
        return self

    def kill(self, node_id):
        """SIGKILL node `node_id` and reap it."""
        node = self.nodes[node_id]
        if node.alive():
            node.proc.send_signal(signal.SIGKILL)
        if node.proc is not None:
            node.proc.wait(timeout=30)

    def pause(self, node_id):
        """SIGSTOP node `node_id`: it keeps its sockets but answers nothing (a hung broker)."""
        self.nodes[node_id].proc.send_signal(signal.SIGSTOP)

    def resume(self, node_id):
        """SIGCONT node `node_id` after `pause`."""
        node = self.nodes[node_id]
        if node.alive():
            node.proc.send_signal(signal.SIGCONT)

    def stop_node(self, node_id, grace=STOP_GRACE_S):
        """SIGTERM (controlled shutdown), SIGKILL after `grace` s; returns the exit status."""
        node = self.nodes[node_id]
        if not node.alive():
            return node.proc.returncode if node.proc else None
        node.proc.send_signal(signal.SIGTERM)
        try:
            return node.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            self.kill(node_id)
            return None

    def stop(self):
        """SIGTERM every node; with separate roles the brokers first (their controlled shutdown
        needs the controllers), then the controllers."""
        brokers_only = [i for i, r in self.node_roles.items() if r == BROKER]
        groups = [brokers_only, [i for i in sorted(self.nodes) if i not in brokers_only]]
        for group in groups:
            for node_id in group:
                if self.nodes[node_id].alive():
                    self.nodes[node_id].proc.send_signal(signal.SIGTERM)
            for node_id in group:
                self.stop_node(node_id)

    def describe(self):
        return "\n".join(f"--- node {n.node_id} ({'running' if n.alive() else 'stopped'}), "
                         f"{n.log_path}:\n{n.log_tail()}" for n in self.nodes.values())


def main(argv=None):
    ap = argparse.ArgumentParser(prog="sluice_cluster.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="start in the foreground until SIGTERM/SIGINT")
    p.add_argument("--binary", required=True, help="the sluice binary")
    p.add_argument("--dir", required=True, help="the nodes' directories go here")
    p.add_argument("--nodes", type=int, default=3)
    p.add_argument("--cores", type=int, default=1, help="--smp of each node")
    p.add_argument("--controllers", type=int, default=None,
                   help="nodes 1..N are controllers only, the rest brokers only "
                        "(default: every node is both)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a setting for every node (repeatable)")
    a = ap.parse_args(argv)
    settings = dict(kv.split("=", 1) for kv in a.set)
    cluster = SluiceCluster(a.binary, a.dir, nodes=a.nodes, settings=settings, cores=a.cores,
                            controllers=a.controllers)
    stopping = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.append(True))
    try:
        cluster.start()
    except ClusterError as e:
        cluster.stop()
        print(f"sluice_cluster: {e}", file=sys.stderr)
        return 1
    print(cluster.bootstrap(), flush=True)
    print(f"sluice_cluster: {a.nodes} node(s) serving; logs in {a.dir}/node-*/sluice.log",
          file=sys.stderr)
    while not stopping and all(n.alive() for n in cluster.nodes.values()):
        time.sleep(0.5)
    died = [n for n in cluster.nodes.values() if not n.alive()]
    cluster.stop()
    if died and not stopping:
        print(f"sluice_cluster: node(s) {[n.node_id for n in died]} exited by themselves; the "
              f"others were stopped\n{cluster.describe()}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
