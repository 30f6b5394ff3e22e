"""Apache RocketMQ's ``mqadmin`` (rocketmq-tools 5.5) controller subcommands against a real
failover controller (``rockafka namesrv`` with ``enableControllerInNamesrv``, one Raft peer) and a
real broker under it (``rockafka serve`` with ``enableControllerMode``, broker id 1): each
command's output is checked against what the controller knows.

A second group, ``broker-gone``, registers with the controller and never heartbeats (a broker
that died): ``cleanBrokerMetadata`` forgets it, and refuses to forget the living ``broker-a``.
"""

from __future__ import annotations

import re

import pytest

from tests.compat.mqadmin import MQAdmin
from tests.support.failover import FAILOVER_SETTINGS, ControllerQuorum, FailoverGroup, remoting_call
from tests.support.group import TEST_SETTINGS, wait_until
from tests.support.node import RunningNode

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("controller")
    quorum = ControllerQuorum(tmp, peers=1).start()
    broker = RunningNode(tmp / "broker-a-1", settings=dict(
        TEST_SETTINGS, **FAILOVER_SETTINGS, brokerName="broker-a", brokerRole="SYNC_MASTER", brokerId=1,
        enableControllerMode="true", controllerAddr=quorum.addrs, namesrvAddr=quorum.addrs))
    try:
        broker.start()
        wait_until(lambda: (FailoverGroup.ha(broker).get("lease") or {}).get("valid"), 60, 0.1,
                   "broker-a elected master by the controller")
        yield quorum, broker
    finally:
        broker.stop()
        quorum.stop()


@pytest.fixture(scope="module")
def mqadmin(cluster, tmp_path_factory):
    quorum, _ = cluster
    return MQAdmin.built(quorum.addrs, tmp_path_factory.mktemp("mqadmin-controller-home"))


def _tab(text: str) -> dict[str, str]:
    """``#Key\\tvalue`` lines -> {Key: value}."""
    return {m.group(1): m.group(2).strip() for m in re.finditer(r"^#(\w+):?\t(.*)$", text, flags=re.M)}


def test_controller_subcommands(cluster, mqadmin):
    quorum, broker = cluster
    ctl = quorum.nodes[0].addr
    from gateway_native.remoting.codes import RequestCode as RC, ResponseCode as R

    gone = remoting_call(ctl, RC.CONTROLLER_REGISTER_BROKER, {
        "clusterName": "DefaultCluster", "brokerName": "broker-gone", "brokerId": "1",
        "brokerAddress": "127.0.0.1:1", "haAddress": "127.0.0.1:2"})
    assert gone.code == R.SUCCESS, gone.remark

    out = mqadmin.many({
        "meta": ["getControllerMetaData", "-a", ctl],
        "sync": ["getSyncStateSet", "-a", ctl, "-b", "broker-a"],
        "config": ["getControllerConfig", "-a", ctl],
        "update": ["updateControllerConfig", "-a", ctl, "-k", "enableElectUncleanMaster", "-v", "true"],
        "updateStartOnly": ["updateControllerConfig", "-a", ctl, "-k", "controllerDLegerGroup", "-v", "other"],
        "cleanLiving": ["cleanBrokerMetadata", "-a", ctl, "-bn", "broker-a", "-c", "DefaultCluster"],
        "electGone": ["electMaster", "-a", ctl, "-c", "DefaultCluster", "-bn", "broker-gone", "-b", "1"],
    }, workers=7)

    meta = _tab(out["meta"])
    assert meta.get("ControllerGroup") == "DefaultControllerGroup", out["meta"]
    assert meta["ControllerLeaderId"] == "n0" and meta["ControllerLeaderAddress"] == ctl, out["meta"]
    assert f"#Peer:\tn0-{quorum.raft_addrs[0]}" in out["meta"], out["meta"]

    sync = _tab(out["sync"])
    assert sync.get("brokerName") == "broker-a" and sync.get("MasterBrokerId") == "1", out["sync"]
    assert sync["MasterAddr"] == broker.broker_addr and int(sync["MasterEpoch"]) >= 1, out["sync"]
    assert sync["SyncStateSetNums"] == "1" and "InSyncReplica:" in out["sync"], out["sync"]

    assert f"============{ctl}============" in out["config"], out["config"]
    config = {k.strip(): v.strip() for k, _, v in (line.partition("=  ") for line in out["config"].splitlines()) if v}
    assert config["controllerDLegerSelfId"] == "n0" and config["enableControllerInNamesrv"] == "true", out["config"]

    assert "update controller config success" in out["update"], out["update"]
    assert "black list" in out["updateStartOnly"] and "controllerDLegerGroup" in out["updateStartOnly"], out
    assert "Broker broker-a is still alive, clean up failure" in out["cleanLiving"], out["cleanLiving"]
    assert "not alive" in out["electGone"], out["electGone"]  # it never heartbeat

    epoch = int(sync["MasterEpoch"])
    out = mqadmin.many({
        "config": ["getControllerConfig", "-a", ctl],
        "elect": ["electMaster", "-a", ctl, "-c", "DefaultCluster", "-bn", "broker-a", "-b", "1"],
        "clean": ["cleanBrokerMetadata", "-a", ctl, "-bn", "broker-gone", "-c", "DefaultCluster"],
    })
    assert re.search(r"^enableElectUncleanMaster\s+=\s+true$", out["config"], flags=re.M), out["config"]
    elect = _tab(out["elect"])
    assert elect["BrokerMasterAddr"] == broker.broker_addr and int(elect["MasterEpoch"]) >= epoch, out["elect"]
    assert f"#Broker\t1\t{broker.broker_addr}" in out["elect"], out["elect"]
    assert "clear broker broker-gone metadata from controller success" in out["clean"], out["clean"]
    assert quorum.replicas_info("broker-gone") is None  # forgotten
    assert quorum.replicas_info("broker-a")["masterBrokerId"] == 1  # the living group is untouched
