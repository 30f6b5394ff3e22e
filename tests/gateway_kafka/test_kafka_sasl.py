"""SASL/PLAIN on the Kafka listener: clients with the right password work, a wrong password is
refused, and an unauthenticated connection cannot issue requests."""

from __future__ import annotations

import pytest

from tests.gateway_kafka.kafka_helpers import RawKafka, unique

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def sasl_node(tmp_path_factory):
    from tests.support.node import RunningNode

    settings = {"sasl_enabled_mechanisms": "PLAIN", "sasl_plain_users": "alice:alice-secret,bob:b0b"}
    with RunningNode(tmp_path_factory.mktemp("sasl") / "data", settings=settings) as n:
        yield n


def confluent_conf(bs: str, user: str, password: str) -> dict:
    return {"bootstrap.servers": bs, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": password}


def test_confluent_with_password_produces_and_consumes(sasl_node):
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    bs = sasl_node.kafka_bootstrap
    topic = unique("sasl")
    admin = AdminClient(confluent_conf(bs, "alice", "alice-secret"))
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(20)
    p = Producer(confluent_conf(bs, "bob", "b0b"))
    p.produce(topic, b"secret payload")
    assert p.flush(20) == 0
    c = Consumer({**confluent_conf(bs, "alice", "alice-secret"), "group.id": unique("g"),
                  "auto.offset.reset": "earliest"})
    try:
        c.subscribe([topic])
        got = None
        for _ in range(100):
            m = c.poll(0.3)
            if m is not None and not m.error():
                got = m.value()
                break
        assert got == b"secret payload"
    finally:
        c.close()


def test_kafka_python_with_password(sasl_node):
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=sasl_node.kafka_bootstrap, security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="PLAIN", sasl_plain_username="alice",
                             sasl_plain_password="alice-secret")
    try:
        assert isinstance(admin.list_topics(), list)
    finally:
        admin.close()


def test_wrong_password_is_refused(sasl_node):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(confluent_conf(sasl_node.kafka_bootstrap, "alice", "wrong"))
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=5)


def test_unauthenticated_request_closes_connection(sasl_node):
    with RawKafka(sasl_node.kafka_bootstrap) as raw:
        versions = raw.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert {k["api_key"] for k in versions["api_keys"]} >= {17, 36}
        raw.request(3, 9, {"topics": None, "allow_auto_topic_creation": False,
                           "include_topic_authorized_operations": False}, expect_response=False)
        assert raw.closed_by_server()
    with RawKafka(sasl_node.kafka_bootstrap) as raw:
        hs = raw.request(17, 1, {"mechanism": "SCRAM-SHA-256"})
        assert hs["error_code"] == 33 and hs["mechanisms"] == ["PLAIN"]
        assert raw.request(17, 1, {"mechanism": "PLAIN"})["error_code"] == 0
        bad = raw.request(36, 2, {"auth_bytes": b"\x00alice\x00nope"})
        assert bad["error_code"] == 58
        assert raw.closed_by_server()


def test_aiokafka_with_password(sasl_node):
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    bs = sasl_node.kafka_bootstrap
    topic = unique("aiosasl")
    auth = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "sasl_plain_username": "bob",
            "sasl_plain_password": "b0b"}

    async def run():
        p = AIOKafkaProducer(bootstrap_servers=bs, **auth)
        await p.start()
        try:
            await p.send_and_wait(topic, b"over sasl")
        finally:
            await p.stop()
        c = AIOKafkaConsumer(topic, bootstrap_servers=bs, auto_offset_reset="earliest", group_id=unique("g"), **auth)
        await c.start()
        try:
            msg = await asyncio.wait_for(c.getone(), 30)
            return msg.value
        finally:
            await c.stop()

    assert asyncio.run(asyncio.wait_for(run(), 60)) == b"over sasl"
