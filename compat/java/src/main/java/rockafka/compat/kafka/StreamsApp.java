package rockafka.compat.kafka;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.UUID;
import java.util.function.BooleanSupplier;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.GroupProtocol;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Produced;

/**
 * A real Kafka Streams 4.4 application with {@code group.protocol=streams} (KIP-1071): a stateful
 * word count (re-keyed with {@code groupBy}, so the broker must create a repartition topic and a
 * changelog topic from the topology the heartbeat carries). Two KafkaStreams instances share the
 * tasks; the first half of the input is counted, one instance closes (leaves the group), the other
 * takes over every task, the second half is counted, and the output topic's final count per word
 * must equal the input's. Reports checks as JSON lines (scenario {@code streams-group}, see
 * {@link Report}); prints {@code info} lines with the application id.
 *
 * <p>Usage: {@code java -cp kafka-runner.jar rockafka.compat.kafka.StreamsApp --bootstrap HOST:PORT
 * [--records N] [--timeout-s S] [--keep-running-s S]}: with --keep-running-s the surviving instance
 * stays up after the checks (for a describe by the group tools) until a line or end of input on
 * stdin, at most that long, then closes.
 */
public final class StreamsApp {
    private static final int PARTITIONS = 4;
    private static final String[] WORDS = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta"};

    public static void main(String[] args) throws Exception {
        if (System.getProperty("org.slf4j.simpleLogger.defaultLogLevel") == null) {
            System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        }
        String bootstrap = null;
        int records = 400;
        int timeoutS = 60;
        int keepS = 0;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--bootstrap" -> bootstrap = args[++i];
                case "--records" -> records = Integer.parseInt(args[++i]);
                case "--timeout-s" -> timeoutS = Integer.parseInt(args[++i]);
                case "--keep-running-s" -> keepS = Integer.parseInt(args[++i]);
                default -> {
                    System.err.println("streams-app: unknown argument " + args[i]);
                    System.exit(2);
                }
            }
        }
        Report report = new Report();
        report.begin("streams-group");
        try {
            new StreamsApp(bootstrap, records, Duration.ofSeconds(timeoutS), report).run(keepS);
        } catch (Throwable t) {
            report.error(t);
        }
        report.summary(List.of("streams-group"));
        System.exit(report.failed() == 0 ? 0 : 1);
    }

    private final String bootstrap;
    private final int records;
    private final Duration timeout;
    private final Report report;
    private final String runId = UUID.randomUUID().toString().substring(0, 8);
    private final long deadline;

    private StreamsApp(String bootstrap, int records, Duration timeout, Report report) {
        this.bootstrap = bootstrap;
        this.records = records;
        this.timeout = timeout;
        this.report = report;
        this.deadline = System.nanoTime() + timeout.toNanos();
    }

    private boolean waitFor(BooleanSupplier cond) throws InterruptedException {
        while (System.nanoTime() < deadline) {
            if (cond.getAsBoolean()) {
                return true;
            }
            Thread.sleep(100);
        }
        return cond.getAsBoolean();
    }

    private KafkaStreams instance(String appId, String input, String output, Path stateDir) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream(input)
                .groupBy((k, v) -> v, Grouped.with(Serdes.String(), Serdes.String()))
                .count()
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, GroupProtocol.STREAMS.name().toLowerCase());
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        // quick commits and no record cache: every count update reaches the output topic soon
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        return new KafkaStreams(builder.build(), p);
    }

    private static Set<String> tasks(KafkaStreams s) {
        Set<String> out = new TreeSet<>();
        for (ThreadMetadata t : s.metadataForLocalThreads()) {
            for (TaskMetadata task : t.activeTasks()) {
                out.add(task.taskId().toString());
            }
        }
        return out;
    }

    private void produce(String topic, int from, int to, Map<String, Long> expected) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = from; i < to; i++) {
                String word = WORDS[(i * 7 + i / 3) % WORDS.length];
                producer.send(new ProducerRecord<>(topic, "k" + i, word));
                expected.merge(word, 1L, Long::sum);
            }
            producer.flush();
        }
    }

    /** Reads the output topic until the latest count per word equals `expected` (or the deadline). */
    private Map<String, Long> readCounts(KafkaConsumer<String, Long> consumer, Map<String, Long> latest,
                                         Map<String, Long> expected) {
        while (System.nanoTime() < deadline && !latest.equals(expected)) {
            for (ConsumerRecord<String, Long> r : consumer.poll(Duration.ofMillis(200))) {
                latest.put(r.key(), r.value());
            }
        }
        return latest;
    }

    private void run(int keepS) throws Exception {
        String input = "streams-in-" + runId;
        String output = "streams-out-" + runId;
        String appId = "streams-app-" + runId;
        report.info("application_id", appId);
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(ap)) {
            admin.createTopics(List.of(new NewTopic(input, PARTITIONS, (short) 1), new NewTopic(output, 2, (short) 1)))
                    .all().get(timeout.toMillis(), java.util.concurrent.TimeUnit.MILLISECONDS);
        }
        Map<String, Long> expected = new TreeMap<>();
        produce(input, 0, records / 2, expected);

        Path dirA = Files.createTempDirectory("streams-a");
        Path dirB = Files.createTempDirectory("streams-b");
        KafkaStreams a = instance(appId, input, output, dirA);
        KafkaStreams b = instance(appId, input, output, dirB);
        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, "streams-check-" + runId);
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, LongDeserializer.class);
        boolean bClosed = false;
        try (KafkaConsumer<String, Long> out = new KafkaConsumer<>(cp)) {
            out.subscribe(List.of(output));
            a.start();
            b.start();
            // 2 subtopologies x 4 partitions = 8 tasks, shared by the two instances
            boolean shared = waitFor(() -> a.state() == KafkaStreams.State.RUNNING
                    && b.state() == KafkaStreams.State.RUNNING
                    && !tasks(a).isEmpty() && !tasks(b).isEmpty()
                    && tasks(a).size() + tasks(b).size() == 2 * PARTITIONS);
            report.check("two_instances_share_tasks", shared, "a=" + tasks(a) + " b=" + tasks(b)
                    + " states=" + a.state() + "/" + b.state());
            Set<String> overlap = new TreeSet<>(tasks(a));
            overlap.retainAll(tasks(b));
            report.check("no_task_on_both", overlap.isEmpty(), "overlap=" + overlap);
            Map<String, Long> latest = new HashMap<>();
            readCounts(out, latest, expected);
            report.equal("counts_after_first_half", expected, new TreeMap<>(latest));

            b.close(timeout);
            bClosed = true;
            boolean tookOver = waitFor(() -> a.state() == KafkaStreams.State.RUNNING
                    && tasks(a).size() == 2 * PARTITIONS);
            report.check("survivor_takes_all_tasks", tookOver, "a=" + tasks(a) + " state=" + a.state());
            produce(input, records / 2, records, expected);
            readCounts(out, latest, expected);
            report.equal("final_counts_equal_input", expected, new TreeMap<>(latest));
            long total = latest.values().stream().mapToLong(Long::longValue).sum();
            report.equal("total_counted", (long) records, total);
            if (keepS > 0) {
                report.info("ready_for_describe", "true");
                java.util.concurrent.CountDownLatch done = new java.util.concurrent.CountDownLatch(1);
                Thread stdin = new Thread(() -> {
                    try {
                        System.in.read();  // a line or end of input: the caller is done
                    } catch (java.io.IOException ignored) {
                        // treated as done
                    }
                    done.countDown();
                });
                stdin.setDaemon(true);
                stdin.start();
                done.await(keepS, java.util.concurrent.TimeUnit.SECONDS);
            }
        } finally {
            if (!bClosed) {
                b.close(Duration.ofSeconds(10));
            }
            a.close(Duration.ofSeconds(10));
        }
    }
}
