"""Admin endpoints: `/metrics` (Prometheus text) shows per-shard counters during a produce run,
and `/v1/status` lists every partition with its log start offset, high watermark and LEO."""

import json
import re
import urllib.request

import pytest

from compat_util import consume_all, create_topic, producer

pytestmark = pytest.mark.sluice_only("Sluice's admin HTTP (/metrics, /v1/status)")

TOPIC = "observed"
PARTITIONS = 4
MESSAGES = 400


def get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.status, r.headers.get("Content-Type", ""), r.read().decode()


def samples(text, name):
    """{labels string: value} for metric `name`."""
    out = {}
    for line in text.splitlines():
        m = re.match(rf"^{name}\{{(.*)\}} (\S+)$", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


@pytest.mark.sluice(cores=2)
def test_metrics_and_status_during_a_produce_run(broker):
    create_topic(broker.bootstrap, TOPIC, PARTITIONS)
    p = producer(broker.bootstrap)
    for i in range(MESSAGES):
        p.produce(TOPIC, value=b"m%d" % i, partition=i % PARTITIONS)
    assert p.flush(30) == 0
    consume_all(broker.bootstrap, TOPIC, PARTITIONS, expected=MESSAGES)

    status, content_type, text = get(broker.admin_url + "/metrics")
    assert status == 200
    assert content_type.startswith("text/plain")
    produce = samples(text, "sluice_produce_requests_total")
    assert set(produce) == {'shard="0"', 'shard="1"'}
    assert sum(produce.values()) > 0
    assert sum(samples(text, "sluice_fetch_bytes_total").values()) > 0
    # The topic's partitions are spread evenly; the consumer's group.id also made the broker
    # create `__consumer_offsets`, whose partitions count as owned too.
    hw = samples(text, "sluice_partition_high_watermark")
    per_shard = {}
    for labels in hw:
        if f'topic="{TOPIC}"' in labels:
            shard = labels.split(",")[0]
            per_shard[shard] = per_shard.get(shard, 0) + 1
    assert per_shard == {'shard="0"': PARTITIONS // 2, 'shard="1"': PARTITIONS // 2}
    owned = samples(text, "sluice_partitions_owned")
    assert all(owned[s] >= n for s, n in per_shard.items())
    # One client connection reaches partitions on both shards: some requests were forwarded.
    assert sum(samples(text, "sluice_cross_shard_messages_total").values()) > 0
    hw = samples(text, "sluice_partition_high_watermark")
    assert sum(v for k, v in hw.items() if f'topic="{TOPIC}"' in k) == MESSAGES
    assert sum(samples(text, 'sluice_request_latency_seconds_count').values()) > 0

    status, _, body = get(broker.admin_url + "/v1/status")
    assert status == 200
    report = json.loads(body)
    parts = [p for s in report["shards"] for p in s["partitions"] if p["topic"] == TOPIC]
    assert sorted(p["partition"] for p in parts) == list(range(PARTITIONS))
    assert all(p["log_end_offset"] == p["high_watermark"] == MESSAGES // PARTITIONS for p in parts)
    assert all(p["log_start_offset"] == 0 for p in parts)


def histogram_families(text):
    """{(name, labels without le): ([(le, cumulative count)], _count)} of every histogram."""
    buckets, counts = {}, {}
    for line in text.splitlines():
        m = re.match(r"^(\w+)_bucket\{(.*)\} (\S+)$", line)
        if m:
            labels = ",".join(l for l in m.group(2).split(",") if not l.startswith("le="))
            le = re.search(r'le="([^"]*)"', m.group(2)).group(1)
            buckets.setdefault((m.group(1), labels), []).append((float(le), float(m.group(3))))
            continue
        m = re.match(r"^(\w+)_count\{(.*)\} (\S+)$", line)
        if m:
            counts[(m.group(1), m.group(2))] = float(m.group(3))
    return {key: (rows, counts.get(key)) for key, rows in buckets.items()}


@pytest.mark.sluice(cores=2, settings={"log.flush.interval.messages": 1})
def test_histograms_are_cumulative_and_end_at_their_count(broker):
    """Prometheus histograms: buckets never decrease, never exceed `_count`, and `+Inf` equals
    `_count` — after traffic handled on both shards (request latency) and synced logs."""
    create_topic(broker.bootstrap, TOPIC, PARTITIONS)
    p = producer(broker.bootstrap)
    for i in range(MESSAGES):
        p.produce(TOPIC, value=b"m%d" % i, partition=i % PARTITIONS)
        p.poll(0)
    assert p.flush(30) == 0
    consume_all(broker.bootstrap, TOPIC, PARTITIONS, expected=MESSAGES)
    _, _, text = get(broker.admin_url + "/metrics")
    families = histogram_families(text)
    latency = {k: v for k, v in families.items() if k[0] == "sluice_request_latency_seconds"}
    assert {labels.split(",")[0] for _, labels in latency} == {'shard="0"', 'shard="1"'}
    assert any(k[0] == "sluice_flush_latency_seconds" and v[1] > 0 for k, v in families.items())
    for (name, labels), (rows, count) in families.items():
        assert count is not None, f"{name}{{{labels}}} has buckets but no _count"
        values = [v for _, v in rows]
        assert values == sorted(values), f"{name}{{{labels}}} buckets decrease: {rows}"
        assert rows[-1][0] == float("inf"), f"{name}{{{labels}}}: last bucket is not +Inf"
        assert all(v <= count for v in values), f"{name}{{{labels}}}: bucket above _count {count}"
        assert values[-1] == count, f"{name}{{{labels}}}: +Inf {values[-1]} != _count {count}"
    assert sum(samples(text, "sluice_log_writes_total").values()) > 0
