"""orders_stream.py end to end: Spark's Kafka source and sink against a real Rockafka.

A known, deterministic order stream (generate_orders.py) goes in; the per-product, per-minute
stats that come out on the sink topic must be exactly the ones computed in Python, and a
query stopped and restarted from its checkpoint must still produce all of them.
"""

from __future__ import annotations

import json

import pytest

from spark_examples import generate_orders, orders_stream
from spark_examples.tests.helpers import consume, create_topic, flush_all, producer, unique

pytestmark = pytest.mark.timeout(300)

JUNK = [
    b"not json at all",
    b"",
    None,
    b'{"order_id": "junk-1", "product": "apple"}',
    b'{"order_id": "junk-2", "product": "apple", "quantity": "lots", "price_cents": 5,'
    b' "ts": 1704067230000}',
    b"\xff\xfe\x00binary",
    b"[1, 2, 3]",
]


def stats_of(records) -> list[generate_orders.WindowStats]:
    return [generate_orders.WindowStats(**json.loads(r.value())) for r in records]


def read_stats(bootstrap: str, topic: str, expected: set) -> list[generate_orders.WindowStats]:
    """Everything on the sink topic once it holds every expected result (bounded wait)."""
    return stats_of(consume(bootstrap, topic, until=lambda recs: expected <= set(stats_of(recs))))


def test_windowed_aggregates_are_exact(node, spark, tmp_path):
    source = create_topic(node.kafka_bootstrap, unique("orders"), partitions=3)
    sink = create_topic(node.kafka_bootstrap, unique("order-stats"))
    orders = generate_orders.generate(240, seed=7)
    generate_orders.produce(node.kafka_bootstrap, source, orders[:120])
    # Records that are not orders are skipped, not counted and not fatal.
    p = producer(node.kafka_bootstrap)
    for junk in JUNK:
        p.produce(source, value=junk, partition=0)
    flush_all(p)
    generate_orders.produce(node.kafka_bootstrap, source, orders[120:])
    expected = generate_orders.expected_stats(orders)
    assert len(expected) > 50  # the input spans ~20 closed minutes of 5 products

    query = orders_stream.start(spark, node.kafka_bootstrap, str(tmp_path / "ckpt"),
                                source_topic=source, sink_topic=sink)
    try:
        query.processAllAvailable()
        got = read_stats(node.kafka_bootstrap, sink, expected)
    finally:
        query.stop()
    assert query.exception() is None
    # One uninterrupted run with the idempotent producer: each window exactly once.
    assert sorted(got, key=repr) == sorted(expected, key=repr)
    key_of = {f"{s.product}@{s.window_start_ms}" for s in expected}
    assert len(key_of) == len(expected)


def test_restart_from_checkpoint_loses_no_input(node, spark, tmp_path):
    source = create_topic(node.kafka_bootstrap, unique("orders"), partitions=2)
    sink = create_topic(node.kafka_bootstrap, unique("order-stats"))
    orders = generate_orders.generate(300, seed=11)
    # Split mid-minute so one window's count is built across the restart from saved state.
    first, second = orders[:137], orders[137:]
    checkpoint = str(tmp_path / "ckpt")

    generate_orders.produce(node.kafka_bootstrap, source, first)
    query = orders_stream.start(spark, node.kafka_bootstrap, checkpoint,
                                source_topic=source, sink_topic=sink)
    try:
        query.processAllAvailable()
        before = set(read_stats(node.kafka_bootstrap, sink, generate_orders.expected_stats(first)))
    finally:
        query.stop()
    assert before == generate_orders.expected_stats(first)

    generate_orders.produce(node.kafka_bootstrap, source, second)
    query = orders_stream.start(spark, node.kafka_bootstrap, checkpoint,
                                source_topic=source, sink_topic=sink)
    try:
        query.processAllAvailable()
        expected = generate_orders.expected_stats(orders)
        after = read_stats(node.kafka_bootstrap, sink, expected)
    finally:
        query.stop()
    assert query.exception() is None
    # At-least-once at the sink: a result may repeat, but every one is there and none is wrong.
    assert set(after) == expected
    spanning = [s for s in expected if s not in generate_orders.expected_stats(first)
                and any(o.ts - o.ts % 60_000 == s.window_start_ms and o.product == s.product
                        for o in first)]
    assert spanning, "the split should leave at least one window open across the restart"
