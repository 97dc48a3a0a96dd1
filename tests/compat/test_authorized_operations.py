"""KIP-430 authorized operations (librdkafka's 0081_admin): without an authorizer Kafka reports
every operation a resource type supports when the client asks for them."""

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import AclOperation

from compat_util import admin, create_topic, wait_until

TIMEOUT_S = 30
TOPIC_OPS = {AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DELETE,
             AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS,
             AclOperation.ALTER_CONFIGS}
CLUSTER_OPS = {AclOperation.CREATE, AclOperation.ALTER, AclOperation.DESCRIBE,
               AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
               AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE}
GROUP_OPS = {AclOperation.READ, AclOperation.DELETE, AclOperation.DESCRIBE,
             AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}


def test_topic_cluster_and_group_operations_are_all_reported(broker):
    create_topic(broker.bootstrap, "ops", 1)
    a = admin(broker.bootstrap)
    topic = a.describe_topics(TopicCollection(["ops"]), include_authorized_operations=True,
                              request_timeout=TIMEOUT_S)["ops"].result(timeout=TIMEOUT_S)
    assert set(topic.authorized_operations) == TOPIC_OPS
    cluster = a.describe_cluster(include_authorized_operations=True,
                                 request_timeout=TIMEOUT_S).result(timeout=TIMEOUT_S)
    assert set(cluster.authorized_operations) == CLUSTER_OPS
    # Not asked: not reported.
    plain = a.describe_cluster(request_timeout=TIMEOUT_S).result(timeout=TIMEOUT_S)
    assert not plain.authorized_operations

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ops-group",
                  "auto.offset.reset": "earliest"})
    c.subscribe(["ops"])
    try:
        def described():
            c.poll(0.2)
            g = a.describe_consumer_groups(["ops-group"], include_authorized_operations=True,
                                           request_timeout=TIMEOUT_S)["ops-group"]
            try:
                return g.result(timeout=TIMEOUT_S)
            except KafkaException as e:
                # Kafka answers NOT_COORDINATOR while it loads the offsets topic.
                if e.args[0].code() != KafkaError.NOT_COORDINATOR:
                    raise
                return None
        wait_until(lambda: (d := described()) is not None and len(d.members) == 1, TIMEOUT_S,
                   what="the group formed")
        assert set(described().authorized_operations) == GROUP_OPS
    finally:
        c.close()
