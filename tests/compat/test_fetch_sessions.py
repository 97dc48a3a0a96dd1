"""Incremental fetch sessions (KIP-227; issue #31 point 3) on the wire, Fetch v11 with a
three-partition topic: a full fetch (epoch 0) opens a session; the session's next fetches name
only what changed and are answered only with the partitions that have something new; a stale
epoch answers INVALID_FETCH_SESSION_EPOCH (71) and an unknown session FETCH_SESSION_ID_NOT_FOUND
(70), both with no partitions; a forgotten partition is no longer answered; epoch -1 closes the
session. The Java consumer uses sessions on its own: every Java test of the suite runs through
them. Runs against Apache Kafka 4.4 too (SLUICE_COMPAT_TARGET=kafka)."""

import itertools

import kafka_wire as kw
from compat_util import create_topic, producer

TOPIC = "sessions"
FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71
WAIT_MS = 200  # each incremental fetch's max wait when nothing is new


def produce(bootstrap, partition, n=1):
    p = producer(bootstrap)
    for i in range(n):
        p.produce(TOPIC, value=f"v{i}".encode(), partition=partition)
    assert p.flush(30) == 0


def test_an_incremental_fetch_answers_only_the_partitions_that_changed(broker):
    create_topic(broker.bootstrap, TOPIC, 3)
    for partition in range(3):
        produce(broker.bootstrap, partition)
    corr = itertools.count(1)
    with kw.connect(broker.bootstrap) as sock:
        def fetch(session_id, epoch, partitions=(), forgotten=()):
            payload = kw.request(sock, kw.fetch_session_v11(
                next(corr), session_id, epoch, partitions, forgotten, max_wait_ms=WAIT_MS))
            return kw.parse_fetch_session_v11(payload)

        # A full fetch opens a session and answers every partition.
        error, session, parts = fetch(0, 0, [(TOPIC, p, 0) for p in range(3)])
        assert error == 0 and session != 0, (error, session)
        assert sorted(parts) == [(TOPIC, p) for p in range(3)]
        assert all(p["error"] == 0 and p["high_watermark"] == 1 and p["records"]
                   for p in parts.values()), parts

        # The consumer moves past what it got: nothing new anywhere, nothing answered.
        error, same, parts = fetch(session, 1, [(TOPIC, p, 1) for p in range(3)])
        assert (error, same, parts) == (0, session, {})

        # New records in partition 1 only: it alone is answered, though not named.
        produce(broker.bootstrap, 1, n=2)
        error, same, parts = fetch(session, 2)
        assert (error, same) == (0, session)
        assert list(parts) == [(TOPIC, 1)], parts
        assert parts[(TOPIC, 1)]["high_watermark"] == 3 and parts[(TOPIC, 1)]["records"]

        # The same epoch again is stale; the session stays as it was.
        error, _, parts = fetch(session, 2)
        assert (error, parts) == (INVALID_FETCH_SESSION_EPOCH, {})
        # A session nobody opened.
        error, _, parts = fetch(session ^ 0x4000_0000, 1)
        assert (error, parts) == (FETCH_SESSION_ID_NOT_FOUND, {})

        # Partition 1 moves on and partition 2 is forgotten: new records in both, only
        # partition 1's are answered.
        error, same, parts = fetch(session, 3, [(TOPIC, 1, 3)], forgotten=[(TOPIC, [2])])
        assert (error, same, parts) == (0, session, {})
        produce(broker.bootstrap, 1)
        produce(broker.bootstrap, 2)
        error, same, parts = fetch(session, 4)
        assert (error, same) == (0, session)
        assert list(parts) == [(TOPIC, 1)], parts

        # Epoch -1 closes the session: a full answer without a session, and the session is gone.
        error, none, parts = fetch(session, -1, [(TOPIC, 0, 0)])
        assert (error, none) == (0, 0)
        assert list(parts) == [(TOPIC, 0)]
        error, _, parts = fetch(session, 5)
        assert (error, parts) == (FETCH_SESSION_ID_NOT_FOUND, {})
