"""Kafka wire primitives: fixed-width ints, varints, strings, bytes, arrays, UUIDs, tagged fields.

Owns the byte-level encoding of every primitive type the Kafka protocol uses, in both its
classic (int16/int32 length-prefixed) and flexible ("compact": unsigned varint length + 1)
forms. Pure functions over ``bytes``/``memoryview`` input and a ``Writer`` for output; no I/O.

Invariants:
- Readers take ``(buf, pos)`` and return ``(value, new_pos)``; they raise ``ProtocolDecodeError``
  (never IndexError or struct.error) on short or inconsistent input, so one bad frame can be
  answered or dropped without crashing the connection handler.
- ``Writer`` collects output in one bytearray; with ``zero_copy`` on, large raw payloads
  (record batches) are kept as separate chunks instead of being copied in.
"""

from __future__ import annotations

import struct
import uuid

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_F64 = struct.Struct(">d")

ZERO_UUID = uuid.UUID(int=0)

# Below this size a raw payload is copied into the current buffer: a separate chunk costs
# more (one more writelines element, one more syscall buffer) than copying a few bytes.
ZERO_COPY_THRESHOLD = 1024


class ProtocolDecodeError(ValueError):
    """The bytes do not follow the schema (short, negative length, bad UTF-8, ...)."""


class Writer:
    """Output buffer; ``chunks()`` returns the encoded bytes as a list of buffers."""

    __slots__ = ("buf", "parts", "zero_copy")

    def __init__(self, zero_copy: bool = False) -> None:
        self.buf = bytearray()
        self.parts: list = []
        self.zero_copy = zero_copy

    def raw(self, data) -> None:
        """Append a payload; large ones become their own chunk when zero_copy is on."""
        if self.zero_copy and len(data) >= ZERO_COPY_THRESHOLD:
            if self.buf:
                self.parts.append(self.buf)
                self.buf = bytearray()
            self.parts.append(data)
        else:
            try:
                self.buf += data
            except TypeError:  # bytes still in a file (gateway_kafka.wire_out.FileRun): read them
                self.buf += data.materialize()

    def size(self) -> int:
        return sum(len(p) for p in self.parts) + len(self.buf)

    def chunks(self) -> list:
        if self.buf or not self.parts:
            return self.parts + [self.buf]
        return list(self.parts)

    def getvalue(self) -> bytes:
        if not self.parts:
            return bytes(self.buf)
        return b"".join(self.chunks())


# --- unsigned varint (protobuf base-128) and zigzag varint/varlong ----------------------------

def write_uvarint(out: bytearray, n: int) -> None:
    if n < 0:
        raise ValueError(f"unsigned varint cannot hold {n}")
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def read_uvarint(buf, pos: int) -> tuple[int, int]:
    try:
        b = buf[pos]
        if b < 0x80:  # the common case: one byte
            return b, pos + 1
        result = b & 0x7F
        shift = 7
        pos += 1
        while True:
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return result, pos
            shift += 7
            if shift > 63:
                raise ProtocolDecodeError("unsigned varint longer than 10 bytes")
    except IndexError:
        raise ProtocolDecodeError("frame ends inside a varint") from None


def write_varint(out: bytearray, n: int) -> None:
    write_uvarint(out, ((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF)


def read_varint(buf, pos: int) -> tuple[int, int]:
    raw, pos = read_uvarint(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


# --- fixed width --------------------------------------------------------------------------

def _fixed(st: struct.Struct):
    size = st.size
    unpack_from = st.unpack_from
    pack = st.pack

    def read(buf, pos):
        try:
            return unpack_from(buf, pos)[0], pos + size
        except struct.error:
            raise ProtocolDecodeError(f"frame ends inside a {size}-byte field") from None

    def write(w: Writer, v) -> None:
        w.buf += pack(v or 0)

    return read, write


read_int8, write_int8 = _fixed(_I8)
read_int16, write_int16 = _fixed(_I16)
read_int32, write_int32 = _fixed(_I32)
read_int64, write_int64 = _fixed(_I64)
read_uint16, write_uint16 = _fixed(_U16)
read_uint32, write_uint32 = _fixed(_U32)
read_float64, write_float64 = _fixed(_F64)


def read_bool(buf, pos):
    try:
        return buf[pos] != 0, pos + 1
    except IndexError:
        raise ProtocolDecodeError("frame ends inside a boolean") from None


def write_bool(w: Writer, v) -> None:
    w.buf.append(1 if v else 0)


def read_uuid(buf, pos):
    end = pos + 16
    if end > len(buf):
        raise ProtocolDecodeError("frame ends inside a UUID")
    return uuid.UUID(bytes=bytes(buf[pos:end])), end


def write_uuid(w: Writer, v) -> None:
    if v is None:
        w.buf += bytes(16)
    elif isinstance(v, uuid.UUID):
        w.buf += v.bytes
    else:
        b = bytes(v)
        if len(b) != 16:
            raise ValueError(f"a UUID is 16 bytes, got {len(b)}")
        w.buf += b


# --- length-prefixed values -------------------------------------------------------------------
# Each maker returns (read, write) for one (flexible, nullable) combination.

def _length_reader(flexible: bool, classic: struct.Struct):
    if flexible:
        def read_len(buf, pos):
            n, pos = read_uvarint(buf, pos)
            return n - 1, pos
    else:
        unpack_from = classic.unpack_from
        size = classic.size

        def read_len(buf, pos):
            try:
                return unpack_from(buf, pos)[0], pos + size
            except struct.error:
                raise ProtocolDecodeError("frame ends inside a length field") from None
    return read_len


def _length_writer(flexible: bool, classic: struct.Struct):
    if flexible:
        def write_len(out: bytearray, n: int) -> None:
            write_uvarint(out, n + 1)
    else:
        pack = classic.pack

        def write_len(out: bytearray, n: int) -> None:
            out += pack(n)
    return write_len


def string_codec(flexible: bool, nullable: bool):
    read_len = _length_reader(flexible, _I16)
    write_len = _length_writer(flexible, _I16)

    def read(buf, pos):
        n, pos = read_len(buf, pos)
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            raise ProtocolDecodeError(f"string length {n} is invalid here")
        end = pos + n
        if end > len(buf):
            raise ProtocolDecodeError(f"string of {n} bytes runs past the frame end")
        try:
            return str(buf[pos:end], "utf-8"), end
        except UnicodeDecodeError:
            raise ProtocolDecodeError("string is not valid UTF-8") from None

    def write(w: Writer, v) -> None:
        if v is None:
            if nullable:
                write_len(w.buf, -1)
                return
            v = ""
        b = v.encode("utf-8")
        write_len(w.buf, len(b))
        w.buf += b

    return read, write


def bytes_codec(flexible: bool, nullable: bool, zero_copy: bool = False):
    """``bytes`` fields decode to bytes; ``records`` fields (zero_copy) decode to a memoryview
    of the frame and encode from bytes, memoryview or a list of buffers (concatenated)."""
    read_len = _length_reader(flexible, _I32)
    write_len = _length_writer(flexible, _I32)

    def read(buf, pos):
        n, pos = read_len(buf, pos)
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            raise ProtocolDecodeError(f"bytes length {n} is invalid here")
        end = pos + n
        if end > len(buf):
            raise ProtocolDecodeError(f"bytes field of {n} bytes runs past the frame end")
        if zero_copy:
            return memoryview(buf)[pos:end], end
        return bytes(buf[pos:end]), end

    def write(w: Writer, v) -> None:
        if v is None:
            if nullable:
                write_len(w.buf, -1)
                return
            v = b""
        if isinstance(v, (list, tuple)):
            write_len(w.buf, sum(len(part) for part in v))
            for part in v:
                w.raw(part)
            return
        if not isinstance(v, (bytes, bytearray)):
            v = memoryview(v).cast("B")
        write_len(w.buf, len(v))
        if zero_copy:
            w.raw(v)
        else:
            w.buf += v

    return read, write


def array_codec(flexible: bool, nullable: bool, read_item, write_item):
    read_len = _length_reader(flexible, _I32)
    write_len = _length_writer(flexible, _I32)

    def read(buf, pos):
        n, pos = read_len(buf, pos)
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            raise ProtocolDecodeError(f"array length {n} is invalid here")
        if n > len(buf) - pos:
            # every element takes at least one byte: a larger count is a lie, not a big array
            raise ProtocolDecodeError(f"array of {n} elements cannot fit in the frame")
        items = []
        append = items.append
        for _ in range(n):
            item, pos = read_item(buf, pos)
            append(item)
        return items, pos

    def write(w: Writer, v) -> None:
        if v is None:
            if nullable:
                write_len(w.buf, -1)
                return
            v = ()
        write_len(w.buf, len(v))
        for item in v:
            write_item(w, item)

    return read, write


def skip_tagged_fields(buf, pos):
    """Read a tagged-field section and ignore every field in it."""
    n, pos = read_uvarint(buf, pos)
    for _ in range(n):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise ProtocolDecodeError("tagged field runs past the frame end")
    return pos
