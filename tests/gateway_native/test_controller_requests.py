"""The failover controller's remoting requests with bad input and from the wrong peer
(gateway_native/controller.py): clear error codes, never a crash; a NameServer without the
controller refuses them; a follower names the leader."""

from __future__ import annotations

import json

import pytest

from gateway_native.remoting.codes import RequestCode as RC, ResponseCode as R
from tests.support.failover import ControllerQuorum, remoting_call
from tests.support.group import wait_until
from tests.support.node import StandaloneNamesrv

pytestmark = pytest.mark.timeout(120)


def test_bad_controller_requests_get_clear_errors(tmp_path):
    plain = StandaloneNamesrv(tmp_path / "plain")
    quorum = ControllerQuorum(tmp_path / "quorum").start()
    try:
        resp = remoting_call(plain.addr, RC.BROKER_HEARTBEAT, {"brokerName": "g", "brokerId": 1})
        assert resp.code == R.REQUEST_CODE_NOT_SUPPORTED and "enableControllerInNamesrv" in resp.remark
        leader = quorum.wait_leader()
        follower = next(n for n in quorum.nodes if n is not leader)
        resp = remoting_call(follower.addr, RC.CONTROLLER_GET_REPLICA_INFO, {"brokerName": "g"})
        assert resp.code == R.CONTROLLER_NOT_LEADER
        # the leader announces where it answers (a replicated command); followers pass that on
        wait_until(lambda: remoting_call(follower.addr, RC.CONTROLLER_GET_REPLICA_INFO, {"brokerName": "g"})
                   .ext_fields.get("controllerLeaderAddress") == leader.addr, 10, what="the follower naming the leader")
        resp = remoting_call(leader.addr, RC.CONTROLLER_REGISTER_BROKER,
                             {"brokerName": "g", "brokerId": 1, "brokerAddress": "h:1"}, body=b"{not json")
        assert resp.code == R.CONTROLLER_INVALID_REQUEST and "JSON" in resp.remark
        resp = remoting_call(leader.addr, RC.BROKER_HEARTBEAT, {"brokerName": "g", "brokerId": 1})
        assert resp.code == R.CONTROLLER_BROKER_METADATA_NOT_EXIST
        resp = remoting_call(leader.addr, RC.CONTROLLER_ALTER_SYNC_STATE_SET,
                             {"brokerName": "g", "masterBrokerId": 1, "masterEpoch": 1}, body=b'{"syncStateSet": "x"}')
        assert resp.code == R.CONTROLLER_INVALID_REQUEST
        resp = remoting_call(leader.addr, RC.CONTROLLER_ELECT_MASTER, {"brokerName": "nobody"})
        assert resp.code == R.CONTROLLER_BROKER_METADATA_NOT_EXIST
        resp = remoting_call(leader.addr, RC.CONTROLLER_GET_SYNC_STATE_DATA, body=b'{"a": 1}')
        assert resp.code == R.CONTROLLER_INVALID_REQUEST
        # the quorum still answers normally afterwards
        resp = remoting_call(leader.addr, RC.CONTROLLER_REGISTER_BROKER,
                             {"brokerName": "g", "brokerId": 1, "brokerAddress": "h:1"}, body=b"{}")
        assert resp.code == R.SUCCESS and json.loads(bytes(resp.body))["replicas"]["1"]["brokerAddress"] == "h:1"
    finally:
        quorum.stop()
        plain.stop()
