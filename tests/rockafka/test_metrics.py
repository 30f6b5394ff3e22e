"""``/metrics`` after real client traffic: Kafka produce/consume with confluent-kafka, native
send/pull with the SDK, an unknown remoting request code. The exposition passes Debian's
``promtool check metrics`` (names, units, ``_total`` counters, histogram layout) and the
counters and histograms count what the clients did."""

from __future__ import annotations

import subprocess
import urllib.request
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from prometheus_client.parser import text_string_to_metric_families

from gateway_native.client import Message
from gateway_native.client import Producer as NativeProducer
from tests.gateway_native.helpers import consume_until


def scrape(node) -> str:
    with urllib.request.urlopen(node.admin_url + "/metrics", timeout=10) as resp:
        assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return resp.read().decode()


def samples(text: str) -> dict[tuple[str, tuple], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


@pytest.fixture(scope="module")
def traffic(node):
    topic, ntopic = f"m_{uuid.uuid4().hex[:8]}", f"N_{uuid.uuid4().hex[:8]}"
    p = Producer({"bootstrap.servers": node.kafka_bootstrap, "linger.ms": 0})
    for i in range(10):
        p.produce(topic, value=b"v" * 100, key=b"k%d" % i)
        p.flush(30)  # one request per record: 10 Produce requests
    c = Consumer({"bootstrap.servers": node.kafka_bootstrap, "group.id": f"g_{topic}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got = 0
    for _ in range(200):
        msg = c.poll(0.2)
        if msg is not None and msg.error() is None:
            got += 1
            if got == 10:
                break
    c.close()
    assert got == 10
    with NativeProducer(f"pg_{ntopic}", node.namesrv_addr, poll_name_server_interval=1000) as np:
        for i in range(5):
            np.send(Message(ntopic, b"n" * 50, tags="T"))
    consume_until(node.namesrv_addr, f"ng_{ntopic}", ntopic, 5, what="5 native messages")
    # a request code no broker knows: answered REQUEST_CODE_NOT_SUPPORTED, counted, logged
    from gateway_native.remoting.command import RemotingCommand
    from gateway_native.transport import open_connection
    import asyncio

    async def bogus():
        conn = await open_connection(node.broker_addr)
        try:
            return await conn.invoke(RemotingCommand.request(9999, {}), 5)
        finally:
            conn.close()
    assert asyncio.run(bogus()).code == 3  # REQUEST_CODE_NOT_SUPPORTED
    return node, topic, ntopic


def test_promtool_accepts_the_exposition(traffic):
    node, _topic, _ntopic = traffic
    text = scrape(node)
    out = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip() == "" and out.stderr.strip() == ""  # no lint finding at all


def test_request_counters_and_histograms_count_the_traffic(traffic):
    node, topic, ntopic = traffic
    s = samples(scrape(node))
    produce = s[("rockafka_requests_total", (("api", "Produce"), ("listener", "kafka")))]
    assert produce >= 10
    assert s[("rockafka_request_duration_seconds_count", (("api", "Produce"), ("listener", "kafka")))] == produce
    assert s[("rockafka_request_duration_seconds_bucket", (("api", "Produce"), ("le", "+Inf"),
                                                            ("listener", "kafka")))] == produce
    assert s[("rockafka_request_duration_seconds_sum", (("api", "Produce"), ("listener", "kafka")))] > 0
    assert s[("rockafka_requests_total", (("api", "Fetch"), ("listener", "kafka")))] >= 1
    sends = s[("rockafka_requests_total", (("api", "SEND_MESSAGE_V2"), ("listener", "broker")))] + s.get(
        ("rockafka_requests_total", (("api", "SEND_MESSAGE"), ("listener", "broker"))), 0)
    assert sends >= 5
    assert s[("rockafka_requests_total", (("api", "PULL_MESSAGE"), ("listener", "broker")))] >= 1
    assert s[("rockafka_request_errors_total", (("api", "UNSUPPORTED"), ("error", "REQUEST_CODE_NOT_SUPPORTED"),
                                                ("listener", "broker")))] >= 1
    # per topic: exactly what was produced and consumed
    assert s[("rockafka_topic_messages_in_total", (("listener", "kafka"), ("topic", topic)))] == 10
    assert s[("rockafka_topic_messages_out_total", (("listener", "kafka"), ("topic", topic)))] >= 10
    assert s[("rockafka_topic_bytes_in_total", (("listener", "kafka"), ("topic", topic)))] > 10 * 100
    assert s[("rockafka_topic_messages_in_total", (("listener", "broker"), ("topic", ntopic)))] == 5
    assert s[("rockafka_topic_bytes_in_total", (("listener", "broker"), ("topic", ntopic)))] == 5 * 50
    assert s[("rockafka_topic_messages_out_total", (("listener", "broker"), ("topic", ntopic)))] >= 5
    assert s[("rockafka_store_append_duration_seconds_count", ())] >= 15
    assert s[("rockafka_queue_max_offset", (("queue", "0"), ("topic", topic)))] == 10


def test_unknown_request_code_is_logged_once_per_connection(traffic):
    node, _topic, _ntopic = traffic
    log = node.log_tail(10**6)
    assert log.count("request_code_refused") == 1 and "code=9999" in log


def test_errors_carry_the_kafka_error_name(traffic):
    node, _topic, _ntopic = traffic
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": node.kafka_bootstrap})
    with pytest.raises(Exception, match="UNKNOWN_TOPIC"):
        admin.delete_topics(["never-created-x"])["never-created-x"].result(20)
    s = samples(scrape(node))
    assert s[("rockafka_request_errors_total", (("api", "DeleteTopics"), ("error", "UNKNOWN_TOPIC_OR_PARTITION"),
                                                ("listener", "kafka")))] == 1


def test_grpc_requests_are_counted_with_their_status(traffic):
    node, _topic, _ntopic = traffic
    import grpc

    from gateway_grpc.proto import definition_pb2 as pb, service_pb2 as sv, service_pb2_grpc

    meta = (("x-mq-client-id", "metrics-test"), ("x-mq-language", "PYTHON"))
    key = (("api", "QueryRoute"), ("listener", "grpc"))
    before = samples(scrape(node))
    with grpc.insecure_channel(node.grpc_endpoint) as ch:
        stub = service_pb2_grpc.MessagingServiceStub(ch)
        for _ in range(3):
            r = stub.QueryRoute(sv.QueryRouteRequest(topic=pb.Resource(name="metrics-route")), metadata=meta,
                                timeout=10)
            assert r.status.code == pb.Code.OK
        r = stub.QueryRoute(sv.QueryRouteRequest(topic=pb.Resource(name="n" * 40_000)), metadata=meta, timeout=10)
        assert r.status.code == pb.Code.ILLEGAL_TOPIC
        # a receive stream that finds nothing: counted once it ends, and not as an error
        for _ in stub.ReceiveMessage(sv.ReceiveMessageRequest(
                group=pb.Resource(name="metrics-group"),
                message_queue=pb.MessageQueue(topic=pb.Resource(name="metrics-route"), id=-1,
                                              permission=pb.Permission.READ_WRITE),
                filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"),
                batch_size=1, auto_renew=False),
                metadata=meta, timeout=10):
            pass
    s = samples(scrape(node))
    assert s[("rockafka_requests_total", key)] - before.get(("rockafka_requests_total", key), 0) == 4
    assert s[("rockafka_request_duration_seconds_count", key)] == s[("rockafka_requests_total", key)]
    err = ("rockafka_request_errors_total", (("api", "QueryRoute"), ("error", "ILLEGAL_TOPIC"), ("listener", "grpc")))
    assert s[err] - before.get(err, 0) == 1
    recv = (("api", "ReceiveMessage"), ("listener", "grpc"))
    assert s[("rockafka_requests_total", recv)] - before.get(("rockafka_requests_total", recv), 0) == 1
    assert not [k for k in s if k[0] == "rockafka_request_errors_total" and ("api", "ReceiveMessage") in k[1]]
