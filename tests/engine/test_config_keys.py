"""Configuration keys as a person types them: any spelling of a known key works, a misspelt key
is refused with a did-you-mean instead of silently starting on the default, and every key a
gateway reads is declared, so `rockafka config list` shows it and the check accepts it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from engine.config import EXTRA_KEYS, ConfigError, describe, load_node_config, resolve_key

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("spelling", ["flushDiskType", "flush_disk_type", "FLUSH_DISK_TYPE", "FLUSHDISKTYPE",
                                      "flushdisktype"])
def test_every_spelling_of_a_key_sets_it(spelling):
    assert load_node_config(overrides={spelling: "SYNC_FLUSH"}).store.flush_disk_type == "SYNC_FLUSH"


def test_environment_without_underscores_is_checked_like_the_other_spellings():
    with pytest.raises(ConfigError, match="BOGUS"):
        load_node_config(environ={"ROCKAFKA_FLUSHDISKTYPE": "BOGUS"})
    with pytest.raises(ConfigError, match="BOGUS"):
        load_node_config(environ={"ROCKAFKA_FLUSH_DISK_TYPE": "BOGUS"})
    assert load_node_config(environ={"ROCKAFKA_FLUSHDISKTYPE": "SYNC_FLUSH"}).store.flush_disk_type == "SYNC_FLUSH"


def test_admin_namesrv_variable_is_not_a_node_key():
    load_node_config(environ={"ROCKAFKA_NAMESRV": "10.0.0.1:9876"})  # `rockafka admin`'s, not serve's


def test_unknown_key_is_refused_with_a_did_you_mean():
    with pytest.raises(ConfigError) as info:
        load_node_config(overrides={"flushDiskTyp": "SYNC_FLUSH"})
    assert "flushDiskTyp" in str(info.value) and "did you mean flushDiskType" in str(info.value)
    with pytest.raises(ConfigError, match="unknown config key 'noSuchThing'"):
        load_node_config(overrides={"noSuchThing": "1"})


def test_unknown_key_in_a_config_file_names_the_file(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=b1\nflushDiskTyp=SYNC_FLUSH\n")
    with pytest.raises(ConfigError) as info:
        load_node_config(str(conf))
    assert str(conf) in str(info.value) and "flushDiskType" in str(info.value)


def test_gateway_keys_are_accepted_and_kept_as_strings():
    cfg = load_node_config(overrides={"advertised_host": "broker1.example.com", "numPartitions": "6"})
    assert cfg.extra == {"advertised_host": "broker1.example.com", "num_partitions": "6"}


def test_every_key_a_gateway_reads_is_declared():
    """A key read with ``extra_int/extra_str/extra_bool`` but not declared in EXTRA_KEYS could
    never be set (the check would refuse it): the declaration and the readers stay in step."""
    read = set()
    for package in ("engine", "broker", "gateway_kafka", "gateway_native", "gateway_grpc", "rockafka"):
        for path in (ROOT / package).rglob("*.py"):
            read.update(re.findall(r"extra_(?:int|str|bool)\(\s*\"([a-z0-9_]+)\"", path.read_text()))
    assert read, "the scan found no reader at all"
    assert sorted(read - set(EXTRA_KEYS)) == []
    assert sorted(set(EXTRA_KEYS) - read) == []  # a declared key nothing reads is a dead setting


def test_config_list_shows_every_key_with_value_and_default():
    rows = {r["key"]: r for r in describe(load_node_config(overrides={"flushDiskType": "SYNC_FLUSH",
                                                                       "num_partitions": "3"}))}
    assert rows["flushDiskType"]["value"] == "SYNC_FLUSH" and rows["flushDiskType"]["default"] == "ASYNC_FLUSH"
    assert rows["num_partitions"]["value"] == "3" and rows["num_partitions"]["about"]
    assert rows["brokerIP1"]["section"] == "broker"
    for key in ("kafkaPort", "listenPort", "storePathRootDir", "advertised_host", "messageDelayLevel"):
        assert key in rows
    assert resolve_key("brokerIP1") == "broker_ip1"
