"""Offsets and messages survive a node restart: a consumer group continues where it stopped."""

from __future__ import annotations

import uuid

from gateway_native.client import Admin, LitePullConsumer, Message, Producer, PushConsumer
from tests.gateway_native.helpers import FAST, Collector, wait_until


def test_committed_offsets_survive_restart(make_node):
    node = make_node()
    topic, group = f"RS_{uuid.uuid4().hex[:6]}", f"rsg_{uuid.uuid4().hex[:6]}"
    with Admin(node.namesrv_addr) as admin:
        admin.create_topic(topic, 2)
    with Producer("rsp", node.namesrv_addr) as p:
        for i in range(20):
            p.send(Message(topic, f"first{i}".encode()))
    col = Collector()
    c = PushConsumer(group, node.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET", **FAST)
    c.subscribe(topic, "*")
    c.register_message_listener(col)
    c.start()
    try:
        wait_until(lambda: col.count() >= 20, what="first 20 messages")
    finally:
        c.shutdown()  # persists offsets

    node.restart()
    with Producer("rsp", node.namesrv_addr) as p:
        for i in range(10):
            p.send(Message(topic, f"second{i}".encode()))
    col2 = Collector()
    c2 = PushConsumer(group, node.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET", **FAST)
    c2.subscribe(topic, "*")
    c2.register_message_listener(col2)
    c2.start()
    try:
        wait_until(lambda: col2.count() >= 10, what="the 10 new messages")
    finally:
        c2.shutdown()
    assert sorted(col2.bodies()) == sorted(f"second{i}".encode() for i in range(10))

    # and the old messages are still readable from the start of the queues after the restart
    with LitePullConsumer(f"rs_lp_{uuid.uuid4().hex[:6]}", node.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                          auto_commit=False) as lp:
        lp.assign(lp.fetch_message_queues(topic))
        got: list = []
        wait_until(lambda: got.extend(lp.poll(300)) or len(got) >= 30, what="all 30 messages")
    assert sorted(m.body for m in got) == sorted([f"first{i}".encode() for i in range(20)] +
                                                 [f"second{i}".encode() for i in range(10)])
