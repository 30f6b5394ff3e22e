"""Message encodings of the remoting protocol (``MessageDecoder``'s wire facts).

Owns:
- message properties as one string: ``name \\x01 value \\x02`` repeated;
- the send-batch body (``encodeMessages``): per message totalSize(4) + magic(4, 0) +
  bodyCRC(4, 0) + flag(4) + bodyLen(4) + body + propertiesLen(2) + properties;
- decoding stored commitlog units (a pull response body is a concatenation of them)::

    TOTALSIZE(4) MAGICCODE(4) BODYCRC(4) QUEUEID(4) FLAG(4) QUEUEOFFSET(8) PHYSICALOFFSET(8)
    SYSFLAG(4) BORNTIMESTAMP(8) BORNHOST(8 | 20 with BORNHOST_V6) STORETIMESTAMP(8)
    STOREHOST(8 | 20 with STOREHOST_V6) RECONSUMETIMES(4) PREPARED_TRANSACTION_OFFSET(8)
    BODYLEN(4) BODY TOPICLEN(1, or 2 with MAGICCODE V2) TOPIC PROPERTIESLEN(2) PROPERTIES

- message ids: the offset id is hex(storeHost ip(4) + port(4) + commitlog offset(8)); the
  client-side unique id (``UNIQ_KEY``) is hex of 16 bytes: ip(4) + pid(2) + random(4) +
  time since month start(4) + counter(2), as ``MessageClientIDSetter`` builds it.

Invariants: decoding never trusts a length field past the buffer (``MessageDecodeError``);
``tags_hash`` equals Java's ``String.hashCode`` (what consume queues store as tags code).
"""

from __future__ import annotations

import itertools
import os
import random
import socket
import struct
import threading
import time
import zlib
from dataclasses import dataclass
from typing import Any

from engine.message import (
    MessageExt, MessageFormatError, PROPERTY_KEYS, PROPERTY_TAGS, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, decode_message,
    decode_properties, encode_properties, tags_code,
)

MAGIC_V1 = -626843481  # 0xDAA320A7
MAGIC_V2 = -626843477  # 0xDAA320AB
BLANK_MAGIC = -875286124  # end-of-file filler (0xCBD43194)

SYSFLAG_COMPRESSED = 0x1
SYSFLAG_MULTI_TAGS = 0x2
SYSFLAG_TRANSACTION_PREPARED = 0x4
SYSFLAG_TRANSACTION_COMMIT = 0x8
SYSFLAG_BORNHOST_V6 = 0x10
SYSFLAG_STOREHOST_V6 = 0x20
SYSFLAG_INNER_BATCH = 0x80
COMPRESSION_TYPE_MASK = 0x7 << 8
COMPRESSION_LZ4 = 0x1 << 8
COMPRESSION_ZSTD = 0x2 << 8
COMPRESSION_ZLIB = 0x3 << 8

# MessageConst property names are engine.message's (PROPERTY_*): one vocabulary for every protocol.



class MessageDecodeError(ValueError):
    pass


def properties_to_string(props: dict[str, str] | None) -> str:
    """``name \\x01 value \\x02`` repeated; None values are left out (the client drops them)."""
    if not props:
        return ""
    return encode_properties({k: v for k, v in props.items() if v is not None}).decode("utf-8")


def string_to_properties(text: str | None) -> dict[str, str]:
    props = decode_properties(text or "")
    props.pop("", None)  # a nameless property is dropped (the same dict, not a filtered copy)
    return props


def tags_hash(tags: str | None) -> int:
    """Java ``String.hashCode`` (UTF-16 code units, 32-bit wrap), as a signed int: the tags
    code consume queues store, so it is the engine's own function."""
    return tags_code(tags)


# -- batch body (SEND_BATCH_MESSAGE) ------------------------------------------------------

def encode_batch_item(body: bytes, properties: dict[str, str], flag: int = 0) -> bytes:
    props = properties_to_string(properties).encode()
    if len(props) > 32767:
        raise ValueError(f"message properties are {len(props)} bytes; the limit is 32767")
    size = 4 + 4 + 4 + 4 + 4 + len(body) + 2 + len(props)
    return struct.pack(">iiiii", size, 0, 0, flag, len(body)) + body + struct.pack(">h", len(props)) + props


@dataclass
class BatchItem:
    flag: int
    body: bytes
    properties: dict[str, str]


def decode_batch_body(data: bytes) -> list[BatchItem]:
    items = []
    pos, n = 0, len(data)
    while pos < n:
        if pos + 20 > n:
            raise MessageDecodeError(f"batch body truncated at byte {pos}")
        size, _magic, _crc, flag, blen = struct.unpack_from(">iiiii", data, pos)
        if size < 22 or pos + size > n or blen < 0 or 20 + blen + 2 > size:
            raise MessageDecodeError(f"batch item at byte {pos} has inconsistent sizes (total {size}, body {blen})")
        body = data[pos + 20:pos + 20 + blen]
        (plen,) = struct.unpack_from(">h", data, pos + 20 + blen)
        if plen < 0 or 20 + blen + 2 + plen > size:
            raise MessageDecodeError(f"batch item at byte {pos} has a bad properties length {plen}")
        pstart = pos + 22 + blen
        props = string_to_properties(data[pstart:pstart + plen].decode("utf-8", "replace"))
        items.append(BatchItem(flag, bytes(body), props))
        pos += size
    return items


# -- message ids --------------------------------------------------------------------------

def create_offset_msg_id(store_ip: bytes, store_port: int, commitlog_offset: int) -> str:
    return (store_ip + struct.pack(">iq", store_port, commitlog_offset)).hex().upper()


def decode_offset_msg_id(msg_id: str) -> tuple[str, int, int]:
    """(ip, port, commitlog offset) of an offset message id (IPv4: 32 hex chars, IPv6: 56)."""
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError:
        raise MessageDecodeError(f"message id {msg_id!r} is not hexadecimal") from None
    if len(raw) == 16:
        ip = socket.inet_ntop(socket.AF_INET, raw[:4])
        port, offset = struct.unpack(">iq", raw[4:])
    elif len(raw) == 28:
        ip = socket.inet_ntop(socket.AF_INET6, raw[:16])
        port, offset = struct.unpack(">iq", raw[16:])
    else:
        raise MessageDecodeError(f"message id {msg_id!r} has {len(raw)} bytes; expected 16 (IPv4) or 28 (IPv6)")
    return ip, port, offset


class UniqIdGenerator:
    """``MessageClientIDSetter``: a fixed 10-byte prefix, then time and a counter."""

    def __init__(self, ip: bytes = b"\x7f\x00\x00\x01"):
        self._prefix = (ip[-4:] + struct.pack(">H", os.getpid() & 0xFFFF) + random.getrandbits(32).to_bytes(4, "big")).hex().upper()
        self._counter = itertools.count(random.randrange(1 << 16))
        self._lock = threading.Lock()
        t = time.localtime()
        self._month_start = time.mktime((t.tm_year, t.tm_mon, 1, 0, 0, 0, 0, 0, -1))

    def next(self) -> str:
        with self._lock:
            n = next(self._counter) & 0xFFFF
        diff = int((time.time() - self._month_start) * 1000) & 0xFFFFFFFF
        return self._prefix + struct.pack(">IH", diff, n).hex().upper()


# -- stored units -------------------------------------------------------------------------

@dataclass
class MessageClientExt(MessageExt):
    """A stored message as a client sees it (RocketMQ's ``MessageClientExt``): engine.message's
    ``MessageExt`` with the hosts as ``ip:port`` text, the body decompressed, the offset message
    id and the client's message id (its UNIQ_KEY, else the offset id) as ``msg_id``."""

    born_host: Any = ""
    store_host: Any = ""
    offset_msg_id: str = ""
    broker_name: str = ""

    @property
    def msg_id(self) -> str:
        return self.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or self.offset_msg_id

    def get_property(self, name: str, default: str | None = None) -> str | None:
        return self.properties.get(name, default)


def _decompress(body: bytes, sys_flag: int) -> bytes:
    kind = sys_flag & COMPRESSION_TYPE_MASK
    if kind in (0, COMPRESSION_ZLIB):
        return zlib.decompress(body)
    import cramjam  # optional codecs, only for messages that use them

    if kind == COMPRESSION_LZ4:
        return bytes(cramjam.lz4.decompress_block(body))
    if kind == COMPRESSION_ZSTD:
        return bytes(cramjam.zstd.decompress(body))
    raise MessageDecodeError(f"unknown compression type bits {kind:#x}")


def _host_text(host: tuple[str, int]) -> str:
    ip, port = host
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def decode_unit(data: bytes | memoryview, pos: int = 0, *, decompress: bool = True) -> MessageClientExt:
    """A stored unit as the client sees it. The layout is parsed by the engine's codec (one
    parser for the stored format); this adds what a client needs on top: decompressed bodies,
    hosts as text and the offset message id."""
    try:
        m = decode_message(data, pos)
    except (MessageFormatError, struct.error, IndexError) as exc:
        raise MessageDecodeError(f"message unit at {pos} is malformed: {exc}") from None
    body = bytes(m.body)
    if decompress and m.sys_flag & SYSFLAG_COMPRESSED:
        try:
            body = _decompress(body, m.sys_flag)
        except Exception as exc:  # a corrupt body must not kill the consumer
            raise MessageDecodeError(f"cannot decompress message body at {pos}: {exc}") from None
    return MessageClientExt(topic=m.topic, body=body, properties=m.properties, flag=m.flag, queue_id=m.queue_id,
                      queue_offset=m.queue_offset, commitlog_offset=m.commitlog_offset, sys_flag=m.sys_flag,
                      born_timestamp=m.born_timestamp, born_host=_host_text(m.born_host),
                      store_timestamp=m.store_timestamp, store_host=_host_text(m.store_host),
                      reconsume_times=m.reconsume_times, prepared_transaction_offset=m.prepared_transaction_offset,
                      body_crc=m.body_crc, store_size=m.store_size, offset_msg_id=m.msg_id)


def iter_units(data: bytes) -> list[tuple[int, int]]:
    """(start, size) of each unit in a concatenation of units."""
    out = []
    pos, n = 0, len(data)
    while pos + 4 <= n:
        (size,) = struct.unpack_from(">i", data, pos)
        if size <= 0 or pos + size > n:
            raise MessageDecodeError(f"message unit at {pos} declares {size} bytes, {n - pos} remain")
        out.append((pos, size))
        pos += size
    return out


def decode_units(data: bytes) -> list[MessageClientExt]:
    return [decode_unit(data, start) for start, _ in iter_units(data)]
