"""Compacted topics over the shared commitlog: live records are copied forward before retention
deletes their segment, and consume-queue units are repointed at the copies
(docs/design/compaction.md).

``Compactor`` belongs to a ``MessageStore``: the retention pass calls ``before_retention(cut)``
first; its retention guard keeps any segment still holding a live record that was not copied.
``is_copy`` / ``dispatch_copy`` are what dispatch (recovery, slaves) does with a copy unit.
"""

from __future__ import annotations

import struct
import time
from typing import Any

import structlog

from . import record_batch
from .message import INNER_BATCH_FLAG, Message, UnitHeader, body_crc, patch_unit

log = structlog.get_logger("rockafka.engine.compaction")

CLEANUP_POLICY = "cleanup.policy"
DELETE_RETENTION_MS = "delete.retention.ms"
COPY_PROPERTY = "CMPCOPY"  # a unit copied forward: repoints the queue unit at QUEUEOFFSET
# with COPY_PROPERTY: the body lists queue offsets (int64 each) whose records the cleaner
# removed; their queue units become DEAD_UNIT
DEAD_PROPERTY = "CMPDEAD"
DEFAULT_DELETE_RETENTION_MS = 86_400_000
# Kafka's topic-level cleaner triggers and their defaults (segment.bytes defaults to the
# commitlog's segment size, as DescribeConfigs reports it)
MIN_CLEANABLE_DIRTY_RATIO = "min.cleanable.dirty.ratio"
MIN_COMPACTION_LAG_MS = "min.compaction.lag.ms"
MAX_COMPACTION_LAG_MS = "max.compaction.lag.ms"
SEGMENT_MS = "segment.ms"
SEGMENT_BYTES = "segment.bytes"
DEFAULT_MIN_CLEANABLE_DIRTY_RATIO = 0.5
DEFAULT_SEGMENT_MS = 604_800_000
# A removed record's queue unit: commitlog offset -1 (below any log start: every reader skips
# it, retention never waits for it), size 1 (a written unit to recovery, which ends a queue at
# its first unit of size 0).
DEAD_UNIT = (-1, 1, 0)
_DEAD_PER_UNIT = 8192  # queue offsets listed in one dead-list unit (64 KiB of body)
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def policy_of(attributes: dict[str, str]) -> set[str]:
    return {p.strip() for p in attributes.get(CLEANUP_POLICY, "delete").split(",") if p.strip()}


def is_compacted(attributes: dict[str, str]) -> bool:
    return "compact" in policy_of(attributes)


def is_copy(props: dict[str, str]) -> bool:
    return props.get(COPY_PROPERTY) == "1"


def dispatch_copy(store: Any, h: UnitHeader, offset: int, tags_code: int) -> None:
    """A copy unit found by dispatch (recovery, a slave): repoint its queue unit, nothing else;
    a dead list (``DEAD_PROPERTY``) makes each queue unit it names a ``DEAD_UNIT``."""
    cq = store.find_consume_queue(h.topic, h.queue_id, create=True)
    if h.props_len and not h.sys_flag & INNER_BATCH_FLAG:  # copies are batches; a dead list is not
        data = store.commitlog.read(offset, h.total_size)
        unit = UnitHeader(data, 0) if data is not None else None  # ``h`` may be relative to a segment's buffer
        if unit is not None and unit.properties(data).get(DEAD_PROPERTY) == "1":
            body = bytes(data[unit.body_pos:unit.body_pos + unit.body_len])
            for (dead,) in _I64.iter_unpack(body[:len(body) - len(body) % 8]):
                cq.overwrite(dead, *DEAD_UNIT)
            return
    cq.overwrite(h.queue_offset, offset, h.total_size, tags_code)


class Compactor:
    def __init__(self, store: Any):
        self.store = store
        self.floors: dict[tuple[str, int], int] = {}  # queue -> lowest commitlog offset of a live uncopied record
        self.copied = 0
        self.dropped_tombstones = 0
        self.removed = 0  # records the cleaner removed (superseded, aborted, expired tombstones)
        self.queues: dict[tuple[str, int], _QueueState] = {}  # the cleaner's view of each compacted queue
        store.add_retention_guard(self.needed)

    # -- the guard ---------------------------------------------------------------------------
    def needed(self) -> int | None:
        compacted = self._compacted_topics()
        floors = [v for (topic, _), v in self.floors.items() if topic in compacted]
        return min(floors) if floors else None

    def _compacted_topics(self) -> dict[str, dict[str, str]]:
        return {t: tc.attributes for t, tc in list(self.store.topic_config.all().items()) if is_compacted(tc.attributes)}

    def active(self) -> bool:
        """Some topic is compacted (retention then goes through ``before_retention``)."""
        return any(is_compacted(tc.attributes) for tc in list(self.store.topic_config.all().values()))

    def mark_queues(self) -> None:
        """Tell compacted topics' queues that their units may be repointed (min offset, deletion)."""
        compacted = self._compacted_topics()
        for (topic, _), cq in list(self.store.consume_queues().items()):
            if topic in compacted:
                cq.compacted = True

    # -- the cleaner (Kafka's triggers) ---------------------------------------------------------
    def clean(self, now_ms: float | None = None) -> int:
        """One cleaner pass: every compacted queue that is due (``min.cleanable.dirty.ratio`` of
        its records written since its last cleaning, or its oldest dirty record older than
        ``max.compaction.lag.ms``) is cleaned up to its first uncleanable offset. Returns how
        many records were removed. A slave never cleans: it follows its master's dead lists."""
        if self.store.is_slave or not self.store.running:
            return 0
        now = time.time() * 1000 if now_ms is None else now_ms
        removed = 0
        for topic, attrs in self._compacted_topics().items():
            for qid in range(max(1, self._queue_count(topic))):
                cq = self.store.find_consume_queue(topic, qid)
                if cq is None or not self._due(topic, qid, cq, attrs, now):
                    continue
                try:
                    removed += self._clean_queue(topic, qid, cq, attrs, now)
                except Exception:  # noqa: BLE001 - one queue's failure never stops the others
                    log.exception("compaction_clean_failed", topic=topic, queue_id=qid)
        if removed:
            log.info("compaction_cleaned", records_removed=removed)
        return removed

    def _queue_count(self, topic: str) -> int:
        tc = self.store.topic_config.get(topic)
        return max(tc.read_queue_nums, tc.write_queue_nums) if tc is not None else 0

    def _due(self, topic: str, qid: int, cq: Any, attrs: dict[str, str], now: float) -> bool:
        """Follow the queue's Kafka segments up to its end (units and store times only, no
        record decoding), then: is a cleaning pass worth it?"""
        st = self.queues.get((topic, qid))
        start, end = cq.min_offset, cq.max_offset
        if st is None or st.scanned_end < start:
            st = self.queues[(topic, qid)] = _QueueState(start)
        segment_ms = _int(attrs.get(SEGMENT_MS), DEFAULT_SEGMENT_MS)
        segment_bytes = _int(attrs.get(SEGMENT_BYTES), self.store.config.mapped_file_size_commit_log)
        moved = st.scanned_end < end
        index, last_phy = st.scanned_end, None
        while index < end:
            units = cq.read_units(index, 1024)
            if not units:
                index += 1
                continue
            for i, (phy, size, _tcode) in enumerate(units):
                if size <= 0 or phy < 0 or phy == last_phy:
                    continue
                last_phy = phy
                ts = self.store._unit_store_timestamp(phy, size)
                # Kafka rolls a segment when a batch would overflow segment.bytes or comes
                # segment.ms after the segment's first one; the last (active) one is never cleaned
                if st.seg_first_ts is None or st.seg_bytes + size > segment_bytes or ts - st.seg_first_ts > segment_ms:
                    st.active_start, st.seg_bytes, st.seg_first_ts = index + i, 0, ts
                st.seg_bytes += size
            index += len(units)
        st.scanned_end = end
        first_dirty = max(start, st.cleaned_to)
        if st.active_start <= first_dirty:
            return False  # all that is dirty is in the active segment
        if not moved and not st.lag_blocked:
            return False  # nothing new since the last pass
        ratio = _float(attrs.get(MIN_CLEANABLE_DIRTY_RATIO), DEFAULT_MIN_CLEANABLE_DIRTY_RATIO)
        # records, not bytes, stand for the dirty ratio (a queue knows its offsets for free)
        if st.cleaned_to < 0 or (st.active_start - first_dirty) >= ratio * max(1, st.active_start - start):
            return True
        max_lag = _int(attrs.get(MAX_COMPACTION_LAG_MS), 2**63 - 1)
        if max_lag < 2**62:
            u = cq.unit(first_dirty)
            if u is not None and u[0] >= 0:
                ts = self.store._unit_store_timestamp(u[0], u[1])
                return 0 <= ts < now - max_lag
        return False

    def _clean_queue(self, topic: str, qid: int, cq: Any, attrs: dict[str, str], now: float) -> int:
        """Remove what a Kafka consumer must no longer see below the queue's first uncleanable
        offset: records superseded by a later one of their key, records of aborted
        transactions, and tombstones older than ``delete.retention.ms``. A batch holding any
        of them has its remaining records copied forward (one-record batches, as
        ``before_retention`` copies) and the removed records' units become ``DEAD_UNIT`` through
        a dead-list unit in the commitlog, so slaves and recovery remove the same records."""
        store = self.store
        cl = store.commitlog
        txns = store.producer_state
        end = cq.max_offset
        stable = txns.last_stable_offset(topic, qid, 1 << 62)
        delete_retention = _int(attrs.get(DELETE_RETENTION_MS), DEFAULT_DELETE_RETENTION_MS)
        min_lag = _int(attrs.get(MIN_COMPACTION_LAG_MS), 0)
        st = self.queues[(topic, qid)]
        latest: dict[bytes, int] = {}
        # batches by commitlog offset, in queue order: [first offset, phy, size, tags, {offset:
        # (header, record)} of the offsets whose unit points at it, blocked]
        batches: dict[int, list] = {}
        aborted: set[int] = set()
        lag_end = end  # the first offset newer than min.compaction.lag.ms
        index = cq.min_offset
        cur_phy, cur_header, cur_records = None, None, {}
        while index < end:
            units = cq.read_units(index, 1024)
            if not units:
                index += 1
                continue
            for i, (phy, size, tcode) in enumerate(units):
                offset = index + i
                if size <= 0 or phy < cl.min_offset:
                    continue  # removed, or its segment gone
                entry = batches.get(phy)
                if phy != cur_phy:
                    cur_phy = phy
                    cur_header, records = _batch_of(cl.read(phy, size))
                    cur_records = {} if cur_header is None else {cur_header.base_offset + r.offset_delta: r
                                                                  for r in records}
                if entry is None:
                    entry = batches[phy] = [offset, phy, size, tcode, {}, cur_header is None or cur_header.is_control]
                    if cur_header is not None and lag_end == end and min_lag > 0 \
                            and cur_header.max_timestamp > now - min_lag:
                        lag_end = offset
                if entry[5]:
                    continue
                header, r = cur_header, cur_records.get(offset)
                if r is None:
                    continue
                if header.is_transactional:
                    if txns.is_aborted(topic, qid, header.producer_id, offset):
                        aborted.add(offset)
                        entry[4][offset] = (header, r)
                        continue
                    if offset >= stable and txns.is_open(topic, qid, header.producer_id):
                        entry[5] = True  # undecided: its batch waits for the marker
                        continue
                if r.key is None:
                    entry[5] = True  # a record without a key is never removed (nor its batch rewritten)
                    continue
                latest[r.key] = offset
                entry[4][offset] = (header, r)
            index += len(units)
        cleanable_end = min(st.active_start, lag_end, stable)
        st.lag_blocked = lag_end < st.active_start
        dead: list[int] = []
        copies: list[tuple[int, int, int, bytes]] = []
        for first, phy, size, tcode, recs, blocked in batches.values():
            if blocked or not recs or first >= cleanable_end:
                continue
            if max(recs) >= cleanable_end:
                continue  # a batch straddling the end waits whole
            keep, drop = [], []
            for o, (header, r) in sorted(recs.items()):
                ts = header.max_timestamp if header.timestamp_type else header.base_timestamp + r.timestamp_delta
                if o in aborted or latest.get(r.key) != o or (r.value is None and ts + delete_retention < now):
                    drop.append(o)
                else:
                    keep.append((o, header, r, ts))
            if not drop:
                continue
            dead.extend(drop)
            for o, header, r, ts in keep:
                copies.append((o, phy, tcode, record_batch.build_batch(
                    [record_batch.Record(0, 0, r.key, r.value, r.headers)], base_offset=o,
                    timestamp_type=header.timestamp_type, base_timestamp=ts, max_timestamp=ts)))
        for o, _phy, tcode, batch in copies:
            if not self._append_copy(topic, qid, o, batch, tcode):
                return 0  # nothing removed this time: the next pass tries again
        for i in range(0, len(dead), _DEAD_PER_UNIT):
            if not self._append_dead(topic, qid, dead[i:i + _DEAD_PER_UNIT]):
                return 0
        if copies or dead:
            cl.flush()
        st.cleaned_to = cleanable_end
        self.removed += len(dead)
        self.copied += len(copies)
        if dead:
            log.info("compaction_queue_cleaned", topic=topic, queue_id=qid, removed=len(dead), copied=len(copies),
                     cleanable_end=cleanable_end, end=end)
        return len(dead)

    def _append_dead(self, topic: str, qid: int, offsets: list[int]) -> bool:
        """Append a dead-list unit naming ``offsets`` and turn their queue units into
        ``DEAD_UNIT`` (under the put lock, as copies are written)."""
        store = self.store
        body = b"".join(_I64.pack(o) for o in offsets)
        msg = Message(topic=topic, body=body, properties={COPY_PROPERTY: "1", DEAD_PROPERTY: "1"}, queue_id=qid)
        unit, refused, _ = store._encode(msg)
        if refused:
            log.warning("compaction_dead_list_refused", topic=topic, queue_id=qid, error=refused.error)
            return False
        if not store._lock_for_put():
            return False
        try:
            cq = store.find_consume_queue(topic, qid)
            if cq is None:
                return True
            cl = store.commitlog
            try:
                f = cl.segment_for(len(unit))
                phy = f.file_from_offset + f.wrote_position
                patch_unit(unit, offsets[0], phy, int(time.time() * 1000))
                cl.write_unit(f, unit)
            except OSError as exc:
                log.warning("compaction_dead_list_failed", topic=topic, queue_id=qid, error=str(exc))
                return False
            for o in offsets:
                cq.overwrite(o, *DEAD_UNIT)
            store.confirmed_offset = phy + len(unit)
        finally:
            store._unlock_for_put()
        store.ha.notify_append()
        return True

    # -- a pass --------------------------------------------------------------------------------
    def before_retention(self, cut: int, now_ms: float | None = None) -> int:
        """Copy forward the live records of compacted topics lying below commitlog offset ``cut``.
        Returns how many were copied."""
        now = time.time() * 1000 if now_ms is None else now_ms
        compacted = self._compacted_topics()
        self.floors = {k: v for k, v in self.floors.items() if k[0] in compacted}
        copied = 0
        may_copy = not self.store.is_slave  # a slave's log is its master's: it waits for the master's copies
        for (topic, qid), cq in list(self.store.consume_queues().items()):
            attrs = compacted.get(topic)
            if attrs is None:
                continue
            cq.compacted = True
            try:
                copied += self._compact_queue(topic, qid, cq, attrs, cut, now, may_copy)
            except Exception:  # noqa: BLE001 - the queue keeps its floor: retention waits
                log.exception("compaction_failed", topic=topic, queue_id=qid)
        if copied:
            self.store.commitlog.flush()  # the copies are on disk before their originals' segment goes
            log.info("compaction_copied", records=copied, cut=cut)
        return copied

    def _compact_queue(self, topic: str, qid: int, cq: Any, attrs: dict[str, str], cut: int, now: float,
                       may_copy: bool = True) -> int:
        store = self.store
        cl = store.commitlog
        policy = policy_of(attrs)
        delete_retention = _int(attrs.get(DELETE_RETENTION_MS), DEFAULT_DELETE_RETENTION_MS)
        retention = _int(attrs.get("retention.ms"), store.config.file_reserved_time * 3_600_000) \
            if "delete" in policy else -1
        latest: dict[bytes, tuple[int, int, int, Any]] = {}  # key -> (offset, phy, tags, record info or None)
        txns = store.producer_state
        stable = txns.last_stable_offset(topic, qid, 1 << 62)
        undecided_floor = None  # lowest commitlog offset of a transactional record not yet decided
        index, end = cq.min_offset, cq.max_offset
        tail = None  # (phy, size, tags) of the queue's last unit
        decoded_phy, decoded = -1, {}
        while index < end:
            units = cq.read_units(index, 1024)
            if not units:
                index += 1
                continue
            for i, (phy, size, tcode) in enumerate(units):
                offset = index + i
                if size <= 0 or phy < cl.min_offset:
                    continue
                if offset == end - 1:
                    tail = (phy, size, tcode)
                if phy != decoded_phy:
                    decoded_phy, decoded = phy, _records_of(cl.read(phy, size))
                rec = decoded.get(offset)
                if rec is None:
                    continue
                header, r = rec
                if header.is_transactional:
                    # an aborted record never was the key's value: the committed one before it
                    # stays the latest; an undecided one neither supersedes nor goes (its segment
                    # is kept until the marker decides it). A committed one is copied as a plain
                    # record: its marker is not copied.
                    if txns.is_aborted(topic, qid, header.producer_id, offset):
                        continue
                    if offset >= stable and txns.is_open(topic, qid, header.producer_id):
                        undecided_floor = phy if undecided_floor is None else min(undecided_floor, phy)
                        continue
                latest[r.key] = (offset, phy, tcode, (header, r) if phy < cut else None)
            index += len(units)
        floor = undecided_floor
        copies = []
        for key, (offset, phy, tcode, rec) in latest.items():
            if rec is None or not may_copy:
                if floor is None or phy < floor:
                    floor = phy
                continue
            header, r = rec
            ts = header.max_timestamp if header.timestamp_type else header.base_timestamp + r.timestamp_delta
            if r.value is None and ts + delete_retention < now:
                if offset != end - 1:  # the last offset's record is kept below, whatever it is
                    self.dropped_tombstones += 1
                continue
            if retention >= 0 and ts + retention < now:
                continue  # compact,delete: older than the topic's retention
            copies.append((offset, phy, tcode, header, r, ts))
        copies.sort()
        batches = []
        for offset, phy, tcode, header, r, ts in copies:
            batches.append((offset, phy, tcode, record_batch.build_batch(
                [record_batch.Record(0, 0, r.key, r.value, r.headers)], base_offset=offset,
                timestamp_type=header.timestamp_type, base_timestamp=ts, max_timestamp=ts)))
        if tail is not None and tail[0] < cut and not (copies and copies[-1][0] == end - 1):
            # The partition's last offset stays readable, whatever its record (a transaction
            # marker, an old tombstone): a consumer reads up to the log end only through it —
            # Kafka's cleaner never touches the active segment for the same reason.
            if not may_copy:
                floor = tail[0] if floor is None else min(floor, tail[0])
            else:
                batch = _tail_batch(cl.read(tail[0], tail[1]), end - 1)
                if batch is not None:
                    batches.append((end - 1, tail[0], tail[2], batch))
        for offset, phy, tcode, batch in batches:
            if not self._append_copy(topic, qid, offset, batch, tcode):
                if floor is None or phy < floor:  # not copied: retention must keep it
                    floor = phy
        if floor is None:
            self.floors.pop((topic, qid), None)
        else:
            self.floors[(topic, qid)] = floor
        self.copied += len(batches)
        return len(batches)

    def _append_copy(self, topic: str, qid: int, offset: int, batch: bytes, tcode: int) -> bool:
        """Append one copy unit at the log's head and repoint queue unit ``offset`` at it."""
        store = self.store
        msg = Message(topic=topic, body=batch, properties={COPY_PROPERTY: "1"}, queue_id=qid)
        unit, refused, _ = store._encode(msg, sys_flag=INNER_BATCH_FLAG, crc=0)
        if refused:
            log.warning("compaction_copy_refused", topic=topic, queue_id=qid, offset=offset, error=refused.error)
            return False
        if not store._lock_for_put():
            return False
        try:
            cq = store.find_consume_queue(topic, qid)
            if cq is None or not cq.min_offset <= offset < cq.max_offset:
                return True  # the record's offset is gone (DeleteRecords): nothing to keep
            cl = store.commitlog
            size = len(unit)
            try:
                f = cl.segment_for(size)
                phy = f.file_from_offset + f.wrote_position
                patch_unit(unit, offset, phy, int(time.time() * 1000))
                h = UnitHeader(unit, 0)
                _I32.pack_into(unit, 8, body_crc(memoryview(unit)[h.body_pos:h.body_pos + h.body_len]))
                cl.write_unit(f, unit)
            except OSError as exc:
                log.warning("compaction_copy_failed", topic=topic, queue_id=qid, offset=offset, error=str(exc))
                return False
            cq.overwrite(offset, phy, size, tcode)
            store.confirmed_offset = phy + size
        finally:
            store._unlock_for_put()
        store.ha.notify_append()
        return True


class _QueueState:
    """The cleaner's view of one compacted queue: its Kafka segments replayed up to
    ``scanned_end`` (``active_start``: the first offset of the active one) and how far it was
    cleaned (``cleaned_to``: Kafka's first dirty offset). In memory: after a restart the first
    pass cleans (and finds little to remove: removals are in the log)."""

    __slots__ = ("scanned_end", "active_start", "seg_bytes", "seg_first_ts", "cleaned_to", "lag_blocked")

    def __init__(self, start: int):
        self.scanned_end = start
        self.active_start = start
        self.seg_bytes = 0
        self.seg_first_ts: int | None = None
        self.cleaned_to = -1
        self.lag_blocked = False


def _int(raw: str | None, default: int) -> int:
    try:
        return int(raw) if raw is not None else default
    except ValueError:
        return default


def _float(raw: str | None, default: float) -> float:
    try:
        return float(raw) if raw is not None else default
    except ValueError:
        return default


def _batch_of(data: bytes | None) -> tuple[Any, list]:
    """(batch header, records) of a Kafka batch unit; (None, []) for anything else."""
    if data is None or not _I32.unpack_from(data, 36)[0] & INNER_BATCH_FLAG:
        return None, []
    h = UnitHeader(data, 0)
    try:
        return record_batch.decode_batch(memoryview(data)[h.body_pos:h.body_pos + h.body_len])
    except ValueError:
        return None, []


def _records_of(data: bytes | None) -> dict[int, tuple[Any, Any]]:
    """offset -> (batch header, record) of a Kafka batch unit's keyed data records."""
    if data is None or not _I32.unpack_from(data, 36)[0] & INNER_BATCH_FLAG:
        return {}
    h = UnitHeader(data, 0)
    try:
        header, records = record_batch.decode_batch(memoryview(data)[h.body_pos:h.body_pos + h.body_len])
    except ValueError:
        return {}
    if header.is_control:
        return {}
    return {header.base_offset + r.offset_delta: (header, r) for r in records if r.key is not None}


def _tail_batch(data: bytes | None, offset: int) -> bytes | None:
    """A one-record batch holding the record at ``offset`` of a Kafka batch unit: a control batch
    (a transaction marker, always one record) as it is, a data record rebuilt like a copy."""
    if data is None or not _I32.unpack_from(data, 36)[0] & INNER_BATCH_FLAG:
        return None
    h = UnitHeader(data, 0)
    body = bytes(memoryview(data)[h.body_pos:h.body_pos + h.body_len])
    try:
        header, records = record_batch.decode_batch(body)
    except ValueError:
        return None
    if header.is_control:
        return body if header.base_offset == offset and header.last_offset_delta == 0 else None
    for r in records:
        if header.base_offset + r.offset_delta == offset:
            ts = header.max_timestamp if header.timestamp_type else header.base_timestamp + r.timestamp_delta
            return record_batch.build_batch([record_batch.Record(0, 0, r.key, r.value, r.headers)],
                                            base_offset=offset, timestamp_type=header.timestamp_type,
                                            base_timestamp=ts, max_timestamp=ts)
    return None
