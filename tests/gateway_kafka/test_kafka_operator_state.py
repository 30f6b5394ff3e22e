"""Operator state a Kafka user sets at run time, kept in the log: dynamic broker configs set with
Apache Kafka's ``kafka-configs`` survive ``kill -9`` and an old side file is migrated into the log.

Clients: Apache Kafka's ConfigCommand (kafka-tools) and confluent-kafka's AdminClient."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource

from tests.support.node import ROOT

pytestmark = [pytest.mark.timeout(300),
              pytest.mark.skipif(shutil.which("java") is None, reason="needs java (make test-deps)")]

KAFKA_TOOLS = ROOT / "compat" / "kafka-tools"


@pytest.fixture(scope="module", autouse=True)
def tools():
    subprocess.run(["bash", str(KAFKA_TOOLS / "build.sh")], check=True, timeout=900)


def kafka_configs(bs: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["java", "-cp", str(KAFKA_TOOLS / "lib" / "*"), "kafka.admin.ConfigCommand",
                           "--bootstrap-server", bs, *args], capture_output=True, text=True, timeout=120)


def broker_entry(bs: str, broker: str, key: str):
    admin = AdminClient({"bootstrap.servers": bs})
    res = ConfigResource(ConfigResource.Type.BROKER, broker)
    return admin.describe_configs([res])[res].result(20)[key]


def test_dynamic_broker_configs_live_in_the_log_and_survive_kill_9(node):
    bs = node.kafka_bootstrap
    broker = str(next(iter(AdminClient({"bootstrap.servers": bs}).list_topics(timeout=10).brokers)))
    out = kafka_configs(bs, "--entity-type", "brokers", "--entity-name", broker, "--alter",
                        "--add-config", "log.cleaner.threads=4,max.connections.per.ip=500")
    assert out.returncode == 0, out.stderr[-3000:]
    out = kafka_configs(bs, "--entity-type", "brokers", "--entity-default", "--alter",
                        "--add-config", "log.cleaner.threads=2,log.cleaner.backoff.ms=9000")
    assert out.returncode == 0, out.stderr[-3000:]
    assert not (node.data_dir / "config" / "kafkaDynamicConfig.json").exists()  # no side file

    node.kill()   # SIGKILL: only what is in the log comes back
    node.start()
    entry = broker_entry(bs, broker, "log.cleaner.threads")   # per broker wins over the default
    assert entry.value == "4" and entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    entry = broker_entry(bs, broker, "log.cleaner.backoff.ms")
    assert entry.value == "9000" and entry.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    out = kafka_configs(bs, "--entity-type", "brokers", "--entity-name", broker, "--describe")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "max.connections.per.ip=500" in out.stdout and "log.cleaner.threads=4" in out.stdout, out.stdout

    out = kafka_configs(bs, "--entity-type", "brokers", "--entity-name", broker, "--alter",
                        "--delete-config", "log.cleaner.threads,max.connections.per.ip")
    assert out.returncode == 0, out.stderr[-3000:]
    entry = broker_entry(bs, broker, "log.cleaner.threads")   # the cluster default shows through
    assert entry.value == "2" and entry.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    out = kafka_configs(bs, "--entity-type", "brokers", "--entity-default", "--alter",
                        "--delete-config", "log.cleaner.threads,log.cleaner.backoff.ms")
    assert out.returncode == 0, out.stderr[-3000:]


def test_a_side_file_of_an_older_version_is_migrated_into_the_log(node):
    bs = node.kafka_bootstrap
    broker = str(next(iter(AdminClient({"bootstrap.servers": bs}).list_topics(timeout=10).brokers)))
    node.stop()
    legacy = node.data_dir / "config" / "kafkaDynamicConfig.json"
    legacy.write_text(json.dumps({"version": 1, "brokers": {"": {"log.roll.ms": "3600000"},
                                                            broker: {"message.max.bytes": "70000"}}}))
    node.start()
    assert not legacy.exists() and legacy.with_name(legacy.name + ".migrated").exists()
    entry = broker_entry(bs, broker, "message.max.bytes")
    assert entry.value == "70000" and entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value

    node.kill()   # the file is gone: the values come from the log
    node.start()
    entry = broker_entry(bs, broker, "log.roll.ms")
    assert entry.value == "3600000" and entry.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    out = kafka_configs(bs, "--entity-type", "brokers", "--entity-name", broker, "--alter",
                        "--delete-config", "message.max.bytes")
    assert out.returncode == 0, out.stderr[-3000:]
    out = kafka_configs(bs, "--entity-type", "brokers", "--entity-default", "--alter", "--delete-config", "log.roll.ms")
    assert out.returncode == 0, out.stderr[-3000:]
