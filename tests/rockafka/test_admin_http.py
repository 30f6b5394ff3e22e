"""The admin HTTP listener of a real node: JSON API, Prometheus metrics and the dashboard."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition


def get(node, path: str):
    with urllib.request.urlopen(node.admin_url + path, timeout=10) as resp:
        body = resp.read().decode()
        return resp.status, resp.headers.get("Content-Type", ""), body


def get_json(node, path: str):
    status, _ctype, body = get(node, path)
    return status, json.loads(body)


def error_of(node, path: str):
    with pytest.raises(urllib.error.HTTPError) as info:
        get(node, path)
    return info.value.code, json.loads(info.value.read().decode())


@pytest.fixture(scope="module")
def loaded(node):
    p = Producer({"bootstrap.servers": node.kafka_bootstrap})
    for i in range(7):
        p.produce("admin-orders", key=f"order-{i}".encode(), value=f'{{"n": {i}}}'.encode())
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": node.kafka_bootstrap, "group.id": "admin-readers",
                  "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition("admin-orders", 0, 3)], asynchronous=False)
    c.close()
    return node


def test_topics_list_offsets_and_counts(loaded):
    status, doc = get_json(loaded, "/api/topics")
    assert status == 200
    topic = next(t for t in doc["topics"] if t["topic"] == "admin-orders")
    assert topic["messages"] == 7
    assert topic["queues"][0] == {"queue_id": 0, "min_offset": 0, "max_offset": 7, "messages": 7,
                                  "leader": "broker-a", "replicas": ["broker-a"]}


def test_group_lag_is_end_minus_committed(loaded):
    status, doc = get_json(loaded, "/api/groups/admin-readers")
    assert status == 200
    assert doc["queues"] == [{"topic": "admin-orders", "queue_id": 0, "committed_offset": 3,
                              "max_offset": 7, "lag": 4}]
    assert doc["lag"] == 4


def test_query_by_key_and_by_id(loaded):
    deadline = time.monotonic() + 15  # the index is built by the dispatcher, asynchronously
    found = []
    while time.monotonic() < deadline and not found:
        found = get_json(loaded, "/api/messages?topic=admin-orders&key=order-5")[1]["messages"]
        time.sleep(0.1)
    assert len(found) == 1
    status, one = get_json(loaded, "/api/messages/" + found[0]["msg_id"])
    assert status == 200 and one["topic"] == "admin-orders"


def test_unknown_things_are_404_and_bad_params_400(loaded):
    assert error_of(loaded, "/api/topics/no-such-topic")[0] == 404
    assert error_of(loaded, "/api/groups/no-such-group")[0] == 404
    assert error_of(loaded, "/api/messages/7F00000100002A9F00000000FFFFFF00")[0] == 404
    code, doc = error_of(loaded, "/api/messages")
    assert code == 400 and "topic" in doc["error"]
    code, doc = error_of(loaded, "/api/messages?topic=admin-orders&offset=3")
    assert code == 400 and "queue" in doc["error"]
    code, doc = error_of(loaded, "/api/messages?topic=admin-orders&time=yesterday")
    assert code == 400 and "ISO 8601" in doc["error"]
    assert error_of(loaded, "/api/dlq/g?max=0")[0] == 400


def test_metrics_exposes_offsets_and_lag(loaded):
    from prometheus_client.parser import text_string_to_metric_families

    status, ctype, text = get(loaded, "/metrics")
    assert status == 200 and ctype.startswith("text/plain")
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for fam in text_string_to_metric_families(text) for s in fam.samples}
    assert samples[("rockafka_queue_max_offset", (("queue", "0"), ("topic", "admin-orders")))] == 7
    assert samples[("rockafka_consumer_lag", (("group", "admin-readers"), ("queue", "0"),
                                              ("topic", "admin-orders")))] == 4
    assert 0 < samples[("rockafka_disk_used_ratio", ())] < 1  # a ratio, not a percentage


def test_console_pages_are_served(loaded):
    for path, expect in (("/", "Broker"), ("/topics", "admin-orders"), ("/topics/admin-orders", "Configuration"),
                         ("/messages?topic=admin-orders", "order-6"), ("/groups", "admin-readers"),
                         ("/groups/admin-readers", "Reset offsets"), ("/dlq", "Dead letters")):
        status, ctype, html = get(loaded, path)
        assert status == 200 and ctype.startswith("text/html") and expect in html, path
    assert error_of_html(loaded, "/topics/no-such-topic") == 404


def error_of_html(node, path: str) -> int:
    with pytest.raises(urllib.error.HTTPError) as info:
        get(node, path)
    return info.value.code


def post_json(node, path: str, payload: bytes):
    req = urllib.request.Request(node.admin_url + path, data=payload, method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read().decode())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read().decode())


def test_dead_letter_resend_from_the_dashboard_api(make_node):
    """A dead letter browsed on the dashboard can be sent back: POST resend puts it in the
    group's retry topic and the group consumes it again under its original topic; an unknown
    message id is 404 and a body without msg_id 400."""
    import uuid

    from gateway_native.client import Admin, ConsumeStatus, Message, Producer, PushConsumer
    from tests.gateway_native.helpers import FAST, consume_until, wait_until

    node = make_node({"messageDelayLevel": " ".join(["1s"] * 18)})
    topic, group = f"DH_{uuid.uuid4().hex[:8]}", f"dhg_{uuid.uuid4().hex[:8]}"
    with Admin(node.namesrv_addr) as admin:
        admin.create_topic(topic, 1)
        admin.update_subscription_group(group, retryMaxTimes=0)
    with Producer(f"pg_{uuid.uuid4().hex[:6]}", node.namesrv_addr, poll_name_server_interval=1000) as p:
        sent = p.send(Message(topic, b"poison"))
    c = PushConsumer(group, node.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET", **FAST)
    c.subscribe(topic, "*")
    c.register_message_listener(lambda msgs, ctx: ConsumeStatus.RECONSUME_LATER)
    c.start()
    try:
        doc = wait_until(lambda: get_json(node, f"/api/dlq/{group}")[1]["messages"] or None, timeout=40,
                         what="a dead letter on the dashboard API")
    finally:
        c.shutdown()
    assert doc[0]["properties"]["ORIGIN_MESSAGE_ID"] == sent.msg_id and doc[0]["body"] == "poison"

    assert post_json(node, f"/api/dlq/{group}/resend", b"{}")[0] == 400
    assert post_json(node, f"/api/dlq/{group}/resend", b"not json")[0] == 400
    status, missing = post_json(node, f"/api/dlq/{group}/resend", json.dumps({"msg_id": "ABC"}).encode())
    assert status == 404 and "not in %DLQ%" in missing["error"]
    status, resent = post_json(node, f"/api/dlq/{group}/resend", json.dumps({"msg_id": sent.msg_id}).encode())
    assert status == 200 and resent == {"resent": sent.msg_id, "to": "%RETRY%" + group, "originTopic": topic}

    col = consume_until(node.namesrv_addr, group, topic, 1, what="the resent dead letter")
    assert col.messages[0].body == b"poison" and col.messages[0].topic == topic


# Bodies Python's JSON parser cannot hold: each a 400 with a message, never a 500 or a traceback.
UNHOLDABLE_JSON = [
    b"[" * 100_000 + b"]" * 100_000,                       # nested 100,000 deep (RecursionError)
    b'{"msg_id": ' + b"9" * 5000 + b"}",                   # a 5,000-digit number (int conversion limit)
    b'{"msg_id": "\\ud800"}',                                # a lone surrogate
    b'{"msg_id": "ok", "x": ' + b"[" * 5000 + b"]" * 5000 + b"}",
    b"\xff\xfe not utf-8",
]


@pytest.mark.parametrize("payload", UNHOLDABLE_JSON, ids=["deep", "digits", "surrogate", "deep-inner", "not-utf8"])
def test_bodies_json_cannot_hold_are_400(loaded, payload):
    before = loaded.log_tail(10**8).count("Traceback")
    status, doc = post_json(loaded, "/api/dlq/admin-readers/resend", payload)
    assert status == 400 and "JSON" in doc["error"]
    assert get(loaded, "/api/health")[0] == 200
    assert loaded.log_tail(10**8).count("Traceback") == before
