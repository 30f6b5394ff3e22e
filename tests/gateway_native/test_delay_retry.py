"""Delayed delivery, retry and dead letters through the Python SDK against a real
``rockafka serve`` (delay levels shortened to seconds), each also across a broker restart."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from gateway_native.client import Admin, ConsumeStatus, LitePullConsumer, Message, MessageQueue, Producer, PushConsumer
from tests.gateway_native.helpers import FAST, Collector, wait_until

# level 2 = 2 s, every other level (the retry back-off starts at level 3) = 1 s
LEVELS = "1s 2s " + " ".join(["1s"] * 16)
SETTINGS = {"messageDelayLevel": LEVELS, "timerMaxDelaySec": 120}


def uniq(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


@pytest.fixture
def delay_node(make_node):
    return make_node(SETTINGS)


def push(node, topic, listener, **kw) -> PushConsumer:
    c = PushConsumer(kw.pop("group", uniq("cg")), node.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                     **{**FAST, **kw})
    c.subscribe(topic, "*")
    c.register_message_listener(listener)
    c.start()
    return c


def test_delay_level_and_timer_messages_arrive_when_due(delay_node):
    node = delay_node
    topic = uniq("D")
    with Admin(node.namesrv_addr) as admin, Producer(uniq("pg"), node.namesrv_addr, poll_name_server_interval=1000) as p:
        admin.create_topic(topic, 2)
        sent_at = int(time.time() * 1000)
        p.send(Message(topic, b"level2", tags="A", keys=["dk"], delay_level=2))
        p.send(Message(topic, b"timer", deliver_time_ms=sent_at + 3000))
        p.send(Message(topic, b"now"))
        assert sum(admin.max_offset(MessageQueue(topic, "broker-a", q)) for q in range(2)) == 1  # only "now"
        col = Collector()
        c = push(node, topic, col)
        try:
            wait_until(lambda: col.count() >= 3, timeout=30, what="delayed messages")
        finally:
            c.shutdown()
    by_body = {m.body: m for m in col.messages}
    assert set(by_body) == {b"level2", b"timer", b"now"}
    assert by_body[b"level2"].tags == "A" and by_body[b"level2"].keys == ["dk"]
    assert by_body[b"level2"].store_timestamp >= sent_at + 2000 - 100
    assert by_body[b"timer"].store_timestamp >= sent_at + 3000 - 1000  # 1 s wheel precision


def test_delayed_messages_survive_a_broker_restart(delay_node):
    node = delay_node
    topic = uniq("DR")
    with Admin(node.namesrv_addr) as admin, Producer(uniq("pg"), node.namesrv_addr, poll_name_server_interval=1000) as p:
        admin.create_topic(topic, 1)
        for i in range(10):
            p.send(Message(topic, b"lvl%d" % i, delay_level=2))
            p.send(Message(topic, b"tmr%d" % i, deliver_time_ms=int(time.time() * 1000) + 4000))
    node.restart()  # both kinds are pending while the broker is down
    col = Collector()
    c = push(node, topic, col)
    try:
        wait_until(lambda: col.count() >= 20, timeout=40, what="delayed messages after restart")
    finally:
        c.shutdown()
    assert sorted(col.bodies()) == sorted([b"lvl%d" % i for i in range(10)] + [b"tmr%d" % i for i in range(10)])


class FailTimes:
    """Fails each message ``n`` times (RECONSUME_LATER), then succeeds; records every attempt."""

    def __init__(self, n: int, raise_instead: bool = False):
        self.n = n
        self.raise_instead = raise_instead
        self.lock = threading.Lock()
        self.attempts: list = []

    def __call__(self, msgs, ctx):
        with self.lock:
            self.attempts.extend(msgs)
        if all(m.reconsume_times >= self.n for m in msgs):
            return ConsumeStatus.CONSUME_SUCCESS
        if self.raise_instead:
            raise RuntimeError("listener failure")
        return ConsumeStatus.RECONSUME_LATER

    def count(self) -> int:
        with self.lock:
            return len(self.attempts)


def test_reconsume_later_is_redelivered_through_the_retry_topic(delay_node):
    node = delay_node
    topic, group = uniq("R"), uniq("rg")
    with Admin(node.namesrv_addr) as admin, Producer(uniq("pg"), node.namesrv_addr, poll_name_server_interval=1000) as p:
        admin.create_topic(topic, 2)
        sent = p.send(Message(topic, b"retry-me", tags="T1", keys=["rk"]))
        listener = FailTimes(2)
        c = push(node, topic, listener, group=group)
        try:
            wait_until(lambda: listener.count() >= 3, timeout=40, what="two redeliveries")
        finally:
            c.shutdown()
        assert "%RETRY%" + group in admin.topic_list()
    attempts = listener.attempts[:3]
    assert [m.reconsume_times for m in attempts] == [0, 1, 2]
    assert all(m.topic == topic and m.body == b"retry-me" and m.tags == "T1" for m in attempts)
    assert all(m.msg_id == sent.msg_id for m in attempts)  # the client-visible id is kept


def test_exhausted_retries_go_to_the_dlq_with_origin_kept(delay_node):
    node = delay_node
    topic, group = uniq("Q"), uniq("dg")
    with Admin(node.namesrv_addr) as admin, Producer(uniq("pg"), node.namesrv_addr, poll_name_server_interval=1000) as p:
        admin.create_topic(topic, 1)
        sent = p.send(Message(topic, b"poison", keys=["pk"]))
        listener = FailTimes(99, raise_instead=True)
        c = push(node, topic, listener, group=group, max_reconsume_times=2)
        dlq = "%DLQ%" + group
        dlq_mq = MessageQueue(dlq, "broker-a", 0)
        try:
            wait_until(lambda: dlq in admin.topic_list() and admin.max_offset(dlq_mq) >= 1, timeout=40,
                       what="the message in the DLQ")
        finally:
            c.shutdown()
        assert listener.count() == 3  # first delivery + 2 retries, then no more
        with LitePullConsumer(uniq("dlqreader"), node.namesrv_addr, **FAST) as reader:
            reader.assign([dlq_mq])
            reader.seek(dlq_mq, 0)
            got = wait_until(lambda: reader.poll(1000), timeout=20, what="DLQ message")
    m = got[0]
    assert m.body == b"poison" and m.keys == ["pk"]
    assert m.properties["RETRY_TOPIC"] == topic
    assert m.properties["ORIGIN_MESSAGE_ID"] == sent.msg_id
    assert m.reconsume_times == 3


def test_retry_continues_across_a_broker_restart(delay_node):
    node = delay_node
    topic, group = uniq("RR"), uniq("rrg")
    with Admin(node.namesrv_addr) as admin, Producer(uniq("pg"), node.namesrv_addr, poll_name_server_interval=1000) as p:
        admin.create_topic(topic, 1)
        p.send(Message(topic, b"survivor"))
    listener = FailTimes(1)
    c = push(node, topic, listener, group=group)
    try:
        wait_until(lambda: listener.count() >= 1, timeout=30, what="first attempt")
        c.shutdown()
        node.restart()  # the sent-back copy is pending in the schedule topic while the broker is down
        listener2 = FailTimes(1)
        c = push(node, topic, listener2, group=group)
        wait_until(lambda: any(m.reconsume_times == 1 for m in listener2.attempts), timeout=40,
                   what="the retried message after restart")
    finally:
        c.shutdown()
    retried = [m for m in listener2.attempts if m.reconsume_times == 1]
    assert retried[0].body == b"survivor" and retried[0].topic == topic


def test_a_retry_send_past_the_limit_goes_to_the_dlq(delay_node):
    """A client whose send-back failed sends the message to %RETRY%<group> itself (as the Java
    client does); past maxReconsumeTimes the broker stores it in %DLQ%<group> instead."""
    from gateway_native.remoting.codes import RequestCode as RC, ResponseCode as R

    node = delay_node
    group = uniq("rs")
    with Admin(node.namesrv_addr) as admin:
        rt = admin.runtime

        def send(reconsume: int, body: bytes):
            fields = {"producerGroup": "pg", "topic": "%RETRY%" + group, "defaultTopic": "TBW102",
                      "defaultTopicQueueNums": 1, "queueId": 0, "sysFlag": 0, "bornTimestamp": 0, "flag": 0,
                      "properties": "RETRY_TOPIC\x01orig\x02DELAY\x013\x02", "reconsumeTimes": reconsume,
                      "maxReconsumeTimes": 2}
            return rt.call(rt.invoke(node.broker_addr, rt.request(RC.SEND_MESSAGE, fields, body)))

        assert send(3, b"too-often").code == R.SUCCESS
        assert send(1, b"once-more").code == R.SUCCESS
        dead = wait_until(lambda: admin.dlq_messages(group), what="the dead letter")
        assert [m.body for m in dead] == [b"too-often"]
        assert dead[0].properties["RETRY_TOPIC"] == "orig" and "DELAY" not in dead[0].properties


def test_delayed_messages_survive_a_broker_crash(delay_node):
    """SIGKILL while delay-level and timer messages are pending, some already delivered: after
    the restart every message arrives (at least once; the crash may repeat a recent delivery)."""
    node = delay_node
    topic = uniq("DC")
    with Admin(node.namesrv_addr) as admin, Producer(uniq("pg"), node.namesrv_addr, poll_name_server_interval=1000) as p:
        admin.create_topic(topic, 1)
        mq = MessageQueue(topic, "broker-a", 0)
        for i in range(5):
            p.send(Message(topic, b"early%d" % i, delay_level=1))
        wait_until(lambda: admin.max_offset(mq) >= 5, timeout=20, what="the first delayed messages delivered")
        for i in range(5):
            p.send(Message(topic, b"lvl%d" % i, delay_level=2))
            p.send(Message(topic, b"tmr%d" % i, deliver_time_ms=int(time.time() * 1000) + 4000))
    node.kill()
    node.start()
    col = Collector()
    c = push(node, topic, col)
    expected = {b"early%d" % i for i in range(5)} | {b"lvl%d" % i for i in range(5)} | {b"tmr%d" % i for i in range(5)}
    try:
        wait_until(lambda: expected <= set(col.bodies()), timeout=40, what="every delayed message after the crash")
    finally:
        c.shutdown()
    assert set(col.bodies()) == expected


def test_delay_offsets_are_served_to_admin_tools(delay_node):
    """GET_ALL_DELAY_OFFSET answers delayOffset.json: how far each delay level has delivered."""
    import json

    from gateway_native.remoting.codes import RequestCode as RC, ResponseCode as R

    node = delay_node
    topic = uniq("DO")
    with Admin(node.namesrv_addr) as admin, Producer(uniq("pg"), node.namesrv_addr, poll_name_server_interval=1000) as p:
        admin.create_topic(topic, 1)
        for i in range(3):
            p.send(Message(topic, b"x%d" % i, delay_level=1))
        rt = admin.runtime

        def level1() -> int:
            resp = rt.call(rt.invoke(node.broker_addr, rt.request(RC.GET_ALL_DELAY_OFFSET)))
            assert resp.code == R.SUCCESS
            return json.loads(resp.body)["offsetTable"].get("1", 0)
        assert wait_until(lambda: level1() >= 3, what="level 1 delivered") and level1() == 3
