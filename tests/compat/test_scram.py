"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (KIP-84, KIP-554; issue 29 point 3): credentials set
and described with `kafka-configs.sh --entity-type users` (AlterUserScramCredentials,
DescribeUserScramCredentials) and kept as metadata records; confluent-kafka (librdkafka) and
the Java client authenticate with either mechanism over SASL_PLAINTEXT and SASL_SSL; a wrong
password fails with SASL_AUTHENTICATION_FAILED and closes that connection only; a deleted
credential stops new logins; credentials survive a restart; the admin API's per-user errors
are Kafka's. Each test also runs against Kafka 4.4 configured the same way
(SLUICE_COMPAT_TARGET=kafka)."""

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialDeletion, UserScramCredentialUpsertion)

from compat_util import create_topic
from jvm import check_java, run_java
from test_sasl import auth_error, sasl_conf
from test_tls import round_trip

CONFIGS = "org.apache.kafka.tools.ConfigCommand"
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"


def scram_settings(listener, **extra):
    """A listener serving both SCRAM mechanisms (Kafka needs a ScramLoginModule entry per
    mechanism; Sluice reads none)."""
    lower = listener.lower()
    return {"sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
            f"listener.name.{lower}.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
            f"listener.name.{lower}.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
            "connection.failed.authentication.delay.ms": 0, **extra}


SCRAM = scram_settings("SASL_PLAINTEXT")
SCRAM_SSL = scram_settings("SASL_SSL", **{"ssl.keystore.type": "PEM",
                                          "ssl.keystore.location": "{certs}/server.pem"})


def configs(cp, bootstrap, *args):
    return check_java(run_java(cp, CONFIGS, ["--bootstrap-server", bootstrap, *args],
                               timeout=90))


def add_users(cp, bootstrap):
    # One mechanism per request: Kafka's controller refuses a user named twice in one
    # AlterUserScramCredentials (DUPLICATE_RESOURCE), both mechanisms included.
    configs(cp, bootstrap, "--alter", "--add-config",
            "SCRAM-SHA-256=[iterations=8192,password=alice-secret]",
            "--entity-type", "users", "--entity-name", "alice")
    configs(cp, bootstrap, "--alter", "--add-config", "SCRAM-SHA-512=[password=alice-secret]",
            "--entity-type", "users", "--entity-name", "alice")
    configs(cp, bootstrap, "--alter", "--add-config", "SCRAM-SHA-512=[password=bob-secret]",
            "--entity-type", "users", "--entity-name", "bob")


@pytest.mark.sluice(listeners={"SASL_PLAINTEXT": "SASL_PLAINTEXT"}, settings=SCRAM)
def test_scram_users_with_kafka_configs_and_clients(broker, java_classpath, tmp_path):
    cp = java_classpath
    sasl = broker.listener_bootstrap("SASL_PLAINTEXT")
    add_users(cp, broker.bootstrap)
    out = configs(cp, broker.bootstrap, "--describe", "--entity-type", "users",
                  "--entity-name", "alice")
    assert "SCRAM-SHA-256=iterations=8192" in out, out
    assert "SCRAM-SHA-512=iterations=4096" in out, out
    out = configs(cp, broker.bootstrap, "--describe", "--entity-type", "users")
    assert "'alice'" in out and "'bob'" in out, out

    create_topic(broker.bootstrap, "scram-t", 1)
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        round_trip(sasl, "scram-t", **sasl_conf(mechanism=mechanism, password="alice-secret"))
    round_trip(sasl, "scram-t", n=5,
               **sasl_conf("bob", "bob-secret", mechanism="SCRAM-SHA-512"))
    # A wrong password, an unknown user, a mechanism the user has no credential for: refused,
    # the good clients still served.
    for conf in (sasl_conf(mechanism="SCRAM-SHA-256", password="wrong"),
                 sasl_conf("mallory", "x", mechanism="SCRAM-SHA-256"),
                 sasl_conf("bob", "bob-secret", mechanism="SCRAM-SHA-256")):
        err = auth_error(sasl, conf)
        assert err is not None and err.code() == KafkaError._AUTHENTICATION, err
        assert "SASL_AUTHENTICATION_FAILED" in err.str() or "invalid credentials" in err.str(), \
            err
    round_trip(sasl, "scram-t", n=5, **sasl_conf(mechanism="SCRAM-SHA-512",
                                                 password="alice-secret"))

    # The Java client (console producer and consumer) with SCRAM-SHA-512.
    props = tmp_path / "client.properties"
    props.write_text("\n".join([
        "security.protocol=SASL_PLAINTEXT", "sasl.mechanism=SCRAM-SHA-512",
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="alice" password="alice-secret";']) + "\n")
    create_topic(broker.bootstrap, "scram-java-t", 1)
    java_produce_consume(cp, sasl, "scram-java-t", props)

    # Deleting alice's SCRAM-SHA-256 credential stops new SCRAM-SHA-256 logins only.
    configs(cp, broker.bootstrap, "--alter", "--delete-config", "SCRAM-SHA-256",
            "--entity-type", "users", "--entity-name", "alice")
    err = auth_error(sasl, sasl_conf(mechanism="SCRAM-SHA-256", password="alice-secret"))
    assert err is not None and err.code() == KafkaError._AUTHENTICATION, err
    round_trip(sasl, "scram-t", n=5, **sasl_conf(mechanism="SCRAM-SHA-512",
                                                 password="alice-secret"))

    # The credentials survive a restart (metadata log and snapshot).
    broker.restart()
    round_trip(sasl, "scram-t", n=5, **sasl_conf(mechanism="SCRAM-SHA-512",
                                                 password="alice-secret"))
    out = configs(cp, broker.bootstrap, "--describe", "--entity-type", "users",
                  "--entity-name", "alice")
    assert "SCRAM-SHA-512=iterations=4096" in out and "SCRAM-SHA-256" not in out, out


def java_produce_consume(cp, bootstrap, topic, props):
    lines = [f"value-{i}" for i in range(10)]
    check_java(run_java(cp, "org.apache.kafka.tools.ConsoleProducer",
                        ["--bootstrap-server", bootstrap, "--topic", topic,
                         "--command-config", props], stdin="\n".join(lines) + "\n"))
    out = check_java(run_java(cp, "org.apache.kafka.tools.consumer.ConsoleConsumer",
                              ["--bootstrap-server", bootstrap, "--topic", topic,
                               "--from-beginning", "--max-messages", "10", "--timeout-ms",
                               "30000", "--command-config", props]))
    assert [l for l in out.splitlines() if l.startswith("value-")] == lines, out


def test_scram_admin_errors_as_kafka(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    def alter(*alterations):
        futures = admin.alter_user_scram_credentials(list(alterations))
        results = {}
        for user, f in futures.items():
            try:
                f.result(30)
                results[user] = None
            except KafkaException as e:
                results[user] = e.args[0].code()
        return results

    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192)
    ok = UserScramCredentialUpsertion("carol", info, b"carol-secret", b"salt-salt-salt")
    assert alter(ok) == {"carol": None}
    few = UserScramCredentialUpsertion("dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256,
                                                                    1000), b"pw")
    many = UserScramCredentialUpsertion("erin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512,
                                                                     20000), b"pw")
    missing = UserScramCredentialDeletion("frank", ScramMechanism.SCRAM_SHA_256)
    assert alter(few, many, missing) == {
        "dave": KafkaError.UNACCEPTABLE_CREDENTIAL,
        "erin": KafkaError.UNACCEPTABLE_CREDENTIAL,
        "frank": KafkaError.RESOURCE_NOT_FOUND}
    twice = alter(UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_256),
                  UserScramCredentialUpsertion("carol", info, b"other"))
    assert twice == {"carol": KafkaError.DUPLICATE_RESOURCE}

    described = admin.describe_user_scram_credentials(["carol"])["carol"].result(30)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == \
        [(ScramMechanism.SCRAM_SHA_256, 8192)]
    with pytest.raises(KafkaException) as e:
        admin.describe_user_scram_credentials(["nobody"])["nobody"].result(30)
    assert e.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND
    every = admin.describe_user_scram_credentials().result(30)
    assert set(every) >= {"carol"}
    assert alter(UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_256)) == \
        {"carol": None}


@pytest.mark.sluice(listeners={"SASL_SSL": "SASL_SSL"}, settings=SCRAM_SSL)
def test_scram_over_ssl_with_confluent_and_java(broker, tls_certs, java_classpath, tmp_path):
    cp = java_classpath
    sasl_ssl = broker.listener_bootstrap("SASL_SSL")
    add_users(cp, broker.bootstrap)
    create_topic(broker.bootstrap, "scram-ssl-t", 1)
    tls = {"ssl.ca.location": tls_certs["ca"]}
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        round_trip(sasl_ssl, "scram-ssl-t",
                   **sasl_conf(mechanism=mechanism, password="alice-secret",
                               protocol="SASL_SSL", **tls))
    err = auth_error(sasl_ssl, sasl_conf(mechanism="SCRAM-SHA-256", password="wrong",
                                         protocol="SASL_SSL", **tls))
    assert err is not None and err.code() == KafkaError._AUTHENTICATION, err
    props = tmp_path / "client.properties"
    props.write_text("\n".join([
        "security.protocol=SASL_SSL", "sasl.mechanism=SCRAM-SHA-256",
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="alice" password="alice-secret";',
        "ssl.truststore.type=PEM", f"ssl.truststore.location={tls_certs['ca']}"]) + "\n")
    create_topic(broker.bootstrap, "scram-ssl-java-t", 1)
    java_produce_consume(cp, sasl_ssl, "scram-ssl-java-t", props)
