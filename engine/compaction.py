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
DEFAULT_DELETE_RETENTION_MS = 86_400_000
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def policy_of(attributes: dict[str, str]) -> set[str]:
    return {p.strip() for p in attributes.get(CLEANUP_POLICY, "delete").split(",") if p.strip()}


def is_compacted(attributes: dict[str, str]) -> bool:
    return "compact" in policy_of(attributes)


def is_copy(props: dict[str, str]) -> bool:
    return props.get(COPY_PROPERTY) == "1"


def dispatch_copy(store: Any, h: UnitHeader, offset: int, tags_code: int) -> None:
    """A copy unit found by dispatch (recovery, a slave): repoint its queue unit, nothing else."""
    cq = store.find_consume_queue(h.topic, h.queue_id, create=True)
    cq.overwrite(h.queue_offset, offset, h.total_size, tags_code)


class Compactor:
    def __init__(self, store: Any):
        self.store = store
        self.floors: dict[tuple[str, int], int] = {}  # queue -> lowest commitlog offset of a live uncopied record
        self.copied = 0
        self.dropped_tombstones = 0
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


def _int(raw: str | None, default: int) -> int:
    try:
        return int(raw) if raw is not None else default
    except ValueError:
        return default


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
