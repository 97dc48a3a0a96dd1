"""Compaction on a three-node cluster (issue #27 point 5): each replica compacts its own log, a
follower that was down while its leader cleaned fetches across the gaps and rejoins the ISR,
and after the leader's SIGKILL the new leader serves, for every key, its latest acknowledged
value at its offset (a deleted key stays deleted).

What it does not check: a follower sent out of range by the leader's log start moving
(retention or DeleteRecords; `test_cluster.py` covers that path for plain topics).
"""

import re
import time

import pytest
from confluent_kafka.admin import NewTopic

from compat_util import admin, producer, read_partition, wait_until
from conftest import _die_with_parent
from sluice_cluster import SluiceCluster

pytestmark = pytest.mark.sluice_only("starts a multi-process Sluice cluster")

SETTINGS = {"broker.heartbeat.interval.ms": 500, "broker.session.timeout.ms": 2000,
            "log.cleaner.backoff.ms": 200}
COMPACTED = {"cleanup.policy": "compact", "segment.ms": "300",
             "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "600000"}
BOUND_S = 60
TOPIC = "compacted-rf3"
KEYS = 20


@pytest.fixture
def cluster(sluice_bin, tmp_path):
    c = SluiceCluster(sluice_bin, tmp_path / "cluster", nodes=3, settings=SETTINGS,
                      preexec_fn=_die_with_parent)
    try:
        c.start()
        yield c
    finally:
        c.stop()


def partition(bootstrap):
    md = admin(bootstrap).list_topics(topic=TOPIC, timeout=10)
    t = md.topics.get(TOPIC)
    if t is None or t.error is not None or 0 not in t.partitions:
        return None
    p = t.partitions[0]
    return p.leader, list(p.replicas), list(p.isrs)


def cleans(node, since=0):
    """The number of passes node's cleaner logged over the partition after byte `since`."""
    text = node.log_path.read_text(errors="replace")[since:]
    return len(re.findall(rf"cleaned tp={TOPIC}-0 ", text))


def log_len(node):
    return len(node.log_path.read_text(errors="replace"))


def final_round(k):
    """The last round that writes key k: 10..19 for keys 0..9, 30..39 for keys 10..19. So
    rounds 20..29 hold only values rewritten later and are removed whole by a clean, leaving a
    gap between kept batches (rounds 19 and 30) that a follower's fetch must cross."""
    return 10 + k if k < 10 else 20 + k


def produce_round(bootstrap, rnd, acked, deleted=()):
    """One batch (acks=all) with a value for every key still written in round `rnd` (a
    tombstone in its final round for the keys in `deleted`); records each acknowledged
    (key -> (offset, value)) in `acked`."""
    p = producer(bootstrap)

    def on_delivery(err, msg):
        assert err is None, err
        acked[msg.key()] = (msg.offset(), msg.value())

    for k in range(KEYS):
        if rnd > final_round(k) and rnd < 40:
            continue
        key = b"k%02d" % k
        tombstone = key in deleted and rnd >= final_round(k)
        value = None if tombstone else b"r%03d-%s" % (rnd, key)
        p.produce(TOPIC, key=key, value=value, partition=0, on_delivery=on_delivery)
    assert p.flush(30) == 0


@pytest.mark.timeout(300)
def test_replicas_compact_a_follower_catches_up_across_gaps_and_a_new_leader_serves_the_latest(
        cluster):
    a = admin(cluster.bootstrap())
    a.create_topics([NewTopic(TOPIC, 1, 3, config=COMPACTED)])[TOPIC].result(30)
    leader, replicas, _ = wait_until(lambda: partition(cluster.bootstrap()), BOUND_S,
                                     what="the topic's leader")
    controller = a.list_topics(timeout=10).controller_id
    follower = next((r for r in replicas if r not in (leader, controller)),
                    next(r for r in replicas if r != leader))
    acked = {}
    produce_round(cluster.bootstrap(), 0, acked)
    # The follower is down while its leader writes and cleans.
    cluster.kill(follower)
    up = cluster.bootstrap(exclude={follower})
    wait_until(lambda: (partition(up) or (0, [], [follower]))[2].count(follower) == 0,
               BOUND_S, what="the killed follower out of the ISR")
    since = log_len(cluster.nodes[leader])
    deleted = {b"k00", b"k01"}
    for rnd in range(1, 40):
        produce_round(up, rnd, acked, deleted)
        time.sleep(0.02)
    wait_until(lambda: cleans(cluster.nodes[leader], since) > 0, BOUND_S,
               what="the leader's cleaner to run")
    # Back: it fetches from the leader across the cleaned log's gaps and rejoins the ISR.
    since_follower = log_len(cluster.nodes[follower])
    cluster.start_node(follower)
    wait_until(lambda: sorted((partition(up) or (0, [], []))[2]) == sorted(replicas), BOUND_S,
               what="the follower back in the ISR")

    # Each replica cleans its own log: the follower's cleaner runs on what it copied (fillers
    # roll its active segment).
    def follower_cleaned():
        produce_round(cluster.bootstrap(), 40, acked, deleted)
        time.sleep(0.3)
        return cleans(cluster.nodes[follower], since_follower) > 0
    wait_until(follower_cleaned, BOUND_S, interval=0.2, what="the follower's cleaner to run")

    # The leader dies; a follower that compacted its own copy leads now.
    cluster.kill(leader)
    rest = cluster.bootstrap(exclude={leader})
    wait_until(lambda: (partition(rest) or (leader,))[0] not in (leader, -1), BOUND_S,
               what="a new leader")
    records = read_partition(rest, TOPIC)
    offsets = [o for o, _, _ in records]
    assert offsets == sorted(set(offsets)), "offsets strictly increase, none twice"
    latest = {}
    for offset, key, value in records:
        latest[key] = (offset, value)
    for key, (offset, value) in acked.items():
        if key in deleted:
            # Deleted: only its tombstone may be left (delete.retention.ms is long).
            assert latest.get(key, (offset, None))[1] is None, key
        else:
            assert latest.get(key) == (offset, value), (key, latest.get(key), (offset, value))
    assert len(records) < 400, "the copy was compacted, not kept whole"
