"""Kafka record batches stored as one INNER_BATCH unit with one queue offset per record."""

from __future__ import annotations

import pytest

from engine import record_batch
from engine.message import INNER_BATCH_FLAG, decode_message
from engine.record_batch import Record, build_batch
from engine.store import GetMessageStatus, PutMessageStatus


def batch_of(n: int, key_prefix: str = "key") -> bytes:
    return build_batch([Record(i, i, f"{key_prefix}{i}".encode(), b"value-%d" % i, [("h", b"v")]) for i in range(n)])


def test_batch_takes_n_offsets_and_its_base_offset_is_patched(make_store):
    store = make_store()
    r1 = store.put_record_batch("K", 0, batch_of(5))
    r2 = store.put_record_batch("K", 0, batch_of(3))
    assert (r1.queue_offset, r1.record_count, r2.queue_offset, r2.record_count) == (0, 5, 5, 3)
    assert store.get_max_offset_in_queue("K", 0) == 8
    got = store.get_message("g", "K", 0, 0, 100)
    assert got.status is GetMessageStatus.FOUND and len(got.messages) == 2 and got.next_begin_offset == 8
    assert [(u.queue_offset, u.record_count, u.is_batch) for u in got.units] == [(0, 5, True), (5, 3, True)]
    second = decode_message(got.messages[1], check_crc=True)
    assert second.sys_flag & INNER_BATCH_FLAG and second.queue_offset == 5
    header = record_batch.validate_batch(second.body)  # Kafka CRC still valid after patching
    assert header.base_offset == 5
    assert [r.key for r in record_batch.decode_records(second.body)] == [b"key0", b"key1", b"key2"]


def test_read_from_inside_a_batch_returns_it_once(make_store):
    store = make_store()
    store.put_record_batch("K", 0, batch_of(10))
    store.put_record_batch("K", 0, batch_of(2))
    got = store.get_message("g", "K", 0, 7, 1)
    assert len(got.messages) == 1 and got.units[0].queue_offset == 0 and got.next_begin_offset == 10
    got = store.get_message("g", "K", 0, 7, 100)
    assert len(got.messages) == 2 and got.next_begin_offset == 12


def test_batches_and_messages_interleave_in_one_queue(make_store):
    from engine.message import Message

    store = make_store(mapped_file_size_commit_log=4096)
    expected = 0
    for i in range(60):
        if i % 2:
            r = store.put_record_batch("M", 1, batch_of(1 + i % 7))
        else:
            r = store.put_message(Message("M", b"single", queue_id=1))
        assert r.ok and r.queue_offset == expected
        expected += r.record_count
    offset, seen = 0, 0
    while offset < expected:
        got = store.get_message("g", "M", 1, offset, 50)
        for ref in got.units:
            assert ref.queue_offset == offset
            offset += ref.record_count
            seen += 1
        assert got.next_begin_offset == offset
    assert seen == 60


def test_corrupt_batch_is_refused_and_store_unchanged(make_store):
    store = make_store()
    good = bytearray(batch_of(3))
    good[-1] ^= 0xFF
    r = store.put_record_batch("K", 0, bytes(good))
    assert r.status is PutMessageStatus.MESSAGE_ILLEGAL and "CRC" in r.error
    r = store.put_record_batch("K", 0, b"short")
    assert r.status is PutMessageStatus.MESSAGE_ILLEGAL
    assert store.get_max_offset_in_queue("K", 0) == 0 and store.commitlog.max_offset == 0


def test_batch_survives_restart(make_store):
    store = make_store()
    store.put_record_batch("K", 2, batch_of(4))
    store.shutdown()
    again = make_store()
    assert again.get_max_offset_in_queue("K", 2) == 4
    r = again.put_record_batch("K", 2, batch_of(1))
    assert r.queue_offset == 4
    body = decode_message(again.get_message("g", "K", 2, 4, 1).messages[0]).body
    assert record_batch.parse_header(body).base_offset == 4


@pytest.mark.parametrize("compression", [record_batch.COMPRESSION_GZIP, record_batch.COMPRESSION_ZSTD])
def test_compressed_batches_are_stored_as_they_are(make_store, compression):
    store = make_store()
    raw = build_batch([Record(i, 0, None, b"v" * 100, []) for i in range(20)], compression=compression)
    r = store.put_record_batch("Z", 0, raw)
    assert r.ok and r.record_count == 20
    body = decode_message(store.get_message("g", "Z", 0, 0, 1).messages[0]).body
    assert body[12:] == raw[12:] and len(record_batch.decode_records(body)) == 20
