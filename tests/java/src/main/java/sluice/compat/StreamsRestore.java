package sluice.compat;

import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.errors.TopicExistsException;
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
 * Kafka Streams' word count with Kafka's default topology (its count store backed by a
 * compacted changelog topic), in three steps a test drives as separate JVMs so that it can
 * SIGKILL the application between them:
 *
 * <ul>
 *   <li>{@code StreamsRestore BOOTSTRAP produce FROM TO}: writes lines FROM..TO (exclusive) to
 *       the input topic (creating it and the output topic first);
 *   <li>{@code StreamsRestore BOOTSTRAP run STATE_DIR [GUARANTEE]}: runs the application
 *       (processing.guarantee GUARANTEE, at_least_once by default) until killed, printing
 *       {@code RUNNING} when it is;
 *   <li>{@code StreamsRestore BOOTSTRAP check TO}: reads the output topic (read_committed)
 *       until every word's latest count is its exact count over lines 0..TO, within 90 s.
 * </ul>
 *
 * <p>Run with a fresh {@code STATE_DIR} after a kill, the application restores its store from
 * the changelog alone: the counts after the restart are exact only if the changelog kept every
 * word's latest count.
 */
public final class StreamsRestore {
    static final String APPLICATION_ID = "sluice-wordcount-restore";
    static final String INPUT = "wcr-input";
    static final String OUTPUT = "wcr-output";
    private static final int PARTITIONS = 2;

    private StreamsRestore() {}

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        switch (args[1]) {
            case "produce" -> produce(bootstrap, Integer.parseInt(args[2]), Integer.parseInt(args[3]));
            case "run" -> run(bootstrap, args[2], args.length > 3 ? args[3] : "at_least_once");
            case "check" -> check(bootstrap, Integer.parseInt(args[2]));
            default -> throw new IllegalArgumentException("unknown step " + args[1]);
        }
        System.exit(0);
    }

    /** Line `i`: three words, so that counts differ from word to word. */
    static String line(int i) {
        return "alpha-" + (i % 7) + " beta-" + (i % 13) + " gamma";
    }

    static void produce(String bootstrap, int from, int to) throws Exception {
        try (Admin admin = Admin.create(ClientScenarios.common(bootstrap))) {
            for (String topic : List.of(INPUT, OUTPUT)) {
                try {
                    admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1)))
                            .all().get(30, TimeUnit.SECONDS);
                } catch (ExecutionException e) {
                    if (!(e.getCause() instanceof TopicExistsException)) {
                        throw e;
                    }
                }
            }
        }
        try (KafkaProducer<String, String> p = ClientScenarios.newProducer(bootstrap)) {
            for (int i = from; i < to; i++) {
                p.send(new ProducerRecord<>(INPUT, "line-" + i, line(i))).get(30, TimeUnit.SECONDS);
            }
        }
        System.out.println("PASS produced " + from + ".." + to);
    }

    static void run(String bootstrap, String stateDir, String guarantee)
            throws InterruptedException {
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream(INPUT)
                .flatMapValues(line -> Arrays.asList(line.split(" ")))
                .groupBy((key, word) -> word, Grouped.with(Serdes.String(), Serdes.String()))
                .count(Materialized.as("counts"))
                .toStream()
                .to(OUTPUT, Produced.with(Serdes.String(), Serdes.Long()));
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, APPLICATION_ID);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, guarantee);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "200");
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0");
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, "1");
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        streams.setUncaughtExceptionHandler(e -> {
            System.out.println("FAIL streams: " + StreamsWordCount.chain(e));
            System.out.flush();
            Runtime.getRuntime().halt(1);
            return null;
        });
        streams.setStateListener((now, before) -> {
            Check.log("streams " + before + " -> " + now);
            if (now == KafkaStreams.State.RUNNING) {
                System.out.println("RUNNING");
                System.out.flush();
            }
        });
        streams.start();
        Thread.sleep(Long.MAX_VALUE); // until the test kills this JVM
    }

    static void check(String bootstrap, int to) throws Exception {
        Map<String, Long> expected = new HashMap<>();
        for (int i = 0; i < to; i++) {
            for (String w : line(i).split(" ")) {
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
            List<org.apache.kafka.common.TopicPartition> tps = ClientScenarios.partitions(OUTPUT, PARTITIONS);
            c.assign(tps);
            c.seekToBeginning(tps);
            long deadline = System.nanoTime() + Duration.ofSeconds(90).toNanos();
            while (!latest.equals(expected) && System.nanoTime() < deadline) {
                c.poll(Duration.ofMillis(200)).forEach(r -> latest.put(r.key(), r.value()));
            }
        }
        Check.equal(expected, latest, "word counts over lines 0.." + to);
        System.out.println("PASS counts " + to);
    }
}
