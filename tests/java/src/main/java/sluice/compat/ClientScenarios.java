package sluice.compat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.Utils;

/**
 * Kafka's Java client (kafka-clients 4.4) against Sluice, one scenario per run:
 * {@code java -cp ... sluice.compat.ClientScenarios SCENARIO BOOTSTRAP [ARGS]}. Exit 0 and a last
 * line {@code PASS SCENARIO} when every check held; a failed check throws (exit 1).
 * Driven by tests/compat/test_java_clients.py, which gives each run a fresh broker.
 */
public final class ClientScenarios {
    private static final Duration WAIT = Duration.ofSeconds(30);

    private ClientScenarios() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: ClientScenarios SCENARIO BOOTSTRAP [ARGS]");
            System.exit(2);
        }
        String bootstrap = args[1];
        switch (args[0]) {
            case "producer" -> producer(bootstrap);
            case "group" -> group(bootstrap, args[2]);
            case "group-member" -> groupMember(bootstrap, args[2], args[3]);
            case "consumer-protocol" -> consumerProtocol(bootstrap);
            case "offsets" -> offsets(bootstrap);
            case "admin" -> admin(bootstrap);
            default -> {
                System.err.println("unknown scenario " + args[0]);
                System.exit(2);
            }
        }
        System.out.println("PASS " + args[0]);
        System.exit(0);
    }

    static Properties common(String bootstrap) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        return p;
    }

    static Admin admin(Properties p) {
        return Admin.create(p);
    }

    static KafkaProducer<String, String> newProducer(String bootstrap) {
        Properties p = common(bootstrap);
        p.remove(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        return new KafkaProducer<>(p);
    }

    static Properties consumerProps(String bootstrap, String group) {
        Properties p = common(bootstrap);
        if (group != null) {
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        }
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        return p;
    }

    static void createTopic(Admin admin, String name, int partitions, Map<String, String> configs)
            throws Exception {
        admin.createTopics(List.of(new NewTopic(name, partitions, (short) 1).configs(configs)))
                .all().get(30, TimeUnit.SECONDS);
    }

    static List<TopicPartition> partitions(String topic, int n) {
        return IntStream.range(0, n).mapToObj(i -> new TopicPartition(topic, i)).toList();
    }

    /** Reads from the beginning of `tps` until `count` records arrived (assign(), no group). */
    static List<ConsumerRecord<String, String>> readAll(String bootstrap, List<TopicPartition> tps,
            int count) throws InterruptedException {
        List<ConsumerRecord<String, String>> out = new ArrayList<>();
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(consumerProps(bootstrap, null))) {
            c.assign(tps);
            c.seekToBeginning(tps);
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (out.size() < count && System.nanoTime() < deadline) {
                c.poll(Duration.ofMillis(500)).forEach(out::add);
            }
        }
        Check.equal(count, out.size(), "records read back");
        return out;
    }

    /** acks=all, idempotence, keyed records: each key in one partition (murmur2, as Kafka's
     *  default partitioner), per-key order kept, no duplicates. */
    static void producer(String bootstrap) throws Exception {
        String topic = "java-producer";
        int parts = 3;
        int keys = 10;
        int perKey = 50;
        try (Admin admin = admin(common(bootstrap))) {
            createTopic(admin, topic, parts, Map.of());
        }
        Map<String, Integer> partitionOfKey = new HashMap<>();
        try (KafkaProducer<String, String> producer = newProducer(bootstrap)) {
            List<java.util.concurrent.Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < perKey; i++) {
                for (int k = 0; k < keys; k++) {
                    sent.add(producer.send(new ProducerRecord<>(topic, "key-" + k, Integer.toString(i))));
                }
            }
            producer.flush();
            for (int i = 0; i < sent.size(); i++) {
                RecordMetadata md = sent.get(i).get(30, TimeUnit.SECONDS);
                String key = "key-" + (i % keys);
                int expected = Utils.toPositive(Utils.murmur2(key.getBytes())) % parts;
                Check.equal(expected, md.partition(), "partition of " + key);
                Integer before = partitionOfKey.putIfAbsent(key, md.partition());
                Check.that(before == null || before == md.partition(), key + " in one partition");
            }
        }
        List<ConsumerRecord<String, String>> records =
                readAll(bootstrap, partitions(topic, parts), keys * perKey);
        Map<String, List<Integer>> byKey = new HashMap<>();
        for (ConsumerRecord<String, String> r : records) {
            byKey.computeIfAbsent(r.key(), k -> new ArrayList<>()).add(Integer.parseInt(r.value()));
        }
        for (int k = 0; k < keys; k++) {
            List<Integer> values = byKey.get("key-" + k);
            Check.equal(IntStream.range(0, perKey).boxed().toList(), values,
                    "values of key-" + k + " in produce order, each once");
        }
        Check.log("idempotent producer: " + records.size() + " keyed records in order");
    }

    /** A subscribe() member polling in its own thread (KafkaConsumer is single-threaded). */
    static final class Member implements AutoCloseable {
        final String name;
        final KafkaConsumer<String, String> consumer;
        final Thread thread;
        volatile Set<TopicPartition> assignment = Set.of();
        final ConcurrentLinkedQueue<ConsumerRecord<String, String>> received = new ConcurrentLinkedQueue<>();
        volatile Throwable failure;
        volatile boolean stop;

        Member(String name, Properties props, String topic) {
            this.name = name;
            this.consumer = new KafkaConsumer<>(props);
            this.thread = new Thread(() -> run(topic), name);
            thread.start();
        }

        private void run(String topic) {
            try {
                consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                    @Override
                    public void onPartitionsRevoked(Collection<TopicPartition> revoked) {
                        Set<TopicPartition> now = new HashSet<>(assignment);
                        now.removeAll(revoked);
                        assignment = Set.copyOf(now);
                    }

                    @Override
                    public void onPartitionsAssigned(Collection<TopicPartition> added) {
                        Set<TopicPartition> now = new HashSet<>(assignment);
                        now.addAll(added);
                        assignment = Set.copyOf(now);
                        Check.log(name + " assigned " + new TreeSet<>(names(assignment)));
                    }

                    @Override
                    public void onPartitionsLost(Collection<TopicPartition> lost) {
                        onPartitionsRevoked(lost);
                    }
                });
                // Progress not yet committed: records polled, or a commit Kafka refused.
                boolean uncommitted = false;
                while (!stop) {
                    ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                    records.forEach(received::add);
                    uncommitted |= !records.isEmpty();
                    if (uncommitted) {
                        try {
                            consumer.commitSync();
                            uncommitted = false;
                        } catch (org.apache.kafka.common.errors.RebalanceInProgressException
                                | org.apache.kafka.clients.consumer.CommitFailedException e) {
                            // Kafka's answer to a commit during a (cooperative) rebalance: the
                            // records are polled again by whoever owns the partition next.
                            Check.log(name + " commit refused during a rebalance: " + e);
                        }
                    }
                }
            } catch (WakeupException e) {
                // close() asked.
            } catch (Throwable t) {
                Check.log(name + " failed: " + t);
                failure = t;
            } finally {
                consumer.close(org.apache.kafka.clients.consumer.CloseOptions.timeout(Duration.ofSeconds(10)));
            }
        }

        @Override
        public void close() throws InterruptedException {
            stop = true;
            consumer.wakeup();
            thread.join(20_000);
            Check.that(!thread.isAlive(), name + " closed within 20 s");
        }

        void checkHealthy() {
            if (failure != null) {
                throw new AssertionError(name + " failed", failure);
            }
        }
    }

    static Set<String> names(Collection<TopicPartition> tps) {
        return tps.stream().map(TopicPartition::toString).collect(Collectors.toCollection(TreeSet::new));
    }

    static Properties groupProps(String bootstrap, String group, String assignor) {
        Properties p = consumerProps(bootstrap, group);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
        p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, switch (assignor) {
            case "range" -> RangeAssignor.class.getName();
            case "cooperative-sticky" -> CooperativeStickyAssignor.class.getName();
            default -> throw new IllegalArgumentException("assignor " + assignor);
        });
        p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "6000");
        p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
        return p;
    }

    /** Checks that the members' assignments are disjoint and cover all of `tps`. */
    static boolean covers(List<Member> members, List<TopicPartition> tps) {
        Set<TopicPartition> seen = new HashSet<>();
        for (Member m : members) {
            m.checkHealthy();
            for (TopicPartition tp : m.assignment) {
                if (!seen.add(tp)) {
                    return false;
                }
            }
        }
        return seen.equals(new HashSet<>(tps));
    }

    /**
     * Consumer group under the classic protocol with `assignor`: two members in this JVM and a
     * third in a child JVM share 6 partitions; one member leaves (close → LeaveGroup) and the
     * rest take over its partitions; the child JVM is SIGKILLed and its partitions move to the
     * last member once its session (6 s) expires. Every record produced is consumed.
     */
    static void group(String bootstrap, String assignor) throws Exception {
        String topic = "java-group-" + assignor;
        String group = "g-" + assignor;
        int parts = 6;
        List<TopicPartition> tps = partitions(topic, parts);
        try (Admin admin = admin(common(bootstrap));
                KafkaProducer<String, String> producer = newProducer(bootstrap)) {
            createTopic(admin, topic, parts, Map.of());
            Member a = new Member("member-a", groupProps(bootstrap, group, assignor), topic);
            Member b = new Member("member-b", groupProps(bootstrap, group, assignor), topic);
            Check.eventually(WAIT, "two members share all partitions", () -> covers(List.of(a, b), tps)
                    && !a.assignment.isEmpty() && !b.assignment.isEmpty());
            String java = ProcessHandle.current().info().command().orElse("java");
            Process child = new ProcessBuilder(java, "-cp", System.getProperty("java.class.path"),
                    ClientScenarios.class.getName(), "group-member", bootstrap, group, assignor)
                    .inheritIO().start();
            try {
                Check.eventually(WAIT, "the child JVM joins: three members",
                        () -> members(admin, group) == 3 && covers(List.of(a, b), tps) == false
                                && a.assignment.size() + b.assignment.size() < parts);
                Check.eventually(WAIT, "a and b settle beside the child", () -> {
                    Set<TopicPartition> ab = new HashSet<>(a.assignment);
                    ab.addAll(b.assignment);
                    return members(admin, group) == 3 && ab.size() == parts - 2
                            && a.assignment.size() == 2 && b.assignment.size() == 2;
                });
                produce(producer, topic, 0, 60);
                Check.eventually(WAIT, "60 records consumed by a, b and the child",
                        () -> offsetsCommitted(admin, group, tps) == 60);

                b.close();
                Check.log("member-b left the group");
                Check.eventually(WAIT, "after b left, a and the child share all partitions",
                        () -> members(admin, group) == 2 && a.assignment.size() == parts / 2);

                long killedAt = System.nanoTime();
                child.destroyForcibly().waitFor();
                Check.log("child JVM killed");
                Check.eventually(WAIT, "a takes the killed member's partitions",
                        () -> covers(List.of(a), tps));
                double s = (System.nanoTime() - killedAt) / 1e9;
                Check.log(String.format("a owns all partitions %.1f s after the kill", s));
                Check.that(s >= 3, "the killed member's partitions moved only after its session "
                        + "expired (took " + s + " s)");
                produce(producer, topic, 60, 60);
                Check.eventually(WAIT, "60 more records consumed by a",
                        () -> offsetsCommitted(admin, group, tps) == 120);
                Set<String> values = new HashSet<>();
                a.received.forEach(r -> values.add(r.value()));
                for (int i = 60; i < 120; i++) {
                    Check.that(values.contains(Integer.toString(i)), "a received record " + i);
                }
                a.close();
            } finally {
                child.destroyForcibly();
            }
        }
    }

    static void produce(KafkaProducer<String, String> producer, String topic, int from, int n)
            throws Exception {
        for (int i = from; i < from + n; i++) {
            producer.send(new ProducerRecord<>(topic, "k" + i, Integer.toString(i)));
        }
        producer.flush();
    }

    static int members(Admin admin, String group) {
        try {
            ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group))
                    .describedGroups().get(group).get(10, TimeUnit.SECONDS);
            return d.members().size();
        } catch (Exception e) {
            throw new AssertionError("describeConsumerGroups", e);
        }
    }

    static long offsetsCommitted(Admin admin, String group, List<TopicPartition> tps) {
        try {
            Map<TopicPartition, OffsetAndMetadata> m = admin.listConsumerGroupOffsets(group)
                    .partitionsToOffsetAndMetadata().get(10, TimeUnit.SECONDS);
            return tps.stream().mapToLong(tp -> m.get(tp) == null ? 0 : m.get(tp).offset()).sum();
        } catch (Exception e) {
            throw new AssertionError("listConsumerGroupOffsets", e);
        }
    }

    /** The child JVM of {@link #group}: a member that polls and commits until killed. */
    static void groupMember(String bootstrap, String group, String assignor) throws Exception {
        Member m = new Member("member-child", groupProps(bootstrap, group, assignor),
                "java-group-" + assignor);
        m.thread.join();
        m.checkHealthy();
    }

    /**
     * group.protocol=consumer (KIP-848) needs ConsumerGroupHeartbeat, which Sluice does not
     * advertise: the consumer must fail at once with Kafka's UnsupportedVersionException,
     * not hang.
     */
    static void consumerProtocol(String bootstrap) throws Exception {
        String topic = "java-kip848";
        try (Admin admin = admin(common(bootstrap))) {
            createTopic(admin, topic, 1, Map.of());
        }
        Properties p = consumerProps(bootstrap, "g-kip848");
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
        long start = System.nanoTime();
        Throwable failure = null;
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            c.subscribe(List.of(topic));
            while (System.nanoTime() - start < Duration.ofSeconds(20).toNanos()) {
                c.poll(Duration.ofMillis(500));
            }
        } catch (KafkaException e) {
            failure = e;
        }
        double s = (System.nanoTime() - start) / 1e9;
        Check.that(failure != null, "poll() under group.protocol=consumer failed within 20 s");
        Check.log(String.format("failed after %.1f s: %s", s, failure));
        Check.that(failure instanceof UnsupportedVersionException,
                "the failure is UnsupportedVersionException: " + failure);
        Check.that(s < 10, "it failed at once (took " + s + " s)");
    }

    /** commitSync / committed / seek / offsetsForTimes / beginningOffsets / endOffsets. */
    static void offsets(String bootstrap) throws Exception {
        String topic = "java-offsets";
        String group = "g-offsets";
        TopicPartition tp = new TopicPartition(topic, 0);
        long base = System.currentTimeMillis() - 1_000_000;
        try (Admin admin = admin(common(bootstrap));
                KafkaProducer<String, String> producer = newProducer(bootstrap)) {
            createTopic(admin, topic, 1, Map.of());
            for (int i = 0; i < 100; i++) {
                producer.send(new ProducerRecord<>(topic, 0, base + i * 1000L, "k", Integer.toString(i)));
            }
            producer.flush();
        }
        Properties p = groupProps(bootstrap, group, "range");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "10");
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            c.subscribe(List.of(topic));
            List<ConsumerRecord<String, String>> got = new ArrayList<>();
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (got.size() < 50 && System.nanoTime() < deadline) {
                c.poll(Duration.ofMillis(200)).forEach(got::add);
            }
            Check.that(got.size() >= 50, "50 records polled");
            Check.equal(0L, got.get(0).offset(), "first offset");
            Check.equal(base, got.get(0).timestamp(), "CreateTime kept");
            c.commitSync(Map.of(tp, new OffsetAndMetadata(50, "half way")));
            OffsetAndMetadata committed = c.committed(Set.of(tp)).get(tp);
            Check.equal(50L, committed.offset(), "committed offset");
            Check.equal("half way", committed.metadata(), "committed metadata");
            c.seek(tp, 10);
            ConsumerRecords<String, String> after = ConsumerRecords.empty();
            while (after.isEmpty() && System.nanoTime() < deadline) {
                after = c.poll(Duration.ofMillis(200));
            }
            Check.equal(10L, after.iterator().next().offset(), "first offset after seek(10)");
            Map<TopicPartition, OffsetAndTimestamp> byTime =
                    c.offsetsForTimes(Map.of(tp, base + 30_000L));
            Check.equal(30L, byTime.get(tp).offset(), "offsetsForTimes(base + 30 s)");
            Check.equal(base + 30_000L, byTime.get(tp).timestamp(), "its timestamp");
            Check.equal(null, c.offsetsForTimes(Map.of(tp, base + 10_000_000L)).get(tp),
                    "offsetsForTimes past the last record");
            Check.equal(0L, c.beginningOffsets(Set.of(tp)).get(tp), "beginningOffsets");
            Check.equal(100L, c.endOffsets(Set.of(tp)).get(tp), "endOffsets");
            c.seekToEnd(Set.of(tp));
            Check.equal(100L, c.position(tp), "position after seekToEnd");
        }
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(groupProps(bootstrap, group, "range"))) {
            c.subscribe(List.of(topic));
            ConsumerRecords<String, String> first = ConsumerRecords.empty();
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (first.isEmpty() && System.nanoTime() < deadline) {
                first = c.poll(Duration.ofMillis(200));
            }
            Check.equal(50L, first.iterator().next().offset(), "a new member resumes at the commit");
        }
    }

    /** The AdminClient calls of issue 17, each checked against what Kafka answers. */
    static void admin(String bootstrap) throws Exception {
        String topic = "java-admin";
        String group = "g-admin";
        try (Admin admin = admin(common(bootstrap));
                KafkaProducer<String, String> producer = newProducer(bootstrap)) {
            createTopic(admin, topic, 2, Map.of("retention.ms", "3600000"));
            try {
                createTopic(admin, topic, 2, Map.of());
                throw new AssertionError("creating an existing topic succeeded");
            } catch (ExecutionException e) {
                Check.that(e.getCause() instanceof org.apache.kafka.common.errors.TopicExistsException,
                        "TopicExistsException: " + e.getCause());
            }
            Check.that(admin.listTopics().names().get().contains(topic), "listTopics");

            TopicDescription td = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
            Check.equal(2, td.partitions().size(), "partitions described");
            DescribeClusterResult cluster = admin.describeCluster();
            Check.equal(1, cluster.nodes().get().size(), "one node");
            int nodeId = cluster.nodes().get().iterator().next().id();
            Check.equal(nodeId, td.partitions().get(0).leader().id(), "leader is the node");
            Check.equal(nodeId, cluster.controller().get().id(), "controller is the node");
            Check.that(cluster.clusterId().get() != null, "cluster id");

            admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(3))).all().get();
            Check.eventually(WAIT, "three partitions", () -> {
                try {
                    return admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic)
                            .partitions().size() == 3;
                } catch (Exception e) {
                    return false;
                }
            });

            ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            Config config = admin.describeConfigs(List.of(res)).all().get().get(res);
            ConfigEntry retention = config.get("retention.ms");
            Check.equal("3600000", retention.value(), "retention.ms");
            Check.equal(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, retention.source(), "its source");
            admin.incrementalAlterConfigs(Map.of(res, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("max.message.bytes", "2000000"), AlterConfigOp.OpType.SET))))
                    .all().get();
            config = admin.describeConfigs(List.of(res)).all().get().get(res);
            Check.equal("7200000", config.get("retention.ms").value(), "altered retention.ms");
            Check.equal("2000000", config.get("max.message.bytes").value(), "altered max.message.bytes");
            admin.incrementalAlterConfigs(Map.of(res, List.of(new AlterConfigOp(
                    new ConfigEntry("retention.ms", ""), AlterConfigOp.OpType.DELETE)))).all().get();
            config = admin.describeConfigs(List.of(res)).all().get().get(res);
            Check.equal(ConfigEntry.ConfigSource.DEFAULT_CONFIG, config.get("retention.ms").source(),
                    "retention.ms back to its default");
            ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, Integer.toString(nodeId));
            Check.that(admin.describeConfigs(List.of(broker)).all().get().get(broker)
                    .get("num.partitions") != null, "broker config num.partitions described");

            // Records with CreateTime base + i s, then a group that commits 20 of them.
            long base = System.currentTimeMillis() - 100_000;
            for (int i = 0; i < 40; i++) {
                producer.send(new ProducerRecord<>(topic, 0, base + i * 1000L, "k", "v" + i));
            }
            producer.flush();
            TopicPartition tp0 = new TopicPartition(topic, 0);
            try (KafkaConsumer<String, String> c = new KafkaConsumer<>(groupProps(bootstrap, group, "range"))) {
                c.subscribe(List.of(topic));
                Check.eventually(WAIT, "group member assigned", () -> {
                    c.poll(Duration.ofMillis(100));
                    return c.assignment().size() == 3;
                });
                c.commitSync(Map.of(tp0, new OffsetAndMetadata(20)));
                Collection<GroupListing> groups = admin.listGroups().all().get();
                Check.that(groups.stream().anyMatch(g -> g.groupId().equals(group)), "listGroups has " + group);
                Collection<org.apache.kafka.clients.admin.ConsumerGroupListing> cgroups =
                        admin.listConsumerGroups().all().get();
                Check.that(cgroups.stream().anyMatch(g -> g.groupId().equals(group)),
                        "listConsumerGroups has " + group);
                ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
                Check.equal(1, d.members().size(), "one member described");
                Check.equal(3, d.members().iterator().next().assignment().topicPartitions().size(),
                        "its assignment");
                Check.equal("range", d.partitionAssignor(), "assignor");
                Check.equal(org.apache.kafka.common.GroupState.STABLE, d.groupState(), "group state");
                Check.equal(nodeId, d.coordinator().id(), "coordinator");
                try {
                    admin.deleteConsumerGroups(List.of(group)).all().get();
                    throw new AssertionError("deleting a group with a member succeeded");
                } catch (ExecutionException e) {
                    Check.that(e.getCause() instanceof org.apache.kafka.common.errors.GroupNotEmptyException,
                            "GroupNotEmptyException: " + e.getCause());
                }
            }
            Check.equal(20L, admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata()
                    .get().get(tp0).offset(), "listConsumerGroupOffsets");
            admin.alterConsumerGroupOffsets(group, Map.of(tp0, new OffsetAndMetadata(5))).all().get();
            Check.equal(5L, admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata()
                    .get().get(tp0).offset(), "offset after alterConsumerGroupOffsets");

            Check.equal(0L, listOffset(admin, tp0, OffsetSpec.earliest()), "earliest");
            Check.equal(40L, listOffset(admin, tp0, OffsetSpec.latest()), "latest");
            Check.equal(25L, listOffset(admin, tp0, OffsetSpec.forTimestamp(base + 25_000)), "for timestamp");
            Check.equal(39L, listOffset(admin, tp0, OffsetSpec.maxTimestamp()), "max timestamp");

            long low = admin.deleteRecords(Map.of(tp0, RecordsToDelete.beforeOffset(15)))
                    .lowWatermarks().get(tp0).get().lowWatermark();
            Check.equal(15L, low, "low watermark after deleteRecords(15)");
            Check.equal(15L, listOffset(admin, tp0, OffsetSpec.earliest()), "earliest after deleteRecords");
            List<ConsumerRecord<String, String>> rest = new ArrayList<>();
            try (KafkaConsumer<String, String> c = new KafkaConsumer<>(consumerProps(bootstrap, null))) {
                c.assign(List.of(tp0));
                c.seekToBeginning(List.of(tp0));
                long deadline = System.nanoTime() + WAIT.toNanos();
                while (rest.size() < 25 && System.nanoTime() < deadline) {
                    c.poll(Duration.ofMillis(200)).forEach(rest::add);
                }
            }
            Check.equal(25, rest.size(), "records left after deleteRecords");
            Check.equal(15L, rest.get(0).offset(), "first record left");
            try {
                admin.deleteRecords(Map.of(tp0, RecordsToDelete.beforeOffset(41))).all().get();
                throw new AssertionError("deleteRecords past the high watermark succeeded");
            } catch (ExecutionException e) {
                Check.that(e.getCause() instanceof org.apache.kafka.common.errors.OffsetOutOfRangeException,
                        "OffsetOutOfRangeException: " + e.getCause());
            }
            admin.deleteRecords(Map.of(tp0, RecordsToDelete.beforeOffset(-1))).all().get();
            Check.equal(40L, listOffset(admin, tp0, OffsetSpec.earliest()), "deleteRecords(-1): up to the high watermark");

            admin.deleteConsumerGroups(List.of(group)).all().get();
            Check.that(admin.listConsumerGroups().all().get().stream().noneMatch(g -> g.groupId().equals(group)),
                    "group deleted");
            admin.deleteTopics(List.of(topic)).all().get();
            Check.eventually(WAIT, "topic deleted", () -> {
                try {
                    return !admin.listTopics().names().get().contains(topic);
                } catch (Exception e) {
                    return false;
                }
            });
        }
    }

    static long listOffset(Admin admin, TopicPartition tp, OffsetSpec spec) throws Exception {
        ListOffsetsResult r = admin.listOffsets(Map.of(tp, spec));
        return r.partitionResult(tp).get().offset();
    }
}
