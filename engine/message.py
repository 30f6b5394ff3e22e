"""Messages and the commitlog unit codec (Apache RocketMQ's on-disk message layout, V1 and V2).

A *unit* is one message as stored in the commitlog and as a RocketMQ pull response carries it,
so the native gateway can send stored bytes unchanged. Layout (big-endian), format as in
RocketMQ's ``CommitLog`` / ``MessageDecoder``:

    TOTALSIZE(4) + MAGICCODE(4) + BODYCRC(4) + QUEUEID(4) + FLAG(4) + QUEUEOFFSET(8)
    + PHYSICALOFFSET(8) + SYSFLAG(4) + BORNTIMESTAMP(8) + BORNHOST(8 | 20)
    + STORETIMESTAMP(8) + STOREHOST(8 | 20) + RECONSUMETIMES(4)
    + PREPARED_TRANSACTION_OFFSET(8) + BODYLENGTH(4) + BODY(n)
    + TOPICLENGTH(1 in V1 | 2 in V2) + TOPIC(n) + PROPERTIESLENGTH(2) + PROPERTIES(n)

- MAGICCODE V1 0xdaa320a7 (topic length a byte, topics up to 127 bytes), V2 0xdaa320ab
  (topic length a short) for longer topics. BLANK 0xcbd43194 fills a segment's end:
  TOTALSIZE(4) + MAGICCODE(4), the size covering the rest of the segment.
- A host is IPv4 address(4) + port(4), or IPv6 address(16) + port(4) when SYSFLAG has
  BORNHOST_V6 (0x10) / STOREHOST_V6 (0x20).
- BODYCRC is CRC-32 of the body masked to 31 bits (Java ``UtilAll.crc32``).
- PROPERTIES is ``name \\x01 value \\x02`` repeated (UTF-8); tags travel as ``TAGS``, keys as
  ``KEYS`` joined by spaces.
- The message id is store host + commitlog offset as upper-case hex: 32 characters for IPv4.
- SYSFLAG 0x80 (INNER_BATCH) marks a unit whose body is one Kafka RecordBatch v2 covering
  QUEUEOFFSET .. QUEUEOFFSET + lastOffsetDelta.

Hot path: ``encode_unit`` packs the fixed 88 (IPv4) bytes with one precompiled ``struct`` and
joins body, topic and properties; ``patch_unit`` rewrites queue offset, physical offset and
store timestamp in place so the put lock holds only for a few fixed-offset writes.
"""

from __future__ import annotations

import ipaddress
import struct
import time
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Iterable

MAGIC_CODE_V1 = -626843481  # 0xdaa320a7
MAGIC_CODE_V2 = -626843477  # 0xdaa320ab
BLANK_MAGIC_CODE = -875286124  # 0xcbd43194
END_FILE_MIN_BLANK_LENGTH = 8

# MessageSysFlag
COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x2
TRANSACTION_NOT_TYPE = 0x0
TRANSACTION_PREPARED_TYPE = 0x4
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC
BORNHOST_V6_FLAG = 0x10
STOREHOST_V6_FLAG = 0x20
NEED_UNWRAP_FLAG = 0x40
INNER_BATCH_FLAG = 0x80

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"

# MessageConst property names
PROPERTY_KEYS = "KEYS"
PROPERTY_TAGS = "TAGS"
PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
PROPERTY_DELAY_TIME_LEVEL = "DELAY"
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
PROPERTY_INNER_NUM = "INNER_NUM"
PROPERTY_WAIT_STORE_MSG_OK = "WAIT"
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_PRODUCER_GROUP = "PGROUP"
PROPERTY_MIN_OFFSET = "MIN_OFFSET"
PROPERTY_MAX_OFFSET = "MAX_OFFSET"
PROPERTY_MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
PROPERTY_CONSUME_START_TIMESTAMP = "CONSUME_START_TIME"
PROPERTY_SHARDING_KEY = "__SHARDINGKEY"
PROPERTY_MSG_REGION = "MSG_REGION"
PROPERTY_TRACE_SWITCH = "TRACE_ON"
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
PROPERTY_RECONSUME_TIME = "RECONSUME_TIME"
PROPERTY_POP_CK = "POP_CK"
PROPERTY_TRANSACTION_ID = "__transactionId__"
PROPERTY_CHECK_IMMUNITY_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
PROPERTY_TRACE_CONTEXT = "TRACE_CONTEXT"
PROPERTY_BORN_HOST = "__BORNHOST"
PROPERTY_DLQ_ORIGIN_TOPIC = "DLQ_ORIGIN_TOPIC"
PROPERTY_DLQ_ORIGIN_MESSAGE_ID = "DLQ_ORIGIN_MESSAGE_ID"
PROPERTY_FIRST_POP_TIME = "1ST_POP_TIME"
PROPERTY_SHARE_PARTITION = "SHARE_PARTITION"  # a share group's dead letter: the partition it came from
PROPERTY_TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
PROPERTY_TIMER_DELAY_MS = "TIMER_DELAY_MS"
PROPERTY_TIMER_OUT_MS = "TIMER_OUT_MS"
PROPERTY_TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"  # a recall marker: "<topic>+<uniq key>" of the message it cancels
PROPERTY_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
PROPERTY_OP_UNIQ = "TRAN_UNIQ"
KEY_SEPARATOR = " "

# Fixed part before the body, per (born v6, store v6):
#   totalSize magic bodyCrc queueId flag queueOffset physicalOffset sysFlag bornTs
#   bornHost bornPort storeTs storeHost storePort reconsumeTimes preparedTxOffset bodyLength
_HEADERS = {
    (False, False): struct.Struct(">iiiiiqqiq4siq4siiqi"),
    (True, False): struct.Struct(">iiiiiqqiq16siq4siiqi"),
    (False, True): struct.Struct(">iiiiiqqiq4siq16siiqi"),
    (True, True): struct.Struct(">iiiiiqqiq16siq16siiqi"),
}
_PRE = struct.Struct(">iiiiiqqiq")  # everything up to and including the born timestamp: 48 bytes
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U16 = struct.Struct(">H")
_TOTAL_MAGIC = struct.Struct(">ii")
_QUEUE_OFFSET_POS = 20
_PHYSICAL_OFFSET_POS = 28
_SYSFLAG_POS = 36
_BORN_HOST_POS = 48
_STORE_TS_V4 = _BORN_HOST_POS + 8
_STORE_TS_V6 = _BORN_HOST_POS + 20
_QOFF_PHY = struct.Struct(">qq")

Host = tuple[str, int]
DEFAULT_HOST: Host = ("127.0.0.1", 0)


class MessageFormatError(ValueError):
    """Bytes that are not a valid commitlog unit; the message says which field is wrong."""


def _string_hash(text: str) -> int:
    """Java ``String.hashCode`` (UTF-16 code units, 32-bit wrap), signed. An ASCII string (every
    message key and id in practice) is one byte per code unit, summed without a mask per step:
    less than half the time of the UTF-16 walk the index builder pays for every key."""
    h = 0
    if text.isascii():
        for unit in text.encode("ascii"):
            h = 31 * h + unit
        h &= 0xFFFFFFFF
    else:
        for (unit,) in struct.iter_unpack(">H", text.encode("utf-16-be", "surrogatepass")):
            h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


@lru_cache(maxsize=4096)
def tags_code(tags: str | None) -> int:
    """Java ``String.hashCode`` of the tag (UTF-16 code units), as the consume queue stores it
    (cached: a topic uses few tags)."""
    if not tags:
        return 0
    return _string_hash(tags)


def java_hash(s: str) -> int:
    """Java ``String.hashCode`` (signed 32-bit). Not cached: index keys (message ids, keys) are
    mostly seen once, and would only push the tags out of ``tags_code``'s cache."""
    return _string_hash(s) if s else 0


@lru_cache(maxsize=1024)
def _pack_host(host: Host) -> tuple[bytes, int, bool]:
    ip, port = host
    addr = ipaddress.ip_address(ip)
    return addr.packed, int(port), addr.version == 6


def parse_host(host: Any) -> Host:
    """Accept ``("1.2.3.4", 80)``, ``"1.2.3.4:80"`` or ``"[::1]:80"``; None means 127.0.0.1:0."""
    if type(host) is str:  # a connection's peer or the broker's own address: the same few, per message
        return _parse_host_text(host)
    if host is None:
        return DEFAULT_HOST
    if isinstance(host, tuple):
        return (str(host[0]), int(host[1]))
    return _parse_host_text(str(host))


@lru_cache(maxsize=4096)
def _parse_host_text(text: str) -> Host:
    if text.startswith("["):
        ip, _, port = text[1:].partition("]:")
        return (ip, int(port or 0))
    if text.count(":") == 1:
        ip, port = text.split(":")
        return (ip, int(port))
    return (text, 0)


def _unpack_host(raw: bytes, port: int) -> Host:
    return (str(ipaddress.ip_address(raw)), port)


try:  # the same CRC-32 as zlib's, with carry-less multiplication: ~20x faster on a 1 MB batch
    from isal.isal_zlib import crc32 as crc32
except ImportError:  # pragma: no cover - isal is a dependency; zlib gives identical values
    from zlib import crc32 as crc32


def body_crc(body: bytes) -> int:
    return crc32(body) & 0x7FFFFFFF


def encode_properties(props: dict[str, str] | None) -> bytes:
    if not props:
        return b""
    return "".join(f"{k}\x01{v}\x02" for k, v in props.items()).encode("utf-8")


def decode_properties(raw: bytes | str) -> dict[str, str]:
    text = raw.decode("utf-8", "replace") if isinstance(raw, (bytes, bytearray, memoryview)) else raw
    out: dict[str, str] = {}
    if not text:
        return out
    for item in text.split(PROPERTY_SEPARATOR):
        if not item:
            continue
        name, sep, value = item.partition(NAME_VALUE_SEPARATOR)
        if sep:
            out[name] = value
    return out


def message_id(store_host: Host, commitlog_offset: int) -> str:
    raw, port, _ = _pack_host(store_host)
    return (raw + _I32.pack(port) + _I64.pack(commitlog_offset)).hex().upper()


def decode_message_id(msg_id: str) -> tuple[Host, int]:
    """(store host, commitlog offset) of a 32 (IPv4) or 56 (IPv6) hex character message id."""
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError:
        raise MessageFormatError(f"message id {msg_id!r} is not hex") from None
    if len(raw) == 16:
        ip_len = 4
    elif len(raw) == 28:
        ip_len = 16
    else:
        raise MessageFormatError(f"message id {msg_id!r} must be 32 or 56 hex characters")
    host = _unpack_host(raw[:ip_len], _I32.unpack_from(raw, ip_len)[0])
    return host, _I64.unpack_from(raw, ip_len + 4)[0]


@dataclass
class Message:
    """A message to store. ``tags``/``keys`` become the TAGS/KEYS properties."""

    topic: str
    body: bytes
    tags: str | None = None
    keys: list[str] | None = None
    properties: dict[str, str] | None = None
    queue_id: int = 0
    flag: int = 0
    sys_flag: int = 0
    born_timestamp: int | None = None
    born_host: Any = None
    store_host: Any = None
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0

    def all_properties(self) -> dict[str, str]:
        props = dict(self.properties) if self.properties else {}
        if self.tags:
            props[PROPERTY_TAGS] = self.tags
        if self.keys:
            keys = [self.keys] if isinstance(self.keys, str) else self.keys  # a lone key, not its letters
            props[PROPERTY_KEYS] = KEY_SEPARATOR.join(keys)
        return props


@dataclass
class MessageExt:
    """A stored message, decoded from its unit."""

    topic: str
    body: bytes
    properties: dict[str, str] = field(default_factory=dict)
    queue_id: int = 0
    queue_offset: int = 0
    commitlog_offset: int = 0
    store_size: int = 0
    body_crc: int = 0
    flag: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: Host = DEFAULT_HOST
    store_timestamp: int = 0
    store_host: Host = DEFAULT_HOST
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    magic_code: int = MAGIC_CODE_V1

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> list[str]:
        raw = self.properties.get(PROPERTY_KEYS)
        return [k for k in raw.split(KEY_SEPARATOR) if k] if raw else []

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    @property
    def msg_id(self) -> str:
        return message_id(self.store_host, self.commitlog_offset)

    @property
    def is_inner_batch(self) -> bool:
        return bool(self.sys_flag & INNER_BATCH_FLAG)

    @property
    def tags_code(self) -> int:
        return tags_code(self.tags)


def unit_length(body_len: int, topic_len: int, props_len: int, sys_flag: int = 0) -> int:
    born = 20 if sys_flag & BORNHOST_V6_FLAG else 8
    store = 20 if sys_flag & STOREHOST_V6_FLAG else 8
    topic_field = 1 if topic_len <= 127 else 2
    return 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + born + 8 + store + 4 + 8 + 4 + body_len + topic_field + topic_len + 2 + props_len


def encode_unit(
    *,
    topic: bytes,
    body: bytes,
    props: bytes,
    queue_id: int,
    queue_offset: int = 0,
    physical_offset: int = 0,
    flag: int = 0,
    sys_flag: int = 0,
    born_timestamp: int = 0,
    born_host: Host = DEFAULT_HOST,
    store_timestamp: int = 0,
    store_host: Host = DEFAULT_HOST,
    reconsume_times: int = 0,
    prepared_transaction_offset: int = 0,
    crc: int | None = None,
) -> bytearray:
    """Encode one unit (a new bytearray). ``topic`` and ``props`` are already UTF-8 encoded."""
    born_raw, born_port, born_v6 = _pack_host(born_host)
    store_raw, store_port, store_v6 = _pack_host(store_host)
    sys_flag &= ~(BORNHOST_V6_FLAG | STOREHOST_V6_FLAG)
    if born_v6:
        sys_flag |= BORNHOST_V6_FLAG
    if store_v6:
        sys_flag |= STOREHOST_V6_FLAG
    header = _HEADERS[(born_v6, store_v6)]
    topic_len = len(topic)
    if topic_len <= 127:
        magic = MAGIC_CODE_V1
        topic_field = bytes((topic_len,))
    else:
        magic = MAGIC_CODE_V2
        topic_field = _U16.pack(topic_len)
    props_len = len(props)
    total = header.size + len(body) + len(topic_field) + topic_len + 2 + props_len
    return bytearray().join((
        header.pack(
            total, magic, body_crc(body) if crc is None else crc, queue_id, flag, queue_offset,
            physical_offset, sys_flag, born_timestamp, born_raw, born_port, store_timestamp,
            store_raw, store_port, reconsume_times, prepared_transaction_offset, len(body),
        ),
        body, topic_field, topic, _U16.pack(props_len), props,
    ))


def store_timestamp_pos(sys_flag: int) -> int:
    return _BORN_HOST_POS + (20 if sys_flag & BORNHOST_V6_FLAG else 8)


def patch_unit(buf: bytearray, queue_offset: int, physical_offset: int, store_timestamp: int) -> None:
    """Fill in what only the put lock knows: queue offset, commitlog offset, store time."""
    _QOFF_PHY.pack_into(buf, _QUEUE_OFFSET_POS, queue_offset, physical_offset)
    _I64.pack_into(buf, _STORE_TS_V4 if not buf[_SYSFLAG_POS + 3] & BORNHOST_V6_FLAG else _STORE_TS_V6, store_timestamp)


def encode_message(msg: Message, *, queue_offset: int = 0, physical_offset: int = 0,
                   store_timestamp: int | None = None, store_host: Any = None) -> bytearray:
    """Encode a ``Message`` to a unit (tests, tools; the store uses ``encode_unit``)."""
    now = int(time.time() * 1000)
    return encode_unit(
        topic=msg.topic.encode("utf-8"), body=bytes(msg.body), props=encode_properties(msg.all_properties()),
        queue_id=msg.queue_id, queue_offset=queue_offset, physical_offset=physical_offset, flag=msg.flag,
        sys_flag=msg.sys_flag, born_timestamp=now if msg.born_timestamp is None else msg.born_timestamp,
        born_host=parse_host(msg.born_host), store_timestamp=now if store_timestamp is None else store_timestamp,
        store_host=parse_host(store_host if store_host is not None else msg.store_host),
        reconsume_times=msg.reconsume_times, prepared_transaction_offset=msg.prepared_transaction_offset,
    )


class UnitHeader:
    """The fields of a unit the store needs without decoding body/properties (recovery, reads)."""

    __slots__ = ("total_size", "magic", "body_crc", "queue_id", "flag", "queue_offset",
                 "physical_offset", "sys_flag", "born_timestamp", "store_timestamp", "body_pos",
                 "body_len", "topic", "props_pos", "props_len", "store_host_raw", "store_port")

    def __init__(self, buf, pos: int = 0):
        (self.total_size, self.magic, self.body_crc, self.queue_id, self.flag, self.queue_offset,
         self.physical_offset, self.sys_flag, self.born_timestamp) = _PRE.unpack_from(buf, pos)
        if self.magic not in (MAGIC_CODE_V1, MAGIC_CODE_V2):
            raise MessageFormatError(f"bad magic code {self.magic & 0xFFFFFFFF:#x} at {pos}")
        p = pos + _BORN_HOST_POS + (20 if self.sys_flag & BORNHOST_V6_FLAG else 8)
        self.store_timestamp = _I64.unpack_from(buf, p)[0]
        p += 8
        ip_len = 16 if self.sys_flag & STOREHOST_V6_FLAG else 4
        self.store_host_raw = bytes(buf[p:p + ip_len])
        self.store_port = _I32.unpack_from(buf, p + ip_len)[0]
        p += ip_len + 4 + 4 + 8
        self.body_len = _I32.unpack_from(buf, p)[0]
        self.body_pos = p + 4
        p = self.body_pos + self.body_len
        end = pos + self.total_size
        if self.body_len < 0 or p + 3 > end:  # topic length (1) + properties length (2) must follow
            raise MessageFormatError(f"body length {self.body_len} overruns unit of {self.total_size} bytes at {pos}")
        if self.magic == MAGIC_CODE_V1:
            topic_len = buf[p]
            p += 1
        else:
            topic_len = _U16.unpack_from(buf, p)[0]
            p += 2
        self.topic = bytes(buf[p:p + topic_len]).decode("utf-8", "replace")
        p += topic_len
        if p + 2 > end:
            raise MessageFormatError(f"topic overruns unit at {pos}")
        self.props_len = _U16.unpack_from(buf, p)[0]
        self.props_pos = p + 2
        if self.props_pos + self.props_len != end:
            raise MessageFormatError(
                f"unit at {pos}: fields sum to {self.props_pos + self.props_len - pos} bytes, TOTALSIZE says {self.total_size}")

    def properties(self, buf) -> dict[str, str]:
        return decode_properties(bytes(buf[self.props_pos:self.props_pos + self.props_len]))

    def body(self, buf) -> bytes:
        return bytes(buf[self.body_pos:self.body_pos + self.body_len])

    def crc_ok(self, buf) -> bool:
        return body_crc(buf[self.body_pos:self.body_pos + self.body_len]) == self.body_crc

    @property
    def store_host(self) -> Host:
        return _unpack_host(self.store_host_raw, self.store_port)


def decode_message(buf, pos: int = 0, *, check_crc: bool = False) -> MessageExt:
    """Decode the unit at ``pos`` of ``buf`` (bytes, bytearray or memoryview)."""
    if len(buf) - pos < 4:
        raise MessageFormatError("buffer too short for a unit")
    total = _I32.unpack_from(buf, pos)[0]
    if total < 4 or pos + total > len(buf):
        raise MessageFormatError(f"TOTALSIZE {total} at {pos} does not fit the {len(buf) - pos} bytes given")
    try:
        h = UnitHeader(buf, pos)
    except struct.error as exc:
        raise MessageFormatError(f"truncated unit at {pos}: {exc}") from None
    if check_crc and not h.crc_ok(buf):
        raise MessageFormatError(f"body CRC mismatch in unit at {pos}")
    born_len = 16 if h.sys_flag & BORNHOST_V6_FLAG else 4
    born_raw = bytes(buf[pos + _BORN_HOST_POS:pos + _BORN_HOST_POS + born_len])
    born_port = _I32.unpack_from(buf, pos + _BORN_HOST_POS + born_len)[0]
    after_store = pos + store_timestamp_pos(h.sys_flag) + 8 + (20 if h.sys_flag & STOREHOST_V6_FLAG else 8)
    reconsume, prepared = struct.unpack_from(">iq", buf, after_store)
    return MessageExt(
        topic=h.topic, body=h.body(buf), properties=h.properties(buf), queue_id=h.queue_id,
        queue_offset=h.queue_offset, commitlog_offset=h.physical_offset, store_size=h.total_size,
        body_crc=h.body_crc, flag=h.flag, sys_flag=h.sys_flag, born_timestamp=h.born_timestamp,
        born_host=_unpack_host(born_raw, born_port), store_timestamp=h.store_timestamp,
        store_host=h.store_host, reconsume_times=reconsume, prepared_transaction_offset=prepared,
        magic_code=h.magic,
    )


def decode_messages(buf) -> list[MessageExt]:
    """Decode consecutive units (e.g. a pull response body)."""
    out, pos = [], 0
    while pos < len(buf):
        m = decode_message(buf, pos)
        out.append(m)
        pos += m.store_size
    return out


def iter_keys(props: dict[str, str]) -> Iterable[str]:
    raw = props.get(PROPERTY_KEYS)
    if raw:
        for k in raw.split(KEY_SEPARATOR):
            if k:
                yield k
