"""Graceful shutdown: SIGTERM flushes and closes every partition log and exits 0; the next start
finds every log clean (reads only the tail after the last index entry) and loses nothing. After
SIGKILL the next start recovers instead."""

import re

import pytest

from compat_util import consume_all, create_topic, producer

pytestmark = pytest.mark.sluice_only("Sluice's shutdown and recovery log lines")

TOPIC = "shutdown"
PARTITIONS = 4


SHARDS = 2


def opened_counts(log_text, start):
    """(clean, recovered) partition logs, summed over shards, at the `start`-th start (from 0):
    each shard logs one "opened partition logs" line per start."""
    lines = [l for l in log_text.splitlines() if "opened partition logs" in l]
    mine = lines[SHARDS * start:SHARDS * (start + 1)]
    assert len(mine) == SHARDS, f"start {start}: {len(lines)} lines"
    clean = sum(int(re.search(r"clean=(\d+)", l).group(1)) for l in mine)
    recovered = sum(int(re.search(r"recovered=(\d+)", l).group(1)) for l in mine)
    return clean, recovered


def produce_values(bootstrap, count, prefix):
    p = producer(bootstrap, acks="1")
    for i in range(count):
        p.produce(TOPIC, value=f"{prefix}{i}".encode(), partition=i % PARTITIONS)
    assert p.flush(30) == 0


@pytest.mark.sluice(cores=SHARDS)
def test_sigterm_closes_cleanly_and_the_next_start_skips_recovery(broker):
    create_topic(broker.bootstrap, TOPIC, PARTITIONS)
    produce_values(broker.bootstrap, 400, "a")
    status, needed_sigkill = broker.stop()
    assert not needed_sigkill, "no exit within the grace period after SIGTERM"
    assert status == 0
    assert "sluice: stopped cleanly" in broker.log_path.read_text()

    broker.start()
    text = broker.log_path.read_text()
    assert opened_counts(text, 1) == (PARTITIONS, 0), text[-3000:]
    got = consume_all(broker.bootstrap, TOPIC, PARTITIONS, expected=400)
    values = sorted(m.value() for msgs in got.values() for m in msgs)
    assert values == sorted(f"a{i}".encode() for i in range(400))

    # After SIGKILL there is no clean marker: the next start recovers every log — the topic's
    # and those of `__consumer_offsets`, which the consumer's group.id had the broker create.
    broker.kill()
    # Every directory is a partition's, but the controller quorum's (Kafka's name, as in
    # Kafka's own log directory).
    logs = sum(1 for d in broker.data_dir.iterdir()
               if d.is_dir() and d.name != "__cluster_metadata-0")
    assert logs >= PARTITIONS
    broker.start()
    assert opened_counts(broker.log_path.read_text(), 2) == (0, logs)
