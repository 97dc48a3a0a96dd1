"""Per-version rules of Produce and Fetch, on the wire, as Apache Kafka 4.4 answers them
(issue #25 point 2; every test here also passes with SLUICE_COMPAT_TARGET=kafka):

- zstd (KIP-110): a Produce below v7 carrying a zstd batch answers UNSUPPORTED_COMPRESSION_TYPE
  (76, Kafka's `ProduceRequest.validateRecords`) and appends nothing; v7+ is appended. A Fetch
  of any version gets zstd batches as stored, below v10 too, even on a topic with
  `compression.type=zstd`: Kafka 4.4 answers so (Kafka 3's 76 for a Fetch below v10 of a zstd
  topic, `KafkaApis.maybeConvertFetchedData`, went with down-conversion in Kafka 4).
- a Produce v3+ must hold exactly one magic-2 batch per partition: more is INVALID_RECORD (87).
- Fetch fields by version: `last_stable_offset` (v4+, the high watermark without
  transactions), `log_start_offset` (v5+, moved by DeleteRecords), `aborted_transactions`
  (null for read_uncommitted, an empty array for read_committed), `preferred_read_replica`
  (v11+, -1 without KIP-392 rack awareness), the top-level error and session (v7+); each
  response is parsed to its last byte, so a field written at the wrong version fails too.
- Produce fields by version: `log_start_offset` (v5+), `record_errors` / `error_message`
  (v8+).
Topic ids (v13+) and KIP-951's leader hints (v16) are in test_fetch_v16.py; Fetch v0-v3 and
Produce v0-v2 are not advertised (test_api_versions in test_admin.py).
"""

import socket

import pytest

import kafka_wire as kw
from compat_util import admin, create_topic

UNSUPPORTED_COMPRESSION_TYPE = 76
INVALID_RECORD = 87
ZSTD = 4


def create(bootstrap, name, **config):
    create_topic(bootstrap, name, 1, config=config)


def exchange(bootstrap, request):
    host, port = bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(request)
        return kw.read_frame(s)


def produce(bootstrap, version, topic, batches):
    """One partition (0) of `topic`, `batches` concatenated; -> its answer."""
    corr, out = kw.parse_produce_classic(
        exchange(bootstrap, kw.produce_classic(3, version, topic, [(0, b"".join(batches))])),
        version)
    assert corr == 3
    return out[(topic, 0)]


def fetch(bootstrap, version, topic, offset=0, **kwargs):
    if version >= 12:
        out, _ = _fetch_flexible(bootstrap, version, topic, offset)
        return out
    corr, top_error, out = kw.parse_fetch_classic(
        exchange(bootstrap, kw.fetch_classic(9, version, topic, 0, offset, **kwargs)), version)
    assert corr == 9
    assert top_error in (None, 0)
    return out[(topic, 0)]


def _fetch_flexible(bootstrap, version, topic, offset):
    corr, out, endpoints = kw.parse_fetch_flexible(
        exchange(bootstrap, kw.fetch_flexible(9, 12, [(topic, [(0, -1, offset)])])), 12)
    assert corr == 9
    return out[(topic, 0)], endpoints


def codecs(records):
    return [b["attributes"] & 7 for b in kw.batch_headers(records)]


@pytest.fixture
def zstd_topic(broker):
    """A topic with compression.type=zstd holding one zstd batch of three records."""
    create(broker.bootstrap, "zstd-config", **{"compression.type": "zstd"})
    answer = produce(broker.bootstrap, 7, "zstd-config", [kw.record_batch([b"a", b"b", b"c"],
                                                                          zstd=True)])
    assert answer["error"] == 0, answer
    return "zstd-config"


@pytest.mark.parametrize("version", [4, 7, 9, 10, 11, 12])
def test_every_fetch_version_gets_a_zstd_topics_batches_as_stored(broker, zstd_topic, version):
    got = fetch(broker.bootstrap, version, zstd_topic)
    assert got["error"] == 0, got
    assert codecs(got["records"]) == [ZSTD]


def test_a_zstd_batch_on_a_producer_compression_topic_reaches_fetch_v4(broker):
    """With the default `compression.type` (`producer`) too."""
    create(broker.bootstrap, "zstd-producer")
    assert produce(broker.bootstrap, 7, "zstd-producer",
                   [kw.record_batch([b"x"], zstd=True)])["error"] == 0
    got = fetch(broker.bootstrap, 4, "zstd-producer")
    assert got["error"] == 0 and codecs(got["records"]) == [ZSTD], got


@pytest.mark.parametrize("version", [3, 4, 5, 6])
def test_produce_below_v7_with_a_zstd_batch_is_unsupported_compression_type(broker, version):
    create(broker.bootstrap, "zstd-old-producer")
    answer = produce(broker.bootstrap, version, "zstd-old-producer",
                     [kw.record_batch([b"z"], zstd=True)])
    assert answer["error"] == UNSUPPORTED_COMPRESSION_TYPE, answer
    assert fetch(broker.bootstrap, 11, "zstd-old-producer")["records"] == b"", "nothing appended"


def test_produce_v7_with_a_zstd_batch_is_appended(broker):
    create(broker.bootstrap, "zstd-v7")
    answer = produce(broker.bootstrap, 7, "zstd-v7", [kw.record_batch([b"z"], zstd=True)])
    assert answer["error"] == 0 and answer["base_offset"] == 0, answer


def test_produce_v3_with_two_batches_for_one_partition_is_invalid_record(broker):
    create(broker.bootstrap, "two-batches")
    answer = produce(broker.bootstrap, 3, "two-batches",
                     [kw.record_batch([b"1"]), kw.record_batch([b"2"])])
    assert answer["error"] == INVALID_RECORD, answer
    assert fetch(broker.bootstrap, 11, "two-batches")["records"] == b"", "nothing appended"


@pytest.mark.parametrize("version", [3, 4, 5, 6, 7, 8])
def test_produce_response_fields_by_version(broker, version):
    topic = f"produce-v{version}"
    create(broker.bootstrap, topic)
    answer = produce(broker.bootstrap, version, topic, [kw.record_batch([b"a", b"b"])])
    assert answer["error"] == 0 and answer["base_offset"] == 0, answer
    if version >= 5:
        assert answer["log_start_offset"] == 0
    if version >= 8:
        assert answer["record_errors"] == [] and answer["error_message"] is None, answer


@pytest.fixture
def trimmed(broker):
    """A topic holding offsets 0-4, its log start moved to 2 by DeleteRecords."""
    from confluent_kafka import TopicPartition
    topic = "fetch-fields"
    create(broker.bootstrap, topic)
    assert produce(broker.bootstrap, 7, topic,
                   [kw.record_batch([b"%d" % i for i in range(5)])])["error"] == 0
    client = admin(broker.bootstrap)
    futures = client.delete_records([TopicPartition(topic, 0, 2)], request_timeout=30)
    for f in futures.values():
        f.result(30)
    return topic


@pytest.mark.parametrize("version", [4, 5, 6, 7, 8, 9, 10, 11])
def test_fetch_fields_by_version(broker, trimmed, version):
    got = fetch(broker.bootstrap, version, trimmed, offset=0)
    # Offset 0 is below the log start now.
    assert got["error"] == 1, got  # OFFSET_OUT_OF_RANGE
    got = fetch(broker.bootstrap, version, trimmed, offset=2)
    assert got["error"] == 0, got
    assert got["high_watermark"] == 5 and got["last_stable_offset"] == 5, got
    if version >= 5:
        assert got["log_start_offset"] == 2, got
    else:
        assert "log_start_offset" not in got
    assert got["aborted_transactions"] is None, "read_uncommitted: null"
    if version >= 11:
        assert got["preferred_read_replica"] == -1, got
    assert [b["base_offset"] for b in kw.batch_headers(got["records"])] == [0]


@pytest.mark.parametrize("version", [4, 7, 11])
def test_read_committed_fetch_gets_an_empty_aborted_transactions_array(broker, trimmed,
                                                                       version):
    got = fetch(broker.bootstrap, version, trimmed, offset=2, isolation_level=1)
    assert got["error"] == 0, got
    assert got["aborted_transactions"] == [], got
    assert got["last_stable_offset"] == 5, got
