"""Client quotas (issue #29 point 5; KIP-13, KIP-55, KIP-124, KIP-219, KIP-546):
`kafka-configs.sh` sets, describes and deletes `producer_byte_rate` / `consumer_byte_rate` for
clients and users (AlterClientQuotas, DescribeClientQuotas), and a client over its quota is
throttled: its responses carry `throttle_time_ms`, which librdkafka reports through
`throttle_cb`. A client over its `request_percentage` (request handling time) is throttled
the same way. A client without a quota is never throttled. Passes against Kafka 4.4 too."""

import socket
import uuid

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

import kafka_wire as wire
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
