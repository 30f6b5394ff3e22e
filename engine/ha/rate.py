"""Bytes a second of a replication connection, for status reads (``haStatus``).

A counter the transfer loop already keeps (bytes sent or received) is sampled when someone asks;
the rate is the average since the previous ask (or since the connection opened, the first time),
so the hot loop does nothing extra and ``mqadmin haStatus -i N`` sees the rate over each N
seconds.
"""

from __future__ import annotations

import threading
import time


class ByteRate:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._t = time.monotonic()
        self._bytes = 0
        self._rate = 0

    def sample(self, total_bytes: int) -> int:
        now = time.monotonic()
        with self._lock:
            elapsed = now - self._t
            if elapsed >= 0.5:  # shorter windows say nothing useful: keep the last value
                self._rate = int((total_bytes - self._bytes) / elapsed)
                self._t, self._bytes = now, total_bytes
            return self._rate
