"""SASL/OAUTHBEARER (KIP-255, RFC 7628; extensions KIP-342) and KIP-368 re-authentication
(issue 29 points 3 and 6), as Kafka 4.4 serves them, each test also run against Kafka 4.4
configured the same way (SLUICE_COMPAT_TARGET=kafka):

- Kafka's unsecured-JWS validator (no `sasl.server.callback.handler.class`): the Java console
  tools with `OAuthBearerLoginModule unsecuredLoginStringClaim_sub`, confluent-kafka with an
  `oauth_cb`; an expired token, one without a subject, or one lacking the required scope
  refused with SASL_AUTHENTICATION_FAILED after RFC 7628's error challenge;
- the JWKS validator (`OAuthBearerValidatorCallbackHandler`): RS256 tokens checked against keys
  served by a small HTTP server of the test (keys made at run time with `cryptography`);
  expired, wrong audience, bad signature, unknown key id refused, other clients unaffected;
- re-authentication with `connections.max.reauth.ms=3000`: SaslAuthenticate's
  `session_lifetime_ms`, a Java consumer and a librdkafka producer working across several
  lifetimes (they re-authenticate on their connections), a raw client that does not
  re-authenticate disconnected at its next request after the lifetime, a re-authentication
  that changes the principal refused with Kafka's message."""

import base64
import http.server
import json
import socket
import struct
import threading
import time

import pytest
from confluent_kafka import KafkaError

import kafka_wire as kw
from compat_util import create_topic, producer
from conftest import TARGET
from jvm import check_java, run_java
from test_sasl import auth_error, closed_unanswered, handshake
from test_tls import round_trip

API_SASL_AUTHENTICATE = 36
BROKER_JAAS = ('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
               'unsecuredLoginStringClaim_sub="broker"')
LISTENER = "listener.name.sasl_plaintext."
UNSECURED = {
    "sasl.enabled.mechanisms": "OAUTHBEARER",
    LISTENER + "oauthbearer.sasl.jaas.config":
        BROKER_JAAS + ' unsecuredValidatorRequiredScope="kafka";',
    "connection.failed.authentication.delay.ms": 0,
}
REAUTH = {**UNSECURED, LISTENER + "oauthbearer.connections.max.reauth.ms": 3000}
INVALID_TOKEN = '{"status":"invalid_token"}'


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


JWKS_PORT = _free_port()
JWKS = {
    "sasl.enabled.mechanisms": "OAUTHBEARER",
    LISTENER + "oauthbearer.sasl.jaas.config": BROKER_JAAS + ";",
    LISTENER + "oauthbearer.sasl.server.callback.handler.class":
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    "sasl.oauthbearer.jwks.endpoint.url": f"http://127.0.0.1:{JWKS_PORT}/jwks.json",
    "sasl.oauthbearer.expected.audience": "sluice-test",
    "sasl.oauthbearer.expected.issuer": "https://idp.test",
    "connection.failed.authentication.delay.ms": 0,
}


def b64(data):
    if isinstance(data, str):
        data = data.encode()
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsecured_token(sub="alice", lifetime_s=3600, scope="kafka", **claims):
    now = int(time.time())
    body = {"sub": sub, "iat": now, "exp": now + lifetime_s, "scope": scope, **claims}
    body = {k: v for k, v in body.items() if v is not None}
    return f"{b64(json.dumps({'alg': 'none'}))}.{b64(json.dumps(body))}."


def oauth_conf(token_fn, protocol="SASL_PLAINTEXT"):
    """confluent-kafka settings whose `oauth_cb` hands out `token_fn()` (a token string)."""
    def cb(_config):
        # librdkafka refuses a token whose expiry it is told is past: tell it a future one,
        # so that the broker is the one to judge the token.
        token = token_fn()
        claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
        return token, max(float(claims.get("exp", 0)), time.time() + 3600), claims.get("sub", "x")
    return {"security.protocol": protocol, "sasl.mechanism": "OAUTHBEARER", "oauth_cb": cb}


def first_message(token, authzid="", extensions=()):
    ext = "".join(f"{k}={v}\x01" for k, v in extensions)
    authz = f"a={authzid}" if authzid else ""
    return f"n,{authz},\x01auth=Bearer {token}\x01{ext}\x01".encode()


def authenticate_v1(sock, token, correlation_id=2):
    """SaslAuthenticate v1: (error code, error message, auth bytes, session lifetime ms)."""
    body = kw.header_v1(API_SASL_AUTHENTICATE, 1, correlation_id) + kw.bytes_(token)
    sock.sendall(kw.frame(body))
    payload = kw.read_frame(sock)
    corr, error, n = struct.unpack(">ihh", payload[:8])
    assert corr == correlation_id
    pos = 8
    message = None
    if n >= 0:
        message, pos = payload[pos:pos + n].decode(), pos + n
    (m,) = struct.unpack(">i", payload[pos:pos + 4])
    auth = payload[pos + 4:pos + 4 + max(m, 0)]
    pos += 4 + max(m, 0)
    (lifetime,) = struct.unpack(">q", payload[pos:pos + 8])
    return error, message, auth, lifetime


def login(sock, token, correlation_id=1):
    assert handshake(sock, "OAUTHBEARER", correlation_id) == (0, ["OAUTHBEARER"])
    return authenticate_v1(sock, first_message(token), correlation_id + 1)


def api_versions_served(sock, correlation_id):
    sock.sendall(kw.api_versions_v0(correlation_id))
    return struct.unpack(">ih", kw.read_frame(sock)[:6]) == (correlation_id, 0)


def java_props(tmp_path, sub="alice"):
    props = tmp_path / f"oauth-{sub}.properties"
    props.write_text("\n".join([
        "security.protocol=SASL_PLAINTEXT", "sasl.mechanism=OAUTHBEARER",
        "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
        f'required unsecuredLoginStringClaim_sub="{sub}" unsecuredLoginListClaim_scope=",kafka";',
    ]) + "\n")
    return props


@pytest.mark.sluice(listeners={"SASL_PLAINTEXT": "SASL_PLAINTEXT"}, settings=UNSECURED)
def test_unsecured_tokens_with_confluent_and_java(broker, java_classpath, tmp_path):
    sasl = broker.listener_bootstrap("SASL_PLAINTEXT")
    create_topic(broker.bootstrap, "oauth-t", 1)
    round_trip(sasl, "oauth-t", **oauth_conf(unsecured_token))
    for why, token_fn in [
        ("expired", lambda: unsecured_token(lifetime_s=-60)),
        ("no subject", lambda: unsecured_token(sub=None)),
        ("scope lacking kafka", lambda: unsecured_token(scope="other")),
    ]:
        err = auth_error(sasl, oauth_conf(token_fn))
        assert err is not None and err.code() == KafkaError._AUTHENTICATION, (why, err)
    props = java_props(tmp_path)
    lines = [f"value-{i}" for i in range(10)]
    check_java(run_java(java_classpath, "org.apache.kafka.tools.ConsoleProducer",
                        ["--bootstrap-server", sasl, "--topic", "oauth-t",
                         "--command-config", props], stdin="\n".join(lines) + "\n"))
    out = check_java(run_java(java_classpath, "org.apache.kafka.tools.consumer.ConsoleConsumer",
                              ["--bootstrap-server", sasl, "--topic", "oauth-t",
                               "--from-beginning", "--max-messages", "30", "--timeout-ms",
                               "30000", "--command-config", props]))
    assert [l for l in out.splitlines() if l.startswith("value-")] == lines, out
    # The good client is still served.
    round_trip(sasl, "oauth-t", n=5, **oauth_conf(unsecured_token))


@pytest.mark.sluice(listeners={"SASL_PLAINTEXT": "SASL_PLAINTEXT"}, settings=UNSECURED)
def test_oauthbearer_on_the_wire_as_kafka(broker):
    sasl = broker.listener_bootstrap("SASL_PLAINTEXT")
    # A good token with an authzid and an extension (KIP-342): accepted.
    with kw.connect(sasl) as s:
        assert handshake(s, "OAUTHBEARER") == (0, ["OAUTHBEARER"])
        error, _msg, auth, lifetime = authenticate_v1(
            s, first_message(unsecured_token(lifetime_s=600), "alice", [("traceId", "t-1")]))
        assert (error, auth) == (0, b"")
        # No connections.max.reauth.ms: the session lasts as long as the token.
        assert 590_000 <= lifetime <= 600_000, lifetime
        assert api_versions_served(s, 3)
    # An expired token: RFC 7628's error challenge, the client's 0x01, then the failure.
    with kw.connect(sasl) as s:
        error, _msg, auth, _lifetime = login(s, unsecured_token(lifetime_s=-60))
        assert (error, auth) == (0, INVALID_TOKEN.encode())
        error, message, _auth, _lifetime = authenticate_v1(s, b"\x01", 3)
        assert (error, message) == (58, INVALID_TOKEN)
        assert closed_unanswered(s)
    # Lacking the required scope: insufficient_scope, naming it.
    with kw.connect(sasl) as s:
        error, _msg, auth, _lifetime = login(s, unsecured_token(scope="other"))
        assert error == 0
        assert json.loads(auth) == {"status": "insufficient_scope", "scope": "[kafka]"}
    # An authzid other than the token's subject.
    with kw.connect(sasl) as s:
        assert handshake(s, "OAUTHBEARER")[0] == 0
        error, message, _auth, _lifetime = authenticate_v1(
            s, first_message(unsecured_token(), "bob"))
        assert error == 58 and "authorization id (bob)" in message, message
        assert closed_unanswered(s)
    # Not an OAUTHBEARER message at all.
    with kw.connect(sasl) as s:
        assert handshake(s, "OAUTHBEARER")[0] == 0
        error, message, _auth, _lifetime = authenticate_v1(s, b"\0alice\0secret")
        assert error == 58, message
        assert closed_unanswered(s)


class _JwksHandler(http.server.BaseHTTPRequestHandler):
    body = b'{"keys":[]}'

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *_args):
        pass


def _rsa_key():
    from cryptography.hazmat.primitives.asymmetric import rsa
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _jwk(key, kid):
    numbers = key.public_key().public_numbers()
    as_bytes = (lambda n: n.to_bytes((n.bit_length() + 7) // 8, "big"))
    return {"kty": "RSA", "kid": kid, "alg": "RS256", "use": "sig",
            "n": b64(as_bytes(numbers.n)), "e": b64(as_bytes(numbers.e))}


def signed_token(key, kid="k1", lifetime_s=600, **claims):
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding
    now = int(time.time())
    body = {"sub": "carol", "aud": "sluice-test", "iss": "https://idp.test", "iat": now,
            "exp": now + lifetime_s, **claims}
    signing_input = (f"{b64(json.dumps({'alg': 'RS256', 'typ': 'JWT', 'kid': kid}))}."
                     f"{b64(json.dumps(body))}")
    signature = key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input}.{b64(signature)}"


@pytest.fixture
def jwks_server(monkeypatch):
    """Serves a JWKS with one RSA key (kid k1) on JWKS_PORT; yields the signing key. Kafka 4.4
    fetches only URLs named in the `org.apache.kafka.sasl.oauthbearer.allowed.urls` system
    property (set through KAFKA_OPTS)."""
    key = _rsa_key()
    handler = type("Handler", (_JwksHandler,),
                   {"body": json.dumps({"keys": [_jwk(key, "k1")]}).encode()})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", JWKS_PORT), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("KAFKA_OPTS", "-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls="
                       + JWKS["sasl.oauthbearer.jwks.endpoint.url"])
    try:
        yield key
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.sluice(listeners={"SASL_PLAINTEXT": "SASL_PLAINTEXT"}, settings=JWKS)
def test_jwks_signed_tokens(jwks_server, broker):
    key = jwks_server
    sasl = broker.listener_bootstrap("SASL_PLAINTEXT")
    create_topic(broker.bootstrap, "jwks-t", 1)
    round_trip(sasl, "jwks-t", **oauth_conf(lambda: signed_token(key)))
    other = _rsa_key()
    for why, token_fn in [
        ("expired", lambda: signed_token(key, lifetime_s=-120)),
        ("wrong audience", lambda: signed_token(key, aud="someone-else")),
        ("wrong issuer", lambda: signed_token(key, iss="https://evil.test")),
        ("bad signature", lambda: signed_token(other)),
        ("unknown kid", lambda: signed_token(other, kid="k9")),
        ("unsecured", lambda: unsecured_token()),
    ]:
        err = auth_error(sasl, oauth_conf(token_fn))
        assert err is not None and err.code() == KafkaError._AUTHENTICATION, (why, err)
    with kw.connect(sasl) as s:
        error, _msg, auth, _lifetime = login(s, signed_token(key, aud="someone-else"))
        assert (error, auth) == (0, INVALID_TOKEN.encode())
        assert authenticate_v1(s, b"\x01", 3)[:2] == (58, INVALID_TOKEN)
    with kw.connect(sasl) as s:
        error, _msg, auth, lifetime = login(s, signed_token(key, lifetime_s=300))
        assert (error, auth) == (0, b"") and 290_000 <= lifetime <= 300_000, lifetime
    round_trip(sasl, "jwks-t", n=5, **oauth_conf(lambda: signed_token(key)))


@pytest.mark.sluice(listeners={"SASL_PLAINTEXT": "SASL_PLAINTEXT"}, settings=REAUTH)
def test_reauthentication_on_the_wire(broker):
    sasl = broker.listener_bootstrap("SASL_PLAINTEXT")
    # The session lifetime is the lesser of the token's and connections.max.reauth.ms.
    with kw.connect(sasl) as s:
        error, _msg, _auth, lifetime = login(s, unsecured_token())
        assert (error, lifetime) == (0, 3000)
        assert api_versions_served(s, 3)
        # Re-authenticating as the same principal on the open connection: a new session.
        error, _msg, _auth, lifetime = login(s, unsecured_token(), 4)
        assert (error, lifetime) == (0, 3000)
        assert api_versions_served(s, 6)
        # Past the lifetime without re-authenticating: the next request closes the connection.
        time.sleep(3.5)
        s.sendall(kw.api_versions_v0(7))
        assert closed_unanswered(s)
    with kw.connect(sasl) as s:
        error, _msg, _auth, lifetime = login(s, unsecured_token(lifetime_s=2))
        assert error == 0 and 1000 <= lifetime <= 2000, lifetime
    # A re-authentication may not change the principal.
    with kw.connect(sasl) as s:
        assert login(s, unsecured_token("alice"))[0] == 0
        error, message, _auth, _lifetime = login(s, unsecured_token("bob"), 3)
        assert error == 58
        assert message == "Cannot change principals during re-authentication from User.alice: User.bob"
        assert closed_unanswered(s)


@pytest.mark.sluice(listeners={"SASL_PLAINTEXT": "SASL_PLAINTEXT"}, settings=REAUTH)
def test_clients_reauthenticate_across_lifetimes(broker, java_classpath, tmp_path):
    """A Java consumer and a librdkafka producer keep working for several 3 s lifetimes;
    on Sluice the log shows that no connection of theirs was closed as expired."""
    sasl = broker.listener_bootstrap("SASL_PLAINTEXT")
    create_topic(broker.bootstrap, "reauth-t", 1)
    count = 16
    result = {}

    def consume():
        result["run"] = run_java(
            java_classpath, "org.apache.kafka.tools.consumer.ConsoleConsumer",
            ["--bootstrap-server", sasl, "--topic", "reauth-t", "--from-beginning",
             "--max-messages", str(count), "--timeout-ms", "30000",
             "--command-config", java_props(tmp_path)], timeout=90)

    consumer = threading.Thread(target=consume)
    consumer.start()
    p = producer(sasl, **oauth_conf(unsecured_token))
    failed = []
    # 16 records 0.7 s apart: about 11 s, almost four session lifetimes.
    for i in range(count):
        p.produce("reauth-t", value=f"value-{i}".encode(),
                  on_delivery=lambda err, _msg: err and failed.append(err))
        p.flush(10)
        time.sleep(0.7)
    assert p.flush(30) == 0 and not failed, failed[:3]
    consumer.join(120)
    out = check_java(result["run"])
    assert [l for l in out.splitlines() if l.startswith("value-")] == \
        [f"value-{i}" for i in range(count)], out
    if TARGET == "sluice":
        log = broker.log_path.read_text(errors="replace")
        assert "SASL session expired" not in log, log[-4000:]
