"""aiokafka: producer and consumer round trip (assign, seek_to_beginning)."""

import asyncio

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition

from compat_util import create_topic

COUNT = 300
PARTITIONS = 2


async def round_trip(bootstrap, topic, progress):
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False,
                                acks="all", linger_ms=5, request_timeout_ms=30000)
    progress["phase"] = "producer.start"
    await producer.start()
    progress["phase"] = "send_and_wait"
    sent = {}
    try:
        for i in range(COUNT):
            md = await producer.send_and_wait(topic, value=b"aio-%05d" % i, key=b"%d" % i,
                                              partition=i % PARTITIONS)
            sent.setdefault(md.partition, []).append((md.offset, b"aio-%05d" % i))
            progress["acknowledged"] = i + 1
        progress["phase"] = "send burst"
        # And a burst sent without waiting for each acknowledgement.
        futures = [await producer.send(topic, value=b"burst-%05d" % i, partition=i % PARTITIONS)
                   for i in range(COUNT)]
        for i, fut in enumerate(futures):
            md = await fut
            sent[md.partition].append((md.offset, b"burst-%05d" % i))
            progress["acknowledged"] = COUNT + i + 1
        progress["phase"] = "producer.stop"
    finally:
        await producer.stop()
    for p, items in sent.items():
        assert [o for o, _ in items] == list(range(len(items))), f"partition {p} offsets"

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                enable_auto_commit=False, auto_offset_reset="none")
    progress["phase"] = "consumer.start"
    await consumer.start()
    progress["phase"] = "consume"
    got = {p: [] for p in range(PARTITIONS)}
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        total = 0
        while total < 2 * COUNT:
            batches = await consumer.getmany(timeout_ms=1000)
            for tp, records in batches.items():
                got[tp.partition] += [(r.offset, r.value) for r in records]
                total += len(records)
            progress["consumed"] = total
        progress["phase"] = "end_offsets"
        ends = await consumer.end_offsets(tps)
    finally:
        await consumer.stop()
    return sent, got, ends


def test_aiokafka_round_trip(broker):
    topic = "aiokafka-round-trip"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    progress = {}
    try:
        sent, got, ends = asyncio.run(
            asyncio.wait_for(round_trip(broker.bootstrap, topic, progress), 120))
    except TimeoutError:
        raise AssertionError(f"aiokafka round trip stuck for 120 s: {progress}") from None
    for p in range(PARTITIONS):
        assert got[p] == sent[p], f"partition {p}"
        assert ends[TopicPartition(topic, p)] == len(sent[p])
