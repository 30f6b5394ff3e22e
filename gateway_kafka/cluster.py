"""Who serves what: the broker nodes and partition leaders the gateway reports to clients.

Metadata, FindCoordinator and DescribeCluster answer from a ``ClusterView`` rather than from
the listener's own address, so a multi-broker deployment can report several nodes and
per-partition leaders without touching the API handlers. ``LocalCluster`` is the all-in-one
node: one broker that leads every partition and coordinates every group.

Invariant: node ids are stable for the life of a process (Kafka clients cache them).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BrokerNode:
    node_id: int
    host: str
    port: int
    rack: str | None = None


class LocalCluster:
    """A single node: leader of every partition, coordinator of every group."""

    def __init__(self, cluster_id: str, node_id: int, host: str, port: int):
        self.cluster_id = cluster_id
        self.self_node = BrokerNode(node_id, host, port)

    @property
    def controller_id(self) -> int:
        return self.self_node.node_id

    def nodes(self) -> list[BrokerNode]:
        return [self.self_node]

    def leader(self, topic: str, partition: int) -> BrokerNode:
        return self.self_node

    def replicas(self, topic: str, partition: int) -> list[int]:
        return [self.self_node.node_id]

    def coordinator(self, key: str, key_type: int) -> BrokerNode:
        return self.self_node
