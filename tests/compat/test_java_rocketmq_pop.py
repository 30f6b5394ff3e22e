"""The stock RocketMQ 5.x Java remoting client consuming in POP mode from a real ``rockafka serve``.

The ``push-pop`` scenario of ``compat/rocketmq-java`` sets the group's consume mode to POP on the
broker (SET_MESSAGE_REQUEST_MODE, as ``mqadmin setConsumeMode`` does), starts a
``DefaultMQPushConsumer`` with ``setClientRebalance(false)`` so it takes its assignment from the
broker (QUERY_ASSIGNMENT) and pops (POP_MESSAGE), and checks: every message arrives with its POP
ack key, each is acked on its own (ACK_MESSAGE) and never comes back, and the two the listener
fails once are hidden (CHANGE_MESSAGE_INVISIBLETIME) and redelivered with reconsumeTimes 1
through the group's POP retry topic.

JSON headers only: RocketMQ's own header serialization (ROCKETMQ) carries the request code as a
16-bit field, so the POP codes (200050 ...) arrive truncated (200050 -> 3442) and Apache
RocketMQ's broker refuses them as unknown too; a POP consumer must use JSON headers.
"""

from __future__ import annotations

import pytest

from tests.compat import java_runner

pytestmark = pytest.mark.timeout(300)


def test_remoting_push_consumer_in_pop_mode(node, tmp_path):
    java_runner.build(java_runner.ROCKETMQ_DIR)
    result = java_runner.run(
        java_runner.rocketmq_command("5.x", node.namesrv_addr, "JSON", ["push-pop"], tmp_path), timeout=240)
    result.assert_passed("setup")
    result.assert_passed("push-pop", min_checks=6)
