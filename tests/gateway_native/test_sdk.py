"""The Python SDK end to end against a real ``rockafka serve``: producer modes, push consumer
filtering and models, lite pull consumer, admin helpers."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from gateway_native.client import (
    Admin, ConsumeStatus, LitePullConsumer, Message, MessageQueue, MessageSelector, MQClientError, Producer,
    PushConsumer, SendStatus,
)
from tests.gateway_native.helpers import FAST, Collector, wait_until


def uniq(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def admin(node):
    with Admin(node.namesrv_addr) as a:
        yield a


@pytest.fixture(scope="module")
def producer(node):
    with Producer(uniq("pg"), node.namesrv_addr, poll_name_server_interval=1000) as p:
        yield p


def topic_with(admin, queues: int = 4) -> str:
    t = uniq("T")
    admin.create_topic(t, queues)
    return t


def push(node, topic, expr="*", **kw) -> tuple[PushConsumer, Collector]:
    col = Collector(kw.pop("status", ConsumeStatus.CONSUME_SUCCESS))
    c = PushConsumer(kw.pop("group", uniq("cg")), node.namesrv_addr,
                     consume_from_where=kw.pop("consume_from_where", "CONSUME_FROM_FIRST_OFFSET"), **{**FAST, **kw})
    c.subscribe(topic, expr)
    c.register_message_listener(col)
    c.start()
    return c, col


def sentinels(producer, topic: str, queues: int, tags: str | None = None, props: dict | None = None) -> set[bytes]:
    """One matching message at the end of every queue: once all arrive (one consume thread, so in
    queue order), everything sent before them has been delivered or filtered out."""
    out = set()
    for q in range(queues):
        m = Message(topic, f"sentinel-{q}".encode(), tags=tags, properties=dict(props or {}))
        producer.send(m, queue=MessageQueue(topic, "broker-a", q))
        out.add(m.body)
    return out


def settle(col: Collector, marks: set[bytes]) -> list[bytes]:
    wait_until(lambda: marks <= set(col.bodies()), what="the sentinel of every queue")
    return sorted(b for b in col.bodies() if b not in marks)


def test_sync_send_result_and_tag_filtering(node, admin, producer):
    topic = topic_with(admin)
    results = [producer.send(Message(topic, f"m{i}".encode(), tags="ABC"[i % 3], keys=[f"k{i}"])) for i in range(30)]
    assert all(r.status == SendStatus.SEND_OK for r in results)
    assert len({r.msg_id for r in results}) == 30 and all(len(r.offset_msg_id) == 32 for r in results)
    assert {r.message_queue.queue_id for r in results} == {0, 1, 2, 3}
    c, col = push(node, topic, "A || C", consume_thread_max=1)
    try:
        got = settle(col, sentinels(producer, topic, 4, tags="A"))
    finally:
        c.shutdown()
    assert got == sorted(f"m{i}".encode() for i in range(30) if i % 3 != 1)
    assert {m.tags for m in col.messages} == {"A", "C"}


def test_sql92_filtering(node, admin, producer):
    topic = topic_with(admin)
    for i in range(10):
        m = Message(topic, f"s{i}".encode(), tags="T")
        m.put_user_property("a", str(i))
        if i % 2:
            m.put_user_property("region", "hz")
        producer.send(m)
    c, col = push(node, topic, MessageSelector.by_sql("a BETWEEN 3 AND 7 AND region = 'hz'"), consume_thread_max=1)
    try:
        got = settle(col, sentinels(producer, topic, 4, props={"a": "4", "region": "hz"}))
    finally:
        c.shutdown()
    assert got == [b"s3", b"s5", b"s7"]
    with pytest.raises(MQClientError):
        PushConsumer(uniq("cg"), node.namesrv_addr).subscribe(topic, MessageSelector.by_sql("a >"))


def test_async_oneway_batch_and_large_bodies(node, admin, producer):
    topic = topic_with(admin, 2)
    done = []
    futures = [producer.send_async(Message(topic, f"a{i}".encode()), callback=lambda r, e: done.append((r, e)))
               for i in range(50)]
    results = [f.result(30) for f in futures]
    assert all(r.status == SendStatus.SEND_OK for r in results)
    wait_until(lambda: len(done) == 50, what="async callbacks")
    assert all(e is None for _, e in done)
    for i in range(5):
        producer.send_oneway(Message(topic, f"o{i}".encode()))
    batch = producer.send_batch([Message(topic, f"b{i}".encode(), keys=[f"bk{i}"]) for i in range(10)])
    assert batch.status == SendStatus.SEND_OK and len(batch.msg_id.split(",")) == 10
    big = bytes(range(256)) * 64  # 16 KiB: compressed on the wire
    producer.send(Message(topic, big))
    c, col = push(node, topic)
    try:
        wait_until(lambda: col.count() >= 66, what="all 66 messages")
    finally:
        c.shutdown()
    bodies = col.bodies()
    assert sorted(b for b in bodies if b[:1] in (b"a", b"o", b"b") and len(b) < 10) == sorted(
        [f"a{i}".encode() for i in range(50)] + [f"o{i}".encode() for i in range(5)] + [f"b{i}".encode() for i in range(10)])
    assert big in bodies
    batch_msgs = sorted((m for m in col.messages if m.body.startswith(b"b") and len(m.body) < 5), key=lambda m: m.queue_offset)
    assert len({m.queue_id for m in batch_msgs}) == 1
    offs = [m.queue_offset for m in batch_msgs]
    assert offs == list(range(offs[0], offs[0] + 10))


def test_ordered_send_keeps_per_key_order(node, admin, producer):
    topic = topic_with(admin, 4)
    keys = [f"order-{k}" for k in range(6)]
    placed: dict[str, set[int]] = {k: set() for k in keys}
    for i in range(60):
        k = keys[i % 6]
        r = producer.send_orderly(Message(topic, f"{k}:{i}".encode()), k)
        placed[k].add(r.message_queue.queue_id)
    assert all(len(q) == 1 for q in placed.values())
    with LitePullConsumer(uniq("lp"), node.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                          auto_commit=False) as lp:
        lp.assign(lp.fetch_message_queues(topic))
        got: list = []
        wait_until(lambda: got.extend(lp.poll(500)) or len(got) >= 60, what="60 ordered messages")
    for k in keys:
        seq = [int(m.body.decode().split(":")[1]) for m in sorted(got, key=lambda m: (m.queue_id, m.queue_offset))
               if m.body.decode().startswith(k + ":")]
        assert seq == sorted(seq) and len(seq) == 10


def test_broadcasting_delivers_everything_to_every_member(node, admin, producer, tmp_path):
    topic = topic_with(admin, 4)
    group = uniq("bc")
    members = [push(node, topic, group=group, message_model="BROADCASTING", offset_store_dir=str(tmp_path / f"m{i}"))
               for i in range(2)]
    try:
        for i in range(20):
            producer.send(Message(topic, f"b{i}".encode()))
        for _, col in members:
            wait_until(lambda col=col: col.count() >= 20, what="every broadcast message at each member")
    finally:
        for c, _ in members:
            c.shutdown()
    for _, col in members:
        assert sorted(col.bodies()) == sorted(f"b{i}".encode() for i in range(20))
    assert list(tmp_path.rglob("offsets.json")), "broadcast offsets are kept locally"


def test_reconsume_later_delivers_again(node, admin, producer):
    topic = topic_with(admin, 1)
    seen: list = []
    lock = threading.Lock()

    def flaky(msgs, ctx):
        with lock:
            seen.extend((m.body, m.reconsume_times) for m in msgs)
            first = sum(1 for b, _ in seen if b == msgs[0].body) == 1
        return ConsumeStatus.RECONSUME_LATER if first else ConsumeStatus.CONSUME_SUCCESS

    c = PushConsumer(uniq("rc"), node.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                     suspend_current_queue_time_millis=200, **FAST)
    c.subscribe(topic, "*")
    c.register_message_listener(flaky)
    c.start()
    try:
        producer.send(Message(topic, b"retry-me"))
        # redelivered through the retry topic after delay level 3 (10 s), or locally when the broker
        # cannot take it back
        wait_until(lambda: len(seen) >= 2, timeout=90, what="a second delivery")
    finally:
        c.shutdown()
    assert [b for b, _ in seen[:2]] == [b"retry-me", b"retry-me"]
    assert seen[1][1] >= 1


def test_lite_pull_assign_seek_and_commit(node, admin, producer):
    topic = topic_with(admin, 1)
    mq = MessageQueue(topic, "broker-a", 0)
    t_before = None
    for i in range(10):
        if i == 5:
            time.sleep(0.01)
            t_before = int(time.time() * 1000)
            time.sleep(0.01)
        producer.send(Message(topic, f"l{i}".encode()), queue=mq)
    group = uniq("lp")
    with LitePullConsumer(group, node.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET", auto_commit=False,
                          pull_batch_size=4) as lp:
        lp.assign([mq])
        got: list = []
        wait_until(lambda: got.extend(lp.poll(500)) or len(got) >= 10, what="10 polled messages")
        assert [m.body for m in got] == [f"l{i}".encode() for i in range(10)]
        lp.seek_to_begin(mq)
        again = wait_until(lambda: lp.poll(500), what="messages after seek")
        assert again[0].body == b"l0"
        assert lp.offset_for_timestamp(mq, t_before) == 5
        lp.seek_to_timestamp(mq, t_before)
        after_ts = wait_until(lambda: lp.poll(500), what="messages after seek by time")
        assert after_ts[0].body == b"l5"
        lp.seek(mq, 7)
        lp.commit_sync({mq: 7})
        assert lp.committed(mq) == 7
        with pytest.raises(MQClientError):
            lp.seek(mq, 1000)
    progress = admin.consumer_progress(group, topic)
    assert [(p.broker_offset, p.consumer_offset, p.lag) for p in progress] == [(10, 7, 3)]


def test_lite_pull_subscribe_and_auto_commit(node, admin, producer):
    topic = topic_with(admin, 2)
    for i in range(12):
        producer.send(Message(topic, f"s{i}".encode(), tags="X" if i % 2 else "Y"))
    group = uniq("lps")
    with LitePullConsumer(group, node.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET", **FAST) as lp:
        lp.subscribe(topic, "X")
        got: list = []
        wait_until(lambda: got.extend(lp.poll(300)) or len(got) >= 6, what="6 X messages")
        assert sorted(m.body for m in got) == sorted(f"s{i}".encode() for i in range(12) if i % 2)
        # every X went to one queue, every Y to the other: that queue's position moves past its
        # filtered-out messages when its (empty) pull answers, which may come after the 6th X
        mqs = wait_until(lambda: len(lp.assignment()) == 2 and lp.assignment(), what="both queues assigned")
        wait_until(lambda: lp.poll(50) == [] and sum(lp.position(mq) for mq in mqs) == 12,
                   what="positions past all 12 messages")
    # shutdown committed the consumed positions
    assert sum(p.lag for p in admin.consumer_progress(group, topic)) == 0


def test_admin_queries(node, admin, producer):
    topic = topic_with(admin, 2)
    r = producer.send(Message(topic, b"findme", keys=["order-42", "user-7"]))
    producer.send(Message(topic, b"other", keys=["order-43"]))
    by_key = wait_until(lambda: admin.query_message_by_key(topic, "order-42"), what="index lookup")
    assert [m.body for m in by_key] == [b"findme"]
    assert admin.view_message(r.offset_msg_id).body == b"findme"
    assert admin.view_message(r.msg_id, topic=topic).body == b"findme"
    assert topic in admin.topic_list()
    info = admin.cluster_info()
    assert "broker-a" in info["brokerAddrTable"] and info["clusterAddrTable"]["DefaultCluster"] == ["broker-a"]
    mqs = admin.message_queues(topic)
    assert sum(admin.max_offset(mq) for mq in mqs) == 2
    admin.delete_topic(topic)
    wait_until(lambda: admin.topic_route(topic) is None, what="route removed")


def test_send_to_unknown_topic_auto_creates_it(node, producer, admin):
    topic = uniq("auto")
    r = producer.send(Message(topic, b"x"))
    assert r.status == SendStatus.SEND_OK
    route = wait_until(lambda: admin.topic_route(topic), what="auto-created topic route")
    assert route["queueDatas"][0]["writeQueueNums"] == 4  # defaultTopicQueueNums


def test_consume_from_timestamp_skips_older_messages(node, admin, producer):
    topic = topic_with(admin, 2)
    for i in range(6):
        producer.send(Message(topic, f"old{i}".encode()))
    time.sleep(0.05)  # separate the two groups of store timestamps by a clear millisecond gap
    cut = int(time.time() * 1000)
    time.sleep(0.05)
    for i in range(4):
        producer.send(Message(topic, f"new{i}".encode()))
    c, col = push(node, topic, consume_from_where="CONSUME_FROM_TIMESTAMP", consume_timestamp=cut, consume_thread_max=1)
    try:
        got = settle(col, sentinels(producer, topic, 2))
    finally:
        c.shutdown()
    assert got == sorted(f"new{i}".encode() for i in range(4))


def test_flow_control_bounds_messages_held_per_queue(node, admin, producer):
    topic = topic_with(admin, 1)
    for i in range(60):
        producer.send(Message(topic, f"f{i}".encode()))
    held: list[int] = []
    gate = threading.Event()
    consumer_ref: list = []

    def slow(msgs, ctx):
        c = consumer_ref[0]
        held.append(max((pq.count for mq, pq in list(c.assigned.items()) if mq.topic == topic), default=0))
        gate.wait(0.02)
        return ConsumeStatus.CONSUME_SUCCESS

    c = PushConsumer(uniq("fc"), node.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                     pull_threshold_for_queue=10, pull_batch_size=5, consume_thread_max=1, **FAST)
    consumer_ref.append(c)
    c.subscribe(topic, "*")
    c.register_message_listener(slow)
    c.start()
    try:
        wait_until(lambda: len(held) >= 60, what="all 60 messages consumed")
    finally:
        c.shutdown()
    # one pull may land on top of a full queue: threshold + one pull batch at most
    assert max(held) <= 10 + 5


def test_new_group_consuming_from_last_offset_skips_the_backlog(node, admin, producer):
    topic = topic_with(admin, 2)
    for i in range(6):
        producer.send(Message(topic, f"backlog{i}".encode()))
    c, col = push(node, topic, consume_from_where="CONSUME_FROM_LAST_OFFSET", consume_thread_max=1)
    try:
        wait_until(lambda: sum(1 for mq in list(c.assigned) if mq.topic == topic) == 2, what="both queues assigned")
        for i in range(3):
            producer.send(Message(topic, f"live{i}".encode()))
        got = settle(col, sentinels(producer, topic, 2))
    finally:
        c.shutdown()
    assert got == [b"live0", b"live1", b"live2"]
