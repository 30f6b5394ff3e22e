"""gRPC requests naming a topic or group longer than the broker's records can carry are answered
ILLEGAL_TOPIC / ILLEGAL_CONSUMER_GROUP where they are decoded; the node logs no traceback and
keeps serving."""

from __future__ import annotations

import grpc
import pytest

from gateway_grpc.proto import definition_pb2 as pb, service_pb2 as sv, service_pb2_grpc
from tests.support.node import RunningNode

LONG = "n" * 40_000
META = (("x-mq-client-id", "bad-names-test"), ("x-mq-language", "PYTHON"))


@pytest.fixture(scope="module")
def grpc_node(tmp_path_factory):
    node = RunningNode(tmp_path_factory.mktemp("grpc-names") / "data")
    node.start()
    try:
        yield node
    finally:
        node.stop()


def test_over_long_names_get_the_protocols_codes(grpc_node):
    before = grpc_node.log_tail(10**8).count("Traceback")
    with grpc.insecure_channel(grpc_node.grpc_endpoint) as ch:
        stub = service_pb2_grpc.MessagingServiceStub(ch)
        r = stub.QueryRoute(sv.QueryRouteRequest(topic=pb.Resource(name=LONG)), metadata=META, timeout=10)
        assert r.status.code == pb.Code.ILLEGAL_TOPIC and "longer" in r.status.message
        r = stub.AckMessage(sv.AckMessageRequest(group=pb.Resource(name=LONG), topic=pb.Resource(name="t"),
                                                 entries=[sv.AckMessageEntry(message_id="x", receipt_handle="y")]),
                            metadata=META, timeout=10)
        assert r.status.code == pb.Code.ILLEGAL_CONSUMER_GROUP
        r = stub.QueryRoute(sv.QueryRouteRequest(topic=pb.Resource(name="fine-topic")), metadata=META, timeout=10)
        assert r.status.code == pb.Code.OK
    assert grpc_node.log_tail(10**8).count("Traceback") == before
