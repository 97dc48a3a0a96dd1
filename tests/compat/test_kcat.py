"""kcat (Debian's, librdkafka 2.0.2): 10,000 keyed messages in and out of a 6-partition topic."""

import os
import shutil
import subprocess
from collections import defaultdict

import pytest

TOPIC = "kcat-keyed"
PARTITIONS = 6
COUNT = 10_000
TIMEOUT_S = 180


def kcat_binary():
    path = shutil.which("kcat")
    if path:
        return path
    # scripts/test-all installs it; try once here for a bare `pytest` run as root.
    if os.geteuid() == 0 and shutil.which("apt-get"):
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        for cmd in (["apt-get", "install", "-y", "-q", "kcat"],
                    ["apt-get", "update", "-q"],
                    ["apt-get", "install", "-y", "-q", "kcat"]):
            subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=600)
            path = shutil.which("kcat")
            if path:
                return path
    pytest.skip("kcat is not installed and `apt-get install kcat` did not install it")


def run(cmd, stdin=None):
    proc = subprocess.run(cmd, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=TIMEOUT_S)
    assert proc.returncode == 0, (
        f"`{' '.join(cmd)}` exited {proc.returncode}\n"
        f"stderr:\n{proc.stderr.decode(errors='replace')[-4000:]}")
    return proc.stdout


@pytest.mark.sluice(cores=2, settings={"num.partitions": PARTITIONS})
def test_kcat_keyed_round_trip(broker):
    kcat = kcat_binary()
    common = ["-b", broker.bootstrap, "-t", TOPIC, "-X", "enable.idempotence=false"]

    # Values carry ':' (only the first one splits key from value) and non-ASCII bytes.
    lines = [f"key-{i % 1500:04d}:value {i:05d}:x\u00e9\u2603 ".encode() + os.urandom(4).hex().encode()
             for i in range(COUNT)]
    # Auto-created (num.partitions=6) by the producer's Metadata request; acks=all.
    run([kcat, "-P", "-K:", "-X", "acks=all", *common], stdin=b"\n".join(lines) + b"\n")

    listing = run([kcat, "-L", *common]).decode()
    assert f'topic "{TOPIC}" with {PARTITIONS} partitions' in listing, listing

    out = run([kcat, "-C", "-o", "beginning", "-e", "-q", "-f", "%k:%s:%p:%o\\n", *common])
    got_lines = out.split(b"\n")
    assert got_lines[-1] == b""
    got_lines = got_lines[:-1]
    assert len(got_lines) == COUNT, f"consumed {len(got_lines)} of {COUNT}"

    order = {line: i for i, line in enumerate(lines)}
    assert len(order) == COUNT
    per_partition = defaultdict(list)
    partition_of_key = {}
    for line in got_lines:
        record, partition, offset = line.rsplit(b":", 2)
        assert record in order, f"consumed a record that was never produced: {record!r}"
        per_partition[int(partition)].append((int(offset), order[record]))
        key = record.split(b":", 1)[0]
        # librdkafka's default partitioner is a hash of the key: one key, one partition.
        assert partition_of_key.setdefault(key, int(partition)) == int(partition), key
    assert sorted(order[r] for r in (l.rsplit(b":", 2)[0] for l in got_lines)) == list(range(COUNT)), \
        "records lost or duplicated"

    assert sorted(per_partition) == list(range(PARTITIONS)), \
        f"records landed only in partitions {sorted(per_partition)}"
    for p, items in per_partition.items():
        offsets = [o for o, _ in items]
        assert offsets == list(range(len(items))), f"partition {p}: offsets not 0..n-1 in order"
        produced_order = [i for _, i in items]
        assert produced_order == sorted(produced_order), \
            f"partition {p}: records not in the order they were produced"
