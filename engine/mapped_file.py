"""MappedFile and MappedFileQueue: a log made of fixed-size segment files (RocketMQ's names).

A segment file is named by the log offset of its first byte, as 20 decimal digits
(``00000000001073741824``), so the log offset of any byte is ``file_from_offset + position``.
Segments are contiguous: each starts where the previous one ends.

Invariants:
- Only the last segment is written; ``wrote_position`` is how far it is filled, and every
  earlier segment counts as full.
- ``flushed_position <= wrote_position``; bytes below ``flushed_where`` are on disk.
- Bytes beyond the write position are zero: truncation after recovery zeroes the dirty tail,
  so a later scan never mistakes stale bytes for a unit.
- The list of segments changes under ``lock``; readers take a snapshot and tolerate a
  segment closed by retention under them (``ValueError``), reporting it as gone.
"""

from __future__ import annotations

import bisect
import os
import threading
import time

import structlog

from .file_io import FileIO, Segment

log = structlog.get_logger("rockafka.engine.mapped_file")

_ZERO_CHUNK = bytes(1 << 20)


def segment_name(offset: int) -> str:
    return f"{offset:020d}"


class MappedFile:
    __slots__ = ("file_from_offset", "file_size", "segment", "wrote_position", "flushed_position", "path", "_fio")

    def __init__(self, fio: FileIO, path: str, file_from_offset: int, file_size: int, random_access: bool = False,
                 log_writes: bool = False):
        self._fio = fio
        self.path = path
        self.file_from_offset = file_from_offset
        self.segment: Segment = fio.open_segment(path, file_size, random_access, log_writes)
        self.file_size = self.segment.size
        self.wrote_position = 0
        self.flushed_position = 0

    @property
    def buf(self):
        return self.segment.buf

    @property
    def remaining(self) -> int:
        return self.file_size - self.wrote_position

    @property
    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size

    @property
    def end_offset(self) -> int:
        return self.file_from_offset + self.file_size

    def append(self, data) -> int:
        """Write at the write position; return the position written at."""
        pos = self.wrote_position
        self.segment.write(pos, data)
        self.wrote_position = pos + len(data)
        return pos

    def write_at(self, pos: int, data) -> None:
        self.segment.write(pos, data)

    def read(self, pos: int, n: int) -> bytes:
        return self.segment.read(pos, n)

    def flush(self) -> int:
        wrote = self.wrote_position
        if wrote > self.flushed_position or self.segment.dir_unsynced:
            self.segment.flush(self.flushed_position, wrote)
            self.flushed_position = wrote
        return wrote

    def zero_from(self, pos: int) -> None:
        """Zero everything from ``pos`` to the end. Only data regions are read (holes read as
        zero, and reading one through a tmpfs mapping would allocate it), and only chunks that
        are not zero already are written."""
        buf = self.segment.buf
        step = len(_ZERO_CHUNK)
        p = pos
        while p < self.file_size:
            nxt = self.segment.next_data(p)
            if nxt is None or nxt >= self.file_size:
                break
            p = max(p, nxt)
            hole = self.segment.next_hole(p)
            if hole <= p:  # a racing or inexact answer: step over one page
                hole = p + 4096
            while p < hole and p < self.file_size:
                n = min(step, hole - p, self.file_size - p)
                if buf[p:p + n] != _ZERO_CHUNK[:n]:
                    self.segment.write(p, _ZERO_CHUNK[:n])
                p += n
        self.segment.flush(pos, self.file_size)

    def mtime(self) -> float:
        return self._fio.mtime(self.path)

    def destroy(self) -> None:
        self.segment.close()
        self._fio.remove(self.path)


class MappedFileQueue:
    def __init__(self, fio: FileIO, store_path: str, file_size: int, random_access: bool = False,
                 log_writes: bool = False):
        """``random_access``: segments are written in small units spread over many files (consume
        queues), so page faults skip read-around; ``log_writes``: few large files written front to
        back (the commitlog), large writes by pwrite (see ``MmapSegment``)."""
        self.fio = fio
        self.store_path = store_path
        self.file_size = file_size
        self.random_access = random_access
        self.log_writes = log_writes
        self.files: list[MappedFile] = []
        self._starts: list[int] = []
        self.lock = threading.RLock()
        self.flushed_where = 0

    # -- lifecycle -------------------------------------------------------------------------
    def load(self) -> None:
        """Open every segment in the directory; all count as full until recovery says otherwise."""
        self.fio.makedirs(self.store_path)
        names = [n for n in self.fio.list_dir(self.store_path) if len(n) == 20 and n.isdigit()]
        for name in sorted(names):
            mf = MappedFile(self.fio, os.path.join(self.store_path, name), int(name), self.file_size,
                            self.random_access, self.log_writes)
            mf.wrote_position = mf.flushed_position = mf.file_size
            self.files.append(mf)
        self._starts = [f.file_from_offset for f in self.files]

    def close(self) -> None:
        with self.lock:
            for f in self.files:
                f.segment.close()

    # -- lookup ----------------------------------------------------------------------------
    def first(self) -> MappedFile | None:
        files = self.files
        return files[0] if files else None

    def last(self) -> MappedFile | None:
        files = self.files
        return files[-1] if files else None

    def find(self, offset: int) -> MappedFile | None:
        """The segment holding log offset ``offset`` (None when deleted or not yet written)."""
        files, starts = self.files, self._starts
        if not files:
            return None
        i = bisect.bisect_right(starts, offset) - 1
        if 0 <= i < len(files):
            f = files[i]
            if f.file_from_offset <= offset < f.file_from_offset + f.file_size:
                return f
        # the list changed between reading files and starts: search the snapshot itself
        for f in files:
            if f.file_from_offset <= offset < f.file_from_offset + f.file_size:
                return f
        return None

    @property
    def min_offset(self) -> int:
        f = self.first()
        return f.file_from_offset if f else 0

    @property
    def max_offset(self) -> int:
        f = self.last()
        return f.file_from_offset + f.wrote_position if f else 0

    # -- writing ---------------------------------------------------------------------------
    def create(self, start_offset: int) -> MappedFile:
        with self.lock:
            if not self.files:  # the directory exists once a segment does
                self.fio.makedirs(self.store_path)
            mf = MappedFile(self.fio, os.path.join(self.store_path, segment_name(start_offset)), start_offset,
                            self.file_size, self.random_access, self.log_writes)
            self.files = self.files + [mf]  # a new list: readers keep a consistent snapshot
            self._starts = self._starts + [start_offset]
            return mf

    def last_for_write(self, start_offset: int = 0) -> MappedFile:
        """The last segment, or a new one after it when it is full (or there is none yet)."""
        last = self.last()
        if last is None or last.is_full:
            with self.lock:  # again under the lock: another thread may have created it meanwhile
                last = self.last()
                if last is None:
                    return self.create(start_offset - start_offset % self.file_size)
                if last.is_full:
                    return self.create(last.file_from_offset + last.file_size)
        return last

    def flush(self) -> int:
        """Flush every segment with unflushed bytes; return the offset now durable."""
        files = self.files
        where = self.flushed_where
        for f in files:
            if (f.file_from_offset + f.file_size <= where and f.flushed_position >= f.wrote_position
                    and not f.segment.dir_unsynced):
                continue
            end = f.flush()
            where = max(where, f.file_from_offset + end)
        self.flushed_where = where
        return where

    def truncate_dirty(self, offset: int, zero: bool = True) -> None:
        """Drop everything at and after log offset ``offset`` (recovery of a torn tail).

        ``zero=False`` after a clean shutdown, when the bytes past the tail are known zero
        (saves reading the rest of a large segment on every start)."""
        with self.lock:
            keep: list[MappedFile] = []
            for f in self.files:
                if f.file_from_offset + f.file_size <= offset:
                    keep.append(f)
                elif f.file_from_offset <= offset:
                    pos = offset - f.file_from_offset
                    if zero:
                        f.zero_from(pos)
                    f.wrote_position = f.flushed_position = pos
                    keep.append(f)
                else:
                    log.warning("segment_removed_beyond_tail", path=f.path, tail=offset)
                    f.destroy()
            self.files = keep
            self._starts = [f.file_from_offset for f in keep]
            self.flushed_where = min(self.flushed_where, offset)

    def set_tail(self, offset: int) -> None:
        """After recovery: the segment containing ``offset`` is the one written next."""
        for f in self.files:
            if f.file_from_offset + f.file_size <= offset:
                f.wrote_position = f.flushed_position = f.file_size
            elif f.file_from_offset <= offset:
                f.wrote_position = f.flushed_position = offset - f.file_from_offset
        self.flushed_where = offset

    # -- deletion --------------------------------------------------------------------------
    def delete_first(self, n: int = 1) -> list[MappedFile]:
        """Remove the ``n`` oldest segments (never the last one)."""
        with self.lock:
            n = min(n, len(self.files) - 1)
            if n <= 0:
                return []
            gone, self.files = self.files[:n], self.files[n:]
            self._starts = [f.file_from_offset for f in self.files]
        for f in gone:
            f.destroy()
        return gone

    def delete_expired_by_time(self, reserved_ms: int, now_ms: float | None = None, max_files: int = 10) -> list[MappedFile]:
        """Delete the oldest segments last modified more than ``reserved_ms`` ago (never the last)."""
        now_ms = time.time() * 1000 if now_ms is None else now_ms
        count = 0
        for f in self.files[:-1]:
            if count >= max_files or f.mtime() * 1000 + reserved_ms > now_ms:
                break
            count += 1
        return self.delete_first(count)
