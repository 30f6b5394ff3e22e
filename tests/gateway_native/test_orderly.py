"""Orderly consumption through the SDK against a real node: per-queue order while consumers join
and leave, global order on a one-queue topic, SUSPEND_CURRENT_QUEUE_A_MOMENT retries ending in
the DLQ, broker-side queue locks, and order kept across a broker restart."""

from __future__ import annotations

import json
import threading
import uuid

from gateway_native.client import (
    Admin, ConsumeOrderlyStatus, LitePullConsumer, Message, Producer, PushConsumer,
)
from gateway_native.remoting.codes import RequestCode as RC, ResponseCode as R
from tests.gateway_native.helpers import FAST, wait_until

ORDERLY = dict(FAST, rebalance_interval=500)


def uniq(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


class OrderedLog:
    """Orderly listener shared by several consumers: (key, seq) in consumption order per key."""

    def __init__(self, suspend_bodies: set[bytes] = frozenset()):
        self.lock = threading.Lock()
        self.seen: dict[str, list[int]] = {}
        self.deliveries: dict[bytes, int] = {}
        self.suspend_bodies = suspend_bodies

    def __call__(self, msgs, ctx):
        with self.lock:
            for m in msgs:
                self.deliveries[m.body] = self.deliveries.get(m.body, 0) + 1
            if any(m.body in self.suspend_bodies for m in msgs):
                return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
            for m in msgs:
                key, seq = m.body.decode().split(":")
                self.seen.setdefault(key, []).append(int(seq))
        return ConsumeOrderlyStatus.SUCCESS

    def total(self) -> int:
        with self.lock:
            return sum(len(v) for v in self.seen.values())

    def snapshot(self) -> dict[str, list[int]]:
        with self.lock:
            return {k: list(v) for k, v in self.seen.items()}


def orderly_consumer(node, group: str, topic: str, listener, **kw) -> PushConsumer:
    c = PushConsumer(group, node.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                     consume_message_batch_max_size=kw.pop("batch", 1), **{**ORDERLY, **kw})
    c.subscribe(topic, "*")
    c.register_message_listener_orderly(listener, lock_renew_interval_ms=500)
    return c.start()


def send_round(p: Producer, topic: str, keys: list[str], start: int, end: int) -> None:
    for seq in range(start, end):
        for key in keys:
            p.send_orderly(Message(topic, f"{key}:{seq}".encode()), key)


def test_per_queue_order_while_consumers_join_and_leave(node):
    topic, group = uniq("OQ"), uniq("ocg")
    keys = [f"order{i}" for i in range(8)]
    with Admin(node.namesrv_addr) as admin:
        admin.create_topic(topic, 4)
    log = OrderedLog()
    with Producer(uniq("opg"), node.namesrv_addr) as p:
        send_round(p, topic, keys, 0, 30)
        a = orderly_consumer(node, group, topic, log)
        consumers = [a]
        try:
            wait_until(lambda: log.total() >= 60, what="A consumed some")
            b = orderly_consumer(node, group, topic, log)  # joins: queues move from A to B
            consumers.append(b)
            send_round(p, topic, keys, 30, 60)
            wait_until(lambda: len(b.assigned) > 0 and log.total() >= 8 * 40, what="B owns queues and consumes")
            c = orderly_consumer(node, group, topic, log)
            consumers.append(c)
            send_round(p, topic, keys, 60, 90)
            a.shutdown()  # leaves: its queues move to B and C
            consumers.remove(a)
            send_round(p, topic, keys, 90, 120)
            wait_until(lambda: log.total() >= 8 * 120, timeout=60, what="all 960 messages")
        finally:
            for cons in consumers:
                cons.shutdown()
    seen = log.snapshot()
    assert sorted(seen) == sorted(keys)
    for key in keys:
        assert seen[key] == list(range(120)), f"{key} consumed out of order or twice: {seen[key]}"


def test_global_order_on_a_one_queue_topic(node):
    topic, group = uniq("OG"), uniq("ogg")
    with Admin(node.namesrv_addr) as admin:
        admin.create_topic(topic, 1)
    log = OrderedLog()
    consumers = [orderly_consumer(node, group, topic, log, batch=4) for _ in range(2)]
    try:
        with Producer(uniq("opg"), node.namesrv_addr) as p:
            for seq in range(200):
                p.send(Message(topic, f"g:{seq}".encode()))
        wait_until(lambda: log.total() >= 200, what="200 messages")
        # exactly one of the two consumers holds the single queue
        assert sorted(sum(1 for q in c.assigned if q.topic == topic) for c in consumers) == [0, 1]
    finally:
        for c in consumers:
            c.shutdown()
    assert log.snapshot()["g"] == list(range(200))


def test_suspend_retries_then_dead_letter_queue_keeps_order(node):
    topic, group = uniq("OS"), uniq("osg")
    with Admin(node.namesrv_addr) as admin:
        admin.create_topic(topic, 1)
    log = OrderedLog(suspend_bodies={b"k:3"})
    with Producer(uniq("opg"), node.namesrv_addr) as p:
        for seq in range(8):
            p.send(Message(topic, f"k:{seq}".encode()))
    c = orderly_consumer(node, group, topic, log, max_reconsume_times=2, suspend_current_queue_time_millis=100)
    try:
        wait_until(lambda: log.total() >= 7, what="the 7 consumable messages")
    finally:
        c.shutdown()
    # the poison message was delivered 1 + 2 times, nothing after it overtook it, then it went to the DLQ
    assert log.deliveries[b"k:3"] == 3
    assert log.snapshot()["k"] == [0, 1, 2, 4, 5, 6, 7]
    with LitePullConsumer(uniq("dlqr"), node.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                          auto_commit=False) as lp:
        lp.assign(lp.fetch_message_queues(f"%DLQ%{group}"))
        got: list = []
        wait_until(lambda: got.extend(lp.poll(200)) or got, what="the DLQ message")
    assert [m.body for m in got] == [b"k:3"]


def test_broker_queue_lock_is_exclusive_and_released(node):
    """LOCK_BATCH_MQ / UNLOCK_BATCH_MQ on the wire: one holder per (group, queue)."""
    topic = uniq("OL")
    with Admin(node.namesrv_addr) as admin:
        admin.create_topic(topic, 2)
        rt = admin.runtime

        def call(code, client_id, queues):
            body = {"consumerGroup": "lockg", "clientId": client_id, "onlyThisBroker": True,
                    "mqSet": [{"topic": topic, "brokerName": "broker-a", "queueId": q} for q in queues]}
            resp = rt.call(rt.invoke(node.broker_addr, rt.request(code, None, json.dumps(body).encode())))
            assert resp.code == R.SUCCESS, resp.remark
            return sorted(q["queueId"] for q in json.loads(resp.body or b"{}").get("lockOKMQSet", []))

        assert call(RC.LOCK_BATCH_MQ, "c1", [0]) == [0]
        assert call(RC.LOCK_BATCH_MQ, "c2", [0, 1]) == [1]      # queue 0 is c1's
        assert call(RC.LOCK_BATCH_MQ, "c1", [0]) == [0]         # renewal
        call(RC.UNLOCK_BATCH_MQ, "c2", [0])                     # not c2's to release
        assert call(RC.LOCK_BATCH_MQ, "c2", [0]) == []
        call(RC.UNLOCK_BATCH_MQ, "c1", [0])
        assert call(RC.LOCK_BATCH_MQ, "c2", [0]) == [0]
        bad = rt.call(rt.invoke(node.broker_addr, rt.request(RC.LOCK_BATCH_MQ, None, b"{not json")))
        assert bad.code == R.SYSTEM_ERROR and "bad lock request body" in bad.remark


def test_order_kept_across_broker_restart(make_node):
    node = make_node({"rebalanceLockMaxLiveTime": 3000})
    topic, group = uniq("OR"), uniq("org")
    keys = [f"r{i}" for i in range(4)]
    with Admin(node.namesrv_addr) as admin:
        admin.create_topic(topic, 2)
    log = OrderedLog()
    with Producer(uniq("opg"), node.namesrv_addr) as p:
        send_round(p, topic, keys, 0, 25)
    c = orderly_consumer(node, group, topic, log)
    try:
        wait_until(lambda: log.total() >= 100, what="the first 100")
        node.restart()
        with Producer(uniq("opg"), node.namesrv_addr) as p:
            send_round(p, topic, keys, 25, 50)
        wait_until(lambda: log.total() >= 200, timeout=60, what="all 200 after the restart")
    finally:
        c.shutdown()
    seen = log.snapshot()
    for key in keys:
        assert seen[key] == list(range(50)), f"{key} out of order across the restart"


def test_broadcasting_orderly_consumers_each_get_everything_in_order(node, tmp_path):
    topic, group = uniq("OB"), uniq("obg")
    with Admin(node.namesrv_addr) as admin:
        admin.create_topic(topic, 2)
    logs = [OrderedLog(), OrderedLog()]
    consumers = [orderly_consumer(node, group, topic, log, message_model="BROADCASTING",
                                  offset_store_dir=str(tmp_path / f"c{i}")) for i, log in enumerate(logs)]
    try:
        with Producer(uniq("opg"), node.namesrv_addr) as p:
            send_round(p, topic, ["b0", "b1", "b2"], 0, 20)
        for log in logs:
            wait_until(lambda log=log: log.total() >= 60, what="every message on every member")
    finally:
        for c in consumers:
            c.shutdown()
    for log in logs:
        assert log.snapshot() == {k: list(range(20)) for k in ("b0", "b1", "b2")}


def test_crashed_member_queues_taken_over_after_lock_expiry(make_node, tmp_path):
    """A member killed without unlocking: its queues stay locked until the broker-side expiry
    (3 s here), then the survivor continues each queue in order from the committed offset (a
    few messages the dead member had consumed may come again, never out of order or lost)."""
    import os
    import signal
    import subprocess
    import sys

    node = make_node({"rebalanceLockMaxLiveTime": 3000})
    topic, group = uniq("OC"), uniq("ocg")
    keys = [f"c{i}" for i in range(4)]
    with Admin(node.namesrv_addr) as admin:
        admin.create_topic(topic, 4)
    out = tmp_path / "member.txt"
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    member = subprocess.Popen([sys.executable, "-m", "tests.gateway_native.orderly_member", node.namesrv_addr, group,
                               topic, str(out)], cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = OrderedLog()
    survivor = None
    try:
        with Producer(uniq("opg"), node.namesrv_addr) as p:
            send_round(p, topic, keys, 0, 30)
            wait_until(lambda: out.exists() and len(out.read_text().splitlines()) >= 40, what="the member consuming")
            member.send_signal(signal.SIGKILL)
            member.wait(10)
            survivor = orderly_consumer(node, group, topic, log)
            send_round(p, topic, keys, 30, 50)
            wait_until(lambda: all(log.snapshot().get(k, [None])[-1] == 49 for k in keys), timeout=60,
                       what="the survivor reaching the end of every order")
    finally:
        if member.poll() is None:
            member.kill()
        if survivor is not None:
            survivor.shutdown()
    # the survivor got the queues by expiry of the dead member's locks, not by an unlock
    assert "queue_lock_taken_over" in node.log_tail(2_000_000)
    dead: dict[str, list[int]] = {}
    for line in out.read_text().splitlines():
        key, seq = line.split(":")
        dead.setdefault(key, []).append(int(seq))
    seen = log.snapshot()
    for key in keys:
        mine = seen[key]
        before = dead.get(key, [])
        assert before == list(range(len(before))), f"{key}: the killed member consumed out of order"
        # the survivor resumes at or before where the dead member stopped, then strictly in order
        assert mine[0] <= len(before) and mine == list(range(mine[0], 50)), f"{key}: {mine[:10]}..."
