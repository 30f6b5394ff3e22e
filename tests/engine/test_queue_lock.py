"""Broker-side queue locks: one holder per (group, queue), renewal, expiry, own-lock release."""

from __future__ import annotations

import time

from engine.queue_lock import QueueLockManager

Q0, Q1 = ("T", "broker-a", 0), ("T", "broker-a", 1)


def test_exclusive_renewable_and_released_by_holder_only():
    m = QueueLockManager()
    assert m.try_lock_batch("g", [Q0], "c1") == {Q0}
    assert m.try_lock_batch("g", [Q0, Q1], "c2") == {Q1}
    assert m.try_lock_batch("other-group", [Q0], "c2") == {Q0}  # groups are independent
    assert m.try_lock_batch("g", [Q0], "c1") == {Q0}
    m.unlock_batch("g", [Q0], "c2")
    assert m.holder("g", Q0) == "c1"
    m.unlock_batch("g", [Q0], "c1")
    assert m.holder("g", Q0) is None
    assert m.try_lock_batch("g", [Q0], "c2") == {Q0}


def test_expired_lock_can_be_taken_over():
    m = QueueLockManager(lock_max_live_ms=50)
    assert m.try_lock_batch("g", [Q0], "c1") == {Q0}
    deadline = time.monotonic() + 10
    taken: set = set()
    while not taken and time.monotonic() < deadline:  # bounded poll until the 50 ms expiry passed
        taken = m.try_lock_batch("g", [Q0], "c2")
        time.sleep(0.01)
    assert taken == {Q0} and m.holder("g", Q0) == "c2"
