"""Per-core `[[shard]]` sections take effect: a shard with `listen = false` accepts no client
connections (yet still owns and serves partitions through the others), a shard's
`batch.cache.bytes` budget bounds its batch cache, and `spin.before.park.us` makes an idle
shard busy-poll its core instead of sleeping."""

import contextlib
import json
import re
import subprocess
import time
import urllib.request
from pathlib import Path

import kafka_wire as kw
from compat_util import consume_all, create_topic, producer, wait_until
from conftest import free_port

CACHE_BUDGET = 1 << 20
TOPIC = "per-shard"


def metric(text, name, shard):
    m = re.search(rf'^{name}{{shard="{shard}"}} (\S+)$', text, re.M)
    assert m, f"{name} for shard {shard} missing"
    return float(m.group(1))


def get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


@contextlib.contextmanager
def running_broker(sluice_bin, tmp_path, cores, config_text):
    """A broker on `cores` with the config file `config_text`, serving (its health answers)
    until the block ends; yields (process, bootstrap, admin URL)."""
    config = tmp_path / "sluice.toml"
    config.write_text(config_text)
    port, admin = free_port(), free_port()
    log = open(tmp_path / "broker.log", "wb")
    proc = subprocess.Popen(
        [str(sluice_bin), "--listen", f"127.0.0.1:{port}", "--admin-listen", f"127.0.0.1:{admin}",
         "--data-dir", str(tmp_path / "data"), "--cores", cores, "--config", str(config)],
        stdout=log, stderr=log,
    )
    try:
        admin_url = f"http://127.0.0.1:{admin}"
        wait_until(lambda: _health(admin_url), 30, what="broker health")
        yield proc, f"127.0.0.1:{port}", admin_url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def test_shard_sections_apply(sluice_bin, tmp_path):
    config = (
        '"log.segment.bytes" = 67108864\n'
        "[[shard]]\n"
        "core = 1\n"
        "listen = false\n"
        f'"batch.cache.bytes" = {CACHE_BUDGET}\n'
    )
    with running_broker(sluice_bin, tmp_path, "0-1", config) as (_proc, bootstrap, admin_url):
        create_topic(bootstrap, TOPIC, 2)
        status = json.loads(get(admin_url + "/v1/status"))
        on_shard_1 = [p["partition"] for s in status["shards"] if s["shard"] == 1 for p in s["partitions"]]
        assert on_shard_1, "placement puts a partition on each shard"

        sockets = []
        for i in range(20):
            s = kw.connect(bootstrap)
            s.sendall(kw.api_versions_v0(i))
            kw.read_frame(s)
            sockets.append(s)
        text = get(admin_url + "/metrics")
        assert metric(text, "sluice_connections", 1) == 0
        assert metric(text, "sluice_connections", 0) >= 20

        # 8 MiB into the partition shard 1 owns (through shard 0's connections).
        p = producer(bootstrap, **{"linger.ms": 5})
        for _ in range(80):
            p.produce(TOPIC, value=b"c" * 100_000, partition=on_shard_1[0])
        assert p.flush(60) == 0
        text = get(admin_url + "/metrics")
        used = metric(text, "sluice_batch_cache_used_bytes", 1)
        assert 0 < used <= CACHE_BUDGET
        assert metric(text, "sluice_produce_requests_total", 0) > 0
        for s in sockets:
            s.close()


def shard_sleeps(pid):
    """Voluntary context switches so far of the process's shard threads (`sluice-shard-*`):
    each is a sleep in the kernel, such as an executor parking."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            if not (task / "comm").read_text().startswith("sluice-shard-"):
                continue
            status = (task / "status").read_text()
        except OSError:
            continue  # the thread ended meanwhile
        total += int(re.search(r"^voluntary_ctxt_switches:\s+(\d+)", status, re.M).group(1))
    return total


def idle_shard_sleeps(sluice_bin, tmp_path, shard_section, serve):
    """Starts a one-shard broker with `shard_section`, with `serve` has it take a produce and a
    consume, then returns how many times its idle shard threads slept over 2 s."""
    tmp_path.mkdir()
    with running_broker(sluice_bin, tmp_path, "0", shard_section) as (proc, bootstrap, _admin):
        if serve:
            create_topic(bootstrap, "spin", 1)
            p = producer(bootstrap)
            for i in range(100):
                p.produce("spin", value=b"%d" % i, partition=0)
            assert p.flush(30) == 0
            got = consume_all(bootstrap, "spin", 1, expected=100)
            assert [m.value() for m in got[0]] == [b"%d" % i for i in range(100)]
        time.sleep(1)
        before = shard_sleeps(proc.pid)
        time.sleep(2)
        return shard_sleeps(proc.pid) - before


def test_spin_before_park_busy_polls_an_idle_shard(sluice_bin, tmp_path):
    parked = idle_shard_sleeps(sluice_bin, tmp_path / "parked", "", serve=False)
    spinning = idle_shard_sleeps(sluice_bin, tmp_path / "spinning",
                                 '[[shard]]\ncore = 0\n"spin.before.park.us" = 1000000\n',
                                 serve=True)
    # Idle, a parked shard sleeps in the kernel until each of its timers (several a second);
    # one that spins 1 s before parking polls its rings and timers instead, and its timers
    # fire more often than that, so it never sleeps. (A count of sleeps, not of CPU time:
    # another process on the core takes CPU from a spinning thread but cannot make it sleep.)
    assert parked >= 10, f"an idle broker without spin slept {parked} times in 2 s"
    assert spinning * 5 < parked, f"spinning: {spinning} sleeps in 2 s, parked: {parked}"


def _health(admin_url):
    try:
        return "ok" in get(admin_url + "/health")
    except OSError:
        time.sleep(0.1)
        return False
