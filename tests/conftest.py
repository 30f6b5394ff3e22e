"""Shared fixtures. ``node``: one real ``rockafka serve`` per test module, on free ports."""

from __future__ import annotations

import asyncio

import pytest

from tests.support.node import RunningNode


# `make test` hands whole files to PYTEST_WORKERS processes in collection order (--dist loadfile
# --no-loadscope-reorder). The files below, heaviest first as a fresh-clone run measured them
# (--durations), go out first so the workers finish together: xdist's own order (most tests
# first) left the one-test files, the README's fresh install and the Spark cluster among them,
# for the end. Scheduling only: no test depends on the order; a file not listed keeps its place.
SLOW_FIRST = (
    "tests/test_readme.py",
    "tests/compat/test_mqadmin.py",
    "spark_examples/tests/test_standalone_cluster.py",
    "spark_examples/tests/test_rockafka_source.py",
    "tests/rockafka/test_cluster_groups.py",
    "spark_examples/tests/test_examples_cli.py",
    "tests/gateway_kafka/test_kafka_security.py",
    "tests/compat/test_java_grpc_client.py",
    "spark_examples/tests/test_stream_kill.py",
    "tests/rockafka/test_ha_kill9.py",
    "tests/rockafka/test_failover_resume.py",
    "tests/rockafka/test_tiered_node.py",
    "tests/compat/test_java_rocketmq_delays.py",
    "tests/rockafka/test_failover.py",
    "tests/compat/test_java_rocketmq_client.py",
    "tests/rockafka/test_admin_cli_operator.py",
    "tests/rockafka/test_read_paths.py",
    "tests/engine/test_store_model.py",
    "tests/rockafka/test_install_package.py",
    "tests/rockafka/test_admin_cli.py",
    "tests/rockafka/test_broker_group.py",
    "tests/rockafka/test_cluster_failover_readme.py",
    "tests/compat/test_java_rocketmq_failover.py",
    "tests/engine/test_recovery.py",
    "tests/compat/test_java_rocketmq_semantics.py",
    "tests/rockafka/test_cluster.py",
    "tests/gateway_kafka/test_kafka_groups.py",
    "tests/compat/test_kafka_connect.py",
    "tests/engine/test_tmpfs_crash_restart.py",
    "spark_examples/tests/test_tiered_replay.py",
)


def pytest_collection_modifyitems(session, config, items):
    rank = {path: i for i, path in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))  # stable: files keep their order


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    """A running all-in-one node for the test module; stopped (gracefully) afterwards."""
    with RunningNode(tmp_path_factory.mktemp("node") / "data") as n:
        yield n


@pytest.fixture
def make_node(tmp_path):
    """Factory for nodes with their own settings (``--set`` keys); all stopped at teardown."""
    nodes: list[RunningNode] = []

    def make(settings: dict[str, object] | None = None, start: bool = True, name: str = "data") -> RunningNode:
        n = RunningNode(tmp_path / name, settings=settings)
        nodes.append(n)
        return n.start() if start else n

    yield make
    for n in nodes:
        try:
            n.stop()
        except Exception:
            n.kill()


@pytest.fixture(autouse=True)
def _main_thread_event_loop():
    """Give the main thread a current event loop when an earlier test's ``asyncio.run()`` left it
    with none (a test process runs many files). The official RocketMQ 5 Python client creates
    its gRPC telemetry stream in the calling thread, and grpc.aio looks that thread's loop up
    with ``get_event_loop()``: without one a push consumer fails to start, as it would not in
    an application's own fresh process."""
    try:
        asyncio.get_event_loop_policy().get_event_loop()
    except RuntimeError:
        asyncio.set_event_loop(asyncio.new_event_loop())
    yield
