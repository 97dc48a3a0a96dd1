#!/usr/bin/env python3
"""The `acks=all` p99 while partitions move (issue #30 point 1): the loadgen `latency` profile
on a 3-node cluster before any move, then again while kafka-reassign-partitions.sh keeps
moving the topic's replicas, Sluice and Apache Kafka 4.4 in one sitting.

    scripts/bench-reassign [--runs 2] [--seconds 40] [--rate 2000] [--prefill-mb 200]
                           [--throttle 10000000] [--only sluice|kafka] [--json FILE]
                           [--client-config KEY=VALUE ...]

Each run starts a fresh 3-node cluster (Sluice: `target/release/sluice`, one shard a node,
scripts/sluice_cluster.py; Kafka: scripts/kafka_ref.py's KafkaCluster, combined KRaft nodes),
every node pinned to CPU 0, the clients (loadgen, the tool's JVM) to CPU 1. The topic `moves`
has 6 partitions of replication factor 2 on brokers 1 and 2 only, and --prefill-mb of records
(1 kB values) so that every move copies data. Then:

1. `before`: `sluice-loadgen latency --acks all --rate R` on the topic for --seconds;
2. `during`: the same run, while moves follow one another from the end of its warm-up until
   it stops: half of the partitions onto broker 3 (the new broker), then every partition off
   broker 1 (decommissioning it), then back where they started, and again. Each move is
   started with `--execute --throttle T` (KIP-73, both sides), waited for through Metadata
   (every partition listing exactly its new replicas, all in sync), and ended with one
   `--verify` (which clears the throttles), as an operator runs the tool.

The tool is Kafka's own code (ReassignPartitionsCommand) in one JVM started and warmed before
the `before` window (scripts/WarmReassignTool.java), on CPU 1: a JVM started per move spends
about a second of CPU beside loadgen, a client-side stall the benchmark would count as the
broker's. The nodes are combined (broker and controller, as the Kafka target's), so the "new
broker" is the third node, present from the start, on which the topic has no replica at first
— the same moves for both brokers.

Prints one table (p50 / p99 / p99.99 ms before and during, the p99 ratio, moves completed in the
window, MB copied) for docs/benchmarks.md and keeps every loadgen JSON (--json summary, default
loadgen-out/reassign.json). Needs the release binaries (cargo build --release -p sluice-broker
--bin sluice; cargo build --release -p sluice-loadgen; SLUICE_BIN, SLUICE_LOADGEN_BIN override)
and Java 17+; kafka-reassign-partitions runs from scripts/kafka-ref's Kafka 4.4 class path
(resolved with Maven on first use). A short --seconds proves the script works; figures come from a quiet machine only.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import kafka_ref  # noqa: E402
from sluice_cluster import SluiceCluster  # noqa: E402
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

BROKER_CPU, CLIENT_CPU = 0, 1
TOPIC, PARTITIONS = "moves", 6
REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
WARMUP_S = 5
MOVE_TIMEOUT_S = 300
SETTINGS = {"log.segment.bytes": 64 << 20}

START = {p: [1, 2] if p % 2 == 0 else [2, 1] for p in range(PARTITIONS)}
HALF_ON_3 = {p: ([3, 2] if p % 2 == 0 else [2, 3]) if p < PARTITIONS // 2 else START[p]
             for p in range(PARTITIONS)}
OFF_1 = {p: [3, 2] if p % 2 == 0 else [2, 3] for p in range(PARTITIONS)}
# The cycle of moves: each plan's replicas differ from the one before it.
CYCLE = (("half onto broker 3", HALF_ON_3), ("off broker 1", OFF_1), ("back", START))


def pin(cpu):
    return lambda: os.sched_setaffinity(0, {cpu})


class ReassignTool:
    """kafka-reassign-partitions.sh's code (Kafka 4.4's ReassignPartitionsCommand) in one JVM
    started before anything is measured (scripts/WarmReassignTool.java), pinned to the
    clients' CPU: a JVM started per move spends about a second of CPU beside loadgen, which
    the benchmark would count as the broker's latency (a stall of 0.3-0.6 s of every
    partition at each start, measured 2026-12-07)."""

    def __init__(self, cp, bootstrap):
        self.bootstrap = bootstrap
        self.proc = subprocess.Popen(
            [kafka_ref.java_bin(), "-XX:+UseSerialGC", "-cp", cp,
             str(ROOT / "scripts" / "WarmReassignTool.java")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            preexec_fn=pin(CLIENT_CPU))

    def run(self, *args):
        """Runs the tool with `args` (after --bootstrap-server); returns its output. Exits the
        benchmark when the tool fails."""
        cmd = ["--bootstrap-server", self.bootstrap, *map(str, args)]
        self.proc.stdin.write("\t".join(cmd) + "\n")
        self.proc.stdin.flush()
        out = []
        for line in self.proc.stdout:
            if line.startswith("@@done "):
                if line.split()[1] != "0":
                    raise SystemExit(f"kafka-reassign-partitions {' '.join(cmd)} failed:\n"
                                     + "".join(out))
                return "".join(out)
            out.append(line)
        raise SystemExit("the reassignment tool's JVM ended:\n" + "".join(out))

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(30)


def assignment(admin):
    md = admin.list_topics(topic=TOPIC, timeout=10)
    t = md.topics.get(TOPIC)
    if t is None or t.error is not None:
        return {}
    return {p: (sorted(x.replicas), sorted(x.isrs)) for p, x in t.partitions.items()}


def wait_assignment(admin, want, timeout=MOVE_TIMEOUT_S):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = assignment(admin)
        if all(p in got and got[p][0] == sorted(r) and got[p][1] == sorted(r)
               for p, r in want.items()):
            return
        time.sleep(0.2)
    raise SystemExit(f"partitions not at {want} after {timeout} s: {assignment(admin)}")


def plan_file(work, name, plan):
    path = work / f"{name.replace(' ', '-')}.json"
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": TOPIC, "partition": p, "replicas": r} for p, r in sorted(plan.items())]}))
    return path


def prefill(bootstrap, megabytes):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20,
                  "batch.size": 1 << 20, "queue.buffering.max.kbytes": 1 << 20})
    value = b"p" * 1000
    for i in range(megabytes * 1000):
        while True:
            try:
                p.produce(TOPIC, value, partition=i % PARTITIONS)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    if p.flush(300) != 0:
        raise SystemExit("prefill: records left unacknowledged")


def loadgen(bootstrap, args, out, duration):
    binary = os.environ.get("SLUICE_LOADGEN_BIN", str(ROOT / "target/release/sluice-loadgen"))
    cmd = [binary, "latency", "--bootstrap", bootstrap, "--topic", TOPIC, "--acks", "all",
           "--rate", str(args.rate), "--duration", str(duration), "--warmup", str(WARMUP_S),
           "--no-baselines", "--no-floor", "--json", str(out)]
    for kv in args.client_config:
        cmd += ["--client-config", kv]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, preexec_fn=pin(CLIENT_CPU))


def figures(out):
    b = json.loads(out.read_text())["brokers"][0]
    return {k: b[k] for k in ("p50_ms", "p99_ms", "p9999_ms")}


class Moves(threading.Thread):
    """Runs the cycle of moves until `stop` is set, counting the completed ones."""

    def __init__(self, tool, admin, work, throttle):
        super().__init__(daemon=True)
        self.tool, self.admin, self.work = tool, admin, work
        self.throttle = throttle
        self.stop = threading.Event()
        self.completed, self.error = [], None
        self.replicas_added = 0

    def run(self):
        try:
            step, current = 0, START
            while not self.stop.is_set():
                name, plan = CYCLE[step % len(CYCLE)]
                path = plan_file(self.work, name, plan)
                t0 = time.monotonic()
                self.tool.run("--reassignment-json-file", path, "--execute", "--throttle",
                              self.throttle)
                wait_assignment(self.admin, plan)
                self.tool.run("--reassignment-json-file", path, "--verify")
                self.completed.append((name, round(time.monotonic() - t0, 1)))
                self.replicas_added += sum(len(set(plan[p]) - set(current[p])) for p in plan)
                step, current = step + 1, plan
        except BaseException as e:  # reported by the caller
            self.error = e


def start_cluster(kind, work):
    if kind == "sluice":
        binary = os.environ.get("SLUICE_BIN", str(ROOT / "target/release/sluice"))
        c = SluiceCluster(binary, work / "sluice", nodes=3, settings=SETTINGS,
                          preexec_fn=pin(BROKER_CPU))
        c.start()
        return c, c.bootstrap()
    c = kafka_ref.KafkaCluster(work / "kafka", 3, SETTINGS)
    c.start(preexec_fn=pin(BROKER_CPU))
    return c, c.bootstrap


def one_run(kind, args, cp, work):
    cluster, bootstrap = start_cluster(kind, work)
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS,
                                      replica_assignment=[START[p] for p in range(PARTITIONS)])]
                            )[TOPIC].result(60)
        wait_assignment(admin, START)
        prefill(bootstrap, args.prefill_mb)
        tool = ReassignTool(cp, bootstrap)
        # Warmed before the first window: the start plan is complete, so --verify only reports it
        # (and clears throttles that are not there).
        tool.run("--reassignment-json-file", plan_file(work, "start", START), "--verify")
        tool.run("--list")
        before = work / f"{kind}-before.json"
        lg = loadgen(bootstrap, args, before, args.seconds)
        if lg.wait() != 0:
            raise SystemExit(f"loadgen exited {lg.returncode} (before)")
        during = work / f"{kind}-during.json"
        lg = loadgen(bootstrap, args, during, args.seconds)
        time.sleep(WARMUP_S)
        moves = Moves(tool, admin, work, args.throttle)
        moves.start()
        rc = lg.wait()
        moves.stop.set()
        moves.join(MOVE_TIMEOUT_S + 60)
        if moves.error is not None:
            raise SystemExit(f"moves failed: {moves.error!r}")
        if rc != 0:
            raise SystemExit(f"loadgen exited {rc} (during)")
        tool.close()
        b, d = figures(before), figures(during)
        return {"broker": kind, "before": b, "during": d,
                "p99_ratio": round(d["p99_ms"] / b["p99_ms"], 2),
                "moves": moves.completed,
                # Each new replica copies its partition's prefill (and what the load added).
                "copied_mb": round(moves.replicas_added * args.prefill_mb / PARTITIONS, 1)}
    finally:
        if kind == "sluice":
            cluster.stop()
        else:
            cluster.stop(grace=30)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=40, help="measured seconds of each run")
    ap.add_argument("--rate", type=int, default=2000, help="records/s of the latency profile")
    ap.add_argument("--prefill-mb", type=int, default=200)
    ap.add_argument("--throttle", type=int, default=10_000_000, help="--throttle of each move, B/s")
    ap.add_argument("--only", choices=("sluice", "kafka"))
    ap.add_argument("--client-config", action="append", default=[], metavar="KEY=VALUE",
                    help="a librdkafka property for loadgen's clients (repeat), e.g. "
                         "fetch.error.backoff.ms=10")
    ap.add_argument("--json", type=Path, default=ROOT / "loadgen-out" / "reassign.json")
    args = ap.parse_args()
    cp = kafka_ref.classpath()  # Kafka 4.4's, kafka-tools included
    kinds = [args.only] if args.only else ["sluice", "kafka"]
    results = []
    args.json.parent.mkdir(parents=True, exist_ok=True)
    for run in range(args.runs):
        for kind in kinds:
            work = Path(tempfile.mkdtemp(prefix=f"bench-reassign-{kind}-"))
            try:
                r = one_run(kind, args, cp, work)
                r["run"] = run + 1
                results.append(r)
                for phase in ("before", "during"):
                    shutil.copy(work / f"{kind}-{phase}.json",
                                args.json.parent / f"reassign-{kind}-{run + 1}-{phase}.json")
                print(json.dumps(r), flush=True)
            finally:
                shutil.rmtree(work, ignore_errors=True)
    args.json.write_text(json.dumps({"rate": args.rate, "seconds": args.seconds,
                                     "client_config": args.client_config,
                                     "prefill_mb": args.prefill_mb, "throttle": args.throttle,
                                     "runs": results}, indent=2))
    print("\n| broker | run | p50 / p99 / p99.99 before, ms | during, ms | p99 during/before "
          "| moves completed | MB copied |\n|---|---|---|---|---|---|---|")
    for r in results:
        b, d = r["before"], r["during"]
        print(f"| {r['broker']} | {r['run']} | {b['p50_ms']:.2f} / {b['p99_ms']:.2f} / "
              f"{b['p9999_ms']:.2f} | {d['p50_ms']:.2f} / {d['p99_ms']:.2f} / "
              f"{d['p9999_ms']:.2f} | {r['p99_ratio']:.2f}× | {len(r['moves'])} | "
              f"{r['copied_mb']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
