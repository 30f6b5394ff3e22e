"""A remote segment's two objects: built from one queue's stored units, read back by offset.

What it owns: the byte layout of ``.log`` (the queue's stored units, whole, in queue order:
exactly the bytes ``MessageStore.get_message`` returns for them, so a remote read serves the
same bytes as a local one), of ``.idx`` (one fixed-width entry per unit: first queue offset,
record count, position in ``.log``, size, tags hash, store timestamp) and of ``.keys`` (the keys
each unit is found by, as the local IndexFile indexes them: KEYS, UNIQ_KEY and Kafka record
keys), and the functions between them and the store / the object store
(docs/design/tiered-storage.md).

``.keys`` layout, format version 1: b"RKK1", then per unit that has keys: unit index (4) +
key count (2) + per key: length (2) + UTF-8 bytes.

Invariants: units are never split (a Kafka batch is one unit and stays whole); a segment holds
a contiguous run of queue offsets ``[base, end)`` (units the cleaner removed leave no entry and
their offsets read as absent, as locally); every read is bounded in bytes.
"""

from __future__ import annotations

import bisect
import dataclasses
import struct
from typing import Any

from .object_store import ObjectStore

_ENTRY = struct.Struct(">qiqiqq")  # queue_offset, record_count, position, size, tags_code, store_ts


_KEYS_MAGIC = b"RKK1"
_U32, _U16 = struct.Struct(">I"), struct.Struct(">H")


@dataclasses.dataclass(frozen=True, slots=True)
class BuiltSegment:
    base: int
    end: int
    log: bytes
    idx: bytes
    first_timestamp: int
    last_timestamp: int
    commitlog_end: int
    keys: bytes = _KEYS_MAGIC


def unit_keys_of(unit: bytes, record_keys: bool = True) -> list[str]:
    """The keys a unit is found by (what the local IndexFile indexes for it)."""
    from engine.dispatcher import unit_keys
    from engine.message import MessageFormatError, UnitHeader

    try:
        h = UnitHeader(unit)
        return unit_keys(h, unit, h.properties(unit), record_keys)
    except (MessageFormatError, ValueError):
        return []


def encode_keys(per_unit: list[list[str]]) -> bytes:
    out = bytearray(_KEYS_MAGIC)
    for i, keys in enumerate(per_unit):
        raw = [k.encode("utf-8")[:65535] for k in dict.fromkeys(keys) if k][:65535]
        if not raw:
            continue
        out += _U32.pack(i) + _U16.pack(len(raw))
        for k in raw:
            out += _U16.pack(len(k)) + k
    return bytes(out)


def parse_keys(raw: bytes) -> dict[str, list[int]]:
    """key -> indexes of the units carrying it (in unit order)."""
    if raw[:4] != _KEYS_MAGIC:
        raise ValueError("not a version-1 keys object")
    out: dict[str, list[int]] = {}
    p = 4
    while p < len(raw):
        (i,), (n,) = _U32.unpack_from(raw, p), _U16.unpack_from(raw, p + 4)
        p += 6
        for _ in range(n):
            (ln,) = _U16.unpack_from(raw, p)
            out.setdefault(raw[p + 2:p + 2 + ln].decode("utf-8", "replace"), []).append(i)
            p += 2 + ln
    return out


def build_segment(store: Any, topic: str, queue_id: int, base: int, *, max_bytes: int,
                  commitlog_limit: int | None = None) -> BuiltSegment | None:
    """The units of ``topic``/``queue_id`` from ``base`` on, up to ``max_bytes`` (at least one
    unit) and only units whose bytes end at or below ``commitlog_limit`` (closed data); None
    when there is none."""
    parts: list[bytes] = []
    entries: list[bytes] = []
    keys: list[list[str]] = []
    record_keys = bool(getattr(getattr(store, "config", None), "index_kafka_record_keys", True))
    pos, offset, end = 0, base, base
    first_ts = last_ts = -1
    cl_end = -1
    while pos < max_bytes:
        res = store.get_message("", topic, queue_id, offset, 256, max_bytes=max_bytes - pos)
        if not res.messages:
            break
        for data, ref in zip(res.messages, res.units):
            stop = commitlog_limit is not None and ref.commitlog_offset + ref.size > commitlog_limit
            if stop or (parts and pos + ref.size > max_bytes):
                break
            entries.append(_ENTRY.pack(ref.queue_offset, ref.record_count, pos, ref.size,
                                       ref.tags_code, ref.store_timestamp))
            parts.append(bytes(data))
            keys.append(unit_keys_of(parts[-1], record_keys))
            pos += ref.size
            end = ref.queue_offset + ref.record_count
            first_ts = ref.store_timestamp if first_ts < 0 else first_ts
            last_ts = ref.store_timestamp
            cl_end = ref.commitlog_offset + ref.size
        else:
            if res.next_begin_offset <= offset:
                break
            offset = res.next_begin_offset
            continue
        break
    if not parts:
        return None
    return BuiltSegment(base, end, b"".join(parts), b"".join(entries), first_ts, last_ts, cl_end,
                        encode_keys(keys))


@dataclasses.dataclass(frozen=True, slots=True)
class SegmentIndex:
    offsets: list[int]
    counts: list[int]
    positions: list[int]
    sizes: list[int]
    timestamps: list[int]
    tags: list[int] = dataclasses.field(default_factory=list)

    @classmethod
    def parse(cls, raw: bytes) -> "SegmentIndex":
        if len(raw) % _ENTRY.size:
            raise ValueError(f"index of {len(raw)} bytes is not whole {_ENTRY.size}-byte entries")
        rows = list(_ENTRY.iter_unpack(raw))
        return cls([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows],
                   [r[3] for r in rows], [r[5] for r in rows], [r[4] for r in rows])

    def first_unit(self, offset: int) -> int | None:
        """Index of the unit holding ``offset``, else of the first unit after it, else None."""
        i = bisect.bisect_right(self.offsets, offset) - 1
        if i >= 0 and offset < self.offsets[i] + self.counts[i]:
            return i
        return i + 1 if i + 1 < len(self.offsets) else None


async def read_units(objects: ObjectStore, log_key: str, index: SegmentIndex, offset: int,
                     max_bytes: int) -> list[bytes]:
    """The stored units from the one holding ``offset`` on, whole, at least one and then no
    more than ``max_bytes`` in all: one range read of the ``.log`` object."""
    i = index.first_unit(offset)
    if i is None:
        return []
    j = i + 1
    total = index.sizes[i]
    while j < len(index.offsets) and total + index.sizes[j] <= max_bytes:
        total += index.sizes[j]
        j += 1
    start = index.positions[i]
    data = await objects.get_range(log_key, start, start + total)
    out, p = [], 0
    for k in range(i, j):
        out.append(data[p:p + index.sizes[k]])
        p += index.sizes[k]
    return out
