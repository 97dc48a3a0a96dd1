"""Kafka Streams (4.4) word count against Sluice (issue 17): at_least_once gives the exact
counts (its store without a changelog topic); exactly_once_v2 needs transactions, which Sluice
refuses, and must fail with that error (not hang); with Kafka's default compacted changelog
the application must fail at once with Sluice's refusal of compaction (not built yet). The
checks live in tests/java/.../StreamsWordCount.java."""

import pytest

from jvm import check_java, run_java

GROUP_SETTINGS = {"group.initial.rebalance.delay.ms": 0}


@pytest.mark.sluice(settings=GROUP_SETTINGS)
@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_streams_word_count(broker, java_classpath, guarantee):
    run = run_java(java_classpath, "sluice.compat.StreamsWordCount",
                   [broker.bootstrap, guarantee], timeout=150)
    check_java(run, expect_line=f"PASS streams {guarantee}")


@pytest.mark.sluice(settings=GROUP_SETTINGS)
def test_streams_default_changelog_fails_at_once_without_compaction(broker, java_classpath):
    run = run_java(java_classpath, "sluice.compat.StreamsWordCount",
                   [broker.bootstrap, "at_least_once", "changelog"], timeout=150)
    check_java(run, expect_line="PASS streams at_least_once changelog")
    assert run.seconds < 60, run.report()
