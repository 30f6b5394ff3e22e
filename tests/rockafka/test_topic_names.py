"""One topic-name rule for every protocol (engine.topic_config.topic_name_error): a dotted Kafka
name is accepted over Kafka, by the SDK, by ``rockafka admin topics create`` and over gRPC; an
illegal name is refused by each with its protocol's error code and the same sentence."""

from __future__ import annotations

import subprocess
import uuid

import grpc
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from gateway_grpc.proto import definition_pb2, service_pb2, service_pb2_grpc
from gateway_native.client import Admin, Message, MQClientError, Producer
from tests.support.node import RunningNode, rockafka_command

RULE_TEXT = "has characters other than ASCII letters, digits, '.', '_', '-', '%' and '|'"


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    with RunningNode(tmp_path_factory.mktemp("names") / "data") as n:
        yield n


def kafka_create(node, name: str) -> None:
    client = AdminClient({"bootstrap.servers": node.kafka_bootstrap})
    client.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])[name].result(30)


def grpc_route(node, name: str):
    with grpc.insecure_channel(node.grpc_endpoint) as channel:
        return service_pb2_grpc.MessagingServiceStub(channel).QueryRoute(service_pb2.QueryRouteRequest(
            topic=definition_pb2.Resource(name=name), endpoints=definition_pb2.Endpoints(
                addresses=[definition_pb2.Address(host="127.0.0.1", port=node.grpc_port)])), timeout=10)


def cli(node, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(rockafka_command() + ["admin", "--namesrv", node.namesrv_addr, *args],
                          capture_output=True, text=True, timeout=60)


def test_a_dotted_name_is_legal_for_every_protocol(node):
    tag = uuid.uuid4().hex[:6]
    kafka_create(node, f"k.dots.{tag}")
    with Admin(node.namesrv_addr) as admin:
        admin.create_topic(f"sdk.dots.{tag}", 1)
    with Producer("names", node.namesrv_addr) as producer:
        assert producer.send(Message(f"sdk.dots.{tag}", b"x")).status.value == "SEND_OK"
        assert producer.send(Message(f"k.dots.{tag}", b"y")).status.value == "SEND_OK"
    assert cli(node, "topics", "create", f"cli.dots.{tag}", "--queues", "1").returncode == 0
    route = grpc_route(node, f"cli.dots.{tag}")
    assert route.status.code == definition_pb2.Code.OK and route.message_queues


def test_an_illegal_name_gets_the_same_sentence_everywhere(node):
    name = "bad name!"
    with pytest.raises(Exception) as kafka_err:
        kafka_create(node, name)
    assert RULE_TEXT in str(kafka_err.value) and "val=17" in str(kafka_err.value)  # INVALID_TOPIC_EXCEPTION
    with Admin(node.namesrv_addr) as admin, pytest.raises(MQClientError) as sdk_err:
        admin.create_topic(name, 1)
    assert RULE_TEXT in str(sdk_err.value)
    out = cli(node, "topics", "create", name)
    assert out.returncode == 1 and RULE_TEXT in out.stderr
    route = grpc_route(node, name)
    assert route.status.code == definition_pb2.Code.ILLEGAL_TOPIC and RULE_TEXT in route.status.message
