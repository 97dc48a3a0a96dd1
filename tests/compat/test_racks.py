"""Racks (issue #30 point 5): rack-aware replica placement (KIP-36) and fetching from the
closest replica (KIP-392), on one 3-node cluster with `broker.rack` a, b and c and
`replica.selector.class` set to Kafka's RackAwareReplicaSelector:

1. with Kafka's Java client (tests/java, sluice.compat.RackReads): a topic created with
   replication factor 3 has a replica in each rack; a consumer whose `client.rack` is a
   follower's rack reads every record produced, and its per-node metrics show the records
   came from that follower, not from the leader (the leader answers the first fetch with
   `preferred_read_replica` and no records);
2. on the wire (Fetch v10/v11): the leader names the follower of the consumer's rack as
   `preferred_read_replica` with its offsets and no records, and none for a consumer of its
   own rack or of no rack; a follower serves a consumer's Fetch v11 up to its high watermark
   (read_committed: its last stable offset), answers NOT_LEADER_OR_FOLLOWER to v10 (no client
   metadata), UNKNOWN_LEADER_EPOCH to a newer `current_leader_epoch` and OFFSET_OUT_OF_RANGE
   beyond its log. Not checked: FENCED_LEADER_EPOCH at a follower (a fresh topic is at leader
   epoch 0, so no older epoch can be asked without an election).

Runs against Apache Kafka 4.4 too (SLUICE_COMPAT_TARGET=kafka: a 3-node KRaft cluster from
scripts/kafka_ref.py with the same per-node racks). Waits are bounded; nothing asserts a
duration."""

import socket

import pytest

import kafka_wire as kw
from compat_util import create_topic, producer, wait_until
from cluster_targets import finish, start_cluster
from jvm import check_java, run_java

NODES = (1, 2, 3)
RACKS = {1: "a", 2: "b", 3: "c"}
SETTINGS = {"replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector"}
NODE_SETTINGS = {node: {"broker.rack": rack} for node, rack in RACKS.items()}
RECORDS = 200
JAVA_S = 180
WAIT_S = 60
NONE_ = 0
OFFSET_OUT_OF_RANGE = 1
NOT_LEADER_OR_FOLLOWER = 6


@pytest.fixture(scope="module")
def bootstrap(request, tmp_path_factory):
    """The bootstrap servers of a 3-node cluster of the target in racks a, b and c."""
    t = start_cluster(request, tmp_path_factory.mktemp("racks"), len(NODES), SETTINGS,
                      NODE_SETTINGS)
    yield t.bootstrap()
    finish(t)


def test_a_consumer_reads_from_the_replica_in_its_rack(bootstrap, java_classpath):
    run = run_java(java_classpath, "sluice.compat.RackReads", [bootstrap, "racked", RECORDS],
                   timeout=JAVA_S)
    check_java(run, expect_line="PASS rack-reads")


def exchange(address, frame):
    host, port = address
    with socket.create_connection((host, port), timeout=30) as s:
        return kw.request(s, frame)


def fetch(address, version, topic, offset=0, **kwargs):
    """One consumer Fetch of partition 0 sent to `address` -> the partition's answer."""
    frame = kw.fetch_classic(1, version, topic, 0, offset, **kwargs)
    _, _, out = kw.parse_fetch_classic(exchange(address, frame), version)
    return out[(topic, 0)]


def records_in(answer):
    return sum(h["count"] for h in kw.batch_headers(answer["records"]))


def test_leader_points_to_the_rack_and_followers_serve_consumers(bootstrap):
    topic = "wired"
    create_topic(bootstrap, topic, 1, replication_factor=3)
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    _, brokers, _, topics = kw.parse_metadata_v1(
        exchange((host, int(port)), kw.metadata_v1(1, [topic])))
    address = {b: (h, p) for b, h, p, _ in brokers}
    rack = {b: r for b, _, _, r in brokers}
    assert rack == RACKS
    leader = topics[topic][1][0][1]
    follower = min(b for b in NODES if b != leader)
    p = producer(bootstrap)
    for i in range(5):
        p.produce(topic, value=f"v{i}".encode(), partition=0)
    assert p.flush(30) == 0

    # The follower serves a consumer's Fetch v11 up to the high watermark it learned.
    answer = wait_until(
        lambda: (a := fetch(address[follower], 11, topic))["high_watermark"] == 5 and a,
        WAIT_S, what="the follower's high watermark at 5")
    assert answer["error"] == NONE_
    assert records_in(answer) == 5
    assert answer["preferred_read_replica"] == -1
    # read_committed too, below the follower's last stable offset (no transaction here).
    answer = fetch(address[follower], 11, topic, isolation_level=1)
    assert (answer["error"], answer["last_stable_offset"]) == (NONE_, 5)
    assert answer["aborted_transactions"] == []
    assert records_in(answer) == 5

    # Only with client metadata (v11+), and at the current leader epoch, within its log.
    assert fetch(address[follower], 10, topic)["error"] == NOT_LEADER_OR_FOLLOWER
    assert (fetch(address[follower], 11, topic, current_leader_epoch=1000)["error"]
            == kw.UNKNOWN_LEADER_EPOCH)
    assert fetch(address[follower], 11, topic, offset=1000)["error"] == OFFSET_OUT_OF_RANGE

    # The leader names the follower of the consumer's rack, with its offsets and no records.
    answer = fetch(address[leader], 11, topic, rack_id=rack[follower])
    assert answer["error"] == NONE_
    assert answer["preferred_read_replica"] == follower
    assert answer["high_watermark"] == 5
    assert answer["records"] == b""
    # ... and nobody for a consumer of its own rack, of no rack, or of a rack with no replica.
    for client_rack in (rack[leader], "", "z"):
        answer = fetch(address[leader], 11, topic, rack_id=client_rack)
        assert answer["error"] == NONE_
        assert answer["preferred_read_replica"] == -1, client_rack
        assert records_in(answer) == 5
