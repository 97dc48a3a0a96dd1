"""The leader's side of the replication throttle (KIP-73, issue #30 point 1), on a 3-node
cluster: a partition on brokers 1 and 2 holding several MB gets a new replica on broker 3
(a reassignment to [1, 2, 3]) while only the LEADER's throttle is set —
`leader.replication.throttled.rate` on every broker through kafka-configs.sh, and the
topic's `leader.replication.throttled.replicas` naming its existing replicas (`0:1,0:2`, what
kafka-reassign-partitions.sh `--throttle` sets; the broker id is the serving broker's, as
Kafka's `TopicConfigHandler` reads it); the follower's rate stays unset. The new replica
catches up at about the throttled rate, so it is not in the ISR a few seconds on while the
data is many times the rate; once the throttle is deleted it catches up and the reassignment
completes.

Runs against Apache Kafka 4.4 too (SLUICE_COMPAT_TARGET=kafka). The margins are wide: about
4 MB at 50 kB/s would take over a minute; the check looks only during the first seconds."""

import time

import pytest
from confluent_kafka.admin import NewTopic

from compat_util import admin, producer, wait_until
from cluster_targets import finish, start_cluster
from jvm import check_java, run_java

CONFIGS = "org.apache.kafka.tools.ConfigCommand"
SETTINGS = {
    "broker.heartbeat.interval.ms": 500,
    "broker.session.timeout.ms": 2000,
}
TOPIC = "leader-throttled"
RATE = 50_000
RECORDS, RECORD_BYTES = 4_000, 1_000
# Bounds of the waits (a loaded 2-core machine); nothing asserts a duration.
WAIT_S = 120


@pytest.fixture
def target(request, tmp_path):
    t = start_cluster(request, tmp_path, 3, SETTINGS)
    yield t
    finish(t)


def configs(cp, target, *args):
    return check_java(run_java(cp, CONFIGS, ["--bootstrap-server", target.bootstrap(), *args],
                               timeout=90))


def replicas_and_isr(bootstrap):
    md = admin(bootstrap).list_topics(topic=TOPIC, timeout=10)
    t = md.topics.get(TOPIC)
    if t is None or t.error is not None or 0 not in t.partitions:
        return [], []
    p = t.partitions[0]
    return sorted(p.replicas), sorted(p.isrs)


def test_the_leader_throttles_a_new_replica_until_the_throttle_is_removed(
        target, java_classpath):
    from kafka import TopicPartition as KTopicPartition
    from kafka.admin import KafkaAdminClient

    cp = java_classpath
    bootstrap = target.bootstrap()
    a = admin(bootstrap)
    futures = a.create_topics(
        [NewTopic(TOPIC, num_partitions=1, replica_assignment=[[1, 2]],
                  config={"leader.replication.throttled.replicas": "0:1,0:2"})],
        operation_timeout=30, request_timeout=30)
    futures[TOPIC].result(timeout=60)
    wait_until(lambda: replicas_and_isr(bootstrap) == ([1, 2], [1, 2]), WAIT_S,
               what="the topic on brokers 1 and 2, both in sync")
    prod = producer(bootstrap, **{"enable.idempotence": True, "linger.ms": 20})
    for i in range(RECORDS):
        prod.produce(TOPIC, value=b"%08d" % i + b"x" * (RECORD_BYTES - 8), partition=0)
        prod.poll(0)
    assert prod.flush(60) == 0
    configs(cp, target, "--alter", "--entity-type", "brokers", "--entity-default",
            "--add-config", f"leader.replication.throttled.rate={RATE}")

    client = KafkaAdminClient(bootstrap_servers=bootstrap.split(","))
    try:
        started = client.alter_partition_reassignments({KTopicPartition(TOPIC, 0): [1, 2, 3]})
        assert started == {KTopicPartition(TOPIC, 0): None}, started
    finally:
        client.close()
    wait_until(lambda: replicas_and_isr(bootstrap)[0] == [1, 2, 3], WAIT_S,
               what="broker 3 added to the replicas")
    # ~4 MB at 50 kB/s: broker 3 cannot be in sync during the first seconds.
    for _ in range(5):
        replicas, isr = replicas_and_isr(bootstrap)
        assert 3 not in isr, f"the throttled replica caught up at once: {replicas} {isr}"
        time.sleep(1)

    configs(cp, target, "--alter", "--entity-type", "brokers", "--entity-default",
            "--delete-config", "leader.replication.throttled.rate")
    wait_until(lambda: replicas_and_isr(bootstrap) == ([1, 2, 3], [1, 2, 3]), WAIT_S,
               interval=0.5, what="broker 3 in sync once the throttle is removed")
