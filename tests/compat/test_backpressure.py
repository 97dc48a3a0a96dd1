"""A client that stops reading its responses cannot make the broker buffer without bound.

With the batch cache off, every Fetch reads its 1 MiB from disk into a fresh buffer. A raw
connection sends 400 such Fetch requests and reads nothing: unbounded, the broker would hold
~400 MiB of responses. The broker reads at most 16 requests ahead per connection, so its
resident memory may grow by at most 100 MiB (16 MiB of responses plus slack). Meanwhile another
connection is still served, and once the slow client reads, every response arrives in order.
"""

import socket
import time

import pytest

import kafka_wire as kw
from compat_util import create_topic, producer

pytestmark = pytest.mark.sluice_only("Sluice's memory bounds: the batch cache and the RSS of its process")

TOPIC = "backpressure"
REQUESTS = 400
FETCH_BYTES = 1 << 20
GROWTH_LIMIT_BYTES = 100 << 20


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.mark.sluice(cores=1, settings={"sluice.batch.cache.bytes": 0})
def test_a_stalled_reader_holds_bounded_memory(broker):
    create_topic(broker.bootstrap, TOPIC, 1)
    p = producer(broker.bootstrap, **{"linger.ms": 20, "batch.size": FETCH_BYTES, "compression.type": "none"})
    value = bytes(range(256)) * 400  # 100 KiB
    for _ in range(40):
        p.produce(TOPIC, value=value, partition=0)
    assert p.flush(60) == 0

    before = rss_bytes(broker.pid())
    slow = kw.connect(broker.bootstrap)
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
    wire = b"".join(
        kw.fetch_v4(5000 + i, TOPIC, 0, 0, max_wait_ms=0, max_bytes=FETCH_BYTES) for i in range(REQUESTS)
    )
    slow.sendall(wire)
    peak = before
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        peak = max(peak, rss_bytes(broker.pid()))
        time.sleep(0.05)
    assert peak - before < GROWTH_LIMIT_BYTES, f"broker RSS grew {(peak - before) >> 20} MiB"

    other = kw.connect(broker.bootstrap)
    other.sendall(kw.api_versions_v0(7))
    payload = kw.read_frame(other)
    assert payload[:4] == (7).to_bytes(4, "big")

    slow.settimeout(60)
    for i in range(REQUESTS):
        payload = kw.read_frame(slow)
        assert int.from_bytes(payload[:4], "big") == 5000 + i
    assert broker.alive()


@pytest.mark.sluice(cores=1)
def test_announced_frame_sizes_do_not_reserve_memory(broker):
    """Connections that announce 100 MB frames (the socket.request.max.bytes default) and send
    a few bytes cost a few bytes each, not the announced size."""
    before = rss_bytes(broker.pid())
    held = []
    for _ in range(20):
        s = kw.connect(broker.bootstrap)
        s.sendall((100 * 1024 * 1024).to_bytes(4, "big") + b"x" * 100)
        held.append(s)
    time.sleep(1)
    grown = rss_bytes(broker.pid()) - before
    assert grown < 64 << 20, f"broker RSS grew {grown >> 20} MiB for 20 x 104 bytes"
    other = kw.connect(broker.bootstrap)
    other.sendall(kw.api_versions_v0(9))
    assert kw.read_frame(other)[:4] == (9).to_bytes(4, "big")
    for s in held:
        s.close()
