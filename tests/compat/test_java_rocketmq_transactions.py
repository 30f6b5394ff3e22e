"""The stock RocketMQ Java client's TransactionMQProducer with ROCKETMQ (binary) remoting headers.

``test_java_rocketmq_semantics.py`` covers transactions with JSON headers; here the same
scenario runs with the ROCKETMQ serialization, so the broker-initiated CHECK_TRANSACTION_STATE
request and the client's END_TRANSACTION header go through the binary header codec too.

The runner's ``transaction`` scenario sends twelve half messages whose local transaction
commits (idx % 3 == 0), rolls back (idx % 3 == 1) or answers UNKNOW (idx % 3 == 2); the broker
must check the UNKNOW ones back with the live producer (CHECK_TRANSACTION_STATE), which commits
them. A push consumer must then receive exactly the eight committed messages and never a
rolled-back one. The node runs with short transaction intervals so check-back happens within
seconds (the scenario passes with RocketMQ's defaults too, only slower). Validated against
Apache RocketMQ 5.5 (``compat/bench/peers/rocketmq_peer.py``).
"""

from __future__ import annotations

import pytest

from tests.compat import java_runner
from tests.support.node import RunningNode

TXN_SETTINGS = {"transactionTimeOut": 1000, "transactionCheckInterval": 500}

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def txn_node(tmp_path_factory):
    java_runner.build(java_runner.ROCKETMQ_DIR)
    with RunningNode(tmp_path_factory.mktemp("txn-node") / "data", settings=TXN_SETTINGS) as n:
        yield n


@pytest.mark.parametrize("client", ["4.9", "5.x"])
def test_transaction_mq_producer_rocketmq_headers(txn_node, tmp_path, client):
    result = java_runner.run(
        java_runner.rocketmq_command(client, txn_node.namesrv_addr, "ROCKETMQ", ["transaction"], tmp_path), timeout=300)
    result.assert_passed("setup")
    result.assert_passed("transaction", min_checks=6)
