#!/usr/bin/env python3
"""Writes the seed corpus of the `load_config` fuzz target into tuning/fuzz/corpus/load_config/:
the CONFIG FILE example of `sluice --help`, the `[[shard]]` example of docs/operations.md, a
three-node cluster file (the keys scripts/sluice_cluster.py sets), the files the config unit
tests load, and a few the loader must refuse. Usage: tuning/fuzz/seeds.py
"""

import os

HERE = os.path.dirname(os.path.abspath(__file__))

SEEDS = {
    "help-example.toml": '"auto.create.topics.enable" = false\n[log]\nretention.ms = 86400000\nsegment.bytes = 268435456\n',
    "shard-sections.toml": '''sluice.cores = "0-1"
[[shard]]
core = 1
listen = false
"batch.cache.bytes" = 268435456
"io.memory.bytes" = 33554432
"produce.shares" = 1000
"fetch.shares" = 500
"background.shares" = 100
"spin.before.park.us" = 0
''',
    "cluster-node.toml": '''"node.id" = 2
listeners = "PLAINTEXT://127.0.0.1:19093"
"advertised.listeners" = "127.0.0.1:19093"
"log.dirs" = "/tmp/sluice-2"
"sluice.admin.listen" = "127.0.0.1:19645"
"controller.quorum.voters" = "1@127.0.0.1:19192,2@127.0.0.1:19193,3@127.0.0.1:19194"
"controller.quorum.election.timeout.ms" = 1000
"broker.heartbeat.interval.ms" = 2000
"broker.session.timeout.ms" = 9000
"default.replication.factor" = 3
"min.insync.replicas" = 2
"broker.rack" = "r1"
''',
    "layers.toml": '"num.partitions" = 3\nlisteners = "127.0.0.1:1000"\n[log]\nretention.ms = 5\n[auto.create.topics]\nenable = false\n',
    "topic-defaults.toml": '''[log]
"retention.hours" = 24
"retention.bytes" = -1
"roll.ms" = 3600000
"cleanup.policy" = ["delete"]
"message.timestamp.type" = "LogAppendTime"
"message.timestamp.after.max.ms" = 1000
"flush.interval.messages" = 1
"index.interval.bytes" = 4096
"compression.type" = "zstd"
"max.message.bytes" = 1048588
''',
    "tuned.toml": '''# sluice.toml written by `sluice tune`.
"sluice.cores" = "0,1"
"sluice.batch.cache.bytes" = 67108864
"log.segment.bytes" = 1073741824
"log.flush.interval.ms" = 1000
''',
    "bad-float.toml": "a = 1.5\n",
    "bad-nested.toml": "a = [[1]]\n[[other]]\ncore = 1\n",
    "bad-dup.toml": '"log.retention.ms" = 1\n[log]\nretention.ms = 2\n',
    "bad-unsupported.toml": '"process.roles" = "broker,controller"\n',
    "bad-shard.toml": "[[shard]]\ncore = 0\n[[shard]]\ncore = 0\n\"fetch.shares\" = 5000\n",
}

if __name__ == "__main__":
    d = os.path.join(HERE, "corpus", "load_config")
    os.makedirs(d, exist_ok=True)
    for name, text in SEEDS.items():
        with open(os.path.join(d, name), "w") as f:
            f.write(text)
