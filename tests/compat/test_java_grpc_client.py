"""The official RocketMQ 5 Java gRPC client (rocketmq-client-java, from Maven Central) against a
real ``rockafka serve``: Producer normal / FIFO / delay / transactional with a checker,
SimpleConsumer receive / ack / changeInvisibleDuration / redelivery / DLQ, PushConsumer with tag
and SQL92 filters — one test per scenario of ``compat/rocketmq-grpc-java``.

The client speaks TLS by default (and trusts any certificate): the run uses the node's gRPC port
as is, which takes TLS and plaintext alike (``tlsServerMode=permissive``, a self-signed
certificate generated at start); a second run with ``enableSsl(false)`` checks plaintext on the
same port. Topics and groups are set up with mqadmin first, as an Apache RocketMQ 5 operator
must; ``make compat-peer`` runs the same scenarios against Apache RocketMQ 5.5's proxy.
"""

from __future__ import annotations

import pytest

from tests.compat import grpc_java
from tests.compat.mqadmin import MQAdmin
from tests.support.node import RunningNode

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    """The module's node: transaction check-back within a second or two (the Apache RocketMQ run
    of ``make compat-peer`` uses the same settings)."""
    with RunningNode(tmp_path_factory.mktemp("grpc-java-node") / "data",
                     settings={"transactionTimeOut": 1000, "transactionCheckInterval": 1000}) as n:
        yield n


@pytest.fixture(scope="module")
def tls_run(node, tmp_path_factory):
    grpc_java.build()
    mqadmin = MQAdmin.built(node.namesrv_addr, tmp_path_factory.mktemp("mqadmin-home"))
    run_id = grpc_java.new_run_id()
    grpc_java.prepare(mqadmin, run_id)
    result = grpc_java.run_side_by_side(node.grpc_endpoint, run_id, True, tmp_path_factory.mktemp("grpc-java"))
    result.run_id = run_id
    return result


@pytest.mark.parametrize("scenario", grpc_java.SCENARIOS)
def test_java_grpc_client_over_tls(tls_run, scenario):
    tls_run.assert_passed(scenario, grpc_java.MIN_CHECKS[scenario])


def test_java_grpc_dead_letter_is_in_the_groups_dlq(tls_run, node):
    """simple-dlq's message, gone from the consumer after its last attempt, is in %DLQ%<group>
    with its tag and RETRY_TOPIC = the group's POP retry topic (as Apache RocketMQ 5.5 writes it;
    ``make compat-peer`` checks it there)."""
    tls_run.assert_passed("simple-dlq", grpc_java.MIN_CHECKS["simple-dlq"])
    assert grpc_java.dead_letter_problems(node.namesrv_addr, tls_run.run_id) == []


def test_java_grpc_client_plaintext_on_the_same_port(node, tmp_path):
    grpc_java.build()
    (tmp_path / "home").mkdir()
    mqadmin = MQAdmin.built(node.namesrv_addr, tmp_path / "home")
    run_id = grpc_java.new_run_id()
    grpc_java.prepare(mqadmin, run_id, only={"normal"})
    result = grpc_java.run(node.grpc_endpoint, run_id, ["producer-normal"], False, tmp_path / "java")
    result.assert_passed("producer-normal", grpc_java.MIN_CHECKS["producer-normal"])
    assert result.info.get("client_version", "").startswith("5."), result.info
