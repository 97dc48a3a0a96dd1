package sluice.compat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * Kafka Streams' word count against Sluice:
 * {@code java -cp ... sluice.compat.StreamsWordCount BOOTSTRAP GUARANTEE}.
 *
 * <p>{@code at_least_once}: Kafka's default topology (flatMap → repartition through an
 * internal topic → count in a state store backed by a compacted changelog topic → output
 * topic) must give every word's exact count (the repartition topic, the changelog, the
 * consumer group, commits and the DeleteRecords purge of the repartition topic are all
 * exercised). {@link StreamsRestore} kills and restores it.
 *
 * <p>{@code exactly_once_v2}: the same topology in transactions (KIP-447: one transactional
 * producer per thread, the consumed offsets committed in its transactions, the state stores'
 * changelog writes and the output committed atomically); a read_committed consumer of the
 * output must see every word's exact count.
 */
public final class StreamsWordCount {
    private static final String INPUT = "wc-input";
    private static final String OUTPUT = "wc-output";
    private static final List<String> LINES = List.of(
            "the quick brown fox", "jumps over the lazy dog", "the dog barks",
            "a fox is quick", "the end");

    private StreamsWordCount() {}

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String guarantee = args[1];
        Path stateDir = Files.createTempDirectory("sluice-streams");
        Properties common = ClientScenarios.common(bootstrap);
        try (Admin admin = Admin.create(common)) {
            admin.createTopics(List.of(new NewTopic(INPUT, 2, (short) 1), new NewTopic(OUTPUT, 2, (short) 1)))
                    .all().get(30, TimeUnit.SECONDS);
        }
        try (KafkaProducer<String, String> p = ClientScenarios.newProducer(bootstrap)) {
            for (int i = 0; i < LINES.size(); i++) {
                p.send(new ProducerRecord<>(INPUT, "line-" + i, LINES.get(i)));
            }
            p.flush();
        }

        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream(INPUT)
                .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
                .groupBy((key, word) -> word, Grouped.with(Serdes.String(), Serdes.String()))
                .count(Materialized.as("counts"))
                .toStream()
                .to(OUTPUT, Produced.with(Serdes.String(), Serdes.Long()));

        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, "sluice-wordcount-" + guarantee.replace('_', '-'));
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, guarantee);
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "200");
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0");
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, "1");
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");

        AtomicReference<Throwable> uncaught = new AtomicReference<>();
        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        streams.setUncaughtExceptionHandler(e -> {
            uncaught.compareAndSet(null, e);
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler
                    .StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.setStateListener((now, before) -> Check.log("streams " + before + " -> " + now));
        streams.start();
        try {
            checkCounts(bootstrap, uncaught);
        } finally {
            streams.close(Duration.ofSeconds(20));
        }
        System.out.println("PASS streams " + guarantee);
        System.exit(0);
    }

    static String chain(Throwable e) {
        StringBuilder sb = new StringBuilder();
        for (Throwable t = e; t != null; t = t.getCause()) {
            sb.append(sb.length() == 0 ? "" : " <- ").append(t.getClass().getSimpleName())
                    .append(": ").append(t.getMessage());
        }
        return sb.toString();
    }

    /**
     * Reads the output topic (read_committed) until every word's latest count equals the
     * expected count.
     */
    static void checkCounts(String bootstrap, AtomicReference<Throwable> uncaught) throws Exception {
        Map<String, Long> expected = new HashMap<>();
        for (String line : LINES) {
            for (String w : line.split("\\W+")) {
                expected.merge(w, 1L, Long::sum);
            }
        }
        Properties p = ClientScenarios.consumerProps(bootstrap, null);
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, LongDeserializer.class.getName());
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        // Only committed counts (exactly_once_v2 writes the output in transactions).
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        Map<String, Long> latest = new HashMap<>();
        try (KafkaConsumer<String, Long> c = new KafkaConsumer<>(p)) {
            List<org.apache.kafka.common.TopicPartition> tps = ClientScenarios.partitions(OUTPUT, 2);
            c.assign(tps);
            c.seekToBeginning(tps);
            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            while (!latest.equals(expected) && System.nanoTime() < deadline) {
                if (uncaught.get() != null) {
                    throw new AssertionError("streams failed: " + chain(uncaught.get()), uncaught.get());
                }
                c.poll(Duration.ofMillis(200)).forEach(r -> latest.put(r.key(), r.value()));
            }
        }
        Check.equal(expected, latest, "word counts");
        Check.log("word counts: " + latest);
    }
}
