"""The HA wire format (sans-IO): frames between a master and its slaves.

Layout (big-endian; ``docs/design/replication.md`` has the tables)::

    frameSize(4)  bytes after this field, 1 .. MAX_FRAME
    type(1)
    payload

Slave -> master: HELLO (1), PULL (2), ACK (3). Master -> slave: WELCOME (10), DATA (11),
METADATA (12). ``FrameReader`` turns received bytes into ``(type, payload)`` pairs and refuses
an oversized or empty frame before buffering it; the ``encode_*`` / ``decode_*`` pairs build
and parse each payload. Nothing here touches a socket.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field

from .epoch import EpochEntry

PROTOCOL_VERSION = 1
MAX_FRAME = 64 * 1024 * 1024

HELLO, PULL, ACK = 1, 2, 3
WELCOME, DATA, METADATA = 10, 11, 12
TYPES = {HELLO, PULL, ACK, WELCOME, DATA, METADATA}

WELCOME_OK, WELCOME_REFUSED = 0, 1

_HEAD = struct.Struct(">iB")
_HELLO = struct.Struct(">hqqi")
_Q = struct.Struct(">q")
_WELCOME = struct.Struct(">hhqqqi")
_ENTRY = struct.Struct(">iqq")
_DATA = struct.Struct(">qiqqq")
_H = struct.Struct(">H")

DATA_HEADER_SIZE = _HEAD.size + _DATA.size


class ProtocolError(ValueError):
    """Bytes that are not a valid HA frame: the connection is closed."""


def frame(kind: int, payload: bytes = b"") -> bytes:
    return _HEAD.pack(len(payload) + 1, kind) + payload


class FrameReader:
    """Accumulates received bytes; ``frames()`` yields complete (type, payload) frames."""

    def __init__(self, max_frame: int = MAX_FRAME):
        self.buf = bytearray()
        self.max_frame = max_frame

    def feed(self, data) -> None:
        self.buf += data

    def frames(self):
        buf = self.buf
        pos = 0
        try:
            while len(buf) - pos >= _HEAD.size:
                size, kind = _HEAD.unpack_from(buf, pos)
                if size < 1 or size > self.max_frame:
                    raise ProtocolError(f"frame size {size} outside 1..{self.max_frame}")
                if kind not in TYPES:
                    raise ProtocolError(f"unknown frame type {kind}")
                end = pos + 4 + size
                if len(buf) < end:
                    break
                payload = bytes(buf[pos + _HEAD.size:end])
                pos = end  # consumed even when the caller stops iterating after this frame
                yield kind, payload
        finally:
            if pos:
                del buf[:pos]


# -- HELLO ---------------------------------------------------------------------------------------
@dataclass
class Hello:
    version: int
    segment_size: int
    broker_id: int
    identity: dict = field(default_factory=dict)


def encode_hello(h: Hello) -> bytes:
    ident = json.dumps(h.identity, separators=(",", ":"), sort_keys=True).encode()
    return frame(HELLO, _HELLO.pack(h.version, h.segment_size, h.broker_id, len(ident)) + ident)


def decode_hello(p: bytes) -> Hello:
    try:
        version, seg, bid, n = _HELLO.unpack_from(p)
        raw = p[_HELLO.size:_HELLO.size + n]
        if n < 0 or len(raw) != n:
            raise ProtocolError("HELLO identity length does not match the frame")
        ident = json.loads(raw.decode("utf-8")) if n else {}
    except (struct.error, ValueError) as exc:
        raise ProtocolError(f"bad HELLO: {exc}") from None
    if not isinstance(ident, dict):
        raise ProtocolError("HELLO identity is not a JSON object")
    return Hello(version, seg, bid, ident)


def identity_bytes(identity: dict) -> bytes:
    """What a HELLO signature covers: the identity without its ``auth`` object, canonical JSON."""
    return json.dumps({k: v for k, v in identity.items() if k != "auth"}, separators=(",", ":"),
                      sort_keys=True).encode()


# -- PULL / ACK ----------------------------------------------------------------------------------
def encode_offset(kind: int, offset: int) -> bytes:
    return frame(kind, _Q.pack(offset))


def decode_offset(p: bytes) -> int:
    if len(p) != 8:
        raise ProtocolError(f"offset frame of {len(p)} bytes, expected 8")
    return _Q.unpack(p)[0]


# -- WELCOME -------------------------------------------------------------------------------------
@dataclass
class Welcome:
    version: int
    status: int
    min_offset: int = 0
    max_offset: int = 0
    confirm_offset: int = 0
    epochs: list[EpochEntry] = field(default_factory=list)
    reason: str = ""


def encode_welcome(w: Welcome) -> bytes:
    reason = w.reason.encode("utf-8")[:65535]
    body = bytearray(_WELCOME.pack(w.version, w.status, w.min_offset, w.max_offset, w.confirm_offset, len(w.epochs)))
    for e in w.epochs:
        body += _ENTRY.pack(e.epoch, e.start_offset, e.opened_at)
    body += _H.pack(len(reason)) + reason
    return frame(WELCOME, bytes(body))


def decode_welcome(p: bytes) -> Welcome:
    try:
        version, status, lo, hi, confirm, n = _WELCOME.unpack_from(p)
        pos = _WELCOME.size
        if n < 0 or pos + n * _ENTRY.size + 2 > len(p):
            raise ProtocolError("WELCOME epoch count does not match the frame")
        epochs = [EpochEntry(*_ENTRY.unpack_from(p, pos + i * _ENTRY.size)) for i in range(n)]
        pos += n * _ENTRY.size
        (rn,) = _H.unpack_from(p, pos)
        reason = p[pos + 2:pos + 2 + rn].decode("utf-8", "replace")
    except struct.error as exc:
        raise ProtocolError(f"bad WELCOME: {exc}") from None
    return Welcome(version, status, lo, hi, confirm, epochs, reason)


# -- DATA ----------------------------------------------------------------------------------------
@dataclass(slots=True)
class DataHeader:
    offset: int
    epoch: int
    epoch_start: int
    confirm_offset: int
    master_max_offset: int


def encode_data_header(offset: int, epoch: int, epoch_start: int, confirm: int, master_max: int, body_len: int) -> bytes:
    """The frame header and DATA fields; the body bytes follow on the wire (no copy into one buffer)."""
    return _HEAD.pack(1 + _DATA.size + body_len, DATA) + _DATA.pack(offset, epoch, epoch_start, confirm, master_max)


def decode_data(p: bytes) -> tuple[DataHeader, memoryview]:
    if len(p) < _DATA.size:
        raise ProtocolError(f"DATA frame of {len(p)} bytes, shorter than its {_DATA.size}-byte header")
    h = DataHeader(*_DATA.unpack_from(p))
    return h, memoryview(p)[_DATA.size:]


# -- METADATA ------------------------------------------------------------------------------------
def encode_metadata(name: str, doc: bytes) -> bytes:
    raw = name.encode("utf-8")
    return frame(METADATA, _H.pack(len(raw)) + raw + doc)


def decode_metadata(p: bytes) -> tuple[str, dict]:
    try:
        (n,) = _H.unpack_from(p)
        name = p[2:2 + n].decode("utf-8")
        doc = json.loads(p[2 + n:].decode("utf-8"))
    except (struct.error, ValueError) as exc:
        raise ProtocolError(f"bad METADATA: {exc}") from None
    if not isinstance(doc, dict):
        raise ProtocolError("METADATA document is not a JSON object")
    return name, doc
