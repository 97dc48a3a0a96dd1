"""Finalized features (KIP-584, KIP-778): ApiVersions' supported and finalized features and
their epoch, and UpdateFeatures (API 57) through `kafka-features.sh` (FeatureCommand):
describe, upgrade, downgrade, disable, with Kafka's refusals. Sluice claims only what it
implements (metadata.version 3.3-IV3; transaction.version 0-2, finalized at 2 as Kafka 4.4
does on a new cluster; group.version and kraft.version at 0), so the common assertions are
about the shape of the answers; the claim itself is checked on Sluice only."""

import re

import pytest

import kafka_wire as kw
from jvm import run_java

FEATURES = "org.apache.kafka.tools.FeatureCommand"
DESCRIBE = re.compile(r"Feature: (\S+)\s+SupportedMinVersion: (\S+)\s+SupportedMaxVersion: (\S+)"
                      r"\s+FinalizedVersionLevel: (\S+)\s+Epoch: (\S+)")


def features(cp, broker, *args):
    return run_java(cp, FEATURES, ["--bootstrap-server", broker.bootstrap, *args], timeout=90)


def describe(cp, broker):
    run = features(cp, broker, "describe")
    assert run.returncode == 0, run.report()
    return {m[0]: m[1:] for m in DESCRIBE.findall(run.output)}, run


def api_versions_features(bootstrap):
    """ApiVersions v3's tagged fields: (supported {name: (min, max)}, epoch,
    finalized {name: (min, max)})."""
    with kw.connect(bootstrap) as sock:
        sock.sendall(kw.api_versions_flexible(3, 5))
        r = kw.Reader(kw.read_frame(sock))
    assert r.i32() == 5
    assert r.i16() == 0
    r.compact_array(lambda r: (r.i16(), r.i16(), r.i16(), r.tagged_fields()))
    r.i32()  # throttle_time_ms
    supported, epoch, finalized = {}, None, {}
    for _ in range(r.uvarint()):
        tag = r.uvarint()
        field = kw.Reader(r.take(r.uvarint()))
        if tag == 0:
            for name, lo, hi in field.compact_array(
                    lambda f: (f.compact_string(), f.i16(), f.i16(), f.tagged_fields())[:3]):
                supported[name] = (lo, hi)
        elif tag == 1:
            epoch = field.i64()
        elif tag == 2:
            for name, hi, lo in field.compact_array(
                    lambda f: (f.compact_string(), f.i16(), f.i16(), f.tagged_fields())[:3]):
                finalized[name] = (lo, hi)
    return supported, epoch, finalized


def test_api_versions_lists_the_finalized_metadata_version(broker):
    supported, epoch, finalized = api_versions_features(broker.bootstrap)
    lo, hi = supported["metadata.version"]
    assert 7 <= lo <= hi, supported
    level = finalized["metadata.version"][1]
    assert lo <= level <= hi and finalized["metadata.version"][0] == level, finalized
    assert epoch is not None and epoch >= 0
    # A new cluster runs transaction version 2 (KIP-890 part 2), as Kafka 4.4 formats it.
    assert finalized.get("transaction.version") == (2, 2), finalized
    # Every finalized feature is one the broker supports, within its range.
    for name, (_, level) in finalized.items():
        if name in supported:
            assert supported[name][0] <= level <= supported[name][1], (name, supported)


def test_kafka_features_describe_upgrade_downgrade(broker, java_classpath):
    cp = java_classpath
    described, run = describe(cp, broker)
    mv_min, mv_max, mv_finalized, epoch = described["metadata.version"]
    assert mv_finalized == mv_max and mv_min.startswith("3.3-"), run.report()
    assert int(epoch) >= 0, run.report()
    # The level already finalized: an upgrade to it is accepted (dry run and for real).
    run = features(cp, broker, "upgrade", "--metadata", mv_finalized, "--dry-run")
    assert run.returncode == 0 and re.search(r"metadata\.version can be upgraded to \d+\.",
                                             run.output), run.report()
    run = features(cp, broker, "upgrade", "--metadata", mv_finalized)
    assert run.returncode == 0 and re.search(r"metadata\.version was upgraded to \d+\.",
                                             run.output), run.report()
    after, _ = describe(cp, broker)
    assert after["metadata.version"][2] == mv_finalized
    # Below what the controller supports: Kafka's INVALID_UPDATE_VERSION message.
    run = features(cp, broker, "downgrade", "--feature", "metadata.version=3")
    assert run.returncode == 1, run.report()
    assert ("Could not downgrade metadata.version to 3. The update failed for all features "
            "since the following feature had an error: Invalid update version 3 for feature "
            "metadata.version. Local controller ") in run.output, run.report()
    # A level no controller supports.
    run = features(cp, broker, "upgrade", "--feature", "group.version=9")
    assert run.returncode == 1, run.report()
    assert ("Could not upgrade group.version to 9. The update failed for all features since "
            "the following feature had an error: Invalid update version 9 for feature "
            "group.version. Local controller ") in run.output, run.report()
    # A (safe) downgrade to 0 of a feature the controller supports at 0: recorded.
    run = features(cp, broker, "downgrade", "--feature", "transaction.version=0")
    assert run.returncode == 0 and "transaction.version was downgraded to 0." in run.output, \
        run.report()
    after, _ = describe(cp, broker)
    assert after.get("transaction.version", ("0", "0", "0"))[2] == "0", after


@pytest.mark.sluice_only("Sluice's own claim: only the features it implements")
def test_sluice_claims_only_what_it_implements(broker, java_classpath):
    supported, _, finalized = api_versions_features(broker.bootstrap)
    # transaction.version 2: the coordinator implements KIP-890 part 2 (finalized from the
    # start, as Kafka 4.4's `kafka-storage format`).
    assert supported == {"metadata.version": (7, 7), "transaction.version": (0, 2)}
    assert finalized == {"metadata.version": (7, 7), "transaction.version": (2, 2)}
    described, run = describe(java_classpath, broker)
    assert sorted(described) == ["metadata.version", "transaction.version"], run.report()
    assert described["metadata.version"][:3] == ("3.3-IV3", "3.3-IV3", "3.3-IV3"), run.report()
    run = features(java_classpath, broker, "upgrade", "--feature", "transaction.version=3")
    assert run.returncode == 1, run.report()
    assert ("Invalid update version 3 for feature transaction.version. Local controller 0 only "
            "supports versions 0-2") in run.output, run.report()
    run = features(java_classpath, broker, "upgrade", "--feature", "group.version=1")
    assert run.returncode == 1, run.report()
    assert ("Invalid update version 1 for feature group.version. Local controller 0 does "
            "not support this feature.") in run.output, run.report()
    # disable: level 0 of a feature this broker supports only at 0 is accepted.
    run = features(java_classpath, broker, "disable", "--feature", "group.version")
    assert run.returncode == 0 and "group.version was disabled." in run.output, run.report()
