"""Idempotence rules on their own (Kafka's checkSequence over the engine's producer entries) and
the expiry of idle producers.

The wire-level behaviour (duplicates answered with the original offset, state rebuilt after a
crash) is in test_kafka_wire.py and test_kafka_crash.py."""

from __future__ import annotations

from engine import record_batch as rb
from engine.producer_state import BatchMeta, ProducerEntry, ProducerStateTable
from gateway_kafka import error_codes as E
from gateway_kafka.producer_state import check_sequence


def test_sequence_rules():
    entry = ProducerEntry(0, [BatchMeta(0, 2, 10, 1_000)])
    assert check_sequence(None, 5, 0, 7, 0).error_code == E.NONE  # unknown producer: any sequence
    dup = check_sequence(entry, 5, 0, 0, 2)
    assert dup.error_code == E.NONE and dup.duplicate_of.base_offset == 10
    assert check_sequence(entry, 5, 0, 4, 0).error_code == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert check_sequence(entry, 5, 0, 1, 0).error_code == E.DUPLICATE_SEQUENCE_NUMBER
    assert check_sequence(entry, 5, 0, 3, 0) == (E.NONE, None, None)
    assert check_sequence(entry, 5, 1, 0, 0) == (E.NONE, None, None)  # a new epoch starts at 0
    assert check_sequence(entry, 5, 1, 3, 0).error_code == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert check_sequence(ProducerEntry(2, [BatchMeta(0, 0, 1, 0)]), 5, 1, 1, 0).error_code == E.INVALID_PRODUCER_EPOCH
    wrap = ProducerEntry(0, [BatchMeta(2**31 - 2, 2**31 - 1, 50, 0)])
    assert check_sequence(wrap, 5, 0, 0, 0) == (E.NONE, None, None)  # sequences wrap to 0


def test_idle_producers_expire(tmp_path):
    table = ProducerStateTable(tmp_path, expiration_ms=100)
    header = rb.parse_header(rb.build_batch([rb.Record(0, 0, None, b"v", [])], producer_id=9, producer_epoch=0,
                                            base_sequence=0))
    table.apply("t", 0, header, 0, store_time=1_000)
    table.capture(10, lambda t, q: 0, now_ms=1_050)
    assert table.entry("t", 0, 9) is not None
    table.capture(10, lambda t, q: 0, now_ms=1_000 + 61_000)  # expiry is looked at once a minute
    assert table.entry("t", 0, 9) is None
    assert check_sequence(table.entry("t", 0, 9), 9, 0, 7, 0).error_code == E.NONE  # unknown again
