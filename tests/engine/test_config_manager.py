"""Atomic JSON state files: round trips, backup on corruption, never a silent reset."""

from __future__ import annotations

import json

import pytest

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


def test_concurrent_writers_of_one_path_never_collide(tmp_path):
    """Many threads persisting one file at once (as coordinator state once did from a thread
    pool): no writer fails, a reader never finds the file missing or torn, and what is left is
    one complete document with a complete backup."""
    import threading

    from engine.config_manager import write_atomic

    path = tmp_path / "state.json"
    write_atomic(path, json.dumps({"writer": -1, "pad": "x" * 20_000}).encode())
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer(n: int) -> None:
        try:
            for i in range(40):
                write_atomic(path, json.dumps({"writer": n, "i": i, "pad": "x" * 20_000}).encode())
        except BaseException as exc:  # noqa: BLE001 - the assertion below reports it
            errors.append(exc)

    def reader() -> None:
        while not stop.is_set():
            try:
                json.loads(path.read_bytes())
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)
                return

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    watcher = threading.Thread(target=reader)
    watcher.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    watcher.join()
    assert errors == []
    assert json.loads(path.read_bytes())["i"] == 39
    assert json.loads((tmp_path / "state.json.bak").read_bytes())["i"] >= 38
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json", "state.json.bak"]


def test_temp_files_a_crash_left_are_removed_at_load(tmp_path):
    m = TopicConfigManager(tmp_path)
    m.create_or_update(TopicConfig("A"))
    (tmp_path / "topics.json.k2j3h4.tmp").write_text("{ half")
    (tmp_path / "topics.json.bak.x9y8.tmp").write_text("")
    (tmp_path / "other.json.abc.tmp").write_text("not ours")
    again = TopicConfigManager(tmp_path)
    again.load()
    assert set(again.all()) == {"A"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.json.abc.tmp", "topics.json"]


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
