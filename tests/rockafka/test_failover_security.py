"""The failover controller under authentication (docs/design/security.md, docs/design/failover.md):
its broker requests need CLUSTER_ACTION like REGISTER_BROKER, so a stranger can neither register
a replica, heartbeat for one nor move the master; a broker signing with the cluster's inner
credentials registers, is elected and holds its lease through signed heartbeats."""

from __future__ import annotations

import json

import pytest

from gateway_native.remoting.codes import RequestCode as RC, ResponseCode as R
from tests.support.failover import FAILOVER_SETTINGS, ControllerQuorum, remoting_call
from tests.support.group import TEST_SETTINGS, http_json, wait_until
from tests.support.node import RunningNode

pytestmark = pytest.mark.timeout(180)

INNER = ("rockafka-node", "inner-secret")
ADMIN = ("admin", "admin-pw")
SECURE = {"authenticationEnabled": "true", "innerClientAuthenticationCredentials": f"{INNER[0]}:{INNER[1]}"}


def test_controller_requests_need_the_inner_credentials(tmp_path):
    quorum = ControllerQuorum(tmp_path, peers=1, settings=SECURE, credentials=INNER).start()
    broker = None
    try:
        leader = quorum.wait_leader()
        register = {"brokerName": "broker-a", "brokerId": 1, "brokerAddress": "127.0.0.1:1"}
        for code, fields, body in [(RC.CONTROLLER_REGISTER_BROKER, register, b"{}"),
                                   (RC.BROKER_HEARTBEAT, {"brokerName": "broker-a", "brokerId": 1}, b""),
                                   (RC.CONTROLLER_ELECT_MASTER, {"brokerName": "broker-a", "brokerId": 1}, b""),
                                   (RC.CONTROLLER_ALTER_SYNC_STATE_SET,
                                    {"brokerName": "broker-a", "masterBrokerId": 1, "masterEpoch": 1},
                                    b'{"syncStateSet": [1], "syncStateSetEpoch": 1}')]:
            unsigned = remoting_call(leader.addr, code, fields, body)
            assert unsigned.code == R.NO_PERMISSION, (code, unsigned.code, unsigned.remark)
            forged = remoting_call(leader.addr, code, fields, body, credentials=(INNER[0], "not-the-secret"))
            assert forged.code == R.NO_PERMISSION and "signature" in forged.remark, (code, forged.remark)
        assert quorum.replicas_info() is None, "a refused request changed the controller's state"

        # a broker with the inner credentials: registered, elected, its lease held by heartbeats
        broker = RunningNode(tmp_path / "broker-a-1", settings=dict(
            TEST_SETTINGS, **FAILOVER_SETTINGS, **SECURE, initAuthenticationUser=f"{ADMIN[0]}:{ADMIN[1]}",
            brokerName="broker-a", brokerRole="SYNC_MASTER", brokerId=1, enableControllerMode="true",
            controllerAddr=quorum.addrs, namesrvAddr=quorum.addrs))
        broker.start()
        info = wait_until(lambda: (lambda g: g if g and g.get("masterBrokerId") == 1 else None)(quorum.replicas_info()),
                          60, 0.2, "broker 1 elected through signed controller requests")
        assert info["masterEpoch"] >= 1
        ha = wait_until(lambda: (lambda h: h if (h.get("lease") or {}).get("valid") else None)(
            http_json(f"{broker.admin_url}/api/ha", auth=ADMIN)), 30, 0.2, "the master's lease")
        assert ha["brokerRole"] == "SYNC_MASTER"
        # the signed read-only view answers the operator
        view = remoting_call(leader.addr, RC.CONTROLLER_GET_SYNC_STATE_DATA, body=json.dumps(["broker-a"]).encode(),
                             credentials=INNER)
        assert view.code == R.SUCCESS
    finally:
        if broker is not None:
            broker.stop()
        quorum.stop()


def _follows_the_log(raft_addrs: list[str], password: str | None, within: float) -> bool:
    """Whether a read-only Raft member (pysyncobj's own: it follows the leader's log without a
    vote) with this password catches up with the quorum within ``within`` seconds."""
    import time

    from pysyncobj import SyncObj, SyncObjConf

    from engine.controller.raft import _ReplicatedState

    follower = SyncObj(None, raft_addrs, SyncObjConf(password=password, connectionRetryTime=0.2),
                       consumers=[_ReplicatedState(lambda cmd, result: None)])
    try:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if follower.isReady():
                return True
            time.sleep(0.1)
        return False
    finally:
        follower.destroy()


def test_controller_raft_traffic_needs_the_inner_secret(tmp_path):
    """With authentication on, the controllers' Raft connections are encrypted and authenticated
    with the inner secret: a process that knows the peers' addresses but not the secret cannot
    follow the controller log (broker roles, epochs), one that knows it can."""
    quorum = ControllerQuorum(tmp_path, peers=3, settings=SECURE, credentials=INNER).start()
    try:
        quorum.wait_leader()
        assert not _follows_the_log(quorum.raft_addrs, None, 5), "the Raft log was readable without the secret"
        assert not _follows_the_log(quorum.raft_addrs, "a-guess", 5), "a wrong secret read the Raft log"
        assert _follows_the_log(quorum.raft_addrs, INNER[1], 30), "the quorum's own secret did not work"
    finally:
        quorum.stop()
