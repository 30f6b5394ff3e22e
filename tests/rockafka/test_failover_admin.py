"""Operating a group under the failover controller (docs/design/failover.md, "Operations"):
``rockafka admin controller`` shows the leader, master, epochs and SyncStateSet;
``rockafka admin elect-master`` switches the master by hand — to an alive SyncStateSet member
only — and nothing acknowledged before the switch is lost; failover events are counted in
/metrics."""

from __future__ import annotations

import json
import subprocess
import urllib.request

import pytest

from compat.chaos import failover
from tests.support.failover import FailoverGroup
from tests.support.group import wait_until
from tests.support.node import rockafka_command

pytestmark = pytest.mark.timeout(600)


def admin(group: FailoverGroup, *args: str, ok: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(rockafka_command() + ["admin", "--namesrv", group.namesrv_addr, *args],
                          capture_output=True, text=True, timeout=60)
    assert (proc.returncode == 0) == ok, proc.stdout + proc.stderr
    return proc


def test_controller_view_and_a_manual_switch_that_loses_nothing(tmp_path):
    from gateway_native.client import Message, Producer

    with FailoverGroup(tmp_path) as group:
        master = group.wait_settled()
        master_id = group.brokers.index(master) + 1
        view = json.loads(admin(group, "controller", "--json").stdout)
        assert sum(1 for p in view["peers"] if p.get("isLeader")) == 1
        g = view["replicasInfoTable"]["broker-a"]
        assert g["masterBrokerId"] == master_id and g["masterEpoch"] >= 1
        assert sorted(r["brokerId"] for r in g["inSyncReplicas"]) == [1, 2, 3]
        table = admin(group, "controller").stdout
        assert "controller leader: n" in table and "inSyncStateSet" in table

        acked = []
        with Producer("manual-switch", group.namesrv_addr, retry_times_when_send_failed=2) as producer:
            for i in range(30):
                r = producer.send(Message(failover.NATIVE_TOPIC, f"before-{i}".encode()))
                assert r.status.name == "SEND_OK"
                acked.append((0.0, r.message_queue.queue_id, r.queue_offset, f"before-{i}".encode()))
            target = next(i for i in (1, 2, 3) if i != master_id)
            out = json.loads(admin(group, "elect-master", "--broker-name", "broker-a", "--broker-id", str(target),
                                   "--json").stdout)
            assert out["masterBrokerId"] == target and out["masterEpoch"] == g["masterEpoch"] + 1
            new = group.wait_master(not_=master)
            assert new is group.by_id(target)
            # the old master follows the new one; writes go on through the same producer
            wait_until(lambda: group.ha(master)["brokerRole"] == "SLAVE" and group.ha(master).get("connected"), 30,
                       what="the old master following")

            attempts = iter(range(1000))

            def sent_after() -> bool:  # until the new master's SyncStateSet is back (SLAVE_NOT_AVAILABLE before)
                body = f"after-{next(attempts)}".encode()
                r = producer.send(Message(failover.NATIVE_TOPIC, body))
                if r.status.name == "SEND_OK":
                    acked.append((0.0, r.message_queue.queue_id, r.queue_offset, body))
                    return True
                return False
            wait_until(sent_after, 30, 0.2, "a send acknowledged by the new master")
        metrics = urllib.request.urlopen(f"{new.admin_url}/metrics", timeout=5).read().decode()
        assert 'rockafka_failover_role_changes_total{role="master"}' in metrics
        # every controller peer applied (and counts) the manual election; one of them leads
        leaders = 0
        for peer in group.quorum.nodes:
            text = urllib.request.urlopen(f"http://{peer.host}:{peer.metrics_port}/metrics", timeout=5).read().decode()
            assert 'rockafka_controller_elections_total{group="broker-a",reason="manual"} 1.0' in text
            leaders += "rockafka_controller_is_leader 1.0" in text
        assert leaders == 1
        # an unknown member, or one that is not alive, cannot be made master
        err = admin(group, "elect-master", "--broker-name", "broker-a", "--broker-id", "9", ok=False).stderr
        assert "not alive" in err
        err = admin(group, "elect-master", "--broker-name", "no-such-group", ok=False).stderr
        assert "no broker of group no-such-group" in err
        group.wait_settled()
        wait_until(lambda: len({group.ha(b)["commitLogMaxOffset"] for b in group.brokers}) == 1, 30,
                   what="every replica at the same log end")
        for b in group.brokers:
            b.stop()
        problems, dupes = failover.check(new.data_dir, [b.data_dir for b in group.brokers if b is not new], acked, [])
        assert problems == [] and dupes["native"] == 0
