"""Static members (KIP-345) that close without leaving — librdkafka sends no LeaveGroup for a
`group.instance.id` — stay members until `session.timeout.ms` after their last heartbeat, then
the group empties and DeleteGroups succeeds (librdkafka's 0081_admin deletes such a group)."""

import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, ConsumerGroupState

from compat_util import admin, create_topic, wait_until

TOPIC = "static-expiry"
SESSION_MS = 6000  # Kafka's group.min.session.timeout.ms
MARGIN_S = 3.0


@pytest.mark.long("waits out a 6 s session after the members close (the README command's "
                  "30-minute budget)")
def test_closed_static_members_expire_after_their_session(broker):
    create_topic(broker.bootstrap, TOPIC, 4)
    a = admin(broker.bootstrap)
    members = [Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "static-expiry",
                         "group.instance.id": f"instance-{i}", "session.timeout.ms": SESSION_MS,
                         "auto.offset.reset": "earliest"}) for i in range(3)]
    for c in members:
        c.subscribe([TOPIC])

    def group():
        while True:
            try:
                return a.describe_consumer_groups(["static-expiry"])["static-expiry"].result(
                    timeout=30)
            except KafkaException as e:
                # Kafka answers NOT_COORDINATOR while it loads the offsets topic.
                if e.args[0].code() != KafkaError.NOT_COORDINATOR:
                    raise
                time.sleep(0.2)

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for c in members:
            c.poll(0.1)
        g = group()
        # Stable on the coordinator is not enough: each consumer must also have taken its
        # assignment (served by poll). librdkafka's close() of a consumer whose assignment is
        # still queued for the application hangs for good in its rebalance callback (a client
        # bug, librdkafka #4884), whatever the broker does.
        if (len(g.members) == 3 and g.state == ConsumerGroupState.STABLE
                and all(c.assignment() for c in members)):
            break
    assert len(g.members) == 3 and g.state == ConsumerGroupState.STABLE, g
    assert all(c.assignment() for c in members), [c.assignment() for c in members]
    for c in members:
        c.close()
    closed = time.monotonic()
    # Still members right after closing: static members do not leave.
    assert len(group().members) == 3
    wait_until(lambda: len(group().members) == 0, SESSION_MS / 1000 + MARGIN_S,
               what="closed static members expired")
    assert time.monotonic() - closed >= SESSION_MS / 1000 - 1.0
    result = a.delete_consumer_groups(["static-expiry"])["static-expiry"]
    result.result(timeout=30)
