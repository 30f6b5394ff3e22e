"""Progress of long work (recovery scans, index rebuilds, retention passes) as log events.

``Progress(event, total, unit)`` logs ``<event>`` with ``done``, ``total``, ``unit``, ``percent``,
``rate_per_s`` and ``eta_s`` at most every ``every_s`` seconds while work advances, and once more
with ``finished=true`` when the work took long enough to have reported at all, so a quick pass
stays silent and a slow one says how far it is and how long it still needs. ``advance``/``update``
cost a subtraction and a clock read; call them per unit of work freely.
"""

from __future__ import annotations

import time

import structlog

log = structlog.get_logger("rockafka.engine.progress")


class Progress:
    def __init__(self, event: str, total: int, unit: str, every_s: float = 5.0, **fields: object):
        self.event, self.total, self.unit, self.every_s = event, max(0, total), unit, every_s
        self.fields = fields
        self.done = 0
        self.started = time.monotonic()
        self._next = self.started + every_s
        self.reported = False

    def update(self, done: int) -> None:
        self.done = done
        now = time.monotonic()
        if now >= self._next:
            self._next = now + self.every_s
            self._report(now, finished=False)

    def advance(self, n: int = 1) -> None:
        self.update(self.done + n)

    def finish(self) -> None:
        if self.reported:
            self._report(time.monotonic(), finished=True)

    def _report(self, now: float, finished: bool) -> None:
        self.reported = True
        elapsed = max(now - self.started, 1e-9)
        rate = self.done / elapsed
        left = max(0, self.total - self.done)
        eta = 0.0 if finished else (left / rate if rate > 0 else None)
        log.info(self.event, done=self.done, total=self.total, unit=self.unit,
                 percent=round(100.0 * self.done / self.total, 1) if self.total else 100.0,
                 rate_per_s=round(rate, 1), eta_s=None if eta is None else round(eta, 1),
                 elapsed_s=round(elapsed, 1), finished=finished, **self.fields)
