"""Consumer groups with confluent-kafka (librdkafka): assignment and rebalances (leave, crash,
cooperative-sticky, static membership), commit-after-processing across a rebalance, committed
offsets across restarts, the AdminClient group APIs, and the consumer lag gauge.

Every wait is bounded with a wide margin; no test asserts how long something took.
"""

import json
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import pytest
from confluent_kafka import (OFFSET_INVALID, Consumer, ConsumerGroupState,
                             ConsumerGroupTopicPartitions, KafkaError, KafkaException,
                             TopicPartition)

from compat_util import admin, create_topic, producer, wait_for_topic, wait_until

GROUP_SETTINGS = {"group.initial.rebalance.delay.ms": 0}
PARTITIONS = 6
WAIT_S = 60


class Member:
    """One subscribed confluent-kafka consumer. poll() serves its rebalance callbacks and
    records what they were given; messages are kept in `messages`."""

    def __init__(self, bootstrap, group, topics, name, on_revoke=None, **extra):
        conf = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": name,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 500,
            "max.poll.interval.ms": 30000,  # also the rebalance timeout the member announces
            "reconnect.backoff.max.ms": 1000,
        }
        conf.update(extra)
        self.name = name
        self.revoke_hook = on_revoke  # called with (member, partitions) before they go
        self.assigns = []  # partition lists given to on_assign, in order
        self.revokes = []
        self.losts = []
        self.messages = []
        self.errors = []
        self.closed = True  # until the consumer exists
        self.consumer = Consumer(conf)
        self.closed = False
        self.consumer.subscribe(list(topics), on_assign=self._on_assign,
                                on_revoke=self._on_revoke, on_lost=self._on_lost)

    def _on_assign(self, _consumer, parts):
        self.assigns.append(sorted(p.partition for p in parts))

    def _on_revoke(self, _consumer, parts):
        self.revokes.append(sorted(p.partition for p in parts))
        if self.revoke_hook:
            self.revoke_hook(self, [p.partition for p in parts])

    def _on_lost(self, _consumer, parts):
        self.losts.append(sorted(p.partition for p in parts))

    def poll(self, timeout=0.05):
        msg = self.consumer.poll(timeout)
        if msg is None:
            return None
        if msg.error():
            self.errors.append(msg.error())
            return None
        self.messages.append(msg)
        return msg

    def assignment(self):
        return frozenset(tp.partition for tp in self.consumer.assignment())

    def close(self):
        if not self.closed:
            self.closed = True
            self.consumer.close()

    def __repr__(self):
        return (f"<{self.name} assignment={sorted(self.assignment()) if not self.closed else '-'}"
                f" assigns={self.assigns} revokes={self.revokes} losts={self.losts}"
                f" errors={[str(e) for e in self.errors[-3:]]}>")


def balanced(assignments, partitions=PARTITIONS):
    """Every member has something, no partition twice, all partitions covered."""
    sets = list(assignments)
    union = frozenset().union(*sets)
    return (all(sets) and sum(len(s) for s in sets) == len(union)
            and union == frozenset(range(partitions)))


def poll_until(members, condition, timeout=WAIT_S, what="condition", extra=lambda: ""):
    """Polls `members` in turn until condition() is true; returns its value."""
    deadline = time.monotonic() + timeout
    while True:
        for m in members:
            m.poll(0.05)
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}: "
                                 f"{members} {extra()}")


def wait_balanced(members, timeout=WAIT_S, others=()):
    """Polls `members` (and `others`, whose assignments do not count) until the members'
    assignments are balanced(); returns them."""
    poll_until(list(members) + list(others),
               lambda: balanced(m.assignment() for m in members), timeout,
               f"a balanced assignment over {len(members)} members")
    return [m.assignment() for m in members]


def close_all(members):
    for m in members:
        try:
            m.close()
        except Exception:  # noqa: BLE001 - best effort in teardown
            pass


def produce_to(bootstrap, topic, items):
    """`items`: [(partition, key, value)]; waits for every acknowledgement."""
    errors = []
    p = producer(bootstrap)
    for partition, key, value in items:
        p.produce(topic, value=value, key=key, partition=partition,
                  on_delivery=lambda err, _msg: err and errors.append(err))
        p.poll(0)
    assert p.flush(60) == 0, "messages still undelivered after 60 s"
    assert not errors, errors[:3]


# ---- assignment and rebalances -------------------------------------------------------------------




def committed_once_ready(consumer, partitions, timeout=60):
    """consumer.committed(), asked again while the group coordinator is not ready: on a fresh
    Kafka the first OffsetFetch creates __consumer_offsets and librdkafka reports
    NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS instead of retrying."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return consumer.committed(partitions, timeout=30)
        except KafkaException as e:
            code = e.args[0].code()
            if code not in (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                            KafkaError.COORDINATOR_NOT_AVAILABLE) \
                    or time.monotonic() > deadline:
                raise
            time.sleep(0.5)
@pytest.mark.sluice(settings={"group.initial.rebalance.delay.ms": 3000})
@pytest.mark.timeout(120)
def test_initial_rebalance_delay_gathers_the_first_members(broker):
    """With Kafka's default group.initial.rebalance.delay.ms (3 s), a consumer that subscribes
    a second after the first lands in the same first generation: each gets its share once and
    nothing is revoked. (With no delay the first would get all 6 partitions and give half
    back.)"""
    topic, group = "grp-initial-delay", "grp-initial-delay"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    first = Member(broker.bootstrap, group, [topic], "delay-0")
    members = [first]
    try:
        # The second consumer comes a second later, well within the delay.
        until = time.monotonic() + 1.0
        poll_until([first], lambda: time.monotonic() >= until, what="a second to pass")
        members.append(Member(broker.bootstrap, group, [topic], "delay-1"))
        wait_balanced(members)
        for m in members:
            assert len(m.assigns) == 1 and not m.revokes, members
    finally:
        close_all(members)



@pytest.mark.sluice(settings=GROUP_SETTINGS)
@pytest.mark.timeout(120)
def test_three_consumers_split_six_partitions(broker):
    topic, group = "grp-split", "grp-split"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    members = [Member(broker.bootstrap, group, [topic], f"split-{i}") for i in range(3)]
    try:
        final = wait_balanced(members)
        assert sorted(len(a) for a in final) == [2, 2, 2], final
        # Each member's callbacks saw what it holds (eager: on_assign gets the whole set).
        for m, a in zip(members, final):
            assert m.assigns and frozenset(m.assigns[-1]) == a, m
    finally:
        close_all(members)


@pytest.mark.sluice(settings=GROUP_SETTINGS)
@pytest.mark.timeout(120)
def test_closed_consumer_partitions_move_to_the_others(broker):
    """close() sends LeaveGroup: the two others take over its partitions (no session timeout
    needed: the wait is far shorter than session.timeout.ms would allow otherwise)."""
    topic, group = "grp-close", "grp-close"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    members = [Member(broker.bootstrap, group, [topic], f"close-{i}",
                      **{"session.timeout.ms": 45000, "max.poll.interval.ms": 60000})
               for i in range(3)]
    try:
        wait_balanced(members)
        members[2].close()
        # Bounded below the 45 s session timeout: only a LeaveGroup can move them in time.
        final = wait_balanced(members[:2], timeout=30)
        assert sorted(len(a) for a in final) == [3, 3], final
    finally:
        close_all(members)


CHILD_CONSUMER = r"""
import json, sys
from confluent_kafka import Consumer
bootstrap, group, topic = sys.argv[1:4]
c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": "child",
              "enable.auto.commit": False, "auto.offset.reset": "earliest",
              "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000,
              "max.poll.interval.ms": 10000})
def report(kind):
    def cb(consumer, parts):
        print(json.dumps({"event": kind, "partitions": sorted(p.partition for p in parts)}),
              flush=True)
    return cb
c.subscribe([topic], on_assign=report("assign"), on_revoke=report("revoke"))
print(json.dumps({"event": "started"}), flush=True)
while True:
    c.poll(0.2)
"""


def _die_with_parent():
    """In the child before exec: SIGKILL it when pytest dies."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class ChildConsumer:
    """A consumer in another process (so that it can be SIGKILLed); follows its assignment
    from the JSON lines it prints."""

    def __init__(self, bootstrap, group, topic):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CHILD_CONSUMER, bootstrap, group, topic],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            preexec_fn=_die_with_parent)
        self.current = frozenset()
        self.events = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            self.events.append(ev)
            if ev["event"] == "assign":
                self.current = frozenset(ev["partitions"])
            elif ev["event"] == "revoke":
                self.current = frozenset()

    def assignment(self):
        return self.current

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)

    def __repr__(self):
        return f"<child pid={self.proc.pid} rc={self.proc.poll()} events={self.events[-4:]}>"


@pytest.mark.sluice(settings=GROUP_SETTINGS)
@pytest.mark.timeout(150)
def test_sigkilled_consumer_partitions_move_after_session_timeout(broker):
    """A member that dies without LeaveGroup is expired after its session timeout (6 s) and
    the survivors take over its partitions."""
    topic, group = "grp-crash", "grp-crash"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    conf = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000,
            "max.poll.interval.ms": 10000}
    members = []
    child = ChildConsumer(broker.bootstrap, group, topic)
    try:
        members = [Member(broker.bootstrap, group, [topic], f"crash-{i}", **conf)
                   for i in range(2)]
        poll_until(members, lambda: balanced([m.assignment() for m in members]
                                             + [child.assignment()]),
                   WAIT_S, "three balanced members", extra=lambda: repr(child))
        assert child.assignment(), child
        child.kill()
        final = wait_balanced(members)
        assert sorted(len(a) for a in final) == [3, 3], final
    finally:
        child.kill()
        close_all(members)


@pytest.mark.sluice(settings=GROUP_SETTINGS)
@pytest.mark.timeout(180)
def test_commit_after_processing_across_a_rebalance(broker):
    """10,000 records, three consumers that commit synchronously what they processed: every
    third round, and in on_revoke (before the group can move the partitions). One member closes
    midway with processed but uncommitted records (it skips its on_revoke commit).

    Every record is processed; a record is processed again only if it lay at or after its
    partition's last successful commit (never an already committed one); the leaver's
    uncommitted records are processed again by their new owner; at the end every partition's
    committed offset is its end."""
    topic, group = "grp-commit-loop", "grp-commit-loop"
    total = 10_000
    create_topic(broker.bootstrap, topic, PARTITIONS)
    ends = {p: len(range(p, total, PARTITIONS)) for p in range(PARTITIONS)}

    seen = {}  # (partition, offset) -> times processed
    values = set()
    committed = {p: 0 for p in range(PARTITIONS)}
    bad_duplicates = []
    commit_failures = []
    pending = {}  # member name -> {partition: next offset}, processed and not yet committed
    pending_keys = {}  # member name -> {(partition, offset)} behind `pending`
    skip_revoke_commit = set()

    def commit(m, partitions=None):
        mine = pending[m.name]
        parts = [p for p in mine if partitions is None or p in partitions]
        offsets = [TopicPartition(topic, p, mine.pop(p)) for p in parts]
        pending_keys[m.name] = {k for k in pending_keys[m.name] if k[0] not in parts}
        if not offsets:
            return
        try:
            res = m.consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as e:  # e.g. REBALANCE_IN_PROGRESS: processed again later
            commit_failures.append((m.name, str(e)))
            return
        for tp in res:
            if tp.error is None:
                committed[tp.partition] = max(committed[tp.partition], tp.offset)
            else:
                commit_failures.append((m.name, str(tp.error)))

    def on_revoke(m, partitions):
        if m.name in skip_revoke_commit:
            return
        commit(m, partitions)
        # Whatever could not be committed is no longer ours to commit.
        for p in partitions:
            pending[m.name].pop(p, None)
        pending_keys[m.name] = {k for k in pending_keys[m.name] if k[0] not in partitions}

    members = []
    for i in range(3):
        m = Member(broker.bootstrap, group, [topic], f"loop-{i}", on_revoke=on_revoke)
        pending[m.name], pending_keys[m.name] = {}, set()
        members.append(m)

    def process(m, most=100):
        """Up to `most` records, one poll() each: a record never predates a revoke served
        in the same call."""
        done = 0
        while done < most:
            msg = m.consumer.poll(0.05 if done == 0 else 0)
            if msg is None:
                break
            if msg.error():
                m.errors.append(msg.error())
                continue
            key = (msg.partition(), msg.offset())
            if key in seen and msg.offset() < committed[msg.partition()]:
                bad_duplicates.append((m.name, key, committed[msg.partition()]))
            seen[key] = seen.get(key, 0) + 1
            values.add(msg.value())
            mine = pending[m.name]
            mine[msg.partition()] = max(mine.get(msg.partition(), 0), msg.offset() + 1)
            pending_keys[m.name].add(key)
            done += 1
        return done

    try:
        # The group forms on the empty topic; then the records arrive.
        wait_balanced(members)
        produce_to(broker.bootstrap, topic,
                   [(i % PARTITIONS, b"k%05d" % i, b"v%05d" % i) for i in range(total)])

        leaver = members[2]
        left_at = None
        uncommitted_by_leaver = set()
        rounds = 0
        deadline = time.monotonic() + 120
        while len(values) < total and time.monotonic() < deadline:
            rounds += 1
            for m in members:
                if not m.closed:
                    process(m)
                    if rounds % 3 == 0:
                        commit(m)
            if left_at is None and len(values) >= total * 2 // 5:
                assert leaver.assignment(), leaver
                # Leave with work processed but not committed (never committed from now on).
                end = time.monotonic() + 30
                while not pending_keys[leaver.name] and time.monotonic() < end:
                    process(leaver)
                uncommitted_by_leaver = set(pending_keys[leaver.name])
                assert uncommitted_by_leaver, f"setup: {leaver} processed nothing more"
                left_at = len(values)
                skip_revoke_commit.add(leaver.name)
                leaver.close()
        assert left_at is not None and left_at < total, "nobody left midway"
        assert len(values) == total, (f"{len(values)} of {total} records processed within "
                                      f"120 s; members {members}")
        assert values == {b"v%05d" % i for i in range(total)}
        assert not bad_duplicates, (f"{len(bad_duplicates)} committed records delivered again, "
                                    f"e.g. {bad_duplicates[:5]}")
        not_again = sorted(k for k in uncommitted_by_leaver if seen[k] < 2)
        assert not not_again, (f"{len(not_again)} records the leaver processed without "
                               f"committing were not processed again, e.g. {not_again[:5]}")
        # The leaver's partitions moved: the survivors own everything.
        assert balanced([members[0].assignment(), members[1].assignment()]), members
        for m in members[:2]:
            commit(m)
        got = members[0].consumer.committed(
            [TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
        assert {tp.partition: tp.offset for tp in got} == ends, (got, commit_failures[:5])
    finally:
        close_all(members)


@pytest.mark.sluice(settings=GROUP_SETTINGS)
@pytest.mark.timeout(150)
def test_cooperative_sticky_incremental_rebalance(broker):
    """partition.assignment.strategy=cooperative-sticky: two members, then a third. The first
    two keep the partitions they retain (only the moved ones are revoked) and end up disjoint
    and covering with the newcomer."""
    topic, group = "grp-coop", "grp-coop"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    conf = {"partition.assignment.strategy": "cooperative-sticky"}
    members = [Member(broker.bootstrap, group, [topic], f"coop-{i}", **conf) for i in range(2)]
    try:
        before = wait_balanced(members)
        assert sorted(len(a) for a in before) == [3, 3], before
        revokes_before = [len(m.revokes) for m in members]
        assigns_before = [len(m.assigns) for m in members]

        members.append(Member(broker.bootstrap, group, [topic], "coop-2", **conf))
        after = wait_balanced(members)
        assert sorted(len(a) for a in after) == [2, 2, 2], after
        for i in range(2):
            m = members[i]
            assert after[i] <= before[i], f"{m.name}: {sorted(before[i])} -> {sorted(after[i])}"
            revoked = frozenset(p for r in m.revokes[revokes_before[i]:] for p in r)
            # Incremental: only what moved was revoked, never the whole assignment.
            assert revoked == before[i] - after[i], (m, before[i], after[i])
            # Nothing was (re)assigned to the old members in this rebalance.
            assert all(not a for a in m.assigns[assigns_before[i]:]), m
            assert not m.losts, m
        newcomer = members[2]
        assert frozenset(p for a in newcomer.assigns for p in a) == after[2], newcomer
        assert after[2] == (before[0] | before[1]) - after[0] - after[1]
    finally:
        close_all(members)


@pytest.mark.sluice(settings=GROUP_SETTINGS)
@pytest.mark.timeout(120)
def test_two_groups_each_get_every_message(broker):
    topic = "grp-two-groups"
    count = 600
    create_topic(broker.bootstrap, topic, 3)
    produce_to(broker.bootstrap, topic, [(i % 3, None, b"two-%04d" % i) for i in range(count)])
    members = [Member(broker.bootstrap, group, [topic], group)
               for group in ("grp-two-a", "grp-two-b")]
    try:
        def done():
            return all(len({m.value() for m in mem.messages}) == count for mem in members)
        poll_until(members, done, WAIT_S, f"{count} messages in each group")
        expected = {b"two-%04d" % i for i in range(count)}
        for m in members:
            assert {msg.value() for msg in m.messages} == expected, m.name
            assert m.assignment() == frozenset(range(3))
    finally:
        close_all(members)


# ---- committed offsets and restarts --------------------------------------------------------------


def first_message(bootstrap, group, topic, name, timeout=WAIT_S):
    """A new member of `group`: the first record it receives."""
    m = Member(bootstrap, group, [topic], name, **{"socket.timeout.ms": 10000})
    try:
        poll_until([m], lambda: m.messages, timeout, f"a first message for {name}")
        return m.messages[0], m
    except BaseException:
        m.close()
        raise


@pytest.mark.sluice(settings=GROUP_SETTINGS)
@pytest.mark.timeout(200)
def test_committed_offset_survives_restart_and_sigkill(broker):
    """A commit at N: after a clean restart a new member of the group starts at N. A
    synchronous commit acknowledged just before a SIGKILL survives it too."""
    topic, group = "grp-restart", "grp-restart"
    create_topic(broker.bootstrap, topic, 1)
    produce_to(broker.bootstrap, topic, [(0, None, b"r-%03d" % i) for i in range(100)])

    m = Member(broker.bootstrap, group, [topic], "restart-0")
    try:
        poll_until([m], lambda: len(m.messages) >= 37, WAIT_S, "37 messages")
        res = m.consumer.commit(offsets=[TopicPartition(topic, 0, 37)], asynchronous=False)
        assert [(tp.offset, tp.error) for tp in res] == [(37, None)], res
    finally:
        m.close()

    broker.stop()
    broker.start()
    wait_for_topic(broker.bootstrap, topic, 1)

    msg, m = first_message(broker.bootstrap, group, topic, "restart-1")
    try:
        assert (msg.offset(), msg.value()) == (37, b"r-037")
        got = m.consumer.committed([TopicPartition(topic, 0)], timeout=30)
        assert got[0].offset == 37, got
        res = m.consumer.commit(offsets=[TopicPartition(topic, 0, 73)], asynchronous=False)
        assert [(tp.offset, tp.error) for tp in res] == [(73, None)], res
        broker.kill()  # at once: the acknowledged commit must already be durable
        broker.start()
    finally:
        # After the restart (the old member's close needs a broker to leave the group).
        m.close()
    wait_for_topic(broker.bootstrap, topic, 1)

    msg, m = first_message(broker.bootstrap, group, topic, "restart-2")
    try:
        assert (msg.offset(), msg.value()) == (73, b"r-073")
    finally:
        m.close()


@pytest.mark.sluice(settings=GROUP_SETTINGS)
@pytest.mark.timeout(120)
def test_static_member_rejoins_without_rebalance(broker):
    """KIP-345: a static member (group.instance.id) closes without LeaveGroup; a new consumer
    with the same group.instance.id, started within session.timeout.ms, gets the same
    partitions back and the other member is not disturbed (no revoke, no new assignment)."""
    topic, group = "grp-static", "grp-static"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    conf = {"session.timeout.ms": 30000}
    # B first: it becomes the group leader, so A's return is a plain follower's return.
    b = Member(broker.bootstrap, group, [topic], "static-b",
               **{**conf, "group.instance.id": "instance-b"})
    members = [b]
    try:
        poll_until([b], lambda: b.assignment() == frozenset(range(PARTITIONS)), WAIT_S,
                   "B alone holds everything")
        a = Member(broker.bootstrap, group, [topic], "static-a",
                   **{**conf, "group.instance.id": "instance-a"})
        members.append(a)
        a_parts, b_parts = wait_balanced([a, b])
        b_events = (len(b.assigns), len(b.revokes), len(b.losts))

        a.close()  # a static member does not send LeaveGroup
        a2 = Member(broker.bootstrap, group, [topic], "static-a2",
                    **{**conf, "group.instance.id": "instance-a"})
        members.append(a2)
        poll_until([a2, b], lambda: a2.assignment(), WAIT_S, "A's successor's assignment")
        assert a2.assignment() == a_parts, (a_parts, a2)
        # Observe B for a few heartbeat intervals: a rebalance would reach it by now.
        end = time.monotonic() + 3
        while time.monotonic() < end:
            b.poll(0.1)
            a2.poll(0.05)
        assert b.assignment() == b_parts, b
        assert (len(b.assigns), len(b.revokes), len(b.losts)) == b_events, \
            f"B saw a rebalance: {b}"
        assert a2.assignment() == a_parts, a2
    finally:
        close_all(members)


# ---- admin APIs --------------------------------------------------------------------------------


def listed_groups(a):
    """The groups ListGroups lists; asked again while a coordinator is still loading (Kafka
    answers COORDINATOR_LOAD_IN_PROGRESS then, and the Java admin client retries it too)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        res = a.list_consumer_groups(request_timeout=30).result(timeout=60)
        loading = [e for e in res.errors if e.code() == KafkaError.COORDINATOR_LOAD_IN_PROGRESS]
        if not loading or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert not res.errors, res.errors
    return {g.group_id: g for g in res.valid}


@pytest.mark.sluice(settings=GROUP_SETTINGS)
@pytest.mark.timeout(200)
def test_admin_list_describe_offsets_delete(broker):
    topic = "grp-admin"
    active, idle = "grp-admin-active", "grp-admin-idle"
    create_topic(broker.bootstrap, topic, 2)
    produce_to(broker.bootstrap, topic, [(i % 2, None, b"a-%03d" % i) for i in range(40)])

    # `idle`: a member commits 7 and 9, then leaves (Empty with offsets).
    m = Member(broker.bootstrap, idle, [topic], "admin-idle")
    try:
        poll_until([m], lambda: m.assignment() == frozenset({0, 1}), WAIT_S, "assignment")
        m.consumer.commit(offsets=[TopicPartition(topic, 0, 7), TopicPartition(topic, 1, 9)],
                          asynchronous=False)
    finally:
        m.close()
    member = Member(broker.bootstrap, active, [topic], "admin-active")
    try:
        poll_until([member], lambda: member.assignment() == frozenset({0, 1}), WAIT_S,
                   "assignment")
        res = member.consumer.commit(offsets=[TopicPartition(topic, 1, 2)], asynchronous=False)
        assert [(tp.offset, tp.error) for tp in res] == [(2, None)]
        a = admin(broker.bootstrap)

        groups = listed_groups(a)
        assert {active, idle} <= set(groups), groups
        assert groups[active].state == ConsumerGroupState.STABLE, groups[active]
        assert groups[idle].state == ConsumerGroupState.EMPTY, groups[idle]
        assert not groups[active].is_simple_consumer_group

        desc = {g: f.result(timeout=60) for g, f in
                a.describe_consumer_groups([active, idle], request_timeout=30).items()}
        d = desc[active]
        assert d.state == ConsumerGroupState.STABLE
        assert d.partition_assignor in ("range", "roundrobin"), d.partition_assignor
        assert len(d.members) == 1
        (md,) = d.members
        assert md.client_id == "admin-active"
        assert sorted((tp.topic, tp.partition) for tp in md.assignment.topic_partitions) == \
            [(topic, 0), (topic, 1)]
        assert md.host  # the client's address as the broker saw it
        assert d.coordinator.port == broker.port
        assert desc[idle].state == ConsumerGroupState.EMPTY and not desc[idle].members

        def offsets(group):
            fut = a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                                request_timeout=30)[group]
            return {tp.partition: tp.offset for tp in fut.result(timeout=60).topic_partitions
                    if tp.topic == topic}

        assert offsets(idle) == {0: 7, 1: 9}
        # AlterConsumerGroupOffsets (an OffsetCommit without membership) on the Empty group.
        fut = a.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(idle, [TopicPartition(topic, 0, 5)])],
            request_timeout=30)[idle]
        res = fut.result(timeout=60)
        assert [(tp.partition, tp.offset, tp.error) for tp in res.topic_partitions] == \
            [(0, 5, None)], res.topic_partitions
        assert offsets(idle) == {0: 5, 1: 9}

        # Altering the offsets of a group with an active member is refused (UNKNOWN_MEMBER_ID
        # in Kafka: the admin is not a member of the generation).
        fut = a.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(active, [TopicPartition(topic, 0, 1)])],
            request_timeout=30)[active]
        try:
            res = fut.result(timeout=60)
            errors = [tp.error for tp in res.topic_partitions]
        except KafkaException as e:
            errors = [e.args[0]]
        assert all(e is not None for e in errors), errors

        # Deleting a group with a member fails (NON_EMPTY_GROUP); the Empty one goes.
        futs = a.delete_consumer_groups([active, idle], request_timeout=30)
        with pytest.raises(KafkaException) as exc:
            futs[active].result(timeout=60)
        assert exc.value.args[0].code() == KafkaError.NON_EMPTY_GROUP, exc.value
        futs[idle].result(timeout=60)
        assert idle not in listed_groups(a)
        assert offsets(idle) in ({}, {0: OFFSET_INVALID, 1: OFFSET_INVALID})
    finally:
        member.close()

    broker.stop()
    broker.start()
    wait_for_topic(broker.bootstrap, topic, 2)
    a = admin(broker.bootstrap)
    groups = listed_groups(a)
    assert idle not in groups, f"deleted group back after restart: {groups[idle]}"
    # The other group, Empty with offsets since its member left, is still there.
    assert active in groups and groups[active].state == ConsumerGroupState.EMPTY, groups
    # No committed offsets: a new member of the deleted group starts per auto.offset.reset.
    msg, m = first_message(broker.bootstrap, idle, topic, "admin-idle-again")
    try:
        assert msg.offset() == 0, msg.offset()
    finally:
        m.close()


# ---- lag and unknown offsets --------------------------------------------------------------------


def lag_samples(admin_url):
    """{(group, topic, partition): value} of sluice_consumer_group_lag."""
    with urllib.request.urlopen(admin_url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r"^sluice_consumer_group_lag\{(.*)\} (\S+)$", line)
        if m:
            labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(1)))
            out[(labels.get("group"), labels.get("topic"), labels.get("partition"))] = \
                float(m.group(2))
    return out


@pytest.mark.sluice_only("Sluice's consumer-lag metric on its admin HTTP")
@pytest.mark.sluice(settings=GROUP_SETTINGS)
@pytest.mark.timeout(120)
def test_consumer_lag_metric(broker):
    topic, group = "grp-lag", "grp-lag"
    create_topic(broker.bootstrap, topic, 2)
    produce_to(broker.bootstrap, topic, [(0, None, b"lag-%03d" % i) for i in range(100)])
    m = Member(broker.bootstrap, group, [topic], "lag")
    key = (group, topic, "0")
    try:
        poll_until([m], lambda: m.assignment() == frozenset({0, 1}), WAIT_S, "assignment")
        res = m.consumer.commit(offsets=[TopicPartition(topic, 0, 40)], asynchronous=False)
        assert [(tp.offset, tp.error) for tp in res] == [(40, None)]
        last = {}

        def lag_is(value):
            last.update(lag_samples(broker.admin_url))
            return last.get(key) == value

        wait_until(lambda: lag_is(60), 30, 0.2, f"lag 60 for {key} (last scrape {last})")
        # The gauge follows new records and new commits.
        produce_to(broker.bootstrap, topic, [(0, None, b"more-%d" % i) for i in range(5)])
        wait_until(lambda: lag_is(65), 30, 0.2, f"lag 65 for {key} (last scrape {last})")
        m.consumer.commit(offsets=[TopicPartition(topic, 0, 105)], asynchronous=False)
        wait_until(lambda: lag_is(0), 30, 0.2, f"lag 0 for {key} (last scrape {last})")
    finally:
        m.close()


@pytest.mark.sluice(settings=GROUP_SETTINGS)
@pytest.mark.timeout(90)
def test_committed_offset_of_unknown_group_or_partition(broker):
    """OffsetFetch answers -1 (no offset) for a group that never existed and for a partition
    the group never committed; librdkafka shows it as OFFSET_INVALID."""
    topic = "grp-unknown-offsets"
    create_topic(broker.bootstrap, topic, 2)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "grp-never-seen",
                  "enable.auto.commit": False})
    try:
        got = committed_once_ready(c, [TopicPartition(topic, 0), TopicPartition(topic, 1)])
        assert [(tp.partition, tp.offset, tp.error) for tp in got] == \
            [(0, OFFSET_INVALID, None), (1, OFFSET_INVALID, None)], got
    finally:
        c.close()

    # A group that committed partition 0 only; manual assignment (a "simple" group).
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "grp-half-committed",
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        res = c.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=False)
        assert [(tp.offset, tp.error) for tp in res] == [(3, None)]
        got = c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=30)
        assert [(tp.partition, tp.offset) for tp in got] == [(0, 3), (1, OFFSET_INVALID)], got
    finally:
        c.close()


@pytest.mark.sluice(settings=GROUP_SETTINGS)
@pytest.mark.timeout(90)
def test_async_commit_then_committed_reads_it_back(broker):
    """commit(asynchronous=True) then committed(): librdkafka sends the OffsetCommit and then
    the OffsetFetch on its coordinator connection, and Kafka handles a connection's requests one
    after another, so the fetch sees the commit."""
    topic, group = "grp-read-your-commit", "grp-read-your-commit"
    create_topic(broker.bootstrap, topic, 1)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        # Until the coordinator is known librdkafka holds both requests and may send them in
        # either order; one synchronous commit first makes the coordinator connection ready.
        c.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
        stale = []
        for i in range(1, 11):
            c.commit(offsets=[TopicPartition(topic, 0, i)], asynchronous=True)
            got = c.committed([TopicPartition(topic, 0)], timeout=30)[0].offset
            if got != i:
                stale.append((i, got))
        assert not stale, f"committed() after commit(N): (N, answer) {stale}"
    finally:
        c.close()


@pytest.mark.sluice(settings=GROUP_SETTINGS)
@pytest.mark.timeout(90)
@pytest.mark.sluice_only("Kafka without an authorizer lets any client create, grow, "
                         "reconfigure and delete __consumer_offsets; Sluice refuses on purpose")
def test_offsets_topic_is_internal_and_protected(broker):
    """Clients cannot create `__consumer_offsets` with their own settings, nor delete it,
    change its configs or add partitions once the coordinator made it."""
    from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource,
                                       NewPartitions, NewTopic)
    a = admin(broker.bootstrap)
    name = "__consumer_offsets"
    with pytest.raises(KafkaException):
        a.create_topics([NewTopic(name, 3, 1)])[name].result(30)
    # Any group use creates it, the coordinator's way.
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "grp-protect"})
    try:
        assert c.committed([TopicPartition("whatever", 0)], timeout=30)[0].offset == OFFSET_INVALID
    finally:
        c.close()
    md = a.list_topics(timeout=30)
    assert name in md.topics and len(md.topics[name].partitions) == 50
    with pytest.raises(KafkaException):
        a.delete_topics([name])[name].result(30)
    with pytest.raises(KafkaException):
        a.create_partitions([NewPartitions(name, 60)])[name].result(30)
    resource = ConfigResource(ConfigResource.Type.TOPIC, name,
                              incremental_configs=[ConfigEntry("retention.ms", "1000",
                                                               incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException):
        a.incremental_alter_configs([resource])[resource].result(30)
    assert len(a.list_topics(timeout=30).topics[name].partitions) == 50
