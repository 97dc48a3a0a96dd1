"""Separate roles (issue #30 point 2, KIP-631's `process.roles`): a cluster of three
controller-only nodes (1–3, `process.roles=controller`, the voters of the metadata quorum) and
three broker-only nodes (4–6, `process.roles=broker`, observers of the metadata log).

One cluster, checked as a user would with real clients and Kafka's own tools:
1. only the brokers serve clients: Metadata lists brokers 4–6 and names one of them as the
   controller (the active controller is not reachable by clients); a Metadata request sent to
   a controller's listener gets no answer (the connection is closed);
2. `kafka-metadata-quorum.sh describe --status` shows voters 1–3 and observers 4–6, and
   `--replication` lists the observers as `Observer`;
3. an idempotent `acks=all` producer keeps writing to a replication-factor-3 topic while the
   active controller is SIGKILLed: a new leader is elected among the two other controllers, a
   topic created afterwards through the brokers works, and every acknowledged record is read
   back exactly once;
4. the killed controller restarts and rejoins the voters; a SIGKILLed broker-only node
   restarts on its data directory, follows the metadata log again and serves its replicas;
5. the active controller is paused (SIGSTOP) for longer than a broker session: the brokers
   find its successor (none is fenced: a topic of three replicas is created meanwhile) and
   writes go on;
6. a consumer group reads and commits (its coordinator is on a broker-only node);
7. a controller replaced under load (KIP-853, through a broker, which forwards): controller 7
   starts with `controller.quorum.bootstrap.servers` and no voters, `kafka-metadata-quorum.sh
   add-controller` (AddRaftVoter) makes it a voter, `remove-controller` (RemoveRaftVoter)
   removes a controller that is not the active one, which is then SIGKILLed; adding 7 again
   fails with `DuplicateVoterException`, removing the other again with
   `VoterNotFoundException`; an idempotent producer writes throughout and every acknowledged
   record is read back exactly once; 7 is SIGKILLed and restarted, then the active controller
   is SIGKILLed and the two voters left (7 among them) elect a successor that the brokers
   follow; every topic created is still there.

Runs against Apache Kafka 4.4 too (SLUICE_COMPAT_TARGET=kafka: scripts/kafka_ref.py with
controller-only and broker-only nodes). Waits are bounded widely; nothing asserts a
duration."""

import re
import subprocess
import threading
import time

import pytest
from confluent_kafka import TopicPartition

import kafka_wire as kw
from cluster_targets import finish, start_cluster
from compat_util import admin, consume_all, consumer, create_topic, producer, wait_until
from jvm import check_java, run_java

SETTINGS = {"broker.heartbeat.interval.ms": 500, "broker.session.timeout.ms": 2000,
            "group.initial.rebalance.delay.ms": 0}
CONTROLLERS = [1, 2, 3]
BROKERS = [4, 5, 6]
FAILOVER_BOUND_S = 60
QUORUM_TOOL = "org.apache.kafka.tools.MetadataQuorumCommand"


@pytest.fixture
def split(request, tmp_path):
    t = start_cluster(request, tmp_path, len(CONTROLLERS) + len(BROKERS), SETTINGS,
                      controllers=len(CONTROLLERS))
    yield t
    finish(t)


def describe(classpath, bootstrap, what):
    return check_java(run_java(classpath, QUORUM_TOOL,
                               ["--bootstrap-server", bootstrap, "describe", what], timeout=90))


def quorum_ids(out, field):
    """The node ids of `CurrentVoters:` or `CurrentObservers:` in `describe --status`."""
    line = out.split(f"{field}:")[1].split("\n")[0]
    return sorted(int(i) for i in re.findall(r'"id": (\d+)', line))


def leader_of(out):
    return int(re.search(r"LeaderId:\s+(\d+)", out)[1])


def add_controller(classpath, bootstrap, config, node):
    """`kafka-metadata-quorum.sh add-controller` of controller `node` (its properties file
    `config`) through a broker. Kafka adds a controller only once it has fetched the log as an
    observer (REQUEST_TIMED_OUT before), and a quorum just through a failover may answer
    NOT_LEADER_OR_FOLLOWER: both retriable, retried as an operator would, bounded."""
    def added_now():
        run = run_java(classpath, QUORUM_TOOL, ["--bootstrap-server", bootstrap,
                                                "--command-config", config, "add-controller"],
                       timeout=120)
        if run.returncode == 0:
            return run
        assert any(e in run.output for e in ("TimeoutException",
                                             "NotLeaderOrFollowerException")), run.report()
        return None
    check_java(wait_until(added_now, FAILOVER_BOUND_S, interval=1,
                          what=f"add-controller {node}"),
               expect_line=f"Added controller {node}")


def directory_of(classpath, bootstrap, node):
    """Controller `node`'s directory id as `describe --replication` lists it."""
    return next(line.split() for line in describe(classpath, bootstrap, "--replication")
                .splitlines() if line.split()[:1] == [str(node)])[1]


def remove_controller(classpath, bootstrap, node, directory):
    """`kafka-metadata-quorum.sh remove-controller` of controller `node` with its directory id;
    the run (not checked)."""
    return run_java(classpath, QUORUM_TOOL,
                    ["--bootstrap-server", bootstrap, "remove-controller",
                     "--controller-id", node, "--controller-directory-id", directory], timeout=90)


def create_and_write(bootstrap, topic, value):
    """A metadata change and a write after a failover: `topic` (three replicas) created through
    the brokers within the failover bound, `value` written with an idempotent producer and read
    back."""
    create_topic(bootstrap, topic, 1, replication_factor=3, timeout=FAILOVER_BOUND_S)
    p = producer(bootstrap, **{"enable.idempotence": True})
    p.produce(topic, value=value)
    assert p.flush(60) == 0
    got = consume_all(bootstrap, topic, 1, expected=1)
    assert [m.value() for m in got[0]] == [value]


def answers_metadata(address):
    """Whether a Metadata v1 request on `address` gets an answer (else the peer closes)."""
    with kw.connect(address, timeout=30) as s:
        s.sendall(kw.metadata_v1(7))
        try:
            kw.read_frame(s)
        except (ConnectionError, EOFError, AssertionError, OSError):
            return False
    return True


def test_controllers_and_brokers_apart_survive_the_active_controllers_sigkill(split,
                                                                            java_classpath):
    assert (split.controller_ids, split.broker_ids) == (CONTROLLERS, BROKERS)
    bootstrap = split.bootstrap()

    # 1. Only the brokers serve clients.
    md = admin(bootstrap).list_topics(timeout=10)
    assert sorted(md.brokers) == BROKERS, md.brokers
    assert md.controller_id in BROKERS, md.controller_id
    for node in CONTROLLERS:
        assert not answers_metadata(split.controller_address(node)), node
    assert answers_metadata(split.node_bootstrap(BROKERS[0]))

    # 2. Voters and observers, as the leader describes them.
    def status_with_every_observer():
        out = describe(java_classpath, bootstrap, "--status")
        return out if quorum_ids(out, "CurrentObservers") == BROKERS else None

    out = wait_until(status_with_every_observer, FAILOVER_BOUND_S, interval=1,
                     what="observers 4-6 in DescribeQuorum")
    assert quorum_ids(out, "CurrentVoters") == CONTROLLERS, out
    leader = leader_of(out)
    assert leader in CONTROLLERS, out

    def replication_with_every_observer():
        out = describe(java_classpath, bootstrap, "--replication")
        states = {int(r.split()[0]): r.split()[-1]
                  for r in out.splitlines() if re.match(r"\d+\s", r)}
        observers = {n: states.get(n) for n in BROKERS}
        return states if observers == {n: "Observer" for n in BROKERS} else None

    states = wait_until(replication_with_every_observer, FAILOVER_BOUND_S, interval=1,
                        what="observers 4-6 in describe --replication")
    assert states.get(leader) == "Leader", states

    # 3. Writes go on while the active controller is SIGKILLed.
    topic = "roles"
    create_topic(bootstrap, topic, 3, replication_factor=3, config={"min.insync.replicas": "2"})
    acked, failed = [], []
    p = producer(bootstrap, **{"enable.idempotence": True, "message.timeout.ms": 60000})

    def delivered(err, msg):
        (failed if err is not None else acked).append(err or msg.value())

    stop = threading.Event()

    def produce():
        i = 0
        while not stop.is_set():
            p.produce(topic, value=b"%06d" % i, on_delivery=delivered)
            p.poll(0)
            i += 1
            if i % 50 == 0:
                stop.wait(0.02)
        p.flush(90)

    writer = threading.Thread(target=produce)
    writer.start()
    try:
        wait_until(lambda: len(acked) >= 300, FAILOVER_BOUND_S, what="300 records acknowledged")
        split.kill(leader)
        survivors = [c for c in CONTROLLERS if c != leader]

        def new_leader():
            try:
                new = leader_of(describe(java_classpath, bootstrap, "--status"))
            except (subprocess.SubprocessError, AssertionError, pytest.fail.Exception):
                return None
            return new if new in survivors else None

        wait_until(new_leader, FAILOVER_BOUND_S, interval=1, what="a new active controller")
        # A metadata change after the failover, through the brokers.
        create_topic(bootstrap, "roles-after", 1, replication_factor=3)
        at = len(acked)
        wait_until(lambda: len(acked) >= at + 300, FAILOVER_BOUND_S,
                   what="300 more records acknowledged")
    finally:
        stop.set()
        writer.join(120)
    assert not failed, failed[:5]
    got = consume_all(bootstrap, topic, 3, expected=len(acked), timeout=120)
    values = sorted(m.value() for part in got.values() for m in part)
    assert values == sorted(acked), (len(values), len(acked))
    after = producer(bootstrap)
    after.produce("roles-after", value=b"after")
    assert after.flush(60) == 0
    got = consume_all(bootstrap, "roles-after", 1, expected=1)
    assert [m.value() for m in got[0]] == [b"after"]

    # 4. The killed controller rejoins; a SIGKILLed broker-only node comes back with its data.
    split.restart(leader)

    def caught_up():
        out = describe(java_classpath, bootstrap, "--replication")
        rows = {int(r.split()[0]): r.split() for r in out.splitlines() if re.match(r"\d+\s", r)}
        return rows.get(leader, [None] * 4)[3] == "0"

    wait_until(caught_up, FAILOVER_BOUND_S, interval=1, what=f"voter {leader} caught up")
    split.kill(BROKERS[0])
    split.restart(BROKERS[0])
    only = split.node_bootstrap(BROKERS[0])
    md = admin(only).list_topics(timeout=10)
    assert sorted(md.brokers) == BROKERS, md.brokers
    got = consume_all(only, topic, 3, expected=len(acked), timeout=120)
    assert sum(len(v) for v in got.values()) == len(acked)

    # 5. The active controller paused (SIGSTOP) for longer than a broker session: the brokers
    # find its successor in time (none is fenced, so a topic of three replicas can be created)
    # and writes go on; resumed, it follows the new leader.
    paused = leader_of(describe(java_classpath, bootstrap, "--status"))
    split.pause(paused)
    try:
        create_topic(bootstrap, "roles-paused", 1, replication_factor=3,
                     timeout=FAILOVER_BOUND_S)
        during = producer(bootstrap, **{"enable.idempotence": True,
                                         "message.timeout.ms": 60000})
        errors = []
        for i in range(100):
            during.produce("roles-paused", value=b"%d" % i,
                           on_delivery=lambda err, _msg: err and errors.append(err))
        assert during.flush(90) == 0
        assert not errors, errors[:3]
    finally:
        split.resume(paused)
    assert leader_of(describe(java_classpath, bootstrap, "--status")) != paused
    got = consume_all(bootstrap, "roles-paused", 1, expected=100)
    assert sorted(int(m.value()) for m in got[0]) == list(range(100))

    # 6. A consumer group: its coordinator lives on a broker-only node (`__consumer_offsets`
    # gets three replicas, the brokers).
    c = consumer(bootstrap, **{"group.id": "roles-group", "auto.offset.reset": "earliest",
                               "enable.partition.eof": False})
    try:
        c.subscribe(["roles-after"])
        msg = wait_until(lambda: (lambda m: m if m is not None and not m.error() else None)(
            c.poll(1)), FAILOVER_BOUND_S, interval=0, what="a record through the group")
        assert msg.value() == b"after"
        c.commit(message=msg, asynchronous=False)
        committed = c.committed([TopicPartition("roles-after", 0)], timeout=30)
        assert committed[0].offset == msg.offset() + 1, committed
    finally:
        c.close()

    # 7. A controller replaced under load (KIP-853): a new controller joins through
    # controller.quorum.bootstrap.servers, add-controller makes it a voter, remove-controller
    # takes out one that is not the active controller, which is then SIGKILLed; an idempotent
    # producer writes throughout.
    replace_topic = "roles-replace"
    create_topic(bootstrap, replace_topic, 3, replication_factor=3)
    replace_acked, replace_errors = [], []
    stop_writing = threading.Event()

    def write_during_the_change():
        p = producer(bootstrap, **{"enable.idempotence": True, "acks": "all",
                                   "message.timeout.ms": 60000})
        i = 0
        while not stop_writing.is_set():
            p.produce(replace_topic, value=b"r%d" % i,
                      on_delivery=lambda err, msg: (replace_errors if err else replace_acked)
                      .append(err or msg.value()))
            p.poll(0)
            i += 1
            time.sleep(0.005)
        assert p.flush(90) == 0
    writer = threading.Thread(target=write_during_the_change)
    writer.start()
    try:
        added = split.add_controller()
        config = split.command_config(added)
        add_controller(java_classpath, bootstrap, config, added)
        wait_until(lambda: quorum_ids(describe(java_classpath, bootstrap, "--status"),
                                      "CurrentVoters") == sorted(CONTROLLERS + [added]),
                   FAILOVER_BOUND_S, what="the new controller among the voters")
        status = describe(java_classpath, bootstrap, "--status")
        removed = next(i for i in CONTROLLERS if i != leader_of(status))
        directory = directory_of(java_classpath, bootstrap, removed)
        check_java(remove_controller(java_classpath, bootstrap, removed, directory),
                   expect_line=f"Removed KRaft controller {removed}")
        voters = sorted(set(CONTROLLERS + [added]) - {removed})
        wait_until(lambda: quorum_ids(describe(java_classpath, bootstrap, "--status"),
                                      "CurrentVoters") == voters,
                   FAILOVER_BOUND_S, what=f"the voters {voters}")
        split.kill(removed)
        create_topic(bootstrap, "roles-replaced", 1, replication_factor=3,
                     timeout=FAILOVER_BOUND_S)
        again = remove_controller(java_classpath, bootstrap, removed, directory)
        assert again.returncode != 0 and "VoterNotFoundException" in again.output, \
            again.report()
        twice = run_java(java_classpath, QUORUM_TOOL, ["--bootstrap-server", bootstrap,
                                                       "--command-config", config,
                                                       "add-controller"], timeout=120)
        assert twice.returncode != 0 and "DuplicateVoterException" in twice.output, \
            twice.report()
    finally:
        stop_writing.set()
        writer.join(120)
    assert not replace_errors, replace_errors[:3]
    got = consume_all(bootstrap, replace_topic, 3, expected=len(replace_acked), timeout=120)
    values = sorted(m.value() for v in got.values() for m in v)
    assert values == sorted(replace_acked), (len(values), len(replace_acked))

    # The added controller SIGKILLed and restarted on its data directory (it keeps its place
    # among the voters); then the active controller SIGKILLed: the two voters left, the added
    # one among them, elect a successor (a majority of three), and the brokers follow it.
    split.kill(added)
    split.restart(added)
    leader = leader_of(describe(java_classpath, bootstrap, "--status"))
    split.kill(leader)
    wait_until(lambda: leader_of(describe(java_classpath, bootstrap, "--status")) not in
               (leader, removed), FAILOVER_BOUND_S, what="a successor among the voters left")
    create_and_write(bootstrap, "roles-after-replace", b"three")
    # No metadata was lost through the voter changes and the failovers: every topic created
    # is there, with its partitions.
    md = admin(bootstrap).list_topics(timeout=30)
    created = {"roles": 3, "roles-after": 1, "roles-paused": 1, "roles-replace": 3,
               "roles-replaced": 1, "roles-after-replace": 1}
    assert {t: len(md.topics[t].partitions) for t in created if t in md.topics} == created, \
        sorted(md.topics)


@pytest.mark.long("every controller of a 3-controller cluster replaced in turn, then a failover "
                  "(about 40 s)")
@pytest.mark.sluice_only("Kafka 4.4's brokers look for a new leader among "
                         "controller.quorum.bootstrap.servers (observers fall back to the "
                         "bootstrap servers): once all of them are replaced, the CreateTopics "
                         "after the failover times out there; Sluice's brokers also ask the "
                         "controllers the metadata names")
def test_every_controller_replaced_then_the_active_one_killed(split, java_classpath):
    """The quorum replaced controller by controller (KIP-853): each new controller joins
    through controller.quorum.bootstrap.servers, add-controller makes it a voter, the old one
    is removed and SIGKILLed. Then no controller of the brokers' `controller.quorum.voters`
    runs: the brokers must find the new ones from the metadata (their endpoints), also after
    the active controller is SIGKILLed; a topic is created and written afterwards."""
    bootstrap = split.bootstrap()
    create_topic(bootstrap, "replaced-before", 1, replication_factor=3)
    for old in CONTROLLERS:
        new = split.add_controller()
        add_controller(java_classpath, bootstrap, split.command_config(new), new)
        check_java(remove_controller(java_classpath, bootstrap, old,
                                     directory_of(java_classpath, bootstrap, old)),
                   expect_line=f"Removed KRaft controller {old}")
        split.kill(old)
    voters = quorum_ids(describe(java_classpath, bootstrap, "--status"), "CurrentVoters")
    assert not set(voters) & set(CONTROLLERS), voters
    split.kill(leader_of(describe(java_classpath, bootstrap, "--status")))
    create_and_write(bootstrap, "replaced-after", b"new quorum")
    md = admin(bootstrap).list_topics(timeout=30)
    assert {"replaced-before", "replaced-after"} <= set(md.topics)


@pytest.mark.sluice_only("Sluice's start-up checks (Kafka's StorageTool refuses the same first)")
def test_roles_that_contradict_the_voters_stop_the_start(sluice_bin, tmp_path):
    """Kafka's checks of `process.roles` against `controller.quorum.voters`, with its messages:
    a controller must be a voter, a broker-only node must not be one, and a node that is not
    both needs voters to follow."""
    cases = [
        ("controller", "2@127.0.0.1:1", "must be included in the set of voters"),
        ("broker", "1@127.0.0.1:1", "must not be included in the set of voters"),
        ("broker", "", "needs the controller quorum's voters"),
        ("observer", "1@127.0.0.1:1", "Unknown process role 'observer'"),
    ]
    for roles, voters, message in cases:
        run = subprocess.run([sluice_bin, "--data-dir", str(tmp_path / "data"),
                              "--set", "node.id=1", "--set", f"process.roles={roles}",
                              "--set", f"controller.quorum.voters={voters}"],
                             capture_output=True, text=True, timeout=30)
        assert run.returncode != 0, (roles, voters, run.stderr)
        assert message in run.stderr, (roles, voters, run.stderr)
