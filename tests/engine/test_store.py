"""MessageStore facade: puts are readable when they return, offsets, reads, restarts, limits."""

from __future__ import annotations

import os
import threading

import pytest

from engine.errors import StoreError, StoreLockedError
from engine.message import Message, decode_message
from engine.store import GetMessageStatus, MessageStore, PutMessageStatus

from engine_support import small_config


def test_put_is_visible_and_offsets_are_contiguous(make_store):
    store = make_store()
    for i in range(30):
        r = store.put_message(Message("T", b"m%d" % i, queue_id=i % 3))
        assert r.ok and r.queue_offset == i // 3 and r.record_count == 1
        assert store.get_max_offset_in_queue("T", i % 3) == i // 3 + 1
        got = store.get_message("g", "T", i % 3, r.queue_offset, 1)
        assert got.status is GetMessageStatus.FOUND
        m = decode_message(got.messages[0])
        assert (m.body, m.queue_offset, m.commitlog_offset, m.msg_id) == (b"m%d" % i, r.queue_offset,
                                                                          r.commitlog_offset, r.msg_id)


def test_get_message_statuses(make_store):
    store = make_store()
    assert store.get_message("g", "none", 0, 0, 10).status is GetMessageStatus.NO_MESSAGE_IN_QUEUE
    for i in range(5):
        store.put_message(Message("T", b"x"))
    r = store.get_message("g", "T", 0, 5, 10)
    assert r.status is GetMessageStatus.OFFSET_OVERFLOW_ONE and r.next_begin_offset == 5
    r = store.get_message("g", "T", 0, 9, 10)
    assert r.status is GetMessageStatus.OFFSET_OVERFLOW_BADLY and r.next_begin_offset == 5
    store.delete_records("T", 0, 2)
    r = store.get_message("g", "T", 0, 1, 10)
    assert r.status is GetMessageStatus.OFFSET_TOO_SMALL and r.next_begin_offset == 2
    r = store.get_message("g", "T", 0, 2, 10)
    assert r.status is GetMessageStatus.FOUND and len(r.messages) == 3 and r.next_begin_offset == 5
    assert (r.min_offset, r.max_offset) == (2, 5)


def test_segments_roll_over_and_every_message_reads_back(make_store):
    store = make_store(mapped_file_size_commit_log=4096)
    sent = []
    for i in range(300):
        body = os.urandom(i % 200)
        r = store.put_message(Message("Roll", body, keys=[f"k{i}"]))
        assert r.ok
        sent.append(body)
    assert len(os.listdir(os.path.join(store.root, "commitlog"))) > 10
    got, offset = [], 0
    while offset < 300:
        r = store.get_message("g", "Roll", 0, offset, 32)
        assert r.status is GetMessageStatus.FOUND
        got += [decode_message(m).body for m in r.messages]
        offset = r.next_begin_offset
    assert got == sent


def test_max_bytes_and_max_msgs_bound_a_read(make_store):
    store = make_store()
    for i in range(10):
        store.put_message(Message("T", b"x" * 100))
    r = store.get_message("g", "T", 0, 0, 4)
    assert len(r.messages) == 4 and r.next_begin_offset == 4
    r = store.get_message("g", "T", 0, 0, 100, max_bytes=450)
    assert 1 <= len(r.messages) < 10 and r.buffer_total_size <= 450
    r = store.get_message("g", "T", 0, 0, 100, max_bytes=1)
    assert len(r.messages) == 1  # always at least one message


def test_restart_keeps_messages_offsets_and_configs(make_store, tmp_path):
    from engine.topic_config import TopicConfig

    store = make_store()
    for i in range(20):
        store.put_message(Message("T", b"v%d" % i, queue_id=1))
    store.topic_config.create_or_update(TopicConfig("T", 4, 4, attributes={"retention.ms": "1000"}))
    store.consumer_offsets.commit("g1", "T", 1, 7, metadata="meta")
    store.shutdown()
    again = make_store()
    assert again.get_max_offset_in_queue("T", 1) == 20
    assert again.topic_config.get("T").attributes == {"retention.ms": "1000"}
    assert again.consumer_offsets.query("g1", "T", 1) == 7
    assert again.consumer_offsets.query_metadata("g1", "T", 1) == "meta"
    r = again.put_message(Message("T", b"after", queue_id=1))
    assert r.queue_offset == 20
    assert decode_message(again.get_message("g", "T", 1, 19, 1).messages[0]).body == b"v19"


def test_second_store_on_same_directory_is_refused(make_store, tmp_path):
    make_store()
    other = MessageStore(small_config(tmp_path / "store"))
    with pytest.raises(StoreLockedError, match="in use by another process"):
        other.start()


def test_unwritable_data_dir_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    store = MessageStore(small_config(blocker / "store"))
    with pytest.raises(StoreError, match="not writable"):
        store.start()


def test_bad_input_gets_statuses_naming_the_limit(make_store):
    store = make_store(max_message_size=1000)
    r = store.put_message(Message("T", b"x" * 1001))
    assert r.status is PutMessageStatus.MESSAGE_ILLEGAL and "maxMessageSize 1000" in r.error
    r = store.put_message(Message("bad topic!", b"x"))
    assert r.status is PutMessageStatus.MESSAGE_ILLEGAL and "topic" in r.error
    r = store.put_message(Message("", b"x"))
    assert r.status is PutMessageStatus.MESSAGE_ILLEGAL
    r = store.put_message(Message("t" * 300, b"x"))
    assert r.status is PutMessageStatus.MESSAGE_ILLEGAL and "maxTopicLength" in r.error
    r = store.put_message(Message("T", b"x", properties={"big": "v" * 40000}))
    assert r.status is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED and "32767" in r.error
    r = store.put_message(Message("T", b"x", queue_id=-1))
    assert r.status is PutMessageStatus.MESSAGE_ILLEGAL
    # none of that touched the store
    assert store.commitlog.max_offset == 0
    assert store.put_message(Message("T", b"fine")).queue_offset == 0


def test_concurrent_writers_get_unique_contiguous_offsets(make_store):
    store = make_store(mapped_file_size_commit_log=8192)
    results: list[int] = []
    lock = threading.Lock()

    def writer(n):
        for i in range(100):
            r = store.put_message(Message("C", b"%d-%d" % (n, i)))
            assert r.ok
            with lock:
                results.append(r.queue_offset)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(results) == list(range(400))


def test_put_messages_batch_is_contiguous(make_store):
    store = make_store()
    r = store.put_messages([Message("B", b"a"), Message("B", b"b"), Message("B", b"c")])
    assert r.ok and r.queue_offset == 0 and r.record_count == 3 and len(r.msg_id.split(",")) == 3
    got = store.get_message("g", "B", 0, 0, 10)
    assert [decode_message(m).body for m in got.messages] == [b"a", b"b", b"c"]
    bad = store.put_messages([Message("B", b"a"), Message("Other", b"b")])
    assert bad.status is PutMessageStatus.MESSAGE_ILLEGAL


def test_look_message_by_id_and_offset(make_store):
    store = make_store()
    store.put_message(Message("T", b"first"))
    r = store.put_message(Message("T", b"second", tags="TagB"))
    m = store.look_message_by_id(r.msg_id)
    assert m.body == b"second" and m.tags == "TagB"
    assert store.look_message_by_offset(r.commitlog_offset).body == b"second"
    assert store.look_message_by_id("nothex") is None


def test_put_after_shutdown_is_refused(make_store):
    store = make_store()
    store.shutdown()
    r = store.put_message(Message("T", b"x"))
    assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE


def test_offset_by_time_and_earliest_time(make_store):
    import time as _time

    store = make_store(mapped_file_size_commit_log=4096)
    stamps = []
    for i in range(120):
        r = store.put_message(Message("Time", b"x" * 50))
        stamps.append(r.store_timestamp)
        if i in (40, 80):
            deadline = _time.monotonic() + 5
            while int(_time.time() * 1000) <= r.store_timestamp + 5 and _time.monotonic() < deadline:
                _time.sleep(0.002)
    assert store.get_earliest_message_time("Time", 0) == stamps[0]
    assert store.get_offset_in_queue_by_time("Time", 0, 0) == 0
    assert store.get_offset_in_queue_by_time("Time", 0, stamps[41]) == stamps.index(stamps[41])
    assert store.get_offset_in_queue_by_time("Time", 0, stamps[81]) == stamps.index(stamps[81])
    assert store.get_offset_in_queue_by_time("Time", 0, stamps[-1] + 1) == 120
    assert store.get_message_store_timestamp("Time", 0, 100) == stamps[100]
    assert store.get_earliest_message_time("Empty", 0) == -1


def test_topic_retention_ms_moves_the_start_of_that_topic_only(make_store):
    """A topic with the ``retention.ms`` attribute stops serving what was stored longer ago; a
    topic without it keeps everything; the new start survives a restart."""
    from engine.topic_config import TopicConfig

    store = make_store()
    store.topic_config.create_or_update(TopicConfig("Short", 1, 1, attributes={"retention.ms": "60000"}))
    store.topic_config.create_or_update(TopicConfig("Long", 1, 1))
    stamps = [store.put_message(Message(t, b"%d" % i, queue_id=0)).store_timestamp
              for i in range(6) for t in ("Short", "Long")]
    assert store.apply_topic_retention(now_ms=stamps[0] + 30_000) == 0  # nothing older than 60 s yet
    assert store.apply_topic_retention(now_ms=stamps[-1] + 60_001) == 1
    assert store.get_min_offset_in_queue("Short", 0) == 6  # every record is past retention
    assert store.get_min_offset_in_queue("Long", 0) == 0
    assert store.get_message("g", "Short", 0, 0, 10).status.name == "OFFSET_TOO_SMALL"
    store.shutdown()
    again = make_store()
    assert again.get_min_offset_in_queue("Short", 0) == 6 and again.get_max_offset_in_queue("Short", 0) == 6
    assert again.get_min_offset_in_queue("Long", 0) == 0


def test_topic_retention_bytes_keeps_the_newest_whole_batches_per_queue(make_store):
    """``retention.bytes``: per queue, the newest stored units that fit stay; a Kafka batch
    (several offsets, one unit) is counted once and never split; a small queue keeps all."""
    from engine import record_batch as rb
    from engine.topic_config import TopicConfig

    store = make_store()
    store.topic_config.create_or_update(TopicConfig("Sized", 2, 2, attributes={"retention.bytes": "3000"}))
    sizes = []
    for i in range(8):   # 8 batches of 4 records, ~1 KiB each
        batch = rb.build_batch([rb.Record(j, 0, None, b"%d" % i + b"." * 250, []) for j in range(4)],
                               base_timestamp=1000 + i)
        res = store.put_record_batch("Sized", 0, batch)
        assert res.stored
        sizes.append(res.wrote_bytes)
    store.put_message(Message("Sized", b"small", queue_id=1))
    assert store.apply_topic_retention() == 1
    kept = 0
    while kept + 1 <= len(sizes) and sum(sizes[-(kept + 1):]) <= 3000:
        kept += 1
    assert 1 <= kept < 8
    assert store.get_min_offset_in_queue("Sized", 0) == (8 - kept) * 4   # a batch boundary
    assert store.get_min_offset_in_queue("Sized", 1) == 0
    assert store.apply_topic_retention() == 0   # already within the limit
    store.shutdown()


def test_delete_records_raises_low_watermark_and_persists(make_store):
    store = make_store()
    for i in range(10):
        store.put_message(Message("D", b"%d" % i))
    assert store.delete_records("D", 0, 4) == 4
    assert store.get_min_offset_in_queue("D", 0) == 4
    assert store.delete_records("D", 0, 2) == 4  # never moves back
    assert store.delete_records("D", 0, 99) == 10  # clamped to the high watermark
    store.shutdown()
    again = make_store()
    assert again.get_min_offset_in_queue("D", 0) == 10 and again.get_max_offset_in_queue("D", 0) == 10


def test_delete_topic_removes_queues_config_and_offsets(make_store):
    from engine.topic_config import TopicConfig

    store = make_store()
    store.topic_config.create_or_update(TopicConfig("Gone"))
    store.put_message(Message("Gone", b"x", queue_id=1))
    store.consumer_offsets.commit("g", "Gone", 1, 1)
    store.delete_topic("Gone")
    assert store.topic_config.get("Gone") is None
    assert store.get_max_offset_in_queue("Gone", 1) == 0
    assert store.consumer_offsets.query("g", "Gone", 1) == -1
    r = store.put_message(Message("Gone", b"again", queue_id=1))
    assert r.queue_offset == 0


def test_cli_refuses_a_data_dir_in_use(make_store, tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    store = make_store()
    exe = Path(sys.executable).with_name("rockafka")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "rockafka.cli"]
    proc = subprocess.run(cmd + ["serve", "--host", "127.0.0.1", "--data-dir", store.root, "--kafka-port", "0",
                                 "--namesrv-port", "0", "--broker-port", "0", "--admin-port", "0", "--ha-port", "0"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "in use by another process" in proc.stderr


def test_full_disk_when_creating_a_segment_is_reported_and_harmless(make_store):
    import errno

    from engine.file_io import MemoryFileIO

    class FullDisk(MemoryFileIO):
        full = False

        def open_segment(self, path, size, random_access=False, log_writes=False):
            if self.full and path not in self.files:
                raise OSError(errno.ENOSPC, "No space left on device")
            return super().open_segment(path, size, random_access, log_writes)

    fio = FullDisk()
    store = make_store(file_io=fio, mapped_file_size_commit_log=4096)
    ok = [store.put_message(Message("Full", b"x" * 500)) for _ in range(6)]
    assert all(r.ok for r in ok) and len(store.commitlog.mfq.files) == 1  # the next one needs a new segment
    fio.full = True
    failed = [store.put_message(Message("Full", b"x" * 500)) for _ in range(3)]
    assert all(r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE and r.disk_full for r in failed)
    assert "disk" in failed[0].error and "full" in failed[0].error
    fio.full = False
    r = store.put_message(Message("Full", b"after"))
    assert r.ok and r.queue_offset == 6
    got = store.get_message("g", "Full", 0, 0, 100)
    assert len(got.messages) == 7 and decode_message(got.messages[-1]).body == b"after"


def test_a_store_can_be_started_again_after_shutdown(make_store):
    store = make_store()
    store.put_message(Message("Again", b"one"))
    store.shutdown()
    store.start()
    assert store.get_max_offset_in_queue("Again", 0) == 1
    assert store.put_message(Message("Again", b"two")).queue_offset == 1
    assert len(os.listdir(os.path.join(store.root, "commitlog"))) == 1


def test_malformed_messages_are_refused_not_raised(make_store):
    store = make_store()
    assert store.put_message(Message("T", "a str body")).status is PutMessageStatus.MESSAGE_ILLEGAL
    assert store.put_message(Message(b"bytes-topic", b"x")).status is PutMessageStatus.MESSAGE_ILLEGAL
    r = store.put_message(Message("T", b"x", properties={"a\x01b": "v"}))
    assert r.status is PutMessageStatus.MESSAGE_ILLEGAL and "separator" in r.error
    r = store.put_message(Message("T", b"x", properties={"k": "v\x02w"}))
    assert r.status is PutMessageStatus.MESSAGE_ILLEGAL
    assert store.commitlog.max_offset == 0
    r = store.put_message(Message("T", memoryview(b"view"), keys="single-key"))
    assert r.ok and store.look_message_by_id(r.msg_id).keys == ["single-key"]
