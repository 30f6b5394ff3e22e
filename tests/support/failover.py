"""A broker group under a failover controller quorum on loopback, each part a real process:
three ``rockafka namesrv`` with the controller (``enableControllerInNamesrv``, Raft between
them) that also serve routes, and ``rockafka serve`` brokers in controller mode
(``enableControllerMode``) with broker ids 1..n.

``FailoverGroup.start()`` returns once the controller elected a master and every other broker
streams from it and is in its confirmed SyncStateSet. Helpers find the master, wait for a new
one, and ask the controller for its view (CONTROLLER_GET_SYNC_STATE_DATA /
CONTROLLER_GET_METADATA_INFO over remoting).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from tests.support.group import TEST_SETTINGS, http_json, wait_until
from tests.support.node import RunningNode, StandaloneNamesrv, free_port

# fast enough for tests; the lease stays shorter than the heartbeat timeout (fencing)
FAILOVER_SETTINGS = {"brokerHeartbeatInterval": 500, "controllerHeartBeatTimeoutMills": 3000,
                     "masterLeaseMills": 2000, "checkSyncStateSetPeriod": 500,
                     "haMaxTimeSlaveNotCatchup": 5000}
CONTROLLER_SETTINGS = {"scanNotActiveBrokerInterval": 300}


def remoting_call(addr: str, code: int, fields: dict[str, Any] | None = None, body: bytes = b"",
                  timeout: float = 5.0, credentials: tuple[str, str] | None = None) -> Any:
    """One remoting request (signed with ``credentials`` = (AccessKey, SecretKey) when given);
    returns the response command."""
    from gateway_native.remoting.command import RemotingCommand
    from gateway_native.transport import open_connection

    async def go() -> Any:
        from gateway_native.remoting import acl

        conn = await open_connection(addr, None, timeout=timeout,
                                     signer=acl.signer(*credentials) if credentials else None)
        try:
            return await conn.invoke(RemotingCommand.request(code, fields or {}, body, language=0), timeout)
        finally:
            conn.close()
    return asyncio.run(go())


class ControllerQuorum:
    def __init__(self, tmp_path: Path, peers: int = 3, settings: dict[str, object] | None = None,
                 host: str = "127.0.0.1", command_prefix: list[str] | None = None, fast: bool = True,
                 credentials: tuple[str, str] | None = None):
        self.credentials = credentials  # what its own views are asked with when authentication is on
        raft = [free_port() for _ in range(peers)]
        self.raft_addrs = [f"{host}:{p}" for p in raft]
        spec = ";".join(f"n{i}-{host}:{p}" for i, p in enumerate(raft))
        self.nodes = [StandaloneNamesrv(Path(tmp_path), start=False, name=f"controller-n{i}", host=host,
                                        command_prefix=command_prefix, metrics_port=free_port(),
                                        settings={"enableControllerInNamesrv": "true", "controllerDLegerPeers": spec,
                                                  "controllerDLegerSelfId": f"n{i}",
                                                  **(CONTROLLER_SETTINGS if fast else {}),
                                                  **(settings or {})})
                      for i in range(peers)]

    @property
    def addrs(self) -> str:
        return ";".join(n.addr for n in self.nodes)

    def start(self) -> "ControllerQuorum":
        for n in self.nodes:
            n.start()
        self.wait_leader()
        return self

    def stop(self) -> None:
        for n in self.nodes:
            try:
                n.stop()
            except Exception:
                n.kill()

    def metadata(self, node: StandaloneNamesrv) -> dict[str, Any]:
        from gateway_native.remoting.codes import RequestCode as RC

        resp = remoting_call(node.addr, RC.CONTROLLER_GET_METADATA_INFO, timeout=2.0, credentials=self.credentials)
        return json.loads(bytes(resp.body))

    def leader(self) -> StandaloneNamesrv | None:
        for n in self.nodes:
            if not n.running():
                continue
            try:
                if self.metadata(n).get("isLeader"):
                    return n
            except Exception:
                continue
        return None

    def wait_leader(self, timeout: float = 30.0, not_: StandaloneNamesrv | None = None) -> StandaloneNamesrv:
        return wait_until(lambda: (lambda ld: ld if ld is not None and ld is not not_ else None)(self.leader()),
                          timeout, 0.1, "a controller leader")

    def replicas_info(self, group: str = "broker-a") -> dict[str, Any] | None:
        from gateway_native.remoting.codes import RequestCode as RC, ResponseCode as R

        leader = self.leader()
        if leader is None:
            return None
        resp = remoting_call(leader.addr, RC.CONTROLLER_GET_SYNC_STATE_DATA, body=json.dumps([group]).encode(),
                             credentials=self.credentials)
        if resp.code != R.SUCCESS:
            return None
        return json.loads(bytes(resp.body))["replicasInfoTable"].get(group)


class FailoverGroup:
    def __init__(self, tmp_path: Path, *, members: int = 3, role: str = "SYNC_MASTER", name: str = "broker-a",
                 settings: dict[str, object] | None = None, controller_settings: dict[str, object] | None = None,
                 network: Any = None, fast: bool = True):
        self.tmp_path = Path(tmp_path)
        self.network = network  # compat/chaos/netns.Network: each broker in its own namespace
        self.name = name
        where = network.controller_place() if network is not None else {}
        # fast: test timings (FAILOVER_SETTINGS); else the documented defaults of the failover keys
        self.quorum = ControllerQuorum(self.tmp_path, settings=controller_settings, fast=fast, **where)
        common = dict(**(dict(TEST_SETTINGS, **FAILOVER_SETTINGS) if fast else {}), brokerName=name, brokerRole=role,
                      enableControllerMode="true", controllerAddr=self.quorum.addrs, namesrvAddr=self.quorum.addrs,
                      **(settings or {}))
        self.brokers = [RunningNode(self.tmp_path / f"{name}-{i}", settings=dict(common, brokerId=i))
                        for i in range(1, members + 1)]
        if network is not None:
            for i, b in enumerate(self.brokers, 1):
                place = network.broker_place(i)
                b.host, b.command_prefix = place["host"], place["command_prefix"]
                # the admin HTTP binds loopback by default: the harness reads it from outside
                b.settings["adminHost"] = place["host"]

    @property
    def namesrv_addr(self) -> str:
        return self.quorum.addrs

    def start(self) -> "FailoverGroup":
        self.quorum.start()
        for b in self.brokers:
            b.start()
        self.wait_settled()
        return self

    def stop(self) -> None:
        for b in self.brokers:
            try:
                b.stop()
            except Exception:
                b.kill()
        self.quorum.stop()

    def __enter__(self) -> "FailoverGroup":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- views -----------------------------------------------------------------------------------
    @staticmethod
    def ha(node: RunningNode) -> dict[str, Any]:
        return http_json(f"{node.admin_url}/api/ha", timeout=2.0)

    def by_id(self, broker_id: int) -> RunningNode:
        return self.brokers[broker_id - 1]

    def master(self, skip: RunningNode | None = None) -> RunningNode | None:
        """The broker that acts as master with a valid lease right now, if exactly one does
        (``skip``: a broker not asked, e.g. a stopped one whose admin HTTP would only time out)."""
        found = []
        for b in self.brokers:
            if b is skip or not b.running():
                continue
            try:
                info = self.ha(b)
            except Exception:
                continue
            if info.get("brokerRole") != "SLAVE" and (info.get("lease") or {}).get("valid"):
                found.append(b)
        return found[0] if len(found) == 1 else None

    def wait_master(self, timeout: float = 60.0, not_: RunningNode | None = None) -> RunningNode:
        return wait_until(lambda: (lambda m: m if m is not None and m is not not_ else None)(self.master(skip=not_)),
                          timeout, 0.1, "a master elected by the controller")

    def wait_settled(self, timeout: float = 90.0, members: int | None = None) -> RunningNode:
        """A master, and every other running broker in its confirmed SyncStateSet."""
        want = members if members is not None else sum(1 for b in self.brokers if b.running())

        def settled() -> RunningNode | None:
            m = self.master()
            if m is None:
                return None
            info = self.ha(m)
            if len(info.get("syncStateSet", [])) != want - 1 or info.get("inSyncSlaves") != want - 1:
                return None
            # and Kafka clients see every member (the group view follows registrations)
            return m if len(kafka_brokers(m)) == want else None
        return wait_until(settled, timeout, 0.1, f"a master with {want - 1} slave(s) in its SyncStateSet")


def kafka_brokers(node: RunningNode) -> list[dict[str, Any]]:
    """The brokers ``node``'s Kafka Metadata lists."""
    from tests.gateway_kafka.kafka_helpers import RawKafka

    with RawKafka(node.kafka_bootstrap) as raw:
        return raw.request(3, 9, {"topics": [], "allow_auto_topic_creation": False,
                                  "include_cluster_authorized_operations": False,
                                  "include_topic_authorized_operations": False})["brokers"]
