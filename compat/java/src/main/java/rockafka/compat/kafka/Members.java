package rockafka.compat.kafka;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.regex.Pattern;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * Long-lived group members of the stock Java client, driven line by line from stdin, so a test
 * can make members join and leave while it restarts the broker — all in one JVM.
 *
 * <p>Usage: {@code java -cp kafka-runner.jar rockafka.compat.kafka.Members --bootstrap HOST:PORT}.
 * Commands (one per line):
 * <ul>
 *   <li>{@code consumer NAME GROUP TOPICS [key=value ...]}: a {@link KafkaConsumer} that
 *       subscribes to TOPICS (comma separated, or {@code ~REGEX} for a pattern); after each poll
 *       it commits the batch synchronously and only then reports it, so a record it reports
 *       is committed ("commit, then emit": a record reported twice is a real duplicate).
 *       Extra settings are consumer configs (e.g. {@code group.protocol=consumer},
 *       {@code group.instance.id=x}, {@code group.remote.assignor=range}).</li>
 *   <li>{@code share NAME GROUP TOPIC [key=value ...]}: a {@link KafkaShareConsumer} with explicit
 *       acknowledgement. A record whose value is {@code release-N...} is RELEASEd while its delivery
 *       count is at most N, one whose value starts with {@code reject} is REJECTed, one starting
 *       with {@code renew} is RENEWed once and then ACCEPTed, every other is ACCEPTed; each poll's
 *       acknowledgements are committed with commitSync before the next poll.</li>
 *   <li>{@code stop NAME}: close that member (it leaves its group); {@code quit}: close all, exit.</li>
 * </ul>
 * Output, one JSON object per line on stdout: {@code {"event":"records","member":..,"records":
 * [[topic,partition,offset,value,deliveryCount,ack],..]}}, {@code assigned}/{@code revoked} with
 * partitions, {@code error} with the exception, {@code stopped}, {@code ready}.
 */
public final class Members {
    private final String bootstrap;
    private final Map<String, Member> members = new ConcurrentHashMap<>();

    private Members(String bootstrap) {
        this.bootstrap = bootstrap;
    }

    public static void main(String[] args) throws Exception {
        if (System.getProperty("org.slf4j.simpleLogger.defaultLogLevel") == null) {
            System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        }
        String bootstrap = null;
        for (int i = 0; i < args.length; i++) {
            if (args[i].equals("--bootstrap")) {
                bootstrap = args[++i];
            }
        }
        if (bootstrap == null) {
            System.err.println("usage: Members --bootstrap HOST:PORT");
            System.exit(2);
        }
        Members m = new Members(bootstrap);
        emit("{\"event\":\"ready\"}");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.isEmpty()) {
                continue;
            }
            String[] parts = line.split("\\s+");
            try {
                switch (parts[0]) {
                    case "consumer", "share" -> m.start(parts);
                    case "stop" -> m.stop(parts[1]);
                    case "quit" -> {
                        m.stopAll();
                        emit("{\"event\":\"quit\"}");
                        System.exit(0);
                    }
                    default -> emit("{\"event\":\"error\",\"member\":null,\"error\":" + q("unknown command " + parts[0]) + "}");
                }
            } catch (Exception e) {
                emit("{\"event\":\"error\",\"member\":null,\"error\":" + q(e.toString()) + "}");
            }
        }
        m.stopAll();
        System.exit(0);
    }

    static synchronized void emit(String json) {
        System.out.println(json);
        System.out.flush();
    }

    static String q(String s) {
        if (s == null) {
            return "null";
        }
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                default -> {
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        return b.append('"').toString();
    }

    private void start(String[] parts) {
        String kind = parts[0];
        String name = parts[1];
        String group = parts[2];
        String topics = parts[3];
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, name);
        if (kind.equals("consumer")) {
            p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
            p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        } else {
            p.put("share.acknowledgement.mode", "explicit");
        }
        for (int i = 4; i < parts.length; i++) {
            int eq = parts[i].indexOf('=');
            p.put(parts[i].substring(0, eq), parts[i].substring(eq + 1));
        }
        Member m = kind.equals("consumer") ? new ClassicOrModern(name, topics, p) : new Share(name, topics, p);
        if (members.putIfAbsent(name, m) != null) {
            throw new IllegalArgumentException("member " + name + " already runs");
        }
        m.thread.start();
    }

    private void stop(String name) throws InterruptedException {
        Member m = members.remove(name);
        if (m != null) {
            m.close();
        }
    }

    private void stopAll() throws InterruptedException {
        for (String name : new ArrayList<>(members.keySet())) {
            stop(name);
        }
    }

    private abstract static class Member {
        final String name;
        final AtomicBoolean running = new AtomicBoolean(true);
        final Thread thread;

        Member(String name) {
            this.name = name;
            this.thread = new Thread(this::runSafely, "member-" + name);
        }

        abstract void run() throws Exception;

        abstract void wakeup();

        void runSafely() {
            try {
                run();
            } catch (Throwable t) {
                emit("{\"event\":\"error\",\"member\":" + q(name) + ",\"error\":" + q(t.toString()) + "}");
            } finally {
                emit("{\"event\":\"stopped\",\"member\":" + q(name) + "}");
            }
        }

        void close() throws InterruptedException {
            running.set(false);
            wakeup();
            thread.join(60_000);
        }

        void report(List<String> rows) {
            if (!rows.isEmpty()) {
                emit("{\"event\":\"records\",\"member\":" + q(name) + ",\"records\":[" + String.join(",", rows) + "]}");
            }
        }

        void partitions(String event, Collection<TopicPartition> parts) {
            List<String> ps = new ArrayList<>();
            for (TopicPartition tp : parts) {
                ps.add("[" + q(tp.topic()) + "," + tp.partition() + "]");
            }
            emit("{\"event\":" + q(event) + ",\"member\":" + q(name) + ",\"partitions\":[" + String.join(",", ps) + "]}");
        }
    }

    /** A KafkaConsumer of either group protocol (group.protocol=classic|consumer). */
    private static final class ClassicOrModern extends Member {
        final KafkaConsumer<String, String> consumer;
        final String topics;

        ClassicOrModern(String name, String topics, Properties p) {
            super(name);
            this.consumer = new KafkaConsumer<>(p);
            this.topics = topics;
        }

        @Override
        void wakeup() {
            consumer.wakeup();
        }

        @Override
        void run() {
            ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                    partitions("revoked", parts);
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                    partitions("assigned", parts);
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> parts) {
                    partitions("lost", parts);
                }
            };
            if (topics.startsWith("~")) {
                consumer.subscribe(Pattern.compile(topics.substring(1)), listener);
            } else {
                consumer.subscribe(List.of(topics.split(",")), listener);
            }
            try {
                while (running.get()) {
                    ConsumerRecords<String, String> batch;
                    try {
                        batch = consumer.poll(Duration.ofMillis(200));
                    } catch (WakeupException e) {
                        break;
                    }
                    if (batch.isEmpty()) {
                        continue;
                    }
                    Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                    List<String> rows = new ArrayList<>();
                    for (ConsumerRecord<String, String> r : batch) {
                        next.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                        rows.add("[" + q(r.topic()) + "," + r.partition() + "," + r.offset() + "," + q(r.value()) + ",1,null]");
                    }
                    try {
                        consumer.commitSync(next, Duration.ofSeconds(60));
                    } catch (WakeupException e) {
                        break;  // not committed: not reported (its next owner reads them again)
                    } catch (Exception e) {
                        emit("{\"event\":\"commit_failed\",\"member\":" + q(name) + ",\"error\":" + q(e.toString()) + "}");
                        continue;
                    }
                    report(rows);
                }
            } finally {
                consumer.close(Duration.ofSeconds(30));
            }
        }
    }

    /** A KafkaShareConsumer with explicit acknowledgement (see the class comment for the rules). */
    private static final class Share extends Member {
        final KafkaShareConsumer<String, String> consumer;
        final String topic;
        final Map<String, Integer> renewed = new HashMap<>();

        Share(String name, String topic, Properties p) {
            super(name);
            this.consumer = new KafkaShareConsumer<>(p);
            this.topic = topic;
        }

        @Override
        void wakeup() {
            consumer.wakeup();
        }

        @Override
        void run() {
            consumer.subscribe(List.of(topic.split(",")));
            try {
                while (running.get()) {
                    ConsumerRecords<String, String> batch;
                    try {
                        batch = consumer.poll(Duration.ofMillis(200));
                    } catch (WakeupException e) {
                        break;
                    }
                    if (batch.isEmpty()) {
                        continue;
                    }
                    List<String> rows = new ArrayList<>();
                    for (ConsumerRecord<String, String> r : batch) {
                        Optional<Short> dc = r.deliveryCount();
                        int count = dc.isPresent() ? dc.get() : -1;
                        String v = r.value() == null ? "" : r.value();
                        AcknowledgeType ack = AcknowledgeType.ACCEPT;
                        if (v.startsWith("release-")) {
                            int n = Integer.parseInt(v.substring(8, v.indexOf('-', 8) > 0 ? v.indexOf('-', 8) : v.length()));
                            if (count <= n) {
                                ack = AcknowledgeType.RELEASE;
                            }
                        } else if (v.startsWith("reject")) {
                            ack = AcknowledgeType.REJECT;
                        } else if (v.startsWith("renew")) {
                            String key = r.topic() + "/" + r.partition() + "/" + r.offset();
                            if (renewed.merge(key, 1, Integer::sum) == 1) {
                                ack = AcknowledgeType.RENEW;
                            }
                        }
                        consumer.acknowledge(r, ack);
                        rows.add("[" + q(r.topic()) + "," + r.partition() + "," + r.offset() + "," + q(v) + "," + count + ","
                                + q(ack.name()) + "]");
                    }
                    Map<org.apache.kafka.common.TopicIdPartition, Optional<org.apache.kafka.common.KafkaException>> result;
                    try {
                        result = consumer.commitSync(Duration.ofSeconds(60));
                    } catch (WakeupException e) {
                        break;
                    } catch (Exception e) {
                        emit("{\"event\":\"commit_failed\",\"member\":" + q(name) + ",\"error\":" + q(e.toString()) + "}");
                        continue;
                    }
                    boolean failed = false;
                    for (Map.Entry<org.apache.kafka.common.TopicIdPartition, Optional<org.apache.kafka.common.KafkaException>> e
                            : result.entrySet()) {
                        if (e.getValue().isPresent()) {
                            failed = true;
                            emit("{\"event\":\"commit_failed\",\"member\":" + q(name) + ",\"partition\":"
                                    + q(e.getKey().toString()) + ",\"error\":" + q(e.getValue().get().toString()) + "}");
                        }
                    }
                    if (!failed) {
                        report(rows);
                    }
                }
            } finally {
                consumer.close(Duration.ofSeconds(30));
            }
        }
    }
}
