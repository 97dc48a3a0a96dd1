"""A full disk, seen by a Kafka client: produce requests are refused with KAFKA_STORAGE_ERROR
(nothing acknowledged is lost), reads go on, a restart on the still-full disk serves the data
and keeps refusing writes with the same error, and writes work again once space returns.
Needs root (mounts a small tmpfs); set SLUICE_SKIP_PRIVILEGED=1 to skip elsewhere."""

import os
import subprocess

import pytest

import kafka_wire as kw
from compat_util import create_topic

pytestmark = pytest.mark.sluice_only("Sluice's data directory on a small tmpfs")

TOPIC = "filling"
KAFKA_STORAGE_ERROR = 56


@pytest.fixture
def small_fs(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mnt)]).returncode != 0:
        if os.environ.get("SLUICE_SKIP_PRIVILEGED"):
            pytest.skip("mounting a tmpfs needs root")
        pytest.fail("mounting a tmpfs needs root; set SLUICE_SKIP_PRIVILEGED=1 to skip")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)])


def produce(sock, corr, value):
    sock.sendall(kw.produce_v3(corr, TOPIC, [(0, kw.record_batch([value]))], acks=-1))
    _, results = kw.parse_produce_v3(kw.read_frame(sock))
    return results[(TOPIC, 0)]


@pytest.mark.sluice(cores=1, settings={"log.segment.bytes": 8 << 20})
def test_a_full_disk_refuses_writes_and_loses_nothing(broker, small_fs):
    # Move the broker's data onto the small filesystem.
    broker.stop()
    broker.data_dir = small_fs / "data"
    broker.start()
    create_topic(broker.bootstrap, TOPIC, 1)
    sock = kw.connect(broker.bootstrap)
    value = b"v" * 50_000
    acked = 0
    for corr in range(10_000):
        error, base = produce(sock, corr, value)
        if error:
            assert error == KAFKA_STORAGE_ERROR
            break
        assert base == acked
        acked += 1
    else:
        pytest.fail("a 24 MiB filesystem must fill")
    assert acked > 100

    def check_everything_acknowledged_is_there():
        s = kw.connect(broker.bootstrap)
        offset = 0
        while offset < acked:
            s.sendall(kw.fetch_v4(1, TOPIC, 0, offset, max_wait_ms=0))
            _, parts = kw.parse_fetch_v4(kw.read_frame(s))
            error, hw, records = parts[(TOPIC, 0)]
            assert error == 0 and hw == acked
            batches = kw.batch_headers(records)
            assert batches and batches[0]["base_offset"] == offset
            offset = batches[-1]["last_offset"] + 1

    check_everything_acknowledged_is_there()
    # Restart on the still-full disk: data served, writes refused with the same error.
    broker.restart()
    check_everything_acknowledged_is_there()
    sock = kw.connect(broker.bootstrap)
    assert produce(sock, 1, value)[0] == KAFKA_STORAGE_ERROR
    # Space returns: writes work again, without a restart.
    assert subprocess.run(["mount", "-o", "remount,size=64m", str(small_fs)]).returncode == 0
    error, base = produce(sock, 2, value)
    assert (error, base) == (0, acked)
