package rockafka.bench;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * Native-protocol throughput with the stock RocketMQ Java client, one case per invocation:
 *
 * <pre>
 *   create-topic namesrv=H:P topic=T queues=N     create T with N queues, wait until routed
 *   send-sync    namesrv=H:P topic=T seconds=S size=B threads=K [warmup=S]
 *   send-async   namesrv=H:P topic=T seconds=S size=B window=W [warmup=S]
 *   pull         namesrv=H:P topic=T expect=N idle=S start=S  (DefaultLitePullConsumer, from offset 0)
 *   push         namesrv=H:P topic=T expect=N idle=S start=S  (DefaultMQPushConsumer, from offset 0)
 * </pre>
 *
 * Prints exactly one JSON object on stdout, the last line; the Python harness parses it (the send
 * cases print the line {@code measuring} before their counted part, after the warm-up). Every
 * loop ends by its deadline; consumers stop at {@code expect} messages, after {@code start}
 * seconds (default 60) without a first message, or after {@code idle} seconds without a further
 * one, and report how many they got. Consume throughput is measured from the
 * first to the last message received, so client start-up and rebalancing are not counted.
 */
public final class RocketMQBench {
    private static Map<String, String> opts;

    public static void main(String[] args) throws Exception {
        if (args.length == 0) {
            System.err.println("usage: RocketMQBench MODE key=value ...");
            System.exit(2);
        }
        opts = new HashMap<>();
        for (String a : Arrays.copyOfRange(args, 1, args.length)) {
            int eq = a.indexOf('=');
            if (eq <= 0) {
                System.err.println("expected key=value, got " + a);
                System.exit(2);
            }
            opts.put(a.substring(0, eq), a.substring(eq + 1));
        }
        String out;
        switch (args[0]) {
            case "create-topic" -> out = createTopic();
            case "send-sync" -> out = sendSync();
            case "send-async" -> out = sendAsync();
            case "pull" -> out = pull();
            case "push" -> out = push();
            default -> {
                System.err.println("unknown mode " + args[0]);
                System.exit(2);
                return;
            }
        }
        System.out.println(out);
        System.out.flush();
        System.exit(0); // client threads are not daemons
    }

    private static String str(String key) {
        String v = opts.get(key);
        if (v == null) {
            throw new IllegalArgumentException("missing " + key + "=...");
        }
        return v;
    }

    private static long num(String key, long dflt) {
        String v = opts.get(key);
        return v == null ? dflt : Long.parseLong(v);
    }

    private static DefaultMQProducer producer(String group) throws Exception {
        DefaultMQProducer p = new DefaultMQProducer(group);
        p.setNamesrvAddr(str("namesrv"));
        p.setInstanceName(group + "-" + System.nanoTime());
        p.setSendMsgTimeout(10_000);
        p.setCompressMsgBodyOverHowmuch(1 << 30); // same bytes on the wire for every broker
        p.setMaxMessageSize(4 << 20);
        p.start();
        return p;
    }

    private static String createTopic() throws Exception {
        String topic = str("topic");
        int queues = (int) num("queues", 8);
        long t0 = System.nanoTime();
        DefaultMQProducer p = producer("bench_admin");
        try {
            p.createTopic("TBW102", topic, queues, new HashMap<>());
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(num("timeout", 120));
            int routed = 0;
            while (System.nanoTime() < deadline) {
                try {
                    routed = p.fetchPublishMessageQueues(topic).size();
                } catch (Exception e) {
                    routed = 0; // not routed yet
                }
                if (routed >= queues) {
                    break;
                }
                Thread.sleep(200);
            }
            if (routed < queues) {
                throw new IllegalStateException("topic " + topic + " routed with " + routed + " of " + queues + " queues");
            }
            return String.format(Locale.ROOT, "{\"case\":\"create-topic\",\"topic\":\"%s\",\"queues\":%d,\"seconds\":%.3f}",
                    topic, routed, (System.nanoTime() - t0) / 1e9);
        } finally {
            p.shutdown();
        }
    }

    private static byte[] body() {
        byte[] b = new byte[(int) num("size", 1024)];
        Arrays.fill(b, (byte) 'x');
        return b;
    }

    private static String sendSync() throws Exception {
        String topic = str("topic");
        byte[] body = body();
        int threads = (int) num("threads", 1);
        long seconds = num("seconds", 5);
        DefaultMQProducer p = producer("bench_sync");
        try {
            for (int i = 0; i < 100; i++) { // routes and connections warm
                p.send(new Message(topic, body));
            }
            // the same load, not counted: the JIT compiles the client's send path here, not
            // while the broker is measured (on a 2-core machine it takes a core for seconds)
            SyncRun warm = syncLoad(p, topic, body, threads, num("warmup", 0));
            measuring();
            long t0 = System.nanoTime();
            SyncRun run = syncLoad(p, topic, body, threads, seconds);
            double dt = (System.nanoTime() - t0) / 1e9;
            long[] all = run.latencies;
            int total = all.length;
            Arrays.sort(all);
            double p50 = total == 0 ? 0 : all[total / 2] / 1e6;
            double p99 = total == 0 ? 0 : all[Math.min(total - 1, (int) (total * 0.99))] / 1e6;
            long ok = total - run.errors;
            return String.format(Locale.ROOT,
                    "{\"case\":\"send-sync\",\"messages\":%d,\"errors\":%d,\"seconds\":%.3f,\"msgs_per_s\":%.1f,"
                            + "\"mib_per_s\":%.2f,\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"warmup_messages\":%d}",
                    ok, run.errors, dt, ok / dt, ok * (double) body.length / dt / (1 << 20), p50, p99,
                    warm.latencies.length - warm.errors);
        } finally {
            p.shutdown();
        }
    }

    private record SyncRun(long[] latencies, long errors) {
    }

    /** Tells the harness the counted part starts now (it may sample the brokers' CPU here). */
    private static void measuring() {
        System.out.println("measuring");
        System.out.flush();
    }

    /** {@code threads} threads each sending and waiting for the answer until {@code seconds} are up. */
    private static SyncRun syncLoad(DefaultMQProducer p, String topic, byte[] body, int threads, long seconds)
            throws InterruptedException {
        long[][] lat = new long[threads][];
        int[] counts = new int[threads];
        AtomicLong errors = new AtomicLong();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        Thread[] ts = new Thread[threads];
        for (int k = 0; k < threads; k++) {
            final int n = k;
            ts[k] = new Thread(() -> {
                long[] l = new long[1 << 16];
                int c = 0;
                while (System.nanoTime() < deadline) {
                    long s = System.nanoTime();
                    try {
                        SendResult r = p.send(new Message(topic, body));
                        if (r.getSendStatus() != SendStatus.SEND_OK) {
                            errors.incrementAndGet();
                        }
                    } catch (Exception e) {
                        errors.incrementAndGet();
                    }
                    if (c == l.length) {
                        l = Arrays.copyOf(l, l.length * 2);
                    }
                    l[c++] = System.nanoTime() - s;
                }
                lat[n] = l;
                counts[n] = c;
            });
            ts[k].start();
        }
        for (Thread t : ts) {
            t.join(TimeUnit.SECONDS.toMillis(seconds + 60));
        }
        int total = Arrays.stream(counts).sum();
        long[] all = new long[total];
        int at = 0;
        for (int k = 0; k < threads; k++) {
            System.arraycopy(lat[k], 0, all, at, counts[k]);
            at += counts[k];
        }
        return new SyncRun(all, errors.get());
    }

    private static String sendAsync() throws Exception {
        String topic = str("topic");
        byte[] body = body();
        int window = (int) num("window", 256);
        long seconds = num("seconds", 5);
        DefaultMQProducer p = producer("bench_async");
        try {
            for (int i = 0; i < 100; i++) {
                p.send(new Message(topic, body));
            }
            long[] warm = asyncLoad(p, topic, body, window, num("warmup", 0)); // not counted: see sendSync
            measuring();
            long t0 = System.nanoTime();
            long[] r = asyncLoad(p, topic, body, window, seconds);
            double dt = (System.nanoTime() - t0) / 1e9;
            return String.format(Locale.ROOT,
                    "{\"case\":\"send-async\",\"window\":%d,\"messages\":%d,\"errors\":%d,\"seconds\":%.3f,"
                            + "\"msgs_per_s\":%.1f,\"mib_per_s\":%.2f,\"warmup_messages\":%d}",
                    window, r[0], r[1], dt, r[0] / dt, r[0] * (double) body.length / dt / (1 << 20), warm[0]);
        } finally {
            p.shutdown();
        }
    }

    /** Async sends with up to {@code window} in flight until {@code seconds} are up, then the
     *  ones in flight drained: {acknowledged SEND_OK, errors}. */
    private static long[] asyncLoad(DefaultMQProducer p, String topic, byte[] body, int window, long seconds)
            throws InterruptedException {
        Semaphore inFlight = new Semaphore(window);
        AtomicLong ok = new AtomicLong();
        AtomicLong errors = new AtomicLong();
        SendCallback cb = new SendCallback() {
            @Override
            public void onSuccess(SendResult r) {
                if (r.getSendStatus() == SendStatus.SEND_OK) {
                    ok.incrementAndGet();
                } else {
                    errors.incrementAndGet();
                }
                inFlight.release();
            }

            @Override
            public void onException(Throwable e) {
                errors.incrementAndGet();
                inFlight.release();
            }
        };
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (System.nanoTime() < deadline) {
            if (!inFlight.tryAcquire(1, TimeUnit.SECONDS)) {
                continue;
            }
            try {
                p.send(new Message(topic, body), cb);
            } catch (Exception e) {
                errors.incrementAndGet();
                inFlight.release();
            }
        }
        inFlight.tryAcquire(window, 60, TimeUnit.SECONDS); // drain what is in flight
        return new long[] {ok.get(), errors.get()};
    }

    private static String consumed(String mode, long got, long bytes, long first, long last, long expect) {
        double dt = got > 1 ? (last - first) / 1e9 : 0;
        return String.format(Locale.ROOT,
                "{\"case\":\"%s\",\"messages\":%d,\"expected\":%d,\"seconds\":%.3f,\"msgs_per_s\":%.1f,\"mib_per_s\":%.2f}",
                mode, got, expect, dt, dt > 0 ? got / dt : 0, dt > 0 ? bytes / dt / (1 << 20) : 0);
    }

    private static String pull() throws Exception {
        String topic = str("topic");
        long expect = num("expect", Long.MAX_VALUE);
        long idleNanos = TimeUnit.SECONDS.toNanos(num("idle", 5));
        long hardDeadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(num("timeout", 180));
        DefaultLitePullConsumer c = new DefaultLitePullConsumer("bench_pull_" + System.nanoTime());
        c.setNamesrvAddr(str("namesrv"));
        c.setAutoCommit(false);
        c.setPullBatchSize(32);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.start();
        try {
            Collection<MessageQueue> mqs = c.fetchMessageQueues(topic);
            c.assign(mqs);
            long startDeadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(num("start", 60));
            long got = 0, bytes = 0, first = 0, last = System.nanoTime();
            while (got < expect && System.nanoTime() < hardDeadline
                    && (got == 0 ? System.nanoTime() < startDeadline : System.nanoTime() - last < idleNanos)) {
                List<MessageExt> batch = c.poll(500);
                if (!batch.isEmpty()) {
                    long now = System.nanoTime();
                    if (got == 0) {
                        first = now;
                    }
                    last = now;
                    got += batch.size();
                    for (MessageExt m : batch) {
                        bytes += m.getBody().length;
                    }
                }
            }
            return consumed("pull", got, bytes, first, last, expect);
        } finally {
            c.shutdown();
        }
    }

    private static String push() throws Exception {
        String topic = str("topic");
        long expect = num("expect", Long.MAX_VALUE);
        long idleNanos = TimeUnit.SECONDS.toNanos(num("idle", 5));
        long hardDeadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(num("timeout", 180));
        AtomicLong got = new AtomicLong();
        AtomicLong bytes = new AtomicLong();
        AtomicLong first = new AtomicLong();
        AtomicLong last = new AtomicLong(System.nanoTime());
        DefaultMQPushConsumer c = new DefaultMQPushConsumer("bench_push_" + System.nanoTime());
        c.setNamesrvAddr(str("namesrv"));
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.setPullBatchSize(32);
        c.subscribe(topic, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            long now = System.nanoTime();
            first.compareAndSet(0, now);
            long b = 0;
            for (MessageExt m : msgs) {
                b += m.getBody().length;
            }
            bytes.addAndGet(b);
            got.addAndGet(msgs.size());
            last.set(now);
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        try {
            long startDeadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(num("start", 60));
            while (got.get() < expect && System.nanoTime() < hardDeadline
                    && (got.get() == 0 ? System.nanoTime() < startDeadline : System.nanoTime() - last.get() < idleNanos)) {
                Thread.sleep(50); // progress check only; the listener counts
            }
            return consumed("push", got.get(), bytes.get(), first.get(), last.get(), expect);
        } finally {
            c.shutdown();
        }
    }
}
