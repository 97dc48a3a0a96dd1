"""A SIGKILL at every step of a compaction swap, and in the recovery of one, on a real broker
under a real client's acks=all load (issue #27 point 4; docs/storage-format.md §6.8).

Each cycle starts the broker with `SLUICE_CRASH_AT=clean.swap:<k>` (storage's crash points:
the process SIGKILLs itself before the k-th file step of the first swap — renames to `.swap`,
the directory syncs, the old files to `.deleted`, the `.swap` files to their final names, the
unlinks), while an idempotent producer writes keyed records to a compacted topic without a
pause. Then the broker starts with `SLUICE_CRASH_AT=clean.recover:<r>`, so the recovery of the
interrupted swap is itself cut (at its first or second step), and once more without a crash
point. The log must then hold, for every key, its latest acknowledged value or one sent after
it (a record written but not acknowledged before the kill may be there, as in Kafka); every
record read must be one the producer sent, at the offset it was acknowledged at, offsets
strictly increasing, and each key's values in the order they were sent. And the broker's log
must say that an interrupted swap was finished or undone.

What it does not check: which of the old or the cleaned segments a cut left (the storage test
`a_swap_cut_after_any_step_opens_as_the_old_log_or_the_cleaned_one` does, step by step, for
groups of any size); the first swap's group here is as large as the closed segments at that
moment, usually one, so the k cover every kind of step. Sluice only: crash points are Sluice's.
`SLUICE_CLEAN_CRASH_STEPS` (default 15) sets how many steps are cut.
"""

import os
import time

import pytest
from confluent_kafka import Producer

from compat_util import admin, create_topic, read_partition
from conftest import TARGET, BrokerError

STEPS = int(os.environ.get("SLUICE_CLEAN_CRASH_STEPS", "15"))
KEYS = 16
FAST_CLEANER = {"log.cleaner.backoff.ms": 100}
COMPACTED = {
    "cleanup.policy": "compact",
    "segment.ms": "200",
    "min.cleanable.dirty.ratio": "0.01",
}

pytestmark = pytest.mark.skipif(TARGET == "kafka", reason="crash points are Sluice's")


def value_of(key, seq):
    return b"%s=%08d" % (key, seq)


def produce_until_death(broker, topic, sent, acked, timeout_s=60):
    """Produces keyed records without a pause until the broker dies; fills `sent` (key ->
    values in the order sent) and `acked` (value -> offset)."""
    p = Producer({
        "bootstrap.servers": broker.bootstrap,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 2,
        "message.timeout.ms": 5000,
    })

    def on_delivery(err, msg):
        if err is None:
            acked[msg.value()] = msg.offset()

    deadline = time.monotonic() + timeout_s
    i = 0
    while broker.alive() and time.monotonic() < deadline:
        key = b"k%02d" % (i % KEYS)
        value = value_of(key, len(sent.setdefault(key, [])))
        try:
            p.produce(topic, key=key, value=value, partition=0, on_delivery=on_delivery)
        except BufferError:
            p.poll(0.05)
            continue
        sent[key].append(value)
        i += 1
        p.poll(0)
        if i % 200 == 0:
            time.sleep(0.01)
    p.purge()
    p.flush(1)
    assert not broker.alive(), f"no crash point was reached in {timeout_s} s"


def start_expecting_crash(broker, point):
    """Starts the broker with crash point `point`: True when it SIGKILLed itself while
    starting (the recovery reached that step), False when it started (fewer steps)."""
    broker.env = {"SLUICE_CRASH_AT": point}
    try:
        broker.start()
    except BrokerError:
        assert broker.proc.returncode == -9, broker.log_tail()
        return True
    finally:
        broker.env = {}
    broker.stop()
    return False


def check_log(records, sent, acked, step):
    where = f"after a kill at swap step {step}"
    offsets = [o for o, _, _ in records]
    assert offsets == sorted(set(offsets)), f"{where}: offsets not strictly increasing"
    order = {v: (k, i) for k, values in sent.items() for i, v in enumerate(values)}
    latest = {}
    for offset, key, value in records:
        assert value in order, f"{where}: offset {offset} holds {value!r}, never sent"
        assert order[value][0] == key, f"{where}: {value!r} under key {key!r}"
        if value in acked:
            assert acked[value] == offset, (
                f"{where}: {value!r} acknowledged at {acked[value]}, read at {offset}")
        seq = order[value][1]
        assert seq > latest.get(key, -1), f"{where}: {key!r} goes back to {value!r}"
        latest[key] = seq
    for key, values in sent.items():
        acked_seqs = [i for i, v in enumerate(values) if v in acked]
        if acked_seqs:
            assert latest.get(key, -1) >= max(acked_seqs), (
                f"{where}: {key!r}'s latest acknowledged value "
                f"{values[max(acked_seqs)]!r} is lost (log has seq {latest.get(key)})")


@pytest.mark.long("a child broker SIGKILLed at every swap step, about a minute; the swap steps "
                  "themselves are in the README command by storage/tests/clean_swap.rs")
@pytest.mark.timeout(120 + 30 * STEPS)
@pytest.mark.sluice(cores=1, settings=FAST_CLEANER)
def test_sigkill_at_every_swap_step_and_in_recovery_loses_nothing(broker):
    recovery_cuts = 0
    for step in range(1, STEPS + 1):
        topic = f"crash-{step}"
        create_topic(broker.bootstrap, topic, 1, config=COMPACTED)
        sent, acked = {}, {}
        broker.env = {"SLUICE_CRASH_AT": f"clean.swap:{step}"}
        broker.stop()
        broker.start()
        broker.env = {}
        produce_until_death(broker, topic, sent, acked)
        assert broker.proc.returncode == -9, f"step {step}: {broker.log_tail()}"
        assert acked, f"step {step}: nothing acknowledged before the kill"
        recovery_cuts += start_expecting_crash(broker, f"clean.recover:{1 + step % 2}")
        broker.start()
        check_log(read_partition(broker.bootstrap, topic), sent, acked, step)
        # The next cycle's crash point must cut that cycle's topic's swap, not this one's.
        a = admin(broker.bootstrap)  # kept alive until the future completes
        a.delete_topics([topic])[topic].result(30)
    assert recovery_cuts > 0, "no recovery was cut"
    log = broker.log_path.read_text(errors="replace")
    assert log.count("finishing an interrupted compaction swap") >= STEPS, (
        "every cut swap is finished or undone by the next open")
