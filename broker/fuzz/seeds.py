#!/usr/bin/env python3
"""Writes the seed corpora of the broker's fuzz targets into broker/fuzz/corpus/<target>/.

- produce_checks: record sets as kafka-python 3 (a real client) builds them, in every codec
  (none, gzip, snappy, lz4, zstd), one and several batches, with the target's mode byte and
  clock in front (see fuzz_targets/produce_checks.rs).
- fetcher_responses: FetchResponse v16 and ListOffsetsResponse v7 frames (without the size
  prefix) as a Sluice leader answers the replica fetcher: records, a diverging epoch, an
  error, a refusal; the decoder byte in front.
- admin_request: request heads of curl, Prometheus, a browser, and the unit tests' bad ones.
- sasl_tokens: RFC 7677's SCRAM exchange and a librdkafka-style one with an authzid and an
  extension, PLAIN tokens; the mechanism byte in front, tokens separated by 0xFF.

Needs `pip install kafka-python lz4 zstandard cramjam` (the codecs kafka-python uses).
Usage: broker/fuzz/seeds.py  (from anywhere; the corpus directories are made if missing)
"""

import os
import struct
import sys
import uuid

from kafka.record.default_records import DefaultRecordBatchBuilder

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "compat"))
from kafka_wire import compact_string, uvarint  # noqa: E402  (the compat tests' encoders)
NOW_MS = 1_764_720_000_000  # 2025-12-03, the clock the produce seeds run at

# kafka-python's codec ids = Kafka's attribute bits 0-2.
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
# The target's config selector (bits 0-2 compression.type): producer, uncompressed, gzip,
# snappy, lz4, zstd.
TOPIC_CODECS = {"producer": 0, "uncompressed": 1, "gzip": 2, "snappy": 3, "lz4": 4, "zstd": 5}


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def batch(codec, values, ts=NOW_MS, headers=()):
    b = DefaultRecordBatchBuilder(
        magic=2, compression_type=CODECS[codec], is_transactional=False,
        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i, v in enumerate(values):
        b.append(i, timestamp=ts + i, key=b"k%d" % i if i % 2 else None, value=v,
                 headers=list(headers))
    return bytes(b.build())


def produce_seeds():
    values = [b"a", b"bb" * 20, b"x" * 1024]
    for codec in CODECS:
        for topic, sel in (("producer", 0), ("uncompressed", 1), ("zstd", 5), ("gzip", 2)):
            mode = sel | 32  # fix CRCs, so that mutations reach the codecs
            write("produce_checks", f"{codec}-to-{topic}",
                  bytes([mode]) + struct.pack(">q", NOW_MS) + batch(codec, values))
    # Two batches back to back, the second with headers (duplicate keys kept as produced).
    two = batch("lz4", values[:2]) + batch("none", [b"h"], headers=[("k", b"1"), ("k", b"2")])
    write("produce_checks", "two-batches-to-snappy",
          bytes([TOPIC_CODECS["snappy"] | 32]) + struct.pack(">q", NOW_MS) + two)
    # A timestamp an hour ahead under a one-second window; LogAppendTime.
    write("produce_checks", "timestamp-window",
          bytes([16 | 32]) + struct.pack(">q", NOW_MS) + batch("gzip", values, ts=NOW_MS + 3_600_000))
    write("produce_checks", "log-append-time",
          bytes([8 | 32]) + struct.pack(">q", NOW_MS) + batch("none", values))


def compact_bytes(b):
    return uvarint(0) if b is None else uvarint(len(b) + 1) + b


def compact_array(items):
    return uvarint(len(items) + 1) + b"".join(items)


def tagged(fields):
    """Tagged fields: [(tag, bytes)] in tag order."""
    return uvarint(len(fields)) + b"".join(uvarint(t) + uvarint(len(v)) + v for t, v in fields)


def fetch_partition(index, error=0, hw=0, lso=0, log_start=0, records=None, diverging=None):
    tags = []
    if diverging is not None:
        epoch, end = diverging
        tags.append((0, struct.pack(">iq", epoch, end) + tagged([])))
    return (struct.pack(">ihqqq", index, error, hw, lso, log_start)
            + compact_array([])  # aborted transactions
            + struct.pack(">i", -1)  # preferred read replica
            + compact_bytes(records) + tagged(tags))


def fetch_response(correlation_id, topics, error=0, node_endpoints=None):
    body = struct.pack(">ihi", 0, error, 0)  # throttle, error, session id
    body += compact_array([uuid.UUID(int=t).bytes + compact_array(parts) + tagged([])
                           for t, parts in topics])
    tags = []
    if node_endpoints:
        ends = compact_array([struct.pack(">i", n) + compact_string(h) + struct.pack(">i", p)
                              + compact_bytes(None) + tagged([]) for n, h, p in node_endpoints])
        tags.append((0, ends))
    body += tagged(tags)
    return struct.pack(">i", correlation_id) + tagged([]) + body  # response header v1


def list_offsets_response(correlation_id, topics):
    body = struct.pack(">i", 0)
    body += compact_array([
        compact_string(name) + compact_array([
            struct.pack(">ihqqi", p, err, -1, off, epoch) + tagged([])
            for p, err, off, epoch in parts]) + tagged([])
        for name, parts in topics])
    body += tagged([])
    return struct.pack(">i", correlation_id) + tagged([]) + body


def fetcher_seeds():
    recs = batch("none", [b"a", b"bb"]) + batch("zstd", [b"c" * 100])
    seeds = {
        "fetch-records": fetch_response(7, [(1, [fetch_partition(0, hw=3, lso=3, records=recs),
                                                 fetch_partition(1, hw=0)])]),
        "fetch-diverging": fetch_response(8, [(2, [fetch_partition(4, hw=10, diverging=(3, 9))])]),
        "fetch-out-of-range": fetch_response(9, [(1, [fetch_partition(0, error=1)])]),
        "fetch-refused": fetch_response(10, [], error=6),
        "fetch-endpoints": fetch_response(11, [(3, [fetch_partition(2, hw=1, records=b"")])],
                                          node_endpoints=[(2, "localhost", 9093)]),
    }
    for name, frame in seeds.items():
        write("fetcher_responses", name, b"\x00" + frame)
    lo = {
        "list-offsets": list_offsets_response(12, [("t", [(2, 0, 40, 5)])]),
        "list-offsets-fenced": list_offsets_response(13, [("t", [(2, 74, -1, -1)])]),
        "list-offsets-two": list_offsets_response(14, [("a", [(0, 0, 0, 0), (1, 0, 7, 2)]),
                                                       ("b", [(0, 0, -1, -1)])]),
    }
    for name, frame in lo.items():
        write("fetcher_responses", name, b"\x01" + frame)


def admin_seeds():
    heads = {
        "curl-health": b"GET /health HTTP/1.1\r\nHost: localhost:9644\r\nUser-Agent: curl/7.88.1\r\nAccept: */*\r\n\r\n",
        "prometheus-metrics": b"GET /metrics HTTP/1.1\r\nHost: 10.0.0.2:9644\r\nUser-Agent: Prometheus/2.53.0\r\nAccept: application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.3,*/*;q=0.1\r\nAccept-Encoding: gzip\r\nX-Prometheus-Scrape-Timeout-Seconds: 10\r\n\r\n",
        "status-query-http10": b"GET /v1/status?pretty=1 HTTP/1.0\n\n",
        "post": b"POST /health HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}",
        "garbage": b"\x00\x01\x02 garbage\r\n\r\n",
        "no-colon": b"GET /health HTTP/1.1\r\nno colon\r\n\r\n",
        "http2": b"GET /health HTTP/2\r\n\r\n",
        "not-utf8": b"GET /\xff HTTP/1.1\r\n\r\n",
    }
    for name, head in heads.items():
        write("admin_request", name, head)


def unsecured_jws(claims):
    import base64

    def b64(text):
        return base64.urlsafe_b64encode(text.encode()).rstrip(b"=")

    return b64('{"alg":"none"}') + b"." + b64(claims) + b"."


def oauth_first(exp, scope):
    claims = f'{{"sub":"alice","iat":1699999990,"exp":{exp},"scope":"{scope}"}}'
    return b"n,,\x01auth=Bearer " + unsecured_jws(claims) + b"\x01\x01"


def sasl_seeds():
    # Byte 0: mechanism (value % 4: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER); bit 7
    # set: v0.
    rfc_first = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    rfc_final = (b"c=biws,r=rOprNGfwEbeRWgbNEkqOSeRvErNoNcE,"
                 b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    seeds = {
        "scram-256-rfc": b"\x01" + rfc_first + b"\xff" + rfc_final,
        "scram-256-rfc-v0": b"\x81" + rfc_first + b"\xff" + rfc_final,
        "scram-512-authzid-ext": b"\x02n,a=user,n=user,r=abcdef,ext=1\xffc=bix1c2VyLA==,"
                                 b"r=abcdefSeRvErNoNcE,p=AAAA",
        "scram-tokenauth": b"\x01n,,n=user,r=abc,tokenauth=true",
        "plain": b"\x00\x00alice\x00alice-secret",
        "plain-v0-authzid": b"\x80alice\x00alice\x00wrong",
        # Byte 3: OAUTHBEARER (unsecured JWS; the target's clock is 1700000000 s).
        "oauthbearer": b"\x03" + oauth_first(1700000060, "read"),
        "oauthbearer-reauth": b"\x03" + oauth_first(1700000060, "read") + b"\xff"
                              + oauth_first(1700000090, "read write"),
        "oauthbearer-expired": b"\x03" + oauth_first(1699999999, "read") + b"\xff\x01",
        "oauthbearer-scope-v0": b"\x83" + oauth_first(1700000060, "write") + b"\xff\x01",
        "oauthbearer-authzid-ext": b"\x03n,a=alice,\x01auth=Bearer "
                                   + unsecured_jws('{"sub":"alice","exp":1700000060,"scope":"read"}')
                                   + b"\x01traceId=abc\x01\x01",
    }
    for name, data in seeds.items():
        write("sasl_tokens", name, data)


if __name__ == "__main__":
    produce_seeds()
    fetcher_seeds()
    admin_seeds()
    sasl_seeds()
