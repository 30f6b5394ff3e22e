"""Rebalancing: the allocation strategies, and members joining and leaving a live group with no
message lost."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from gateway_native.client import (
    Admin, AllocateAverage, AllocateAverageByCircle, AllocateByConfig, AllocateConsistentHash, AllocateMachineRoomNearby,
    ConsumeStatus, Message, MessageQueue, Producer, PushConsumer,
)
from tests.gateway_native.helpers import FAST, wait_until

QUEUES = [MessageQueue("T", b, q) for b in ("broker-a", "broker-b") for q in range(4)]
CIDS = ["10.0.0.1@a", "10.0.0.2@b", "10.0.0.3@c"]


@pytest.mark.parametrize("strategy", [AllocateAverage(), AllocateAverageByCircle(), AllocateConsistentHash(5)])
@pytest.mark.parametrize("n_clients", [1, 2, 3, 9])
def test_strategies_partition_every_queue_exactly_once(strategy, n_clients):
    cids = [f"10.0.0.{i}@x" for i in range(n_clients)]
    shares = [strategy("g", cid, list(reversed(QUEUES)), list(reversed(cids))) for cid in cids]
    flat = [mq for share in shares for mq in share]
    assert sorted(flat) == sorted(QUEUES)
    # deterministic whatever order the inputs come in
    assert shares == [strategy("g", cid, QUEUES, cids) for cid in cids]


def test_average_gives_contiguous_blocks_and_circle_interleaves():
    avg = [[mq.queue_id for mq in AllocateAverage()("g", c, QUEUES, CIDS)] for c in CIDS]
    assert avg == [[0, 1, 2], [3, 0, 1], [2, 3]]  # broker-a 0..3 then broker-b 0..3
    circle = [len(AllocateAverageByCircle()("g", c, QUEUES, CIDS)) for c in CIDS]
    assert circle == [3, 3, 2]
    assert AllocateAverage()("g", "not-a-member", QUEUES, CIDS) == []


def test_consistent_hash_moves_few_queues_when_a_member_leaves():
    many = [MessageQueue("T", "b", i) for i in range(64)]
    s = AllocateConsistentHash(10)
    before = {mq: c for c in CIDS for mq in s("g", c, many, CIDS)}
    after = {mq: c for c in CIDS[:2] for mq in s("g", c, many, CIDS[:2])}
    moved = [mq for mq in many if before[mq] != after[mq]]
    assert all(before[mq] == CIDS[2] for mq in moved)  # only the leaver's queues move


def test_machine_room_and_config_strategies():
    room_q = lambda mq: "room1" if mq.broker_name == "broker-a" else "room2"
    room_c = lambda cid: "room1" if cid.endswith("a") else "room2"
    s = AllocateMachineRoomNearby(AllocateAverage(), room_q, room_c)
    a = s("g", "10.0.0.1@a", QUEUES, ["10.0.0.1@a", "10.0.0.2@b"])
    assert {mq.broker_name for mq in a} == {"broker-a"} and len(a) == 4
    fixed = [QUEUES[0], QUEUES[5]]
    assert AllocateByConfig(fixed)("g", "anyone", QUEUES, CIDS) == fixed


def test_members_join_and_leave_without_losing_messages(node):
    topic, group = f"RB_{uuid.uuid4().hex[:8]}", f"rbg_{uuid.uuid4().hex[:8]}"
    with Admin(node.namesrv_addr) as admin:
        admin.create_topic(topic, 8)
    received: dict[str, set[bytes]] = {}
    lock = threading.Lock()

    def member(name: str) -> PushConsumer:
        def listener(msgs, ctx):
            with lock:
                received.setdefault(name, set()).update(m.body for m in msgs)
            return ConsumeStatus.CONSUME_SUCCESS
        c = PushConsumer(group, node.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                         instance_name=name, **FAST)
        c.subscribe(topic, "*")
        c.register_message_listener(listener)
        return c.start()

    sent: list[bytes] = []
    stop = threading.Event()

    def produce(p: Producer) -> None:
        i = 0
        while not stop.is_set() and i < 5000:
            body = f"r{i}".encode()
            p.send(Message(topic, body))
            sent.append(body)
            i += 1
            time.sleep(0.002)

    def all_received() -> set[bytes]:
        with lock:
            return set().union(*received.values()) if received else set()

    def owned(c: PushConsumer) -> int:
        return sum(1 for mq in list(c.assigned) if mq.topic == topic)

    consumers: list[PushConsumer] = []
    with Producer(f"rbp_{uuid.uuid4().hex[:6]}", node.namesrv_addr) as p:
        try:
            a = member("A")
            consumers.append(a)
            t = threading.Thread(target=produce, args=(p,))
            t.start()
            try:
                wait_until(lambda: len(all_received()) >= 50, what="A consuming")
                b = member("B")
                consumers.append(b)
                wait_until(lambda: owned(a) == 4 and owned(b) == 4, what="the queues split 4/4")
                wait_until(lambda: len(received.get("B", ())) >= 20, what="B consuming its queues")
                a.shutdown()
                wait_until(lambda: owned(b) == 8, what="B owning every queue after A left")
                n_before = len(sent)
                wait_until(lambda: len(sent) > n_before + 50, what="more production")
            finally:
                stop.set()
                t.join(30)
            wait_until(lambda: set(sent) <= all_received(), timeout=60, what="every sent message consumed")
        finally:
            for c in consumers:
                c.shutdown()
    assert received["A"] and received["B"]
