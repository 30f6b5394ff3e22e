"""The read path's shared rules: which topics clients never read or write directly (the internal
topics), and the long-poll wake-ups.

``ArrivalHub`` wakes long-polling reads when the store appends to what they wait on. The store
calls ``on_arrival`` right after a put, from the thread that put (the event loop for an inline
put, a send-queue thread, a slave's replication thread; under SYNC_MASTER whoever completed the
replication wait); only when some read waits on that key is anything done, so idle queues cost
one dict lookup. On the loop's own thread the waiters are woken directly, from another thread a
wake-up is scheduled onto the loop. A waiter registers keys that are either ``(topic,
queue_id)`` (a Kafka fetch) or a bare ``topic`` (a gRPC receive, which takes from any queue of
the topic). ``appended`` is the same wake-up for a write on the loop that wants it explicitly.

A waiter is anything with ``set()``. The three protocols' long polls (a Kafka fetch and share
fetch, a gRPC receive) each register a ``Wakeup``, which the poll awaits with its own timeout
and which resumes the waiting request in the loop turn after ``set()``
(``asyncio.wait_for(event.wait(), t)`` made a task per wait and took three turns: the event's
waiter, the inner task, then the outer wait).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any, Hashable, Iterable

from engine.state_log import CONSUMER_OFFSETS, TRANSACTION_STATE, is_internal  # noqa: F401  (the rule)


def _expire(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(False)


class Wakeup:
    """A long poll's wake-up: ``set()`` (on the loop) ends a pending ``wait``; ``clear()`` before
    looking again so an arrival during the look is not lost."""

    __slots__ = ("_loop", "_fut", "_set")

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self._loop = loop
        self._fut: asyncio.Future | None = None
        self._set = False

    def set(self) -> None:
        self._set = True
        fut = self._fut
        if fut is not None and not fut.done():
            fut.set_result(True)

    def clear(self) -> None:
        self._set = False

    def is_set(self) -> bool:
        return self._set

    async def wait(self, timeout: float) -> bool:
        """True when set (now or within ``timeout`` seconds), False when the time ran out."""
        if self._set:
            return True
        fut = self._fut = self._loop.create_future()
        timer = self._loop.call_later(timeout, _expire, fut)
        try:
            return await fut
        finally:
            timer.cancel()
            self._fut = None


class ArrivalHub:
    def __init__(self, loop: asyncio.AbstractEventLoop | None = None):
        self.loop = loop  # set before the first wake-up; None: wake-ups from threads are dropped
        self.waiters: dict[Hashable, set[Any]] = defaultdict(set)  # Wakeups (anything with set())

    def attach(self, store: Any) -> None:
        store.add_arrival_listener(self.on_arrival)

    def detach(self, store: Any) -> None:
        store.remove_arrival_listener(self.on_arrival)

    def on_arrival(self, topic: str, queue_id: int, max_offset: int, *_: Any) -> None:
        """Store arrival listener (the putting thread)."""
        if self.waiters.get((topic, queue_id)) or self.waiters.get(topic):
            if self.loop is not None and asyncio._get_running_loop() is self.loop:
                self._wake(topic, queue_id)  # no self-pipe round trip for a put on the loop
            else:
                self._call_soon(self._wake, topic, queue_id)

    def topic_changed(self, topic: str) -> None:
        """From any thread: readers of ``topic`` should look again (e.g. an orderly queue unlocked)."""
        if self.waiters.get(topic):
            self._call_soon(self._wake, topic, None)

    def _call_soon(self, fn: Any, *args: Any) -> None:
        if self.loop is None:
            return
        try:
            self.loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # loop closed during shutdown
            pass

    def _wake(self, topic: str, queue_id: int | None) -> None:
        for key in ((topic, queue_id), topic) if queue_id is not None else (topic,):
            for ev in self.waiters.get(key, ()):
                ev.set()

    def appended(self, topic: str, queue_id: int) -> None:
        """On the loop, right after a write stored records (readable once the put returns)."""
        if self.waiters.get((topic, queue_id)) or self.waiters.get(topic):
            self._wake(topic, queue_id)

    def register(self, keys: Iterable[Hashable], ev: Any) -> None:
        for k in keys:
            self.waiters[k].add(ev)

    def wake_all(self) -> None:
        """On the loop: every waiting read returns (shutdown)."""
        for evs in list(self.waiters.values()):
            for ev in evs:
                ev.set()

    def unregister(self, keys: Iterable[Hashable], ev: Any) -> None:
        for k in keys:
            s = self.waiters.get(k)
            if s is not None:
                s.discard(ev)
                if not s:
                    del self.waiters[k]
