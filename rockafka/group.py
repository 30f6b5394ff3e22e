"""The broker group seen from one node: what it registers beyond RocketMQ's fields, and the
Kafka gateway's cluster view refreshed from the NameServer.

Registration (``registration_extras``): the body's ``rockafka`` object carries this node's Kafka
listener (``kafkaNodeId``, ``kafkaHost``, ``kafkaPort``), ``brokerRack``, ``brokerRole``, on a
master the stored Kafka partition ids of its topics (``kafkaPartitions``) and the internal-topic
partitions its log holds records of (``coordinatorPartitions``, cluster.md) and its
replication state (a master's ``masterEpoch`` and ``inSyncBrokerIds``, each slave's lag). The
NameServer hands it back in GET_BROKER_CLUSTER_INFO (``brokerExtraTable``).

``GroupViewRefresher`` asks the NameServer for that every ``cluster_view_refresh_ms`` (1 s) and
gives the Kafka gateway ``GroupView`` values (``gateway_kafka.cluster``), so Metadata lists the
group's members and ISR from data, never from an assumption that one node exists. This module
is the only place that knows both gateways.
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog

log = structlog.get_logger("rockafka.group")


def _kafka_node(kafka: Any) -> dict[str, Any]:
    node = getattr(getattr(kafka, "cluster", None), "self_node", None)
    if node is None:
        return {}
    return {"kafkaNodeId": node.node_id, "kafkaHost": node.host, "kafkaPort": node.port}


def ha_identity(config: Any) -> dict[str, Any]:
    """What a slave tells its master about itself in the HA handshake (before listeners start)."""
    b = config.broker
    ident = {"brokerId": b.broker_id, "brokerName": b.broker_name, "clusterName": b.broker_cluster_name,
             "listenPort": b.listen_port}
    if b.broker_rack:
        ident["brokerRack"] = b.broker_rack
    return ident


def registration_extras(store: Any, config: Any, kafka: Any) -> dict[str, Any]:
    info = store.ha.runtime_info()
    out: dict[str, Any] = {"brokerRole": info["brokerRole"], "masterEpoch": info["masterEpoch"],
                           "replicaId": config.broker.broker_id, **_kafka_node(kafka)}
    rack = config.broker.broker_rack
    if rack:
        out["brokerRack"] = rack
    from gateway_kafka.cluster_view import coordinator_partitions, registered_partitions

    # a slave states them too (its topic table is the master's copy): while the master is down
    # the group's partitions stay in every node's view, leaderless (cluster.md)
    out["kafkaPartitions"] = registered_partitions(store.topic_config.all())
    if store.ha.is_master:
        if getattr(kafka, "cluster", None) is not None:
            out["coordinatorPartitions"] = coordinator_partitions(kafka.cluster)
        out["inSyncBrokerIds"] = sorted(s["brokerId"] for s in info.get("slaves", []) if s["inSync"])
        out["slaves"] = [{"brokerId": s["brokerId"], "lagBytes": s["lagBytes"], "lagMs": s["lagMs"],
                          "inSync": s["inSync"]} for s in info.get("slaves", [])]
    else:
        out["masterAddress"] = info.get("masterAddress")
        out["behindBytes"] = info.get("behindBytes")
        out["connected"] = info.get("connected")
    return out


class GroupViewRefresher:
    """Component: keeps the Kafka gateway's cluster view current from the NameServer."""

    name = "group_view"

    def __init__(self, broker: Any, kafka: Any, interval_ms: int):
        self.broker = broker
        self.kafka = kafka
        self.interval = max(interval_ms, 100) / 1000
        kafka.txn.needs_view = True  # markers wait for the view: which group holds a partition
        self._task: asyncio.Task[None] | None = None
        self.on_refresh: list = []  # called after each refresh (cluster_ops)

    async def start(self) -> None:
        # the Kafka listener is bound now: tell the master (HA handshake) and the NameServer
        self.broker.store.ha.identity.update(_kafka_node(self.kafka))
        self.broker.request_registration()
        await self.refresh()
        self._task = asyncio.ensure_future(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass

    async def refresh(self) -> None:
        from gateway_kafka.cluster import group_views_from_cluster_info

        info = await self.broker.cluster_info()
        if info is not None and self.kafka.cluster is not None:
            self.kafka.cluster.update(group_views_from_cluster_info(info))
        for hook in self.on_refresh:
            hook()

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.refresh()
            except Exception:
                log.exception("cluster_view_refresh_failed")


def ha_runtime_fields(info: dict[str, Any]) -> dict[str, str]:
    """Replication state as GET_BROKER_RUNTIME_INFO fields (mqadmin brokerStatus): the role, the
    master epoch and, on a master, its slaves' connections and lag; on a slave, its master and
    how far behind it is."""
    out = {"brokerRole": str(info["brokerRole"]), "masterEpoch": str(info["masterEpoch"])}
    if info["brokerRole"] == "SLAVE":
        out["masterAddr"] = str(info.get("masterAddress") or "")
        behind = info.get("behindBytes")
        out["slaveFallBehindMuch"] = str(behind if behind is not None else -1)
    else:
        slaves = info.get("slaves") or []
        out["haConnections"] = str(len(slaves))
        out["inSyncSlaveNums"] = str(info.get("inSyncSlaves", 0))
        out["haSlaveLagBytes"] = str(max((sl["lagBytes"] for sl in slaves), default=0))
    return out
