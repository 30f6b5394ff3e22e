package rockafka.compat.rocketmq;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.IntFunction;

import org.apache.rocketmq.client.QueryResult;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.MQVersion;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageAccessor;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;

/**
 * The scenarios of the RocketMQ Java client runner, each a method registered by name in
 * {@link #SCENARIOS} (adding one — transactions, orderly consumption — is one method and one
 * line).
 *
 * <p>Invariants:
 * <ul>
 *   <li>every scenario uses its own topics and groups (suffixed with a per-run id), so
 *       scenarios are independent of each other and of earlier runs against the same broker;
 *   <li>topics are created explicitly through the client's admin path (UPDATE_AND_CREATE_TOPIC
 *       to the brokers serving TBW102) and the scenario waits, bounded, until the NameServer
 *       routes them, so consumers never start before their topic exists;
 *   <li>every message carries its index in the user property {@code idx}, a body
 *       {@code body-<idx>} and a key {@code key-<run>-<idx>}, so every delivery is checked for
 *       content, duplicates and unexpected extras;
 *   <li>every wait is bounded by the scenario deadline; every client a scenario starts is
 *       shut down when it ends, even on failure;
 *   <li>the source compiles against rocketmq-client 4.9.x and 5.x: the few calls whose types
 *       moved between those versions (MessageModel, createTopic) go through {@link #invoke}.
 * </ul>
 */
final class Scenarios {

    @FunctionalInterface
    private interface Scenario {
        void run(Scenarios s) throws Exception;
    }

    private static final Map<String, Scenario> SCENARIOS = new LinkedHashMap<>();

    static {
        SCENARIOS.put("producer-sync", Scenarios::producerSync);
        SCENARIOS.put("producer-async", Scenarios::producerAsync);
        SCENARIOS.put("producer-batch", Scenarios::producerBatch);
        SCENARIOS.put("query-message", Scenarios::queryMessage);
        SCENARIOS.put("push-tags", Scenarios::pushTags);
        SCENARIOS.put("push-sql", Scenarios::pushSql);
        SCENARIOS.put("push-broadcast", Scenarios::pushBroadcast);
        SCENARIOS.put("lite-pull-subscribe", Scenarios::litePullSubscribe);
        SCENARIOS.put("lite-pull-assign", Scenarios::litePullAssign);
        SCENARIOS.put("push-orderly", Scenarios::pushOrderly);
        SCENARIOS.put("transaction", Scenarios::transaction);
        SCENARIOS.put("transaction-exhaustion", Scenarios::transactionExhaustion);
        SCENARIOS.put("push-orderly-rebalance", Scenarios::pushOrderlyRebalance);
        SCENARIOS.put("delay", Scenarios::delay);
        SCENARIOS.put("retry-reconsume-later", Scenarios::retryReconsumeLater);
        SCENARIOS.put("dlq", Scenarios::deadLetters);
        SCENARIOS.put("reset-offset", Scenarios::resetOffset);
        SCENARIOS.put("consume-from-timestamp", Scenarios::consumeFromTimestamp);
        SCENARIOS.put("ha-slave-read", Scenarios::haSlaveRead);
        // run by tests/rockafka/test_cluster_groups.py with one group's SYNC_MASTER without its slave
        SCENARIOS.put("retry-another-broker", Scenarios::retryAnotherBroker);
        SCENARIOS.put("controller-failover", Scenarios::controllerFailover);
        SCENARIOS.put("push-pop", Scenarios::pushPop);
        SCENARIOS.put("admin-fixture", Scenarios::adminFixture);
        SCENARIOS.put("acl-send-consume", Scenarios::aclSendConsume);
        SCENARIOS.put("acl-send-denied", Scenarios::aclSendDenied);
    }

    /**
     * Signing with {@code AclClientRPCHook} (system properties {@code runner.accessKey} /
     * {@code runner.secretKey}, set by the runner's --access-key / --secret-key): every client
     * this runner makes signs every request; none when unset.
     */
    private static org.apache.rocketmq.remoting.RPCHook rpcHook() {
        String ak = System.getProperty("runner.accessKey");
        String sk = System.getProperty("runner.secretKey");
        if (ak == null || sk == null) {
            return null;
        }
        return new org.apache.rocketmq.acl.common.AclClientRPCHook(new org.apache.rocketmq.acl.common.SessionCredentials(ak, sk));
    }

    static List<String> names() {
        return List.copyOf(SCENARIOS.keySet());
    }

    private static final String TBW102 = "TBW102"; // the topic whose route says which brokers may create topics

    private final String namesrv;
    private final String serialize;
    private final int messages;
    private final Duration timeout;
    private final String builtAgainst;
    private final java.nio.file.Path work;
    private final Report report = new Report();
    private final String runId = UUID.randomUUID().toString().substring(0, 8);
    private final List<Runnable> shutdowns = new ArrayList<>();
    private final AtomicInteger instances = new AtomicInteger();
    private long deadlineNanos;

    Scenarios(String namesrv, String serialize, int messages, int timeoutS, String builtAgainst, java.nio.file.Path work) {
        this.work = work;
        this.namesrv = namesrv;
        this.serialize = serialize;
        this.messages = messages;
        this.timeout = Duration.ofSeconds(timeoutS);
        this.builtAgainst = builtAgainst;
    }

    int run(List<String> names) {
        report.begin("setup");
        report.info("client_version", MQVersion.getVersionDesc(MQVersion.CURRENT_VERSION));
        report.info("built_against", builtAgainst);
        report.equal("serialize_type", serialize, String.valueOf(RemotingCommand.getSerializeTypeConfigInThisServer()));
        long warm = System.nanoTime();
        report.check("namesrv_reachable", warmUp(), "the TBW102 route from " + namesrv + " within 120 s");
        report.info("warmup_ms", (System.nanoTime() - warm) / 1_000_000);
        for (String name : names) {
            report.begin(name);
            long started = System.nanoTime();
            deadlineNanos = started + timeout.toNanos();
            try {
                SCENARIOS.get(name).run(this);
            } catch (Throwable t) {
                report.error(t);
            } finally {
                shutdownAll();
            }
            report.info(name + "_ms", (System.nanoTime() - started) / 1_000_000);
        }
        report.summary(names);
        return report.failed();
    }

    /**
     * A fresh JVM's first remote call loads, initialises and interprets the client's whole
     * remoting path (Netty, the codecs, fastjson) inside the client's 3 s budget for that one
     * call; with several JVMs starting at once on a busy machine that alone can use it up, before
     * the request is even written (it does against Apache RocketMQ too). So the client is warmed
     * up once, bounded, before any scenario's checks count: a route query, repeated until it
     * answers.
     */
    private boolean warmUp() {
        long deadline = System.nanoTime() + Duration.ofSeconds(120).toNanos();
        try {
            DefaultMQProducer p = producer("warmup");
            while (System.nanoTime() < deadline) {
                try {
                    if (!p.fetchPublishMessageQueues(TBW102).isEmpty()) {
                        return true;
                    }
                } catch (MQClientException e) {
                    if (serverAnswered(e)) {
                        return true;  // warm: the whole path ran; the answer was a refusal (ACL, say)
                    }
                    report.info("warmup_retry", String.valueOf(e.getMessage()).split("\n")[0]);
                }
                Thread.sleep(200);
            }
            return false;
        } catch (MQClientException | InterruptedException e) {
            report.check("warmup", false, e);
            return false;
        } finally {
            shutdownAll();
        }
    }

    /** Whether the NameServer or broker answered (with an error code), not a local timeout. */
    private static boolean serverAnswered(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof MQClientException && ((MQClientException) t).getResponseCode() > 0) {
                return true;
            }
            if (t instanceof org.apache.rocketmq.client.exception.MQBrokerException) {
                return true;
            }
        }
        return false;
    }

    // ---- clients --------------------------------------------------------------------------

    private void shutdownAll() {
        for (int i = shutdowns.size() - 1; i >= 0; i--) {
            try {
                shutdowns.get(i).run();
            } catch (RuntimeException e) {
                report.check("shutdown", false, e);
            }
        }
        shutdowns.clear();
    }

    /** Each client gets its own instance name, so two consumers of one group in this JVM are two members. */
    private String instanceName() {
        return "runner-" + runId + "-" + instances.incrementAndGet();
    }

    private DefaultMQProducer producer(String what) throws MQClientException {
        DefaultMQProducer p = new DefaultMQProducer("P_" + what + "_" + runId, rpcHook());
        p.setNamesrvAddr(namesrv);
        p.setInstanceName(instanceName());
        // the broker's VIP port (listenPort - 2) is an operator option; use the ordinary one
        p.setVipChannelEnabled(false);
        p.start();
        shutdowns.add(p::shutdown);
        return p;
    }

    private DefaultMQPushConsumer pushConsumer(String group) {
        DefaultMQPushConsumer c = rpcHook() == null ? new DefaultMQPushConsumer(group)
                : new DefaultMQPushConsumer(group, rpcHook(), new org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely());
        c.setNamesrvAddr(namesrv);
        c.setInstanceName(instanceName());
        c.setVipChannelEnabled(false);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        shutdowns.add(c::shutdown);
        return c;
    }

    private DefaultLitePullConsumer litePullConsumer(String group) {
        DefaultLitePullConsumer c = new DefaultLitePullConsumer(group);
        c.setNamesrvAddr(namesrv);
        c.setInstanceName(instanceName());
        c.setVipChannelEnabled(false);
        // the lite pull default is LAST_OFFSET, which would skip what the scenario produced first
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.setAutoCommit(false);
        shutdowns.add(c::shutdown);
        return c;
    }

    /** Calls a method by name on either client version; unwraps the method's own exception. */
    private static Object invoke(Object target, String method, Object... args) throws Exception {
        for (Method m : target.getClass().getMethods()) {
            if (m.getName().equals(method) && m.getParameterCount() == args.length) {
                try {
                    return m.invoke(target, args);
                } catch (InvocationTargetException e) {
                    if (e.getCause() instanceof Exception cause) {
                        throw cause;
                    }
                    throw e;
                }
            }
        }
        throw new NoSuchMethodException(target.getClass().getName() + "." + method + "/" + args.length);
    }

    /** setMessageModel(BROADCASTING): MessageModel moved packages between 4.9 and 5.x. */
    @SuppressWarnings({"unchecked", "rawtypes"})
    private static void broadcasting(DefaultMQPushConsumer c) throws Exception {
        Class<? extends Enum> type = (Class<? extends Enum>) c.getMessageModel().getClass();
        invoke(c, "setMessageModel", Enum.valueOf(type, "BROADCASTING"));
    }

    private String topic(String what) {
        return "rmq-" + what + "-" + runId;
    }

    private boolean beforeDeadline() {
        return System.nanoTime() < deadlineNanos;
    }

    /** Polls a condition until it holds or the scenario deadline passes; returns whether it held. */
    private boolean await(Condition condition) throws Exception {
        while (true) {
            if (condition.holds()) {
                return true;
            }
            if (!beforeDeadline()) {
                return false;
            }
            Thread.sleep(50); // polling interval of a bounded wait, not a synchronisation
        }
    }

    @FunctionalInterface
    private interface Condition {
        boolean holds() throws Exception;
    }

    /** Creates the topic on every broker serving TBW102 and waits until the NameServer routes it. */
    private void createTopic(DefaultMQProducer p, String topic, int queues) throws Exception {
        boolean v5 = false;
        for (Method m : DefaultMQProducer.class.getMethods()) {
            v5 |= m.getName().equals("createTopic") && m.getParameterCount() == 5;
        }
        if (v5) {
            invoke(p, "createTopic", TBW102, topic, queues, 0, new HashMap<String, String>());
        } else {
            invoke(p, "createTopic", TBW102, topic, queues);
        }
        List<MessageQueue> routed = new ArrayList<>();
        boolean ok = await(() -> {
            try {
                routed.clear();
                routed.addAll(p.fetchPublishMessageQueues(topic));
                return routed.size() == queues;
            } catch (MQClientException e) {
                return false; // not routed yet
            }
        });
        if (!ok) {
            throw new IllegalStateException("topic " + topic + " not routed with " + queues + " queues within "
                    + timeout + "; last route " + routed);
        }
    }

    // ---- messages -------------------------------------------------------------------------

    private Message message(String topic, int idx, String tag) {
        Message m = new Message(topic, tag, "key-" + runId + "-" + idx, ("body-" + idx).getBytes(StandardCharsets.UTF_8));
        m.putUserProperty("idx", Integer.toString(idx));
        return m;
    }

    private static int idx(MessageExt m) {
        String v = m.getUserProperty("idx");
        return v == null ? -1 : Integer.parseInt(v);
    }

    /** Null when the delivered message is exactly what was sent, else what differs. */
    private String mismatch(MessageExt m, String topic, IntFunction<String> tagOf) {
        int i = idx(m);
        String body = new String(m.getBody(), StandardCharsets.UTF_8);
        List<String> diffs = new ArrayList<>();
        if (!topic.equals(m.getTopic())) {
            diffs.add("topic=" + m.getTopic());
        }
        if (!("body-" + i).equals(body)) {
            diffs.add("body=" + body);
        }
        if (!("key-" + runId + "-" + i).equals(m.getKeys())) {
            diffs.add("keys=" + m.getKeys());
        }
        String tag = tagOf.apply(i);
        if (tag != null && !tag.equals(m.getTags())) {
            diffs.add("tags=" + m.getTags());
        }
        if (m.getMsgId() == null || m.getMsgId().isEmpty()) {
            diffs.add("no msgId");
        }
        return diffs.isEmpty() ? null : "idx=" + i + " " + diffs;
    }

    private List<SendResult> sendSync(DefaultMQProducer p, String topic, int from, int to, IntFunction<String> tagOf)
            throws Exception {
        List<SendResult> results = new ArrayList<>();
        for (int i = from; i < to; i++) {
            results.add(p.send(message(topic, i, tagOf.apply(i))));
        }
        return results;
    }

    /** Records deliveries by idx; the listener the push scenarios register. */
    private final class Collector implements MessageListenerConcurrently {
        final Map<Integer, AtomicInteger> counts = new ConcurrentHashMap<>();
        final ConcurrentLinkedQueue<String> mismatches = new ConcurrentLinkedQueue<>();
        final String topic;
        final IntFunction<String> tagOf;

        Collector(String topic, IntFunction<String> tagOf) {
            this.topic = topic;
            this.tagOf = tagOf;
        }

        @Override
        public ConsumeConcurrentlyStatus consumeMessage(List<MessageExt> msgs,
                                                        org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyContext ctx) {
            for (MessageExt m : msgs) {
                counts.computeIfAbsent(idx(m), k -> new AtomicInteger()).incrementAndGet();
                String bad = mismatch(m, topic, tagOf);
                if (bad != null) {
                    mismatches.add(bad);
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        }

        int duplicates() {
            return counts.values().stream().mapToInt(c -> c.get() - 1).sum();
        }

        Set<Integer> received() {
            return new TreeSet<>(counts.keySet());
        }
    }

    private static Set<Integer> range(int from, int to) {
        Set<Integer> s = new TreeSet<>();
        for (int i = from; i < to; i++) {
            s.add(i);
        }
        return s;
    }

    private static String tagCycle(int i) {
        return switch (i % 3) {
            case 0 -> "TagA";
            case 1 -> "TagB";
            default -> "TagC";
        };
    }

    // ---- scenarios ------------------------------------------------------------------------

    /** DefaultMQProducer.send (sync) of N tagged, keyed messages, then to a selected queue. */
    /**
     * An existing topic ({@code runner.topic}) the signing user may write and read: N sync sends
     * all SEND_OK, and a push consumer of {@code runner.group} receives every one.
     */
    private void aclSendConsume() throws Exception {
        String topic = System.getProperty("runner.topic");
        String group = System.getProperty("runner.group", "C_acl_" + runId);
        DefaultMQProducer p = producer("acl");
        List<SendResult> results = sendSync(p, topic, 0, messages, i -> "TagA");
        long ok = results.stream().filter(r -> r.getSendStatus() == SendStatus.SEND_OK).count();
        report.equal("acl_all_send_ok", (long) messages, ok);
        Set<Integer> got = ConcurrentHashMap.newKeySet();
        DefaultMQPushConsumer c = pushConsumer(group);
        c.subscribe(topic, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                got.add(Integer.parseInt(m.getUserProperty("idx")));
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        while (got.size() < messages && System.nanoTime() < deadlineNanos) {
            Thread.sleep(100);
        }
        report.equal("acl_all_consumed", messages, got.size());
    }

    /**
     * A topic ({@code runner.topic}) the signing user may read but not write: a send fails with
     * the broker's NO_PERMISSION (16).
     */
    private void aclSendDenied() throws Exception {
        String topic = System.getProperty("runner.topic");
        DefaultMQProducer p = producer("acl_denied");
        p.setRetryTimesWhenSendFailed(0);
        int code = -1;
        String remark = "";
        try {
            p.send(message(topic, 0, "TagA"));
        } catch (org.apache.rocketmq.client.exception.MQBrokerException e) {
            code = e.getResponseCode();
            remark = String.valueOf(e.getErrorMessage());
        } catch (MQClientException e) {
            code = e.getResponseCode();
            remark = String.valueOf(e.getErrorMessage());
        }
        report.equal("acl_send_refused_code", 16, code);
        report.info("acl_send_refused_remark", remark);
    }

    private void producerSync() throws Exception {
        String topic = topic("sync");
        DefaultMQProducer p = producer("sync");
        createTopic(p, topic, 4);
        List<SendResult> results = sendSync(p, topic, 0, messages, Scenarios::tagCycle);
        long ok = results.stream().filter(r -> r.getSendStatus() == SendStatus.SEND_OK).count();
        report.equal("all_send_ok", (long) messages, ok);
        Set<String> ids = new HashSet<>();
        boolean idsPresent = true;
        Map<Integer, List<Long>> offsets = new TreeMap<>();
        for (SendResult r : results) {
            ids.add(r.getMsgId());
            idsPresent &= r.getMsgId() != null && r.getOffsetMsgId() != null && r.getMessageQueue() != null;
            offsets.computeIfAbsent(r.getMessageQueue().getQueueId(), k -> new ArrayList<>()).add(r.getQueueOffset());
        }
        report.check("msg_ids_present", idsPresent, "msgId, offsetMsgId and queue on every result");
        report.equal("msg_ids_unique", messages, ids.size());
        report.check("queue_offsets_contiguous", contiguousFromZero(offsets), "offsets by queue " + offsets);
        report.check("queues_rotated", offsets.size() == 4, "queues used " + offsets.keySet());

        List<MessageQueue> queues = p.fetchPublishMessageQueues(topic);
        MessageQueue target = queues.get(2);
        long before = offsets.getOrDefault(target.getQueueId(), List.of()).size();
        List<Long> selected = new ArrayList<>();
        boolean sameQueue = true;
        for (int i = messages; i < messages + 5; i++) {
            SendResult r = p.send(message(topic, i, "TagS"), (mqs, msg, arg) -> (MessageQueue) arg, target);
            sameQueue &= r.getSendStatus() == SendStatus.SEND_OK && r.getMessageQueue().getQueueId() == target.getQueueId();
            selected.add(r.getQueueOffset());
        }
        report.check("selector_send_to_queue", sameQueue, "queue " + target.getQueueId());
        report.equal("selector_offsets_continue", List.of(before, before + 1, before + 2, before + 3, before + 4), selected);
    }

    /**
     * A broker group with brokerRole=SYNC_MASTER and one slave (set up by the caller): N sync
     * sends, each SEND_OK (the slave has it); then the runner writes {@code <work>/sent} and
     * waits (bounded) for {@code <work>/master-stopped}, which the caller creates once it killed
     * the master; a push consumer then reads all N from the slave.
     */
    private void haSlaveRead() throws Exception {
        String topic = topic("ha");
        DefaultMQProducer p = producer("ha");
        createTopic(p, topic, 4);
        List<SendResult> results = sendSync(p, topic, 0, messages, i -> "TagH");
        Map<SendStatus, Long> statuses = new TreeMap<>();
        for (SendResult r : results) {
            statuses.merge(r.getSendStatus(), 1L, Long::sum);
        }
        report.equal("sync_master_send_ok", Map.of(SendStatus.SEND_OK, (long) messages), statuses);
        p.shutdown();
        java.nio.file.Files.writeString(work.resolve("sent"), topic);
        boolean stopped = await(() -> java.nio.file.Files.exists(work.resolve("master-stopped")));
        if (!report.check("master_stopped_by_caller", stopped, "waited for " + work.resolve("master-stopped"))) {
            return;
        }
        Collector col = new Collector(topic, i -> "TagH");
        DefaultMQPushConsumer c = pushConsumer("C_ha_" + runId);
        c.subscribe(topic, "*");
        c.registerMessageListener(col);
        c.start();
        await(() -> col.received().size() >= messages);
        report.equal("all_consumed_from_slave", range(0, messages), col.received());
        report.check("messages_intact", col.mismatches.isEmpty(), col.mismatches);
    }

    /**
     * Several broker groups, one of them a SYNC_MASTER whose slave is gone (set up by the
     * caller): it stores a message but answers SLAVE_NOT_AVAILABLE. A topic on every group
     * (createTopic creates it on each master TBW102 names); a producer with the defaults sees
     * SLAVE_NOT_AVAILABLE from that group; one with retryAnotherBrokerWhenNotStoreOK sends N
     * messages, each answered SEND_OK by another group.
     */
    private void retryAnotherBroker() throws Exception {
        String topic = topic("retry");
        DefaultMQProducer plain = producer("plain");
        plain.setSendLatencyFaultEnable(false);
        Set<String> brokers = new TreeSet<>();
        for (MessageQueue q : plain.fetchPublishMessageQueues(TBW102)) {
            brokers.add(q.getBrokerName());
        }
        boolean v5 = false;
        for (Method m : DefaultMQProducer.class.getMethods()) {
            v5 |= m.getName().equals("createTopic") && m.getParameterCount() == 5;
        }
        if (v5) {
            invoke(plain, "createTopic", TBW102, topic, 2, 0, new HashMap<String, String>());
        } else {
            invoke(plain, "createTopic", TBW102, topic, 2);
        }
        Set<String> routed = new TreeSet<>();
        await(() -> {
            try {
                routed.clear();
                plain.fetchPublishMessageQueues(topic).forEach(q -> routed.add(q.getBrokerName()));
                return routed.equals(brokers);
            } catch (MQClientException e) {
                return false; // not routed yet
            }
        });
        if (!report.equal("topic_on_every_group", brokers, routed) || !report.check("several_groups", brokers.size() > 1, brokers)) {
            return;
        }
        Set<String> notOk = new TreeSet<>();
        for (SendResult r : sendSync(plain, topic, 0, 2 * brokers.size() * 2, i -> "TagR")) {
            if (r.getSendStatus() != SendStatus.SEND_OK) {
                notOk.add(r.getSendStatus() + "@" + r.getMessageQueue().getBrokerName());
            }
        }
        report.check("default_producer_sees_not_store_ok", !notOk.isEmpty(), notOk);
        DefaultMQProducer retrying = new DefaultMQProducer("P_retrying_" + runId, rpcHook());
        retrying.setNamesrvAddr(namesrv);
        retrying.setInstanceName(instanceName());
        retrying.setVipChannelEnabled(false);
        retrying.setSendLatencyFaultEnable(false);
        retrying.setRetryAnotherBrokerWhenNotStoreOK(true);
        retrying.start();
        shutdowns.add(retrying::shutdown);
        Map<String, Long> statuses = new TreeMap<>();
        Set<String> landed = new TreeSet<>();
        for (SendResult r : sendSync(retrying, topic, 0, messages, i -> "TagR")) {
            statuses.merge(r.getSendStatus().name(), 1L, Long::sum);
            landed.add(r.getMessageQueue().getBrokerName());
        }
        report.equal("retrying_producer_all_send_ok", Map.of("SEND_OK", (long) messages), statuses);
        Set<String> badGroups = new TreeSet<>();
        notOk.forEach(s -> badGroups.add(s.substring(s.indexOf('@') + 1)));
        Set<String> overlap = new TreeSet<>(landed);
        overlap.retainAll(badGroups);
        report.check("retried_on_another_group", overlap.isEmpty() && !landed.isEmpty(),
                "answered by " + landed + ", not-OK groups " + badGroups);
    }

    /**
     * A broker group under a failover controller (set up by the caller): the producer keeps
     * sending sync messages; after N SEND_OK it writes {@code <work>/sent}; the caller kills the
     * master and writes {@code <work>/master-stopped} once the controller elected a new one; the
     * producer (retrying as it does by default) sends until N more are SEND_OK on the new master.
     * A push consumer then receives every message that was answered SEND_OK. Producer and
     * consumer re-read routes every second (pollNameServerInterval; the client's default, 30 s,
     * is how long a stock client may take to find the new master).
     */
    private void controllerFailover() throws Exception {
        String topic = topic("failover");
        DefaultMQProducer p = new DefaultMQProducer("P_failover_" + runId);
        p.setNamesrvAddr(namesrv);
        p.setInstanceName(instanceName());
        p.setVipChannelEnabled(false);
        p.setPollNameServerInterval(1000);
        p.start();
        shutdowns.add(p::shutdown);
        createTopic(p, topic, 4);
        Set<Integer> ok = new TreeSet<>();
        Map<String, Integer> failures = new TreeMap<>();
        int afterStop = -1;
        int okAfter = 0;
        for (int i = 0; beforeDeadline() && okAfter < messages; i++) {
            try {
                SendResult r = p.send(message(topic, i, "TagF"));
                if (r.getSendStatus() == SendStatus.SEND_OK) {
                    ok.add(i);
                    okAfter += afterStop >= 0 ? 1 : 0;
                } else {
                    failures.merge(r.getSendStatus().name(), 1, Integer::sum);
                }
            } catch (Exception e) {  // no master reachable for a moment: not acknowledged
                failures.merge(e.getClass().getSimpleName(), 1, Integer::sum);
                Thread.sleep(50);
            }
            if (ok.size() >= messages && !java.nio.file.Files.exists(work.resolve("sent"))) {
                java.nio.file.Files.writeString(work.resolve("sent"), topic);
            }
            if (afterStop < 0 && java.nio.file.Files.exists(work.resolve("master-stopped"))) {
                afterStop = i;
            }
        }
        report.info("failover_send_failures", failures.toString());
        report.check("failed_over_mid_run", afterStop > 0, "sends before master-stopped: " + afterStop);
        report.check("send_ok_again_after_failover", okAfter >= messages, okAfter + " SEND_OK after the failover");
        Collector col = new Collector(topic, i -> "TagF");
        DefaultMQPushConsumer c = pushConsumer("C_failover_" + runId);
        c.setPollNameServerInterval(1000);
        c.subscribe(topic, "*");
        c.registerMessageListener(col);
        c.start();
        await(() -> col.received().containsAll(ok));
        Set<Integer> missing = new TreeSet<>(ok);
        missing.removeAll(col.received());
        report.check("every_send_ok_consumed", missing.isEmpty(), ok.size() + " SEND_OK, missing "
                + missing.stream().limit(10).toList());
        report.check("messages_intact", col.mismatches.isEmpty(), col.mismatches);
        report.info("failover_duplicates_consumed", String.valueOf(col.duplicates()));
    }

    private static boolean contiguousFromZero(Map<Integer, List<Long>> offsets) {
        for (List<Long> offs : offsets.values()) {
            List<Long> sorted = new ArrayList<>(offs);
            sorted.sort(null);
            for (int i = 0; i < sorted.size(); i++) {
                if (sorted.get(i) != i) {
                    return false;
                }
            }
        }
        return true;
    }

    /** DefaultMQProducer.send with a SendCallback: every callback reports SEND_OK. */
    private void producerAsync() throws Exception {
        String topic = topic("async");
        DefaultMQProducer p = producer("async");
        createTopic(p, topic, 4);
        CountDownLatch done = new CountDownLatch(messages);
        ConcurrentLinkedQueue<SendResult> results = new ConcurrentLinkedQueue<>();
        ConcurrentLinkedQueue<Throwable> errors = new ConcurrentLinkedQueue<>();
        for (int i = 0; i < messages; i++) {
            p.send(message(topic, i, tagCycle(i)), new SendCallback() {
                @Override
                public void onSuccess(SendResult r) {
                    results.add(r);
                    done.countDown();
                }

                @Override
                public void onException(Throwable e) {
                    errors.add(e);
                    done.countDown();
                }
            });
        }
        boolean all = done.await(Math.max(1, (deadlineNanos - System.nanoTime()) / 1_000_000), TimeUnit.MILLISECONDS);
        report.check("all_callbacks", all, "callbacks " + (messages - done.getCount()) + "/" + messages);
        report.check("no_send_errors", errors.isEmpty(), errors.isEmpty() ? "" : String.valueOf(errors.peek()));
        long ok = results.stream().filter(r -> r.getSendStatus() == SendStatus.SEND_OK).count();
        report.equal("all_send_ok", (long) messages, ok);
        Map<Integer, List<Long>> offsets = new TreeMap<>();
        Set<String> ids = new HashSet<>();
        for (SendResult r : results) {
            ids.add(r.getMsgId());
            offsets.computeIfAbsent(r.getMessageQueue().getQueueId(), k -> new ArrayList<>()).add(r.getQueueOffset());
        }
        report.equal("msg_ids_unique", messages, ids.size());
        report.check("queue_offsets_contiguous", contiguousFromZero(offsets), "offsets by queue " + offsets);
    }

    /**
     * DefaultMQProducer.send(Collection) (SEND_BATCH_MESSAGE, one MessageBatch body): one
     * result whose queue offset is the first of the batch and whose msgId lists every message;
     * read back from that queue, the batch is there in order with keys, tags and properties.
     */
    private void producerBatch() throws Exception {
        String topic = topic("batch");
        DefaultMQProducer p = producer("batch");
        createTopic(p, topic, 2);
        int n = 10;
        List<Message> batch = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            batch.add(message(topic, i, tagCycle(i)));
        }
        SendResult r = p.send(batch);
        report.equal("batch_send_ok", SendStatus.SEND_OK, r.getSendStatus());
        report.equal("batch_msg_ids", n, r.getMsgId() == null ? 0 : r.getMsgId().split(",").length);
        report.equal("batch_first_offset", 0L, r.getQueueOffset());

        DefaultLitePullConsumer c = litePullConsumer("C_batch_" + runId);
        c.start();
        MessageQueue mq = r.getMessageQueue();
        c.assign(List.of(mq));
        c.seek(mq, 0);
        List<MessageExt> got = new ArrayList<>();
        while (got.size() < n && beforeDeadline()) {
            got.addAll(c.poll(200));
        }
        List<Integer> order = got.stream().map(Scenarios::idx).toList();
        report.equal("batch_read_back_in_order", new ArrayList<>(range(0, n)), order);
        List<Long> offsets = got.stream().map(MessageExt::getQueueOffset).toList();
        List<Long> want = new ArrayList<>();
        for (long i = 0; i < n; i++) {
            want.add(i);
        }
        report.equal("batch_one_offset_each", want, offsets);
        List<String> bad = new ArrayList<>();
        for (MessageExt m : got) {
            String diff = mismatch(m, topic, Scenarios::tagCycle);
            if (diff != null) {
                bad.add(diff);
            }
        }
        report.check("batch_content_intact", bad.isEmpty(), "mismatches " + first(bad));
    }

    /** viewMessage by offset message id (VIEW_MESSAGE_BY_ID), by unique key, and queryMessage by key. */
    private void queryMessage() throws Exception {
        String topic = topic("query");
        DefaultMQProducer p = producer("query");
        createTopic(p, topic, 2);
        long begin = System.currentTimeMillis() - 60_000;
        List<SendResult> results = sendSync(p, topic, 0, 5, i -> "TagQ");
        for (int i = 0; i < results.size(); i++) {
            SendResult r = results.get(i);
            MessageExt byOffsetId = p.viewMessage(topic, r.getOffsetMsgId());
            String bad = mismatch(byOffsetId, topic, k -> "TagQ");
            report.check("view_by_offset_msg_id_" + i, bad == null && idx(byOffsetId) == i,
                    bad == null ? "idx " + idx(byOffsetId) : bad);
            // the index is built after the append, as RocketMQ's dispatcher does: poll (bounded)
            MessageExt[] byUniq = new MessageExt[1];
            String[] lastError = {"not found"};
            await(() -> {
                try {
                    byUniq[0] = p.getDefaultMQProducerImpl().queryMessageByUniqKey(topic, r.getMsgId());
                } catch (MQClientException e) {
                    lastError[0] = e.getMessage().split("\n")[0];
                }
                return byUniq[0] != null;
            });
            MessageExt u = byUniq[0];
            report.check("query_by_unique_key_" + i, u != null && idx(u) == i && mismatch(u, topic, k -> "TagQ") == null,
                    u == null ? lastError[0] : "idx " + idx(u));
        }
        String key = "key-" + runId + "-3";
        List<MessageExt> found = new ArrayList<>();
        boolean hit = await(() -> {
            found.clear();
            try {
                QueryResult q = p.queryMessage(topic, key, 32, begin, System.currentTimeMillis() + 60_000);
                found.addAll(q.getMessageList());
            } catch (MQClientException e) {
                return false; // "no message" until the index has it
            }
            return found.stream().anyMatch(m -> idx(m) == 3);
        });
        report.check("query_by_key", hit && found.stream().allMatch(m -> key.equals(m.getKeys())),
                "found " + found.size() + " message(s) for " + key);
    }

    /** Push consumer, clustering, subscription "TagA || TagC": exactly those, once each. */
    private void pushTags() throws Exception {
        String topic = topic("tags");
        DefaultMQProducer p = producer("tags");
        createTopic(p, topic, 4);
        sendSync(p, topic, 0, messages, Scenarios::tagCycle);
        Set<Integer> expected = new TreeSet<>();
        for (int i = 0; i < messages; i++) {
            if (!tagCycle(i).equals("TagB")) {
                expected.add(i);
            }
        }
        DefaultMQPushConsumer c = pushConsumer("C_tags_" + runId);
        Collector collector = new Collector(topic, Scenarios::tagCycle);
        c.subscribe(topic, "TagA || TagC");
        c.registerMessageListener(collector);
        c.start();
        await(() -> collector.counts.size() >= expected.size());
        report.equal("received_exactly_matching_tags", expected, collector.received());
        report.equal("no_duplicates", 0, collector.duplicates());
        report.check("content_intact", collector.mismatches.isEmpty(), "mismatches " + first(collector.mismatches));
    }

    /**
     * Push consumer with MessageSelector.bySql on a one-queue topic, one consume thread: when
     * the last message sent (which matches) arrives, every earlier message has been through
     * the listener, so extras would have been seen. Also: a malformed expression is refused
     * when the consumer starts.
     */
    private void pushSql() throws Exception {
        String topic = topic("sql");
        DefaultMQProducer p = producer("sql");
        createTopic(p, topic, 1);
        IntFunction<String> tagOf = i -> i < 30 ? (i % 2 == 0 ? "TagA" : "TagB") : (i < 33 ? "TagA" : "TagB");
        for (int i = 0; i < 34; i++) {
            Message m = message(topic, i, tagOf.apply(i));
            if (i < 30) {
                m.putUserProperty("a", Integer.toString(i));
            } else if (i == 33) {
                m.putUserProperty("a", "99");
            } // 30..32 carry no property "a": a comparison with a missing property is not true
            SendResult r = p.send(m);
            if (r.getSendStatus() != SendStatus.SEND_OK) {
                throw new IllegalStateException("send " + i + ": " + r);
            }
        }
        Set<Integer> expected = new TreeSet<>(List.of(10, 12, 14, 16, 18, 33));
        DefaultMQPushConsumer c = pushConsumer("C_sql_" + runId);
        c.setConsumeThreadMin(1);
        c.setConsumeThreadMax(1);
        Collector collector = new Collector(topic, tagOf);
        c.subscribe(topic, MessageSelector.bySql("(TAGS IN ('TagA') AND a BETWEEN 10 AND 19) OR (a IS NOT NULL AND a = 99)"));
        c.registerMessageListener(collector);
        c.start();
        boolean last = await(() -> collector.counts.containsKey(33));
        report.check("last_match_delivered", last, "idx 33 (a=99)");
        report.equal("received_exactly_matching_sql", expected, collector.received());
        report.equal("no_duplicates", 0, collector.duplicates());
        report.check("content_intact", collector.mismatches.isEmpty(), "mismatches " + first(collector.mismatches));

        DefaultMQPushConsumer bad = pushConsumer("C_badsql_" + runId);
        bad.subscribe(topic, MessageSelector.bySql("a >>> 1 AND"));
        bad.registerMessageListener(new Collector(topic, tagOf));
        try {
            bad.start();
            report.check("bad_sql_refused_at_start", false, "consumer with a malformed SQL92 expression started");
        } catch (MQClientException e) {
            report.check("bad_sql_refused_at_start", true, e.getMessage().split("\n")[0]);
        }
    }

    /** Two push consumers of one group in BROADCASTING model each receive every message once. */
    private void pushBroadcast() throws Exception {
        String topic = topic("bcast");
        DefaultMQProducer p = producer("bcast");
        createTopic(p, topic, 4);
        sendSync(p, topic, 0, messages, Scenarios::tagCycle);
        String group = "C_bcast_" + runId;
        List<Collector> collectors = new ArrayList<>();
        for (int k = 0; k < 2; k++) {
            DefaultMQPushConsumer c = pushConsumer(group);
            broadcasting(c);
            Collector collector = new Collector(topic, Scenarios::tagCycle);
            c.subscribe(topic, "*");
            c.registerMessageListener(collector);
            c.start();
            collectors.add(collector);
        }
        await(() -> collectors.stream().allMatch(col -> col.counts.size() >= messages));
        for (int k = 0; k < collectors.size(); k++) {
            Collector col = collectors.get(k);
            report.equal("member_" + k + "_received_all", range(0, messages), col.received());
            report.equal("member_" + k + "_no_duplicates", 0, col.duplicates());
            report.check("member_" + k + "_content_intact", col.mismatches.isEmpty(), "mismatches " + first(col.mismatches));
        }
    }

    /** Polls until `expected` distinct messages arrived (bounded); returns idx -> deliveries. */
    private Map<Integer, Integer> pollUntil(DefaultLitePullConsumer c, int expected, List<String> mismatches, String topic) {
        Map<Integer, Integer> got = new TreeMap<>();
        while (got.size() < expected && beforeDeadline()) {
            for (MessageExt m : c.poll(200)) {
                got.merge(idx(m), 1, Integer::sum);
                String bad = mismatch(m, topic, Scenarios::tagCycle);
                if (bad != null) {
                    mismatches.add(bad);
                }
            }
        }
        return got;
    }

    private static int dupes(Map<Integer, Integer> got) {
        return got.values().stream().mapToInt(v -> v - 1).sum();
    }

    /**
     * DefaultLitePullConsumer subscribe/poll/commitSync; after it shuts down, a new member of
     * the same group receives only what was produced later (the committed offsets held).
     */
    private void litePullSubscribe() throws Exception {
        String topic = topic("lite");
        String group = "C_lite_" + runId;
        int more = Math.max(5, messages / 4);
        DefaultMQProducer p = producer("lite");
        createTopic(p, topic, 4);
        sendSync(p, topic, 0, messages, Scenarios::tagCycle);
        List<String> mismatches = new ArrayList<>();

        DefaultLitePullConsumer c1 = litePullConsumer(group);
        c1.subscribe(topic, "*");
        c1.start();
        Map<Integer, Integer> got = pollUntil(c1, messages, mismatches, topic);
        report.equal("first_member_received_all", range(0, messages), got.keySet());
        report.equal("first_member_no_duplicates", 0, dupes(got));
        c1.commitSync();
        c1.shutdown(); // persists the committed offsets to the broker

        sendSync(p, topic, messages, messages + more, Scenarios::tagCycle);
        DefaultLitePullConsumer c2 = litePullConsumer(group);
        c2.subscribe(topic, "*");
        c2.start();
        Map<Integer, Integer> got2 = pollUntil(c2, more, mismatches, topic);
        report.equal("second_member_received_only_new", range(messages, messages + more), got2.keySet());
        report.equal("second_member_no_duplicates", 0, dupes(got2));
        c2.commitSync();
        report.check("content_intact", mismatches.isEmpty(), "mismatches " + first(mismatches));
    }

    /** DefaultLitePullConsumer assign + seek by offsetForTimestamp + seekToBegin. */
    private void litePullAssign() throws Exception {
        String topic = topic("assign");
        DefaultMQProducer p = producer("assign");
        createTopic(p, topic, 2);
        int half = messages / 2;
        sendSync(p, topic, 0, half, Scenarios::tagCycle);
        long firstDone = System.currentTimeMillis();
        // the second half must be stored at least 100 ms later, whatever the broker's clock
        // rounding, so that a timestamp between the halves is unambiguous
        while (System.currentTimeMillis() <= firstDone + 100) {
            Thread.sleep(10);
        }
        sendSync(p, topic, half, messages, Scenarios::tagCycle);
        List<String> mismatches = new ArrayList<>();

        DefaultLitePullConsumer c = litePullConsumer("C_assign_" + runId);
        c.start();
        Collection<MessageQueue> mqs = c.fetchMessageQueues(topic);
        report.equal("queues_fetched", 2, mqs.size());
        c.assign(mqs);
        // assign() starts pulling at once from the group's start offset. The client has a race
        // between such an in-flight pull and seek (the old task can still queue its result once
        // the new task has taken the seek offset), which delivers a batch twice on a busy
        // machine with any broker. Pausing first lets in-flight pulls finish before the seek
        // offset is taken; the seek itself and what is read after it are what is checked.
        c.pause(mqs);
        for (MessageQueue mq : mqs) {
            c.seek(mq, c.offsetForTimestamp(mq, firstDone + 99));
        }
        Thread.sleep(1000);
        c.resume(mqs);
        Map<Integer, Integer> got = pollUntil(c, messages - half, mismatches, topic);
        report.equal("seek_by_timestamp_reads_second_half", range(half, messages), got.keySet());
        report.equal("seek_by_timestamp_no_duplicates", 0, dupes(got));
        for (MessageQueue mq : mqs) {
            c.seekToBegin(mq);
        }
        Map<Integer, Integer> all = pollUntil(c, messages, mismatches, topic);
        report.equal("seek_to_begin_reads_all", range(0, messages), all.keySet());
        report.equal("seek_to_begin_no_duplicates", 0, dupes(all));
        report.check("content_intact", mismatches.isEmpty(), "mismatches " + first(mismatches));
    }

    /**
     * Orderly consumption: messages of 8 orders, each order's steps sent to one queue through a
     * MessageQueueSelector (hash of the order id), consumed with MessageListenerOrderly (broker
     * queue locks, LOCK_BATCH_MQ): every order's steps arrive complete and in send order.
     */
    private void pushOrderly() throws Exception {
        String topic = topic("orderly");
        DefaultMQProducer p = producer("orderly");
        createTopic(p, topic, 4);
        int orders = 8;
        int steps = Math.max(5, messages / orders);
        int idx = 0;
        Map<Integer, Integer> orderOf = new HashMap<>();
        for (int step = 0; step < steps; step++) {
            for (int order = 0; order < orders; order++) {
                Message m = message(topic, idx, "TagO");
                m.putUserProperty("order", Integer.toString(order));
                m.putUserProperty("step", Integer.toString(step));
                SendResult r = p.send(m, (mqs, msg, arg) -> mqs.get((Integer) arg % mqs.size()), order);
                if (r.getSendStatus() != SendStatus.SEND_OK) {
                    throw new IllegalStateException("send " + idx + ": " + r);
                }
                orderOf.put(idx++, order);
            }
        }
        int total = idx;
        Map<Integer, List<Integer>> seen = new ConcurrentHashMap<>();
        ConcurrentLinkedQueue<String> mismatches = new ConcurrentLinkedQueue<>();
        AtomicInteger delivered = new AtomicInteger();
        DefaultMQPushConsumer c = pushConsumer("C_orderly_" + runId);
        c.subscribe(topic, "*");
        c.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                int order = Integer.parseInt(m.getUserProperty("order"));
                seen.computeIfAbsent(order, k -> java.util.Collections.synchronizedList(new ArrayList<>()))
                        .add(Integer.parseInt(m.getUserProperty("step")));
                String bad = mismatch(m, topic, k -> "TagO");
                if (bad != null) {
                    mismatches.add(bad);
                }
                delivered.incrementAndGet();
            }
            return ConsumeOrderlyStatus.SUCCESS;
        });
        c.start();
        await(() -> delivered.get() >= total);
        report.equal("delivered_all", total, delivered.get());
        List<String> outOfOrder = new ArrayList<>();
        for (int order = 0; order < orders; order++) {
            List<Integer> got = seen.getOrDefault(order, List.of());
            List<Integer> want = new ArrayList<>(range(0, steps));
            if (!want.equals(got)) {
                outOfOrder.add("order " + order + " steps " + got);
            }
        }
        report.check("each_order_complete_and_in_order", outOfOrder.isEmpty(), "wrong " + first(outOfOrder));
        report.check("content_intact", mismatches.isEmpty(), "mismatches " + first(mismatches));
    }

    /**
     * TransactionMQProducer: the local transaction commits idx%3==0, rolls back idx%3==1 and
     * answers UNKNOW for idx%3==2, whose check-back (CHECK_TRANSACTION_STATE, after the broker's
     * transactionTimeOut) commits. A consumer receives exactly the committed ones; rolled-back
     * half messages never become visible.
     */
    private void transaction() throws Exception {
        String topic = topic("txn");
        DefaultMQProducer admin = producer("txnadmin");
        createTopic(admin, topic, 2);
        int n = 12;
        Set<Integer> checkedBack = ConcurrentHashMap.newKeySet();
        TransactionMQProducer p = new TransactionMQProducer("P_txn_" + runId);
        p.setNamesrvAddr(namesrv);
        p.setInstanceName(instanceName());
        p.setVipChannelEnabled(false);
        p.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                return switch (Integer.parseInt(msg.getUserProperty("idx")) % 3) {
                    case 0 -> LocalTransactionState.COMMIT_MESSAGE;
                    case 1 -> LocalTransactionState.ROLLBACK_MESSAGE;
                    default -> LocalTransactionState.UNKNOW;
                };
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                int i = Integer.parseInt(msg.getUserProperty("idx"));
                checkedBack.add(i);
                return i % 3 == 2 ? LocalTransactionState.COMMIT_MESSAGE : LocalTransactionState.ROLLBACK_MESSAGE;
            }
        });
        p.start();
        shutdowns.add(p::shutdown);
        List<String> states = new ArrayList<>();
        boolean halfOk = true;
        for (int i = 0; i < n; i++) {
            TransactionSendResult r = p.sendMessageInTransaction(message(topic, i, "TagT"), null);
            halfOk &= r.getSendStatus() == SendStatus.SEND_OK;
            states.add(String.valueOf(r.getLocalTransactionState()));
        }
        report.check("half_messages_sent", halfOk, "local states " + states);
        Set<Integer> expected = new TreeSet<>();
        Set<Integer> rolledBack = new TreeSet<>();
        for (int i = 0; i < n; i++) {
            (i % 3 == 1 ? rolledBack : expected).add(i);
        }
        DefaultMQPushConsumer c = pushConsumer("C_txn_" + runId);
        Collector collector = new Collector(topic, k -> "TagT");
        c.subscribe(topic, "*");
        c.registerMessageListener(collector);
        c.start();
        await(() -> collector.received().containsAll(expected));
        Set<Integer> unknownOnes = new TreeSet<>(expected);
        unknownOnes.removeIf(i -> i % 3 != 2);
        report.check("check_back_asked_for_unknown", checkedBack.containsAll(unknownOnes),
                "checked back " + new TreeSet<>(checkedBack) + ", unknown " + unknownOnes);
        report.equal("committed_delivered", expected, collector.received());
        Set<Integer> leaked = new TreeSet<>(collector.received());
        leaked.retainAll(rolledBack);
        report.equal("rolled_back_never_delivered", Set.of(), leaked);
        report.equal("no_duplicates", 0, collector.duplicates());
        report.check("content_intact", collector.mismatches.isEmpty(), "mismatches " + first(collector.mismatches));
    }

    /**
     * A transaction whose state stays UNKNOW: the broker checks back (every
     * transactionCheckInterval after transactionTimeOut) until transactionCheckMax, then rolls it
     * back. A committed transaction sent after it is delivered; the undecided one never is. The
     * topic name is reported (info {@code transaction_exhaustion_topic}) so the driver can
     * confirm the rollback on the broker once the checks stopped.
     */
    private void transactionExhaustion() throws Exception {
        String topic = topic("txnx");
        DefaultMQProducer admin = producer("txnxadmin");
        createTopic(admin, topic, 1);
        report.info("transaction_exhaustion_topic", topic);
        AtomicInteger checks = new AtomicInteger();
        TransactionMQProducer p = new TransactionMQProducer("P_txnx_" + runId);
        p.setNamesrvAddr(namesrv);
        p.setInstanceName(instanceName());
        p.setVipChannelEnabled(false);
        p.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                return "0".equals(msg.getUserProperty("idx")) ? LocalTransactionState.UNKNOW : LocalTransactionState.COMMIT_MESSAGE;
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                if (idx(msg) == 0) {
                    checks.incrementAndGet();
                }
                return LocalTransactionState.UNKNOW;
            }
        });
        p.start();
        shutdowns.add(p::shutdown);
        TransactionSendResult undecided = p.sendMessageInTransaction(message(topic, 0, "TagX"), null);
        TransactionSendResult committed = p.sendMessageInTransaction(message(topic, 1, "TagX"), null);
        report.equal("local_states", "UNKNOW,COMMIT_MESSAGE",
                undecided.getLocalTransactionState() + "," + committed.getLocalTransactionState());
        DefaultMQPushConsumer c = pushConsumer("C_txnx_" + runId);
        Collector collector = new Collector(topic, k -> "TagX");
        c.subscribe(topic, "*");
        c.registerMessageListener(collector);
        c.start();
        await(() -> collector.received().contains(1) && checks.get() >= 2);
        report.check("checked_back_repeatedly", checks.get() >= 2, "check-backs " + checks.get());
        report.equal("only_committed_delivered", Set.of(1), collector.received());
        report.info("transaction_exhaustion_checks", checks.get());
    }

    /**
     * MessageListenerOrderly while the group changes: one consumer, a second joins, the first
     * leaves, with sends in between. Every order's steps arrive complete and in send order.
     * A queue handed over mid-rebalance may see its in-flight message again: the 4.9/5.x
     * client persists a dropped queue's offset before its listener returns and skips the
     * commit once the queue is dropped, so the new owner resumes from the persisted offset
     * (as against Apache RocketMQ). Such redeliveries must replay a step already delivered,
     * never skip ahead; they are counted and bounded by one per order and handover.
     */
    private void pushOrderlyRebalance() throws Exception {
        String topic = topic("orderly-rb");
        DefaultMQProducer p = producer("orderly-rb");
        createTopic(p, topic, 4);
        int orders = 8;
        int steps = Math.max(9, messages / orders) / 3 * 3;
        Map<Integer, List<Integer>> seen = new ConcurrentHashMap<>();
        AtomicInteger delivered = new AtomicInteger();
        MessageListenerOrderly listener = (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                seen.computeIfAbsent(Integer.parseInt(m.getUserProperty("order")),
                        k -> java.util.Collections.synchronizedList(new ArrayList<>()))
                        .add(Integer.parseInt(m.getUserProperty("step")));
                delivered.incrementAndGet();
            }
            return ConsumeOrderlyStatus.SUCCESS;
        };
        int[] idx = {0};
        IntFunction<Integer> sendSteps = from -> {
            try {
                for (int step = from; step < from + steps / 3; step++) {
                    for (int order = 0; order < orders; order++) {
                        Message m = message(topic, idx[0]++, "TagR");
                        m.putUserProperty("order", Integer.toString(order));
                        m.putUserProperty("step", Integer.toString(step));
                        p.send(m, (mqs, msg, arg) -> mqs.get((Integer) arg % mqs.size()), order);
                    }
                }
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
            return idx[0];
        };
        DefaultMQPushConsumer first = pushConsumer("C_orderly_rb_" + runId);
        first.subscribe(topic, "*");
        first.registerMessageListener(listener);
        first.start();
        int sent = sendSteps.apply(0);
        final int firstThird = sent;
        await(() -> delivered.get() >= firstThird);
        DefaultMQPushConsumer second = pushConsumer("C_orderly_rb_" + runId);
        second.subscribe(topic, "*");
        second.registerMessageListener(listener);
        second.start();
        sent = sendSteps.apply(steps / 3);
        final int twoThirds = sent;
        await(() -> delivered.get() >= twoThirds);
        first.shutdown();
        sent = sendSteps.apply(2 * steps / 3);
        final int total = sent;
        await(() -> {
            for (int order = 0; order < orders; order++) {
                if (new java.util.HashSet<>(seen.getOrDefault(order, List.of())).size() < steps) {
                    return false;
                }
            }
            return true;
        });
        List<String> outOfOrder = new ArrayList<>();
        int redelivered = 0;
        for (int order = 0; order < orders; order++) {
            List<Integer> got = new ArrayList<>(seen.getOrDefault(order, List.of()));
            List<Integer> firsts = new ArrayList<>();
            int high = -1;
            boolean ok = true;
            for (int step : got) {
                if (step > high) {
                    ok &= step == high + 1;   // never skips ahead
                    high = step;
                    firsts.add(step);
                } else {
                    redelivered++;            // a replay of a step already delivered
                }
            }
            if (!ok || !new ArrayList<>(range(0, steps)).equals(firsts)) {
                outOfOrder.add("order " + order + " steps " + got);
            }
        }
        report.check("each_order_complete_and_in_order", outOfOrder.isEmpty(), "wrong " + first(outOfOrder));
        report.check("redeliveries_bounded_by_handovers", redelivered <= 2 * orders,
                "redelivered " + redelivered + " for " + orders + " orders and 2 handovers");
        report.info("orderly_rebalance_redelivered", redelivered);
    }

    /**
     * Delayed delivery (run the node with short levels, e.g. messageDelayLevel=1s 2s ...): half
     * the messages with delay level 2, half as timer messages (TIMER_DELIVER_MS, 3 s ahead). All
     * arrive once, intact, and none is stored in its topic before it was due.
     */
    private void delay() throws Exception {
        String topic = topic("delay");
        DefaultMQProducer p = producer("delay");
        createTopic(p, topic, 2);
        int n = Math.max(2, Math.min(messages, 20));
        Map<Integer, Long> dueAt = new ConcurrentHashMap<>();
        for (int i = 0; i < n; i++) {
            Message m = message(topic, i, "TagD");
            long now = System.currentTimeMillis();
            if (i % 2 == 0) {
                m.setDelayTimeLevel(2);
                dueAt.put(i, now + 2000);
            } else {
                MessageAccessor.putProperty(m, "TIMER_DELIVER_MS", Long.toString(now + 3000));
                dueAt.put(i, now + 3000 - 1000); // timer precision is one second
            }
            report.equal("send_ok_" + i, SendStatus.SEND_OK, p.send(m).getSendStatus());
        }
        ConcurrentLinkedQueue<String> early = new ConcurrentLinkedQueue<>();
        Collector col = new Collector(topic, i -> "TagD");
        DefaultMQPushConsumer c = pushConsumer("C_delay_" + runId);
        c.subscribe(topic, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                Long due = dueAt.get(idx(m));
                if (due != null && m.getStoreTimestamp() < due - 100) {
                    early.add("idx=" + idx(m) + " stored " + (due - m.getStoreTimestamp()) + " ms early");
                }
            }
            return col.consumeMessage(msgs, ctx);
        });
        c.start();
        await(() -> col.received().size() >= n);
        report.equal("delayed_all_received", range(0, n), col.received());
        report.equal("delayed_no_duplicates", 0, col.duplicates());
        report.check("delayed_content_intact", col.mismatches.isEmpty(), "mismatches " + first(col.mismatches));
        report.check("delayed_not_early", early.isEmpty(), "early " + first(early));
    }

    /**
     * RECONSUME_LATER: each message fails twice, then succeeds. The client sends it back
     * (CONSUMER_SEND_MSG_BACK), the broker redelivers through %RETRY%group with a growing
     * delay: every message is seen with reconsumeTimes 0, 1, 2, under its own topic and msgId.
     */
    private void retryReconsumeLater() throws Exception {
        String topic = topic("retry");
        DefaultMQProducer p = producer("retry");
        createTopic(p, topic, 2);
        int n = Math.max(1, Math.min(messages, 10));
        Map<Integer, String> ids = new HashMap<>();
        for (SendResult r : sendSync(p, topic, 0, n, i -> "TagR")) {
            ids.put(ids.size(), r.getMsgId());
        }
        Map<Integer, List<Integer>> attempts = new ConcurrentHashMap<>();
        ConcurrentLinkedQueue<String> bad = new ConcurrentLinkedQueue<>();
        DefaultMQPushConsumer c = pushConsumer("C_retry_" + runId);
        // %RETRY%group is created with the group's first heartbeat, after the client fetched its
        // routes: poll the NameServer often so the retry queue is assigned within seconds
        c.setPollNameServerInterval(1000);
        c.subscribe(topic, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            boolean fail = false;
            for (MessageExt m : msgs) {
                attempts.computeIfAbsent(idx(m), k -> java.util.Collections.synchronizedList(new ArrayList<>()))
                        .add(m.getReconsumeTimes());
                String mm = mismatch(m, topic, i -> "TagR");
                if (mm != null) {
                    bad.add(mm);
                }
                if (!m.getMsgId().equals(ids.get(idx(m)))) {
                    bad.add("idx=" + idx(m) + " msgId " + m.getMsgId() + " != sent " + ids.get(idx(m)));
                }
                fail |= m.getReconsumeTimes() < 2;
            }
            return fail ? ConsumeConcurrentlyStatus.RECONSUME_LATER : ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        assignRetryQueueSoon(c);
        await(() -> attempts.size() >= n && attempts.values().stream().allMatch(a -> a.size() >= 3));
        List<String> wrong = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            List<Integer> a = attempts.getOrDefault(i, List.of());
            if (!List.of(0, 1, 2).equals(new ArrayList<>(a))) {
                wrong.add("idx=" + i + " reconsumeTimes " + a);
            }
        }
        report.check("redelivered_with_growing_reconsume_times", wrong.isEmpty(), "wrong " + first(wrong));
        report.check("retried_content_intact", bad.isEmpty(), "mismatches " + first(bad));
    }

    /**
     * Dead letters: maxReconsumeTimes = 1 and a listener that always fails: each message is
     * delivered twice, then lands in %DLQ%group keeping its origin (RETRY_TOPIC, ORIGIN_MESSAGE_ID)
     * and reconsume count; a lite pull consumer reads it there.
     */
    private void deadLetters() throws Exception {
        String topic = topic("dlq");
        DefaultMQProducer p = producer("dlq");
        createTopic(p, topic, 1);
        int n = Math.max(1, Math.min(messages, 5));
        Map<Integer, String> ids = new HashMap<>();
        for (SendResult r : sendSync(p, topic, 0, n, i -> "TagX")) {
            ids.put(ids.size(), r.getMsgId());
        }
        String group = "C_dlq_" + runId;
        AtomicInteger deliveries = new AtomicInteger();
        DefaultMQPushConsumer c = pushConsumer(group);
        // %RETRY%group is created with the group's first heartbeat, after the client fetched its
        // routes: poll the NameServer often so the retry queue is assigned within seconds
        c.setPollNameServerInterval(1000);
        c.setMaxReconsumeTimes(1);
        c.subscribe(topic, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            deliveries.addAndGet(msgs.size());
            return ConsumeConcurrentlyStatus.RECONSUME_LATER;
        });
        c.start();
        assignRetryQueueSoon(c);
        String dlq = "%DLQ%" + group;
        DefaultLitePullConsumer reader = litePullConsumer("C_dlq_reader_" + runId);
        reader.start();
        List<MessageQueue> queues = new ArrayList<>();
        boolean routed = await(() -> {
            try {
                queues.clear();
                queues.addAll(reader.fetchMessageQueues(dlq));
                return !queues.isEmpty();
            } catch (MQClientException e) {
                return false; // the DLQ topic appears with the first dead letter
            }
        });
        report.check("dlq_topic_routed", routed, dlq);
        reader.assign(queues);
        for (MessageQueue mq : queues) {
            reader.seek(mq, 0);
        }
        // by queue offset: the lite pull consumer may hand the first message twice when its
        // seek lands while a pull from its starting offset is in flight (the broker's DLQ holding
        // a message twice would still show, at another offset)
        Map<String, MessageExt> byOffset = new LinkedHashMap<>();
        await(() -> {
            for (MessageExt m : reader.poll(500)) {
                byOffset.putIfAbsent(m.getQueueId() + ":" + m.getQueueOffset(), m);
            }
            return byOffset.size() >= n;
        });
        List<MessageExt> dead = new ArrayList<>(byOffset.values());
        report.equal("dead_letters", n, dead.size());
        List<String> wrong = new ArrayList<>();
        for (MessageExt m : dead) {
            int i = idx(m);
            if (!topic.equals(m.getProperty("RETRY_TOPIC"))) {
                wrong.add("idx=" + i + " RETRY_TOPIC=" + m.getProperty("RETRY_TOPIC"));
            }
            if (!ids.get(i).equals(m.getProperty("ORIGIN_MESSAGE_ID"))) {
                wrong.add("idx=" + i + " ORIGIN_MESSAGE_ID=" + m.getProperty("ORIGIN_MESSAGE_ID"));
            }
            if (m.getReconsumeTimes() != 2) {
                wrong.add("idx=" + i + " reconsumeTimes=" + m.getReconsumeTimes());
            }
            if (!("body-" + i).equals(new String(m.getBody(), StandardCharsets.UTF_8))) {
                wrong.add("idx=" + i + " body changed");
            }
        }
        report.check("dead_letters_keep_origin", wrong.isEmpty(), "wrong " + first(wrong));
        report.equal("deliveries_before_dlq", 2 * n, deliveries.get());
    }

    /**
     * Rewind an online push consumer: after it consumed N messages the broker is asked, through
     * the client's own MQClientAPIImpl (INVOKE_BROKER_TO_RESET_OFFSET), to reset the group to a
     * time before them; the broker answers the offset table and pushes RESET_CONSUMER_CLIENT_OFFSET,
     * and the consumer receives all N again.
     */
    private void resetOffset() throws Exception {
        String topic = topic("reset");
        DefaultMQProducer p = producer("reset");
        createTopic(p, topic, 2);
        long before = System.currentTimeMillis() - 1000;
        int n = Math.max(2, Math.min(messages, 20));
        sendSync(p, topic, 0, n, i -> "TagZ");
        Collector col = new Collector(topic, i -> "TagZ");
        String group = "C_reset_" + runId;
        DefaultMQPushConsumer c = pushConsumer(group);
        c.subscribe(topic, "*");
        c.registerMessageListener(col);
        c.start();
        await(() -> col.received().size() >= n);
        report.equal("first_pass", range(0, n), col.received());
        Object factory = invoke(c.getDefaultMQPushConsumerImpl(), "getmQClientFactory");
        Object api = invoke(factory, "getMQClientAPIImpl");
        String brokerName = p.fetchPublishMessageQueues(topic).get(0).getBrokerName();
        String addr = (String) invoke(factory, "findBrokerAddressInPublish", brokerName);
        Object table = invoke(api, "invokeBrokerToResetOffset", addr, topic, group, before, true, 5000L);
        report.check("reset_answer_parsed", table instanceof Map<?, ?> m && m.size() == 2
                && m.values().stream().allMatch(v -> ((Number) v).longValue() == 0), "offset table " + table);
        // the client drops the topic's queues (after its own 10 s pause), then a rebalance takes
        // them back at the new offsets: ask for a rebalance every second instead of waiting for
        // the client's 20 s period (a rebalance while the queues are still held changes nothing)
        long[] nudged = {0};
        await(() -> {
            if (System.nanoTime() - nudged[0] > 1_000_000_000L) {
                nudged[0] = System.nanoTime();
                c.getDefaultMQPushConsumerImpl().doRebalance();
            }
            return col.counts.values().stream().filter(k -> k.get() >= 2).count() >= n;
        });
        List<Integer> twice = new ArrayList<>();
        col.counts.forEach((i, k) -> {
            if (k.get() >= 2) {
                twice.add(i);
            }
        });
        twice.sort(null);
        report.equal("consumed_again_after_reset", new ArrayList<>(range(0, n)), twice);
        report.check("content_intact", col.mismatches.isEmpty(), "mismatches " + first(col.mismatches));
    }

    /**
     * CONSUME_FROM_TIMESTAMP: a new group whose consumeTimestamp (yyyyMMddHHmmss, local time)
     * falls between two halves of the messages starts at the second half (the broker's
     * SEARCH_OFFSET_BY_TIMESTAMP), and receives each of those once.
     */
    private void consumeFromTimestamp() throws Exception {
        String topic = topic("cft");
        DefaultMQProducer p = producer("cft");
        createTopic(p, topic, 2);
        int half = Math.max(1, Math.min(messages, 20) / 2);
        sendSync(p, topic, 0, half, i -> "TagT");
        // the timestamp has one-second precision: start the second half in a later second
        long boundary = (System.currentTimeMillis() / 1000 + 1) * 1000;
        await(() -> System.currentTimeMillis() >= boundary);
        String ts = java.time.format.DateTimeFormatter.ofPattern("yyyyMMddHHmmss")
                .format(java.time.LocalDateTime.ofInstant(java.time.Instant.ofEpochMilli(boundary),
                        java.time.ZoneId.systemDefault()));
        sendSync(p, topic, half, 2 * half, i -> "TagT");
        Collector col = new Collector(topic, i -> "TagT");
        DefaultMQPushConsumer c = pushConsumer("C_cft_" + runId);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_TIMESTAMP);
        c.setConsumeTimestamp(ts);
        c.subscribe(topic, "*");
        c.registerMessageListener(col);
        c.start();
        await(() -> col.received().size() >= half);
        report.equal("starts_at_the_timestamp", range(half, 2 * half), col.received());
        report.equal("no_duplicates", 0, col.duplicates());
        report.check("content_intact", col.mismatches.isEmpty(), "mismatches " + first(col.mismatches));
    }

    /**
     * Once the client has routed the group's retry topic, rebalance at once instead of waiting
     * for the client's 20 s rebalance period (the retry queue is then consumed within seconds).
     */
    private void assignRetryQueueSoon(DefaultMQPushConsumer c) throws Exception {
        String retry = "%RETRY%" + c.getConsumerGroup();
        await(() -> c.getDefaultMQPushConsumerImpl().getRebalanceImpl().getTopicSubscribeInfoTable().containsKey(retry));
        c.getDefaultMQPushConsumerImpl().doRebalance();
    }

    private static String first(Collection<String> items) {
        return items.stream().limit(5).toList().toString();
    }

    /**
     * RocketMQ 5 POP consumption by the remoting push consumer (5.x client only): the group's
     * mode is set to POP on the broker (SET_MESSAGE_REQUEST_MODE, what {@code mqadmin
     * setConsumeMode} sends), the consumer asks the broker for its assignment
     * ({@code setClientRebalance(false)} -> QUERY_ASSIGNMENT) and pops (POP_MESSAGE), acking each
     * message (ACK_MESSAGE). Every message arrives with its POP ack key (POP_CK), exactly once
     * except the two the listener fails once: those are hidden by CHANGE_MESSAGE_INVISIBLETIME
     * and come back with reconsumeTimes 1. Then an observation window longer than the invisible
     * time (5 s) plus the broker's revive interval sees no further delivery: the acks held.
     */
    private void pushPop() throws Exception {
        Class<?> modeType;
        try {
            modeType = Class.forName("org.apache.rocketmq.common.message.MessageRequestMode");
        } catch (ClassNotFoundException e) {
            report.check("client_supports_pop", false, "rocketmq-client " + builtAgainst + " has no POP consumer");
            return;
        }
        String topic = topic("pop");
        String group = "C_pop_" + runId;
        DefaultMQProducer p = producer("pop");
        createTopic(p, topic, 4);
        Object factory = invoke(invoke(p, "getDefaultMQProducerImpl"), "getMqClientFactory");
        Object api = invoke(factory, "getMQClientAPIImpl");
        Object route = invoke(api, "getTopicRouteInfoFromNameServer", topic, 5000L);
        Object brokerData = ((List<?>) invoke(route, "getBrokerDatas")).get(0);
        String brokerAddr = (String) invoke(brokerData, "selectBrokerAddr");
        @SuppressWarnings({"unchecked", "rawtypes"})
        Object pop = Enum.valueOf((Class<? extends Enum>) modeType, "POP");
        invoke(api, "setMessageRequestMode", brokerAddr, topic, group, pop, 0, 5000L);
        report.check("mode_set_to_pop", true, brokerAddr);

        int n = Math.max(4, messages);
        sendSync(p, topic, 0, n, Scenarios::tagCycle);
        Set<Integer> failOnce = Set.of(1, 2);
        Map<Integer, List<Integer>> deliveries = new ConcurrentHashMap<>();
        ConcurrentLinkedQueue<String> bad = new ConcurrentLinkedQueue<>();
        AtomicInteger withoutPopCk = new AtomicInteger();
        DefaultMQPushConsumer c = pushConsumer(group);
        invoke(c, "setClientRebalance", false);
        invoke(c, "setPopInvisibleTime", 5000L);
        c.subscribe(topic, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            boolean fail = false;
            for (MessageExt m : msgs) {
                List<Integer> seen = deliveries.computeIfAbsent(idx(m),
                        k -> java.util.Collections.synchronizedList(new ArrayList<>()));
                seen.add(m.getReconsumeTimes());
                if (m.getProperty("POP_CK") == null) {
                    withoutPopCk.incrementAndGet();
                }
                String mm = mismatch(m, topic, Scenarios::tagCycle);
                if (mm != null) {
                    bad.add(mm);
                }
                fail |= failOnce.contains(idx(m)) && seen.size() == 1;
            }
            return fail ? ConsumeConcurrentlyStatus.RECONSUME_LATER : ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        boolean all = await(() -> deliveries.size() >= n
                && failOnce.stream().allMatch(i -> deliveries.getOrDefault(i, List.of()).size() >= 2));
        report.check("all_received_and_failed_ones_redelivered", all, "received " + deliveries.keySet().size() + " of " + n
                + ", failed-once deliveries " + deliveries.get(1) + " " + deliveries.get(2));
        // observation window: an unacked message would come back after the 5 s invisible time
        long windowEnd = System.nanoTime() + Duration.ofSeconds(8).toNanos();
        while (System.nanoTime() < windowEnd && beforeDeadline()) {
            Thread.sleep(100);
        }
        report.equal("received_exactly_sent", range(0, n), new TreeSet<>(deliveries.keySet()));
        List<String> wrong = new ArrayList<>();
        for (Map.Entry<Integer, List<Integer>> e : new TreeMap<>(deliveries).entrySet()) {
            List<Integer> want = failOnce.contains(e.getKey()) ? List.of(0, 1) : List.of(0);
            if (!want.equals(new ArrayList<>(e.getValue()))) {
                wrong.add("idx=" + e.getKey() + " reconsumeTimes " + e.getValue());
            }
        }
        report.check("each_acked_once_no_redelivery", wrong.isEmpty(), "wrong " + first(wrong));
        report.equal("every_delivery_by_pop", 0, withoutPopCk.get());
        report.check("content_intact", bad.isEmpty(), "mismatches " + first(bad));
    }


    /**
     * Live clients for the mqadmin test: a producer and a push consumer, both with message trace
     * on (enableMsgTrace: each send and consume also writes a trace record to
     * RMQ_SYS_TRACE_TOPIC), send and consume ten keyed messages, report their names and the
     * message ids ({@code admin_*} info lines, then {@code admin_ready}), and stay online until
     * standard input closes (or the scenario deadline), so the operator commands run against a
     * group with members and a producer with a connection.
     */
    private void adminFixture() throws Exception {
        String topic = topic("admin");
        String pgroup = "P_admin_" + runId;
        String cgroup = "C_admin_" + runId;
        DefaultMQProducer p = new DefaultMQProducer(pgroup, true, null);
        p.setNamesrvAddr(namesrv);
        p.setInstanceName(instanceName());
        p.setVipChannelEnabled(false);
        p.start();
        shutdowns.add(p::shutdown);
        createTopic(p, topic, 4);
        int n = 10;
        List<SendResult> sent = sendSync(p, topic, 0, n, i -> "TagAdmin");
        Collector collector = new Collector(topic, i -> "TagAdmin");
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(cgroup, true, null);
        c.setNamesrvAddr(namesrv);
        c.setInstanceName(instanceName());
        c.setVipChannelEnabled(false);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        shutdowns.add(c::shutdown);
        c.subscribe(topic, "*");
        c.registerMessageListener(collector);
        c.start();
        boolean all = await(() -> collector.counts.size() >= n);
        report.check("consumed_all", all, collector.received().size() + " of " + n);
        // offsets are committed every 5 s by default: push them now, so consumerProgress sees them
        invoke(invoke(c, "getDefaultMQPushConsumerImpl"), "persistConsumerOffset");
        report.info("admin_topic", topic);
        report.info("admin_producer_group", pgroup);
        report.info("admin_consumer_group", cgroup);
        report.info("admin_msg_id", sent.get(0).getMsgId());
        report.info("admin_offset_msg_id", sent.get(0).getOffsetMsgId());
        report.info("admin_queue", sent.get(0).getMessageQueue().getQueueId() + "@" + sent.get(0).getQueueOffset());
        report.info("admin_key", "key-" + runId + "-0");
        report.info("admin_ready", "true");
        while (beforeDeadline() && System.in.read() >= 0) {
            // hold the clients online until the test closes standard input
        }
    }

}
