"""Broker behaviour seen through the wire: long polling woken by arrivals, consumer group
bookkeeping (list, connections, running info relayed to the client), producer failover between
brokers."""

from __future__ import annotations

import json
import socket
import threading
import uuid

from gateway_native.client import Admin, Message, MessageQueue, Producer, PushConsumer
from gateway_native.remoting.codes import RequestCode as RC, ResponseCode as R
from gateway_native.remoting.command import FrameDecoder, RemotingCommand, encode
from gateway_native.remoting.message_codec import decode_units
from tests.gateway_native.helpers import FAST, Collector, wait_until


def rpc(addr: str, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(encode(cmd))
        dec = FrameDecoder()
        while True:
            data = s.recv(1 << 20)
            assert data, "closed without an answer"
            out = dec.feed(data)
            if out:
                return out[0]


def test_held_pull_is_answered_when_a_message_arrives(node):
    topic = f"LP_{uuid.uuid4().hex[:6]}"
    with Admin(node.namesrv_addr) as admin:
        admin.create_topic(topic, 1)
    pull = RemotingCommand.request(RC.PULL_MESSAGE, {
        "consumerGroup": "lpg", "topic": topic, "queueId": 0, "queueOffset": 0, "maxMsgNums": 32,
        "sysFlag": 2 | 4, "suspendTimeoutMillis": 60_000, "subscription": "*", "expressionType": "TAG", "subVersion": 0})
    result: list = []
    # the socket timeout (20 s) is far below the 60 s hold: only an arrival can answer in time
    t = threading.Thread(target=lambda: result.append(rpc(node.broker_addr, pull, 20)))
    t.start()
    with Producer("lpp", node.namesrv_addr) as p:
        p.send(Message(topic, b"wake up"), queue=MessageQueue(topic, "broker-a", 0))
    t.join(30)
    assert result, "the held pull was not answered"
    resp = result[0]
    assert resp.code == R.SUCCESS
    assert [m.body for m in decode_units(resp.body)] == [b"wake up"]
    assert int(resp.ext_fields["nextBeginOffset"]) == 1 and resp.ext_fields["suggestWhichBrokerId"] == "0"

    empty = RemotingCommand.request(RC.PULL_MESSAGE, {
        "consumerGroup": "lpg", "topic": topic, "queueId": 0, "queueOffset": 1, "maxMsgNums": 32, "sysFlag": 4,
        "subscription": "*"})
    assert rpc(node.broker_addr, empty, 10).code == R.PULL_NOT_FOUND  # no SUSPEND flag: answered at once
    moved = RemotingCommand.request(RC.PULL_MESSAGE, {
        "consumerGroup": "lpg", "topic": topic, "queueId": 0, "queueOffset": 500, "maxMsgNums": 32, "sysFlag": 4,
        "subscription": "*"})
    resp = rpc(node.broker_addr, moved, 10)
    assert resp.code == R.PULL_OFFSET_MOVED and int(resp.ext_fields["nextBeginOffset"]) == 1


def test_commit_offset_flag_and_group_bookkeeping(node):
    topic, group = f"GB_{uuid.uuid4().hex[:6]}", f"gbg_{uuid.uuid4().hex[:6]}"
    with Admin(node.namesrv_addr) as admin:
        admin.create_topic(topic, 2)
        col = Collector()
        c = PushConsumer(group, node.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET", instance_name="gb1", **FAST)
        c.subscribe(topic, "TagA || TagB")
        c.register_message_listener(col)
        c.start()
        try:
            assert admin.consumer_ids(group, topic) == [c.runtime.client_id]
            conns = rpc(node.broker_addr, RemotingCommand.request(RC.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group}), 10)
            doc = json.loads(conns.body)
            assert doc["messageModel"] == "CLUSTERING" and doc["subscriptionTable"][topic]["subString"] == "TagA || TagB"
            assert doc["connectionSet"][0]["language"] == "PYTHON"
            info = rpc(node.broker_addr, RemotingCommand.request(RC.GET_CONSUMER_RUNNING_INFO, {
                "consumerGroup": group, "clientId": c.runtime.client_id}), 10)
            assert info.code == R.SUCCESS and json.loads(info.body)["properties"]["clientId"] == c.runtime.client_id
        finally:
            c.shutdown()
        wait_until(lambda: rpc(node.broker_addr, RemotingCommand.request(RC.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group}),
                               10).code == R.SYSTEM_ERROR, what="the group to empty after shutdown")
    # a pull carrying the COMMIT_OFFSET flag stores the offset for the group
    commit = RemotingCommand.request(RC.PULL_MESSAGE, {
        "consumerGroup": group, "topic": topic, "queueId": 1, "queueOffset": 0, "maxMsgNums": 1, "sysFlag": 1 | 4,
        "commitOffset": 0, "subscription": "*"})
    rpc(node.broker_addr, commit, 10)
    q = rpc(node.broker_addr, RemotingCommand.request(RC.QUERY_CONSUMER_OFFSET, {
        "consumerGroup": group, "topic": topic, "queueId": 1}), 10)
    assert q.code == R.SUCCESS and q.ext_fields["offset"] == "0"


def test_producer_fails_over_to_another_broker(make_node):
    a = make_node({"registerNameServerPeriod": 500}, name="a")
    b = make_node({"namesrvAddr": a.namesrv_addr, "brokerName": "broker-b", "registerNameServerPeriod": 500}, name="b")
    topic = f"FO_{uuid.uuid4().hex[:6]}"
    with Admin(a.namesrv_addr) as admin:
        admin.create_topic(topic, 2)  # on both masters
        route = admin.topic_route(topic)
        assert sorted(q["brokerName"] for q in route["queueDatas"]) == ["broker-a", "broker-b"]
    with Producer("fop", a.namesrv_addr, send_msg_timeout=5000) as p:
        brokers = {p.send(Message(topic, f"m{i}".encode())).message_queue.broker_name for i in range(8)}
        assert brokers == {"broker-a", "broker-b"}
        b.kill()  # broker-b dies without unregistering; the route still lists it for now
        results = [p.send(Message(topic, f"after{i}".encode())) for i in range(10)]
        assert all(r.status.name == "SEND_OK" and r.message_queue.broker_name == "broker-a" for r in results)
        assert not p.fault.is_available("broker-b")  # latency fault tolerance isolates it


def test_auto_create_disabled_refuses_unknown_topics(make_node):
    from gateway_native.client import MQClientError

    n = make_node({"autoCreateTopicEnable": "false"})
    with Producer("acp", n.namesrv_addr, send_msg_timeout=3000) as p:
        try:
            p.send(Message(f"NoAuto_{uuid.uuid4().hex[:6]}", b"x"))
        except MQClientError as exc:
            assert "route" in str(exc).lower() or "not exist" in str(exc).lower()
        else:
            raise AssertionError("a send to an unknown topic succeeded with auto-creation disabled")
    raw = rpc(n.broker_addr, RemotingCommand.request(RC.SEND_MESSAGE_V2, {
        "a": "g", "b": "NoAutoRaw", "c": "TBW102", "d": 4, "e": 0, "f": 0, "g": 0, "h": 0, "i": ""}, b"x"), 10)
    assert raw.code == R.TOPIC_NOT_EXIST and "NoAutoRaw" in raw.remark


def test_silent_consumer_channel_expires_and_members_are_told(make_node):
    n = make_node({"channelExpiredTimeout": 1500})
    group = f"exp_{uuid.uuid4().hex[:6]}"
    hb = json.dumps({"clientID": "10.9.9.9@silent", "producerDataSet": [], "consumerDataSet": [{
        "groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "subscriptionDataSet": [
            {"topic": "ExpT", "subString": "*", "expressionType": "TAG", "subVersion": 1}]}]}).encode()
    host, port = n.broker_addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as silent:  # open, but never heard from again
        silent.sendall(encode(RemotingCommand.request(RC.HEART_BEAT, None, hb)))
        dec = FrameDecoder()
        frames: list = []
        while not any(f.is_response for f in frames):
            frames += dec.feed(silent.recv(65536))
        assert [f.code for f in frames if f.is_response] == [R.SUCCESS]
        # joining the group told its members (here: itself) to rebalance, oneway
        told = [f for f in frames if not f.is_response]
        assert told and told[0].code == RC.NOTIFY_CONSUMER_IDS_CHANGED and told[0].is_oneway
        assert told[0].ext_fields == {"consumerGroup": group}
        members = rpc(n.broker_addr, RemotingCommand.request(RC.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group}), 10)
        assert json.loads(members.body)["consumerIdList"] == ["10.9.9.9@silent"]
        wait_until(lambda: rpc(n.broker_addr, RemotingCommand.request(RC.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group}),
                               10).code == R.SYSTEM_ERROR, what="the silent channel to expire")


def test_a_pull_commit_never_lands_after_an_offset_update_sent_behind_it(node):
    """A consumer that pulled with its offset then (COMMIT_OFFSET flag) and right after persisted
    a newer one (UPDATE_CONSUMER_OFFSET, as it does when it hands a queue over) must leave the
    newer offset committed, or the queue's next owner consumes the difference again. Both
    requests in one write, so the broker reads them in one go."""
    topic, group = f"CO_{uuid.uuid4().hex[:6]}", f"cog_{uuid.uuid4().hex[:6]}"
    with Admin(node.namesrv_addr) as admin:
        admin.create_topic(topic, 1)
    with Producer("cop", node.namesrv_addr) as p:
        for _ in range(10):
            p.send(Message(topic, b"x"), queue=MessageQueue(topic, "broker-a", 0))
    host, port = node.broker_addr.rsplit(":", 1)
    for trial in range(5):
        pull = RemotingCommand.request(RC.PULL_MESSAGE, {
            "consumerGroup": group, "topic": topic, "queueId": 0, "queueOffset": 10, "maxMsgNums": 32,
            "sysFlag": 1 | 4, "commitOffset": 5 + trial, "suspendTimeoutMillis": 0, "subscription": "*",
            "expressionType": "TAG", "subVersion": 0})
        update = RemotingCommand.request(RC.UPDATE_CONSUMER_OFFSET, {
            "consumerGroup": group, "topic": topic, "queueId": 0, "commitOffset": 9})
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(encode(pull) + encode(update))
            dec, answers = FrameDecoder(), []
            while len(answers) < 2:
                data = s.recv(1 << 20)
                assert data, "closed without both answers"
                answers += dec.feed(data)
        assert sorted(a.code for a in answers) == sorted([R.PULL_NOT_FOUND, R.SUCCESS])
        query = rpc(node.broker_addr, RemotingCommand.request(RC.QUERY_CONSUMER_OFFSET, {
            "consumerGroup": group, "topic": topic, "queueId": 0}), 10)
        assert query.get_int("offset") == 9, f"trial {trial}: the pull's commit {5 + trial} landed last"


def _object_keyed(body: bytes) -> dict:
    """fastjson's maps keyed by objects -> {(topic, brokerName, queueId): value}."""
    import re

    text = re.sub(r'(\{[^{}]*\}):', lambda m: json.dumps(m.group(1)) + ":", body.decode())
    doc = json.loads(text)
    return {k: ({(json.loads(mk)["topic"], json.loads(mk)["brokerName"], json.loads(mk)["queueId"]): mv
                 for mk, mv in v.items()} if k == "offsetTable" else v) for k, v in doc.items()}


def test_topic_and_consume_stats_for_admin_tools(node):
    topic, group = f"ST_{uuid.uuid4().hex[:6]}", f"stg_{uuid.uuid4().hex[:6]}"
    with Admin(node.namesrv_addr) as admin:
        admin.create_topic(topic, 2)
    with Producer("stp", node.namesrv_addr) as p:
        for i in range(3):
            p.send(Message(topic, f"s{i}".encode()), queue=MessageQueue(topic, "broker-a", 0))
    upd = rpc(node.broker_addr, RemotingCommand.request(RC.UPDATE_CONSUMER_OFFSET, {
        "consumerGroup": group, "topic": topic, "queueId": 0, "commitOffset": 2}), 10)
    assert upd.code == R.SUCCESS
    stats = _object_keyed(rpc(node.broker_addr, RemotingCommand.request(RC.GET_TOPIC_STATS_INFO, {"topic": topic}), 10).body)
    q0, q1 = stats["offsetTable"][(topic, "broker-a", 0)], stats["offsetTable"][(topic, "broker-a", 1)]
    assert (q0["minOffset"], q0["maxOffset"]) == (0, 3) and q0["lastUpdateTimestamp"] > 0
    assert (q1["minOffset"], q1["maxOffset"], q1["lastUpdateTimestamp"]) == (0, 0, 0)
    for fields in ({"consumerGroup": group, "topic": topic}, {"consumerGroup": group}):
        cs = _object_keyed(rpc(node.broker_addr, RemotingCommand.request(RC.GET_CONSUME_STATS, fields), 10).body)
        e0 = cs["offsetTable"][(topic, "broker-a", 0)]
        assert (e0["brokerOffset"], e0["consumerOffset"]) == (3, 2) and e0["lastTimestamp"] > 0
        assert cs["offsetTable"][(topic, "broker-a", 1)]["brokerOffset"] == 0
    missing = rpc(node.broker_addr, RemotingCommand.request(RC.GET_TOPIC_STATS_INFO, {"topic": "NoSuchStatsTopic"}), 10)
    assert missing.code == R.TOPIC_NOT_EXIST


def test_topic_queue_count_limit_is_maxTopicQueueNums(node):
    """RocketMQ takes topics with thousands of queues; only an absurd count is refused, by name."""
    import pytest
    from gateway_native.client.message import MQBrokerError

    topic = f"Wide_{uuid.uuid4().hex[:6]}"
    with Admin(node.namesrv_addr) as admin:
        admin.create_topic(topic, 4096)
        route = admin.topic_route(topic)
        assert route is not None
        assert [q["writeQueueNums"] for q in route["queueDatas"]] == [4096]
        with pytest.raises(MQBrokerError) as info:
            admin.create_topic(f"TooWide_{uuid.uuid4().hex[:6]}", 200_000, wait_route=False)
    assert info.value.code == R.INVALID_PARAMETER
    assert "maxTopicQueueNums" in (info.value.remark or "")


def test_broker_config_answer_masks_credentials(make_node, tmp_path):
    """GET_BROKER_CONFIG (what mqadmin getBrokerConfig prints) and `rockafka config list` never
    show a credential-valued key in clear: an operator's DESCRIBE grant must not yield a password."""
    import subprocess
    import sys

    n = make_node({"sasl_enabled_mechanisms": "PLAIN", "sasl_plain_users": "alice:alice-s3cret-pw"})
    answer = rpc(n.broker_addr, RemotingCommand.request(RC.GET_BROKER_CONFIG, {}), 10)
    assert answer.code == R.SUCCESS
    text = bytes(answer.body).decode()
    assert "saslPlainUsers=******" in text.splitlines()
    assert "alice-s3cret-pw" not in text
    assert "brokerName=" in text  # the rest of the configuration is still answered
    listed = subprocess.run([sys.executable, "-m", "rockafka.cli", "config", "list", "--set",
                             "sasl_plain_users=alice:alice-s3cret-pw"], capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert "sasl_plain_users = ******" in listed.stdout and "alice-s3cret-pw" not in listed.stdout
