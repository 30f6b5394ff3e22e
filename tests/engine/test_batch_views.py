"""Kafka batches handed to the store as read-only views of the request they arrived in (the
produce path copies nothing): stored and served byte for byte, recovered after a restart, and
the delay-header scan still finds a delayed record inside a view."""

from __future__ import annotations

import pytest

from engine import record_batch as rb
from engine import store_puts
from engine.message import decode_message


def large_batch(n: int = 40, delayed_at: int | None = None, compression: int = rb.COMPRESSION_NONE) -> bytes:
    records = [rb.Record(i, i, b"k%d" % i, bytes([65 + i % 26]) * 1000,
                         [("rmq.delay.level", b"1")] if i == delayed_at else [("h", b"v")]) for i in range(n)]
    return rb.build_batch(records, compression=compression)


def in_request(batch: bytes) -> tuple[bytes, memoryview]:
    """A request frame holding ``batch`` between other bytes, and the read-only view of it."""
    frame = b"\x00\x01\x02" + batch + b"next batch"
    return frame, memoryview(frame)[3:3 + len(batch)]


def stored_bodies(store, topic: str, queue: int) -> list[bytes]:
    got = store.get_message("g", topic, queue, 0, 1000)
    return [decode_message(m, check_crc=True).body for m in got.messages]  # BODYCRC checked too


def test_a_large_batch_from_a_view_is_stored_as_received_and_recovered(make_store):
    raw = large_batch()
    assert len(raw) >= store_puts.SPLIT_MIN  # written as a split unit
    frame, view = in_request(raw)
    store = make_store()
    first = store.put_record_batch("V", 0, view)
    small = store.put_record_batch("V", 0, rb.build_batch([rb.Record(0, 0, None, b"s", [])]))
    second = store.put_record_batch("V", 0, in_request(raw)[1])
    assert first.ok and small.ok and second.ok
    assert (first.queue_offset, small.queue_offset, second.queue_offset) == (0, 40, 41)
    assert frame[3:3 + len(raw)] == raw  # the request itself is not written to
    bodies = stored_bodies(store, "V", 0)
    assert [rb.parse_header(b).base_offset for b in bodies] == [0, 40, 41]
    for body in (bodies[0], bodies[2]):
        assert body[8:] == raw[8:]  # all but the base offset, as received
        assert rb.validate_batch(body).records_count == 40
    store.shutdown()
    again = make_store()  # recovery verifies every unit (sizes, BODYCRC) before keeping it
    assert again.get_max_offset_in_queue("V", 0) == 81
    assert stored_bodies(again, "V", 0) == bodies
    assert again.put_record_batch("V", 0, in_request(raw)[1]).queue_offset == 81


def test_split_and_joined_units_are_the_same_bytes(make_store, tmp_path, monkeypatch):
    raw = large_batch()
    split = make_store(root=tmp_path / "split")
    split.put_record_batch("V", 0, in_request(raw)[1])
    monkeypatch.setattr(store_puts, "SPLIT_MIN", 1 << 30)  # the contiguous unit of before
    joined = make_store(root=tmp_path / "joined")
    joined.put_record_batch("V", 0, raw)
    a = bytearray(split.commitlog.read(0, split.commitlog.max_offset))
    b = bytearray(joined.commitlog.read(0, joined.commitlog.max_offset))
    for unit in (a, b):  # the store time is the only field that may differ
        unit[56:64] = bytes(8)
    assert a == b


@pytest.mark.parametrize("compression", [rb.COMPRESSION_NONE, rb.COMPRESSION_LZ4])
def test_a_delayed_record_inside_a_view_is_found_and_staged(make_store, compression):
    store = make_store(message_delay_level="1s 1s 1s")
    raw = large_batch(12, delayed_at=5, compression=compression)
    res = store.put_record_batch("D", 0, in_request(raw)[1])
    assert res.ok and res.queue_offset == 0 and store.get_max_offset_in_queue("D", 0) == 12
    units = store.get_message("g", "D", 0, 0, 100).units
    # records 0-4, the placeholder of the delayed record 5, records 6-11
    assert [(u.queue_offset, u.record_count) for u in units] == [(0, 5), (5, 1), (6, 6)]
    placeholder = decode_message(store.get_message("g", "D", 0, 5, 1).messages[0]).body
    assert rb.parse_header(placeholder).is_control
