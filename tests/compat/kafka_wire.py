"""A minimal hand-written Kafka wire encoder/decoder for the raw-socket tests.

Only what the tests need: request headers v1/v2, ApiVersions v0, Metadata v1, Produce v3 with
a RecordBatch v2 (CRC-32C), and the matching response parsers. Kept independent of any client
library so that a client bug cannot hide a broker bug (or the other way round).
"""

import socket
import struct
import time

try:
    from crc32c import crc32c as _crc32c
except ImportError:  # pure-Python Castagnoli, slow but fine for a few small batches
    _TABLE = []
    for _n in range(256):
        _c = _n
        for _ in range(8):
            _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
        _TABLE.append(_c)

    def _crc32c(data):
        crc = 0xFFFFFFFF
        for b in data:
            crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
        return crc ^ 0xFFFFFFFF

API_PRODUCE = 0
API_FETCH = 1
API_METADATA = 3
API_VERSIONS = 18
UNSUPPORTED_VERSION = 35


# ---- primitives -------------------------------------------------------------------------------

def i8(v):
    return struct.pack(">b", v)


def i16(v):
    return struct.pack(">h", v)


def i32(v):
    return struct.pack(">i", v)


def i64(v):
    return struct.pack(">q", v)


def string(s):
    if s is None:
        return i16(-1)
    b = s.encode() if isinstance(s, str) else s
    return i16(len(b)) + b


def bytes_(b):
    if b is None:
        return i32(-1)
    return i32(len(b)) + b


def uvarint(v):
    out = bytearray()
    while True:
        byte = v & 0x7F
        v >>= 7
        if v:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def varint(v):
    return uvarint((v << 1) ^ (v >> 63))  # zigzag (64-bit)


def compact_string(s):
    b = s.encode()
    return uvarint(len(b) + 1) + b


class Reader:
    def __init__(self, data):
        self.data = data
        self.pos = 0

    def take(self, n):
        if self.pos + n > len(self.data):
            raise ValueError(f"underflow: need {n} bytes at {self.pos}, have {len(self.data)}")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def i8(self):
        return struct.unpack(">b", self.take(1))[0]

    def i16(self):
        return struct.unpack(">h", self.take(2))[0]

    def i32(self):
        return struct.unpack(">i", self.take(4))[0]

    def i64(self):
        return struct.unpack(">q", self.take(8))[0]

    def string(self):
        n = self.i16()
        return None if n < 0 else self.take(n).decode()

    def array(self, item):
        n = self.i32()
        return None if n < 0 else [item(self) for _ in range(n)]

    def remaining(self):
        return len(self.data) - self.pos


# ---- requests ---------------------------------------------------------------------------------

def header_v1(api_key, version, correlation_id, client_id="sluice-compat"):
    return i16(api_key) + i16(version) + i32(correlation_id) + string(client_id)


def header_v2(api_key, version, correlation_id, client_id="sluice-compat"):
    return header_v1(api_key, version, correlation_id, client_id) + b"\x00"  # no tagged fields


def frame(payload):
    return i32(len(payload)) + payload


def api_versions_v0(correlation_id):
    return frame(header_v1(API_VERSIONS, 0, correlation_id))


def api_versions_flexible(version, correlation_id):
    """ApiVersions in the v3+ layout (header v2, compact client software name/version)."""
    body = compact_string("sluice-compat") + compact_string("1.0") + b"\x00"
    return frame(header_v2(API_VERSIONS, version, correlation_id) + body)


def metadata_v1(correlation_id, topics=None):
    body = i32(-1) if topics is None else i32(len(topics)) + b"".join(string(t) for t in topics)
    return frame(header_v1(API_METADATA, 1, correlation_id) + body)


def record_batch(values, base_timestamp_ms=None, keys=None):
    """An uncompressed RecordBatch v2 (magic 2) holding `values`, base offset 0."""
    ts = int(time.time() * 1000) if base_timestamp_ms is None else base_timestamp_ms
    records = bytearray()
    for delta, value in enumerate(values):
        key = keys[delta] if keys else None
        body = i8(0) + varint(0) + varint(delta)
        body += varint(-1) if key is None else varint(len(key)) + key
        body += varint(len(value)) + value
        body += varint(0)  # no headers
        records += varint(len(body)) + body
    after_crc = (i16(0)  # attributes: no compression, CreateTime
                 + i32(len(values) - 1) + i64(ts) + i64(ts)
                 + i64(-1) + i16(-1) + i32(-1)  # no producer id / epoch / sequence
                 + i32(len(values)) + bytes(records))
    crc = struct.pack(">I", _crc32c(after_crc))
    after_length = i32(-1) + i8(2) + crc + after_crc  # partition leader epoch, magic
    return i64(0) + i32(len(after_length)) + after_length


def produce_v3(correlation_id, topic, partition_batches, acks=1, timeout_ms=30000):
    """`partition_batches`: [(partition, batch bytes), ...] for one topic."""
    parts = b"".join(i32(p) + bytes_(b) for p, b in partition_batches)
    body = (string(None) + i16(acks) + i32(timeout_ms)
            + i32(1) + string(topic) + i32(len(partition_batches)) + parts)
    return frame(header_v1(API_PRODUCE, 3, correlation_id) + body)


def fetch_v4(correlation_id, topic, partition, offset, max_wait_ms=500, max_bytes=1 << 20):
    body = (i32(-1) + i32(max_wait_ms) + i32(1) + i32(max_bytes) + i8(0)  # read uncommitted
            + i32(1) + string(topic) + i32(1) + i32(partition) + i64(offset) + i32(max_bytes))
    return frame(header_v1(API_FETCH, 4, correlation_id) + body)


# ---- responses --------------------------------------------------------------------------------

def recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def read_frame(sock):
    """One response frame without its size prefix."""
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    if size < 4 or size > 64 << 20:
        raise ValueError(f"implausible response size {size}")
    return recv_exact(sock, size)


def parse_api_versions_v0(payload):
    """-> (correlation id, error code, {api key: (min, max)}); the whole payload must be used."""
    r = Reader(payload)
    corr = r.i32()
    err = r.i16()
    keys = r.array(lambda r: (r.i16(), r.i16(), r.i16()))
    if r.remaining():
        raise ValueError(f"{r.remaining()} trailing bytes after ApiVersions v0 response")
    return corr, err, {k: (lo, hi) for k, lo, hi in keys or []}


def parse_metadata_v1(payload):
    """-> (correlation id, brokers, controller id, {topic: (error, {partition: (error, leader)})})."""
    r = Reader(payload)
    corr = r.i32()
    brokers = r.array(lambda r: (r.i32(), r.string(), r.i32(), r.string()))
    controller = r.i32()

    def partition(r):
        err, p, leader = r.i16(), r.i32(), r.i32()
        r.array(lambda r: r.i32())  # replicas
        r.array(lambda r: r.i32())  # isr
        return p, (err, leader)

    def topic(r):
        err, name, _internal = r.i16(), r.string(), r.i8()
        return name, (err, dict(r.array(partition)))

    topics = dict(r.array(topic))
    if r.remaining():
        raise ValueError(f"{r.remaining()} trailing bytes after Metadata v1 response")
    return corr, brokers, controller, topics


def parse_produce_v3(payload):
    """-> (correlation id, {(topic, partition): (error, base offset)})."""
    r = Reader(payload)
    corr = r.i32()
    out = {}
    for _ in range(r.i32()):
        name = r.string()
        for _ in range(r.i32()):
            p, err, base, _append_time = r.i32(), r.i16(), r.i64(), r.i64()
            out[(name, p)] = (err, base)
    r.i32()  # throttle time
    if r.remaining():
        raise ValueError(f"{r.remaining()} trailing bytes after Produce v3 response")
    return corr, out


def parse_fetch_v4(payload):
    """-> (correlation id, {(topic, partition): (error, high watermark, records bytes)})."""
    r = Reader(payload)
    corr = r.i32()
    r.i32()  # throttle time
    out = {}
    for _ in range(r.i32()):
        name = r.string()
        for _ in range(r.i32()):
            p, err, hw, _lso = r.i32(), r.i16(), r.i64(), r.i64()
            r.array(lambda r: (r.i64(), r.i64()))  # aborted transactions
            n = r.i32()
            out[(name, p)] = (err, hw, b"" if n < 0 else r.take(n))
    if r.remaining():
        raise ValueError(f"{r.remaining()} trailing bytes after Fetch v4 response")
    return corr, out


def batch_headers(records):
    """Headers of the whole RecordBatches (magic 2) in a Fetch records field, each checked
    against its CRC-32C: [{base_offset, last_offset, attributes, count, crc_ok}]. A partial
    batch at the end (allowed by the protocol) is ignored."""
    out = []
    pos = 0
    while pos + 61 <= len(records):
        base, length, _epoch, magic = struct.unpack_from(">qiib", records, pos)
        end = pos + 12 + length
        if end > len(records):
            break
        if magic != 2:
            raise ValueError(f"batch at byte {pos} has magic {magic}")
        (crc,) = struct.unpack_from(">I", records, pos + 17)
        attributes, last_delta = struct.unpack_from(">hi", records, pos + 21)
        (count,) = struct.unpack_from(">i", records, pos + 57)
        out.append({"base_offset": base, "last_offset": base + last_delta,
                    "attributes": attributes, "count": count,
                    "crc_ok": _crc32c(records[pos + 21:end]) == crc})
        pos = end
    return out


def connect(bootstrap, timeout=30):
    host, port = bootstrap.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=timeout)
    s.settimeout(timeout)
    return s
