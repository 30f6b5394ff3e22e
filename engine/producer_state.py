"""Producer state per queue, derived from the record batches in the commitlog (Kafka's
ProducerStateManager and transaction index), shared by both gateways.

Per (topic, queue id):
- **producers**: producer id -> epoch and the last ``MAX_BATCHES`` batches it appended
  (first sequence, last sequence, base offset, store time), for idempotence checks;
- **open transactions**: producer id -> first offset of its open transaction in the queue; the
  last stable offset (LSO) is the smallest, or the high watermark when none is open;
- **aborted transactions**: (producer id, first offset, ABORT marker offset), by marker offset; a
  record of producer P at offset o is aborted when an entry of P has first <= o < marker.

It is derived, never written on its own: ``apply`` takes one stored batch (header and assigned
base offset) and is called for every batch unit whose batch carries a producer id, in commitlog
order — by the store under its put lock as the unit is written, by recovery while it scans the
commitlog, by a slave for replicated units (``apply_unit``). A data batch records its sequence
range and, when transactional, opens the producer's transaction at its offset; a transaction
marker (control batch, transactional) closes it, an ABORT remembering the range; a delayed
record's placeholder (control batch, not transactional, with a sequence) counts as a batch of
one record. So the table is exactly the log's state up to the store's confirmed offset.

Snapshot (a checkpoint, ``config/producerSnapshot.json``, format version 1): ``capture`` copies
the queues changed since the last one, under the store's put lock, with the commitlog offset
they describe; ``write`` puts it on disk only once the commitlog is flushed past that offset,
so a snapshot never describes bytes a power loss could take from the log. ``recover`` loads it
and applies every batch stored after its commitlog offset; a snapshot past the log's end is
discarded and the whole log scanned. At ``capture`` producers idle longer than
``expiration_ms`` (Kafka's producer.id.expiration.ms) are forgotten and aborted ranges whose
marker retention deleted are dropped.

Thread-safe: an internal lock guards every read and write (writers also hold the put lock).
"""

from __future__ import annotations

import bisect
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, NamedTuple

import structlog

from . import record_batch as rb
from .message import INNER_BATCH_FLAG, MessageFormatError, UnitHeader
from .state_log import load_checkpoint, save_checkpoint

log = structlog.get_logger("rockafka.engine.producer_state")

FORMAT_VERSION = 1
FILE_NAME = "producerSnapshot.json"
MAX_BATCHES = 5  # Kafka's max.in.flight.requests.per.connection limit for idempotence
INT32_MAX = 2**31 - 1
EXPIRY_CHECK_MS = 60_000  # idle producers are looked for once a minute (the expiration is a day)
Key = tuple[str, int]


class BatchMeta(NamedTuple):
    first_seq: int
    last_seq: int
    base_offset: int
    timestamp: int  # store time of the batch


@dataclass
class ProducerEntry:
    epoch: int
    batches: list[BatchMeta] = field(default_factory=list)


@dataclass
class QueueState:
    producers: dict[int, ProducerEntry] = field(default_factory=dict)
    open: dict[int, int] = field(default_factory=dict)
    aborted: list[tuple[int, int, int]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"producers": {str(pid): [e.epoch, [list(b) for b in e.batches]] for pid, e in self.producers.items()},
                "open": {str(pid): first for pid, first in self.open.items()},
                "aborted": [list(a) for a in self.aborted]}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> "QueueState":
        return cls({int(pid): ProducerEntry(int(epoch), [BatchMeta(*map(int, b)) for b in batches])
                    for pid, (epoch, batches) in (doc.get("producers") or {}).items()},
                   {int(pid): int(first) for pid, first in (doc.get("open") or {}).items()},
                   sorted((tuple(map(int, a)) for a in doc.get("aborted") or ()), key=lambda e: e[2]))

    def empty(self) -> bool:
        return not (self.producers or self.open or self.aborted)


def last_sequence(base_seq: int, last_offset_delta: int) -> int:
    """Sequences wrap at Int32.MAX_VALUE to 0, as Kafka's."""
    return (base_seq + last_offset_delta) % (INT32_MAX + 1)


def marker_is_commit(batch: Any) -> bool:
    """COMMIT (True) or ABORT (False) of a transaction marker batch."""
    try:
        return rb.parse_control_record(rb.decode_records(batch)[0]).type == rb.CONTROL_TYPE_COMMIT
    except (ValueError, IndexError, TypeError):
        log.warning("transaction_marker_unreadable")
        return True  # an unreadable marker closes the transaction without hiding records


def _key(topic: str, queue_id: int) -> str:
    return f"{topic}@{queue_id}"


def _unkey(key: str) -> Key:
    topic, _, q = key.rpartition("@")
    return topic, int(q)


class ProducerStateTable:
    def __init__(self, config_dir: str | Path, expiration_ms: int = 86_400_000, refresh_ms: int = 30_000):
        self.path = Path(config_dir) / FILE_NAME
        self.expiration_ms = expiration_ms
        self.refresh_ms = refresh_ms  # an unchanged state's snapshot still moves up this often
        self._captured_ms = 0
        self.queues: dict[Key, QueueState] = {}
        self._lock = threading.Lock()
        self._dirty: set[Key] = set()
        self._doc: dict[str, dict[str, Any]] = {}   # serialized queues as of the last capture
        self._pending: tuple[int, dict[str, dict[str, Any]]] | None = None
        self._written_offset = -1
        self._next_expiry = 0

    # -- writes (commitlog order) -----------------------------------------------------------------
    def apply(self, topic: str, queue_id: int, header: rb.BatchHeader, base_offset: int, store_time: int,
              batch: Any = None) -> None:
        """One stored batch of ``header`` at ``base_offset`` (callers skip producer id < 0).
        ``batch`` (its bytes) is only read for a transaction marker: COMMIT or ABORT."""
        pid = header.producer_id
        key = (topic, queue_id)
        marker_committed = None
        if header.is_control and header.is_transactional:
            marker_committed = marker_is_commit(batch)
        with self._lock:
            qs = self.queues.get(key)
            if qs is None:
                qs = self.queues[key] = QueueState()
            self._dirty.add(key)
            if marker_committed is not None:
                first = qs.open.pop(pid, None)
                # no open entry: a marker written again (a recovery finishing a completion)
                if first is not None and not marker_committed:
                    bisect.insort(qs.aborted, (pid, first, base_offset), key=lambda e: e[2])
                return
            if header.base_sequence >= 0:
                entry = qs.producers.get(pid)
                if entry is None or entry.epoch != header.producer_epoch:
                    entry = qs.producers[pid] = ProducerEntry(header.producer_epoch)
                if not entry.batches or entry.batches[-1].base_offset < base_offset:  # a replay may repeat one
                    entry.batches.append(BatchMeta(header.base_sequence,
                                                   last_sequence(header.base_sequence, header.last_offset_delta),
                                                   base_offset, store_time))
                    if len(entry.batches) > MAX_BATCHES:
                        del entry.batches[0]
            if header.is_transactional and pid not in qs.open:
                qs.open[pid] = base_offset

    def apply_unit(self, unit: Any) -> None:
        """Apply one stored commitlog unit (a no-op unless it is a batch with a producer id)."""
        try:
            h = UnitHeader(unit)
        except (MessageFormatError, ValueError, IndexError):
            return
        self.apply_stored(unit, h)

    def apply_stored(self, buf: Any, h: UnitHeader) -> None:
        if not h.sys_flag & INNER_BATCH_FLAG:
            return
        start = h.body_pos
        try:
            header = rb.parse_header(buf, start)
        except rb.CorruptRecordError:
            return
        if header.producer_id < 0:
            return
        body = memoryview(buf)[start:start + h.body_len] if header.is_control else None
        self.apply(h.topic, h.queue_id, header, header.base_offset, h.store_timestamp, body)

    def forget_topic(self, topic: str) -> None:
        """A deleted topic: a re-created one under the same name starts with no producers."""
        with self._lock:
            for key in [k for k in self.queues if k[0] == topic]:
                del self.queues[key]
                self._dirty.add(key)

    # -- reads -----------------------------------------------------------------------------------
    def entry(self, topic: str, queue_id: int, producer_id: int) -> ProducerEntry | None:
        with self._lock:
            qs = self.queues.get((topic, queue_id))
            e = qs.producers.get(producer_id) if qs is not None else None
            return None if e is None else ProducerEntry(e.epoch, list(e.batches))

    def last_stable_offset(self, topic: str, queue_id: int, high_watermark: int) -> int:
        with self._lock:
            qs = self.queues.get((topic, queue_id))
            if qs is None or not qs.open:
                return high_watermark
            return min(min(qs.open.values()), high_watermark)

    def is_open(self, topic: str, queue_id: int, producer_id: int) -> bool:
        with self._lock:
            qs = self.queues.get((topic, queue_id))
            return qs is not None and producer_id in qs.open

    def active_producers(self, topic: str, queue_id: int) -> list[tuple[int, int, int, int, int]]:
        """(producer id, epoch, last sequence, last batch's store time, first offset of its open
        transaction or -1) of every producer the queue remembers (Kafka's DescribeProducers)."""
        with self._lock:
            qs = self.queues.get((topic, queue_id))
            if qs is None:
                return []
            out = []
            for pid in sorted(set(qs.producers) | set(qs.open)):
                e = qs.producers.get(pid)
                last = e.batches[-1] if e is not None and e.batches else None
                out.append((pid, e.epoch if e is not None else -1, last.last_seq if last else -1,
                            last.timestamp if last else -1, qs.open.get(pid, -1)))
            return out

    def open_transactions(self) -> list[tuple[str, int, int, int]]:
        """(topic, queue id, producer id, first offset) of every open transaction."""
        with self._lock:
            return [(t, q, pid, first) for (t, q), qs in self.queues.items() for pid, first in qs.open.items()]

    def aborted_between(self, topic: str, queue_id: int, start: int, end: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of aborted transactions overlapping [start, end)."""
        with self._lock:
            qs = self.queues.get((topic, queue_id))
            if qs is None or not qs.aborted:
                return []
            i = bisect.bisect_left(qs.aborted, start, key=lambda e: e[2])
            return [(pid, first) for pid, first, _last in qs.aborted[i:] if first < end]

    def is_aborted(self, topic: str, queue_id: int, producer_id: int, offset: int) -> bool:
        with self._lock:
            qs = self.queues.get((topic, queue_id))
            return qs is not None and any(pid == producer_id and first <= offset < last
                                          for pid, first, last in qs.aborted)

    def has_aborted(self, topic: str, queue_id: int) -> bool:
        qs = self.queues.get((topic, queue_id))
        return bool(qs is not None and qs.aborted)

    # -- snapshot --------------------------------------------------------------------------------
    def capture(self, commitlog_offset: int, min_offset: Callable[[str, int], int],
                now_ms: int | None = None, force: bool = False) -> None:
        """Under the store's put lock: note the state as of ``commitlog_offset`` (the confirmed
        offset). Expires idle producers and aborted ranges below each queue's min offset first.
        An unchanged state is captured again only every ``refresh_ms`` (so a crash never scans
        more than that much log for nothing)."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        with self._lock:
            if now >= self._next_expiry:
                self._next_expiry = now + EXPIRY_CHECK_MS
                self._expire(now, min_offset)
            if not (self._dirty or force) and (self._pending is not None or commitlog_offset == self._written_offset
                                               or now - self._captured_ms < self.refresh_ms):
                return
            self._captured_ms = now
            for key in self._dirty:
                qs = self.queues.get(key)
                if qs is None or qs.empty():
                    self._doc.pop(_key(*key), None)
                else:
                    self._doc[_key(*key)] = qs.to_json()
            self._dirty.clear()
            self._pending = (commitlog_offset, dict(self._doc))

    def _expire(self, now: int, min_offset: Callable[[str, int], int]) -> None:
        for key, qs in self.queues.items():
            idle = [pid for pid, e in qs.producers.items()
                    if not e.batches or now - e.batches[-1].timestamp > self.expiration_ms]
            for pid in idle:
                if pid not in qs.open:
                    del qs.producers[pid]
                    self._dirty.add(key)
            if qs.aborted and qs.aborted[0][2] < min_offset(*key):
                low = min_offset(*key)
                qs.aborted = [a for a in qs.aborted if a[2] >= low]
                self._dirty.add(key)

    def write(self, flushed_offset: int) -> bool:
        """Write the captured snapshot if the commitlog is flushed past it; True when written."""
        with self._lock:
            pending = self._pending
            if pending is None or pending[0] > flushed_offset:
                return False
            self._pending = None
        offset, queues = pending
        save_checkpoint(self.path, {"version": FORMAT_VERSION, "commitlogOffset": offset, "queues": queues})
        self._written_offset = offset
        return True

    # -- recovery --------------------------------------------------------------------------------
    def recover(self, commitlog: Any, end_offset: int) -> None:
        """Load the snapshot and apply every batch stored from its commitlog offset to
        ``end_offset`` (the recovered end of the log)."""
        doc = load_checkpoint(self.path)
        start = None
        if doc is not None:
            if doc.get("version") != FORMAT_VERSION:
                log.warning("producer_snapshot_version_unknown", path=str(self.path), version=doc.get("version"))
            else:
                start = int(doc.get("commitlogOffset", -1))
                if not 0 <= start <= end_offset:
                    log.warning("producer_snapshot_discarded", path=str(self.path), snapshot_offset=start,
                                commitlog_end=end_offset, reason="not within the log")
                    start = None
                else:
                    with self._lock:
                        self.queues = {_unkey(k): QueueState.from_json(v) for k, v in (doc.get("queues") or {}).items()}
                        self._doc = dict(doc.get("queues") or {})
        if start is None:
            with self._lock:
                self.queues, self._doc = {}, {}
            start = commitlog.min_offset
        # a snapshot taken before retention deleted the segments after it: what they held is gone,
        # the scan starts at the log's first byte
        start = max(start, commitlog.min_offset)
        begin = time.monotonic()
        units = 0
        for offset, h, f in commitlog.scan(start, False):
            if offset >= end_offset:
                break
            if h is not None and h.sys_flag & INNER_BATCH_FLAG:
                self.apply_stored(f.buf, h)
                units += 1
        with self._lock:
            self._dirty.update(self.queues)
        log.info("producer_state_recovered", snapshot_offset=start, commitlog_end=end_offset, batch_units=units,
                 queues=len(self.queues), seconds=round(time.monotonic() - begin, 3))
