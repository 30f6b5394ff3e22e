"""What a Kafka operator sets at run time: dynamic broker configs set with Apache Kafka's
``kafka-configs`` live in the log (survive ``kill -9``; an old side file is migrated into it);
``retention.bytes`` bounds each partition.

Clients: Apache Kafka's ConfigCommand (kafka-tools) and confluent-kafka."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, NewTopic

from tests.gateway_kafka.kafka_helpers import unique, wait_for
from tests.support.node import ROOT, RunningNode

pytestmark = [pytest.mark.timeout(300),
              pytest.mark.skipif(shutil.which("java") is None, reason="needs java (make test-deps)")]

KAFKA_TOOLS = ROOT / "compat" / "kafka-tools"


@pytest.fixture(scope="module", autouse=True)
def tools():
    subprocess.run(["bash", str(KAFKA_TOOLS / "build.sh")], check=True, timeout=900)


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    """One node for the module; retention passes every 300 ms."""
    with RunningNode(tmp_path_factory.mktemp("operator") / "data", settings={"cleanResourceInterval": 300}) as n:
        yield n


def kafka_configs(bs: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["java", "-cp", str(KAFKA_TOOLS / "lib" / "*"), "org.apache.kafka.tools.ConfigCommand",
                           "--bootstrap-server", bs, *args], capture_output=True, text=True, timeout=120)


def delete_broker_configs(bs: str, broker: str, *keys: str) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    change = ConfigResource(ConfigResource.Type.BROKER, broker, incremental_configs=[
        ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in keys])
    admin.incremental_alter_configs([change])[change].result(20)


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
    assert broker_entry(bs, broker, "max.connections.per.ip").value == "500"

    delete_broker_configs(bs, broker, "log.cleaner.threads", "max.connections.per.ip")
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
    delete_broker_configs(bs, broker, "message.max.bytes")
    out = kafka_configs(bs, "--entity-type", "brokers", "--entity-default", "--alter", "--delete-config", "log.roll.ms")
    assert out.returncode == 0, out.stderr[-3000:]


def test_retention_bytes_moves_each_partitions_log_start(node):
    """A topic with ``retention.bytes`` keeps, per partition, the newest batches that fit: the
    log start offset moves forward, a consumer from the beginning starts there; a partition
    under the limit keeps everything."""
    bs = node.kafka_bootstrap
    topic = unique("rbytes")
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, 2, 1, config={"retention.bytes": "20000"})])[topic].result(30)
    p = Producer({"bootstrap.servers": bs, "linger.ms": 0, "batch.num.messages": 1})
    for i in range(60):   # ~1 KiB records, one batch each: ~60 KiB in partition 0
        p.produce(topic, b"%04d" % i + b"." * 1000, partition=0)
        p.poll(0)
    p.produce(topic, b"small", partition=1)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": bs, "group.id": unique("g"), "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    try:
        def log_start():
            # a retention pass that ran while the records were still arriving moved the start
            # less far (one fresh-clone run saw 1); the pass after the last one moves it past 40
            low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)
            return low if low >= 40 else None
        low = wait_for(log_start, timeout=30, interval=0.2, what="the retention pass to move the log start")
        assert 40 <= low < 60   # 20000 bytes hold ~18 of these batches; Kafka keeps whole batches too
        assert c.get_watermark_offsets(TopicPartition(topic, 1), timeout=10, cached=False) == (0, 1)
        c.subscribe([topic])
        first: dict[int, int] = {}

        def consumed():
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                first.setdefault(m.partition(), m.offset())
                if m.partition() == 0:
                    assert m.value().startswith(b"%04d" % m.offset())
            return len(first) == 2
        wait_for(consumed, timeout=30, interval=0, what="records of both partitions")
        assert first[0] >= low and first[1] == 0
    finally:
        c.close()


def test_client_quotas_set_with_kafka_configs_throttle_producers_and_consumers(node):
    """``kafka-configs --entity-type users|clients``: quotas are stored (and survive ``kill -9``),
    described, and throttle: a producer (its user, ANONYMOUS without a login, and its client id)
    and a consumer (the default client-id quota) over their byte rates still get every record,
    with ``throttle_time_ms`` reported to them; a client id without a quota is never throttled."""
    bs = node.kafka_bootstrap
    out = kafka_configs(bs, "--entity-type", "users", "--entity-name", "ANONYMOUS", "--entity-type", "clients",
                        "--entity-name", "slow-producer", "--alter",
                        "--add-config", "producer_byte_rate=100000,request_percentage=200")
    assert out.returncode == 0, out.stderr[-3000:]
    out = kafka_configs(bs, "--entity-type", "clients", "--entity-default", "--alter",
                        "--add-config", "consumer_byte_rate=100000")
    assert out.returncode == 0, out.stderr[-3000:]

    node.kill()   # what throttles below came back from the log
    node.start()
    out = kafka_configs(bs, "--entity-type", "users", "--entity-name", "ANONYMOUS", "--entity-type", "clients",
                        "--describe")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "slow-producer" in out.stdout and "producer_byte_rate=100000" in out.stdout, out.stdout
    assert "consumer_byte_rate" not in out.stdout   # the default client id is another entity

    topic = unique("quota")
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    chunk = b"q" * 50_000

    def produce(client_id: str, most: int) -> tuple[int, list[int]]:
        """Send 50 kB records one at a time until the broker reports a throttle (at most ``most``)."""
        throttles: list[int] = []
        p = Producer({"bootstrap.servers": bs, "client.id": client_id, "linger.ms": 0,
                      "throttle_cb": lambda ev: throttles.append(int(ev.throttle_time * 1000))})
        sent = 0
        while sent < most and not any(throttles):
            p.produce(topic, chunk, partition=0)
            assert p.flush(30) == 0
            sent += 1
        return sent, throttles

    sent_fast, throttles = produce("fast-producer", 6)   # no quota of its own or by default
    assert sent_fast == 6 and not any(throttles)
    # 100 kB/s over Kafka's 10 s minimum window: throttled once past ~1 MB
    sent_slow, throttles = produce("slow-producer", 60)
    assert any(throttles) and 20 <= sent_slow < 60, (sent_slow, throttles)
    total = sent_fast + sent_slow

    # the default client-id quota (100 kB/s) applies to this consumer: throttled, every record read
    consumer_throttles: list[int] = []
    c = Consumer({"bootstrap.servers": bs, "group.id": unique("g"), "client.id": "some-consumer",
                  "enable.auto.commit": False,
                  "throttle_cb": lambda ev: consumer_throttles.append(int(ev.throttle_time * 1000))})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        seen = set()

        def all_read():
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                seen.add(m.offset())
            return len(seen) == total and any(consumer_throttles)
        wait_for(all_read, timeout=60, interval=0, what=f"all {total} records and a throttle")
    finally:
        c.close()


def test_controller_mutation_rate_refuses_then_throttles_topic_changes(node, caplog):
    """``controller_mutation_rate`` (KIP-599) set with kafka-configs: kafka-python's admin
    (CreateTopics v7, DeleteTopics v6, CreatePartitions v3: strict) may take the bucket (rate x
    11 s of partitions) into debt with one topic; the topics after it are refused with
    THROTTLING_QUOTA_EXCEEDED and not created, and while the debt lasts deletes and partition
    additions are refused too. The same client on CreateTopics v5 (lenient, as a Kafka 2.6 client
    sends) gets its topic created anyway. A client id without the quota is never refused."""
    from kafka.admin import KafkaAdminClient, NewPartitions, NewTopic as KpNewTopic

    bs = node.kafka_bootstrap
    client = unique("mutator")
    # 0.1 partitions/s: a bucket of 1.1; the 40 partitions below are ~390 s of debt
    out = kafka_configs(bs, "--entity-type", "clients", "--entity-name", client, "--alter",
                        "--add-config", "controller_mutation_rate=0.1")
    assert out.returncode == 0, out.stderr[-3000:]
    first, second, third = unique("mut-a"), unique("mut-b"), unique("mut-c")

    def admin(**kw):
        return KafkaAdminClient(bootstrap_servers=bs, client_id=client, request_timeout_ms=30_000, **kw)

    a = admin()
    try:
        res = a.create_topics([KpNewTopic(first, 40, 1), KpNewTopic(second, 1, 1), KpNewTopic(third, 1, 1)],
                              raise_errors=False)
    finally:
        a.close()
    codes = {t["name"]: (t["error_code"], t["error_message"]) for t in res["topics"]}
    assert codes[first][0] == 0, codes
    assert codes[second] == (89, "The throttling quota has been exceeded.") and codes[third][0] == 89, codes

    def once(call):
        """One admin call on a connection of its own (a throttled one stays muted for ~390 s)."""
        c = admin()
        try:
            return call(c)
        finally:
            c.close()

    assert once(lambda c: c.delete_topics([first], raise_errors=False))["topics"][0]["error_code"] == 89
    refused = once(lambda c: c.create_partitions({first: NewPartitions(41)}, raise_errors=False))
    assert refused.results[0].error_code == 89
    names = set(once(lambda c: c.list_topics()))
    assert first in names and second not in names and third not in names

    lenient = admin(api_version=(2, 6))   # CreateTopics v5: created, only throttled
    caplog.clear()
    try:
        res = lenient.create_topics([KpNewTopic(second, 1, 1)], raise_errors=False)
        assert res["topics"][0]["error_code"] == 0, res
    finally:
        lenient.close()
    assert any("CreateTopicsResponse throttled by broker" in r.getMessage() for r in caplog.records), caplog.text

    other = KafkaAdminClient(bootstrap_servers=bs, client_id=unique("free"), request_timeout_ms=30_000)
    try:
        assert other.create_topics([KpNewTopic(third, 40, 1)], raise_errors=False)["topics"][0]["error_code"] == 0
        assert other.delete_topics([first], raise_errors=False)["topics"][0]["error_code"] == 0
    finally:
        other.close()
    other = KafkaAdminClient(bootstrap_servers=bs, client_id=unique("free"), request_timeout_ms=30_000)
    try:
        names = set(other.list_topics())
        assert {second, third} <= names and first not in names
    finally:
        other.close()
