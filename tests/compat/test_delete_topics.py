"""DeleteTopics of many topics while a consumer is subscribed to them (librdkafka's
0045_subscribe_many_updates found a request unanswered for 30 s): the answer comes within the
request's timeout whatever state the partitions are in — topics not deleted by then get
REQUEST_TIMED_OUT, as Kafka answers — every topic is gone afterwards, no partition directory is
left behind, and a topic re-created under a deleted name starts empty."""

import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka.admin import NewTopic

from compat_util import admin, consume_all, create_topic, producer, wait_until
from conftest import TARGET

TOPICS = 200
PARTITIONS = 4
TIMEOUT_S = 30
# The request's timeout_ms, and how much later than it the answer may come on a busy machine.
DELETE_TIMEOUT_S = 0.2
ANSWER_MARGIN_S = 1.5
# Longest wait for the consumer's close at the end, seconds (see the test).
CLOSE_WAIT_S = 30


# 800 partitions: 1 MiB segments keep the disk each one reserves small.
@pytest.mark.long("800 partitions created and deleted under subscription, about 11 s (CI time)")
@pytest.mark.sluice(settings={"log.segment.bytes": 1 << 20})
def test_delete_many_subscribed_topics_answers_within_its_timeout(broker):
    names = [f"many-{i:03d}" for i in range(TOPICS)]
    a = admin(broker.bootstrap)
    futures = a.create_topics([NewTopic(n, num_partitions=PARTITIONS, replication_factor=1)
                               for n in names], operation_timeout=TIMEOUT_S,
                              request_timeout=TIMEOUT_S)
    for f in futures.values():
        f.result(timeout=TIMEOUT_S)
    p = producer(broker.bootstrap)
    for n in names:
        p.produce(n, b"before")
    assert p.flush(TIMEOUT_S) == 0
    # A live producer refreshes its topics' metadata, which auto-creates them again (in Kafka
    # too): only the consumer stays.
    del p
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "many",
                  "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 500})
    c.subscribe(["^many-.*"])
    seen = 0
    deadline = time.monotonic() + TIMEOUT_S
    while seen < TOPICS and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            seen += 1
    assert seen == TOPICS, f"the subscribed consumer read {seen} of {TOPICS} topics"

    started = time.monotonic()
    futures = a.delete_topics(names, operation_timeout=DELETE_TIMEOUT_S,
                              request_timeout=TIMEOUT_S)
    outcomes = {}
    for n, f in futures.items():
        try:
            f.result(timeout=TIMEOUT_S)
            outcomes[n] = None
        except KafkaException as e:
            outcomes[n] = e.args[0].code()
    answered_s = time.monotonic() - started
    # librdkafka's close after its subscribed topics were deleted can wait forever on its own
    # partition references (0113 shows the same against Kafka): bounded here, left behind if so.
    closing = threading.Thread(target=c.close, daemon=True)
    closing.start()
    closing.join(CLOSE_WAIT_S)
    assert answered_s < DELETE_TIMEOUT_S + ANSWER_MARGIN_S, \
        f"DeleteTopics answered after {answered_s:.2f} s (timeout_ms {DELETE_TIMEOUT_S * 1000:.0f})"
    assert set(outcomes.values()) <= {None, KafkaError.REQUEST_TIMED_OUT}, outcomes

    def all_gone():
        listed = a.list_topics(timeout=TIMEOUT_S).topics
        return not any(n in listed for n in names)
    wait_until(all_gone, TIMEOUT_S, what="every deleted topic gone from Metadata")
    if TARGET == "sluice":
        # Sluice's own layout; Kafka removes them after `file.delete.delay.ms` (60 s).
        wait_until(lambda: not any(d.name.startswith("many-") for d in broker.data_dir.iterdir()),
                   TIMEOUT_S, what="the deleted partitions' directories removed")

    create_topic(broker.bootstrap, names[0], PARTITIONS)
    p = producer(broker.bootstrap)
    p.produce(names[0], b"after", partition=0)
    assert p.flush(TIMEOUT_S) == 0
    got = consume_all(broker.bootstrap, names[0], PARTITIONS, expected=1)
    assert [(m.offset(), m.value()) for m in got[0]] == [(0, b"after")]
