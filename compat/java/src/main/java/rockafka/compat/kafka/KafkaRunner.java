package rockafka.compat.kafka;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.errors.InvalidTopicException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Drives the stock Apache Kafka Java client (kafka-clients) through named scenarios against one
 * bootstrap address and reports every check as a JSON line (see {@link Report}).
 *
 * <p>Usage: {@code java -jar kafka-runner.jar --bootstrap HOST:PORT --scenarios a,b,...
 * [--records N] [--timeout-s S]}. Exit status: 0 when every check passed, 1 when any failed,
 * 2 on a usage error.
 *
 * <p>Invariants: every scenario uses fresh, uniquely named topics and groups, so scenarios are
 * independent and may run in any order against a shared broker; every wait is bounded by the
 * scenario deadline; clients are used with their default settings unless a scenario says why
 * it overrides one. A new scenario is one method plus one line in {@link #SCENARIOS}.
 */
public final class KafkaRunner {

    @FunctionalInterface
    private interface Scenario {
        void run(KafkaRunner runner) throws Exception;
    }

    private static final Map<String, Scenario> SCENARIOS = new LinkedHashMap<>();

    static {
        SCENARIOS.put("producer", KafkaRunner::produceDefaults);
        SCENARIOS.put("consumer-group", KafkaRunner::consumerGroup);
        SCENARIOS.put("describe-cluster", KafkaRunner::describeCluster);
        SCENARIOS.put("describe-topics", KafkaRunner::describeTopics);
        SCENARIOS.put("list-offsets", KafkaRunner::listOffsets);
        SCENARIOS.put("create-delete-topics", KafkaRunner::createDeleteTopics);
        SCENARIOS.put("transactions", KafkaRunner::transactions);
        SCENARIOS.put("compression", KafkaRunner::compression);
        // run by tests/rockafka/test_failover_kafka.py, which fails the master over mid-run
        SCENARIOS.put("idempotent-failover", KafkaRunner::idempotentFailover);
    }

    private final String bootstrap;
    private final int records;
    private final Duration timeout;
    private final Report report = new Report();
    private final String runId = UUID.randomUUID().toString().substring(0, 8);
    private final Path workDir;
    private long deadlineNanos;

    private KafkaRunner(String bootstrap, int records, Duration timeout, Path workDir) {
        this.bootstrap = bootstrap;
        this.records = records;
        this.timeout = timeout;
        this.workDir = workDir;
    }

    public static void main(String[] args) {
        // client INFO logging is noise here; stdout carries only the JSON result lines
        if (System.getProperty("org.slf4j.simpleLogger.defaultLogLevel") == null) {
            System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        }
        String bootstrap = null;
        String scenarios = String.join(",", SCENARIOS.keySet());
        int records = 200;
        int timeoutS = 60;
        Path workDir = null;
        try {
            for (int i = 0; i < args.length; i++) {
                switch (args[i]) {
                    case "--bootstrap" -> bootstrap = args[++i];
                    case "--scenarios" -> scenarios = args[++i];
                    case "--records" -> records = Integer.parseInt(args[++i]);
                    case "--timeout-s" -> timeoutS = Integer.parseInt(args[++i]);
                    case "--work-dir" -> workDir = Path.of(args[++i]);
                    case "--list" -> {
                        SCENARIOS.keySet().forEach(System.out::println);
                        System.exit(0);
                    }
                    default -> throw new IllegalArgumentException("unknown argument " + args[i]);
                }
            }
            if (bootstrap == null) {
                throw new IllegalArgumentException("--bootstrap HOST:PORT is required");
            }
        } catch (RuntimeException e) {
            System.err.println("kafka-runner: " + e.getMessage());
            System.err.println("usage: kafka-runner --bootstrap HOST:PORT [--scenarios "
                    + String.join(",", SCENARIOS.keySet()) + "] [--records N] [--timeout-s S]");
            System.exit(2);
            return;
        }
        List<String> names = List.of(scenarios.split(","));
        for (String name : names) {
            if (!SCENARIOS.containsKey(name)) {
                System.err.println("kafka-runner: unknown scenario " + name + "; known: " + SCENARIOS.keySet());
                System.exit(2);
            }
        }
        KafkaRunner runner = new KafkaRunner(bootstrap, records, Duration.ofSeconds(timeoutS), workDir);
        for (String name : names) {
            runner.report.begin(name);
            runner.deadlineNanos = System.nanoTime() + runner.timeout.toNanos();
            try {
                SCENARIOS.get(name).run(runner);
            } catch (Throwable t) {
                runner.report.error(t);
            }
        }
        runner.report.summary(names);
        System.exit(runner.report.failed() == 0 ? 0 : 1);
    }

    // ---- helpers --------------------------------------------------------------------------

    private boolean beforeDeadline() {
        return System.nanoTime() < deadlineNanos;
    }

    private String topic(String what) {
        return "java-" + what + "-" + runId;
    }

    private Admin admin() {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, (int) timeout.toMillis());
        // the admin client refuses an API timeout below its request timeout (30 s by default)
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, (int) Math.min(30_000, timeout.toMillis()));
        return Admin.create(p);
    }

    /** A producer with default settings: idempotent, acks=all (the 3.0+ defaults). */
    private KafkaProducer<String, String> producer() {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        return new KafkaProducer<>(p);
    }

    private KafkaConsumer<String, String> consumer(String group) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        if (group != null) {
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            // commits are explicit so the scenario knows exactly what was committed
            p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        }
        return new KafkaConsumer<>(p);
    }

    private void createTopic(Admin admin, String topic, int partitions) throws Exception {
        admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get();
    }

    private static ProducerRecord<String, String> record(String topic, long timestamp, int i, String tag) {
        List<Header> headers = List.of(
                new RecordHeader("idx", Integer.toString(i).getBytes(StandardCharsets.UTF_8)),
                new RecordHeader("run", tag.getBytes(StandardCharsets.UTF_8)));
        return new ProducerRecord<>(topic, null, timestamp, "key-" + i, "value-" + i + "-" + tag, headers);
    }

    /** Sends records [from, to) and returns their metadata in send order; flushes before returning. */
    private List<RecordMetadata> send(KafkaProducer<String, String> producer, String topic, int from, int to,
                                      long baseTimestamp, String tag) throws Exception {
        List<Future<RecordMetadata>> futures = new ArrayList<>();
        for (int i = from; i < to; i++) {
            futures.add(producer.send(record(topic, baseTimestamp + i, i, tag)));
        }
        producer.flush();
        List<RecordMetadata> out = new ArrayList<>();
        for (Future<RecordMetadata> f : futures) {
            out.add(f.get(timeout.toMillis(), TimeUnit.MILLISECONDS));
        }
        return out;
    }

    private List<TopicPartition> partitions(String topic, int count) {
        List<TopicPartition> tps = new ArrayList<>();
        for (int p = 0; p < count; p++) {
            tps.add(new TopicPartition(topic, p));
        }
        return tps;
    }

    /** Polls until `expected` records arrived or the deadline passed; returns what arrived. */
    private List<ConsumerRecord<String, String>> pollUntil(KafkaConsumer<String, String> consumer, int expected) {
        List<ConsumerRecord<String, String>> got = new ArrayList<>();
        while (got.size() < expected && beforeDeadline()) {
            for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                got.add(r);
            }
        }
        return got;
    }

    private static String header(ConsumerRecord<String, String> r, String key) {
        Header h = r.headers().lastHeader(key);
        return h == null ? null : new String(h.value(), StandardCharsets.UTF_8);
    }

    private static <T extends Throwable> boolean causedBy(Throwable t, Class<T> type) {
        for (Throwable c = t; c != null; c = c.getCause()) {
            if (type.isInstance(c)) {
                return true;
            }
        }
        return false;
    }

    // ---- scenarios ------------------------------------------------------------------------

    /**
     * The default (idempotent, acks=all) producer keeps sending to a 3-partition topic of a broker
     * group under a failover controller while the test fails the master over: once a few records
     * are acknowledged the runner writes {@code producing} into its work directory; the test kills
     * the master, waits for the new one and writes {@code failed-over}; the runner then sends N
     * more records and flushes. Every record must be acknowledged, no send may fail (no
     * OutOfOrderSequenceException, no fatal producer error), and a consumer must read each value
     * exactly once, at the offset its acknowledgement reported.
     */
    private void idempotentFailover() throws Exception {
        if (workDir == null) {
            throw new IllegalArgumentException("idempotent-failover needs --work-dir");
        }
        String topic = topic("failover");
        int parts = 3;
        try (Admin admin = admin()) {
            admin.createTopics(List.of(new NewTopic(topic, parts, (short) 3)
                    .configs(Map.of("min.insync.replicas", "2")))).all().get();
        }
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        // the failover takes seconds: give each record that long before the producer gives up
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 120_000);
        p.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        Map<String, RecordMetadata> acked = new ConcurrentHashMap<>();
        ConcurrentLinkedQueue<String> errors = new ConcurrentLinkedQueue<>();
        AtomicInteger sent = new AtomicInteger();
        int afterFailover = -1;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            int i = 0;
            while (beforeDeadline()) {
                String value = "v-" + i;
                producer.send(new ProducerRecord<>(topic, i % parts, "k-" + i, value), (m, e) -> {
                    if (e != null) {
                        errors.add(e.getClass().getSimpleName() + ": " + e.getMessage());
                    } else {
                        acked.put(value, m);
                    }
                });
                sent.incrementAndGet();
                i++;
                if (acked.size() >= 50 && !Files.exists(workDir.resolve("producing"))) {
                    Files.writeString(workDir.resolve("producing"), Integer.toString(i));
                }
                if (afterFailover < 0 && Files.exists(workDir.resolve("failed-over"))) {
                    afterFailover = i;
                }
                if (afterFailover >= 0 && i >= afterFailover + records) {
                    break;
                }
                Thread.sleep(2);  // pace: a steady stream, not a flood of queued records
            }
            producer.flush();
        }
        report.check("failover_happened_mid_run", afterFailover > 0, "records sent before failed-over: " + afterFailover);
        report.check("no_send_error", errors.isEmpty(), "errors " + errors.stream().limit(5).toList());
        report.check("no_out_of_order_sequence",
                errors.stream().noneMatch(e -> e.contains("OutOfOrderSequence")), "errors " + errors.size());
        report.equal("all_acknowledged", sent.get(), acked.size());
        try (KafkaConsumer<String, String> consumer = consumer(null)) {
            List<TopicPartition> tps = partitions(topic, parts);
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            List<ConsumerRecord<String, String>> got = pollUntil(consumer, acked.size());
            Map<String, Integer> seen = new HashMap<>();
            List<String> misplaced = new ArrayList<>();
            for (ConsumerRecord<String, String> r : got) {
                seen.merge(r.value(), 1, Integer::sum);
                RecordMetadata m = acked.get(r.value());
                if (m != null && (m.partition() != r.partition() || m.offset() != r.offset()) && misplaced.size() < 5) {
                    misplaced.add(r.value() + " at " + r.partition() + "@" + r.offset() + " acked at "
                            + m.partition() + "@" + m.offset());
                }
            }
            long dupes = seen.values().stream().filter(n -> n > 1).count();
            report.check("no_duplicate", dupes == 0, dupes + " value(s) read more than once");
            report.check("every_ack_read_back", seen.keySet().containsAll(acked.keySet()),
                    "read " + seen.size() + " distinct of " + acked.size() + " acknowledged");
            report.check("acked_offsets_hold", misplaced.isEmpty(), "misplaced " + misplaced);
        }
    }

    /**
     * Default producer (idempotent, acks=all) sends N keyed records with headers to a
     * 3-partition topic: every send is acknowledged, offsets per partition are 0..n-1 in send
     * order, and a consumer reads back exactly what was sent at the reported offsets.
     */
    private void produceDefaults() throws Exception {
        String topic = topic("producer");
        int parts = 3;
        long base = System.currentTimeMillis() - 60_000;
        List<RecordMetadata> metas;
        try (Admin admin = admin()) {
            createTopic(admin, topic, parts);
        }
        try (KafkaProducer<String, String> producer = producer()) {
            metas = send(producer, topic, 0, records, base, "p");
        }
        report.equal("all_acknowledged", records, metas.size());
        Map<Integer, List<Long>> byPartition = new HashMap<>();
        boolean timestampsOk = true;
        for (RecordMetadata m : metas) {
            byPartition.computeIfAbsent(m.partition(), k -> new ArrayList<>()).add(m.offset());
        }
        for (int i = 0; i < metas.size(); i++) {
            timestampsOk &= metas.get(i).timestamp() == base + i;
        }
        boolean contiguous = true;
        for (List<Long> offs : byPartition.values()) {
            for (int i = 0; i < offs.size(); i++) {
                contiguous &= offs.get(i) == i;
            }
        }
        report.check("offsets_contiguous_per_partition", contiguous, "offsets by partition " + summarize(byPartition));
        report.check("keys_spread_over_partitions", byPartition.size() > 1, "partitions used " + byPartition.keySet());
        report.check("create_time_returned", timestampsOk, "metadata timestamps equal the record timestamps");

        try (KafkaConsumer<String, String> consumer = consumer(null)) {
            List<TopicPartition> tps = partitions(topic, parts);
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            List<ConsumerRecord<String, String>> got = pollUntil(consumer, records);
            report.equal("read_back_count", records, got.size());
            Map<String, RecordMetadata> sent = new HashMap<>();
            for (int i = 0; i < metas.size(); i++) {
                sent.put("key-" + i, metas.get(i));
            }
            List<String> mismatches = new ArrayList<>();
            for (ConsumerRecord<String, String> r : got) {
                int i = Integer.parseInt(r.key().substring(4));
                RecordMetadata m = sent.get(r.key());
                boolean same = m != null && m.partition() == r.partition() && m.offset() == r.offset()
                        && r.value().equals("value-" + i + "-p") && r.timestamp() == base + i
                        && Integer.toString(i).equals(header(r, "idx")) && "p".equals(header(r, "run"))
                        && r.headers().toArray().length == 2;
                if (!same && mismatches.size() < 5) {
                    mismatches.add(r.toString());
                }
            }
            report.check("read_back_exact", mismatches.isEmpty(), "key, value, headers, timestamp, offset; mismatches " + mismatches);
        }
    }

    private static String summarize(Map<Integer, List<Long>> byPartition) {
        return byPartition.entrySet().stream()
                .map(e -> e.getKey() + ":" + e.getValue().size() + " first=" + e.getValue().get(0)
                        + " last=" + e.getValue().get(e.getValue().size() - 1))
                .collect(Collectors.joining(", "));
    }

    /**
     * A consumer group member subscribes, receives every record exactly once, commits; the
     * committed offsets equal the log end; a second member of the same group started after more
     * records were produced receives only the new records (the commit survived the first
     * member's departure).
     */
    private void consumerGroup() throws Exception {
        String topic = topic("group");
        String group = "java-group-" + runId;
        int parts = 3;
        int more = Math.max(10, records / 4);
        try (Admin admin = admin()) {
            createTopic(admin, topic, parts);
        }
        try (KafkaProducer<String, String> producer = producer()) {
            send(producer, topic, 0, records, System.currentTimeMillis(), "first");
        }
        try (KafkaConsumer<String, String> consumer = consumer(group)) {
            consumer.subscribe(List.of(topic));
            List<ConsumerRecord<String, String>> got = pollUntil(consumer, records);
            Set<String> keys = got.stream().map(ConsumerRecord::key).collect(Collectors.toSet());
            report.equal("first_member_received", records, keys.size());
            report.equal("first_member_no_duplicates", got.size(), keys.size());
            report.equal("first_member_assignment", parts, consumer.assignment().size());
            consumer.commitSync(Duration.ofMillis(timeout.toMillis()));
            Map<TopicPartition, OffsetAndMetadata> committed =
                    consumer.committed(new HashSet<>(partitions(topic, parts)), timeout);
            Map<TopicPartition, Long> ends = consumer.endOffsets(partitions(topic, parts), timeout);
            Map<TopicPartition, Long> committedOffsets = new HashMap<>();
            committed.forEach((tp, om) -> committedOffsets.put(tp, om == null ? null : om.offset()));
            report.equal("committed_equals_end_offsets", ends, committedOffsets);
        }
        try (KafkaProducer<String, String> producer = producer()) {
            send(producer, topic, records, records + more, System.currentTimeMillis(), "second");
        }
        try (KafkaConsumer<String, String> consumer = consumer(group)) {
            consumer.subscribe(List.of(topic));
            List<ConsumerRecord<String, String>> got = pollUntil(consumer, more);
            Set<String> keys = got.stream().map(ConsumerRecord::key).collect(Collectors.toSet());
            long old = got.stream().filter(r -> r.value().endsWith("-first")).count();
            report.equal("second_member_received_new", more, keys.size());
            report.equal("second_member_no_old_records", 0L, old);
            report.equal("second_member_no_duplicates", got.size(), keys.size());
            consumer.commitSync(Duration.ofMillis(timeout.toMillis()));
        }
    }

    /** describeCluster: the node list and a cluster id. */
    private void describeCluster() throws Exception {
        try (Admin admin = admin()) {
            DescribeClusterResult cluster = admin.describeCluster();
            Collection<Node> nodes = cluster.nodes().get();
            String clusterId = cluster.clusterId().get();
            Node controller = cluster.controller().get();
            report.check("cluster_has_nodes", !nodes.isEmpty(), "nodes " + nodes);
            report.check("cluster_id_present", clusterId != null && !clusterId.isEmpty(), "clusterId " + clusterId);
            report.check("controller_is_a_node", controller != null && nodes.contains(controller), "controller " + controller);
        }
    }

    /** describeTopics (DescribeTopicPartitions first on 3.8+/4.x clients, Metadata before). */
    private void describeTopics() throws Exception {
        String topic = topic("describe");
        int parts = 3;
        try (Admin admin = admin()) {
            createTopic(admin, topic, parts);
            Set<Integer> nodeIds = admin.describeCluster().nodes().get().stream().map(Node::id).collect(Collectors.toSet());

            TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
            report.equal("topic_name", topic, d.name());
            report.equal("partition_count", parts, d.partitions().size());
            List<Integer> ids = d.partitions().stream().map(TopicPartitionInfo::partition).sorted().toList();
            report.equal("partition_ids", List.of(0, 1, 2), ids);
            boolean leaders = d.partitions().stream().allMatch(p -> p.leader() != null && nodeIds.contains(p.leader().id())
                    && !p.replicas().isEmpty() && !p.isr().isEmpty());
            report.check("partitions_have_leader_replicas_isr", leaders, "partitions " + d.partitions());
            report.check("topic_id_present", d.topicId() != null && !d.topicId().toString().isEmpty(), "topicId " + d.topicId());
            report.check("not_internal", !d.isInternal(), "internal " + d.isInternal());

            try {
                admin.describeTopics(List.of(topic("missing"))).allTopicNames().get();
                report.check("unknown_topic_error", false, "describe of a missing topic succeeded");
            } catch (ExecutionException e) {
                report.check("unknown_topic_error", causedBy(e, UnknownTopicOrPartitionException.class), e.getCause());
            }
        }
    }

    /** listOffsets earliest / latest / forTimestamp (hit, between, none) / maxTimestamp. */
    private void listOffsets() throws Exception {
        String topic = topic("offsets");
        int n = 10;
        long base = System.currentTimeMillis() - 3_600_000L;
        TopicPartition tp = new TopicPartition(topic, 0);
        try (Admin admin = admin()) {
            createTopic(admin, topic, 1);
            try (KafkaProducer<String, String> producer = producer()) {
                for (int i = 0; i < n; i++) {
                    producer.send(new ProducerRecord<>(topic, 0, base + i * 1000L, "key-" + i, "value-" + i));
                }
                producer.flush();
            }
            report.equal("earliest", 0L, offset(admin, tp, OffsetSpec.earliest()).offset());
            report.equal("latest", (long) n, offset(admin, tp, OffsetSpec.latest()).offset());
            ListOffsetsResultInfo hit = offset(admin, tp, OffsetSpec.forTimestamp(base + 5000));
            report.equal("for_timestamp_exact", 5L, hit.offset());
            report.equal("for_timestamp_exact_ts", base + 5000, hit.timestamp());
            report.equal("for_timestamp_between", 6L, offset(admin, tp, OffsetSpec.forTimestamp(base + 5500)).offset());
            report.equal("for_timestamp_before_all", 0L, offset(admin, tp, OffsetSpec.forTimestamp(base - 10_000)).offset());
            report.equal("for_timestamp_after_all", -1L, offset(admin, tp, OffsetSpec.forTimestamp(base + 3_000_000L)).offset());
            ListOffsetsResultInfo max = offset(admin, tp, OffsetSpec.maxTimestamp());
            report.equal("max_timestamp_offset", (long) n - 1, max.offset());
            report.equal("max_timestamp", base + (n - 1) * 1000L, max.timestamp());
        }
    }

    private int metadataPartitions(String topic) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.ALLOW_AUTO_CREATE_TOPICS_CONFIG, "false");
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
            return consumer.partitionsFor(topic, timeout).size();
        }
    }

    private ListOffsetsResultInfo offset(Admin admin, TopicPartition tp, OffsetSpec spec) throws Exception {
        return admin.listOffsets(Map.of(tp, spec)).partitionResult(tp).get();
    }

    /**
     * createTopics / listTopics / deleteTopics, with the errors users see on misuse. The partition
     * count is read through Metadata (a consumer's partitionsFor, auto-creation off), so this
     * scenario does not depend on DescribeTopicPartitions, which admin-describe covers.
     */
    private void createDeleteTopics() throws Exception {
        String topic = topic("created");
        try (Admin admin = admin()) {
            createTopic(admin, topic, 4);
            report.check("listed_after_create", admin.listTopics().names().get().contains(topic), topic);
            report.equal("created_partitions", 4, metadataPartitions(topic));
            try {
                createTopic(admin, topic, 4);
                report.check("create_existing_fails", false, "second create of " + topic + " succeeded");
            } catch (ExecutionException e) {
                report.check("create_existing_fails", causedBy(e, TopicExistsException.class), e.getCause());
            }
            try {
                createTopic(admin, "bad/topic?" + runId, 1);
                report.check("invalid_name_fails", false, "create with an invalid name succeeded");
            } catch (ExecutionException e) {
                report.check("invalid_name_fails", causedBy(e, InvalidTopicException.class), e.getCause());
            }
            admin.deleteTopics(List.of(topic)).all().get();
            boolean gone = false;
            while (!gone && beforeDeadline()) {
                gone = !admin.listTopics().names().get().contains(topic);
            }
            report.check("unlisted_after_delete", gone, topic);
            try {
                admin.deleteTopics(List.of(topic("never-created"))).all().get();
                report.check("delete_missing_fails", false, "delete of a missing topic succeeded");
            } catch (ExecutionException e) {
                report.check("delete_missing_fails", causedBy(e, UnknownTopicOrPartitionException.class), e.getCause());
            }
        }
    }

    /**
     * Transactional producer: one committed and one aborted transaction on a 2-partition topic;
     * a read_committed consumer sees exactly the committed records, a read_uncommitted one sees
     * both; the log end is past the control (commit/abort marker) records.
     */
    private void transactions() throws Exception {
        String topic = topic("txn");
        int n = 10;
        try (Admin admin = admin()) {
            createTopic(admin, topic, 2);
        }
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "java-txn-" + runId);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();
            producer.beginTransaction();
            for (int i = 0; i < n; i++) {
                producer.send(record(topic, System.currentTimeMillis(), i, "committed"));
            }
            producer.commitTransaction();
            producer.beginTransaction();
            for (int i = n; i < 2 * n; i++) {
                producer.send(record(topic, System.currentTimeMillis(), i, "aborted"));
            }
            producer.flush();
            producer.abortTransaction();
            report.check("transactions_completed", true, "one commit, one abort");
        }
        for (IsolationLevel level : List.of(IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED)) {
            Properties c = new Properties();
            c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, level.toString());
            String name = level == IsolationLevel.READ_COMMITTED ? "read_committed" : "read_uncommitted";
            try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c)) {
                List<TopicPartition> tps = partitions(topic, 2);
                consumer.assign(tps);
                consumer.seekToBeginning(tps);
                int want = level == IsolationLevel.READ_COMMITTED ? n : 2 * n;
                List<ConsumerRecord<String, String>> got = new ArrayList<>();
                // read to the end of every partition, so records beyond `want` would be seen too
                Map<TopicPartition, Long> ends = consumer.endOffsets(tps, timeout);
                while (beforeDeadline() && tps.stream().anyMatch(tp -> consumer.position(tp, timeout) < ends.get(tp))) {
                    consumer.poll(Duration.ofMillis(200)).forEach(got::add);
                }
                long aborted = got.stream().filter(r -> r.value().endsWith("-aborted")).count();
                report.equal(name + "_count", want, got.size());
                report.equal(name + "_aborted_seen", level == IsolationLevel.READ_COMMITTED ? 0L : (long) n, aborted);
                long total = ends.values().stream().mapToLong(Long::longValue).sum();
                report.check(name + "_end_offsets_past_markers", total >= 2L * n + 2, "sum of end offsets " + total);
            }
        }
    }

    /**
     * Every compression codec of the Java client (its own gzip, snappy-java, lz4-java and
     * zstd-jni implementations): batches the broker must accept and validate as compressed, read
     * back exactly by a consumer.
     */
    private void compression() throws Exception {
        int n = 50;
        for (String codec : List.of("gzip", "snappy", "lz4", "zstd")) {
            String topic = topic("codec-" + codec);
            try (Admin admin = admin()) {
                createTopic(admin, topic, 1);
            }
            Properties p = new Properties();
            p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
            p.put(ProducerConfig.LINGER_MS_CONFIG, 50); // several records per (compressed) batch
            long base = System.currentTimeMillis();
            List<RecordMetadata> metas;
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
                metas = send(producer, topic, 0, n, base, codec);
            }
            report.equal(codec + "_acknowledged", n, metas.size());
            try (KafkaConsumer<String, String> consumer = consumer(null)) {
                List<TopicPartition> tps = partitions(topic, 1);
                consumer.assign(tps);
                consumer.seekToBeginning(tps);
                List<ConsumerRecord<String, String>> got = pollUntil(consumer, n);
                List<String> wrong = new ArrayList<>();
                for (int i = 0; i < got.size(); i++) {
                    ConsumerRecord<String, String> r = got.get(i);
                    if (r.offset() != i || !("key-" + i).equals(r.key()) || !("value-" + i + "-" + codec).equals(r.value())
                            || !Integer.toString(i).equals(header(r, "idx")) || r.timestamp() != base + i) {
                        wrong.add(r.toString());
                    }
                }
                report.equal(codec + "_read_back_count", n, got.size());
                report.check(codec + "_read_back_exact", wrong.isEmpty(), "mismatches " + wrong.stream().limit(3).toList());
            }
        }
    }
}
