"""Idempotent-producer state on its own: sequence rules, snapshot reload, id blocks, expiry.

The wire-level behaviour (duplicates answered with the original offset, rebuild after a crash)
is in test_kafka_wire.py.
"""

from __future__ import annotations

from gateway_kafka import error_codes as E


def test_producer_state_rules_and_expiry(tmp_path):
    from gateway_kafka.producer_state import ProducerStateManager

    ps = ProducerStateManager(tmp_path)
    _, pid, epoch = ps.init_producer_id(None)
    assert ps.check("t", 0, pid, epoch, 0, 2).error_code == E.NONE
    ps.record("t", 0, pid, epoch, 0, 2, base_offset=10, timestamp=1_000)
    dup = ps.check("t", 0, pid, epoch, 0, 2)
    assert dup.error_code == E.NONE and dup.duplicate_of.base_offset == 10
    assert ps.check("t", 0, pid, epoch, 4, 0).error_code == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert ps.check("t", 0, pid, epoch, 1, 0).error_code == E.DUPLICATE_SEQUENCE_NUMBER
    assert ps.check("t", 0, pid, epoch, 3, 0).error_code == E.NONE
    ps.save({("t", 0): 13})
    reloaded = ProducerStateManager(tmp_path)
    reloaded.load()
    assert reloaded.check("t", 0, pid, epoch, 0, 2).duplicate_of.base_offset == 10
    _, next_pid, _ = reloaded.init_producer_id(None)
    assert next_pid > pid  # the id block reserved before the save is never handed out again
    assert reloaded.expire(now_ms=1_000 + 10, expiration_ms=100) == 0
    assert reloaded.expire(now_ms=1_000 + 1_000, expiration_ms=100) == 1
    assert reloaded.check("t", 0, pid, epoch, 7, 0).error_code == E.NONE  # unknown again: any sequence
