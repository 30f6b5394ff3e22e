"""Retention: expired commitlog segments go, queue min offsets and index files follow."""

from __future__ import annotations

import os
import time
from datetime import datetime

from engine.message import Message, decode_message
from engine.store import GetMessageStatus


def age_segments(store, hours: float) -> None:
    """Make every commitlog segment but the last look ``hours`` old (retention reads mtime)."""
    d = os.path.join(store.root, "commitlog")
    names = sorted(os.listdir(d))
    old = time.time() - hours * 3600
    for name in names[:-1]:
        os.utime(os.path.join(d, name), (old, old))


def fill(store, n=300):
    results = []
    for i in range(n):
        results.append(store.put_message(Message("Ret", b"%05d" % i + b"." * 60, keys=[f"k{i}"])))
    return results


def test_expired_segments_are_deleted_and_min_offsets_move(make_store):
    store = make_store(mapped_file_size_commit_log=4096)
    results = fill(store)
    segments_before = len(os.listdir(os.path.join(store.root, "commitlog")))
    age_segments(store, 100)
    deleted = store.clean_expired_files(force=True)
    assert deleted == 10  # at most 10 segments per pass, as RocketMQ's deleteFileBatchMax
    while (more := store.clean_expired_files(force=True)) > 0:
        deleted += more
    assert deleted == segments_before - 1
    cl_min = store.commitlog.min_offset
    first_kept = next(r.queue_offset for r in results if r.commitlog_offset >= cl_min)
    assert store.get_min_offset_in_queue("Ret", 0) == first_kept > 0
    got = store.get_message("g", "Ret", 0, 0, 10)
    assert got.status is GetMessageStatus.OFFSET_TOO_SMALL and got.next_begin_offset == first_kept
    got = store.get_message("g", "Ret", 0, first_kept, 1000)
    assert [decode_message(m).queue_offset for m in got.messages] == list(range(first_kept, 300))
    assert len(os.listdir(os.path.join(store.root, "consumequeue", "Ret", "0"))) == 1
    # the same after a restart
    store.shutdown()
    again = make_store(mapped_file_size_commit_log=4096)
    assert again.get_min_offset_in_queue("Ret", 0) == first_kept
    assert again.put_message(Message("Ret", b"new")).queue_offset == 300


def test_unexpired_segments_stay(make_store):
    store = make_store(mapped_file_size_commit_log=4096)
    fill(store, 100)
    age_segments(store, 10)  # younger than fileReservedTime (72 h)
    assert store.clean_expired_files(force=True) == 0
    assert store.get_min_offset_in_queue("Ret", 0) == 0


def test_delete_when_gates_deletion_by_hour(make_store):
    other_hour = f"{(datetime.now().hour + 12) % 24:02d}"
    store = make_store(mapped_file_size_commit_log=4096, delete_when=other_hour, disk_max_used_space_ratio=99,
                       disk_space_clean_forcibly_ratio=99, disk_space_warning_level_ratio=99)
    fill(store, 100)
    age_segments(store, 100)
    assert store.clean_expired_files() == 0
    store.config.delete_when = f"{other_hour};{datetime.now().hour:02d};{(datetime.now().hour + 1) % 24:02d}"
    assert store.clean_expired_files() > 0


def test_disk_pressure_deletes_expired_files_at_any_hour(make_store):
    other_hour = f"{(datetime.now().hour + 12) % 24:02d}"
    store = make_store(mapped_file_size_commit_log=4096, delete_when=other_hour, disk_max_used_space_ratio=0,
                       disk_space_clean_forcibly_ratio=99, disk_space_warning_level_ratio=99)
    fill(store, 100)
    age_segments(store, 100)
    assert store.clean_expired_files() > 0


def test_index_files_below_the_log_are_deleted_and_time_search_spans_segments(make_store):
    store = make_store(mapped_file_size_commit_log=4096, max_index_num=40)
    results = fill(store)
    deadline = time.monotonic() + 10
    while store.dispatcher.reput_offset < store.confirmed_offset and time.monotonic() < deadline:
        time.sleep(0.01)
    index_files_before = len(os.listdir(os.path.join(store.root, "index")))
    assert store.get_offset_in_queue_by_time("Ret", 0, results[150].store_timestamp) <= 150
    age_segments(store, 100)
    while store.clean_expired_files(force=True) > 0:
        pass
    assert len(os.listdir(os.path.join(store.root, "index"))) < index_files_before
    assert store.query_message("Ret", "k299", 5, 0, 2**62).messages
    assert store.query_message("Ret", "k0", 5, 0, 2**62).messages == []
    assert store.get_offset_in_queue_by_time("Ret", 0, 0) == store.get_min_offset_in_queue("Ret", 0)
