"""The operator's commands of ``rockafka admin`` against a real node, parsed from ``--json``:
topics describe/alter/delete (a missing topic is an error with exit 1), a test message sent and
found again by key, client message id, offset message id, time and position, groups describe,
reset-offsets (dry run first, then earliest, latest, an offset, a time) for a Kafka group and a
native group, groups delete, users and ACL lists, and ``cluster status`` in one line."""

from __future__ import annotations

import json
import re
import subprocess
import time
import uuid

import pytest
from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition

from tests.gateway_native.helpers import wait_until
from tests.support.node import RunningNode, rockafka_command

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


@pytest.fixture(scope="module")
def onode(tmp_path_factory):
    with RunningNode(tmp_path_factory.mktemp("opcli") / "data") as node:
        yield node


def admin(node, *args: str, rc: int | None = 0) -> subprocess.CompletedProcess:
    proc = subprocess.run(rockafka_command() + ["admin", "--namesrv", node.namesrv_addr, *args],
                          capture_output=True, text=True, timeout=60)
    assert rc is None or proc.returncode == rc, (args, proc.stdout, proc.stderr)
    return proc


def js(node, *args: str):
    return json.loads(admin(node, *args, "--json").stdout)


def uniq(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def test_missing_topic_and_group_are_errors_with_exit_1(onode):
    for args in (("topics", "delete", "no-such-topic"), ("topics", "describe", "no-such-topic"),
                 ("groups", "describe", "no-such-group"), ("groups", "delete", "no-such-group"),
                 ("messages", "print", "no-such-topic", "--key", "k")):
        out = admin(onode, *args, rc=1)
        assert out.stdout == "" and out.stderr.startswith("rockafka admin: ") and "does not exist" in out.stderr
        assert "Traceback" not in out.stderr


def test_topic_describe_alter_and_messages_by_every_id(onode):
    topic = uniq("OPS")
    admin(onode, "topics", "create", topic, "--queues", "2")
    sent = js(onode, "messages", "send", topic, "hello operator", "--key", "order-7", "--tag", "TagA",
              "--property", "origin=cli")
    assert sent["status"] == "SEND_OK" and sent["topic"] == topic
    assert sent["msgId"] != sent["offsetMsgId"]

    desc = js(onode, "topics", "describe", topic)
    assert desc["messages"] == 1 and len(desc["queues"]) == 2
    q = next(q for q in desc["queues"] if q["queue"] == sent["queue"])
    assert q["maxOffset"] == sent["queueOffset"] + 1 and ISO.match(q["lastStored"]) and q["replicas"]
    assert desc["configs"][0]["perm"] == "RW" and desc["configs"][0]["writeQueueNums"] == 2
    human = admin(onode, "topics", "describe", topic).stdout
    assert human.splitlines()[0] == f"topic {topic}: 2 queue(s), 1 message(s) stored"

    def indexed():
        out = admin(onode, "messages", "print", topic, "--key", "order-7", "--json", rc=None)
        return json.loads(out.stdout) if out.returncode == 0 else None

    by_key = wait_until(indexed, what="indexed by key")
    by_client_id = js(onode, "messages", "print", topic, "--id", sent["msgId"])
    by_offset_id = js(onode, "messages", "print", topic, "--id", sent["offsetMsgId"])
    by_time = js(onode, "messages", "print", topic, "--since", "2020-01-01T00:00:00Z")
    by_position = js(onode, "messages", "print", topic, "--queue", str(sent["queue"]), "--offset", "0")
    for found in (by_key, by_client_id, by_offset_id, by_time, by_position):
        assert [m["msgId"] for m in found] == [sent["msgId"]]
        m = found[0]
        assert m["body"] == "hello operator" and m["tags"] == "TagA" and m["properties"]["origin"] == "cli"
        assert ISO.match(m["storeTime"]) and isinstance(m["storeTimestamp"], int)
    admin(onode, "messages", "print", topic, "--since", "2999-01-01T00:00:00Z", rc=1)
    assert "no message" in admin(onode, "messages", "print", topic, "--id", "7F000001" + "0" * 24, rc=1).stderr

    assert js(onode, "topics", "alter", topic, "--queues", "4") == {"topic": topic, "queues": 4, "previousQueues": 2}
    assert len(js(onode, "topics", "describe", topic)["queues"]) == 4
    assert "only be added" in admin(onode, "topics", "alter", topic, "--queues", "1", rc=1).stderr

    assert js(onode, "topics", "delete", topic) == {"deleted": topic}
    wait_until(lambda: topic not in js(onode, "topics", "list"), what="topic gone")
    admin(onode, "topics", "delete", topic, rc=1)


def _send(node, topic: str, n: int) -> None:
    for i in range(n):
        admin(node, "messages", "send", topic, f"m{i}", "--key", f"k{i}")


def test_reset_offsets_of_a_kafka_group_and_a_native_group(onode):
    topic = uniq("RST")
    admin(onode, "topics", "create", topic, "--queues", "1")
    _send(onode, topic, 4)
    # a Kafka group commits offset 4 (everything), then leaves
    kgroup = uniq("kgroup")
    consumer = KafkaConsumer(bootstrap_servers=onode.kafka_bootstrap, group_id=kgroup, enable_auto_commit=False,
                             auto_offset_reset="earliest", consumer_timeout_ms=10_000)
    consumer.assign([TopicPartition(topic, 0)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 4 and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got += records
    consumer.commit()
    consumer.close()
    assert len(got) == 4

    desc = js(onode, "groups", "describe", kgroup)
    assert desc["lag"] == 0 and desc["offsets"][0]["consumerOffset"] == 4

    dry = js(onode, "groups", "reset-offsets", kgroup, "--topic", topic, "--to-earliest", "--dry-run")
    assert dry["dryRun"] is True and dry["offsets"][0]["currentOffset"] == 4 and dry["offsets"][0]["newOffset"] == 0
    assert js(onode, "groups", "describe", kgroup)["offsets"][0]["consumerOffset"] == 4  # unchanged

    assert js(onode, "groups", "reset-offsets", kgroup, "--topic", topic, "--to-earliest")["offsets"][0]["newOffset"] == 0
    assert js(onode, "groups", "describe", kgroup)["lag"] == 4
    # the Kafka consumer resumes where the reset put it
    consumer = KafkaConsumer(bootstrap_servers=onode.kafka_bootstrap, group_id=kgroup, enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    assert consumer.committed(tp) == 0
    consumer.close()

    assert js(onode, "groups", "reset-offsets", kgroup, "--topic", topic, "--to-offset", "2")["offsets"][0]["newOffset"] == 2
    assert js(onode, "groups", "describe", kgroup)["lag"] == 2
    assert js(onode, "groups", "reset-offsets", kgroup, "--topic", topic, "--to-offset", "99")["offsets"][0]["newOffset"] == 4
    assert js(onode, "groups", "reset-offsets", kgroup, "--topic", topic, "--to-datetime",
              "2020-01-01T00:00:00Z")["offsets"][0]["newOffset"] == 0
    assert js(onode, "groups", "reset-offsets", kgroup, "--topic", topic, "--to-latest")["offsets"][0]["newOffset"] == 4
    human = admin(onode, "groups", "reset-offsets", kgroup, "--topic", topic, "--to-earliest", "--dry-run").stdout
    assert "dry run: nothing changed" in human
    usage = admin(onode, "groups", "reset-offsets", kgroup, "--topic", topic, rc=2)
    assert "--to-earliest" in usage.stderr

    # a native group: offsets set by the reset itself, then deleted
    ngroup = uniq("ngroup")
    js(onode, "groups", "reset-offsets", ngroup, "--topic", topic, "--to-offset", "1")
    assert js(onode, "groups", "describe", ngroup)["lag"] == 3
    assert js(onode, "groups", "delete", ngroup) == {"deleted": ngroup}
    admin(onode, "groups", "describe", ngroup, rc=1)


def test_users_acls_and_cluster_status(onode):
    assert js(onode, "users", "list") == []
    assert js(onode, "acl", "list") == []
    status = js(onode, "cluster", "status")
    assert status["status"] == "ok" and status["masters"] == 1 and status["problems"] == []
    line = admin(onode, "cluster", "status").stdout
    assert line.startswith("OK: 1 broker group(s), 1 master(s)") and line.count("\n") == 1


def test_a_kafka_record_is_found_by_the_id_native_consumers_see(onode):
    from confluent_kafka import Producer as KafkaProducer

    from gateway_native.client import Admin

    topic = uniq("KID")
    p = KafkaProducer({"bootstrap.servers": onode.kafka_bootstrap})
    for i in range(3):
        p.produce(topic, key=f"kk-{i}".encode(), value=f"kafka body {i}".encode())
    assert p.flush(30) == 0
    with Admin(onode.namesrv_addr) as admin:
        (record,) = wait_until(lambda: admin.query_message_by_key(topic, "kk-1"), what="the record indexed")
    found = js(onode, "messages", "print", topic, "--id", record.properties["UNIQ_KEY"])
    assert [m["body"] for m in found] == ["kafka body 1"]


def test_a_kafka_group_with_a_live_member_is_not_deleted(onode):
    topic, group = uniq("LIVE"), uniq("livegroup")
    admin(onode, "topics", "create", topic, "--queues", "1")
    _send(onode, topic, 1)
    consumer = KafkaConsumer(topic, bootstrap_servers=onode.kafka_bootstrap, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        deadline = time.monotonic() + 30
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(timeout_ms=200)
        assert consumer.assignment(), "the consumer never joined"
        # nothing committed yet: the group lives only in its coordinator, and is still not deleted
        out = admin(onode, "groups", "delete", group, rc=1)
        assert "active members" in out.stderr
        consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(1, None, -1)})
        out = admin(onode, "groups", "delete", group, rc=1)
        assert "active members" in out.stderr
    finally:
        consumer.close()
    wait_until(lambda: admin(onode, "groups", "delete", group, rc=None).returncode == 0, what="deleted once empty")
    admin(onode, "groups", "describe", group, rc=1)
