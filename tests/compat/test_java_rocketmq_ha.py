"""The stock RocketMQ Java client (4.9.x and 5.x, remoting) against a SYNC_MASTER broker group:
every sync send answers SEND_OK, then — the master killed — a push consumer reads everything
from the slave (the runner's ``ha-slave-read`` scenario; the test kills the master between its
two halves, signalled through files in the runner's work directory).
"""

from __future__ import annotations

import subprocess

import pytest

from tests.compat import java_runner
from tests.support.group import BrokerGroup, wait_until

pytestmark = pytest.mark.timeout(600)

CLIENTS = ["4.9", "5.x"]


@pytest.fixture(scope="module")
def ha_runs(tmp_path_factory):
    java_runner.build(java_runner.ROCKETMQ_DIR)
    group = BrokerGroup(tmp_path_factory.mktemp("rmq-ha"), role="SYNC_MASTER").start()
    procs = {}
    try:
        for client in CLIENTS:
            work = tmp_path_factory.mktemp(f"rmq-ha-{client}")
            cmd = java_runner.rocketmq_command(client, group.namesrv_addr, "JSON", ["ha-slave-read"], work)
            cmd[-2:-2] = ["--messages", "60", "--timeout-s", "150"]
            procs[client] = (cmd, work, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        # both runners sent everything (or gave up); then the master goes down
        wait_until(lambda: all((w / "sent").exists() or p.poll() is not None for _, w, p in procs.values()), 240,
                   what="both runners sent their messages")
        group.master.kill()
        for _, work, _ in procs.values():
            (work / "master-stopped").touch()
        results = {}
        for client, (cmd, _, proc) in procs.items():
            out, err = proc.communicate(timeout=300)
            results[client] = java_runner.parse(cmd, proc.returncode, out, err)
        yield results
    finally:
        for _, _, proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        group.stop()


@pytest.mark.parametrize("client", CLIENTS)
def test_java_client_sends_to_sync_master_and_consumes_from_the_slave(ha_runs, client):
    ha_runs[client].assert_passed("ha-slave-read", 4)
