"""Apache RocketMQ's operator CLI, ``mqadmin`` (rocketmq-tools 5.5 from Maven Central, resolved by
``compat/rocketmq-tools/build.sh``), against a real ``rockafka serve``.

Every subcommand an operator runs for the cluster, brokers, the NameServer, topics, groups,
messages and offsets is run as a separate ``mqadmin`` process, and its output is checked against
what it states about this node: addresses, versions, counts, offsets, configuration values,
message contents — not just the exit status (mqadmin exits 0 even when a command failed, so
every check reads the text). Live clients come from the stock Java client runner's
``admin-fixture`` scenario: a producer and a push consumer with message trace on, which sent and
consumed ten messages and stay online until the module ends.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.compat import java_runner
from tests.compat.mqadmin import MQAdmin
from tests.support.group import wait_until

SENT = 10  # messages the admin-fixture scenario sends and consumes

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def mqadmin(node, tmp_path_factory):
    return MQAdmin.built(node.namesrv_addr, tmp_path_factory.mktemp("mqadmin-home"))


@pytest.fixture(scope="module")
def clients(node, tmp_path_factory):
    """The admin-fixture runner, online until the module ends; its ``admin_*`` info lines."""
    java_runner.build(java_runner.ROCKETMQ_DIR)
    cmd = java_runner.rocketmq_command("5.x", node.namesrv_addr, "JSON", ["admin-fixture"],
                                       tmp_path_factory.mktemp("admin-fixture"))
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    info: dict[str, str] = {}
    lines: list[str] = []
    deadline = time.monotonic() + 120
    try:
        while "admin_ready" not in info:
            line = proc.stdout.readline()
            if not line or time.monotonic() > deadline:
                pytest.fail("admin-fixture did not get ready:\n" + "".join(lines[-40:]))
            lines.append(line)
            if line.startswith("{"):
                obj = json.loads(line)
                if obj.get("type") == "info":
                    info[obj["key"]] = str(obj["value"])
                elif obj.get("type") == "check" and not obj["ok"]:
                    pytest.fail(f"admin-fixture check failed: {obj}")
        yield info
    finally:
        proc.stdin.close()  # the scenario returns, the runner shuts its clients down
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.fixture(scope="module")
def reads(node, mqadmin, clients, tmp_path_factory):
    """The read-only commands, run once, side by side, after the clients are ready."""
    topic, group = clients["admin_topic"], clients["admin_consumer_group"]
    qid, qoff = clients["admin_queue"].split("@")
    export = tmp_path_factory.mktemp("export")
    out = mqadmin.many({
        "clusterList": ["clusterList"],
        "brokerStatus": ["brokerStatus", "-b", node.broker_addr],
        "getNamesrvConfig": ["getNamesrvConfig"],
        "topicListC": ["topicList", "-c"],
        "statsAllTopic": ["statsAll", "-t", topic],
        "statsAll": ["statsAll"],
        "consumerConnection": ["consumerConnection", "-g", group],
        "consumerProgressGroup": ["consumerProgress", "-g", group],
        "consumerProgress": ["consumerProgress"],
        "consumerStatus": ["consumerStatus", "-g", group],
        "brokerConsumeStats": ["brokerConsumeStats", "-b", node.broker_addr],
        "producerConnection": ["producerConnection", "-g", clients["admin_producer_group"], "-t", topic],
        "producerConnectionUnknown": ["producerConnection", "-g", "no-such-producer-group", "-t", topic],
        "queryMsgById": ["queryMsgById", "-i", clients["admin_offset_msg_id"], "-t", topic],
        "queryMsgByUniqueKey": ["queryMsgByUniqueKey", "-i", clients["admin_msg_id"], "-t", topic],
        "queryMsgByKey": ["queryMsgByKey", "-t", topic, "-k", clients["admin_key"]],
        "queryMsgByOffset": ["queryMsgByOffset", "-t", topic, "-b", "broker-a", "-i", qid, "-o", qoff],
        "queryCq": ["queryCq", "-t", topic, "-q", qid, "-i", qoff, "-c", "1"],
        "queryMsgTraceById": ["queryMsgTraceById", "-i", clients["admin_msg_id"]],
        "exportMetadata": ["exportMetadata", "-c", "DefaultCluster", "-f", str(export)],
    })
    out["exportDir"] = str(export)
    return out


def _rows(text: str, first: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.split()[:1] == [first]]


def _route(text: str) -> dict:
    """topicRoute prints fastjson, whose broker-id keys are bare numbers: quote them first."""
    return json.loads(re.sub(r"^(\s*)(\d+):", r'\1"\2":', text, flags=re.M))


def _kv(text: str, sep: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        if sep in line:
            k, _, v = line.partition(sep)
            out[k.strip()] = v.strip()
    return out


# ---------------------------------------------------------------------- cluster and brokers

def test_cluster_list(node, reads):
    out = reads["clusterList"]
    rows = _rows(out, "DefaultCluster")
    assert len(rows) == 1, out
    cluster, broker_name, bid, addr, version = rows[0][:5]
    assert (broker_name, bid, addr) == ("broker-a", "0", node.broker_addr), out
    assert version == "V5_1_4", out
    assert rows[0][-1] == "true", out  # ACTIVATED


def test_broker_status_reports_the_store(node, reads):
    out = reads["brokerStatus"]
    kv = _kv(out, ":")
    assert kv["brokerRole"] == "ASYNC_MASTER" and kv["brokerId"] == "0", out
    assert kv["brokerActive"] == "true", out
    assert int(kv["msgPutTotalTodayNow"]) >= SENT, out  # the fixture's ten sends
    assert int(kv["msgGetTotalTodayNow"]) >= SENT, out  # and its ten deliveries
    assert int(kv["commitLogMaxOffset"]) > int(kv["commitLogMinOffset"]) >= 0, out
    assert int(kv["earliestMessageTimeStamp"]) > 1_600_000_000_000, out
    assert 0 < float(kv["commitLogDiskRatio"]) < 1, out
    assert kv["brokerVersionDesc"] == "V5_1_4", out


def test_broker_config_get_and_update(node, mqadmin, clients):
    b = node.broker_addr
    kv = _kv(mqadmin("getBrokerConfig", "-b", b), "=")
    assert kv["brokerName"] == "broker-a" and kv["brokerClusterName"] == "DefaultCluster", kv
    assert kv["listenPort"] == b.rsplit(":", 1)[1], kv
    assert kv["flushDiskType"] == "ASYNC_FLUSH", kv
    old = kv["maxMessageSize"]
    out = mqadmin.many({
        "update": ["updateBrokerConfig", "-b", b, "-k", "maxMessageSize", "-v", "2097152"],
        # a key that only takes effect at start is refused, naming it; a bad value too
        "static": ["updateBrokerConfig", "-b", b, "-k", "listenPort", "-v", "1"],
        "bad": ["updateBrokerConfig", "-b", b, "-k", "flushIntervalCommitLog", "-v", "-5"],
    })
    assert "update broker config success" in out["update"], out["update"]
    assert "CODE: 16" in out["static"] and "listenPort" in out["static"], out["static"]
    assert "CODE: 29" in out["bad"] and "flush_interval_commit_log must be positive" in out["bad"], out["bad"]
    kv = _kv(mqadmin("getBrokerConfig", "-b", b), "=")
    assert kv["maxMessageSize"] == "2097152" and kv["flushIntervalCommitLog"] == "500", kv
    mqadmin("updateBrokerConfig", "-b", b, "-k", "maxMessageSize", "-v", old)


def test_namesrv_config_and_write_permission(node, mqadmin, clients, reads):
    kv = _kv(reads["getNamesrvConfig"], "=")
    assert kv["listenPort"] == node.namesrv_addr.rsplit(":", 1)[1], kv
    topic = clients["admin_topic"]
    out = mqadmin.many({"update": ["updateNamesrvConfig", "-k", "scanNotActiveBrokerInterval", "-v", "7000"],
                        "wipe": ["wipeWritePerm", "-b", "broker-a"]})
    assert "update name server config success" in out["update"], out["update"]
    assert re.search(r"wipe write perm of broker\[broker-a\].* OK, [1-9]", out["wipe"]), out["wipe"]
    out = mqadmin.many({"config": ["getNamesrvConfig"], "route": ["topicRoute", "-t", topic]})
    assert _kv(out["config"], "=")["scanNotActiveBrokerInterval"] == "7000", out["config"]
    assert _route(out["route"])["queueDatas"][0]["perm"] == 4, out["route"]
    out = mqadmin("addWritePerm", "-b", "broker-a")
    assert re.search(r"add write perm of broker\[broker-a\].* OK, [1-9]", out), out
    assert _route(mqadmin("topicRoute", "-t", topic))["queueDatas"][0]["perm"] == 6


# ---------------------------------------------------------------------- topics

def test_topic_lifecycle(node, mqadmin, clients):
    topic = "ops-topic-" + clients["admin_topic"].rsplit("-", 1)[1]
    out = mqadmin("updateTopic", "-c", "DefaultCluster", "-t", topic, "-r", "3", "-w", "3")
    assert f"topicName={topic}, readQueueNums=3, writeQueueNums=3" in out, out
    out = mqadmin.many({"list": ["topicList"], "route": ["topicRoute", "-t", topic],
                        "clusters": ["topicClusterList", "-t", topic],
                        "send": ["sendMessage", "-t", topic, "-p", "hello-ops", "-k", "opskey", "-c", "TagOps"]})
    assert topic in out["list"].split()
    route = _route(out["route"])
    assert route["queueDatas"][0]["readQueueNums"] == 3 and route["brokerDatas"][0]["brokerAddrs"]["0"] == node.broker_addr
    assert out["clusters"].split() == ["DefaultCluster"]
    assert "SEND_OK" in out["send"], out["send"]
    out = mqadmin.many({"status": ["topicStatus", "-t", topic],
                        "perm": ["updateTopicPerm", "-c", "DefaultCluster", "-t", topic, "-p", "4"]})
    rows = _rows(out["status"], "broker-a")
    assert sorted(int(r[3]) for r in rows) == [0, 0, 1], rows  # max offsets: one message in one of 3 queues
    assert "update topic perm from 6 to 4" in out["perm"], out["perm"]
    out = mqadmin("sendMessage", "-t", topic, "-p", "x")
    assert "SEND_OK" not in out and "No route info of this topic" in out, out
    out = mqadmin("deleteTopic", "-c", "DefaultCluster", "-t", topic)
    assert f"delete topic [{topic}] from cluster [DefaultCluster] success" in out, out
    assert topic not in mqadmin("topicList").split()


def test_topic_list_with_groups_and_stats(clients, reads):
    topic, group = clients["admin_topic"], clients["admin_consumer_group"]
    rows = [r for r in _rows(reads["topicListC"], "DefaultCluster") if r[1] == topic]
    assert [group] in [r[2:] for r in rows], rows
    rows = _rows(reads["statsAllTopic"], topic)
    assert len(rows) == 1, rows
    _, g, accumulation, in_tps, out_tps, in_24h, out_24h = rows[0]
    assert (g, accumulation, in_24h, out_24h) == (group, "0", str(SENT), str(SENT)), rows
    assert "rmq_sys_" not in reads["statsAll"] and topic in reads["statsAll"]


# ---------------------------------------------------------------------- groups and clients

def test_subscription_group_lifecycle(node, mqadmin, clients):
    group = "ops-group-" + clients["admin_topic"].rsplit("-", 1)[1]
    out = mqadmin("updateSubGroup", "-c", "DefaultCluster", "-g", group, "-r", "3")
    assert f"groupName={group}" in out and "retryMaxTimes=3" in out, out
    kv = _kv(mqadmin("getConsumerConfig", "-g", group), "=")
    assert kv["groupName"] == group and kv["retryMaxTimes"] == "3", kv
    out = mqadmin("deleteSubGroup", "-c", "DefaultCluster", "-g", group)
    assert f"delete subscription group [{group}] from broker [{node.broker_addr}]" in out and "success" in out, out


def test_online_consumer_group(node, clients, reads):
    topic, group = clients["admin_topic"], clients["admin_consumer_group"]
    out = reads["consumerConnection"]
    rows = [line.split() for line in out.splitlines() if "@runner-" in line]
    assert len(rows) == 1 and rows[0][2:] == ["JAVA", "V5_5_0"], out
    assert re.search(rf"^{re.escape(topic)}\s+\*$", out, re.M), out
    assert "MessageModel: CLUSTERING" in out and "ConsumeFromWhere: CONSUME_FROM_FIRST_OFFSET" in out, out
    rows = _rows(reads["consumerProgressGroup"], topic)
    assert len(rows) == 4, rows
    assert sum(int(r[3]) for r in rows) == SENT and all(r[3] == r[4] and r[5] == "0" for r in rows), rows
    rows = _rows(reads["consumerProgress"], group)
    assert rows and rows[0][1:5] == ["1", "V5_5_0", "PUSH", "CLUSTERING"], rows
    out = reads["consumerStatus"]
    assert "Same subscription in the same group of consumer" in out and "Rebalance OK" in out, out
    rows = _rows(reads["brokerConsumeStats"], topic)
    assert sum(int(r[5]) for r in rows if r[1] == group) == SENT, rows


def test_producer_connection(reads):
    out = reads["producerConnection"]
    rows = [line.split() for line in out.splitlines() if "@runner-" in line]
    assert len(rows) == 1 and rows[0][3:] == ["JAVA", "V5_5_0"], out
    assert "not exist" in reads["producerConnectionUnknown"], reads["producerConnectionUnknown"]


# ---------------------------------------------------------------------- messages

def test_query_messages(clients, reads):
    topic, group = clients["admin_topic"], clients["admin_consumer_group"]
    msg_id, offset_id, key = clients["admin_msg_id"], clients["admin_offset_msg_id"], clients["admin_key"]
    qid, qoff = clients["admin_queue"].split("@")
    for out in (reads["queryMsgById"], reads["queryMsgByUniqueKey"]):
        kv = _kv(out, ": ")
        assert kv["Topic"] == topic and kv["Keys"] == f"[{key}]" and kv["Tags"] == "[TagAdmin]", out
        assert kv["Queue ID"] == qid and kv["Queue Offset"] == qoff, out
        assert f"MessageTrack [consumerGroup={group}, trackType=CONSUMED" in out, out
    assert msg_id in reads["queryMsgByKey"], reads["queryMsgByKey"]
    kv = _kv(reads["queryMsgByOffset"], ": ")
    assert kv["OffsetID"] == offset_id and kv["Keys"] == f"[{key}]", kv
    assert re.search(r"ConsumeQueueData\{physicOffset=\d+, physicSize=\d+, tagsCode=", reads["queryCq"]), reads["queryCq"]


def test_message_trace(clients, reads):
    out = reads["queryMsgTraceById"]
    rows = _rows(out, "Pub")
    assert len(rows) == 1 and rows[0][1] == clients["admin_producer_group"] and rows[0][-1] == "success", out


# ---------------------------------------------------------------------- offsets

def test_offset_commands(node, mqadmin, clients):
    topic, group = clients["admin_topic"], clients["admin_consumer_group"]
    clone = "ops-clone-" + topic.rsplit("-", 1)[1]
    out = mqadmin("cloneGroupOffset", "-s", group, "-d", clone, "-t", topic)
    assert "clone group offset success" in out, out
    rows = [r for r in _rows(mqadmin("brokerConsumeStats", "-b", node.broker_addr), topic) if r[1] == clone]
    assert sum(int(r[5]) for r in rows) == SENT, rows  # the clone's consumer offsets
    out = mqadmin("resetOffsetByTime", "-g", clone, "-t", topic, "-s", "0")
    rows = _rows(out, "broker-a")
    assert len(rows) == 4 and all(r[2] == "0" for r in rows), out
    out = mqadmin.many({
        "skip": ["skipAccumulatedMessage", "-g", clone, "-t", topic],
        "mode": ["setConsumeMode", "-c", "DefaultCluster", "-t", topic, "-g", clone, "-m", "POP", "-q", "0"]})
    rows = _rows(out["skip"], "broker-a")
    assert sum(int(r[2]) for r in rows) == SENT, out["skip"]
    assert "consume mode[POP]" in out["mode"], out["mode"]


def test_export_metadata(clients, reads):
    assert "success" in reads["exportMetadata"], reads["exportMetadata"]
    meta = json.loads((Path(reads["exportDir"]) / "metadata.json").read_text())
    assert clients["admin_topic"] in meta["topicConfigTable"], list(meta)
    assert clients["admin_consumer_group"] in meta["subscriptionGroupTable"], list(meta)


# ---------------------------------------------------------------------- ACL 2.0: users and ACLs

def _kafka_acls(node, principal: str) -> set[tuple[str, str, str, str, str, str]]:
    """The node's bindings for ``principal`` as Kafka's DescribeAcls lists them: the one model."""
    from confluent_kafka.admin import (AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                       ResourcePatternType, ResourceType)
    admin = AdminClient({"bootstrap.servers": node.kafka_bootstrap})
    f = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, principal, None, AclOperation.ANY,
                         AclPermissionType.ANY)
    found = admin.describe_acls(f, request_timeout=30).result(timeout=30)
    return {(b.restype.name, b.resource_pattern_type.name, b.name, b.host, b.operation.name, b.permission_type.name)
            for b in found}


def test_users_and_acls(node, mqadmin):
    """createUser ... deleteAcl on the broker: users get one password for every protocol, ACL
    entries become the Kafka bindings the node enforces (seen through Kafka's DescribeAcls)."""
    b = ["-b", node.broker_addr]
    out = mqadmin.many({"alice": ["createUser", *b, "-u", "alice", "-p", "alice-pw1"],
                        "bob": ["createUser", *b, "-u", "bob", "-p", "bob-pw", "-t", "Super"],
                        "carol": ["createUser", *b, "-u", "carol", "-p", "carol-pw"]})
    for who in ("alice", "bob", "carol"):
        assert f"create user to {node.broker_addr} success" in out[who], out
    out = mqadmin.many({
        "again": ["createUser", *b, "-u", "alice", "-p", "x"],
        "getUser": ["getUser", *b, "-u", "alice"],
        "listUser": ["listUser", *b, "-f", "b"],
        "createAcl": ["createAcl", *b, "-s", "User:alice", "-r", "Topic:orders,Group:billing*", "-a", "Pub,Sub",
                      "-d", "Allow"],
        "carolAcl": ["createAcl", *b, "-s", "User:carol", "-r", "Topic:audit", "-a", "Sub", "-d", "Allow"],
        "noSubject": ["createAcl", *b, "-s", "User:nobody", "-r", "Topic:orders", "-a", "Pub", "-d", "Allow"],
        "badAction": ["createAcl", *b, "-s", "User:alice", "-r", "Topic:x", "-a", "Any", "-d", "Allow"],
    }, workers=7)
    assert "The user is existed" in out["again"], out["again"]
    assert _rows(out["getUser"], "alice") == [["alice", "******", "Normal", "enable"]], out["getUser"]
    assert _rows(out["listUser"], "bob") == [["bob", "******", "Super", "enable"]], out["listUser"]
    assert not _rows(out["listUser"], "alice"), out["listUser"]  # the filter is a substring of the name
    assert "create acl to" in out["createAcl"] and "success" in out["createAcl"], out["createAcl"]
    assert "create acl to" in out["carolAcl"], out["carolAcl"]
    assert "The subject of User:nobody is not exist" in out["noSubject"], out["noSubject"]
    assert "The actions can not be Any" in out["badAction"], out["badAction"]
    assert _kafka_acls(node, "User:alice") == {
        ("TOPIC", "LITERAL", "orders", "*", "WRITE", "ALLOW"), ("TOPIC", "LITERAL", "orders", "*", "READ", "ALLOW"),
        ("GROUP", "PREFIXED", "billing", "*", "WRITE", "ALLOW"), ("GROUP", "PREFIXED", "billing", "*", "READ", "ALLOW")}
    assert _kafka_acls(node, "User:carol") == {("TOPIC", "LITERAL", "audit", "*", "READ", "ALLOW")}

    out = mqadmin.many({
        "updateAcl": ["updateAcl", *b, "-s", "User:alice", "-r", "Topic:orders", "-a", "Sub", "-d", "Deny",
                      "-i", "10.0.0.1"],
        "listAcl": ["listAcl", *b, "-s", "alice", "-r", "Group"],  # the Group entry: not touched here
        "updateUser": ["updateUser", *b, "-u", "alice", "-p", "alice-pw2"],  # one of -p -t -s per call
        "deleteUser": ["deleteUser", *b, "-u", "bob"],
        "deleteAcl": ["deleteAcl", *b, "-s", "User:carol"],
        "disable": ["updateUser", *b, "-u", "carol", "-s", "disable"],
    }, workers=6)
    assert "update acl to" in out["updateAcl"], out["updateAcl"]
    assert _rows(out["listAcl"], "User:alice") == [
        ["User:alice", "Custom", "Group:billing*", "[Pub,", "Sub]", "null", "Allow"]], out["listAcl"]
    for step in ("updateUser", "disable"):
        assert "update user to" in out[step], out[step]
    assert "delete user to" in out["deleteUser"], out["deleteUser"]
    assert "delete acl to" in out["deleteAcl"], out["deleteAcl"]
    assert _kafka_acls(node, "User:alice") == {  # the entry on Topic:orders was replaced
        ("TOPIC", "LITERAL", "orders", "10.0.0.1", "READ", "DENY"),
        ("GROUP", "PREFIXED", "billing", "*", "WRITE", "ALLOW"), ("GROUP", "PREFIXED", "billing", "*", "READ", "ALLOW")}
    assert _kafka_acls(node, "User:carol") == set()

    out = mqadmin.many({"getAcl": ["getAcl", *b, "-s", "User:alice"], "listUser": ["listUser", *b]})
    assert sorted(_rows(out["getAcl"], "User:alice")) == [
        ["User:alice", "Custom", "Group:billing*", "[Pub,", "Sub]", "null", "Allow"],
        ["User:alice", "Custom", "Topic:orders", "[Sub]", "[10.0.0.1]", "Deny"]], out["getAcl"]
    assert _rows(out["listUser"], "alice") == [["alice", "******", "Normal", "enable"]], out["listUser"]
    assert _rows(out["listUser"], "carol") == [["carol", "******", "Normal", "disable"]], out["listUser"]
    assert not _rows(out["listUser"], "bob"), out["listUser"]


# ---------------------------------------------------------------------- broker-written trace

def test_broker_trace_of_kafka_and_grpc_messages(node, mqadmin):
    """With ``brokerTraceEnable`` (set here with updateBrokerConfig) a record produced by a Kafka
    client and a message sent by the official gRPC client get Pub records, and their receive and
    ack by a gRPC SimpleConsumer a Sub record, that ``queryMsgTraceById`` shows."""
    import uuid

    from confluent_kafka import Producer as KafkaProducer
    from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

    out = mqadmin("updateBrokerConfig", "-b", node.broker_addr, "-k", "brokerTraceEnable", "-v", "true")
    assert "success" in out, out
    topic, group = f"traced-{uuid.uuid4().hex[:8]}", f"traced-g-{uuid.uuid4().hex[:8]}"
    kp = KafkaProducer({"bootstrap.servers": node.kafka_bootstrap, "client.id": "kafka-tracer"})
    kp.produce(topic, key=b"k-kafka", value=b"from-kafka")
    assert kp.flush(30) == 0
    config = ClientConfiguration(node.grpc_endpoint, Credentials(), request_timeout=10)
    producer = Producer(config)
    producer.startup()
    consumer = SimpleConsumer(config, group, {topic: FilterExpression()}, await_duration=3)
    consumer.startup()
    try:
        m = Message()
        m.topic, m.body, m.keys = topic, b"from-grpc", "k-grpc"
        grpc_id = producer.send(m).message_id
        got: dict[bytes, str] = {}
        deadline = time.monotonic() + 30
        while len(got) < 2 and time.monotonic() < deadline:
            for r in consumer.receive(16, 30):
                consumer.ack(r)
                got[r.body] = r.message_id
        assert set(got) == {b"from-kafka", b"from-grpc"}, got
        assert got[b"from-grpc"] == grpc_id
    finally:
        consumer.shutdown()
        producer.shutdown()

    def traces() -> dict[str, str] | None:
        out = mqadmin.many({"kafka": ["queryMsgTraceById", "-i", got[b"from-kafka"]],
                            "grpc": ["queryMsgTraceById", "-i", grpc_id]})
        return out if all(_rows(o, "Pub") and _rows(o, "Sub") for o in out.values()) else None
    out = wait_until(traces, 60, 0.5, "the broker's trace records")  # written off the send path
    kafka_pub, = _rows(out["kafka"], "Pub")
    assert kafka_pub[1] == "kafka-tracer" and kafka_pub[2] == "127.0.0.1" and kafka_pub[-1] == "success", out["kafka"]
    grpc_pub, = _rows(out["grpc"], "Pub")
    assert grpc_pub[2] == "127.0.0.1" and grpc_pub[-1] == "success", out["grpc"]
    for o in out.values():
        sub, = _rows(o, "Sub")
        assert sub[1] == group and sub[-1] == "success", o
