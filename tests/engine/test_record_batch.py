"""RecordBatch v2 codec: header parsing, validation, offset patching, splitting, records.

Cross-checked against kafka-python's own batch builder and reader (real code on both sides).
"""

from __future__ import annotations

import re

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


# --- records ---------------------------------------------------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from kafka.record.default_records import DefaultRecordBatch  # noqa: E402

CODECS = [rb.COMPRESSION_NONE, rb.COMPRESSION_GZIP, rb.COMPRESSION_SNAPPY, rb.COMPRESSION_LZ4,
          rb.COMPRESSION_ZSTD]

header_values = st.one_of(st.none(), st.binary(max_size=40))
records_strategy = st.lists(
    st.tuples(
        st.integers(min_value=-(2**40), max_value=2**40),         # timestamp delta
        st.one_of(st.none(), st.binary(max_size=64)),            # key
        st.one_of(st.none(), st.binary(max_size=512)),           # value
        st.lists(st.tuples(st.text(max_size=12), header_values), max_size=4),
    ),
    min_size=1, max_size=20,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=records_strategy, codec=st.sampled_from(CODECS),
       base_offset=st.integers(min_value=0, max_value=2**62),
       base_ts=st.integers(min_value=0, max_value=2**45),
       pid=st.integers(min_value=-1, max_value=2**62),
       transactional=st.booleans())
def test_build_decode_round_trip(raw, codec, base_offset, base_ts, pid, transactional):
    records = [rb.Record(i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(raw)]
    buf = rb.build_batch(records, base_offset=base_offset, compression=codec,
                         producer_id=pid, producer_epoch=3, base_sequence=9,
                         is_transactional=transactional, base_timestamp=base_ts)
    header = rb.validate_batch(buf)
    assert header.base_offset == base_offset
    assert header.compression == codec
    assert header.record_count == len(records) == header.records_count
    assert header.is_transactional == transactional
    assert header.max_timestamp == base_ts + max(r.timestamp_delta for r in records)
    assert rb.decode_records(buf) == records
    assert [r.absolute_offset(header) for r in records] == list(range(base_offset, base_offset + len(records)))


def test_kafka_python_reads_what_we_build():
    records = [rb.Record(i, i * 10, b"k%d" % i if i % 2 else None, b"v%d" % i * 100,
                         [("trace", b"t%d" % i), ("empty", None)]) for i in range(7)]
    for codec in CODECS:
        buf = rb.build_batch(records, base_offset=40, compression=codec, base_timestamp=5000)
        batch = DefaultRecordBatch(buf)
        assert batch.validate_crc()
        got = [(m.offset, m.timestamp, m.key, m.value, m.headers) for m in batch]
        assert got == [(40 + i, 5000 + i * 10, r.key, r.value, r.headers) for i, r in enumerate(records)]


def test_we_read_what_kafka_python_builds():
    for codec in CODECS:
        buf = kafka_python_batch(n=5, compression=codec)
        header, records = rb.decode_batch(buf)
        assert header.compression == codec
        assert [r.key for r in records] == [b"key-0", None, b"key-2", None, b"key-4"]
        assert [r.value for r in records] == [(b"value-%d " % i) * 40 for i in range(5)]
        assert [r.headers for r in records] == [[("h", b"x%d" % i)] for i in range(5)]
        assert [r.absolute_timestamp(header) for r in records] == [1_700_000_000_000 + i for i in range(5)]


def test_snappy_reads_xerial_and_raw_and_writes_xerial():
    data = b"0123456789abcdef" * 5000  # several 32 KiB xerial chunks
    xerial = rb.compress(rb.COMPRESSION_SNAPPY, data)
    assert xerial[:8] == rb.XERIAL_MAGIC
    assert xerial[8:16] == b"\x00\x00\x00\x01\x00\x00\x00\x01"
    assert rb.decompress(rb.COMPRESSION_SNAPPY, xerial) == data
    import cramjam
    raw = bytes(cramjam.snappy.compress_raw(data))  # what librdkafka writes
    assert rb.decompress(rb.COMPRESSION_SNAPPY, raw) == data


def test_lz4_frames_have_independent_blocks():
    framed = rb.compress(rb.COMPRESSION_LZ4, b"x" * 300_000)
    assert framed[:4] == b"\x04\x22\x4d\x18"
    assert framed[4] & 0x20, "block independence flag must be set for Java's reader"
    assert rb.decompress(rb.COMPRESSION_LZ4, framed) == b"x" * 300_000


def test_corrupt_compressed_payload_is_a_clear_error():
    good = rb.build_batch([rb.Record(0, 0, None, b"hello" * 100, [])], compression=rb.COMPRESSION_ZSTD,
                          base_timestamp=0)
    bad = bytearray(good)
    bad[rb.HEADER_SIZE + 4:rb.HEADER_SIZE + 12] = b"\xff" * 8
    with pytest.raises(rb.CorruptRecordError, match="zstd"):
        rb.decode_records(bytes(bad))


def test_truncated_record_is_a_clear_error():
    good = rb.build_batch([rb.Record(0, 0, b"k", b"v" * 50, [("a", b"b")])], base_timestamp=0)
    bad = bytearray(good[:-10])
    bad[8:12] = (len(bad) - 12).to_bytes(4, "big")
    with pytest.raises(rb.CorruptRecordError):
        rb.decode_records(bytes(bad))


def test_control_batch_round_trip_and_kafka_python_agrees():
    buf = rb.build_control_batch(rb.CONTROL_TYPE_COMMIT, producer_id=77, producer_epoch=2,
                                 coordinator_epoch=5, base_offset=10, timestamp=1234)
    header, records = rb.decode_batch(buf)
    assert header.is_control and header.is_transactional and header.producer_id == 77
    assert rb.parse_control_record(records[0]) == rb.ControlRecord(rb.CONTROL_TYPE_COMMIT, 5, 0)
    batch = DefaultRecordBatch(buf)
    assert batch.is_control_batch and batch.validate_crc()
    abort = rb.build_control_batch(rb.CONTROL_TYPE_ABORT, producer_id=1, producer_epoch=0)
    assert rb.parse_control_record(rb.decode_records(abort)[0]).type == rb.CONTROL_TYPE_ABORT
    with pytest.raises(rb.CorruptRecordError):
        rb.parse_control_record(rb.Record(0, 0, b"\x00", None, []))


def test_log_append_time_records_report_batch_max_timestamp():
    buf = rb.build_batch([rb.Record(0, 0, None, b"a", []), rb.Record(1, 5, None, b"b", [])],
                         base_timestamp=100, timestamp_type=rb.TIMESTAMP_LOG_APPEND_TIME,
                         max_timestamp=9999)
    header, records = rb.decode_batch(buf)
    assert header.timestamp_type == rb.TIMESTAMP_LOG_APPEND_TIME
    assert [r.absolute_timestamp(header) for r in records] == [9999, 9999]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(codec=st.sampled_from(CODECS), data=st.data())
def test_mutated_batches_fail_only_with_corrupt_record_error(codec, data):
    records = [rb.Record(i, i, b"k%d" % i, b"value-%d" % i * 20, [("h", b"v"), ("n", None)]) for i in range(5)]
    buf = bytearray(rb.build_batch(records, compression=codec, base_timestamp=0))
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(rb.ATTRIBUTES_OFFSET, len(buf) - 1))
        buf[pos] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        cut = data.draw(st.integers(rb.HEADER_SIZE, len(buf)))
        buf = buf[:cut]
        buf[8:12] = (len(buf) - 12).to_bytes(4, "big")
    try:
        rb.decode_batch(bytes(buf))
    except rb.CorruptRecordError:
        pass
    with pytest.raises(rb.CorruptRecordError):
        if bytes(buf) != rb.build_batch(records, compression=codec, base_timestamp=0):
            rb.validate_batch(bytes(buf))  # the CRC catches every mutation
        else:
            raise rb.CorruptRecordError("unchanged")


@pytest.mark.parametrize("codec", CODECS[1:])
def test_decompression_is_bounded(codec):
    data = bytes(100_000)
    packed = rb.compress(codec, data)
    assert rb.decompress(codec, packed) == data
    assert rb.uncompressed_size_bound(codec, packed) >= len(data)
    with pytest.raises(rb.CorruptRecordError, match="more than"):
        rb.decompress(codec, packed, max_size=10_000)


def test_foreign_lz4_and_zstd_framing_is_bounded_too():
    import cramjam
    data = b"abc" * 100_000
    linked = bytes(cramjam.lz4.compress(data))  # linked blocks, as some writers make them
    assert rb.decompress(rb.COMPRESSION_LZ4, linked) == data
    assert rb.uncompressed_size_bound(rb.COMPRESSION_LZ4, linked) >= len(data)
    two_frames = rb.compress(rb.COMPRESSION_ZSTD, data) + rb.compress(rb.COMPRESSION_ZSTD, b"tail")
    assert rb.uncompressed_size_bound(rb.COMPRESSION_ZSTD, two_frames) >= len(data) + 4
    with pytest.raises(rb.CorruptRecordError, match="framing|magic"):
        rb.decompress(rb.COMPRESSION_ZSTD, b"\x00" * 32)


def test_concatenated_gzip_members_decode():
    import gzip
    assert rb.decompress(rb.COMPRESSION_GZIP, gzip.compress(b"one ") + gzip.compress(b"two")) == b"one two"
    with pytest.raises(rb.CorruptRecordError, match="truncated"):
        rb.decompress(rb.COMPRESSION_GZIP, gzip.compress(b"x" * 1000)[:-12])


def _reseal(buf: bytearray) -> bytes:
    import crc32c
    buf[rb.CRC_OFFSET:rb.CRC_OFFSET + 4] = crc32c.crc32c(bytes(buf[rb.ATTRIBUTES_OFFSET:])).to_bytes(4, "big")
    return bytes(buf)


def test_batch_claiming_more_records_than_it_holds_is_rejected():
    # each logical offset becomes a consume-queue entry: a 2-record batch may not claim 2**31
    for codec in CODECS:
        buf = bytearray(rb.build_batch([rb.Record(0, 0, None, b"v", []), rb.Record(1, 0, None, b"w", [])],
                                       compression=codec, base_timestamp=0))
        buf[rb.LAST_OFFSET_DELTA_OFFSET:rb.LAST_OFFSET_DELTA_OFFSET + 4] = (2**31 - 2).to_bytes(4, "big")
        buf[rb.RECORDS_COUNT_OFFSET:rb.RECORDS_COUNT_OFFSET + 4] = (2**31 - 1).to_bytes(4, "big")
        with pytest.raises(rb.CorruptRecordError, match="claims"):
            rb.validate_batch(_reseal(buf))


def test_records_count_must_match_offset_range():
    buf = bytearray(rb.build_batch([rb.Record(0, 0, None, b"v", []), rb.Record(1, 0, None, b"w", [])],
                                   base_timestamp=0))
    buf[rb.RECORDS_COUNT_OFFSET:rb.RECORDS_COUNT_OFFSET + 4] = (1).to_bytes(4, "big")
    with pytest.raises(rb.CorruptRecordError, match="offset range"):
        rb.validate_batch(_reseal(buf))


def test_the_compiled_key_walk_is_built():
    # `pip install -e .` (make test-deps, make serve) compiles engine/_recordwalk.c when a C
    # compiler is there, as on every machine this suite runs on; the dispatcher then walks
    # Kafka records without per-record Python (the Python walk stays as the fallback)
    assert rb.walk_keys_compiled is not None, "engine._recordwalk was not built: is a C compiler installed?"


WALKS = [rb.walk_keys_python, rb.walk_keys_compiled]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=records_strategy, codec=st.sampled_from(CODECS))
def test_record_keys_agrees_with_a_full_decode(raw, codec):
    records = [rb.Record(i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(raw)]
    buf = rb.build_batch(records, compression=codec, base_timestamp=0)
    expected = [r.key for r in rb.decode_records(buf) if r.key is not None]
    for walk in WALKS:
        assert rb.record_keys(buf, walk=walk) == expected
    assert rb.record_keys(memoryview(buf)) == expected


def _outcome(buf: bytes, walk):
    """The keys, or the refusal's reason (numbers blanked: a length wider than 64 bits is
    printed exactly by one walk and saturated by the other)."""
    try:
        return rb.record_keys(buf, walk=walk)
    except rb.CorruptRecordError as exc:
        return "CorruptRecordError: " + re.sub(r"-?\d+", "N", str(exc))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(codec=st.sampled_from(CODECS), data=st.data())
def test_record_keys_of_mutated_batches_fail_only_with_corrupt_record_error(codec, data):
    """Damaged batches: both walks give the same keys or the same refusal, never another error."""
    records = [rb.Record(i, i, b"k%d" % i, b"value-%d" % i * 20, [("h", b"v")]) for i in range(5)]
    buf = bytearray(rb.build_batch(records, compression=codec, base_timestamp=0))
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(rb.ATTRIBUTES_OFFSET, len(buf) - 1))
        buf[pos] = data.draw(st.integers(0, 255))
    outcomes = [_outcome(bytes(buf), walk) for walk in WALKS]
    assert outcomes[0] == outcomes[1]
    assert isinstance(outcomes[0], str) or all(isinstance(k, bytes) for k in outcomes[0])


@pytest.mark.parametrize("records", [
    b"\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01",   # a varint of 11 bytes
    b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f",       # 10 bytes, wider than 64 bits
    b"\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01",       # the largest 64-bit length
    b"\x0c\x00\x00\x00\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x7f",  # key length wider than 64 bits
    b"\x0c\x00\x00\x00\x03\x00\x00",                  # key length -2
    b"\x0c\x00\x00\x00\x80",                            # truncated inside the key length
    b"\x00",                                              # an empty record
    b"\x04\x00\x00\x00\x01\x00",                        # one record, then bytes left over
])
def test_both_walks_refuse_hand_made_damage_alike(records):
    outcomes = [_outcome_raw(records, walk) for walk in WALKS]
    assert outcomes[0] == outcomes[1] and outcomes[0].startswith("CorruptRecordError"), outcomes


def _outcome_raw(records: bytes, walk):
    try:
        return walk(records, 0, len(records), 1)
    except (rb.CorruptRecordError, ValueError) as exc:  # the compiled walk raises ValueError
        return "CorruptRecordError: " + re.sub(r"-?\d+", "N", str(exc))


@pytest.mark.parametrize("codec", CODECS)
def test_record_keys_read_in_place_inside_a_mapping(codec, tmp_path):
    """The dispatcher walks a batch where it lies in a segment's mapping: the same keys as from
    a copy, the same refusal for a cut batch, and a mapping closed meanwhile (retention) is the
    mapping's own ValueError, not a corrupt batch."""
    import mmap

    batch = rb.build_batch([rb.Record(i, 0, (b"k%d" % i) if i % 3 else None, b"v" * 50, []) for i in range(40)],
                           compression=codec, base_timestamp=0)
    path = tmp_path / "segment"
    path.write_bytes(b"\x00" * 100 + batch + b"\xff" * 100)
    with open(path, "r+b") as f:
        m = mmap.mmap(f.fileno(), 0)
    assert rb.record_keys_at(m, 100, len(batch)) == rb.record_keys(batch) == \
        [b"k%d" % i for i in range(40) if i % 3]
    with pytest.raises(rb.CorruptRecordError, match="length field says"):
        rb.record_keys_at(m, 100, len(batch) - 1)
    m.close()
    with pytest.raises(ValueError) as err:
        rb.record_keys_at(m, 100, len(batch))
    assert not isinstance(err.value, rb.CorruptRecordError)


def test_control_batches_have_no_record_keys():
    marker = rb.build_control_batch(rb.CONTROL_TYPE_COMMIT, producer_id=7, producer_epoch=0)
    assert rb.parse_header(marker).is_control
    assert rb.decode_records(marker)[0].key is not None  # a marker's key is its control type
    assert rb.record_keys(marker) == []


@pytest.mark.parametrize("codec", [rb.COMPRESSION_LZ4, rb.COMPRESSION_ZSTD])
def test_scans_reuse_a_buffer_without_mixing_batches(codec, monkeypatch):
    """The key walk and the delay-header search decompress lz4 and zstd into their thread's reusable
    buffer: a small batch read after a large one gets only its own keys (none of the large
    one's bytes past its end), a batch larger than the reusable buffer is read in full, and two
    threads walking at once each get their own batch's keys."""
    import threading

    from engine import batch_delay

    def batch(prefix: bytes, n: int, value_size: int) -> bytes:
        return rb.build_batch([rb.Record(i, 0, prefix + b"%d" % i, b"v" * value_size, []) for i in range(n)],
                              compression=codec, base_timestamp=0)

    big, small = batch(b"big-", 2000, 500), batch(b"s-", 3, 10)
    assert rb.record_keys(big)[-1] == b"big-1999"
    assert rb.record_keys(small) == [b"s-0", b"s-1", b"s-2"]
    delayed = rb.build_batch([rb.Record(0, 0, None, b"x", [("rmq.delay.level", b"3")])],
                             compression=codec, base_timestamp=0)
    assert batch_delay.may_have_delay_headers(delayed, rb.parse_header(delayed))
    assert not batch_delay.may_have_delay_headers(small, rb.parse_header(small))

    monkeypatch.setattr(rb, "_SCRATCH_MAX", 4096)  # the large batch no longer fits the buffer
    assert len(rb.record_keys(big)) == 2000 and rb.record_keys(small) == [b"s-0", b"s-1", b"s-2"]

    results: dict[bytes, bool] = {}

    def walk(prefix: bytes) -> None:
        b = batch(prefix, 300, 200)
        results[prefix] = all(rb.record_keys(b) == [prefix + b"%d" % i for i in range(300)] for _ in range(30))

    threads = [threading.Thread(target=walk, args=(p,)) for p in (b"a-", b"b-")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert results == {b"a-": True, b"b-": True}
