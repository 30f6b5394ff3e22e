"""Kafka RecordBatch v2: the engine's batch payload format.

This module owns the byte layout of a record batch (Kafka's "magic 2" format) and everything
the engine and both gateways do with it: parse and validate a header without touching the
records, patch the base offset on append, split a produce request's records field into
batches, decode records (decompressing only then) and build batches.

Header layout (big-endian), 61 bytes:

    baseOffset(8) + batchLength(4) + partitionLeaderEpoch(4) + magic(1) + crc(4)
    + attributes(2) + lastOffsetDelta(4) + baseTimestamp(8) + maxTimestamp(8)
    + producerId(8) + producerEpoch(2) + baseSequence(4) + recordsCount(4) = 61 bytes

Invariants:
- ``batchLength`` counts the bytes after the batchLength field, so a batch occupies
  ``batchLength + 12`` bytes.
- ``crc`` is CRC-32C (Castagnoli) over attributes..end of batch. baseOffset and
  partitionLeaderEpoch are outside the CRC, which is why the store can patch the base offset
  without recomputing it.
- The logical offsets a batch covers are ``baseOffset .. baseOffset + lastOffsetDelta``
  (``record_count`` = lastOffsetDelta + 1); each one is a consume-queue entry.
- ``validate_batch`` accepts a batch only when recordsCount = lastOffsetDelta + 1 and the
  payload can hold that many records, so a small batch cannot claim billions of offsets.
- Nothing here decompresses a batch unless records are asked for (``decode_records``), and
  decompression is bounded (``MAX_DECOMPRESSED_SIZE``) from the framing before it starts.
"""

from __future__ import annotations

import struct
import threading
import time
import zlib
from typing import Iterator, NamedTuple

import cramjam as _cramjam
import crc32c as _crc32c

HEADER_SIZE = 61
# bytes in front of and including batchLength: batchLength counts what follows it
LOG_OVERHEAD = 12
MAGIC_V2 = 2

# field offsets inside the header
BASE_OFFSET_OFFSET = 0
BATCH_LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORDS_COUNT_OFFSET = 57

# attribute bits
COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40

# compression codec ids (attributes & COMPRESSION_MASK)
COMPRESSION_NONE = 0
COMPRESSION_GZIP = 1
COMPRESSION_SNAPPY = 2
COMPRESSION_LZ4 = 3
COMPRESSION_ZSTD = 4
COMPRESSION_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

TIMESTAMP_CREATE_TIME = 0
TIMESTAMP_LOG_APPEND_TIME = 1

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_BASE_OFFSET = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")


class CorruptRecordError(ValueError):
    """A record batch is malformed: short, wrong magic, inconsistent lengths or bad CRC.

    Kafka answers this with CORRUPT_MESSAGE (error code 2); the message says what is wrong.
    """


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return TIMESTAMP_LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else TIMESTAMP_CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_FLAG_MASK)

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies (header included)."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def record_count(self) -> int:
        return self.last_offset_delta + 1

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def is_idempotent(self) -> bool:
        return self.producer_id >= 0


def parse_header(buf, pos: int = 0) -> BatchHeader:
    """Parse the 61-byte header at ``pos``; raises CorruptRecordError when short or not magic 2."""
    avail = len(buf) - pos
    if avail < HEADER_SIZE:
        if avail >= MAGIC_OFFSET + 1 and buf[pos + MAGIC_OFFSET] != MAGIC_V2:
            raise CorruptRecordError(
                f"unsupported record batch magic {buf[pos + MAGIC_OFFSET]} at position {pos} "
                f"(only magic 2, Kafka 0.11+ RecordBatch, is supported)"
            )
        raise CorruptRecordError(
            f"record batch header needs {HEADER_SIZE} bytes, only {max(avail, 0)} at position {pos}"
        )
    header = BatchHeader._make(_HEADER.unpack_from(buf, pos))
    if header.magic != MAGIC_V2:
        raise CorruptRecordError(
            f"unsupported record batch magic {header.magic} at position {pos} "
            f"(only magic 2, Kafka 0.11+ RecordBatch, is supported)"
        )
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecordError(
            f"record batch length {header.batch_length} is smaller than the header "
            f"({HEADER_SIZE - LOG_OVERHEAD} bytes after the length field)"
        )
    return header


def record_count(buf) -> int:
    """Logical offsets the batch at the start of ``buf`` covers: lastOffsetDelta + 1."""
    if len(buf) < HEADER_SIZE:
        raise CorruptRecordError(f"record batch header needs {HEADER_SIZE} bytes, only {len(buf)}")
    return _INT32.unpack_from(buf, LAST_OFFSET_DELTA_OFFSET)[0] + 1


def set_base_offset(buf, base: int) -> None:
    """Patch baseOffset in place (outside the CRC, so the CRC stays valid)."""
    _BASE_OFFSET.pack_into(buf, BASE_OFFSET_OFFSET, base)


_LEADER_EPOCH = struct.Struct(">i")


def set_partition_leader_epoch(buf, epoch: int) -> None:
    """Patch partitionLeaderEpoch in place (outside the CRC, like baseOffset)."""
    _LEADER_EPOCH.pack_into(buf, PARTITION_LEADER_EPOCH_OFFSET, epoch)


def compute_crc(buf) -> int:
    """CRC-32C over attributes..end of the batch at the start of ``buf``."""
    return _crc32c.crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:])


def validate_batch(buf) -> BatchHeader:
    """Check one whole batch: magic, length fields consistent with ``len(buf)``, CRC-32C,
    recordsCount = lastOffsetDelta + 1 and small enough for the payload.

    Returns the parsed header. Never decompresses; it reads compression framing only when the
    compressed payload is smaller than the claimed records' minimum size.
    """
    header = parse_header(buf)
    if header.size != len(buf):
        raise CorruptRecordError(
            f"record batch length field says {header.size} bytes, buffer holds {len(buf)}"
        )
    if header.last_offset_delta < 0:
        raise CorruptRecordError(f"record batch lastOffsetDelta {header.last_offset_delta} is negative")
    if header.records_count < 0:
        raise CorruptRecordError(f"record batch recordsCount {header.records_count} is negative")
    if header.compression > COMPRESSION_ZSTD:
        raise CorruptRecordError(f"unknown compression codec id {header.compression}")
    actual = compute_crc(buf)
    if actual != header.crc:
        raise CorruptRecordError(
            f"record batch CRC-32C mismatch: header says {header.crc:#010x}, data gives {actual:#010x}"
        )
    # Kafka's rule for batches from clients: the offsets a batch claims are its records. Each
    # logical offset becomes a consume-queue entry, so a batch may not claim more records than
    # its payload can hold.
    if header.records_count != header.last_offset_delta + 1:
        raise CorruptRecordError(
            f"record batch recordsCount {header.records_count} does not match its offset range "
            f"(lastOffsetDelta {header.last_offset_delta} + 1)"
        )
    payload = memoryview(buf)[HEADER_SIZE:]
    limit = header.records_count * MIN_RECORD_SIZE
    if header.compression == COMPRESSION_NONE or limit > len(payload):
        bound = uncompressed_size_bound(header.compression, payload, limit)
        if bound < limit:
            raise CorruptRecordError(
                f"record batch claims {header.records_count} records but its "
                f"{len(payload)} bytes of records can hold at most {bound // MIN_RECORD_SIZE}"
            )
    return header


def iter_batches(records_bytes) -> Iterator[memoryview]:
    """Yield a memoryview per batch in a produce request's records field.

    Raises CorruptRecordError on a magic other than 2, a truncated batch or trailing bytes
    that do not form a batch (a producer never sends a partial batch).
    """
    view = memoryview(records_bytes)
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    end = len(view)
    pos = 0
    while pos < end:
        if end - pos < HEADER_SIZE:
            parse_header(view, pos)  # raises with the magic or short-buffer message
        header = parse_header(view, pos)
        size = header.size
        if pos + size > end:
            raise CorruptRecordError(
                f"record batch at position {pos} claims {size} bytes, only {end - pos} remain"
            )
        yield view[pos:pos + size]
        pos += size


# ---------------------------------------------------------------------------------------------
# Records
#
# Record layout (inside the batch, after the header; compressed as one block when the batch's
# compression bits are set):
#   length(varint) attributes(int8) timestampDelta(varlong) offsetDelta(varint)
#   keyLength(varint, -1 = null) key valueLength(varint, -1 = null) value
#   headerCount(varint) [headerKeyLength(varint) headerKey(utf-8)
#                        headerValueLength(varint, -1 = null) headerValue]*
# All varints are zigzag encoded (protobuf style).
# ---------------------------------------------------------------------------------------------


class Record(NamedTuple):
    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    attributes: int = 0

    def absolute_offset(self, header: BatchHeader) -> int:
        return header.base_offset + self.offset_delta

    def absolute_timestamp(self, header: BatchHeader) -> int:
        """The record's timestamp: its own (CreateTime) or the batch's max timestamp when the
        batch carries LogAppendTime, as Kafka consumers see it."""
        if header.timestamp_type == TIMESTAMP_LOG_APPEND_TIME:
            return header.max_timestamp
        return header.base_timestamp + self.timestamp_delta


def _write_varint(out: bytearray, n: int) -> None:
    """Append the zigzag varint encoding of a signed 64-bit value."""
    v = ((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Read a zigzag varint at ``pos``; returns (value, new position)."""
    result = 0
    shift = 0
    while True:
        try:
            b = buf[pos]
        except IndexError:
            raise CorruptRecordError("record truncated inside a varint") from None
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint longer than 10 bytes in record")


def _decode_header_key(raw: bytes) -> str:
    # surrogateescape keeps non-UTF-8 header keys lossless through a decode/build round trip
    return raw.decode("utf-8", "surrogateescape")


def _parse_records(data: bytes, count: int) -> list[Record]:
    records = []
    pos = 0
    end = len(data)
    read = _read_varint
    for _ in range(count):
        length, pos = read(data, pos)
        rec_end = pos + length
        if length < 0 or rec_end > end:
            raise CorruptRecordError(f"record length {length} runs past the batch end")
        attributes = data[pos]
        pos += 1
        ts_delta, pos = read(data, pos)
        off_delta, pos = read(data, pos)
        klen, pos = read(data, pos)
        if klen < 0:
            if klen != -1:
                raise CorruptRecordError(f"record key length {klen} is invalid")
            key = None
        else:
            key = data[pos:pos + klen]
            pos += klen
        vlen, pos = read(data, pos)
        if vlen < 0:
            if vlen != -1:
                raise CorruptRecordError(f"record value length {vlen} is invalid")
            value = None
        else:
            value = data[pos:pos + vlen]
            pos += vlen
        if pos > rec_end:
            raise CorruptRecordError(f"record key/value run past the record's {length} bytes")
        nheaders, pos = read(data, pos)
        if nheaders < 0:
            raise CorruptRecordError(f"negative header count {nheaders}")
        headers = []
        for _h in range(nheaders):
            hklen, pos = read(data, pos)
            if hklen < 0:
                raise CorruptRecordError("record header key is null")
            hkey = _decode_header_key(data[pos:pos + hklen])
            pos += hklen
            hvlen, pos = read(data, pos)
            if hvlen < -1:
                raise CorruptRecordError(f"record header value length {hvlen} is invalid")
            if hvlen < 0:
                hval = None
            else:
                hval = data[pos:pos + hvlen]
                pos += hvlen
            headers.append((hkey, hval))
        if pos != rec_end:
            raise CorruptRecordError(
                f"record length field says {length} bytes, fields take {length + pos - rec_end}"
            )
        records.append(Record(off_delta, ts_delta, key, value, headers, attributes))
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes left after the last of {count} records")
    return records


def _encode_record(out: bytearray, rec: Record) -> None:
    body = bytearray()
    body.append(rec.attributes & 0xFF)
    _write_varint(body, rec.timestamp_delta)
    _write_varint(body, rec.offset_delta)
    if rec.key is None:
        _write_varint(body, -1)
    else:
        _write_varint(body, len(rec.key))
        body += rec.key
    if rec.value is None:
        _write_varint(body, -1)
    else:
        _write_varint(body, len(rec.value))
        body += rec.value
    _write_varint(body, len(rec.headers))
    for hkey, hval in rec.headers:
        kb = hkey.encode("utf-8", "surrogateescape")
        _write_varint(body, len(kb))
        body += kb
        if hval is None:
            _write_varint(body, -1)
        else:
            _write_varint(body, len(hval))
            body += hval
    _write_varint(out, len(body))
    out += body


# ---------------------------------------------------------------------------------------------
# Compression (cramjam). Facts the formats must respect:
# - snappy: Kafka's Java clients write xerial snappy-java framing (8-byte magic 0x82 "SNAPPY" 0x00,
#   int32 version 1, int32 compatible version 1, then [int32 big-endian length][raw snappy block]
#   per chunk); librdkafka writes raw snappy. Readers accept both; we write xerial so the Java
#   clients can read what we build (librdkafka reads xerial too).
# - lz4: the LZ4 frame format, with independent blocks (Java's reader decompresses each block
#   on its own, without the previous block as dictionary).
# - zstd: standard zstd frames. gzip: RFC 1952.
# ---------------------------------------------------------------------------------------------

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024  # snappy-java's default block size


def _snappy_decompress(data) -> bytes:
    data = bytes(data)
    if data[:8] == XERIAL_MAGIC:
        if len(data) < 16:
            raise CorruptRecordError("xerial snappy header truncated")
        out = bytearray()
        pos = 16
        end = len(data)
        while pos < end:
            if pos + 4 > end:
                raise CorruptRecordError("xerial snappy chunk length truncated")
            (n,) = _INT32.unpack_from(data, pos)
            pos += 4
            if n < 0 or pos + n > end:
                raise CorruptRecordError(f"xerial snappy chunk of {n} bytes runs past the end")
            out += bytes(_cramjam.snappy.decompress_raw(data[pos:pos + n]))
            pos += n
        return bytes(out)
    return bytes(_cramjam.snappy.decompress_raw(data))


def _snappy_compress_xerial(data: bytes) -> bytes:
    out = bytearray(_XERIAL_HEADER)
    view = memoryview(data)
    for start in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(_cramjam.snappy.compress_raw(view[start:start + _XERIAL_BLOCK]))
        out += _INT32.pack(len(block))
        out += block
    return bytes(out)


def _lz4_compress(data: bytes) -> bytes:
    comp = _cramjam.lz4.Compressor(block_linked=False)
    comp.compress(data)
    return bytes(comp.finish())


# ---------------------------------------------------------------------------------------------
# Decompression bounds. A few MiB of crafted compressed data can claim gigabytes; before
# decompressing, the framing is walked (no decompression) to bound the output, and
# ``decompress`` refuses anything that could exceed MAX_DECOMPRESSED_SIZE. The same bound lets
# validate_batch reject a recordsCount the payload cannot hold.
# ---------------------------------------------------------------------------------------------

MAX_DECOMPRESSED_SIZE = 256 * 1024 * 1024
MIN_RECORD_SIZE = 7  # length, attributes, timestamp/offset deltas, key/value lengths, header count
_DEFLATE_MAX_RATIO = 1032
_LZ4_MAGIC = 0x184D2204
_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_MAX_BLOCK = 128 * 1024
_LZ4_BLOCK_MAX = {4: 64 * 1024, 5: 256 * 1024, 6: 1024 * 1024, 7: 4 * 1024 * 1024}
_U32LE = struct.Struct("<I")


def _is_skippable(magic: int) -> bool:
    return 0x184D2A50 <= magic <= 0x184D2A5F


def _lz4_size_bound(data: bytes, limit: int) -> int:
    total = 0
    pos = 0
    end = len(data)
    while pos < end:
        (magic,) = _U32LE.unpack_from(data, pos)
        if _is_skippable(magic):
            pos += 8 + _U32LE.unpack_from(data, pos + 4)[0]
            continue
        if magic != _LZ4_MAGIC:
            raise CorruptRecordError(f"lz4 frame magic {magic:#x} is not {_LZ4_MAGIC:#x}")
        flg, bd = data[pos + 4], data[pos + 5]
        block_max = _LZ4_BLOCK_MAX.get((bd >> 4) & 7)
        if block_max is None:
            raise CorruptRecordError(f"lz4 frame block size code {(bd >> 4) & 7} is invalid")
        pos += 7 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
        block_checksum = 4 if flg & 0x10 else 0
        while True:
            (word,) = _U32LE.unpack_from(data, pos)
            pos += 4
            if word == 0:
                break
            size = word & 0x7FFFFFFF
            total += size if word & 0x80000000 else block_max
            if total > limit:
                return total
            pos += size + block_checksum
        if flg & 0x04:
            pos += 4
    return total


def _zstd_size_bound(data: bytes, limit: int) -> int:
    total = 0
    pos = 0
    end = len(data)
    while pos < end:
        (magic,) = _U32LE.unpack_from(data, pos)
        if _is_skippable(magic):
            pos += 8 + _U32LE.unpack_from(data, pos + 4)[0]
            continue
        if magic != _ZSTD_MAGIC:
            raise CorruptRecordError(f"zstd frame magic {magic:#x} is not {_ZSTD_MAGIC:#x}")
        fhd = data[pos + 4]
        single_segment = (fhd >> 5) & 1
        fcs_size = (1 if single_segment else 0, 2, 4, 8)[fhd >> 6]
        pos += 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[fhd & 3] + fcs_size
        while True:
            if pos + 3 > end:
                raise CorruptRecordError("zstd block header truncated")
            word = data[pos] | (data[pos + 1] << 8) | (data[pos + 2] << 16)
            pos += 3
            btype = (word >> 1) & 3
            bsize = word >> 3
            if btype == 0:      # raw
                total += bsize
                pos += bsize
            elif btype == 1:    # RLE: one byte repeated bsize times
                total += bsize
                pos += 1
            elif btype == 2:    # compressed: regenerates at most one block
                total += _ZSTD_MAX_BLOCK
                pos += bsize
            else:
                raise CorruptRecordError("zstd reserved block type")
            if total > limit:
                return total
            if word & 1:
                break
        if fhd & 0x04:
            pos += 4
    return total


def _snappy_size(data: bytes) -> int:
    if data[:8] == XERIAL_MAGIC:
        total = 0
        pos = 16
        while pos + 4 <= len(data):
            (n,) = _INT32.unpack_from(data, pos)
            pos += 4
            if n < 0:
                raise CorruptRecordError(f"xerial snappy chunk length {n} is negative")
            total += _cramjam.snappy.decompress_raw_len(data[pos:pos + n])
            pos += n
        return total
    return _cramjam.snappy.decompress_raw_len(data)


def uncompressed_size_bound(codec: int, data, limit: int = MAX_DECOMPRESSED_SIZE) -> int:
    """An upper bound of what ``data`` decompresses to, read from the framing alone (exact
    for snappy, block-wise for lz4/zstd, deflate's maximum ratio for gzip). Stops counting
    once past ``limit``. CorruptRecordError when the framing is broken."""
    if codec == COMPRESSION_NONE:
        return len(data)
    if codec == COMPRESSION_GZIP:
        return len(data) * _DEFLATE_MAX_RATIO
    try:
        if codec == COMPRESSION_LZ4:  # read in place: a produce request's batch is a view of it
            view = memoryview(data)
            return _lz4_size_bound(view if view.format == "B" and view.ndim == 1 else view.cast("B"), limit)
        data = bytes(data)
        if codec == COMPRESSION_SNAPPY:
            return _snappy_size(data)
        if codec == COMPRESSION_ZSTD:
            return _zstd_size_bound(data, limit)
    except CorruptRecordError:
        raise
    except Exception as exc:  # struct.error/IndexError on truncated framing, cramjam errors
        raise CorruptRecordError(
            f"cannot read {COMPRESSION_NAMES.get(codec, codec)} framing: {exc}") from exc
    raise CorruptRecordError(f"unknown compression codec id {codec}")


def _gzip_decompress(data: bytes, limit: int) -> bytes:
    out = []
    size = 0
    while data:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        chunk = d.decompress(data, limit - size + 1)
        size += len(chunk)
        if size > limit:
            raise CorruptRecordError(f"gzip records expand to more than {limit} bytes")
        out.append(chunk)
        if not d.eof:
            raise CorruptRecordError("gzip records are truncated")
        data = d.unused_data  # Java's GZIPInputStream reads concatenated members too
    return b"".join(out)


def decompress(codec: int, data, max_size: int = MAX_DECOMPRESSED_SIZE) -> bytes:
    """Decompress a batch's records block; CorruptRecordError when the codec rejects it or
    the output could exceed ``max_size`` (``decompress_scratch`` for a scan that only reads it)."""
    try:
        if codec == COMPRESSION_NONE:
            return bytes(data)
        if codec == COMPRESSION_GZIP:
            return _gzip_decompress(bytes(data), max_size)
        bound = uncompressed_size_bound(codec, data, max_size)
        if bound > max_size:
            raise CorruptRecordError(
                f"{COMPRESSION_NAMES[codec]} records could expand to {bound} bytes, "
                f"more than the {max_size} allowed")
        if codec == COMPRESSION_SNAPPY:
            return _snappy_decompress(data)
        if codec == COMPRESSION_LZ4:
            return bytes(_cramjam.lz4.decompress(data))  # reads any buffer: no copy of a view first
        if codec == COMPRESSION_ZSTD:
            return bytes(_cramjam.zstd.decompress(bytes(data)))
    except CorruptRecordError:
        raise
    except Exception as exc:  # cramjam raises its own DecompressionError / ValueError kinds
        raise CorruptRecordError(
            f"cannot decompress {COMPRESSION_NAMES.get(codec, codec)} records: {exc}"
        ) from exc
    raise CorruptRecordError(f"unknown compression codec id {codec}")


# Scans that only read a decompressed block (the delay-header search of a produced batch, the
# dispatcher's key walk) decompress lz4 into their thread's reusable buffer: a fresh ~1 MiB
# output per batch cost more in allocation and page faults than the decompression itself
# (1 KiB records, 1 MB batches: 395 us to decompress, 1.5 ms with a fresh buffer and a copy).
_SCRATCH = threading.local()
_SCRATCH_MAX = 16 * 1024 * 1024  # larger blocks get a buffer of their own, freed after use
_SCRATCH_CODECS = {COMPRESSION_LZ4: _cramjam.lz4.decompress_into, COMPRESSION_ZSTD: _cramjam.zstd.decompress_into}


def decompress_scratch(codec: int, data, max_size: int = MAX_DECOMPRESSED_SIZE):
    """``decompress`` for a caller that only reads the result before its thread's next call:
    lz4 and zstd come back as a view of the calling thread's reusable buffer (overwritten by
    the next call on the same thread); other codecs as ``decompress`` returns them."""
    into = _SCRATCH_CODECS.get(codec)
    if into is None:
        return decompress(codec, data, max_size)
    name = COMPRESSION_NAMES[codec]
    try:
        bound = uncompressed_size_bound(codec, data, max_size)
        if bound > max_size:
            raise CorruptRecordError(
                f"{name} records could expand to {bound} bytes, more than the {max_size} allowed")
        if bound > _SCRATCH_MAX:
            out = bytearray(bound)
        else:
            out = getattr(_SCRATCH, "buf", None)
            if out is None or len(out) < bound:
                out = _SCRATCH.buf = bytearray(max(bound, 1 << 20))
        n = into(data, out)
    except CorruptRecordError:
        raise
    except Exception as exc:  # cramjam's DecompressionError (truncated, more than the bound)
        raise CorruptRecordError(f"cannot decompress {name} records: {exc}") from exc
    return memoryview(out)[:n]


def compress(codec: int, data: bytes) -> bytes:
    if codec == COMPRESSION_NONE:
        return data
    if codec == COMPRESSION_GZIP:
        return bytes(_cramjam.gzip.compress(data))
    if codec == COMPRESSION_SNAPPY:
        return _snappy_compress_xerial(data)
    if codec == COMPRESSION_LZ4:
        return _lz4_compress(data)
    if codec == COMPRESSION_ZSTD:
        return bytes(_cramjam.zstd.compress(data))
    raise ValueError(f"unknown compression codec id {codec}")


def decode_batch(batch) -> tuple[BatchHeader, list[Record]]:
    """Header and records of one whole batch (decompressing here, and only here)."""
    header = parse_header(batch)
    if header.size > len(batch):
        raise CorruptRecordError(
            f"record batch length field says {header.size} bytes, buffer holds {len(batch)}"
        )
    payload = memoryview(batch)[HEADER_SIZE:header.size]
    data = decompress(header.compression, payload)
    if header.records_count < 0:
        raise CorruptRecordError(f"record batch recordsCount {header.records_count} is negative")
    return header, _parse_records(data, header.records_count)


def decode_records(batch) -> list[Record]:
    return decode_batch(batch)[1]


def record_keys(batch, walk=None) -> list[bytes]:
    """The non-null keys of a batch's records, in order, without building Records.

    For the dispatcher's key index: each record is read only up to its key (length,
    attributes, timestamp delta, offset delta, key) and then skipped by its length, so values
    and headers cost nothing. The walk is the compiled one (``engine/_recordwalk.c``) when the
    install could build it, else ``walk_keys_python``; ``walk`` picks one (tests compare them).
    Control batches carry markers, not user keys: none. Raises CorruptRecordError as
    ``decode_records`` does.
    """
    header = parse_header(batch)
    if header.is_control:
        return []
    if header.size > len(batch):
        raise CorruptRecordError(
            f"record batch length field says {header.size} bytes, buffer holds {len(batch)}"
        )
    if header.compression == COMPRESSION_NONE:
        # read the records in place: no copy of the batch (the dispatcher indexes every batch)
        data = batch if isinstance(batch, (bytes, bytearray)) else memoryview(batch).cast("B")
        pos, end = HEADER_SIZE, header.size
    else:
        walk = walk or walk_keys_compiled or walk_keys_python
        payload = memoryview(batch)[HEADER_SIZE:header.size]
        if walk is walk_keys_compiled:  # reads the thread's scratch buffer in place
            data = decompress_scratch(header.compression, payload)
        else:
            data = decompress(header.compression, payload)
        pos, end = 0, len(data)
    walk = walk or walk_keys_compiled or walk_keys_python
    try:
        return walk(data, pos, end, header.records_count)
    except WalkError as exc:  # the compiled walk's refusals carry the Python walk's messages
        raise CorruptRecordError(str(exc)) from None


def record_keys_at(buf, pos: int, length: int) -> list[bytes]:
    """``record_keys`` of the batch at ``buf[pos:pos + length]`` (a segment's mapping, say)
    without copying it: the compiled walk reads an uncompressed batch where it lies, holding
    the buffer only while it runs (with the interpreter held, so a retention pass cannot
    unmap it meanwhile; a buffer already closed raises its own ValueError). A compressed
    batch, or no compiled walk, is walked from a copy."""
    if walk_keys_compiled is None or length < HEADER_SIZE:
        return record_keys(bytes(buf[pos:pos + length]))
    header = parse_header(buf, pos)
    if header.compression != COMPRESSION_NONE:
        return record_keys(bytes(buf[pos:pos + length]))
    if header.is_control:
        return []
    if header.size > length:
        raise CorruptRecordError(f"record batch length field says {header.size} bytes, buffer holds {length}")
    try:
        return walk_keys_compiled(buf, pos + HEADER_SIZE, pos + header.size, header.records_count)
    except WalkError as exc:
        raise CorruptRecordError(str(exc)) from None


def walk_keys_python(data, pos: int, end: int, count: int) -> list[bytes]:
    """The records' keys from ``pos`` to ``end`` of ``data`` (see ``record_keys``). Single-byte
    varints, the common case, are read inline."""
    read = _read_varint
    keys: list[bytes] = []
    for _ in range(count):
        b = data[pos] if pos < end else 0x80
        if b < 0x80:
            length, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            length, pos = read(data, pos)
        rec_end = pos + length
        if length < 0 or rec_end > end:
            raise CorruptRecordError(f"record length {length} runs past the batch end")
        pos += 1  # attributes
        for _field in range(2):  # timestamp delta, offset delta: skipped
            while True:
                if pos >= rec_end:
                    raise CorruptRecordError("record truncated inside a varint")
                b = data[pos]
                pos += 1
                if b < 0x80:
                    break
        b = data[pos] if pos < rec_end else 0x80
        if b < 0x80:
            klen, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            klen, pos = read(data, pos)
        if klen >= 0:
            if pos + klen > rec_end:
                raise CorruptRecordError("record key runs past the record")
            keys.append(bytes(data[pos:pos + klen]))
        elif klen != -1:
            raise CorruptRecordError(f"record key length {klen} is invalid")
        pos = rec_end
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes left after the last of {count} records")
    return keys


try:  # built at install when a C compiler is there (setup.py: optional); else the Python walk
    from ._recordwalk import WalkError
    from ._recordwalk import walk_keys as walk_keys_compiled
except ImportError:
    walk_keys_compiled = None

    class WalkError(ValueError):  # noqa: N818 -- the compiled module's name for it
        pass


def build_batch(records, *, base_offset: int = 0, compression: int = COMPRESSION_NONE,
                producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
                base_sequence: int = NO_SEQUENCE, is_transactional: bool = False,
                is_control: bool = False, timestamp_type: int = TIMESTAMP_CREATE_TIME,
                base_timestamp: int | None = None,
                partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
                max_timestamp: int | None = None) -> bytes:
    """Build one RecordBatch v2 from Records whose deltas are relative to ``base_timestamp``
    (now when None). lastOffsetDelta is the largest offset delta; maxTimestamp the largest
    record timestamp unless given (LogAppendTime batches pass it)."""
    records = list(records)
    if not records:
        raise ValueError("a record batch holds at least one record")
    if base_timestamp is None:
        base_timestamp = int(time.time() * 1000)
    body = bytearray()
    for rec in records:
        _encode_record(body, rec)
    payload = compress(compression, bytes(body)) if compression else body
    attributes = compression & COMPRESSION_MASK
    if timestamp_type == TIMESTAMP_LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG_MASK
    if is_control:
        attributes |= CONTROL_FLAG_MASK
    last_offset_delta = max(r.offset_delta for r in records)
    if max_timestamp is None:
        max_timestamp = base_timestamp + max(r.timestamp_delta for r in records)
    out = bytearray(HEADER_SIZE + len(payload))
    _HEADER.pack_into(out, 0, base_offset, len(out) - LOG_OVERHEAD, partition_leader_epoch,
                      MAGIC_V2, 0, attributes, last_offset_delta, base_timestamp, max_timestamp,
                      producer_id, producer_epoch, base_sequence, len(records))
    out[HEADER_SIZE:] = payload
    _UINT32.pack_into(out, CRC_OFFSET, _crc32c.crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


# ---------------------------------------------------------------------------------------------
# Control records (transaction markers). Key: version(int16) + type(int16); value:
# version(int16) + coordinatorEpoch(int32). Written in a control batch (control and
# transactional bits set) carrying the producer id and epoch of the transaction.
# ---------------------------------------------------------------------------------------------

CONTROL_TYPE_ABORT = 0
CONTROL_TYPE_COMMIT = 1
_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_VALUE = struct.Struct(">hi")


class ControlRecord(NamedTuple):
    type: int  # CONTROL_TYPE_ABORT or CONTROL_TYPE_COMMIT
    coordinator_epoch: int
    version: int = 0


def control_key(control_type: int) -> bytes:
    return _CONTROL_KEY.pack(0, control_type)


def control_value(coordinator_epoch: int) -> bytes:
    return _CONTROL_VALUE.pack(0, coordinator_epoch)


def build_control_batch(control_type: int, *, producer_id: int, producer_epoch: int,
                        coordinator_epoch: int = 0, base_offset: int = 0,
                        timestamp: int | None = None,
                        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH) -> bytes:
    """A transaction marker batch (one control record, COMMIT or ABORT)."""
    return build_batch([Record(0, 0, control_key(control_type), control_value(coordinator_epoch), [])],
                       base_offset=base_offset,
                       producer_id=producer_id, producer_epoch=producer_epoch,
                       is_transactional=True, is_control=True, base_timestamp=timestamp,
                       partition_leader_epoch=partition_leader_epoch)


def parse_control_record(record: Record) -> ControlRecord:
    if record.key is None or len(record.key) < 4:
        raise CorruptRecordError("control record key must hold version(int16) and type(int16)")
    version, ctype = _CONTROL_KEY.unpack_from(record.key)
    if ctype not in (CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT):
        raise CorruptRecordError(f"unknown control record type {ctype}")
    epoch = 0
    if record.value is not None and len(record.value) >= 6:
        _v, epoch = _CONTROL_VALUE.unpack_from(record.value)
    return ControlRecord(ctype, epoch, version)
