"""Shared fixtures. ``node``: one real ``rockafka serve`` per test module, on free ports."""

from __future__ import annotations

import asyncio

import pytest

from tests.support.node import RunningNode


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
