"""Producer transactions per queue: which are open and which were aborted (``txnIndex.json``).

Kafka transactions write a producer's records into ordinary queues and end them with a marker
(a control batch). Readers that must only see committed data need two facts per queue, which
this index owns (protocol-neutral: producer ids and logical offsets only):

- open transactions: producer id -> first logical offset of its records in the queue. The last
  stable offset (LSO) is the smallest such offset, or the high watermark when none is open;
  committed-only readers never read at or past it.
- aborted transactions: (producer id, first offset, marker offset), ordered by marker offset.
  A record of producer P at offset o is aborted when an entry of P has first <= o < marker.

Format version 1: ``{"version": 1, "open": {"topic@queue": {"pid": first}}, "aborted":
{"topic@queue": [[pid, first, last], ...]}}``, written atomically with a ``.bak``
(``ConfigManager``) on every change, so after a restart the LSO and the aborted lists are what
they were. Entries whose marker is below the queue's min offset are dropped as retention
deletes their records.

One instance per store (``for_store``), shared by both gateways; thread-safe.
"""

from __future__ import annotations

import bisect
import threading
from typing import Any

from .config_manager import ConfigManager

FORMAT_VERSION = 1
Key = tuple[str, int]


def _k(topic: str, queue_id: int) -> str:
    return f"{topic}@{queue_id}"


def _unk(key: str) -> Key:
    topic, _, q = key.rpartition("@")
    return topic, int(q)


class TransactionIndex(ConfigManager):
    file_name = "txnIndex.json"

    def __init__(self, config_dir) -> None:
        super().__init__(config_dir)
        self.open: dict[Key, dict[int, int]] = {}
        self.aborted: dict[Key, list[tuple[int, int, int]]] = {}

    # -- persistence ---------------------------------------------------------------------------
    def encode(self) -> dict[str, Any]:
        return {"version": FORMAT_VERSION,
                "open": {_k(*k): {str(p): f for p, f in v.items()} for k, v in self.open.items() if v},
                "aborted": {_k(*k): [list(e) for e in v] for k, v in self.aborted.items() if v}}

    def decode(self, doc: dict[str, Any]) -> None:
        if doc.get("version", FORMAT_VERSION) != FORMAT_VERSION:
            raise ValueError(f"{self.path}: unsupported format version {doc.get('version')}")
        self.open = {_unk(k): {int(p): int(f) for p, f in v.items()} for k, v in (doc.get("open") or {}).items()}
        self.aborted = {_unk(k): sorted((int(a), int(b), int(c)) for a, b, c in v)
                        for k, v in (doc.get("aborted") or {}).items()}

    # -- writes --------------------------------------------------------------------------------
    def begin(self, topic: str, queue_id: int, producer_id: int, first_offset: int) -> None:
        """The first record of an open transaction of ``producer_id`` landed at ``first_offset``."""
        with self.lock:
            opened = self.open.setdefault((topic, queue_id), {})
            if producer_id in opened:
                return
            opened[producer_id] = first_offset
            self.persist()

    def is_open(self, topic: str, queue_id: int, producer_id: int) -> bool:
        with self.lock:
            return producer_id in self.open.get((topic, queue_id), {})

    def complete(self, topic: str, queue_id: int, producer_id: int, marker_offset: int, committed: bool,
                 persist: bool = True) -> None:
        """The transaction's marker was written at ``marker_offset``. With ``persist=False`` the
        caller persists once after completing all partitions of a transaction."""
        with self.lock:
            first = self.open.get((topic, queue_id), {}).pop(producer_id, None)
            if not committed and first is not None:
                entries = self.aborted.setdefault((topic, queue_id), [])
                bisect.insort(entries, (producer_id, first, marker_offset), key=lambda e: e[2])
            if persist:
                self.persist()
            else:
                self.mark_dirty()

    def forget_before(self, topic: str, queue_id: int, min_offset: int) -> None:
        with self.lock:
            entries = self.aborted.get((topic, queue_id))
            if entries and entries[0][2] < min_offset:
                self.aborted[(topic, queue_id)] = [e for e in entries if e[2] >= min_offset]
                self.mark_dirty()

    def forget_topic(self, topic: str) -> None:
        """A deleted topic: a re-created one under the same name starts with no transactions."""
        with self.lock:
            changed = False
            for table in (self.open, self.aborted):
                for key in [k for k in table if k[0] == topic]:
                    del table[key]
                    changed = True
            if changed:
                self.persist()

    def observe_batch(self, topic: str, queue_id: int, batch: bytes) -> None:
        """Follow the log instead of the produce path (a slave replicating its master): a
        transactional data batch opens its producer's transaction at its base offset, a
        transaction marker ends it. Other batches are ignored."""
        from . import record_batch as rb

        try:
            h = rb.parse_header(batch)
        except (ValueError, rb.CorruptRecordError):
            return
        if not h.is_transactional or h.producer_id < 0:
            return
        if not h.is_control:
            self.begin(topic, queue_id, h.producer_id, h.base_offset)
            return
        try:
            records = rb.decode_records(batch)
            control = rb.parse_control_record(records[0]) if records else None
        except (ValueError, rb.CorruptRecordError):
            return
        if control is not None and control.type in (rb.CONTROL_TYPE_ABORT, rb.CONTROL_TYPE_COMMIT):
            self.complete(topic, queue_id, h.producer_id, h.base_offset, control.type == rb.CONTROL_TYPE_COMMIT)

    def truncate_to(self, max_offsets: dict[Key, int]) -> None:
        """The log was cut: forget transactions that begin, and aborts whose marker lies, at or
        past each queue's new end (a queue missing from ``max_offsets`` is empty)."""
        with self.lock:
            changed = False
            for key, opened in list(self.open.items()):
                end = max_offsets.get(key, 0)
                for pid in [p for p, first in opened.items() if first >= end]:
                    del opened[pid]
                    changed = True
            for key, entries in list(self.aborted.items()):
                end = max_offsets.get(key, 0)
                keep = [e for e in entries if e[2] < end]
                if len(keep) != len(entries):
                    self.aborted[key] = keep
                    changed = True
            if changed:
                self.persist()

    # -- reads ---------------------------------------------------------------------------------
    def last_stable_offset(self, topic: str, queue_id: int, high_watermark: int) -> int:
        with self.lock:
            opened = self.open.get((topic, queue_id))
            return min(min(opened.values()), high_watermark) if opened else high_watermark

    def aborted_between(self, topic: str, queue_id: int, start: int, end: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of aborted transactions overlapping [start, end)."""
        with self.lock:
            entries = self.aborted.get((topic, queue_id))
            if not entries:
                return []
            i = bisect.bisect_left(entries, start, key=lambda e: e[2])
            return [(pid, first) for pid, first, last in entries[i:] if first < end]

    def is_aborted(self, topic: str, queue_id: int, producer_id: int, offset: int) -> bool:
        with self.lock:
            for pid, first, last in self.aborted.get((topic, queue_id), ()):
                if pid == producer_id and first <= offset < last:
                    return True
            return False

    def has_aborted(self, topic: str, queue_id: int) -> bool:
        return bool(self.aborted.get((topic, queue_id)))


_instances_lock = threading.Lock()


def for_store(store) -> TransactionIndex:
    """The store's transaction index (loaded from its config dir on first use)."""
    with _instances_lock:
        idx = getattr(store, "_txn_index", None)
        if idx is None or idx.path.parent != store.config_dir:
            idx = TransactionIndex(store.config_dir)
            idx.load()
            store._txn_index = idx
        return idx


__all__ = ["TransactionIndex", "for_store"]
