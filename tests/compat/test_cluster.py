"""Three-node Sluice clusters on loopback with real clients (issue #14): the controller quorum
forms, brokers register and are listed, topics get three replicas with leaders spread over
the brokers, admin requests work through any broker (forwarded to the active controller), a
SIGKILLed controller or partition leader is replaced from the survivors, SIGTERM moves a
broker's leaderships away before it exits, a restarted node rejoins, acks=all records
outlive their leader's SIGKILL (followers fetch them, issue #15), and a SIGSTOPped follower
leaves the ISR after replica.lag.time.max.ms and rejoins it after SIGCONT.

Timing settings as the issue asks: 500 ms heartbeats, 2 s sessions. Waits are bounded
widely (tens of seconds); nothing here asserts a duration. """

import json
import socket
import time

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import ConfigResource, NewPartitions, NewTopic

import kafka_wire as kw
from compat_util import admin, consume_all, producer, wait_until
from conftest import _die_with_parent
from sluice_cluster import SluiceCluster

pytestmark = pytest.mark.sluice_only("starts a multi-process Sluice cluster")

SETTINGS = {"broker.heartbeat.interval.ms": 500, "broker.session.timeout.ms": 2000}
# Bounds of the waits: a new controller or partition leader comes within a session timeout
# and an election; these leave wide margins on a loaded 2-core machine.
FAILOVER_BOUND_S = 30
PARTITIONS = 6
NOT_LEADER_OR_FOLLOWER = 6
UNKNOWN_LEADER_EPOCH = 75


def _running_cluster(sluice_bin, path, nodes, settings, node_settings=None):
    """Starts a cluster, yields it, stops it; then fails if a node exited other than by the
    test's SIGKILL or a clean stop."""
    c = SluiceCluster(sluice_bin, path, nodes=nodes, settings=settings,
                      preexec_fn=_die_with_parent, node_settings=node_settings)
    try:
        c.start()
    except Exception:
        c.stop()
        raise
    yield c
    failed = [n for n in c.nodes.values() if n.proc is not None and n.proc.poll() not in (None, 0, -9)]
    c.stop()
    assert not failed, f"nodes {[n.node_id for n in failed]} exited badly\n{c.describe()}"


@pytest.fixture
def cluster(sluice_bin, tmp_path, request):
    """Three nodes with SETTINGS; a test parametrized indirectly (`indirect=["cluster"]`) adds
    its own broker settings over them."""
    settings = {**SETTINGS, **getattr(request, "param", {})}
    yield from _running_cluster(sluice_bin, tmp_path / "cluster", 3, settings,
                                {i: {"broker.rack": f"rack-{i}"} for i in (1, 2, 3)})


def metadata(bootstrap):
    return admin(bootstrap).list_topics(timeout=10)


def create(bootstrap, name, partitions=PARTITIONS, replication_factor=3):
    a = admin(bootstrap)
    futures = a.create_topics([NewTopic(name, num_partitions=partitions,
                                        replication_factor=replication_factor)],
                              operation_timeout=20, request_timeout=20)
    return futures[name].result()


def partitions_of(bootstrap, topic):
    md = metadata(bootstrap)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return None
    return {p: (x.leader, list(x.replicas), list(x.isrs)) for p, x in t.partitions.items()}


def test_three_nodes_form_a_cluster_and_serve_rf3_topics(cluster):
    for node in cluster.nodes.values():
        md = metadata(node.bootstrap)
        assert sorted(md.brokers) == [1, 2, 3], (node.node_id, md.brokers)
        assert md.controller_id in (1, 2, 3)
    assert len({metadata(n.bootstrap).cluster_id for n in cluster.nodes.values()}) == 1
    client = admin(cluster.bootstrap())  # alive until its future completes
    described = client.describe_cluster(request_timeout=10).result()
    assert sorted((n.id, n.rack) for n in described.nodes) == [
        (i, f"rack-{i}") for i in (1, 2, 3)], described.nodes
    assert described.controller.id == metadata(cluster.bootstrap()).controller_id
    # Through every broker: the ones that are not the active controller forward it.
    for node in cluster.nodes.values():
        topic = f"rf3-via-{node.node_id}"
        create(node.bootstrap, topic)
        parts = wait_until(lambda t=topic: partitions_of(cluster.bootstrap(), t), 20,
                           what=f"{topic} in Metadata")
        assert len(parts) == PARTITIONS
        for p, (leader, replicas, isr) in parts.items():
            assert sorted(replicas) == [1, 2, 3], (p, replicas)
            assert sorted(isr) == [1, 2, 3], (p, isr)
            assert leader == replicas[0], (p, leader, replicas)
        assert {leader for leader, _, _ in parts.values()} == {1, 2, 3}, parts
    with pytest.raises(KafkaException) as refused:
        create(cluster.bootstrap(), "rf4", replication_factor=4)
    assert refused.value.args[0].name() == "INVALID_REPLICATION_FACTOR"
    # A real client writes to and reads from the leaders on all three brokers.
    p = producer(cluster.bootstrap())
    for i in range(120):
        p.produce("rf3-via-1", value=b"%d" % i, partition=i % PARTITIONS)
    assert p.flush(30) == 0
    got = consume_all(cluster.bootstrap(), "rf3-via-1", PARTITIONS, expected=120)
    assert sum(len(v) for v in got.values()) == 120


def live_controller(cluster, dead):
    """The controller id every surviving node reports, once they agree on a live one."""
    seen = set()
    for node in cluster.nodes.values():
        if node.node_id in dead:
            continue
        try:
            seen.add(metadata(node.bootstrap).controller_id)
        except KafkaException:
            return None
    if len(seen) == 1 and seen.isdisjoint(dead) and -1 not in seen:
        return seen.pop()
    return None


def test_killed_controller_is_replaced_and_the_node_rejoins(cluster):
    old = metadata(cluster.bootstrap()).controller_id
    cluster.kill(old)
    new = wait_until(lambda: live_controller(cluster, {old}), FAILOVER_BOUND_S,
                     what="a new active controller")
    assert new != old
    # The killed broker is fenced: listed no more, in no ISR, leading nothing.
    wait_until(lambda: sorted(metadata(cluster.bootstrap(exclude={old})).brokers)
               == sorted({1, 2, 3} - {old}), FAILOVER_BOUND_S, what="the dead broker fenced")
    # A fresh client (the old one would still ask the dead controller) creates a topic with
    # the two brokers left; its replicas are placed on live brokers only.
    create(cluster.bootstrap(exclude={old}), "after-failover", replication_factor=2)
    parts = wait_until(lambda: partitions_of(cluster.bootstrap(exclude={old}), "after-failover"),
                       20, what="the topic created after the failover")
    assert all(old not in replicas for _, replicas, _ in parts.values()), parts
    cluster.start_node(old)
    wait_until(lambda: sorted(metadata(cluster.nodes[old].bootstrap).brokers) == [1, 2, 3],
               FAILOVER_BOUND_S, what="the restarted node listed again")
    create(cluster.nodes[old].bootstrap, "after-rejoin")


def test_killed_partition_leader_is_replaced_from_the_isr(cluster):
    create(cluster.bootstrap(), "failover")
    parts = wait_until(lambda: partitions_of(cluster.bootstrap(), "failover"), 20,
                       what="the topic")
    controller = metadata(cluster.bootstrap()).controller_id
    # A partition leader that is not the controller: only its broker dies here.
    victim = next(leader for leader, _, _ in parts.values() if leader != controller)
    led = [p for p, (leader, _, _) in parts.items() if leader == victim]
    cluster.kill(victim)

    def moved():
        now = partitions_of(cluster.bootstrap(exclude={victim}), "failover")
        if now is None:
            return None
        for p in led:
            leader, _, isr = now[p]
            if leader in (victim, -1) or leader not in parts[p][2] or victim in isr:
                return None
        return now

    now = wait_until(moved, FAILOVER_BOUND_S, what="new leaders from the ISR")
    for p in led:
        assert now[p][0] in parts[p][2] and now[p][0] != victim, (p, parts[p], now[p])
    # The new leaders take writes.
    prod = producer(cluster.bootstrap(exclude={victim}))
    for p in led:
        prod.produce("failover", value=b"after", partition=p)
    assert prod.flush(30) == 0
    cluster.start_node(victim)
    wait_until(lambda: sorted(metadata(cluster.bootstrap()).brokers) == [1, 2, 3],
               FAILOVER_BOUND_S, what="the restarted leader listed again")


def test_acknowledged_records_survive_the_leaders_sigkill(cluster):
    """acks=all records are on every ISR replica: after the leader's SIGKILL, the new leader
    (elected from the ISR) serves every acknowledged record exactly once."""
    create(cluster.bootstrap(), "replicated")
    parts = wait_until(lambda: partitions_of(cluster.bootstrap(), "replicated"), 20,
                       what="the topic")
    controller = metadata(cluster.bootstrap()).controller_id
    victim = next(leader for leader, _, _ in parts.values() if leader != controller)
    led = sorted(p for p, (leader, _, _) in parts.items() if leader == victim)
    acked, failed = [], []

    def delivered(err, msg):
        (failed if err is not None else acked).append((msg.partition(), msg.value()))

    prod = producer(cluster.bootstrap())
    for i in range(600):
        prod.produce("replicated", value=b"r-%d" % i, partition=i % PARTITIONS,
                     on_delivery=delivered)
        if i % 100 == 99:
            prod.poll(0)
    assert prod.flush(30) == 0
    assert not failed, failed[:5]
    assert len(acked) == 600
    cluster.kill(victim)

    def moved():
        now = partitions_of(cluster.bootstrap(exclude={victim}), "replicated")
        if now is None:
            return None
        for p in led:
            leader, _, isr = now[p]
            if leader in (victim, -1) or victim in isr:
                return None
        return now

    wait_until(moved, FAILOVER_BOUND_S, what="new leaders from the ISR")
    got = consume_all(cluster.bootstrap(exclude={victim}), "replicated", PARTITIONS,
                      expected=len(acked))
    values = sorted((p, m.value()) for p, msgs in got.items() for m in msgs)
    assert values == sorted(acked), (len(values), len(acked))


NOT_ENOUGH_REPLICAS = 19


def test_acks_all_is_refused_below_min_insync_replicas_while_acks_1_works(cluster):
    """Kafka's appendRecordsToLeader: once a dead follower is fenced and out of the ISR, an
    ISR smaller than min.insync.replicas refuses acks=all with NOT_ENOUGH_REPLICAS (19) before
    appending, while acks=1 is taken. (min.insync.replicas=3 with one follower down: killing
    two of three combined nodes would also take the controller quorum's majority.)"""
    a = admin(cluster.bootstrap())
    a.create_topics([NewTopic("min-isr", num_partitions=1, replication_factor=3,
                              config={"min.insync.replicas": "3"})],
                    operation_timeout=20, request_timeout=20)["min-isr"].result()
    parts = wait_until(lambda: partitions_of(cluster.bootstrap(), "min-isr"), 20,
                       what="the topic")
    leader, replicas, _ = parts[0]
    leader_bootstrap = cluster.nodes[leader].bootstrap
    batch = kw.record_batch([b"x"])

    def produce_error(acks):
        request = kw.produce_v3(1, "min-isr", [(0, batch)], acks=acks, timeout_ms=10000)
        _, produced = kw.parse_produce_v3(exchange(leader_bootstrap, request))
        return produced[("min-isr", 0)][0]

    # The whole ISR is there: acks=all completes once both followers fetched the batch.
    wait_until(lambda: produce_error(-1) == 0, 30, interval=0.5, what="acks=all with a full ISR")
    controller = metadata(cluster.bootstrap()).controller_id
    victim = next(r for r in replicas if r not in (leader, controller))
    cluster.kill(victim)

    def shrunk():
        now = partitions_of(cluster.bootstrap(exclude={victim}), "min-isr")
        return now is not None and now[0][0] == leader and victim not in now[0][2]

    wait_until(shrunk, FAILOVER_BOUND_S, what="the fenced follower out of the ISR")
    wait_until(lambda: produce_error(-1) == NOT_ENOUGH_REPLICAS, 20, interval=0.5,
               what="the leader to refuse acks=all")
    assert produce_error(1) == 0
    cluster.start_node(victim)


@pytest.fixture
def cluster5(sluice_bin, tmp_path):
    """Five combined nodes with SETTINGS: two of them can die and the quorum keeps its
    majority."""
    yield from _running_cluster(sluice_bin, tmp_path / "cluster5", 5, SETTINGS)


def test_with_both_followers_down_acks_all_is_refused_while_acks_1_works(cluster5):
    """Issue 15's literal case, on five nodes so that the controller quorum survives: an RF 3
    partition with min.insync.replicas=2 loses both followers (SIGKILL); once they are fenced
    and out of the ISR, acks=all is refused with NOT_ENOUGH_REPLICAS (19) before appending and
    acks=1 is taken."""
    cluster = cluster5
    controller = metadata(cluster.bootstrap()).controller_id
    leader, *followers = [n for n in sorted(cluster.nodes) if n != controller][:3]
    a = admin(cluster.bootstrap())
    a.create_topics([NewTopic("both-down", num_partitions=1,
                              replica_assignment=[[leader, *followers]],
                              config={"min.insync.replicas": "2"})],
                    operation_timeout=20, request_timeout=20)["both-down"].result()
    leader_bootstrap = cluster.nodes[leader].bootstrap
    batch = kw.record_batch([b"x"])

    appended = []

    def produce_error(acks):
        request = kw.produce_v3(1, "both-down", [(0, batch)], acks=acks, timeout_ms=10000)
        _, produced = kw.parse_produce_v3(exchange(leader_bootstrap, request))
        error = produced[("both-down", 0)][0]
        if error == 0:
            appended.append(acks)
        return error

    wait_until(lambda: produce_error(-1) == 0, 30, interval=0.5, what="acks=all with a full ISR")
    for f in followers:
        cluster.kill(f)

    def isr():
        now = partitions_of(cluster.bootstrap(exclude=set(followers)), "both-down")
        return None if now is None else (now[0][0], now[0][2])

    wait_until(lambda: isr() == (leader, [leader]), FAILOVER_BOUND_S,
               what="both followers out of the ISR")
    wait_until(lambda: produce_error(-1) == NOT_ENOUGH_REPLICAS, 20, interval=0.5,
               what="the leader to refuse acks=all")
    assert produce_error(1) == 0
    assert produce_error(-1) == NOT_ENOUGH_REPLICAS, "nothing changed the ISR"
    # Consumers read below the high watermark, and it does not move while the ISR is below
    # min.insync.replicas: the acks=all records are readable, the acks=1 one (appended) is
    # not yet, and no refused one is anywhere.
    assert appended[-1] == 1 and appended.count(1) == 1, appended
    got = consume_all(cluster.nodes[leader].bootstrap, "both-down", 1)
    assert len(got[0]) == len(appended) - 1, (len(got[0]), appended)


def test_a_restarted_follower_catches_up_and_rejoins_the_isr(cluster):
    """Kafka's maybeExpandIsr: a follower fenced out of the ISR, restarted, fetches what it
    missed and is added back through AlterPartition once it reached the high watermark; the
    records acknowledged meanwhile are read back from the partition."""
    create(cluster.bootstrap(), "rejoin", partitions=1)
    parts = wait_until(lambda: partitions_of(cluster.bootstrap(), "rejoin"), 20,
                       what="the topic")
    leader, replicas, _ = parts[0]
    controller = metadata(cluster.bootstrap()).controller_id
    victim = next(r for r in replicas if r not in (leader, controller))
    cluster.kill(victim)

    def isr():
        now = partitions_of(cluster.bootstrap(exclude={victim}), "rejoin")
        return None if now is None else now[0][2]

    wait_until(lambda: isr() is not None and victim not in isr(), FAILOVER_BOUND_S,
               what="the killed follower out of the ISR")
    prod = producer(cluster.bootstrap(exclude={victim}))
    for i in range(200):
        prod.produce("rejoin", value=b"v-%d" % i, partition=0)
    assert prod.flush(30) == 0
    cluster.start_node(victim)
    wait_until(lambda: sorted(isr() or []) == sorted(replicas), FAILOVER_BOUND_S,
               what="the restarted follower back in the ISR")
    for i in range(200, 300):
        prod.produce("rejoin", value=b"v-%d" % i, partition=0)
    assert prod.flush(30) == 0
    got = consume_all(cluster.bootstrap(), "rejoin", 1, expected=300)
    assert sorted(m.value() for m in got[0]) == sorted(b"v-%d" % i for i in range(300))


LAG_MS = 6000
REQUEST_TIMED_OUT = 7


@pytest.mark.parametrize("cluster", [{
    "replica.lag.time.max.ms": LAG_MS,
    # Longer than the follower stays stopped: the controller never fences it, so only the
    # leader's replica.lag.time.max.ms check can take it out of the ISR.
    "broker.session.timeout.ms": 300000,
}], indirect=True)
def test_a_stopped_follower_leaves_the_isr_after_the_lag_time_and_rejoins(cluster):
    """Kafka's isr-expiration (ReplicaManager.maybeShrinkIsr every replica.lag.time.max.ms /
    2): a SIGSTOPped follower, still registered, stops fetching; acks=all waits for it until
    the leader has it removed from the ISR through AlterPartition, then completes and keeps
    completing with the smaller ISR; after SIGCONT it catches up and is added back; every
    acknowledged record is read back exactly once."""
    create(cluster.bootstrap(), "lagging", partitions=1)
    parts = wait_until(lambda: partitions_of(cluster.bootstrap(), "lagging"), 20,
                       what="the topic")
    leader, replicas, isr0 = parts[0]
    assert sorted(isr0) == [1, 2, 3], parts
    controller = metadata(cluster.bootstrap()).controller_id
    # Not the controller: one stopped voter of three leaves the quorum a majority anyway,
    # but the quorum leader's failover would add an election to the test.
    victim = next(r for r in replicas if r not in (leader, controller))
    others = cluster.bootstrap(exclude={victim})
    leader_bootstrap = cluster.nodes[leader].bootstrap
    acked, failed = [], []

    def delivered(err, msg):
        (failed if err is not None else acked).append(msg.value())

    prod = producer(others, **{"message.timeout.ms": 120000})

    def produce(prefix, n):
        for i in range(n):
            prod.produce("lagging", value=b"%s-%d" % (prefix, i), partition=0,
                         on_delivery=delivered)
        assert prod.flush(90) == 0, f"{prefix}: undelivered"

    produce(b"before", 50)

    def isr():
        try:
            now = partitions_of(others, "lagging")
        except KafkaException:
            return None
        return None if now is None else sorted(now[0][2])

    def brokers(bootstrap):
        try:
            return sorted(metadata(bootstrap).brokers)
        except KafkaException:
            return None

    stopped_at = time.monotonic()
    cluster.pause(victim)
    try:
        # acks=all waits for the stopped follower while it is in the ISR: a produce with a
        # 1 s timeout answered REQUEST_TIMED_OUT (its record stays in the log). Checked only
        # when the answer came well before the follower can be out of sync
        # (replica.lag.time.max.ms after its last caught-up fetch, which a slow machine may
        # have made a while before the stop): later, the ISR may rightly have shrunk.
        request = kw.produce_v3(1, "lagging", [(0, kw.record_batch([b"probe"]))], acks=-1,
                                timeout_ms=1000)
        _, produced = kw.parse_produce_v3(exchange(leader_bootstrap, request))
        if time.monotonic() - stopped_at < LAG_MS / 2 / 1000:
            assert produced[("lagging", 0)][0] == REQUEST_TIMED_OUT, produced
        # These wait for the shrink, then complete.
        produce(b"during", 50)
        wait_until(lambda: isr() == sorted(set(replicas) - {victim}), 60,
                   what="the stopped follower out of the ISR")
        # Out of the ISR by the lag check, not fenced: the controller still lists it.
        assert victim in wait_until(lambda: brokers(others), 60, what="the brokers listed")
        produce(b"shrunk", 50)
    finally:
        cluster.resume(victim)
    wait_until(lambda: isr() == [1, 2, 3], 60, what="the resumed follower back in the ISR")
    produce(b"rejoined", 50)
    assert not failed, failed[:5]
    got = consume_all(cluster.bootstrap(), "lagging", 1, expected=len(acked) + 1)
    values = [m.value() for m in got[0]]
    assert sorted(v for v in values if v != b"probe") == sorted(acked), (len(values), len(acked))
    assert len(acked) == 200
    # The timed-out probe was appended all the same (Kafka appends, then waits for the ISR).
    assert values.count(b"probe") == 1, values.count(b"probe")


def test_a_leaders_sigkill_under_idempotent_load_loses_and_duplicates_nothing(cluster):
    """Issue 15's failover test: the leader of an RF 3 partition is SIGKILLed while an
    idempotent acks=all producer writes to it; the new leader comes from the ISR (the next
    replica in preferred order) and the producer resumes there. The old leader restarts,
    truncates the suffix it never replicated (KIP-101/279: at the diverging epoch) and rejoins
    the ISR; then the second leader is killed, so the old one leads again (first in preferred
    order) and the log is read from it: every acknowledged record is there exactly once, and
    no record twice. A replica that kept its unreplicated suffix would serve its own records
    at offsets where the acknowledged ones of the second leader are."""
    controller = metadata(cluster.bootstrap()).controller_id
    first, second = [n for n in (1, 2, 3) if n != controller]
    a = admin(cluster.bootstrap())
    futures = a.create_topics([NewTopic("under-load", num_partitions=1,
                                        replica_assignment=[[first, second, controller]])],
                              operation_timeout=20, request_timeout=20)
    futures["under-load"].result()

    def leader_and_isr(exclude=()):
        now = partitions_of(cluster.bootstrap(exclude=exclude), "under-load")
        return None if now is None else (now[0][0], sorted(now[0][2]))

    wait_until(lambda: leader_and_isr() == (first, sorted([first, second, controller])), 20,
               what="the topic led by its first replica with a full ISR")
    acked, failed = [], []

    def delivered(err, msg):
        (failed if err is not None else acked).append(msg.value())

    prod = producer(cluster.bootstrap(), **{"enable.idempotence": True,
                                            "message.timeout.ms": 90000, "linger.ms": 2})
    sent = 0

    def produce(n):
        nonlocal sent
        for _ in range(n):
            prod.produce("under-load", value=b"u-%06d" % sent, partition=0,
                         on_delivery=delivered)
            sent += 1
            prod.poll(0)
            if sent % 50 == 0:
                time.sleep(0.01)  # a steady stream, so the kill lands mid-flight

    produce(1500)
    cluster.kill(first)
    produce(1500)
    moved = wait_until(lambda: (lambda li: li if li and li[0] == second and first not in li[1]
                                else None)(leader_and_isr(exclude={first})),
                       FAILOVER_BOUND_S, what="the second replica leading without the first")
    assert moved[0] == second, moved
    assert prod.flush(120) == 0
    cluster.start_node(first)
    wait_until(lambda: (leader_and_isr() or (None, []))[1] == sorted([first, second, controller]),
               FAILOVER_BOUND_S * 2, what="the restarted old leader back in the ISR")
    produce(500)
    assert prod.flush(60) == 0
    cluster.kill(second)
    wait_until(lambda: (leader_and_isr(exclude={second}) or (None,))[0] == first,
               FAILOVER_BOUND_S, what="the old leader leading again")
    produce(500)
    assert prod.flush(120) == 0
    del prod
    assert len(acked) + len(failed) == sent
    got = consume_all(cluster.bootstrap(exclude={second}), "under-load", 1, expected=len(acked))
    values = [m.value() for m in got[0]]
    assert len(values) == len(set(values)), "a record is in the log twice"
    missing = set(acked) - set(values)
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:3]}"
    assert set(values) <= {b"u-%06d" % i for i in range(sent)}
    cluster.start_node(second)


def test_sigterm_moves_leaderships_before_exit(cluster):
    create(cluster.bootstrap(), "controlled")
    parts = wait_until(lambda: partitions_of(cluster.bootstrap(), "controlled"), 20,
                       what="the topic")
    leaving = parts[0][0]
    assert cluster.stop_node(leaving) == 0, cluster.describe()
    log = cluster.nodes[leaving].log_path.read_text(errors="replace")
    assert "controlled shutdown: leaderships moved to other replicas agreed=true" in log, log[-3000:]

    def moved():
        now = partitions_of(cluster.bootstrap(exclude={leaving}), "controlled")
        if now is None or any(leader in (leaving, -1) or leaving in isr
                              for leader, _, isr in now.values()):
            return None
        return now

    wait_until(moved, 20, what="the survivors to report the moved leaderships")
    cluster.start_node(leaving)


def exchange(bootstrap, request):
    host, port = bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(request)
        return kw.read_frame(s)


def test_produce_and_fetch_off_the_leader_get_not_leader_or_follower(cluster):
    create(cluster.bootstrap(), "leaders", partitions=3, replication_factor=2)
    parts = wait_until(lambda: partitions_of(cluster.bootstrap(), "leaders"), 20, what="the topic")
    batch = kw.record_batch([b"x"])
    for p, (leader, replicas, _) in parts.items():
        for node_id in (1, 2, 3):
            bootstrap = cluster.nodes[node_id].bootstrap
            _, produced = kw.parse_produce_v3(
                exchange(bootstrap, kw.produce_v3(1, "leaders", [(p, batch)])))
            _, fetched = kw.parse_fetch_v4(exchange(bootstrap, kw.fetch_v4(2, "leaders", p, 0)))
            produce_error, fetch_error = produced[("leaders", p)][0], fetched[("leaders", p)][0]
            # The leader takes it; a follower, and a broker holding no replica at all, answer
            # NOT_LEADER_OR_FOLLOWER (6), as Kafka does.
            expected = 0 if node_id == leader else NOT_LEADER_OR_FOLLOWER
            where = f"partition {p} (leader {leader}, replicas {replicas}) on broker {node_id}"
            assert produce_error == expected, f"produce: {produce_error}, {where}"
            assert fetch_error == expected, f"fetch: {fetch_error}, {where}"


def test_off_the_leader_produce_v10_names_the_leader_and_epochs_are_checked(cluster):
    """KIP-951: a Produce v10 answered NOT_LEADER_OR_FOLLOWER carries the partition's leader
    and leader epoch and the leader's endpoint. KIP-320 on every broker: a replica checks the
    current leader epoch before the leader check (a newer epoch: UNKNOWN_LEADER_EPOCH; the
    current one on a follower: NOT_LEADER_OR_FOLLOWER); a broker holding no replica answers
    NOT_LEADER_OR_FOLLOWER whatever the epoch, as Kafka's ReplicaManager does."""
    create(cluster.bootstrap(), "hints", partitions=3, replication_factor=2)
    parts = wait_until(lambda: partitions_of(cluster.bootstrap(), "hints"), 20, what="the topic")
    batch = kw.record_batch([b"x"])
    for p, (leader, replicas, _) in parts.items():
        leader_bootstrap = cluster.nodes[leader].bootstrap
        _, listed = kw.parse_list_offsets(exchange(
            leader_bootstrap, kw.list_offsets(1, 5, "hints", [(p, -1, kw.LATEST_TIMESTAMP)])))
        error, _, _, epoch = listed[("hints", p)]
        assert error == 0 and epoch >= 0, (p, listed)
        leader_port = int(leader_bootstrap.rsplit(":", 1)[1])
        for node_id in (1, 2, 3):
            bootstrap = cluster.nodes[node_id].bootstrap
            where = f"partition {p} (leader {leader}, replicas {replicas}) on broker {node_id}"
            _, produced, endpoints = kw.parse_produce_v10(
                exchange(bootstrap, kw.produce_v10(2, "hints", [(p, batch)])))
            error, _, current_leader = produced[("hints", p)]
            if node_id == leader:
                assert error == 0, where
                assert current_leader is None and endpoints == {}, where
            else:
                assert error == NOT_LEADER_OR_FOLLOWER, where
                assert current_leader == (leader, epoch), where
                assert endpoints[leader][1] == leader_port, (where, endpoints)
                assert endpoints[leader][2] == f"rack-{leader}", (where, endpoints)

            def epoch_error(current):
                request = kw.offset_for_leader_epoch(3, 3, "hints", [(p, current, epoch)])
                _, out = kw.parse_offset_for_leader_epoch(exchange(bootstrap, request), 3)
                return out[("hints", p)][0]

            if node_id == leader:
                assert epoch_error(epoch) == 0, where
                assert epoch_error(epoch + 1) == UNKNOWN_LEADER_EPOCH, where
            elif node_id in replicas:
                assert epoch_error(epoch) == NOT_LEADER_OR_FOLLOWER, where
                assert epoch_error(epoch + 1) == UNKNOWN_LEADER_EPOCH, where
            else:
                assert epoch_error(epoch + 1) == NOT_LEADER_OR_FOLLOWER, where


def test_manual_replica_assignments_are_kept(cluster):
    a = admin(cluster.nodes[1].bootstrap)
    futures = a.create_topics([NewTopic("manual", num_partitions=3,
                                        replica_assignment=[[2, 3], [3, 1], [1, 2]])],
                              operation_timeout=20, request_timeout=20)
    futures["manual"].result()
    parts = wait_until(lambda: partitions_of(cluster.bootstrap(), "manual"), 20, what="the topic")
    assert {p: (leader, replicas) for p, (leader, replicas, _) in parts.items()} == {
        0: (2, [2, 3]), 1: (3, [3, 1]), 2: (1, [1, 2])}, parts
    futures = a.create_partitions([NewPartitions("manual", 4, replica_assignment=[[3, 2]])],
                                  operation_timeout=20, request_timeout=20)
    futures["manual"].result()
    parts = wait_until(lambda: (lambda p: p if p and len(p) == 4 else None)(
        partitions_of(cluster.bootstrap(), "manual")), 20, what="the new partition")
    assert parts[3][:2] == (3, [3, 2]), parts
    # A broker that is not registered is refused, as Kafka refuses it.
    futures = a.create_topics([NewTopic("manual-bad", num_partitions=1,
                                        replica_assignment=[[1, 9]])],
                              operation_timeout=20, request_timeout=20)
    with pytest.raises(KafkaException) as refused:
        futures["manual-bad"].result()
    assert refused.value.args[0].name() == "INVALID_REPLICA_ASSIGNMENT", refused.value


def test_a_group_commits_offsets_of_partitions_on_other_brokers(cluster):
    # Replication factor 1: each partition lives on one broker, most of them not on the
    # group's coordinator, which stores the offsets of all of them.
    create(cluster.bootstrap(), "spread", partitions=3, replication_factor=1)
    wait_until(lambda: partitions_of(cluster.bootstrap(), "spread"), 20, what="the topic")
    p = producer(cluster.bootstrap())
    for i in range(30):
        p.produce("spread", value=b"%d" % i, partition=i % 3)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": "spread-group",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        c.subscribe(["spread"])
        seen = 0
        for _ in range(600):  # at most 60 s
            m = c.poll(0.1)
            if m is not None and m.error() is None:
                seen += 1
            if seen == 30:
                break
        assert seen == 30
        c.commit(asynchronous=False)
        committed = c.committed([TopicPartition("spread", i) for i in range(3)], timeout=20)
        assert sorted((tp.partition, tp.offset) for tp in committed) == [(0, 10), (1, 10), (2, 10)]
    finally:
        c.close()


def admin_request(bootstrap, api_key, version, body):
    """Sends one admin request straight to `bootstrap` (clients send these to the controller
    they learn from Metadata; this asks a broker that is not it) and returns the response
    body after its correlation id."""
    payload = exchange(bootstrap, kw.frame(kw.header_v1(api_key, version, 7) + body))
    r = kw.Reader(payload)
    assert r.i32() == 7
    return r


def test_admin_requests_work_through_a_broker_that_is_not_the_controller(cluster):
    controller = metadata(cluster.bootstrap()).controller_id
    other = next(n for n in cluster.nodes.values() if n.node_id != controller).bootstrap
    # CreateTopics v2: [name, partitions, replication factor, no assignments, no configs].
    body = (kw.i32(1) + kw.string("via-other") + kw.i32(2) + kw.i16(3) + kw.i32(0) + kw.i32(0)
            + kw.i32(20000) + kw.i8(0))
    r = admin_request(other, 19, 2, body)
    r.i32()  # throttle
    assert r.array(lambda r: (r.string(), r.i16(), r.string()))[0][:2] == ("via-other", 0)
    # Answered once this broker has installed the topic: its Metadata lists it at once.
    parts = partitions_of(other, "via-other")
    assert parts is not None and len(parts) == 2, parts
    # CreatePartitions v0: grow to 3, no assignment.
    body = (kw.i32(1) + kw.string("via-other") + kw.i32(3) + kw.i32(-1) + kw.i32(20000)
            + kw.i8(0))
    r = admin_request(other, 37, 0, body)
    r.i32()
    assert r.array(lambda r: (r.string(), r.i16(), r.string()))[0][:2] == ("via-other", 0)
    assert len(partitions_of(other, "via-other")) == 3
    # IncrementalAlterConfigs v0: SET retention.ms on the topic (resource type 2).
    body = (kw.i32(1) + kw.i8(2) + kw.string("via-other")
            + kw.i32(1) + kw.string("retention.ms") + kw.i8(0) + kw.string("12345") + kw.i8(0))
    r = admin_request(other, 44, 0, body)
    r.i32()
    result = r.array(lambda r: (r.i16(), r.string(), r.i8(), r.string()))
    assert [(code, kind, name) for code, _, kind, name in result] == [(0, 2, "via-other")]
    client = admin(cluster.bootstrap())

    described = client.describe_configs([ConfigResource("topic", "via-other")])
    configs = list(described.values())[0].result(timeout=20)
    assert configs["retention.ms"].value == "12345"
    # DeleteTopics v1.
    r = admin_request(other, 20, 1, kw.i32(1) + kw.string("via-other") + kw.i32(20000))
    r.i32()
    assert r.array(lambda r: (r.string(), r.i16())) == [("via-other", 0)]
    assert partitions_of(other, "via-other") is None
    # An idempotent producer bootstrapped on each broker gets its producer id there
    # (InitProducerId; a broker that is not the controller asks it for a block of ids).
    create(cluster.bootstrap(), "idempotent", partitions=3, replication_factor=3)
    wait_until(lambda: partitions_of(cluster.bootstrap(), "idempotent"), 20, what="the topic")
    for node in cluster.nodes.values():
        p = producer(node.bootstrap, **{"enable.idempotence": True})
        for i in range(30):
            p.produce("idempotent", value=b"%d" % i, partition=i % 3)
        assert p.flush(30) == 0, f"idempotent producer via broker {node.node_id}"


def test_a_client_cannot_fence_a_broker_through_the_controller_requests(cluster):
    # Brokers forward controller requests on the Kafka listener (Sluice's own API key 32000,
    # JSON). Fencing and unfencing are the active controller's own decisions: sent from
    # outside, they are refused and nothing changes. (Unregistering is Kafka's UnregisterBroker,
    # which any client may send.)
    controller = metadata(cluster.bootstrap()).controller_id
    victim = next(i for i in (1, 2, 3) if i != controller)
    for op in ({"FenceBroker": {"broker_id": victim}},
               {"UnfenceBroker": {"broker_id": victim, "broker_epoch": 0}}):
        request = json.dumps({"Op": {"from": victim, "op": op}}).encode()
        payload = exchange(cluster.nodes[controller].bootstrap,
                           kw.frame(kw.i16(32000) + kw.i32(5) + request))
        assert payload[:4] == kw.i32(5)
        reply = json.loads(payload[4:])
        assert "NotForwardable" in reply.get("Err", {}), reply
    assert sorted(metadata(cluster.bootstrap()).brokers) == [1, 2, 3]


def _one_partition_led_by(cluster, topic, leader, prefix):
    """Creates `topic` with one partition whose replicas are `leader` (first: the preferred
    leader), then the other two nodes; waits until `leader` leads it with a full ISR and writes
    100 records `<prefix>-<i>` (i = 0..99). Returns `state(exclude=())`: the partition's
    (leader, replicas, ISR) as the nodes not in `exclude` report it, or None."""
    others = [i for i in (1, 2, 3) if i != leader]
    client = admin(cluster.bootstrap())  # alive until the future completes
    client.create_topics(
        [NewTopic(topic, num_partitions=1, replica_assignment=[[leader, *others]])],
        operation_timeout=20, request_timeout=20)[topic].result()

    def state(exclude=()):
        now = partitions_of(cluster.bootstrap(exclude=set(exclude)), topic)
        return None if now is None else now[0]

    wait_until(lambda: (s := state()) and s[0] == leader and sorted(s[2]) == [1, 2, 3],
               20, what=f"node {leader} leading {topic} with a full ISR")
    prod = producer(cluster.bootstrap())
    for i in range(100):
        prod.produce(topic, value=b"%s-%d" % (prefix, i), partition=0)
    assert prod.flush(30) == 0
    return state


@pytest.mark.parametrize("cluster", [{"auto.leader.rebalance.enable": "false"}], indirect=True)
def test_a_preferred_election_moves_the_leadership_back_to_a_restarted_replica(cluster):
    """ElectLeaders (KIP-183/KIP-460) through the controller: a SIGKILLed preferred leader
    comes back as a follower (with auto.leader.rebalance.enable=false leadership never returns
    by itself);
    once it is back in the ISR a PREFERRED election makes it leader again, every record
    produced before and after stays readable, and a second election is not needed."""
    from confluent_kafka import ElectionType

    topic = "elect-preferred"
    controller = metadata(cluster.bootstrap()).controller_id
    preferred = next(i for i in (1, 2, 3) if i != controller)
    others = [i for i in (1, 2, 3) if i != preferred]
    a = admin(cluster.bootstrap())
    state = _one_partition_led_by(cluster, topic, preferred, b"e")

    cluster.kill(preferred)
    wait_until(lambda: (s := state({preferred})) and s[0] in others, FAILOVER_BOUND_S,
               what="another replica leading")
    prod = producer(cluster.bootstrap(exclude={preferred}))
    for i in range(100, 200):
        prod.produce(topic, value=b"e-%d" % i, partition=0)
    assert prod.flush(30) == 0
    cluster.start_node(preferred)
    back = wait_until(lambda: (s := state()) and sorted(s[2]) == [1, 2, 3] and s,
                      FAILOVER_BOUND_S, what="the restarted replica back in the ISR")
    assert back[0] in others, f"the leadership moved back by itself: {back}"

    tp = TopicPartition(topic, 0)
    a = admin(cluster.bootstrap())
    # No request_timeout/operation_timeout: confluent-kafka 2.16.1's elect_leaders raises
    # SystemError on any keyword argument (its C argument list is one entry short).
    result = a.elect_leaders(ElectionType.PREFERRED, [tp]).result()
    assert list(result.items()) == [(tp, None)], result
    wait_until(lambda: (s := state()) and s[0] == preferred, 20,
               what="the preferred replica leading again")
    prod = producer(cluster.bootstrap())
    for i in range(200, 300):
        prod.produce(topic, value=b"e-%d" % i, partition=0)
    assert prod.flush(30) == 0
    got = consume_all(cluster.bootstrap(), topic, 1, expected=300)
    assert sorted(m.value() for m in got[0]) == sorted(b"e-%d" % i for i in range(300))

    def error_name(e):
        e = e.args[0] if isinstance(e, KafkaException) else e
        return e.name()

    again = a.elect_leaders(ElectionType.PREFERRED, [tp]).result()
    assert [error_name(e) for e in again.values()] == ["ELECTION_NOT_NEEDED"], again
    unknown = TopicPartition(topic, 5)
    missing = a.elect_leaders(ElectionType.PREFERRED, [unknown]).result()
    assert [error_name(e) for e in missing.values()] == ["UNKNOWN_TOPIC_OR_PART"], missing
    # Unclean: the partition has a leader, so nothing is needed either.
    unclean = a.elect_leaders(ElectionType.UNCLEAN, [tp]).result()
    assert [error_name(e) for e in unclean.values()] == ["ELECTION_NOT_NEEDED"], unclean
    assert state()[0] == preferred
    # ElectLeaders v1 sent straight to a broker that is not the active controller: forwarded.
    controller = metadata(cluster.bootstrap()).controller_id
    other = next(n for n in cluster.nodes.values() if n.node_id != controller)
    r = admin_request(other.bootstrap, 43, 1, kw.i8(0) + kw.i32(1) + kw.string(topic)
                      + kw.i32(1) + kw.i32(0) + kw.i32(30000))
    r.i32()  # throttle_time_ms
    assert r.i16() == 0
    assert r.array(lambda r: (r.string(), r.array(lambda r: (r.i32(), r.i16(), r.string())))) \
        == [(topic, [(0, 84, "Leader election not needed for topic partition.")])]


@pytest.mark.parametrize("cluster", [{"leader.imbalance.check.interval.seconds": 1}],
                         indirect=True)
def test_leadership_returns_to_a_restarted_preferred_replica_by_itself(cluster):
    """auto.leader.rebalance.enable (Kafka's default, true): a SIGKILLed preferred leader comes
    back as a follower; once it is back in the ISR the active controller's leader balance
    (every leader.imbalance.check.interval.seconds, here 1) makes it leader again, with no
    ElectLeaders; every record produced before and after stays readable."""
    topic = "auto-balance"
    controller = metadata(cluster.bootstrap()).controller_id
    preferred = next(i for i in (1, 2, 3) if i != controller)
    others = [i for i in (1, 2, 3) if i != preferred]
    state = _one_partition_led_by(cluster, topic, preferred, b"b")

    cluster.kill(preferred)
    wait_until(lambda: (s := state({preferred})) and s[0] in others, FAILOVER_BOUND_S,
               what="another replica leading")
    prod = producer(cluster.bootstrap(exclude={preferred}))
    for i in range(100, 200):
        prod.produce(topic, value=b"b-%d" % i, partition=0)
    assert prod.flush(30) == 0
    cluster.start_node(preferred)
    wait_until(lambda: (s := state()) and s[0] == preferred and sorted(s[2]) == [1, 2, 3],
               FAILOVER_BOUND_S, what="the preferred replica leading again by itself")
    prod = producer(cluster.bootstrap())
    for i in range(200, 300):
        prod.produce(topic, value=b"b-%d" % i, partition=0)
    assert prod.flush(30) == 0
    got = consume_all(cluster.bootstrap(), topic, 1, expected=300)
    assert sorted(m.value() for m in got[0]) == sorted(b"b-%d" % i for i in range(300))


def test_kafka_metadata_quorum_describes_the_three_voters(cluster, java_classpath):
    """DescribeQuorum (KIP-595) through any broker (one that is not the active controller
    forwards it): `kafka-metadata-quorum.sh describe --status` names the active controller as
    leader with the three voters and no observers; `--replication` lists each voter with its
    log end offset, lag and fetch times; after a voter's SIGKILL the survivors describe a
    quorum whose leader is one of them."""
    import re

    from jvm import check_java, run_java

    tool = "org.apache.kafka.tools.MetadataQuorumCommand"

    def describe(bootstrap, what):
        return check_java(run_java(java_classpath, tool,
                                   ["--bootstrap-server", bootstrap, "describe", what],
                                   timeout=90))

    controller = metadata(cluster.bootstrap()).controller_id
    create(cluster.bootstrap(), "quorum-topic", partitions=2)
    for node in cluster.nodes.values():
        out = describe(node.bootstrap, "--status")
        assert re.search(rf"LeaderId:\s+{controller}\n", out), out
        assert re.search(r"LeaderEpoch:\s+[1-9]\d*\n", out), out
        assert int(re.search(r"HighWatermark:\s+(\d+)", out)[1]) > 0, out
        voters = sorted(int(v) for v in re.findall(r'\{"id": (\d+)', out.split("CurrentVoters:")[1]
                                                              .split("\n")[0]))
        assert voters == [1, 2, 3], out
        assert re.search(r"CurrentObservers:\s+\[\]", out), out

    def replication(bootstrap):
        out = describe(bootstrap, "--replication")
        rows = [l.split() for l in out.splitlines() if re.match(r"\d+\s", l)]
        # NodeId DirectoryId LogEndOffset Lag LastFetchTimestamp LastCaughtUpTimestamp Status
        return {int(r[0]): (int(r[2]), int(r[3]), int(r[4]), int(r[5]), r[6]) for r in rows}, out

    def all_caught_up():
        rows, _ = replication(cluster.bootstrap())
        return rows if len(rows) == 3 and all(lag == 0 and fetched > 0
                                              for _, lag, fetched, _, _ in rows.values()) else None

    rows = wait_until(all_caught_up, FAILOVER_BOUND_S, what="every voter caught up")
    assert sorted(rows) == [1, 2, 3], rows
    assert [s for n, (*_, s) in sorted(rows.items()) if n == controller] == ["Leader"], rows
    assert sorted(s for *_, s in rows.values()) == ["Follower", "Follower", "Leader"], rows

    victim = next(i for i in (1, 2, 3) if i != controller)
    cluster.kill(victim)
    survivors = cluster.bootstrap(exclude={victim})
    out = describe(survivors, "--status")
    leader = int(re.search(r"LeaderId:\s+(\d+)", out)[1])
    assert leader in (1, 2, 3) and leader != victim, out


def test_kafka_cluster_unregister_removes_a_stopped_brokers_registration(cluster,
                                                                         java_classpath):
    """UnregisterBroker (API 64, KIP-631) as Kafka serves it: forwarded to the active
    controller; a broker that is not registered is BROKER_ID_NOT_REGISTERED. A SIGKILLed
    broker, unregistered through a survivor that is not the controller, is gone (unregistering
    it again is refused); restarted, it registers again and serves."""
    from jvm import run_java

    tool = "org.apache.kafka.tools.ClusterTool"

    def unregister(bootstrap, broker_id):
        return run_java(java_classpath, tool,
                        ["unregister", "--bootstrap-server", bootstrap, "--id", str(broker_id)],
                        timeout=90)

    run = unregister(cluster.bootstrap(), 9)
    assert run.returncode != 0 and "BrokerIdNotRegisteredException" in run.output, run.report()

    controller = metadata(cluster.bootstrap()).controller_id
    victim = next(i for i in (1, 2, 3) if i != controller)
    other = next(i for i in (1, 2, 3) if i not in (controller, victim))
    cluster.kill(victim)
    wait_until(lambda: victim not in metadata(cluster.nodes[other].bootstrap).brokers,
               FAILOVER_BOUND_S, what=f"broker {victim} fenced")
    run = unregister(cluster.nodes[other].bootstrap, victim)
    assert run.returncode == 0 and f"Broker {victim} is no longer registered." in run.output, \
        run.report()
    run = unregister(cluster.nodes[other].bootstrap, victim)
    assert run.returncode != 0 and "BrokerIdNotRegisteredException" in run.output, run.report()

    cluster.start_node(victim)
    wait_until(lambda: sorted(metadata(cluster.bootstrap()).brokers) == [1, 2, 3],
               FAILOVER_BOUND_S, what=f"broker {victim} registered again")


def test_update_features_goes_to_the_active_controller(cluster, java_classpath):
    """UpdateFeatures (API 57) sent to a broker that is not the active controller is forwarded:
    the refusal names the active controller as the local controller; an accepted update
    (metadata.version at its finalized level) is recorded, and every broker still reports the
    same finalized metadata.version."""
    import re

    from jvm import run_java

    tool = "org.apache.kafka.tools.FeatureCommand"

    def features(bootstrap, *args):
        return run_java(java_classpath, tool, ["--bootstrap-server", bootstrap, *args],
                        timeout=90)

    controller = metadata(cluster.bootstrap()).controller_id
    other = next(n for n in cluster.nodes.values() if n.node_id != controller).bootstrap
    run = features(other, "upgrade", "--feature", "group.version=1")
    assert run.returncode == 1, run.report()
    assert (f"Invalid update version 1 for feature group.version. Local controller {controller} "
            "does not support this feature.") in run.output, run.report()
    run = features(other, "upgrade", "--metadata", "3.3-IV3")
    assert run.returncode == 0 and "metadata.version was upgraded to 7." in run.output, \
        run.report()
    for node in cluster.nodes.values():
        run = features(node.bootstrap, "describe")
        assert run.returncode == 0, run.report()
        assert re.search(r"Feature: metadata\.version\s+SupportedMinVersion: 3\.3-IV3\s+"
                         r"SupportedMaxVersion: 3\.3-IV3\s+FinalizedVersionLevel: 3\.3-IV3",
                         run.output), run.report()


def test_committed_offsets_survive_the_coordinators_sigkill(cluster):
    """A group's coordinator is the leader of its `__consumer_offsets` partition (RF 3) and
    commits are acks=all appends to it: after the coordinator's SIGKILL, the new leader of
    that partition loads it and a new consumer of the group, bootstrapped at a survivor,
    resumes exactly at the committed offsets (nothing before them read again, nothing after
    them skipped); the admin client reads the same offsets from a survivor.

    Every broker answers a ListGroups after `__consumer_offsets` exists and before the
    commits (a moment at which a broker may read its replicas of it, as it may at start): a
    broker that did not replay the partition again when elected its leader would serve what
    it read then (no offsets)."""
    import time

    from confluent_kafka import ConsumerGroupTopicPartitions

    topic, per_partition = "resume", 20
    committed = {0: 5, 1: 10, 2: 15}  # distinct per partition, so a mix-up shows
    create(cluster.bootstrap(), topic, partitions=3)
    wait_until(lambda: partitions_of(cluster.bootstrap(), topic), 20, what="the topic")
    prod = producer(cluster.bootstrap())
    for i in range(3 * per_partition):
        prod.produce(topic, value=b"%d" % i, partition=i % 3)
    assert prod.flush(30) == 0

    def coordinator(bootstrap, group):
        _, err, node, _, _ = kw.parse_find_coordinator_v0(
            exchange(bootstrap, kw.find_coordinator_v0(1, group)))
        return node if err == 0 else None

    # The first FindCoordinator creates `__consumer_offsets`; then each broker lists groups.
    wait_until(lambda: coordinator(cluster.nodes[1].bootstrap, "resume-probe"), 60,
               what="__consumer_offsets")
    for node in cluster.nodes.values():
        def listed_groups(bootstrap=node.bootstrap):
            _, err, _ = kw.parse_list_groups_v0(exchange(bootstrap, kw.list_groups_v0(1)))
            return err == 0
        wait_until(listed_groups, 60, what=f"ListGroups on node {node.node_id}")

    def full_isrs():
        for t in ("__consumer_offsets", topic):
            parts = partitions_of(cluster.bootstrap(), t)
            if not parts or any(sorted(isr) != [1, 2, 3] or leader < 0
                                for leader, _, isr in parts.values()):
                return False
        return True

    # Every replica in every ISR: the commits reach all three, any survivor can lead.
    wait_until(full_isrs, 60, what="full ISRs")
    # A group coordinated by a broker that is not the controller, so the kill tests the
    # coordinator's move alone (the controller's replacement has its own test).
    controller = metadata(cluster.bootstrap()).controller_id
    asked = cluster.nodes[controller].bootstrap
    group = victim = None
    for i in range(50):
        name = f"resume-group-{i}"
        node = wait_until(lambda n=name: coordinator(asked, n), 60,
                          what=f"a coordinator for {name}")
        if node != controller:
            group, victim = name, node
            break
    assert group is not None, "every group name tried is coordinated by the controller"

    first = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": group,
                      "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        first.subscribe([topic])
        seen = {p: 0 for p in committed}
        deadline = time.monotonic() + 60
        while any(seen[p] < committed[p] for p in committed):
            assert time.monotonic() < deadline, f"first consumer read only {seen}"
            m = first.poll(0.2)
            if m is not None and m.error() is None:
                seen[m.partition()] += 1
        first.commit(offsets=[TopicPartition(topic, p, o) for p, o in committed.items()],
                     asynchronous=False)
        back = first.committed([TopicPartition(topic, p) for p in committed], timeout=20)
        assert {tp.partition: tp.offset for tp in back} == committed
    finally:
        first.close()
    # The coordinator did not move meanwhile: the commit went to the broker killed now.
    assert coordinator(asked, group) == victim
    cluster.kill(victim)
    survivors = cluster.bootstrap(exclude={victim})

    def moved():
        node = coordinator(asked, group)
        return node if node not in (None, victim) else None

    wait_until(moved, 60, what="a new coordinator")

    client = admin(survivors)  # alive until its futures complete

    def listed():
        futures = client.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)], request_timeout=10)
        try:
            result = futures[group].result(timeout=30)
        except KafkaException:
            return None  # COORDINATOR_LOAD_IN_PROGRESS and the like: retried
        return {tp.partition: tp.offset for tp in result.topic_partitions
                if tp.topic == topic and tp.error is None}

    assert wait_until(listed, 60, what="the group's offsets from a survivor") == committed

    second = Consumer({"bootstrap.servers": survivors, "group.id": group,
                       "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        second.subscribe([topic])
        read = {p: [] for p in committed}
        wanted = sum(per_partition - o for o in committed.values())
        deadline = time.monotonic() + 60
        while sum(len(v) for v in read.values()) < wanted:
            assert time.monotonic() < deadline, f"second consumer read {read}"
            m = second.poll(0.2)
            if m is not None and m.error() is None:
                read[m.partition()].append(m.offset())
    finally:
        second.close()
    assert read == {p: list(range(o, per_partition)) for p, o in committed.items()}

    # The killed coordinator comes back as a follower of the group's offsets partition: it
    # does not coordinate the group any more (NOT_COORDINATOR), the new coordinator does.
    cluster.start_node(victim)

    def offset_fetch(node_id):
        _, got = kw.parse_offset_fetch_v1(exchange(
            cluster.nodes[node_id].bootstrap,
            kw.offset_fetch_v1(1, group, {topic: sorted(committed)})))
        return {p: (off, err) for (_, p), (off, _, err) in got.items()}

    now = wait_until(lambda: coordinator(asked, group), 60, what="the coordinator")
    assert now != victim
    assert offset_fetch(now) == {p: (o, 0) for p, o in committed.items()}
    not_coordinator = 16
    assert offset_fetch(victim) == {p: (-1, not_coordinator) for p in committed}
    assert coordinator(asked, group) == now, "the coordinator moved during the check"


def test_a_follower_below_the_leaders_log_start_truncates_fully_and_rejoins(cluster):
    """Kafka's AbstractFetcherThread.fetchOffsetAndTruncate: a follower SIGKILLed while its
    leader's DeleteRecords moves the log start offset past the follower's log end gets
    OFFSET_OUT_OF_RANGE when it fetches again, asks the leader its offsets (ListOffsets with
    its replica id), truncates its log fully to start at the leader's log start offset,
    catches up and rejoins the ISR. acks=all records produced after are acknowledged, and
    once it leads (a preferred election) it answers the leader's log start offset as its own
    earliest offset and serves every record from there."""
    from confluent_kafka import ElectionType

    topic = "below-log-start"
    controller = metadata(cluster.bootstrap()).controller_id
    victim = next(i for i in (1, 2, 3) if i != controller)
    others = [i for i in (1, 2, 3) if i != victim]
    a = admin(cluster.bootstrap())
    tp = TopicPartition(topic, 0)
    state = _one_partition_led_by(cluster, topic, victim, b"d")

    # The victim goes away with offsets 0..100; the others go on to 300 and delete below 250.
    cluster.kill(victim)
    wait_until(lambda: (s := state({victim})) and s[0] in others and victim not in s[2],
               FAILOVER_BOUND_S, what="another replica leading, the victim out of the ISR")
    prod = producer(cluster.bootstrap(exclude={victim}))
    # Flushed at 250, so the deletion point starts a batch: the victim's new log starts
    # exactly there (a batch holding it would be fetched whole, from its base).
    for first, last in ((100, 250), (250, 300)):
        for i in range(first, last):
            prod.produce(topic, value=b"d-%d" % i, partition=0)
        assert prod.flush(30) == 0
    a = admin(cluster.bootstrap(exclude={victim}))
    deleted = a.delete_records([TopicPartition(topic, 0, 250)],
                               request_timeout=20, operation_timeout=20)
    assert deleted[tp].result().low_watermark == 250

    def watermarks(bootstrap):
        """(log start, high watermark) from the leader; None while a new leader's high
        watermark has not caught up (OFFSET_NOT_AVAILABLE, Kafka's answer then)."""
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "below-log-start"})
        try:
            return c.get_watermark_offsets(tp, timeout=10)
        except KafkaException as e:
            if e.args[0].name() == "OFFSET_NOT_AVAILABLE":
                return None
            raise
        finally:
            c.close()

    assert watermarks(cluster.bootstrap(exclude={victim})) == (250, 300)

    cluster.start_node(victim)
    wait_until(lambda: (s := state()) and sorted(s[2]) == [1, 2, 3], FAILOVER_BOUND_S,
               what="the restarted victim back in the ISR")
    # Its log was truncated fully: one segment, based at the leader's log start offset.
    segments = sorted(p.name for p in
                      (cluster.nodes[victim].dir / "data" / f"{topic}-0").glob("*.log"))
    assert segments == [f"{250:020d}.log"], segments
    prod = producer(cluster.bootstrap())
    for i in range(300, 400):
        prod.produce(topic, value=b"d-%d" % i, partition=0)
    assert prod.flush(30) == 0, "acks=all records after the victim rejoined"

    # Leading again, the victim answers the leader's log start as its own.
    a = admin(cluster.bootstrap())  # alive until its future completes
    result = a.elect_leaders(ElectionType.PREFERRED, [tp]).result()
    assert list(result.items()) == [(tp, None)], result
    wait_until(lambda: (s := state()) and s[0] == victim, 20, what="the victim leading")
    got = wait_until(lambda: watermarks(cluster.bootstrap()), 20,
                     what="the new leader's watermarks")
    assert got == (250, 400), got
    got = consume_all(cluster.bootstrap(), topic, 1, expected=150)
    assert [m.value() for m in got[0]] == [b"d-%d" % i for i in range(250, 400)]


def test_consumer_offsets_is_not_created_with_fewer_replicas_while_a_broker_is_down(cluster):
    """As Kafka: `__consumer_offsets` gets `offsets.topic.replication.factor` (3) replicas, and
    while fewer brokers are active FindCoordinator answers COORDINATOR_NOT_AVAILABLE (15)
    rather than creating it under-replicated for good; once the broker is back it is created
    with three replicas."""
    coordinator_not_available = 15
    controller = metadata(cluster.bootstrap()).controller_id
    victim = next(n for n in (1, 2, 3) if n != controller)
    cluster.kill(victim)
    survivor = cluster.nodes[controller].bootstrap
    wait_until(lambda: victim not in metadata(survivor).brokers, FAILOVER_BOUND_S,
               what="the killed broker fenced")

    def find(bootstrap):
        _, err, node, _, _ = kw.parse_find_coordinator_v0(
            exchange(bootstrap, kw.find_coordinator_v0(1, "waits-for-three")))
        return err, node

    assert find(survivor)[0] == coordinator_not_available
    assert "__consumer_offsets" not in metadata(survivor).topics
    cluster.start_node(victim)
    wait_until(lambda: find(survivor)[0] == 0, 60, what="a coordinator")
    parts = partitions_of(cluster.bootstrap(), "__consumer_offsets")
    assert parts and all(len(replicas) == 3 for _, replicas, _ in parts.values()), parts
