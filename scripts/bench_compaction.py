#!/usr/bin/env python3
"""Compaction benchmarks (issue #27 points 3, 6 and 8), Sluice beside Apache Kafka 4.4 in one
sitting. Each broker runs alone on CPU 0 (one shard for Sluice), the clients on CPU 1.

    scripts/bench-compaction cleaner  [--bytes N] [--keys K]   # cleaner throughput, both
    scripts/bench-compaction p99      [--bytes N] [--pairs P]  # latency p99, cleaning or not
    scripts/bench-compaction offsets  [--commits N]            # coordinator load time

cleaner: loads N bytes (default 1 GiB) of 1,000-byte records over K keys (default 100,000)
into a one-partition compacted topic (segment.bytes 64 MiB) whose min.compaction.lag.ms holds
the cleaner back, then sets it to 0 and times the clean: the cleaner's own figures from each
broker's log (Sluice's `cleaned ... ms=`, Kafka's LogCleaner stats), the wall time from the
change to the end of the clean, the broker's CPU seconds over that time, its resident memory
before and at the end, and the partition's bytes before and after.

p99: on one Sluice broker, --pairs (default 4) pairs of `sluice-loadgen latency` windows
(10,000 msg/s, 1 KiB, acks=all; --duration s each after a 5 s warm-up), one with the cleaner
idle and one while it compacts a partition of --bytes on the same shard (a topic per pair,
loaded and held back up front, released 2 s into its window), in alternating order; the
windows of each condition are pooled (their HdrHistogram logs added) and the pooled p99s
compared, so that one stall of the machine does not decide the figure. The floor and the
baselines are measured once, in a first window that is not counted.

offsets: `--commits` (default 10,000,000) offset commits by 100 groups over 1,000 partitions
(OffsetCommit v2 of 1,000 partitions each, pipelined), offsets.topic.segment.bytes 1 MiB so
segments roll; then the coordinator's load time after a restart, with the cleaner off (the
whole history replayed) and again after the cleaner has compacted `__consumer_offsets`: from
the process start until every group's OffsetFetch answers its last offsets, and the sum of
the per-partition load times in the broker's log.

Results print as a table and go to --json (default loadgen-out/compaction-<what>.json).
"""

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests" / "compat"))

import kafka_ref  # noqa: E402
import kafka_wire as kw  # noqa: E402
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry,  # noqa: E402
                                   ConfigResource, NewTopic)

BROKER_CPU = 0
CLIENT_CPU = 1
SEGMENT_BYTES = 64 << 20
HOLD_MS = 86_400_000
CLEANER_BACKOFF_MS = 200
PAGE = os.sysconf("SC_PAGE_SIZE")
TICKS = os.sysconf("SC_CLK_TCK")


def pin_broker():
    os.sched_setaffinity(0, {BROKER_CPU})


def cpu_seconds(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def memory_mib(pid):
    status = Path(f"/proc/{pid}/status").read_text()
    get = lambda k: int(re.search(rf"^{k}:\s+(\d+) kB", status, re.M).group(1)) / 1024  # noqa: E731
    return {"rss_mib": round(get("VmRSS"), 1), "hwm_mib": round(get("VmHWM"), 1)}


def dir_bytes(path, suffix=".log"):
    """Logical bytes of the segment files under `path` (what the segments hold)."""
    return sum(p.stat().st_size for p in Path(path).rglob(f"*{suffix}") if p.is_file())


class Sluice:
    name = "sluice"

    def __init__(self, work, settings):
        self.data = work / "sluice-data"
        self.data.mkdir(parents=True, exist_ok=True)
        self.log_path = work / "sluice.log"
        self.port = kafka_ref.free_port()
        self.admin_port = kafka_ref.free_port()
        self.settings = settings
        self.proc = None

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    def start(self, extra=None):
        binary = Path(os.environ.get("SLUICE_BIN", ROOT / "target" / "release" / "sluice"))
        cmd = [str(binary), "--listen", self.bootstrap,
               "--admin-listen", f"127.0.0.1:{self.admin_port}",
               "--data-dir", str(self.data), "--smp", "1"]
        for k, v in {**self.settings, **(extra or {})}.items():
            cmd += ["--set", f"{k}={v}"]
        self.started_at = time.monotonic()
        with open(self.log_path, "ab") as log:
            log.write(f"\n=== bench start: {' '.join(cmd)}\n".encode())
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                         preexec_fn=pin_broker, env=dict(os.environ, NO_COLOR="1"))
        wait_port(self.port, self.proc)

    @property
    def pid(self):
        return self.proc.pid

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(60)

    def partition_dir(self, topic):
        return self.data / f"{topic}-0"

    def log_text(self):
        return self.log_path.read_text(errors="replace")

    def metric(self, name):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.admin_port}/metrics", timeout=10) as r:
            text = r.read().decode()
        return sum(float(line.split()[-1]) for line in text.splitlines()
                   if line.startswith(name) and not line.startswith("#"))


class Kafka:
    name = "kafka"

    def __init__(self, work, settings):
        self.cluster = kafka_ref.KafkaCluster(work / "kafka", 1, settings)
        self.proc = None

    @property
    def bootstrap(self):
        return self.cluster.bootstrap

    def start(self):
        self.cluster.start(preexec_fn=pin_broker)

    @property
    def pid(self):
        return self.cluster.nodes[0].pid

    def stop(self):
        self.cluster.stop()

    def partition_dir(self, topic):
        return self.cluster.nodes[0].data_dir / f"{topic}-0"

    def log_text(self):
        return self.cluster.nodes[0].log_path.read_text(errors="replace")


def wait_port(port, proc, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"broker exited with {proc.returncode} while starting")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"broker not serving on {port} after {timeout} s")


def admin(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap})


def create_compacted(bootstrap, topic, hold=True):
    a = admin(bootstrap)
    config = {"cleanup.policy": "compact", "segment.bytes": str(SEGMENT_BYTES),
              "min.cleanable.dirty.ratio": "0.01",
              "min.compaction.lag.ms": str(HOLD_MS if hold else 0)}
    a.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(60)
    time.sleep(1)


def release_cleaner(bootstrap, topic):
    a = admin(bootstrap)
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("min.compaction.lag.ms", "0",
                    incremental_operation=AlterConfigOpType.SET)])
    for f in a.incremental_alter_configs([res]).values():
        f.result(30)


def load(bootstrap, topic, total_bytes, keys, value_bytes=1000):
    """Produces `total_bytes` of values over `keys` keys (acks=1, batched); returns records."""
    os.sched_setaffinity(0, {CLIENT_CPU})
    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 20,
                  "batch.size": 1 << 20, "queue.buffering.max.kbytes": 1 << 20,
                  "compression.type": "none", "enable.idempotence": False})
    value = b"v" * value_bytes
    n = total_bytes // value_bytes
    for i in range(n):
        while True:
            try:
                p.produce(topic, key=b"key-%07d" % (i % keys), value=value, partition=0)
                break
            except BufferError:
                p.poll(0.01)
        if i % 10000 == 0:
            p.poll(0)
    assert p.flush(120) == 0
    return n


SLUICE_PASS = re.compile(r"^(\S+)Z\s+INFO .*cleaned tp=(\S+) from=(\d+) to=(\d+) "
                         r"bytes_before=(\d+) bytes_after=(\d+) ms=(\d+)", re.M)
KAFKA_PASS = re.compile(r"\[([^\]]+)\] INFO \[kafka-log-cleaner-thread-\d+\]:\s*\n"
                        r"\s*Log cleaner thread \d+ cleaned log (\S+) "
                        r"\(dirty section = \[(\d+), (\d+)\]\)", re.M)
KAFKA_STATS = re.compile(r"([\d,.]+) MB of log processed in ([\d,.]+) seconds \(([\d,.]+) MB/sec\)")
KAFKA_MAP = re.compile(r"Indexed ([\d,.]+) MB in ([\d,.]+) seconds")


def num(s):
    return float(s.replace(",", ""))


def wait_clean(broker, topic, since_len, timeout=300):
    """Waits until the broker's log shows a finished clean of `topic`-0 after offset
    `since_len` of the log text, then 3 s with no further pass; returns the passes."""
    deadline = time.monotonic() + timeout
    last_count, quiet_since = 0, None
    while time.monotonic() < deadline:
        text = broker.log_text()[since_len:]
        if broker.name == "sluice":
            passes = [m for m in SLUICE_PASS.finditer(text) if m.group(2) == f"{topic}-0"]
        else:
            passes = [m for m in KAFKA_PASS.finditer(text) if m.group(2) == f"{topic}-0"]
        if passes and len(passes) == last_count:
            if quiet_since and time.monotonic() - quiet_since >= 3:
                return passes, text
        else:
            last_count, quiet_since = len(passes), time.monotonic()
        time.sleep(0.1)
    raise SystemExit(f"{broker.name}: no finished clean of {topic} in {timeout} s")


def bench_cleaner(args, work):
    results = {}
    for cls, settings in ((Sluice, {"log.cleaner.backoff.ms": CLEANER_BACKOFF_MS}),
                          (Kafka, {"log.cleaner.backoff.ms": CLEANER_BACKOFF_MS})):
        if args.only and cls.name != args.only:
            continue
        broker = cls(work / cls.name, settings)
        broker.start()
        try:
            topic = "bench-clean"
            create_compacted(broker.bootstrap, topic)
            t = time.monotonic()
            records = load(broker.bootstrap, topic, args.bytes, args.keys)
            load_s = time.monotonic() - t
            time.sleep(2)
            before = dir_bytes(broker.partition_dir(topic))
            mem_before = memory_mib(broker.pid)
            since = len(broker.log_text())
            cpu0 = cpu_seconds(broker.pid)
            t0 = time.monotonic()
            release_cleaner(broker.bootstrap, topic)
            passes, text = wait_clean(broker, topic, since)
            wall_s = time.monotonic() - t0 - 3  # less the quiet period
            cpu_s = cpu_seconds(broker.pid) - cpu0
            after = dir_bytes(broker.partition_dir(topic))
            r = {"records": records, "load_s": round(load_s, 1), "log_bytes_before": before,
                 "log_bytes_after": after, "memory_before": mem_before,
                 "memory_after": memory_mib(broker.pid), "passes": len(passes),
                 "wall_s_to_done": round(wall_s, 2), "broker_cpu_s": round(cpu_s, 2)}
            if broker.name == "sluice":
                ms = sum(int(m.group(7)) for m in passes)
                cleaned = sum(int(m.group(5)) for m in passes)
                r.update({"clean_s": ms / 1000, "cleaned_bytes": cleaned,
                          "cleaned_bytes_after": sum(int(m.group(6)) for m in passes),
                          "mb_per_s": round(cleaned / 1e6 / (ms / 1000), 1) if ms else None})
            else:
                stats = [tuple(num(x) for x in m.groups()) for m in KAFKA_STATS.finditer(text)]
                maps = [tuple(num(x) for x in m.groups()) for m in KAFKA_MAP.finditer(text)]
                # Kafka's LogCleaner prints MiB as "MB".
                cleaned = int(sum(s[0] for s in stats) * (1 << 20))
                secs = sum(s[1] for s in stats)
                r.update({"clean_s": secs, "cleaned_bytes": cleaned,
                          "map_mib": sum(m[0] for m in maps),
                          "mb_per_s": round(cleaned / 1e6 / secs, 1) if secs else None})
            r["mb_per_broker_cpu_s"] = round(r["cleaned_bytes"] / 1e6 / cpu_s, 1) if cpu_s else None
            results[broker.name] = r
        finally:
            broker.stop()
    return results


WARMUP_S = 5


REPORT_LINE = re.compile(r"^t=\s*([\d.]+) s")


def loadgen(bootstrap, pid, json_path, duration, during=None, floor=True):
    """Runs `sluice-loadgen latency` against `bootstrap`; `during(t)` (if given) is called
    2 s into the measured window (by loadgen's per-second report lines, which start after its
    baselines and warm-up), with the wall time it was called at. `floor`: loadgen measures its
    baselines and the floor first. Returns the wall time the measured window started at and
    loadgen's JSON."""
    cmd = [str(ROOT / "target" / "release" / "sluice-loadgen"), "latency",
           "--bootstrap", bootstrap, "--bootstrap-pid", str(pid),
           "--broker-cpus", str(BROKER_CPU), "--loadgen-cpus", str(CLIENT_CPU),
           "--duration", str(duration),
           "--warmup", str(WARMUP_S), "--report-every", "1", "--json", str(json_path)]
    if not floor:
        cmd += ["--no-baselines", "--no-floor"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    window_started = None
    for line in proc.stdout:
        m = REPORT_LINE.match(line.strip())
        if not m:
            continue
        if window_started is None:
            window_started = time.time() - float(m.group(1))
        if during is not None and float(m.group(1)) >= 2:
            during(time.time())
            during = None
    if proc.wait() != 0:
        raise SystemExit(f"sluice-loadgen exited with {proc.returncode}")
    return window_started, json.loads(Path(json_path).read_text())


def pooled(hlogs):
    """One histogram (µs) of every interval of loadgen's `.hlog` files `hlogs`."""
    from hdrh.histogram import HdrHistogram
    from hdrh.log import HistogramLogReader
    # loadgen's histogram range: 1 µs to one hour, 3 significant figures (loadgen/src/latency.rs).
    def histogram():
        return HdrHistogram(1, 3_600_000_000, 3)
    total = histogram()
    for path in hlogs:
        reader = HistogramLogReader(str(path), histogram())
        while (h := reader.get_next_interval_histogram()) is not None:
            total.add(h)
    return total


def summary(h):
    return {"records": h.get_total_count(),
            **{f"p{k}_ms": round(h.get_value_at_percentile(q) / 1000, 3)
               for k, q in (("50", 50), ("99", 99), ("9999", 99.99))},
            "max_ms": round(h.get_max_value() / 1000, 3)}


def bench_p99(args, work):
    """--pairs pairs of `latency` windows on one Sluice broker: one with the cleaner idle, one
    with it compacting a partition of --bytes (its own topic per pair, loaded and held back
    up front), in alternating order (quiet first in even pairs, cleaning first in odd ones),
    so that drift and the machine's occasional stalls fall on both conditions alike. The
    windows of each condition are pooled (their HdrHistogram logs added) and the pooled p99s
    compared; each window's own p99 is kept too."""
    settings = {"log.cleaner.backoff.ms": CLEANER_BACKOFF_MS}
    if args.cleaner_io_rate:
        settings["log.cleaner.io.max.bytes.per.second"] = args.cleaner_io_rate
    broker = Sluice(work / "sluice", settings)
    broker.start()
    try:
        topics = [f"bench-clean-{i}" for i in range(args.pairs)]
        for topic in topics:
            create_compacted(broker.bootstrap, topic)
            load(broker.bootstrap, topic, args.bytes, args.keys)
        time.sleep(2)
        # One window not counted, with the floor and the baselines: the first window after
        # the load ran into a stall of 0.34 s (2026-12-07), whichever condition it measured.
        _, warm = loadgen(broker.bootstrap, broker.pid, work / "warm.json", args.duration)
        windows, hlogs = [], {"quiet": [], "cleaning": []}
        for i, topic in enumerate(topics):
            order = ("quiet", "cleaning") if i % 2 == 0 else ("cleaning", "quiet")
            for kind in order:
                out = work / f"{kind}-{i}.json"
                if kind == "quiet":
                    _, result = loadgen(broker.bootstrap, broker.pid, out, args.duration,
                                        floor=False)
                    w = {"pair": i, "kind": kind}
                else:
                    since = len(broker.log_text())
                    released = []
                    started, result = loadgen(
                        broker.bootstrap, broker.pid, out, args.duration, floor=False,
                        during=lambda t, topic=topic: (release_cleaner(broker.bootstrap, topic),
                                                       released.append(t)))
                    passes, _ = wait_clean(broker, topic, since)
                    w = {"pair": i, "kind": kind,
                         "clean_ms": sum(int(m.group(7)) for m in passes),
                         "cleaned_bytes": sum(int(m.group(5)) for m in passes),
                         "clean_released_after_s_of_window": round(released[0] - started, 1)}
                b = result["brokers"][0]
                w.update({"p99_ms": b["p99_ms"], "p9999_ms": b["p9999_ms"]})
                windows.append(w)
                hlogs[kind].append(b["hdr_log"])
                print(json.dumps(w), flush=True)
        quiet, cleaning = summary(pooled(hlogs["quiet"])), summary(pooled(hlogs["cleaning"]))
        per_window = {k: sorted(w["p99_ms"] for w in windows if w["kind"] == k)
                      for k in ("quiet", "cleaning")}
        median = lambda v: (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2  # noqa: E731
        return {"measured_window_s": args.duration, "pairs": args.pairs,
                "warm_window": {"p99_ms": warm["brokers"][0]["p99_ms"],
                                "floor": warm.get("floor"), "baselines": warm.get("baselines")},
                "median_window_p99_ms": {k: round(median(v), 3) for k, v in per_window.items()},
                "quiet_pooled": quiet, "cleaning_pooled": cleaning,
                "p99_ratio": round(cleaning["p99_ms"] / quiet["p99_ms"], 2),
                "windows": windows}
    finally:
        broker.stop()


def commit_all(bootstrap, groups, partitions, rounds, topic):
    """Commits offset r for every (group, partition) for r in 0..rounds, pipelined."""
    s = kw.connect(bootstrap, timeout=120)
    window = 32
    inflight = 0
    corr = 0
    errors = 0
    parts = list(range(partitions))
    for r in range(rounds):
        for g in groups:
            corr += 1
            s.sendall(kw.offset_commit_v2(corr, g, -1, "", {topic: [(p, r, "") for p in parts]}))
            inflight += 1
            if inflight >= window:
                _, out = kw.parse_offset_commit_v2(kw.read_frame(s))
                errors += sum(1 for e in out.values() if e)
                inflight -= 1
    while inflight:
        _, out = kw.parse_offset_commit_v2(kw.read_frame(s))
        errors += sum(1 for e in out.values() if e)
        inflight -= 1
    s.close()
    return errors


def time_load(broker, groups, partitions, last, topic, timeout=900):
    """Restarts `broker` and returns (seconds until every group's OffsetFetch answers `last`
    for every partition, sum and max of the per-partition load times in its log)."""
    broker.stop()
    since = len(broker.log_text())
    broker.start()
    t0 = broker.started_at
    pending = set(groups)
    deadline = time.monotonic() + timeout
    s = kw.connect(broker.bootstrap, timeout=60)
    corr = 0
    while pending and time.monotonic() < deadline:
        for g in sorted(pending):
            corr += 1
            _, out = kw.parse_offset_fetch_v1(kw.request(
                s, kw.offset_fetch_v1(corr, g, {topic: list(range(partitions))})))
            if all(err == 0 and off == last for off, _meta, err in out.values()) and out:
                pending.discard(g)
        if pending:
            time.sleep(0.05)
    ready_s = time.monotonic() - t0
    s.close()
    if pending:
        raise SystemExit(f"{len(pending)} groups not loaded after {timeout} s")
    text = broker.log_text()[since:]
    starts = {m.group(2): m.group(1) for m in re.finditer(
        r"^(\S+)Z\s+INFO .*loading consumer groups partition=(\d+)", text, re.M)}
    ends = {m.group(2): m.group(1) for m in re.finditer(
        r"^(\S+)Z\s+INFO .*loaded consumer groups partition=(\d+)", text, re.M)}
    from datetime import datetime
    ts = lambda x: datetime.fromisoformat(x).timestamp()  # noqa: E731
    spans = [ts(ends[p]) - ts(starts[p]) for p in ends if p in starts]
    return round(ready_s, 2), round(sum(spans), 2), round(max(spans, default=0), 2)


def bench_offsets(args, work):
    settings = {"offsets.topic.segment.bytes": 1 << 20, "log.cleaner.backoff.ms": 1000,
                "log.cleaner.enable": "false"}
    broker = Sluice(work / "sluice", settings)
    broker.start()
    topic = "bench-offsets"
    partitions, n_groups = 1000, 100
    groups = [f"bench-group-{g:03d}" for g in range(n_groups)]
    rounds = max(1, args.commits // (partitions * n_groups))
    try:
        a = admin(broker.bootstrap)
        a.create_topics([NewTopic(topic, partitions, 1, config={"segment.bytes": str(1 << 20)})]
                        )[topic].result(120)
        time.sleep(2)
        # The offsets topic and every group's coordinator exist before the timed commits.
        s = kw.connect(broker.bootstrap)
        for i, g in enumerate(groups):
            kw.request(s, kw.find_coordinator_v0(i, g))
        s.close()
        time.sleep(3)
        os.sched_setaffinity(0, {CLIENT_CPU})
        t = time.monotonic()
        errors = commit_all(broker.bootstrap, groups, partitions, rounds, topic)
        commit_s = time.monotonic() - t
        offsets_bytes = dir_bytes(broker.data, ".log") - dir_bytes(broker.data / f"{topic}-0")
        before = time_load(broker, groups, partitions, rounds - 1, topic)
        # The cleaner on: wait until it has compacted every offsets partition.
        broker.settings = {**settings, "log.cleaner.enable": "true"}
        broker.stop()
        since = len(broker.log_text())
        broker.start()
        t = time.monotonic()
        quiet = 0
        last = -1
        while quiet < 10 and time.monotonic() - t < 1800:
            n = len(re.findall(r"cleaned tp=__consumer_offsets", broker.log_text()[since:]))
            quiet = quiet + 1 if n == last else 0
            last = n
            time.sleep(1)
        clean_s = time.monotonic() - t - quiet
        passes = [m for m in SLUICE_PASS.finditer(broker.log_text()[since:])
                  if m.group(2).startswith("__consumer_offsets")]
        after = time_load(broker, groups, partitions, rounds - 1, topic)
        return {"commits": rounds * partitions * n_groups, "commit_errors": errors,
                "commit_s": round(commit_s, 1),
                "commits_per_s": round(rounds * partitions * n_groups / commit_s),
                "segment_bytes_of_all_logs": offsets_bytes,
                "before": dict(zip(["ready_s", "sum_partition_load_s", "max_partition_load_s"],
                                   before)),
                "clean_s": round(clean_s, 1), "clean_passes": len(passes),
                "cleaned_bytes_before": sum(int(m.group(5)) for m in passes),
                "cleaned_bytes_after": sum(int(m.group(6)) for m in passes),
                "after": dict(zip(["ready_s", "sum_partition_load_s", "max_partition_load_s"],
                                  after))}
    finally:
        broker.stop()


def machine():
    cpu = next((line.split(":", 1)[1].strip() for line in
                Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name")),
               "?")
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    return {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": commit,
            "cpu": cpu, "cores": os.cpu_count(), "load_avg": os.getloadavg()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=["cleaner", "p99", "offsets"])
    ap.add_argument("--bytes", type=int, default=1 << 30)
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--commits", type=int, default=10_000_000)
    ap.add_argument("--duration", type=int, default=10,
                    help="p99: loadgen's measured seconds per run (after a 5 s warm-up)")
    ap.add_argument("--pairs", type=int, default=4,
                    help="p99: pairs of windows (quiet, cleaning), each with its own topic")
    ap.add_argument("--cleaner-io-rate", type=float,
                    help="p99: log.cleaner.io.max.bytes.per.second of the broker")
    ap.add_argument("--only", choices=["sluice", "kafka"], help="cleaner: one broker only")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-compaction-", dir=ROOT / "target"))
    try:
        info = machine()
        result = {"cleaner": bench_cleaner, "p99": bench_p99, "offsets": bench_offsets}[
            args.what](args, work)
        out = {"machine": info, "what": args.what, "args": vars(args) | {"json": None},
               "result": result}
        path = args.json or ROOT / "loadgen-out" / f"compaction-{args.what}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(out, indent=2, default=str))
        print(json.dumps(out, indent=2, default=str))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
