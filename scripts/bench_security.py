#!/usr/bin/env python3
"""Security benchmarks (issue #29 point 8): the `latency` and `throughput` profiles over
SASL_SSL (SCRAM-SHA-256) beside PLAINTEXT, Sluice and Apache Kafka 4.4 in one sitting; new TLS
connections per second; the broker CPU per record that TLS adds.

    scripts/bench-security [--seconds 30] [--warmup 5] [--connections 1000] [--json FILE]

Test certificates are made at run time (tests/compat/tls_certs.py: a CA and a server
certificate for 127.0.0.1 / localhost). Each broker runs alone on CPU 0 with a PLAINTEXT and a
SASL_SSL listener (SCRAM-SHA-256; user `bench` created through the admin API, as
`kafka-configs.sh --alter --add-config SCRAM-SHA-256=[...] --entity-type users` does): Sluice
(`target/release/sluice`, one shard) first, then Kafka (scripts/kafka-ref's KafkaCluster, one
KRaft node, the same listeners). Against each, `sluice-loadgen` on CPU 1 runs `latency` and
`throughput` over PLAINTEXT and over SASL_SSL (--seconds measured after --warmup each, no
baselines; the PLAINTEXT `latency` run also measures the floor, `sluice-floor`, in the same
run, whose p99 and CPU per record the table prints beside it), then `connect` (--connections connections one at a time: TLS handshake
over SASL_SSL, TCP only over PLAINTEXT, and one ApiVersions round trip each).

Prints one table (p50/p99/p99.99 ms, msg/s, broker CPU µs per record and what SASL_SSL adds to
it, connections/s and broker CPU µs per connection) for docs/benchmarks.md; every loadgen JSON
result and a summary (--json, default loadgen-out/security.json) are kept. Needs the release
binaries: cargo build --release -p sluice-broker -p sluice-loadgen (SLUICE_BIN and
SLUICE_LOADGEN_BIN override them). A short --seconds proves the script works; figures come
from a quiet machine only.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests" / "compat"))

import kafka_ref  # noqa: E402
import tls_certs  # noqa: E402
from bench_compaction import pin_broker, wait_port, BROKER_CPU, CLIENT_CPU  # noqa: E402
from confluent_kafka.admin import (AdminClient, ScramCredentialInfo,  # noqa: E402
                                   ScramMechanism, UserScramCredentialUpsertion)

USER, PASSWORD = "bench", "bench-secret"
SCRAM_ITERATIONS = 4096
PROFILES = ("latency", "throughput")
PROTOCOLS = ("PLAINTEXT", "SASL_SSL")


def listener_settings(certs):
    """SCRAM-SHA-256 on the SASL_SSL listener, the server certificate as a PEM keystore (the
    same keys for Sluice and Kafka)."""
    return {
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": certs["server"],
    }


def client_config(protocol, certs):
    """loadgen's --client-config flags for `protocol`."""
    if protocol == "PLAINTEXT":
        return ["--client-config", "security.protocol=PLAINTEXT"]
    props = {"security.protocol": "SASL_SSL", "ssl.ca.location": certs["ca"],
             "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": USER, "sasl.password": PASSWORD}
    return [arg for k, v in props.items() for arg in ("--client-config", f"{k}={v}")]


class Sluice:
    name = "sluice"

    def __init__(self, work, certs):
        self.work = work
        self.settings = listener_settings(certs)
        self.port = kafka_ref.free_port()
        self.sasl_ssl_port = kafka_ref.free_port()
        self.proc = None

    def bootstrap(self, protocol):
        return f"127.0.0.1:{self.sasl_ssl_port if protocol == 'SASL_SSL' else self.port}"

    def start(self):
        binary = Path(os.environ.get("SLUICE_BIN", ROOT / "target" / "release" / "sluice"))
        data = self.work / "sluice-data"
        data.mkdir(parents=True, exist_ok=True)
        cmd = [str(binary), "--data-dir", str(data), "--smp", "1",
               "--admin-listen", f"127.0.0.1:{kafka_ref.free_port()}",
               "--set", f"listeners=PLAINTEXT://{self.bootstrap('PLAINTEXT')},"
                        f"SASL_SSL://{self.bootstrap('SASL_SSL')}",
               "--set", "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL"]
        for k, v in self.settings.items():
            cmd += ["--set", f"{k}={v}"]
        with open(self.work / "sluice.log", "ab") as log:
            log.write(f"\n=== bench start: {' '.join(cmd)}\n".encode())
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                         preexec_fn=pin_broker,
                                         env=dict(os.environ, NO_COLOR="1"))
        wait_port(self.port, self.proc)
        wait_port(self.sasl_ssl_port, self.proc)

    @property
    def pid(self):
        return self.proc.pid

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(60)

    def discard(self):
        """Removes the broker's data (tens of GB after the throughput runs)."""
        shutil.rmtree(self.work / "sluice-data", ignore_errors=True)


class Kafka:
    name = "kafka"

    def __init__(self, work, certs):
        self.work = work / "kafka"
        self.cluster = kafka_ref.KafkaCluster(self.work, 1, listener_settings(certs))
        self.node = self.cluster.nodes[0]
        self.sasl_ssl_port = kafka_ref.free_port()
        n = self.node
        endpoints = (f"PLAINTEXT://{n.host}:{n.port},CONTROLLER://{n.host}:{n.controller_port},"
                     f"SASL_SSL://{n.host}:{self.sasl_ssl_port}")
        self.cluster.settings.update({
            "listeners": endpoints,
            "advertised.listeners": endpoints,
            "listener.security.protocol.map":
                "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
        })

    def bootstrap(self, protocol):
        port = self.sasl_ssl_port if protocol == "SASL_SSL" else self.node.port
        return f"{self.node.host}:{port}"

    def start(self):
        self.cluster.start(preexec_fn=pin_broker)

    @property
    def pid(self):
        return self.node.pid

    def stop(self):
        self.cluster.stop()

    def discard(self):
        """Removes the broker's data (tens of GB after the throughput runs)."""
        shutil.rmtree(self.work, ignore_errors=True)


def add_scram_user(bootstrap):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, SCRAM_ITERATIONS)
    for future in admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion(USER, info, PASSWORD.encode())]).values():
        future.result(timeout=60)


def loadgen(out, name, scenario_args):
    """Runs sluice-loadgen on CPU 1; returns its JSON result. A run loadgen calls incomplete
    (records not delivered: a broker that could not keep up) still has its result, kept and
    marked incomplete in the table; a run without one stops the benchmark."""
    binary = os.environ.get("SLUICE_LOADGEN_BIN", str(ROOT / "target" / "release" / "sluice-loadgen"))
    json_path = out / f"{name}.json"
    json_path.unlink(missing_ok=True)
    cmd = [binary, *scenario_args, "--broker-cpus", str(BROKER_CPU), "--loadgen-cpus",
           str(CLIENT_CPU), "--json", str(json_path)]
    print(f"\n== {name}: {' '.join(cmd)}", flush=True)
    proc = subprocess.run(cmd)
    if proc.returncode != 0 and not json_path.exists():
        raise SystemExit(f"sluice-loadgen exited with {proc.returncode} ({name})")
    return json.loads(json_path.read_text())


def bench_broker(broker, args, certs, out):
    """Every run against one broker; returns its rows."""
    broker.start()
    try:
        add_scram_user(broker.bootstrap("PLAINTEXT"))
        rows = {"profiles": {}, "connect": {}}
        for profile in PROFILES:
            for protocol in PROTOCOLS:
                # The floor of the run: once per broker, beside its PLAINTEXT latency run.
                with_floor = profile == "latency" and protocol == "PLAINTEXT"
                # Kafka's JVM warms for --kafka-warmup seconds before its first measured run.
                warmup = args.warmup
                if broker.name == "kafka" and not rows["profiles"]:
                    warmup = max(warmup, args.kafka_warmup)
                result = loadgen(out, f"{broker.name}-{profile}-{protocol.lower()}", [
                    profile, "--bootstrap", broker.bootstrap(protocol),
                    "--bootstrap-pid", str(broker.pid), *client_config(protocol, certs),
                    "--duration", str(args.seconds), "--warmup", str(warmup),
                    *([] if with_floor else ["--no-floor"]), "--no-baselines"])
                (b,) = result["brokers"]
                if with_floor and result.get("floor"):
                    f = result["floor"]
                    rows["floor"] = {"p50_ms": f["p50_ms"], "p99_ms": f["p99_ms"],
                                     "p9999_ms": f["p9999_ms"],
                                     "broker_us_per_record": f["cpu"]["broker_us_per_record"]}
                rows["profiles"][f"{profile}/{protocol}"] = {
                    "p50_ms": b["p50_ms"], "p99_ms": b["p99_ms"], "p9999_ms": b["p9999_ms"],
                    "msgs_per_sec": b["msgs_per_sec"],
                    "broker_us_per_record": b["cpu"]["broker_us_per_record"],
                    "complete": b["sent"] > 0 and b["received"] >= b["sent"] and b["failed"] == 0,
                }
        for protocol in PROTOCOLS:
            result = loadgen(out, f"{broker.name}-connect-{protocol.lower()}", [
                "connect", "--bootstrap", broker.bootstrap(protocol),
                "--bootstrap-pid", str(broker.pid), *client_config(protocol, certs),
                "--connections", str(args.connections)])
            (b,) = result["brokers"]
            rows["connect"][protocol] = {
                "connections_per_sec": b["connections_per_sec"],
                "broker_us_per_connection": b["broker_us_per_connection"]}
        return rows
    finally:
        broker.stop()
        broker.discard()


def fmt(v, digits=2):
    return "-" if v is None else f"{v:,.{digits}f}"


def print_table(summary):
    print(f"\nsecurity figures: {summary['seconds']} s measured per run after "
          f"{summary['warmup']} s warm-up; broker on CPU {BROKER_CPU}, loadgen on CPU "
          f"{CLIENT_CPU}; SASL_SSL = TLS (rustls on Sluice, JSSE on Kafka) + SCRAM-SHA-256\n")
    print("| broker | profile | security | p50 ms | p99 ms | p99.99 ms | msg/s "
          "| broker CPU µs/record | added by SASL_SSL µs/record |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for name, rows in summary["brokers"].items():
        for profile in PROFILES:
            plain = rows["profiles"][f"{profile}/PLAINTEXT"]["broker_us_per_record"]
            for protocol in PROTOCOLS:
                r = rows["profiles"][f"{profile}/{protocol}"]
                added = None
                if protocol == "SASL_SSL" and plain is not None \
                        and r["broker_us_per_record"] is not None:
                    added = r["broker_us_per_record"] - plain
                incomplete = "" if r["complete"] else " (incomplete)"
                print(f"| {name} | {profile}{incomplete} | {protocol} | {fmt(r['p50_ms'], 3)} "
                      f"| {fmt(r['p99_ms'], 3)} | {fmt(r['p9999_ms'], 3)} "
                      f"| {fmt(r['msgs_per_sec'], 0)} | {fmt(r['broker_us_per_record'])} "
                      f"| {fmt(added)} |")
    print("\n| floor of the run (sluice-floor, PLAINTEXT, beside the broker's latency run) "
          "| p50 ms | p99 ms | p99.99 ms | CPU µs/record |")
    print("|---|---:|---:|---:|---:|")
    for name, rows in summary["brokers"].items():
        f = rows.get("floor")
        if f:
            print(f"| beside {name} | {fmt(f['p50_ms'], 3)} | {fmt(f['p99_ms'], 3)} "
                  f"| {fmt(f['p9999_ms'], 3)} | {fmt(f['broker_us_per_record'])} |")
    print("\n| broker | new connections | connections/s | broker CPU µs/connection |")
    print("|---|---|---:|---:|")
    for name, rows in summary["brokers"].items():
        for protocol in PROTOCOLS:
            c = rows["connect"][protocol]
            what = "TLS handshake + ApiVersions" if protocol == "SASL_SSL" else "TCP + ApiVersions"
            print(f"| {name} | {what} | {fmt(c['connections_per_sec'], 0)} "
                  f"| {fmt(c['broker_us_per_connection'], 1)} |")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=30.0,
                   help="measured seconds per loadgen run, after the warm-up [30]")
    p.add_argument("--warmup", type=float, default=5.0, help="warm-up seconds per run [5]")
    p.add_argument("--kafka-warmup", type=float, default=60.0,
                   help="warm-up seconds of Kafka's first run (its JVM) [60]")
    p.add_argument("--connections", type=int, default=1000,
                   help="connections per connect run [1000]")
    p.add_argument("--brokers", default="sluice,kafka",
                   help="which brokers, in order [sluice,kafka]")
    p.add_argument("--json", type=Path, help="summary file [loadgen-out/security.json]")
    args = p.parse_args()
    out = (args.json.parent if args.json else ROOT / "loadgen-out") / "security"
    out.mkdir(parents=True, exist_ok=True)
    summary = {"schema": "sluice-bench-security/1", "seconds": args.seconds,
               "warmup": args.warmup, "connections": args.connections, "brokers": {}}
    with tempfile.TemporaryDirectory(prefix="bench-security-") as tmp:
        work = Path(tmp)
        certs = tls_certs.make_certs(work / "certs")
        kinds = {"sluice": Sluice, "kafka": Kafka}
        for name in args.brokers.split(","):
            if name not in kinds:
                raise SystemExit(f"--brokers: unknown broker {name!r} (sluice, kafka)")
            started = time.monotonic()
            summary["brokers"][name] = bench_broker(kinds[name](work, certs), args, certs, out)
            print(f"\n{name}: done in {time.monotonic() - started:.0f} s", flush=True)
    json_path = args.json or ROOT / "loadgen-out" / "security.json"
    json_path.write_text(json.dumps(summary, indent=2) + "\n")
    print_table(summary)
    print(f"\nwrote {json_path} and each run's loadgen result under {out}")


if __name__ == "__main__":
    main()
