"""Java kafka-clients 4.4 with ``group.protocol=consumer`` (KIP-848): two members of one group
share a topic's partitions, each record is consumed once ("commit, then emit", so a repeat is a
real duplicate), a member leaving hands its partitions to the other, and Apache Kafka's
``kafka-consumer-groups --describe --members --verbose`` (tools 4.3.1) shows the members'
epochs and assignments. The members also fetch through incremental fetch sessions by topic id
(Fetch 17)."""

from __future__ import annotations

import shutil
import subprocess
import urllib.request

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.compat import java_runner
from tests.gateway_kafka.kafka_helpers import unique
from tests.support.node import ROOT

pytestmark = [pytest.mark.timeout(240),
              pytest.mark.skipif(shutil.which("java") is None, reason="needs java (make test-deps)")]

KAFKA_TOOLS = ROOT / "compat" / "kafka-tools"


def produce(bs: str, topic: str, values: list[str]) -> None:
    p = Producer({"bootstrap.servers": bs, "linger.ms": 0})
    for i, v in enumerate(values):
        p.produce(topic, v.encode(), partition=i % 2)
    assert p.flush(30) == 0


def test_java_consumer_protocol_members_share_and_hand_over_partitions(node):
    java_runner.build(java_runner.KAFKA_DIR)
    subprocess.run(["bash", str(KAFKA_TOOLS / "build.sh")], check=True, timeout=900)
    bs = node.kafka_bootstrap
    topic, group = unique("kip848"), unique("g848")
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    members = java_runner.JavaMembers(bs)
    try:
        for name in ("a", "b"):
            members.send(f"consumer {name} {group} {topic} group.protocol=consumer auto.offset.reset=earliest")

        def owned() -> dict[str, set]:
            """Each member's partitions after its latest assigned/revoked event."""
            out: dict[str, set] = {"a": set(), "b": set()}
            for e in members.snapshot():
                if e.get("event") == "assigned":
                    out[e["member"]] |= {p for _t, p in e["partitions"]}
                elif e.get("event") in ("revoked", "lost"):
                    out[e["member"]] -= {p for _t, p in e["partitions"]}
            return out
        members.wait_for(lambda _e: owned() == {"a": {0}, "b": {1}} or owned() == {"a": {1}, "b": {0}}, 60,
                         "one partition each")
        first = [f"r{i}" for i in range(20)]
        produce(bs, topic, first)
        members.wait_for(lambda _e: len(members.records()) >= 20, 60, "the first 20 records")
        assert sorted(r[3] for r in members.records()) == sorted(first)
        assert {r[1] for r in members.records("a")} | {r[1] for r in members.records("b")} == {0, 1}

        out = subprocess.run(["java", "-cp", str(KAFKA_TOOLS / "lib" / "*"), "org.apache.kafka.tools.consumer.group."
                              "ConsumerGroupCommand", "--bootstrap-server", bs, "--describe", "--members", "--verbose",
                              "--group", group], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-3000:]
        assert "CURRENT-EPOCH" in out.stdout and f"{topic}:0" in out.stdout and f"{topic}:1" in out.stdout, out.stdout

        members.send("stop a")
        members.wait_for(lambda _e: owned()["b"] == {0, 1}, 60, "b taking over a's partition")
        later = [f"s{i}" for i in range(10)]
        produce(bs, topic, later)
        members.wait_for(lambda _e: len(members.records()) >= 30, 60, "the later 10 records")
        values = [r[3] for r in members.records()]
        assert sorted(values) == sorted(first + later), "a record was lost or consumed twice"
        assert not members.errors(), members.errors()
        metrics = urllib.request.urlopen(f"{node.admin_url}/metrics", timeout=10).read().decode()
        incremental = [ln for ln in metrics.splitlines()
                       if ln.startswith('rockafka_kafka_fetch_session_requests_total{kind="incremental"}')]
        assert incremental and float(incremental[0].rsplit(" ", 1)[1]) > 0, incremental
    finally:
        members.close()
