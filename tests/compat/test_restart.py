"""Durability across restarts: a clean stop, and a SIGKILL under acks=all load."""

import time
import warnings

import pytest

from compat_util import consume_all, create_topic, producer, wait_until

PARTITIONS = 3


def test_clean_restart_keeps_everything(broker):
    topic = "restart-clean"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    acked = []

    def on_delivery(err, msg):
        acked.append((err, msg.partition(), msg.offset(), msg.value()))

    p = producer(broker.bootstrap, acks="all")
    for i in range(500):
        p.produce(topic, value=b"clean-%04d" % i, key=b"%d" % i, on_delivery=on_delivery)
        p.poll(0)
    assert p.flush(60) == 0
    del p
    assert len(acked) == 500 and all(err is None for err, *_ in acked), acked[:3]

    _status, needed_kill = broker.stop()
    if needed_kill:
        warnings.warn("sluice did not exit within 5 s of SIGTERM; killed")
    broker.start()

    got = consume_all(broker.bootstrap, topic, PARTITIONS, expected=500)
    for part in range(PARTITIONS):
        expected = sorted((off, val) for _, pp, off, val in acked if pp == part)
        assert [(m.offset(), m.value()) for m in got[part]] == expected, f"partition {part}"


def crash_value(i):
    return (b"crash-%07d|" % i) * 64  # 1 KiB, unique per record


def test_sigkill_keeps_every_acknowledged_record(broker):
    topic = "restart-crash"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    acked = {}  # (partition, offset) -> value
    failed = []

    def on_delivery(err, msg):
        if err is None:
            key = (msg.partition(), msg.offset())
            assert key not in acked, f"offset acknowledged twice: {key}"
            acked[key] = msg.value()
        else:
            failed.append(err)

    # After the kill librdkafka reconnects; back off so its log stays short.
    p = producer(broker.bootstrap, acks="all", **{"message.timeout.ms": 5000,
                                                  "reconnect.backoff.ms": 500,
                                                  "reconnect.backoff.max.ms": 2000})
    i = 0
    start = time.monotonic()
    # 1 KiB records (the design's risk profile) in bursts of 50, at most ~5,000 records/s: some
    # MiB per partition, so recovery scans more than one read chunk of the active segment.
    while time.monotonic() - start < 2.0:
        for _ in range(50):
            p.produce(topic, value=crash_value(i), key=b"%d" % i, on_delivery=on_delivery)
            i += 1
        p.poll(0)
        time.sleep(0.01)
    broker.kill()
    killed_after = len(acked)
    p.flush(15)  # in-flight messages now fail or time out; only acknowledged ones count
    del p
    assert killed_after > 0, "nothing was acknowledged in 2 s"

    try:
        broker.start()  # same data dir (and ports)
    except Exception as e:
        raise AssertionError(f"restart after SIGKILL failed ({len(acked)} records acknowledged, "
                             f"{i} produced): {e}") from None
    got = consume_all(broker.bootstrap, topic, PARTITIONS, expected=len(acked), timeout=90)
    present = {}
    for part, msgs in got.items():
        offsets = [m.offset() for m in msgs]
        assert offsets == list(range(len(offsets))), f"partition {part}: offsets have gaps"
        present.update(((part, m.offset()), m.value()) for m in msgs)
    missing = [k for k in acked if k not in present]
    assert not missing, (f"{len(missing)} of {len(acked)} acknowledged records lost, "
                         f"e.g. {sorted(missing)[:5]}")
    wrong = [k for k, v in acked.items() if present[k] != v]
    assert not wrong, f"{len(wrong)} acknowledged offsets hold other data, e.g. {wrong[:5]}"


def read_checkpoint(path):
    """The values of a Sluice checkpoint file (docs/storage-format.md): version, values, CRC."""
    lines = path.read_text().split()
    assert lines[0] == "0", lines
    return [int(v) for v in lines[1:-1]]


@pytest.mark.sluice_only("the high-watermark checkpoint file")
@pytest.mark.sluice(cores=1, settings={"replica.high.watermark.checkpoint.interval.ms": "200"})
def test_the_high_watermark_is_checkpointed_while_running_and_at_shutdown(broker):
    topic = "hw-checkpoint"
    create_topic(broker.bootstrap, topic, 1)
    checkpoint = broker.data_dir / f"{topic}-0" / "high-watermark"
    p = producer(broker.bootstrap, acks="all")
    for i in range(10):
        p.produce(topic, value=b"v%d" % i)
    assert p.flush(30) == 0
    # Written by the periodic task once the high watermark moved.
    wait_until(lambda: checkpoint.exists() and read_checkpoint(checkpoint) == [10], 30,
               what="the checkpoint to hold the high watermark 10")
    for i in range(5):
        p.produce(topic, value=b"w%d" % i)
    assert p.flush(30) == 0
    del p
    # A clean stop writes the last one, whatever the interval.
    broker.stop()
    assert read_checkpoint(checkpoint) == [15]
    broker.start()
    got = consume_all(broker.bootstrap, topic, 1, expected=15)
    assert [m.value() for m in got[0]] == [b"v%d" % i for i in range(10)] + [
        b"w%d" % i for i in range(5)]
