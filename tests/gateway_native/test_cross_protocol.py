"""Cross-protocol: messages produced with confluent-kafka are consumed by the native SDK (record
key -> KEYS, headers -> properties) and native messages are fetched by confluent-kafka
(properties -> headers, KEYS -> key)."""

from __future__ import annotations

import uuid

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")

from gateway_native.client import Admin, LitePullConsumer, Message, MessageSelector, Producer, PushConsumer  # noqa: E402
from tests.gateway_native.helpers import FAST, Collector, wait_until  # noqa: E402


def test_kafka_produce_native_consume(node):
    topic = f"XK_{uuid.uuid4().hex[:6]}"
    with Admin(node.namesrv_addr) as admin:
        admin.create_topic(topic, 1)
    kp = confluent_kafka.Producer({"bootstrap.servers": node.kafka_bootstrap, "linger.ms": 5})
    for i in range(10):
        kp.produce(topic, value=f"k{i}".encode(), key=f"key{i}".encode(), partition=0,
                   headers=[("color", b"red" if i % 2 else b"blue"), ("n", str(i).encode())])
    assert kp.flush(30) == 0
    with LitePullConsumer(f"xk_{uuid.uuid4().hex[:6]}", node.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                          auto_commit=False) as lp:
        lp.assign(lp.fetch_message_queues(topic))
        got: list = []
        wait_until(lambda: got.extend(lp.poll(300)) or len(got) >= 10, what="10 Kafka-produced messages")
    got.sort(key=lambda m: m.queue_offset)
    assert [m.body for m in got] == [f"k{i}".encode() for i in range(10)]
    assert [m.queue_offset for m in got] == list(range(10))
    assert [m.keys[0] for m in got] == [f"key{i}" for i in range(10)]
    assert [m.properties["color"] for m in got] == ["blue", "red"] * 5
    # SQL92 on Kafka headers, evaluated per record at the broker
    col = Collector()
    c = PushConsumer(f"xs_{uuid.uuid4().hex[:6]}", node.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET", **FAST)
    c.subscribe(topic, MessageSelector.by_sql("color = 'red' AND n > 4"))
    c.register_message_listener(col)
    c.start()
    try:
        wait_until(lambda: col.count() >= 3, what="SQL92-matching Kafka records")
    finally:
        c.shutdown()
    assert sorted(col.bodies()) == [b"k5", b"k7", b"k9"]


def test_native_produce_kafka_consume(node):
    topic = f"XN_{uuid.uuid4().hex[:6]}"
    with Admin(node.namesrv_addr) as admin:
        admin.create_topic(topic, 1)
    with Producer("xnp", node.namesrv_addr) as p:
        for i in range(5):
            m = Message(topic, f"n{i}".encode(), tags="TagA", keys=[f"nk{i}"])
            m.put_user_property("origin", "native")
            p.send(m)
    kc = confluent_kafka.Consumer({"bootstrap.servers": node.kafka_bootstrap, "group.id": f"xk_{uuid.uuid4().hex[:6]}",
                                   "auto.offset.reset": "earliest", "enable.auto.commit": False})
    kc.subscribe([topic])
    got: list = []
    try:
        def poll_some():
            msg = kc.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg)
            return len(got) >= 5
        wait_until(poll_some, timeout=60, what="5 native messages via Kafka")
    finally:
        kc.close()
    assert [m.value() for m in got] == [f"n{i}".encode() for i in range(5)]
    assert [m.key() for m in got] == [f"nk{i}".encode() for i in range(5)]
    assert [m.offset() for m in got] == list(range(5))
    headers = dict(got[0].headers() or [])
    assert headers.get("origin") == b"native" and headers.get("rmq.tags") == b"TagA"


def test_topic_created_by_a_kafka_client_is_routed_natively(node):
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"XC_{uuid.uuid4().hex[:6]}"
    ka = AdminClient({"bootstrap.servers": node.kafka_bootstrap})
    ka.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])[topic].result(30)
    with Admin(node.namesrv_addr) as admin:
        route = wait_until(lambda: admin.topic_route(topic), what="the NameServer to route the Kafka-created topic")
    assert route["queueDatas"][0]["readQueueNums"] == 3


def test_kafka_records_are_found_by_key_and_id_natively(node):
    topic = f"XQ_{uuid.uuid4().hex[:6]}"
    with Admin(node.namesrv_addr) as admin:
        admin.create_topic(topic, 1)
        kp = confluent_kafka.Producer({"bootstrap.servers": node.kafka_bootstrap, "linger.ms": 50})
        for i in range(5):
            kp.produce(topic, value=f"q{i}".encode(), key=f"qk{i}".encode(), partition=0)
        assert kp.flush(30) == 0
        found = wait_until(lambda: admin.query_message_by_key(topic, "qk3"), what="the Kafka record by key")
        assert [m.body for m in found] == [b"q3"]
        # the offset id a native consumer sees for a record leads back to its batch's first record
        with LitePullConsumer(f"xq_{uuid.uuid4().hex[:6]}", node.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                              auto_commit=False) as lp:
            lp.assign(lp.fetch_message_queues(topic))
            got: list = []
            wait_until(lambda: got.extend(lp.poll(300)) or len(got) >= 5, what="5 records")
        first = admin.view_message(got[0].offset_msg_id)
        assert first.body == b"q0"


def test_native_producer_right_after_a_kafka_auto_create_uses_the_topics_queues(node):
    """A topic Kafka auto-created (1 partition) is routed at once: a native producer sending
    the moment after never picks a queue from TBW102's default count (the broker refuses those)."""
    topic = f"kc_{uuid.uuid4().hex[:8]}"
    p = confluent_kafka.Producer({"bootstrap.servers": node.kafka_bootstrap})
    p.produce(topic, b"from kafka")
    assert p.flush(30) == 0
    with Producer(f"pg_{topic}", node.namesrv_addr) as np:
        for i in range(8):
            r = np.send_orderly(Message(topic, b"native %d" % i, tags="T"), sharding_key=f"key-{i}")
            assert r.message_queue.queue_id == 0
