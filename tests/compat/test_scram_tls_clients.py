"""franz-go and KafkaJS with SASL/SCRAM over TLS (issue 29 point 7; KIP-84): on a SASL_SSL
listener serving SCRAM-SHA-256 and SCRAM-SHA-512, each client, with each mechanism, creates a
topic, produces records and consumes them back, and a wrong password is refused with
SASL_AUTHENTICATION_FAILED. The SCRAM users are made with kafka-configs.sh as in
test_scram.py. The client programs are tests/go/scram_tls_test.go and
tests/node/scram_tls.js. Each test also runs against Kafka 4.4 configured the same way
(SLUICE_COMPAT_TARGET=kafka)."""

import os
import subprocess
import time

import pytest

from test_go_clients import go_test_binary, run_go_test  # noqa: F401 (a fixture)
from test_kafkajs import kafkajs  # noqa: F401 (a fixture)
from test_scram import SCRAM_SSL, add_users

SECURED = pytest.mark.sluice(listeners={"SASL_SSL": "SASL_SSL"}, settings=SCRAM_SSL)


@SECURED
def test_franz_go_scram_over_tls(broker, tls_certs, java_classpath, go_test_binary):  # noqa: F811
    add_users(java_classpath, broker.bootstrap)
    run_go_test(go_test_binary, "TestFranzScramOverTLS",
                {"SLUICE_SASL_SSL_BOOTSTRAP": broker.listener_bootstrap("SASL_SSL"),
                 "SLUICE_CA": tls_certs["ca"], "SLUICE_SCRAM_USER": "alice",
                 "SLUICE_SCRAM_PASSWORD": "alice-secret"})


@SECURED
def test_kafkajs_scram_over_tls(broker, tls_certs, java_classpath, kafkajs):  # noqa: F811
    add_users(java_classpath, broker.bootstrap)
    cmd = ["node", "scram_tls.js", broker.listener_bootstrap("SASL_SSL"), tls_certs["ca"],
           "alice", "alice-secret", "kafkajs-scram-tls"]
    started = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=kafkajs, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=150,
                              env=dict(os.environ, KAFKAJS_NO_PARTITIONER_WARNING="1"))
        code, out = proc.returncode, proc.stdout
    except subprocess.TimeoutExpired as e:
        code, out = None, (e.stdout or b"").decode("utf-8", "replace") + "\n=== killed (a hang)"
    if code != 0 or "PASS scram-tls" not in out:
        pytest.fail(f"command: {' '.join(cmd)} (in {kafkajs})\nexit: {code} after "
                    f"{time.monotonic() - started:.1f} s\noutput:\n{out[-12000:]}\n"
                    f"broker log:\n{broker.log_tail()}", pytrace=False)
