"""POP consumption: checkpoints, acks, invisible time, revive, retry, DLQ, orderly POP.

RocketMQ 5's POP model (``PopMessageProcessor``, ``AckMessageProcessor``,
``ChangeInvisibleTimeProcessor``, ``PopReviveService``), protocol-neutral: the remoting
gateway's POP_MESSAGE family and the gRPC gateway's ReceiveMessage / AckMessage /
ChangeInvisibleDuration call it, and so can Kafka share groups. Nothing here knows a wire type.

Owns, per store (``for_store(store)``):
- the **revive log**: topic ``rmq_sys_REVIVE_LOG_<cluster>`` queue 0, written through the store
  like any message. Records (tag = kind, body = compact JSON)::

      ck   {"g","t","q","so","pt","it","os":[offsets],"no":next offset,"o":orderly,"ma":max attempts}
      ack  {"g","t","q","so","pt","os":[offsets],"r":1 when written by revive}

- the in-memory cache of that log: pending checkpoints (CK) with their unacked offsets, and for
  orderly groups the per-queue lock and per-offset attempt counts;
- the revive thread, and the **progress offset**: the revive-log offset of the oldest unfinished
  CK, saved as consumer offset of group ``CID_RMQ_SYS_REVIVE`` on the revive topic. A restart
  replays the revive log from there, so the cache is rebuilt from the log alone.

Invariants (why a crash never loses a popped message):
- a pop writes its CK before it moves the group's consumer offset;
- revive re-puts a message (retry topic or DLQ) before it writes the ``r=1`` ACK that ends it;
- orderly pops never move the consumer offset before the messages are acked (or dead-lettered).
A crash can therefore deliver a message again (at-least-once), never drop it.

Handles: ``startOffset popTime invisibleTime reviveQid topicType brokerName queueId
queueOffset commitLogOffset`` (RocketMQ's ExtraInfoUtil fields + commitlog offset); topicType
``1`` means the group's POP retry topic ``%RETRY%<group>_<topic>``.
"""

from __future__ import annotations

import enum
import json
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import structlog

from .message import (
    INNER_BATCH_FLAG, Message, MessageExt, PROPERTY_DLQ_ORIGIN_MESSAGE_ID, PROPERTY_DLQ_ORIGIN_TOPIC,
    PROPERTY_FIRST_POP_TIME, PROPERTY_KEYS, PROPERTY_ORIGIN_MESSAGE_ID, PROPERTY_POP_CK, PROPERTY_RETRY_TOPIC,
    PROPERTY_SHARE_PARTITION, PROPERTY_TAGS, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, decode_message,
)
from .topic_config import PERM_READ, PERM_WRITE, TopicConfig

log = structlog.get_logger("rockafka.engine.pop")

REVIVE_TOPIC_PREFIX = "rmq_sys_REVIVE_LOG_"
REVIVE_GROUP = "CID_RMQ_SYS_REVIVE"
REVIVE_QUEUE_ID = 0
RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
TOPIC_TYPE_NORMAL = "0"
TOPIC_TYPE_RETRY = "1"
INIT_MODE_MIN = 0  # RocketMQ ConsumeInitMode.MIN: a new group starts at the queue's first message
INIT_MODE_MAX = 1  # MAX: at the end, unless the queue still holds its message 0 (RocketMQ checks the page cache)
_MAX_INVISIBLE_MS = 12 * 3600 * 1000  # RocketMQ's proxy limit on invisible durations


def pop_retry_topic(group: str, topic: str) -> str:
    """RocketMQ's V1 POP retry topic (``KeyBuilder.buildPopRetryTopicV1``)."""
    return f"{RETRY_PREFIX}{group}_{topic}"


class PopError(Exception):
    """A request that cannot be applied; ``code`` is one of the ``AckStatus`` names."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


class AckStatus(enum.Enum):
    OK = "OK"
    NO_SUCH_CHECKPOINT = "NO_SUCH_CHECKPOINT"  # unknown, finished, expired or already revived
    BAD_HANDLE = "BAD_HANDLE"


@dataclass(frozen=True)
class Handle:
    start_offset: int
    pop_time: int
    invisible_ms: int
    revive_qid: int
    topic_type: str
    broker_name: str
    queue_id: int
    queue_offset: int
    commitlog_offset: int = -1

    def encode(self) -> str:
        return (f"{self.start_offset} {self.pop_time} {self.invisible_ms} {self.revive_qid} {self.topic_type} "
                f"{self.broker_name} {self.queue_id} {self.queue_offset} {self.commitlog_offset}")

    @classmethod
    def parse(cls, text: str) -> "Handle":
        parts = (text or "").split(" ")
        if len(parts) < 8:
            raise PopError(AckStatus.BAD_HANDLE.value, f"receipt handle {text!r} has {len(parts)} fields, expected 8 or 9")
        try:
            return cls(int(parts[0]), int(parts[1]), int(parts[2]), int(parts[3]), parts[4], parts[5], int(parts[6]),
                       int(parts[7]), int(parts[8]) if len(parts) > 8 else -1)
        except ValueError:
            raise PopError(AckStatus.BAD_HANDLE.value, f"receipt handle {text!r} is not well formed") from None

    @property
    def revive_at(self) -> int:
        return self.pop_time + self.invisible_ms

    def real_topic(self, group: str, topic: str) -> str:
        return pop_retry_topic(group, topic) if self.topic_type == TOPIC_TYPE_RETRY and not topic.startswith(RETRY_PREFIX) else topic


CkKey = tuple[str, str, int, int, int]  # group, real topic, queue id, start offset, pop time


@dataclass
class Checkpoint:
    group: str
    topic: str  # the topic read: the subscribed topic or its POP retry topic
    queue_id: int
    start_offset: int
    pop_time: int
    invisible_ms: int
    offsets: list[int]
    next_offset: int
    orderly: bool = False
    max_attempts: int = 17
    log_offset: int = -1  # revive-log queue offset of the CK record
    remaining: set[int] = field(default_factory=set)
    share: bool = False  # a Kafka share group's acquisition (records stay at their offsets)
    member: str = ""  # share: the member that holds the acquisition lock
    dlq_topic: str = ""  # share: where rejected / exhausted records go ("" = %DLQ%<group>)
    redelivery_level: int = 0  # share: delay level of the first redelivery (0: at once)

    @property
    def key(self) -> CkKey:
        return (self.group, self.topic, self.queue_id, self.start_offset, self.pop_time)

    @property
    def revive_at(self) -> int:
        return self.pop_time + self.invisible_ms

    def to_json(self) -> dict[str, Any]:
        doc = {"g": self.group, "t": self.topic, "q": self.queue_id, "so": self.start_offset, "pt": self.pop_time,
               "it": self.invisible_ms, "os": self.offsets, "no": self.next_offset, "o": int(self.orderly),
               "ma": self.max_attempts}
        if self.share:
            doc.update(s=1, m=self.member, dq=self.dlq_topic)
            if self.redelivery_level:
                doc["rd"] = self.redelivery_level
        return doc

    @classmethod
    def from_json(cls, d: dict[str, Any], log_offset: int) -> "Checkpoint":
        ck = cls(str(d["g"]), str(d["t"]), int(d["q"]), int(d["so"]), int(d["pt"]), int(d["it"]),
                 [int(o) for o in d["os"]], int(d.get("no", -1)), bool(d.get("o")), int(d.get("ma", 17)), log_offset,
                 share=bool(d.get("s")), member=str(d.get("m", "")), dlq_topic=str(d.get("dq", "")),
                 redelivery_level=int(d.get("rd", 0)))
        ck.remaining = set(ck.offsets)
        return ck


@dataclass
class PoppedMessage:
    """One message handed out: as stored (``unit`` bytes, decoded ``message``), the topic the
    consumer subscribed to, its handle and its delivery attempt (1 = first delivery)."""

    unit: bytes
    message: MessageExt
    topic: str
    handle: str
    delivery_attempt: int


@dataclass
class QueueRead:
    """What one pop read from one queue (the remoting response's startOffsetInfo / msgOffsetInfo)."""

    topic: str
    queue_id: int
    start_offset: int
    offsets: list[int]
    retry: bool


@dataclass
class PopResult:
    messages: list[PoppedMessage]
    pop_time: int
    invisible_ms: int
    reads: list[QueueRead] = field(default_factory=list)
    rest_num: int = 0
    revive_qid: int = REVIVE_QUEUE_ID

    @property
    def found(self) -> bool:
        return bool(self.messages)


class PopService:
    """One per store; thread-safe. Methods that write (pop, ack, change_invisible,
    forward_to_dlq) may wait for a flush under SYNC_FLUSH: call them off the event loop."""

    def __init__(self, store: Any, *, revive_interval_ms: int = 500):
        self.store = store
        self.cluster = getattr(store.broker_config, "broker_cluster_name", "DefaultCluster")
        self.broker_name = getattr(store.broker_config, "broker_name", "broker-a")
        self.revive_topic = REVIVE_TOPIC_PREFIX + self.cluster
        self.revive_interval_ms = revive_interval_ms
        self._lock = threading.RLock()
        self._pending: dict[CkKey, Checkpoint] = {}
        self._orderly_lock: dict[tuple[str, str, int], CkKey] = {}  # (group, topic, queue) -> live orderly CK
        self._attempts: dict[tuple[str, str, int, int], int] = {}  # orderly: failed deliveries per offset
        # orderly: revive-log offset of the first CK whose expiry counted in _attempts[key]; the
        # progress offset never passes it, so a restart replays the counts (they live in the log)
        self._attempt_pins: dict[tuple[str, str, int, int], int] = {}
        # share groups: per (group, topic, queue) the offsets released or expired, waiting for their
        # next delivery; per (group, topic, queue, offset) the live CK that holds its lock
        self._share_avail: dict[tuple[str, str, int], set[int]] = {}
        self._share_owner: dict[tuple[str, str, int], dict[int, CkKey]] = {}  # (group, topic, queue) -> offset -> CK
        # share groups with a redelivery delay: (group, topic, queue, offset) -> the time (ms) an
        # available offset may be acquired again
        self._share_not_before: dict[tuple[str, str, int, int], int] = {}
        self._delay_levels: list[int] | None = None
        self._listeners: list[Callable[[str, str], None]] = []
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._started = False
        self._rotor = random.randrange(1 << 16)

    # ------------------------------------------------------------------ lifecycle
    def start(self, revive_thread: bool = True) -> None:
        """Replay the revive log (once) and start the revive thread (tests drive ``revive_due``
        themselves with ``revive_thread=False``)."""
        with self._lock:
            if self._started:
                return
            self._replay()
            self._started = True
        if not revive_thread:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="pop-revive", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout=10)
        self._thread = None
        with self._lock:
            if self._started and self.store.running:
                self._save_progress()

    def add_listener(self, cb: Callable[[str, str], None]) -> None:
        """``cb(group, topic)`` when a queue of ``topic`` may be poppable again for ``group``
        (an orderly queue unlocked). Called from whatever thread changed it."""
        self._listeners.append(cb)

    def remove_listener(self, cb: Callable[[str, str], None]) -> None:
        if cb in self._listeners:
            self._listeners.remove(cb)

    def _notify(self, group: str, topic: str) -> None:
        prefix = f"{RETRY_PREFIX}{group}_"
        topic = topic[len(prefix):] if topic.startswith(prefix) else topic
        for cb in list(self._listeners):
            try:
                cb(group, topic)
            except Exception:
                log.exception("pop_listener_failed")

    # ------------------------------------------------------------------ config helpers
    def max_attempts(self, group: str) -> int:
        cfg = self.store.subscription_groups.find_or_create(group)
        retry_max = cfg.retry_max_times if cfg is not None else 16
        return max(int(retry_max), 0) + 1

    def _ensure_topic(self, topic: str, perm: int = PERM_READ | PERM_WRITE) -> None:
        tcm = self.store.topic_config
        if tcm.get(topic) is None:
            tcm.create_or_update(TopicConfig(topic, read_queue_nums=1, write_queue_nums=1, perm=perm))

    def _init_offset(self, topic: str, queue_id: int, init_mode: int) -> int:
        low = self.store.get_min_offset_in_queue(topic, queue_id)
        if init_mode == INIT_MODE_MIN or low == 0 or topic.startswith(RETRY_PREFIX):
            return low
        return self.store.get_max_offset_in_queue(topic, queue_id)

    # ------------------------------------------------------------------ pop
    def pop(self, group: str, topic: str, queue_id: int | None, max_msgs: int, invisible_ms: int, *,
            message_filter: Any = None, orderly: bool = False, init_mode: int = INIT_MODE_MAX,
            max_attempts: int | None = None, now_ms: int | None = None, read_queue_nums: int | None = None) -> PopResult:
        """Pop up to ``max_msgs`` from ``topic`` (one queue, or all readable queues from a
        rotating start) and then from the group's POP retry topic."""
        if not 0 < invisible_ms <= _MAX_INVISIBLE_MS:
            raise PopError("ILLEGAL_INVISIBLE_TIME", f"invisible time {invisible_ms} ms is outside 1..{_MAX_INVISIBLE_MS}")
        max_msgs = max(1, min(int(max_msgs), 1024))
        ma = max_attempts if max_attempts is not None else self.max_attempts(group)
        pop_time = int(time.time() * 1000) if now_ms is None else now_ms
        result = PopResult([], pop_time, invisible_ms)
        tc = self.store.topic_config.get(topic)
        nums = read_queue_nums if read_queue_nums is not None else (tc.read_queue_nums if tc is not None else 0)
        queues = [queue_id] if queue_id is not None and queue_id >= 0 else list(range(nums))
        retry = pop_retry_topic(group, topic)
        with self._lock:
            self._rotor += 1
            if len(queues) > 1:
                k = self._rotor % len(queues)
                queues = queues[k:] + queues[:k]
            sources = [(topic, q, False) for q in queues]
            if not orderly and self.store.topic_config.get(retry) is not None:
                # RocketMQ reads the retry topic first one pop in five, so retries never starve
                sources = [(retry, 0, True)] + sources if self._rotor % 5 == 0 else sources + [(retry, 0, True)]
            for t, q, is_retry in sources:
                room = max_msgs - len(result.messages)
                if room <= 0:
                    result.rest_num += max(0, self.store.get_max_offset_in_queue(t, q) - self._offset(group, t, q, init_mode))
                    continue
                self._pop_queue(result, group, topic, t, q, is_retry, room, message_filter, orderly, init_mode, ma)
        return result

    def _offset(self, group: str, topic: str, queue_id: int, init_mode: int) -> int:
        off = self.store.consumer_offsets.query(group, topic, queue_id)
        if off < 0:
            off = self._init_offset(topic, queue_id, init_mode)
        return off

    def _pop_queue(self, result: PopResult, group: str, origin_topic: str, topic: str, queue_id: int, is_retry: bool,
                   room: int, message_filter: Any, orderly: bool, init_mode: int, max_attempts: int) -> None:
        store = self.store
        if orderly and (group, topic, queue_id) in self._orderly_lock:
            return
        offset = self._offset(group, topic, queue_id, init_mode)
        units, next_offset = self._read(group, topic, queue_id, offset, room, message_filter)
        if not units:
            if next_offset != offset:  # filtered out or moved: consumed, as with a pull
                store.consumer_offsets.commit(group, topic, queue_id, next_offset)
            return
        popped: list[tuple[bytes, MessageExt, int]] = []
        dead: list[MessageExt] = []
        for unit in units:
            ext = decode_message(unit)
            attempt = ext.reconsume_times + 1
            if orderly:
                attempt += self._attempts.get((group, topic, queue_id, ext.queue_offset), 0)
                if attempt > max_attempts:
                    dead.append(ext)
                    continue
            popped.append((unit, ext, attempt))
        for ext in dead:  # orderly: out of attempts, the queue moves on without it
            self._to_dlq(group, origin_topic, ext, reason="max_attempts")
            self._attempts.pop((group, topic, queue_id, ext.queue_offset), None)
            self._attempt_pins.pop((group, topic, queue_id, ext.queue_offset), None)
        if not popped:
            store.consumer_offsets.commit(group, topic, queue_id, next_offset)
            return
        ck = Checkpoint(group, topic, queue_id, offset, result.pop_time, result.invisible_ms,
                        [e.queue_offset for _, e, _ in popped], next_offset, orderly, max_attempts)
        ck.remaining = set(ck.offsets)
        ck.log_offset = self._append("ck", ck.to_json())
        self._pending[ck.key] = ck
        if orderly:
            self._orderly_lock[(group, topic, queue_id)] = ck.key
        else:
            store.consumer_offsets.commit(group, topic, queue_id, next_offset)
        topic_type = TOPIC_TYPE_RETRY if is_retry else TOPIC_TYPE_NORMAL
        for unit, ext, attempt in popped:
            handle = Handle(offset, result.pop_time, result.invisible_ms, REVIVE_QUEUE_ID, topic_type, self.broker_name,
                            queue_id, ext.queue_offset, ext.commitlog_offset).encode()
            result.messages.append(PoppedMessage(unit, ext, origin_topic, handle, attempt))
        result.reads.append(QueueRead(topic, queue_id, offset, ck.offsets, is_retry))

    def _get(self, group: str, topic: str, queue_id: int, offset: int, max_msgs: int, message_filter: Any,
             committed: bool) -> tuple[Any, int, int]:
        """(store result or None, end = last stable offset or high watermark, next offset when
        nothing was found) of a read at ``offset`` that stops before ``end``."""
        from . import txn_index

        store = self.store
        hw = store.get_max_offset_in_queue(topic, queue_id)
        end = txn_index.for_store(store).last_stable_offset(topic, queue_id, hw) if committed else hw
        if offset >= end:
            return None, end, offset
        res = store.get_message(group, topic, queue_id, offset, min(max_msgs, end - offset), message_filter)
        status = res.status.name
        if status in ("OFFSET_TOO_SMALL", "OFFSET_OVERFLOW_BADLY"):
            return None, end, res.next_begin_offset
        if status == "NO_MATCHED_MESSAGE":
            return None, end, max(res.next_begin_offset, offset)
        if status != "FOUND":
            return None, end, offset
        return res, end, offset

    def _read(self, group: str, topic: str, queue_id: int, offset: int, max_msgs: int,
              message_filter: Any, committed: bool = True) -> tuple[list[bytes], int]:
        """Units at ``offset`` (Kafka batches expanded and filtered per record, aborted Kafka
        transactions left out, nothing at or past the last stable offset) and the next offset.
        ``committed=False`` (a share group's read_uncommitted): up to the end, aborted included."""
        from . import txn_index
        from .batch_convert import expand_batch_unit

        txn = txn_index.for_store(self.store)
        res, lso, nxt = self._get(group, topic, queue_id, offset, max_msgs, message_filter, committed)
        if res is None:
            return [], nxt
        out: list[bytes] = []
        aborted = ((lambda pid, off: txn.is_aborted(topic, queue_id, pid, off))
                   if committed and txn.has_aborted(topic, queue_id) else None)
        for unit, ref in zip(res.messages, res.units):
            if not ref.is_batch:
                out.append(bytes(unit))
                continue
            try:
                records = expand_batch_unit(bytes(unit), aborted)
            except ValueError:
                log.warning("pop_batch_unreadable", topic=topic, queue_id=queue_id, offset=ref.queue_offset)
                continue
            for rec in records:
                ext = decode_message(rec)
                if ext.queue_offset < offset or ext.queue_offset >= lso:
                    continue
                if message_filter is not None and hasattr(message_filter, "matches_properties") \
                        and not message_filter.matches_properties(ext.properties):
                    continue
                out.append(rec)
        if len(out) > max_msgs:
            # a batch holds more records than asked for: the next read starts after the last one given
            out = out[:max_msgs]
            return out, decode_message(out[-1]).queue_offset + 1
        return out, min(res.next_begin_offset, lso) if out else res.next_begin_offset

    # ------------------------------------------------------------------ ack / change
    def _checkpoint(self, group: str, topic: str, h: Handle) -> Checkpoint | None:
        return self._pending.get((group, h.real_topic(group, topic), h.queue_id, h.start_offset, h.pop_time))

    def _live(self, group: str, topic: str, handle: str) -> tuple[Handle, Checkpoint] | AckStatus:
        """The handle's checkpoint while its message is still unacked, else why not."""
        try:
            h = Handle.parse(handle)
        except PopError:
            return AckStatus.BAD_HANDLE
        ck = self._checkpoint(group, topic, h)
        if ck is None or h.queue_offset not in ck.remaining:
            return AckStatus.NO_SUCH_CHECKPOINT
        return h, ck

    def _ack_record(self, ck: Checkpoint, offsets: list[int], revived: bool = False, flag: str = "") -> None:
        doc = {"g": ck.group, "t": ck.topic, "q": ck.queue_id, "so": ck.start_offset, "pt": ck.pop_time, "os": offsets}
        if revived:
            doc["r"] = 1
        if flag:  # share groups: "rel" released (one delivery more), "rn" lock renewed (moved to a new CK)
            doc[flag] = 1
        self._append("ack", doc)

    def ack(self, group: str, topic: str, handle: str, now_ms: int | None = None) -> AckStatus:
        with self._lock:
            live = self._live(group, topic, handle)
            if isinstance(live, AckStatus):
                return live
            h, ck = live
            now = int(time.time() * 1000) if now_ms is None else now_ms
            if now >= ck.revive_at and not ck.orderly:
                # too late: revive owns it now (RocketMQ's proxy answers the handle is expired)
                return AckStatus.NO_SUCH_CHECKPOINT
            self._ack_record(ck, [h.queue_offset])
            self._apply_ack(ck, [h.queue_offset])
        return AckStatus.OK

    def _apply_ack(self, ck: Checkpoint, offsets: list[int], replay: bool = False) -> None:
        for o in offsets:
            ck.remaining.discard(o)
            if ck.orderly:
                self._attempts.pop((ck.group, ck.topic, ck.queue_id, o), None)
                self._attempt_pins.pop((ck.group, ck.topic, ck.queue_id, o), None)
        if ck.orderly and not replay:
            # the consumer offset moves to the first unacked message of the CK
            first = min(ck.remaining) if ck.remaining else ck.next_offset
            cur = self.store.consumer_offsets.query(ck.group, ck.topic, ck.queue_id)
            if first > cur:
                self.store.consumer_offsets.commit(ck.group, ck.topic, ck.queue_id, first)
        if not ck.remaining:
            self._finish(ck)

    def _finish(self, ck: Checkpoint) -> None:
        self._pending.pop(ck.key, None)
        if ck.orderly and self._orderly_lock.get((ck.group, ck.topic, ck.queue_id)) == ck.key:
            del self._orderly_lock[(ck.group, ck.topic, ck.queue_id)]
            self._notify(ck.group, ck.topic)

    def change_invisible(self, group: str, topic: str, handle: str, invisible_ms: int,
                         now_ms: int | None = None) -> str:
        """A new handle whose message stays invisible ``invisible_ms`` from now (RocketMQ writes
        a new CK for the one message and acks the old one)."""
        if not 0 < invisible_ms <= _MAX_INVISIBLE_MS:
            raise PopError("ILLEGAL_INVISIBLE_TIME", f"invisible time {invisible_ms} ms is outside 1..{_MAX_INVISIBLE_MS}")
        h = Handle.parse(handle)
        with self._lock:
            ck = self._checkpoint(group, topic, h)
            now = int(time.time() * 1000) if now_ms is None else now_ms
            if ck is None or h.queue_offset not in ck.remaining or (now >= ck.revive_at and not ck.orderly):
                raise PopError(AckStatus.NO_SUCH_CHECKPOINT.value,
                               "the receipt handle is expired or unknown; the message was acknowledged or redelivered")
            new = Checkpoint(ck.group, ck.topic, ck.queue_id, h.queue_offset, now, invisible_ms, [h.queue_offset],
                             ck.next_offset if ck.orderly else h.queue_offset + 1, ck.orderly, ck.max_attempts)
            if new.key in self._pending:  # same millisecond as another CK of this offset
                new.pop_time += 1
            new.remaining = {h.queue_offset}
            new.log_offset = self._append("ck", new.to_json())
            self._pending[new.key] = new
            self._ack_record(ck, [h.queue_offset])
            if ck.orderly:
                # the orderly lock follows the message: keep the queue locked until it is done
                ck.remaining.discard(h.queue_offset)
                if not ck.remaining:
                    self._pending.pop(ck.key, None)
                    self._orderly_lock[(ck.group, ck.topic, ck.queue_id)] = new.key
            else:
                self._apply_ack(ck, [h.queue_offset])
            return Handle(new.start_offset, new.pop_time, invisible_ms, REVIVE_QUEUE_ID, h.topic_type, h.broker_name,
                          h.queue_id, h.queue_offset, h.commitlog_offset).encode()

    def forward_to_dlq(self, group: str, topic: str, handle: str) -> AckStatus:
        """The consumer gave up on the message (gRPC ForwardMessageToDeadLetterQueue): it goes to
        ``%DLQ%<group>`` and its handle is acked."""
        with self._lock:
            live = self._live(group, topic, handle)
            if isinstance(live, AckStatus):
                return live
            h, ck = live
            ext = self._message_at(ck.topic, ck.queue_id, h.queue_offset)
            if ext is not None:
                self._to_dlq(group, topic, ext, reason="client")
            self._ack_record(ck, [h.queue_offset])
            self._apply_ack(ck, [h.queue_offset])
        return AckStatus.OK

    # ------------------------------------------------------------------ revive
    def revive_due(self, now_ms: int | None = None) -> int:
        """Revive every CK past its invisible time; returns how many messages were re-put or
        re-opened. The revive thread calls this every ``revive_interval_ms``."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        n = 0
        with self._lock:
            due = [ck for ck in self._pending.values() if ck.revive_at <= now]
            for ck in sorted(due, key=lambda c: c.log_offset):
                n += self._revive(ck)
        return n

    def _revive(self, ck: Checkpoint) -> int:
        offsets = sorted(ck.remaining)
        if ck.share:
            # the acquisition lock expired: one delivery more, back to the share-partition (or DLQ)
            self._share_dead_letters(ck, offsets, "max_deliveries")
            self._ack_record(ck, offsets, revived=True)
            self._share_release(ck, offsets)
            return len(offsets)
        if ck.orderly:
            # not re-put: the queue is popped again from its consumer offset, one attempt more
            self._count_attempts(ck, offsets)
            cur = self.store.consumer_offsets.query(ck.group, ck.topic, ck.queue_id)
            if offsets and offsets[0] > cur:
                self.store.consumer_offsets.commit(ck.group, ck.topic, ck.queue_id, offsets[0])
            self._ack_record(ck, offsets, revived=True)
            ck.remaining.clear()
            self._finish(ck)
            return len(offsets)
        origin = ck.topic
        if origin.startswith(RETRY_PREFIX + ck.group + "_"):
            origin = origin[len(RETRY_PREFIX + ck.group + "_"):]
        for o in offsets:
            ext = self._message_at(ck.topic, ck.queue_id, o)
            if ext is None:
                log.warning("pop_revive_message_gone", group=ck.group, topic=ck.topic, queue_id=ck.queue_id, offset=o)
                continue
            if ext.reconsume_times + 1 >= ck.max_attempts:
                self._to_dlq(ck.group, origin, ext, reason="max_attempts")
            else:
                self._to_retry(ck.group, origin, ext)
        self._ack_record(ck, offsets, revived=True)
        ck.remaining.clear()
        self._finish(ck)
        return len(offsets)

    def _count_attempts(self, ck: Checkpoint, offsets: list[int]) -> None:
        """An orderly CK expired: one more failed delivery for each of its remaining offsets."""
        for o in offsets:
            k = (ck.group, ck.topic, ck.queue_id, o)
            self._attempts[k] = self._attempts.get(k, 0) + 1
            self._attempt_pins.setdefault(k, ck.log_offset)

    def _message_at(self, topic: str, queue_id: int, offset: int) -> MessageExt | None:
        from .batch_convert import expand_batch_unit

        res = self.store.get_message(REVIVE_GROUP, topic, queue_id, offset, 1)
        if res.status.name != "FOUND" or not res.messages:
            return None
        unit = bytes(res.messages[0])
        ext = decode_message(unit)
        if not ext.sys_flag & INNER_BATCH_FLAG:
            return ext
        for rec in expand_batch_unit(unit):
            r = decode_message(rec)
            if r.queue_offset == offset:
                return r
        return None

    def _copy(self, ext: MessageExt, topic: str, reconsume: int) -> Message:
        props = dict(ext.properties)
        tags = props.pop(PROPERTY_TAGS, None)
        keys = props.pop(PROPERTY_KEYS, None)
        props.setdefault(PROPERTY_ORIGIN_MESSAGE_ID, props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or ext.msg_id)
        for p in ("DELAY", "REAL_TOPIC", "REAL_QID", PROPERTY_POP_CK):
            props.pop(p, None)
        return Message(topic=topic, body=ext.body, tags=tags, keys=keys.split(" ") if keys else None, properties=props,
                       queue_id=0, flag=ext.flag, sys_flag=ext.sys_flag & ~INNER_BATCH_FLAG & ~0xC,
                       born_timestamp=ext.born_timestamp, born_host=ext.born_host, reconsume_times=reconsume)

    def _to_retry(self, group: str, origin_topic: str, ext: MessageExt) -> None:
        topic = pop_retry_topic(group, origin_topic)
        self._ensure_topic(topic)
        # as RocketMQ's PopReviveService.reviveRetry: the copy carries no RETRY_TOPIC (the POP
        # retry topic itself names the group and the original topic)
        msg = self._copy(ext, topic, ext.reconsume_times + 1)
        msg.properties.setdefault(PROPERTY_FIRST_POP_TIME, str(int(time.time() * 1000)))
        self._put(msg, "retry")

    def _to_dlq(self, group: str, origin_topic: str, ext: MessageExt, reason: str, topic: str = "",
                share_queue: int | None = None) -> None:
        topic = topic or DLQ_PREFIX + group
        self._ensure_topic(topic)
        msg = self._copy(ext, topic, ext.reconsume_times + 1)
        # as RocketMQ's consumerSendMsgBack (where the proxy's and the POP client's dead letters
        # go): RETRY_TOPIC, unless already set, is the topic the message was stored in — the
        # POP retry topic %RETRY%<group>_<topic> after a retry, the topic itself on a first
        # delivery (and for FIFO and share groups, which are not re-put)
        msg.properties.setdefault(PROPERTY_RETRY_TOPIC, ext.topic)
        if share_queue is not None:  # resent to its partition, not to a retry topic (rockafka admin dlq resend)
            msg.properties[PROPERTY_SHARE_PARTITION] = str(share_queue)
        msg.properties[PROPERTY_DLQ_ORIGIN_TOPIC] = origin_topic  # the topic itself, not its POP retry topic
        msg.properties[PROPERTY_DLQ_ORIGIN_MESSAGE_ID] = msg.properties[PROPERTY_ORIGIN_MESSAGE_ID]
        self._put(msg, "dlq")
        log.info("message_to_dlq", group=group, topic=origin_topic, msg_id=msg.properties[PROPERTY_ORIGIN_MESSAGE_ID],
                 reconsume_times=msg.reconsume_times, reason=reason, via="pop")

    def _put(self, msg: Message, what: str) -> None:
        result = self.store.put_message(msg)
        if not result.stored:
            # the CK stays pending and is revived again next round: nothing is dropped
            raise PopError("PUT_FAILED", f"{what} put failed: {result.status.name} {result.error or ''}".strip())

    # ------------------------------------------------------------------ the log
    def _append(self, kind: str, doc: dict[str, Any]) -> int:
        body = json.dumps(doc, separators=(",", ":")).encode()
        result = self.store.put_message(Message(topic=self.revive_topic, body=body, tags=kind, queue_id=REVIVE_QUEUE_ID))
        if not result.stored:
            raise PopError("PUT_FAILED", f"revive log write failed: {result.status.name} {result.error or ''}".strip())
        return result.queue_offset

    def _replay(self) -> None:
        store = self.store
        start = store.consumer_offsets.query(REVIVE_GROUP, self.revive_topic, REVIVE_QUEUE_ID)
        start = max(start, store.get_min_offset_in_queue(self.revive_topic, REVIVE_QUEUE_ID))
        end = store.get_max_offset_in_queue(self.revive_topic, REVIVE_QUEUE_ID)
        offset, cks, acks = start, 0, 0
        while offset < end:
            res = store.get_message(REVIVE_GROUP, self.revive_topic, REVIVE_QUEUE_ID, offset, 256)
            if res.status.name != "FOUND":
                offset = max(res.next_begin_offset, offset + 1) if res.status.name != "OFFSET_OVERFLOW_ONE" else end
                continue
            for unit in res.messages:
                ext = decode_message(bytes(unit))
                try:
                    doc = json.loads(ext.body)
                except ValueError:
                    log.warning("revive_log_record_unreadable", offset=ext.queue_offset)
                    continue
                if ext.tags == "ck":
                    ck = Checkpoint.from_json(doc, ext.queue_offset)
                    self._pending[ck.key] = ck
                    if ck.orderly:
                        self._orderly_lock[(ck.group, ck.topic, ck.queue_id)] = ck.key
                    if ck.share:
                        self._share_replay_ck(ck)
                    cks += 1
                elif ext.tags == "ack":
                    ck = self._pending.get((doc["g"], doc["t"], int(doc["q"]), int(doc["so"]), int(doc["pt"])))
                    if ck is None:
                        continue
                    offs = [int(o) for o in doc["os"]]
                    if ck.share:
                        self._share_replay_ack(ck, offs, doc)
                    elif doc.get("r") and ck.orderly:
                        self._count_attempts(ck, offs)
                        ck.remaining.clear()
                        self._finish(ck)
                    else:
                        self._apply_ack(ck, offs, replay=True)
                    acks += 1
            offset = res.next_begin_offset
        log.info("pop_state_replayed", revive_topic=self.revive_topic, from_offset=start, to_offset=end,
                 checkpoints=cks, acks=acks, pending=len(self._pending))

    def _save_progress(self) -> None:
        """The progress offset: the oldest unfinished CK's log offset, else the log's end."""
        end = self.store.get_max_offset_in_queue(self.revive_topic, REVIVE_QUEUE_ID)
        oldest = min((ck.log_offset for ck in self._pending.values() if ck.log_offset >= 0), default=end)
        # orderly attempt counts live in the CK records that expired: keep those replayable
        pinned = min((o for o in self._attempt_pins.values() if o >= 0), default=end)
        self.store.consumer_offsets.commit(REVIVE_GROUP, self.revive_topic, REVIVE_QUEUE_ID, min(oldest, pinned, end))

    def _run(self) -> None:
        interval = max(self.revive_interval_ms, 10) / 1000
        while not self._stop.wait(interval):
            if not self.store.running:
                return
            try:
                self.revive_due()
                with self._lock:
                    self._save_progress()
            except PopError as exc:
                log.warning("pop_revive_deferred", error=str(exc))
            except Exception:
                log.exception("pop_revive_failed")

    # ------------------------------------------------------------------ Kafka share groups
    # A share-partition is (group, topic, queue). Records stay at their offsets: an acquisition is
    # a CK with s=1 (member, lock = invisible time, delivery limit = max attempts, DLQ topic); the
    # group's consumer offset is the next offset never acquired; a released or expired record
    # waits in _share_avail for its next delivery, its finished deliveries counted in _attempts
    # and pinned in the log like an orderly POP's (docs/design/share-groups.md).

    def share_acquire(self, group: str, topic: str, queue_id: int, member: str, max_records: int, lock_ms: int, *,
                      delivery_limit: int, init_mode: int = INIT_MODE_MAX, dlq_topic: str = "",
                      max_locks: int = 2000, committed: bool = True, redelivery_level: int = 0,
                      now_ms: int | None = None) -> list[tuple[int, int]]:
        """Acquire up to ``max_records`` records of the share-partition for ``member``: first the
        released / expired ones (lowest offset first) whose redelivery delay has passed, then new
        ones from the group's offset (``committed``: read_committed, else read_uncommitted).
        ``redelivery_level`` > 0: a record these acquisitions hold that is released or expires
        waits the engine's delay level ``redelivery_level + deliveries - 1`` (capped at the last
        level) before it can be acquired again, as RocketMQ's retries climb the levels. Returns
        (offset, delivery count) sorted by offset."""
        if not 0 < lock_ms <= _MAX_INVISIBLE_MS:
            raise PopError("ILLEGAL_INVISIBLE_TIME", f"lock duration {lock_ms} ms is outside 1..{_MAX_INVISIBLE_MS}")
        key = (group, topic, queue_id)
        with self._lock:
            locked = len(self._share_owner.get(key, ()))
            room = max(0, min(int(max_records), max_locks - locked if max_locks > 0 else int(max_records), 1024))
            if room == 0:
                return []
            taken: list[int] = []
            avail = self._share_avail.get(key)
            now = int(time.time() * 1000) if now_ms is None else now_ms
            if avail:
                low = self.store.get_min_offset_in_queue(topic, queue_id)
                not_before = self._share_not_before
                for o in sorted(avail):
                    if len(taken) >= room:
                        break
                    if not_before and not_before.get((group, topic, queue_id, o), 0) > now:
                        continue  # its redelivery delay has not passed
                    not_before.pop((group, topic, queue_id, o), None)
                    avail.discard(o)
                    if o < low:  # gone from the log (retention, DeleteRecords): nothing to deliver
                        not_before.pop((group, topic, queue_id, o), None)
                        self._attempts.pop((group, topic, queue_id, o), None)
                        self._attempt_pins.pop((group, topic, queue_id, o), None)
                        continue
                    taken.append(o)
            new: list[int] = []
            next_offset = -1
            if len(taken) < room:
                offset = self._share_offset(group, topic, queue_id, init_mode)
                new, nxt = self._share_read(group, topic, queue_id, offset, room - len(taken), committed)
                if nxt != offset:
                    next_offset = nxt
            offsets = sorted(taken + new)
            if not offsets:
                if next_offset >= 0:  # filtered out (aborted, markers): consumed, as with a pull
                    self.store.consumer_offsets.commit(group, topic, queue_id, next_offset)
                return []
            pop_time = now
            ck = Checkpoint(group, topic, queue_id, offsets[0], pop_time, lock_ms, offsets, next_offset, False,
                            delivery_limit, share=True, member=member, dlq_topic=dlq_topic,
                            redelivery_level=max(0, int(redelivery_level)))
            while ck.key in self._pending:
                ck.pop_time += 1
            ck.remaining = set(offsets)
            try:
                ck.log_offset = self._append("ck", ck.to_json())
            except PopError:
                if taken:
                    self._share_avail.setdefault(key, set()).update(taken)
                raise
            self._pending[ck.key] = ck
            owners = self._share_owner.setdefault(key, {})
            for o in offsets:
                owners[o] = ck.key
            if next_offset >= 0:
                self.store.consumer_offsets.commit(group, topic, queue_id, next_offset)
            return [(o, self._attempts.get((group, topic, queue_id, o), 0) + 1) for o in offsets]

    def _share_read(self, group: str, topic: str, queue_id: int, offset: int, max_records: int,
                    committed: bool) -> tuple[list[int], int]:
        """Offsets of the records from ``offset`` (up to ``max_records``) and the next offset, as
        ``_read`` finds them but from batch headers only: a Kafka batch of contiguous offsets is a
        range, never decoded record by record (control batches and, when ``committed``, aborted
        ones skipped; nothing at or past the last stable offset)."""
        from . import record_batch as rb
        from . import txn_index
        from .batch_convert import expand_batch_unit

        txn = txn_index.for_store(self.store)
        res, end, nxt = self._get(group, topic, queue_id, offset, max_records, None, committed)
        if res is None:
            return [], nxt
        check = committed and txn.has_aborted(topic, queue_id)
        out: list[int] = []
        for unit, ref in zip(res.messages, res.units):
            if not ref.is_batch:
                out.append(ref.queue_offset)
                continue
            ext = decode_message(bytes(unit))  # the unit's header only; the batch stays bytes
            try:
                h = rb.parse_header(ext.body)
            except Exception:
                log.warning("share_batch_unreadable", topic=topic, queue_id=queue_id, offset=ref.queue_offset)
                continue
            if h.is_control or (check and h.is_transactional and txn.is_aborted(topic, queue_id, h.producer_id,
                                                                                 ext.queue_offset)):
                continue
            if h.last_offset_delta + 1 == h.records_count:
                offs: Any = range(ext.queue_offset, ext.queue_offset + h.records_count)
            else:  # offsets with gaps (a compacted batch): read them from the records
                offs = [decode_message(r).queue_offset for r in expand_batch_unit(bytes(unit))]
            out.extend(o for o in offs if offset <= o < end)
        if len(out) > max_records:
            out = out[:max_records]
            return out, out[-1] + 1
        return out, min(res.next_begin_offset, end) if out else res.next_begin_offset

    def _share_offset(self, group: str, topic: str, queue_id: int, init_mode: int) -> int:
        """The next offset the group never acquired; a new share-partition starts at the log's
        start (earliest) or end (latest) and that start is recorded at once (Kafka's SPSO)."""
        store = self.store
        off = store.consumer_offsets.query(group, topic, queue_id)
        low = store.get_min_offset_in_queue(topic, queue_id)
        if off < 0:
            off = low if init_mode == INIT_MODE_MIN else store.get_max_offset_in_queue(topic, queue_id)
            store.consumer_offsets.commit(group, topic, queue_id, off)
        return max(off, low)

    def share_acknowledge(self, group: str, topic: str, queue_id: int, member: str, acks: list[tuple[int, int]],
                          now_ms: int | None = None) -> str | None:
        """Apply (offset, type) acknowledgements of ``member`` (Kafka's types: 0 gap and 1 accept
        finish the record, 2 release makes it available again with one delivery more, 3 reject
        sends it to the dead-letter topic, 4 renew restarts its lock). All or nothing: returns why
        not when any offset is not locked by ``member`` (Kafka's INVALID_RECORD_STATE), else None."""
        with self._lock:
            now = int(time.time() * 1000) if now_ms is None else now_ms
            by_ck: dict[CkKey, list[tuple[int, int]]] = {}
            for o, kind in acks:
                if kind not in (0, 1, 2, 3, 4):
                    return f"acknowledge type {kind} is not one of 0 (gap), 1 (accept), 2 (release), 3 (reject), 4 (renew)"
                k = self._share_owner.get((group, topic, queue_id), {}).get(o)
                ck = self._pending.get(k) if k is not None else None
                if ck is None or o not in ck.remaining or ck.member != member or now >= ck.revive_at:
                    return f"the record at offset {o} is not acquired by member {member} (lock expired or never held)"
                by_ck.setdefault(k, []).append((o, kind))
            for k, items in by_ck.items():
                ck = self._pending[k]
                done = [o for o, kind in items if kind in (0, 1, 3)]
                released = [o for o, kind in items if kind == 2]
                renewed = [o for o, kind in items if kind == 4]
                for o, kind in items:
                    if kind == 3:
                        ext = self._message_at(ck.topic, ck.queue_id, o)
                        if ext is not None:
                            self._to_dlq(ck.group, ck.topic, ext, "rejected", ck.dlq_topic, ck.queue_id)
                if done:
                    self._ack_record(ck, done)
                    self._share_done(ck, done)
                if released:
                    self._share_dead_letters(ck, released, "max_deliveries")
                    self._ack_record(ck, released, flag="rel")
                    self._share_release(ck, released)
                if renewed:
                    self._share_renew(ck, renewed, now)
        return None

    def share_release_member(self, group: str, member: str) -> int:
        """The member left: every record it holds becomes available again (one delivery more)."""
        n = 0
        with self._lock:
            for ck in [c for c in self._pending.values() if c.share and c.group == group and c.member == member]:
                offsets = sorted(ck.remaining)
                if offsets:
                    self._share_dead_letters(ck, offsets, "max_deliveries")
                    self._ack_record(ck, offsets, flag="rel")
                    self._share_release(ck, offsets)
                    n += len(offsets)
        return n

    def _share_dead_letters(self, ck: Checkpoint, offsets: list[int], reason: str) -> None:
        """Before a release is logged: records whose delivery ends their last allowed one go to
        the dead-letter topic (replay recognises them by the same count)."""
        for o in offsets:
            if self._attempts.get((ck.group, ck.topic, ck.queue_id, o), 0) + 1 >= ck.max_attempts:
                ext = self._message_at(ck.topic, ck.queue_id, o)
                if ext is not None:
                    self._to_dlq(ck.group, ck.topic, ext, reason, ck.dlq_topic, ck.queue_id)

    def _share_unlock(self, ck: Checkpoint, o: int) -> None:
        ck.remaining.discard(o)
        owners = self._share_owner.get((ck.group, ck.topic, ck.queue_id))
        if owners is not None and owners.get(o) == ck.key:
            del owners[o]

    def _share_done(self, ck: Checkpoint, offsets: list[int]) -> None:
        for o in offsets:
            self._share_unlock(ck, o)
            self._attempts.pop((ck.group, ck.topic, ck.queue_id, o), None)
            self._attempt_pins.pop((ck.group, ck.topic, ck.queue_id, o), None)
            self._share_not_before.pop((ck.group, ck.topic, ck.queue_id, o), None)
        if not ck.remaining:
            self._finish(ck)

    def _share_release(self, ck: Checkpoint, offsets: list[int]) -> None:
        """Released or expired (also when replayed: a replayed delay counts from the replay, so
        it is never shorter than asked)."""
        self._count_attempts(ck, offsets)
        avail = self._share_avail.setdefault((ck.group, ck.topic, ck.queue_id), set())
        now = int(time.time() * 1000)
        for o in offsets:
            self._share_unlock(ck, o)
            k = (ck.group, ck.topic, ck.queue_id, o)
            if self._attempts.get(k, 0) >= ck.max_attempts:  # dead-lettered: the record is done
                self._attempts.pop(k, None)
                self._attempt_pins.pop(k, None)
                self._share_not_before.pop(k, None)
            else:
                avail.add(o)
                if ck.redelivery_level > 0:
                    self._share_not_before[k] = now + self._redelivery_delay_ms(
                        ck.redelivery_level + max(1, self._attempts.get(k, 1)) - 1)
        if not ck.remaining:
            self._finish(ck)

    def _redelivery_delay_ms(self, level: int) -> int:
        """The engine's delay level ``level`` (``messageDelayLevel``; capped at the last one)."""
        if self._delay_levels is None:
            from .schedule_message import parse_delay_levels

            self._delay_levels = parse_delay_levels(self.store.config.message_delay_level)
        levels = self._delay_levels
        return levels[min(max(level, 1), len(levels)) - 1]

    def _share_renew(self, ck: Checkpoint, offsets: list[int], now: int) -> None:
        new = Checkpoint(ck.group, ck.topic, ck.queue_id, min(offsets), now, ck.invisible_ms, sorted(offsets), -1,
                         False, ck.max_attempts, share=True, member=ck.member, dlq_topic=ck.dlq_topic)
        while new.key in self._pending:
            new.pop_time += 1
        new.remaining = set(offsets)
        new.log_offset = self._append("ck", new.to_json())
        self._pending[new.key] = new
        owners = self._share_owner.setdefault((ck.group, ck.topic, ck.queue_id), {})
        for o in offsets:
            owners[o] = new.key
        self._ack_record(ck, offsets, flag="rn")
        for o in offsets:
            ck.remaining.discard(o)
        if not ck.remaining:
            self._finish(ck)

    def _share_replay_ck(self, ck: Checkpoint) -> None:
        avail = self._share_avail.get((ck.group, ck.topic, ck.queue_id))
        owners = self._share_owner.setdefault((ck.group, ck.topic, ck.queue_id), {})
        for o in ck.offsets:
            owners[o] = ck.key
            if avail:
                avail.discard(o)
        if ck.next_offset > self.store.consumer_offsets.query(ck.group, ck.topic, ck.queue_id):
            # the CK is in the log before the offset moved: a crash in between never re-acquires
            self.store.consumer_offsets.commit(ck.group, ck.topic, ck.queue_id, ck.next_offset)

    def _share_replay_ack(self, ck: Checkpoint, offsets: list[int], doc: dict[str, Any]) -> None:
        offsets = [o for o in offsets if o in ck.remaining]
        if doc.get("rn"):
            for o in offsets:
                ck.remaining.discard(o)
            if not ck.remaining:
                self._finish(ck)
        elif doc.get("r") or doc.get("rel"):
            self._share_release(ck, offsets)
        else:
            self._share_done(ck, offsets)

    def share_state(self, group: str, topic: str, queue_id: int) -> dict[str, Any]:
        """What the share-partition holds: next offset never acquired, locked and available
        offsets and the start offset (lowest offset not yet finished)."""
        with self._lock:
            nxt = self.store.consumer_offsets.query(group, topic, queue_id)
            locked = sorted(self._share_owner.get((group, topic, queue_id), ()))
            avail = sorted(self._share_avail.get((group, topic, queue_id), ()))
            start = min(locked[:1] + avail[:1] + ([nxt] if nxt >= 0 else [])) if (locked or avail or nxt >= 0) else -1
            return {"next_offset": nxt, "start_offset": start, "locked": locked, "available": avail}

    def share_reset(self, group: str, topic: str, queue_id: int, offset: int | None) -> None:
        """AlterShareGroupOffsets (``offset``) / DeleteShareGroupOffsets (None): the
        share-partition starts again, its available records and delivery counts forgotten (the
        caller checks that the group has no members)."""
        with self._lock:
            self._share_avail.pop((group, topic, queue_id), None)
            for k in [k for k in self._share_not_before if k[:3] == (group, topic, queue_id)]:
                del self._share_not_before[k]
            for k in [k for k in self._attempts if k[:3] == (group, topic, queue_id)]:
                self._attempts.pop(k, None)
                self._attempt_pins.pop(k, None)
            offsets = self.store.consumer_offsets
            if offset is None:
                res = offsets.delete(group, topic, queue_id)
            else:
                from .consumer_offset import OffsetEntry

                res = offsets.commit_durable(group, {(topic, queue_id): OffsetEntry(offset, commit_timestamp=int(
                    time.time() * 1000))})
            if res is not None and not res.stored:
                raise PopError("PUT_FAILED", f"share-partition offset not stored: {res.status.name}")

    # ------------------------------------------------------------------ introspection
    def inflight(self, group: str | None = None) -> int:
        with self._lock:
            return sum(len(ck.remaining) for ck in self._pending.values() if group is None or ck.group == group)


_instances_lock = threading.Lock()


def for_store(store: Any) -> PopService:
    """The store's POP service, created and started on first use."""
    with _instances_lock:
        svc = getattr(store, "_pop_service", None)
        if svc is None:
            svc = PopService(store)
            store._pop_service = svc
    svc.start()
    return svc
