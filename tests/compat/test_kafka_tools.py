"""Kafka's own command-line tools (kafka-tools 4.4, the classes kafka-topics.sh,
kafka-console-producer.sh, kafka-console-consumer.sh, kafka-consumer-groups.sh,
kafka-configs.sh, kafka-producer-perf-test.sh and kafka-e2e-latency.sh run) against Sluice
(issue 17), each run as `java -cp <tests/java classpath> <class> ...` the way the scripts do."""

import json
import re

import pytest
from confluent_kafka.admin import AdminClient

from jvm import check_java, run_java

TOPICS = "org.apache.kafka.tools.TopicCommand"
CONFIGS = "org.apache.kafka.tools.ConfigCommand"
GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
CONSOLE_PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
PERF = "org.apache.kafka.tools.ProducerPerformance"
E2E = "org.apache.kafka.tools.EndToEndLatency"
GROUP_SETTINGS = {"group.initial.rebalance.delay.ms": 0}


def tool(cp, broker, cls, *args, stdin=None, timeout=90):
    return check_java(run_java(cp, cls, ["--bootstrap-server", broker.bootstrap, *args],
                               timeout=timeout, stdin=stdin))


def test_kafka_topics_create_describe_list_alter(broker, java_classpath):
    cp = java_classpath
    out = tool(cp, broker, TOPICS, "--create", "--topic", "cli-topics", "--partitions", "2",
               "--replication-factor", "1", "--config", "retention.ms=86400000")
    assert "Created topic cli-topics." in out
    out = tool(cp, broker, TOPICS, "--list")
    assert "cli-topics" in out.split()
    out = tool(cp, broker, TOPICS, "--describe", "--topic", "cli-topics")
    assert re.search(r"Topic: cli-topics\s+TopicId: \S+\s+PartitionCount: 2\s+ReplicationFactor: 1",
                     out), out
    assert "retention.ms=86400000" in out
    for p in (0, 1):
        assert re.search(rf"Partition: {p}\s+Leader: 0\s+Replicas: 0\s+Isr: 0", out), out
    tool(cp, broker, TOPICS, "--alter", "--topic", "cli-topics", "--partitions", "4")
    out = tool(cp, broker, TOPICS, "--describe", "--topic", "cli-topics")
    assert "PartitionCount: 4" in out
    # Kafka's refusal of a smaller count, reported by the tool (exit 1).
    run = run_java(cp, TOPICS, ["--bootstrap-server", broker.bootstrap, "--alter", "--topic",
                                "cli-topics", "--partitions", "3"])
    assert run.returncode == 1 and "InvalidPartitionsException" in run.output, run.report()
    tool(cp, broker, TOPICS, "--delete", "--topic", "cli-topics")


@pytest.mark.sluice(settings=GROUP_SETTINGS)
def test_console_producer_consumer_and_consumer_groups(broker, java_classpath):
    cp = java_classpath
    tool(cp, broker, TOPICS, "--create", "--topic", "cli-console", "--partitions", "2",
         "--replication-factor", "1")
    lines = [f"key{i % 3}:value-{i}" for i in range(30)]
    tool(cp, broker, CONSOLE_PRODUCER, "--topic", "cli-console", "--property", "parse.key=true",
         "--property", "key.separator=:", "--producer-property", "acks=all",
         stdin="\n".join(lines) + "\n")
    consume = ["--topic", "cli-console", "--group", "cli-group", "--from-beginning",
               "--max-messages", "20", "--timeout-ms", "30000", "--property", "print.key=true",
               "--property", "key.separator=:"]
    out = tool(cp, broker, CONSOLE_CONSUMER, *consume)
    got = [l for l in out.splitlines() if l.startswith("key")]
    assert len(got) == 20 and set(got) <= set(lines), out
    # Per-key order within the output (each key lives in one partition).
    for k in range(3):
        values = [int(l.split("-")[1]) for l in got if l.startswith(f"key{k}:")]
        assert values == sorted(values), out

    out = tool(cp, broker, GROUPS, "--list")
    assert "cli-group" in out.split()
    out = tool(cp, broker, GROUPS, "--describe", "--group", "cli-group")
    rows = [l.split() for l in out.splitlines() if l.startswith("cli-group")]
    assert len(rows) == 2, out
    # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG ...
    assert sum(int(r[4]) for r in rows) == 30, out
    assert sum(int(r[5]) for r in rows) == 10, out
    assert sum(int(r[3]) for r in rows) == 20, out

    out = tool(cp, broker, GROUPS, "--reset-offsets", "--group", "cli-group", "--topic",
               "cli-console", "--to-earliest", "--execute")
    rows = [l.split() for l in out.splitlines() if l.startswith("cli-group")]
    assert len(rows) == 2 and all(r[3] == "0" for r in rows), out
    out = tool(cp, broker, GROUPS, "--describe", "--group", "cli-group")
    rows = [l.split() for l in out.splitlines() if l.startswith("cli-group")]
    assert sum(int(r[5]) for r in rows) == 30, out
    # After the reset the group reads everything again.
    out = tool(cp, broker, CONSOLE_CONSUMER, *[a if a != "20" else "30" for a in consume])
    assert len([l for l in out.splitlines() if l.startswith("key")]) == 30, out

    out = tool(cp, broker, GROUPS, "--delete", "--group", "cli-group")
    assert "Deletion of requested consumer groups ('cli-group') was successful." in out, out
    out = tool(cp, broker, GROUPS, "--list")
    assert "cli-group" not in out.split()


def test_kafka_configs_describe_alter_topic(broker, java_classpath):
    cp = java_classpath
    tool(cp, broker, TOPICS, "--create", "--topic", "cli-configs", "--partitions", "1",
         "--replication-factor", "1")
    entity = ["--entity-type", "topics", "--entity-name", "cli-configs"]
    tool(cp, broker, CONFIGS, *entity, "--alter", "--add-config",
         "retention.ms=3600000,max.message.bytes=2000000")
    out = tool(cp, broker, CONFIGS, *entity, "--describe")
    assert "Dynamic configs for topic cli-configs are:" in out, out
    assert "retention.ms=3600000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=3600000" in out, out
    assert "max.message.bytes=2000000" in out
    tool(cp, broker, CONFIGS, *entity, "--alter", "--delete-config", "retention.ms")
    out = tool(cp, broker, CONFIGS, *entity, "--describe")
    assert "retention.ms" not in out and "max.message.bytes=2000000" in out, out
    out = tool(cp, broker, CONFIGS, *entity, "--describe", "--all")
    assert re.search(r"retention.ms=\d+ sensitive=false synonyms=\{DEFAULT_CONFIG:", out) or \
        re.search(r"retention.ms=\d+ sensitive=false synonyms=\{STATIC_BROKER_CONFIG:", out), out
    # A key Kafka does not know: the tool reports Kafka's refusal.
    run = run_java(cp, CONFIGS, ["--bootstrap-server", broker.bootstrap, *entity, "--alter",
                                 "--add-config", "no.such.key=1"])
    assert run.returncode != 0 and "InvalidConfigurationException" in run.output, run.report()
    out = tool(cp, broker, CONFIGS, "--entity-type", "brokers", "--entity-name", "0",
               "--describe", "--all")
    assert "num.partitions=" in out, out


def test_producer_perf_test_and_end_to_end_latency(broker, java_classpath):
    cp = java_classpath
    tool(cp, broker, TOPICS, "--create", "--topic", "cli-perf", "--partitions", "2",
         "--replication-factor", "1")
    run = run_java(cp, PERF, ["--topic", "cli-perf", "--num-records", "2000", "--record-size",
                              "100", "--throughput", "-1", "--producer-props",
                              f"bootstrap.servers={broker.bootstrap}", "acks=all"], timeout=120)
    out = check_java(run)
    assert re.search(r"^2000 records sent, .* records/sec", out, re.M), out
    run = run_java(cp, E2E, ["--bootstrap-server", broker.bootstrap, "--topic", "cli-e2e",
                             "--num-records", "200", "--producer-acks", "all", "--record-size",
                             "100"], timeout=120)
    out = check_java(run)
    assert "Avg latency:" in out and "Percentiles: 50th =" in out, out


def test_admin_tools_answered_as_kafka_answers(broker, java_classpath):
    """The tools for what a single broker without an authorizer or quotas has: each gets
    Kafka's answer (ACLs: SECURITY_DISABLED; no reassignments; no election needed; no quotas;
    the log directory and its partitions; no transactional id)."""
    cp = java_classpath
    T = "org.apache.kafka.tools."
    tool(cp, broker, TOPICS, "--create", "--topic", "cli-admin", "--partitions", "2",
         "--replication-factor", "1")
    for args in (["--list"], ["--add", "--allow-principal", "User:alice", "--operation", "Read",
                              "--topic", "cli-admin"]):
        run = run_java(cp, T + "AclCommand", ["--bootstrap-server", broker.bootstrap, *args])
        assert run.returncode == 1, run.report()
        assert "SecurityDisabledException: No Authorizer is configured on the broker" in \
            run.output, run.report()
    out = tool(cp, broker, T + "reassign.ReassignPartitionsCommand", "--list")
    assert "No partition reassignments found." in out, out
    run = run_java(cp, T + "LeaderElectionCommand",
                   ["--bootstrap-server", broker.bootstrap, "--election-type", "preferred",
                    "--topic", "cli-admin", "--partition", "1"])
    assert run.returncode == 0 and "Valid replica already elected for partitions cli-admin-1" \
        in run.output, run.report()
    tool(cp, broker, T + "LeaderElectionCommand", "--election-type", "preferred",
         "--all-topic-partitions")
    run = run_java(cp, T + "LeaderElectionCommand",
                   ["--bootstrap-server", broker.bootstrap, "--election-type", "preferred",
                    "--topic", "no-such-topic", "--partition", "0"])
    assert run.returncode == 1 and "UnknownTopicOrPartitionException" in run.output, run.report()
    out = tool(cp, broker, CONFIGS, "--entity-type", "clients", "--describe")
    assert "Exception" not in out, out
    # kafka-log-dirs: the data directory with each partition's size (DescribeLogDirs).
    tool(cp, broker, CONSOLE_PRODUCER, "--topic", "cli-admin", "--producer-property",
         "partitioner.class=org.apache.kafka.clients.producer.RoundRobinPartitioner",
         stdin="a\nb\nc\nd\n")
    out = tool(cp, broker, T + "LogDirsCommand", "--describe", "--topic-list", "cli-admin")
    described = json.loads(next(l for l in out.splitlines() if l.startswith("{")))
    (b,) = described["brokers"]
    (log_dir,) = b["logDirs"]
    # The node id: Sluice's default 0, the Kafka reference's 1.
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    node_id = admin.describe_cluster().result(30).nodes[0].id
    assert (b["broker"], log_dir["logDir"], log_dir["error"]) == \
        (node_id, str(broker.data_dir), None)
    sizes = {p["partition"]: p["size"] for p in log_dir["partitions"]}
    assert set(sizes) == {"cli-admin-0", "cli-admin-1"} and all(v > 0 for v in sizes.values()), out
    # kafka-transactions.sh list (ListTransactions): no transactional id yet.
    out = tool(cp, broker, T + "TransactionsCommand", "list")
    assert out.split() == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"], out


def test_kafka_metadata_quorum_describes_the_one_voter(broker, java_classpath):
    """kafka-metadata-quorum.sh (DescribeQuorum, KIP-595) on one node: it leads a quorum of
    itself, with a high watermark, no observers, and its own replication row as Leader."""
    cp = java_classpath
    quorum = "org.apache.kafka.tools.MetadataQuorumCommand"
    out = tool(cp, broker, quorum, "describe", "--status")
    leader = re.search(r"LeaderId:\s+(\d+)", out)
    assert leader and int(re.search(r"HighWatermark:\s+(\d+)", out)[1]) > 0, out
    assert re.search(r"LeaderEpoch:\s+[1-9]", out), out
    assert re.search(rf'CurrentVoters:\s+\[\{{"id": {leader[1]}\b', out), out
    assert re.search(r"CurrentObservers:\s+\[\]", out), out
    out = tool(cp, broker, quorum, "describe", "--replication")
    rows = [l.split() for l in out.splitlines() if re.match(r"\d+\s", l)]
    # NodeId DirectoryId LogEndOffset Lag LastFetchTimestamp LastCaughtUpTimestamp Status
    assert [(r[0], r[3], r[6]) for r in rows] == [(leader[1], "0", "Leader")], out
    assert int(rows[0][2]) > 0 and int(rows[0][4]) > 0 and int(rows[0][5]) > 0, out
