"""Acknowledged means written (DESIGN.md §3): SIGKILL cycles under a real client's acks=all load.

Each cycle starts the broker on the same data directory, drives a confluent-kafka producer at
full speed (acks=all, linger.ms=1, small records, several partitions) for a random 0.2-1.2 s,
SIGKILLs the broker mid-stream and drops whatever the client still had in flight. Only delivery
reports without an error count as acknowledged. At the end a full read must hold every
acknowledged (partition, offset, value), and no offset may ever have been acknowledged for two
different values (an offset handed out again after a crash).

What this checks: a process crash loses nothing acknowledged. What it cannot check: power loss
(a SIGKILL keeps the device's cache; that needs `flush.messages`, see docs/storage-format.md).

`SLUICE_KILL_CYCLES` (default 20 with SLUICE_LONG=1, else 5) sets the number of cycles and `SLUICE_KILL_SEED` the seed of
the kill moments; the counts are printed (run with -s to see them).
"""

import os
import random
import time

import pytest
from confluent_kafka import KafkaException, Producer

from compat_util import consume_all, create_topic, long_or

PARTITIONS = 3
CYCLES = int(os.environ.get("SLUICE_KILL_CYCLES", str(long_or(20, 5))))
SEED = int(os.environ.get("SLUICE_KILL_SEED", str(random.randrange(1 << 30))))
# librdkafka's local queue bound: a full queue is drained by poll() before producing more.
QUEUE_MAX_MESSAGES = 20000


def value_of(cycle, i):
    return b"k%03d-%08d-" % (cycle, i) + b"x" * 48


# A cycle takes 1-3 s (start, load, kill, purge); the bound is generous for busy machines.
@pytest.mark.timeout(120 + 15 * CYCLES)
def test_sigkill_cycles_lose_no_acknowledged_record(broker):
    topic = "kill-cycles"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    rng = random.Random(SEED)
    acked = {}       # (partition, offset) -> value
    reused = []      # (partition, offset, first value, second value)
    produced = 0

    for cycle in range(CYCLES):
        if cycle > 0:
            broker.start()  # same data directory
        errors = []

        def on_delivery(err, msg, cycle=cycle):
            if err is not None:
                errors.append(err)
                return
            key = (msg.partition(), msg.offset())
            old = acked.get(key)
            if old is not None and old != msg.value():
                reused.append((*key, old, msg.value()))
            acked[key] = msg.value()

        p = Producer({
            "bootstrap.servers": broker.bootstrap,
            "acks": "all",
            "linger.ms": 1,
            "enable.idempotence": False,
            "queue.buffering.max.messages": QUEUE_MAX_MESSAGES,
            "message.timeout.ms": 10000,
            "reconnect.backoff.ms": 200,
            "reconnect.backoff.max.ms": 1000,
        })
        run_for_s = rng.uniform(0.2, 1.2)
        start = time.monotonic()
        i = 0
        while time.monotonic() - start < run_for_s:
            try:
                p.produce(topic, value=value_of(cycle, i), partition=i % PARTITIONS,
                          on_delivery=on_delivery)
                i += 1
            except BufferError:
                p.poll(0.001)
            if i % 256 == 0:
                p.poll(0)
        acked_before = len(acked)
        broker.kill()
        # Whatever the client still holds was never acknowledged: drop it.
        p.poll(0)
        try:
            p.purge(in_queue=True, in_flight=True)
        except KafkaException:
            pass
        p.flush(10)
        produced += i
        del p
        assert len(acked) >= acked_before
        assert not reused, f"cycle {cycle}: offsets acknowledged twice, e.g. {reused[:3]}"

    broker.start()
    got = consume_all(broker.bootstrap, topic, PARTITIONS, expected=len(acked), timeout=120)
    present = {}
    for part, msgs in got.items():
        present.update(((part, m.offset()), m.value()) for m in msgs)
    lost = sorted(k for k in acked if k not in present)
    wrong = sorted(k for k, v in acked.items() if k in present and present[k] != v)
    print(f"\nkill cycles: seed {SEED}, {CYCLES} cycles, {produced} records produced, "
          f"{len(acked)} acknowledged, {len(lost)} lost, {len(wrong)} overwritten, "
          f"{len(reused)} offsets acknowledged twice")
    assert len(acked) > CYCLES, "too little was acknowledged for the test to mean anything"
    assert not lost, (f"seed {SEED}: {len(lost)} of {len(acked)} acknowledged records lost, "
                      f"e.g. {lost[:5]}")
    assert not wrong, f"seed {SEED}: {len(wrong)} acknowledged offsets hold other data: {wrong[:5]}"
