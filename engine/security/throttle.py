"""Throttled guessing: failed authentications limited per user and per source address, across
connections and listeners (docs/design/security.md, "Throttled guessing").

One ``AuthThrottle`` per node, shared by Kafka SASL, remoting signatures, gRPC signatures and
admin HTTP Basic. A gateway asks ``admit(user, source)`` *before* it checks a presented
credential and reports ``failed(user, source)`` when the check fails; ``admit`` answers 0 (check
it) or the seconds until a check would be admitted (answer the protocol's throttled refusal
without checking anything).

Each user and each source address has a token bucket of failures: ``rate`` tokens a second, at
most ``rate`` in store (``authenticationFailureRatePerUser`` / ``...PerSource``); a check is
admitted while the bucket holds a token, a failure takes one. So however many connections
guess one user's password, at most ``rate`` guesses a second are checked (plus the first
``rate``). ``authenticationLockoutThreshold`` failures of one user within
``authenticationLockoutWindowMs`` lock that user for the window: nothing is checked for it
(from addresses that failed). Addresses are rate-limited only, never locked: many users share
one address behind a NAT, and one of them guessing must not lock the others out.

So that an attack on one user does not lock its owner out, the per-user limit does not apply to
a source address that has had no failure within the lockout window (its first wrong guess
makes it a guessing source like the others): an attacker gains one guess per fresh address,
the owner logging in from a clean address gets in.

Invariants: ``admit`` and ``failed`` hold one lock; a gateway calls them with no await between
``admit``, the check and ``failed``, so concurrent guesses on one event loop cannot all pass
one token; the tables are bounded (``MAX_KEYS``: idle, unlocked keys are dropped first).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable

import structlog

log = structlog.get_logger("rockafka.engine.security")

MAX_KEYS = 100_000


def source_host(peer: str | None) -> str:
    """The address of a peer as gateways spell it (``1.2.3.4:5``, ``ipv4:1.2.3.4:5``,
    ``ipv6:[::1]:5``, ``[::1]:5``), without the port."""
    p = (peer or "?").strip()
    for prefix in ("ipv4:", "ipv6:"):
        if p.startswith(prefix):
            p = p[len(prefix):]
    if p.startswith("["):
        return p[1:p.find("]")] if "]" in p else p
    if p.count(":") == 1:
        return p.rsplit(":", 1)[0]
    return p


@dataclass
class _Bucket:
    tokens: float
    stamp: float
    window_start: float = 0.0
    failures: int = 0  # within the window that began at window_start
    locked_until: float = 0.0
    last_failure: float = -1e18


class AuthThrottle:
    def __init__(self, per_user: float = 5.0, per_source: float = 20.0, lockout_threshold: int = 50,
                 lockout_window_ms: int = 60_000, clock: Callable[[], float] = time.monotonic):
        self.per_user = float(per_user)
        self.per_source = float(per_source)
        self.lockout_threshold = int(lockout_threshold)
        self.window = lockout_window_ms / 1000.0
        self.clock = clock
        self._users: dict[str, _Bucket] = {}
        self._sources: dict[str, _Bucket] = {}
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.per_user > 0 or self.per_source > 0

    def _bucket(self, table: dict[str, _Bucket], key: str, rate: float, now: float, create: bool) -> _Bucket | None:
        b = table.get(key)
        if b is None:
            if not create:
                return None
            if len(table) >= MAX_KEYS:
                self._prune(table, now)
            b = table[key] = _Bucket(rate, now)
            return b
        b.tokens = min(rate, b.tokens + (now - b.stamp) * rate)
        b.stamp = now
        return b

    def _prune(self, table: dict[str, _Bucket], now: float) -> None:
        idle = [k for k, b in table.items() if b.locked_until <= now and now - b.last_failure > self.window]
        for k in idle or list(table)[: len(table) // 2]:
            del table[k]

    def _wait(self, b: _Bucket | None, rate: float, now: float) -> float:
        if b is None or rate <= 0:
            return 0.0
        if b.locked_until > now:
            return b.locked_until - now
        return 0.0 if b.tokens >= 1.0 else (1.0 - b.tokens) / rate

    def admit(self, user: str | None, source: str | None) -> float:
        """0.0 when a credential of ``user`` from ``source`` may be checked now, else the
        seconds until one would be."""
        host = source_host(source)
        now = self.clock()
        with self._lock:
            src = self._bucket(self._sources, host, self.per_source, now, False)
            wait = self._wait(src, self.per_source, now)
            if wait or not user:
                return wait
            if src is None or now - src.last_failure > self.window:
                return 0.0  # a clean source: the owner still gets in while the user is attacked
            return self._wait(self._bucket(self._users, user, self.per_user, now, False), self.per_user, now)

    def failed(self, user: str | None, source: str | None) -> None:
        host = source_host(source)
        now = self.clock()
        with self._lock:
            pairs = [(self._sources, host, self.per_source, "source")]
            if user:
                pairs.append((self._users, user, self.per_user, "user"))
            for table, key, rate, kind in pairs:
                if rate <= 0:
                    continue
                b = self._bucket(table, key, rate, now, True)
                assert b is not None
                b.tokens = max(0.0, b.tokens - 1.0)
                b.last_failure = now
                if now - b.window_start > self.window:
                    b.window_start, b.failures = now, 0
                b.failures += 1
                if (kind == "user" and self.lockout_threshold > 0 and b.failures >= self.lockout_threshold
                        and b.locked_until <= now):
                    b.locked_until = now + self.window
                    b.failures = 0
                    log.warning("authentication_locked_out", kind=kind, key=key, failures=self.lockout_threshold,
                                lockout_window_ms=int(self.window * 1000))

    def clear(self) -> None:
        with self._lock:
            self._users.clear()
            self._sources.clear()
