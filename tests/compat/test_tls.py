"""Listeners as Kafka configures them and TLS on them (issue 29 points 1–2): named listeners
with `listener.security.protocol.map`, Metadata / DescribeCluster / FindCoordinator answered
with the endpoints of the listener a client connected to, `SSL` listeners with PEM keys
(a key file, inline PEM, an encrypted PKCS#8 key), `ssl.client.auth=required` (mTLS), and bad
input on a TLS port (plaintext Kafka, garbage, a stalled handshake) that closes that connection
only. Certificates are made at run time (tls_certs.py). Each test also runs against Kafka 4.4
configured the same way (SLUICE_COMPAT_TARGET=kafka)."""

import socket
import struct
import subprocess
import time

import pytest
from confluent_kafka import KafkaException, TopicPartition, OFFSET_BEGINNING

from conftest import TARGET, _die_with_parent, free_port
from sluice_cluster import SluiceCluster
from compat_util import consumer, create_topic, producer, wait_until
from confluent_kafka.admin import AdminClient, NewTopic
from jvm import check_java, run_java
from test_kcat import kcat_binary
import tls_certs as certs_module

PEM_KEYSTORE = {"ssl.keystore.type": "PEM", "ssl.keystore.location": "{certs}/server.pem"}
INLINE_TLS12 = {"ssl.keystore.type": "PEM", "ssl.enabled.protocols": "TLSv1.2",
                "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"}
MTLS = {**PEM_KEYSTORE, "ssl.client.auth": "required", "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "{certs}/ca.pem"}


def ssl_conf(certs, client_cert=True, **extra):
    conf = {"security.protocol": "SSL", "ssl.ca.location": certs["ca"]}
    if client_cert:
        conf.update({"ssl.certificate.location": certs["client_cert"],
                     "ssl.key.location": certs["client_key"]})
    conf.update(extra)
    return conf


def brokers_seen(bootstrap, **conf):
    """{node id: (host, port)} as Metadata answers a client of `bootstrap`."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **conf})
    md = admin.list_topics(timeout=20)
    return {b.id: (b.host, b.port) for b in md.brokers.values()}


def round_trip(bootstrap, topic, n=20, **conf):
    """Produces `n` records to `topic` and reads them back over `bootstrap` with `conf`."""
    p = producer(bootstrap, **conf)
    failed = []
    for i in range(n):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i,
                  on_delivery=lambda err, _msg: err and failed.append(err))
    assert p.flush(30) == 0 and not failed, failed[:3]
    c = consumer(bootstrap, **conf)
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        got, errors = [], []
        deadline = time.monotonic() + 30
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                errors.append(str(m.error()))
                continue
            got.append(m.value())
        assert got == [b"v%d" % i for i in range(n)], errors[-5:]
    finally:
        c.close()


def ssl_fails(bootstrap, conf):
    """Whether a client with `conf` cannot fetch Metadata (a refused TLS handshake)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **conf})
    try:
        admin.list_topics(timeout=8)
    except KafkaException:
        return True
    return False


@pytest.mark.sluice(listeners={"EXTERNAL": "PLAINTEXT"})
def test_each_listener_advertises_its_own_endpoints(broker):
    """A client of listener EXTERNAL is told EXTERNAL's port in Metadata, DescribeCluster and
    FindCoordinator; a client of PLAINTEXT the PLAINTEXT port."""
    external = broker.listener_bootstrap("EXTERNAL")
    ext_port = int(external.rsplit(":", 1)[1])
    assert {port for _, port in brokers_seen(external).values()} == {ext_port}
    assert {port for _, port in brokers_seen(broker.bootstrap).values()} == {broker.port}
    admin = AdminClient({"bootstrap.servers": external})
    cluster = admin.describe_cluster(request_timeout=20).result(timeout=30)
    assert {n.port for n in cluster.nodes} == {ext_port}
    # FindCoordinator: a group over EXTERNAL is served there (the consumer follows the answer).
    create_topic(external, "listeners-t", 1)
    round_trip(external, "listeners-t")
    c = consumer(external, **{"group.id": "g-external", "auto.offset.reset": "earliest"})
    try:
        c.subscribe(["listeners-t"])
        wait_until(lambda: (m := c.poll(0.5)) is not None and not m.error(), 30,
                   what="a record through the group coordinator on EXTERNAL")
        c.commit(offsets=[TopicPartition("listeners-t", 0, 1)], asynchronous=False)
    finally:
        c.close()


@pytest.mark.sluice(listeners={"SSL": "SSL"}, settings=PEM_KEYSTORE)
def test_ssl_listener_with_a_pem_key_file(broker, tls_certs):
    ssl = broker.listener_bootstrap("SSL")
    conf = ssl_conf(tls_certs, client_cert=False)
    ssl_port = int(ssl.rsplit(":", 1)[1])
    assert {port for _, port in brokers_seen(ssl, **conf).values()} == {ssl_port}
    create_topic(broker.bootstrap, "tls-t", 1)
    # Large enough that fetches carry many batches through the TLS stream.
    round_trip(ssl, "tls-t", n=500, **conf)
    # Plaintext still serves, and reads what came over TLS.
    round_trip(broker.bootstrap, "tls-t", n=500)
    # A TLS client to the plaintext port and a plaintext client to the TLS port fail.
    assert ssl_fails(broker.bootstrap, conf)
    assert ssl_fails(ssl, {})


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain-key", "encrypted-key"])
@pytest.mark.sluice(listeners={"SSL": "SSL"}, settings={})
def test_inline_pem_key_tls12_one_suite(request, tls_certs, encrypted):
    """`ssl.keystore.certificate.chain` and `ssl.keystore.key` inline, the key PKCS#8 or
    encrypted PKCS#8 (PBES2) with
    `ssl.key.password`; TLS 1.2 with one cipher suite."""
    if encrypted and TARGET == "kafka":
        pytest.skip("Kafka 4.4 on Java 17 cannot read a PBES2-encrypted PKCS#8 key (\"PBES2 "
                    "SecretKeyFactory not available\"); OpenSSL and Python write PBES2")
    key_pem = open(tls_certs["server_encrypted" if encrypted else "server_key"]).read()
    end = key_pem.index("-----END ")
    key_only = key_pem[:key_pem.index("-----", end + 5) + 5]
    settings = {
        **INLINE_TLS12,
        "ssl.keystore.certificate.chain": open(tls_certs["server_cert"]).read(),
        "ssl.keystore.key": key_only,
    }
    if encrypted:
        settings["ssl.key.password"] = certs_module.KEY_PASSWORD
    # The broker fixture reads the marker: the inline values are this run's files.
    request.node.get_closest_marker("sluice").kwargs["settings"] = settings
    broker = request.getfixturevalue("broker")
    ssl = broker.listener_bootstrap("SSL")
    conf = ssl_conf(tls_certs, client_cert=False)
    create_topic(broker.bootstrap, "tls-inline", 1)
    round_trip(ssl, "tls-inline", **conf)
    # A client that offers only another suite is refused.
    assert ssl_fails(ssl, {**conf, "ssl.cipher.suites": "ECDHE-ECDSA-AES256-GCM-SHA384"})


@pytest.mark.sluice(listeners={"SSL": "SSL"}, settings=MTLS)
def test_mtls_required(broker, tls_certs):
    ssl = broker.listener_bootstrap("SSL")
    create_topic(broker.bootstrap, "mtls-t", 1)
    round_trip(ssl, "mtls-t", **ssl_conf(tls_certs))
    # No certificate, or one from a CA the trust store does not hold: refused.
    assert ssl_fails(ssl, ssl_conf(tls_certs, client_cert=False))
    assert ssl_fails(ssl, ssl_conf(tls_certs, client_cert=False, **{
        "ssl.certificate.location": tls_certs["stranger_cert"],
        "ssl.key.location": tls_certs["stranger_key"]}))
    # The broker still serves the good client.
    assert brokers_seen(ssl, **ssl_conf(tls_certs))


def kafka_request_bytes():
    """An ApiVersions v0 request frame (plaintext Kafka)."""
    body = struct.pack(">hhih", 18, 0, 7, 4) + b"test"
    return struct.pack(">i", len(body)) + body


@pytest.mark.sluice(listeners={"SSL": "SSL"}, settings=PEM_KEYSTORE)
def test_bad_input_on_the_tls_port_closes_that_connection_only(broker, tls_certs):
    ssl = broker.listener_bootstrap("SSL")
    host, port = ssl.rsplit(":", 1)
    conf = ssl_conf(tls_certs, client_cert=False)
    create_topic(broker.bootstrap, "tls-bad", 1)
    # A client stalled mid-handshake (half a ClientHello), held open throughout.
    stalled = socket.create_connection((host, int(port)))
    stalled.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
    for payload in (kafka_request_bytes(), b"\x00" * 3 + b"garbage" * 100,
                    b"\x16\x03\x01\x00\x05hello"):
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(payload)
            # The broker answers no Kafka response: it closes (possibly after a TLS alert).
            data = b""
            try:
                while True:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    data += chunk
            except (ConnectionResetError, socket.timeout):
                pass
            assert not data.startswith(struct.pack(">i", len(data) - 4)) or len(data) < 8, data
        round_trip(ssl, "tls-bad", n=5, **conf)
        round_trip(broker.bootstrap, "tls-bad", n=5)
    stalled.close()


@pytest.mark.sluice(listeners={"SSL": "SSL"}, settings=MTLS)
def test_kcat_over_ssl(broker, tls_certs):
    kcat = kcat_binary()
    ssl = broker.listener_bootstrap("SSL")
    create_topic(broker.bootstrap, "kcat-tls", 1)
    opts = ["-b", ssl, "-X", "security.protocol=SSL", "-X", f"ssl.ca.location={tls_certs['ca']}",
            "-X", f"ssl.certificate.location={tls_certs['client_cert']}",
            "-X", f"ssl.key.location={tls_certs['client_key']}"]
    lines = "\n".join(f"line-{i}" for i in range(10)) + "\n"
    subprocess.run([kcat, *opts, "-P", "-t", "kcat-tls"], input=lines, text=True, check=True,
                   timeout=60)
    out = subprocess.run([kcat, *opts, "-C", "-t", "kcat-tls", "-o", "beginning", "-e"],
                         stdout=subprocess.PIPE, text=True, check=True, timeout=60).stdout
    assert out.split() == [f"line-{i}" for i in range(10)]


@pytest.mark.sluice(listeners={"SSL": "SSL"}, settings=MTLS)
def test_java_console_producer_consumer_over_mtls(broker, tls_certs, java_classpath, tmp_path):
    ssl = broker.listener_bootstrap("SSL")
    props = tmp_path / "client.properties"
    client_pem = tmp_path / "client-keystore.pem"
    client_pem.write_text(open(tls_certs["client_key"]).read() + open(tls_certs["client_cert"]).read())
    props.write_text("\n".join([
        "security.protocol=SSL",
        "ssl.truststore.type=PEM", f"ssl.truststore.location={tls_certs['ca']}",
        "ssl.keystore.type=PEM", f"ssl.keystore.location={client_pem}",
    ]) + "\n")
    topics = "org.apache.kafka.tools.TopicCommand"
    check_java(run_java(java_classpath, topics, ["--bootstrap-server", ssl, "--command-config",
                                                 props, "--create", "--topic", "java-tls",
                                                 "--partitions", "1", "--replication-factor", "1"]))
    lines = [f"value-{i}" for i in range(10)]
    check_java(run_java(java_classpath, "org.apache.kafka.tools.ConsoleProducer",
                        ["--bootstrap-server", ssl, "--topic", "java-tls",
                         "--command-config", props],
                        stdin="\n".join(lines) + "\n"))
    out = check_java(run_java(java_classpath, "org.apache.kafka.tools.consumer.ConsoleConsumer",
                              ["--bootstrap-server", ssl, "--topic", "java-tls",
                               "--from-beginning", "--max-messages", "10", "--timeout-ms",
                               "30000", "--command-config", props]))
    assert [l for l in out.splitlines() if l.startswith("value-")] == lines, out


@pytest.mark.sluice_only("starts a multi-process Sluice cluster")
def test_cluster_replicates_over_the_internal_listener_and_serves_ssl_outside(
        sluice_bin, tls_certs, tmp_path):
    """Three nodes: INTERNAL (PLAINTEXT, inter.broker.listener.name) for replication and
    forwarding, EXTERNAL (SSL) for clients. Clients of each listener are told that listener's
    endpoints of every broker; acks=all writes through EXTERNAL reach all replicas."""
    c = SluiceCluster(sluice_bin, tmp_path / "cluster", nodes=3, preexec_fn=_die_with_parent,
                      settings={"listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SSL",
                                "inter.broker.listener.name": "INTERNAL",
                                "ssl.keystore.location": tls_certs["server"],
                                "broker.heartbeat.interval.ms": 500,
                                "broker.session.timeout.ms": 2000})
    external = {i: free_port() for i in c.nodes}
    c.node_settings = {i: {"listeners": f"INTERNAL://{n.bootstrap},EXTERNAL://127.0.0.1:{external[i]}"}
                       for i, n in c.nodes.items()}
    try:
        c.start()
        ext = f"127.0.0.1:{external[1]}"
        conf = ssl_conf(tls_certs, client_cert=False)
        wait_until(lambda: len(brokers_seen(ext, **conf)) == 3, 30, what="3 brokers over EXTERNAL")
        assert sorted(p for _, p in brokers_seen(ext, **conf).values()) == sorted(external.values())
        internal = sorted(n.port for n in c.nodes.values())
        assert sorted(p for _, p in brokers_seen(c.nodes[2].bootstrap).values()) == internal
        a = AdminClient({"bootstrap.servers": ext, **conf})
        a.create_topics([NewTopic("cluster-tls", 1, 3)])["cluster-tls"].result(timeout=30)
        wait_until(lambda: all(len(p.isrs) == 3 for p in a.list_topics("cluster-tls", timeout=10)
                               .topics["cluster-tls"].partitions.values()),
                   30, what="3 in-sync replicas")
        round_trip(ext, "cluster-tls", n=50, **conf)
    finally:
        c.stop()


def served_certificate(bootstrap, ca):
    """The DER certificate a TLS listener presents."""
    import ssl
    host, port = bootstrap.rsplit(":", 1)
    context = ssl.create_default_context(cafile=ca)
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname=host) as tls:
            return tls.getpeercert(binary_form=True)


def pem_certificate_der(path, index=0):
    """The `index`th certificate of a PEM file, DER."""
    import ssl
    text = open(path).read()
    blocks = text.split("-----BEGIN CERTIFICATE-----")[1:]
    return ssl.PEM_cert_to_DER_cert("-----BEGIN CERTIFICATE-----" + blocks[index])


@pytest.mark.sluice(listeners={"SSL": "SSL"}, settings=PEM_KEYSTORE)
def test_keystore_rotation_without_a_restart(broker, tls_certs):
    """`listener.name.ssl.ssl.keystore.location` changed through IncrementalAlterConfigs on
    this broker: a store that does not load is refused; a good one is served to new
    connections, and clients keep working."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource
    ssl_bootstrap = broker.listener_bootstrap("SSL")
    old = pem_certificate_der(tls_certs["server"])
    new = pem_certificate_der(tls_certs["server2"])
    assert served_certificate(ssl_bootstrap, tls_certs["ca"]) == old
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    node = admin.describe_cluster(request_timeout=20).result(timeout=30).nodes[0].id

    def keystore(path):
        return ConfigResource(ConfigResource.Type.BROKER, str(node), incremental_configs=[
            ConfigEntry("listener.name.ssl.ssl.keystore.location", path,
                        incremental_operation=AlterConfigOpType.SET)])

    # A key store that does not load is refused, and the old one kept.
    bad = keystore(tls_certs["dir"] + "/missing.pem")
    with pytest.raises(KafkaException):
        admin.incremental_alter_configs([bad])[bad].result(timeout=30)
    assert served_certificate(ssl_bootstrap, tls_certs["ca"]) == old
    good = keystore(tls_certs["server2"])
    admin.incremental_alter_configs([good])[good].result(timeout=30)
    wait_until(lambda: served_certificate(ssl_bootstrap, tls_certs["ca"]) == new, 30,
               what="the new certificate served")
    create_topic(broker.bootstrap, "tls-rotated", 1)
    round_trip(ssl_bootstrap, "tls-rotated", **ssl_conf(tls_certs, client_cert=False))
