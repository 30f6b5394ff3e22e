"""Admin operations through the gateway with each client's admin API, and kcat.

Create/delete topics, create partitions, describe and alter configs, delete records, describe
the cluster; kcat (librdkafka's CLI) produces, consumes and lists metadata.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess

import pytest

from tests.gateway_kafka.kafka_helpers import consume, create_topic, produce, unique, wait_for

pytestmark = pytest.mark.timeout(120)


def confluent_admin(bs: str):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bs})


def test_confluent_admin_topics_partitions_configs(node):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions, NewTopic)

    bs = node.kafka_bootstrap
    admin = confluent_admin(bs)
    name = unique("adm")
    admin.create_topics([NewTopic(name, 2, 1, config={"retention.ms": "3600000"})])[name].result(20)
    with pytest.raises(KafkaException, match="TOPIC_ALREADY_EXISTS|already exists"):
        admin.create_topics([NewTopic(name, 2, 1)])[name].result(20)
    with pytest.raises(KafkaException, match="REPLICATION_FACTOR"):
        list(admin.create_topics([NewTopic(unique("rf"), 1, 3)]).values())[0].result(20)
    with pytest.raises(KafkaException, match="INVALID_CONFIG|unknown topic config"):
        list(admin.create_topics([NewTopic(unique("cfg"), 1, 1, config={"no.such": "1"})]).values())[0].result(20)
    # validate_only creates nothing
    probe = unique("probe")
    admin.create_topics([NewTopic(probe, 1, 1)], validate_only=True)[probe].result(20)
    assert probe not in admin.list_topics(timeout=10).topics

    meta = admin.list_topics(timeout=10).topics[name]
    assert sorted(meta.partitions) == [0, 1]
    admin.create_partitions([NewPartitions(name, 4)])[name].result(20)
    wait_for(lambda: len(admin.list_topics(name, timeout=10).topics[name].partitions) == 4, 20, what="4 partitions")
    with pytest.raises(KafkaException, match="INVALID_PARTITIONS|must be larger"):
        admin.create_partitions([NewPartitions(name, 3)])[name].result(20)

    res = ConfigResource("topic", name)
    configs = admin.describe_configs([res])[res].result(20)
    assert configs["retention.ms"].value == "3600000" and not configs["retention.ms"].is_default
    assert configs["cleanup.policy"].value == "delete" and configs["cleanup.policy"].is_default
    alter = ConfigResource("topic", name, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)])
    admin.incremental_alter_configs([alter])[alter].result(20)
    configs = admin.describe_configs([res])[res].result(20)
    assert configs["cleanup.policy"].value == "compact"
    assert configs["retention.ms"].is_default

    admin.delete_topics([name])[name].result(20)
    wait_for(lambda: name not in admin.list_topics(timeout=10).topics, 20, what="topic gone")
    with pytest.raises(KafkaException, match="UNKNOWN_TOPIC"):
        admin.delete_topics([name])[name].result(20)


def test_kafka_python_admin(node):
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic
    from kafka.errors import TopicAlreadyExistsError

    admin = KafkaAdminClient(bootstrap_servers=node.kafka_bootstrap)
    try:
        name = unique("kpa")
        admin.create_topics([NewTopic(name, 3, 1, topic_configs={"max.message.bytes": "123456"})])
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([NewTopic(name, 3, 1)], raise_errors=True)
        assert name in admin.list_topics()
        described = admin.describe_topics([name])
        assert len(described[0]["partitions"]) == 3
        admin.create_partitions({name: NewPartitions(5)})
        assert len(admin.describe_topics([name])[0]["partitions"]) == 5
        result = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)])
        modified = result["topic"][name]  # kafka-python lists only non-default configs by default
        assert list(modified) == ["max.message.bytes"]
        assert modified["max.message.bytes"]["value"] == "123456"
        cluster = admin.describe_cluster()
        assert [b["port"] for b in cluster["brokers"]] == [node.kafka_port]
        admin.delete_topics([name])
        wait_for(lambda: name not in admin.list_topics(), 20, what="topic gone")
    finally:
        admin.close()


def test_aiokafka_admin(node):
    from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic

    async def run():
        admin = AIOKafkaAdminClient(bootstrap_servers=node.kafka_bootstrap)
        await admin.start()
        try:
            name = unique("aio")
            await admin.create_topics([NewTopic(name, 2, 1, topic_configs={"retention.ms": "12345"})])
            assert name in await admin.list_topics()
            from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

            described = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)])
            error_code, _msg, _type, resource, entries = described[0].resources[0][:5]
            assert (error_code, resource) == (0, name)
            # (name, value, read_only, config_source, is_sensitive, synonyms); source 1 = set on the topic
            assert [e[:2] + (e[3],) for e in entries if e[0] == "retention.ms"] == [("retention.ms", "12345", 1)]
            await admin.create_partitions({name: NewPartitions(3)})
            described = await admin.describe_topics([name])
            assert len(described[0]["partitions"]) == 3
            await admin.delete_topics([name])
            assert name not in await admin.list_topics()
        finally:
            await admin.close()

    asyncio.run(asyncio.wait_for(run(), 60))


def test_delete_records_moves_log_start(node):
    from confluent_kafka import TopicPartition

    bs = node.kafka_bootstrap
    topic = unique("delrec")
    create_topic(bs, topic)
    produce("confluent-kafka", bs, topic, [(None, b"r%d" % i, []) for i in range(10)])
    admin = confluent_admin(bs)
    fut = admin.delete_records([TopicPartition(topic, 0, 4)])
    deleted = list(fut.values())[0].result(20)
    assert deleted.low_watermark == 4
    got = consume("kafka-python", bs, topic, 6)
    assert [g[1] for g in got] == [4, 5, 6, 7, 8, 9]


def test_topic_retention_ms_is_enforced(make_node):
    """retention.ms set per topic (at creation, or later with IncrementalAlterConfigs) makes
    older records unreadable: the log start moves past them, consumers from the beginning
    start after them; a topic without it keeps everything."""
    import time

    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

    node = make_node({"cleanResourceInterval": 300})
    bs = node.kafka_bootstrap
    admin = confluent_admin(bs)
    short, later, kept = unique("ret-short"), unique("ret-later"), unique("ret-kept")
    admin.create_topics([NewTopic(short, 1, 1, config={"retention.ms": "2000"}),
                         NewTopic(later, 1, 1), NewTopic(kept, 1, 1)])[short].result(20)
    wait_for(lambda: all(t in admin.list_topics(timeout=10).topics for t in (later, kept)))
    for topic in (short, later, kept):
        produce("confluent-kafka", bs, topic, [(None, b"old%d" % i, []) for i in range(5)])
    time.sleep(2.5)  # the old records are now older than 2 s
    for topic in (short, later, kept):
        produce("confluent-kafka", bs, topic, [(None, b"new%d" % i, []) for i in range(3)])
    res = ConfigResource("topic", later, incremental_configs=[
        ConfigEntry("retention.ms", "2000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(20)

    def log_start(topic: str) -> int:
        low, _ = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        return low

    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bs, "group.id": unique("ret-g")})
    try:
        wait_for(lambda: log_start(short) == 5 and log_start(later) == 5, timeout=20,
                 what="log start past the expired records")
        assert log_start(kept) == 0
    finally:
        consumer.close()
    assert [(off, value) for _, off, _, value, _ in consume("kafka-python", bs, short, 3)] == [
        (5, b"new0"), (6, b"new1"), (7, b"new2")]
    assert len(consume("kafka-python", bs, kept, 8)) == 8


def test_kcat_produce_consume_and_list(node):
    assert shutil.which("kcat"), "kcat is missing: run deploy/dev/install-test-deps.sh"
    bs = node.kafka_bootstrap
    topic = unique("kcat")
    create_topic(bs, topic)
    lines = "\n".join(f"key{i}:value {i}" for i in range(5)) + "\n"
    subprocess.run(["kcat", "-b", bs, "-P", "-t", topic, "-K", ":", "-z", "lz4"], input=lines.encode(),
                   check=True, timeout=30)
    out = subprocess.run(["kcat", "-b", bs, "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%k=%s@%o\n"],
                         check=True, timeout=30, capture_output=True).stdout.decode()
    assert out.splitlines() == [f"key{i}=value {i}@{i}" for i in range(5)]
    listing = subprocess.run(["kcat", "-b", bs, "-L", "-t", topic], check=True, timeout=30,
                             capture_output=True).stdout.decode()
    assert f'topic "{topic}" with 1 partitions' in listing
    assert f"at 127.0.0.1:{node.kafka_port}" in listing
