"""Message counters the operator tools read (RocketMQ's ``BrokerStatsManager`` / ``BrokerStats``).

Owns, per broker, in memory (they restart from zero with the node, as RocketMQ's do):
- **puts** per topic, counted from the store's arrival listener (every message that reaches a
  consume queue, whichever front wrote it: remoting, Kafka or gRPC) as the growth of each
  queue's max offset;
- **gets** per ``topic@group``, counted by the read paths that hand messages out (remoting pull
  and POP; they call ``got``);
- per key, one bucket per minute for the last 24 hours, from which ``stats_data`` answers
  VIEW_BROKER_STATS_DATA (``statsMinute`` / ``statsHour`` / ``statsDay``: sum, tps, avgpt) and
  ``tps`` the putTps / getTransferredTps of GET_BROKER_RUNTIME_INFO;
- totals at the start of today and yesterday (``msgPutTotalTodayMorning`` ...), rolled at local
  midnight.

Thread-safety: ``on_arrival`` runs on the store's dispatch thread (a lazy listener), ``got`` on the event loop or
a store worker; one lock guards the tables. Internal topics (``rmq_sys_*``, the schedule and
transaction topics) are not counted, as RocketMQ does not count them as user traffic.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from datetime import datetime
from typing import Any

TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
_MINUTES_KEPT = 24 * 60
_UNCOUNTED_PREFIXES = ("rmq_sys_", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_", "TBW102")


class _Series:
    """Per-minute counts for the last 24 h."""

    __slots__ = ("buckets",)

    def __init__(self) -> None:
        self.buckets: deque[list[int]] = deque()  # [minute index, count]

    def add(self, minute: int, n: int) -> None:
        if self.buckets and self.buckets[-1][0] == minute:
            self.buckets[-1][1] += n
        else:
            self.buckets.append([minute, n])
            while self.buckets and self.buckets[0][0] <= minute - _MINUTES_KEPT:
                self.buckets.popleft()

    def since(self, first_minute: int) -> int:
        return sum(c for m, c in self.buckets if m >= first_minute)


class BrokerStats:
    def __init__(self, store: Any):
        self.store = store
        self._lock = threading.Lock()
        # where each queue stood when counting began: what arrives after it is counted in full
        self._max_offsets: dict[tuple[str, int], int] = {k: cq.max_offset for k, cq in store.consume_queues().items()}
        self._series: dict[tuple[str, str], _Series] = {}
        self._seconds: deque[tuple[int, int, int]] = deque()  # (second, puts, gets): last 10 min
        self.put_total = 0
        self.get_total = 0
        self._day = self._today()
        self._day_checked = int(time.time())  # the second of the last day check (one a second)
        self._put_today_morning = self._put_yesterday_morning = 0
        self._get_today_morning = self._get_yesterday_morning = 0

    @staticmethod
    def _today() -> str:
        return datetime.now().strftime("%Y-%m-%d")

    def _roll_day(self) -> None:
        today = self._today()
        if today != self._day:
            self._day = today
            self._put_yesterday_morning, self._put_today_morning = self._put_today_morning, self.put_total
            self._get_yesterday_morning, self._get_today_morning = self._get_today_morning, self.get_total

    def _count(self, name: str, key: str, n: int, put: bool) -> None:
        now = time.time()
        minute = int(now // 60)
        sec = int(now)
        with self._lock:
            if sec != self._day_checked:  # the local date (strftime) once a second, not per count:
                self._day_checked = sec  # with thousands of queues this runs for nearly every message
                self._roll_day()
            s = self._series.get((name, key))
            if s is None:
                s = self._series[(name, key)] = _Series()
            s.add(minute, n)
            if self._seconds and self._seconds[-1][0] == sec:
                _, p, g = self._seconds[-1]
                self._seconds[-1] = (sec, p + (n if put else 0), g + (0 if put else n))
            else:
                self._seconds.append((sec, n if put else 0, 0 if put else n))
                while self._seconds and self._seconds[0][0] <= sec - 600:
                    self._seconds.popleft()
            if put:
                self.put_total += n
            else:
                self.get_total += n

    # -- feeds ------------------------------------------------------------------------------
    def on_arrival(self, topic: str, queue_id: int, max_offset: int, *_: Any) -> None:
        """Store arrival listener (dispatch thread): count what a queue grew by."""
        if topic.startswith(_UNCOUNTED_PREFIXES):
            return
        key = (topic, queue_id)
        last = self._max_offsets.get(key, 0)  # a queue created since counting began starts at 0
        self._max_offsets[key] = max_offset
        if max_offset > last:
            self._count(TOPIC_PUT_NUMS, topic, max_offset - last, put=True)

    def got(self, group: str, topic: str, n: int) -> None:
        if n > 0 and not topic.startswith(_UNCOUNTED_PREFIXES):
            self._count(GROUP_GET_NUMS, f"{topic}@{group}", n, put=False)

    # -- answers ----------------------------------------------------------------------------
    def tps(self, window_s: int, put: bool) -> float:
        now = int(time.time())
        with self._lock:
            total = sum((p if put else g) for s, p, g in self._seconds if s > now - window_s)
        return total / window_s

    def tps_text(self, put: bool) -> str:
        """RocketMQ's "10 s, 1 min, 10 min" TPS triple, space-separated."""
        return " ".join(f"{self.tps(w, put):.2f}" for w in (10, 60, 600))

    def totals(self) -> dict[str, str]:
        with self._lock:
            self._roll_day()
            return {"msgPutTotalYesterdayMorning": str(self._put_yesterday_morning),
                    "msgPutTotalTodayMorning": str(self._put_today_morning),
                    "msgPutTotalTodayNow": str(self.put_total),
                    "msgGetTotalYesterdayMorning": str(self._get_yesterday_morning),
                    "msgGetTotalTodayMorning": str(self._get_today_morning),
                    "msgGetTotalTodayNow": str(self.get_total)}

    def stats_data(self, name: str, key: str) -> dict[str, Any] | None:
        """BrokerStatsData for VIEW_BROKER_STATS_DATA, or None when nothing was counted."""
        with self._lock:
            s = self._series.get((name, key))
            if s is None:
                return None
            minute = int(time.time() // 60)
            out = {}
            for field, minutes in (("statsMinute", 1), ("statsHour", 60), ("statsDay", _MINUTES_KEPT)):
                total = s.since(minute - minutes + 1)
                out[field] = {"sum": total, "tps": round(total / (minutes * 60), 2), "avgpt": 0.0}
            return out

    def keys(self, name: str) -> list[str]:
        with self._lock:
            return sorted(k for n, k in self._series if n == name)


def for_broker(broker: Any) -> BrokerStats:
    stats = getattr(broker, "_stats", None)
    if stats is None:
        stats = broker._stats = BrokerStats(broker.store)
        broker.store.add_arrival_listener(stats.on_arrival, lazy=True)  # a counter: the dispatcher's rounds
    return stats
