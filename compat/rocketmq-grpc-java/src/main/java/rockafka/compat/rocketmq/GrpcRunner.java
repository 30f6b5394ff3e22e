package rockafka.compat.rocketmq;

import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.ConsumeResult;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.FilterExpressionType;
import org.apache.rocketmq.client.apis.consumer.PushConsumer;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageBuilder;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.SendReceipt;
import org.apache.rocketmq.client.apis.producer.Transaction;
import org.apache.rocketmq.client.apis.producer.TransactionResolution;

/**
 * The official RocketMQ 5 Java gRPC client (rocketmq-client-java) against a RocketMQ proxy
 * endpoint: Rockafka's gRPC front or Apache RocketMQ's proxy. Prints JSON lines ({@link Report}).
 *
 * <p>Usage: {@code java -jar grpc-runner.jar --endpoint HOST:PORT --run-id ID [--tls true|false]
 * [--scenarios a,b] [--messages N] [--timeout-s S]}. Topics and groups are named
 * {@code grpc-<what>-<run id>} / {@code G-<what>-<run id>}; the driver creates them first (with
 * their message types, the FIFO group orderly, the DLQ group with one retry), so the same run
 * works against servers that do not auto-create typed topics. Exit 0 when every check passed.
 *
 * <p>Invariants: every message carries its index in property {@code idx}, body {@code body-<idx>}
 * and key {@code key-<run>-<idx>}; every wait is bounded by the scenario deadline; every client
 * is closed when its scenario ends.
 */
public final class GrpcRunner {

    @FunctionalInterface
    private interface Scenario {
        void run(GrpcRunner r) throws Exception;
    }

    private static final Map<String, Scenario> SCENARIOS = new LinkedHashMap<>();

    static {
        SCENARIOS.put("producer-normal", GrpcRunner::producerNormal);
        SCENARIOS.put("producer-fifo", GrpcRunner::producerFifo);
        SCENARIOS.put("producer-delay", GrpcRunner::producerDelay);
        SCENARIOS.put("producer-transaction", GrpcRunner::producerTransaction);
        SCENARIOS.put("producer-recall", GrpcRunner::producerRecall);
        SCENARIOS.put("simple-consumer", GrpcRunner::simpleConsumer);
        SCENARIOS.put("simple-dlq", GrpcRunner::simpleDlq);
        SCENARIOS.put("push-tag", GrpcRunner::pushTag);
        SCENARIOS.put("push-sql", GrpcRunner::pushSql);
        SCENARIOS.put("bench", GrpcRunner::bench);
    }

    private final ClientServiceProvider provider = ClientServiceProvider.loadService();
    private final ClientConfiguration config;
    private final String runId;
    private final int messages;
    private final Duration timeout;
    private final Report report = new Report();
    private final List<AutoCloseable> closeables = new ArrayList<>();
    private long deadlineNanos;

    private GrpcRunner(String endpoint, boolean tls, String runId, int messages, int timeoutS) {
        this.config = ClientConfiguration.newBuilder().setEndpoints(endpoint).enableSsl(tls)
                .setRequestTimeout(Duration.ofSeconds(10)).build();
        this.runId = runId;
        this.messages = messages;
        this.timeout = Duration.ofSeconds(timeoutS);
    }

    public static void main(String[] args) throws Exception {
        String endpoint = null;
        String runId = null;
        String scenarios = null;
        boolean tls = true;
        int messages = 20;
        int timeoutS = 90;
        try {
            for (int i = 0; i < args.length; i++) {
                switch (args[i]) {
                    case "--endpoint" -> endpoint = args[++i];
                    case "--run-id" -> runId = args[++i];
                    case "--tls" -> tls = Boolean.parseBoolean(args[++i]);
                    case "--scenarios" -> scenarios = args[++i];
                    case "--messages" -> messages = Integer.parseInt(args[++i]);
                    case "--timeout-s" -> timeoutS = Integer.parseInt(args[++i]);
                    case "--list" -> {
                        SCENARIOS.keySet().forEach(System.out::println);
                        System.exit(0);
                    }
                    default -> throw new IllegalArgumentException("unknown argument " + args[i]);
                }
            }
            if (endpoint == null || runId == null) {
                throw new IllegalArgumentException("--endpoint HOST:PORT and --run-id ID are required");
            }
        } catch (RuntimeException e) {
            System.err.println("grpc-runner: " + e.getMessage());
            System.exit(2);
            return;
        }
        List<String> names = scenarios == null ? List.copyOf(SCENARIOS.keySet()) : List.of(scenarios.split(","));
        for (String name : names) {
            if (!SCENARIOS.containsKey(name)) {
                System.err.println("grpc-runner: unknown scenario " + name + "; known: " + SCENARIOS.keySet());
                System.exit(2);
            }
        }
        GrpcRunner r = new GrpcRunner(endpoint, tls, runId, messages, timeoutS);
        System.exit(r.run(names) == 0 ? 0 : 1);
    }

    private int run(List<String> names) {
        report.begin("setup");
        report.info("client_version", clientVersion());
        for (String name : names) {
            report.begin(name);
            long started = System.nanoTime();
            deadlineNanos = started + timeout.toNanos();
            try {
                SCENARIOS.get(name).run(this);
            } catch (Throwable t) {
                report.error(t);
            } finally {
                closeAll();
            }
            report.info(name + "_ms", (System.nanoTime() - started) / 1_000_000);
        }
        report.summary(names);
        return report.failed();
    }

    private static String clientVersion() {
        try (InputStream in = ClientServiceProvider.class.getClassLoader().getResourceAsStream(
                "META-INF/maven/org.apache.rocketmq/rocketmq-client-java/pom.properties")) {
            Properties p = new Properties();
            if (in != null) {
                p.load(in);
            }
            return p.getProperty("version", "unknown");
        } catch (Exception e) {
            return "unknown";
        }
    }

    private void closeAll() {
        for (int i = closeables.size() - 1; i >= 0; i--) {
            try {
                closeables.get(i).close();
            } catch (Exception e) {
                report.check("close", false, e);
            }
        }
        closeables.clear();
    }

    // ---- names, messages, waits ----------------------------------------------------------

    private String topic(String what) {
        return "grpc-" + what + "-" + runId;
    }

    private String group(String what) {
        return "G-" + what + "-" + runId;
    }

    private boolean beforeDeadline() {
        return System.nanoTime() < deadlineNanos;
    }

    private boolean await(java.util.function.BooleanSupplier condition) throws InterruptedException {
        while (!condition.getAsBoolean()) {
            if (!beforeDeadline()) {
                return false;
            }
            Thread.sleep(50); // polling interval of a bounded wait
        }
        return true;
    }

    private MessageBuilder message(String topic, int idx, String tag) {
        return provider.newMessageBuilder().setTopic(topic).setTag(tag).setKeys("key-" + runId + "-" + idx)
                .setBody(("body-" + idx).getBytes(StandardCharsets.UTF_8)).addProperty("idx", Integer.toString(idx));
    }

    private static int idx(MessageView v) {
        String s = v.getProperties().get("idx");
        return s == null ? -1 : Integer.parseInt(s);
    }

    /** Null when the view is what was sent, else what differs. */
    private String mismatch(MessageView v, String topic, String tag) {
        int i = idx(v);
        List<String> diffs = new ArrayList<>();
        if (!topic.equals(v.getTopic())) {
            diffs.add("topic=" + v.getTopic());
        }
        String body = StandardCharsets.UTF_8.decode(v.getBody()).toString();
        if (!("body-" + i).equals(body)) {
            diffs.add("body=" + body);
        }
        if (!v.getKeys().contains("key-" + runId + "-" + i)) {
            diffs.add("keys=" + v.getKeys());
        }
        if (tag != null && !tag.equals(v.getTag().orElse(null))) {
            diffs.add("tag=" + v.getTag());
        }
        return diffs.isEmpty() ? null : "idx=" + i + " " + diffs;
    }

    private Producer producer(String... topics) throws Exception {
        Producer p = provider.newProducerBuilder().setClientConfiguration(config).setTopics(topics).build();
        closeables.add(p);
        return p;
    }

    private SimpleConsumer simpleConsumer(String group, String topic, FilterExpression filter) throws Exception {
        SimpleConsumer c = provider.newSimpleConsumerBuilder().setClientConfiguration(config).setConsumerGroup(group)
                .setAwaitDuration(Duration.ofSeconds(2)).setSubscriptionExpressions(Map.of(topic, filter)).build();
        closeables.add(c);
        return c;
    }

    private static final FilterExpression ALL = new FilterExpression("*", FilterExpressionType.TAG);
    /** The shortest invisible time Apache RocketMQ's proxy accepts on receive (minInvisibleTimeMillsForRecv). */
    private static final Duration INVISIBLE = Duration.ofSeconds(10);

    /** Receives with a SimpleConsumer until {@code want} distinct idx values arrived, acking each. */
    private Map<Integer, MessageView> receiveAll(SimpleConsumer c, int want, List<String> bad, String topic, String tag)
            throws Exception {
        Map<Integer, MessageView> got = new TreeMap<>();
        while (got.size() < want && beforeDeadline()) {
            for (MessageView v : c.receive(16, Duration.ofSeconds(10))) {
                if (got.putIfAbsent(idx(v), v) != null) {
                    bad.add("duplicate idx=" + idx(v));
                }
                String mm = mismatch(v, topic, tag);
                if (mm != null) {
                    bad.add(mm);
                }
                c.ack(v);
            }
        }
        return got;
    }

    private static Set<Integer> range(int from, int to) {
        Set<Integer> s = new TreeSet<>();
        for (int i = from; i < to; i++) {
            s.add(i);
        }
        return s;
    }

    private static String first(List<String> items) {
        return items.isEmpty() ? "-" : items.size() + ": " + items.get(0);
    }

    // ---- scenarios ----------------------------------------------------------------------

    /** Normal messages: every send gets a receipt with a message id; a SimpleConsumer gets them all back intact. */
    private void producerNormal() throws Exception {
        String topic = topic("normal");
        Producer p = producer(topic);
        Set<String> ids = new TreeSet<>();
        for (int i = 0; i < messages; i++) {
            SendReceipt r = p.send(message(topic, i, "TagN").build());
            ids.add(r.getMessageId().toString());
        }
        report.equal("message_ids_unique", messages, ids.size());
        List<String> bad = new ArrayList<>();
        Map<Integer, MessageView> got = receiveAll(simpleConsumer(group("normal"), topic, ALL), messages, bad, topic, "TagN");
        report.equal("received_all", range(0, messages), got.keySet());
        Set<String> seenIds = new TreeSet<>();
        got.values().forEach(v -> seenIds.add(v.getMessageId().toString()));
        report.equal("message_ids_match", ids, seenIds);
        report.check("content_intact", bad.isEmpty(), first(bad));
    }

    /** FIFO: messages of one message group arrive in send order, each group on its own. */
    private void producerFifo() throws Exception {
        String topic = topic("fifo");
        Producer p = producer(topic);
        String[] groups = {"order-a", "order-b", "order-c"};
        for (int i = 0; i < messages; i++) {
            p.send(message(topic, i, "TagF").setMessageGroup(groups[i % groups.length]).build());
        }
        SimpleConsumer c = simpleConsumer(group("fifo"), topic, ALL);
        Map<String, List<Integer>> order = new TreeMap<>();
        List<String> bad = new ArrayList<>();
        AtomicInteger total = new AtomicInteger();
        while (total.get() < messages && beforeDeadline()) {
            for (MessageView v : c.receive(16, Duration.ofSeconds(10))) {
                order.computeIfAbsent(v.getMessageGroup().orElse("?"), k -> new ArrayList<>()).add(idx(v));
                total.incrementAndGet();
                String mm = mismatch(v, topic, "TagF");
                if (mm != null) {
                    bad.add(mm);
                }
                c.ack(v);
            }
        }
        report.equal("received_count", messages, total.get());
        List<String> wrong = new ArrayList<>();
        for (int g = 0; g < groups.length; g++) {
            List<Integer> want = new ArrayList<>();
            for (int i = g; i < messages; i += groups.length) {
                want.add(i);
            }
            if (!want.equals(order.get(groups[g]))) {
                wrong.add(groups[g] + " " + order.get(groups[g]));
            }
        }
        report.check("per_group_send_order", wrong.isEmpty(), first(wrong));
        report.check("content_intact", bad.isEmpty(), first(bad));
    }

    /** Delay: a message with a delivery timestamp is not received before it and carries it on receive. */
    private void producerDelay() throws Exception {
        String topic = topic("delay");
        Producer p = producer(topic);
        SimpleConsumer c = simpleConsumer(group("delay"), topic, ALL);
        long deliverAt = System.currentTimeMillis() + 3000;
        p.send(message(topic, 0, "TagD").setDeliveryTimestamp(deliverAt).build());
        List<MessageView> got = new ArrayList<>();
        long receivedAt = 0;
        while (got.isEmpty() && beforeDeadline()) {
            got.addAll(c.receive(1, Duration.ofSeconds(10)));
            receivedAt = System.currentTimeMillis();
        }
        report.check("received", got.size() == 1, got.size() + " message(s)");
        if (got.isEmpty()) {
            return;
        }
        MessageView v = got.get(0);
        c.ack(v);
        // timer wheels deliver by one-second step (timerPrecisionMs), so up to a step early
        report.check("not_before_delivery_step", receivedAt >= deliverAt - 1000,
                "received " + (receivedAt - deliverAt) + " ms after the delivery time");
        report.equal("delivery_timestamp_on_receive", deliverAt, v.getDeliveryTimestamp().orElse(-1L));
        report.check("content_intact", mismatch(v, topic, "TagD") == null, mismatch(v, topic, "TagD"));
    }

    /**
     * Transactions: one committed, one rolled back, one left open and resolved COMMIT by the
     * checker when the server asks (orphaned-transaction recovery over the telemetry stream).
     */
    private void producerTransaction() throws Exception {
        String topic = topic("txn");
        ConcurrentLinkedQueue<Integer> checked = new ConcurrentLinkedQueue<>();
        Producer p = provider.newProducerBuilder().setClientConfiguration(config).setTopics(topic)
                .setTransactionChecker(v -> {
                    // as a real checker: the local state says only the open one (idx 2) committed;
                    // a check of one already ended (a server may ask early) must not change it
                    checked.add(idx(v));
                    return idx(v) == 2 ? TransactionResolution.COMMIT : TransactionResolution.ROLLBACK;
                }).build();
        closeables.add(p);
        Transaction t0 = p.beginTransaction();
        p.send(message(topic, 0, "TagT").build(), t0);
        t0.commit();
        Transaction t1 = p.beginTransaction();
        p.send(message(topic, 1, "TagT").build(), t1);
        t1.rollback();
        Transaction t2 = p.beginTransaction();
        p.send(message(topic, 2, "TagT").build(), t2); // neither committed nor rolled back
        SimpleConsumer c = simpleConsumer(group("txn"), topic, ALL);
        List<String> bad = new ArrayList<>();
        Map<Integer, MessageView> got = receiveAll(c, 2, bad, topic, "TagT");
        report.equal("committed_and_checked_delivered", Set.of(0, 2), got.keySet());
        report.check("checker_asked_for_open_one", checked.contains(2), "checked " + checked);
        // the rolled-back one never arrives in one more receive round; a second copy of a committed
        // one may (check-back is at-least-once: a server may ask again before it records a commit)
        List<Integer> extra = new ArrayList<>();
        for (MessageView v : c.receive(16, INVISIBLE)) {
            extra.add(idx(v));
            c.ack(v);
        }
        report.check("rolled_back_not_delivered", !extra.contains(1), "extra deliveries " + extra);
        report.info("producer-transaction_extra_deliveries", extra);
        report.check("content_intact", bad.isEmpty(), first(bad));
    }

    /**
     * SimpleConsumer: receive with a short invisible time; ack some, extend one with
     * changeInvisibleDuration (it stays hidden past the original time), let one lapse: the lapsed
     * one comes back with delivery attempt 2, the acked ones never do.
     */
    private void simpleConsumer() throws Exception {
        String topic = topic("simple");
        Producer p = producer(topic);
        for (int i = 0; i < 3; i++) {
            p.send(message(topic, i, "TagS").build());
        }
        SimpleConsumer c = simpleConsumer(group("simple"), topic, ALL);
        Map<Integer, MessageView> first = new TreeMap<>();
        while (first.size() < 3 && beforeDeadline()) {
            for (MessageView v : c.receive(16, INVISIBLE)) {
                first.put(idx(v), v);
            }
        }
        report.equal("first_delivery", range(0, 3), first.keySet());
        if (first.size() < 3) {
            return;
        }
        c.ack(first.get(0));
        c.changeInvisibleDuration(first.get(1), Duration.ofSeconds(60));
        long start = System.currentTimeMillis();
        Map<Integer, List<Integer>> redelivered = new ConcurrentHashMap<>();
        while (!redelivered.containsKey(2) && beforeDeadline()) {
            for (MessageView v : c.receive(16, INVISIBLE)) {
                redelivered.computeIfAbsent(idx(v), k -> Collections.synchronizedList(new ArrayList<>()))
                        .add(v.getDeliveryAttempt());
                c.ack(v);
            }
        }
        long waited = System.currentTimeMillis() - start;
        report.equal("lapsed_one_redelivered_with_attempt_2", List.of(2), redelivered.get(2));
        report.check("acked_not_redelivered", !redelivered.containsKey(0), "redelivered " + redelivered.keySet());
        report.check("extended_not_redelivered", !redelivered.containsKey(1),
                "redelivered " + redelivered.keySet() + " after " + waited + " ms");
    }

    /**
     * Dead letters: the group allows one retry (retryMaxTimes 1, set by the driver); a message
     * never acked is delivered twice (attempts 1 and 2) and then moved to %DLQ%group.
     */
    private void simpleDlq() throws Exception {
        String topic = topic("dlq");
        Producer p = producer(topic);
        p.send(message(topic, 0, "TagX").build());
        SimpleConsumer c = simpleConsumer(group("dlq"), topic, ALL);
        List<Integer> attempts = new ArrayList<>();
        long lastAt = 0;
        while (beforeDeadline() && (attempts.size() < 2 || System.currentTimeMillis() - lastAt < 12_000)) {
            for (MessageView v : c.receive(16, INVISIBLE)) {
                attempts.add(v.getDeliveryAttempt());
                lastAt = System.currentTimeMillis();
            }
        }
        report.equal("delivered_twice_then_gone", List.of(1, 2), attempts);
    }

    private void push(String what, FilterExpression filter, int n, java.util.function.IntFunction<String> tagOf,
                      java.util.function.IntFunction<Map<String, String>> propsOf, Set<Integer> expected) throws Exception {
        String topic = topic(what);
        Producer p = producer(topic);
        for (int i = 0; i < n; i++) {
            MessageBuilder b = message(topic, i, tagOf.apply(i));
            propsOf.apply(i).forEach(b::addProperty);
            p.send(b.build());
        }
        Map<Integer, AtomicInteger> counts = new ConcurrentHashMap<>();
        ConcurrentLinkedQueue<String> bad = new ConcurrentLinkedQueue<>();
        PushConsumer c = provider.newPushConsumerBuilder().setClientConfiguration(config).setConsumerGroup(group(what))
                .setSubscriptionExpressions(Map.of(topic, filter)).setMessageListener(v -> {
                    counts.computeIfAbsent(idx(v), k -> new AtomicInteger()).incrementAndGet();
                    String mm = mismatch(v, topic, tagOf.apply(idx(v)));
                    if (mm != null) {
                        bad.add(mm);
                    }
                    return ConsumeResult.SUCCESS;
                }).build();
        closeables.add(c);
        int last = Collections.max(expected);
        boolean done = await(() -> counts.keySet().containsAll(expected) && counts.containsKey(last));
        report.check("all_matching_received", done, "received " + new TreeSet<>(counts.keySet()));
        report.equal("received_exactly_matching", expected, new TreeSet<>(counts.keySet()));
        report.equal("no_duplicates", 0, counts.values().stream().mapToInt(a -> a.get() - 1).sum());
        report.check("content_intact", bad.isEmpty(), first(new ArrayList<>(bad)));
    }

    /** PushConsumer with a tag filter: only TagA and TagC arrive, each once. */
    private void pushTag() throws Exception {
        java.util.function.IntFunction<String> tagOf = i -> i % 3 == 0 ? "TagA" : i % 3 == 1 ? "TagB" : "TagC";
        Set<Integer> expected = new TreeSet<>();
        for (int i = 0; i < messages; i++) {
            if (i % 3 != 1) {
                expected.add(i);
            }
        }
        push("push-tag", new FilterExpression("TagA || TagC", FilterExpressionType.TAG), messages, tagOf,
                i -> Map.of(), expected);
    }

    /** PushConsumer with a SQL92 filter on a user property. */
    private void pushSql() throws Exception {
        Set<Integer> expected = new TreeSet<>();
        for (int i = 0; i < messages; i++) {
            if (i % 2 == 0 && i >= 4) {
                expected.add(i);
            }
        }
        push("push-sql", new FilterExpression("a >= 4 AND color = 'red'", FilterExpressionType.SQL92), messages,
                i -> "TagQ", i -> Map.of("a", Integer.toString(i), "color", i % 2 == 0 ? "red" : "blue"), expected);
    }

    /**
     * Throughput (compat/bench/grpc_bench.py): {@code messages} 512-byte messages sent with up to
     * 128 sends in flight, then received (batches of 32) and acked (up to 128 acks in flight) by a
     * SimpleConsumer; reports
     * {@code send_msgs_per_s} and {@code receive_msgs_per_s} as info lines. Run on its own.
     */
    private void bench() throws Exception {
        String topic = topic("bench");
        Producer p = producer(topic);
        byte[] body = new byte[512];
        java.util.Arrays.fill(body, (byte) 'x');
        for (int i = 0; i < 200; i++) { // warm-up: connections, routes, JIT
            p.send(provider.newMessageBuilder().setTopic(topic).setTag("W").setBody(body).build());
        }
        java.util.ArrayDeque<java.util.concurrent.CompletableFuture<SendReceipt>> inflight = new java.util.ArrayDeque<>();
        long t0 = System.nanoTime();
        for (int i = 0; i < messages; i++) {
            inflight.add(p.sendAsync(provider.newMessageBuilder().setTopic(topic).setTag("B").setBody(body).build()));
            if (inflight.size() >= 128) {
                inflight.poll().join();
            }
        }
        while (!inflight.isEmpty()) {
            inflight.poll().join();
        }
        double sendS = (System.nanoTime() - t0) / 1e9;
        report.info("send_msgs_per_s", String.format("%.0f", messages / sendS));
        SimpleConsumer c = provider.newSimpleConsumerBuilder().setClientConfiguration(config).setConsumerGroup(group("bench"))
                .setAwaitDuration(Duration.ofSeconds(5))
                .setSubscriptionExpressions(Map.of(topic, new FilterExpression("B", FilterExpressionType.TAG))).build();
        closeables.add(c);
        int received = 0;
        java.util.ArrayDeque<java.util.concurrent.CompletableFuture<Void>> acks = new java.util.ArrayDeque<>();
        long t1 = System.nanoTime();
        while (received < messages && beforeDeadline()) {
            for (MessageView v : c.receive(32, Duration.ofSeconds(30))) {
                acks.add(c.ackAsync(v));
                received++;
                if (acks.size() >= 128) { // the same bound as sends: no unbounded RPC backlog
                    acks.poll().join();
                }
            }
        }
        acks.forEach(java.util.concurrent.CompletableFuture::join);
        double recvS = (System.nanoTime() - t1) / 1e9;
        report.info("receive_msgs_per_s", String.format("%.0f", received / recvS));
        report.equal("received_all", messages, received);
    }

    /**
     * RecallMessage (5.3+): of two delay messages due in 4 s, the one recalled with the handle
     * its send returned is never delivered; the other is.
     */
    private void producerRecall() throws Exception {
        String topic = topic("recall");
        Producer p = producer(topic);
        long deliverAt = System.currentTimeMillis() + 4000;
        SendReceipt recalled = p.send(message(topic, 0, "TagR").setDeliveryTimestamp(deliverAt).build());
        p.send(message(topic, 1, "TagR").setDeliveryTimestamp(deliverAt).build());
        String handle = recalled.getRecallHandle();
        report.check("recall_handle_returned", handle != null && !handle.isEmpty(), handle);
        var receipt = p.recallMessage(topic, handle);
        report.equal("recall_names_the_message", recalled.getMessageId().toString(), String.valueOf(receipt.getMessageId()));
        SimpleConsumer c = simpleConsumer(group("recall"), topic, ALL);
        Map<Integer, MessageView> got = new TreeMap<>();
        while (System.currentTimeMillis() < deliverAt + 6000 && beforeDeadline()) {
            for (MessageView v : c.receive(16, Duration.ofSeconds(10))) {
                got.put(idx(v), v);
                c.ack(v);
            }
        }
        report.equal("only_the_other_delivered", Set.of(1), got.keySet());
    }
}
