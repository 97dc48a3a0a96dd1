"""SASL/PLAIN (KIP-43, KIP-152; issue 29 point 3) on SASL_PLAINTEXT and SASL_SSL listeners:
users from `listener.name.<l>.plain.sasl.jaas.config` in Kafka's PlainLoginModule syntax,
confluent-kafka and Kafka's Java tools authenticating, wrong passwords answered
SASL_AUTHENTICATION_FAILED (58) and closed, mechanisms the listener does not serve refused,
requests before authentication closed unanswered, SaslHandshake on a plaintext listener
answered ILLEGAL_SASL_STATE (34). Each test also runs against Kafka 4.4 configured the same way
(SLUICE_COMPAT_TARGET=kafka)."""

import socket
import struct
import time

import pytest
from confluent_kafka import KafkaError, Producer

import kafka_wire as kw
from compat_util import create_topic
from jvm import check_java, run_java
from test_tls import round_trip

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin-secret" '
        'user_admin="admin-secret" user_alice="alice-secret";')
PLAIN = {"sasl.enabled.mechanisms": "PLAIN",
         "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
         "connection.failed.authentication.delay.ms": 0}
PLAIN_SSL = {"sasl.enabled.mechanisms": "PLAIN",
             "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
             "ssl.keystore.type": "PEM", "ssl.keystore.location": "{certs}/server.pem"}
API_SASL_HANDSHAKE = 17
API_SASL_AUTHENTICATE = 36


def sasl_conf(user="alice", password="alice-secret", mechanism="PLAIN", protocol="SASL_PLAINTEXT",
              **extra):
    return {"security.protocol": protocol, "sasl.mechanism": mechanism, "sasl.username": user,
            "sasl.password": password, **extra}


def auth_error(bootstrap, conf, timeout=20):
    """The first error a producer with `conf` reports (None: none within `timeout` s)."""
    errors = []
    p = Producer({"bootstrap.servers": bootstrap, **conf, "error_cb": errors.append})
    deadline = time.monotonic() + timeout
    while not errors and time.monotonic() < deadline:
        p.poll(0.2)
    return errors[0] if errors else None


def handshake(sock, mechanism, correlation_id=1):
    body = kw.header_v1(API_SASL_HANDSHAKE, 1, correlation_id) + kw.string(mechanism)
    sock.sendall(kw.frame(body))
    payload = kw.read_frame(sock)
    corr, error, count = struct.unpack(">ihi", payload[:10])
    assert corr == correlation_id
    mechanisms, pos = [], 10
    for _ in range(count):
        (n,) = struct.unpack(">h", payload[pos:pos + 2])
        mechanisms.append(payload[pos + 2:pos + 2 + n].decode())
        pos += 2 + n
    return error, mechanisms


def authenticate(sock, token, correlation_id=2):
    """SaslAuthenticate v0; returns (error code, error message)."""
    body = kw.header_v1(API_SASL_AUTHENTICATE, 0, correlation_id) + kw.bytes_(token)
    sock.sendall(kw.frame(body))
    payload = kw.read_frame(sock)
    corr, error, n = struct.unpack(">ihh", payload[:8])
    assert corr == correlation_id
    return error, payload[8:8 + n].decode() if n >= 0 else None


def read_until_closed(sock):
    data = b""
    try:
        while chunk := sock.recv(4096):
            data += chunk
    except ConnectionResetError:
        pass
    return data


def closed_unanswered(sock):
    try:
        return sock.recv(4096) == b""
    except (ConnectionResetError, socket.timeout):
        return True


@pytest.mark.sluice(listeners={"SASL_PLAINTEXT": "SASL_PLAINTEXT"}, settings=PLAIN)
def test_plain_clients_authenticate_and_bad_ones_are_refused(broker):
    sasl = broker.listener_bootstrap("SASL_PLAINTEXT")
    create_topic(broker.bootstrap, "sasl-t", 1)
    round_trip(sasl, "sasl-t", **sasl_conf())
    round_trip(sasl, "sasl-t", n=5, **sasl_conf("admin", "admin-secret"))
    err = auth_error(sasl, sasl_conf(password="wrong"))
    assert err is not None and err.code() == KafkaError._AUTHENTICATION, err
    assert "Invalid username or password" in err.str(), err
    err = auth_error(sasl, sasl_conf(user="mallory"))
    assert err is not None and err.code() == KafkaError._AUTHENTICATION, err
    # A mechanism the listener does not enable.
    err = auth_error(sasl, sasl_conf(mechanism="SCRAM-SHA-256"))
    assert err is not None and "SCRAM-SHA-256" in err.str(), err
    # A plaintext Kafka client on the SASL port gets nothing served.
    assert auth_error(sasl, {}) is not None
    # The good client is still served, and so is the plaintext listener.
    round_trip(sasl, "sasl-t", n=5, **sasl_conf())
    round_trip(broker.bootstrap, "sasl-t", n=5)


@pytest.mark.sluice(listeners={"SASL_PLAINTEXT": "SASL_PLAINTEXT"}, settings=PLAIN)
def test_sasl_on_the_wire_as_kafka(broker):
    sasl = broker.listener_bootstrap("SASL_PLAINTEXT")
    # Handshake, then a good token.
    with kw.connect(sasl) as s:
        error, mechanisms = handshake(s, "PLAIN")
        assert (error, mechanisms) == (0, ["PLAIN"])
        assert authenticate(s, b"\0alice\0alice-secret")[0] == 0
        # Authenticated: requests are served; another SaslHandshake is ILLEGAL_SASL_STATE.
        s.sendall(kw.api_versions_v0(3))
        assert struct.unpack(">ih", kw.read_frame(s)[:6]) == (3, 0)
        assert handshake(s, "PLAIN", 4)[0] == 34
    # A mechanism not enabled: UNSUPPORTED_SASL_MECHANISM with the enabled list, then closed.
    with kw.connect(sasl) as s:
        assert handshake(s, "GSSAPI") == (33, ["PLAIN"])
        assert closed_unanswered(s)
    # A wrong password: SASL_AUTHENTICATION_FAILED with Kafka's message, then closed.
    with kw.connect(sasl) as s:
        assert handshake(s, "PLAIN")[0] == 0
        error, message = authenticate(s, b"\0alice\0guess")
        assert error == 58
        assert message == "Authentication failed: Invalid username or password"
        assert closed_unanswered(s)
    # A request before authentication: closed unanswered (ApiVersions is served).
    with kw.connect(sasl) as s:
        s.sendall(kw.api_versions_v0(1))
        assert struct.unpack(">ih", kw.read_frame(s)[:6]) == (1, 0)
        s.sendall(kw.metadata_v1(2))
        assert closed_unanswered(s)
    # Between handshake and token: closed, the cluster not described (Kafka answers the
    # request's error response with no broker first; Sluice closes at once).
    with kw.connect(sasl) as s:
        assert handshake(s, "PLAIN")[0] == 0
        s.sendall(kw.metadata_v1(2))
        answer = read_until_closed(s)
        if answer:
            _corr, brokers, _controller, topics = kw.parse_metadata_v1(answer[4:])
            assert (brokers, topics) == ([], {}), answer
    # A token above sasl.server.max.receive.size (512 KiB), and a frame that announces more
    # before any handshake: closed.
    with kw.connect(sasl) as s:
        assert handshake(s, "PLAIN")[0] == 0
        body = kw.header_v1(API_SASL_AUTHENTICATE, 0, 5) + kw.bytes_(b"\0" * (600 << 10))
        try:
            s.sendall(kw.frame(body))
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert closed_unanswered(s)
    with kw.connect(sasl) as s:
        s.sendall(struct.pack(">i", 100 << 20) + b"x" * 100)
        assert closed_unanswered(s)
    # The listener still authenticates.
    with kw.connect(sasl) as s:
        assert handshake(s, "PLAIN")[0] == 0
        assert authenticate(s, b"\0alice\0alice-secret")[0] == 0
    # SaslHandshake on the PLAINTEXT listener: ILLEGAL_SASL_STATE.
    with kw.connect(broker.bootstrap) as s:
        assert handshake(s, "PLAIN")[0] == 34


@pytest.mark.sluice(listeners={"SASL_SSL": "SASL_SSL"}, settings=PLAIN_SSL)
def test_plain_over_ssl_with_confluent_and_java(broker, tls_certs, java_classpath, tmp_path):
    sasl_ssl = broker.listener_bootstrap("SASL_SSL")
    create_topic(broker.bootstrap, "sasl-ssl-t", 1)
    conf = sasl_conf(protocol="SASL_SSL", **{"ssl.ca.location": tls_certs["ca"]})
    round_trip(sasl_ssl, "sasl-ssl-t", **conf)
    err = auth_error(sasl_ssl, {**conf, "sasl.password": "wrong"})
    assert err is not None and err.code() == KafkaError._AUTHENTICATION, err

    props = tmp_path / "client.properties"
    props.write_text("\n".join([
        "security.protocol=SASL_SSL", "sasl.mechanism=PLAIN",
        'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="alice" password="alice-secret";',
        "ssl.truststore.type=PEM", f"ssl.truststore.location={tls_certs['ca']}",
    ]) + "\n")
    lines = [f"value-{i}" for i in range(10)]
    check_java(run_java(java_classpath, "org.apache.kafka.tools.ConsoleProducer",
                        ["--bootstrap-server", sasl_ssl, "--topic", "sasl-ssl-t",
                         "--command-config", props], stdin="\n".join(lines) + "\n"))
    out = check_java(run_java(java_classpath, "org.apache.kafka.tools.consumer.ConsoleConsumer",
                              ["--bootstrap-server", sasl_ssl, "--topic", "sasl-ssl-t",
                               "--from-beginning", "--max-messages", "30", "--timeout-ms",
                               "30000", "--command-config", props]))
    assert [l for l in out.splitlines() if l.startswith("value-")] == lines, out
