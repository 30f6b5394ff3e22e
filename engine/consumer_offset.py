"""Committed consumer offsets of both protocols (RocketMQ's ``ConsumerOffsetManager``), kept as
records of the internal topic ``__consumer_offsets`` in the commitlog.

One table serves Kafka groups and RocketMQ groups (a Kafka partition is a queue id); each entry
holds the offset, the leader epoch and metadata the client committed, the commit time and where
its record is in the log. A group's records (its offsets and the Kafka coordinator's group
metadata) live in partition ``abs(hash(group)) % offsets_topic_num_partitions``; formats are
Kafka's (OffsetCommitKey v1 / OffsetCommitValue v3, GroupMetadataKey v2 with an opaque value;
``docs/design/coordinator-state.md``), so Kafka tools can read them.

Writers, all ordered per partition by that partition's lock (append, then apply to memory, in
the order the records are in the log):
- ``commit_durable`` (Kafka OffsetCommit), ``delete*`` (tombstones), ``store_group_metadata``,
  ``stage_transactional`` (TxnOffsetCommit: transactional records, pending until)
  ``complete_transaction`` (the COMMIT/ABORT marker the transaction coordinator writes) — each
  returns once its record is in the log, durable as flushDiskType promises, and only then
  changes what readers see;
- ``commit`` (RocketMQ consumers, the engine's own progress): memory at once, appended to the
  log by ``flush_dirty`` every ``flushConsumerOffsetInterval`` (5 s) and at shutdown, as
  RocketMQ persists consume progress: a crash loses at most that interval of progress (messages
  are consumed again, none is lost).

Checkpoint: ``config/consumerOffset.json`` (format 2; RocketMQ's ``offsetTable`` kept for
readers of the old file) holds the whole table and, per partition, the queue offset it covers;
written every ``state_checkpoint_interval`` when changed and at shutdown, under all partition
locks so it never runs ahead of the log. At start (``start``) it is loaded and every partition
replayed from there; a format-1 file (no positions) is loaded as the starting state and its
entries written to the log at the first flush. The store's retention keeps every segment a
replay from the checkpoint still reads.
"""

from __future__ import annotations

import base64
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import structlog

from .config_manager import DataVersion
from .state_log import CONSUMER_OFFSETS, StateLog, StateRecord, load_checkpoint, partition_for, positions_from, save_checkpoint

log = structlog.get_logger("rockafka.engine.consumer_offset")

TOPIC_GROUP_SEPARATOR = "@"
FILE_NAME = "consumerOffset.json"
FORMAT_VERSION = 2
OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
# Key versions from here on are group-keyed records of other owners (version(2) + group(str),
# value opaque): the Kafka gateway's consumer/share group state and group configs. Kafka's own
# key versions stay below (its KIP-848 records, which Rockafka does not write, are 3-16).
GROUP_RECORD_MIN_KIND = 1000
# Group names beginning with a NUL are reserved for operator tables kept as group records (the
# Kafka gateway's dynamic broker configs and client quotas): no client group may use one, and
# deleting such a "group" never tombstones a group record.
RESERVED_GROUP_PREFIX = "\x00"


def is_reserved_group(group: str) -> bool:
    return group.startswith(RESERVED_GROUP_PREFIX)
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_VALUE_V3_HEAD = struct.Struct(">hqi")    # version, offset, leader epoch
_I64 = struct.Struct(">q")

OffsetKey = tuple[str, str, int]           # group, topic, queue id


@dataclass(slots=True)
class OffsetEntry:
    offset: int
    leader_epoch: int = -1
    metadata: str | None = None
    commit_timestamp: int = -1
    log_offset: int = -1                   # its record in __consumer_offsets; -1: not in the log yet


# -- record codecs (Kafka's formats) -------------------------------------------------------------

def _str(s: str) -> bytes:
    b = s.encode("utf-8")
    return _I16.pack(len(b)) + b


def _read_str(buf: bytes, pos: int) -> tuple[str | None, int]:
    (n,) = _I16.unpack_from(buf, pos)
    pos += 2
    if n < 0:
        return None, pos
    if pos + n > len(buf):
        raise ValueError("string runs past the record")
    return buf[pos:pos + n].decode("utf-8"), pos + n


# Kafka's record formats hold a name as int16 length + UTF-8 and a partition as int32: the
# largest values a key can carry. Requests are checked against these where they are decoded
# (``key_problem`` below); the writers check again so a caller that forgot cannot put an entry
# in the table that no record can hold (one such entry would fail every later flush).
MAX_NAME_BYTES = 32767
MIN_QUEUE_ID, MAX_QUEUE_ID = -2**31, 2**31 - 1


class OffsetKeyError(ValueError):
    """A group, topic or queue id that Kafka's record formats cannot hold."""


def name_problem(what: str, name: Any) -> str | None:
    """Why ``name`` cannot be a key's string, or None."""
    if not isinstance(name, str):
        return f"the {what} is missing"
    try:
        n = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return f"the {what} is not valid UTF-8"
    if n > MAX_NAME_BYTES:
        return f"the {what} is {n} bytes long, more than {MAX_NAME_BYTES}"
    return None


def key_problem(group: Any, topic: Any, queue_id: Any) -> str | None:
    """Why (group, topic, queue id) cannot be an offset record's key, or None."""
    problem = name_problem("group name", group) or name_problem("topic name", topic)
    if problem is None and (not isinstance(queue_id, int) or not MIN_QUEUE_ID <= queue_id <= MAX_QUEUE_ID):
        problem = f"the queue id {queue_id!r} is outside a 32-bit integer"
    return problem


def check_key(group: Any, topic: Any, queue_id: Any) -> None:
    problem = key_problem(group, topic, queue_id)
    if problem is not None:
        raise OffsetKeyError(problem)


def offset_key(group: str, topic: str, queue_id: int) -> bytes:
    check_key(group, topic, queue_id)
    return _I16.pack(OFFSET_KEY_VERSION) + _str(group) + _str(topic) + _I32.pack(queue_id)


def group_key(group: str, kind: int = GROUP_KEY_VERSION) -> bytes:
    problem = name_problem("group name", group)
    if problem is not None:
        raise OffsetKeyError(problem)
    return _I16.pack(kind) + _str(group)


def offset_value(e: OffsetEntry) -> bytes:
    return (_VALUE_V3_HEAD.pack(OFFSET_VALUE_VERSION, e.offset, e.leader_epoch) + _str(e.metadata or "")
            + _I64.pack(e.commit_timestamp))


def parse_key(key: bytes) -> tuple | None:
    """("offset", group, topic, queue) / ("group", group) / ("record", kind, group) / None for a
    key of another kind."""
    (version,) = _I16.unpack_from(key, 0)
    if version in (0, 1):
        group, pos = _read_str(key, 2)
        topic, pos = _read_str(key, pos)
        (queue_id,) = _I32.unpack_from(key, pos)
        return ("offset", group, topic, queue_id)
    if version == GROUP_KEY_VERSION:
        return ("group", _read_str(key, 2)[0])
    if version >= GROUP_RECORD_MIN_KIND:
        return ("record", version, _read_str(key, 2)[0])
    return None


def parse_offset_value(value: bytes) -> OffsetEntry:
    """OffsetCommitValue versions 0-3 (v1's expire timestamp is read past)."""
    (version,) = _I16.unpack_from(value, 0)
    (offset,) = _I64.unpack_from(value, 2)
    pos = 10
    epoch = -1
    if version >= 3:
        (epoch,) = _I32.unpack_from(value, pos)
        pos += 4
    metadata, pos = _read_str(value, pos)
    (ts,) = _I64.unpack_from(value, pos)
    return OffsetEntry(offset, epoch, metadata or None, ts)


# -- the table -------------------------------------------------------------------------------------

class ConsumerOffsetManager:
    file_name = FILE_NAME

    def __init__(self, config_dir: str | Path, partitions: int = 50):
        self.path = Path(config_dir) / FILE_NAME
        self.lock = threading.RLock()             # guards the tables for readers that iterate
        self.entries: dict[str, dict[int, OffsetEntry]] = {}   # "topic@group" -> queue -> entry
        self._group_meta: dict[str, tuple[bytes, int]] = {}   # group -> (value, log offset)
        self._group_records: dict[int, dict[str, tuple[bytes, int]]] = {}  # kind -> group -> (value, log offset)
        self._pending: dict[tuple[int, int], dict[OffsetKey, OffsetEntry]] = {}  # (partition, pid) -> staged
        self.partitions = partitions
        self._plocks = [threading.Lock() for _ in range(partitions)]
        self._dirty: dict[int, set[OffsetKey]] = {}
        self._changed = False                      # since the last checkpoint
        self._positions: dict[int, int] = {}       # of the checkpoint on disk
        self.data_version = DataVersion()
        self.log: StateLog | None = None
        self._applied: dict[int, int] = {}        # per partition: next queue offset to apply
        self.group_records_version = 0            # bumped by every change of a group record

    # -- keys ------------------------------------------------------------------------------------
    @staticmethod
    def _key(group: str, topic: str) -> str:
        return f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"

    @staticmethod
    def _split(key: str) -> tuple[str, str]:
        topic, _, group = key.rpartition(TOPIC_GROUP_SEPARATOR)
        return topic, group

    def partition_of(self, group: str) -> int:
        return partition_for(group, self.partitions)

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self, store: Any) -> None:
        """Attach to the started store: create ``__consumer_offsets`` if needed, load the
        checkpoint, replay every partition from it, and guard what a replay needs."""
        self.log = StateLog(store, CONSUMER_OFFSETS, self.partitions, compacted=True)
        n = self.log.ensure_topic()
        if n != self.partitions:
            self.partitions = n
            self._plocks = [threading.Lock() for _ in range(n)]
        begin = time.monotonic()
        replayed = 0
        for p in range(self.partitions):
            with self._plocks[p]:
                replayed += self._follow(p, self._positions.get(p, 0))
        store.add_retention_guard(self._needed_commitlog_offset)
        log.info("consumer_offsets_recovered", records_replayed=replayed, groups=len(self.groups()),
                 seconds=round(time.monotonic() - begin, 3))

    def _follow(self, p: int, start: int) -> int:
        """Under the partition's lock: apply its records from queue offset ``start`` on."""
        n = 0
        next_offset = start
        for rec in self.log.read(p, start):
            self._apply_record(p, rec)
            next_offset = rec.offset + 1
            n += 1
        self._applied[p] = max(next_offset, self._applied.get(p, 0))
        return n

    def catch_up(self) -> int:
        """A slave: apply the records replication added since the last call (the table follows
        the master's log; an offset a consumer committed to this slave alone while the master
        was away stays until a record of the master's for the same key arrives)."""
        if self.log is None:
            return 0
        n = 0
        for p in range(self.partitions):
            with self._plocks[p]:
                if self.log.end_offset(p) > self._applied.get(p, 0):
                    n += self._follow(p, self._applied.get(p, 0))
        if n:
            with self.lock:
                self._changed = True
        return n

    def rebuild(self) -> None:
        """The log was cut (a slave truncating to its master): the table as the remaining
        records say, from the start of every partition, keeping offsets not yet in the log."""
        if self.log is None:
            return
        with self.lock:
            kept = [(g, t, q, e) for p, keys in self._dirty.items() for (g, t, q) in keys
                    for e in [self.entries.get(self._key(g, t), {}).get(q)] if e is not None]
            self.entries, self._group_meta, self._pending, self._applied = {}, {}, {}, {}
            self._group_records = {}
            self.group_records_version += 1
        for p in range(self.partitions):
            with self._plocks[p]:
                self._follow(p, 0)
        with self.lock:
            for g, t, q, e in kept:
                self.entries.setdefault(self._key(g, t), {})[q] = e
            self._changed = True

    def load(self) -> None:
        doc = load_checkpoint(self.path)
        if doc is None:
            return
        with self.lock:
            self._positions = positions_from(doc)
            self.data_version.load(doc.get("dataVersion"))
            if doc.get("version") == FORMAT_VERSION:
                self.entries = {k: {int(q): OffsetEntry(int(o), int(e), m, int(ts), int(lo))
                                    for q, (o, e, m, ts, lo) in v.items()}
                                for k, v in (doc.get("entries") or {}).items()}
                self._group_meta = {g: (base64.b64decode(v), int(lo)) for g, (v, lo) in
                                    (doc.get("groupMetadata") or {}).items()}
                self._group_records = {int(kind): {g: (base64.b64decode(v), int(lo)) for g, (v, lo) in groups.items()}
                                       for kind, groups in (doc.get("groupRecords") or {}).items()}
                self.group_records_version += 1
                for pid, staged in (doc.get("pending") or {}).items():
                    for g, t, q, o, e, m, ts, lo in staged:
                        part = self.partition_of(g)
                        self._pending.setdefault((part, int(pid)), {})[(g, t, int(q))] = OffsetEntry(
                            int(o), int(e), m, int(ts), int(lo))
            else:  # RocketMQ's file, written before offsets were records: the starting state
                metadata = doc.get("metadataTable") or {}
                for k, queues in (doc.get("offsetTable") or {}).items():
                    topic, group = self._split(k)
                    for q, o in queues.items():
                        meta = (metadata.get(k) or {}).get(str(q))
                        self.entries.setdefault(k, {})[int(q)] = OffsetEntry(int(o), -1, meta)
                        self._dirty.setdefault(self.partition_of(group), set()).add((group, topic, int(q)))

    def shutdown(self) -> None:
        """While the store still takes puts: flush what RocketMQ consumers committed."""
        self.flush_dirty()

    # -- reads -----------------------------------------------------------------------------------
    def query(self, group: str, topic: str, queue_id: int) -> int:
        e = self.entries.get(self._key(group, topic), {}).get(int(queue_id))
        return -1 if e is None else e.offset

    def query_entry(self, group: str, topic: str, queue_id: int) -> OffsetEntry | None:
        return self.entries.get(self._key(group, topic), {}).get(int(queue_id))

    def query_metadata(self, group: str, topic: str, queue_id: int) -> str | None:
        e = self.query_entry(group, topic, queue_id)
        return None if e is None else e.metadata

    def offsets_of(self, group: str) -> dict[tuple[str, int], int]:
        out: dict[tuple[str, int], int] = {}
        with self.lock:
            for key, queues in self.entries.items():
                topic, g = self._split(key)
                if g == group:
                    for qid, e in queues.items():
                        out[(topic, qid)] = e.offset
        return out

    def groups(self) -> set[str]:
        with self.lock:
            return {self._split(k)[1] for k, v in self.entries.items() if v}

    def groups_of_topic(self, topic: str) -> set[str]:
        with self.lock:
            return {g for k, v in self.entries.items() if v for t, g in [self._split(k)] if t == topic}

    def has_pending(self, group: str, topic: str, queue_id: int) -> bool:
        """A transaction staged an offset for this partition and has not ended yet."""
        p = self.partition_of(group)
        with self.lock:
            return any(pp == p and (group, topic, queue_id) in staged for (pp, _pid), staged in self._pending.items())

    def group_metadata(self) -> dict[str, bytes]:
        with self.lock:
            return {g: v for g, (v, _lo) in self._group_meta.items()}

    def group_records(self, kind: int) -> dict[str, bytes]:
        """The latest record of ``kind`` per group (see ``store_group_record``)."""
        with self.lock:
            return {g: v for g, (v, _lo) in self._group_records.get(kind, {}).items()}

    # -- writes: RocketMQ consumers (memory now, the log at the next flush) -----------------------
    def commit(self, group: str, topic: str, queue_id: int, offset: int, metadata: str | None = None) -> None:
        """Raises ``OffsetKeyError`` for a key no record can hold (nothing is changed then)."""
        check_key(group, topic, int(queue_id))
        entry = OffsetEntry(int(offset), -1, metadata, int(time.time() * 1000))
        with self.lock:
            self.entries.setdefault(self._key(group, topic), {})[int(queue_id)] = entry
            self._dirty.setdefault(self.partition_of(group), set()).add((group, topic, int(queue_id)))
            self._changed = True

    def flush_dirty(self) -> None:
        """Append the entries ``commit`` changed since the last flush, one batch per partition.
        A slave writes nothing (its log is its master's): what consumers committed to it stays
        in memory, and in the checkpoint, until its master's records for those keys arrive."""
        if self.log is None or self.log.store.is_slave:
            return
        for p in list(self._dirty):
            with self._plocks[p]:
                with self.lock:
                    keys = self._dirty.pop(p, set())
                    current = [(k, self.entries.get(self._key(k[0], k[1]), {}).get(k[2])) for k in sorted(keys)]
                current = [(k, e) for k, e in current if e is not None and e.log_offset < 0]
                if not current:
                    continue
                records, kept = [], []
                for k, e in current:
                    try:  # one entry no record can hold must not stop the others from being saved
                        records.append((offset_key(*k), offset_value(e)))
                        kept.append((k, e))
                    except (OffsetKeyError, struct.error, UnicodeEncodeError) as exc:
                        log.error("consumer_offset_not_storable", partition=p, group=str(k[0])[:200],
                                  topic=str(k[1])[:200], queue_id=k[2], error=str(exc))
                current = kept
                if not current:
                    continue
                res = self.log.append(p, records)
                if not res.stored:
                    log.warning("consumer_offsets_not_flushed", partition=p, entries=len(current),
                                status=res.status.name, error=res.error)
                    with self.lock:
                        self._dirty.setdefault(p, set()).update(k for k, _e in current)
                    continue
                with self.lock:
                    for i, (k, e) in enumerate(current):
                        now = self.entries.get(self._key(k[0], k[1]), {}).get(k[2])
                        if now is e:
                            e.log_offset = res.queue_offset + i

    # -- writes: in the log before they take effect ----------------------------------------------
    def commit_durable(self, group: str, offsets: dict[tuple[str, int], OffsetEntry]) -> Any:
        """Kafka OffsetCommit: one record per partition, then the table; the PutMessageResult."""
        p = self.partition_of(group)
        items = sorted(offsets.items())
        with self._plocks[p]:
            res = self._log().append(p, [(offset_key(group, t, q), offset_value(e)) for (t, q), e in items])
            if res.stored:
                with self.lock:
                    for i, ((t, q), e) in enumerate(items):
                        e.log_offset = res.queue_offset + i
                        self.entries.setdefault(self._key(group, t), {})[q] = e
                        self._dirty.get(p, set()).discard((group, t, q))
                    self._changed = True
        return res

    def stage_transactional(self, group: str, producer_id: int, producer_epoch: int,
                            offsets: dict[tuple[str, int], OffsetEntry]) -> Any:
        """TxnOffsetCommit: transactional records of the producer; they take effect when the
        COMMIT marker of its transaction reaches the group's partition."""
        p = self.partition_of(group)
        items = sorted(offsets.items())
        with self._plocks[p]:
            res = self._log().append(p, [(offset_key(group, t, q), offset_value(e)) for (t, q), e in items],
                                     producer_id=producer_id, producer_epoch=producer_epoch, transactional=True)
            if res.stored:
                with self.lock:
                    staged = self._pending.setdefault((p, producer_id), {})
                    for i, ((t, q), e) in enumerate(items):
                        e.log_offset = res.queue_offset + i
                        staged[(group, t, q)] = e
                    self._changed = True
        return res

    def complete_transaction(self, partition: int, producer_id: int, producer_epoch: int, commit: bool) -> Any:
        """Write the transaction's marker into ``partition`` and apply its staged offsets
        (COMMIT) or drop them (ABORT). Writing a marker twice is harmless."""
        with self._plocks[partition]:
            res = self._log().append_marker(partition, producer_id, producer_epoch, commit)
            if res.stored:
                with self.lock:
                    self._resolve(partition, producer_id, commit)
        return res

    def delete(self, group: str, topic: str, queue_id: int) -> Any:
        return self._tombstones(self.partition_of(group), [(group, topic, int(queue_id))])

    def delete_group(self, group: str) -> Any:
        """Tombstones for the group's offsets and its group metadata."""
        with self.lock:
            keys = [(group, t, q) for k, queues in self.entries.items() for t, g in [self._split(k)] if g == group
                    for q in queues]
        return self._tombstones(self.partition_of(group), keys, group=group)

    def delete_topic(self, topic: str) -> None:
        with self.lock:
            by_part: dict[int, list[OffsetKey]] = {}
            for k, queues in self.entries.items():
                t, g = self._split(k)
                if t == topic:
                    by_part.setdefault(self.partition_of(g), []).extend((g, t, q) for q in queues)
        for p, keys in by_part.items():
            self._tombstones(p, keys)

    def store_group_metadata(self, group: str, value: bytes | None) -> Any:
        """The Kafka coordinator's record of a group (opaque here); None deletes it."""
        p = self.partition_of(group)
        with self._plocks[p]:
            res = self._log().append(p, [(group_key(group), value)])
            if res.stored:
                with self.lock:
                    if value is None:
                        self._group_meta.pop(group, None)
                    else:
                        self._group_meta[group] = (bytes(value), res.queue_offset)
                    self._changed = True
        return res

    def store_group_record(self, group: str, kind: int, value: bytes | None) -> Any:
        """A group-keyed record of another owner (``kind`` >= GROUP_RECORD_MIN_KIND, value
        opaque here), stored before it takes effect; None deletes it. The latest value per
        (kind, group) is kept, checkpointed and replayed like group metadata."""
        if kind < GROUP_RECORD_MIN_KIND:
            raise ValueError(f"group record kind {kind} is below {GROUP_RECORD_MIN_KIND}")
        p = self.partition_of(group)
        with self._plocks[p]:
            res = self._log().append(p, [(group_key(group, kind), value)])
            if res.stored:
                with self.lock:
                    self._set_group_record(kind, group, None if value is None else bytes(value), res.queue_offset)
                    self._changed = True
        return res

    def _set_group_record(self, kind: int, group: str, value: bytes | None, log_offset: int) -> None:
        self.group_records_version += 1    # owners that cache a kind re-read it when this moves
        if value is None:
            table = self._group_records.get(kind)
            if table is not None:
                table.pop(group, None)
        else:
            self._group_records.setdefault(kind, {})[group] = (value, log_offset)

    def _tombstones(self, p: int, keys: list[OffsetKey], group: str | None = None) -> Any:
        records: list[tuple[bytes, bytes | None]] = [(offset_key(*k), None) for k in keys
                                                      if key_problem(*k) is None]
        if group is not None and name_problem("group name", group) is not None:
            group = None  # no record of it can exist
        if group is not None and group in self._group_meta:
            records.append((group_key(group), None))
        if group is not None and not is_reserved_group(group):
            records.extend((group_key(group, kind), None) for kind, table in sorted(self._group_records.items())
                           if group in table)
        if self.log is None or not records:
            with self.lock:
                for g, t, q in keys:
                    self._drop(g, t, q)
            return None
        with self._plocks[p]:
            res = self.log.append(p, records)
            if res.stored:
                with self.lock:
                    for g, t, q in keys:
                        self._drop(g, t, q)
                        self._dirty.get(p, set()).discard((g, t, q))
                    if group is not None:
                        self._group_meta.pop(group, None)
                        if not is_reserved_group(group):
                            for table in self._group_records.values():
                                table.pop(group, None)
                        self.group_records_version += 1
                    self._changed = True
        return res

    def _log(self) -> StateLog:
        if self.log is None:
            raise RuntimeError("consumer offsets are not attached to a started store")
        return self.log

    # -- applying records (live writes above and replay at start) ----------------------------------
    def _drop(self, group: str, topic: str, queue_id: int) -> None:
        key = self._key(group, topic)
        queues = self.entries.get(key)
        if queues is not None:
            queues.pop(queue_id, None)
            if not queues:
                del self.entries[key]

    def _resolve(self, p: int, producer_id: int, commit: bool) -> None:
        staged = self._pending.pop((p, producer_id), None)
        if not staged or not commit:
            return
        for (g, t, q), e in staged.items():
            current = self.entries.get(self._key(g, t), {}).get(q)
            # a plain commit logged after the transactional one wins, as in Kafka
            if current is None or current.log_offset < e.log_offset:
                self.entries.setdefault(self._key(g, t), {})[q] = e
        self._changed = True

    def _apply_record(self, p: int, rec: StateRecord) -> None:
        with self.lock:
            if rec.marker is not None:
                self._resolve(p, rec.producer_id, rec.marker)
                return
            try:
                kind = parse_key(rec.key) if rec.key else None
                if kind is None:
                    return
                if kind[0] == "group":
                    if rec.value is None:
                        self._group_meta.pop(kind[1], None)
                    else:
                        self._group_meta[kind[1]] = (rec.value, rec.offset)
                    return
                if kind[0] == "record":
                    self._set_group_record(kind[1], kind[2], rec.value, rec.offset)
                    return
                _, group, topic, queue_id = kind
                if rec.value is None:
                    self._drop(group, topic, queue_id)
                    return
                e = parse_offset_value(rec.value)
            except (ValueError, struct.error, UnicodeDecodeError) as exc:
                log.error("consumer_offset_record_unreadable", partition=p, offset=rec.offset, error=str(exc))
                return
            e.log_offset = rec.offset
            if rec.transactional:
                self._pending.setdefault((p, rec.producer_id), {})[(group, topic, queue_id)] = e
            else:
                self.entries.setdefault(self._key(group, topic), {})[queue_id] = e

    # -- checkpoint -------------------------------------------------------------------------------
    def checkpoint(self, force: bool = False) -> bool:
        """Write the table and the log positions it covers (when changed); True when written."""
        if self.log is None:
            return False
        for plock in self._plocks:
            plock.acquire()
        try:
            with self.lock:
                if not (self._changed or force):
                    return False
                positions = {p: self.log.end_offset(p) for p in range(self.partitions)}
                doc = self._encode(positions)
                self._changed = False
        finally:
            for plock in self._plocks:
                plock.release()
        save_checkpoint(self.path, doc)
        self._positions = positions
        return True

    def persist(self) -> None:
        """Make everything committed so far durable now (flush, then checkpoint)."""
        self.flush_dirty()
        self.checkpoint(force=True)

    def persist_if_dirty(self) -> None:
        self.flush_dirty()

    def _needed_commitlog_offset(self) -> int | None:
        return self.log.needed_commitlog_offset(self._positions) if self.log is not None else None

    def encode(self, positions: dict[int, int] | None = None) -> dict[str, Any]:
        with self.lock:
            return self._encode(positions if positions is not None else dict(self._positions))

    def _encode(self, positions: dict[int, int]) -> dict[str, Any]:
        pending: dict[str, list] = {}
        for (_p, pid), staged in self._pending.items():
            pending.setdefault(str(pid), []).extend(
                [g, t, q, e.offset, e.leader_epoch, e.metadata, e.commit_timestamp, e.log_offset]
                for (g, t, q), e in staged.items())
        return {
            "version": FORMAT_VERSION,
            "positions": {str(p): o for p, o in positions.items()},
            "offsetTable": {k: {str(q): e.offset for q, e in v.items()} for k, v in self.entries.items() if v},
            "entries": {k: {str(q): [e.offset, e.leader_epoch, e.metadata, e.commit_timestamp, e.log_offset]
                            for q, e in v.items()} for k, v in self.entries.items() if v},
            "groupMetadata": {g: [base64.b64encode(v).decode("ascii"), lo] for g, (v, lo) in self._group_meta.items()},
            "groupRecords": {str(kind): {g: [base64.b64encode(v).decode("ascii"), lo] for g, (v, lo) in table.items()}
                             for kind, table in self._group_records.items() if table},
            "pending": pending,
            "dataVersion": self.data_version.to_json(),
        }

    def pending_producers(self) -> Iterable[tuple[int, int]]:
        """(partition, producer id) of transactions with staged offsets and no marker yet."""
        with self.lock:
            return list(self._pending)
