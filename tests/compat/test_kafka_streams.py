"""Kafka Streams (4.4) word count against Sluice (issue 17): at_least_once gives the exact
counts; exactly_once_v2 needs transactions, which Sluice refuses, and must fail with that
error (not hang). The checks live in tests/java/.../StreamsWordCount.java."""

import pytest

from jvm import check_java, run_java

GROUP_SETTINGS = {"group.initial.rebalance.delay.ms": 0}


@pytest.mark.sluice(settings=GROUP_SETTINGS)
@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_streams_word_count(broker, java_classpath, guarantee):
    run = run_java(java_classpath, "sluice.compat.StreamsWordCount",
                   [broker.bootstrap, guarantee], timeout=150)
    check_java(run, expect_line=f"PASS streams {guarantee}")
