"""Consumer groups on the raw wire: the group coordinator's error codes as Kafka returns them, a
whole JoinGroup / SyncGroup / Heartbeat / LeaveGroup cycle by hand (v0 and later versions), and
malformed group requests that close only their own connection.

Hand-made requests (kafka_wire.py) so that no client library retries or hides an error code.
"""

import socket
import time

import pytest

import kafka_wire as kw
from compat_util import create_topic

GROUP_SETTINGS = {"group.initial.rebalance.delay.ms": 0}
IO_TIMEOUT_S = 30
# What join_alone() and the heartbeat helpers use.
BASIC = [(kw.API_JOIN_GROUP, 1), (kw.API_SYNC_GROUP, 0), (kw.API_HEARTBEAT, 0),
         (kw.API_LEAVE_GROUP, 0)]


def advertised(bootstrap):
    """{api key: (min, max)} from ApiVersions v0."""
    with kw.connect(bootstrap) as s:
        s.sendall(kw.api_versions_v0(1))
        _corr, err, keys = kw.parse_api_versions_v0(kw.read_frame(s))
    assert err == 0
    return keys


def require_versions(bootstrap, wanted):
    """Fails (with the advertised table) unless every (api key, version) in `wanted` is listed."""
    keys = advertised(bootstrap)
    missing = [(k, v) for k, v in wanted if k not in keys or not keys[k][0] <= v <= keys[k][1]]
    assert not missing, f"ApiVersions lacks (api key, version) {missing}; advertised {keys}"


class Conn:
    """One connection with its own correlation ids; typed helpers for the group APIs."""

    def __init__(self, bootstrap):
        self.sock = kw.connect(bootstrap, timeout=IO_TIMEOUT_S)
        self.corr = 100

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def next_corr(self):
        self.corr += 1
        return self.corr

    def send(self, frame_bytes):
        self.sock.sendall(frame_bytes)

    def recv(self):
        return kw.read_frame(self.sock)

    def join_send(self, version, group, member_id="", **kw_args):
        corr = self.next_corr()
        self.send(kw.join_group(corr, version, group, member_id, **kw_args))
        return corr

    def join_recv(self, version, corr):
        res = kw.parse_join_group(self.recv(), version)
        assert res["corr"] == corr
        return res

    def join(self, version, group, member_id="", **kw_args):
        return self.join_recv(version, self.join_send(version, group, member_id, **kw_args))

    def sync_send(self, version, group, generation, member_id, assignments=(), **kw_args):
        corr = self.next_corr()
        self.send(kw.sync_group(corr, version, group, generation, member_id, assignments,
                                **kw_args))
        return corr

    def sync_recv(self, version, corr):
        got_corr, err, assignment = kw.parse_sync_group(self.recv(), version)
        assert got_corr == corr
        return err, assignment

    def sync(self, version, group, generation, member_id, assignments=(), **kw_args):
        return self.sync_recv(version, self.sync_send(version, group, generation, member_id,
                                                      assignments, **kw_args))

    def heartbeat(self, version, group, generation, member_id, **kw_args):
        corr = self.next_corr()
        self.send(kw.heartbeat(corr, version, group, generation, member_id, **kw_args))
        got_corr, err = kw.parse_heartbeat(self.recv(), version)
        assert got_corr == corr
        return err

    def leave(self, version, group, member_id):
        corr = self.next_corr()
        self.send(kw.leave_group(corr, version, group, member_id))
        got_corr, err = kw.parse_leave_group(self.recv(), version)
        assert got_corr == corr
        return err

    def find_coordinator(self, group):
        corr = self.next_corr()
        self.send(kw.find_coordinator_v0(corr, group))
        got_corr, err, node, host, port = kw.parse_find_coordinator_v0(self.recv())
        assert got_corr == corr
        return err, node, host, port

    def offset_commit(self, group, generation, member_id, offsets):
        corr = self.next_corr()
        self.send(kw.offset_commit_v2(corr, group, generation, member_id, offsets))
        got_corr, res = kw.parse_offset_commit_v2(self.recv())
        assert got_corr == corr
        return res

    def offset_fetch(self, group, partitions):
        corr = self.next_corr()
        self.send(kw.offset_fetch_v1(corr, group, partitions))
        got_corr, res = kw.parse_offset_fetch_v1(self.recv())
        assert got_corr == corr
        return res

    def describe(self, groups):
        corr = self.next_corr()
        self.send(kw.describe_groups_v0(corr, groups))
        got_corr, res = kw.parse_describe_groups_v0(self.recv())
        assert got_corr == corr
        return res

    def list_groups(self):
        corr = self.next_corr()
        self.send(kw.list_groups_v0(corr))
        got_corr, err, groups = kw.parse_list_groups_v0(self.recv())
        assert got_corr == corr
        return err, groups

    def offset_delete(self, group, partitions):
        corr = self.next_corr()
        self.send(kw.offset_delete_v0(corr, group, partitions))
        got_corr, err, res = kw.parse_offset_delete_v0(self.recv())
        assert got_corr == corr
        return err, res

    def delete_groups(self, groups):
        corr = self.next_corr()
        self.send(kw.delete_groups_v0(corr, groups))
        got_corr, res = kw.parse_delete_groups_v0(self.recv())
        assert got_corr == corr
        return res


def join_alone(conn, version, group, topics=("t",), **kw_args):
    """A single member joins and syncs (as leader it assigns itself everything it asked for).
    Handles MEMBER_ID_REQUIRED (v4+). Returns (member id, generation)."""
    res = conn.join(version, group, "", topics=topics, **kw_args)
    if res["error"] == kw.MEMBER_ID_REQUIRED:
        res = conn.join(version, group, res["member_id"], topics=topics, **kw_args)
    assert res["error"] == 0, res
    assert res["leader"] == res["member_id"], res
    member, generation = res["member_id"], res["generation"]
    assignment = kw.consumer_assignment({t: [0] for t in topics})
    err, got = conn.sync(0, group, generation, member, [(member, assignment)])
    assert err == 0
    assert kw.parse_consumer_assignment(got) == {t: [0] for t in topics}
    return member, generation


def wait_heartbeat_error(conn, group, generation, member, wanted, allowed=(0,),
                         timeout=IO_TIMEOUT_S):
    """Heartbeats every 100 ms until one answers `wanted`; every answer before must be in
    `allowed`."""
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        err = conn.heartbeat(0, group, generation, member)
        if err == wanted:
            return
        seen.append(err)
        assert err in allowed, f"heartbeat answered {err} (before: {seen[:-1][-5:]})"
        time.sleep(0.1)
    raise AssertionError(f"no heartbeat answered {wanted} within {timeout} s: {seen[-5:]}")


# Kafka creates `__consumer_offsets` on the first FindCoordinator and loads its 50 partitions;
# until then FindCoordinator answers COORDINATOR_NOT_AVAILABLE and group requests
# NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS, and clients retry. Sluice creates it at
# once and loads each partition when it becomes its leader (COORDINATOR_LOAD_IN_PROGRESS until
# then, briefly: the partitions are empty).
COORDINATOR_NOT_READY = (14, 15, 16)
READY_PROBE_GROUPS = 64  # distinct names hash onto (nearly) every offsets partition


@pytest.fixture(autouse=True)
def coordinator_ready(broker):
    """Waits, as a client would, until every group's coordinator answers: FindCoordinator
    without error and an OffsetFetch without a not-ready code for many group names."""
    deadline = time.monotonic() + 60
    with Conn(broker.bootstrap) as c:
        for i in range(READY_PROBE_GROUPS):
            group = f"ready-probe-{i}"
            while True:
                err = c.find_coordinator(group)[0]
                if err == 0:
                    res = c.offset_fetch(group, {"t": [0]})
                    if all(e not in COORDINATOR_NOT_READY for (_off, _meta, e) in res.values()):
                        break
                assert time.monotonic() < deadline, f"no group coordinator for {group}"
                time.sleep(0.2)
    yield


# ---- coordinator lookup and a whole cycle --------------------------------------------------------


@pytest.mark.sluice(settings=GROUP_SETTINGS)
@pytest.mark.timeout(60)
def test_find_coordinator_names_this_broker(broker):
    require_versions(broker.bootstrap, [(kw.API_FIND_COORDINATOR, 0)])
    with Conn(broker.bootstrap) as c:
        for group in ("wire-fc", "another group", "x" * 200):
            err, node, host, port = c.find_coordinator(group)
            assert err == 0, group
            assert (host, port) == ("127.0.0.1", broker.port), (node, host, port)
            assert node >= 0


@pytest.mark.sluice(settings=GROUP_SETTINGS)
@pytest.mark.timeout(60)
def test_join_group_v0_cycle(broker):
    """JoinGroup v0 has no rebalance timeout (the session timeout stands in): join, sync,
    heartbeat, commit, leave; the group is then Empty and keeps its offsets."""
    require_versions(broker.bootstrap, [(kw.API_JOIN_GROUP, 0), (kw.API_SYNC_GROUP, 0),
                                        (kw.API_HEARTBEAT, 0), (kw.API_LEAVE_GROUP, 0),
                                        (kw.API_OFFSET_COMMIT, 2), (kw.API_OFFSET_FETCH, 1),
                                        (kw.API_DESCRIBE_GROUPS, 0)])
    topic, group = "wire-v0", "wire-v0-group"
    create_topic(broker.bootstrap, topic, 1)
    with Conn(broker.bootstrap) as c:
        res = c.join(0, group, "", session_timeout_ms=10000, topics=(topic,))
        assert res["error"] == 0, res
        member = res["member_id"]
        assert member, res
        assert res["leader"] == member and res["protocol"] == "range", res
        assert res["generation"] >= 1
        assert [m[0] for m in res["members"]] == [member]  # the leader gets the member list
        assert res["members"][0][2] == kw.consumer_subscription([topic])  # metadata verbatim
        gen = res["generation"]

        assignment = kw.consumer_assignment({topic: [0]})
        err, got = c.sync(0, group, gen, member, [(member, assignment)])
        assert err == 0
        assert got == assignment  # the assignment comes back as the leader sent it
        assert c.heartbeat(0, group, gen, member) == 0

        desc = c.describe([group])[group]
        assert desc["error"] == 0
        assert desc["state"] == "Stable" and desc["protocol_type"] == "consumer", desc
        assert desc["protocol"] == "range"
        assert [m[0] for m in desc["members"]] == [member]
        assert desc["members"][0][4] == assignment

        assert c.offset_commit(group, gen, member, {topic: [(0, 42, "meta")]}) == {(topic, 0): 0}
        assert c.offset_fetch(group, {topic: [0]}) == {(topic, 0): (42, "meta", 0)}
        # A commit with a stale generation is refused and changes nothing.
        assert c.offset_commit(group, gen + 5, member, {topic: [(0, 7, "")]}) == \
            {(topic, 0): kw.ILLEGAL_GENERATION}
        assert c.offset_fetch(group, {topic: [0]})[(topic, 0)][0] == 42

        assert c.leave(0, group, member) == 0
        desc = c.describe([group])[group]
        assert desc["state"] == "Empty" and desc["members"] == [], desc
        # After leaving, the old member id is unknown.
        assert c.heartbeat(0, group, gen, member) in (kw.UNKNOWN_MEMBER_ID, kw.ILLEGAL_GENERATION)
        assert c.offset_fetch(group, {topic: [0]}) == {(topic, 0): (42, "meta", 0)}
        err, groups = c.list_groups()
        assert err == 0 and group in groups, groups


@pytest.mark.sluice(settings=GROUP_SETTINGS)
@pytest.mark.timeout(60)
def test_join_group_v4_member_id_required(broker):
    """KIP-394: JoinGroup v4 with an empty member id answers MEMBER_ID_REQUIRED with a member id;
    joining again with that id succeeds and keeps it."""
    require_versions(broker.bootstrap, [(kw.API_JOIN_GROUP, 4), (kw.API_SYNC_GROUP, 2),
                                        (kw.API_HEARTBEAT, 2)])
    group = "wire-v4-group"
    with Conn(broker.bootstrap) as c:
        first = c.join(4, group, "")
        assert first["error"] == kw.MEMBER_ID_REQUIRED, first
        assert first["member_id"], f"MEMBER_ID_REQUIRED without a member id: {first}"
        assert first["generation"] == -1, first

        second = c.join(4, group, first["member_id"])
        assert second["error"] == 0, second
        assert second["member_id"] == first["member_id"]
        assert second["leader"] == first["member_id"]
        assert second["generation"] >= 1
        assert second["protocol"] == "range"

        err, _ = c.sync(2, group, second["generation"], second["member_id"],
                        [(second["member_id"], kw.consumer_assignment({"t": [0]}))])
        assert err == 0
        assert c.heartbeat(2, group, second["generation"], second["member_id"]) == 0


@pytest.mark.sluice(settings=GROUP_SETTINGS)
@pytest.mark.timeout(60)
def test_join_group_v5_static_member_needs_no_member_id(broker):
    """KIP-345: a static member (group.instance.id) joins with an empty member id at once;
    a second join with the same instance id replaces it and the old member id is fenced."""
    require_versions(broker.bootstrap, [(kw.API_JOIN_GROUP, 5), (kw.API_SYNC_GROUP, 3),
                                        (kw.API_HEARTBEAT, 3)])
    group = "wire-v5-group"
    with Conn(broker.bootstrap) as c:
        res = c.join(5, group, "", group_instance_id="instance-1")
        assert res["error"] == 0, res
        old = res["member_id"]
        gen = res["generation"]
        assert [(m[0], m[1]) for m in res["members"]] == [(old, "instance-1")]
        err, _ = c.sync(3, group, gen, old, [(old, kw.consumer_assignment({"t": [0]}))],
                        group_instance_id="instance-1")
        assert err == 0

        # The same instance comes back (e.g. restarted) with no member id.
        again = c.join(5, group, "", group_instance_id="instance-1")
        assert again["error"] == 0, again
        new = again["member_id"]
        assert new and new != old
        # The group was Stable and the member's protocols are unchanged: no rebalance.
        assert again["generation"] == gen, again
        err, got = c.sync(3, group, again["generation"], new, group_instance_id="instance-1") \
            if again["leader"] != new else \
            c.sync(3, group, again["generation"], new,
                   [(new, kw.consumer_assignment({"t": [0]}))], group_instance_id="instance-1")
        assert err == 0
        assert kw.parse_consumer_assignment(got) == {"t": [0]}
        assert c.heartbeat(3, group, again["generation"], new,
                           group_instance_id="instance-1") == 0
        # The replaced member id is fenced: FENCED_INSTANCE_ID (82).
        assert c.heartbeat(3, group, again["generation"], old,
                           group_instance_id="instance-1") == 82


# ---- coordinator error codes -------------------------------------------------------------------


@pytest.mark.sluice(settings=GROUP_SETTINGS)
@pytest.mark.timeout(60)
def test_heartbeat_unknown_member(broker):
    require_versions(broker.bootstrap, BASIC)
    group = "wire-hb-unknown"
    with Conn(broker.bootstrap) as c:
        member, gen = join_alone(c, 1, group)
        assert c.heartbeat(0, group, gen, member) == 0
        assert c.heartbeat(0, group, gen, "no-such-member") == kw.UNKNOWN_MEMBER_ID
        assert c.heartbeat(0, group, gen, "") == kw.UNKNOWN_MEMBER_ID
        # A member with the wrong generation: ILLEGAL_GENERATION.
        assert c.heartbeat(0, group, gen + 1, member) == kw.ILLEGAL_GENERATION
        # The real member is unaffected.
        assert c.heartbeat(0, group, gen, member) == 0


@pytest.mark.sluice(settings=GROUP_SETTINGS)
@pytest.mark.timeout(60)
def test_join_group_invalid_session_timeout(broker):
    """Session timeouts outside [group.min.session.timeout.ms, group.max.session.timeout.ms]
    (defaults 6000 and 1800000) are refused with INVALID_SESSION_TIMEOUT."""
    require_versions(broker.bootstrap, [(kw.API_JOIN_GROUP, 1)])
    with Conn(broker.bootstrap) as c:
        for timeout in (5999, 1800001):
            res = c.join(1, "wire-session-timeout", "", session_timeout_ms=timeout)
            assert res["error"] == kw.INVALID_SESSION_TIMEOUT, (timeout, res)
        res = c.join(1, "wire-session-timeout", "", session_timeout_ms=6000)
        assert res["error"] == 0, res


@pytest.mark.sluice(settings=GROUP_SETTINGS)
@pytest.mark.timeout(60)
def test_join_group_inconsistent_protocol(broker):
    """A member whose protocols share none with the group's members is refused."""
    require_versions(broker.bootstrap, BASIC)
    group = "wire-inconsistent"
    with Conn(broker.bootstrap) as a, Conn(broker.bootstrap) as b:
        join_alone(a, 1, group)
        res = b.join(1, group, "", protocols=[("roundrobin", kw.consumer_subscription(["t"]))])
        assert res["error"] == kw.INCONSISTENT_GROUP_PROTOCOL, res
        res = b.join(1, group, "", protocol_type="connect")
        assert res["error"] == kw.INCONSISTENT_GROUP_PROTOCOL, res


def two_generations(broker, group, version=1):
    """Member A joins alone (generation g1) and syncs; member B joins, which starts a rebalance
    (A's heartbeat then answers REBALANCE_IN_PROGRESS); A rejoins and both get generation g2.
    Returns (conns, a, b, g1, join results of A and B in g2); nobody has synced g2 yet."""
    ca, cb = Conn(broker.bootstrap), Conn(broker.bootstrap)
    a, g1 = join_alone(ca, version, group)
    corr_b = cb.join_send(version, group, "")  # waits in the coordinator for A to rejoin
    wait_heartbeat_error(ca, group, g1, a, kw.REBALANCE_IN_PROGRESS)
    ja = ca.join(version, group, a)
    jb = cb.join_recv(version, corr_b)
    assert ja["error"] == 0 and jb["error"] == 0, (ja, jb)
    assert ja["generation"] == jb["generation"] > g1, (ja, jb)
    assert ja["member_id"] == a and jb["member_id"] not in ("", a)
    assert ja["leader"] == jb["leader"] == a, "the old leader rejoined: it stays the leader"
    assert sorted(m[0] for m in ja["members"]) == sorted([a, jb["member_id"]])
    assert jb["members"] == [], "only the leader gets the member list"
    return (ca, cb), a, jb["member_id"], g1, ja["generation"]


@pytest.mark.sluice(settings=GROUP_SETTINGS)
@pytest.mark.timeout(90)
def test_heartbeat_during_rebalance_and_stale_sync(broker):
    """Heartbeat while the group rebalances: REBALANCE_IN_PROGRESS. SyncGroup with the previous
    generation: ILLEGAL_GENERATION. Then the new generation completes normally."""
    require_versions(broker.bootstrap, BASIC)
    group = "wire-rebalance"
    (ca, cb), a, b, g1, g2 = two_generations(broker, group)
    try:
        # CompletingRebalance: heartbeats with the new generation are fine (Kafka answers NONE
        # while it waits for the leader's SyncGroup); the old generation is stale.
        assert ca.heartbeat(0, group, g1, a) == kw.ILLEGAL_GENERATION
        err, _ = ca.sync(0, group, g1, a, [(a, kw.consumer_assignment({"t": [0]}))])
        assert err == kw.ILLEGAL_GENERATION
        err, _ = cb.sync(0, group, g1, b)
        assert err == kw.ILLEGAL_GENERATION

        # B's SyncGroup waits for the leader's; then both get their share.
        corr_b = cb.sync_send(0, group, g2, b)
        assignments = [(a, kw.consumer_assignment({"t": [0]})),
                       (b, kw.consumer_assignment({"t": [1]}))]
        err, got_a = ca.sync(0, group, g2, a, assignments)
        assert err == 0 and kw.parse_consumer_assignment(got_a) == {"t": [0]}
        err, got_b = cb.sync_recv(0, corr_b)
        assert err == 0 and kw.parse_consumer_assignment(got_b) == {"t": [1]}

        assert ca.heartbeat(0, group, g2, a) == 0
        assert cb.heartbeat(0, group, g2, b) == 0
        assert ca.heartbeat(0, group, g1, a) == kw.ILLEGAL_GENERATION
        # A stale SyncGroup on a Stable group is refused too.
        err, _ = cb.sync(0, group, g1, b)
        assert err == kw.ILLEGAL_GENERATION

        # B leaves: A learns of the rebalance from its next heartbeat.
        assert cb.leave(0, group, b) == 0
        assert ca.heartbeat(0, group, g2, a) == kw.REBALANCE_IN_PROGRESS
        ja = ca.join(1, group, a)
        assert ja["error"] == 0 and ja["generation"] > g2
        assert [m[0] for m in ja["members"]] == [a]
    finally:
        ca.close()
        cb.close()


@pytest.mark.sluice(settings=GROUP_SETTINGS)
@pytest.mark.timeout(60)
def test_sync_group_unknown_member_and_leave_unknown(broker):
    require_versions(broker.bootstrap, BASIC)
    group = "wire-sync-unknown"
    with Conn(broker.bootstrap) as c:
        member, gen = join_alone(c, 1, group)
        err, _ = c.sync(0, group, gen, "stranger")
        assert err == kw.UNKNOWN_MEMBER_ID
        assert c.leave(0, group, "stranger") == kw.UNKNOWN_MEMBER_ID
        assert c.heartbeat(0, group, gen, member) == 0


# ---- offsets -------------------------------------------------------------------------------------


@pytest.mark.sluice(settings=GROUP_SETTINGS)
@pytest.mark.timeout(60)
def test_offset_fetch_unknown_group_and_partition(broker):
    """OffsetFetch of a group that never existed, or of a partition without a commit: offset
    -1, no error (per partition)."""
    require_versions(broker.bootstrap, [(kw.API_OFFSET_FETCH, 1), (kw.API_OFFSET_COMMIT, 2)])
    topic = "wire-fetch-unknown"
    create_topic(broker.bootstrap, topic, 2)
    with Conn(broker.bootstrap) as c:
        res = c.offset_fetch("never-seen-group", {topic: [0, 1]})
        assert res == {(topic, 0): (-1, "", 0), (topic, 1): (-1, "", 0)} or \
            res == {(topic, 0): (-1, None, 0), (topic, 1): (-1, None, 0)}, res
        # A simple (generation -1, no member) commit creates the group with offsets only.
        assert c.offset_commit("simple-group", -1, "", {topic: [(0, 5, "")]}) == {(topic, 0): 0}
        res = c.offset_fetch("simple-group", {topic: [0, 1]})
        assert res[(topic, 0)][0] == 5 and res[(topic, 0)][2] == 0, res
        assert res[(topic, 1)][0] == -1 and res[(topic, 1)][2] == 0, res


@pytest.mark.sluice(settings=GROUP_SETTINGS)
@pytest.mark.timeout(60)
def test_offset_delete(broker):
    """OffsetDelete (KIP-496): refused per partition while a member is subscribed to the topic
    (GROUP_SUBSCRIBED_TO_TOPIC); allowed on an Empty group; GROUP_ID_NOT_FOUND for no group."""
    require_versions(broker.bootstrap, BASIC + [(kw.API_OFFSET_DELETE, 0),
                                                (kw.API_OFFSET_COMMIT, 2),
                                                (kw.API_OFFSET_FETCH, 1)])
    topic, other, group = "wire-offset-delete", "wire-offset-delete-other", "wire-od-group"
    create_topic(broker.bootstrap, topic, 2)
    create_topic(broker.bootstrap, other, 1)
    with Conn(broker.bootstrap) as c:
        member, gen = join_alone(c, 1, group, topics=(topic,))
        assert c.offset_commit(group, gen, member, {topic: [(0, 10, ""), (1, 11, "")]}) == \
            {(topic, 0): 0, (topic, 1): 0}
        assert c.offset_commit(group, gen, member, {other: [(0, 12, "")]}) == {(other, 0): 0}

        err, res = c.offset_delete(group, {topic: [0]})
        assert err == 0 and res == {(topic, 0): kw.GROUP_SUBSCRIBED_TO_TOPIC}, (err, res)
        # `other` is not subscribed by any member: its offsets may go.
        err, res = c.offset_delete(group, {other: [0]})
        assert err == 0 and res == {(other, 0): 0}, (err, res)
        assert c.offset_fetch(group, {other: [0]})[(other, 0)][0] == -1

        assert c.leave(0, group, member) == 0  # now Empty
        err, res = c.offset_delete(group, {topic: [0]})
        assert err == 0 and res == {(topic, 0): 0}, (err, res)
        got = c.offset_fetch(group, {topic: [0, 1]})
        assert got[(topic, 0)][0] == -1 and got[(topic, 1)][0] == 11, got

        err, _ = c.offset_delete("wire-od-no-such-group", {topic: [0]})
        assert err == kw.GROUP_ID_NOT_FOUND


@pytest.mark.sluice(settings=GROUP_SETTINGS)
@pytest.mark.timeout(60)
def test_delete_groups(broker):
    """DeleteGroups: NON_EMPTY_GROUP while a member is in; GROUP_ID_NOT_FOUND for no group;
    an Empty group is deleted with its offsets."""
    require_versions(broker.bootstrap, BASIC + [(kw.API_DELETE_GROUPS, 0),
                                                (kw.API_OFFSET_COMMIT, 2),
                                                (kw.API_OFFSET_FETCH, 1), (kw.API_LIST_GROUPS, 0)])
    topic, group = "wire-delete-groups", "wire-dg-group"
    create_topic(broker.bootstrap, topic, 1)
    with Conn(broker.bootstrap) as c:
        member, gen = join_alone(c, 1, group, topics=(topic,))
        assert c.offset_commit(group, gen, member, {topic: [(0, 3, "")]}) == {(topic, 0): 0}
        assert c.delete_groups([group, "wire-dg-missing"]) == \
            {group: kw.NON_EMPTY_GROUP, "wire-dg-missing": kw.GROUP_ID_NOT_FOUND}
        assert c.leave(0, group, member) == 0
        assert c.delete_groups([group]) == {group: 0}
        assert c.offset_fetch(group, {topic: [0]})[(topic, 0)][0] == -1
        err, groups = c.list_groups()
        assert err == 0 and group not in groups, groups


# ---- malformed group requests --------------------------------------------------------------------


def check_api_versions(sock, correlation_id):
    sock.sendall(kw.api_versions_v0(correlation_id))
    corr, err, _keys = kw.parse_api_versions_v0(kw.read_frame(sock))
    assert (corr, err) == (correlation_id, 0)


def assert_closed(sock, timeout=15):
    """The broker closes `sock` within `timeout` (bytes before the close are allowed)."""
    sock.settimeout(timeout)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if not sock.recv(65536):
                return
    except ConnectionResetError:
        return
    except socket.timeout:
        pass
    pytest.fail(f"broker did not close the connection within {timeout} s")


def truncated(frame_bytes, cut):
    """`frame_bytes` with the last `cut` bytes of its payload dropped, size prefix fixed."""
    payload = frame_bytes[4:-cut]
    return kw.frame(payload)


def huge_array(frame_bytes, at, count=0x7FFFFFF0):
    """`frame_bytes` with the i32 at payload offset `at` replaced by a huge array length."""
    payload = bytearray(frame_bytes[4:])
    payload[at:at + 4] = kw.i32(count)
    return kw.frame(bytes(payload))


def _hdr_len(client_id="sluice-compat"):
    return 2 + 2 + 4 + 2 + len(client_id)


BAD_FRAMES = {
    "join_group_v1_truncated": lambda: truncated(kw.join_group(7, 1, "g", ""), 9),
    "join_group_v0_no_protocols": lambda: truncated(kw.join_group(7, 0, "g", ""), 40),
    "join_group_v1_huge_protocols": lambda: huge_array(
        kw.join_group(7, 1, "g", "", protocols=[]),
        _hdr_len() + 3 + 4 + 4 + 2 + 10),  # group, timeouts, member id, "consumer"
    "sync_group_v0_truncated": lambda: truncated(
        kw.sync_group(7, 0, "g", 1, "m", [("m", b"\x00" * 20)]), 12),
    "sync_group_v0_huge_assignments": lambda: huge_array(
        kw.sync_group(7, 0, "g", 1, "m"), _hdr_len() + 3 + 4 + 3),
    "heartbeat_v0_truncated": lambda: truncated(kw.heartbeat(7, 0, "g", 1, "member"), 3),
    "leave_group_v0_truncated": lambda: truncated(kw.leave_group(7, 0, "g", "member"), 4),
    "offset_commit_v2_truncated": lambda: truncated(
        kw.offset_commit_v2(7, "g", 1, "m", {"t": [(0, 5, "meta")]}), 7),
    "offset_commit_v2_huge_partitions": lambda: huge_array(
        kw.offset_commit_v2(7, "g", -1, "", {"t": []}), _hdr_len() + 3 + 4 + 2 + 8 + 4 + 3),
    "offset_fetch_v1_truncated": lambda: truncated(kw.offset_fetch_v1(7, "g", {"t": [0, 1]}), 2),
    "find_coordinator_v0_truncated": lambda: truncated(kw.find_coordinator_v0(7, "group"), 2),
    "describe_groups_v0_huge": lambda: huge_array(kw.describe_groups_v0(7, []), _hdr_len()),
    "delete_groups_v0_truncated": lambda: truncated(kw.delete_groups_v0(7, ["abc"]), 1),
    "offset_delete_v0_truncated": lambda: truncated(kw.offset_delete_v0(7, "g", {"t": [0]}), 3),
}


@pytest.mark.sluice(settings=GROUP_SETTINGS)
@pytest.mark.timeout(120)
def test_malformed_group_requests_close_only_their_connection(broker):
    """Each malformed group request closes its own connection (as Kafka does on a request it
    cannot parse); a connection opened before, in the middle of a group session, and a fresh
    one keep working; the group is unharmed."""
    require_versions(broker.bootstrap, BASIC + [(kw.API_FIND_COORDINATOR, 0),
                                                (kw.API_DESCRIBE_GROUPS, 0)])
    group = "wire-garbage-survivor"
    with Conn(broker.bootstrap) as witness:
        check_api_versions(witness.sock, 1)
        member, gen = join_alone(witness, 1, group)
        for name, make in BAD_FRAMES.items():
            with kw.connect(broker.bootstrap) as s:
                s.sendall(make())
                try:
                    assert_closed(s)
                except BaseException as e:
                    raise AssertionError(f"{name}: {e}") from None
            assert broker.alive(), f"broker died after {name} (status {broker.proc.returncode})"
            assert witness.heartbeat(0, group, gen, member) == 0, name
        check_api_versions(witness.sock, 2)
        with Conn(broker.bootstrap) as fresh:
            err, _node, _host, port = fresh.find_coordinator(group)
            assert (err, port) == (0, broker.port)
            desc = fresh.describe([group])[group]
            assert desc["state"] == "Stable" and [m[0] for m in desc["members"]] == [member]


@pytest.mark.sluice(settings=GROUP_SETTINGS)
@pytest.mark.timeout(60)
def test_connection_closed_during_join_leaves_the_group_usable(broker):
    """A client that drops its connection while its JoinGroup waits does not wedge the group:
    once the rebalance times out the other member gets a new generation."""
    require_versions(broker.bootstrap, BASIC)
    group = "wire-join-drop"
    with Conn(broker.bootstrap) as a:
        # Session and rebalance timeouts at the minimum: a dropped joiner is expired fast.
        member, g1 = join_alone(a, 1, group, session_timeout_ms=6000, rebalance_timeout_ms=6000)
        b = Conn(broker.bootstrap)
        b.join_send(1, group, "", session_timeout_ms=6000, rebalance_timeout_ms=6000)
        wait_heartbeat_error(a, group, g1, member, kw.REBALANCE_IN_PROGRESS)
        b.close()
        # A rejoins: the coordinator completes the join with whoever is there. B's join either
        # completes in this generation (its member then expires later) or is dropped; A in any
        # case gets a newer generation within the rebalance timeout.
        res = a.join(1, group, member, session_timeout_ms=6000, rebalance_timeout_ms=6000)
        assert res["error"] == 0, res
        assert res["generation"] > g1


@pytest.mark.sluice(settings=GROUP_SETTINGS)
@pytest.mark.timeout(60)
def test_group_requests_pipelined_on_one_connection(broker):
    """Several group requests written back to back on one connection are answered in order."""
    require_versions(broker.bootstrap, [(kw.API_FIND_COORDINATOR, 0), (kw.API_OFFSET_FETCH, 1),
                                        (kw.API_LIST_GROUPS, 0), (kw.API_OFFSET_COMMIT, 2)])
    topic = "wire-pipelined"
    create_topic(broker.bootstrap, topic, 1)
    with kw.connect(broker.bootstrap) as s:
        frames = [kw.find_coordinator_v0(1, "p"),
                  kw.offset_commit_v2(2, "p", -1, "", {topic: [(0, 9, "")]}),
                  kw.offset_fetch_v1(3, "p", {topic: [0]}),
                  kw.list_groups_v0(4)]
        s.sendall(b"".join(frames))
        assert kw.parse_find_coordinator_v0(kw.read_frame(s))[:2] == (1, 0)
        assert kw.parse_offset_commit_v2(kw.read_frame(s)) == (2, {(topic, 0): 0})
        corr, res = kw.parse_offset_fetch_v1(kw.read_frame(s))
        # Kafka handles a connection's requests one at a time: the fetch sees the commit.
        assert corr == 3 and res == {(topic, 0): (9, "", 0)}, \
            f"OffsetFetch behind an acknowledged OffsetCommit of 9 answered {res}"
        corr, err, groups = kw.parse_list_groups_v0(kw.read_frame(s))
        assert (corr, err) == (4, 0) and "p" in groups, groups


@pytest.mark.sluice(settings=GROUP_SETTINGS)
@pytest.mark.timeout(60)
def test_shutdown_answers_a_parked_join(broker):
    """SIGTERM while a JoinGroup waits for another member: the join is answered with
    NOT_COORDINATOR (16), as when Kafka moves a coordinator, and the broker stops cleanly
    within its grace period instead of holding the connection."""
    require_versions(broker.bootstrap, BASIC)
    group = "wire-shutdown"
    a_conn, b_conn = Conn(broker.bootstrap), Conn(broker.bootstrap)
    try:
        a, _ = join_alone(a_conn, 1, group)
        b_corr = b_conn.join_send(1, group, "", topics=("t",))
        # B's join is parked until A rejoins (rebalance timeout: 60 s).
        wait_heartbeat_error(a_conn, group, 1, a, kw.REBALANCE_IN_PROGRESS)
        status, needed_sigkill = broker.stop()
        assert not needed_sigkill and status == broker.clean_exit_status
        res = b_conn.join_recv(1, b_corr)
        assert res["error"] == 16, res  # NOT_COORDINATOR
    finally:
        a_conn.close()
        b_conn.close()
