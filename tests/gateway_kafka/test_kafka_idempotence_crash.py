"""An idempotent producer (confluent-kafka) across kill -9 of the broker, at the two moments that
matter: after a batch was acknowledged but before any producer-state snapshot saw it, and after
a batch was stored but before its acknowledgement reached the producer (a real TCP proxy between
client and broker swallows the answer). After each restart the producer goes on with the same
producer id and sequences: no OUT_OF_ORDER_SEQUENCE_NUMBER, no fatal error, the unanswered batch's
retry is recognised as a duplicate and answered with its original offset, and the topic holds
every record exactly once, in order."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from tests.gateway_kafka.kafka_helpers import RawKafka, consume, create_topic, unique, wait_for
from tests.support.proxy import TcpProxy

pytestmark = pytest.mark.timeout(300)

LIST_OFFSETS = 2


def high_watermark(bootstrap: str, topic: str) -> int:
    with RawKafka(bootstrap) as raw:
        resp = raw.request(LIST_OFFSETS, 5, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
    return resp["topics"][0]["partitions"][0]["offset"]


def test_idempotent_producer_survives_kill9_before_ack_and_before_snapshot(make_node):
    # no producer-state snapshot during the test: after each crash the state comes from the log
    n = make_node({"producer_state_snapshot_interval": 3_600_000}, start=False)
    with TcpProxy("127.0.0.1", n.kafka_port) as proxy:
        n.settings["advertised_port"] = proxy.port  # clients reach the broker only through the proxy
        n.start()
        topic = unique("idem-crash")
        create_topic(n.kafka_bootstrap, topic)
        offsets: dict[bytes, int] = {}
        failures: list[str] = []
        fatal: list[str] = []

        def delivered(err, msg) -> None:
            if err is not None:
                failures.append(f"{msg.value()!r}: {err}")
            else:
                offsets[msg.value()] = msg.offset()

        p = Producer({"bootstrap.servers": proxy.address, "enable.idempotence": True, "acks": "all",
                      "linger.ms": 0, "message.timeout.ms": 120_000, "reconnect.backoff.max.ms": 500,
                      "error_cb": lambda e: e.fatal() and fatal.append(str(e))})

        def send(value: bytes) -> None:
            p.produce(topic, value, partition=0, on_delivery=delivered)
            assert p.flush(120) == 0

        # 1. acknowledged, then kill -9 before any snapshot recorded them
        for i in range(20):
            send(f"a{i}".encode())
        assert [offsets[f"a{i}".encode()] for i in range(20)] == list(range(20))
        n.kill()
        n.start()
        for i in range(20):
            send(f"b{i}".encode())  # the same producer id, the next sequences
        assert not failures and not fatal, (failures, fatal)
        assert [offsets[f"b{i}".encode()] for i in range(20)] == list(range(20, 40))

        # 2. stored, never acknowledged, then kill -9; the producer retries the same batch
        hw = high_watermark(n.kafka_bootstrap, topic)
        proxy.hold_answers()
        p.produce(topic, b"c0", partition=0, on_delivery=delivered)
        p.poll(0)
        wait_for(lambda: high_watermark(n.kafka_bootstrap, topic) == hw + 1 and proxy.swallowed > 0, timeout=30,
                 what="the batch to be stored and its answer swallowed")
        p.poll(0)
        assert b"c0" not in offsets
        n.kill()
        proxy.release()
        n.start()
        assert p.flush(120) == 0
        assert offsets[b"c0"] == hw, "the retry was not answered with the batch's original offset"
        for i in range(1, 10):
            send(f"c{i}".encode())
        assert not failures and not fatal, (failures, fatal)
        assert high_watermark(n.kafka_bootstrap, topic) == hw + 10

        expected = [f"a{i}".encode() for i in range(20)] + [f"b{i}".encode() for i in range(20)] + \
                   [f"c{i}".encode() for i in range(10)]
        got = consume("confluent-kafka", n.kafka_bootstrap, topic, len(expected))
        assert [g[3] for g in got] == expected  # each once, in order
