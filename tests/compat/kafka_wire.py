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

    # Flexible versions (KIP-482): compact strings and arrays, tagged fields.
    def uvarint(self):
        shift = value = 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7

    def compact_string(self):
        n = self.uvarint()
        return None if n == 0 else self.take(n - 1).decode()

    def compact_array(self, item):
        n = self.uvarint()
        return None if n == 0 else [item(self) for _ in range(n - 1)]

    def uuid(self):
        return self.take(16).hex()

    def tagged_fields(self):
        """Skips a tagged-field section; returns the tags seen."""
        tags = []
        for _ in range(self.uvarint()):
            tags.append(self.uvarint())
            self.take(self.uvarint())
        return tags


# ---- requests ---------------------------------------------------------------------------------

def header_v1(api_key, version, correlation_id, client_id="sluice-compat"):
    return i16(api_key) + i16(version) + i32(correlation_id) + string(client_id)


def header_v2(api_key, version, correlation_id, client_id="sluice-compat"):
    return header_v1(api_key, version, correlation_id, client_id) + b"\x00"  # no tagged fields


def compact_array(items):
    """A compact array of already-encoded `items`; None is the null array."""
    if items is None:
        return uvarint(0)
    return uvarint(len(items) + 1) + b"".join(items)


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


def record_batch(values, base_timestamp_ms=None, keys=None, zstd=False):
    """A RecordBatch v2 (magic 2) holding `values`, base offset 0: uncompressed, or with its
    records section compressed with zstd (codec 4)."""
    ts = int(time.time() * 1000) if base_timestamp_ms is None else base_timestamp_ms
    records = bytearray()
    for delta, value in enumerate(values):
        key = keys[delta] if keys else None
        body = i8(0) + varint(0) + varint(delta)
        body += varint(-1) if key is None else varint(len(key)) + key
        body += varint(len(value)) + value
        body += varint(0)  # no headers
        records += varint(len(body)) + body
    if zstd:
        import zstandard
        records = zstandard.ZstdCompressor().compress(bytes(records))
    after_crc = (i16(4 if zstd else 0)  # attributes: the codec, CreateTime
                 + i32(len(values) - 1) + i64(ts) + i64(ts)
                 + i64(-1) + i16(-1) + i32(-1)  # no producer id / epoch / sequence
                 + i32(len(values)) + bytes(records))
    crc = struct.pack(">I", _crc32c(after_crc))
    after_length = i32(-1) + i8(2) + crc + after_crc  # partition leader epoch, magic
    return i64(0) + i32(len(after_length)) + after_length


def produce_v3(correlation_id, topic, partition_batches, acks=1, timeout_ms=30000):
    """`partition_batches`: [(partition, batch bytes), ...] for one topic."""
    return produce_classic(correlation_id, 3, topic, partition_batches, acks, timeout_ms)


def fetch_v4(correlation_id, topic, partition, offset, max_wait_ms=500, max_bytes=1 << 20,
             replica_id=-1):
    """`replica_id` >= 0 makes it a follower's fetch (-1: a consumer's)."""
    return fetch_classic(correlation_id, 4, topic, partition, offset, max_wait_ms=max_wait_ms,
                         max_bytes=max_bytes, replica_id=replica_id)


def produce_classic(correlation_id, version, topic, partition_batches, acks=1,
                    timeout_ms=30000):
    """Produce v3-v8 (the non-flexible versions Kafka 4 serves): `partition_batches`:
    [(partition, records bytes), ...] for one topic."""
    assert 3 <= version <= 8
    parts = b"".join(i32(p) + bytes_(b) for p, b in partition_batches)
    body = (string(None) + i16(acks) + i32(timeout_ms)
            + i32(1) + string(topic) + i32(len(partition_batches)) + parts)
    return frame(header_v1(API_PRODUCE, version, correlation_id) + body)


def fetch_classic(correlation_id, version, topic, partition, offset, isolation_level=0,
                  max_wait_ms=0, max_bytes=1 << 20, replica_id=-1, current_leader_epoch=-1,
                  rack_id=""):
    """Fetch v4-v11 (non-flexible), one partition, without a session; `replica_id` >= 0 makes
    it a follower's fetch (-1: a consumer's); `current_leader_epoch` (v9+; -1: not checked);
    `rack_id` (v11+, KIP-392: the consumer's `client.rack`)."""
    assert 4 <= version <= 11
    body = i32(replica_id) + i32(max_wait_ms) + i32(1) + i32(max_bytes) + i8(isolation_level)
    if version >= 7:
        body += i32(0) + i32(-1)  # session id, epoch: a full fetch
    part = i32(partition)
    if version >= 9:
        part += i32(current_leader_epoch)
    part += i64(offset)
    if version >= 5:
        part += i64(-1)  # the follower's log start offset
    part += i32(max_bytes)
    body += i32(1) + string(topic) + i32(1) + part
    if version >= 7:
        body += i32(0)  # forgotten topics
    if version >= 11:
        body += string(rack_id)
    return frame(header_v1(API_FETCH, version, correlation_id) + body)



def fetch_session_v11(correlation_id, session_id, epoch, partitions, forgotten=(), max_wait_ms=0,
                      max_bytes=1 << 20):
    """Fetch v11 of fetch session `session_id` at `epoch` (KIP-227: 0 opens one, -1 none):
    `partitions` [(topic, partition, offset)] to add or update, `forgotten` [(topic,
    [partitions])] to drop from the session."""
    topics = {}
    for topic, partition, offset in partitions:
        topics.setdefault(topic, []).append(
            i32(partition) + i32(-1) + i64(offset) + i64(-1) + i32(max_bytes))
    body = (i32(-1) + i32(max_wait_ms) + i32(1) + i32(max_bytes) + i8(0)
            + i32(session_id) + i32(epoch)
            + i32(len(topics)) + b"".join(string(t) + i32(len(ps)) + b"".join(ps)
                                          for t, ps in topics.items())
            + i32(len(forgotten)) + b"".join(string(t) + i32(len(ps)) + b"".join(i32(p) for p in ps)
                                             for t, ps in forgotten)
            + string(""))
    return frame(header_v1(API_FETCH, 11, correlation_id) + body)

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
    corr, out = parse_produce_classic(payload, 3)
    return corr, {k: (p["error"], p["base_offset"]) for k, p in out.items()}


def parse_fetch_v4(payload):
    """-> (correlation id, {(topic, partition): (error, high watermark, records bytes)})."""
    corr, _, out = parse_fetch_classic(payload, 4)
    return corr, {k: (p["error"], p["high_watermark"], p["records"]) for k, p in out.items()}


def parse_produce_classic(payload, version):
    """Produce v3-v8 -> (correlation id, {(topic, partition): {"error", "base_offset",
    "log_start_offset" (v5+), "record_errors", "error_message" (v8+)}}); the whole payload must
    be used."""
    r = Reader(payload)
    corr = r.i32()
    out = {}
    for _ in range(r.i32()):
        name = r.string()
        for _ in range(r.i32()):
            p = {"partition": r.i32(), "error": r.i16(), "base_offset": r.i64()}
            r.i64()  # log append time
            if version >= 5:
                p["log_start_offset"] = r.i64()
            if version >= 8:
                p["record_errors"] = r.array(lambda r: (r.i32(), r.string()))
                p["error_message"] = r.string()
            out[(name, p.pop("partition"))] = p
    r.i32()  # throttle time
    if r.remaining():
        raise ValueError(f"{r.remaining()} trailing bytes after Produce v{version} response")
    return corr, out


def parse_fetch_classic(payload, version):
    """Fetch v4-v11 -> (correlation id, top-level error (v7+, else None), {(topic,
    partition): {"error", "high_watermark", "last_stable_offset", "log_start_offset" (v5+),
    "aborted_transactions" (None: null), "preferred_read_replica" (v11+), "records"}}); the
    whole payload must be used."""
    r = Reader(payload)
    corr = r.i32()
    r.i32()  # throttle time
    top_error = None
    if version >= 7:
        top_error = r.i16()
        r.i32()  # session id
    out = {}
    for _ in range(r.i32()):
        name = r.string()
        for _ in range(r.i32()):
            p = {"partition": r.i32(), "error": r.i16(), "high_watermark": r.i64(),
                 "last_stable_offset": r.i64()}
            if version >= 5:
                p["log_start_offset"] = r.i64()
            p["aborted_transactions"] = r.array(lambda r: (r.i64(), r.i64()))
            if version >= 11:
                p["preferred_read_replica"] = r.i32()
            n = r.i32()
            p["records"] = b"" if n < 0 else r.take(n)
            out[(name, p.pop("partition"))] = p
    if r.remaining():
        raise ValueError(f"{r.remaining()} trailing bytes after Fetch v{version} response")
    return corr, top_error, out


def parse_fetch_session_v11(payload):
    """Fetch v11 -> (top-level error, session id, {(topic, partition): partition}) as
    `parse_fetch_classic` reads the partitions."""
    r = Reader(payload)
    r.i32()  # correlation id
    r.i32()  # throttle time
    error, session_id = r.i16(), r.i32()
    _, _, out = parse_fetch_classic(payload, 11)
    return error, session_id, out


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


# ---- consumer groups (non-flexible versions only) ---------------------------------------------
# Appended for test_groups_wire.py. Layouts from Kafka's message JSON files: JoinGroup v0-v5,
# SyncGroup v0-v3, Heartbeat v0-v3, LeaveGroup v0-v2, FindCoordinator v0, OffsetCommit v2,
# OffsetFetch v1, DescribeGroups v0, ListGroups v0, DeleteGroups v0, OffsetDelete v0.

API_OFFSET_COMMIT = 8
API_OFFSET_FETCH = 9
API_FIND_COORDINATOR = 10
API_JOIN_GROUP = 11
API_HEARTBEAT = 12
API_LEAVE_GROUP = 13
API_SYNC_GROUP = 14
API_DESCRIBE_GROUPS = 15
API_LIST_GROUPS = 16
API_DELETE_GROUPS = 42
API_OFFSET_DELETE = 47

ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
MEMBER_ID_REQUIRED = 79
GROUP_SUBSCRIBED_TO_TOPIC = 86


def consumer_subscription(topics, user_data=b""):
    """ConsumerProtocolSubscription v0: the metadata of the "consumer" protocol in JoinGroup."""
    return i16(0) + i32(len(topics)) + b"".join(string(t) for t in topics) + bytes_(user_data)


def consumer_assignment(assignment):
    """ConsumerProtocolAssignment v0 from {topic: [partition, ...]}."""
    body = i16(0) + i32(len(assignment))
    for topic, parts in assignment.items():
        body += string(topic) + i32(len(parts)) + b"".join(i32(p) for p in parts)
    return body + bytes_(b"")


def parse_consumer_assignment(data):
    """{topic: [partition, ...]} from a ConsumerProtocolAssignment (any version; trailing
    fields of later versions are ignored). Empty bytes = no assignment."""
    if not data:
        return {}
    r = Reader(data)
    r.i16()  # version
    out = {}
    for _ in range(r.i32()):
        topic = r.string()
        out[topic] = r.array(lambda r: r.i32())
    return out


def _nbytes(r):
    n = r.i32()
    return None if n < 0 else r.take(n)


def _done(r, what):
    if r.remaining():
        raise ValueError(f"{r.remaining()} trailing bytes after {what}")


def find_coordinator_v0(correlation_id, group):
    return frame(header_v1(API_FIND_COORDINATOR, 0, correlation_id) + string(group))


def parse_find_coordinator_v0(payload):
    """-> (correlation id, error, node id, host, port)."""
    r = Reader(payload)
    out = (r.i32(), r.i16(), r.i32(), r.string(), r.i32())
    _done(r, "FindCoordinator v0 response")
    return out


def join_group(correlation_id, version, group, member_id="", protocols=None,
               session_timeout_ms=10000, rebalance_timeout_ms=10000, protocol_type="consumer",
               group_instance_id=None, topics=("t",)):
    """JoinGroup v0..v5. `protocols`: [(name, metadata bytes)]; default one "range" protocol
    subscribed to `topics`."""
    assert 0 <= version <= 5
    if protocols is None:
        protocols = [("range", consumer_subscription(list(topics)))]
    body = string(group) + i32(session_timeout_ms)
    if version >= 1:
        body += i32(rebalance_timeout_ms)
    body += string(member_id)
    if version >= 5:
        body += string(group_instance_id)
    body += string(protocol_type) + i32(len(protocols))
    body += b"".join(string(name) + bytes_(meta) for name, meta in protocols)
    return frame(header_v1(API_JOIN_GROUP, version, correlation_id) + body)


def parse_join_group(payload, version):
    """-> dict(corr, error, generation, protocol, leader, member_id,
    members=[(member id, group instance id, metadata)])."""
    r = Reader(payload)
    out = {"corr": r.i32()}
    if version >= 2:
        out["throttle"] = r.i32()
    out["error"] = r.i16()
    out["generation"] = r.i32()
    out["protocol"] = r.string()
    out["leader"] = r.string()
    out["member_id"] = r.string()

    def member(r):
        mid = r.string()
        instance = r.string() if version >= 5 else None
        return mid, instance, _nbytes(r)

    out["members"] = r.array(member)
    _done(r, f"JoinGroup v{version} response")
    return out


def sync_group(correlation_id, version, group, generation, member_id, assignments=(),
               group_instance_id=None):
    """SyncGroup v0..v3. `assignments`: [(member id, assignment bytes)] (leader only)."""
    assert 0 <= version <= 3
    body = string(group) + i32(generation) + string(member_id)
    if version >= 3:
        body += string(group_instance_id)
    body += i32(len(assignments)) + b"".join(string(m) + bytes_(a) for m, a in assignments)
    return frame(header_v1(API_SYNC_GROUP, version, correlation_id) + body)


def parse_sync_group(payload, version):
    """-> (correlation id, error, assignment bytes)."""
    r = Reader(payload)
    corr = r.i32()
    if version >= 1:
        r.i32()  # throttle time
    err = r.i16()
    assignment = _nbytes(r)
    _done(r, f"SyncGroup v{version} response")
    return corr, err, assignment


def heartbeat(correlation_id, version, group, generation, member_id, group_instance_id=None):
    """Heartbeat v0..v3."""
    assert 0 <= version <= 3
    body = string(group) + i32(generation) + string(member_id)
    if version >= 3:
        body += string(group_instance_id)
    return frame(header_v1(API_HEARTBEAT, version, correlation_id) + body)


def parse_heartbeat(payload, version):
    """-> (correlation id, error)."""
    r = Reader(payload)
    corr = r.i32()
    if version >= 1:
        r.i32()  # throttle time
    err = r.i16()
    _done(r, f"Heartbeat v{version} response")
    return corr, err


def leave_group(correlation_id, version, group, member_id):
    """LeaveGroup v0..v2 (one member)."""
    assert 0 <= version <= 2
    return frame(header_v1(API_LEAVE_GROUP, version, correlation_id)
                 + string(group) + string(member_id))


def parse_leave_group(payload, version):
    """-> (correlation id, error)."""
    r = Reader(payload)
    corr = r.i32()
    if version >= 1:
        r.i32()  # throttle time
    err = r.i16()
    _done(r, f"LeaveGroup v{version} response")
    return corr, err


def offset_commit_v2(correlation_id, group, generation, member_id, offsets, retention_ms=-1):
    """`offsets`: {topic: [(partition, offset, metadata)]}."""
    body = string(group) + i32(generation) + string(member_id) + i64(retention_ms)
    body += i32(len(offsets))
    for topic, parts in offsets.items():
        body += string(topic) + i32(len(parts))
        body += b"".join(i32(p) + i64(o) + string(m) for p, o, m in parts)
    return frame(header_v1(API_OFFSET_COMMIT, 2, correlation_id) + body)


def parse_offset_commit_v2(payload):
    """-> (correlation id, {(topic, partition): error})."""
    r = Reader(payload)
    corr = r.i32()
    out = {}
    for _ in range(r.i32()):
        name = r.string()
        for _ in range(r.i32()):
            p, err = r.i32(), r.i16()
            out[(name, p)] = err
    _done(r, "OffsetCommit v2 response")
    return corr, out


def offset_fetch_v1(correlation_id, group, partitions):
    """`partitions`: {topic: [partition, ...]}."""
    body = string(group) + i32(len(partitions))
    for topic, parts in partitions.items():
        body += string(topic) + i32(len(parts)) + b"".join(i32(p) for p in parts)
    return frame(header_v1(API_OFFSET_FETCH, 1, correlation_id) + body)


def parse_offset_fetch_v1(payload):
    """-> (correlation id, {(topic, partition): (offset, metadata, error)})."""
    r = Reader(payload)
    corr = r.i32()
    out = {}
    for _ in range(r.i32()):
        name = r.string()
        for _ in range(r.i32()):
            p, off, meta, err = r.i32(), r.i64(), r.string(), r.i16()
            out[(name, p)] = (off, meta, err)
    _done(r, "OffsetFetch v1 response")
    return corr, out


def describe_groups_v0(correlation_id, groups):
    body = i32(len(groups)) + b"".join(string(g) for g in groups)
    return frame(header_v1(API_DESCRIBE_GROUPS, 0, correlation_id) + body)


def parse_describe_groups_v0(payload):
    """-> (correlation id, {group: dict(error, state, protocol_type, protocol,
    members=[(member id, client id, host, metadata, assignment)])})."""
    r = Reader(payload)
    corr = r.i32()
    out = {}
    for _ in range(r.i32()):
        err, gid, state, ptype, proto = r.i16(), r.string(), r.string(), r.string(), r.string()
        members = r.array(lambda r: (r.string(), r.string(), r.string(), _nbytes(r), _nbytes(r)))
        out[gid] = {"error": err, "state": state, "protocol_type": ptype, "protocol": proto,
                    "members": members}
    _done(r, "DescribeGroups v0 response")
    return corr, out


def list_groups_v0(correlation_id):
    return frame(header_v1(API_LIST_GROUPS, 0, correlation_id))


def parse_list_groups_v0(payload):
    """-> (correlation id, error, {group: protocol type})."""
    r = Reader(payload)
    corr, err = r.i32(), r.i16()
    groups = dict(r.array(lambda r: (r.string(), r.string())) or [])
    _done(r, "ListGroups v0 response")
    return corr, err, groups


def delete_groups_v0(correlation_id, groups):
    body = i32(len(groups)) + b"".join(string(g) for g in groups)
    return frame(header_v1(API_DELETE_GROUPS, 0, correlation_id) + body)


def parse_delete_groups_v0(payload):
    """-> (correlation id, {group: error})."""
    r = Reader(payload)
    corr = r.i32()
    r.i32()  # throttle time
    out = dict(r.array(lambda r: (r.string(), r.i16())) or [])
    _done(r, "DeleteGroups v0 response")
    return corr, out


def offset_delete_v0(correlation_id, group, partitions):
    """`partitions`: {topic: [partition, ...]}."""
    body = string(group) + i32(len(partitions))
    for topic, parts in partitions.items():
        body += string(topic) + i32(len(parts)) + b"".join(i32(p) for p in parts)
    return frame(header_v1(API_OFFSET_DELETE, 0, correlation_id) + body)


def parse_offset_delete_v0(payload):
    """-> (correlation id, error, {(topic, partition): error})."""
    r = Reader(payload)
    corr, err = r.i32(), r.i16()
    r.i32()  # throttle time
    out = {}
    for _ in range(r.i32()):
        name = r.string()
        for _ in range(r.i32()):
            p, perr = r.i32(), r.i16()
            out[(name, p)] = perr
    _done(r, "OffsetDelete v0 response")
    return corr, err, out


def request(sock, frame_bytes):
    """Sends one request frame and returns the response payload (correlation id first)."""
    sock.sendall(frame_bytes)
    return read_frame(sock)


# ---- leader epochs (KIP-320): ListOffsets v4/v5, OffsetForLeaderEpoch v2-v4, Fetch v9 -------
# Layouts from Kafka's ListOffsets, OffsetForLeaderEpoch and Fetch message JSON files.

API_LIST_OFFSETS = 2
API_OFFSET_FOR_LEADER_EPOCH = 23

FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
UNKNOWN_TOPIC_OR_PARTITION = 3
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2


def list_offsets(correlation_id, version, topic, partitions, replica_id=-1):
    """ListOffsets v4/v5; `partitions`: [(partition, current leader epoch, timestamp)]."""
    assert version in (4, 5)
    parts = b"".join(i32(p) + i32(epoch) + i64(ts) for p, epoch, ts in partitions)
    body = (i32(replica_id) + i8(0) + i32(1) + string(topic) + i32(len(partitions)) + parts)
    return frame(header_v1(API_LIST_OFFSETS, version, correlation_id) + body)


def parse_list_offsets(payload):
    """ListOffsets v4/v5 -> (correlation id, {(topic, partition): (error, timestamp, offset,
    leader epoch)})."""
    r = Reader(payload)
    corr = r.i32()
    r.i32()  # throttle time
    out = {}
    for _ in range(r.i32()):
        name = r.string()
        for _ in range(r.i32()):
            p = r.i32()
            out[(name, p)] = (r.i16(), r.i64(), r.i64(), r.i32())
    if r.remaining():
        raise ValueError(f"{r.remaining()} trailing bytes after ListOffsets response")
    return corr, out


def offset_for_leader_epoch(correlation_id, version, topic, partitions, replica_id=-1):
    """OffsetForLeaderEpoch v2-v4; `partitions`: [(partition, current leader epoch, leader
    epoch)]. v3 adds the replica id; v4 is flexible (compact arrays, tagged fields)."""
    assert version in (2, 3, 4)
    head = i32(replica_id) if version >= 3 else b""
    if version < 4:
        parts = b"".join(i32(p) + i32(cur) + i32(e) for p, cur, e in partitions)
        body = head + i32(1) + string(topic) + i32(len(partitions)) + parts
        return frame(header_v1(API_OFFSET_FOR_LEADER_EPOCH, version, correlation_id) + body)
    parts = b"".join(i32(p) + i32(cur) + i32(e) + b"\x00" for p, cur, e in partitions)
    body = (head + uvarint(2) + compact_string(topic) + uvarint(len(partitions) + 1) + parts
            + b"\x00" + b"\x00")
    return frame(header_v2(API_OFFSET_FOR_LEADER_EPOCH, version, correlation_id) + body)


def _read_uvarint(r):
    shift = value = 0
    while True:
        b = r.take(1)[0]
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value
        shift += 7


def _skip_tagged_fields(r):
    for _ in range(_read_uvarint(r)):
        _read_uvarint(r)  # tag
        r.take(_read_uvarint(r))


def parse_offset_for_leader_epoch(payload, version):
    """-> (correlation id, {(topic, partition): (error, leader epoch, end offset)})."""
    r = Reader(payload)
    corr = r.i32()
    flexible = version >= 4
    if flexible:
        _skip_tagged_fields(r)  # response header v1
    r.i32()  # throttle time

    def count():
        return _read_uvarint(r) - 1 if flexible else r.i32()

    def name():
        return r.take(_read_uvarint(r) - 1).decode() if flexible else r.string()

    out = {}
    for _ in range(count()):
        topic = name()
        for _ in range(count()):
            err, p, epoch, end = r.i16(), r.i32(), r.i32(), r.i64()
            if flexible:
                _skip_tagged_fields(r)
            out[(topic, p)] = (err, epoch, end)
        if flexible:
            _skip_tagged_fields(r)
    if flexible:
        _skip_tagged_fields(r)
    if r.remaining():
        raise ValueError(f"{r.remaining()} trailing bytes after OffsetForLeaderEpoch response")
    return corr, out


def fetch_v9(correlation_id, topic, partition, offset, current_leader_epoch, max_wait_ms=0,
             max_bytes=1 << 20):
    """Fetch v9 without a session (id 0, epoch -1: a full, sessionless fetch)."""
    return fetch_classic(correlation_id, 9, topic, partition, offset, max_wait_ms=max_wait_ms,
                         max_bytes=max_bytes, current_leader_epoch=current_leader_epoch)


def parse_fetch_v9(payload):
    """-> (correlation id, {(topic, partition): (error, high watermark, records bytes)})."""
    corr, top_error, out = parse_fetch_classic(payload, 9)
    if top_error:
        raise ValueError(f"Fetch v9 top-level error {top_error}")
    return corr, {k: (p["error"], p["high_watermark"], p["records"]) for k, p in out.items()}


# ---- Produce v10 (flexible; KIP-951 leader hints in NOT_LEADER_OR_FOLLOWER answers) ------

def produce_v10(correlation_id, topic, partition_batches, acks=1, timeout_ms=30000):
    """`partition_batches`: [(partition, batch bytes), ...] for one topic."""
    parts = b"".join(i32(p) + uvarint(len(b) + 1) + b + b"\x00" for p, b in partition_batches)
    body = (uvarint(0)  # transactional id: null
            + i16(acks) + i32(timeout_ms)
            + uvarint(2) + compact_string(topic) + uvarint(len(partition_batches) + 1) + parts
            + b"\x00" + b"\x00")
    return frame(header_v2(API_PRODUCE, 10, correlation_id) + body)


def _tagged_fields(r):
    """{tag: raw bytes} of a tagged-field section."""
    out = {}
    for _ in range(_read_uvarint(r)):
        tag = _read_uvarint(r)
        out[tag] = r.take(_read_uvarint(r))
    return out


def _compact_string(r):
    n = _read_uvarint(r)
    return None if n == 0 else r.take(n - 1).decode()


def _node_endpoints(tags):
    """KIP-951's `NodeEndpoints` (tag 0 of a Produce v10 or Fetch v16 response): node id →
    (host, port, rack)."""
    endpoints = {}
    if 0 in tags:
        er = Reader(tags[0])
        for _ in range(_read_uvarint(er) - 1):
            node, host, port, rack = er.i32(), _compact_string(er), er.i32(), _compact_string(er)
            _tagged_fields(er)
            endpoints[node] = (host, port, rack)
    return endpoints


def parse_produce_v10(payload):
    """-> (correlation id, {(topic, partition): (error, base offset, current leader (id,
    epoch) or None)}, {node id: (host, port, rack)})."""
    r = Reader(payload)
    corr = r.i32()
    _tagged_fields(r)  # response header v1
    out = {}
    for _ in range(_read_uvarint(r) - 1):
        name = _compact_string(r)
        for _ in range(_read_uvarint(r) - 1):
            p, err, base, _append_time, _log_start = r.i32(), r.i16(), r.i64(), r.i64(), r.i64()
            for _ in range(_read_uvarint(r) - 1):  # record errors
                r.i32()
                _compact_string(r)
                _tagged_fields(r)
            _compact_string(r)  # error message
            leader = None
            tags = _tagged_fields(r)
            if 0 in tags:
                lr = Reader(tags[0])
                leader = (lr.i32(), lr.i32())
            out[(name, p)] = (err, base, leader)
        _tagged_fields(r)
    r.i32()  # throttle time
    endpoints = _node_endpoints(_tagged_fields(r))
    if r.remaining():
        raise ValueError(f"{r.remaining()} trailing bytes after Produce v10 response")
    return corr, out, endpoints


# ---- Metadata v12 (topic ids) and Fetch v12-v16 (flexible; KIP-516 topic ids, KIP-903
# ReplicaState, KIP-951 leader hints) ------------------------------------------------------
# Layouts from Kafka's MetadataRequest/Response.json and FetchRequest/Response.json.

UNKNOWN_TOPIC_ID = 100


def metadata_v12(correlation_id, topics):
    """Metadata v12 for the topics named in `topics` (no auto-creation)."""
    body = (uvarint(len(topics) + 1)
            + b"".join(b"\x00" * 16 + compact_string(t) + b"\x00" for t in topics)
            + i8(0) + i8(0)  # allow auto topic creation, include topic authorized operations
            + b"\x00")
    return frame(header_v2(API_METADATA, 12, correlation_id) + body)


def parse_metadata_v12(payload):
    """-> (correlation id, {topic: (error, topic id bytes, {partition: (error, leader, leader
    epoch, replicas)})})."""
    r = Reader(payload)
    corr = r.i32()
    _tagged_fields(r)  # response header v1
    r.i32()  # throttle time
    for _ in range(_read_uvarint(r) - 1):  # brokers
        r.i32()
        _compact_string(r)
        r.i32()
        _compact_string(r)
        _tagged_fields(r)
    _compact_string(r)  # cluster id
    r.i32()  # controller id

    def int_array():
        return [r.i32() for _ in range(_read_uvarint(r) - 1)]

    out = {}
    for _ in range(_read_uvarint(r) - 1):
        err, name, topic_id = r.i16(), _compact_string(r), r.take(16)
        r.i8()  # is internal
        partitions = {}
        for _ in range(_read_uvarint(r) - 1):
            perr, p, leader, epoch = r.i16(), r.i32(), r.i32(), r.i32()
            replicas = int_array()
            int_array()  # isr
            int_array()  # offline replicas
            _tagged_fields(r)
            partitions[p] = (perr, leader, epoch, replicas)
        r.i32()  # topic authorized operations
        _tagged_fields(r)
        out[name] = (err, topic_id, partitions)
    _tagged_fields(r)
    if r.remaining():
        raise ValueError(f"{r.remaining()} trailing bytes after Metadata v12 response")
    return corr, out


def fetch_flexible(correlation_id, version, topics, replica_id=-1, replica_epoch=-1,
                   max_wait_ms=0, max_bytes=1 << 20):
    """Fetch v12-v16 without a session (id 0, epoch -1: a full, sessionless fetch).
    `topics`: [(topic name (v12) or 16-byte topic id (v13+), [(partition, current leader
    epoch, fetch offset)])]. v15+ send the replica in ReplicaState (tag 1, KIP-903) — only
    when it is not the default (-1, -1), as Kafka's encoder leaves a default tagged field out."""
    assert 12 <= version <= 16
    tags = b"\x00"
    head = b""
    if version < 15:
        head = i32(replica_id)
    elif (replica_id, replica_epoch) != (-1, -1):
        state = i32(replica_id) + i64(replica_epoch) + b"\x00"
        tags = uvarint(1) + uvarint(1) + uvarint(len(state)) + state
    body = head + i32(max_wait_ms) + i32(1) + i32(max_bytes) + i8(0) + i32(0) + i32(-1)
    body += uvarint(len(topics) + 1)
    for topic, partitions in topics:
        if version >= 13:
            assert len(topic) == 16
            body += topic
        else:
            body += compact_string(topic)
        body += uvarint(len(partitions) + 1)
        for p, current_leader_epoch, offset in partitions:
            body += (i32(p) + i32(current_leader_epoch) + i64(offset) + i32(-1)  # last fetched
                     + i64(-1) + i32(max_bytes) + b"\x00")  # log start offset
        body += b"\x00"
    body += uvarint(1)  # forgotten topics: none
    body += compact_string("")  # rack id
    body += tags
    return frame(header_v2(API_FETCH, version, correlation_id) + body)


def parse_fetch_flexible(payload, version):
    """Fetch v12-v16 -> (correlation id, {(topic name (v12) or topic id bytes (v13+),
    partition): {"error", "high_watermark", "records", "current_leader": (id, epoch) or None,
    "diverging_epoch": (epoch, end offset) or None}}, {node id: (host, port, rack)})."""
    r = Reader(payload)
    corr = r.i32()
    _tagged_fields(r)  # response header v1
    r.i32()  # throttle time
    top_error = r.i16()
    r.i32()  # session id
    if top_error:
        raise ValueError(f"Fetch v{version} top-level error {top_error}")
    out = {}
    for _ in range(_read_uvarint(r) - 1):
        topic = r.take(16) if version >= 13 else _compact_string(r)
        for _ in range(_read_uvarint(r) - 1):
            p, err, hw, _lso, _log_start = r.i32(), r.i16(), r.i64(), r.i64(), r.i64()
            n = _read_uvarint(r)  # aborted transactions (nullable)
            for _ in range(max(n - 1, 0)):
                r.i64()
                r.i64()
                _tagged_fields(r)
            r.i32()  # preferred read replica
            n = _read_uvarint(r)
            records = b"" if n == 0 else r.take(n - 1)
            tags = _tagged_fields(r)
            diverging = leader = None
            if 0 in tags:
                d = Reader(tags[0])
                diverging = (d.i32(), d.i64())
            if 1 in tags:
                lr = Reader(tags[1])
                leader = (lr.i32(), lr.i32())
            out[(topic, p)] = {"error": err, "high_watermark": hw, "records": records,
                               "current_leader": leader, "diverging_epoch": diverging}
        _tagged_fields(r)
    endpoints = _node_endpoints(_tagged_fields(r))
    if r.remaining():
        raise ValueError(f"{r.remaining()} trailing bytes after Fetch v{version} response")
    return corr, out, endpoints
