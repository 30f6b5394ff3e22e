"""Message size limits as Kafka has them, with confluent-kafka: a topic's ``max.message.bytes``
(set at creation or altered later) decides over the broker's ``message.max.bytes`` either way —
smaller refuses with MESSAGE_TOO_LARGE, larger accepts batches the broker default would refuse —
and a consumer whose fetch limits are smaller than a record still gets it (KIP-74); the broker's
``message.max.bytes`` changed at run time; LogAppendTime topics and timestamp bounds."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource

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


def test_broker_message_max_bytes_changes_at_run_time_and_survives_a_restart(node):
    """``kafka-configs --entity-type brokers --alter``: a dynamic broker config takes effect at once,
    is reported as DYNAMIC_BROKER_CONFIG and is kept across a restart; static keys are refused."""
    bs = node.kafka_bootstrap
    topic = unique("dyn")
    create_topic(bs, topic)
    admin = AdminClient({"bootstrap.servers": bs})
    broker = str(next(iter(admin.list_topics(timeout=10).brokers)))
    res = ConfigResource(ConfigResource.Type.BROKER, broker)

    def alter(name: str, value: str | None, op=AlterConfigOpType.SET):
        change = ConfigResource(ConfigResource.Type.BROKER, broker,
                                incremental_configs=[ConfigEntry(name, value, incremental_operation=op)])
        return admin.incremental_alter_configs([change])[change].result(20)

    assert send(bs, topic, 100_000) is None
    alter("message.max.bytes", "51200")
    refused = send(bs, topic, 100_000)
    assert refused is not None and refused.code() == KafkaError.MSG_SIZE_TOO_LARGE
    with pytest.raises(Exception, match="socket.request.max.bytes"):  # static: only at start
        alter("socket.request.max.bytes", "1000")
    with pytest.raises(Exception, match="no.such.config"):
        alter("no.such.config", "1")

    node.restart()
    admin = AdminClient({"bootstrap.servers": bs})
    entry = admin.describe_configs([res])[res].result(20)["message.max.bytes"]
    assert entry.value == "51200" and entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    refused = send(bs, topic, 100_000)
    assert refused is not None and refused.code() == KafkaError.MSG_SIZE_TOO_LARGE
    alter("message.max.bytes", None, AlterConfigOpType.DELETE)  # back to the static value
    assert send(bs, topic, 100_000) is None
    entry = admin.describe_configs([res])[res].result(20)["message.max.bytes"]
    assert entry.source != ConfigSource.DYNAMIC_BROKER_CONFIG.value


def test_log_append_time_topic_and_timestamp_bounds(node):
    """message.timestamp.type=LogAppendTime: consumers see the broker's time, whatever the
    producer set; message.timestamp.before.max.ms refuses records stamped too far back."""
    import time

    from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME

    bs = node.kafka_bootstrap
    stamped, bounded = unique("lat"), unique("bounded")
    create_topic(bs, stamped, config={"message.timestamp.type": "LogAppendTime"})
    create_topic(bs, bounded, config={"message.timestamp.before.max.ms": "60000"})
    results: list = []
    p = Producer({"bootstrap.servers": bs, "linger.ms": 0, "retries": 0})
    before = int(time.time() * 1000)
    for topic in (stamped, bounded):
        p.produce(topic, b"old", partition=0, timestamp=1_000_000,
                  on_delivery=lambda err, m: results.append((m.topic(), err)))
    p.flush(30)
    errors = dict(results)
    assert errors[stamped] is None
    assert errors[bounded] is not None and errors[bounded].code() == KafkaError.INVALID_TIMESTAMP
    c = Consumer({"bootstrap.servers": bs, "group.id": unique("g"), "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(stamped, 0, 0)])
        m = wait_for(lambda: (lambda m: m if m is not None and m.error() is None else None)(c.poll(0.5)), timeout=30,
                     interval=0, what="the stamped record")
        kind, ts = m.timestamp()
        assert kind == TIMESTAMP_LOG_APPEND_TIME and ts >= before and m.value() == b"old"
    finally:
        c.close()
