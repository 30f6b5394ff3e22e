"""Delayed delivery by delay level (RocketMQ's ``ScheduleMessageService``).

Owns ``SCHEDULE_TOPIC_XXXX`` (one queue per level: queue id = level - 1) and
``config/delayOffset.json`` (``{"offsetTable": {level: next offset to deliver}}``).

Put path (``rewrite``, called by ``MessageStore.put_message`` before encoding): a message whose
``DELAY`` property is a level > 0 is stored in ``SCHEDULE_TOPIC_XXXX`` queue ``level - 1``
instead, with ``REAL_TOPIC`` / ``REAL_QID`` holding where it belongs; a level above the
configured maximum becomes the maximum. Its consume-queue unit carries the delivery time (ms)
in the tags-code field, as RocketMQ's does, so the delivery thread decides "due or not" from
the 20-byte unit without reading the commitlog.

Delivery (one thread, a tick every ``DELIVER_TICK_S``): per level, units from the level's
offset on whose delivery time has passed are read, restored (topic, queue id, properties
without DELAY / REAL_*) and put again — they get a new offset in the real queue and become
visible there. Units of one level are in delivery-time order (same delay, arrival order), so
the first unit not due ends that level's round.

Invariants:
- the level offset only moves past a unit after its restored copy was put;
- offsets are persisted every ``persist_interval_ms`` and at stop; a crash can deliver a
  message again (at least once, as RocketMQ), never lose one;
- a unit that cannot be read (deleted by retention) is skipped and logged.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any

import structlog

from .config_manager import ConfigManager
from .message import (PROPERTY_DELAY_TIME_LEVEL, PROPERTY_KEYS, PROPERTY_REAL_QUEUE_ID, PROPERTY_REAL_TOPIC,
                      PROPERTY_TAGS, Message, MessageExt)

log = structlog.get_logger("rockafka.engine.schedule")

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
DELIVER_TICK_S = 0.1  # RocketMQ checks each level every 100 ms
_UNIT_RE = re.compile(r"^(\d+)([smhd])$")
_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


class DelayLevelError(ValueError):
    """``messageDelayLevel`` is not a space separated list like ``1s 5s 1m 2h``."""


def parse_delay_levels(spec: str) -> list[int]:
    """``"1s 5s 1m"`` -> ``[1000, 5000, 60000]`` (level 1 is index 0)."""
    out = []
    for word in spec.split():
        m = _UNIT_RE.match(word.strip().lower())
        if not m:
            raise DelayLevelError(f"messageDelayLevel entry {word!r} is not <number><s|m|h|d>")
        out.append(int(m.group(1)) * _UNIT_MS[m.group(2)])
    if not out:
        raise DelayLevelError("messageDelayLevel is empty")
    return out


class DelayOffsetTable(ConfigManager):
    """``config/delayOffset.json``: next offset to deliver, per delay level."""

    file_name = "delayOffset.json"

    def __init__(self, config_dir: Any):
        super().__init__(config_dir)
        self.table: dict[int, int] = {}

    def encode(self) -> dict[str, Any]:
        return {"offsetTable": {str(k): v for k, v in sorted(self.table.items())}}

    def decode(self, doc: dict[str, Any]) -> None:
        self.table = {int(k): int(v) for k, v in (doc.get("offsetTable") or {}).items()}


def restore_message(ext: MessageExt, drop: tuple[str, ...]) -> Message:
    """The message as it was before staging: real topic and queue, staging properties removed."""
    props = dict(ext.properties)
    topic = props.pop(PROPERTY_REAL_TOPIC, ext.topic)
    try:
        queue_id = int(props.pop(PROPERTY_REAL_QUEUE_ID, ext.queue_id))
    except ValueError:
        queue_id = 0
    for name in drop:
        props.pop(name, None)
    tags = props.pop(PROPERTY_TAGS, None)
    keys = props.pop(PROPERTY_KEYS, None)
    return Message(topic=topic, body=ext.body, tags=tags, keys=keys.split(" ") if keys else None,
                   properties=props, queue_id=queue_id, flag=ext.flag, sys_flag=ext.sys_flag,
                   born_timestamp=ext.born_timestamp, born_host=ext.born_host, store_host=ext.store_host,
                   reconsume_times=ext.reconsume_times, prepared_transaction_offset=ext.prepared_transaction_offset)


class ScheduleMessageService:
    def __init__(self, store: Any):
        self.store = store
        self.levels = parse_delay_levels(store.config.message_delay_level)
        self.offsets = DelayOffsetTable(store.config_dir)
        self.persist_interval = 1.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def max_level(self) -> int:
        return len(self.levels)

    def delay_ms(self, level: int) -> int:
        return self.levels[min(max(level, 1), self.max_level) - 1]

    # -- put path ------------------------------------------------------------------------------
    def rewrite(self, msg: Message) -> tuple[Message, int] | None:
        """Staged copy and its consume-queue tags code (the delivery time), or None: not delayed."""
        raw = msg.properties.get(PROPERTY_DELAY_TIME_LEVEL) if msg.properties else None
        if raw is None or msg.topic == SCHEDULE_TOPIC:
            return None
        try:
            level = int(raw)
        except ValueError:
            return None  # RocketMQ ignores a DELAY it cannot parse
        if level <= 0:
            return None
        level = min(level, self.max_level)
        props = dict(msg.properties)
        props[PROPERTY_DELAY_TIME_LEVEL] = str(level)
        props[PROPERTY_REAL_TOPIC] = msg.topic
        props[PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
        staged = Message(topic=SCHEDULE_TOPIC, body=msg.body, tags=msg.tags, keys=msg.keys, properties=props,
                         queue_id=level - 1, flag=msg.flag, sys_flag=msg.sys_flag, born_timestamp=msg.born_timestamp,
                         born_host=msg.born_host, store_host=msg.store_host, reconsume_times=msg.reconsume_times,
                         prepared_transaction_offset=msg.prepared_transaction_offset)
        return staged, int(time.time() * 1000) + self.delay_ms(level)

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        self.offsets.load()
        if self.store.config.broker_role == "SLAVE":
            return  # only a master delivers; a slave's copy arrives by replication
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="schedule-deliver", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        self.offsets.persist()

    def pending(self) -> int:
        """Messages staged and not yet delivered, all levels."""
        return sum(self.pending_by_level().values())

    def pending_by_level(self) -> dict[int, int]:
        """Delay level -> messages staged there and not yet delivered (levels with a queue)."""
        out = {}
        for level in range(1, self.max_level + 1):
            cq = self.store.find_consume_queue(SCHEDULE_TOPIC, level - 1)
            if cq is not None:
                out[level] = max(0, cq.max_offset - max(self.offsets.table.get(level, 0), cq.min_offset))
        return out

    def _run(self) -> None:
        last_persist = time.monotonic()
        while not self._stop.wait(DELIVER_TICK_S):
            try:
                moved = False
                for level in range(1, self.max_level + 1):
                    moved |= self.deliver_level(level)
                if moved and time.monotonic() - last_persist >= self.persist_interval:
                    self.offsets.persist()
                    last_persist = time.monotonic()
            except Exception:
                log.exception("schedule_deliver_failed")

    def deliver_level(self, level: int, now_ms: int | None = None) -> bool:
        """Deliver the due messages of one level; True when the level's offset moved."""
        store = self.store
        cq = store.find_consume_queue(SCHEDULE_TOPIC, level - 1)
        if cq is None:
            return False
        offset = max(self.offsets.table.get(level, 0), cq.min_offset)
        start = offset
        now = int(time.time() * 1000) if now_ms is None else now_ms
        while offset < cq.max_offset and not self._stop.is_set():
            units = cq.read_units(offset, 256)
            if not units:
                break
            for phy, size, deliver_ms in units:
                if deliver_ms > now:
                    self._set_offset(level, offset, start)
                    return offset != start
                ext = store.look_message_by_offset(phy, size)
                if ext is None:
                    log.warning("schedule_unit_unreadable", level=level, offset=offset, commitlog_offset=phy)
                else:
                    result = store.put_message(restore_message(ext, (PROPERTY_DELAY_TIME_LEVEL,)))
                    if not result.stored:
                        # the store refuses writes now (disk full, stopping): retry on a later tick
                        log.warning("schedule_redeliver_refused", level=level, offset=offset,
                                    status=result.status.name, error=result.error)
                        self._set_offset(level, offset, start)
                        return offset != start
                offset += 1
        self._set_offset(level, offset, start)
        return offset != start

    def _set_offset(self, level: int, offset: int, start: int) -> None:
        if offset != start:
            with self.offsets.lock:
                self.offsets.table[level] = offset
