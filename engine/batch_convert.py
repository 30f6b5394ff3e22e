"""Kafka records <-> RocketMQ messages: the one mapping both gateways share.

- ``expand_batch_unit(unit)``: a stored INNER_BATCH commitlog unit (its body one RecordBatch v2)
  -> one regular message unit per record, as a native consumer pulls them.
- ``unit_to_batch(unit)``: a regular (natively produced) unit -> a one-record batch with base
  offset = its queue offset, as a Kafka consumer fetches it. An INNER_BATCH unit gives back its
  stored batch (base offset set to the unit's queue offset).

The mapping (full table in docs/design/record-batch.md):

    record value  <-> body (null value -> empty body)
    record key    <-> first KEYS entry (UTF-8); keys KEYS cannot carry exactly -> KAFKA_KEY
    timestamp     <-> born timestamp (CreateTime)
    rmq.tags      <-> TAGS
    rmq.keys      <-> further KEYS (space separated)
    rmq.uniq.key  <-> UNIQ_KEY (else derived per record: store ip + commitlog offset + delta)
    rmq.sys.NAME  <-> RocketMQ system property NAME
    other headers <-> user properties, names and values escaped so every header round trips

Invariants:
- Pure functions of their input bytes: deterministic, so expanding the same stored unit twice
  gives identical units (message ids, UNIQ_KEYs) and consumers see stable ids.
- A property is a string and may not hold the separators \\x01/\\x02; header values are bytes.
  ``escape_value``/``unescape_value`` and the ``rmq.hdr.`` name form make the conversion
  lossless: header -> property -> header returns the same (name, value) in the same order.
- Control batches (transaction markers) expand to no messages.
"""

from __future__ import annotations

import base64
import ipaddress
import struct
import zlib
from functools import lru_cache

import cramjam

from . import record_batch as rb
from .message import (
    COMPRESSED_FLAG,
    INNER_BATCH_FLAG,
    KEY_SEPARATOR,
    NAME_VALUE_SEPARATOR,
    PROPERTY_KEYS,
    PROPERTY_SEPARATOR,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    MessageExt,
    decode_message,
    encode_properties,
    encode_unit,
)

# --- reserved headers (Kafka side) ---------------------------------------------------------
HEADER_TAGS = "rmq.tags"
HEADER_KEYS = "rmq.keys"
HEADER_UNIQ_KEY = "rmq.uniq.key"
HEADER_SYS_PREFIX = "rmq.sys."
# Delayed delivery: acted on when a batch is stored (``engine.batch_delay`` splits delayed
# records off and stages them); a record still carrying one here had a value that is not digits.
HEADER_DELAY_LEVEL = "rmq.delay.level"
HEADER_DELIVER_MS = "rmq.deliver.ms"
RESERVED_HEADER_PREFIX = "rmq."

# --- properties this module adds (native side) ---------------------------------------------
PROPERTY_KAFKA_PARTITION = "KAFKA_PARTITION"
PROPERTY_KAFKA_OFFSET = "KAFKA_OFFSET"
PROPERTY_KAFKA_KEY = "KAFKA_KEY"
_DERIVED_PROPERTIES = frozenset({PROPERTY_KAFKA_PARTITION, PROPERTY_KAFKA_OFFSET, PROPERTY_KAFKA_KEY})

# --- escaping --------------------------------------------------------------------------------
ESCAPED_NAME_PREFIX = "rmq.hdr."   # rmq.hdr.<index>.<base64url(name)>
VALUE_NULL = "rmq.null"
VALUE_B64_PREFIX = "rmq.b64:"

# RocketMQ's system property names (MessageConst.STRING_HASH_SET): a Kafka header with one of
# these names must not silently become a system property, so it is stored escaped.
SYSTEM_PROPERTIES = frozenset({
    "TRACE_ON", "MSG_REGION", "KEYS", "TAGS", "WAIT", "DELAY", "RETRY_TOPIC", "REAL_TOPIC",
    "REAL_QID", "TRAN_MSG", "PGROUP", "MIN_OFFSET", "MAX_OFFSET", "BUYER_ID",
    "ORIGIN_MESSAGE_ID", "TRANSFER_FLAG", "CORRECTION_FLAG", "MQ2_FLAG", "RECONSUME_TIME",
    "UNIQ_KEY", "MAX_RECONSUME_TIMES", "CONSUME_START_TIME", "POP_CK", "POP_CK_OFFSET",
    "1ST_POP_TIME", "TRAN_PREPARED_QUEUE_OFFSET", "DUP_INFO", "EXTEND_UNIQ_INFO",
    "INSTANCE_ID", "CORRELATION_ID", "REPLY_TO_CLIENT", "TTL", "ARRIVE_TIME",
    "PUSH_REPLY_TIME", "CLUSTER", "MSG_TYPE", "INNER_MULTI_QUEUE_OFFSET", "TIMER_DELAY_SEC",
    "TIMER_DELIVER_MS", "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS", "TIMER_ROLL_TIMES",
    "TIMER_OUT_MS", "TIMER_DEL_UNIQKEY", "TIMER_DELAY_LEVEL", "__BORNHOST", "BORN_TIMESTAMP",
    "INNER_NUM", "INNER_BASE",
})

# RocketMQ body compression (sysflag COMPRESSED 0x1, codec in bits 8-10; 0 means zlib)
_COMPRESSION_TYPE_MASK = 0x7 << 8
_COMPRESSION_LZ4 = 0x1 << 8
_COMPRESSION_ZSTD = 0x2 << 8
_COMPRESSION_ZLIB = 0x3 << 8

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def _plain_text(raw) -> str | None:
    """``raw`` as a property-safe string, or None when it needs escaping."""
    try:
        text = bytes(raw).decode("utf-8")
    except UnicodeDecodeError:
        return None
    if NAME_VALUE_SEPARATOR in text or PROPERTY_SEPARATOR in text:
        return None
    return text


def escape_value(value: bytes | None) -> str:
    """Header value -> property value. Plain UTF-8 stays as is; null, non-UTF-8, values holding
    \\x01/\\x02 and values that start with ``rmq.`` (so they cannot fake an escape) are
    written as ``rmq.null`` / ``rmq.b64:<base64>``."""
    if value is None:
        return VALUE_NULL
    text = _plain_text(value)
    if text is None or text.startswith(RESERVED_HEADER_PREFIX):
        return VALUE_B64_PREFIX + base64.b64encode(bytes(value)).decode("ascii")
    return text


def unescape_value(text: str) -> bytes | None:
    if text == VALUE_NULL:
        return None
    if text.startswith(VALUE_B64_PREFIX):
        try:
            return base64.b64decode(text[len(VALUE_B64_PREFIX):], validate=True)
        except ValueError:
            pass  # not ours: a native value that merely looks like an escape
    return text.encode("utf-8")


def _escape_name(index: int, name: str) -> str:
    raw = name.encode("utf-8", "surrogateescape")
    return f"{ESCAPED_NAME_PREFIX}{index}.{base64.urlsafe_b64encode(raw).decode('ascii')}"


def _unescape_name(prop: str) -> str | None:
    rest = prop[len(ESCAPED_NAME_PREFIX):]
    index, dot, encoded = rest.partition(".")
    if not dot or not index.isdigit():
        return None
    try:
        return base64.urlsafe_b64decode(encoded.encode("ascii")).decode("utf-8", "surrogateescape")
    except ValueError:
        return None


def _safe_property_name(name: str) -> bool:
    return (bool(name) and NAME_VALUE_SEPARATOR not in name and PROPERTY_SEPARATOR not in name
            and not name.startswith(RESERVED_HEADER_PREFIX) and name not in SYSTEM_PROPERTIES
            and name not in _DERIVED_PROPERTIES)


def _key_as_keys_entry(key: bytes) -> str | None:
    """The record key as one KEYS entry, or None when KEYS cannot carry it exactly."""
    text = _plain_text(key)
    if not text or KEY_SEPARATOR in text:
        return None
    return text


@lru_cache(maxsize=64)
def _ip4(ip: str) -> bytes:
    return ipaddress.ip_address(ip).packed[-4:]


def derive_uniq_key(unit: MessageExt, offset_delta: int) -> str:
    """32 upper-case hex characters like RocketMQ's UNIQ_KEY: store ip(4, the last four bytes
    for IPv6) + commitlog offset(8) + offset delta(4); distinct per record on one store, stable
    across reads."""
    return (_ip4(unit.store_host[0]) + _I64.pack(unit.commitlog_offset) + _I32.pack(offset_delta)).hex().upper()


def record_properties(record: rb.Record, unit: MessageExt, offset: int) -> dict[str, str]:
    """Properties of the message a record expands to (see module docstring)."""
    props: dict[str, str] = {}
    keys: list[str] = []
    if record.key is not None:
        entry = _key_as_keys_entry(record.key)
        if entry is not None:
            keys.append(entry)
        else:
            props[PROPERTY_KAFKA_KEY] = escape_value(record.key)
    tags = None
    uniq = None
    for index, (name, value) in enumerate(record.headers):
        if name == HEADER_TAGS and tags is None and value is not None and _plain_text(value):
            tags = _plain_text(value)
            continue
        if name == HEADER_KEYS and value is not None and _plain_text(value) is not None:
            # the record key usually repeats as the first rmq.keys entry: keep each key once
            keys.extend(k for k in _plain_text(value).split(KEY_SEPARATOR) if k and k not in keys)
            continue
        if name == HEADER_UNIQ_KEY and uniq is None and value is not None and _plain_text(value):
            uniq = _plain_text(value)
            continue
        if name.startswith(HEADER_SYS_PREFIX) and value is not None:
            sys_name = name[len(HEADER_SYS_PREFIX):]
            text = _plain_text(value)
            if (sys_name and text is not None and sys_name not in props
                    and NAME_VALUE_SEPARATOR not in sys_name and PROPERTY_SEPARATOR not in sys_name):
                props[sys_name] = text
                continue
        if _safe_property_name(name) and name not in props:
            props[name] = escape_value(value)
        else:
            props[_escape_name(index, name)] = escape_value(value)
    if tags:
        props[PROPERTY_TAGS] = tags
    if keys:
        props[PROPERTY_KEYS] = KEY_SEPARATOR.join(keys)
    props[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = uniq or derive_uniq_key(unit, offset - unit.queue_offset)
    props[PROPERTY_KAFKA_PARTITION] = str(unit.queue_id)
    props[PROPERTY_KAFKA_OFFSET] = str(offset)
    return props


def expand_batch_unit(unit, is_aborted=None) -> list[bytes]:
    """One regular message unit per record of a stored INNER_BATCH unit.

    Control batches (transaction markers) expand to nothing; so does a transactional batch when
    ``is_aborted(producer_id, base_offset)`` (e.g. ``engine.txn_index``) says its transaction
    was aborted.

    Queue offset = batch base + offset delta; commitlog offset, topic, queue, hosts and store
    timestamp are the batch unit's; born timestamp = the record's timestamp. Raises
    ``rb.CorruptRecordError`` when the batch cannot be decoded, ``ValueError`` when the unit is
    not a batch unit.
    """
    msg = decode_message(unit)
    if not msg.sys_flag & INNER_BATCH_FLAG:
        raise ValueError("not an INNER_BATCH unit (sysflag 0x80 not set)")
    header, records = rb.decode_batch(msg.body)
    if header.is_control:
        return []
    if is_aborted is not None and header.is_transactional and is_aborted(header.producer_id, msg.queue_offset):
        return []
    topic = msg.topic.encode("utf-8")
    sys_flag = msg.sys_flag & ~INNER_BATCH_FLAG
    out = []
    for record in records:
        offset = msg.queue_offset + record.offset_delta
        props = record_properties(record, msg, offset)
        out.append(encode_unit(
            topic=topic, body=bytes(record.value) if record.value is not None else b"",
            props=encode_properties(props), queue_id=msg.queue_id, queue_offset=offset,
            physical_offset=msg.commitlog_offset, flag=msg.flag, sys_flag=sys_flag,
            born_timestamp=record.absolute_timestamp(header), born_host=msg.born_host,
            store_timestamp=msg.store_timestamp, store_host=msg.store_host,
            reconsume_times=msg.reconsume_times,
            prepared_transaction_offset=msg.prepared_transaction_offset,
        ))
    return out


def _native_body(msg: MessageExt) -> bytes:
    """The body as the producer meant it: RocketMQ clients compress large bodies."""
    if not msg.sys_flag & COMPRESSED_FLAG:
        return msg.body
    codec = msg.sys_flag & _COMPRESSION_TYPE_MASK
    try:
        if codec in (0, _COMPRESSION_ZLIB):
            return zlib.decompress(msg.body)
        if codec == _COMPRESSION_LZ4:
            return bytes(cramjam.lz4.decompress(msg.body))
        if codec == _COMPRESSION_ZSTD:
            return bytes(cramjam.zstd.decompress(msg.body))
    except Exception as exc:
        raise rb.CorruptRecordError(f"cannot decompress message body (sysflag {msg.sys_flag:#x}): {exc}") from exc
    raise rb.CorruptRecordError(f"unknown body compression in sysflag {msg.sys_flag:#x}")


def message_headers(props: dict[str, str]) -> tuple[bytes | None, list[tuple[str, bytes | None]]]:
    """(record key, headers) for a message's properties (see module docstring)."""
    headers: list[tuple[str, bytes | None]] = []
    keys = props.get(PROPERTY_KEYS)
    key: bytes | None = None
    if PROPERTY_KAFKA_KEY in props:
        key = unescape_value(props[PROPERTY_KAFKA_KEY])
    elif keys:
        first = next((k for k in keys.split(KEY_SEPARATOR) if k), None)
        key = first.encode("utf-8") if first is not None else None
    for name, value in props.items():
        if name == PROPERTY_TAGS:
            headers.append((HEADER_TAGS, value.encode("utf-8")))
        elif name == PROPERTY_KEYS:
            headers.append((HEADER_KEYS, value.encode("utf-8")))
        elif name == PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX:
            headers.append((HEADER_UNIQ_KEY, value.encode("utf-8")))
        elif name in _DERIVED_PROPERTIES:
            continue
        elif name.startswith(ESCAPED_NAME_PREFIX) and _unescape_name(name) is not None:
            headers.append((_unescape_name(name), unescape_value(value)))
        elif name in SYSTEM_PROPERTIES:
            headers.append((HEADER_SYS_PREFIX + name, value.encode("utf-8")))
        else:
            headers.append((name, unescape_value(value)))
    return key, headers


def unit_to_batch(unit) -> bytes:
    """A Kafka RecordBatch for a stored unit, base offset = the unit's queue offset.

    Regular unit: one record, value = body (decompressed when the RocketMQ client compressed
    it), key/headers from the properties, timestamp = born timestamp (CreateTime).
    INNER_BATCH unit: the stored batch itself.
    """
    msg = decode_message(unit)
    if msg.sys_flag & INNER_BATCH_FLAG:
        batch = bytearray(msg.body)
        rb.set_base_offset(batch, msg.queue_offset)
        return bytes(batch)
    key, headers = message_headers(msg.properties)
    record = rb.Record(0, 0, key, _native_body(msg), headers)
    return rb.build_batch([record], base_offset=msg.queue_offset, base_timestamp=msg.born_timestamp)
