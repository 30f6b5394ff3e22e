"""The official RocketMQ 5 Python client (``rocketmq-python-client``, gRPC) against a real
``rockafka serve``: producer (normal, FIFO, delay, transactional with a checker), SimpleConsumer
(receive, ack, changeInvisibleDuration, redelivery after the invisible time, DLQ after max
attempts), PushConsumer with tag and SQL92 filters, and messages crossing protocols.

One node serves the module (client start-up is the slow part, so each test starts only the
clients it needs). Every wait is bounded.

With ``ROCKAFKA_PEER_GRPC`` and ``ROCKAFKA_PEER_NAMESRV`` set (``make compat-peer``,
tests/compat/peer_scenarios.py) the same scenarios run against Apache RocketMQ 5.5's proxy and
NameServer instead; the Kafka crossing is Rockafka's own and is left out there."""

from __future__ import annotations

import os
import threading
import time
import uuid
from types import SimpleNamespace

import pytest

rocketmq = pytest.importorskip("rocketmq")  # the official client: part of the test extras

from rocketmq import (  # noqa: E402
    ClientConfiguration, ConsumeResult, Credentials, FilterExpression, Message, MessageListener, Producer,
    PushConsumer, SimpleConsumer, TransactionChecker, TransactionResolution,
)

from tests.support.node import RunningNode  # noqa: E402

from ..gateway_native.helpers import wait_until  # noqa: E402


@pytest.fixture(scope="module")
def grpc_node(tmp_path_factory):
    if os.environ.get("ROCKAFKA_PEER_GRPC"):  # Apache RocketMQ 5.5, started by peer_scenarios
        yield SimpleNamespace(grpc_endpoint=os.environ["ROCKAFKA_PEER_GRPC"],
                              namesrv_addr=os.environ["ROCKAFKA_PEER_NAMESRV"], kafka_bootstrap=None)
        return
    node = RunningNode(tmp_path_factory.mktemp("grpc") / "data", settings={
        # transaction check-back within a second or two instead of a minute
        "transactionTimeOut": 1000, "transactionCheckInterval": 300,
        # PushConsumer receives hide a message 4 s and renew 4 s at a time when 3 s are left (so a
        # renewal up to 3 s late, on a busy machine, is still in time)
        "defaultInvisibleTimeMills": 4000, "renewSliceTimeMillis": 4000, "renewAheadTimeMillis": 3000,
    })
    node.start()
    try:
        yield node
    finally:
        node.stop()


@pytest.fixture(scope="module")
def config(grpc_node):
    return ClientConfiguration(grpc_node.grpc_endpoint, Credentials(), request_timeout=10)


@pytest.fixture(scope="module")
def producer(config):
    p = Producer(config)
    p.startup()
    yield p
    p.shutdown()


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def topic_name(prefix: str, message_type: str = "NORMAL") -> str:
    """A fresh topic. Rockafka creates it at the first route lookup; against Apache RocketMQ it
    is created first with its ``message.type``, as an operator there does."""
    topic = name(prefix)
    if os.environ.get("ROCKAFKA_PEER_NAMESRV"):
        from gateway_native.client import Admin

        with Admin(os.environ["ROCKAFKA_PEER_NAMESRV"]) as a:
            a.create_topic(topic, 4, attributes={"message.type": message_type})
    return topic


def message(topic: str, body: bytes, *, tag: str | None = None, keys: str | None = None, group: str | None = None,
            deliver_ms: int | None = None, props: dict[str, str] | None = None) -> Message:
    m = Message()
    m.topic = topic
    m.body = body
    if tag:
        m.tag = tag
    if keys:
        m.keys = keys
    if group:
        m.message_group = group
    if deliver_ms:
        m.delivery_timestamp = deliver_ms
    for k, v in (props or {}).items():
        m.add_property(k, v)
    return m


def receive_all(consumer: SimpleConsumer, count: int, invisible_s: int = 30, timeout: float = 30.0, ack: bool = True) -> list:
    got: list = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        for m in consumer.receive(32, invisible_s):
            got.append(m)
            if ack:
                consumer.ack(m)
    assert len(got) >= count, f"received {len(got)} of {count} messages: {[m.body for m in got]}"
    return got


def simple_consumer(config, group: str, topic: str, expression: FilterExpression | None = None,
                    await_s: int = 3) -> SimpleConsumer:
    c = SimpleConsumer(config, group, {topic: expression or FilterExpression()}, await_duration=await_s)
    c.startup()
    # the client's own signal that the server took its settings (its Telemetry stream): the
    # SimpleConsumer's startup does not wait for it, and Apache's proxy fails a receive that
    # comes before it (NullPointerException on the missing settings); Rockafka does not
    assert c._init_settings_event.wait(10), "the server never answered the consumer's settings"
    return c


def admin(grpc_node):
    from gateway_native.client import Admin

    return Admin(grpc_node.namesrv_addr)


def test_normal_send_receive_ack_with_tag_filter(config, producer):
    topic = topic_name("normal")
    receipts = [producer.send(message(topic, f"m{i}".encode(), tag="A" if i % 2 == 0 else "B", keys=f"k{i}",
                                      props={"region": "eu"})) for i in range(6)]
    assert len({r.message_id for r in receipts}) == 6
    c = simple_consumer(config, name("g-normal"), topic, FilterExpression("A"))
    try:
        got = receive_all(c, 3)
        assert sorted(m.body for m in got) == [b"m0", b"m2", b"m4"]
        assert {m.tag for m in got} == {"A"}
        assert all(m.properties.get("region") == "eu" and m.delivery_attempt == 1 for m in got)
        assert {m.message_id for m in got} == {r.message_id for i, r in enumerate(receipts) if i % 2 == 0}
        # acked: nothing more for this group, even after long enough for a redelivery
        assert c.receive(32, 1) == []
    finally:
        c.shutdown()


def test_fifo_messages_of_a_group_arrive_in_send_order(config, producer, grpc_node):
    topic, group = topic_name("fifo", "FIFO"), name("g-fifo")
    with admin(grpc_node) as a:
        a.create_topic(topic, 4)
        a.update_subscription_group(group, consumeMessageOrderly=True)
    for i in range(10):
        for order in ("o1", "o2"):
            producer.send(message(topic, f"{order}:{i}".encode(), group=order))
    c = simple_consumer(config, group, topic)
    try:
        got = receive_all(c, 20)
        for order in ("o1", "o2"):
            seq = [int(m.body.split(b":")[1]) for m in got if m.body.startswith(order.encode())]
            assert seq == list(range(10)), f"{order} out of order: {seq}"
            assert {m.message_group for m in got if m.body.startswith(order.encode())} == {order}
    finally:
        c.shutdown()


def test_delay_message_is_delivered_at_its_delivery_time(config, producer):
    topic = topic_name("delay", "DELAY")
    deliver_s = int(time.time()) + 3  # this client version sends delivery_timestamp in whole seconds
    producer.send(message(topic, b"later", deliver_ms=deliver_s))
    c = simple_consumer(config, name("g-delay"), topic)
    try:
        got = receive_all(c, 1, timeout=30)
        assert got[0].body == b"later"
        # never handed out before its delivery time
        assert time.time() >= deliver_s
    finally:
        c.shutdown()


class Checker(TransactionChecker):
    """Answers a check with the producer's own decision for that message: a broker may ask
    about any transaction whose end it has not recorded yet (Apache RocketMQ also asks about
    ones just committed or rolled back), and must follow the answer."""

    def __init__(self) -> None:
        self.checked: list[bytes] = []
        self.decisions: dict[bytes, TransactionResolution] = {}

    def decide(self, body: bytes, resolution: TransactionResolution) -> None:
        self.decisions[body] = resolution

    def check(self, message: Message) -> TransactionResolution:
        # what the producer decided, per message; a broker may also ask about transactions
        # already ended (RocketMQ's proxy does), and must then hear the same decision
        self.checked.append(message.body)
        return self.decisions.get(message.body, TransactionResolution.TRANSACTION_RESOLUTION_UNSPECIFIED)


def test_transactions_commit_rollback_and_check_back(config):
    topic = topic_name("txn", "TRANSACTION")
    checker = Checker()
    p = Producer(config, (topic,), checker)
    p.startup()
    c = simple_consumer(config, name("g-txn"), topic)
    try:
        checker.decide(b"committed", TransactionResolution.COMMIT)
        t1 = p.begin_transaction()
        p.send(message(topic, b"committed"), t1)
        t1.commit()
        checker.decide(b"rolled-back", TransactionResolution.ROLLBACK)
        t2 = p.begin_transaction()
        p.send(message(topic, b"rolled-back"), t2)
        t2.rollback()
        checker.decide(b"unknown-then-checked", TransactionResolution.COMMIT)
        t3 = p.begin_transaction()
        p.send(message(topic, b"unknown-then-checked"), t3)  # neither commit nor rollback: the broker asks
        got: list[bytes] = []
        deadline = time.monotonic() + 45
        while not {b"committed", b"unknown-then-checked"} <= set(got) and time.monotonic() < deadline:
            for m in c.receive(32, 30):
                got.append(m.body)
                c.ack(m)
        got += [m.body for m in c.receive(32, 1)]
        # Apache RocketMQ may deliver a committed message twice (it asks the checker about a
        # transaction its commit is still on the way for, and commits it again); the
        # rolled-back one never appears
        assert set(got) == {b"committed", b"unknown-then-checked"}
        assert b"unknown-then-checked" in checker.checked
    finally:
        c.shutdown()
        p.shutdown()


def test_unacked_message_is_redelivered_after_invisible_time(config, producer):
    topic = topic_name("redeliver")
    producer.send(message(topic, b"again"))
    c = simple_consumer(config, name("g-redeliver"), topic)
    try:
        first = receive_all(c, 1, invisible_s=2, ack=False)[0]
        assert first.delivery_attempt == 1
        second = receive_all(c, 1, invisible_s=30, ack=False, timeout=30)[0]
        assert (second.body, second.delivery_attempt, second.message_id) == (b"again", 2, first.message_id)
        c.ack(second)
        with pytest.raises(Exception):
            c.ack(first)  # the first delivery's handle died with its invisible time
    finally:
        c.shutdown()


def test_change_invisible_duration_keeps_the_message_hidden(config, producer):
    topic = topic_name("invisible")
    producer.send(message(topic, b"slow work"))
    c = simple_consumer(config, name("g-invisible"), topic)
    try:
        m = receive_all(c, 1, invisible_s=2, ack=False)[0]
        c.change_invisible_duration(m, 60)
        assert c.receive(32, 30) == []  # still hidden well past the original 2 s
        c.ack(m)  # the renewed handle acks
    finally:
        c.shutdown()


def test_dead_letter_after_max_attempts(config, producer, grpc_node):
    topic, group = topic_name("dlq"), name("g-dlq")
    with admin(grpc_node) as a:
        a.update_subscription_group(group, retryMaxTimes=1)  # 2 attempts
    producer.send(message(topic, b"poison", keys="poison-1"))
    c = simple_consumer(config, group, topic)
    try:
        got = [receive_all(c, 1, invisible_s=1, ack=False)[0], receive_all(c, 1, invisible_s=1, ack=False)[0]]
        assert [m.delivery_attempt for m in got] == [1, 2]
        first_id = got[0].message_id
        with admin(grpc_node) as a:
            def dead_lettered() -> list:
                # the consumer keeps receiving, as a live one does (Apache RocketMQ moves the
                # message to the DLQ at that next receive, Rockafka when its invisible time ends);
                # a third delivery never comes
                assert c.receive(32, 1) == []
                return a.dlq_messages(group)
            dead = wait_until(dead_lettered, timeout=30, what="the message in the DLQ")
        # Apache RocketMQ's proxy may move it twice (at-least-once); Rockafka moves it once
        assert {(d.body, d.msg_id) for d in dead} == {(b"poison", first_id)}
        assert len(dead) == 1 or os.environ.get("ROCKAFKA_PEER_GRPC")
        # the topic it was stored in when dead-lettered: the group's POP retry topic
        assert dead[0].properties.get("RETRY_TOPIC") == f"%RETRY%{group}_{topic}"
        # sent back (`rockafka admin dlq resend`): into the group's POP retry topic, where the
        # consumer receives it again under its topic, as a first delivery
        with admin(grpc_node) as a:
            a.resend_dlq_message(group, first_id)
        again = receive_all(c, 1, invisible_s=30, ack=False, timeout=30)[0]
        assert (again.body, again.topic, again.delivery_attempt) == (b"poison", topic, 1)
        c.ack(again)
    finally:
        c.shutdown()


class Collect(MessageListener):
    def __init__(self, fail_first: bool = False) -> None:
        self.lock = threading.Lock()
        self.seen: list = []
        self.fail_first = fail_first

    def consume(self, message) -> ConsumeResult:
        with self.lock:
            self.seen.append(message)
            if self.fail_first and message.delivery_attempt == 1:
                return ConsumeResult.FAILURE
        return ConsumeResult.SUCCESS

    def bodies(self) -> list[bytes]:
        with self.lock:
            return sorted(m.body for m in self.seen)


@pytest.mark.parametrize("kind, expected", [("tag", [b"a", b"c"]), ("sql", [b"b", b"c"])])
def test_push_consumer_filters(config, producer, kind, expected):
    from rocketmq.grpc_protocol import FilterType

    expression = (FilterExpression("A || C") if kind == "tag"
                  else FilterExpression("region = 'eu' AND amount > 10", FilterType.SQL))
    topic = topic_name(f"push-{kind}")
    producer.send(message(topic, b"a", tag="A", props={"region": "us", "amount": "5"}))
    producer.send(message(topic, b"b", tag="B", props={"region": "eu", "amount": "50"}))
    producer.send(message(topic, b"c", tag="C", props={"region": "eu", "amount": "20"}))
    listener = Collect()
    pc = PushConsumer(config, name(f"g-push-{kind}"), listener, {topic: expression})
    pc.startup()
    try:
        wait_until(lambda: listener.bodies() == expected, timeout=30, what=f"{expected}")
    finally:
        pc.shutdown()
    assert listener.bodies() == expected


def test_push_consumer_failure_is_retried(config, producer):
    topic = topic_name("push-retry")
    producer.send(message(topic, b"flaky"))
    listener = Collect(fail_first=True)
    pc = PushConsumer(config, name("g-push-retry"), listener, {topic: FilterExpression()})
    pc.startup()
    try:
        wait_until(lambda: [m.delivery_attempt for m in listener.seen] == [1, 2], timeout=45, what="a second delivery")
    finally:
        pc.shutdown()


class Slow(MessageListener):
    """Takes ``hold_s`` over the first message it is given (a listener slower than the
    invisible time), records every call."""

    def __init__(self, hold_s: float):
        self.hold_s = hold_s
        self.calls: list[float] = []
        self.done = threading.Event()
        self.lock = threading.Lock()

    def consume(self, message) -> ConsumeResult:
        with self.lock:
            self.calls.append(time.monotonic())
            first = len(self.calls) == 1
        if first:
            self.done.wait(self.hold_s)  # bounded: the test sets it when its window closes
        return ConsumeResult.SUCCESS


def test_push_consumer_receives_are_renewed_while_the_listener_works(config, producer):
    """auto_renew: the message stays hidden while a listener takes 2.5x the invisible time (4 s),
    so it is delivered once; once acknowledged it never comes back."""
    topic = topic_name("push-renew")
    producer.send(message(topic, b"slow"))
    listener = Slow(hold_s=10)
    pc = PushConsumer(config, name("g-push-renew"), listener, {topic: FilterExpression()})
    pc.startup()
    try:
        wait_until(lambda: listener.calls, timeout=30, what="the first delivery")
        # observation window: the listener holds the message 10 s; without renewal it would be
        # delivered again after 4 s, and again after the ack if the ack used a stale handle
        deadline = listener.calls[0] + 10 + 5.0
        while time.monotonic() < deadline and len(listener.calls) == 1:
            time.sleep(0.1)
        assert len(listener.calls) == 1, f"delivered {len(listener.calls)} times"
    finally:
        listener.done.set()
        pc.shutdown()


def test_messages_cross_protocols(config, producer, grpc_node):
    """gRPC -> Kafka and Kafka -> gRPC on the same topic."""
    from kafka import KafkaConsumer, KafkaProducer

    topic = topic_name("cross")
    producer.send(message(topic, b"from-grpc", tag="T", keys="key-1"))
    kp = KafkaProducer(bootstrap_servers=grpc_node.kafka_bootstrap)
    kp.send(topic, value=b"from-kafka", key=b"kkey", headers=[("rmq.tags", b"T")]).get(timeout=30)
    kp.close()
    c = simple_consumer(config, name("g-cross"), topic, FilterExpression("T"))
    try:
        got = receive_all(c, 2)
        assert sorted(m.body for m in got) == [b"from-grpc", b"from-kafka"]
        assert {m.tag for m in got} == {"T"}
    finally:
        c.shutdown()
    kc = KafkaConsumer(topic, bootstrap_servers=grpc_node.kafka_bootstrap, auto_offset_reset="earliest",
                       consumer_timeout_ms=10_000)
    try:
        values = sorted(r.value for r in kc)
    finally:
        kc.close()
    assert values == [b"from-grpc", b"from-kafka"]
