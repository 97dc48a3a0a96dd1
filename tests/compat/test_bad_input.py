"""Malformed input on one connection never takes the broker down.

After each bad input the broker process must still be running and a second connection, opened
*before* the bad input, must still get a correct ApiVersions answer.
"""

import random
import socket
import struct
import time
from pathlib import Path

import pytest

import kafka_wire as kw

VECTORS = Path(__file__).parent / "vectors"
ANSWER_TIMEOUT_S = 15


def check_api_versions(sock, correlation_id):
    sock.sendall(kw.api_versions_v0(correlation_id))
    corr, err, keys = kw.parse_api_versions_v0(kw.read_frame(sock))
    assert corr == correlation_id
    assert err == 0, f"ApiVersions v0 error code {err}"
    # What the broker claims today (see DESIGN.md and the brief): the floor, not the ceiling.
    for key, (lo, hi) in {18: (0, 3), 3: (0, 12), 0: (3, 9), 1: (4, 12), 2: (1, 7), 19: (2, 7)}.items():
        assert key in keys, f"api key {key} missing from ApiVersions: {keys}"
        assert keys[key][0] <= lo and keys[key][1] >= hi, f"api key {key}: {keys[key]}"


def closed_or_answer(sock, timeout=ANSWER_TIMEOUT_S):
    """Waits until the broker closes `sock` or sends something; returns the bytes (b"" = closed).

    A broker that neither answers nor closes within `timeout` leaves a client hanging forever:
    that is a failure.
    """
    sock.settimeout(timeout)
    try:
        return sock.recv(65536)
    except ConnectionResetError:
        return b""
    except socket.timeout:
        pytest.fail(f"broker neither answered nor closed the connection in {timeout} s")


def assert_closed(sock, timeout=ANSWER_TIMEOUT_S):
    sock.settimeout(timeout)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            data = sock.recv(65536)
            if not data:
                return
            # Bytes before the close are allowed (e.g. an error response); keep reading.
    except ConnectionResetError:
        return
    except socket.timeout:
        pass
    pytest.fail(f"broker did not close the connection within {timeout} s")


@pytest.fixture
def witness(broker):
    """A connection opened and used before the bad input; checked after it."""
    s = kw.connect(broker.bootstrap)
    check_api_versions(s, 1)
    yield s
    s.close()


def after_bad_input(broker, witness):
    time.sleep(0.2)  # let a crash, if any, happen before we look
    assert broker.alive(), f"broker died (exit status {broker.proc.returncode})"
    check_api_versions(witness, 2)
    # A brand-new connection works too.
    with kw.connect(broker.bootstrap) as fresh:
        check_api_versions(fresh, 3)


def test_garbage_bytes(broker, witness):
    rng = random.Random(7)
    garbage = bytes(rng.randrange(256) for _ in range(4096))
    with kw.connect(broker.bootstrap) as s:
        # Starts with 0xff...: the size prefix is negative, which no frame can have.
        s.sendall(b"\xff\xff\xff\xfe" + garbage)
        assert_closed(s)
    after_bad_input(broker, witness)


def test_garbage_in_a_well_sized_frame(broker, witness):
    rng = random.Random(11)
    payload = bytes(rng.randrange(256) for _ in range(200))
    with kw.connect(broker.bootstrap) as s:
        s.sendall(kw.frame(payload))
        closed_or_answer(s)
    after_bad_input(broker, witness)


def test_huge_frame_length(broker, witness):
    with kw.connect(broker.bootstrap) as s:
        s.sendall(struct.pack(">i", 0x7FFFFFFF) + b"\x00\x12\x00\x00\x00\x00\x00\x07")
        # Larger than socket.request.max.bytes: Kafka closes such a connection at once.
        assert_closed(s)
    after_bad_input(broker, witness)


def test_truncated_frame_then_close(broker, witness):
    with kw.connect(broker.bootstrap) as s:
        full = kw.api_versions_v0(5)
        s.sendall(struct.pack(">i", 100) + full[4:])  # claims 100 bytes, sends fewer
    after_bad_input(broker, witness)


def test_unknown_api_key(broker, witness):
    with kw.connect(broker.bootstrap) as s:
        s.sendall(kw.frame(kw.header_v1(999, 0, 77) + b"\x00" * 8))
        data = closed_or_answer(s)
        if data:
            assert len(data) >= 8 and struct.unpack(">i", data[4:8])[0] == 77, \
                f"answer to api key 999 is not a response to it: {data[:64].hex()}"
    after_bad_input(broker, witness)


def test_createtopics_array_length_abort_vector(broker, witness):
    payload = (VECTORS / "createtopics-v3-array-len-abort.bin").read_bytes()
    assert len(payload) == 64
    with kw.connect(broker.bootstrap) as s:
        s.sendall(kw.frame(payload))
        data = closed_or_answer(s)
        if data:
            assert len(data) >= 8 and struct.unpack(">i", data[4:8])[0] == 1, \
                f"answer is not a response to correlation id 1: {data[:64].hex()}"
    after_bad_input(broker, witness)


def test_api_versions_unsupported_version(broker, witness):
    """ApiVersions v99 gets UNSUPPORTED_VERSION in the v0 layout (KIP-511), with the
    ApiVersions range so that the client can retry with a version the broker speaks."""
    with kw.connect(broker.bootstrap) as s:
        s.sendall(kw.api_versions_flexible(99, 4242))
        payload = kw.read_frame(s)
        corr, err, keys = kw.parse_api_versions_v0(payload)
        assert corr == 4242
        assert err == kw.UNSUPPORTED_VERSION, f"error code {err}, response {payload.hex()}"
        assert 18 in keys, f"no ApiVersions range in the error response: {keys}"
        assert keys[18][0] == 0 and keys[18][1] >= 3, keys[18]
        # The connection stays usable: the client retries on it with a supported version.
        check_api_versions(s, 4243)
    after_bad_input(broker, witness)
