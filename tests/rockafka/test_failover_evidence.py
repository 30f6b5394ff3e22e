"""Certain evidence of death with real processes (docs/design/failover.md, "Detection from lost
connections"): a stopped (SIGSTOP) master, whose ports still accept, is replaced only once the
lease its last heartbeat could grant ran out ("Fencing"); a killed (kill -9) master, whose ports refuse, is replaced on that
evidence before the lease its last heartbeat granted ended. Asserted on the controller's logged
reason and evidence, not on timings."""

from __future__ import annotations

import json
import os
import re
import signal

import pytest

from tests.support.failover import FailoverGroup
from tests.support.group import wait_until

pytestmark = pytest.mark.timeout(300)


def _controller_log(group: FailoverGroup) -> str:
    return "".join(n.path.read_text("utf-8", "replace") for n in group.quorum.nodes if n.path.exists())


def _elections(group: FailoverGroup, old_master: int) -> list[str]:
    return [line for line in _controller_log(group).splitlines()
            if "controller_elected_master" in line and re.search(rf"old_master={old_master}\b", line)]


def test_a_stopped_master_waits_out_its_lease_and_a_killed_one_is_replaced_on_evidence(tmp_path):
    with FailoverGroup(tmp_path, members=2) as group:
        stopped = group.wait_settled()
        stopped_id = stopped.settings["brokerId"]
        os.killpg(stopped.proc.pid, signal.SIGSTOP)
        try:
            group.wait_master(not_=stopped)
        finally:
            os.killpg(stopped.proc.pid, signal.SIGCONT)
        elections = _elections(group, stopped_id)
        assert elections and all("not heard since its lease ran out" in e for e in elections), elections
        assert "ports refuse" not in "".join(elections)

        killed = group.wait_settled(members=2)  # the stopped one is back as an in-sync slave
        killed_id = killed.settings["brokerId"]
        killed.kill()
        group.wait_master(not_=killed)
        wait_until(lambda: _elections(group, killed_id), 10, what="the election to be logged")
        elections = _elections(group, killed_id)
        assert all("ports refuse connections (process gone)" in e for e in elections), elections
        gone = [line for line in _controller_log(group).splitlines()
                if "controller_broker_gone" in line and re.search(rf"broker_id={killed_id}\b", line)]
        assert gone, _controller_log(group)[-4000:]
        left = float(re.search(r"lease_left_s=([0-9.]+)", gone[-1]).group(1))
        assert left > 0, gone  # declared dead while the lease it may have held was still running
        assert "refused" in gone[-1] and "accepted" not in gone[-1], gone
