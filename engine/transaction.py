"""Transactional (half) messages: prepare, commit / rollback, and the check-back scan.

Owns RocketMQ's two system topics and the progress through them:

- ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0 holds prepared (half) messages. ``prepare`` stores the
  producer's message there with its real topic and queue in the REAL_TOPIC / REAL_QID
  properties and the transaction bits of its sysflag cleared, so no consumer of the real topic
  can see it.
- ``RMQ_SYS_TRANS_OP_HALF_TOPIC`` queue 0 holds one op message per resolved half message: body =
  the half message's queue offset as decimal text, tag ``d`` (RocketMQ's REMOVETAG), property
  ``TRAN_UNIQ`` = the half message's unique key.
- Progress: the next half offset still to examine and the first op offset still needed, kept
  as consumer offsets of the system group ``CID_RMQ_SYS_TRANS`` on those two topics (so they
  persist with every other offset).

Invariants:
- A half message is resolved at most once: ``end`` and the check scan hold one lock, and the
  scan moves the half progress one message at a time under it.
- Commit writes the message to its real topic / queue (sysflag TRANSACTION_COMMIT_TYPE,
  preparedTransactionOffset = the half message's commitlog offset, REAL_* removed) before it
  writes the op message, so a crash in between re-checks rather than loses the message.
- Every half message has at most one pending instance at or after the progress offset (the
  original, or its newest copy), and an op message always names that instance; a late answer
  about an older instance is applied to the pending copy.
- Check-back renews a due half message: a copy with TRANSACTION_CHECK_TIMES + 1 is appended to
  the half queue and the original is passed; the copy is what the producer is asked about. A
  half message already checked ``check_max`` times is rolled back (op message written) and
  kept in ``TRANS_CHECK_MAX_TIME_TOPIC`` for inspection, as RocketMQ does.
- Everything is derived from the two topics plus the progress offsets: after a restart the op
  queue is re-read from its progress offset and the half queue from its own, so an unresolved
  transaction is checked again and a resolved one never is.

The service is protocol-neutral: ``check`` returns the messages due for a check-back and the
caller (a gateway) asks a producer; answers come back through ``end``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import structlog

from .message import (
    Message, MessageExt, PROPERTY_CHECK_IMMUNITY_SECONDS, PROPERTY_CHECK_TIMES, PROPERTY_KEYS, PROPERTY_OP_UNIQ,
    PROPERTY_PRODUCER_GROUP, PROPERTY_REAL_QUEUE_ID, PROPERTY_REAL_TOPIC, PROPERTY_TAGS, PROPERTY_TRANSACTION_ID,
    PROPERTY_TRANSACTION_PREPARED, TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE, decode_message,
)

log = structlog.get_logger("rockafka.engine.transaction")

HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
OP_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
SYSTEM_GROUP = "CID_RMQ_SYS_TRANS"
REMOVE_TAG = "d"
_TXN_MASK = 0xC
_SCAN_LIMIT = 10_000  # half messages examined per check round; the rest wait for the next round


class TransactionError(Exception):
    """An END_TRANSACTION-style request that cannot be applied; the message says why."""


@dataclass
class CheckRequest:
    """A half message due for a check-back: ask a live producer of ``producer_group``."""

    producer_group: str
    half: MessageExt          # the renewed copy in the half topic (its offsets go in the request)
    real_topic: str
    real_queue_id: int

    @property
    def transaction_id(self) -> str:
        return self.half.properties.get(PROPERTY_TRANSACTION_ID) or self.half.uniq_key or ""


@dataclass
class EndResult:
    committed: bool
    put: object | None        # the real topic's PutMessageResult on commit, else None
    already_resolved: bool = False


class TransactionalMessageService:
    def __init__(self, store) -> None:
        self.store = store
        # gateways that can reach producers register here; a check-back goes to the first
        # that delivers it (``ask``), so one check loop serves every protocol's producers
        self.check_handlers: list = []
        self._lock = threading.RLock()
        self._loaded = False
        self._progress = 0                       # next half offset the scan examines
        self._removed: dict[int, int] = {}       # half offset -> op offset, for half offsets >= progress
        self._copies: dict[str, int] = {}        # unique key -> offset of its newest pending copy

    # -- state ---------------------------------------------------------------------------------
    def invalidate(self, *_: object) -> None:
        """The store changed role (failover): derive the state again from the log before the
        next check, since what a former master or a slave held in memory may be stale."""
        with self._lock:
            self._loaded = False
            self._progress = 0
            self._removed = {}
            self._copies = {}

    def _load(self) -> None:
        """Derive the in-memory state from the op queue and the half queue (restart-safe)."""
        if self._loaded:
            return
        offs = self.store.consumer_offsets
        self._progress = max(offs.query(SYSTEM_GROUP, HALF_TOPIC, 0), self.store.get_min_offset_in_queue(HALF_TOPIC, 0), 0)
        op_from = max(offs.query(SYSTEM_GROUP, OP_TOPIC, 0), self.store.get_min_offset_in_queue(OP_TOPIC, 0), 0)
        for offset, msg in self._read(HALF_TOPIC, self._progress):
            if msg.uniq_key:
                self._copies[msg.uniq_key] = offset
        for op_offset, msg in self._read(OP_TOPIC, op_from):
            self._note_op(op_offset, msg)
        self._loaded = True
        log.info("transaction_state_loaded", half_progress=self._progress, op_from=op_from,
                 pending_ops=len(self._removed), pending_copies=len(self._copies))

    def _note_op(self, op_offset: int, msg: MessageExt) -> None:
        try:
            half_offset = int(msg.body.decode("ascii"))
        except (UnicodeDecodeError, ValueError):
            log.warning("transaction_op_unreadable", op_offset=op_offset)
            return
        if half_offset >= self._progress:
            self._removed[half_offset] = op_offset
            uniq = msg.properties.get(PROPERTY_OP_UNIQ)
            if uniq and self._copies.get(uniq) == half_offset:
                self._copies.pop(uniq, None)

    def _read(self, topic: str, start: int):
        """(queue offset, decoded message) for every message of ``topic`` queue 0 from ``start``."""
        offset = start
        end = self.store.get_max_offset_in_queue(topic, 0)
        while offset < end:
            res = self.store.get_message(SYSTEM_GROUP, topic, 0, offset, 256)
            if not res.messages:
                if res.next_begin_offset > offset:
                    offset = res.next_begin_offset
                    continue
                break
            for raw, ref in zip(res.messages, res.units):
                yield ref.queue_offset, decode_message(raw)
            offset = res.next_begin_offset

    def _commit_progress(self) -> None:
        offs = self.store.consumer_offsets
        offs.commit(SYSTEM_GROUP, HALF_TOPIC, 0, self._progress)
        self._removed = {h: o for h, o in self._removed.items() if h >= self._progress}
        op_progress = min(self._removed.values(), default=self.store.get_max_offset_in_queue(OP_TOPIC, 0))
        offs.commit(SYSTEM_GROUP, OP_TOPIC, 0, op_progress)

    # -- prepare -------------------------------------------------------------------------------
    def prepare(self, msg: Message):
        """Store ``msg`` as a half message; returns the store's PutMessageResult."""
        props = msg.all_properties()
        props[PROPERTY_REAL_TOPIC] = msg.topic
        props[PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
        props.setdefault(PROPERTY_TRANSACTION_PREPARED, "true")
        half = Message(topic=HALF_TOPIC, body=msg.body, tags=props.pop(PROPERTY_TAGS, None),
                       keys=None, properties=props, queue_id=0, flag=msg.flag,
                       sys_flag=msg.sys_flag & ~_TXN_MASK, born_timestamp=msg.born_timestamp, born_host=msg.born_host,
                       store_host=msg.store_host, reconsume_times=msg.reconsume_times)
        with self._lock:
            self._load()
            return self.store.put_message(half)

    # -- end -----------------------------------------------------------------------------------
    def end(self, commit_log_offset: int, queue_offset: int, producer_group: str | None, commit: bool) -> EndResult:
        """Commit or roll back the half message at ``commit_log_offset`` / ``queue_offset``.

        Raises ``TransactionError`` when no such half message exists or it belongs to another
        producer group."""
        with self._lock:
            self._load()
            half = self.store.look_message_by_offset(commit_log_offset)
            if half is None or half.topic != HALF_TOPIC:
                raise TransactionError(f"no prepared (half) message at commitlog offset {commit_log_offset}")
            if half.queue_offset != queue_offset:
                raise TransactionError(f"the half message at commitlog offset {commit_log_offset} has queue offset "
                                       f"{half.queue_offset}, not tranStateTableOffset {queue_offset}")
            group = half.properties.get(PROPERTY_PRODUCER_GROUP)
            if producer_group and group and group != producer_group:
                raise TransactionError(f"the half message belongs to producer group {group}, not {producer_group}")
            uniq = half.uniq_key
            target = queue_offset
            if queue_offset < self._progress:
                # checked meanwhile: the pending copy is what this answer resolves
                copy = self._copies.get(uniq or "")
                if copy is None or copy < self._progress:
                    return EndResult(commit, None, already_resolved=True)
                target = copy
            if target in self._removed:
                return EndResult(commit, None, already_resolved=True)
            put = None
            if commit:
                put = self.store.put_message(self._real_message(half))
                if not put.ok:
                    return EndResult(True, put)
            self._write_op(target, uniq)
            log.info("transaction_ended", committed=commit, half_offset=target, producer_group=group,
                     real_topic=half.properties.get(PROPERTY_REAL_TOPIC))
            return EndResult(commit, put)

    def _real_message(self, half: MessageExt) -> Message:
        props = dict(half.properties)
        topic = props.pop(PROPERTY_REAL_TOPIC, None) or half.topic
        queue_id = int(props.pop(PROPERTY_REAL_QUEUE_ID, "0") or 0)
        for k in (PROPERTY_CHECK_TIMES, PROPERTY_KEYS):
            props.pop(k, None)
        keys = half.keys
        return Message(topic=topic, body=half.body, tags=props.pop(PROPERTY_TAGS, None), keys=keys or None,
                       properties=props, queue_id=queue_id, flag=half.flag,
                       sys_flag=(half.sys_flag & ~_TXN_MASK) | TRANSACTION_COMMIT_TYPE,
                       born_timestamp=half.born_timestamp, born_host=half.born_host, store_host=half.store_host,
                       reconsume_times=half.reconsume_times, prepared_transaction_offset=half.commitlog_offset)

    def _write_op(self, half_offset: int, uniq: str | None) -> None:
        props = {PROPERTY_OP_UNIQ: uniq} if uniq else None
        res = self.store.put_message(Message(topic=OP_TOPIC, body=str(half_offset).encode(), tags=REMOVE_TAG,
                                             properties=props, queue_id=0))
        if res.ok:
            self._removed[half_offset] = res.queue_offset
            if uniq:
                self._copies.pop(uniq, None)

    # -- check-back ----------------------------------------------------------------------------
    def check(self, timeout_ms: int, check_max: int, now_ms: int | None = None) -> list[CheckRequest]:
        """One check round over the half queue (from the progress offset to the end as it was
        when the round started). Returns the messages to ask producers about."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        out: list[CheckRequest] = []
        with self._lock:
            self._load()
            end = self.store.get_max_offset_in_queue(HALF_TOPIC, 0)
            examined = 0
            for offset, half in self._read(HALF_TOPIC, self._progress):
                if offset >= end or examined >= _SCAN_LIMIT:
                    break
                examined += 1
                if offset in self._removed:
                    self._progress = offset + 1
                    continue
                immunity = timeout_ms
                raw_immunity = half.properties.get(PROPERTY_CHECK_IMMUNITY_SECONDS)
                if raw_immunity and raw_immunity.lstrip("-").isdigit() and int(raw_immunity) > 0:
                    immunity = int(raw_immunity) * 1000
                if now - half.born_timestamp < immunity:
                    break  # later half messages are younger
                times = int(half.properties.get(PROPERTY_CHECK_TIMES, "0") or 0)
                if times >= check_max:
                    self._discard(half, times)
                    self._progress = offset + 1
                    continue
                copy = self._renew(half, times + 1)
                if copy is None:
                    break  # could not append the copy; try again next round
                self._progress = offset + 1
                out.append(CheckRequest(half.properties.get(PROPERTY_PRODUCER_GROUP, ""), copy,
                                        half.properties.get(PROPERTY_REAL_TOPIC, ""),
                                        int(half.properties.get(PROPERTY_REAL_QUEUE_ID, "0") or 0)))
            self._commit_progress()
        return out

    def _renew(self, half: MessageExt, times: int) -> MessageExt | None:
        props = dict(half.properties)
        props[PROPERTY_CHECK_TIMES] = str(times)
        msg = Message(topic=HALF_TOPIC, body=half.body, tags=props.pop(PROPERTY_TAGS, None), properties=props,
                      queue_id=0, flag=half.flag, sys_flag=half.sys_flag, born_timestamp=half.born_timestamp,
                      born_host=half.born_host, store_host=half.store_host, reconsume_times=half.reconsume_times)
        res = self.store.put_message(msg)
        if not res.ok:
            log.warning("transaction_renew_failed", status=str(res.status), error=res.error)
            return None
        if half.uniq_key:
            self._copies[half.uniq_key] = res.queue_offset
        return self.store.look_message_by_offset(res.commitlog_offset)

    def _discard(self, half: MessageExt, times: int) -> None:
        props = dict(half.properties)
        self.store.put_message(Message(topic=CHECK_MAX_TIME_TOPIC, body=half.body, tags=props.pop(PROPERTY_TAGS, None),
                                       properties=props, queue_id=0, flag=half.flag,
                                       sys_flag=(half.sys_flag & ~_TXN_MASK) | TRANSACTION_ROLLBACK_TYPE,
                                       born_timestamp=half.born_timestamp))
        self._write_op(half.queue_offset, half.uniq_key)
        log.warning("transaction_check_exhausted_rolled_back", half_offset=half.queue_offset, check_times=times,
                    producer_group=half.properties.get(PROPERTY_PRODUCER_GROUP),
                    real_topic=half.properties.get(PROPERTY_REAL_TOPIC), uniq_key=half.uniq_key)

    def ask(self, req: CheckRequest) -> bool:
        """Hand ``req`` to the first registered check handler that delivers it."""
        for handler in list(self.check_handlers):
            try:
                if handler(req):
                    return True
            except Exception:
                log.exception("transaction_check_handler_failed")
        return False

    # -- introspection -------------------------------------------------------------------------
    def pending_count(self) -> int:
        with self._lock:
            self._load()
            end = self.store.get_max_offset_in_queue(HALF_TOPIC, 0)
            return sum(1 for off, h in self._read(HALF_TOPIC, self._progress)
                       if off < end and off not in self._removed)


_instances_lock = threading.Lock()


def for_store(store) -> TransactionalMessageService:
    """The store's one transaction service: every gateway shares it (and its lock)."""
    with _instances_lock:
        svc = getattr(store, "_transaction_service", None)
        if svc is None:
            svc = store._transaction_service = TransactionalMessageService(store)
            listeners = getattr(store, "role_listeners", None)
            if listeners is not None:
                listeners.append(svc.invalidate)
        return svc


__all__ = ["for_store", "TransactionalMessageService", "TransactionError", "CheckRequest", "EndResult", "HALF_TOPIC", "OP_TOPIC",
           "SYSTEM_GROUP", "PROPERTY_PRODUCER_GROUP", "PROPERTY_CHECK_TIMES", "PROPERTY_TRANSACTION_ID"]
