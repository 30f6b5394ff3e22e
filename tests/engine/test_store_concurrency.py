"""Writers, readers, retention and topic deletion at once: no errors, reads stay consistent."""

from __future__ import annotations

import threading

from engine.message import Message, decode_message
from engine.record_batch import Record, build_batch
from engine.store import GetMessageStatus


def test_concurrent_puts_reads_retention_and_topic_deletion(make_store):
    store = make_store(mapped_file_size_commit_log=8192, file_reserved_time=0, flush_interval_consume_queue=10)
    errors: list[str] = []
    writers_done = threading.Event()

    def writer(n):
        try:
            for i in range(300):
                if i % 5 == 0:
                    r = store.put_record_batch("W", n % 2, build_batch([Record(j, 0, b"k%d" % j, b"v", []) for j in range(3)]))
                else:
                    r = store.put_message(Message("W", b"x" * (i % 200), keys=[f"k{i}"], queue_id=n % 2))
                assert r.ok, r
        except Exception as exc:  # reported below; a thread must not die silently
            errors.append(f"writer: {exc!r}")

    def reader(q):
        offset = 0
        try:
            for _ in range(100_000):
                if writers_done.is_set() and offset >= store.get_max_offset_in_queue("W", q):
                    return
                got = store.get_message("g", "W", q, offset, 32)
                if got.status is GetMessageStatus.FOUND:
                    for raw, ref in zip(got.messages, got.units):
                        m = decode_message(raw, check_crc=True)
                        assert m.queue_offset == ref.queue_offset and m.queue_offset + ref.record_count > offset
                offset = max(offset, got.next_begin_offset)
                store.query_message("W", "k3", 5, 0, 2**62)
        except Exception as exc:
            errors.append(f"reader: {exc!r}")

    def cleaner():
        try:
            for i in range(200):
                if writers_done.is_set():
                    return
                store.clean_expired_files(force=True)
                store.put_message(Message("Tmp", b"x"))
                store.delete_topic("Tmp")
        except Exception as exc:
            errors.append(f"cleaner: {exc!r}")

    writers = [threading.Thread(target=writer, args=(n,)) for n in range(3)]
    others = [threading.Thread(target=reader, args=(q,)) for q in range(2)] + [threading.Thread(target=cleaner)]
    for t in writers + others:
        t.start()
    for t in writers:
        t.join(120)
    writers_done.set()
    for t in others:
        t.join(120)
    assert errors == []
    for q in range(2):
        offset = store.get_min_offset_in_queue("W", q)
        end = store.get_max_offset_in_queue("W", q)
        while offset < end:
            got = store.get_message("g", "W", q, offset, 64)
            assert got.status is GetMessageStatus.FOUND
            for ref in got.units:
                assert ref.queue_offset <= offset < ref.queue_offset + ref.record_count
                offset = ref.queue_offset + ref.record_count
