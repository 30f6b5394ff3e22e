"""Kafka's quota rules on the table itself (``gateway_kafka/quotas.py``): which entity's quota
applies to a (user, client id), the throttle time over a quota, and what AlterClientQuotas
refuses. The real-client side is in ``test_kafka_operator_state.py``."""

from __future__ import annotations

import asyncio

from gateway_kafka.quotas import PRODUCE, ClientQuotas


def quotas_with(*entries) -> tuple[ClientQuotas, list[float]]:
    now = [1_000.0]
    q = ClientQuotas(None, clock=lambda: now[0])
    for entity, key, value in entries:
        ent, why = q.validate([{"entity_type": t, "entity_name": n} for t, n in entity],
                              [{"key": key, "value": value, "remove": False}])
        assert why is None, why
        asyncio.run(q.alter(ent, [{"key": key, "value": value}]))
    return q, now


def test_the_most_specific_entity_wins_in_kafkas_order():
    q, _ = quotas_with(((("client-id", None),), "producer_byte_rate", 1.0),
                       ((("client-id", "app"),), "producer_byte_rate", 2.0),
                       ((("user", None),), "producer_byte_rate", 3.0),
                       ((("user", "alice"),), "producer_byte_rate", 4.0),
                       ((("user", "alice"), ("client-id", "app")), "producer_byte_rate", 5.0))
    assert q.quota("alice", "app", "producer_byte_rate")[0] == 5.0
    assert q.quota("alice", "other", "producer_byte_rate")[0] == 4.0
    assert q.quota("bob", "app", "producer_byte_rate")[0] == 3.0    # default user before any client-id quota
    assert q.quota("bob", "app", "consumer_byte_rate") is None
    # a default applies per name: two clients under the default client-id quota have their own sensors
    q2, _ = quotas_with(((("client-id", None),), "producer_byte_rate", 1.0))
    assert q2.quota("u", "a", "producer_byte_rate")[1] != q2.quota("u", "b", "producer_byte_rate")[1]


def test_throttle_time_is_kafkas_formula_over_the_window():
    q, now = quotas_with(((("client-id", "c"),), "producer_byte_rate", 100_000.0))
    # 1 MB over Kafka's minimum 10 s window is exactly the quota: no throttle
    assert q.throttle_ms("User:ANONYMOUS", "c", PRODUCE, 1_000_000, 0, 0.0) == 0
    # 1.5 MB: rate 150 kB/s -> (150 - 100) / 100 * 10 s = 5 s
    assert q.throttle_ms("User:ANONYMOUS", "c", PRODUCE, 500_000, 0, 0.0) == 5000
    assert q.throttle_ms("User:ANONYMOUS", "other", PRODUCE, 10_000_000, 0, 0.0) == 0   # no quota
    now[0] += 30   # the samples leave the window
    assert q.throttle_ms("User:ANONYMOUS", "c", PRODUCE, 1000, 0, 0.0) == 0


def test_request_percentage_counts_handler_time_of_requests_that_do_not_park():
    q, now = quotas_with(((("user", None),), "request_percentage", 10.0))   # 10 % of one thread
    # 1 s of handler time over the 10 s window is 10 %: at the quota
    assert q.throttle_ms("User:alice", "c", 3, 100, 100, 1000.0) == 0
    # another second: 20 % -> (20 - 10) / 10 * 10 s, capped at the 11 s window
    assert q.throttle_ms("User:alice", "c", 3, 100, 100, 1000.0) == 10_000
    # a Fetch held in its long poll counts nothing
    assert q.throttle_ms("User:bob", "c", 1, 100, 100, 30_000.0) == 0


def test_alter_refuses_what_kafka_refuses():
    q = ClientQuotas(None)
    def why(entity, key="producer_byte_rate", value=1.0):
        return q.validate([{"entity_type": t, "entity_name": n} for t, n in entity],
                          [{"key": key, "value": value, "remove": False}])[1]
    assert "unknown entity type" in why([("topic", "x")])
    assert "more than once" in why([("user", "a"), ("user", "b")])
    assert "unknown quota key" in why([("user", "a")], key="producer_rate")
    assert "whole number" in why([("user", "a")], value=1.5)
    assert "above 0" in why([("client-id", "a")], value=0.0)
    assert "finite" in why([("client-id", "a")], value=float("inf"))
    assert "finite" in why([("client-id", "a")], key="request_percentage", value=float("nan"))
    assert "ip quotas" in why([("ip", "1.2.3.4")], key="connection_creation_rate")
    assert why([("user", "a")], key="request_percentage", value=12.5) is None
