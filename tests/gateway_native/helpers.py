"""Shared helpers for native gateway tests: bounded polling and a collecting listener."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Callable

from gateway_native.client import ConsumeStatus, LitePullConsumer

FAST = dict(rebalance_interval=1000, persist_consumer_offset_interval=500, poll_name_server_interval=1000,
            heartbeat_broker_interval=1000, broker_suspend_max_time_millis=1000, pull_time_delay_millis_when_exception=200)


def wait_until(cond: Callable[[], object], timeout: float = 30.0, interval: float = 0.05, what: str = "condition") -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class Collector:
    """A push listener that records every delivery (thread-safe)."""

    def __init__(self, status: ConsumeStatus = ConsumeStatus.CONSUME_SUCCESS):
        self.lock = threading.Lock()
        self.messages: list = []
        self.status = status

    def __call__(self, msgs, ctx):
        with self.lock:
            self.messages.extend(msgs)
        return self.status

    def bodies(self) -> list[bytes]:
        with self.lock:
            return [m.body for m in self.messages]

    def count(self) -> int:
        with self.lock:
            return len(self.messages)


def consume_until(namesrv_addr: str, group: str, topic: str, count: int, *, expression: str = "*",
                  listener: Collector | None = None, timeout: float = 30.0, what: str | None = None) -> Collector:
    """Run a push consumer of ``group`` (from the first offset, fast settings) on ``topic`` until
    its listener has seen ``count`` messages; returns the listener."""
    from gateway_native.client import PushConsumer

    col = listener or Collector()
    c = PushConsumer(group, namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET", **FAST)
    c.subscribe(topic, expression)
    c.register_message_listener(col)
    c.start()
    try:
        wait_until(lambda: col.count() >= count, timeout=timeout, what=what or f"{count} messages of {topic}")
    finally:
        c.shutdown()
    return col


def read_native(node, topic: str, wanted) -> list[bytes]:
    """Bodies read from every queue of ``topic`` from the start, until all of ``wanted`` were
    seen (messages stored but never acknowledged may be there too) or a minute passed."""
    wanted = set(wanted)
    with LitePullConsumer(f"full_lp_{uuid.uuid4().hex[:6]}", node.namesrv_addr,
                          consume_from_where="CONSUME_FROM_FIRST_OFFSET", auto_commit=False) as lp:
        lp.assign(lp.fetch_message_queues(topic))
        got: list = []
        seen: set[bytes] = set()
        deadline = time.monotonic() + 60
        while not wanted <= seen and time.monotonic() < deadline:
            batch = [m.body for m in lp.poll(300)]
            got.extend(batch)
            seen.update(batch)
    return got
