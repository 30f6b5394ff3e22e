"""Kafka clients against a broker group (a master and a slave, each ``rockafka serve``):
replicas and ISR in Metadata and in ``kafka-topics --describe``, ``replication.factor`` checked
against the group, ``acks=all`` with ``min.insync.replicas``, and KIP-392 follower fetching.

Clients: confluent-kafka (librdkafka) and Apache Kafka's own TopicCommand (kafka-tools).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.group import BrokerGroup, http_json, wait_until
from tests.support.node import ROOT

pytestmark = pytest.mark.timeout(300)

KAFKA_TOOLS = ROOT / "compat" / "kafka-tools"


@pytest.fixture(scope="module")
def group(tmp_path_factory):
    g = BrokerGroup(tmp_path_factory.mktemp("kafka-group"), role="ASYNC_MASTER",
                    master_settings={"brokerRack": "rack-a"}, slave_settings={"brokerRack": "rack-b"}).start()
    # the group's members reach each node's Kafka view through the NameServer (a second or so)
    for n in g.nodes():
        wait_until(lambda: len(AdminClient({"bootstrap.servers": n.kafka_bootstrap}).list_topics(timeout=10).brokers) == 2,
                   30, what=f"{n.data_dir.name} lists both brokers")
    yield g
    g.stop()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def admin(group) -> AdminClient:
    return AdminClient({"bootstrap.servers": group.master.kafka_bootstrap})


def create(group, name: str, rf: int, config: dict | None = None):
    client = admin(group)  # kept alive until the answer is in
    futs = client.create_topics([NewTopic(name, num_partitions=2, replication_factor=rf, config=config or {})],
                                request_timeout=15)
    return futs[name].result(30)


def partitions_of(group, bootstrap: str, topic: str):
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=15)
    return md.topics[topic].partitions, md.brokers


def wait_group_view(group, bootstrap: str, topic: str, isr_size: int):
    """Members come from NameServer registrations, refreshed every few hundred ms."""
    def ok():
        parts, brokers = partitions_of(group, bootstrap, topic)
        return (len(brokers) == 2 and all(len(p.isrs) == isr_size and len(p.replicas) == 2 for p in parts.values())
                and (parts, brokers))
    return wait_until(ok, 30, what=f"metadata with 2 replicas and {isr_size} in sync")


def test_metadata_lists_master_and_slave_as_replicas_and_isr(group):
    topic = unique("rf2")
    create(group, topic, 2)
    for bootstrap in (group.master.kafka_bootstrap, group.slaves[0].kafka_bootstrap):  # either member answers
        parts, brokers = wait_group_view(group, bootstrap, topic, 2)
        assert sorted(brokers) == [0, 1]
        assert {b.port for b in brokers.values()} == {group.master.kafka_port, group.slaves[0].kafka_port}
        for p in parts.values():
            assert p.leader == 0 and p.replicas == [0, 1] and sorted(p.isrs) == [0, 1]


def test_replication_factor_larger_than_the_group_is_refused(group):
    with pytest.raises(KafkaException) as exc:
        create(group, unique("rf3"), 3)
    assert exc.value.args[0].code() == KafkaError.INVALID_REPLICATION_FACTOR


def test_topics_created_through_a_slave_are_created_by_the_master(group):
    """The slave names the master as controller; the client sends CreateTopics there."""
    name = unique("via-slave")
    client = AdminClient({"bootstrap.servers": group.slaves[0].kafka_bootstrap})
    futs = client.create_topics([NewTopic(name, num_partitions=1, replication_factor=2)], request_timeout=15)
    futs[name].result(30)

    clients = {n.kafka_bootstrap: AdminClient({"bootstrap.servers": n.kafka_bootstrap}) for n in group.nodes()}

    def known_to(node) -> bool:
        # polled: a client's first metadata answer may be its broker-only bootstrap request
        md = clients[node.kafka_bootstrap].list_topics(name, timeout=10).topics.get(name)
        return md is not None and md.error is None and len(md.partitions) == 1
    # the master holds it (its admin API, which never creates topics)
    assert http_json(f"{group.master.admin_url}/api/topics/{name}")["topic"] == name
    wait_until(lambda: known_to(group.master), 30, what="the topic in the master's metadata")
    wait_until(lambda: known_to(group.slaves[0]), 30, what="the topic copied to the slave")


def test_a_topic_auto_created_through_a_slave_is_created_by_the_master(group):
    """Kafka lets a client's Metadata auto-create a topic on any broker. The slave asks its master
    (its own topic table is the master's copy) and answers LEADER_NOT_AVAILABLE, as Kafka does for
    a topic it has just created, or already the master's partitions when the master's topic table
    reached the slave meanwhile; the client's next Metadata there lists the master's partitions."""
    from gateway_kafka.protocol.errors import ErrorCode
    from tests.gateway_kafka.kafka_helpers import RawKafka

    name = unique("auto-via-slave")
    ask = {"topics": [{"name": name}], "allow_auto_topic_creation": True,
           "include_topic_authorized_operations": False}
    with RawKafka(group.slaves[0].kafka_bootstrap) as raw:
        first = raw.request(3, 9, ask)["topics"][0]
        assert first["error_code"] in (ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.NONE), first
        assert http_json(f"{group.master.admin_url}/api/topics/{name}")["topic"] == name

        master_id = raw.request(3, 9, {"topics": [], "include_topic_authorized_operations": False})["controller_id"]

        def listed() -> bool:
            t = raw.request(3, 9, ask)["topics"][0]
            return (t["error_code"] == ErrorCode.NONE and len(t["partitions"]) > 0
                    and {p["leader_id"] for p in t["partitions"]} == {master_id})
        wait_until(listed, 30, what="the slave to list the topic its master created")


def test_a_slave_passing_on_an_auto_creation_never_resets_a_topic_the_master_has(group):
    """The slave's request carries createOnly: a topic the master already holds (with more
    partitions than the default) is left as it is, even if the slave's copy lags behind."""
    from gateway_native.remoting.codes import RequestCode as RC, ResponseCode as R
    from tests.support.failover import remoting_call

    name = unique("kept")
    create(group, name, rf=2)  # two partitions
    resp = remoting_call(group.master.broker_addr, RC.UPDATE_AND_CREATE_TOPIC, {
        "topic": name, "readQueueNums": 1, "writeQueueNums": 1, "perm": 6, "createOnly": "true"})
    assert resp.code == R.SUCCESS, resp.remark
    assert http_json(f"{group.master.admin_url}/api/topics/{name}")["read_queue_nums"] == 2


@pytest.mark.skipif(shutil.which("java") is None, reason="needs java (make test-deps)")
def test_kafka_topics_describe_shows_replicas_and_isr(group):
    topic = unique("describe")
    create(group, topic, 2)
    wait_group_view(group, group.master.kafka_bootstrap, topic, 2)
    subprocess.run(["bash", str(KAFKA_TOOLS / "build.sh")], check=True, timeout=900)
    out = subprocess.run(["java", "-cp", str(KAFKA_TOOLS / "lib" / "*"), "org.apache.kafka.tools.TopicCommand",
                          "--bootstrap-server", group.master.kafka_bootstrap, "--describe", "--topic", topic],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = [ln for ln in out.stdout.splitlines() if "Partition:" in ln]
    assert len(lines) == 2, out.stdout
    for ln in lines:
        fields = dict(part.split(": ", 1) for part in ln.strip().split("\t") if ": " in part)
        assert fields["Leader"] == "0" and fields["Replicas"] == "0,1" and fields["Isr"] == "0,1", ln
    assert "ReplicationFactor: 2" in out.stdout


def produce_acks_all(bootstrap: str, topic: str, values: list[bytes], timeout: float = 30.0) -> list:
    results: list = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 8000, "retries": 0,
                  "enable.idempotence": False})
    for v in values:
        p.produce(topic, v, partition=0, on_delivery=lambda err, msg: results.append(err))
    p.flush(timeout)
    return results


def test_acks_all_with_min_insync_2_refuses_while_the_slave_is_down_and_resumes(group):
    topic = unique("minisr")
    create(group, topic, 2, {"min.insync.replicas": "2"})
    wait_group_view(group, group.master.kafka_bootstrap, topic, 2)
    assert produce_acks_all(group.master.kafka_bootstrap, topic, [b"ok-1", b"ok-2"]) == [None, None]
    slave = group.slaves[0]
    slave.kill()
    try:
        group.wait_in_sync(0)
        errs = produce_acks_all(group.master.kafka_bootstrap, topic, [b"refused"])
        assert errs and errs[0] is not None and errs[0].code() == KafkaError.NOT_ENOUGH_REPLICAS, errs
        # acks=1 is the master alone: still accepted
        p = Producer({"bootstrap.servers": group.master.kafka_bootstrap, "acks": 1})
        got: list = []
        p.produce(topic, b"acks1", partition=0, on_delivery=lambda err, msg: got.append(err))
        p.flush(30)
        assert got == [None]
        # Metadata's ISR is the master alone now
        wait_until(lambda: all(p.isrs == [0] for p in partitions_of(group, group.master.kafka_bootstrap, topic)[0].values()),
                   30, what="ISR without the slave")
    finally:
        slave.start()
    group.wait_in_sync()
    assert produce_acks_all(group.master.kafka_bootstrap, topic, [b"ok-3"]) == [None]
    # nothing refused was stored: the partition holds exactly what was acknowledged
    c = Consumer({"bootstrap.servers": group.master.kafka_bootstrap, "group.id": unique("g"),
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([__import__("confluent_kafka").TopicPartition(topic, 0, 0)])
    seen = []
    try:
        wait_until(lambda: (seen.extend(m.value() for m in c.consume(10, 0.5) if not m.error()) or len(seen) >= 4),
                   30, what="4 records")
    finally:
        c.close()
    assert seen == [b"ok-1", b"ok-2", b"acks1", b"ok-3"]


def test_consumer_with_client_rack_fetches_from_the_slave(group):
    """KIP-392: the master names the slave (broker.rack = the client's rack) as preferred read
    replica; librdkafka's own statistics show the fetches going there."""
    import confluent_kafka

    topic = unique("rack")
    create(group, topic, 2)
    wait_group_view(group, group.master.kafka_bootstrap, topic, 2)
    values = [f"r{i}".encode() for i in range(50)]
    assert produce_acks_all(group.master.kafka_bootstrap, topic, values) == [None] * 50
    stats: list[dict] = []
    c = Consumer({"bootstrap.servers": group.master.kafka_bootstrap, "group.id": unique("rack-g"),
                  "auto.offset.reset": "earliest", "client.rack": "rack-b", "statistics.interval.ms": 200,
                  "stats_cb": lambda s: stats.append(json.loads(s))})
    c.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    seen: list[bytes] = []
    try:
        wait_until(lambda: (seen.extend(m.value() for m in c.consume(10, 0.5) if not m.error()) or len(seen) >= 50),
                   60, what="50 records")

        def fetched_from_slave():
            c.poll(0.3)
            for s in reversed(stats):
                for b in s.get("brokers", {}).values():
                    if b.get("nodeid") == 1 and b.get("req", {}).get("Fetch", 0) > 0:
                        return True
            return False
        wait_until(fetched_from_slave, 30, what="a Fetch sent to the slave (node 1)")
    finally:
        c.close()
    assert seen == values


@pytest.mark.skipif(shutil.which("java") is None, reason="needs java (make test-deps)")
def test_dynamic_broker_configs_reach_the_slave_with_the_log(group):
    """A cluster-wide broker config set on the master (``kafka-configs --entity-default``) is a
    record of the log: the slave reports it as soon as replication brings the record."""
    from confluent_kafka.admin import ConfigResource, ConfigSource

    def kafka_configs(*args: str) -> None:
        """The tool sends a cluster-wide change to any member; a slave refuses it (its log is
        written by replication only) saying to write to the master: run again until the
        master took it, as an operator would."""
        def attempt() -> bool:
            out = subprocess.run(["java", "-cp", str(KAFKA_TOOLS / "lib" / "*"), "org.apache.kafka.tools.ConfigCommand",
                                  "--bootstrap-server", group.master.kafka_bootstrap, "--entity-type", "brokers",
                                  "--entity-default", "--alter", *args], capture_output=True, text=True, timeout=120)
            assert out.returncode == 0 or "write to the master" in out.stderr, out.stderr[-3000:]
            return out.returncode == 0
        wait_until(attempt, 90, what="the master to take the change")

    subprocess.run(["bash", str(KAFKA_TOOLS / "build.sh")], check=True, timeout=900)
    kafka_configs("--add-config", "log.cleaner.backoff.ms=7777")
    slave = AdminClient({"bootstrap.servers": group.slaves[0].kafka_bootstrap})
    slave_id = str(max(slave.list_topics(timeout=10).brokers))

    def on_slave():
        res = ConfigResource(ConfigResource.Type.BROKER, slave_id)
        entry = slave.describe_configs([res], request_timeout=10)[res].result(20)["log.cleaner.backoff.ms"]
        return entry.value == "7777" and entry.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    wait_until(on_slave, 30, what="the cluster default on the slave")
    kafka_configs("--delete-config", "log.cleaner.backoff.ms")
