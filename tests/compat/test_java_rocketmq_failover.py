"""The stock RocketMQ Java client (4.9.x and 5.x, remoting) through an automatic failover
(docs/design/failover.md): a producer keeps sending sync while the master of a group under a
controller quorum is killed; once the controller elected a new master it is SEND_OK again, and a
push consumer receives every message that was answered SEND_OK (the runner's
``controller-failover`` scenario; the test kills the master between its halves, signalled through
files in the runner's work directory)."""

from __future__ import annotations

import subprocess

import pytest

from tests.compat import java_runner
from tests.support.failover import FailoverGroup
from tests.support.group import wait_until

pytestmark = pytest.mark.timeout(900)

CLIENTS = ["4.9", "5.x"]


@pytest.mark.parametrize("client", CLIENTS)
def test_java_producer_and_consumer_carry_on_through_a_failover(client, tmp_path):
    java_runner.build(java_runner.ROCKETMQ_DIR)
    work = tmp_path / "runner"
    work.mkdir()
    with FailoverGroup(tmp_path / "group") as group:
        master = group.wait_settled()
        cmd = java_runner.rocketmq_command(client, group.namesrv_addr, "JSON", ["controller-failover"], work)
        cmd[-2:-2] = ["--messages", "50", "--timeout-s", "240"]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_until(lambda: (work / "sent").exists() or proc.poll() is not None, 240,
                       what="the runner's first SEND_OKs")
            master.kill()
            group.wait_master(not_=master)
            (work / "master-stopped").touch()
            out, err = proc.communicate(timeout=400)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    result = java_runner.parse(cmd, proc.returncode, out, err)
    result.assert_passed("controller-failover", min_checks=4)
