"""kafka-python: compressed batches are stored as produced; a seek into the middle of one returns
exactly the records from that offset on."""

import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

import kafka_wire as kw
from compat_util import create_topic

COUNT = 200
BATCH = 50  # records per produce burst: one compressed batch each
SEEK_TO = 75  # inside the second batch (offsets 50..99)
CODEC = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}  # RecordBatch attributes & 7


@pytest.mark.parametrize("compression", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_and_mid_batch_seek(broker, compression):
    topic = f"kafka-python-{compression}"
    create_topic(broker.bootstrap, topic, 1)

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=compression,
                             enable_idempotence=False, acks=1, linger_ms=2000,
                             batch_size=1 << 20, request_timeout_ms=30000)
    values = [f"{compression} record {i:03d} ".encode() * 8 for i in range(COUNT)]
    offsets = []
    try:
        for start in range(0, COUNT, BATCH):
            futures = [producer.send(topic, value=v, key=b"k%d" % i, partition=0)
                       for i, v in enumerate(values[start:start + BATCH], start)]
            producer.flush(timeout=30)  # sends the burst now, as one batch (linger is long)
            offsets += [f.get(timeout=30).offset for f in futures]
    finally:
        producer.close(timeout=10)
    assert offsets == list(range(COUNT))

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None,
                             enable_auto_commit=False, auto_offset_reset="none",
                             consumer_timeout_ms=1000)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, SEEK_TO)
        got = []
        deadline = time.monotonic() + 60
        while len(got) < COUNT - SEEK_TO and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=1000).values():
                got += records
        # Nothing beyond the end turns up either.
        for records in consumer.poll(timeout_ms=500).values():
            got += records
    finally:
        consumer.close()

    assert [r.offset for r in got] == list(range(SEEK_TO, COUNT))
    assert [r.value for r in got] == values[SEEK_TO:]
    assert [r.key for r in got] == [b"k%d" % i for i in range(SEEK_TO, COUNT)]

    # The broker keeps each batch as produced: a raw Fetch at the seek offset returns the whole
    # compressed batch that holds it, codec and CRC intact (Kafka never splits a batch).
    with kw.connect(broker.bootstrap) as s:
        s.sendall(kw.fetch_v4(9, topic, 0, SEEK_TO))
        corr, parts = kw.parse_fetch_v4(kw.read_frame(s))
    assert corr == 9
    err, high_watermark, records = parts[(topic, 0)]
    # zstd too, though Fetch v4 predates it (KIP-110): Kafka 4 sends every batch as stored
    # (it dropped down-conversion, KIP-724) and answers no UNSUPPORTED_COMPRESSION_TYPE.
    assert (err, high_watermark) == (0, COUNT)
    batches = kw.batch_headers(records)
    assert batches, f"no whole batch in {len(records)} bytes"
    first = batches[0]
    assert first["base_offset"] <= SEEK_TO <= first["last_offset"], batches
    assert first["base_offset"] < SEEK_TO, f"setup: the seek is not inside a batch: {batches}"
    for b in batches:
        assert b["crc_ok"], b
        assert b["attributes"] & 7 == CODEC[compression], b
