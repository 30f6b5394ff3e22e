"""Records of Kafka's internal topics, declared once in the schema DSL (``schema.py``).

Facts follow Apache Kafka's coordinator record definitions (group-coordinator and
transaction-coordinator ``*.json``): a record key or value is ``version(int16)`` followed by the
struct of that version. The engine encodes offset commits itself (``engine/consumer_offset.py``,
shared by both gateways); these are the records only the Kafka gateway reads:

- ``GroupMetadataValue`` (versions 0-3; written as 3), stored opaque in ``__consumer_offsets``;
- ``TransactionLogKey`` / ``TransactionLogValue`` (version 0) in ``__transaction_state``;
- ``ProducerIdBlockKey`` (version 32767, Rockafka's own) / ``ProducerIdBlockValue`` (version 0):
  the end of the block of producer ids reserved, in ``__transaction_state`` partition 0 (Kafka
  keeps id blocks in its controller's metadata, which has no place here).
"""

from __future__ import annotations

import struct
from typing import Any

from . import primitives as p
from .schema import compile_struct, parse_fields

_VERSION = struct.Struct(">h")

_SCHEMAS = {
    "GroupMetadataValue": ("0-3", parse_fields("""
    protocol_type: string
    generation: int32
    protocol: string null:0+
    leader: string null:0+
    current_state_timestamp: int64 2+ =-1
    members: []
      member_id: string
      group_instance_id: string 3+ null:3+ =null
      client_id: string
      client_host: string
      rebalance_timeout: int32 1+ =-1
      session_timeout: int32
      subscription: bytes
      assignment: bytes
""")),
    "TransactionLogKey": ("0", parse_fields("""
    transactional_id: string
""")),
    "TransactionLogValue": ("0", parse_fields("""
    producer_id: int64
    producer_epoch: int16
    transaction_timeout_ms: int32
    transaction_status: int8
    transaction_partitions: [] null:0+
      topic: string
      partition_ids: [int32]
    transaction_last_update_timestamp_ms: int64
    transaction_start_timestamp_ms: int64
""")),
    "ProducerIdBlockValue": ("0", parse_fields("""
    block_end: int64
""")),
}
WRITE_VERSION = {"GroupMetadataValue": 3, "TransactionLogKey": 0, "TransactionLogValue": 0, "ProducerIdBlockValue": 0}
PRODUCER_ID_BLOCK_KEY_VERSION = 32767
PRODUCER_ID_BLOCK_KEY = _VERSION.pack(PRODUCER_ID_BLOCK_KEY_VERSION)


class RecordDecodeError(ValueError):
    """A record of an internal topic that cannot be read (a version or layout not known)."""


def _versions(name: str) -> range:
    text = _SCHEMAS[name][0]
    low, _, high = text.partition("-")
    return range(int(low), int(high or low) + 1)


def encode(name: str, body: dict[str, Any]) -> bytes:
    version = WRITE_VERSION[name]
    _read, write = compile_struct(_SCHEMAS[name][1], version, False)
    w = p.Writer()
    w.buf += _VERSION.pack(version)
    write(w, body)
    return bytes(b"".join(bytes(c) for c in w.chunks()))


def decode(name: str, data: bytes) -> dict[str, Any]:
    try:
        (version,) = _VERSION.unpack_from(data, 0)
        if version not in _versions(name):
            raise RecordDecodeError(f"{name} version {version} is not known")
        read, _write = compile_struct(_SCHEMAS[name][1], version, False)
        body, _pos = read(memoryview(data), 2)
        return body
    except (struct.error, p.ProtocolDecodeError, IndexError, UnicodeDecodeError) as exc:
        raise RecordDecodeError(f"{name}: {exc}") from None


def key_version(key: bytes) -> int:
    return _VERSION.unpack_from(key, 0)[0]
