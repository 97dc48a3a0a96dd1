"""Consumer groups with kafka-python and aiokafka: consume, commit, close, and a new member of the
group resumes after the committed offsets; two members of one group split the partitions; offsets
committed by one client are honoured by another."""

import asyncio
import threading
import time

import pytest
from aiokafka import AIOKafkaConsumer
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition
from aiokafka.structs import TopicPartition as AioTopicPartition

from compat_util import create_topic, producer

GROUP_SETTINGS = {"group.initial.rebalance.delay.ms": 0}
PARTITIONS = 4
WAIT_S = 60


def produce(bootstrap, topic, values):
    """Round-robin over the partitions; returns {partition: count}."""
    counts = {}
    errors = []
    p = producer(bootstrap)
    for i, value in enumerate(values):
        part = i % PARTITIONS
        counts[part] = counts.get(part, 0) + 1
        p.produce(topic, value=value, partition=part,
                  on_delivery=lambda err, _msg: err and errors.append(err))
        p.poll(0)
    assert p.flush(60) == 0
    assert not errors, errors[:3]
    return counts


def balanced(sets, partitions=PARTITIONS):
    union = frozenset().union(*sets)
    return (all(sets) and sum(len(s) for s in sets) == len(union)
            and union == frozenset(range(partitions)))


# ---- kafka-python --------------------------------------------------------------------------------


def kp_consumer(bootstrap, topic, group, **extra):
    conf = dict(bootstrap_servers=bootstrap, group_id=group, client_id=f"kp-{group}",
                auto_offset_reset="earliest", enable_auto_commit=False,
                session_timeout_ms=10000, heartbeat_interval_ms=500,
                max_poll_interval_ms=30000, request_timeout_ms=30000)
    conf.update(extra)
    return KafkaConsumer(topic, **conf)


def kp_read(consumer, count, timeout=WAIT_S):
    """Polls until `count` records came; returns them."""
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got += records
    assert len(got) >= count, f"{len(got)} of {count} records within {timeout} s"
    return got


@pytest.mark.sluice(settings=GROUP_SETTINGS)
@pytest.mark.timeout(150)
def test_kafka_python_commit_close_resume(broker):
    topic, group = "kp-resume", "kp-resume"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    first = [b"kp-first-%03d" % i for i in range(200)]
    counts = produce(broker.bootstrap, topic, first)

    c = kp_consumer(broker.bootstrap, topic, group)
    try:
        got = kp_read(c, len(first))
        assert sorted(r.value for r in got) == sorted(first)
        # Nothing beyond: a short extra poll brings no more records.
        assert not c.poll(timeout_ms=500)
        c.commit()  # synchronous: the consumed positions
        for p in range(PARTITIONS):
            assert c.committed(KpTopicPartition(topic, p)) == counts[p], p
    finally:
        c.close()

    second = [b"kp-second-%03d" % i for i in range(60)]
    produce(broker.bootstrap, topic, second)
    c = kp_consumer(broker.bootstrap, topic, group)
    try:
        got = kp_read(c, len(second))
        for records in c.poll(timeout_ms=1000).values():
            got += records
        # Resumed at the commit: only the new records, none of the committed ones.
        assert sorted(r.value for r in got) == sorted(second)
        assert all(r.offset >= counts[r.partition] for r in got)
    finally:
        c.close()


def run_kp_member(consumer, name, state, stop, errors):
    """Polls in its own thread (kafka-python rejoins inside poll()); publishes its assignment.
    A poll budget of 1 s: with a very short one kafka-python 3 can keep abandoning its own
    group join under load (seen with 100 ms) and stop heartbeating."""
    try:
        while not stop.is_set():
            consumer.poll(timeout_ms=1000)
            state[name] = frozenset(tp.partition for tp in consumer.assignment())
    except Exception as e:  # noqa: BLE001 - reported by the test
        errors.append((name, repr(e)))
    finally:
        consumer.close()


@pytest.mark.sluice(settings=GROUP_SETTINGS)
@pytest.mark.timeout(120)
def test_kafka_python_two_consumers_split_partitions(broker):
    topic, group = "kp-split", "kp-split"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    state, errors = {}, []
    stop = threading.Event()
    threads = []
    try:
        for name in ("a", "b"):
            c = kp_consumer(broker.bootstrap, topic, group, client_id=f"kp-split-{name}")
            t = threading.Thread(target=run_kp_member, args=(c, name, state, stop, errors),
                                 daemon=True)
            t.start()
            threads.append(t)
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and not errors:
            if len(state) == 2 and balanced(state.values()):
                break
            time.sleep(0.1)
        assert not errors, errors
        assert len(state) == 2 and balanced(state.values()), f"assignments: {state}"
        assert sorted(len(s) for s in state.values()) == [2, 2], state
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)


# ---- aiokafka ------------------------------------------------------------------------------------


def aio_consumer(bootstrap, topic, group, **extra):
    conf = dict(bootstrap_servers=bootstrap, group_id=group, client_id=f"aio-{group}",
                auto_offset_reset="earliest", enable_auto_commit=False,
                session_timeout_ms=10000, heartbeat_interval_ms=500,
                max_poll_interval_ms=30000, request_timeout_ms=30000)
    conf.update(extra)
    return AIOKafkaConsumer(topic, **conf)


async def aio_read(consumer, count, timeout=WAIT_S):
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        for records in (await consumer.getmany(timeout_ms=500)).values():
            got += records
    assert len(got) >= count, f"{len(got)} of {count} records within {timeout} s"
    return got


def run(coro, timeout=120):
    try:
        return asyncio.run(asyncio.wait_for(coro, timeout))
    except asyncio.TimeoutError:
        raise AssertionError(f"aiokafka test stuck for {timeout} s") from None


@pytest.mark.sluice(settings=GROUP_SETTINGS)
@pytest.mark.timeout(150)
def test_aiokafka_commit_close_resume(broker):
    topic, group = "aio-resume", "aio-resume"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    first = [b"aio-first-%03d" % i for i in range(200)]
    counts = produce(broker.bootstrap, topic, first)
    second = [b"aio-second-%03d" % i for i in range(60)]

    async def scenario():
        c = aio_consumer(broker.bootstrap, topic, group)
        await c.start()
        try:
            got = await aio_read(c, len(first))
            assert sorted(r.value for r in got) == sorted(first)
            await c.commit()
            for p in range(PARTITIONS):
                assert await c.committed(AioTopicPartition(topic, p)) == counts[p], p
        finally:
            await c.stop()

        produce(broker.bootstrap, topic, second)
        c = aio_consumer(broker.bootstrap, topic, group)
        await c.start()
        try:
            got = await aio_read(c, len(second))
            for records in (await c.getmany(timeout_ms=1000)).values():
                got += records
            assert sorted(r.value for r in got) == sorted(second)
            assert all(r.offset >= counts[r.partition] for r in got)
        finally:
            await c.stop()

    run(scenario())


@pytest.mark.sluice(settings=GROUP_SETTINGS)
@pytest.mark.timeout(120)
def test_aiokafka_two_consumers_split_partitions(broker):
    topic, group = "aio-split", "aio-split"
    create_topic(broker.bootstrap, topic, PARTITIONS)

    async def scenario():
        consumers = [aio_consumer(broker.bootstrap, topic, group, client_id=f"aio-split-{i}")
                     for i in range(2)]
        stop = asyncio.Event()

        async def keep_polling(c):
            while not stop.is_set():
                await c.getmany(timeout_ms=100)

        for c in consumers:
            await c.start()
        tasks = [asyncio.create_task(keep_polling(c)) for c in consumers]
        try:
            def assignments():
                return [frozenset(tp.partition for tp in c.assignment()) for c in consumers]
            deadline = time.monotonic() + WAIT_S
            while time.monotonic() < deadline and not balanced(assignments()):
                await asyncio.sleep(0.1)
            final = assignments()
            assert balanced(final), f"assignments: {final}"
            assert sorted(len(s) for s in final) == [2, 2], final
        finally:
            stop.set()
            await asyncio.gather(*tasks, return_exceptions=True)
            for c in consumers:
                await c.stop()

    run(scenario())


# ---- across clients ------------------------------------------------------------------------------


@pytest.mark.sluice(settings=GROUP_SETTINGS)
@pytest.mark.timeout(150)
def test_offsets_committed_by_kafka_python_resume_aiokafka(broker):
    """The group and its offsets are the broker's, not a client's: kafka-python commits,
    aiokafka in the same group resumes there."""
    topic, group = "cross-client", "cross-client"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    first = [b"x-first-%03d" % i for i in range(80)]
    counts = produce(broker.bootstrap, topic, first)

    c = kp_consumer(broker.bootstrap, topic, group)
    try:
        kp_read(c, len(first))
        c.commit()
    finally:
        c.close()
    second = [b"x-second-%03d" % i for i in range(20)]
    produce(broker.bootstrap, topic, second)

    async def resume():
        c = aio_consumer(broker.bootstrap, topic, group)
        await c.start()
        try:
            got = await aio_read(c, len(second))
            for records in (await c.getmany(timeout_ms=1000)).values():
                got += records
            return got
        finally:
            await c.stop()

    got = run(resume())
    assert sorted(r.value for r in got) == sorted(second)
    assert all(r.offset >= counts[r.partition] for r in got)
