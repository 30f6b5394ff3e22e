"""The node's NameServer answers on its own loop: route queries are not held up by work on the
broker's loop (the cause of Java clients' first NameServer calls timing out on a busy machine,
when broker config writes fsynced on the one loop everything shared)."""

from __future__ import annotations

import asyncio
import threading

from engine.config import load_node_config
from gateway_native.client import Admin
from rockafka.app import Node
from tests.support.node import free_port


def test_namesrv_answers_while_the_broker_loop_is_blocked(tmp_path):
    config = load_node_config(overrides={
        "host": "127.0.0.1", "data_dir": str(tmp_path / "data"), "kafka_port": free_port(),
        "namesrv_port": free_port(), "broker_port": free_port(), "ha_port": free_port(), "admin_port": free_port(),
        "grpc_proxy_port": free_port()})
    node = Node(config)
    ready = threading.Event()
    blocked = threading.Event()
    release = threading.Event()
    unblocked = threading.Event()
    done = threading.Event()
    loop_holder: dict = {}

    async def run() -> None:
        loop_holder["loop"] = asyncio.get_running_loop()
        try:
            await node.start()
        except BaseException as e:  # a port taken, say: fail now with the cause, not after a wait
            loop_holder["error"] = e
            ready.set()
            raise
        ready.set()
        await asyncio.get_running_loop().run_in_executor(None, done.wait)
        await node.stop()

    def block_main_loop() -> None:  # what an fsync or a long call on the broker's loop does
        blocked.set()
        release.wait(20)
        unblocked.set()

    runner = threading.Thread(target=lambda: asyncio.run(run()))
    runner.start()
    try:
        assert ready.wait(60), "node did not start"
        assert "error" not in loop_holder, f"node did not start: {loop_holder['error']!r}"
        addr = f"127.0.0.1:{config.namesrv_port}"
        with Admin(addr, timeout_ms=3000) as admin:
            assert admin.cluster_info()["brokerAddrTable"]  # the broker registered
            loop_holder["loop"].call_soon_threadsafe(block_main_loop)
            assert blocked.wait(10)
            info = admin.cluster_info()  # a NameServer request while the broker's loop is stuck
            assert not unblocked.is_set(), "the NameServer answered only once the broker's loop was free"
            assert "DefaultCluster" in info["clusterAddrTable"]
    finally:
        release.set()
        done.set()
        runner.join(60)
    assert not runner.is_alive()
