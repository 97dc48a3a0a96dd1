"""Compression as Kafka treats it: a topic with compression.type=gzip recompresses what
producers send (consumers read the same records); zstd batches asked for with a Fetch below
v10 get them as stored (Kafka 4 has no down-conversion; test_fetch_produce_versions.py has every
per-version rule); a compressed batch whose record count
disagrees with its records is refused with INVALID_RECORD; message.timestamp.before.max.ms
refuses far-off CreateTime timestamps with INVALID_TIMESTAMP."""

import gzip
import struct
import time


import kafka_wire as kw
from compat_util import consume_all, create_topic, producer

INVALID_RECORD = 87
INVALID_TIMESTAMP = 32


def create(bootstrap, name, **config):
    create_topic(bootstrap, name, 1, config=config)


def fetch_codecs(bootstrap, topic):
    s = kw.connect(bootstrap)
    s.sendall(kw.fetch_v4(1, topic, 0, 0, max_wait_ms=0))
    _, parts = kw.parse_fetch_v4(kw.read_frame(s))
    error, _, records = parts[(topic, 0)]
    return error, [b["attributes"] & 7 for b in kw.batch_headers(records)]


def test_topic_compression_type_recompresses(broker):
    create(broker.bootstrap, "recompressed", **{"compression.type": "gzip"})
    p = producer(broker.bootstrap, **{"compression.type": "lz4", "linger.ms": 20})
    for i in range(200):
        p.produce("recompressed", value=b"value-%d" % i, partition=0)
    assert p.flush(30) == 0
    error, codecs = fetch_codecs(broker.bootstrap, "recompressed")
    assert error == 0 and codecs and set(codecs) == {1}, codecs  # gzip, not lz4
    got = consume_all(broker.bootstrap, "recompressed", 1, expected=200)
    assert [m.value() for m in got[0]] == [b"value-%d" % i for i in range(200)]


def test_zstd_batches_reach_every_fetch_version(broker):
    create(broker.bootstrap, "zstd-topic")
    p = producer(broker.bootstrap, **{"compression.type": "zstd", "linger.ms": 20})
    for i in range(50):
        p.produce("zstd-topic", value=b"z%d" % i, partition=0)
    assert p.flush(30) == 0
    # Fetch v4 predates zstd (KIP-110), yet Kafka 4 sends the batches as stored: it dropped
    # down-conversion (KIP-724) and with it the UNSUPPORTED_COMPRESSION_TYPE answer.
    error, codecs = fetch_codecs(broker.bootstrap, "zstd-topic")
    assert error == 0 and codecs and set(codecs) == {4}, (error, codecs)
    got = consume_all(broker.bootstrap, "zstd-topic", 1, expected=50)  # librdkafka uses v10+
    assert len(got[0]) == 50


def test_a_compressed_batch_with_a_wrong_count_is_refused(broker):
    create(broker.bootstrap, "lying")
    three = bytearray(kw.record_batch([b"a", b"b", b"c"]))
    two = kw.record_batch([b"a", b"b"])
    section = gzip.compress(two[61:])
    batch = bytearray(three[:61]) + section
    struct.pack_into(">h", batch, 21, 1)  # attributes: gzip
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">I", batch, 17, kw._crc32c(bytes(batch[21:])))
    s = kw.connect(broker.bootstrap)
    s.sendall(kw.produce_v3(1, "lying", [(0, bytes(batch))]))
    _, results = kw.parse_produce_v3(kw.read_frame(s))
    # Kafka's LogValidator: "inner record count does not match" is INVALID_RECORD.
    assert results[("lying", 0)][0] == INVALID_RECORD


def test_far_off_create_time_is_refused(broker):
    # Kafka 4 has message.timestamp.before.max.ms / after.max.ms (the difference key is gone).
    create(broker.bootstrap, "on-time", **{"message.timestamp.before.max.ms": "60000"})
    s = kw.connect(broker.bootstrap)
    s.sendall(kw.produce_v3(1, "on-time", [(0, kw.record_batch([b"old"], base_timestamp_ms=1_000))]))
    _, results = kw.parse_produce_v3(kw.read_frame(s))
    assert results[("on-time", 0)][0] == INVALID_TIMESTAMP
    now = int(time.time() * 1000)
    s.sendall(kw.produce_v3(2, "on-time", [(0, kw.record_batch([b"now"], base_timestamp_ms=now))]))
    _, results = kw.parse_produce_v3(kw.read_frame(s))
    assert results[("on-time", 0)] == (0, 0)
