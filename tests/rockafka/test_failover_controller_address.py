"""The address a controller announces as the leader's (docs/design/failover.md, "Configuration"):
a NameServer listening on every interface (``rockafka namesrv``'s default ``--host 0.0.0.0``)
announces this machine's own address -- as a broker does for brokerIP1 -- or the
``--advertised-host`` it was given, never 127.0.0.1, which brokers on other hosts would connect
to and fail. Asked with a real remoting request of the kind ``rockafka admin controller`` and
``mqadmin getControllerMetaData`` send."""

from __future__ import annotations

import pytest

from gateway_native.broker import local_address
from gateway_native.remoting.codes import RequestCode as RC, ResponseCode as R
from tests.support.failover import CONTROLLER_SETTINGS, remoting_call
from tests.support.group import wait_until
from tests.support.node import StandaloneNamesrv, free_port

pytestmark = pytest.mark.timeout(120)


def _leader_address(port: int) -> str | None:
    resp = remoting_call(f"127.0.0.1:{port}", RC.CONTROLLER_GET_METADATA_INFO, timeout=2.0)
    assert resp.code == R.SUCCESS, resp.remark
    return resp.ext_fields.get("controllerLeaderAddress")


def _single_peer(tmp_path, name: str, extra_args: list[str] | None = None) -> StandaloneNamesrv:
    raft = free_port()
    return StandaloneNamesrv(tmp_path, name=name, host="0.0.0.0", extra_args=extra_args,
                             settings={"enableControllerInNamesrv": "true",
                                       "controllerDLegerPeers": f"n0-127.0.0.1:{raft}",
                                       "controllerDLegerSelfId": "n0", **CONTROLLER_SETTINGS})


def test_a_controller_listening_on_every_interface_announces_a_routable_address(tmp_path):
    own = local_address()
    assert not own.startswith("127."), f"this machine has no non-loopback address to announce ({own})"
    ns = _single_peer(tmp_path, "wildcard")
    try:
        announced = wait_until(lambda: _leader_address(ns.port), 20, what="the controller leader's address")
        assert announced == f"{own}:{ns.port}"
    finally:
        ns.stop()


def test_the_advertised_host_is_what_the_controller_announces(tmp_path):
    ns = _single_peer(tmp_path, "advertised", ["--advertised-host", "controller-0.example.internal"])
    try:
        announced = wait_until(lambda: _leader_address(ns.port), 20, what="the controller leader's address")
        assert announced == f"controller-0.example.internal:{ns.port}"
    finally:
        ns.stop()
