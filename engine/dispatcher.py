"""Dispatcher (RocketMQ's ReputMessageService): derive the key index from the commitlog, in
order, on a lazy cadence; and tell arrival listeners that queues grew, where the put happens.

Arrivals (long-poll wake-ups) are off this thread. The put path writes consume-queue units
itself (a put is readable when it returns) and then calls ``appended(topic, queue_id,
max_offset)``, which calls every arrival listener at once, from the putting thread; a
SYNC_MASTER put whose bytes went straight to the slaves *holds* its arrival instead, and
whoever completes the replication wait releases it with ``wake`` (consumers see a message once
its round trip is over, as before; a hold never lasts more than ``HOLD_MAX_S``). On a slave the
replicated append calls ``appended`` for the queues its units grew. *Lazy* listeners (counters)
are instead called from this thread's rounds, once per queue that grew in the round.

The index: a put kicks this thread (one C call when it sleeps, nothing while a round is due);
the thread then pauses ``REPUT_INTERVAL_S`` so what arrives meanwhile shares the round, and
follows the log up to the store's *confirmed offset* (where the last complete put, consume-
queue units included, ends) in rounds of up to ``ROUND`` units, adding the ``topic#key`` index
entries: every KEYS entry and UNIQ_KEY, and for a Kafka batch unit the record keys that are
valid UTF-8 (decoding records here keeps that work off the produce path); then
``reput_offset`` moves past the round. A reader that needs the index now (``query_message``)
calls ``wait_dispatched``, which runs the round in the reader's thread.

During recovery ``dispatch_for_recovery`` does the same synchronously and also rebuilds the
consume-queue units the crash lost. ``reput_offset`` is a unit boundary; the checkpoint stores
how far the index was flushed so recovery knows where to start.
"""

from __future__ import annotations

import struct
import threading
import time
from typing import Callable

import structlog

from . import record_batch
from .message import (BLANK_MAGIC_CODE, INNER_BATCH_FLAG, MAGIC_CODE_V1, MAGIC_CODE_V2, PROPERTY_KEYS,
                      PROPERTY_TAGS, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, MessageFormatError, UnitHeader,
                      decode_properties, tags_code)
from .state_log import INTERNAL_TOPICS

log = structlog.get_logger("rockafka.engine.dispatcher")

_TOTAL_MAGIC = struct.Struct(">ii")
_I32 = struct.Struct(">i")
_LAST_OFFSET_DELTA = 23  # engine.record_batch.LAST_OFFSET_DELTA_OFFSET

ArrivalListener = Callable[[str, int, int], None]
REPUT_INTERVAL_S = 0.02  # pause between a put's kick and the round: what arrives meanwhile shares it
HOLD_MAX_S = 1.0  # arrivals held for the slaves go out after this even if no release came
ROUND = 1024  # units per dispatch round: bounds how long a waiting query's progress lags


def batch_record_count(buf, body_pos: int) -> int:
    return _I32.unpack_from(buf, body_pos + _LAST_OFFSET_DELTA)[0] + 1


def unit_keys(h: UnitHeader, buf, props: dict[str, str], index_record_keys: bool) -> list[str]:
    keys: list[str] = []
    raw = props.get(PROPERTY_KEYS)
    if raw:
        keys.extend(k for k in raw.split(" ") if k)
    uniq = props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    if uniq:
        keys.append(uniq)
    if index_record_keys and h.sys_flag & INNER_BATCH_FLAG:
        keys.extend(record_keys(buf, h.body_pos, h.body_len))
    return keys


def record_keys(buf, pos: int, length: int) -> list[str]:
    """The UTF-8 record keys of the batch at ``buf[pos:pos + length]`` (read in place). A
    ValueError of the buffer itself (unmapped by retention meanwhile) goes to the caller."""
    try:
        raw_keys = record_batch.record_keys_at(buf, pos, length)
    except record_batch.CorruptRecordError as exc:  # still readable; just not indexed
        log.warning("batch_keys_not_indexed", error=str(exc))
        return []
    out = []
    for key in raw_keys:
        if key:
            try:
                out.append(key.decode("utf-8"))
            except UnicodeDecodeError:
                pass
    return out


class Dispatcher(threading.Thread):
    def __init__(self, store, reput_offset: int):
        super().__init__(name="reput-dispatcher", daemon=True)
        self.store = store
        self.reput_offset = reput_offset
        # A binary signal: released by ``kick`` (at most once until the thread takes it), taken
        # by the thread before each round. Lock.release is one C call on the put path, where
        # Condition.notify was a dozen lines of Python per put.
        self._signal = threading.Lock()
        self._signal.acquire()
        self.listeners: list[ArrivalListener] = []  # told where the put happens
        self.lazy_listeners: list[ArrivalListener] = []  # told from this thread's rounds
        # arrivals a SYNC_MASTER put holds back until the slaves acknowledged it ((topic, queue)
        # -> max offset), released by ``wake``
        self._held: dict[tuple[str, int], int] = {}
        self._held_since = 0.0
        self._held_lock = threading.Lock()
        self._stopping = False
        self.round_lock = threading.Lock()  # held for a round; truncation takes it to move reput_offset back

    # -- arrivals (any thread) -----------------------------------------------------------------
    def appended(self, topic: str, queue_id: int, max_offset: int, hold: bool = False) -> None:
        """A put made (topic, queue_id) grow to ``max_offset`` (readable now: called after the
        put lock). Its arrival listeners are told at once, or, with ``hold`` (a SYNC_MASTER put
        whose bytes went straight to the slaves), when ``wake`` releases it."""
        if hold:
            with self._held_lock:
                held = self._held
                if not held:
                    self._held_since = time.monotonic()
                if held.get((topic, queue_id), -1) < max_offset:
                    held[(topic, queue_id)] = max_offset
        else:
            self.tell(topic, queue_id, max_offset)
        self.kick()

    def tell(self, topic: str, queue_id: int, max_offset: int) -> None:
        """Call the arrival listeners now (a listener's failure is logged, never raised)."""
        for cb in self.listeners:
            try:
                cb(topic, queue_id, max_offset)
            except Exception:
                log.exception("arrival_listener_failed", topic=topic, queue_id=queue_id)

    @property
    def holding(self) -> bool:
        """Arrivals are held for a release (``wake``)."""
        return bool(self._held)

    def wake(self) -> None:
        """Release the held arrivals: whoever completes a replication wait calls it (the
        waiting request, an ACK that completed no wait, the ``ha-transfer`` tick)."""
        if self._held:
            with self._held_lock:
                held, self._held = self._held, {}
            for (topic, queue_id), max_offset in held.items():
                self.tell(topic, queue_id, max_offset)

    # -- the index thread ----------------------------------------------------------------------
    def kick(self) -> None:
        # A kick while the thread pauses or runs a round leaves the signal released, so the
        # thread goes round once more when it is done: nothing stored waits for the 1 s timeout.
        signal = self._signal
        if signal.locked():
            try:
                signal.release()
            except RuntimeError:  # another kicker was first: a round is due anyway
                pass

    def wait_dispatched(self, offset: int, timeout: float) -> bool:
        """Make sure everything below commitlog ``offset`` is indexed: the caller runs the round
        itself (after the one in progress, if any: bounded by ``timeout``) rather than waking
        this thread and waiting for it."""
        if self.reput_offset >= offset:
            return True
        if not self.round_lock.acquire(timeout=timeout):
            return self.reput_offset >= offset
        try:
            self.do_reput()
        except Exception:
            log.exception("dispatch_failed", reput_offset=self.reput_offset)
        finally:
            self.round_lock.release()
        return self.reput_offset >= offset

    def add_listener(self, cb: ArrivalListener, lazy: bool = False) -> None:
        if lazy:
            self.lazy_listeners = self.lazy_listeners + [cb]
        else:
            self.listeners = self.listeners + [cb]

    def remove_listener(self, cb: ArrivalListener) -> None:
        self.listeners = [x for x in self.listeners if x is not cb]
        self.lazy_listeners = [x for x in self.lazy_listeners if x is not cb]

    def run(self) -> None:
        while True:
            # What arrives during the pause shares this round: one wake-up and one GIL
            # hand-over per REPUT_INTERVAL_S instead of per message (a reader that needs the
            # index runs the round itself). Without a kick a round a second.
            if not self._stopping and self._signal.acquire(timeout=1.0) and not self._stopping:
                time.sleep(REPUT_INTERVAL_S)
            stopping = self._stopping
            try:
                with self.round_lock:
                    self.do_reput()
            except Exception:
                log.exception("dispatch_failed", reput_offset=self.reput_offset)
            self._release_stale()
            if stopping:
                self.wake()
                return

    def _release_stale(self) -> None:
        """Held arrivals whose release never came (a waiter went away, the broker stepped down)
        go out after HOLD_MAX_S, as the 1 s round of the old dispatcher let them."""
        if self._held and time.monotonic() - self._held_since >= HOLD_MAX_S:
            self.wake()

    def stop(self) -> None:
        self._stopping = True
        self.kick()
        self.join(timeout=30)

    def rewind(self, offset: int) -> None:
        """The commitlog was cut at ``offset`` (a slave truncating): continue from there."""
        with self.round_lock:
            self.reput_offset = min(self.reput_offset, offset)

    def do_reput(self) -> None:
        """Follow the commitlog up to the confirmed offset, in rounds of at most ROUND units:
        build the round's index entries (may decode Kafka records), tell the lazy listeners
        which queues grew, then advance ``reput_offset``."""
        store = self.store
        commitlog = store.commitlog
        index = store.index_service if store.config.message_index_enable else None
        index_record_keys = store.config.index_kafka_record_keys
        limit = store.confirmed_offset
        offset = self.reput_offset
        lazy = self.lazy_listeners
        while offset < limit:
            changed: dict[tuple[str, int], int] = {}
            to_index: list[tuple[int, UnitHeader, object]] = []
            n = 0
            while offset < limit and n < ROUND:
                f = commitlog.mfq.find(offset)
                if f is None:  # deleted by retention: continue at the oldest segment still there
                    first = commitlog.mfq.first()
                    if first is None or first.file_from_offset <= offset:
                        limit = offset
                        break
                    offset = first.file_from_offset
                    continue
                buf = f.buf
                pos = offset - f.file_from_offset
                total, magic = _TOTAL_MAGIC.unpack_from(buf, pos)
                if magic == BLANK_MAGIC_CODE:
                    offset = f.file_from_offset + f.file_size
                    continue
                if magic not in (MAGIC_CODE_V1, MAGIC_CODE_V2) or total <= 0:
                    log.error("dispatch_bad_unit", offset=offset, magic=magic)
                    limit = offset
                    break
                try:
                    h = UnitHeader(buf, pos)
                except (MessageFormatError, struct.error, IndexError) as exc:
                    log.error("dispatch_bad_unit", offset=offset, error=str(exc))
                    limit = offset
                    break
                is_batch = h.sys_flag & INNER_BATCH_FLAG
                if lazy:
                    changed[(h.topic, h.queue_id)] = h.queue_offset + (
                        batch_record_count(buf, h.body_pos) if is_batch else 1)
                if index is not None and (h.props_len or (is_batch and index_record_keys)) \
                        and h.topic not in INTERNAL_TOPICS:  # state records are not looked up by key
                    to_index.append((offset, h, buf))
                offset += total
                n += 1
            for unit_offset, h, buf in to_index:
                try:
                    keys = unit_keys(h, buf, h.properties(buf), index_record_keys)
                except ValueError:  # segment unmapped by retention meanwhile
                    continue
                if keys:
                    index.build_index(h.topic, keys, unit_offset, h.store_timestamp)
            for (topic, queue_id), max_offset in changed.items():
                for cb in lazy:
                    try:
                        cb(topic, queue_id, max_offset)
                    except Exception:
                        log.exception("arrival_listener_failed", topic=topic, queue_id=queue_id)
            self.reput_offset = offset


_SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"  # engine.schedule_message.SCHEDULE_TOPIC
_TIMER_TOPIC = "rmq_sys_wheel_timer"  # engine.timer_message.TIMER_TOPIC


def queue_tags_code(store, h: UnitHeader, props: dict[str, str]) -> int:
    """The consume-queue tags code of a unit built from the commitlog (recovery, a slave): the
    tag's hash, except for staged delayed messages, whose code is their delivery time (as the
    put path writes it; RocketMQ's CommitLog computes it the same way for SCHEDULE_TOPIC)."""
    if h.topic == _SCHEDULE_TOPIC:
        try:
            return h.store_timestamp + store.schedule.delay_ms(int(props.get("DELAY", "1")))
        except ValueError:
            return h.store_timestamp
    if h.topic == _TIMER_TOPIC:
        try:
            return int(props["TIMER_OUT_MS"])
        except (KeyError, ValueError):
            return h.store_timestamp
    return tags_code(props.get(PROPERTY_TAGS))


def dispatch_for_recovery(store, offset: int, h: UnitHeader, buf, index_from: int) -> None:
    """Rebuild what a crash may have lost for one unit: its consume-queue units and index keys."""
    count = batch_record_count(buf, h.body_pos) if h.sys_flag & INNER_BATCH_FLAG else 1
    props = h.properties(buf)
    if props.get("CMPCOPY") == "1":  # a compacted record copied forward (engine/compaction.py)
        from .compaction import dispatch_copy
        dispatch_copy(store, h, offset, queue_tags_code(store, h, props))
        return
    cq = store.find_consume_queue(h.topic, h.queue_id, create=True)
    cq.put(h.queue_offset, offset, h.total_size, queue_tags_code(store, h, props), count)
    if store.config.message_index_enable and offset >= index_from and h.topic not in INTERNAL_TOPICS:
        keys = unit_keys(h, buf, props, store.config.index_kafka_record_keys)
        if keys:
            store.index_service.build_index(h.topic, keys, offset, h.store_timestamp)


__all__ = ["Dispatcher", "dispatch_for_recovery", "queue_tags_code", "batch_record_count", "unit_keys",
           "decode_properties"]
