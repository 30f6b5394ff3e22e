"""Rewind: resetting a group's offsets to a point in time through the admin SDK against a real
``rockafka serve`` — online push consumers are told (RESET_CONSUMER_CLIENT_OFFSET) and consume
again, offline groups resume from the new offsets (also after a restart), and a Kafka group
with live members is refused as Kafka's tools require."""

from __future__ import annotations

import time
import uuid

import pytest

from gateway_native.client import Admin, Message, MQBrokerError, Producer, PushConsumer
from tests.gateway_native.helpers import FAST, Collector, wait_until


def uniq(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def _now_ms() -> int:
    return int(time.time() * 1000)


def _push(node, topic, group, col, **kw) -> PushConsumer:
    c = PushConsumer(group, node.namesrv_addr, consume_from_where=kw.pop("consume_from_where", "CONSUME_FROM_FIRST_OFFSET"),
                     **{**FAST, **kw})
    c.subscribe(topic, "*")
    c.register_message_listener(col)
    c.start()
    return c


def _send(node, topic, bodies):
    with Producer(uniq("pg"), node.namesrv_addr, poll_name_server_interval=1000) as p:
        for b in bodies:
            p.send(Message(topic, b))


def _after(ts_ms: int) -> None:
    """Wait (bounded) until the clock is past ``ts_ms`` so later store timestamps are larger."""
    wait_until(lambda: _now_ms() > ts_ms + 1, timeout=5, interval=0.005, what="the clock to move on")


def test_online_consumer_is_rewound_and_consumes_again(node):
    topic, group = uniq("RW"), uniq("rwg")
    with Admin(node.namesrv_addr) as admin:
        admin.create_topic(topic, 2)
        start = _now_ms()
        _after(start)
        _send(node, topic, [b"m%d" % i for i in range(10)])
        col = Collector()
        c = _push(node, topic, group, col)
        try:
            wait_until(lambda: col.count() >= 10, what="first pass")
            wait_until(lambda: sum(max(p.consumer_offset, 0) for p in admin.consumer_progress(group, topic)) == 10,
                       what="offsets committed")
            table = admin.reset_offset_by_timestamp(group, topic, start)
            assert sorted(table.values()) == [0, 0]
            wait_until(lambda: col.count() >= 20, what="second pass after the reset")
        finally:
            c.shutdown()
    assert sorted(col.bodies()[10:20]) == sorted(b"m%d" % i for i in range(10))


def test_offline_group_resumes_from_the_reset_point_after_restart(make_node):
    node = make_node()
    topic, group = uniq("RO"), uniq("rog")
    with Admin(node.namesrv_addr) as admin:
        admin.create_topic(topic, 1)
        _send(node, topic, [b"old%d" % i for i in range(5)])
        col = Collector()
        c = _push(node, topic, group, col)
        try:
            wait_until(lambda: col.count() >= 5, what="old messages")
        finally:
            c.shutdown()
        _after(_now_ms())
        mid = _now_ms()
        _after(mid)
        _send(node, topic, [b"new%d" % i for i in range(5)])
        table = admin.reset_offset_by_timestamp(group, topic, mid)
        assert list(table.values()) == [5]
    node.restart()  # the reset offsets are persisted
    col2 = Collector()
    c = _push(node, topic, group, col2, consume_from_where="CONSUME_FROM_LAST_OFFSET")
    try:
        wait_until(lambda: col2.count() >= 5, what="messages after the reset point")
    finally:
        c.shutdown()
    assert sorted(col2.bodies()) == sorted(b"new%d" % i for i in range(5))


def test_reset_of_a_live_kafka_group_is_refused_until_it_is_empty(node):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    topic, group = uniq("RK"), uniq("rkg")
    with Admin(node.namesrv_addr) as admin:
        admin.create_topic(topic, 1)
        _send(node, topic, [b"k%d" % i for i in range(4)])
        kc = confluent_kafka.Consumer({"bootstrap.servers": node.kafka_bootstrap, "group.id": group,
                                       "auto.offset.reset": "earliest", "enable.auto.commit": False})
        kc.subscribe([topic])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 4 and time.monotonic() < deadline:
            m = kc.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m)
        kc.commit(asynchronous=False)
        with pytest.raises(MQBrokerError, match="active members"):
            admin.reset_offset_by_timestamp(group, topic, 0)
        kc.close()  # leaves the group: now it is empty
        assert admin.reset_offset_by_timestamp(group, topic, 0) == {next(iter(admin.message_queues(topic))): 0}
    kc = confluent_kafka.Consumer({"bootstrap.servers": node.kafka_bootstrap, "group.id": group,
                                   "auto.offset.reset": "latest", "enable.auto.commit": False})
    kc.subscribe([topic])
    again = []
    deadline = time.monotonic() + 30
    try:
        while len(again) < 4 and time.monotonic() < deadline:
            m = kc.poll(0.5)
            if m is not None and m.error() is None:
                again.append(m.value())
    finally:
        kc.close()
    assert again == [b"k%d" % i for i in range(4)]  # read again from the reset offset, not "latest"


def test_reset_with_bad_input_is_a_clear_error(node):
    with Admin(node.namesrv_addr) as admin:
        with pytest.raises(Exception, match="No route info|not exist"):
            admin.reset_offset_by_timestamp("g", uniq("missing"), 0)
