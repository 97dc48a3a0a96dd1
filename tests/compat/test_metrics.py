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
