"""Broker-side queue locks for ordered consumption (RocketMQ's ``RebalanceLockManager``).

A lock is held per (consumer group, queue) by one client id. Owns the lock table only; which
requests take or release locks is the gateway's business.

Invariants:
- at most one client id holds a live lock on a (group, queue) at any time;
- a lock not renewed within ``lock_max_live_ms`` (60 s, RocketMQ's
  ``rocketmq.broker.rebalance.lockMaxLiveTime``) is expired and may be taken by another client;
- the holder renews by locking again; a client may only release its own locks;
- a closed connection does not release its locks (the client may still be consuming on its
  30 s local lock); only UNLOCK or expiry does;
- locks are in memory only, as in RocketMQ: after a broker restart clients re-lock within their
  renewal period (20 s), and the 30 s client-side lock expiry keeps a client from consuming on a
  lock it could not renew.

Queues are identified by neutral tuples ``(topic, broker_name, queue_id)``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Iterable

import structlog

log = structlog.get_logger("rockafka.engine.queue_lock")

QueueKey = tuple[str, str, int]
DEFAULT_LOCK_MAX_LIVE_MS = 60_000


@dataclass
class LockEntry:
    client_id: str
    last_update: float

    def expired(self, now: float, max_live_s: float) -> bool:
        return now - self.last_update > max_live_s


class QueueLockManager:
    def __init__(self, lock_max_live_ms: int = DEFAULT_LOCK_MAX_LIVE_MS) -> None:
        self.max_live_s = max(lock_max_live_ms, 1) / 1000
        self._lock = threading.Lock()
        self._table: dict[str, dict[QueueKey, LockEntry]] = {}

    def try_lock_batch(self, group: str, queues: Iterable[QueueKey], client_id: str) -> set[QueueKey]:
        """Lock (or renew) each queue for ``client_id``; returns the queues it now holds."""
        now = time.monotonic()
        held: set[QueueKey] = set()
        with self._lock:
            table = self._table.setdefault(group, {})
            for q in queues:
                entry = table.get(q)
                if entry is None or entry.client_id == client_id or entry.expired(now, self.max_live_s):
                    if entry is not None and entry.client_id != client_id:
                        log.info("queue_lock_taken_over", group=group, queue=q, old_client=entry.client_id,
                                 new_client=client_id)
                    table[q] = LockEntry(client_id, now)
                    held.add(q)
        return held

    def unlock_batch(self, group: str, queues: Iterable[QueueKey], client_id: str) -> None:
        with self._lock:
            table = self._table.get(group)
            if not table:
                return
            for q in queues:
                entry = table.get(q)
                if entry is not None and entry.client_id == client_id:
                    del table[q]
            if not table:
                del self._table[group]

    def holder(self, group: str, queue: QueueKey) -> str | None:
        with self._lock:
            entry = self._table.get(group, {}).get(queue)
            if entry is None or entry.expired(time.monotonic(), self.max_live_s):
                return None
            return entry.client_id


__all__ = ["QueueLockManager", "QueueKey", "DEFAULT_LOCK_MAX_LIVE_MS"]
