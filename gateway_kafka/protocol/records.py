"""Records of Kafka's internal topics, declared once in the schema DSL (``schema.py``).

Facts follow Apache Kafka's coordinator record definitions (group-coordinator and
transaction-coordinator ``*.json``): a record key or value is ``version(int16)`` followed by the
struct of that version. The engine encodes offset commits itself (``engine/consumer_offset.py``,
shared by both gateways); these are the records only the Kafka gateway reads:

- ``GroupMetadataValue`` (versions 0-3; written as 3), stored opaque in ``__consumer_offsets``;
- ``TransactionLogKey`` / ``TransactionLogValue`` (version 0) in ``__transaction_state``;
- ``ProducerIdBlockKey`` (version 32767, Rockafka's own) / ``ProducerIdBlockValue`` (version 0):
  the end of the block of producer ids reserved, in ``__transaction_state`` partition 0 (Kafka
  keeps id blocks in its controller's metadata, which has no place here);
- ``ModernGroupValue`` (Rockafka's own, under group-record key version ``MODERN_GROUP_KIND``):
  the whole state of a KIP-848 consumer group or a KIP-932 share group — group epoch, target
  assignment epoch, subscription metadata, and per member its subscription, member epoch,
  reconciliation state, assigned / pending-revocation / target partitions (and, for a classic
  member of a consumer group, its session timeout and protocols); one record per change,
  ``docs/design/consumer-groups.md``;
- ``GroupConfigValue`` (Rockafka's own, key version ``GROUP_CONFIG_KIND``): the dynamic configs of
  a group (resource type GROUP of DescribeConfigs / IncrementalAlterConfigs);
- ``ConsumerProtocolSubscription`` / ``ConsumerProtocolAssignment`` (versions 0-3): the embedded
  consumer protocol of classic groups (clients' JoinGroup metadata and SyncGroup assignments),
  read and written when a group converts between the classic and the consumer protocol.
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
    "ModernGroupValue": ("0", parse_fields("""
    group_type: int8
    group_epoch: int32
    assignment_epoch: int32
    assignor: string null:0+
    subscription_metadata: []
      topic: string
      partitions: int32
    members: []
      member_id: string
      instance_id: string null:0+
      rack_id: string null:0+
      client_id: string
      client_host: string
      rebalance_timeout_ms: int32
      server_assignor: string null:0+
      subscribed_topic_names: [string]
      subscribed_topic_regex: string null:0+
      member_epoch: int32
      previous_member_epoch: int32
      state: int8
      assigned: []
        topic: string
        partitions: [int32]
      pending_revocation: []
        topic: string
        partitions: [int32]
      target: []
        topic: string
        partitions: [int32]
      classic_session_timeout_ms: int32
      classic_protocols: [] null:0+
        name: string
        metadata: bytes
""")),
    "GroupConfigValue": ("0", parse_fields("""
    configs: []
      name: string
      value: string
""")),
    "ConsumerProtocolSubscription": ("0-3", parse_fields("""
    topics: [string]
    user_data: bytes null:0+ =null
    owned_partitions: [] 1+
      topic: string 1+
      partitions: [int32] 1+
    generation_id: int32 2+ =-1
    rack_id: string 3+ null:3+ =null
""")),
    "ConsumerProtocolAssignment": ("0-3", parse_fields("""
    assigned_partitions: []
      topic: string
      partitions: [int32]
    user_data: bytes null:0+ =null
""")),
}
WRITE_VERSION = {"GroupMetadataValue": 3, "TransactionLogKey": 0, "TransactionLogValue": 0, "ProducerIdBlockValue": 0,
                 "ModernGroupValue": 0, "GroupConfigValue": 0, "ConsumerProtocolSubscription": 3,
                 "ConsumerProtocolAssignment": 3}
MODERN_GROUP_KIND = 32000   # group-record key versions (engine.consumer_offset.store_group_record)
GROUP_CONFIG_KIND = 32001
STREAMS_GROUP_KIND = 32002  # a streams group (gateway_kafka.streams_groups), JSON value
PRODUCER_ID_BLOCK_KEY_VERSION = 32767
PRODUCER_ID_BLOCK_KEY = _VERSION.pack(PRODUCER_ID_BLOCK_KEY_VERSION)


class RecordDecodeError(ValueError):
    """A record of an internal topic that cannot be read (a version or layout not known)."""


def _versions(name: str) -> range:
    text = _SCHEMAS[name][0]
    low, _, high = text.partition("-")
    return range(int(low), int(high or low) + 1)


def encode(name: str, body: dict[str, Any], version: int | None = None) -> bytes:
    version = WRITE_VERSION[name] if version is None else version
    _read, write = compile_struct(_SCHEMAS[name][1], version, False)
    w = p.Writer()
    w.buf += _VERSION.pack(version)
    write(w, body)
    return bytes(b"".join(bytes(c) for c in w.chunks()))


def decode(name: str, data: bytes) -> dict[str, Any]:
    try:
        (version,) = _VERSION.unpack_from(data, 0)
        if name.startswith("ConsumerProtocol") and version > _versions(name)[-1]:
            version = _versions(name)[-1]  # newer clients append fields: read the ones known (as Kafka)
        if version not in _versions(name):
            raise RecordDecodeError(f"{name} version {version} is not known")
        read, _write = compile_struct(_SCHEMAS[name][1], version, False)
        body, _pos = read(memoryview(data), 2)
        return body
    except (struct.error, p.ProtocolDecodeError, IndexError, UnicodeDecodeError) as exc:
        raise RecordDecodeError(f"{name}: {exc}") from None


def decode_versioned(name: str, data: bytes) -> tuple[int, dict[str, Any]]:
    """(version, body): for the embedded consumer protocol, whose version matters on reply."""
    body = decode(name, data)
    return _VERSION.unpack_from(data, 0)[0], body


def key_version(key: bytes) -> int:
    return _VERSION.unpack_from(key, 0)[0]
