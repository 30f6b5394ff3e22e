"""Kafka clients and RocketMQ features: delayed records (headers ``rmq.delay.level`` /
``rmq.deliver.ms``) become visible to Kafka consumers when due, across a broker restart too;
``rmq.tags`` / ``rmq.keys`` let native consumers filter Kafka-produced records by tag."""

from __future__ import annotations

import time
import uuid

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")

from gateway_native.client import Admin, ConsumeStatus, PushConsumer  # noqa: E402
from tests.gateway_native.helpers import FAST, Collector, consume_until, wait_until  # noqa: E402

LEVELS = "1s 2s " + " ".join(["1s"] * 16)


@pytest.fixture
def delay_node(make_node):
    return make_node({"messageDelayLevel": LEVELS, "timerMaxDelaySec": 120})


def _topic(node, partitions: int = 1) -> str:
    topic = f"KD_{uuid.uuid4().hex[:8]}"
    with Admin(node.namesrv_addr) as admin:
        admin.create_topic(topic, partitions)
    return topic


def _produce(node, topic, records, compression="none"):
    p = confluent_kafka.Producer({"bootstrap.servers": node.kafka_bootstrap, "linger.ms": 20,
                                  "compression.type": compression})
    reports = []
    for value, key, headers in records:
        p.produce(topic, value=value, key=key, partition=0, headers=headers,
                  on_delivery=lambda err, msg: reports.append((err, msg.offset())))
    assert p.flush(30) == 0
    assert all(err is None for err, _ in reports), reports
    return reports


def _high_watermark(node, topic) -> int:
    c = confluent_kafka.Consumer({"bootstrap.servers": node.kafka_bootstrap, "group.id": f"hw_{uuid.uuid4().hex[:6]}"})
    try:
        return c.get_watermark_offsets(confluent_kafka.TopicPartition(topic, 0), timeout=10)[1]
    finally:
        c.close()


def _consume_all(node, topic, count, timeout=30.0, isolation="read_uncommitted"):
    c = confluent_kafka.Consumer({"bootstrap.servers": node.kafka_bootstrap, "group.id": f"kd_{uuid.uuid4().hex[:6]}",
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                  "isolation.level": isolation})
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < count and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m)
    finally:
        c.close()
    return got


@pytest.mark.parametrize("compression", ["none", "lz4"])
def test_delayed_kafka_records_become_visible_when_due(delay_node, compression):
    node = delay_node
    topic = _topic(node)
    due = int(time.time() * 1000) + 3000
    reports = _produce(node, topic, [
        (b"now-1", b"k1", [("h", b"1")]),
        (b"level-2", b"k2", [("rmq.delay.level", b"2"), ("h", b"2"), ("rmq.tags", b"TagD")]),
        (b"at-time", b"k3", [("rmq.deliver.ms", str(due).encode()), ("h", b"3")]),
        (b"now-2", b"k4", [("h", b"4")]),
    ], compression)
    # the batch keeps its four offsets (the delayed records' hold placeholders that consumers
    # skip), so the delivery reports of the undelayed records are where they are
    assert [offset for _, offset in reports] == [0, 1, 2, 3]
    assert _high_watermark(node, topic) == 4
    early = _consume_all(node, topic, 2, timeout=10)
    assert [(m.offset(), m.value()) for m in early] == [(0, b"now-1"), (3, b"now-2")]
    got = _consume_all(node, topic, 4)
    by_value = {m.value(): m for m in got}
    assert set(by_value) == {b"now-1", b"now-2", b"level-2", b"at-time"}
    assert by_value[b"now-1"].offset() == 0 and by_value[b"now-2"].offset() == 3
    lvl = by_value[b"level-2"]
    headers = dict(lvl.headers())
    assert lvl.key() == b"k2" and headers["h"] == b"2" and headers["rmq.tags"] == b"TagD"
    assert "rmq.delay.level" not in headers  # acted on, not passed on
    assert lvl.offset() >= 4
    at = by_value[b"at-time"]
    assert at.key() == b"k3" and dict(at.headers())["h"] == b"3" and "rmq.deliver.ms" not in dict(at.headers())


@pytest.mark.parametrize("client", ["kafka-python", "aiokafka", "confluent-kafka-read-committed", "native"])
def test_every_client_skips_the_placeholders_of_delayed_records(delay_node, client):
    """Between the undelayed records of a split batch stand placeholders (control batches);
    every kind of consumer reads past them as Kafka consumers read past transaction markers,
    and later finds the delayed record at its own offset."""
    from tests.gateway_kafka.kafka_helpers import consume

    node = delay_node
    topic = _topic(node)
    _produce(node, topic, [(b"a", None, []), (b"later", None, [("rmq.delay.level", b"1")]), (b"b", None, [])])
    if client == "native":
        col = consume_until(node.namesrv_addr, f"ph_{uuid.uuid4().hex[:6]}", topic, 3,
                            what="both records and the delayed one")
        got = sorted((m.queue_offset, m.body) for m in col.messages)
    elif client == "confluent-kafka-read-committed":
        got = [(m.offset(), m.value()) for m in _consume_all(node, topic, 3, isolation="read_committed")]
    else:
        got = [(off, value) for _, off, _, value, _ in consume(client, node.kafka_bootstrap, topic, 3)]
    assert sorted(got) == [(0, b"a"), (2, b"b"), (3, b"later")]


def test_delayed_kafka_records_survive_a_restart(delay_node):
    node = delay_node
    topic = _topic(node)
    due = int(time.time() * 1000) + 4000
    _produce(node, topic, [(b"d%d" % i, None, [("rmq.delay.level", b"2")]) for i in range(5)]
             + [(b"t%d" % i, None, [("rmq.deliver.ms", str(due).encode())]) for i in range(5)])
    assert _high_watermark(node, topic) == 10  # ten placeholders, nothing readable yet
    node.restart()
    got = _consume_all(node, topic, 10, timeout=40)
    assert sorted(m.value() for m in got) == sorted([b"d%d" % i for i in range(5)] + [b"t%d" % i for i in range(5)])
    assert sorted(m.offset() for m in got) == list(range(10, 20))  # each delivered once


def test_bad_delay_header_leaves_the_record_undelayed(delay_node):
    node = delay_node
    topic = _topic(node)
    _produce(node, topic, [(b"x", None, [("rmq.delay.level", b"soon")])])
    got = _consume_all(node, topic, 1)
    assert got[0].value() == b"x"


def test_native_consumers_filter_kafka_records_by_tag(delay_node):
    node = delay_node
    topic = _topic(node)
    _produce(node, topic, [(b"a%d" % i, f"key{i}".encode(), [("rmq.tags", b"TagA" if i % 2 else b"TagB"),
                                                              ("rmq.keys", f"extra{i}".encode())])
                           for i in range(10)])
    col = Collector(ConsumeStatus.CONSUME_SUCCESS)
    c = PushConsumer(f"tg_{uuid.uuid4().hex[:6]}", node.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                     **FAST)
    c.subscribe(topic, "TagA")
    c.register_message_listener(col)
    c.start()
    try:
        wait_until(lambda: col.count() >= 5, what="TagA records")
    finally:
        c.shutdown()
    assert sorted(col.bodies()) == [b"a1", b"a3", b"a5", b"a7", b"a9"]
    assert all(m.tags == "TagA" for m in col.messages)
    assert all(m.keys == [f"key{m.body[1:].decode()}", f"extra{m.body[1:].decode()}"] for m in col.messages)


def test_a_native_consumer_retries_one_record_of_a_kafka_batch(delay_node):
    """A record of a Kafka batch that a native listener fails is redelivered alone (the broker
    narrows the batch unit to the record the consumer saw), with reconsumeTimes 1."""
    import threading

    node = delay_node
    topic = _topic(node)
    _produce(node, topic, [(b"r%d" % i, b"key%d" % i, [("n", str(i).encode())]) for i in range(5)])
    lock = threading.Lock()
    seen: list = []

    def listener(msgs, ctx):
        with lock:
            seen.extend((m.body, m.reconsume_times) for m in msgs)
        failing = any(m.body == b"r2" and m.reconsume_times == 0 for m in msgs)
        return ConsumeStatus.RECONSUME_LATER if failing else ConsumeStatus.CONSUME_SUCCESS

    c = PushConsumer(f"kr_{uuid.uuid4().hex[:6]}", node.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                     **FAST)
    c.subscribe(topic, "*")
    c.register_message_listener(listener)
    c.start()
    try:
        wait_until(lambda: (b"r2", 1) in seen, timeout=30, what="the failed record redelivered")
    finally:
        c.shutdown()
    with lock:
        retried = [b for b, n in seen if n > 0]
    assert retried == [b"r2"]
    assert sorted(b for b, n in seen if n == 0) == [b"r%d" % i for i in range(5)]
