"""ConsumeQueue: the per (topic, queue id) index of logical offsets into the commitlog.

Files live in ``<root>/consumequeue/<topic>/<queueId>/`` as segments named by their first byte's
position in the queue's unit space (logical offset x 20), 300,000 units per file by default.

Unit (big-endian): commitlogOffset(8) + size(4) + tagsCode(8) = 20 bytes. A batch unit
(Kafka RecordBatch stored once) gets N identical queue units, one per record offset.

Invariants:
- Unit ``i`` sits at byte ``i * 20`` of the unit space; units are written in order and never
  rewritten, so the valid units of the last file are a prefix of it (size > 0 marks a unit) —
  except in a compacted topic's queue, where ``overwrite`` repoints a unit at a copy of its record
  further on in the commitlog (docs/design/compaction.md): such a queue (``compacted``) is not
  ordered by commitlog offset.
- ``max_offset`` (next logical offset) = end of the written unit space / 20.
- ``min_offset`` is the first unit still readable: it moves forward when old segments are
  deleted (retention follows the commitlog) and with ``raise_min_offset`` (Kafka DeleteRecords).
- Writes happen under the store's put lock, or during recovery before the store serves. A new
  queue's first (empty) file may be created by ``QueueFilePreparer``'s thread instead; files are
  created under the queue's ``mfq.lock`` wherever that happens, so there is never a second one.
"""

from __future__ import annotations

import os
import struct
import threading
import time
from typing import Callable

import structlog

from .file_io import FileIO
from .mapped_file import MappedFileQueue

log = structlog.get_logger("rockafka.engine.consume_queue")

CQ_STORE_UNIT_SIZE = 20
_PAGE = 4096
UNIT = struct.Struct(">qiq")


class ConsumeQueue:
    def __init__(self, fio: FileIO, root: str, topic: str, queue_id: int, file_size: int):
        self.topic = topic
        self.queue_id = queue_id
        self.path = os.path.join(root, topic, str(queue_id))
        self.mfq = MappedFileQueue(fio, self.path, file_size, random_access=True)
        self.file_size = self.mfq.file_size
        self.min_logic_offset = 0  # in unit-space bytes
        self.max_physic_offset = -1  # commitlog offset after the last unit's message
        self.units_per_file = file_size // CQ_STORE_UNIT_SIZE
        self.compacted = False  # units may be repointed: not ordered by commitlog offset

    # -- load and recovery -----------------------------------------------------------------
    def load(self) -> None:
        self.mfq.load()

    def _unit(self, index: int) -> tuple[int, int, int] | None:
        pos = index * CQ_STORE_UNIT_SIZE
        f = self.mfq.find(pos)
        if f is None:
            return None
        return UNIT.unpack_from(f.buf, pos - f.file_from_offset)

    def recover(self, zero_tail: bool = True) -> None:
        """Find the end of the written units (only the last file may be partly filled).

        Reads only below the file's first hole after its first written byte: units are written
        front to back, a hole reads as zero (no unit), and reading holes through a tmpfs
        mapping would allocate them."""
        files = self.mfq.files
        if not files:
            return
        f = files[-1]
        n = f.file_size // CQ_STORE_UNIT_SIZE
        buf = f.buf
        first = 0
        if f is files[0]:  # a queue that began mid-file has a blank head
            data = f.segment.next_data(0)
            first = n if data is None else data // CQ_STORE_UNIT_SIZE
            limit = min(n, f.segment.next_hole(first * CQ_STORE_UNIT_SIZE) // CQ_STORE_UNIT_SIZE)
            while first < limit and UNIT.unpack_from(buf, first * CQ_STORE_UNIT_SIZE)[1] <= 0:
                first += 1
            if first >= limit:
                first = n
        if first >= n:
            end = f.file_from_offset
        else:
            # the first unit with size <= 0 in [first, n), all of them below the first hole
            n = min(n, max(first, f.segment.next_hole(first * CQ_STORE_UNIT_SIZE) // CQ_STORE_UNIT_SIZE))
            lo, hi = first, n
            while lo < hi:
                mid = (lo + hi) // 2
                if UNIT.unpack_from(buf, mid * CQ_STORE_UNIT_SIZE)[1] > 0:
                    lo = mid + 1
                else:
                    hi = mid
            end = f.file_from_offset + lo * CQ_STORE_UNIT_SIZE
        self.mfq.truncate_dirty(end, zero_tail)
        self._recompute_bounds()

    def _recompute_bounds(self) -> None:
        first = self.mfq.first()
        if first is None:
            self.min_logic_offset = max(self.min_logic_offset, 0)
            self.max_physic_offset = -1
            return
        lo = first.file_from_offset
        end = self.mfq.max_offset
        data = first.segment.next_data(0)  # skip a blank head without reading it
        if data is None:
            data = first.file_size
        i = (lo + min(data, end - lo if end > lo else 0)) // CQ_STORE_UNIT_SIZE
        end_i = end // CQ_STORE_UNIT_SIZE
        while i < end_i:
            u = self._unit(i)
            if u is not None and u[1] > 0:
                break
            i += 1
        self.min_logic_offset = max(self.min_logic_offset, i * CQ_STORE_UNIT_SIZE)
        if end_i > 0:
            u = self._unit(end_i - 1)
            if u is not None and u[1] > 0:
                self.max_physic_offset = u[0] + u[1]

    def truncate_dirty(self, commitlog_max: int) -> None:
        """Drop trailing units whose message lies at or beyond ``commitlog_max`` (torn tail)."""
        lo = self.min_logic_offset // CQ_STORE_UNIT_SIZE
        hi = self.max_offset
        if hi <= lo:
            return
        last = self._unit(hi - 1)
        if last is not None and last[0] + last[1] <= commitlog_max:
            return
        while lo < hi:  # first unit ending past commitlog_max; commitlog offsets ascend
            mid = (lo + hi) // 2
            u = self._unit(mid)
            if u is not None and u[1] > 0 and u[0] + u[1] <= commitlog_max:
                lo = mid + 1
            else:
                hi = mid
        log.info("consume_queue_truncated", topic=self.topic, queue_id=self.queue_id, from_offset=lo, to_offset=self.max_offset)
        self.mfq.truncate_dirty(lo * CQ_STORE_UNIT_SIZE)
        self._recompute_bounds()

    # -- writing ---------------------------------------------------------------------------
    def put(self, queue_offset: int, commitlog_offset: int, size: int, tags_code: int, count: int = 1) -> bool:
        """Write ``count`` units for ``queue_offset``...; False when they already exist."""
        expected = queue_offset * CQ_STORE_UNIT_SIZE
        files = self.mfq.files
        if count == 1 and files:  # fast path: the next unit, room in the last file
            last = files[-1]
            if last.file_from_offset + last.wrote_position == expected and last.file_size - last.wrote_position >= CQ_STORE_UNIT_SIZE:
                last.append(UNIT.pack(commitlog_offset, size, tags_code))
                self.max_physic_offset = commitlog_offset + size
                return True
        current = self.mfq.max_offset
        if self.mfq.last() is None:
            f = self.mfq.last_for_write(expected)
            f.wrote_position = f.flushed_position = expected - f.file_from_offset
            self.min_logic_offset = max(self.min_logic_offset, expected)
            current = expected
        if expected + count * CQ_STORE_UNIT_SIZE <= current:
            return False
        if expected < current:  # partly present (recovery after a torn batch): write the rest
            skip = (current - expected) // CQ_STORE_UNIT_SIZE
            count -= skip
            expected = current
        elif expected > current:
            log.error("consume_queue_gap", topic=self.topic, queue_id=self.queue_id, expected=expected // 20, current=current // 20)
            self._skip_to(expected)
        data = UNIT.pack(commitlog_offset, size, tags_code) * count
        pos = 0
        while pos < len(data):
            f = self.mfq.last_for_write()
            n = min(f.remaining, len(data) - pos)
            f.append(data[pos:pos + n] if (pos or n < len(data)) else data)
            pos += n
        self.max_physic_offset = commitlog_offset + size
        return True

    def overwrite(self, queue_offset: int, commitlog_offset: int, size: int, tags_code: int) -> bool:
        """Repoint the existing unit ``queue_offset`` (a compacted record's copy); False when the
        unit is not in the queue (any more)."""
        if not self.min_offset <= queue_offset < self.max_offset:
            return False
        pos = queue_offset * CQ_STORE_UNIT_SIZE
        f = self.mfq.find(pos)
        if f is None:
            return False
        rel = pos - f.file_from_offset
        f.write_at(rel, UNIT.pack(commitlog_offset, size, tags_code))
        if rel < f.flushed_position:  # below what the next flush covers: flush it now
            f.segment.flush(rel, rel + CQ_STORE_UNIT_SIZE)
        self.compacted = True
        return True

    def reserve(self, queue_offset: int, count: int) -> None:
        """Reserve disk space for ``count`` units from ``queue_offset`` in the file written now
        (``OSError(ENOSPC)`` when the disk is full); units past its end are reserved when written."""
        last = self.mfq.last()
        pos = queue_offset * CQ_STORE_UNIT_SIZE
        if last is None or not last.file_from_offset <= pos < last.end_offset:
            return
        rel = pos - last.file_from_offset
        last.segment.reserve(rel, min(count * CQ_STORE_UNIT_SIZE, last.file_size - rel))

    def prepare(self) -> bool:
        """Create the queue's first file (units from offset 0) ahead of its first message, when it
        has no file yet (``QueueFilePreparer``); False when it has one."""
        with self.mfq.lock:
            if self.mfq.files:
                return False
            self.mfq.create(0)
            return True

    def _skip_to(self, expected: int) -> None:
        while self.mfq.max_offset < expected:
            f = self.mfq.last_for_write()
            f.wrote_position = min(f.file_size, expected - f.file_from_offset)

    def flush(self, least_pages: int = 0) -> bool:
        """Flush the unflushed units; with ``least_pages`` > 0 only when that many 4 KiB pages
        of them are dirty or a file filled up (RocketMQ's flushConsumeQueueLeastPages): a queue
        that gets a few units a second is not written back (and its page write-protected again)
        on every pass. True when nothing is left unflushed."""
        if least_pages > 0:
            dirty = False
            for f in self.mfq.files:
                flushed, wrote = f.flushed_position, f.wrote_position
                if flushed >= wrote and not f.segment.dir_unsynced:
                    continue
                if wrote >= f.file_size or wrote // _PAGE - flushed // _PAGE >= least_pages:
                    break
                dirty = True
            else:
                return not dirty
        self.mfq.flush()
        return True

    # -- reading ---------------------------------------------------------------------------
    @property
    def max_offset(self) -> int:
        return self.mfq.max_offset // CQ_STORE_UNIT_SIZE

    @property
    def min_offset(self) -> int:
        return self.min_logic_offset // CQ_STORE_UNIT_SIZE

    def raise_min_offset(self, offset: int) -> None:
        self.min_logic_offset = max(self.min_logic_offset, offset * CQ_STORE_UNIT_SIZE)

    def unit(self, index: int) -> tuple[int, int, int] | None:
        if index < self.min_offset or index >= self.max_offset:
            return None
        try:
            return self._unit(index)
        except ValueError:  # segment deleted under us
            return None

    def read_units(self, index: int, max_count: int) -> list[tuple[int, int, int]]:
        """Up to ``max_count`` units from ``index`` (fewer at a segment's end)."""
        end = min(self.max_offset, index + max_count)
        if index >= end:
            return []
        pos = index * CQ_STORE_UNIT_SIZE
        f = self.mfq.find(pos)
        if f is None:
            return []
        rel = pos - f.file_from_offset
        n = min(end - index, (f.file_size - rel) // CQ_STORE_UNIT_SIZE)
        try:
            raw = f.read(rel, n * CQ_STORE_UNIT_SIZE)
        except ValueError:
            return []
        return list(UNIT.iter_unpack(raw))

    # -- retention -------------------------------------------------------------------------
    def start_keeping_bytes(self, limit: int, chunk: int = 4096) -> int:
        """The lowest queue offset such that the units from it to the end take at most ``limit``
        commitlog bytes, at a unit boundary (the records of one batch share one unit: counted
        once, never split). ``min_offset`` when everything fits. Walks back from the end only
        when the queue's commitlog span could exceed ``limit``."""
        lo, end = self.min_offset, self.max_offset
        if lo >= end:
            return lo
        first, last = self.unit(lo), self.unit(end - 1)
        if first is None or last is None or last[0] + last[1] - first[0] <= limit:
            return lo
        total, prev, start, index = 0, -1, end, end
        while index > lo:
            segment_start = (index - 1) // self.units_per_file * self.units_per_file
            n = min(chunk, index - max(lo, segment_start))   # never across a segment boundary
            units = self.read_units(index - n, n)
            if len(units) < n:   # the segment went meanwhile (retention)
                break
            index -= n
            for i in range(n - 1, -1, -1):
                cl_offset, size, _tags = units[i]
                if cl_offset != prev:
                    total += size
                    if total > limit:
                        return start
                    prev = cl_offset
                start = index + i
        return start

    def delete_expired(self, commitlog_min: int) -> int:
        """Delete segments whose every unit points below ``commitlog_min``; correct min offset."""
        deleted = 0
        while len(self.mfq.files) > 1:
            f = self.mfq.files[0]
            last = UNIT.unpack_from(f.segment.pread(f.file_size - CQ_STORE_UNIT_SIZE, CQ_STORE_UNIT_SIZE))
            if self.compacted:  # repointed units anywhere in the file: all must be gone
                units = UNIT.iter_unpack(f.segment.pread(0, f.file_size))
                gone = all(size <= 0 or phy + size <= commitlog_min for phy, size, _ in units)
            else:
                gone = last[1] > 0 and last[0] + last[1] <= commitlog_min
            if gone:
                self.mfq.delete_first(1)
                deleted += 1
            else:
                break
        self.correct_min_offset(commitlog_min)
        return deleted

    def correct_min_offset(self, commitlog_min: int) -> None:
        lo = max(self.min_offset, self.mfq.min_offset // CQ_STORE_UNIT_SIZE)
        hi = self.max_offset
        first = self._unit(lo) if lo < hi else None
        if first is None or first[0] >= commitlog_min:
            self.min_logic_offset = max(self.min_logic_offset, lo * CQ_STORE_UNIT_SIZE)
            return
        if self.compacted:  # as Kafka's log start of a compacted topic: superseded units are gaps, read past
            self.min_logic_offset = max(self.min_logic_offset, lo * CQ_STORE_UNIT_SIZE)
            return
        while lo < hi:
            mid = (lo + hi) // 2
            u = self._unit(mid)
            if u is not None and u[0] < commitlog_min:
                lo = mid + 1
            else:
                hi = mid
        self.min_logic_offset = max(self.min_logic_offset, lo * CQ_STORE_UNIT_SIZE)

    def destroy(self) -> None:
        with self.mfq.lock:
            for f in list(self.mfq.files):
                f.destroy()
            self.mfq.files = []
            self.mfq._starts = []


class QueueFilePreparer:
    """Creates the first file of a topic's queues on a thread of its own once the topic receives
    its first message, so producers spreading messages over thousands of new queues do not pay a
    file creation per queue on the put path (RocketMQ builds its queues off the put path too, in
    its reput thread). The queues are walked from the one before the queue that asked,
    backwards: a round-robin producer walks forwards and meets the preparer halfway instead of
    racing it queue by queue. A queue the put path reaches first is created there as before;
    both create under the queue's lock and neither creates a second file.

    ``prepare_one(topic, queue_id, trigger)`` creates one queue's file (False: stop this topic,
    e.g. it was deleted); ``queue_count(topic)`` is how many queues the topic has. A topic gets
    one pass per ``min_interval`` seconds at most (a failing disk is not retried per message).
    """

    def __init__(self, prepare_one: Callable[[str, int, object], bool], queue_count: Callable[[str], int],
                 min_interval: float = 10.0):
        self._prepare_one = prepare_one
        self._queue_count = queue_count
        self._min_interval = min_interval
        self._lock = threading.Lock()
        self._pending: dict[str, tuple[int, object]] = {}  # topic -> (queue id, queue) that asked
        self._last_pass: dict[str, float] = {}
        self._wake = threading.Event()
        self._stopped = False
        self._thread: threading.Thread | None = None

    def request(self, topic: str, queue_id: int, cq: object) -> None:
        """A queue of ``topic`` is about to get its first file on the put path: prepare the rest."""
        if topic in self._pending or self._stopped:
            return
        now = time.monotonic()
        with self._lock:
            if self._stopped or topic in self._pending or now - self._last_pass.get(topic, -1e9) < self._min_interval:
                return
            self._pending[topic] = (queue_id, cq)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="queue-file-preparer", daemon=True)
                self._thread.start()
        self._wake.set()

    def stop(self, timeout: float = 30.0) -> None:
        with self._lock:
            self._stopped = True
            thread = self._thread
        self._wake.set()
        if thread is not None:
            thread.join(timeout)

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            while True:
                with self._lock:
                    if self._stopped:
                        return
                    if not self._pending:
                        break
                    topic, (queue_id, cq) = next(iter(self._pending.items()))
                    self._last_pass[topic] = time.monotonic()
                    if len(self._last_pass) > 10_000:  # forget passes long past
                        cutoff = time.monotonic() - self._min_interval
                        self._last_pass = {t: at for t, at in self._last_pass.items() if at >= cutoff}
                try:
                    self._pass(topic, queue_id, cq)
                except Exception as exc:  # a full disk, a deleted directory: the put path reports those
                    log.warning("queue_files_not_prepared", topic=topic, error=str(exc))
                finally:
                    with self._lock:
                        self._pending.pop(topic, None)

    def _pass(self, topic: str, queue_id: int, cq: object) -> None:
        n = self._queue_count(topic)
        for i in range(1, n):
            if self._stopped or not self._prepare_one(topic, (queue_id - i) % n, cq):
                return
