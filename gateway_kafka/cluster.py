"""Who serves what: the broker nodes, partition leaders, replicas and in-sync replicas the gateway
reports to clients.

Metadata, FindCoordinator, DescribeCluster, CreateTopics and Fetch answer from a ``ClusterView``
rather than from the listener's own address, so no handler knows whether it runs on one node or
on a broker group. The view is data: ``GroupView`` values (a broker group's members, their Kafka
listeners, roles, the master's in-sync set) that the node builds from NameServer registrations
and hands to ``update``; until it has any, the node knows only itself (an all-in-one node is
exactly that: one broker that leads every partition and coordinates every group).

A broker group replicates its whole commitlog, so every partition of this node has the same
replicas: the group's members. The master leads, coordinates and is the controller; ``isr`` is
the master plus the slaves in sync — on the master from its engine's live view (what acks=all
waits for), elsewhere as the master last registered it. A member seen once stays a replica (an
absent one is listed offline), as Kafka lists assigned replicas whether or not they are alive.

Invariant: node ids are stable for the life of a process (Kafka clients cache them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass(frozen=True)
class BrokerNode:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True)
class GroupMember:
    broker_id: int  # RocketMQ brokerId: 0 = master
    node: BrokerNode  # its Kafka listener
    role: str = "ASYNC_MASTER"
    replica_id: int = -1  # its own broker id under a failover controller (it registers as 0 while it leads)


@dataclass(frozen=True)
class GroupView:
    """A broker group as the NameServer last reported it."""

    broker_name: str
    members: tuple[GroupMember, ...] = ()
    in_sync_broker_ids: tuple[int, ...] = ()  # the master's in-sync slaves
    master_epoch: int = 0  # the master's epoch as it registered it
    # topic -> Kafka partition id of each queue, as the master registered it (cluster.md)
    partitions: dict[str, tuple[int, ...]] = field(default_factory=dict, hash=False)
    # internal topic -> its partitions holding records on this group (coordinator placement)
    coordinator_partitions: dict[str, frozenset[int]] = field(default_factory=dict, hash=False)
    # topics whose queues on this group lost their write bit at the NameServer (wipeWritePerm)
    read_only_topics: frozenset[str] = frozenset()

    @property
    def master(self) -> GroupMember | None:
        return next((m for m in self.members if m.broker_id == 0), None)

    @property
    def read_leader(self) -> GroupMember | None:
        """Who Kafka clients are sent to for this group's partitions: the master; while the group
        has no master (down, before a failover), its live slave with the lowest broker id, which
        serves reads from its replica and refuses writes (cluster.md, "Groups down")."""
        return self.master or (self.members[0] if self.members else None)


@dataclass
class LocalReplication:
    """What the node's own engine says right now (for the group this node belongs to)."""

    is_master: Callable[[], bool] = lambda: True
    in_sync_broker_ids: Callable[[], list[int]] = lambda: []
    # a connected slave's Kafka node, from what it told the master (before the NameServer says)
    slave_nodes: Callable[[], dict[int, BrokerNode]] = lambda: {}
    # the leader epoch partitions report: the master epoch under a failover controller, else 0
    leader_epochs: bool = False
    master_epoch: Callable[[], int] = lambda: 0


class LocalCluster:
    """This node's view: itself, plus the members of its broker group once ``update`` named them."""

    def __init__(self, cluster_id: str, node_id: int, host: str, port: int, *, rack: str | None = None,
                 broker_name: str = "broker-a", broker_id: int = 0, local: LocalReplication | None = None):
        self.cluster_id = cluster_id
        self.self_node = BrokerNode(node_id, host, port, rack)
        self.broker_name = broker_name
        self.broker_id = broker_id
        self.local = local or LocalReplication()
        self.group = GroupView(broker_name, (GroupMember(broker_id, self.self_node),))
        self._seen: dict[int, BrokerNode] = {}  # node id -> node, every member ever reported
        self._reported = False  # the NameServer has listed this group (a slave knows its master is down)

    # -- updates from the node -------------------------------------------------------------------
    def update(self, groups: dict[str, GroupView]) -> None:
        view = groups.get(self.broker_name)
        if view is None:
            return
        # this node by its Kafka node id: in controller mode it registers under 0 while it leads
        members = [m for m in view.members if m.node.node_id != self.self_node.node_id]
        me = GroupMember(self.broker_id, self.self_node, "SLAVE" if not self.local.is_master() else "MASTER",
                         self.broker_id)
        self.group = GroupView(view.broker_name, tuple(sorted(members + [me], key=lambda m: m.broker_id)),
                               view.in_sync_broker_ids, view.master_epoch, view.partitions,
                               view.coordinator_partitions, view.read_only_topics)
        for m in self.group.members:
            self._seen[m.node.node_id] = m.node
        self._reported = True

    # -- roles ---------------------------------------------------------------------------------
    @property
    def is_master(self) -> bool:
        return self.local.is_master()

    def write_wiped(self, topic: str) -> bool:
        """The NameServer lists this group's queues of ``topic`` without the write bit
        (``mqadmin wipeWritePerm``): the group is being drained, its partitions take no writes."""
        return topic in self.group.read_only_topics

    def master_node(self) -> BrokerNode | None:
        if self.is_master:
            return self.self_node
        m = self.group.master
        return m.node if m is not None else None

    @property
    def controller_id(self) -> int:
        node = self.master_node()
        return node.node_id if node is not None else -1

    # -- answers -------------------------------------------------------------------------------
    def nodes(self) -> list[BrokerNode]:
        """Every broker a client may be sent to (a cluster view adds other groups')."""
        return self.group_nodes()

    def group_nodes(self) -> list[BrokerNode]:
        """The live members of this node's broker group."""
        out = {m.node.node_id: m.node for m in self.group.members}
        out[self.self_node.node_id] = self.self_node
        if self.is_master:
            for bid, node in self.local.slave_nodes().items():
                out.setdefault(node.node_id, node)
        return sorted(out.values(), key=lambda n: n.node_id)

    def read_leader_node(self) -> BrokerNode | None:
        """The master; while the group has none (as the NameServer lists it), its live slave with
        the lowest broker id — the same choice on every node (``GroupView.read_leader``)."""
        master = self.master_node()
        if master is not None or not self._reported:
            return master
        m = self.group.read_leader
        return m.node if m is not None else None

    def leads_reads(self) -> bool:
        """This node is the Kafka leader of its group's partitions (the master, or the slave
        standing in while the group has no master): it answers ListOffsets / OffsetForLeaderEpoch."""
        return self.read_leader_node() == self.self_node

    def leader(self, topic: str, partition: int) -> BrokerNode | None:
        return self.read_leader_node()

    def leader_epoch(self, topic: str, partition: int) -> int:
        """Kafka's leader epoch: the group's master epoch under a failover controller (it grows
        at every election, KIP-320), 0 otherwise (a group's leader never changes by itself)."""
        if not self.local.leader_epochs:
            return 0
        return self.local.master_epoch() if self.is_master else self.group.master_epoch

    def coordinator(self, key: str, key_type: int) -> BrokerNode | None:
        return self.master_node()

    def _node_of_broker(self, broker_id: int) -> BrokerNode | None:
        for m in self.group.members:
            if m.broker_id == broker_id:
                return m.node
        return self.local.slave_nodes().get(broker_id) if self.is_master else None

    def replicas(self, topic: str, partition: int) -> list[int]:
        master = self.master_node()
        ids = [n.node_id for n in self.group_nodes()]
        for nid in self._seen:
            if nid not in ids:
                ids.append(nid)
        if self.local.leader_epochs:
            # under a failover controller the order is the preference (Kafka's preferred replica
            # is the first): lowest node id first, wherever the master is
            return sorted(ids)
        if master is not None and master.node_id in ids:
            ids.remove(master.node_id)
            ids.insert(0, master.node_id)
        return ids

    def broker_id_of_node(self, node_id: int) -> int | None:
        """The replica's own broker id behind a Kafka node id (what a controller elects)."""
        if node_id == self.self_node.node_id:
            return self.broker_id
        for m in self.group.members:
            if m.node.node_id == node_id:
                return m.replica_id if m.replica_id >= 0 else m.broker_id
        return None

    def isr(self, topic: str, partition: int) -> list[int]:
        master = self.master_node()
        if master is None:
            stand_in = self.read_leader_node()
            return [stand_in.node_id] if stand_in is not None else []
        slave_ids = self.local.in_sync_broker_ids() if self.is_master else list(self.group.in_sync_broker_ids)
        out = [master.node_id]
        for bid in slave_ids:
            node = self._node_of_broker(bid)
            if node is not None and node.node_id not in out:
                out.append(node.node_id)
        return out

    def offline_replicas(self, topic: str, partition: int) -> list[int]:
        live = {n.node_id for n in self.group_nodes()}
        return [nid for nid in self.replicas(topic, partition) if nid not in live]

    def group_size(self) -> int:
        """Live members of this node's broker group (the most replicas a topic can have)."""
        return len(self.group_nodes())

    def preferred_read_replica(self, topic: str, partition: int, client_rack: str | None) -> int:
        """KIP-392: an in-sync replica in the client's rack (the leader when it is there), else -1."""
        if not client_rack or not self.is_master:
            return -1
        if self.self_node.rack == client_rack:
            return -1
        in_sync = set(self.isr(topic, partition))
        for node in self.group_nodes():
            if node.rack == client_rack and node.node_id in in_sync:
                return node.node_id
        return -1

    def describe(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "self": self.self_node.node_id,
                "members": [{"brokerId": m.broker_id, "nodeId": m.node.node_id, "host": m.node.host,
                             "port": m.node.port, "rack": m.node.rack, "role": m.role} for m in self.group.members]}


def group_views_from_cluster_info(info: dict[str, Any]) -> dict[str, GroupView]:
    """NameServer cluster info (with ``brokerExtraTable``) -> one ``GroupView`` per broker name.
    A broker that registered no Kafka listener is left out (it serves no Kafka client)."""
    extras = info.get("brokerExtraTable") or {}
    read_only = info.get("readOnlyTopicTable") or {}
    out: dict[str, GroupView] = {}
    for name, bd in (info.get("brokerAddrTable") or {}).items():
        members = []
        in_sync: tuple[int, ...] = ()
        partitions: dict[str, tuple[int, ...]] = {}
        coordinating: dict[str, frozenset[int]] = {}
        epoch = 0
        slave_epoch = 0
        for bid, addr in sorted((bd.get("brokerAddrs") or {}).items(), key=lambda kv: int(kv[0]), reverse=True):
            ex = extras.get(addr) or {}
            if int(bid) != 0:  # a slave's copy of the master epoch: the group's epoch while it has no master
                slave_epoch = max(slave_epoch, int(ex.get("masterEpoch") or 0))
            if "kafkaPartitions" in ex:  # the master's when it is registered (it comes last), else a slave's copy
                partitions = {str(t): tuple(int(i) for i in ids) for t, ids in ex["kafkaPartitions"].items()}
            host, port, node_id = ex.get("kafkaHost"), ex.get("kafkaPort"), ex.get("kafkaNodeId")
            if host is None or port is None or node_id is None:
                continue
            members.append(GroupMember(int(bid), BrokerNode(int(node_id), str(host), int(port), ex.get("brokerRack") or None),
                                       str(ex.get("brokerRole") or ""), int(ex.get("replicaId", bid))))
            if int(bid) == 0:
                in_sync = tuple(int(x) for x in ex.get("inSyncBrokerIds") or ())
                coordinating = {str(t): frozenset(int(i) for i in ids)
                                for t, ids in (ex.get("coordinatorPartitions") or {}).items()}
                epoch = int(ex.get("masterEpoch") or 0)
        if not any(m.broker_id == 0 for m in members):
            epoch = slave_epoch
        out[name] = GroupView(name, tuple(sorted(members, key=lambda m: m.broker_id)), in_sync, epoch, partitions,
                              coordinating, frozenset(str(t) for t in read_only.get(name) or ()))
    return out


__all__ = ["BrokerNode", "GroupMember", "GroupView", "LocalCluster", "LocalReplication",
           "group_views_from_cluster_info"]
