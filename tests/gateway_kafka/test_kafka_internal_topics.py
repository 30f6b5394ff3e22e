"""The internal topics as Kafka clients see them: ``__consumer_offsets`` and
``__transaction_state`` are listed with is_internal, are never auto-created as ordinary topics,
stay out of regex subscriptions, refuse produce / delete / DeleteRecords / new partitions with
Kafka's error, and hold committed offsets (leader epoch and metadata included) in Kafka's own
record format, readable with an ordinary consumer."""

from __future__ import annotations

import struct
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from tests.gateway_kafka.kafka_helpers import create_topic, produce, unique, wait_for

pytestmark = pytest.mark.timeout(180)

INTERNAL = ("__consumer_offsets", "__transaction_state")


def java_partition(key: str, partitions: int = 50) -> int:
    h = 0
    for unit in struct.unpack(f">{len(key.encode('utf-16-be')) // 2}H", key.encode("utf-16-be")):
        h = (31 * h + unit) & 0xFFFFFFFF
    h = h - (1 << 32) if h & 0x80000000 else h
    return abs(h) % partitions


def test_internal_topics_are_listed_as_internal_with_their_partitions(node):
    admin = AdminClient({"bootstrap.servers": node.kafka_bootstrap})
    described = admin.describe_topics(TopicCollection(list(INTERNAL)))
    for name in INTERNAL:
        d = described[name].result(20)
        assert d.is_internal and len(d.partitions) == 50
    # in the list of every topic too (as Kafka lists them), never as an auto-created 1-partition topic
    listed = admin.list_topics(timeout=20).topics
    assert all(len(listed[name].partitions) == 50 for name in INTERNAL)
    from kafka import KafkaAdminClient

    kp = KafkaAdminClient(bootstrap_servers=node.kafka_bootstrap)
    try:
        by_name = {t.get("topic", t.get("name")): t for t in kp.describe_topics(list(INTERNAL))}
        assert all(by_name[name]["is_internal"] for name in INTERNAL)
        ordinary = unique("ordinary")
        create_topic(node.kafka_bootstrap, ordinary)
        assert not kp.describe_topics([ordinary])[0]["is_internal"]
    finally:
        kp.close()


def test_clients_cannot_produce_to_delete_or_trim_internal_topics(node):
    bs = node.kafka_bootstrap
    errors: list = []
    p = Producer({"bootstrap.servers": bs, "message.timeout.ms": 10000})
    p.produce("__consumer_offsets", b"forged", partition=0, on_delivery=lambda err, _m: errors.append(err))
    p.flush(20)
    assert errors and errors[0] is not None and errors[0].code() == KafkaError.TOPIC_EXCEPTION
    admin = AdminClient({"bootstrap.servers": bs})
    for name in INTERNAL:
        with pytest.raises(KafkaException) as deleted:
            admin.delete_topics([name], operation_timeout=10)[name].result(20)
        assert deleted.value.args[0].code() == KafkaError.TOPIC_EXCEPTION
        with pytest.raises(KafkaException) as grown:
            admin.create_partitions([NewPartitions(name, 60)])[name].result(20)
        assert grown.value.args[0].code() == KafkaError.TOPIC_EXCEPTION
        with pytest.raises(KafkaException) as created:
            admin.create_topics([NewTopic(name, 1, 1)])[name].result(20)
        assert created.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
    trimmed = admin.delete_records([TopicPartition("__consumer_offsets", 0, 0)])
    with pytest.raises(KafkaException) as refused:
        next(iter(trimmed.values())).result(20)
    assert refused.value.args[0].code() == KafkaError.TOPIC_EXCEPTION
    described = admin.describe_topics(TopicCollection(["__consumer_offsets"]))["__consumer_offsets"].result(20)
    assert len(described.partitions) == 50  # nothing changed


def test_regex_subscriptions_leave_internal_topics_out(node):
    """kafka-python (as the Java client) skips topics Metadata marks internal
    (exclude_internal_topics); librdkafka matches a pattern against every topic, internal ones
    included, against Kafka too, so it is not the client to show this with."""
    bs = node.kafka_bootstrap
    prefix = unique("rx")
    topic = f"{prefix}-a"
    create_topic(bs, topic, 2)
    produce("confluent-kafka", bs, topic, [(None, b"x", [])] * 4)
    group = unique("rxg")
    from kafka import KafkaConsumer

    c = KafkaConsumer(bootstrap_servers=bs, group_id=group, auto_offset_reset="earliest", metadata_max_age_ms=1000)
    try:
        c.subscribe(pattern=".*")

        def assigned():
            c.poll(200)
            return c.assignment()
        topics = {tp.topic for tp in wait_for(assigned, timeout=30, interval=0, what="an assignment")}
    finally:
        c.close()
    assert topic in topics
    assert not topics & set(INTERNAL)


def test_committed_offsets_keep_leader_epoch_and_metadata_and_are_kafka_records(node):
    bs = node.kafka_bootstrap
    topic, group = unique("epoch"), unique("eg")
    create_topic(bs, topic, 2)
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, 0, 5, "meta-0", 7), TopicPartition(topic, 1, 9, "", 3)],
                 asynchronous=False)
        got = {tp.partition: tp for tp in c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], 20)}
    finally:
        c.close()
    assert (got[0].offset, got[0].leader_epoch, got[0].metadata) == (5, 7, "meta-0")
    assert (got[1].offset, got[1].leader_epoch) == (9, 3)
    node.kill()  # a commit acknowledged is a record in the log: it survives a crash
    node.start()
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
    try:
        again = {tp.partition: tp for tp in c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], 20)}
    finally:
        c.close()
    assert (again[0].offset, again[0].leader_epoch, again[0].metadata) == (5, 7, "meta-0")
    # the group's partition of __consumer_offsets holds Kafka's OffsetCommitKey/Value records
    # (other groups of the shared node may hash to the same partition: their records are
    # skipped; every key, offset commit v0/v1 or group metadata v2, starts with the group name)
    reader = Consumer({"bootstrap.servers": bs, "group.id": unique("tool"), "enable.auto.commit": False})
    try:
        reader.assign([TopicPartition("__consumer_offsets", java_partition(group), 0)])
        records = []
        deadline = time.monotonic() + 20
        while len(records) < 2 and time.monotonic() < deadline:
            m = reader.poll(0.2)
            if m is not None and not m.error():
                (n,) = struct.unpack_from(">h", m.key(), 2)
                if m.key()[4:4 + n].decode() == group:
                    records.append((m.key(), m.value()))
    finally:
        reader.close()
    decoded = {}
    for key, value in records:
        version, n = struct.unpack_from(">hh", key)
        assert version == 1
        g = key[4:4 + n].decode()
        (tn,) = struct.unpack_from(">h", key, 4 + n)
        t = key[6 + n:6 + n + tn].decode()
        (part,) = struct.unpack_from(">i", key, 6 + n + tn)
        vversion, offset, epoch = struct.unpack_from(">hqi", value)
        assert vversion == 3
        decoded[(g, t, part)] = (offset, epoch)
    assert decoded == {(group, topic, 0): (5, 7), (group, topic, 1): (9, 3)}
