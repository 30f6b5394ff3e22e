"""Delayed delivery in the store: delay levels (SCHEDULE_TOPIC_XXXX) and timer messages (wheel +
log), including a restart while messages are pending. Intervals are seconds, never hours."""

from __future__ import annotations

import json
import time

from engine.message import Message, decode_message
from engine.schedule_message import SCHEDULE_TOPIC
from engine.store import PutMessageStatus
from engine.timer_message import TIMER_TOPIC

LEVELS = "1s 2s 3s"


def _wait_messages(store, topic, queue_id, count, timeout=20.0):
    """Poll (bounded) until ``count`` messages are readable in the queue; return them decoded."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if store.get_max_offset_in_queue(topic, queue_id) >= count:
            break
        time.sleep(0.05)
    res = store.get_message("g", topic, queue_id, 0, count + 10)
    return [decode_message(u) for u in res.messages]


def test_delay_level_message_is_staged_then_delivered_to_its_queue(make_store):
    store = make_store(message_delay_level=LEVELS)
    put = store.put_message(Message("orders", b"later", tags="TagA", keys=["k1"], queue_id=2,
                                    properties={"DELAY": "2", "UNIQ_KEY": "U1", "color": "red"}))
    assert put.ok
    assert store.get_max_offset_in_queue("orders", 2) == 0  # not visible yet
    assert store.get_max_offset_in_queue(SCHEDULE_TOPIC, 1) == 1  # staged in queue level-1
    staged = decode_message(store.get_message("g", SCHEDULE_TOPIC, 1, 0, 1).messages[0])
    assert staged.properties["REAL_TOPIC"] == "orders" and staged.properties["REAL_QID"] == "2"

    got = _wait_messages(store, "orders", 2, 1)
    assert len(got) == 1
    m = got[0]
    assert m.body == b"later" and m.tags == "TagA" and m.keys == ["k1"]
    assert m.properties["UNIQ_KEY"] == "U1" and m.properties["color"] == "red"
    assert "DELAY" not in m.properties and "REAL_TOPIC" not in m.properties
    assert m.store_timestamp >= staged.store_timestamp + 2000 - 50  # not before its delay
    assert store.query_message("orders", "k1", 10, 0, 1 << 62).messages  # findable by key on the real topic
    # progress is persisted in delayOffset.json
    deadline = time.monotonic() + 10
    doc = {}
    while time.monotonic() < deadline:
        path = store.config_dir / "delayOffset.json"
        doc = json.loads(path.read_text()) if path.exists() else {}
        if doc.get("offsetTable", {}).get("2") == 1:
            break
        time.sleep(0.05)
    assert doc["offsetTable"]["2"] == 1


def test_level_above_maximum_uses_the_maximum(make_store):
    store = make_store(message_delay_level="1s 1s")
    assert store.put_message(Message("t", b"x", properties={"DELAY": "99"})).ok
    assert store.get_max_offset_in_queue(SCHEDULE_TOPIC, 1) == 1
    assert len(_wait_messages(store, "t", 0, 1)) == 1


def test_level_zero_or_garbage_is_delivered_at_once(make_store):
    store = make_store(message_delay_level=LEVELS)
    assert store.put_message(Message("t", b"a", properties={"DELAY": "0"})).ok
    assert store.put_message(Message("t", b"b", properties={"DELAY": "soon"})).ok
    assert store.get_max_offset_in_queue("t", 0) == 2


def test_delayed_messages_survive_a_restart_and_arrive_once(make_store, tmp_path):
    root = tmp_path / "restart"
    store = make_store(root=root, message_delay_level="3s 4s")
    for i in range(20):
        assert store.put_message(Message("t", b"m%d" % i, properties={"DELAY": str(1 + i % 2)})).ok
    store.shutdown()
    store2 = make_store(root=root, message_delay_level="3s 4s")
    got = _wait_messages(store2, "t", 0, 20)
    assert sorted(m.body for m in got) == sorted(b"m%d" % i for i in range(20))
    # nothing is delivered twice, even after a second restart
    store2.shutdown()
    store3 = make_store(root=root, message_delay_level="3s 4s")
    assert store3.schedule.pending() == 0
    assert store3.get_max_offset_in_queue("t", 0) == 20


def test_timer_message_by_delay_and_by_deliver_time(make_store):
    store = make_store(timer_max_delay_sec=60)
    now = int(time.time() * 1000)
    assert store.put_message(Message("tm", b"rel", properties={"TIMER_DELAY_MS": "1500"})).ok
    assert store.put_message(Message("tm", b"abs", properties={"TIMER_DELIVER_MS": str(now + 2500)})).ok
    assert store.put_message(Message("tm", b"sec", properties={"TIMER_DELAY_SEC": "2"})).ok
    assert store.get_max_offset_in_queue("tm", 0) == 0
    assert store.get_max_offset_in_queue(TIMER_TOPIC, 0) == 3
    got = _wait_messages(store, "tm", 0, 3)
    assert sorted(m.body for m in got) == [b"abs", b"rel", b"sec"]
    for m in got:
        # as RocketMQ: the delivered message carries its delivery time (TIMER_OUT_MS, and
        # TIMER_DELIVER_MS for consumers), not the relative delay it was sent with
        assert {k for k in m.properties if k.startswith("TIMER_")} == {"TIMER_OUT_MS", "TIMER_DELIVER_MS"}
        assert m.properties["TIMER_DELIVER_MS"] == m.properties["TIMER_OUT_MS"]
        assert "REAL_TOPIC" not in m.properties
    abs_msg = next(m for m in got if m.body == b"abs")
    assert abs_msg.store_timestamp >= now + 2500 - 1000  # one precision step (1 s) at most early
    assert abs_msg.properties["TIMER_DELIVER_MS"] == str(now + 2500)


def test_timer_in_the_past_is_stored_at_once_and_too_far_is_refused(make_store):
    store = make_store(timer_max_delay_sec=60)
    assert store.put_message(Message("tm", b"past", properties={"TIMER_DELIVER_MS": "1000"})).ok
    assert store.get_max_offset_in_queue("tm", 0) == 1
    far = store.put_message(Message("tm", b"far", properties={"TIMER_DELAY_SEC": "3600"}))
    assert far.status is PutMessageStatus.MESSAGE_ILLEGAL and "timerMaxDelaySec" in far.error
    bad = store.put_message(Message("tm", b"bad", properties={"TIMER_DELAY_MS": "abc"}))
    assert bad.status is PutMessageStatus.MESSAGE_ILLEGAL and "not an integer" in bad.error


def test_many_timers_survive_restart_and_each_arrives_once(make_store, tmp_path):
    root = tmp_path / "timers"
    store = make_store(root=root, timer_max_delay_sec=60, mapped_file_size_commit_log=1024 * 1024)
    n = 3000
    now = int(time.time() * 1000)
    for i in range(n):
        res = store.put_message(Message("many", b"%d" % i, queue_id=i % 4,
                                        properties={"TIMER_DELIVER_MS": str(now + 2000 + (i % 3) * 1000)}))
        assert res.ok
    store.shutdown()  # restart while every timer is pending
    store2 = make_store(root=root, timer_max_delay_sec=60, mapped_file_size_commit_log=1024 * 1024)
    bodies = []
    for q in range(4):
        bodies += [m.body for m in _wait_messages(store2, "many", q, n // 4, timeout=40)]
    assert sorted(bodies) == sorted(b"%d" % i for i in range(n))
    # the wheel does not redeliver after another restart
    store2.shutdown()
    store3 = make_store(root=root, timer_max_delay_sec=60, mapped_file_size_commit_log=1024 * 1024)
    assert sum(store3.get_max_offset_in_queue("many", q) for q in range(4)) == n
    # ...because every step up to the last timer is recorded as delivered and nothing is left to enqueue
    assert store3.timer.checkpoint.read_time_ms > now + 4000
    assert store3.timer.pending() == 0


def test_timer_log_is_emptied_once_every_timer_was_delivered(make_store):
    store = make_store(timer_max_delay_sec=60)
    for i in range(50):
        assert store.put_message(Message("tl", b"%d" % i, properties={"TIMER_DELAY_MS": "1500"})).ok
    assert len(_wait_messages(store, "tl", 0, 50)) == 50
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and store.timer.timer_log.end != 0:
        time.sleep(0.05)
    assert store.timer.timer_log.end == 0
    # and timers keep working on the emptied log
    assert store.put_message(Message("tl", b"again", properties={"TIMER_DELAY_MS": "1500"})).ok
    assert len(_wait_messages(store, "tl", 0, 51)) == 51


def test_timers_survive_a_sigkill_during_delivery(tmp_path):
    """SIGKILL a process while its store delivers timers; reopening the store delivers every
    timer (at least once: the crash may repeat deliveries since the last checkpoint)."""
    import os
    import signal
    import subprocess
    import sys
    import threading
    from pathlib import Path

    from engine.store import MessageStore

    here = Path(__file__).resolve().parent
    sys.path.insert(0, str(here))
    from timer_crash_child import config

    n = 2000
    root = tmp_path / "timercrash"
    env = dict(os.environ, PYTHONPATH=str(here.parents[1]))
    proc = subprocess.Popen([sys.executable, str(here / "timer_crash_child.py"), str(root), str(n)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=str(here.parents[1]))
    progress = {"put": False, "delivered": 0}

    def drain():
        buf = b""
        for chunk in iter(lambda: os.read(proc.stdout.fileno(), 65536), b""):
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                if line == b"put":
                    progress["put"] = True
                elif line.startswith(b"delivered "):
                    progress["delivered"] = int(line.split()[1])

    threading.Thread(target=drain, daemon=True).start()
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and proc.poll() is None and not (0 < progress["delivered"] < n):
            time.sleep(0.005)
        assert 0 < progress["delivered"] < n, f"no kill point mid-delivery: {progress}, exit {proc.poll()}"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    store = MessageStore(config(root))
    store.start()
    try:
        assert not store.last_exit_ok
        bodies = set()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(bodies) < n:
            bodies = set()
            for q in range(4):
                res = store.get_message("g", "tc", q, 0, 10 * n)
                bodies |= {decode_message(u).body for u in res.messages}
            time.sleep(0.05)
        assert bodies == {b"t%d" % i for i in range(n)}
    finally:
        store.shutdown()
