"""Log compaction as Kafka 4.4 does it (issue #27 point 2), seen by a real client: the latest
value of every key stays at its offset, older ones go, a tombstone goes once
`delete.retention.ms` has passed since its first clean, and a consumer reading from the start
walks over the gaps. Passes against Apache Kafka 4.4 too (SLUICE_COMPAT_TARGET=kafka).

Kafka rolls a segment only when a record arrives after `segment.ms`, and cleans only closed
segments, so each test keeps producing a filler record under its own key while it waits.
"""

import time
import urllib.request

import pytest
from confluent_kafka import TopicPartition

from compat_util import consumer, create_topic, producer, read_partition, wait_until
from conftest import TARGET

FAST_CLEANER = {"log.cleaner.backoff.ms": 200, "log.retention.check.interval.ms": 500}
COMPACTED = {
    "cleanup.policy": "compact",
    "segment.ms": "300",
    "min.cleanable.dirty.ratio": "0.01",
}


def produce_sync(p, topic, key, value):
    """Produces one record and returns its offset."""
    got = []
    p.produce(topic, key=key, value=value, partition=0,
              on_delivery=lambda err, msg: got.append((err, msg.offset() if msg is not None else None)))
    assert p.flush(30) == 0
    (err, offset), = got
    assert err is None, err
    return offset


def wait_compacted(bootstrap, topic, p, done, what):
    """Produces a filler record every 0.5 s (so segments roll) until `done(records)`; returns
    those records."""
    filler = [0]

    def check():
        produce_sync(p, topic, b"filler", b"f%d" % filler[0])
        filler[0] += 1
        time.sleep(0.5)
        records = read_partition(bootstrap, topic)
        return [records] if done(records) else None
    return wait_until(check, 90, interval=0.1, what=what)[0]


# Compressed batches are decompressed, filtered and compressed again with their own codec.
@pytest.mark.parametrize("compression", ["none", "zstd", "lz4"])
@pytest.mark.sluice(settings=FAST_CLEANER)
def test_the_latest_value_of_every_key_stays_at_its_offset(broker, compression):
    b = broker.bootstrap
    create_topic(b, "latest", 1, config=COMPACTED)
    p = producer(b, **{"compression.type": compression})
    latest = {}
    for i in range(600):
        key = b"k%d" % (i % 20)
        p.produce("latest", key=key, value=b"v%d" % i, partition=0)
    assert p.flush(30) == 0
    for offset, key, value in read_partition(b, "latest"):
        latest[key] = (offset, value)
    assert len(latest) == 20

    def without_filler(records):
        return [r for r in records if r[1] != b"filler"]
    keyed = without_filler(wait_compacted(b, "latest", p,
                                          lambda records: len(without_filler(records)) == 20,
                                          "the 600 records compacted to 20"))
    for offset, key, value in keyed:
        assert latest[key] == (offset, value), key
    # The offsets of what was removed are gaps a consumer walks over; the log end is unchanged.
    c = consumer(b)
    low, high = c.get_watermark_offsets(TopicPartition("latest", 0), timeout=10)
    c.close()
    assert low == 0 and high > 600
    # A consumer starting inside a gap gets the next record that is kept.
    gap = next(o for o in range(600) if o not in {r[0] for r in keyed})
    c = consumer(b)
    c.assign([TopicPartition("latest", 0, gap)])
    m = wait_until(lambda: c.poll(1.0), 30, what="a record after the gap")
    assert m.error() is None and m.offset() > gap
    c.close()

    if TARGET == "sluice":
        with urllib.request.urlopen(broker.admin_url + "/metrics", timeout=10) as r:
            text = r.read().decode()
        passes = [float(line.split()[-1]) for line in text.splitlines()
                  if line.startswith("sluice_log_cleaner_passes_total")]
        assert sum(passes) >= 1, passes


# With gzip, the older values sit in compressed batches: once the tombstone goes, none of
# them may come back.
@pytest.mark.parametrize("compression", ["none", "gzip"])
@pytest.mark.sluice(settings=FAST_CLEANER)
def test_a_tombstone_goes_after_delete_retention_ms(broker, compression):
    b = broker.bootstrap
    # Long enough to see the tombstone alone before it goes.
    create_topic(b, "tombstones", 1, config={**COMPACTED, "delete.retention.ms": "8000"})
    p = producer(b, **{"compression.type": compression})
    for i in range(50):
        produce_sync(p, "tombstones", b"doomed", b"v%d" % i)
    produce_sync(p, "tombstones", b"kept", b"value")
    tombstone = produce_sync(p, "tombstones", b"doomed", None)

    def only_tombstone(records):
        doomed = [r for r in records if r[1] == b"doomed"]
        return doomed == [(tombstone, b"doomed", None)]
    wait_compacted(b, "tombstones", p, only_tombstone, "the tombstone alone left of its key")

    def gone(records):
        keys = {r[1] for r in records}
        return b"doomed" not in keys and b"kept" in keys
    records = wait_compacted(b, "tombstones", p, gone, "the tombstone removed")
    assert [r for r in records if r[1] == b"kept"][0][2] == b"value"


@pytest.mark.sluice(settings=FAST_CLEANER)
def test_compact_delete_also_applies_retention(broker):
    b = broker.bootstrap
    create_topic(b, "both", 1, config={**COMPACTED, "cleanup.policy": "compact,delete",
                                       "retention.ms": "2000"})
    p = producer(b)
    first = produce_sync(p, "both", b"old", b"soon gone")
    assert first == 0
    # Nothing else until the record is past retention.ms: later records in its segment (the
    # cleaner merges the closed segments of a pass, in Kafka too) would keep it young.
    time.sleep(3)
    # One record after it, so that Kafka (which rolls a segment only on an append) closes the
    # old one; then retention deletes it in either system.
    produce_sync(p, "both", b"new", b"kept")

    def retention_ran():
        records = read_partition(b, "both")
        return records and records[0][0] > 0 and b"old" not in {r[1] for r in records}
    wait_until(retention_ran, 60, interval=0.5, what="retention to delete the first segment")
    c = consumer(b)
    low, _ = c.get_watermark_offsets(TopicPartition("both", 0), timeout=10)
    c.close()
    assert low > 0
