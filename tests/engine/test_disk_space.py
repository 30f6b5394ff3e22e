"""Disk space at the store: a full disk refuses puts before anything is written (never a
half-written unit or queue), reads go on, puts resume when space returns, and above
diskSpaceCleanForciblyRatio the oldest segments go with queue min offsets moved.

The in-memory file system's ``capacity`` fails a space reservation with ENOSPC exactly as
``posix_fallocate`` does, so the edge (the unit that does not fit) is deterministic; the
node-level tests (test_disk_space_node.py) do the same on a real tmpfs.
"""

from __future__ import annotations

import threading

from engine.file_io import MemoryFileIO, PAGE_SIZE
from engine.message import Message, decode_message
from engine.record_batch import Record, build_batch
from engine.store import PutMessageStatus


def fill_until_refused(store, topic="Full", size=3000, limit=10_000):
    acked = []
    for i in range(limit):
        r = store.put_message(Message(topic, b"%06d" % i + b"x" * size, keys=[f"k{i}"]))
        if not r.ok:
            return acked, r
        acked.append(r)
    raise AssertionError("the disk never filled up")


def test_a_full_disk_refuses_puts_cleanly_and_they_resume_when_space_returns(make_store):
    fio = MemoryFileIO(capacity=2 << 20)
    store = make_store(file_io=fio, disk_space_warning_level_ratio=100, clean_file_forcibly_enable=False)
    acked, refused = fill_until_refused(store)
    assert refused.status is PutMessageStatus.SERVICE_NOT_AVAILABLE and refused.disk_full
    assert "full" in refused.error
    end = store.commitlog.max_offset
    # every further put is refused the same way, nothing is written, reads go on
    for _ in range(3):
        r = store.put_message(Message("Full", b"more"))
        assert r.disk_full and store.commitlog.max_offset == end
    got = store.get_message("g", "Full", 0, 0, 10_000)
    assert [decode_message(m).body for m in got.messages] == [b"%06d" % i + b"x" * 3000 for i in range(len(acked))]
    batch = build_batch([Record(0, 0, None, b"v" * 4000, [])])
    assert store.put_record_batch("Full", 0, batch).disk_full
    assert store.disk.enospc_count >= 1 and store.disk.puts_refused >= 4
    # space returns: the next look finds it and puts resume by themselves
    fio.capacity += 8 << 20
    store.disk.refresh(store.confirmed_offset)
    r = store.put_message(Message("Full", b"after"))
    assert r.ok and r.queue_offset == len(acked)
    assert store.put_record_batch("Full", 0, batch).ok


def test_warning_ratio_refuses_before_the_disk_is_really_full(make_store):
    fio = MemoryFileIO(capacity=4 << 20)
    store = make_store(file_io=fio, disk_space_warning_level_ratio=50, clean_file_forcibly_enable=False)
    acked, refused = fill_until_refused(store)
    assert refused.disk_full and "diskSpaceWarningLevelRatio 50%" in refused.error
    assert store.disk.enospc_count == 0  # refused by the ratio, before any reservation failed
    total, used = fio.disk_usage(store.root)
    assert 0.5 * total < used < 0.6 * total  # checked on the put path, not 10 s later


def test_a_multi_unit_put_that_does_not_fit_stores_none_of_it(make_store):
    fio = MemoryFileIO(capacity=1 << 20)
    store = make_store(file_io=fio, disk_space_warning_level_ratio=100, clean_file_forcibly_enable=False,
                       mapped_file_size_commit_log=8 << 20)
    fill_until_refused(store, topic="Other", size=200)
    fio.capacity = fio.used + 3 * PAGE_SIZE  # room for a few units, not for the whole batch
    store.disk.refresh(store.confirmed_offset)
    before = (store.commitlog.max_offset, store.get_max_offset_in_queue("B", 0))
    r = store.put_messages([Message("B", b"y" * 1500) for _ in range(20)])
    assert r.disk_full
    assert (store.commitlog.max_offset, store.get_max_offset_in_queue("B", 0)) == before


def test_index_keys_not_written_on_a_full_disk_leave_messages_readable(make_store):
    fio = MemoryFileIO(capacity=3 << 20)
    store = make_store(file_io=fio, disk_space_warning_level_ratio=100, clean_file_forcibly_enable=False,
                       max_hash_slot_num=64, max_index_num=4)  # index files fill fast: new ones need space
    acked, _ = fill_until_refused(store)
    store.dispatcher.wait_dispatched(store.confirmed_offset, 5)
    assert store.dispatcher.is_alive()
    got = store.get_message("g", "Full", 0, 0, 100_000)
    assert len(got.messages) == len(acked)


def test_above_the_forcibly_ratio_the_oldest_segments_go_and_queue_min_offsets_move(make_store):
    fio = MemoryFileIO(capacity=8 << 20)
    store = make_store(file_io=fio, mapped_file_size_commit_log=512 * 1024, disk_space_clean_forcibly_ratio=60,
                       disk_space_warning_level_ratio=95, disk_max_used_space_ratio=99)
    cleaned = threading.Event()
    refused = 0
    for i in range(4000):  # 3 MB per pass of 1000, i.e. the disk's size three times over in total
        r = store.put_message(Message("Old", b"%06d" % i + b"z" * 2000))
        refused += not r.ok
        if store.disk.segments_deleted_forcibly:
            cleaned.set()
    assert cleaned.is_set()
    # the background thread keeps up: usage ends below the warning ratio, puts keep working
    assert store.put_message(Message("Old", b"last")).ok
    low = store.get_min_offset_in_queue("Old", 0)
    assert low > 0
    got = store.get_message("g", "Old", 0, 0, 1)
    assert got.status.name == "OFFSET_TOO_SMALL" and got.next_begin_offset == low
    first = store.get_message("g", "Old", 0, low, 1)
    assert decode_message(first.messages[0]).body.startswith(b"%06d" % low)
    assert store.commitlog.min_offset > 0
