"""Dispatcher: arrival listeners hear about every queue that grew; the index follows the log."""

from __future__ import annotations

import threading
import time

from engine.message import Message
from engine.record_batch import Record, build_batch


def wait_until(pred, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.01)
    return pred()


def test_arrival_listener_sees_max_offsets(make_store):
    store = make_store()
    seen: dict[tuple[str, int], int] = {}
    lock = threading.Lock()

    def listener(topic, queue_id, max_offset):
        with lock:
            seen[(topic, queue_id)] = max(seen.get((topic, queue_id), 0), max_offset)

    store.add_arrival_listener(listener)
    for i in range(10):
        store.put_message(Message("A", b"x", queue_id=i % 2))
    store.put_record_batch("A", 3, build_batch([Record(i, 0, None, b"v", []) for i in range(4)]))
    assert wait_until(lambda: seen.get(("A", 0)) == 5 and seen.get(("A", 1)) == 5 and seen.get(("A", 3)) == 4)
    store.remove_arrival_listener(listener)
    store.put_message(Message("A", b"x", queue_id=0))
    assert wait_until(lambda: store.dispatcher.reput_offset == store.confirmed_offset)
    assert seen[("A", 0)] == 5


def test_listener_registered_before_start_is_kept(make_store):
    store = make_store(start=False)
    calls = []
    store.add_arrival_listener(lambda t, q, m: calls.append((t, q, m)))
    store.start()
    store.put_message(Message("B", b"x"))
    assert wait_until(lambda: ("B", 0, 1) in calls)


def test_failing_listener_does_not_stop_dispatch(make_store):
    store = make_store()
    calls = []

    def bad(*_):
        raise RuntimeError("boom")

    store.add_arrival_listener(bad)
    store.add_arrival_listener(lambda t, q, m: calls.append(m))
    store.put_message(Message("C", b"x"))
    store.put_message(Message("C", b"y"))
    assert wait_until(lambda: calls and calls[-1] == 2)


def test_index_finds_keys_uniq_keys_and_kafka_record_keys(make_store):
    store = make_store()
    store.put_message(Message("I", b"1", keys=["order-1", "user-9"], properties={"UNIQ_KEY": "U-1"}))
    store.put_message(Message("I", b"2", keys=["order-1"]))
    store.put_message(Message("Other", b"3", keys=["order-1"]))
    store.put_record_batch("I", 0, build_batch([Record(0, 0, b"kafka-key", b"v", []), Record(1, 0, b"\xff\xfe", b"w", [])]))
    assert wait_until(lambda: store.dispatcher.reput_offset == store.confirmed_offset)
    found = store.query_message("I", "order-1", 10, 0, 2**62).messages
    from engine.message import decode_message

    assert [decode_message(m).body for m in found] == [b"2", b"1"]  # newest first, topic respected
    assert len(store.query_message("I", "user-9", 10, 0, 2**62).messages) == 1
    assert len(store.query_message("I", "U-1", 10, 0, 2**62).messages) == 1
    assert len(store.query_message("I", "kafka-key", 10, 0, 2**62).messages) == 1
    assert store.query_message("I", "missing", 10, 0, 2**62).messages == []
    assert len(store.query_message("I", "order-1", 1, 0, 2**62).messages) == 1
    assert store.query_message("I", "order-1", 10, 0, 1000).messages == []  # outside the time range


def test_query_checks_keys_exactly_despite_hash_collisions(make_store):
    from engine.index_file import key_hash

    # "Aa" and "BB" collide in Java's String.hashCode, so do "I#xAa" and "I#xBB"
    assert key_hash("I#xAa") == key_hash("I#xBB")
    store = make_store()
    store.put_message(Message("I", b"plain", keys=["xAa"]))
    store.put_record_batch("I", 0, build_batch([Record(0, 0, b"xBB", b"v", [])]))
    assert wait_until(lambda: store.dispatcher.reput_offset == store.confirmed_offset)
    from engine.message import decode_message

    assert [decode_message(m).body for m in store.query_message("I", "xAa", 10, 0, 2**62).messages] == [b"plain"]
    batch_hits = store.query_message("I", "xBB", 10, 0, 2**62).messages
    assert len(batch_hits) == 1 and decode_message(batch_hits[0]).is_inner_batch


def test_query_right_after_put_finds_the_message(make_store):
    store = make_store()
    for i in range(50):
        store.put_message(Message("Now", b"%d" % i, keys=[f"key-{i}"]))
        assert len(store.query_message("Now", f"key-{i}", 4, 0, 2**62).messages) == 1


def test_arrival_is_told_before_the_put_returns_and_without_the_dispatcher(make_store):
    """Long polls wake where the put happens: the listener has heard of a message when the put
    returns, even while the dispatcher thread (which only builds the index) is busy or asleep."""
    store = make_store()
    calls = []
    store.add_arrival_listener(lambda t, q, m: calls.append((t, q, m, threading.get_ident())))
    with store.dispatcher.round_lock:  # the index thread cannot run a round meanwhile
        for i in range(5):
            store.put_message(Message("W", b"x", queue_id=1))
            assert calls[-1] == ("W", 1, i + 1, threading.get_ident())
        store.put_record_batch("W", 2, build_batch([Record(i, 0, None, b"v", []) for i in range(3)]))
        assert calls[-1][:3] == ("W", 2, 3)


def test_lazy_listener_hears_from_the_dispatcher_rounds(make_store):
    store = make_store()
    calls = []
    store.add_arrival_listener(lambda t, q, m: calls.append((t, q, m, threading.get_ident())), lazy=True)
    for _ in range(3):
        store.put_message(Message("L", b"x"))
    assert wait_until(lambda: calls and calls[-1][:3] == ("L", 0, 3))
    assert {c[3] for c in calls} == {store.dispatcher.ident}


def test_query_by_key_right_after_a_put_while_the_dispatcher_pauses(make_store):
    """query_message promises read-your-writes: it indexes what the dispatcher has not yet
    (here the dispatcher's thread is stopped, so only the query itself can)."""
    store = make_store()
    store.dispatcher.stop()
    for i in range(20):
        store.put_message(Message("Q", b"%d" % i, keys=[f"key-{i}"]))
    assert store.dispatcher.reput_offset < store.confirmed_offset
    assert len(store.query_message("Q", "key-7", 4, 0, 2**62).messages) == 1
    assert store.dispatcher.reput_offset == store.confirmed_offset
