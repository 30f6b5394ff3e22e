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
- Nothing here decompresses a batch unless records are asked for (``decode_records``).
"""

from __future__ import annotations

import struct
from typing import Iterator, NamedTuple

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
_PRE_MAGIC = struct.Struct(">qib")  # baseOffset, batchLength and magic (at 16 after epoch)


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


def compute_crc(buf) -> int:
    """CRC-32C over attributes..end of the batch at the start of ``buf``."""
    return _crc32c.crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:])


def validate_batch(buf) -> BatchHeader:
    """Check one whole batch: magic, length fields consistent with ``len(buf)``, CRC-32C.

    Returns the parsed header. Does not decompress or walk the records.
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
