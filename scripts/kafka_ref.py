#!/usr/bin/env python3
"""Apache Kafka 4.4.0 beside Sluice: the reference broker (DESIGN.md §10).

Fetches Kafka and its dependencies with Maven (scripts/kafka-ref.pom.xml; the jars go to the
user's Maven cache, ~/.m2, and the class path is cached in target/kafka-ref/classpath.txt),
formats a KRaft storage directory per node with Kafka's own StorageTool (what
kafka-storage.sh runs), and starts combined broker+controller nodes (`kafka.Kafka
server.properties`, what kafka-server-start.sh runs) on free 127.0.0.1 ports, each with its own
data directory. It waits until every node answers a Kafka Metadata request listing all the
cluster's brokers, prints the bootstrap address, and stops the nodes with SIGTERM (Kafka's
controlled shutdown), SIGKILL only after a grace period.

With `--controllers N` (`KafkaCluster(controllers=N)`) the roles are separate, as in Kafka's
config/controller.properties and config/broker.properties: nodes 1..N are
`process.roles=controller` (the voters, listening on their CONTROLLER port only) and nodes
N+1..nodes are `process.roles=broker` (PLAINTEXT only; they reach the quorum through the
controllers' CONTROLLER ports). The bootstrap address then names the brokers only.

    scripts/kafka-ref start [--nodes 3] [--controllers N] [--dir D] [--set KEY=VALUE]...
                            [--node-set ID:KEY=VALUE]...  # background; prints bootstrap
    scripts/kafka-ref stop [--dir D]
    scripts/kafka-ref run [--nodes 3] ...         # foreground; stops on SIGTERM/SIGINT
    scripts/kafka-ref fetch                       # only resolve the jars (scripts/test-all)
    scripts/kafka-ref classpath                   # print the class path
    scripts/kafka-ref java CLASS [ARGS...]        # run a Kafka tool, e.g. org.apache.kafka.tools.TopicCommand

`--set` writes a server.properties key into every node's file (the controller-only ones too:
with `--controllers`, give listener layouts per node with `--node-set`), `--node-set
ID:KEY=VALUE` into node ID's only, after the `--set` ones: what differs per node, such as each
node's own key store in a cluster whose nodes talk mTLS (`--node-set
2:ssl.keystore.location=/pki/node2.pem`). The start-up probe speaks PLAINTEXT to each broker's
client port (a controller-only node's CONTROLLER port is only connected to), so the command
line keeps that listener; `KafkaCluster(probe_tls=...)` starts clusters whose listeners are all TLS
(tests/compat/test_cluster_tls.py).

JVM settings are Kafka's own start-script defaults unless the same environment variables
Kafka's scripts read say otherwise: KAFKA_HEAP_OPTS (default `-Xmx1G -Xms1G`, from
kafka-server-start.sh) and KAFKA_JVM_PERFORMANCE_OPTS (default G1 with
`-XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent`,
from kafka-run-class.sh). JAVA_HOME picks the Java (default: `java` on PATH; Kafka 4 needs 17+).

The Python test harness (tests/compat/conftest.py) and sluice-loadgen's --compare use the
`KafkaCluster` class and the `start`/`stop` commands of this module.
"""

import argparse
import base64
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
POM = REPO / "scripts" / "kafka-ref.pom.xml"
CACHE_DIR = REPO / "target" / "kafka-ref"
CLASSPATH_FILE = CACHE_DIR / "classpath.txt"
DEFAULT_RUN_DIR = CACHE_DIR / "run"
KAFKA_VERSION = "4.4.0"

# Kafka's start scripts' defaults (kafka-server-start.sh, kafka-run-class.sh).
DEFAULT_HEAP_OPTS = "-Xmx1G -Xms1G"
DEFAULT_JVM_PERFORMANCE_OPTS = (
    "-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 "
    "-XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 -Djava.awt.headless=true"
)
START_TIMEOUT_S = 90.0
# Controlled shutdown of every node of a cluster at once can take tens of seconds on a loaded
# 2-core machine (each node hands its leaderships back through the controller quorum).
STOP_GRACE_S = 60.0
# After a majority of a cluster's voters exited, how long a node still in controlled shutdown
# is given before it is killed (see KafkaCluster.stop).
QUORUM_LOST_GRACE_S = 10.0
MAVEN_TIMEOUT_S = 900

LOG4J2_PROPERTIES = """\
# Written by scripts/kafka_ref.py: Kafka's INFO log to stdout (the node's server.log).
status = warn
appender.out.type = Console
appender.out.name = STDOUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = STDOUT
logger.state.name = state.change.logger
logger.state.level = WARN
"""


class KafkaRefError(Exception):
    pass


def log_tail(path, lines=40):
    """The last `lines` lines of the log file at `path` (or why it cannot be read)."""
    try:
        text = Path(path).read_bytes().decode("utf-8", "replace")
    except OSError as e:
        return f"(no log: {e})"
    return "\n".join(text.splitlines()[-lines:])


# Ports this process has handed out: the kernel may give a just-closed port again, and a
# cluster takes several before any node binds them.
_handed_out = set()


def free_port():
    """A loopback port nothing listens on now, never one this process handed out before."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _handed_out:
            _handed_out.add(port)
            return port


def _kafka_uuid():
    """A random Kafka `Uuid` in its text form (URL-safe base64, no padding). Kafka refuses ids
    whose text starts with '-' (they read as command-line flags)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def java_bin():
    home = os.environ.get("JAVA_HOME")
    if home:
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise KafkaRefError("no `java` on PATH and JAVA_HOME unset (Kafka 4.4 needs Java 17+)")
    return found


def jvm_options():
    """The JVM flags every Kafka process gets: heap, then GC and JIT (Kafka's defaults), then
    KAFKA_OPTS (system properties, as kafka-run-class.sh passes them)."""
    heap = os.environ.get("KAFKA_HEAP_OPTS", DEFAULT_HEAP_OPTS)
    perf = os.environ.get("KAFKA_JVM_PERFORMANCE_OPTS", DEFAULT_JVM_PERFORMANCE_OPTS)
    return heap.split() + perf.split() + os.environ.get("KAFKA_OPTS", "").split()


def classpath(quiet=False):
    """Kafka's runtime class path; resolves it with Maven when the cache is missing or stale."""
    if CLASSPATH_FILE.is_file() and CLASSPATH_FILE.stat().st_mtime >= POM.stat().st_mtime:
        cp = CLASSPATH_FILE.read_text().strip()
        if cp and all(Path(p).is_file() for p in cp.split(os.pathsep)):
            return cp
    if shutil.which("mvn") is None:
        raise KafkaRefError("`mvn` not found: install Maven (Debian: apt-get install maven)")
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    cmd = ["mvn", "-q", "-B", "-f", str(POM), "dependency:build-classpath",
           f"-Dmdep.outputFile={CLASSPATH_FILE}"]
    if not quiet:
        print(f"kafka-ref: resolving Kafka {KAFKA_VERSION} with Maven (first run only)",
              file=sys.stderr)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=MAVEN_TIMEOUT_S)
    if proc.returncode != 0:
        raise KafkaRefError(f"`{' '.join(cmd)}` failed ({proc.returncode}):\n{proc.stdout[-4000:]}")
    cp = CLASSPATH_FILE.read_text().strip()
    if not cp:
        raise KafkaRefError(f"Maven wrote an empty class path to {CLASSPATH_FILE}")
    return cp


def _metadata_brokers(port, timeout=2.0, host="127.0.0.1", tls=None):
    """Sends Metadata v1 (no topics) to `host`:`port`, over TLS when `tls` (an
    `ssl.SSLContext`) is given; returns the broker ids it lists."""
    client_id = b"kafka-ref"
    # Request header v1: api_key, api_version, correlation_id, client_id; body: topics = [] (0).
    body = struct.pack(">hhih", 3, 1, 1, len(client_id)) + client_id + struct.pack(">i", 0)
    with socket.create_connection((host, port), timeout=timeout) as raw:
        s = raw if tls is None else tls.wrap_socket(raw, server_hostname=host)
        with s:
            s.sendall(struct.pack(">i", len(body)) + body)
            head = _recv_exact(s, 4)
            (size,) = struct.unpack(">i", head)
            data = _recv_exact(s, size)
    pos = 4  # correlation id
    (count,) = struct.unpack_from(">i", data, pos)
    pos += 4
    ids = []
    for _ in range(count):
        node_id, host_len = struct.unpack_from(">ih", data, pos)
        pos += 6 + host_len + 4  # host, port
        (rack_len,) = struct.unpack_from(">h", data, pos)
        pos += 2 + max(rack_len, 0)
        ids.append(node_id)
    return ids


def _recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise OSError("connection closed")
        buf += chunk
    return buf


COMBINED = "broker,controller"
CONTROLLER = "controller"
BROKER = "broker"


class KafkaNode:
    """One `kafka.Kafka` process with its own directory: a combined broker+controller node,
    or (KafkaCluster(controllers=N)) a controller-only or broker-only one. `port` is the
    PLAINTEXT (client) port, `controller_port` the CONTROLLER (voter) port; a node without
    that role has None there."""

    def __init__(self, node_id, directory, port, controller_port):
        self.node_id = node_id
        self.dir = Path(directory)
        self.port = port
        self.controller_port = controller_port
        # The address the node binds and advertises (tests/partitions gives each node its own,
        # inside a network namespace).
        self.host = "127.0.0.1"
        self.directory_id = _kafka_uuid()
        self.proc = None
        self.pid = None
        self.cmd = None

    @property
    def data_dir(self):
        return self.dir / "data"

    @property
    def properties_path(self):
        return self.dir / "server.properties"

    @property
    def log_path(self):
        return self.dir / "server.log"

    def write_config(self, quorum_bootstrap, replication_factor, settings, shipped=True,
                     roles=COMBINED):
        # Kafka 4.4's config/server.properties (what a user starts), with this node's ports,
        # ids and directory; `settings` (--set, then this node's --node-set) are added last and
        # win; when they name `listeners` but not `advertised.listeners`, Kafka's default (the
        # listeners) is advertised. Without `shipped`, only
        # the keys a KRaft node needs: the rest stays at Kafka's built-in defaults, as Sluice's
        # do in the compatibility tests (so that DescribeConfigs sources compare).
        # `roles` CONTROLLER or BROKER: the same keys as Kafka's config/controller.properties
        # (only the CONTROLLER listener, no inter-broker listener) or config/broker.properties
        # (only PLAINTEXT; the quorum is reached through controller.listener.names' first
        # name, which the protocol map must still name).
        plaintext = f"PLAINTEXT://{self.host}:{self.port}"
        controller = f"CONTROLLER://{self.host}:{self.controller_port}"
        listeners = {COMBINED: f"{plaintext},{controller}", CONTROLLER: controller,
                     BROKER: plaintext}[roles]
        props = {
            "process.roles": roles,
            "node.id": str(self.node_id),
            "controller.quorum.bootstrap.servers": quorum_bootstrap,
            "listeners": listeners,
            "inter.broker.listener.name": "PLAINTEXT",
            "advertised.listeners": listeners,
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        }
        if roles == CONTROLLER:
            del props["inter.broker.listener.name"]
        shipped_file = {
            "num.network.threads": "3",
            "num.io.threads": "8",
            "socket.send.buffer.bytes": "102400",
            "socket.receive.buffer.bytes": "102400",
            "socket.request.max.bytes": "104857600",
            "num.partitions": "1",
            "num.recovery.threads.per.data.dir": "1",
            "log.retention.hours": "168",
            "log.segment.bytes": "1073741824",
            "log.retention.check.interval.ms": "300000",
        }
        props.update({
            "log.dirs": str(self.data_dir),
            "offsets.topic.replication.factor": str(replication_factor),
            "share.coordinator.state.topic.replication.factor": str(replication_factor),
            "share.coordinator.state.topic.min.isr": str(min(replication_factor, 2)),
            "transaction.state.log.replication.factor": str(replication_factor),
            "transaction.state.log.min.isr": str(min(replication_factor, 2)),
        })
        if roles == BROKER:
            shipped_file["num.recovery.threads.per.data.dir"] = "2"  # config/broker.properties
        if shipped:
            props.update(shipped_file)
        if "listeners" in settings and "advertised.listeners" not in settings:
            del props["advertised.listeners"]
        props.update({k: str(v) for k, v in settings.items()})
        self.dir.mkdir(parents=True, exist_ok=True)
        # A value's line breaks (inline PEM keys) are written as `\n` escapes, which
        # java.util.Properties reads back as line breaks.
        self.properties_path.write_text("".join(
            f"{k}={v.replace(chr(10), chr(92) + 'n')}\n" for k, v in props.items()))
        (self.dir / "log4j2.properties").write_text(LOG4J2_PROPERTIES)

    def _java(self, cp, main, args):
        return [java_bin(), *jvm_options(),
                f"-Dlog4j2.configurationFile={self.dir / 'log4j2.properties'}",
                f"-Dkafka.logs.dir={self.dir / 'logs'}",
                "-cp", cp, main, *args]

    def format(self, cp, cluster_id, initial_controllers):
        # `kafka-storage.sh format`: one node formats itself --standalone, a cluster names its
        # initial voters (id@host:port:directory-id) so that every voter formats the same
        # quorum; a broker-only node (`initial_controllers` False) is no voter and formats with
        # --no-initial-controllers, as Kafka's docs say for brokers (it learns the voters from
        # controller.quorum.bootstrap.servers).
        args = ["format", "-t", cluster_id, "-c", str(self.properties_path), "--ignore-formatted"]
        if initial_controllers is None:
            args += ["--standalone"]
        elif initial_controllers is False:
            args += ["--no-initial-controllers"]
        else:
            args += ["--initial-controllers", initial_controllers]
        # The storage tool is short-lived: a small heap is enough and starts faster.
        cmd = [java_bin(), "-Xmx256m", "-XX:TieredStopAtLevel=1",
               f"-Dlog4j2.configurationFile={self.dir / 'log4j2.properties'}",
               "-cp", cp, "kafka.tools.StorageTool", *args]
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=120)
        if proc.returncode != 0:
            raise KafkaRefError(f"node {self.node_id}: `{' '.join(cmd)}` failed "
                                f"({proc.returncode}):\n{proc.stdout[-4000:]}")

    def start(self, cp, preexec_fn=None):
        self.cmd = self._java(cp, "kafka.Kafka", [str(self.properties_path)])
        with open(self.log_path, "ab") as log:
            log.write(f"\n=== kafka-ref start: {' '.join(self.cmd)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, cwd=self.dir,
                                         preexec_fn=preexec_fn, start_new_session=preexec_fn is None)
        self.pid = self.proc.pid

    def alive(self):
        if self.proc is not None:
            return self.proc.poll() is None
        if self.pid is None:
            return False
        try:
            os.kill(self.pid, 0)
        except OSError:
            return False
        # A pid read from a state file may have been reused: it must still be this node's java.
        try:
            cmdline = Path(f"/proc/{self.pid}/cmdline").read_bytes()
        except OSError:
            return False
        return str(self.properties_path).encode() in cmdline

    def reap(self, timeout):
        """Waits up to `timeout` s for the node to exit (reaping it when it is our child)."""
        if self.proc is not None:
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
        else:
            time.sleep(timeout)

    def signal(self, sig):
        if self.alive():
            os.kill(self.pid, sig)

    def log_tail(self, lines=40):
        return log_tail(self.log_path, lines)


class KafkaCluster:
    """`nodes` KRaft nodes (1 or 3 …) under `directory`, ids 1..nodes. By default every node
    is a combined broker+controller voter; with `controllers=N`, nodes 1..N are controller-only
    voters and N+1..nodes broker-only (`controller_ids`, `broker_ids`)."""

    def __init__(self, directory, nodes=1, settings=None, shipped=True, node_settings=None,
                 probe_tls=None, controllers=None):
        """`settings` go to every node, `node_settings` ({node id: {key: value}}) to one, after
        `settings`. `shipped`: start from Kafka's config/server.properties (as a user would);
        False keeps only what a KRaft node needs (the compatibility tests). `probe_tls`: the
        `ssl.SSLContext` the readiness probe speaks to each broker's port with, when that
        listener is SSL (PLAINTEXT when None). `controllers`: None, every node combined; N
        (1 <= N < nodes), separate roles: nodes 1..N `process.roles=controller`, the others
        `process.roles=broker`. A controller-only node's `port` and a broker-only node's
        `controller_port` are None (they do not listen there)."""
        if nodes < 1:
            raise KafkaRefError("--nodes must be at least 1")
        if controllers is not None and not 1 <= controllers < nodes:
            raise KafkaRefError(f"--controllers must be from 1 to {nodes - 1} (--nodes {nodes} "
                                f"with at least one broker-only node), got {controllers}")
        self.dir = Path(directory)
        self.settings = dict(settings or {})
        self.node_settings = {int(k): dict(v) for k, v in (node_settings or {}).items()}
        self.shipped = shipped
        self.probe_tls = probe_tls
        self.cluster_id = _kafka_uuid()
        self._set_roles(nodes, controllers)
        self.nodes = [KafkaNode(i, self.dir / f"node-{i}",
                                free_port() if i in self.broker_ids else None,
                                free_port() if i in self.controller_ids else None)
                      for i in range(1, nodes + 1)]
        self._formatted = False

    def _set_roles(self, nodes, controllers):
        self.controllers = controllers
        # `process.roles` of each node id (add_broker adds broker-only ones).
        self.node_roles = {i: COMBINED if controllers is None
                           else (CONTROLLER if i <= controllers else BROKER)
                           for i in range(1, nodes + 1)}

    @property
    def controller_ids(self):
        """The voters' ids."""
        return sorted(i for i, r in self.node_roles.items() if r != BROKER)

    @property
    def broker_ids(self):
        """The ids of the nodes that serve Kafka clients."""
        return sorted(i for i, r in self.node_roles.items() if r != CONTROLLER)

    @property
    def split(self):
        """True when some node is not a combined broker and controller."""
        return any(r != COMBINED for r in self.node_roles.values())

    def roles(self, node):
        """`node`'s process.roles: COMBINED, CONTROLLER or BROKER (by its id)."""
        return self.node_roles[node.node_id]

    def add_broker(self, preexec_fn=None, timeout=START_TIMEOUT_S):
        """Adds a broker-only node (`process.roles=broker`, the next id; formatted with
        --no-initial-controllers, as Kafka's docs add a broker) to the running cluster, starts
        it, waits until every broker lists it, and returns its id."""
        node_id = max(n.node_id for n in self.nodes) + 1
        node = KafkaNode(node_id, self.dir / f"node-{node_id}", free_port(), None)
        self.node_roles[node_id] = BROKER
        self.nodes.append(node)
        self.configure(node)
        cp = classpath()
        node.format(cp, self.cluster_id, False)
        node.start(cp, preexec_fn)
        self.wait_ready(timeout)
        return node_id

    def add_controller(self, preexec_fn=None):
        """Adds a controller-only node (the next id) that joins the running quorum, as Kafka's
        docs add a controller (KIP-853): formatted with --no-initial-controllers, started with
        the voters as `controller.quorum.bootstrap.servers`; it runs as an observer until
        `kafka-metadata-quorum.sh add-controller` (with its server.properties) adds it.
        Returns its id."""
        node_id = max(n.node_id for n in self.nodes) + 1
        node = KafkaNode(node_id, self.dir / f"node-{node_id}", None, free_port())
        self.node_roles[node_id] = CONTROLLER
        # Configured before it is among the nodes: its bootstrap servers are the others.
        self.configure(node)
        self.nodes.append(node)
        cp = classpath()
        node.format(cp, self.cluster_id, False)
        node.start(cp, preexec_fn)
        return node_id

    @property
    def controller_nodes(self):
        """The voters (every node when combined)."""
        return [n for n in self.nodes if n.node_id in self.controller_ids]

    @property
    def broker_nodes(self):
        """The nodes that serve Kafka clients (every node when combined)."""
        return [n for n in self.nodes if n.node_id in self.broker_ids]

    @property
    def bootstrap(self):
        return ",".join(f"{n.host}:{n.port}" for n in self.broker_nodes)

    def configure(self, node):
        """Writes `node`'s server.properties from the cluster's and the node's settings (start
        does so on the first start; call it again before restarting a node whose settings
        changed)."""
        quorum = ",".join(f"{n.host}:{n.controller_port}" for n in self.controller_nodes)
        rf = min(len(self.broker_ids), 3)
        settings = {**self.settings, **self.node_settings.get(node.node_id, {})}
        node.write_config(quorum, rf, settings, self.shipped, self.roles(node))

    def start(self, preexec_fn=None, timeout=START_TIMEOUT_S):
        """Formats (first start only), starts every node (the controllers first) and waits
        until each broker lists them all; when they do not, stops the nodes and raises
        KafkaRefError."""
        cp = classpath()
        if not self._formatted:
            for n in self.nodes:
                self.configure(n)
            voters = None if len(self.nodes) == 1 else ",".join(
                f"{n.node_id}@{n.host}:{n.controller_port}:{n.directory_id}"
                for n in self.controller_nodes)
            for n in self.nodes:
                # A broker-only node is no voter: False, --no-initial-controllers.
                n.format(cp, self.cluster_id,
                         voters if n.node_id in self.controller_ids else False)
            self._formatted = True
        for n in self.controller_nodes + [n for n in self.nodes if n not in self.controller_nodes]:
            if not n.alive():
                n.start(cp, preexec_fn)
        try:
            self.wait_ready(timeout)
        except KafkaRefError:
            self.stop(grace=5)
            raise
        return self

    def wait_ready(self, timeout=START_TIMEOUT_S, nodes=None):
        """Waits until every broker answers Metadata listing every broker (every node when
        combined) and every controller-only node is alive and accepts connections on its
        CONTROLLER port (it is sent no request: Metadata there is no client's business);
        raises KafkaRefError when a node exits or `timeout` s pass (the nodes keep running).
        `nodes`: only these (default: every node)."""
        want = sorted(self.broker_ids)
        deadline = time.monotonic() + timeout
        last = "not tried"
        pending = list(self.nodes if nodes is None else nodes)
        while pending:
            for n in list(pending):
                if not n.alive():
                    raise KafkaRefError(f"Kafka node {n.node_id} exited while starting\n{n.log_tail()}")
                try:
                    if n.node_id not in self.broker_ids:
                        socket.create_connection((n.host, n.controller_port), timeout=2.0).close()
                        pending.remove(n)
                        continue
                    ids = sorted(_metadata_brokers(n.port, host=n.host, tls=self.probe_tls))
                    if ids == want:
                        pending.remove(n)
                    else:
                        last = f"node {n.node_id} lists brokers {ids}, want {want}"
                except (OSError, struct.error) as e:
                    last = f"node {n.node_id}: {e}"
            if pending and time.monotonic() > deadline:
                tails = "\n".join(f"--- node {n.node_id} ({n.log_path}):\n{n.log_tail()}"
                                  for n in pending)
                raise KafkaRefError(f"Kafka not ready after {timeout} s ({last})\n{tails}")
            if pending:
                time.sleep(0.2)

    def stop(self, grace=STOP_GRACE_S):
        """SIGTERM to every node (controlled shutdown), SIGKILL to those still alive after
        `grace` s. Returns True when every node exited on SIGTERM.

        A broker (the broker part of a combined node, or a broker-only node) waits for the
        controller quorum to approve its controlled shutdown (BrokerServer.shutdown, up to
        5 min); a combined node stops its controller part only after that. Once a majority of
        the voters has exited, a broker still waiting can never be approved: after
        QUORUM_LOST_GRACE_S more it is killed (its logs recover on the next start as after a
        crash), and that counts as stopped, since no controlled shutdown was possible for it.
        With separate roles the brokers are stopped first, while the controllers can approve
        their shutdown, and the controllers then (what is left of `grace`, but at least
        QUORUM_LOST_GRACE_S or `grace` if shorter)."""
        deadline = time.monotonic() + grace
        brokers_only = [n for n in self.nodes if self.roles(n) == BROKER]
        rest = [n for n in self.nodes if n not in brokers_only]
        if not brokers_only:
            return self._stop_group(rest, rest, deadline, grace)
        clean = self._stop_group(brokers_only, self.controller_nodes, deadline, grace)
        # The broker-only nodes are gone now: controller-only nodes' own shutdown needs no
        # quorum; combined ones still need each other's.
        deadline = max(deadline, time.monotonic() + min(grace, QUORUM_LOST_GRACE_S))
        voters = rest if any(self.roles(n) == COMBINED for n in rest) else []
        return self._stop_group(rest, voters, deadline, grace) and clean

    def _stop_group(self, group, voters, deadline, grace):
        """SIGTERM to the nodes of `group`; waits until they exit or `deadline`, SIGKILL then.
        `voters`: the quorum the group's brokers need for their controlled shutdown (see
        stop)."""
        for n in group:
            n.signal(signal.SIGTERM)
        majority = len(voters) // 2 + 1
        quorum_lost_at = None
        while True:
            alive = [n for n in group if n.alive()]
            now = time.monotonic()
            if not alive or now >= deadline:
                break
            if voters and sum(v.alive() for v in voters) < majority:
                quorum_lost_at = quorum_lost_at or now
                if now - quorum_lost_at >= QUORUM_LOST_GRACE_S:
                    for n in alive:
                        print(f"kafka-ref: node {n.node_id} still waiting for controlled "
                              f"shutdown {QUORUM_LOST_GRACE_S:.0f} s after a majority of the "
                              f"voters exited (no quorum can approve it); SIGKILL "
                              f"(log: {n.log_path})", file=sys.stderr)
                        self._kill_node(n)
                    return True
            for n in alive:
                n.reap(timeout=0.2 / len(alive))
        clean = True
        for n in group:
            if n.alive():
                clean = False
                print(f"kafka-ref: node {n.node_id} still running {grace:.0f} s after SIGTERM; "
                      f"SIGKILL (log: {n.log_path})", file=sys.stderr)
                self._kill_node(n)
        return clean

    @staticmethod
    def _kill_node(n):
        n.signal(signal.SIGKILL)
        if n.proc is not None:
            n.proc.wait(timeout=30)

    def kill(self):
        for n in self.nodes:
            n.signal(signal.SIGKILL)
            if n.proc is not None:
                n.proc.wait(timeout=30)

    def restart(self, kill=False):
        if kill:
            self.kill()
        else:
            self.stop()
        return self.start()

    def state(self):
        return {"bootstrap": self.bootstrap, "cluster_id": self.cluster_id,
                "controllers": self.controllers,
                "nodes": [{"node_id": n.node_id, "roles": self.roles(n), "pid": n.pid,
                           "port": n.port, "controller_port": n.controller_port,
                           "dir": str(n.dir)}
                          for n in self.nodes]}

    @classmethod
    def from_state(cls, directory):
        path = Path(directory) / "state.json"
        try:
            st = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise KafkaRefError(f"no Kafka started from {directory} ({e})") from e
        c = cls.__new__(cls)
        c.dir = Path(directory)
        c.settings = {}
        c.node_settings = {}
        c.probe_tls = None
        c.shipped = True
        c.cluster_id = st["cluster_id"]
        c._formatted = True
        c.nodes = []
        for ns in st["nodes"]:
            n = KafkaNode(ns["node_id"], ns["dir"], ns["port"], ns["controller_port"])
            n.pid = ns["pid"]
            c.nodes.append(n)
        c._set_roles(len(c.nodes), st.get("controllers"))
        c.node_roles = {ns["node_id"]: ns.get("roles", c.node_roles.get(ns["node_id"], COMBINED))
                        for ns in st["nodes"]}
        return c


def _parse_settings(pairs):
    out = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise KafkaRefError(f"--set wants KEY=VALUE, got {pair!r}")
        out[key] = value
    return out


def _parse_node_settings(items):
    """{node id: {key: value}} from `ID:KEY=VALUE` items (--node-set)."""
    out = {}
    for item in items or []:
        node, sep, pair = item.partition(":")
        if not sep or not node.isdigit():
            raise KafkaRefError(f"--node-set wants ID:KEY=VALUE, got {item!r}")
        out.setdefault(int(node), {}).update(_parse_settings([pair]))
    return out


def _fresh_dir(directory):
    directory = Path(directory)
    state = directory / "state.json"
    if state.exists():
        old = KafkaCluster.from_state(directory)
        if any(n.alive() for n in old.nodes):
            raise KafkaRefError(f"a Kafka from {directory} is still running "
                                f"(bootstrap {old.bootstrap}): `kafka-ref stop --dir {directory}`")
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    return directory


def main(argv=None):
    ap = argparse.ArgumentParser(prog="kafka-ref", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    for name, help_text in (("start", "start in the background, print the bootstrap address"),
                            ("run", "start in the foreground until SIGTERM/SIGINT")):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--nodes", type=int, default=1,
                       help="KRaft nodes (broker+controller each, unless --controllers)")
        p.add_argument("--controllers", type=int, metavar="N",
                       help="separate roles: nodes 1..N controller-only (the voters), the "
                            "others broker-only (default: every node combined)")
        p.add_argument("--dir", default=str(DEFAULT_RUN_DIR),
                       help="run directory, emptied first (default target/kafka-ref/run)")
        p.add_argument("--set", action="append", metavar="KEY=VALUE",
                       help="a server.properties key for every node (repeatable)")
        p.add_argument("--node-set", action="append", metavar="ID:KEY=VALUE",
                       help="a server.properties key for node ID only, after --set (repeatable)")
    p = sub.add_parser("stop", help="stop a Kafka started with `start` (SIGTERM, SIGKILL after "
                                     f"{STOP_GRACE_S:.0f} s)")
    p.add_argument("--dir", default=str(DEFAULT_RUN_DIR))
    sub.add_parser("fetch", help="resolve Kafka's jars with Maven (cached)")
    sub.add_parser("classpath", help="print Kafka's class path")
    p = sub.add_parser("java", help="run a Java main class on Kafka's class path")
    p.add_argument("main_class")
    p.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    try:
        if a.command == "fetch":
            classpath()
            print(f"Kafka {KAFKA_VERSION} class path cached in {CLASSPATH_FILE}")
        elif a.command == "classpath":
            print(classpath(quiet=True))
        elif a.command == "java":
            cp = classpath(quiet=True)
            os.execv(java_bin(), [java_bin(), "-Xmx512m", "-cp", cp, a.main_class, *a.args])
        elif a.command in ("start", "run"):
            node_settings = _parse_node_settings(a.node_set)
            unknown = sorted(set(node_settings) - set(range(1, a.nodes + 1)))
            if unknown:
                raise KafkaRefError(f"--node-set names nodes {unknown}; the nodes are 1..{a.nodes}")
            if a.controllers is not None and not 1 <= a.controllers < a.nodes:
                raise KafkaRefError(f"--controllers must be from 1 to --nodes - 1 ({a.nodes - 1}),"
                                    f" got {a.controllers}")
            directory = _fresh_dir(a.dir)
            cluster = KafkaCluster(directory, a.nodes, _parse_settings(a.set),
                                   node_settings=node_settings, controllers=a.controllers)
            cluster.start()
            (directory / "state.json").write_text(json.dumps(cluster.state(), indent=2))
            print(cluster.bootstrap, flush=True)
            roles = "" if not cluster.split else (
                f" (controllers {cluster.controller_ids}, brokers {cluster.broker_ids})")
            print(f"kafka-ref: {len(cluster.nodes)} node(s){roles} of Kafka {KAFKA_VERSION} "
                  f"serving on {cluster.bootstrap}; logs in {directory}/node-*/server.log; JVM: "
                  f"{' '.join(jvm_options())}", file=sys.stderr)
            if a.command == "run":
                stopping = []
                for sig in (signal.SIGTERM, signal.SIGINT):
                    signal.signal(sig, lambda *_: stopping.append(True))
                while not stopping and all(n.alive() for n in cluster.nodes):
                    time.sleep(0.5)
                died = [n for n in cluster.nodes if not n.alive()]
                clean = cluster.stop()
                if died and not stopping:
                    tails = "\n".join(f"--- node {n.node_id} (exit {n.proc.returncode if n.proc else '?'}),"
                                      f" {n.log_path}:\n{n.log_tail(60)}" for n in died)
                    raise KafkaRefError(f"Kafka node(s) {[n.node_id for n in died]} exited by "
                                        f"themselves; the others were stopped\n{tails}")
                return 0 if clean else 1
        elif a.command == "stop":
            cluster = KafkaCluster.from_state(a.dir)
            clean = cluster.stop()
            print(f"kafka-ref: stopped{'' if clean else ' (SIGKILL after the grace period)'}",
                  file=sys.stderr)
            return 0 if clean else 1
    except KafkaRefError as e:
        print(f"kafka-ref: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
