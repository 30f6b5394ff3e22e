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

A tiered queue (docs/design/tiered-storage.md): a pop at an offset that left the disk reads the
store's remote tier (``store.remote_tier.read_sync``, on the caller's worker thread, under the
pop lock: a slow object store slows pops of every queue until its operation deadline); a
failed remote read pops nothing and keeps the offset. INIT_MODE_MIN starts at the remote start.

Handles: ``startOffset popTime invisibleTime reviveQid topicType brokerName queueId
queueOffset commitLogOffset`` (RocketMQ's ExtraInfoUtil fields + commitlog offset); topicType
``1`` means the group's POP retry topic ``%RETRY%<group>_<topic>``.
"""

from __future__ import annotations

import json
import random
import threading
import time
from typing import Any, Callable

import structlog

from .message import (
    INNER_BATCH_FLAG, Message, MessageExt, PROPERTY_DLQ_ORIGIN_MESSAGE_ID, PROPERTY_DLQ_ORIGIN_TOPIC,
    PROPERTY_FIRST_POP_TIME, PROPERTY_KEYS, PROPERTY_ORIGIN_MESSAGE_ID, PROPERTY_POP_CK, PROPERTY_RETRY_TOPIC,
    PROPERTY_SHARE_PARTITION, PROPERTY_TAGS, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, decode_message,
)
from .topic_config import PERM_READ, PERM_WRITE, TopicConfig

from .pop_share import SharePop

log = structlog.get_logger("rockafka.engine.pop")

from .pop_types import (  # noqa: F401  (the service's vocabulary, imported from engine.pop by callers)
    AckStatus, Checkpoint, CkKey, DLQ_PREFIX, Handle, INIT_MODE_MAX, INIT_MODE_MIN, PopError, PopResult, PoppedMessage, QueueRead, RETRY_PREFIX, REVIVE_GROUP, REVIVE_QUEUE_ID, REVIVE_TOPIC_PREFIX, TOPIC_TYPE_NORMAL, TOPIC_TYPE_RETRY, _MAX_INVISIBLE_MS, pop_retry_topic,
)


class PopService(SharePop):
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
        tier = self.store.remote_tier
        if tier is not None and init_mode == INIT_MODE_MIN:
            low = tier.log_start(topic, queue_id)   # a tiered queue starts in the remote tier
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
        tier = store.remote_tier
        if status == "OFFSET_TOO_SMALL" and tier is not None and tier.covers(topic, queue_id, offset):
            # the offset left the disk: read the remote tier (docs/design/tiered-storage.md)
            from .tiered.object_store import ObjectStoreError

            try:
                remote = tier.read_sync(group, topic, queue_id, offset, min(max_msgs, end - offset),
                                        message_filter, end=end)
            except ObjectStoreError as exc:
                log.warning("pop_remote_read_failed", topic=topic, queue_id=queue_id, offset=offset, error=str(exc))
                return None, end, offset        # nothing now; the next pop tries again
            if remote is not None:
                res, status = remote, remote.status.name
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
