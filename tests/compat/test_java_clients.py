"""Kafka's Java client (kafka-clients 4.4) against Sluice (issue 17). Each test runs one
scenario of tests/java/.../ClientScenarios.java against a fresh broker; the checks live in the
Java program, which exits non-zero with the failed check and the client's log."""

import pytest

from jvm import check_java, run_java

MAIN = "sluice.compat.ClientScenarios"
# No initial rebalance delay: a group forms as soon as its members have joined.
GROUP_SETTINGS = {"group.initial.rebalance.delay.ms": 0}


def scenario(classpath, broker, name, *args, timeout=120):
    return check_java(run_java(classpath, MAIN, [name, broker.bootstrap, *args], timeout=timeout),
                      expect_line=f"PASS {name}")


def test_java_idempotent_producer_keyed_order(broker, java_classpath):
    scenario(java_classpath, broker, "producer")


@pytest.mark.sluice(settings=GROUP_SETTINGS)
@pytest.mark.parametrize("assignor", [
    pytest.param("range", marks=pytest.mark.long("the eager assignor's case, about 10 s (CI "
                                                 "time; the cooperative one stays)")),
    "cooperative-sticky"])
def test_java_group_members_leave_and_die(broker, java_classpath, assignor):
    scenario(java_classpath, broker, "group", assignor, timeout=180)


@pytest.mark.sluice(settings=GROUP_SETTINGS)
def test_java_group_protocol_consumer_fails_at_once(broker, java_classpath):
    scenario(java_classpath, broker, "consumer-protocol")


@pytest.mark.sluice(settings=GROUP_SETTINGS)
def test_java_commit_committed_seek_offsets_for_times(broker, java_classpath):
    scenario(java_classpath, broker, "offsets")


@pytest.mark.sluice(settings=GROUP_SETTINGS)
def test_java_admin_client(broker, java_classpath):
    scenario(java_classpath, broker, "admin")
