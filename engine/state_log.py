"""Internal state topics: coordinator state as records of the shared commitlog.

The mechanics every owner of state in the log shares (the engine's consumer offsets, the Kafka
gateway's group and transaction coordinators); what the records mean is the owner's business.
See ``docs/design/coordinator-state.md``.

- **The topic.** ``ensure_topic`` creates it once with its partition count (kept for good: the
  count places every key), attribute ``internal=true`` and perm READ only, so native clients
  cannot send to it (the store's own put path does not check perms). ``compacted=True`` (the
  coordinators' topics, whose keys each name one piece of state) also sets
  ``cleanup.policy=compact``, on an existing topic too: retention then copies each key's latest
  record forward instead of deleting it (``engine/compaction.py``), so the log alone always holds
  the whole state and its size is bounded by the number of keys.
- **Placement.** ``partition_for(key)`` = Kafka's ``Utils.abs(key.hashCode()) % partitions``.
- **Appends.** One Kafka RecordBatch v2 per call (uncompressed, CreateTime), stored with
  ``put_record_batch`` as one unit, so when the call returns the records are in the log (and on
  disk under SYNC_FLUSH) and Kafka tools can fetch them; transaction markers likewise.
- **Reading back.** ``read(partition, start)`` yields the decoded records from a queue offset.
- **Checkpoint positions.** An owner wraps every append-then-apply in ``writing(partition)``;
  ``positions()`` then gives, per partition, an offset no later than the first record whose
  effect might not be in memory yet: the partition's end, or the end it had when the oldest
  append still in flight began. State copied together with those positions may be newer than
  them (a replay re-applies what it already has), never older.
- **Checkpoint files.** ``save_checkpoint`` / ``load_checkpoint``: JSON written with
  ``write_atomic``; an unreadable file falls back to its ``.bak``; neither = no checkpoint
  (a longer replay, never a silent reset of what the log holds).
- **Retention.** ``needed_commitlog_offset(positions)``: the lowest commitlog offset a replay from
  ``positions`` reads, for ``MessageStore.add_retention_guard``.

Thread-safe. Reads and appends go through the store facade only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

import structlog

from . import record_batch as rb
from .config_manager import remove_stale_temps, write_atomic
from .message import INNER_BATCH_FLAG, MessageFormatError, UnitHeader, java_hash
from .topic_config import PERM_READ, TopicConfig

log = structlog.get_logger("rockafka.engine.state_log")

CONSUMER_OFFSETS = "__consumer_offsets"
TRANSACTION_STATE = "__transaction_state"
# Kafka's Topic.isInternal: exactly these two names
INTERNAL_TOPICS = frozenset({CONSUMER_OFFSETS, TRANSACTION_STATE})
INTERNAL_ATTRIBUTE = "internal"
_READ_BYTES = 1 << 20


def is_internal(topic: str | None) -> bool:
    return topic in INTERNAL_TOPICS


def partition_for(key: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(key.hashCode()) % partitions`` (Integer.MIN_VALUE maps to 0)."""
    h = java_hash(key)
    return 0 if h == -(1 << 31) else abs(h) % partitions


@dataclass(frozen=True, slots=True)
class StateRecord:
    offset: int                 # logical offset of the record in its partition
    key: bytes | None
    value: bytes | None         # None: a tombstone
    producer_id: int
    producer_epoch: int
    transactional: bool
    marker: bool | None         # None: a data record; True / False: COMMIT / ABORT marker
    timestamp: int


class StateLog:
    def __init__(self, store: Any, topic: str, partitions: int, compacted: bool = False):
        self.store = store
        self.topic = topic
        self.partitions = max(1, int(partitions))
        self.compacted = compacted
        self._inflight_lock = threading.Lock()
        self._inflight: dict[int, dict[int, int]] = {}
        self._tickets = itertools.count()

    # -- topic ------------------------------------------------------------------------------
    def ensure_topic(self) -> int:
        """Create the topic if missing; returns its partition count (an existing topic keeps
        its own: changing it would move every key to another partition)."""
        from .compaction import CLEANUP_POLICY

        tcm = self.store.topic_config
        tc = tcm.get(self.topic)
        attributes = {INTERNAL_ATTRIBUTE: "true"}
        if self.compacted:
            attributes[CLEANUP_POLICY] = "compact"
        if tc is None:
            tcm.create_or_update(TopicConfig(self.topic, read_queue_nums=self.partitions,
                                             write_queue_nums=self.partitions, perm=PERM_READ,
                                             attributes=attributes))
            log.info("internal_topic_created", topic=self.topic, partitions=self.partitions)
            return self.partitions
        if tc.read_queue_nums != self.partitions:
            log.warning("internal_topic_partitions_kept", topic=self.topic, partitions=tc.read_queue_nums,
                        configured=self.partitions)
            self.partitions = tc.read_queue_nums
        if self.compacted and (tc.attributes or {}).get(CLEANUP_POLICY) != "compact":
            # a topic of an older data directory: compacted from now on
            tcm.create_or_update(dataclasses.replace(tc, attributes={**(tc.attributes or {}), **attributes}))
            log.info("internal_topic_compacted", topic=self.topic)
        return self.partitions

    def partition_for(self, key: str) -> int:
        return partition_for(key, self.partitions)

    def end_offset(self, partition: int) -> int:
        return self.store.get_max_offset_in_queue(self.topic, partition)

    # -- appends ----------------------------------------------------------------------------
    def append(self, partition: int, records: Sequence[tuple[bytes, bytes | None]], *, producer_id: int = -1,
               producer_epoch: int = -1, transactional: bool = False, timestamp: int | None = None) -> Any:
        """Store ``records`` (key, value or None) as one batch; returns the PutMessageResult
        (``queue_offset`` = offset of the first record)."""
        now = int(time.time() * 1000) if timestamp is None else timestamp
        batch = rb.build_batch([rb.Record(i, 0, key, value, []) for i, (key, value) in enumerate(records)],
                               base_timestamp=now, producer_id=producer_id, producer_epoch=producer_epoch,
                               is_transactional=transactional)
        return self.store.put_record_batch(self.topic, partition, batch, delay_headers=False)

    def append_marker(self, partition: int, producer_id: int, producer_epoch: int, commit: bool) -> Any:
        batch = rb.build_control_batch(rb.CONTROL_TYPE_COMMIT if commit else rb.CONTROL_TYPE_ABORT,
                                       producer_id=producer_id, producer_epoch=producer_epoch,
                                       timestamp=int(time.time() * 1000))
        return self.store.put_record_batch(self.topic, partition, batch, delay_headers=False)

    # -- reading ----------------------------------------------------------------------------
    def read(self, partition: int, start: int = 0, end: int | None = None) -> Iterator[StateRecord]:
        """Records of ``partition`` at offsets ``start`` .. ``end`` (the end now when None).
        Starts at the partition's first readable offset when ``start`` is below it."""
        store = self.store
        end = self.end_offset(partition) if end is None else end
        offset = max(start, store.get_min_offset_in_queue(self.topic, partition))
        if offset > start:
            log.warning("state_log_gap", topic=self.topic, partition=partition, wanted=start, first=offset)
        while offset < end:
            res = store.get_message("", self.topic, partition, offset, 100_000, max_bytes=_READ_BYTES)
            if not res.messages:
                if res.next_begin_offset > offset:
                    offset = res.next_begin_offset
                    continue
                break
            for unit in res.messages:
                yield from _unit_records(unit, offset, end, self.topic, partition)
            if res.next_begin_offset <= offset:
                break
            offset = res.next_begin_offset

    # -- checkpoint positions ---------------------------------------------------------------
    @contextlib.contextmanager
    def writing(self, partition: int) -> Iterator[None]:
        """Mark an append-then-apply of ``partition`` as in flight (see the module docstring)."""
        ticket = next(self._tickets)
        with self._inflight_lock:
            self._inflight.setdefault(partition, {})[ticket] = self.end_offset(partition)
        try:
            yield
        finally:
            with self._inflight_lock:
                self._inflight[partition].pop(ticket, None)

    def positions(self) -> dict[int, int]:
        with self._inflight_lock:
            out = {}
            for p in range(self.partitions):
                starts = self._inflight.get(p)
                end = self.end_offset(p)
                out[p] = min(min(starts.values()), end) if starts else end
            return out

    def needed_commitlog_offset(self, positions: dict[int, int]) -> int | None:
        """The lowest commitlog offset a replay from ``positions`` reads; None when nothing."""
        needed = None
        for p, pos in positions.items():
            if pos >= self.end_offset(p):
                continue
            cq = self.store.find_consume_queue(self.topic, p)
            # the first unit the replay reads (a unit the cleaner removed points nowhere)
            units = cq.read_units(max(pos, cq.min_offset), 256) if cq is not None else []
            unit = next((u for u in units if u[0] >= 0), None)
            if unit is not None and (needed is None or unit[0] < needed):
                needed = unit[0]
        return needed


def _unit_records(unit: Any, start: int, end: int, topic: str, partition: int) -> Iterator[StateRecord]:
    try:
        h = UnitHeader(unit)
        if not h.sys_flag & INNER_BATCH_FLAG:
            return
        header, records = rb.decode_batch(memoryview(unit)[h.body_pos:h.body_pos + h.body_len])
    except (MessageFormatError, ValueError) as exc:
        log.error("state_record_unreadable", topic=topic, partition=partition, offset=start, error=str(exc))
        return
    marker = None
    if header.is_control:
        try:
            marker = rb.parse_control_record(records[0]).type == rb.CONTROL_TYPE_COMMIT
        except (IndexError, ValueError):
            return
    for rec in records:
        offset = header.base_offset + rec.offset_delta
        if offset < start or offset >= end:
            continue
        yield StateRecord(offset, None if rec.key is None else bytes(rec.key),
                          None if rec.value is None else bytes(rec.value), header.producer_id,
                          header.producer_epoch, header.is_transactional, marker,
                          rec.absolute_timestamp(header))
        if marker is not None:
            return


# -- checkpoint files ---------------------------------------------------------------------------

def save_checkpoint(path: Path, doc: dict[str, Any]) -> None:
    write_atomic(Path(path), json.dumps(doc, separators=(",", ":"), sort_keys=True).encode("utf-8"))


def load_checkpoint(path: Path) -> dict[str, Any] | None:
    """The checkpoint at ``path`` (or its ``.bak`` when unreadable); None when neither is."""
    path = Path(path)
    remove_stale_temps(path)
    for candidate in (path, path.with_name(path.name + ".bak")):
        try:
            doc = json.loads(candidate.read_bytes().decode("utf-8"))
        except FileNotFoundError:
            continue
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            log.error("checkpoint_unreadable", path=str(candidate), error=str(exc))
            continue
        if isinstance(doc, dict):
            if candidate != path:
                log.warning("checkpoint_backup_used", path=str(path))
            return doc
    return None


def positions_from(doc: dict[str, Any] | None) -> dict[int, int]:
    raw = (doc or {}).get("positions") or {}
    try:
        return {int(p): int(o) for p, o in raw.items()}
    except (TypeError, ValueError):
        return {}
