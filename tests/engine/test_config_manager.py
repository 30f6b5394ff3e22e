"""Atomic JSON state files: round trips, backup on corruption, never a silent reset."""

from __future__ import annotations

import json

import pytest

from engine.consumer_offset import ConsumerOffsetManager
from engine.errors import StoreConfigError
from engine.subscription_group import SubscriptionGroupConfig, SubscriptionGroupManager
from engine.topic_config import TopicConfig, TopicConfigManager


def test_topic_config_round_trip_uses_rocketmq_field_names(tmp_path):
    m = TopicConfigManager(tmp_path)
    m.create_or_update(TopicConfig("T", 3, 5, order=True, attributes={"cleanup.policy": "delete"}))
    doc = json.loads((tmp_path / "topics.json").read_text())
    assert doc["topicConfigTable"]["T"]["readQueueNums"] == 3
    assert doc["topicConfigTable"]["T"]["writeQueueNums"] == 5
    again = TopicConfigManager(tmp_path)
    again.load()
    assert again.get("T") == TopicConfig("T", 3, 5, order=True, attributes={"cleanup.policy": "delete"})
    assert again.data_version.counter == 1
    again.delete("T")
    assert again.get("T") is None


def test_corrupt_file_is_reported_and_backup_used(tmp_path):
    m = TopicConfigManager(tmp_path)
    m.create_or_update(TopicConfig("A"))
    m.create_or_update(TopicConfig("B"))  # .bak now holds the state with A only
    (tmp_path / "topics.json").write_text("{ torn")
    again = TopicConfigManager(tmp_path)
    again.load()
    assert set(again.all()) == {"A"}


def test_both_copies_corrupt_is_an_error_not_a_reset(tmp_path):
    (tmp_path / "topics.json").write_text("garbage")
    (tmp_path / "topics.json.bak").write_text("garbage too")
    with pytest.raises(StoreConfigError, match="unreadable"):
        TopicConfigManager(tmp_path).load()


def test_consumer_offsets_keyed_topic_at_group(tmp_path):
    m = ConsumerOffsetManager(tmp_path)
    m.commit("g1", "T", 0, 10)
    m.commit("g1", "T", 1, 11, metadata="m")
    m.commit("g2", "U", 0, 5)
    assert m.query("g1", "T", 1) == 11 and m.query("g1", "T", 9) == -1
    assert m.offsets_of("g1") == {("T", 0): 10, ("T", 1): 11}
    assert m.groups() == {"g1", "g2"}
    m.persist()
    doc = json.loads((tmp_path / "consumerOffset.json").read_text())
    assert doc["offsetTable"]["T@g1"] == {"0": 10, "1": 11}
    again = ConsumerOffsetManager(tmp_path)
    again.load()
    assert again.query_metadata("g1", "T", 1) == "m"
    again.delete_group("g1")
    assert again.groups() == {"g2"}
    again.delete("g2", "U", 0)
    assert again.query("g2", "U", 0) == -1


def test_subscription_groups_auto_create_and_persist(tmp_path):
    m = SubscriptionGroupManager(tmp_path)
    assert m.find_or_create("G").retry_max_times == 16
    m.create_or_update(SubscriptionGroupConfig("H", consume_broadcast_enable=False))
    again = SubscriptionGroupManager(tmp_path)
    again.load()
    assert set(again.all()) == {"G", "H"} and again.get("H").consume_broadcast_enable is False
    doc = json.loads((tmp_path / "subscriptionGroup.json").read_text())
    assert doc["subscriptionGroupTable"]["H"]["consumeBroadcastEnable"] is False


def test_store_keys_are_validated_with_their_names():
    from engine.config import ConfigError, load_node_config

    assert load_node_config(overrides={"deleteWhen": "04;16", "fileReservedTime": "48"}).store.file_reserved_time == 48
    for bad, named in (({"deleteWhen": "25"}, "deleteWhen"), ({"diskMaxUsedSpaceRatio": "120"}, "disk_max_used_space_ratio"),
                       ({"mappedFileSizeCommitLog": "0"}, "mapped_file_size_commit_log"),
                       ({"flushDiskType": "SOMETIMES"}, "flushDiskType")):
        with pytest.raises(ConfigError, match=named):
            load_node_config(overrides=bad)


def test_limit_and_flow_control_keys_in_kafka_and_rocketmq_spellings():
    from engine.config import ConfigError, load_node_config

    cfg = load_node_config(overrides={"max.connections.per.ip": "50", "queued.max.request.bytes": "1048576",
                                      "connections.max.idle.ms": "0", "serverChannelMaxIdleTimeSeconds": "30",
                                      "waitTimeMillsInSendQueue": "500", "osPageCacheBusyTimeOutMills": "2000",
                                      "cleanFileForciblyEnable": "false"},
                           environ={"ROCKAFKA_MAX_CONNECTIONS": "900"})
    lim = cfg.limits
    assert (lim.max_connections, lim.max_connections_per_ip, lim.queued_max_request_bytes) == (900, 50, 1 << 20)
    assert lim.connections_max_idle_ms == 0 and lim.server_channel_max_idle_time_seconds == 30
    assert cfg.broker.wait_time_mills_in_send_queue == 500
    assert cfg.store.os_page_cache_busy_time_out_mills == 2000 and cfg.store.clean_file_forcibly_enable is False
    assert not cfg.extra  # every one of them is a known key
    assert load_node_config(overrides={"queued.max.request.bytes": "-1"}).limits.queued_max_request_bytes == -1
    for bad, named in (({"max_connections": "0"}, "max_connections"), ({"queued.max.request.bytes": "-2"}, "queued_max"),
                       ({"request_receive_timeout_ms": "-5"}, "request_receive_timeout_ms")):
        with pytest.raises(ConfigError, match=named):
            load_node_config(overrides=bad)
