"""Flow control pieces in the engine: the put lock's osPageCacheBusyTimeOutMills, the send
queue's waitTimeMillsInSendQueue, and the listeners' request budget.

The node-level test (test_flow_control_node.py) stalls a real disk; here the same rules are
checked where they are decided, with a writer that really holds the commitlog (a put whose
file write blocks) and a queue whose threads are really busy.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from engine.file_io import MemoryFileIO, MemorySegment
from broker.listener_limits import ListenerGuard, RequestBudget
from engine.config import ListenerLimits
from engine.message import Message
from broker.send_queue import SendQueue, SendQueueBusy
from engine.store import PutMessageStatus


class StallingIO(MemoryFileIO):
    """Commitlog writes block while ``stalled`` is clear: a disk that stopped taking writes."""

    def __init__(self):
        super().__init__()
        self.stalled = threading.Event()
        self.stalled.set()
        self.entered = threading.Event()

    def open_segment(self, path, size, random_access=False, log_writes=False):
        seg = super().open_segment(path, size, random_access, log_writes)
        if "/commitlog/" not in path:
            return seg
        io = self

        class Stalling(MemorySegment):
            __slots__ = ()

            def write(self, pos, data):
                if not io.stalled.is_set():
                    io.entered.set()
                    io.stalled.wait(30)
                super().write(pos, data)

        return Stalling(path, self.files[path], self)


def test_a_put_finding_the_commitlog_locked_too_long_is_refused_page_cache_busy(make_store):
    fio = StallingIO()
    store = make_store(file_io=fio, os_page_cache_busy_time_out_mills=300)
    assert store.put_message(Message("PC", b"before")).ok
    fio.stalled.clear()
    stuck = threading.Thread(target=lambda: store.put_message(Message("PC", b"stuck")))
    stuck.start()
    try:
        assert fio.entered.wait(10)
        assert store.put_would_wait
        begin = time.monotonic()
        r = store.put_message(Message("PC", b"refused"))
        assert r.status is PutMessageStatus.OS_PAGE_CACHE_BUSY
        assert r.error.startswith("[PC_SYNCHRONIZED]broker busy, start flow control for a while")
        assert time.monotonic() - begin < 10  # answered, not queued behind the stuck writer
        assert store.is_os_page_cache_busy()
        # while the holder stays stuck, every put is refused
        assert store.put_message(Message("PC", b"refused")).status is PutMessageStatus.OS_PAGE_CACHE_BUSY
        assert store.page_cache_busy_refused == 2
    finally:
        fio.stalled.set()
        stuck.join(10)
    assert store.put_message(Message("PC", b"after")).ok
    got = store.get_message("g", "PC", 0, 0, 10)
    assert got.message_count == 3  # before, stuck (completed once the disk came back), after


def test_a_put_behind_a_slow_holder_is_stored_not_refused(make_store):
    """A holder slower than one busy window (a machine short of CPU) but done within the put's
    wait: the waiting put is stored, not refused with OS_PAGE_CACHE_BUSY."""
    fio = StallingIO()
    store = make_store(file_io=fio, os_page_cache_busy_time_out_mills=300)
    assert store.put_message(Message("PC", b"before")).ok
    fio.stalled.clear()
    slow = threading.Thread(target=lambda: store.put_message(Message("PC", b"slow")))
    slow.start()
    try:
        assert fio.entered.wait(10)
        waiter: list = []
        t = threading.Thread(target=lambda: waiter.append(store.put_message(Message("PC", b"waiting"))))
        t.start()
        deadline = time.monotonic() + 10   # the holder stays in the lock past one window
        while not store.is_os_page_cache_busy() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert store.is_os_page_cache_busy() and not waiter
        fio.stalled.set()                   # ... then finishes
        t.join(10)
        assert waiter and waiter[0].ok, waiter
    finally:
        fio.stalled.set()
        slow.join(10)
    assert store.page_cache_busy_refused == 0
    assert store.get_message("g", "PC", 0, 0, 10).message_count == 3


def test_send_queue_refuses_what_waited_too_long_and_runs_the_rest():
    q = SendQueue(threads=1, wait_time_mills=100)
    release = threading.Event()

    async def scenario():
        blocker = asyncio.ensure_future(q.run(release.wait, 10))
        waiting = [asyncio.ensure_future(q.run(lambda i=i: i)) for i in range(3)]
        await asyncio.sleep(0.3)  # the queued writes wait behind the blocked thread
        release.set()
        assert await blocker is True
        results = await asyncio.gather(*waiting, return_exceptions=True)
        assert all(isinstance(r, SendQueueBusy) for r in results), results
        assert results[0].waited_ms >= 100
        assert str(results[0]).startswith("[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, "
                                          "period in queue: ")
        assert await q.run(lambda: "fresh") == "fresh"  # nothing waited: runs
        assert q.refused == 3 and q.queued == 0

    try:
        asyncio.run(scenario())
    finally:
        q.shutdown()


def test_request_budget_waits_in_order_and_never_strands_a_large_request():
    async def scenario():
        budget = RequestBudget(100)
        order = []

        async def take(name, n, hold):
            held = await budget.acquire(n)
            order.append(name)
            await asyncio.sleep(hold)
            budget.release(held)

        first = asyncio.ensure_future(take("a", 80, 0.05))
        await asyncio.sleep(0)
        rest = [asyncio.ensure_future(take(n, s, 0.01)) for n, s in (("big", 500), ("b", 10), ("c", 90))]
        await asyncio.gather(first, *rest)
        # "big" (larger than the budget) waited for the room to empty, then went alone;
        # "b" did not overtake it although it would have fitted at once
        assert order == ["a", "big", "b", "c"]
        assert budget.used == 0 and budget.waits == 3
        # a waiter that gives up (its connection closed) leaves no budget behind
        held = await budget.acquire(100)
        gone = asyncio.ensure_future(budget.acquire(50))
        await asyncio.sleep(0)
        gone.cancel()
        await asyncio.gather(gone, return_exceptions=True)
        budget.release(held)
        assert budget.used == 0 and budget.waiting == 0

    asyncio.run(scenario())


@pytest.mark.parametrize("limits, ip, fileno, refused", [
    ({"max_connections": 2}, "10.0.0.9", 5, "max_connections"),
    ({"max_connections_per_ip": 1}, "10.0.0.1", 5, "max_connections_per_ip"),
    ({}, "10.0.0.9", 10**9, "open_files"),
])
def test_guard_admits_within_limits_and_counts_refusals(limits, ip, fileno, refused):
    guard = ListenerGuard(ListenerLimits(**limits))
    a = guard.admit("kafka", "10.0.0.1", 5)
    b = guard.admit("broker", "10.0.0.2", 6)
    assert a and b
    assert guard.admit("admin", ip, fileno) is None
    assert guard.refused[refused] == 1
    guard.release(a)
    guard.release(b)
    assert guard.total == 0 and not guard.per_ip
