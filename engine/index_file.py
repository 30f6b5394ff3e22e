"""IndexFile and IndexService: hash index from ``topic#key`` to commitlog offsets (RocketMQ's).

Files: ``<root>/index/<yyyyMMddHHmmssSSS>`` named by creation time. Layout (big-endian):

    header: beginTimestamp(8) + endTimestamp(8) + beginPhyOffset(8) + endPhyOffset(8)
            + hashSlotCount(4) + indexCount(4)                                  = 40 bytes
    slots:  maxHashSlotNum x slotValue(4)   (index number of the newest entry for the slot)
    entries: maxIndexNum x [keyHash(4) + phyOffset(8) + timeDiff(4) + prevIndex(4)] = 20 bytes

- keyHash = |Java String.hashCode(key)| (0 for Integer.MIN_VALUE); slot = keyHash % slots.
- timeDiff = seconds since the file's beginTimestamp; prevIndex chains entries of a slot, so a
  walk from the slot visits entries newest first.
- indexCount starts at 1 (entry 0 is never used: 0 in a slot or prevIndex means "none").
- Per entry the write order is entry, slot, header; a slot value at or above indexCount is
  ignored, so a torn put never leads a query astray, and opening a file puts back the slot of a
  put killed between its slot and header writes (the uncounted entry names its slot and the
  slot's previous head), before the next put overwrites that entry and cuts the slot's chain. After a crash the dispatcher re-adds entries for
  units at or after the last file's endPhyOffset; queries drop duplicate offsets.
- A file is full at indexCount == maxIndexNum; the next key goes to a new file.
- Format version: 1 (RocketMQ's layout, no extra fields).
"""

from __future__ import annotations

import os
import struct
import threading
import time
from datetime import datetime, timezone

import structlog

from .file_io import PAGE_SIZE, FileIO

log = structlog.get_logger("rockafka.engine.index_file")

HEADER_SIZE = 40
HASH_SLOT_SIZE = 4
INDEX_SIZE = 20
INVALID_INDEX = 0
_HEADER = struct.Struct(">qqqqii")
_ENTRY = struct.Struct(">iqii")
_I32 = struct.Struct(">i")
_MAX_INT = 2**31 - 1


def _java_hash_py(s: str) -> int:
    """Java ``String.hashCode`` (signed 32-bit), uncached: index keys are mostly unique, and
    ``engine.message.java_hash``'s cache (sized for tags) would only churn."""
    h = 0
    for (unit,) in struct.iter_unpack(">H", s.encode("utf-16-be", "surrogatepass")):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


try:  # compiled (engine/_recordwalk.c); the same function in Python without a C compiler
    from ._recordwalk import java_hash as _java_hash
except ImportError:  # pragma: no cover - the extension is optional
    _java_hash = _java_hash_py


def key_hash(key: str) -> int:
    h = abs(_java_hash(key))
    return 0 if h > _MAX_INT else h


def build_key(topic: str, key: str) -> str:
    return f"{topic}#{key}"


def file_name_for(ts_ms: int) -> str:
    dt = datetime.fromtimestamp(ts_ms / 1000.0, tz=timezone.utc)
    return dt.strftime("%Y%m%d%H%M%S") + f"{ts_ms % 1000:03d}"


class IndexFile:
    def __init__(self, fio: FileIO, path: str, slot_num: int, index_num: int):
        self.path = path
        self.slot_num = slot_num
        self.index_num = index_num
        self.size = HEADER_SIZE + slot_num * HASH_SLOT_SIZE + index_num * INDEX_SIZE
        self.segment = fio.open_segment(path, self.size, random_access=True)  # hash slots: random pages
        self._fio = fio
        self._slots_reserved = False
        self._entries_reserved_to = 0  # entries below this byte have their blocks (a page at a time)
        # pread: a new file is a hole, and reading a hole through a tmpfs mapping allocates it
        (self.begin_timestamp, self.end_timestamp, self.begin_phy_offset, self.end_phy_offset,
         self.hash_slot_count, self.index_count) = _HEADER.unpack(self.segment.pread(0, HEADER_SIZE))
        if self.index_count <= 0:
            self.index_count = 1  # written with the first entry (a new file takes no space until then)
        elif self.index_count < index_num:
            self._repair_torn_put()

    def _repair_torn_put(self) -> None:
        """Undo a put killed between its slot write and its header write.

        Such a put leaves its slot pointing at entry ``index_count``, which the header does not
        count. The next put (of any key) writes its own entry there, and the slot's chain -- every
        earlier key of that slot -- would then lead into another slot's chain and be lost. The
        torn entry itself says which slot it went to (its key hash) and what that slot held
        before (its prev), so the slot is put back."""
        count = self.index_count
        entry = self.segment.pread(HEADER_SIZE + self.slot_num * HASH_SLOT_SIZE + count * INDEX_SIZE, INDEX_SIZE)
        if len(entry) < INDEX_SIZE:
            return
        h, _, _, prev = _ENTRY.unpack(entry)
        if h < 0:
            return
        slot_pos = HEADER_SIZE + (h % self.slot_num) * HASH_SLOT_SIZE
        if _I32.unpack(self.segment.pread(slot_pos, HASH_SLOT_SIZE))[0] != count:
            return
        restored = prev if INVALID_INDEX < prev < count else INVALID_INDEX
        self.segment.reserve(slot_pos, HASH_SLOT_SIZE)
        self.segment.write(slot_pos, _I32.pack(restored))
        log.info("index_torn_put_repaired", path=self.path, slot=h % self.slot_num, entry=count)

    @property
    def is_full(self) -> bool:
        return self.index_count >= self.index_num

    def put_key(self, key: str, phy_offset: int, store_timestamp: int) -> bool:
        if self.is_full:
            return False
        h = key_hash(key)
        slot_pos = HEADER_SIZE + (h % self.slot_num) * HASH_SLOT_SIZE
        entry_pos = HEADER_SIZE + self.slot_num * HASH_SLOT_SIZE + self.index_count * INDEX_SIZE
        # space for the slot and the entry first (ENOSPC leaves the file as it was); then the
        # slot's page can be read through the mapping. The whole slot table at the first key:
        # keys hash to random slots, so page by page it was an open, a fallocate and a close per
        # key for the file's first tens of thousands of keys (each in a page not touched yet),
        # and the table is wholly touched after ~40,000 keys (5,000,000 slots) anyway
        if not self._slots_reserved:
            self.segment.reserve(0, HEADER_SIZE + self.slot_num * HASH_SLOT_SIZE)
            self._slots_reserved = True
        if entry_pos + INDEX_SIZE > self._entries_reserved_to:  # entries are written in order
            self.segment.reserve(entry_pos, INDEX_SIZE)
            self._entries_reserved_to = -(-(entry_pos + INDEX_SIZE) // PAGE_SIZE) * PAGE_SIZE  # its last page's end
        buf = self.segment.buf
        slot_value = self._chain_head(buf, _I32.unpack_from(buf, slot_pos)[0])
        count = self.index_count
        if count <= 1:
            self.begin_timestamp = store_timestamp
            self.begin_phy_offset = phy_offset
        time_diff = (store_timestamp - self.begin_timestamp) // 1000
        time_diff = 0 if time_diff < 0 else min(time_diff, _MAX_INT)
        # entry, slot, header, in this order (see the module docstring), straight into the
        # mapping: every byte written here has its blocks reserved above
        _ENTRY.pack_into(buf, entry_pos, h, phy_offset, time_diff, slot_value)
        _I32.pack_into(buf, slot_pos, count)
        if slot_value == INVALID_INDEX:
            self.hash_slot_count += 1
        self.index_count = count + 1
        self.end_phy_offset = phy_offset
        self.end_timestamp = store_timestamp
        _HEADER.pack_into(buf, 0, self.begin_timestamp, store_timestamp, self.begin_phy_offset, phy_offset,
                          self.hash_slot_count, count + 1)
        return True

    def _chain_head(self, buf, slot_value: int) -> int:
        """The newest counted entry of a slot's chain, or INVALID_INDEX.

        ``put_key`` writes the entry, then the slot, then the header. A process killed between
        the slot and the header leaves the slot pointing at the one entry the header does not
        count (it is overwritten by the next put): that entry's ``prev`` is the rest of the
        chain, which would otherwise be cut off for good."""
        count = self.index_count
        if slot_value == count and count < self.index_num:
            slot_value = _ENTRY.unpack_from(buf, HEADER_SIZE + self.slot_num * HASH_SLOT_SIZE
                                            + count * INDEX_SIZE)[3]
        if slot_value <= INVALID_INDEX or slot_value >= count:
            return INVALID_INDEX
        return slot_value

    def select(self, key: str, max_num: int, begin: int, end: int, out: list[int]) -> None:
        """Append to ``out`` (until it holds ``max_num``) the commitlog offsets for ``key`` stored in
        [begin, end], newest first, each once: the entries a crash's recovery added again are
        skipped here, so they never take the place of an older offset of the key."""
        h = key_hash(key)
        buf = self.segment.buf
        count = self.index_count
        # the slot may never have been written (a hole): pread, not the mapping
        slot = _I32.unpack(self.segment.pread(HEADER_SIZE + (h % self.slot_num) * HASH_SLOT_SIZE, HASH_SLOT_SIZE))[0]
        slot_value = self._chain_head(buf, slot)
        if slot_value == INVALID_INDEX or count <= 1:
            return
        base = HEADER_SIZE + self.slot_num * HASH_SLOT_SIZE
        cur = slot_value
        steps = 0
        while len(out) < max_num and steps < count:
            steps += 1
            kh, phy, time_diff, prev = _ENTRY.unpack_from(buf, base + cur * INDEX_SIZE)
            if time_diff < 0:
                break
            ts = self.begin_timestamp + time_diff * 1000
            # timeDiff truncates to seconds, so widen the check by up to a second
            if kh == h and begin - 999 <= ts <= end and phy not in out:  # a re-added entry: once
                out.append(phy)
            if prev <= INVALID_INDEX or prev >= count or prev == cur:
                break
            cur = prev

    def flush(self) -> None:
        self.segment.flush(0, self.size)

    def close(self) -> None:
        self.segment.close()

    def destroy(self) -> None:
        self.segment.close()
        self._fio.remove(self.path)


class IndexService:
    def __init__(self, fio: FileIO, store_path: str, slot_num: int, index_num: int):
        self.fio = fio
        self.store_path = store_path
        self.slot_num = slot_num
        self.index_num = index_num
        self.files: list[IndexFile] = []
        self.lock = threading.RLock()
        self.keys_not_indexed = 0  # units whose keys a full disk kept out of the index
        self._failing = False

    def load(self) -> None:
        self.fio.makedirs(self.store_path)
        for name in self.fio.list_dir(self.store_path):
            if len(name) == 17 and name.isdigit():
                self.files.append(IndexFile(self.fio, os.path.join(self.store_path, name), self.slot_num, self.index_num))

    @property
    def end_phy_offset(self) -> int:
        files = self.files
        return files[-1].end_phy_offset if files and files[-1].index_count > 1 else -1

    def _writable(self) -> IndexFile:
        last = self.files[-1] if self.files else None
        if last is not None and not last.is_full:
            return last
        now = int(time.time() * 1000)
        name = file_name_for(now)
        while any(os.path.basename(f.path) == name for f in self.files):
            now += 1
            name = file_name_for(now)
        f = IndexFile(self.fio, os.path.join(self.store_path, name), self.slot_num, self.index_num)
        with self.lock:
            self.files = self.files + [f]
        if last is not None:
            last.flush()
        log.info("index_file_created", path=f.path)
        return f

    def build_index(self, topic: str, keys, phy_offset: int, store_timestamp: int) -> None:
        """Add ``topic#key`` entries; on a full disk (or no descriptor left) the keys are not
        indexed -- the messages stay stored and readable, only query by key misses them."""
        try:
            for key in keys:
                if not key:
                    continue
                f = self._writable()
                f.put_key(build_key(topic, key), phy_offset, store_timestamp)
        except OSError as exc:
            self.keys_not_indexed += 1
            if not self._failing:
                self._failing = True
                log.error("index_write_failed", error=str(exc), phy_offset=phy_offset)
            return
        if self._failing:
            self._failing = False
            log.info("index_write_recovered", phy_offset=phy_offset, keys_not_indexed=self.keys_not_indexed)

    def query(self, topic: str, key: str, max_num: int, begin: int, end: int) -> list[int]:
        out: list[int] = []
        full_key = build_key(topic, key)
        for f in reversed(self.files):
            if len(out) >= max_num:
                break
            if f.index_count <= 1:
                continue
            if f.end_timestamp < begin - 1000 or f.begin_timestamp > end:
                continue
            try:
                f.select(full_key, max_num, begin, end, out)
            except ValueError:  # deleted by retention meanwhile
                continue
        return out

    def flush(self) -> None:
        for f in self.files:
            f.flush()

    def delete_below(self, commitlog_min: int) -> int:
        """Delete index files whose every entry points below ``commitlog_min`` (not the last)."""
        gone = 0
        with self.lock:
            while len(self.files) > 1 and self.files[0].end_phy_offset < commitlog_min:
                f = self.files[0]
                self.files = self.files[1:]
                f.destroy()
                gone += 1
        return gone

    def close(self) -> None:
        for f in self.files:
            f.close()
