"""Tiered-storage topic configs through the Kafka admin API (docs/design/tiered-storage.md).

On a broker without a remote tier (``tieredBackendServiceProvider=none``, the default)
``remote.storage.enable=true`` is refused with INVALID_CONFIG and a reason, at creation and by
IncrementalAlterConfigs, rather than recorded and silently not honoured; ``false`` and the
local-retention keys are accepted. A broker with one: tests/rockafka/test_tiered_node.py.
"""

from __future__ import annotations

import pytest

from tests.gateway_kafka.kafka_helpers import unique

pytestmark = pytest.mark.timeout(120)


def test_remote_storage_enable_true_is_refused_with_a_reason(node):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                       NewTopic)

    admin = AdminClient({"bootstrap.servers": node.kafka_bootstrap})
    tiered = unique("tiered")
    with pytest.raises(KafkaException, match="INVALID_CONFIG|remote tier") as err:
        admin.create_topics([NewTopic(tiered, 1, 1, config={"remote.storage.enable": "true"})])[tiered].result(20)
    assert "remote tier" in str(err.value)
    assert tiered not in admin.list_topics(timeout=10).topics

    plain = unique("plain")
    admin.create_topics([NewTopic(plain, 1, 1, config={"remote.storage.enable": "false",
                                                         "local.retention.ms": "60000"})])[plain].result(20)
    res = ConfigResource(ConfigResource.Type.TOPIC, plain)
    res.add_incremental_config(ConfigEntry("remote.storage.enable", "true",
                                           incremental_operation=AlterConfigOpType.SET))
    with pytest.raises(KafkaException, match="INVALID_CONFIG|remote tier"):
        admin.incremental_alter_configs([res])[res].result(20)
    described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, plain)])
    entries = list(described.values())[0].result(20)
    assert entries["remote.storage.enable"].value == "false"
    assert entries["local.retention.ms"].value == "60000"


def test_native_update_topic_refuses_tiering_without_a_remote_tier(node):
    from gateway_native.client import Admin
    from gateway_native.client.message import MQBrokerError

    with Admin(node.namesrv_addr) as admin:
        with pytest.raises(MQBrokerError, match="no remote tier"):
            admin.create_topic(unique("NativeTiered"), 1, attributes={"remote.storage.enable": "true"},
                               wait_route=False)
