package sluice.compat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka's Java client (kafka-clients 4.4) transactional producer against a broker, one
 * scenario per run: {@code java -cp ... sluice.compat.Transactions SCENARIO BOOTSTRAP TOPIC}.
 * Exit 0 and a last line {@code PASS SCENARIO} when every check held; a failed check throws.
 * Driven by tests/compat/test_txn_coordinator.py, against Sluice and Kafka alike.
 *
 * <ul>
 *   <li>{@code commit-abort}: committed, aborted and committed again, over 3 partitions; a
 *       read_committed consumer sees exactly the committed records, a read_uncommitted one all.
 *   <li>{@code fencing}: a second producer with the same transactional.id fences the first
 *       (its commit fails with ProducerFencedException) and aborts its open transaction, whose
 *       records read_committed never sees.
 *   <li>{@code consume-transform-produce}: {@value #CTP_INPUTS} records produced (not
 *       transactionally) to TOPIC-in over 3 partitions; a read_committed consumer in a group
 *       (auto commit off) and a transactional producer copy them, upper-cased, to TOPIC
 *       (3 partitions), one transaction per poll, the consumed offsets committed in it with
 *       {@code sendOffsetsToTransaction(offsets, consumer.groupMetadata())}. The second
 *       transaction is aborted: the loop seeks back to the group's committed offsets and reads
 *       those inputs again. At the end read_committed sees each input exactly once in TOPIC,
 *       and the group's committed offsets are TOPIC-in's end offsets.
 *   <li>{@code epoch-bump}: KIP-890 part 2. Two commits and an abort; after each,
 *       DescribeTransactions shows the producer epoch bumped by one at a finalized
 *       {@code transaction.version} of 2 (the client uses EndTxn v5, Produce v12, no
 *       AddPartitionsToTxn) and unchanged at 1. Prints {@code EPOCHS pid e0 e1 e2 e3 LEVEL}.
 * </ul>
 */
public final class Transactions {
    private static final Duration WAIT = Duration.ofSeconds(60);

    private Transactions() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println("usage: Transactions SCENARIO BOOTSTRAP TOPIC");
            System.exit(2);
        }
        String bootstrap = args[1];
        String topic = args[2];
        createTopic(bootstrap, topic, 3);
        switch (args[0]) {
            case "commit-abort" -> commitAbort(bootstrap, topic);
            case "fencing" -> fencing(bootstrap, topic);
            case "consume-transform-produce" -> consumeTransformProduce(bootstrap, topic);
            case "epoch-bump" -> epochBump(bootstrap, topic);
            default -> {
                System.err.println("unknown scenario " + args[0]);
                System.exit(2);
            }
        }
        System.out.println("PASS " + args[0]);
        System.exit(0);
    }

    static void createTopic(String bootstrap, String topic, int partitions) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(p)) {
            admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get();
        } catch (ExecutionException e) {
            if (!(e.getCause() instanceof TopicExistsException)) {
                throw e;
            }
        }
    }

    static KafkaProducer<String, String> transactional(String bootstrap, String id) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, id);
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "60000");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "60000");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        return new KafkaProducer<>(p);
    }

    /** Sends `values` round-robin over the topic's 3 partitions. */
    static void send(KafkaProducer<String, String> producer, String topic, String... values)
            throws Exception {
        for (int i = 0; i < values.length; i++) {
            producer.send(new ProducerRecord<>(topic, i % 3, values[i], values[i])).get();
        }
    }

    /** Every value in the topic as `isolation` reads it, once its end offsets are reached. */
    static List<String> readAll(String bootstrap, String topic, String isolation) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        List<String> out = new ArrayList<>();
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                tps.add(new TopicPartition(topic, i));
            }
            c.assign(tps);
            c.seekToBeginning(tps);
            // read_committed's end offsets are the LSOs: once reached, all is read.
            var ends = c.endOffsets(tps, WAIT);
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (tps.stream().anyMatch(tp -> c.position(tp, WAIT) < ends.get(tp))) {
                if (System.nanoTime() > deadline) {
                    throw new AssertionError("end offsets " + ends + " not reached; read " + out);
                }
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    out.add(r.value());
                }
            }
        }
        out.sort(String::compareTo);
        return out;
    }

    static void check(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
        System.out.println("ok: " + what);
    }

    static void commitAbort(String bootstrap, String topic) throws Exception {
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(ap)) {
            var tv = admin.describeFeatures().featureMetadata().get().finalizedFeatures()
                    .get("transaction.version");
            check(tv != null && tv.maxVersionLevel() >= 1,
                  "transaction.version is finalized at 1 or more: " + tv);
        }
        try (KafkaProducer<String, String> p = transactional(bootstrap, topic + "-txn")) {
            p.initTransactions();
            p.beginTransaction();
            send(p, topic, "c1", "c2", "c3");
            p.commitTransaction();
            p.beginTransaction();
            send(p, topic, "a1", "a2", "a3", "a4");
            p.abortTransaction();
            p.beginTransaction();
            send(p, topic, "c4", "c5");
            p.commitTransaction();
        }
        List<String> committed = readAll(bootstrap, topic, "read_committed");
        check(committed.equals(List.of("c1", "c2", "c3", "c4", "c5")),
              "read_committed sees the committed records only: " + committed);
        List<String> all = readAll(bootstrap, topic, "read_uncommitted");
        check(all.equals(List.of("a1", "a2", "a3", "a4", "c1", "c2", "c3", "c4", "c5")),
              "read_uncommitted sees every record: " + all);
    }

    static void fencing(String bootstrap, String topic) throws Exception {
        String id = topic + "-txn";
        KafkaProducer<String, String> first = transactional(bootstrap, id);
        first.initTransactions();
        first.beginTransaction();
        send(first, topic, "c1");
        first.commitTransaction();
        // An open transaction with records written: the new producer aborts it.
        first.beginTransaction();
        send(first, topic, "z1", "z2");
        try (KafkaProducer<String, String> second = transactional(bootstrap, id)) {
            second.initTransactions();
            boolean fenced;
            try {
                first.commitTransaction();
                fenced = false;
            } catch (ProducerFencedException | InvalidProducerEpochException e) {
                fenced = true;
            } catch (KafkaException e) {
                fenced = e.getCause() instanceof ProducerFencedException
                        || e.getCause() instanceof InvalidProducerEpochException;
                if (!fenced) {
                    throw e;
                }
            }
            check(fenced, "the first producer's commit is fenced");
            first.close(Duration.ZERO);
            second.beginTransaction();
            send(second, topic, "c2", "c3");
            second.commitTransaction();
        }
        List<String> committed = readAll(bootstrap, topic, "read_committed");
        check(committed.equals(List.of("c1", "c2", "c3")),
              "the fenced producer's open transaction was aborted: " + committed);
    }

    static void epochBump(String bootstrap, String topic) throws Exception {
        String id = topic + "-txn";
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(ap);
                KafkaProducer<String, String> p = transactional(bootstrap, id)) {
            var tv = admin.describeFeatures().featureMetadata().get().finalizedFeatures()
                    .get("transaction.version");
            short level = tv == null ? 0 : tv.maxVersionLevel();
            int bump = level >= 2 ? 1 : 0;
            p.initTransactions();
            List<Short> epochs = new ArrayList<>();
            long producerId = -1;
            for (int i = 0; i < 4; i++) {
                if (i > 0) {
                    p.beginTransaction();
                    send(p, topic, "v" + i);
                    if (i == 3) {
                        p.abortTransaction();
                    } else {
                        p.commitTransaction();
                    }
                }
                var d = admin.describeTransactions(List.of(id)).description(id).get();
                if (i > 0) {
                    TransactionState want = i == 3
                            ? TransactionState.COMPLETE_ABORT : TransactionState.COMPLETE_COMMIT;
                    long deadline = System.nanoTime() + WAIT.toNanos();
                    // The markers may still be out when EndTxn answered.
                    while (d.state() != want) {
                        if (System.nanoTime() > deadline) {
                            throw new AssertionError("state " + d.state() + ", wanted " + want);
                        }
                        Thread.sleep(50);
                        d = admin.describeTransactions(List.of(id)).description(id).get();
                    }
                }
                if (i == 0) {
                    producerId = d.producerId();
                }
                check(d.producerId() == producerId, "the producer id stays " + producerId);
                epochs.add((short) d.producerEpoch());
            }
            for (int i = 1; i < 4; i++) {
                check(epochs.get(i) == epochs.get(0) + i * bump,
                      "epoch after transaction " + i + " at transaction.version " + level
                      + ": " + epochs);
            }
            System.out.println("EPOCHS " + producerId + " " + epochs.get(0) + " " + epochs.get(1)
                    + " " + epochs.get(2) + " " + epochs.get(3) + " " + level);
        }
        List<String> committed = readAll(bootstrap, topic, "read_committed");
        check(committed.equals(List.of("v1", "v2")),
              "read_committed sees the two committed transactions: " + committed);
    }

    static final int CTP_INPUTS = 300;

    static List<TopicPartition> partitions(String topic) {
        List<TopicPartition> tps = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            tps.add(new TopicPartition(topic, i));
        }
        return tps;
    }

    static void consumeTransformProduce(String bootstrap, String topic) throws Exception {
        String input = topic + "-in";
        String group = topic + "-group";
        createTopic(bootstrap, input, 3);
        List<String> expected = new ArrayList<>();
        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> plain = new KafkaProducer<>(pp)) {
            for (int i = 0; i < CTP_INPUTS; i++) {
                String v = String.format("r%04d", i);
                plain.send(new ProducerRecord<>(input, i % 3, v, v));
                expected.add(v.toUpperCase());
            }
            plain.flush();
        }
        expected.sort(String::compareTo);

        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "40");
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG,
               StringDeserializer.class.getName());
        List<TopicPartition> in = partitions(input);
        Map<TopicPartition, Long> inputEnds;
        List<String> aborted = new ArrayList<>();
        int commits = 0;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp);
             KafkaProducer<String, String> producer = transactional(bootstrap, topic + "-txn")) {
            producer.initTransactions();
            consumer.subscribe(List.of(input));
            inputEnds = consumer.endOffsets(in, WAIT);
            int transactions = 0;
            long deadline = System.nanoTime() + WAIT.toNanos() * 2;
            while (true) {
                if (System.nanoTime() > deadline) {
                    throw new AssertionError("the loop did not finish; commits " + commits);
                }
                boolean done = !consumer.assignment().isEmpty()
                        && in.stream().allMatch(
                                tp -> consumer.position(tp, WAIT) >= inputEnds.get(tp));
                if (done) {
                    break;
                }
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) {
                    continue;
                }
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<String, String> r : records) {
                    String out = r.value().toUpperCase();
                    producer.send(new ProducerRecord<>(topic, r.partition(), out, out));
                    offsets.put(new TopicPartition(r.topic(), r.partition()),
                                new OffsetAndMetadata(r.offset() + 1));
                }
                // In the log before the transaction ends (an abort drops unsent records).
                producer.flush();
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                transactions++;
                if (transactions == 2) {
                    for (ConsumerRecord<String, String> r : records) {
                        aborted.add(r.value());
                    }
                    producer.abortTransaction();
                    // Back to the group's committed offsets (the start where none is).
                    var committed = consumer.committed(consumer.assignment(), WAIT);
                    for (TopicPartition tp : consumer.assignment()) {
                        OffsetAndMetadata o = committed.get(tp);
                        if (o == null) {
                            consumer.seekToBeginning(List.of(tp));
                        } else {
                            consumer.seek(tp, o.offset());
                        }
                    }
                } else {
                    producer.commitTransaction();
                    commits++;
                }
            }
        }
        check(!aborted.isEmpty(), "a transaction with " + aborted.size() + " records aborted");
        check(commits >= 2, commits + " transactions committed");

        List<String> output = readAll(bootstrap, topic, "read_committed");
        check(output.equals(expected), "read_committed sees each of the " + CTP_INPUTS
              + " inputs exactly once: " + output.size() + " records");
        List<String> everything = readAll(bootstrap, topic, "read_uncommitted");
        check(everything.size() == CTP_INPUTS + aborted.size(),
              "read_uncommitted also sees the aborted transaction's " + aborted.size()
              + " records: " + everything.size());

        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(ap)) {
            Map<TopicPartition, OffsetAndMetadata> committed =
                    admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            Map<TopicPartition, Long> got = new HashMap<>();
            committed.forEach((tp, o) -> got.put(tp, o.offset()));
            check(got.equals(inputEnds),
                  "the group's committed offsets are the input's end offsets: " + got
                  + " vs " + inputEnds);
        }
    }
}
