"""The master's lease: the clock side of fencing (``docs/design/failover.md``, "Fencing").

A master may acknowledge writes only while its lease is valid. Each heartbeat the controller
leader answered, confirming this broker as master at its epoch, extends the lease to *the
monotonic time the heartbeat was sent* + ``duration_s``. Counting from the send time (not the
answer's arrival) keeps the lease inside the controller's own view: the controller elects a new
master only once ``duration_s`` (+5 % and 50 ms) has passed since it *received* the last
heartbeat, which was sent earlier. Monotonic time runs on while a process is stopped (SIGSTOP), so a resumed zombie finds
its lease expired.

Thread-safe by construction: one float is replaced atomically.
"""

from __future__ import annotations

import time
from typing import Any, Callable


class MasterLease:
    def __init__(self, duration_s: float, clock: Callable[[], float] = time.monotonic,
                 on_expired: Callable[[], None] | None = None):
        self.duration_s = duration_s
        self.clock = clock
        self.expires_at = 0.0  # not valid until the controller confirmed this master once
        self.epoch = 0
        self.expired_count = 0
        self._reported = True
        self._on_expired = on_expired

    def extend(self, sent_at: float, epoch: int) -> None:
        """The controller confirmed this broker as master at ``epoch`` for a heartbeat sent at
        ``sent_at`` (monotonic)."""
        until = sent_at + self.duration_s
        if epoch != self.epoch:
            self.epoch = epoch
            self.expires_at = until
        elif until > self.expires_at:
            self.expires_at = until
        self._reported = False

    def revoke(self) -> None:
        self.expires_at = 0.0
        self._reported = True

    def valid(self) -> bool:
        ok = self.clock() < self.expires_at
        if not ok and not self._reported:
            self._reported = True
            self.expired_count += 1
            if self._on_expired is not None:
                try:
                    self._on_expired()
                except Exception:
                    pass
        return ok

    def remaining_s(self) -> float:
        return max(0.0, self.expires_at - self.clock())

    def view(self) -> dict[str, Any]:
        return {"valid": self.valid(), "remainingMs": int(self.remaining_s() * 1000), "epoch": self.epoch,
                "durationMs": int(self.duration_s * 1000), "expiredCount": self.expired_count}
