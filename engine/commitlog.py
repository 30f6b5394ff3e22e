"""CommitLog: every topic's message units appended to one log of segment files, and its flushing.

Files: ``<root>/commitlog/<20-digit start offset>``, ``mapped_file_size_commit_log`` bytes each.
Units are RocketMQ's layout (``engine.message``). A unit never spans segments: when a unit
plus an 8-byte BLANK header does not fit in what is left, the rest of the segment is filled by
a BLANK unit (TOTALSIZE = bytes left, MAGICCODE 0xcbd43194) and the unit goes to the next one.

Write order makes torn units detectable: everything after TOTALSIZE is written first and
TOTALSIZE last, so a unit with a non-zero size had all its bytes written before the process
died. Recovery still verifies each unit (magic, field lengths adding up to TOTALSIZE,
PHYSICALOFFSET equal to where it sits, body CRC) and truncates at the first bad one.

Flushing: ``FlushRealTimeService`` (ASYNC_FLUSH) flushes every ``flush_interval_commit_log``
ms; ``GroupCommitService`` (SYNC_FLUSH) flushes as soon as a writer asks and wakes every
writer whose bytes the one fsync covered (group commit), so concurrent puts share fsyncs.
"""

from __future__ import annotations

import mmap
import os
import struct
import threading
import time
from typing import Any, Iterator

import structlog

from . import metrics
from .file_io import FileIO
from .mapped_file import MappedFile, MappedFileQueue
from .message import (BLANK_MAGIC_CODE, END_FILE_MIN_BLANK_LENGTH, MAGIC_CODE_V1, MAGIC_CODE_V2,
                      MessageFormatError, UnitHeader)

log = structlog.get_logger("rockafka.engine.commitlog")

_TOTAL_MAGIC = struct.Struct(">ii")
_I32 = struct.Struct(">i")
MIN_UNIT_SIZE = 91  # fixed fields (IPv4) + 1 topic byte + 2 properties-length bytes


class SplitUnit:
    """A unit held in three pieces so a large body is never copied in the interpreter: ``head``
    (a bytearray: the fixed fields and the body's first ``len(head) - body_pos`` bytes, which
    the put path patches: a Kafka batch's base offset and leader epoch), ``rest`` (the rest of
    the body: a view of the request it arrived in, read-only) and ``tail`` (topic and
    properties). The bytes written are ``head + rest + tail``, exactly a contiguous unit's."""

    __slots__ = ("head", "rest", "tail", "size")

    def __init__(self, head: bytearray, rest, tail: bytes):
        self.head = head
        self.rest = rest
        self.tail = tail
        self.size = len(head) + len(rest) + len(tail)

    def __len__(self) -> int:
        return self.size

    def joined(self) -> bytearray:
        """The unit as one buffer (tests, tools)."""
        return bytearray().join((self.head, self.rest, self.tail))


def _advise(f: MappedFile | None, advice: int | None) -> None:
    buf = getattr(f.segment, "buf", None) if f is not None else None
    if advice is not None and isinstance(buf, mmap.mmap):
        try:
            buf.madvise(advice)
        except (OSError, ValueError):  # unmapped meanwhile (retention): nothing to advise
            pass


class CommitLog:
    """The log of segments. The segment being written is mapped ``MADV_RANDOM``: readers (the
    dispatcher, Fetch of small batches) read it right behind the writer, and a fault there
    otherwise reads ahead over the holes past the write position, which the kernel fills with
    zeros (that zeroing was a fifth of the broker's CPU while producing 1 KiB records). A
    segment written to its end gets its default read-ahead back for consumers catching up."""

    def __init__(self, fio: FileIO, store_path: str, file_size: int):
        self.mfq = MappedFileQueue(fio, store_path, file_size, log_writes=True)
        self.file_size = file_size
        self._writing: MappedFile | None = None  # the segment mapped MADV_RANDOM

    def load(self) -> None:
        self.mfq.load()

    def close(self) -> None:
        self.mfq.close()

    @property
    def max_offset(self) -> int:
        return self.mfq.max_offset

    @property
    def min_offset(self) -> int:
        return self.mfq.min_offset

    @property
    def flushed_where(self) -> int:
        return self.mfq.flushed_where

    def fits_in_segment(self, size: int) -> bool:
        return size + END_FILE_MIN_BLANK_LENGTH <= self.file_size

    # -- append (caller holds the put lock) --------------------------------------------------
    def segment_for(self, size: int) -> MappedFile:
        """The segment the next unit of ``size`` bytes goes to, rolling over with a BLANK."""
        f = self.mfq.last_for_write(0)
        if f.remaining < size + END_FILE_MIN_BLANK_LENGTH:
            blank = f.remaining
            pos = f.wrote_position
            f.segment.reserve(pos, 8)  # ENOSPC here leaves the segment as it was
            f.write_at(pos + 4, _I32.pack(BLANK_MAGIC_CODE))
            f.write_at(pos, _I32.pack(blank))
            f.wrote_position = f.file_size
            f = self.mfq.last_for_write()
        if f is not self._writing:
            _advise(self._writing, getattr(mmap, "MADV_NORMAL", None))
            _advise(f, getattr(mmap, "MADV_RANDOM", None))
            self._writing = f
        return f

    @staticmethod
    def write_unit(f: MappedFile, unit) -> int:
        """Write a complete unit (a buffer, or a ``SplitUnit``) at the write position, TOTALSIZE
        last; return its log offset. Space is reserved first: ``OSError(ENOSPC)`` leaves nothing
        written. TOTALSIZE goes the way the rest went (``pwrite`` or the mapping)."""
        pos = f.wrote_position
        seg = f.segment
        if type(unit) is SplitUnit:
            size = unit.size
            head = memoryview(unit.head)
            parts = (head[4:], unit.rest, unit.tail)
        else:
            size = len(unit)
            head = memoryview(unit)
            parts = (head[4:],)
        seg.reserve(pos, size)
        through_fd = seg.write_parts(pos + 4, parts)
        seg.write_parts(pos, (head[:4],), through_fd)
        f.wrote_position = pos + size
        return f.file_from_offset + pos

    # -- reading -----------------------------------------------------------------------------
    def _locate(self, offset: int, size: int) -> tuple[Any, int] | None:
        """The segment holding log ``offset`` and the position in it; None when the ``size``
        bytes from there are not all written yet or the segment is gone."""
        if offset + size > self.mfq.max_offset:
            return None
        f = self.mfq.find(offset)
        if f is None:
            return None
        return f, offset - f.file_from_offset

    def read_window(self, offset: int) -> tuple[int, int, Any]:
        """(start, end, read) of the written bytes of the segment holding ``offset``, for a
        reader that takes several units from one segment without looking it up each time:
        ``read(pos, n)`` reads at ``pos`` from the segment's start (``ValueError`` once retention
        unmapped it). ``read``'s rule: nothing past the write position. (0, 0, None) when the
        segment is gone."""
        f = self.mfq.find(offset)
        if f is None:
            return 0, 0, None
        lo = f.file_from_offset
        return lo, min(lo + f.wrote_position, self.mfq.max_offset), f.read

    def read(self, offset: int, size: int) -> bytes | None:
        """``size`` bytes at ``offset``, or None when not all of them were written (or deleted).
        Nothing past the write position is read: those pages may be holes (see file_io)."""
        found = self._locate(offset, size)
        if found is None:
            return None
        f, pos = found
        try:
            data = f.read(pos, size)
        except ValueError:  # unmapped by retention meanwhile
            return None
        return data if len(data) == size else None

    def file_run(self, offset: int, size: int, refs: dict) -> tuple["SegmentRef", int] | None:
        """Where ``size`` written bytes at log ``offset`` lie in their segment file: (a reference
        holding an open descriptor of that file, position in it), for ``os.sendfile``; None when
        they are not all written, the segment is gone, or it has no descriptor (in-memory
        store). ``refs`` caches one reference per segment for one response. Units never span
        segments. Nothing past the write position is handed out (see ``read``)."""
        found = self._locate(offset, size)
        if found is None:
            return None
        f, pos = found
        if pos + size > f.wrote_position:
            return None
        ref = refs.get(f.file_from_offset)
        if ref is None:
            dup = getattr(f.segment, "dup_fd", None)
            fd = dup() if dup is not None else -1
            if fd < 0:
                return None
            ref = refs[f.file_from_offset] = SegmentRef(fd)
        return ref, pos

    def unit_size_at(self, offset: int) -> int | None:
        if offset < 0 or offset + 8 > self.mfq.max_offset:
            return None
        f = self.mfq.find(offset)
        if f is None:
            return None
        try:
            total, magic = _TOTAL_MAGIC.unpack_from(f.buf, offset - f.file_from_offset)
        except (ValueError, struct.error):
            return None
        return total if magic in (MAGIC_CODE_V1, MAGIC_CODE_V2) else None

    def read_unit(self, offset: int) -> bytes | None:
        size = self.unit_size_at(offset)
        return None if size is None else self.read(offset, size)

    # -- recovery ----------------------------------------------------------------------------
    def scan(self, start: int, check_crc: bool) -> Iterator[tuple[int, UnitHeader | None, MappedFile]]:
        """Yield (offset, header, segment) for each valid unit from ``start``; header None for
        a BLANK. Stops at the first invalid unit; ``self.scan_end`` is where it stopped.

        Only written bytes are read: a segment is read below its first hole after the scan
        position (a hole reads as zero, which ends the log anyway), so recovery of a 1 GiB
        segment holding 100 KB touches 100 KB -- on tmpfs, reading the rest through the
        mapping would allocate it."""
        self.scan_end = start
        files = self.mfq.files
        offset = start
        i = 0
        while i < len(files) and files[i].file_from_offset + files[i].file_size <= offset:
            i += 1
        while i < len(files):
            f = files[i]
            buf = f.buf
            pos = offset - f.file_from_offset
            data_end = f.segment.next_hole(pos)
            while True:
                if pos + 8 > f.file_size:
                    break
                if pos + 8 > data_end:
                    data_end = f.segment.next_hole(pos)
                    if pos + 8 > data_end:  # a hole: nothing was written here
                        self.scan_end = f.file_from_offset + pos
                        return
                total, magic = _TOTAL_MAGIC.unpack_from(buf, pos)
                if magic == BLANK_MAGIC_CODE and total == f.file_size - pos:
                    yield offset, None, f
                    pos = f.file_size
                    break
                if magic not in (MAGIC_CODE_V1, MAGIC_CODE_V2) or total < MIN_UNIT_SIZE or pos + total > f.file_size:
                    self.scan_end = f.file_from_offset + pos
                    return
                if pos + total > data_end:
                    data_end = f.segment.next_hole(pos)
                    if pos + total > data_end:  # torn: part of the unit was never written
                        self.scan_end = f.file_from_offset + pos
                        return
                try:
                    h = UnitHeader(buf, pos)
                except (MessageFormatError, struct.error, IndexError, ValueError):
                    self.scan_end = f.file_from_offset + pos
                    return
                if h.physical_offset != f.file_from_offset + pos or (check_crc and not h.crc_ok(buf)):
                    log.warning("commitlog_unit_invalid", offset=f.file_from_offset + pos,
                                reason="physical offset" if h.physical_offset != f.file_from_offset + pos else "body crc")
                    self.scan_end = f.file_from_offset + pos
                    return
                yield f.file_from_offset + pos, h, f
                pos += total
                offset = f.file_from_offset + pos
            offset = f.file_from_offset + f.file_size
            self.scan_end = offset
            i += 1
            if i < len(files) and files[i].file_from_offset != offset:
                log.error("commitlog_segment_gap", expected=offset, found=files[i].file_from_offset)
                return

    def truncate(self, offset: int, zero: bool = True) -> None:
        self.mfq.truncate_dirty(offset, zero)
        self.mfq.set_tail(offset)

    def flush(self) -> int:
        before, start = self.mfq.flushed_where, metrics.now()
        done = self.mfq.flush()
        if done != before:  # only flushes that wrote something: idle ticks would hide the real ones
            metrics.STORE_FLUSH_SECONDS.observe(metrics.now() - start)
        return done


class FlushRealTimeService(threading.Thread):
    """ASYNC_FLUSH: flush the commitlog every ``interval_ms``."""

    def __init__(self, commitlog: CommitLog, interval_ms: int, on_flushed=None):
        super().__init__(name="commitlog-flush", daemon=True)
        self.commitlog = commitlog
        self.interval = max(interval_ms, 1) / 1000.0
        self._stop_event = threading.Event()
        self.on_flushed = on_flushed

    def run(self) -> None:
        while not self._stop_event.wait(self.interval):
            try:
                self.commitlog.flush()
            except Exception:
                log.exception("commitlog_flush_failed")

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=10)


class GroupCommitService(threading.Thread):
    """SYNC_FLUSH: writers wait until the flushed offset covers their unit; one fsync per round."""

    def __init__(self, commitlog: CommitLog):
        super().__init__(name="commitlog-group-commit", daemon=True)
        self.commitlog = commitlog
        self.cond = threading.Condition()
        self.requested = 0
        self.flushed = commitlog.flushed_where
        self.failed: str | None = None
        self._stopping = False

    def wait_flushed(self, end_offset: int, timeout_s: float) -> bool:
        with self.cond:
            if self.flushed >= end_offset:
                return True
            if end_offset > self.requested:
                self.requested = end_offset
                self.cond.notify_all()
            deadline = time.monotonic() + timeout_s
            while self.flushed < end_offset:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(left)  # stopping still flushes what was asked for first
            return True

    def run(self) -> None:
        while True:
            with self.cond:
                while self.requested <= self.flushed and not self._stopping:
                    self.cond.wait(1.0)
                if self._stopping and self.requested <= self.flushed:
                    return
            try:
                done = self.commitlog.flush()
            except Exception as exc:  # e.g. EIO: writers time out with FLUSH_DISK_TIMEOUT
                log.exception("commitlog_group_commit_failed")
                self.failed = str(exc)
                time.sleep(0.01)
                continue
            with self.cond:
                self.flushed = max(self.flushed, done)
                self.cond.notify_all()

    def stop(self) -> None:
        with self.cond:
            self._stopping = True
            self.cond.notify_all()
        self.join(timeout=10)
        try:
            done = self.commitlog.flush()
            with self.cond:
                self.flushed = max(self.flushed, done)
                self.cond.notify_all()
        except Exception:
            log.exception("commitlog_final_flush_failed")


def commitlog_dir(root: str) -> str:
    return os.path.join(root, "commitlog")


class SegmentRef:
    """An open descriptor of one segment file, closed when the last holder lets go of it (the
    runs of a Fetch response hold it until the response is sent or dropped). While open, the
    file's bytes stay readable even if retention deleted the segment meanwhile."""

    __slots__ = ("fd", "__weakref__")

    def __init__(self, fd: int):
        self.fd = fd

    def __del__(self):
        fd, self.fd = self.fd, -1
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass
