#!/usr/bin/env python3
"""Runs partition scenarios (issue #25 point 3) against Sluice or Apache Kafka 4.4 and checks
Kafka's promises afterwards. One run: namespaces and bridge (netns.py), a cluster with every
node in its own namespace (targets.py), topic `nemesis` (3 partitions, replication factor 3,
min.insync.replicas 2), the workload (workload.py) for a warm-up, the fault (nemesis.py),
heal, `--heal-s` more seconds of workload, a final read, the checker (checker.py). The
namespaces and nodes are removed at the end, also after a failure or SIGTERM.

    tests/partitions/run.py --target sluice --nodes 3 --scenario leader-isolated
    tests/partitions/run.py --target kafka --nodes 5 --all-scenarios
    scripts/partition-nemesis --all        # both targets, 3 and 5 nodes, every scenario

Exit status 0 when every promise held in every run, 1 when one was broken, 2 when the kernel
refused namespaces (the message is its exact error).
"""

import argparse
import json
import random
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

import checker  # noqa: E402
import nemesis  # noqa: E402
from netns import Net, NetnsUnavailable  # noqa: E402
from targets import REPO, KafkaTarget, SluiceTarget  # noqa: E402
from workload import Workload, read_all  # noqa: E402

TOPIC, PARTITIONS, GROUP = "nemesis", 3, "nemesis-group"
WARMUP_S = 5.0
DRAIN_S = 5.0


class Context:
    def __init__(self, target, admin, rng, fault_s):
        self.target, self.admin, self.rng, self.fault_s = target, admin, rng, fault_s
        self.topic = TOPIC


def _create_topic(admin, timeout_s=60):
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)], operation_timeout=30,
                        request_timeout=30)[TOPIC].result()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        t = admin.list_topics(TOPIC, timeout=10).topics.get(TOPIC)
        if t and t.error is None and len(t.partitions) == PARTITIONS and all(
                p.leader >= 0 and len(p.isrs) == 3 for p in t.partitions.values()):
            return
        time.sleep(0.5)
    raise RuntimeError(f"topic {TOPIC} has no full ISR after {timeout_s} s")


def run_one(target_name, nodes, scenario, seed, fault_s, heal_s, workdir, sluice_bin,
            out=print, subnet="10.251.0"):
    """One scenario on a fresh cluster; returns the figures and the checker's verdicts."""
    rng = random.Random(seed)
    net = Net(nodes, subnet=subnet)
    target = admin = None
    try:
        net.setup()
        directory = Path(workdir) / f"{target_name}-{nodes}-{scenario}"
        target = (SluiceTarget(sluice_bin, directory, net) if target_name == "sluice"
                  else KafkaTarget(directory, net))
        out(f"== {target_name}, {nodes} nodes, {scenario}, seed {seed} ({directory})")
        target.start()
        admin = AdminClient({"bootstrap.servers": target.bootstrap})
        _create_topic(admin)
        wl = Workload(target.bootstrap, {i: f"{net.ip(i)}:9092" for i in net.ids}, TOPIC,
                      PARTITIONS, GROUP)
        wl.start()
        time.sleep(WARMUP_S)
        t_fault = time.monotonic()
        faults = nemesis.SCENARIOS[scenario](net, Context(target, admin, rng, fault_s))
        net.heal()
        t_heal = time.monotonic()
        for f in faults:
            out(f"  fault: {f}")
        time.sleep(heal_s)
        wl.stop_producing()
        time.sleep(DRAIN_S)
        wl.stop()
        h = wl.history
        h.final, ends = read_all(target.bootstrap, TOPIC, PARTITIONS)
        results = checker.check(h, out)
        (directory / "history.json").write_text(json.dumps(
            {k: getattr(h, k) for k in ("acks", "send_errors", "reads", "commits", "committed",
                                        "leaders", "final", "notes")}))
        after = [t for t, *_ in h.acks if t >= t_heal]
        times = sorted(t for t, *_ in h.acks if t >= t_fault)
        gaps = [b - a for a, b in zip([t_fault] + times, times)]
        figures = {
            "target": target_name, "nodes": nodes, "scenario": scenario, "seed": seed,
            "faults": len(faults), "sent": h.sent, "acknowledged": len(h.acks),
            "acked_during_fault": sum(1 for t, *_ in h.acks if t_fault <= t < t_heal),
            "send_errors": len(h.send_errors),
            "lost": len(results["acknowledged_not_lost"]),
            "heal_to_first_ack_s": round(min(after) - t_heal, 3) if after else None,
            "longest_ack_gap_s": round(max(gaps), 3) if gaps else None,
            "high_watermarks": ends,
            "violations": {k: len(v) for k, v in results.items()},
            "fault_log": faults, "notes": h.notes[:20],
        }
        out(f"  figures: {json.dumps({k: figures[k] for k in ('faults', 'sent', 'acknowledged', 'acked_during_fault', 'lost', 'heal_to_first_ack_s', 'longest_ack_gap_s')})}")
        figures["details"] = {k: v[:50] for k, v in results.items()}
        return figures
    finally:
        del admin  # its librdkafka threads would log every refused reconnect after the stop
        if target is not None:
            target.stop()
        net.teardown()


def _sigterm(*_):
    raise SystemExit(143)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", choices=["sluice", "kafka", "both"], default="sluice")
    ap.add_argument("--nodes", type=int, action="append", help="3 or 5 (repeatable)")
    ap.add_argument("--scenario", action="append", choices=sorted(nemesis.SCENARIOS))
    ap.add_argument("--all-scenarios", action="store_true")
    ap.add_argument("--seed", type=int, default=25)
    ap.add_argument("--fault-s", type=float, default=20.0)
    ap.add_argument("--heal-s", type=float, default=20.0)
    ap.add_argument("--sluice-bin", default=str(REPO / "target" / "release" / "sluice"))
    ap.add_argument("--workdir", help="cluster directories (default: a new temp dir)")
    ap.add_argument("--subnet", default="10.251.0",
                    help="first three octets of the nodes' addresses (one per concurrent run)")
    ap.add_argument("--json", help="write every run's figures to this file")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, _sigterm)
    scenarios = sorted(nemesis.SCENARIOS) if args.all_scenarios else (args.scenario or [])
    if not scenarios:
        ap.error("name a --scenario or pass --all-scenarios")
    targets = ["sluice", "kafka"] if args.target == "both" else [args.target]
    workdir = args.workdir or tempfile.mkdtemp(prefix="sluice-nemesis-")
    runs, failed = [], False
    try:
        for target in targets:
            for nodes in args.nodes or [3]:
                for scenario in scenarios:
                    r = run_one(target, nodes, scenario, args.seed, args.fault_s, args.heal_s,
                                workdir, args.sluice_bin, subnet=args.subnet)
                    runs.append(r)
                    failed |= any(r["violations"].values())
                    if args.json:
                        Path(args.json).write_text(json.dumps(runs, indent=1))
    except NetnsUnavailable as e:
        print(f"partition harness skipped: {e}", file=sys.stderr)
        return 2
    print(f"{len(runs)} runs, {'promises broken' if failed else 'every promise held'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
