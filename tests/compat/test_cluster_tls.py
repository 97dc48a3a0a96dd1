"""A three-node cluster whose client, inter-broker and controller listeners all speak TLS with
`ssl.client.auth=required` (issue #29 points 1 and 7), with certificates made at run time (a
CA, one certificate per node naming 127.0.0.1/localhost, one client certificate), and the
StandardAuthorizer on with the nodes' principals in `super.users` and
`allow.everyone.if.no.acl.found=false`: an RF-3 topic is produced with acks=all over mTLS and
read back; a connection without a client certificate, and a plaintext one, get no answer from
the TLS listener; a SIGKILLed broker restarts and catches up (its replica fetcher speaks TLS); a
node whose certificate another CA signed is refused by the others and never listed as a broker;
(Sluice) a client without CLUSTER_ACTION cannot send the brokers' forwarded controller
requests. The same with a SASL_SSL (PLAIN) inter-broker listener.

Against Apache Kafka 4.4 too (SLUICE_COMPAT_TARGET=kafka): three combined KRaft nodes from
scripts/kafka_ref.py configured with the same keys, each with its own PEM key store."""

import datetime
import ipaddress
import json
import socket
import ssl
import struct
import time

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition, OFFSET_BEGINNING
from confluent_kafka.admin import AdminClient, NewTopic
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID

from cluster_targets import NotServing, finish, make_cluster
from compat_util import producer, wait_until
from conftest import TARGET
from kafka_ref import free_port
import tls_certs

RECORDS = 200
PARTITIONS = 3
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
# What a node logs when it refuses a peer's TLS handshake: Sluice's quorum transport and client
# listener; Kafka's Selector ("Failed authentication with … (SSL handshake failed)").
HANDSHAKE_REFUSED = {"sluice": ("TLS refused", "closing connection: TLS"),
                     "kafka": ("SSL handshake failed",)}[TARGET]


def _node_cert(ca_key, ca, cn):
    """A certificate for both sides of TLS (server and client auth), naming 127.0.0.1."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder()
            .subject_name(tls_certs._name(cn, "brokers")).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                  ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    return tls_certs._pem_key(key) + tls_certs._pem_cert(cert) + tls_certs._pem_cert(ca)


def _principal(cn):
    return f"User:CN={cn},OU=brokers,O=Sluice Test"


@pytest.fixture
def pki(tmp_path):
    d = tmp_path / "pki"
    d.mkdir()
    ca_key, ca = tls_certs._ca("Sluice Test CA")
    other_key, other = tls_certs._ca("Another CA")
    files = {"ca": tls_certs._pem_cert(ca),
             "stranger": _node_cert(other_key, other, "node3")}
    for i in (1, 2, 3):
        files[f"node{i}"] = _node_cert(ca_key, ca, f"node{i}")
    files["client"] = _node_cert(ca_key, ca, "admin")
    files["alice"] = _node_cert(ca_key, ca, "alice")
    paths = {}
    for name, data in files.items():
        (d / f"{name}.pem").write_bytes(data)
        paths[name] = str(d / f"{name}.pem")
    return paths


def _cluster(request, tmp_path, pki, sasl):
    inter = "INTERNAL" if sasl else "SSL"
    settings = {
        "broker.heartbeat.interval.ms": 500, "broker.session.timeout.ms": 2000,
        "listener.security.protocol.map":
            "SSL:SSL,CONTROLLER:SSL" + (",INTERNAL:SASL_SSL" if sasl else ""),
        "inter.broker.listener.name": inter,
        "controller.listener.names": "CONTROLLER",
        "ssl.keystore.type": "PEM", "ssl.truststore.type": "PEM",
        "ssl.truststore.location": pki["ca"], "ssl.client.auth": "required",
        "authorizer.class.name": AUTHORIZER,
        "allow.everyone.if.no.acl.found": "false",
        "super.users": ";".join([_principal(f"node{i}") for i in (1, 2, 3)]
                                + [_principal("admin"), "User:broker"]),
    }
    if sasl:
        settings.update({
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.internal.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.internal.plain.sasl.jaas.config":
                'org.apache.kafka.common.security.plain.PlainLoginModule required '
                'username="broker" password="broker-secret" user_broker="broker-secret";',
        })
    t = make_cluster(request, tmp_path, 3, settings, probe_tls=_client_context(pki))
    for i in t.node_ids:
        extra = [("INTERNAL", free_port())] if sasl else []
        t.node_settings[i] = {"listeners": t.listeners(i, "SSL", extra),
                              "ssl.keystore.location": pki[f"node{i}"]}
    return t


def _client_context(pki, certificate=True):
    """A client's TLS context trusting the test CA, with the admin's certificate or none."""
    context = ssl.create_default_context(cafile=pki["ca"])
    if certificate:
        context.load_cert_chain(pki["client"])
    return context


def client_conf(pki, bootstrap):
    return {"bootstrap.servers": bootstrap, "security.protocol": "SSL",
            "ssl.ca.location": pki["ca"], "ssl.certificate.location": pki["client"],
            "ssl.key.location": pki["client"]}


def _read_all(conf, topic, expected, timeout=60):
    c = Consumer({**conf, "group.id": f"g-{time.monotonic_ns()}", "enable.partition.eof": True,
                  "auto.offset.reset": "earliest"})
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        got = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and len(got) < expected:
            m = c.poll(0.5)
            if m is None or (m.error() and m.error().code() == KafkaError._PARTITION_EOF):
                continue
            assert not m.error(), m.error()
            got.append(m.value())
        return got
    finally:
        c.close()


def _produce(conf, topic, prefix):
    p = producer(conf["bootstrap.servers"], **{k: v for k, v in conf.items()
                                               if k != "bootstrap.servers"})
    failed = []
    for i in range(RECORDS):
        p.produce(topic, f"{prefix}-{i}".encode(),
                  on_delivery=lambda err, _m: err and failed.append(err))
    assert p.flush(60) == 0
    assert not failed, failed[:3]


# ApiVersions v0 with client id "probe" and a correlation id a Kafka response would echo.
_CORRELATION = 0x5EED
_API_VERSIONS = struct.pack(">hhih", 18, 0, _CORRELATION, 5) + b"probe"


def _answered(sock):
    """Sends ApiVersions on `sock`; whether a Kafka response to it came back before the peer
    closed (a TLS alert or a reset is no answer)."""
    try:
        sock.sendall(struct.pack(">i", len(_API_VERSIONS)) + _API_VERSIONS)
        data = b""
        while len(data) < 8:
            chunk = sock.recv(8 - len(data))
            if not chunk:
                break
            data += chunk
    except (ConnectionResetError, BrokenPipeError, ssl.SSLError):
        return False
    return len(data) == 8 and struct.unpack(">i", data[4:])[0] == _CORRELATION


def _answered_tls(context, port):
    with socket.create_connection(("127.0.0.1", port), timeout=20) as raw:
        try:
            tls = context.wrap_socket(raw, server_hostname="127.0.0.1")
        except (ConnectionResetError, ssl.SSLError):
            return False
        with tls:
            return _answered(tls)


def _answered_plaintext(port):
    with socket.create_connection(("127.0.0.1", port), timeout=20) as raw:
        return _answered(raw)


def _refusals(t):
    """How many TLS handshakes nodes 1 and 2 refused so far."""
    logs = [t.log_text(i) for i in (1, 2)]
    return sum(log.count(marker) for log in logs for marker in HANDSHAKE_REFUSED)


def _forward_closed(pki, port):
    context = ssl.create_default_context(cafile=pki["ca"])
    context.load_cert_chain(pki["alice"])
    body = struct.pack(">hi", 32000, 5) + json.dumps(
        {"Op": {"from": 2, "op": {"FenceBroker": {"broker_id": 2}}}}).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=20) as raw:
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            tls.sendall(struct.pack(">i", len(body)) + body)
            try:
                return tls.recv(4) == b""
            except (ConnectionResetError, ssl.SSLError):
                return True


@pytest.mark.parametrize("sasl", [
    pytest.param(False, marks=pytest.mark.long(
        "the sasl_ssl_plain case runs the same mTLS cluster with SASL on top")),
    True,
], ids=["ssl", "sasl_ssl_plain"])
def test_mtls_cluster(request, tmp_path, pki, sasl):
    t = _cluster(request, tmp_path, pki, sasl)
    try:
        t.start()
        conf = client_conf(pki, t.bootstrap())
        a = AdminClient(conf)
        a.create_topics([NewTopic("secure", num_partitions=PARTITIONS,
                                  replication_factor=3)])["secure"].result(30)
        wait_until(lambda: all(len(p.isrs) == 3 for p in
                               a.list_topics("secure", timeout=10).topics["secure"]
                               .partitions.values()), 60, what="ISR of 3")
        _produce(conf, "secure", "a")
        assert len(_read_all(conf, "secure", RECORDS)) == RECORDS

        # The TLS listener answers a client with a certificate the CA signed, and neither one
        # without a certificate (ssl.client.auth=required) nor one speaking plaintext.
        port = int(t.node_bootstrap(1).rsplit(":", 1)[1])
        assert _answered_tls(_client_context(pki), port)
        assert not _answered_tls(_client_context(pki, certificate=False), port)
        assert not _answered_plaintext(port)

        # A broker SIGKILLed and restarted catches up over the TLS replica fetcher.
        t.kill(3)
        _produce({**conf, "bootstrap.servers": t.bootstrap(exclude=(3,))}, "secure", "b")
        t.restart(3)
        wait_until(lambda: all(3 in p.isrs for p in
                               a.list_topics("secure", timeout=10).topics["secure"]
                               .partitions.values()), 60, what="node 3 back in every ISR")
        assert len(_read_all(conf, "secure", 2 * RECORDS)) == 2 * RECORDS

        if TARGET == "sluice":
            # A client without CLUSTER_ACTION cannot send the brokers' own controller requests
            # (Sluice's forwarding frame, API key 32000): the connection is closed unanswered,
            # on a Kafka listener as on the controller listener (the voters' address, where
            # broker-only nodes send theirs).
            assert _forward_closed(pki, port)
            voter_port = int(t.controller_address(1).rsplit(":", 1)[1])
            assert _forward_closed(pki, voter_port)

        # A node whose certificate another CA signed cannot join: the voters and brokers
        # refuse its TLS, so it never registers and the others never list it.
        t.kill(3)
        t.node_settings[3]["ssl.keystore.location"] = pki["stranger"]
        refused = _refusals(t)
        with pytest.raises(NotServing):
            t.restart(3, timeout=10)
        wait_until(lambda: _refusals(t) > refused, 60,
                   what="nodes 1 and 2 refusing node 3's certificate")
        others = AdminClient({**conf, "bootstrap.servers": t.bootstrap(exclude=(3,))})
        assert 3 not in others.list_topics(timeout=10).brokers
        t.kill(3)
    except Exception:
        print(t.describe())
        raise
    finally:
        finish(t)
