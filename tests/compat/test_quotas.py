"""Client quotas (issue #29 point 5; KIP-13, KIP-55, KIP-124, KIP-219, KIP-546):
`kafka-configs.sh` sets, describes and deletes `producer_byte_rate` / `consumer_byte_rate` for
clients and users (AlterClientQuotas, DescribeClientQuotas), and a client over its quota is
throttled: its responses carry `throttle_time_ms`, which librdkafka reports through
`throttle_cb`. A client over its `request_percentage` (request handling time) is throttled
the same way. A client without a quota is never throttled. Quotas hold per broker: a client
whose connections Sluice's shards serve apart gets its quota once. Passes against Kafka 4.4
too. A quota of a user meters all its client ids together (KIP-55)."""

import re
import socket
import struct
import threading
import time
import urllib.request
import uuid

import pytest

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

import kafka_wire as wire
from conftest import TARGET
from jvm import check_java, run_java

CONFIGS = "org.apache.kafka.tools.ConfigCommand"


def configs(cp, broker, *args):
    return check_java(run_java(cp, CONFIGS, ["--bootstrap-server", broker.bootstrap, *args],
                               timeout=90))


def produce(broker, topic, client_id, records, size):
    """Produces `records` of `size` bytes; returns the throttle times librdkafka reported."""
    throttles = []
    p = Producer({"bootstrap.servers": broker.bootstrap, "client.id": client_id,
                  "linger.ms": 0, "batch.size": size + 200,
                  "throttle_cb": lambda e: throttles.append(e.throttle_time)})
    for _ in range(records):
        p.produce(topic, b"x" * size)
        p.poll(0)
    assert p.flush(120) == 0
    p.poll(0.5)
    return throttles


def test_kafka_configs_set_describe_and_delete_client_quotas(broker, java_classpath):
    cp = java_classpath
    configs(cp, broker, "--alter", "--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048",
            "--entity-type", "clients", "--entity-name", "slow-client")
    configs(cp, broker, "--alter", "--add-config", "producer_byte_rate=4096",
            "--entity-type", "users", "--entity-default")
    out = configs(cp, broker, "--describe", "--entity-type", "clients", "--entity-name",
                  "slow-client")
    assert "Quota configs for client-id 'slow-client' are" in out, out
    assert "producer_byte_rate=1024.0" in out and "consumer_byte_rate=2048.0" in out, out
    out = configs(cp, broker, "--describe", "--entity-type", "users", "--entity-default")
    assert "Quota configs for the default user-principal are producer_byte_rate=4096.0" in out, out
    # Kafka's checks: a byte rate is a whole number.
    run = run_java(cp, CONFIGS, ["--bootstrap-server", broker.bootstrap, "--alter",
                                 "--add-config", "producer_byte_rate=10.5", "--entity-type",
                                 "clients", "--entity-name", "slow-client"], timeout=90)
    assert run.returncode != 0 and "cannot be a fractional value" in run.output, run.report()
    configs(cp, broker, "--alter", "--delete-config", "producer_byte_rate,consumer_byte_rate",
            "--entity-type", "clients", "--entity-name", "slow-client")
    out = configs(cp, broker, "--describe", "--entity-type", "clients", "--entity-name",
                  "slow-client")
    assert "producer_byte_rate" not in out, out


def test_a_client_over_its_produce_quota_is_throttled(broker, java_classpath):
    cp = java_classpath
    topic = f"quota-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    configs(cp, broker, "--alter", "--add-config", "producer_byte_rate=20000",
            "--entity-type", "clients", "--entity-name", "throttled")
    # 400 KB at 20 kB/s: well over the quota within the first window.
    throttled = produce(broker, topic, "throttled", 40, 10_000)
    assert throttled and max(throttled) > 0, throttled
    free = produce(broker, topic, "unlimited", 40, 10_000)
    assert not any(t > 0 for t in free), free


def test_a_consumer_over_its_fetch_quota_is_throttled(broker, java_classpath):
    cp = java_classpath
    topic = f"quota-f-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    produce(broker, topic, "loader", 40, 10_000)
    configs(cp, broker, "--alter", "--add-config", "consumer_byte_rate=20000",
            "--entity-type", "clients", "--entity-name", "slow-reader")
    throttles = []
    c = Consumer({"bootstrap.servers": broker.bootstrap, "client.id": "slow-reader",
                  "group.id": f"g-{uuid.uuid4()}", "auto.offset.reset": "earliest",
                  "throttle_cb": lambda e: throttles.append(e.throttle_time)})
    try:
        c.subscribe([topic])
        got = 0
        for _ in range(120):
            msg = c.poll(0.5)
            if msg is not None and msg.error() is None:
                got += 1
            if got >= 40 and throttles:
                break
        assert got > 0
        assert throttles and max(throttles) > 0, throttles
    finally:
        c.close()


def metadata_throttles(broker, client_id, most):
    """Sends Metadata v4 requests (no topics) as `client_id` on one connection, one at a time,
    until a response carries a throttle time or `most` were sent; returns every response's
    `throttle_time_ms`."""
    host, port = broker.bootstrap.rsplit(":", 1)
    throttles = []
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        for correlation_id in range(most):
            # Metadata v4: an empty topic list (no topics), allow_auto_topic_creation false.
            body = wire.i32(0) + wire.i8(0)
            sock.sendall(wire.frame(wire.header_v1(wire.API_METADATA, 4, correlation_id,
                                                   client_id) + body))
            r = wire.Reader(wire.read_frame(sock))
            assert r.i32() == correlation_id
            throttles.append(r.i32())
            if throttles[-1] > 0:
                break
    return throttles


def test_a_client_over_its_request_percentage_is_throttled(broker, java_classpath):
    # 0.01 % of a handler's time over an 11 s window: a millisecond or so of handling.
    configs(java_classpath, broker, "--alter", "--add-config", "request_percentage=0.01",
            "--entity-type", "clients", "--entity-name", "busy")
    out = configs(java_classpath, broker, "--describe", "--entity-type", "clients",
                  "--entity-name", "busy")
    assert "request_percentage=0.01" in out, out
    busy = metadata_throttles(broker, "busy", 5000)
    assert busy[-1] > 0, f"no throttle in {len(busy)} responses"
    # Kafka bounds a request-time throttle by one sample window (1 s).
    assert busy[-1] <= 1000, busy[-1]
    idle = metadata_throttles(broker, "idle", len(busy))
    assert idle == [0] * len(busy), idle


# A client id's produce quota for the test below, B/s, and how long both connections send.
SPREAD_QUOTA = 200_000
SPREAD_SECONDS = 8
SPREAD_RECORD = 20_000


def produce_as(sock, client_id, topic, correlation_id, size=SPREAD_RECORD):
    """Produce v3 (acks=1) of one `size`-byte record to partition 0 as `client_id`;
    returns the response's `throttle_time_ms`."""
    batch = wire.record_batch([b"s" * size])
    body = (wire.string(None) + wire.i16(1) + wire.i32(30000) + wire.i32(1) + wire.string(topic)
            + wire.i32(1) + wire.i32(0) + wire.bytes_(batch))
    sock.sendall(wire.frame(wire.header_v1(wire.API_PRODUCE, 3, correlation_id, client_id)
                            + body))
    payload = wire.read_frame(sock)
    corr, out = wire.parse_produce_classic(payload, 3)
    assert corr == correlation_id and out[(topic, 0)]["error"] == 0, out
    return struct.unpack(">i", payload[-4:])[0]


def shard_counts(broker, name):
    """Sluice's per-shard metric `name` from the admin `/metrics`: {shard: value}."""
    with urllib.request.urlopen(broker.admin_url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    return {int(s): float(v) for s, v in re.findall(rf'^{name}{{shard="(\d+)"}} (\S+)$', text, re.M)}


def connections_on_two_shards(broker):
    """Two connections that Sluice's shards 0 and 1 serve (connections are handed to the
    shards in turn; each is placed by the shard whose connection count it raised), or, against
    Kafka (no shards), two connections."""
    if TARGET == "kafka":
        return [wire.connect(broker.bootstrap) for _ in range(2)]
    by_shard, spare = {}, []
    for i in range(8):
        before = shard_counts(broker, "sluice_connections")
        s = wire.connect(broker.bootstrap)
        s.sendall(wire.api_versions_v0(i))
        wire.read_frame(s)
        after = shard_counts(broker, "sluice_connections")
        raised = [k for k in after if after[k] > before.get(k, 0)]
        if len(raised) == 1 and raised[0] not in by_shard:
            by_shard[raised[0]] = s
        else:
            spare.append(s)
        if len(by_shard) == 2:
            break
    for s in spare:
        s.close()
    assert sorted(by_shard) == [0, 1], f"connections landed on shards {sorted(by_shard)}"
    return [by_shard[0], by_shard[1]]


def test_a_client_ids_quota_holds_across_its_connections_on_every_shard(broker, java_classpath):
    # Kafka meters a client per broker; Sluice's two shards each serve one of the client's
    # connections, and the quota holds for their sum, not for each.
    topic = f"quota-s-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    configs(java_classpath, broker, "--alter", "--add-config",
            f"producer_byte_rate={SPREAD_QUOTA}", "--entity-type", "clients", "--entity-name",
            "spread")
    out = configs(java_classpath, broker, "--describe", "--entity-type", "clients",
                  "--entity-name", "spread")
    assert f"producer_byte_rate={SPREAD_QUOTA}" in out, out
    first, second = connections_on_two_shards(broker)
    if TARGET != "kafka":
        produced_before = shard_counts(broker, "sluice_produce_requests_total")
    # The first connection alone, until it is throttled (its quota's window is full).
    for correlation_id in range(1000):
        if produce_as(first, "spread", topic, correlation_id) > 0:
            break
    else:
        pytest.fail("1000 requests of 20 kB at 200 kB/s were never throttled")
    # Sluice's shards see each other's meters at most a report interval (200 ms) late: let
    # the other shard hear of the first connection's bytes before the second one sends.
    time.sleep(1)
    # Then both, for SPREAD_SECONDS: the second connection, which sent nothing yet, is
    # throttled by what the first sent, and the two together stay within the quota — the
    # window already holds its fill from the first connection, so what they may add is well
    # under the quota × SPREAD_SECONDS (a quota per shard would let the second connection
    # send a whole window's fill of its own, 10 × the quota, at once).
    end = time.monotonic() + SPREAD_SECONDS
    sent, throttles, errors = [0, 0], [[], []], []

    def run(i, sock):
        correlation_id = 1000
        try:
            while time.monotonic() < end:
                throttle = produce_as(sock, "spread", topic, correlation_id)
                if time.monotonic() < end:
                    sent[i] += SPREAD_RECORD
                    throttles[i].append(throttle)
                correlation_id += 1
        except OSError:
            pass  # closed at the end while waiting out a throttle
        except Exception as e:  # noqa: BLE001 — reported by the test below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i, s)) for i, s in enumerate((first, second))]
    for t in threads:
        t.start()
    time.sleep(SPREAD_SECONDS)
    for s in (first, second):
        s.shutdown(socket.SHUT_RDWR)
    for t in threads:
        t.join(60)
        assert not t.is_alive()
    first.close()
    second.close()
    assert not errors, errors
    assert any(t > 0 for t in throttles[1]), throttles[1]
    assert sum(sent) < SPREAD_QUOTA * SPREAD_SECONDS, (sent, throttles)
    if TARGET != "kafka":
        produced = shard_counts(broker, "sluice_produce_requests_total")
        assert all(produced[k] > produced_before.get(k, 0) for k in (0, 1)), produced


def test_a_users_quota_holds_across_its_client_ids(broker, java_classpath):
    # KIP-55: a quota of a user (here the default user, so every user, the unauthenticated
    # one included) meters all of the user's client ids together, unlike a quota of user +
    # client id. The first client id sends half of what the quota's window holds, unthrottled;
    # the second is then throttled after about the other half, where metered on its own it
    # could send a whole window's fill (20 records) first. Records of 100 kB keep a window's
    # fill to 20 requests, so a slow machine (up to about 400 ms a request) still sends faster
    # than the quota and the window's samples do not expire under the test.
    topic = f"quota-u-{uuid.uuid4().hex[:8]}"
    record = SPREAD_QUOTA // 2
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    configs(java_classpath, broker, "--alter", "--add-config",
            f"producer_byte_rate={SPREAD_QUOTA}", "--entity-type", "users", "--entity-default")
    out = configs(java_classpath, broker, "--describe", "--entity-type", "users",
                  "--entity-default")
    assert f"producer_byte_rate={SPREAD_QUOTA}" in out, out
    first, second = wire.connect(broker.bootstrap), wire.connect(broker.bootstrap)
    try:
        # 10 records of 100 kB: 1 MB over the minimum 10 s window, 100 kB/s of 200 kB/s.
        started = time.monotonic()
        first_throttles = [produce_as(first, "app-a", topic, i, record) for i in range(10)]
        assert not any(first_throttles), first_throttles
        # Sluice's shards see each other's meters at most a report interval late.
        time.sleep(1)
        for sent in range(1, 16):
            if produce_as(second, "app-b", topic, sent, record) > 0:
                break
        else:
            pytest.fail(f"app-b sent 15 records of 100 kB without a throttle in "
                        f"{time.monotonic() - started:.1f} s: its user's quota did not count "
                        "app-a's bytes")
        assert sent > 5, f"app-b throttled after {sent} records"
    finally:
        first.close()
        second.close()
