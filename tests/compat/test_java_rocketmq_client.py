"""The stock Apache RocketMQ Java client (remoting protocol) against a real ``rockafka serve``.

``compat/rocketmq-java`` is one runner built twice, against rocketmq-client 4.9.x and 5.x; each
build runs twice, once per remoting header serialization (JSON and ROCKETMQ, chosen by the
client's ``rocketmq.serialize.type`` system property). That is four JVMs per module, run side by side,
each running every scenario through the node's NameServer and broker; one test per (client,
serialization, scenario) asserts that scenario's checks all passed and prints the failed checks
with the client's exception and stack when not. The same runner passes all of these checks
against Apache RocketMQ 5.5 (``compat/bench/peers/rocketmq_peer.py``), so a failure here is a
Rockafka incompatibility.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.compat import java_runner

CLIENTS = ["4.9", "5.x"]
SERIALIZATIONS = ["JSON", "ROCKETMQ"]
SCENARIOS = ["producer-sync", "producer-async", "producer-batch", "query-message", "push-tags", "push-sql", "push-broadcast",
             "lite-pull-subscribe", "lite-pull-assign", "push-orderly"]
# the fewest checks each scenario reports when it runs to completion
MIN_CHECKS = {"producer-sync": 7, "producer-async": 5, "producer-batch": 6, "query-message": 11, "push-tags": 3, "push-sql": 5,
              "push-broadcast": 6, "lite-pull-subscribe": 5, "lite-pull-assign": 6,
              "push-orderly": 3}

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def rocketmq_runs(node, tmp_path_factory):
    """(client, serialization) -> RunResult. The four JVMs run side by side (each is mostly
    waiting on its clients' rebalance and poll intervals; their topics and groups are distinct),
    started together on first use."""
    java_runner.build(java_runner.ROCKETMQ_DIR)
    runs: dict[tuple[str, str], java_runner.RunResult] = {}

    def run_one(key: tuple[str, str]) -> java_runner.RunResult:
        client, serialize = key
        work = tmp_path_factory.mktemp(f"rocketmq-{client}-{serialize}")
        return java_runner.run(
            java_runner.rocketmq_command(client, node.namesrv_addr, serialize, SCENARIOS, work), timeout=420)

    def get(client: str, serialize: str) -> java_runner.RunResult:
        if not runs:
            keys = [(c, s) for c in CLIENTS for s in SERIALIZATIONS]
            with ThreadPoolExecutor(len(keys)) as pool:
                runs.update(zip(keys, pool.map(run_one, keys)))
        return runs[(client, serialize)]

    return get


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("serialize", SERIALIZATIONS)
@pytest.mark.parametrize("client", CLIENTS)
def test_rocketmq_java_client(rocketmq_runs, client, serialize, scenario):
    result = rocketmq_runs(client, serialize)
    result.assert_passed("setup")  # the client really used the requested header serialization
    result.assert_passed(scenario, MIN_CHECKS[scenario])


@pytest.mark.parametrize("client", CLIENTS)
def test_runner_is_the_intended_client(rocketmq_runs, client):
    result = rocketmq_runs(client, "JSON")
    version = result.info.get("client_version", "")
    assert version.startswith("V4_9_" if client == "4.9" else "V5_"), result.explain("setup")
