"""Transactions and orderly consumption through the stock Apache RocketMQ Java client (4.9.x and
5.x, remoting; JSON and ROCKETMQ headers): TransactionMQProducer commit / rollback / unknown ->
check-back commit, check-back exhaustion -> rollback, and MessageListenerOrderly with a group
that changes mid-stream.

The node runs with short transaction intervals (timeout 1 s, a check round every 500 ms, at most
2 check-backs) so the check-back paths finish in seconds."""

from __future__ import annotations

import uuid

import pytest

from gateway_native.client import Admin, LitePullConsumer
from tests.compat import java_runner
from tests.gateway_native.helpers import wait_until
from tests.support.node import RunningNode

CLIENTS = ["4.9", "5.x"]
SERIALIZATIONS = ["JSON", "ROCKETMQ"]
SCENARIOS = ["transaction", "transaction-exhaustion", "push-orderly", "push-orderly-rebalance"]
MIN_CHECKS = {"transaction": 6, "transaction-exhaustion": 3, "push-orderly": 3, "push-orderly-rebalance": 2}
SETTINGS = {"transactionTimeOut": 1000, "transactionCheckInterval": 500, "transactionCheckMax": 2}

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def semantics_node(tmp_path_factory):
    with RunningNode(tmp_path_factory.mktemp("node") / "data", settings=SETTINGS) as n:
        yield n


@pytest.fixture(scope="module")
def runs(semantics_node, tmp_path_factory):
    java_runner.build(java_runner.ROCKETMQ_DIR)
    cache: dict[tuple[str, str], java_runner.RunResult] = {}

    def get(client: str, serialize: str = "JSON") -> java_runner.RunResult:
        if (client, serialize) not in cache:
            work = tmp_path_factory.mktemp(f"rocketmq-sem-{client}-{serialize}")
            cache[(client, serialize)] = java_runner.run(
                java_runner.rocketmq_command(client, semantics_node.namesrv_addr, serialize, SCENARIOS, work), timeout=420)
        return cache[(client, serialize)]

    return get


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("serialize", SERIALIZATIONS)
@pytest.mark.parametrize("client", CLIENTS)
def test_rocketmq_java_client_semantics(runs, client, serialize, scenario):
    result = runs(client, serialize)
    result.assert_passed("setup")  # the client really used the requested header serialization
    result.assert_passed(scenario, MIN_CHECKS[scenario])


@pytest.mark.parametrize("client", CLIENTS)
def test_exhausted_transaction_is_rolled_back(runs, semantics_node, client):
    """After transactionCheckMax check-backs the undecided half message is rolled back: the
    broker logs it, and the topic holds only the committed message."""
    result = runs(client)
    topic = result.info.get("transaction_exhaustion_topic")
    assert topic, result.explain("transaction-exhaustion")
    wait_until(lambda: any("transaction_check_exhausted_rolled_back" in line and topic in line
                           for line in semantics_node.log_tail(2_000_000).splitlines()),
               timeout=30, what=f"the rollback of the undecided transaction on {topic}")
    with Admin(semantics_node.namesrv_addr) as admin:
        assert admin.max_offset(admin.message_queues(topic)[0]) == 1
    with LitePullConsumer(f"sem_{uuid.uuid4().hex[:6]}", semantics_node.namesrv_addr,
                          consume_from_where="CONSUME_FROM_FIRST_OFFSET", auto_commit=False) as lp:
        lp.assign(lp.fetch_message_queues(topic))
        got: list = []
        wait_until(lambda: got.extend(lp.poll(200)) or got, what="the committed message")
    assert [m.properties.get("idx") for m in got] == ["1"]
