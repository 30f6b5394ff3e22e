"""Message size limits as Kafka has them, with confluent-kafka: a topic's ``max.message.bytes``
(set at creation or altered later) decides over the broker's ``message.max.bytes`` either way —
smaller refuses with MESSAGE_TOO_LARGE, larger accepts batches the broker default would refuse —
and a consumer whose fetch limits are smaller than a record still gets it (KIP-74)."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from tests.gateway_kafka.kafka_helpers import create_topic, unique, wait_for

pytestmark = pytest.mark.timeout(180)

MiB = 1024 * 1024


def send(bs: str, topic: str, size: int):
    """The delivery error for one record of ``size`` bytes (None when stored)."""
    result: list = []
    p = Producer({"bootstrap.servers": bs, "message.max.bytes": 20 * MiB, "linger.ms": 0,
                  "message.timeout.ms": 30000})
    p.produce(topic, b"x" * size, partition=0, on_delivery=lambda err, _m: result.append(err))
    p.flush(60)
    assert result, "no delivery report"
    return result[0]


def test_topic_limit_overrides_the_broker_default_both_ways(node):
    bs = node.kafka_bootstrap  # broker message.max.bytes: maxMessageSize, 4 MiB
    small, big, default = unique("small"), unique("big"), unique("default")
    create_topic(bs, small, config={"max.message.bytes": "51200"})
    create_topic(bs, big, config={"max.message.bytes": str(10 * MiB)})
    create_topic(bs, default)
    assert send(bs, small, 40_000) is None
    refused = send(bs, small, 100_000)
    assert refused is not None and refused.code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert send(bs, big, 5 * MiB) is None  # above the broker default, within the topic's limit
    refused = send(bs, default, 5 * MiB)
    assert refused is not None and refused.code() == KafkaError.MSG_SIZE_TOO_LARGE

    # altered later: the new limit applies to the next batch
    admin = AdminClient({"bootstrap.servers": bs})
    change = ConfigResource(ConfigResource.Type.TOPIC, small, incremental_configs=[
        ConfigEntry("max.message.bytes", "204800", incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([change]).values():
        f.result(20)
    assert send(bs, small, 100_000) is None

    # KIP-74: the first batch is returned whole even above the consumer's fetch limits
    c = Consumer({"bootstrap.servers": bs, "group.id": unique("g"), "enable.auto.commit": False,
                  "fetch.max.bytes": MiB, "max.partition.fetch.bytes": MiB, "receive.message.max.bytes": 20 * MiB})
    try:
        c.assign([TopicPartition(big, 0, 0)])

        def got():
            m = c.poll(0.5)
            return m if m is not None and m.error() is None else None
        m = wait_for(got, timeout=30, interval=0, what="the 5 MiB record")
        assert len(m.value()) == 5 * MiB
    finally:
        c.close()
