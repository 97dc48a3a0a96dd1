"""Manual replica assignments in CreateTopics and CreatePartitions (librdkafka's 0081_admin):
accepted where Kafka accepts them on this cluster (every partition on the one broker), refused
with INVALID_REPLICA_ASSIGNMENT where Kafka's controller refuses them."""

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewPartitions, NewTopic

from compat_util import admin, wait_for_topic

TIMEOUT_S = 30


def broker_id(a):
    return next(iter(a.list_topics(timeout=TIMEOUT_S).brokers))


def error_of(future):
    try:
        future.result(timeout=TIMEOUT_S)
        return None
    except KafkaException as e:
        return e.args[0].code()


def test_assignments_on_this_broker_are_accepted(broker):
    a = admin(broker.bootstrap)
    me = broker_id(a)
    f = a.create_topics([NewTopic("assigned", num_partitions=3, replica_assignment=[[me], [me], [me]])],
                        operation_timeout=TIMEOUT_S)
    assert error_of(f["assigned"]) is None
    wait_for_topic(broker.bootstrap, "assigned", 3)
    topic = a.list_topics("assigned", timeout=TIMEOUT_S).topics["assigned"]
    assert all(p.replicas == [me] for p in topic.partitions.values())

    f = a.create_partitions([NewPartitions("assigned", 5, replica_assignment=[[me], [me]])],
                            operation_timeout=TIMEOUT_S)
    assert error_of(f["assigned"]) is None
    wait_for_topic(broker.bootstrap, "assigned", 5)


# An empty replica list never leaves librdkafka (refused locally); the unit tests cover it.
@pytest.mark.parametrize("assignment", ["twice", "unknown", "uneven"])
def test_invalid_create_topics_assignments_are_refused(broker, assignment):
    a = admin(broker.bootstrap)
    me = broker_id(a)
    lists = {"twice": [[me, me]], "unknown": [[me + 100]], "uneven": [[me], [me, me + 100]]}
    # librdkafka sends num_partitions and replication_factor as -1 with an assignment.
    f = a.create_topics([NewTopic("refused", num_partitions=len(lists[assignment]),
                                  replica_assignment=lists[assignment])],
                        operation_timeout=TIMEOUT_S)
    assert error_of(f["refused"]) == KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert "refused" not in a.list_topics(timeout=TIMEOUT_S).topics


def test_create_partitions_assignments_must_match_the_new_partitions(broker):
    a = admin(broker.bootstrap)
    me = broker_id(a)
    f = a.create_topics([NewTopic("grown", num_partitions=1, replication_factor=1)],
                        operation_timeout=TIMEOUT_S)
    assert error_of(f["grown"]) is None
    wait_for_topic(broker.bootstrap, "grown", 1)
    for lists in ([[me]], [[me + 100], [me]], [[me, me + 100], [me]]):
        f = a.create_partitions([NewPartitions("grown", 3, replica_assignment=lists)],
                                operation_timeout=TIMEOUT_S)
        assert error_of(f["grown"]) == KafkaError.INVALID_REPLICA_ASSIGNMENT, lists
    assert len(a.list_topics("grown", timeout=TIMEOUT_S).topics["grown"].partitions) == 1
