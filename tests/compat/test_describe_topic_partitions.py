"""DescribeTopicPartitions (API 75, v0, KIP-966): what Kafka 4.x's `kafka-topics.sh --describe`
and the Java admin client's `describeTopics` use. The tool pages through a topic with its
`--partition-size-limit-per-response`; raw requests check the cursor, the partition limit and
Kafka's errors (as `DescribeTopicPartitionsRequestHandler` answers them)."""

import re

import kafka_wire as kw
from compat_util import create_topic
from jvm import check_java, run_java

TOPICS = "org.apache.kafka.tools.TopicCommand"
API_KEY = 75
INVALID_TOPIC_EXCEPTION = 17
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_REQUEST = 42


def request(topics, limit, cursor=None):
    """A v0 request (flexible: header v2, compact fields)."""
    body = kw.compact_array([kw.compact_string(t) + b"\x00" for t in topics])
    body += kw.i32(limit)
    if cursor is None:
        body += kw.i8(-1)
    else:
        body += kw.i8(1) + kw.compact_string(cursor[0]) + kw.i32(cursor[1]) + b"\x00"
    body += b"\x00"
    return kw.frame(kw.header_v2(API_KEY, 0, 9) + body)


def call(bootstrap, topics, limit, cursor=None):
    """Returns ([(name, error, [partition ids])], next cursor or None) and every partition
    entry by (topic, id)."""
    with kw.connect(bootstrap) as sock:
        sock.sendall(request(topics, limit, cursor))
        r = kw.Reader(kw.read_frame(sock))
    assert r.i32() == 9
    r.tagged_fields()  # response header v1
    r.i32()  # throttle_time_ms
    details = {}

    def partition(r):
        p = {"error": r.i16(), "index": r.i32(), "leader": r.i32(), "epoch": r.i32(),
             "replicas": r.compact_array(kw.Reader.i32), "isr": r.compact_array(kw.Reader.i32),
             "elr": r.compact_array(kw.Reader.i32),
             "last_known_elr": r.compact_array(kw.Reader.i32),
             "offline": r.compact_array(kw.Reader.i32)}
        r.tagged_fields()
        return p

    def topic(r):
        error, name, _id, _internal = r.i16(), r.compact_string(), r.uuid(), r.i8()
        parts = r.compact_array(partition)
        r.i32()  # topic_authorized_operations
        r.tagged_fields()
        for p in parts:
            details[(name, p["index"])] = p
        return name, error, [p["index"] for p in parts]

    topics_out = r.compact_array(topic)
    cursor_out = None
    if r.i8() >= 0:
        cursor_out = (r.compact_string(), r.i32())
        r.tagged_fields()
    r.tagged_fields()
    assert r.remaining() == 0
    return (topics_out, cursor_out), details


def test_the_cursor_pages_through_every_partition(broker):
    b = broker.bootstrap
    create_topic(b, "dtp-a", 3)
    create_topic(b, "dtp-b", 2)
    # Named topics (those before the cursor are left out), two partitions a page.
    named = ["dtp-b", "dtp-a"]
    (page, cursor), details = call(b, named, 2)
    assert (page, cursor) == ([("dtp-a", 0, [0, 1])], ("dtp-a", 2))
    p = details[("dtp-a", 0)]
    assert (p["error"], p["replicas"], p["isr"], p["offline"]) == (0, [p["leader"]], [p["leader"]], [])
    assert (p["elr"], p["last_known_elr"]) == ([], [])
    (page, cursor), _ = call(b, named, 2, cursor)
    assert (page, cursor) == ([("dtp-a", 0, [2]), ("dtp-b", 0, [0])], ("dtp-b", 1))
    (page, cursor), _ = call(b, named, 2, cursor)
    assert (page, cursor) == ([("dtp-b", 0, [1])], None)
    # A page that ends with a topic's last partition points at the next topic's start.
    (page, cursor), _ = call(b, named, 3)
    assert (page, cursor) == ([("dtp-a", 0, [0, 1, 2])], ("dtp-b", 0))
    # A limit below 1 is 1.
    (page, cursor), _ = call(b, named, 0)
    assert (page, cursor) == ([("dtp-a", 0, [0])], ("dtp-a", 1))
    # Every topic (none named) from the cursor on: the internal ones come after "dtp-".
    (page, cursor), _ = call(b, [], 100, ("dtp-a", 1))
    assert page[:2] == [("dtp-a", 0, [1, 2]), ("dtp-b", 0, [0, 1])], page
    assert all(name > "dtp-b" for name, _, _ in page[2:]), page
    assert cursor is None


def test_unknown_topics_and_bad_cursors_get_kafkas_errors(broker):
    b = broker.bootstrap
    create_topic(b, "dtp-c", 1)
    (page, cursor), _ = call(b, ["dtp-missing", "bad/name", "dtp-c"], 10)
    assert (page, cursor) == ([("bad/name", INVALID_TOPIC_EXCEPTION, []),
                               ("dtp-c", 0, [0]),
                               ("dtp-missing", UNKNOWN_TOPIC_OR_PARTITION, [])], None)
    # The cursor's topic must be one of the named topics, its partition not negative.
    (page, cursor), _ = call(b, ["dtp-c"], 10, ("dtp-other", 0))
    assert (page, cursor) == ([("dtp-c", INVALID_REQUEST, [])], None)
    (page, cursor), _ = call(b, ["dtp-c"], 10, ("dtp-c", -1))
    assert (page, cursor) == ([("dtp-c", INVALID_REQUEST, [])], None)


def test_kafka_topics_describe_pages_with_describe_topic_partitions(broker, java_classpath):
    b = broker.bootstrap
    create_topic(b, "dtp-tool", 5)
    run = run_java(java_classpath, TOPICS, ["--bootstrap-server", b, "--describe", "--topic",
                                            "dtp-tool", "--partition-size-limit-per-response",
                                            "2"])
    out = check_java(run)
    assert re.search(r"Topic: dtp-tool\s+TopicId: \S+\s+PartitionCount: 5\s+ReplicationFactor: 1",
                     out), out
    shown = sorted(int(m) for m in re.findall(r"Partition: (\d+)\s+Leader:", out))
    assert shown == [0, 1, 2, 3, 4], out
