"""Timer messages: delivery at an arbitrary time (RocketMQ 5's ``TimerMessageStore``).

Owns the staging topic ``rmq_sys_wheel_timer`` (queue 0) and, under ``<root>/timerwheel/``:
``timerlog`` (append-only records), ``wheel`` (a fixed ring of slots) and
``config/timerCheckpoint.json``. No pending timer is a Python object: a million timers are a
million 32-byte log records and a few slots.

Put path (``rewrite``): a message with ``TIMER_DELIVER_MS`` (absolute, ms), ``TIMER_DELAY_SEC``
or ``TIMER_DELAY_MS`` (relative) due more than one precision step away is stored in the timer
topic with ``TIMER_OUT_MS`` (the delivery time), ``REAL_TOPIC`` and ``REAL_QID``; its consume
-queue tags code is the delivery time. Delays beyond ``timerMaxDelaySec`` are refused.

Formats (big-endian):

    wheel    header: MAGIC(4) VERSION(4) SLOTS(4) PRECISION_MS(4) = 16 bytes, then SLOTS slots of
             timeMs(8) + firstPos(8) + lastPos(8) + num(4) + reserved(4) = 32 bytes.
             Slot i holds the records due at the precision step t with t % SLOTS == i, for the
             step written in timeMs (an older step's slot is simply overwritten).
    timerlog records of magic(4) + prevPos(8) + commitlogOffset(8) + size(4) + deliverMs(8) = 32
             bytes; prevPos chains the records of one slot backwards (-1 ends the chain).
    checkpoint JSON: enqueueOffset (next timer-topic unit to read into the wheel), readTimeMs
             (next step to deliver), formatVersion.

One thread does both halves, so they never race: *enqueue* reads the timer topic's new units
(the 20-byte units carry commitlog offset, size and delivery time) into log + wheel; *dequeue*
walks every step from readTimeMs up to now: the slot's chain gives the staged units, which are
read, restored to their real topic/queue (relative-delay properties removed; TIMER_OUT_MS and
TIMER_DELIVER_MS kept, as RocketMQ keeps them, so consumers see the delivery time) and put again.

Invariants and recovery:
- when every logged record is due before readTimeMs and nothing is left to enqueue, the log is
  truncated to empty, so its size follows the timers pending at once, not all timers ever;
- the wheel has twice as many steps as the longest allowed delay, so a pending record's slot is
  never reused before it is due;
- a record due before readTimeMs goes into readTimeMs's slot (delivered on the next pass);
- a chunk of records is written to the log before the wheel slots point at them;
- the checkpoint is written after the log and wheel are flushed (every 0.5 s at most while
  there is work, and at stop); after a crash, enqueue resumes
  at the checkpoint's offset, so records may be appended twice: a slot's chain is de-duplicated
  by commitlog offset when delivered. Steps between the checkpoint's readTimeMs and the crash
  are delivered again (at least once, as RocketMQ).
"""

from __future__ import annotations

import mmap
import os
import struct
import threading
import time
from typing import Any

import structlog

from .config_manager import ConfigManager
from .message import (
    Message, PROPERTY_REAL_QUEUE_ID, PROPERTY_REAL_TOPIC, PROPERTY_TIMER_DELAY_MS, PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DELIVER_MS, PROPERTY_TIMER_DEL_UNIQKEY, PROPERTY_TIMER_OUT_MS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
)
from .schedule_message import restore_message

log = structlog.get_logger("rockafka.engine.timer")

TIMER_TOPIC = "rmq_sys_wheel_timer"
TIMER_PROPERTIES = (PROPERTY_TIMER_DELIVER_MS, PROPERTY_TIMER_DELAY_SEC, PROPERTY_TIMER_DELAY_MS)

FORMAT_VERSION = 1
_WHEEL_MAGIC = 0x54574831  # "TWH1"
_LOG_MAGIC = 0x544C4731  # "TLG1"
_HEADER = struct.Struct(">iiii")
_SLOT = struct.Struct(">qqqii")
_RECORD = struct.Struct(">iqqiq")
SLOT_SIZE = _SLOT.size  # 32
RECORD_SIZE = _RECORD.size  # 32
TICK_S = 0.1
PERSIST_INTERVAL_S = 0.5  # log + wheel flush and checkpoint, at most this often (and at stop)


def recall_key(topic: str, uniq_key: str) -> str:
    """RocketMQ's TimerMessageStore.buildDeleteKey."""
    return f"{topic}+{uniq_key}"


class TimerMessageError(ValueError):
    """A timer property that is not a number, or a delay beyond timerMaxDelaySec."""


class TimerCheckpoint(ConfigManager):
    file_name = "timerCheckpoint.json"

    def __init__(self, config_dir: Any):
        super().__init__(config_dir)
        self.enqueue_offset = 0
        self.read_time_ms = -1
        self.max_step_ms = -1  # the latest step any record of the log is due at

    def encode(self) -> dict[str, Any]:
        return {"formatVersion": FORMAT_VERSION, "enqueueOffset": self.enqueue_offset, "readTimeMs": self.read_time_ms,
                "maxStepMs": self.max_step_ms}

    def decode(self, doc: dict[str, Any]) -> None:
        self.enqueue_offset = int(doc.get("enqueueOffset", 0))
        self.read_time_ms = int(doc.get("readTimeMs", -1))
        self.max_step_ms = int(doc.get("maxStepMs", -1))


class TimerWheel:
    """The mmap'd ring of slots; ``slot(step)`` is valid only when its timeMs equals the step's."""

    def __init__(self, path: str, slots: int, precision_ms: int):
        self.slots = slots
        self.precision_ms = precision_ms
        size = _HEADER.size + slots * SLOT_SIZE
        fresh = not os.path.exists(path) or os.path.getsize(path) == 0
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        if fresh:
            os.ftruncate(self._fd, size)
        elif os.path.getsize(path) != size:
            os.close(self._fd)
            raise TimerMessageError(f"{path} was made for another wheel size; timerMaxDelaySec / timerPrecisionMs "
                                    "changed while timers were pending (move the directory away to start afresh)")
        self.buf = mmap.mmap(self._fd, size)
        if fresh:
            _HEADER.pack_into(self.buf, 0, _WHEEL_MAGIC, FORMAT_VERSION, slots, precision_ms)
        else:
            magic, version, n, prec = _HEADER.unpack_from(self.buf, 0)
            if magic != _WHEEL_MAGIC or version != FORMAT_VERSION or n != slots or prec != precision_ms:
                self.close()
                raise TimerMessageError(f"{path} is not a timer wheel of {slots} slots x {precision_ms} ms")

    def _pos(self, time_ms: int) -> int:
        return _HEADER.size + (time_ms // self.precision_ms) % self.slots * SLOT_SIZE

    def get(self, time_ms: int) -> tuple[int, int, int]:
        """(firstPos, lastPos, num) of the step, or (-1, -1, 0) when the slot holds another step."""
        t, first, last, num, _ = _SLOT.unpack_from(self.buf, self._pos(time_ms))
        if t != time_ms:
            return -1, -1, 0
        return first, last, num

    def put(self, time_ms: int, first: int, last: int, num: int) -> None:
        _SLOT.pack_into(self.buf, self._pos(time_ms), time_ms, first, last, num, 0)

    def flush(self) -> None:
        self.buf.flush()

    def close(self) -> None:
        try:
            self.buf.close()
        finally:
            os.close(self._fd)


class TimerLog:
    """Append-only 32-byte records, read and written with pread/pwrite."""

    def __init__(self, path: str):
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        size = os.fstat(self._fd).st_size
        self.end = size - size % RECORD_SIZE  # a torn last record is dropped

    def append(self, prev_pos: int, commitlog_offset: int, size: int, deliver_ms: int) -> int:
        pos = self.end
        self.append_records(_RECORD.pack(_LOG_MAGIC, prev_pos, commitlog_offset, size, deliver_ms))
        return pos

    def append_records(self, records: bytes | bytearray) -> None:
        """Records packed by the caller, the first at position ``end`` (one write for many)."""
        written = os.pwrite(self._fd, records, self.end)
        if written != len(records):
            raise OSError(f"short write to the timer log: {written} of {len(records)} bytes")
        self.end += written

    def read(self, pos: int) -> tuple[int, int, int, int] | None:
        """(prevPos, commitlogOffset, size, deliverMs), or None for a position that holds no record."""
        if pos < 0 or pos + RECORD_SIZE > self.end:
            return None
        raw = os.pread(self._fd, RECORD_SIZE, pos)
        if len(raw) != RECORD_SIZE:
            return None
        magic, prev, phy, size, deliver = _RECORD.unpack(raw)
        return None if magic != _LOG_MAGIC else (prev, phy, size, deliver)

    def flush(self) -> None:
        os.fdatasync(self._fd)

    def reset(self) -> None:
        """Drop every record (all were delivered); the file starts again at position 0."""
        os.ftruncate(self._fd, 0)
        self.end = 0

    def close(self) -> None:
        os.close(self._fd)


class TimerMessageStore:
    def __init__(self, store: Any):
        self.store = store
        cfg = store.config
        self.precision_ms = max(int(getattr(cfg, "timer_precision_ms", 1000)), 1)
        self.max_delay_ms = int(getattr(cfg, "timer_max_delay_sec", 3 * 86400)) * 1000
        self.dir = os.path.join(store.root, "timerwheel")
        self.checkpoint = TimerCheckpoint(store.config_dir)
        self.wheel: TimerWheel | None = None
        self.timer_log: TimerLog | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.follower = False

    # -- put path ------------------------------------------------------------------------------
    def rewrite(self, msg: Message) -> tuple[Message, int] | None:
        props = msg.properties
        if not props or msg.topic == TIMER_TOPIC or PROPERTY_TIMER_OUT_MS in props:
            return None
        now = int(time.time() * 1000)
        try:
            if PROPERTY_TIMER_DELIVER_MS in props:
                deliver = int(props[PROPERTY_TIMER_DELIVER_MS])
            elif PROPERTY_TIMER_DELAY_SEC in props:
                deliver = now + int(props[PROPERTY_TIMER_DELAY_SEC]) * 1000
            elif PROPERTY_TIMER_DELAY_MS in props:
                deliver = now + int(props[PROPERTY_TIMER_DELAY_MS])
            else:
                return None
        except ValueError:
            raise TimerMessageError("timer property is not an integer: " + ", ".join(
                f"{k}={props[k]!r}" for k in TIMER_PROPERTIES if k in props)) from None
        if deliver - now > self.max_delay_ms:
            raise TimerMessageError(f"delivery time {deliver} is {(deliver - now) // 1000} s away, more than "
                                    f"timerMaxDelaySec {self.max_delay_ms // 1000}")
        if deliver - now <= self.precision_ms:
            return None  # due now: stored as an ordinary message, as RocketMQ does
        staged_props = dict(props)
        staged_props[PROPERTY_TIMER_OUT_MS] = str(deliver)
        staged_props[PROPERTY_REAL_TOPIC] = msg.topic
        staged_props[PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
        staged = Message(topic=TIMER_TOPIC, body=msg.body, tags=msg.tags, keys=msg.keys, properties=staged_props,
                         queue_id=0, flag=msg.flag, sys_flag=msg.sys_flag, born_timestamp=msg.born_timestamp,
                         born_host=msg.born_host, store_host=msg.store_host, reconsume_times=msg.reconsume_times,
                         prepared_transaction_offset=msg.prepared_transaction_offset)
        return staged, deliver

    def recall(self, topic: str, uniq_key: str, deliver_ms: int) -> None:
        """Cancel the staged message ``uniq_key`` of ``topic`` due at ``deliver_ms`` (RocketMQ 5.3's
        RecallMessage): a marker with ``TIMER_DEL_UNIQKEY`` is staged for the same step, and the
        step's delivery leaves the message out. Raises ``TimerMessageError`` when the delivery
        time has come (or is within one step), since the message may already be out."""
        now = int(time.time() * 1000)
        if deliver_ms - now <= self.precision_ms:
            raise TimerMessageError(f"the message is due at {deliver_ms}, too late to recall (now {now})")
        marker = Message(topic=topic, body=b"", properties={
            PROPERTY_TIMER_DELIVER_MS: str(deliver_ms), PROPERTY_TIMER_DEL_UNIQKEY: recall_key(topic, uniq_key),
            PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: f"recall-{uniq_key}"})
        result = self.store.put_message(marker)
        if not result.stored:
            raise TimerMessageError(f"recall marker not stored: {result.status.name} {result.error or ''}".strip())

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        os.makedirs(self.dir, exist_ok=True)
        self.checkpoint.load()
        slots = max(2 * self.max_delay_ms // self.precision_ms, 16)
        self.wheel = TimerWheel(os.path.join(self.dir, "wheel"), slots, self.precision_ms)
        self.timer_log = TimerLog(os.path.join(self.dir, "timerlog"))
        if self.checkpoint.read_time_ms < 0:
            self.checkpoint.read_time_ms = self._step(int(time.time() * 1000))
        # A slave files the replicated timer messages into its own wheel but never delivers (its
        # master does, and the delivered copies arrive by replication); its read time follows
        # the master's (engine.ha.metadata), so a slave made master later resumes from there.
        self.follower = self.store.config.broker_role == "SLAVE"
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="timer-wheel", daemon=True)
        self._thread.start()
        log.info("timer_started", slots=slots, precision_ms=self.precision_ms,
                 enqueue_offset=self.checkpoint.enqueue_offset, read_time_ms=self.checkpoint.read_time_ms,
                 timerlog_bytes=self.timer_log.end)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        if self.wheel is not None:
            self._persist()
            self.wheel.close()
            self.timer_log.close()
            self.wheel = self.timer_log = None

    def _step(self, ms: int) -> int:
        return ms - ms % self.precision_ms

    def pending(self) -> int:
        """Timer messages not yet in the wheel plus those in the wheel not yet due (approximate)."""
        cq = self.store.find_consume_queue(TIMER_TOPIC, 0)
        return 0 if cq is None else max(0, cq.max_offset - self.checkpoint.enqueue_offset)

    def _persist(self) -> None:
        self.timer_log.flush()
        self.wheel.flush()
        self.checkpoint.persist()

    def _run(self) -> None:
        dirty = False
        last_persist = time.monotonic()
        while not self._stop.wait(TICK_S):
            try:
                # a backlog is filed in rounds without waiting for the tick
                for _ in range(1000):
                    moved = self.enqueue()
                    dirty |= moved
                    if not self.follower:
                        dirty |= self.dequeue()
                    if not moved or self._stop.is_set():
                        break
                    if dirty and time.monotonic() - last_persist >= PERSIST_INTERVAL_S:
                        self._persist()
                        dirty, last_persist = False, time.monotonic()
                if dirty and time.monotonic() - last_persist >= PERSIST_INTERVAL_S:
                    self._persist()
                    dirty, last_persist = False, time.monotonic()
            except Exception:
                log.exception("timer_round_failed")

    # -- enqueue: timer topic -> log + wheel -----------------------------------------------------
    def enqueue(self, max_units: int = 4096) -> bool:
        cq = self.store.find_consume_queue(TIMER_TOPIC, 0)
        if cq is None:
            return False
        cp = self.checkpoint
        offset = max(cp.enqueue_offset, cq.min_offset)
        start = offset
        wheel, tlog = self.wheel, self.timer_log
        precision, read_time = self.precision_ms, cp.read_time_ms
        pack, magic = _RECORD.pack, _LOG_MAGIC
        while offset < cq.max_offset and offset - start < max_units:
            units = cq.read_units(offset, 1024)
            if not units:
                break
            # the chunk's records are written to the log before any slot points at them, so a
            # crash never leaves a slot naming a record that is not there
            records = bytearray()
            slots: dict[int, list[int]] = {}
            pos = tlog.end
            for phy, size, deliver_ms in units:
                step = max(deliver_ms - deliver_ms % precision, read_time)
                slot = slots.get(step)
                if slot is None:
                    slot = slots[step] = list(wheel.get(step))
                records += pack(magic, slot[1], phy, size, deliver_ms)
                if slot[0] < 0:
                    slot[0] = pos
                slot[1] = pos
                slot[2] += 1
                pos += RECORD_SIZE
            tlog.append_records(records)
            for step, (first, last, num) in slots.items():
                wheel.put(step, first, last, num)
            cp.max_step_ms = max(cp.max_step_ms, max(slots))
            offset += len(units)
        cp.enqueue_offset = offset
        return offset != start

    # -- dequeue: due slots -> real topics ------------------------------------------------------
    def dequeue(self, now_ms: int | None = None) -> bool:
        cp = self.checkpoint
        now = int(time.time() * 1000) if now_ms is None else now_ms
        moved = False
        while cp.read_time_ms <= now and not self._stop.is_set():
            if not self._deliver_step(cp.read_time_ms):
                break  # the store refused a write: try this step again on the next tick
            cp.read_time_ms += self.precision_ms
            moved = True
        if moved and cp.read_time_ms > cp.max_step_ms and self.timer_log.end > 0 and self._caught_up():
            # every record was delivered: the log restarts empty, so it stays as small as the
            # timers pending at once. Slots still name older steps, never read again because
            # the checkpoint (readTimeMs past them) is written before the log is emptied.
            self._persist()
            self.timer_log.reset()
        return moved

    def _caught_up(self) -> bool:
        cq = self.store.find_consume_queue(TIMER_TOPIC, 0)
        return cq is None or self.checkpoint.enqueue_offset >= cq.max_offset

    def _deliver_step(self, step: int) -> bool:
        first, last, num = self.wheel.get(step)
        if last < 0:
            return True
        chain: list[tuple[int, int]] = []
        seen: set[int] = set()
        pos = last
        # bounded by the records the slot counted plus re-enqueued duplicates after a crash
        for _ in range(num + 1_000_000):
            rec = self.timer_log.read(pos)
            if rec is None:
                break
            prev, phy, size, _deliver = rec
            if phy not in seen:
                seen.add(phy)
                chain.append((phy, size))
            if pos == first or prev < 0:
                break
            pos = prev
        store = self.store
        exts = []
        recalled: set[str] = set()
        for phy, size in reversed(chain):  # arrival order
            ext = store.look_message_by_offset(phy, size)
            if ext is None:
                log.warning("timer_unit_unreadable", commitlog_offset=phy, step=step)
                continue
            marker = ext.properties.get(PROPERTY_TIMER_DEL_UNIQKEY)
            if marker is not None:  # a recall: lands in the same step as the message it cancels
                recalled.add(marker)
            else:
                exts.append(ext)
        for ext in exts:
            if recalled and recall_key(ext.properties.get(PROPERTY_REAL_TOPIC, ext.topic),
                                       ext.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "")) in recalled:
                log.info("timer_message_recalled", topic=ext.properties.get(PROPERTY_REAL_TOPIC),
                         msg_id=ext.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX), step=step)
                continue
            # as RocketMQ, the delivered message keeps TIMER_OUT_MS (it also stops a re-put from
            # being staged again) and TIMER_DELIVER_MS: consumers read its delivery time
            msg = restore_message(ext, (PROPERTY_TIMER_DELAY_SEC, PROPERTY_TIMER_DELAY_MS))
            msg.properties.setdefault(PROPERTY_TIMER_DELIVER_MS, msg.properties.get(PROPERTY_TIMER_OUT_MS, ""))
            result = store.put_message(msg)
            if not result.stored:
                log.warning("timer_redeliver_refused", step=step, status=result.status.name, error=result.error)
                return False
        return True
