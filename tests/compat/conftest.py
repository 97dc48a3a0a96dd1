"""Fixtures for the real-client compatibility tests.

Every test gets its own `sluice` process on free loopback ports with a fresh data directory.
A failing test's report carries the broker's command line and the tail of its log (stdout and
stderr, appended across restarts).

Configure a test's broker with the `sluice` marker:

    @pytest.mark.sluice(cores=2, settings={"num.partitions": 6})

Extra Kafka listeners beside the PLAINTEXT one: `listeners={"SSL": "SSL", "EXTERNAL": "SSL"}`
(listener name → security protocol), each on a free port (`broker.listener_bootstrap(name)`);
a setting's value may name the run's test certificates as `{certs}/server.pem` (the
`tls_certs` fixture, tests/compat/tls_certs.py).

`SLUICE_BIN=/path/to/sluice` skips the cargo build and uses that binary.

`SLUICE_COMPAT_TARGET=kafka` runs the suite against Apache Kafka 4.4.0 instead (the reference,
scripts/kafka-ref): every test's `broker` is then a fresh single-node KRaft Kafka on free
loopback ports with its own data directory, configured by the same marker's `settings` (Kafka
property names; `cores` is ignored), restarted by `broker.restart()` as Sluice is. Tests of
Sluice's own parts (admin HTTP, CLI, its files and log, `sluice tune`, loadgen, the disk-full
and shard-config tests) carry the `sluice_only` marker, or need the `sluice_bin` /
`loadgen_bin` fixtures, and are skipped there. A test that fails against Kafka is a wrong test.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import warnings
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TARGET = os.environ.get("SLUICE_COMPAT_TARGET", "sluice").strip().lower() or "sluice"
if TARGET not in ("sluice", "kafka"):
    raise pytest.UsageError(f"SLUICE_COMPAT_TARGET={TARGET!r}: expected `sluice` or `kafka`")
# scripts/kafka_ref.py: Kafka through Maven, KRaft format, start, stop; its class path also
# serves Kafka's tools to tests against Sluice (the `kafka_classpath` fixture).
sys.path.insert(0, str(REPO / "scripts"))
import kafka_ref  # noqa: E402

import compat_util  # noqa: E402
# Segments are 1 GiB by default, their disk reserved in steps of up to 64 MiB. Tests never fill
# one, so a smaller size only bounds the steps (a test can still override it).
DEFAULT_SETTINGS = {"log.segment.bytes": 64 << 20}
START_TIMEOUT_S = 30.0
STOP_GRACE_S = 5.0
LOG_TAIL_LINES = 50


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "sluice(cores=2, settings={...}): options of the test's broker "
        "(cores: shards, --smp N; settings become --set KEY=VALUE)",
    )
    config.addinivalue_line(
        "markers",
        "sluice_only(reason): tests a part of Sluice that Kafka does not have (admin HTTP, CLI, "
        "its files): skipped with SLUICE_COMPAT_TARGET=kafka",
    )
    config.addinivalue_line(
        "markers",
        "long(reason): a long run (multi-node failovers, kill loops) kept out of the README test "
        "command's 30-minute budget: runs with SLUICE_LONG=1 (scripts/test-long)",
    )


# Fixtures that start Sluice's own binaries: a test that needs one tests Sluice itself.
SLUICE_ONLY_FIXTURES = ("sluice_bin", "loadgen_bin")


def pytest_collection_modifyitems(config, items):
    if not compat_util.LONG:
        for item in items:
            marker = item.get_closest_marker("long")
            if marker is not None:
                why = marker.args[0] if marker.args else "a long run"
                item.add_marker(pytest.mark.skip(
                    reason=f"long run ({why}): SLUICE_LONG=1 or scripts/test-long"))
    if TARGET != "kafka":
        return
    for item in items:
        marker = item.get_closest_marker("sluice_only")
        if marker is not None:
            why = marker.args[0] if marker.args else marker.kwargs.get("reason", "Sluice only")
        elif any(f in item.fixturenames for f in SLUICE_ONLY_FIXTURES):
            why = "starts Sluice's own binaries"
        else:
            continue
        item.add_marker(pytest.mark.skip(reason=f"Sluice-only, not run against Kafka: {why}"))


def pytest_report_header(config):
    if TARGET == "kafka":
        return "compat target: Apache Kafka (SLUICE_COMPAT_TARGET=kafka, scripts/kafka-ref)"
    return "compat target: sluice"


@pytest.fixture(scope="session")
def sluice_bin():
    """Path of the `sluice` binary: $SLUICE_BIN, or built once per session with cargo."""
    env_bin = os.environ.get("SLUICE_BIN")
    if env_bin:
        path = Path(env_bin).resolve()
        if not path.is_file():
            pytest.fail(f"SLUICE_BIN={env_bin} is not a file", pytrace=False)
        return path
    cmd = [
        "cargo", "build", "-p", "sluice-broker", "--bin", "sluice",
        "--message-format=json-render-diagnostics",
    ]
    proc = subprocess.run(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=1800)
    if proc.returncode != 0:
        pytest.fail(f"`{' '.join(cmd)}` failed ({proc.returncode}):\n{proc.stderr[-6000:]}",
                    pytrace=False)
    exe = None
    for line in proc.stdout.splitlines():
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if msg.get("reason") == "compiler-artifact" and msg.get("target", {}).get("name") == "sluice" \
                and msg.get("executable"):
            exe = msg["executable"]
    if exe is None:
        pytest.fail("cargo build produced no `sluice` executable", pytrace=False)
    return Path(exe)


def _die_with_parent():
    """In the child before exec: SIGKILL it when pytest dies, so no broker outlives a run
    that was killed (e.g. by `timeout`)."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


free_port = kafka_ref.free_port  # one helper for every test's ports


class BrokerError(Exception):
    pass


# The exit status of a broker that stopped cleanly after SIGTERM: Sluice exits 0; the JVM
# (Kafka) exits 128 + SIGTERM = 143 once its shutdown hooks (controlled shutdown) have run.
CLEAN_EXIT_STATUS = {"sluice": 0, "kafka": 128 + signal.SIGTERM}


class Broker:
    """One `sluice` child process; restartable on the same data directory."""

    clean_exit_status = CLEAN_EXIT_STATUS["sluice"]

    def __init__(self, binary, data_dir, log_path, cores=2, settings=None, listeners=None):
        self.binary = Path(binary)
        self.listeners = dict(listeners or {})
        self.listener_ports = {name: free_port() for name in self.listeners}
        self.data_dir = Path(data_dir)
        self.log_path = Path(log_path)
        self.cores = cores
        self.settings = {**DEFAULT_SETTINGS, **(settings or {})}
        self.port = free_port()
        self.admin_port = free_port()
        self.proc = None
        self.cmd = None
        self.starts = 0
        self.harness_stopped = False  # set by stop()/kill(): an exit we asked for
        self.env = {}  # extra environment of the next starts (a test's crash point)

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    @property
    def admin_url(self):
        return f"http://127.0.0.1:{self.admin_port}"

    def listener_bootstrap(self, name):
        """HOST:PORT of extra listener `name`."""
        return f"127.0.0.1:{self.listener_ports[name]}"

    def _command(self):
        cmd = [
            str(self.binary),
            "--admin-listen", f"127.0.0.1:{self.admin_port}",
            "--data-dir", str(self.data_dir),
            "--smp", str(self.cores),
        ]
        if self.listeners:
            cmd += ["--set", "listeners=" + ",".join(
                [f"PLAINTEXT://{self.bootstrap}"]
                + [f"{n}://{self.listener_bootstrap(n)}" for n in self.listeners])]
            cmd += ["--set", "listener.security.protocol.map=" + ",".join(
                ["PLAINTEXT:PLAINTEXT"] + [f"{n}:{p}" for n, p in self.listeners.items()])]
        else:
            cmd += ["--listen", self.bootstrap]
        for key, value in self.settings.items():
            if isinstance(value, bool):
                value = "true" if value else "false"
            cmd += ["--set", f"{key}={value}"]
        return cmd

    def start(self):
        """Starts the broker (again, on the same data directory) and waits until it serves."""
        if self.alive():
            raise BrokerError("broker already running")
        # Always the same ports: a restart must bind them at once (issue #25).
        return self._start_once()

    def _start_once(self):
        self.starts += 1
        self.harness_stopped = False
        self.cmd = self._command()
        with open(self.log_path, "ab") as log:
            log.write(f"\n=== start #{self.starts}: {' '.join(self.cmd)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, cwd=self.data_dir.parent,
                                         env=dict(os.environ, NO_COLOR="1", **self.env),
                                         preexec_fn=_die_with_parent)
        self._wait_ready()
        return self

    def _wait_ready(self):
        deadline = time.monotonic() + START_TIMEOUT_S
        kafka_ok = health_ok = False
        last_error = None
        while time.monotonic() < deadline:
            code = self.proc.poll()
            if code is not None:
                raise BrokerError(f"broker exited with {code} while starting\n{self.log_tail()}")
            if not kafka_ok:
                try:
                    with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                        kafka_ok = True
                except OSError as e:
                    last_error = f"kafka port: {e}"
            if kafka_ok and not health_ok:
                try:
                    with urllib.request.urlopen(self.admin_url + "/health", timeout=2) as resp:
                        health_ok = resp.status == 200
                        if not health_ok:
                            last_error = f"/health answered {resp.status}"
                except OSError as e:
                    last_error = f"/health: {e}"
            if kafka_ok and health_ok:
                return
            time.sleep(0.1)
        self.kill()
        raise BrokerError(f"broker not ready after {START_TIMEOUT_S} s ({last_error})\n"
                          f"{self.log_tail()}")

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def pid(self):
        return self.proc.pid if self.proc else None

    def kill(self):
        """SIGKILL and reap; returns the exit status (None if it was not running)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.harness_stopped = True
            self.proc.send_signal(signal.SIGKILL)
        return self.proc.wait(timeout=30)

    def stop(self, grace=STOP_GRACE_S):
        """SIGTERM, then SIGKILL after `grace` s. Returns (exit status, needed_sigkill)."""
        if self.proc is None:
            return None, False
        if self.proc.poll() is not None:
            return self.proc.returncode, False
        self.harness_stopped = True
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=grace), False
        except subprocess.TimeoutExpired:
            with open(self.log_path, "ab") as log:
                log.write(f"=== test harness: no exit {grace} s after SIGTERM, SIGKILL\n".encode())
            return self.kill(), True

    def restart(self, kill=False):
        """Stops (SIGTERM, or SIGKILL if `kill`) and starts again on the same data directory."""
        if kill:
            self.kill()
        else:
            self.stop()
        return self.start()

    def log_tail(self, lines=LOG_TAIL_LINES):
        try:
            text = self.log_path.read_bytes().decode("utf-8", "replace")
        except OSError as e:
            return f"(no broker log: {e})"
        return "\n".join(text.splitlines()[-lines:])

    def describe(self):
        state = "running" if self.alive() else f"exited {self.proc.returncode if self.proc else '-'}"
        try:
            lines = self.log_path.read_bytes().decode("utf-8", "replace").splitlines()
        except OSError:
            lines = []
        # Backtraces push the panic message out of the tail: list such lines separately.
        notable = [l for l in lines if "panicked at" in l or " ERROR " in l or "=== " in l][-20:]
        return (f"command: {' '.join(self.cmd or self._command())}\n"
                f"data dir: {self.data_dir}\nstate: {state}\n"
                + ("starts, panics and errors in the broker log:\n" + "\n".join(notable) + "\n"
                   if notable else "")
                + f"last {LOG_TAIL_LINES} lines of the broker log ({self.log_path}):\n"
                f"{self.log_tail()}")


class KafkaBroker:
    """One single-node Apache Kafka (scripts/kafka_ref.py) with the interface of `Broker` that
    Kafka-behaviour tests use: bootstrap, port, start/stop/kill/restart, alive, pid, logs."""

    clean_exit_status = CLEAN_EXIT_STATUS["kafka"]

    def __init__(self, directory, settings=None, listeners=None):
        self.settings = {**DEFAULT_SETTINGS, **(settings or {})}
        self.listeners = dict(listeners or {})
        self.listener_ports = {name: free_port() for name in self.listeners}
        sluice_keys = sorted(k for k in self.settings if k.startswith("sluice."))
        if sluice_keys:
            raise BrokerError(f"settings {sluice_keys} are Sluice's own: mark the test sluice_only")
        self.cluster = kafka_ref.KafkaCluster(directory, 1, self.settings, shipped=False)
        self.node = self.cluster.nodes[0]
        if self.listeners:
            n = self.node
            endpoints = ",".join(
                [f"PLAINTEXT://{n.host}:{n.port}", f"CONTROLLER://{n.host}:{n.controller_port}"]
                + [f"{name}://{n.host}:{p}" for name, p in self.listener_ports.items()])
            self.cluster.settings.update({
                "listeners": endpoints,
                "advertised.listeners": endpoints,
                "listener.security.protocol.map": ",".join(
                    ["CONTROLLER:PLAINTEXT", "PLAINTEXT:PLAINTEXT"]
                    + [f"{name}:{p}" for name, p in self.listeners.items()]),
            })
        self.data_dir = self.node.data_dir
        self.log_path = self.node.log_path
        self.cmd = None
        self.harness_stopped = False

    @property
    def bootstrap(self):
        return self.cluster.bootstrap

    @property
    def port(self):
        return self.node.port

    def listener_bootstrap(self, name):
        """HOST:PORT of extra listener `name`."""
        return f"{self.node.host}:{self.listener_ports[name]}"

    @property
    def proc(self):
        return self.node.proc

    def start(self):
        self.harness_stopped = False
        try:
            self.cluster.start(preexec_fn=_die_with_parent)
        except kafka_ref.KafkaRefError as e:
            raise BrokerError(str(e)) from e
        self.cmd = self.node.cmd
        return self

    def alive(self):
        return self.node.alive()

    def pid(self):
        return self.node.pid

    def kill(self):
        if self.proc is None:
            return None
        if self.alive():
            self.harness_stopped = True
        self.cluster.kill()
        return self.proc.returncode

    def stop(self, grace=None):
        """SIGTERM (Kafka's controlled shutdown), SIGKILL after `grace` s; returns
        (exit status, needed_sigkill) as `Broker.stop` does."""
        if self.proc is None:
            return None, False
        if not self.alive():
            return self.proc.returncode, False
        self.harness_stopped = True
        clean = self.cluster.stop(grace=kafka_ref.STOP_GRACE_S if grace is None else grace)
        return self.proc.returncode, not clean

    def restart(self, kill=False):
        if kill:
            self.kill()
        else:
            self.stop()
        return self.start()

    def log_tail(self, lines=LOG_TAIL_LINES):
        return self.node.log_tail(lines)

    def describe(self):
        state = "running" if self.alive() else \
            f"exited {self.proc.returncode if self.proc else '-'}"
        return (f"Apache Kafka {kafka_ref.KAFKA_VERSION}: {' '.join(self.cmd or [])}\n"
                f"config: {self.node.properties_path}\nstate: {state}\n"
                f"last {LOG_TAIL_LINES} lines of the Kafka log ({self.log_path}):\n"
                f"{self.log_tail()}")


@pytest.fixture(scope="session")
def kafka_classpath():
    """Resolves Kafka's jars once per session (Maven, cached)."""
    try:
        return kafka_ref.classpath()
    except kafka_ref.KafkaRefError as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture(scope="session")
def tls_certs(tmp_path_factory):
    """The run's test certificates (tests/compat/tls_certs.py): name → PEM file path, and
    "dir" → their directory."""
    import tls_certs as certs
    directory = tmp_path_factory.mktemp("certs")
    paths = certs.make_certs(directory)
    paths["dir"] = str(directory)
    return paths


def _with_certs(request, settings):
    """`settings` with `{certs}` in a value replaced by the test certificates' directory."""
    if not settings or not any("{certs}" in str(v) for v in settings.values()):
        return settings
    directory = request.getfixturevalue("tls_certs")["dir"]
    return {k: str(v).replace("{certs}", directory) if isinstance(v, str) else v
            for k, v in settings.items()}


@pytest.fixture
def broker(request, tmp_path):
    marker = request.node.get_closest_marker("sluice")
    opts = dict(marker.kwargs) if marker else {}
    settings = _with_certs(request, opts.get("settings"))
    if TARGET == "kafka":
        request.getfixturevalue("kafka_classpath")
        try:
            b = KafkaBroker(tmp_path / "kafka", settings=settings,
                            listeners=opts.get("listeners"))
        except BrokerError as e:
            pytest.fail(str(e), pytrace=False)
    else:
        b = Broker(request.getfixturevalue("sluice_bin"), tmp_path / "data",
                   tmp_path / "broker.log", cores=opts.get("cores", 2),
                   settings=settings, listeners=opts.get("listeners"))
    request.node._sluice_broker = b
    try:
        b.start()
    except BrokerError as e:
        pytest.fail(f"{e}\ncommand: {' '.join(b.cmd or [])}", pytrace=False)
    yield b
    died = None
    if b.proc is not None and b.proc.poll() is not None and not b.harness_stopped:
        died = f"the broker exited by itself (status {b.proc.returncode}) during the test"
    if TARGET == "kafka":
        # Kafka's own shutdown is not under test: end it at once.
        b.kill()
        if died:
            pytest.fail(f"{died}\n{b.describe()}", pytrace=False)
        return
    _status, needed_kill = b.stop()
    call = getattr(request.node, "_sluice_rep_call", None)
    if call is None or not call.passed:
        return  # the failure is reported already, with the broker log
    try:
        log = b.log_path.read_bytes().decode("utf-8", "replace")
    except OSError:
        log = ""
    panics = [line for line in log.splitlines() if "panicked at" in line]
    if died or panics:
        # Said here, not by the report hook: tmp_path (and so the log) is gone by then.
        pytest.fail(f"{died or 'the broker panicked'} although the test passed\n{b.describe()}",
                    pytrace=False)
    if needed_kill:
        warnings.warn(f"sluice did not exit within {STOP_GRACE_S} s of SIGTERM; killed")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, f"_sluice_rep_{rep.when}", rep)
    b = getattr(item, "_sluice_broker", None)
    if b is not None and rep.failed and rep.when != "teardown":
        rep.sections.append((f"{TARGET} broker ({rep.when})", b.describe()))



@pytest.fixture(scope="session")
def java_classpath():
    """Classpath of tests/java (Kafka 4.4 clients, Streams and tools), built once with Maven."""
    from jvm import build_classpath
    return build_classpath()
