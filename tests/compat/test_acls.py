"""ACLs with Kafka's StandardAuthorizer semantics (issue #29 point 4), driven by Kafka's own
`kafka-acls.sh` (AclCommand) and checked with real clients, against a broker started with
`authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer`.

A plaintext listener authenticates nobody: every client is `User:ANONYMOUS`. So the broker
runs with `allow.everyone.if.no.acl.found=true` (what such a cluster needs — its own
controller and tools are ANONYMOUS too) and the tests DENY operations on chosen resources:
a DENY beats the default, and only the named resources change. The same tests pass against
Apache Kafka 4.4 configured the same way (`SLUICE_COMPAT_TARGET=kafka`)."""

import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from jvm import check_java, run_java

ACLS = "org.apache.kafka.tools.AclCommand"
AUTHORIZED = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": True,
    "group.initial.rebalance.delay.ms": 0,
}


def acls(cp, broker, *args):
    return check_java(run_java(cp, ACLS, ["--bootstrap-server", broker.bootstrap, *args],
                               timeout=90))


def create(broker, *names):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic(n, 1, 1) for n in names]).values():
        f.result(30)


def produce(broker, topic, value=b"v"):
    """Produces one record; returns the delivery error (None on success)."""
    errors = []
    p = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 15000})
    p.produce(topic, value, on_delivery=lambda err, _msg: errors.append(err))
    p.flush(30)
    assert errors, "no delivery report"
    return errors[0]


@pytest.mark.sluice(settings=AUTHORIZED)
def test_kafka_acls_deny_and_remove_write(broker, java_classpath):
    cp = java_classpath
    create(broker, "acl-open", "acl-secret")
    out = acls(cp, broker, "--add", "--deny-principal", "User:ANONYMOUS", "--operation",
               "Write", "--topic", "acl-secret")
    assert "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=acl-secret, " \
        "patternType=LITERAL)`" in out, out
    out = acls(cp, broker, "--list", "--topic", "acl-secret")
    assert "(principal=User:ANONYMOUS, host=*, operation=WRITE, permissionType=DENY)" in out, out

    assert produce(broker, "acl-open") is None
    err = produce(broker, "acl-secret")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    # Reading is not denied: the DENY names WRITE only.
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{uuid.uuid4()}",
                  "auto.offset.reset": "earliest"})
    try:
        c.subscribe(["acl-open"])
        msg = None
        for _ in range(60):
            msg = c.poll(1)
            if msg is not None and msg.error() is None:
                break
        assert msg is not None and msg.error() is None and msg.value() == b"v"
    finally:
        c.close()

    acls(cp, broker, "--remove", "--force", "--deny-principal", "User:ANONYMOUS",
         "--operation", "Write", "--topic", "acl-secret")
    out = acls(cp, broker, "--list", "--topic", "acl-secret")
    assert "ANONYMOUS" not in out, out
    assert produce(broker, "acl-secret") is None


@pytest.mark.sluice(settings=AUTHORIZED)
def test_prefixed_describe_deny_hides_topics_from_metadata(broker, java_classpath):
    cp = java_classpath
    create(broker, "visible-1", "hidden-1", "hidden-2")
    acls(cp, broker, "--add", "--deny-principal", "User:ANONYMOUS", "--operation", "Describe",
         "--topic", "hidden-", "--resource-pattern-type", "prefixed")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topics = set(admin.list_topics(timeout=30).topics)
    assert "visible-1" in topics and not topics & {"hidden-1", "hidden-2"}, topics
    # A named topic the principal may not describe answers TOPIC_AUTHORIZATION_FAILED.
    md = admin.list_topics(topic="hidden-1", timeout=30)
    assert md.topics["hidden-1"].error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    out = acls(cp, broker, "--list", "--topic", "hidden-1", "--resource-pattern-type", "match")
    assert "name=hidden-, patternType=PREFIXED" in out, out


@pytest.mark.sluice(settings=AUTHORIZED)
def test_denied_group_read_fails_the_consumer(broker, java_classpath):
    cp = java_classpath
    create(broker, "acl-g-topic")
    acls(cp, broker, "--add", "--deny-principal", "User:ANONYMOUS", "--operation", "Read",
         "--group", "acl-denied-group")
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "acl-denied-group",
                  "auto.offset.reset": "earliest"})
    try:
        c.subscribe(["acl-g-topic"])
        error = None
        for _ in range(30):
            msg = c.poll(1)
            if msg is not None and msg.error() is not None:
                error = msg.error()
                break
        assert error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, error
    finally:
        c.close()


@pytest.mark.sluice(settings=AUTHORIZED)
def test_acl_requests_refused_as_kafka(broker, java_classpath):
    """An invalid ACL is refused (INVALID_REQUEST) and DENY on the cluster's ALTER refuses
    further ACL changes with CLUSTER_AUTHORIZATION_FAILED."""
    cp = java_classpath
    run = run_java(cp, ACLS, ["--bootstrap-server", broker.bootstrap, "--add",
                              "--allow-principal", "User:alice", "--operation", "Read",
                              "--cluster"], timeout=90)
    # READ is not an operation of the cluster resource: the tool refuses it itself.
    assert run.returncode != 0, run.report()
    acls(cp, broker, "--add", "--deny-principal", "User:ANONYMOUS", "--operation", "Alter",
         "--cluster")
    run = run_java(cp, ACLS, ["--bootstrap-server", broker.bootstrap, "--add",
                              "--allow-principal", "User:bob", "--operation", "Read",
                              "--topic", "t"], timeout=90)
    assert run.returncode != 0 and "ClusterAuthorizationException" in run.output, run.report()


@pytest.mark.sluice(settings=AUTHORIZED)
def test_denied_transactional_id_cannot_init_transactions(broker, java_classpath):
    """WRITE on a transactional id is needed to use it (InitProducerId); another id works."""
    cp = java_classpath
    create(broker, "acl-txn-topic")
    acls(cp, broker, "--add", "--deny-principal", "User:ANONYMOUS", "--operation", "Write",
         "--transactional-id", "acl-denied-txn")
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "acl-denied-txn"})
    with pytest.raises(KafkaException) as e:
        p.init_transactions(30)
    assert e.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, e.value
    ok = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "acl-allowed-txn"})
    ok.init_transactions(30)
    ok.begin_transaction()
    ok.produce("acl-txn-topic", b"v")
    ok.commit_transaction(30)
