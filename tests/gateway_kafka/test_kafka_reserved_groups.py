"""Operator tables (dynamic broker configs, client quotas) are group-keyed records of
``__consumer_offsets`` under names that begin with a NUL. A client using such a name as its
group id must not reach them: Rockafka answers INVALID_GROUP_ID to its commits and to a
DeleteGroups, and the cluster-wide broker config the name collides with stays.

Clients: confluent-kafka (configs) and kafka-python (group operations)."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic
from kafka import KafkaConsumer, TopicPartition
from kafka.errors import InvalidGroupIdError, KafkaError
from kafka.structs import OffsetAndMetadata

from tests.gateway_kafka.kafka_helpers import RawKafka, unique
from tests.support.node import RunningNode

pytestmark = pytest.mark.timeout(120)


def default_entry(bs: str, broker: str, key: str):
    res = ConfigResource(ConfigResource.Type.BROKER, broker)
    admin = AdminClient({"bootstrap.servers": bs})   # kept referenced until the answer is in
    return admin.describe_configs([res])[res].result(20)[key]


def test_a_nul_group_id_cannot_touch_the_cluster_wide_broker_configs(tmp_path):
    with RunningNode(tmp_path / "data") as node:
        bs = node.kafka_bootstrap
        admin = AdminClient({"bootstrap.servers": bs})
        broker = str(next(iter(admin.list_topics(timeout=10).brokers)))
        with RawKafka(bs) as raw:   # the cluster-wide default (resource name "", kafka-configs --entity-default)
            resp = raw.request(44, 1, {"resources": [{"resource_type": 4, "resource_name": "", "configs": [
                {"name": "log.cleaner.backoff.ms", "config_operation": 0, "value": "9000"}]}], "validate_only": False})
        assert [r["error_code"] for r in resp["responses"]] == [0], resp
        assert default_entry(bs, broker, "log.cleaner.backoff.ms").value == "9000"

        topic = unique("reserved")
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(20)
        consumer = KafkaConsumer(bootstrap_servers=bs, group_id="\x00", enable_auto_commit=False)
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            with pytest.raises(KafkaError) as refused:
                consumer.commit({tp: OffsetAndMetadata(0, "", -1)})
            assert isinstance(refused.value, InvalidGroupIdError) or "InvalidGroupId" in repr(refused.value)
        finally:
            consumer.close()

        with RawKafka(bs) as raw:   # DeleteGroups v2 of that name
            resp = raw.request(42, 2, {"groups_names": ["\x00"]})
        assert [(r["group_id"], r["error_code"]) for r in resp["results"]] == [("\x00", 24)]  # INVALID_GROUP_ID

        entry = default_entry(bs, broker, "log.cleaner.backoff.ms")   # still there, still the default
        assert entry.value == "9000" and entry.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
        node.stop()
        node.start()   # and in the log, not just in memory
        assert default_entry(bs, broker, "log.cleaner.backoff.ms").value == "9000"
