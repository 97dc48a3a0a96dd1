"""Fetch v12-v16 on the wire, as Apache Kafka answers them: v13+ name topics by id (KIP-516)
and answer with the id; an id the broker does not know is UNKNOWN_TOPIC_ID (100) for each of
its partitions, with no records; v15+ carry the replica in ReplicaState (KIP-903; a
consumer's default is left out); v16 answers a fetch at a broker holding no replica with
NOT_LEADER_OR_FOLLOWER, the partition's current leader and epoch, and the leader's endpoint
(KIP-951) — v15 with the error alone — while a follower serves it (KIP-392); v12 still names
topics. The single-node tests also pass against Kafka 4.4 (SLUICE_COMPAT_TARGET=kafka); the
off-leader test needs a 3-node Sluice cluster.

Not checked here: FENCED_LEADER_EPOCH's hints (a fresh topic is at leader epoch 0, so no
older epoch can be asked without an election), and a follower's stale broker epoch (covered
by the replication crate's unit tests)."""

import os
import socket

import pytest
from confluent_kafka.admin import NewTopic

import kafka_wire as kw
from compat_util import admin, create_topic, wait_until

TOPIC = "fetch-v16"
NOT_LEADER_OR_FOLLOWER = 6
# As test_cluster.py: 500 ms heartbeats, 2 s sessions.
CLUSTER_SETTINGS = {"broker.heartbeat.interval.ms": 500, "broker.session.timeout.ms": 2000}


def exchange(bootstrap, request):
    host, port = bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(request)
        return kw.read_frame(s)


def topic_metadata(bootstrap, topic):
    """(topic id bytes, {partition: (error, leader, leader epoch, replicas)}) from Metadata
    v12, or None while the topic is not listed with leaders."""
    corr, out = kw.parse_metadata_v12(exchange(bootstrap, kw.metadata_v12(5, [topic])))
    assert corr == 5
    err, topic_id, partitions = out[topic]
    if err or not partitions or any(p[1] < 0 for p in partitions.values()):
        return None
    return topic_id, partitions


def fetch(bootstrap, version, topics, **kwargs):
    corr, out, endpoints = kw.parse_fetch_flexible(
        exchange(bootstrap, kw.fetch_flexible(7, version, topics, **kwargs)), version)
    assert corr == 7
    return out, endpoints


@pytest.fixture
def three_records(broker):
    """A one-partition topic holding offsets 0-2 in one batch; its topic id."""
    create_topic(broker.bootstrap, TOPIC, 1)
    sock = kw.connect(broker.bootstrap)
    sock.sendall(kw.produce_v3(1, TOPIC, [(0, kw.record_batch([b"a", b"b", b"c"]))]))
    _, results = kw.parse_produce_v3(kw.read_frame(sock))
    sock.close()
    assert results[(TOPIC, 0)] == (0, 0)
    topic_id, _ = wait_until(lambda: topic_metadata(broker.bootstrap, TOPIC), 30,
                             what="the topic id in Metadata v12")
    assert topic_id != b"\x00" * 16
    return topic_id


@pytest.mark.parametrize("version", [13, 14, 15, 16])
def test_fetch_by_topic_id_returns_the_records_and_the_id(broker, three_records, version):
    topic_id = three_records
    out, endpoints = fetch(broker.bootstrap, version, [(topic_id, [(0, -1, 0)])])
    assert list(out) == [(topic_id, 0)]
    got = out[(topic_id, 0)]
    assert (got["error"], got["high_watermark"]) == (0, 3)
    assert [b["base_offset"] for b in kw.batch_headers(got["records"])] == [0]
    # No hint and no endpoint on an answer without a leader error.
    assert got["current_leader"] is None and endpoints == {}
    # From an offset past the first batch: nothing yet, no error.
    out, _ = fetch(broker.bootstrap, version, [(topic_id, [(0, 0, 3)])])
    assert (out[(topic_id, 0)]["error"], out[(topic_id, 0)]["records"]) == (0, b"")


@pytest.mark.parametrize("version", [13, 16])
def test_an_unknown_topic_id_is_unknown_topic_id_for_each_partition(broker, three_records,
                                                                   version):
    topic_id = three_records
    unknown = os.urandom(16)
    out, endpoints = fetch(broker.bootstrap, version,
                           [(unknown, [(0, -1, 0), (1, -1, 0)]), (topic_id, [(0, -1, 0)])])
    for p in (0, 1):
        got = out[(unknown, p)]
        assert (got["error"], got["high_watermark"], got["records"]) == (
            kw.UNKNOWN_TOPIC_ID, -1, b""), (p, got)
        assert got["current_leader"] is None
    # The known topic in the same fetch is served.
    got = out[(topic_id, 0)]
    assert (got["error"], got["high_watermark"]) == (0, 3)
    assert endpoints == {}


def test_fetch_v12_still_names_topics(broker, three_records):
    out, _ = fetch(broker.bootstrap, 12, [(TOPIC, [(0, 0, 0)])])
    got = out[(TOPIC, 0)]
    assert (got["error"], got["high_watermark"]) == (0, 3)
    assert [b["base_offset"] for b in kw.batch_headers(got["records"])] == [0]


@pytest.mark.sluice_only("starts a multi-process Sluice cluster")
def test_a_v16_fetch_off_the_leader_names_the_leader_and_its_endpoint(sluice_bin, tmp_path):
    from conftest import _die_with_parent
    from sluice_cluster import SluiceCluster

    cluster = SluiceCluster(sluice_bin, tmp_path / "cluster", nodes=3, settings=CLUSTER_SETTINGS,
                            preexec_fn=_die_with_parent,
                            node_settings={i: {"broker.rack": f"rack-{i}"} for i in (1, 2, 3)})
    try:
        cluster.start()
        # Two replicas of three partitions: every partition has a broker holding no replica,
        # which answers with the leader's hints; its follower serves the fetch (KIP-392).
        client = admin(cluster.bootstrap())
        client.create_topics([NewTopic("hints16", num_partitions=3, replication_factor=2)],
                             operation_timeout=20, request_timeout=20)["hints16"].result()
        topic_id, parts = wait_until(
            lambda: topic_metadata(cluster.nodes[1].bootstrap, "hints16"), 30,
            what="the topic in Metadata v12")
        for p, (_, leader, epoch, replicas) in parts.items():
            leader_port = int(cluster.nodes[leader].bootstrap.rsplit(":", 1)[1])
            for node_id in (1, 2, 3):
                bootstrap = cluster.nodes[node_id].bootstrap
                where = f"partition {p} (leader {leader}, replicas {replicas}) on {node_id}"
                out, endpoints = fetch(bootstrap, 16, [(topic_id, [(p, epoch, 0)])])
                got = out[(topic_id, p)]
                if node_id in replicas:
                    # The leader, and a follower too (KIP-392: a consumer's Fetch v11+ may
                    # read from any replica, as Kafka's `FetchParams.fetchOnlyLeader` allows).
                    assert got["error"] == 0, (where, got)
                    assert got["current_leader"] is None and endpoints == {}, where
                    continue
                assert got["error"] == NOT_LEADER_OR_FOLLOWER, (where, got)
                assert got["current_leader"] == (leader, epoch), where
                assert list(endpoints) == [leader], (where, endpoints)
                assert endpoints[leader][1:] == (leader_port, f"rack-{leader}"), where
                # v15 has the same error and no hints (Kafka fills them from v16).
                out, endpoints = fetch(bootstrap, 15, [(topic_id, [(p, epoch, 0)])])
                got = out[(topic_id, p)]
                assert got["error"] == NOT_LEADER_OR_FOLLOWER, (where, got)
                assert got["current_leader"] is None and endpoints == {}, where
    finally:
        cluster.stop()
