package sluice.compat;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Racks (KIP-36) and fetching from the closest replica (KIP-392) with Kafka's Java client:
 * {@code java -cp ... sluice.compat.RackReads BOOTSTRAP TOPIC RECORDS}, against a 3-node
 * cluster whose brokers are in three racks and whose {@code replica.selector.class} is
 * Kafka's RackAwareReplicaSelector. Creates TOPIC (one partition, replication factor 3),
 * checks that its replicas span three racks, produces RECORDS records of 1 KiB (acks=all),
 * then consumes them with {@code client.rack} set to the rack of a follower, and checks by the
 * consumer's per-node metrics ({@code consumer-node-metrics}, {@code incoming-byte-total})
 * that the records came from that follower, not from the leader. Exit 0 and a last line
 * {@code PASS rack-reads} when every check held. Driven by tests/compat/test_racks.py.
 */
public final class RackReads {
    private static final int RECORD_BYTES = 1024;
    private static final Duration WAIT = Duration.ofSeconds(60);

    private RackReads() {}

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        int records = Integer.parseInt(args[2]);
        Properties common = new Properties();
        common.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);

        TopicPartitionInfo partition;
        try (Admin admin = Admin.create(common)) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 3))).all().get();
            TopicDescription description = admin.describeTopics(List.of(topic))
                    .allTopicNames().get().get(topic);
            partition = description.partitions().get(0);
        }
        Set<String> racks = partition.replicas().stream().map(Node::rack)
                .collect(Collectors.toCollection(TreeSet::new));
        Check.log("replicas " + partition.replicas() + ", leader " + partition.leader());
        Check.equal(Set.of("a", "b", "c"), racks, "the replicas' racks (KIP-36)");
        Node leader = partition.leader();
        Node follower = partition.replicas().stream().filter(n -> n.id() != leader.id())
                .findFirst().orElseThrow();

        Properties p = new Properties();
        p.putAll(common);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < records; i++) {
                producer.send(new ProducerRecord<>(topic, 0, null, new byte[RECORD_BYTES])).get();
            }
        }

        Properties c = new Properties();
        c.putAll(common);
        c.put(ConsumerConfig.CLIENT_RACK_CONFIG, follower.rack());
        c.put(ConsumerConfig.CLIENT_ID_CONFIG, "rack-reader");
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(c)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(List.of(tp));
            int read = 0;
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (read < records && System.nanoTime() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    Check.equal(read, (int) r.offset(), "the next offset");
                    read++;
                }
            }
            Check.equal(records, read, "records read in rack " + follower.rack());
            double fromLeader = incomingBytes(consumer.metrics(), leader.id());
            double fromFollower = incomingBytes(consumer.metrics(), follower.id());
            Check.log("bytes from leader " + leader.id() + ": " + fromLeader + ", from follower "
                    + follower.id() + ": " + fromFollower);
            long payload = (long) records * RECORD_BYTES;
            Check.that(fromFollower >= payload,
                    "the records came from the follower in rack " + follower.rack());
            Check.that(fromLeader < payload / 2.0, "the leader sent no records");
        }
        System.out.println("PASS rack-reads");
    }

    /** The consumer's {@code incoming-byte-total} from broker {@code id} (0 if none). */
    private static double incomingBytes(Map<MetricName, ? extends Metric> metrics, int id) {
        return metrics.entrySet().stream()
                .filter(e -> e.getKey().group().equals("consumer-node-metrics")
                        && e.getKey().name().equals("incoming-byte-total")
                        && ("node-" + id).equals(e.getKey().tags().get("node-id")))
                .mapToDouble(e -> ((Number) e.getValue().metricValue()).doubleValue())
                .sum();
    }
}
