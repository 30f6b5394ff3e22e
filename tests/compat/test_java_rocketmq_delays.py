"""The stock RocketMQ Java client (4.9.8 and 5.x) against a real ``rockafka serve``: delayed
messages (delay level and TIMER_DELIVER_MS), retry after RECONSUME_LATER through
``%RETRY%<group>`` with growing reconsumeTimes, and dead letters in ``%DLQ%<group>`` keeping
their origin, and an online push consumer rewound by an offset reset (the broker's
RESET_CONSUMER_CLIENT_OFFSET parsed by the stock client), and a new group starting from a
timestamp (CONSUME_FROM_TIMESTAMP). The node runs with one- and two-second delay levels so the scenarios take
seconds (RocketMQ's defaults only make them slower)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.compat import java_runner
from tests.support.node import RunningNode

LEVELS = "1s 2s " + " ".join(["1s"] * 16)

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def delay_node(tmp_path_factory):
    java_runner.build(java_runner.ROCKETMQ_DIR)
    with RunningNode(tmp_path_factory.mktemp("delay-node") / "data",
                     settings={"messageDelayLevel": LEVELS, "timerMaxDelaySec": 120}) as n:
        yield n


# two JVMs per client, all four side by side: the scenarios mostly wait on delays and retries,
# and each has its own topics and groups
SPLIT = [["delay", "reset-offset"], ["retry-reconsume-later", "dlq", "consume-from-timestamp"]]
CLIENTS = ["4.9", "5.x"]


@pytest.fixture(scope="module")
def delay_runs(delay_node, tmp_path_factory):
    def run_client(client: str) -> java_runner.RunResult:
        return java_runner.run_side_by_side(
            [java_runner.rocketmq_command(client, delay_node.namesrv_addr, "JSON", part,
                                          tmp_path_factory.mktemp(f"delays-{client}")) for part in SPLIT], 400)

    with ThreadPoolExecutor(len(CLIENTS)) as pool:
        return dict(zip(CLIENTS, pool.map(run_client, CLIENTS)))


@pytest.mark.parametrize("client", CLIENTS)
def test_delay_retry_dlq_and_reset_scenarios(delay_runs, client):
    result = delay_runs[client]
    result.assert_passed("setup")
    result.assert_passed("delay", min_checks=4)
    result.assert_passed("retry-reconsume-later", min_checks=2)
    result.assert_passed("dlq", min_checks=4)
    result.assert_passed("reset-offset", min_checks=4)
    result.assert_passed("consume-from-timestamp", min_checks=3)
