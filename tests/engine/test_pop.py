"""POP consumption on a real store: pop/ack, invisible time and revive, retry, DLQ, change
invisible time, orderly POP, filters, and the state rebuilt from the revive log after a restart.

Time is passed explicitly (``now_ms``) and revive is driven by ``revive_due``, so nothing waits
on a clock."""

from __future__ import annotations

import time

import pytest

from engine.expression_filter import ExpressionFilter
from engine.message import Message
from engine.pop import AckStatus, Handle, PopError, PopService, pop_retry_topic
from engine.topic_config import TopicConfig

G, T = "g1", "orders"


def _store(make_store, root=None, queues=2):
    store = make_store(root=root)
    store.topic_config.create_or_update(TopicConfig(T, read_queue_nums=queues, write_queue_nums=queues))
    return store


def _send(store, n, queue_id=0, tags=None, props=None):
    for i in range(n):
        r = store.put_message(Message(T, f"m{i}".encode(), tags=tags, properties=dict(props or {}, UNIQ_KEY=f"U{queue_id}-{i}-{time.monotonic_ns()}"),
                                      queue_id=queue_id))
        assert r.ok


def _svc(store):
    svc = PopService(store)
    svc.start(revive_thread=False)
    return svc


def bodies(result):
    return sorted(m.message.body for m in result.messages)


def test_pop_then_ack_consumes_once(make_store):
    store = _store(make_store)
    _send(store, 3, 0)
    _send(store, 2, 1)
    svc = _svc(store)
    now = int(time.time() * 1000)
    r = svc.pop(G, T, None, 32, 30_000, now_ms=now)
    assert bodies(r) == [b"m0", b"m0", b"m1", b"m1", b"m2"]
    assert all(m.delivery_attempt == 1 for m in r.messages)
    # popped messages are invisible: a second pop finds nothing
    assert not svc.pop(G, T, None, 32, 30_000, now_ms=now + 1).found
    for m in r.messages:
        assert svc.ack(G, T, m.handle, now_ms=now + 2) is AckStatus.OK
    assert svc.inflight(G) == 0
    # acked: nothing is revived later
    assert svc.revive_due(now + 60_000) == 0
    assert not svc.pop(G, T, None, 32, 30_000, now_ms=now + 61_000).found
    # a second ack of the same handle is refused
    assert svc.ack(G, T, r.messages[0].handle, now_ms=now + 3) is AckStatus.NO_SUCH_CHECKPOINT


def test_unacked_message_is_redelivered_after_its_invisible_time(make_store):
    store = _store(make_store, queues=1)
    _send(store, 2)
    svc = _svc(store)
    now = int(time.time() * 1000)
    first = svc.pop(G, T, None, 32, 10_000, now_ms=now)
    assert bodies(first) == [b"m0", b"m1"]
    svc.ack(G, T, first.messages[0].handle, now_ms=now + 1)
    assert svc.revive_due(now + 9_999) == 0
    assert svc.revive_due(now + 10_000) == 1
    again = svc.pop(G, T, None, 32, 10_000, now_ms=now + 10_001)
    assert [m.message.body for m in again.messages] == [b"m1"]
    m = again.messages[0]
    assert m.delivery_attempt == 2 and m.topic == T
    assert m.message.topic == pop_retry_topic(G, T)
    assert m.message.properties["UNIQ_KEY"] == first.messages[1].message.properties["UNIQ_KEY"]
    # the handle of the first delivery is dead; the new one acks
    assert svc.ack(G, T, first.messages[1].handle, now_ms=now + 10_002) is AckStatus.NO_SUCH_CHECKPOINT
    assert svc.ack(G, T, m.handle, now_ms=now + 10_002) is AckStatus.OK


def test_dead_letter_after_max_attempts(make_store):
    store = _store(make_store, queues=1)
    cfg = store.subscription_groups.find_or_create(G)
    cfg.retry_max_times = 2
    store.subscription_groups.create_or_update(cfg)
    _send(store, 1)
    svc = _svc(store)
    now = int(time.time() * 1000)
    attempts = []
    for i in range(3):
        r = svc.pop(G, T, None, 1, 1_000, now_ms=now)
        assert len(r.messages) == 1
        attempts.append(r.messages[0].delivery_attempt)
        now += 1_000
        assert svc.revive_due(now) == 1
        now += 1
    assert attempts == [1, 2, 3]
    assert not svc.pop(G, T, None, 1, 1_000, now_ms=now).found
    dlq = store.get_message("x", "%DLQ%" + G, 0, 0, 10)
    assert dlq.status.name == "FOUND" and len(dlq.messages) == 1
    from engine.message import decode_message
    d = decode_message(bytes(dlq.messages[0]))
    assert d.body == b"m0" and d.properties["DLQ_ORIGIN_TOPIC"] == T and d.reconsume_times == 3
    # where it was stored when dead-lettered, as Apache RocketMQ writes it: the POP retry topic
    assert d.properties["RETRY_TOPIC"] == f"%RETRY%{G}_{T}"


def test_change_invisible_time_extends_and_renews_the_handle(make_store):
    store = _store(make_store, queues=1)
    _send(store, 1)
    svc = _svc(store)
    now = int(time.time() * 1000)
    m = svc.pop(G, T, None, 1, 5_000, now_ms=now).messages[0]
    new = svc.change_invisible(G, T, m.handle, 60_000, now_ms=now + 1_000)
    assert new != m.handle and Handle.parse(new).invisible_ms == 60_000
    assert svc.revive_due(now + 30_000) == 0  # the old 5 s deadline no longer applies
    assert svc.ack(G, T, m.handle, now_ms=now + 30_001) is AckStatus.NO_SUCH_CHECKPOINT
    assert svc.ack(G, T, new, now_ms=now + 30_001) is AckStatus.OK
    with pytest.raises(PopError):
        svc.change_invisible(G, T, new, 1_000, now_ms=now + 30_002)


def test_tag_and_sql_filters(make_store):
    store = _store(make_store, queues=1)
    _send(store, 2, tags="A", props={"region": "eu"})
    _send(store, 2, tags="B", props={"region": "us"})
    svc = _svc(store)
    r = svc.pop("ga", T, None, 32, 30_000, message_filter=ExpressionFilter("TAG", "A"))
    assert [m.message.tags for m in r.messages] == ["A", "A"]
    r = svc.pop("gs", T, None, 32, 30_000, message_filter=ExpressionFilter("SQL92", "region = 'us'"))
    assert [m.message.properties["region"] for m in r.messages] == ["us", "us"]


def test_orderly_pop_locks_the_queue_and_redelivers_in_place(make_store):
    store = _store(make_store, queues=1)
    _send(store, 3)
    svc = _svc(store)
    now = int(time.time() * 1000)
    r = svc.pop(G, T, None, 2, 5_000, orderly=True, now_ms=now)
    assert [m.message.body for m in r.messages] == [b"m0", b"m1"]
    # locked until acked or expired
    assert not svc.pop(G, T, None, 2, 5_000, orderly=True, now_ms=now + 1).found
    svc.ack(G, T, r.messages[0].handle, now_ms=now + 2)
    assert not svc.pop(G, T, None, 2, 5_000, orderly=True, now_ms=now + 3).found
    assert svc.revive_due(now + 5_000) == 1
    r2 = svc.pop(G, T, None, 2, 5_000, orderly=True, now_ms=now + 5_001)
    assert [(m.message.body, m.delivery_attempt) for m in r2.messages] == [(b"m1", 2), (b"m2", 1)]
    for m in r2.messages:
        svc.ack(G, T, m.handle, now_ms=now + 5_002)
    assert store.consumer_offsets.query(G, T, 0) == 3


def test_orderly_attempt_counts_survive_a_restart(make_store, tmp_path):
    root = tmp_path / "pop-orderly-restart"
    store = _store(make_store, root=root, queues=1)
    _send(store, 2)
    svc = _svc(store)
    now = int(time.time() * 1000)
    r = svc.pop(G, T, None, 2, 1_000, orderly=True, now_ms=now)
    svc.ack(G, T, r.messages[0].handle, now_ms=now + 1)
    assert svc.revive_due(now + 1_000) == 1  # m1 failed once
    r2 = svc.pop(G, T, None, 2, 1_000, orderly=True, now_ms=now + 1_001)
    assert [(m.message.body, m.delivery_attempt) for m in r2.messages] == [(b"m1", 2)]
    assert svc.revive_due(now + 2_001) == 1  # and twice
    svc.stop()  # saves the progress offset: it must not pass the CKs that counted
    store.shutdown()

    store2 = make_store(root=root)
    svc2 = _svc(store2)
    r3 = svc2.pop(G, T, None, 2, 1_000, orderly=True, now_ms=now + 2_002)
    assert [(m.message.body, m.delivery_attempt) for m in r3.messages] == [(b"m1", 3)]
    svc2.ack(G, T, r3.messages[0].handle, now_ms=now + 2_003)
    svc2.stop()
    assert store2.consumer_offsets.query(G, T, 0) == 2


def test_pending_checkpoints_survive_a_restart(make_store, tmp_path):
    root = tmp_path / "pop-restart"
    store = _store(make_store, root=root, queues=1)
    _send(store, 2)
    svc = _svc(store)
    now = int(time.time() * 1000)
    r = svc.pop(G, T, None, 2, 10_000, now_ms=now)
    svc.ack(G, T, r.messages[0].handle, now_ms=now + 1)
    store.shutdown()  # no progress saved by the service: the log alone must be enough

    store2 = make_store(root=root)
    svc2 = _svc(store2)
    assert svc2.inflight(G) == 1
    assert svc2.ack(G, T, r.messages[1].handle, now_ms=now + 2) is AckStatus.OK
    assert svc2.ack(G, T, r.messages[0].handle, now_ms=now + 3) is AckStatus.NO_SUCH_CHECKPOINT


def test_unacked_pop_is_revived_after_a_restart(make_store, tmp_path):
    root = tmp_path / "pop-revive-restart"
    store = _store(make_store, root=root, queues=1)
    _send(store, 1)
    svc = _svc(store)
    now = int(time.time() * 1000)
    assert svc.pop(G, T, None, 1, 1_000, now_ms=now).found
    store.shutdown()
    store2 = make_store(root=root)
    svc2 = _svc(store2)
    assert svc2.revive_due(now + 1_000) == 1
    r = svc2.pop(G, T, None, 1, 1_000, now_ms=now + 1_001)
    assert [(m.message.body, m.delivery_attempt) for m in r.messages] == [(b"m0", 2)]


def test_bad_handles_and_invisible_times_are_refused(make_store):
    store = _store(make_store, queues=1)
    svc = _svc(store)
    assert svc.ack(G, T, "garbage") is AckStatus.BAD_HANDLE
    assert svc.ack(G, T, "1 2 3 0 0 broker-a 0 5 7") is AckStatus.NO_SUCH_CHECKPOINT
    with pytest.raises(PopError):
        svc.pop(G, T, None, 1, 0)


# -- Kafka share groups on POP: records stay at their offsets, deliveries are counted ------------

def _kafka_batch(store, n, topic=T):
    from engine import record_batch as rb

    records = [rb.Record(i, 0, f"k{i}".encode(), f"r{i}".encode(), []) for i in range(n)]
    assert store.put_record_batch(topic, 0, rb.build_batch(records, base_timestamp=1_700_000_000_000)).ok


def test_pop_of_part_of_a_kafka_batch_keeps_the_rest(make_store):
    store = _store(make_store, queues=1)
    _kafka_batch(store, 6)
    svc = _svc(store)
    now = int(time.time() * 1000)
    first = svc.pop(G, T, 0, 2, 30_000, now_ms=now)
    rest = svc.pop(G, T, 0, 32, 30_000, now_ms=now + 1)
    assert [m.message.queue_offset for m in first.messages] == [0, 1]
    assert [m.message.queue_offset for m in rest.messages] == [2, 3, 4, 5]


def test_share_partition_accept_release_reject_renew_and_expiry(make_store):
    store = _store(make_store, queues=1)
    _kafka_batch(store, 5)
    svc = _svc(store)
    now = int(time.time() * 1000)
    got = svc.share_acquire(G, T, 0, "m1", 10, 10_000, delivery_limit=3, init_mode=0, now_ms=now)
    assert got == [(o, 1) for o in range(5)]
    assert svc.share_acquire(G, T, 0, "m2", 10, 10_000, delivery_limit=3, init_mode=0, now_ms=now) == []
    # another member cannot acknowledge m1's records: nothing is applied
    assert svc.share_acknowledge(G, T, 0, "m2", [(0, 1)], now_ms=now + 1) is not None
    assert svc.share_acknowledge(G, T, 0, "m1", [(0, 1), (1, 2), (2, 3), (3, 4)], now_ms=now + 1) is None
    dlq = "%DLQ%" + G
    assert store.get_max_offset_in_queue(dlq, 0) == 1  # the rejected record
    # released: available again at its offset, one delivery more; m2 may take it
    assert svc.share_acquire(G, T, 0, "m2", 10, 10_000, delivery_limit=3, init_mode=0, now_ms=now + 2) == [(1, 2)]
    # offset 3 renewed at now+1: still locked when offset 4's lock (from now) expires
    assert svc.revive_due(now + 10_000) == 1
    assert svc.share_acknowledge(G, T, 0, "m1", [(3, 1)], now_ms=now + 10_000) is None
    assert svc.share_acquire(G, T, 0, "m2", 10, 10_000, delivery_limit=3, init_mode=0, now_ms=now + 10_001) == [(4, 2)]
    assert svc.share_state(G, T, 0)["locked"] == [1, 4]


def test_share_delivery_limit_dead_letters_and_state_survives_a_restart(make_store, tmp_path):
    root = tmp_path / "share-restart"
    store = _store(make_store, root=root, queues=1)
    _kafka_batch(store, 3)
    svc = _svc(store)
    now = int(time.time() * 1000)
    assert len(svc.share_acquire(G, T, 0, "m1", 10, 1_000, delivery_limit=2, init_mode=0, now_ms=now)) == 3
    assert svc.share_acknowledge(G, T, 0, "m1", [(0, 1), (1, 2)], now_ms=now + 1) is None
    store.shutdown()  # offset 1 released once, offset 2 locked: only the log says so

    store2 = make_store(root=root)
    svc2 = _svc(store2)
    assert svc2.share_state(G, T, 0) == {"next_offset": 3, "start_offset": 1, "locked": [2], "available": [1]}
    assert svc2.revive_due(now + 1_000) == 1  # offset 2's lock expires: its second delivery is next
    again = svc2.share_acquire(G, T, 0, "m1", 10, 1_000, delivery_limit=2, init_mode=0, now_ms=now + 1_001)
    assert again == [(1, 2), (2, 2)]
    # second delivery released / expired = the limit: both go to the DLQ, nothing is left
    assert svc2.share_acknowledge(G, T, 0, "m1", [(1, 2)], now_ms=now + 1_002) is None
    assert svc2.revive_due(now + 2_001) == 1
    assert store2.get_max_offset_in_queue("%DLQ%" + G, 0) == 2
    assert svc2.share_acquire(G, T, 0, "m1", 10, 1_000, delivery_limit=2, init_mode=0, now_ms=now + 2_002) == []
    assert svc2.share_state(G, T, 0) == {"next_offset": 3, "start_offset": 3, "locked": [], "available": []}
