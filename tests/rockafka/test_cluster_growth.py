"""Growing a live cluster (the seed's "Broker扩容"; docs/design/cluster.md "Growing and
shrinking"): a broker group added to a running cluster is used by new topics at once, existing
topics grow onto it with Kafka's ``kafka-topics --alter --partitions`` and RocketMQ's ``mqadmin
updateTopic -b``, and no existing partition changes its id, leader or records.

Real processes: a standalone NameServer, broker groups ``broker-a`` and ``broker-b`` (Kafka node ids
0 and 100) from the start, ``broker-c`` (200) started later. Clients: confluent-kafka, Apache
Kafka's TopicCommand, Apache RocketMQ's mqadmin, the project's RocketMQ admin.
"""

from __future__ import annotations

import subprocess
import uuid
import zlib

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from gateway_native.client.admin import Admin
from tests.compat.mqadmin import MQAdmin
from tests.rockafka.test_cluster import consume_all, leaders
from tests.support.group import TEST_SETTINGS, wait_until
from tests.support.node import ROOT, RunningNode, StandaloneNamesrv

pytestmark = pytest.mark.timeout(300)

KAFKA_TOOLS = ROOT / "compat" / "kafka-tools"
NODE_IDS = {"broker-a": 0, "broker-b": 100, "broker-c": 200}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def node(tmp_path, namesrv: StandaloneNamesrv, name: str, **settings: object) -> RunningNode:
    return RunningNode(tmp_path / name, settings=dict(TEST_SETTINGS, brokerName=name, brokerRole="ASYNC_MASTER",
                                                     namesrvAddr=namesrv.addr, kafka_node_id=NODE_IDS[name],
                                                     **settings))


def brokers(bootstrap: str) -> set[int]:
    return set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).brokers)


def wait_leaders(nodes: dict[str, RunningNode], topic: str, want: dict[int, int]) -> None:
    for name, n in nodes.items():
        seen: list = []  # what the node answered last, for the failure message

        def matches() -> bool:
            seen[:] = [leaders(n.kafka_bootstrap, topic)]
            return seen[0] == want

        try:
            wait_until(matches, 30, what=f"{name}'s metadata of {topic} = {want}")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; it answered {seen}; its log ends:\n{n.log_tail(2000)}") from None


def produce(bootstrap: str, topic: str, partitions: list[int], tag: str, n: int = 4) -> dict[int, list[bytes]]:
    sent = {p: [f"{tag}-{p}-{i}".encode() for i in range(n)] for p in partitions}
    errors: list = []
    prod = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "message.timeout.ms": 30000})
    for p, values in sent.items():
        for v in values:
            prod.produce(topic, v, partition=p, on_delivery=lambda err, msg: err and errors.append((msg.partition(), err)))
    assert prod.flush(30) == 0 and not errors, errors[:3]
    return sent


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)], request_timeout=15)[topic].result(30)


def test_a_group_added_to_a_live_cluster_takes_new_topics_and_grown_partitions(tmp_path):
    subprocess.run(["bash", str(KAFKA_TOOLS / "build.sh")], check=True, timeout=900)
    namesrv = StandaloneNamesrv(tmp_path)
    nodes = {name: node(tmp_path, namesrv, name) for name in ("broker-a", "broker-b")}
    try:
        for n in nodes.values():
            n.start()
        for n in nodes.values():
            wait_until(lambda: brokers(n.kafka_bootstrap) == {0, 100}, 60, what="both groups listed")
        bs = nodes["broker-a"].kafka_bootstrap
        old, native_topic = unique("old"), unique("native")
        create_topic(bs, old, 4)
        create_topic(bs, native_topic, 2)
        wait_leaders(nodes, old, {0: 0, 1: 0, 2: 100, 3: 100})
        wait_leaders(nodes, native_topic, {0: 0, 1: 100})
        before = produce(bs, old, [0, 1, 2, 3], "before")

        # broker-c joins the running cluster
        nodes["broker-c"] = node(tmp_path, namesrv, "broker-c").start()
        for n in nodes.values():
            wait_until(lambda: brokers(n.kafka_bootstrap) == {0, 100, 200}, 60, what="the new group listed")

        # a new topic spreads over every group, the new one included
        new = unique("new")
        create_topic(nodes["broker-b"].kafka_bootstrap, new, 3)
        wait_leaders(nodes, new, {0: 0, 1: 100, 2: 200})

        # an existing topic grows onto it with Kafka's tool: the new partition goes to the group
        # holding none of the topic, the old ones keep id and leader
        out = subprocess.run(["java", "-cp", str(KAFKA_TOOLS / "lib" / "*"), "org.apache.kafka.tools.TopicCommand",
                              "--bootstrap-server", nodes["broker-c"].kafka_bootstrap, "--alter", "--topic", old,
                              "--partitions", "5"], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
        wait_leaders(nodes, old, {0: 0, 1: 0, 2: 100, 3: 100, 4: 200})

        # ... and with RocketMQ's tool: queues on the new group, numbered after the existing ones
        (tmp_path / "mqadmin-home").mkdir()
        mqadmin = MQAdmin.built(namesrv.addr, tmp_path / "mqadmin-home")
        out = mqadmin("updateTopic", "-b", nodes["broker-c"].broker_addr, "-t", native_topic, "-r", "1", "-w", "1",
                      "-a", "+kafka.partition.ids=2")
        assert "success" in out.lower(), out[-2000:]
        wait_leaders(nodes, native_topic, {0: 0, 1: 100, 2: 200})
        with Admin(namesrv.addr) as native:
            route = native.topic_route(native_topic)
            assert sorted(bd["brokerName"] for bd in route["brokerDatas"]) == ["broker-a", "broker-b", "broker-c"]

        # records written before the growth are where they were, new ones land on every partition
        after = produce(nodes["broker-b"].kafka_bootstrap, old, [0, 1, 2, 3, 4], "after")
        want = {p: before.get(p, []) + after[p] for p in range(5)}
        assert consume_all(nodes["broker-c"].kafka_bootstrap, old, list(range(5)), 36) == want
        sent = produce(bs, native_topic, [0, 1, 2], "n")
        assert consume_all(nodes["broker-b"].kafka_bootstrap, native_topic, [0, 1, 2], 12) == sent
        sent = produce(bs, new, [0, 1, 2], "u")
        assert consume_all(nodes["broker-c"].kafka_bootstrap, new, [0, 1, 2], 12) == sent
    finally:
        for n in nodes.values():
            try:
                n.stop()
            except Exception:
                n.kill()
        namesrv.stop()


def test_a_topic_created_through_one_node_is_listed_at_once_by_a_node_whose_view_is_stale(tmp_path):
    """A producer auto-creates a topic through broker-a; a consumer asking broker-b right after
    (Metadata without auto-creation, as librdkafka's consumer sends it) is told the topic and
    its leader, not UNKNOWN_TOPIC_OR_PARTITION: librdkafka would look again only at its next
    metadata refresh (5 minutes) and read nothing until then. broker-b's periodic view refresh
    is set to 10 minutes and it started before broker-a registered, so only the lookup the
    unknown name makes can tell it."""
    from gateway_kafka.protocol.errors import ErrorCode
    from tests.gateway_kafka.kafka_helpers import RawKafka

    namesrv = StandaloneNamesrv(tmp_path)
    b = node(tmp_path, namesrv, "broker-b", cluster_view_refresh_ms=600_000).start()
    a = None
    try:
        with Admin(namesrv.addr) as native:
            wait_until(lambda: "broker-b" in (native.cluster_info().get("brokerAddrTable") or {}), 30,
                       what="broker-b registered")
        a = node(tmp_path, namesrv, "broker-a").start()
        wait_until(lambda: brokers(a.kafka_bootstrap) == {0, 100}, 30, what="broker-a lists broker-b")
        ask = {"topics": [], "allow_auto_topic_creation": False,
               "include_topic_authorized_operations": False}
        with RawKafka(b.kafka_bootstrap) as raw:
            # its view is stale: no other group listed (asked for no topic, nothing is looked up)
            assert {br["node_id"] for br in raw.request(3, 9, ask)["brokers"]} == {100}

        # a name broker-a's group auto-creates (of the live groups by name, crc32(name) % 2 == 0;
        # another name would be created by broker-b itself, and its view would not matter)
        topic = next(n for n in iter(lambda: unique("elsewhere"), None) if zlib.crc32(n.encode()) % 2 == 0)
        produce(a.kafka_bootstrap, topic, [0], "v")  # auto-created on broker-a's group
        with RawKafka(b.kafka_bootstrap) as raw:
            md = raw.request(3, 9, dict(ask, topics=[{"name": topic}]))
            missing = raw.request(3, 9, dict(ask, topics=[{"name": unique("nowhere")}]))
        t = md["topics"][0]
        assert t["error_code"] == ErrorCode.NONE, t
        assert t["partitions"] and {p["leader_id"] for p in t["partitions"]} == {0}  # broker-a leads
        assert missing["topics"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert consume_all(b.kafka_bootstrap, topic, [0], 4) == {0: [f"v-0-{i}".encode() for i in range(4)]}
    finally:
        for n in (a, b):
            if n is not None:
                try:
                    n.stop()
                except Exception:
                    n.kill()
        namesrv.stop()
