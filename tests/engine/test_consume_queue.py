"""ConsumeQueue: 20-byte units, batches as N units, recovery of its end, dirty tails, min offsets."""

from __future__ import annotations

import os
import struct

from engine.consume_queue import ConsumeQueue
from engine.file_io import MemoryFileIO


def make(fio, file_units=10):
    cq = ConsumeQueue(fio, "/cq", "T", 0, 20 * file_units)
    cq.load()
    return cq


def test_unit_layout_and_reads_across_files():
    fio = MemoryFileIO()
    cq = make(fio)
    for i in range(25):
        cq.put(i, 1000 + i * 100, 100, -5)
    assert cq.max_offset == 25 and cq.min_offset == 0
    assert struct.unpack_from(">qiq", fio.files["/cq/T/0/00000000000000000000"].data, 20) == (1100, 100, -5)
    units = cq.read_units(8, 5)
    assert [u[0] for u in units] == [1800, 1900]  # stops at the file's end
    assert cq.read_units(10, 5)[0] == (2000, 100, -5)


def test_batch_writes_n_identical_units_across_a_file_boundary():
    fio = MemoryFileIO()
    cq = make(fio)
    cq.put(0, 0, 50, 0)
    cq.put(1, 50, 500, 0, count=15)
    assert cq.max_offset == 16
    assert all(cq.unit(i) == (50, 500, 0) for i in range(1, 16))
    assert cq.put(1, 50, 500, 0, count=15) is False  # already there (recovery re-dispatch)


def test_recover_finds_the_end_and_truncates_dirty_units():
    fio = MemoryFileIO()
    cq = make(fio)
    for i in range(13):
        cq.put(i, i * 100, 100, 0)
    again = make(fio.crash())
    again.recover()
    assert again.max_offset == 13 and again.max_physic_offset == 1300
    again.truncate_dirty(commitlog_max=1000)
    assert again.max_offset == 10
    again.put(10, 1000, 100, 0)
    assert again.unit(10) == (1000, 100, 0)


def test_queue_starting_mid_file_and_min_offset_correction():
    fio = MemoryFileIO()
    cq = make(fio)
    cq.put(25, 0, 10, 0)
    cq.put(26, 10, 10, 0)
    assert (cq.min_offset, cq.max_offset) == (25, 27)
    again = make(fio.crash())
    again.recover()
    assert (again.min_offset, again.max_offset) == (25, 27)
    again.correct_min_offset(commitlog_min=10)
    assert again.min_offset == 26


def test_delete_expired_drops_whole_files_below_the_log():
    fio = MemoryFileIO()
    cq = make(fio)
    for i in range(35):
        cq.put(i, i * 10, 10, 0)
    cq.delete_expired(commitlog_min=215)
    assert len(cq.mfq.files) == 2 and cq.min_offset == 22
    assert cq.read_units(22, 1)[0][0] == 220


def test_a_topics_first_message_prepares_its_other_queues_files_off_the_put_path(make_store):
    """The first message to a topic of many queues has the store create the other queues' first
    files on a thread of its own; sends to those queues then start at offset 0 and read back,
    across a restart too; a deleted topic's queues are not created again."""
    import time

    from engine.message import Message, decode_message
    from engine.store import GetMessageStatus
    from engine.topic_config import TopicConfig

    store = make_store()
    store.topic_config.create_or_update(TopicConfig("Many", 64, 64))
    assert store.put_message(Message("Many", b"first", queue_id=10)).ok
    root = os.path.join(store.root, "consumequeue", "Many")
    first = "0" * 20
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not all(
            os.path.exists(os.path.join(root, str(q), first)) for q in range(64)):
        time.sleep(0.05)
    assert all(os.path.exists(os.path.join(root, str(q), first)) for q in range(64))
    assert [store.get_max_offset_in_queue("Many", q) for q in (9, 10, 11)] == [0, 1, 0]
    for q in range(64):
        r = store.put_message(Message("Many", b"q%d" % q, queue_id=q))
        assert r.ok and r.queue_offset == (1 if q == 10 else 0)
    store.shutdown()
    store.start()
    for q in (0, 10, 63):
        got = store.get_message("g", "Many", q, 0, 10)
        assert got.status is GetMessageStatus.FOUND
        assert [decode_message(m).body for m in got.messages] == ([b"first", b"q10"] if q == 10 else [b"q%d" % q])
    store.topic_config.create_or_update(TopicConfig("Gone", 400, 400))
    assert store.put_message(Message("Gone", b"x", queue_id=0)).ok
    store.delete_topic("Gone")
    time.sleep(0.5)  # a pass still running would have created queues by now
    assert not os.path.exists(os.path.join(store.root, "consumequeue", "Gone"))
    assert store.queue_ids("Gone") == []


def test_flush_with_least_pages_waits_for_enough_dirty_pages():
    fio = MemoryFileIO()
    cq = make(fio, file_units=1000)   # 20,000-byte files: 4 pages and a bit
    for i in range(10):
        cq.put(i, i * 100, 100, 0)
    f = cq.mfq.files[-1]
    assert cq.flush(least_pages=2) is False and f.flushed_position == 0   # 200 bytes dirty: left
    for i in range(10, 420):   # 8,400 bytes: two pages begun
        cq.put(i, i * 100, 100, 0)
    assert cq.flush(least_pages=2) is True and f.flushed_position == 420 * 20
    cq.put(420, 42_000, 100, 0)
    assert cq.flush(least_pages=2) is False
    assert cq.flush() is True and f.flushed_position == 421 * 20   # a thorough pass flushes all
