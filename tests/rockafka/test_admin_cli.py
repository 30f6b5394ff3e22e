"""``rockafka admin`` against a real ``rockafka serve``: topics, groups and lag, reset-offset to a
timestamp, query by key and id, per-group retry limit, DLQ list and resend; bad input exits
non-zero with one readable line."""

from __future__ import annotations

import json
import subprocess
import threading
import uuid
from datetime import datetime, timezone

import pytest

from gateway_native.client import ConsumeStatus, Message, Producer, PushConsumer
from tests.gateway_native.helpers import FAST, Collector, consume_until, wait_until
from tests.support.node import rockafka_command

LEVELS = "1s 1s " + " ".join(["1s"] * 16)


@pytest.fixture(scope="module")
def anode(tmp_path_factory):
    from tests.support.node import RunningNode

    node = RunningNode(tmp_path_factory.mktemp("admincli") / "data", settings={"messageDelayLevel": LEVELS})
    node.start()
    yield node
    node.stop()


def admin(node, *args: str, ok: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(rockafka_command() + ["admin", "--namesrv", node.namesrv_addr, *args],
                          capture_output=True, text=True, timeout=60)
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def admin_json(node, *args: str):
    return json.loads(admin(node, "--json", *args).stdout)


def uniq(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def test_topics_create_list_delete(anode):
    topic = uniq("AT")
    assert admin_json(anode, "topics", "create", topic, "--queues", "3") == {"created": topic, "queues": 3}
    assert topic in admin(anode, "topics", "list").stdout.split()
    admin(anode, "topics", "delete", topic)
    wait_until(lambda: topic not in admin(anode, "topics", "list").stdout.split(), what="topic gone from the list")


def test_query_by_key_and_id_lag_and_reset(anode):
    topic, group = uniq("AQ"), uniq("aqg")
    admin(anode, "topics", "create", topic, "--queues", "1")
    with Producer(uniq("pg"), anode.namesrv_addr, poll_name_server_interval=1000) as p:
        sent = [p.send(Message(topic, b"v%d" % i, keys=[f"order-{i}"], tags="T")) for i in range(5)]
    rows = admin_json(anode, "query", "key", "--topic", topic, "order-3")
    assert [r["body"] for r in rows] == ["v3"] and rows[0]["keys"] == ["order-3"]
    one = admin_json(anode, "query", "id", sent[1].offset_msg_id)
    assert one["body"] == "v1" and one["topic"] == topic
    by_client_id = admin_json(anode, "query", "id", sent[2].msg_id, "--topic", topic)
    assert by_client_id["body"] == "v2"
    # a time range before the messages finds nothing
    miss = admin(anode, "query", "key", "--topic", topic, "order-3", "--end", "1000", ok=False)
    assert miss.returncode == 1 and "no message with key" in miss.stderr

    col = Collector()
    c = PushConsumer(group, anode.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET", **FAST)
    c.subscribe(topic, "*")
    c.register_message_listener(col)
    c.start()
    try:
        wait_until(lambda: col.count() >= 5, what="5 messages")
    finally:
        c.shutdown()
    lag = admin_json(anode, "groups", "offsets", group, "--topic", topic)
    assert lag == [{"broker": "broker-a", "queue": 0, "maxOffset": 5, "consumerOffset": 5, "lag": 0}]
    assert group in [g["group"] for g in admin_json(anode, "groups", "list")]
    iso = datetime.fromtimestamp(0, timezone.utc).isoformat().replace("+00:00", "Z")
    assert admin_json(anode, "reset-offset", "--group", group, "--topic", topic, "--to-timestamp", iso) == [
        {"broker": "broker-a", "queue": 0, "offset": 0}]
    assert admin_json(anode, "groups", "offsets", group, "--topic", topic)[0]["lag"] == 5
    text = admin(anode, "groups", "offsets", group, "--topic", topic).stdout
    assert "TOTAL" in text and "lag" in text


class AlwaysFail:
    def __init__(self):
        self.lock = threading.Lock()
        self.count = 0

    def __call__(self, msgs, ctx):
        with self.lock:
            self.count += len(msgs)
        return ConsumeStatus.RECONSUME_LATER


def test_group_retry_limit_dlq_list_and_resend(anode):
    topic, group = uniq("AD"), uniq("adg")
    admin(anode, "topics", "create", topic, "--queues", "1")
    assert admin_json(anode, "groups", "set", group, "--retry-max-times", "1") == {"group": group, "retryMaxTimes": 1}
    with Producer(uniq("pg"), anode.namesrv_addr, poll_name_server_interval=1000) as p:
        sent = p.send(Message(topic, b"poison", keys=["pk"]))
    failing = AlwaysFail()
    c = PushConsumer(group, anode.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET", **FAST)
    c.subscribe(topic, "*")
    c.register_message_listener(failing)
    c.start()
    try:
        rows = wait_until(lambda: admin_json(anode, "dlq", "list", group), timeout=40, what="a dead letter")
    finally:
        c.shutdown()
    assert failing.count == 2  # the group's retryMaxTimes=1 wins over the client's 16
    assert rows[0]["originTopic"] == topic and rows[0]["originMsgId"] == sent.msg_id and rows[0]["body"] == "poison"
    assert rows[0]["reconsumeTimes"] == 2

    resent = admin_json(anode, "dlq", "resend", group, sent.msg_id)
    assert resent == {"resent": sent.msg_id, "to": "%RETRY%" + group, "originTopic": topic}
    col = consume_until(anode.namesrv_addr, group, topic, 1, what="the resent dead letter")
    assert col.messages[0].body == b"poison" and col.messages[0].topic == topic


def test_bad_input_exits_nonzero_with_a_reason(anode):
    bad_ts = admin(anode, "reset-offset", "--group", "g", "--topic", "t", "--to-timestamp", "yesterday", ok=False)
    assert bad_ts.returncode == 1 and "ISO 8601" in bad_ts.stderr
    bad_id = admin(anode, "query", "id", "not-hex", ok=False)
    assert bad_id.returncode == 1 and bad_id.stderr.startswith("rockafka admin:")
    # a client message id (UNIQ_KEY) given without --topic: one line saying what to do, no traceback
    client_id = admin(anode, "query", "id", "7F000001A07C18B4AAC2B6A0E1D50000", ok=False)
    assert client_id.returncode == 1 and "--topic" in client_id.stderr and "Traceback" not in client_id.stderr
    missing = admin(anode, "dlq", "resend", uniq("nogroup"), "ABC", ok=False)
    assert missing.returncode == 1 and "not in %DLQ%" in missing.stderr
    usage = admin(anode, "topics", ok=False)
    assert usage.returncode == 2
    unreachable = subprocess.run(rockafka_command() + ["admin", "--namesrv", "127.0.0.1:1", "topics", "list"],
                                 capture_output=True, text=True, timeout=60)
    assert unreachable.returncode == 1 and "127.0.0.1:1" in unreachable.stderr


def test_groups_lag_table_and_json_after_the_command(anode):
    topic, group = uniq("AL"), uniq("alg")
    admin(anode, "topics", "create", topic, "--queues", "2")
    with Producer(uniq("pg"), anode.namesrv_addr, poll_name_server_interval=1000) as p:
        for i in range(6):
            p.send(Message(topic, b"x%d" % i))
    consume_until(anode.namesrv_addr, group, topic, 6, what="6 messages")
    with Producer(uniq("pg"), anode.namesrv_addr, poll_name_server_interval=1000) as p:
        for i in range(3):
            p.send(Message(topic, b"later%d" % i))
    rows = json.loads(admin(anode, "groups", "lag", group, "--json").stdout)  # --json after the command
    assert {r["topic"] for r in rows} == {topic} and sum(r["lag"] for r in rows) == 3
    assert all(r["lag"] == r["maxOffset"] - r["consumerOffset"] for r in rows)
    table = admin(anode, "groups", "lag", group).stdout.splitlines()
    assert table[0].split() == ["group", "topic", "queue", "maxOffset", "consumerOffset", "lag"]
    assert table[-1].split() == ["TOTAL", "3"]
    assert table[-1].index("3") == table[0].index("lag")  # the total sits under the lag column
    summary = {r["group"]: r for r in json.loads(admin(anode, "groups", "lag", "--json").stdout)}
    assert summary[group]["lag"] == 3
    missing = admin(anode, "groups", "lag", uniq("nogroup"), ok=False)
    assert missing.returncode == 1 and "no committed offsets" in missing.stderr
