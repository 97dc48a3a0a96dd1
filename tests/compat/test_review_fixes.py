"""Kafka behaviours a first review found missing: a topic named twice in one CreateTopics is
refused once (INVALID_REQUEST) and the others are created; ListOffsets MAX_TIMESTAMP names the
record holding the largest timestamp, not its batch; a batch whose record count disagrees with
the records inside it is refused with INVALID_RECORD (as Kafka does) and appends nothing."""

import struct

import pytest
from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import NewTopic, OffsetSpec

import kafka_wire as kw
from compat_util import admin, create_topic, producer

INVALID_RECORD = 87


def test_a_topic_named_twice_in_create_topics_is_refused_once(broker):
    a = admin(broker.bootstrap)
    futures = a.create_topics([NewTopic("twice", 1, 1), NewTopic("once", 1, 1), NewTopic("twice", 1, 1)])
    futures["once"].result(30)
    with pytest.raises(KafkaException) as e:
        futures["twice"].result(30)
    assert "INVALID_REQUEST" in str(e.value) or e.value.args[0].code() == 42
    topics = a.list_topics(timeout=10).topics
    assert "once" in topics and "twice" not in topics


def test_max_timestamp_names_the_record(broker):
    create_topic(broker.bootstrap, "stamps", 1)
    p = producer(broker.bootstrap, **{"linger.ms": 100})
    for ts in (1_000, 5_000, 3_000):  # one batch: the maximum is its second record
        p.produce("stamps", value=b"x", partition=0, timestamp=ts)
    assert p.flush(30) == 0
    a = admin(broker.bootstrap)
    result = a.list_offsets({TopicPartition("stamps", 0): OffsetSpec.max_timestamp()})
    info = result[TopicPartition("stamps", 0)].result(30)
    assert (info.offset, info.timestamp) == (1, 5_000)


def test_a_batch_with_an_inflated_record_count_is_refused(broker):
    create_topic(broker.bootstrap, "counted", 1)
    batch = bytearray(kw.record_batch([b"only one record"]))
    # lastOffsetDelta at byte 23, recordsCount at 57; then the CRC over bytes 21.. again.
    struct.pack_into(">i", batch, 23, 2**31 - 2)
    struct.pack_into(">i", batch, 57, 2**31 - 1)
    struct.pack_into(">I", batch, 17, kw._crc32c(bytes(batch[21:])))
    sock = kw.connect(broker.bootstrap)
    sock.sendall(kw.produce_v3(1, "counted", [(0, bytes(batch))]))
    _, results = kw.parse_produce_v3(kw.read_frame(sock))
    # Kafka answers INVALID_RECORD for a record count that disagrees with the records.
    assert results[("counted", 0)][0] == INVALID_RECORD
    sock.sendall(kw.produce_v3(2, "counted", [(0, kw.record_batch([b"fine"]))]))
    _, results = kw.parse_produce_v3(kw.read_frame(sock))
    assert results[("counted", 0)] == (0, 0), "nothing was appended before"


def test_log_append_time_topics_stamp_the_broker_time(broker):
    import time

    from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME
    from confluent_kafka.admin import NewTopic as Topic

    from compat_util import consume_all

    a = admin(broker.bootstrap)
    a.create_topics([Topic("appended", 1, 1, config={"message.timestamp.type": "LogAppendTime"})])["appended"].result(30)
    before_ms = int(time.time() * 1000)
    delivered = []
    p = producer(broker.bootstrap)
    p.produce("appended", value=b"x", partition=0, timestamp=1_000,
              on_delivery=lambda err, msg: delivered.append((err, msg.timestamp())))
    assert p.flush(30) == 0
    after_ms = int(time.time() * 1000)
    err, (ts_type, ts) = delivered[0]
    assert err is None
    # The produce response carries log_append_time_ms; librdkafka reports it with the message.
    assert ts_type == TIMESTAMP_LOG_APPEND_TIME and before_ms - 5_000 <= ts <= after_ms + 5_000
    got = consume_all(broker.bootstrap, "appended", 1, expected=1)[0][0]
    ts_type, ts = got.timestamp()
    assert ts_type == TIMESTAMP_LOG_APPEND_TIME
    assert before_ms - 5_000 <= ts <= after_ms + 5_000, "broker wall-clock time, not the producer's 1000"
