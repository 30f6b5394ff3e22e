"""The engine's transactional message service on a real store: half messages are invisible,
commit / rollback resolve exactly once, check rounds renew and finally roll back, a late answer
resolves the pending copy, and everything is re-derived after a restart. Time is passed in
(``now_ms``), so no test waits for a timeout."""

from __future__ import annotations

import time

import pytest

from engine.message import Message, TRANSACTION_COMMIT_TYPE
from engine.transaction import HALF_TOPIC, OP_TOPIC, TransactionalMessageService, TransactionError

TIMEOUT = 1000


def half(svc, body: bytes, uniq: str, topic: str = "Real", queue_id: int = 1, group: str = "pg"):
    res = svc.prepare(Message(topic=topic, body=body, tags="T", keys=["k-" + uniq], queue_id=queue_id,
                              properties={"UNIQ_KEY": uniq, "PGROUP": group}, born_timestamp=int(time.time() * 1000)))
    assert res.ok
    return res


def bodies(store, topic="Real", queue_id=1) -> list[bytes]:
    from engine.message import decode_message

    res = store.get_message("g", topic, queue_id, 0, 100)
    return [decode_message(m).body for m in res.messages]


def later(ms: int = TIMEOUT + 1) -> int:
    return int(time.time() * 1000) + ms


def test_half_invisible_until_commit_and_resolved_once(make_store):
    store = make_store()
    svc = TransactionalMessageService(store)
    a = half(svc, b"a", "U-A")
    b = half(svc, b"b", "U-B")
    assert store.get_max_offset_in_queue("Real", 1) == 0
    assert store.get_max_offset_in_queue(HALF_TOPIC, 0) == 2
    r = svc.end(a.commitlog_offset, a.queue_offset, "pg", commit=True)
    assert r.committed and r.put.ok
    assert svc.end(a.commitlog_offset, a.queue_offset, "pg", commit=True).already_resolved
    svc.end(b.commitlog_offset, b.queue_offset, "pg", commit=False)
    assert bodies(store) == [b"a"]
    stored = store.look_message_by_offset(r.put.commitlog_offset)
    assert stored.sys_flag & 0xC == TRANSACTION_COMMIT_TYPE
    assert stored.prepared_transaction_offset == a.commitlog_offset
    assert stored.tags == "T" and stored.keys == ["k-U-A"] and "REAL_TOPIC" not in stored.properties
    assert store.get_max_offset_in_queue(OP_TOPIC, 0) == 2
    assert svc.check(TIMEOUT, 15, later()) == []  # nothing left to ask about
    assert svc.pending_count() == 0


def test_bad_end_requests(make_store):
    store = make_store()
    svc = TransactionalMessageService(store)
    a = half(svc, b"a", "U-A")
    with pytest.raises(TransactionError, match="no prepared"):
        svc.end(a.commitlog_offset + 12345, a.queue_offset, "pg", True)
    with pytest.raises(TransactionError, match="tranStateTableOffset"):
        svc.end(a.commitlog_offset, a.queue_offset + 1, "pg", True)
    with pytest.raises(TransactionError, match="producer group"):
        svc.end(a.commitlog_offset, a.queue_offset, "other", True)
    ordinary = store.put_message(Message(topic="Real", body=b"x", queue_id=0))
    with pytest.raises(TransactionError, match="no prepared"):
        svc.end(ordinary.commitlog_offset, ordinary.queue_offset, "pg", True)
    assert bodies(store) == []


def test_check_rounds_renew_then_roll_back(make_store):
    store = make_store()
    svc = TransactionalMessageService(store)
    half(svc, b"undecided", "U-X")
    assert svc.check(TIMEOUT, 2) == []  # younger than the timeout
    first = svc.check(TIMEOUT, 2, later())
    assert [(r.producer_group, r.real_topic, r.real_queue_id) for r in first] == [("pg", "Real", 1)]
    assert first[0].half.properties["TRANSACTION_CHECK_TIMES"] == "1"
    second = svc.check(TIMEOUT, 2, later())
    assert second[0].half.properties["TRANSACTION_CHECK_TIMES"] == "2"
    assert svc.check(TIMEOUT, 2, later()) == []  # checked twice: rolled back
    assert svc.pending_count() == 0 and bodies(store) == []
    assert store.get_max_offset_in_queue("TRANS_CHECK_MAX_TIME_TOPIC", 0) == 1


def test_late_answer_about_a_renewed_message_commits_once(make_store):
    store = make_store()
    svc = TransactionalMessageService(store)
    a = half(svc, b"a", "U-A")
    (req,) = svc.check(TIMEOUT, 15, later())
    # the producer's original END arrives after the broker renewed the half message
    assert not svc.end(a.commitlog_offset, a.queue_offset, "pg", True).already_resolved
    # ... and its answer to the check-back names the copy: already resolved
    assert svc.end(req.half.commitlog_offset, req.half.queue_offset, "pg", True).already_resolved
    assert svc.check(TIMEOUT, 15, later()) == []
    assert bodies(store) == [b"a"]


def test_state_is_rederived_after_restart(make_store, tmp_path):
    root = tmp_path / "s"
    store = make_store(root=root)
    svc = TransactionalMessageService(store)
    a = half(svc, b"a", "U-A")
    half(svc, b"b", "U-B")
    c = half(svc, b"c", "U-C")
    svc.end(a.commitlog_offset, a.queue_offset, "pg", True)
    (req_b, req_c) = svc.check(TIMEOUT, 15, later())  # b and c renewed
    svc.end(c.commitlog_offset, c.queue_offset, "pg", False)  # late rollback of c hits its copy
    store.shutdown()

    store2 = make_store(root=root)
    svc2 = TransactionalMessageService(store2)
    assert svc2.pending_count() == 1
    (again,) = svc2.check(TIMEOUT, 15, later())
    assert again.half.uniq_key == "U-B" and again.half.properties["TRANSACTION_CHECK_TIMES"] == "2"
    assert not svc2.end(again.half.commitlog_offset, again.half.queue_offset, "pg", True).already_resolved
    assert bodies(store2) == [b"a", b"b"]
    assert svc2.check(TIMEOUT, 15, later()) == []
