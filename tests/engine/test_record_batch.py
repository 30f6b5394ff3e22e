"""RecordBatch v2 codec: header parsing, validation, offset patching, splitting, records.

Cross-checked against kafka-python's own batch builder and reader (real code on both sides).
"""

from __future__ import annotations

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from engine import record_batch as rb


def kafka_python_batch(n=3, compression=0, producer_id=-1, producer_epoch=-1, base_sequence=-1,
                       transactional=False, ts=1_700_000_000_000):
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=compression, is_transactional=transactional,
        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
        batch_size=1 << 20)
    for i in range(n):
        builder.append(i, timestamp=ts + i, key=b"key-%d" % i if i % 2 == 0 else None,
                       value=(b"value-%d " % i) * 40, headers=[("h", b"x%d" % i)])
    return bytes(builder.build())


def test_parse_header_of_kafka_python_batch():
    buf = kafka_python_batch(n=3, producer_id=42, producer_epoch=7, base_sequence=100)
    h = rb.parse_header(buf)
    assert h.magic == 2
    assert h.size == len(buf)
    assert h.last_offset_delta == 2 and h.records_count == 3
    assert rb.record_count(buf) == 3
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (42, 7, 100)
    assert h.base_timestamp == 1_700_000_000_000 and h.max_timestamp == 1_700_000_000_002
    assert h.compression == rb.COMPRESSION_NONE
    assert h.timestamp_type == rb.TIMESTAMP_CREATE_TIME
    assert not h.is_transactional and not h.is_control
    assert rb.validate_batch(buf) == h


def test_transactional_flag_and_compression_bits():
    buf = kafka_python_batch(compression=1, producer_id=1, producer_epoch=0, base_sequence=0,
                             transactional=True)
    h = rb.validate_batch(buf)
    assert h.is_transactional and h.compression == rb.COMPRESSION_GZIP


def test_set_base_offset_keeps_crc_valid():
    buf = bytearray(kafka_python_batch())
    rb.set_base_offset(buf, 123456789)
    h = rb.validate_batch(buf)
    assert h.base_offset == 123456789 and h.last_offset == 123456791
    view = memoryview(bytearray(buf))
    rb.set_base_offset(view, 5)
    assert rb.parse_header(view).base_offset == 5


def test_short_buffer_is_a_clear_error():
    buf = kafka_python_batch()
    with pytest.raises(rb.CorruptRecordError, match="needs 61 bytes"):
        rb.parse_header(buf[:40])
    with pytest.raises(rb.CorruptRecordError, match="needs 61 bytes"):
        rb.record_count(buf[:10])


def test_wrong_magic_is_a_clear_error():
    buf = bytearray(kafka_python_batch())
    buf[rb.MAGIC_OFFSET] = 1
    with pytest.raises(rb.CorruptRecordError, match="magic 1"):
        rb.parse_header(buf)
    with pytest.raises(rb.CorruptRecordError, match="magic 1"):
        list(rb.iter_batches(bytes(buf)))


def test_crc_mismatch_detected():
    buf = bytearray(kafka_python_batch())
    buf[-1] ^= 0xFF
    with pytest.raises(rb.CorruptRecordError, match="CRC"):
        rb.validate_batch(buf)


def test_length_mismatch_detected():
    buf = kafka_python_batch()
    with pytest.raises(rb.CorruptRecordError, match="length"):
        rb.validate_batch(buf + b"\x00")
    with pytest.raises(rb.CorruptRecordError, match="length"):
        rb.validate_batch(buf[:-1])


def test_iter_batches_splits_consecutive_batches():
    a, b, c = kafka_python_batch(1), kafka_python_batch(4), kafka_python_batch(2, compression=1)
    views = list(rb.iter_batches(a + b + c))
    assert [bytes(v) for v in views] == [a, b, c]
    assert [rb.record_count(v) for v in views] == [1, 4, 2]
    assert list(rb.iter_batches(b"")) == []


def test_iter_batches_rejects_trailing_garbage_and_truncation():
    a = kafka_python_batch()
    with pytest.raises(rb.CorruptRecordError):
        list(rb.iter_batches(a + b"\x00\x01\x02"))
    with pytest.raises(rb.CorruptRecordError, match="remain"):
        list(rb.iter_batches(a + a[:-5]))
