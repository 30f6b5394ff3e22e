"""The Kafka view of a cluster of broker groups: which group owns each partition, and the brokers,
leaders and replicas of every group (docs/design/cluster.md).

Owns the partition map. Each group stores, per topic, the Kafka partition id of each of its
queues in the topic attribute ``kafka.partition.ids`` (``PARTITION_IDS``); a topic without it
numbers its queues as partitions ``0..n-1`` (exact for a topic on one group). This node's own
ids come from its own topic table (fresh the moment a topic is created); other groups' ids come
from what their masters registered (``GroupView.partitions``).

Invariants:
- a partition id is never derived from registration or start order: only stored ids are read;
- one owner per (topic, partition id): on a conflict the first group by broker name keeps it
  (logged once), so the view never flips between two owners;
- one node per node id, likewise;
- the store is always addressed with the local queue id (``local_queue``); partition ids exist
  only on the wire.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, replace
from typing import Any, Callable

import structlog

from gateway_kafka.cluster import BrokerNode, GroupView, LocalCluster

log = structlog.get_logger("rockafka.kafka.cluster_view")

PARTITION_IDS = "kafka.partition.ids"


def parse_partition_ids(raw: str) -> list[int]:
    """``"4;5;6"`` -> [4, 5, 6] (``,`` is read too); ValueError for anything else (negative,
    repeated, not a number). ``;`` because RocketMQ's attribute syntax separates attributes by
    ``,`` (``updateTopic -a +kafka.partition.ids=4;5;6``)."""
    ids = [int(p) for p in raw.replace(",", ";").split(";") if p.strip()]
    if any(i < 0 for i in ids) or len(set(ids)) != len(ids):
        raise ValueError(f"{PARTITION_IDS}={raw!r}: distinct non-negative partition ids expected")
    return ids


def format_partition_ids(ids: list[int]) -> str:
    return ";".join(str(i) for i in ids)


def local_partition_ids(tc: Any) -> list[int]:
    """The partition id of each local queue of topic config ``tc`` (index = queue id)."""
    raw = (tc.attributes or {}).get(PARTITION_IDS)
    if raw:
        try:
            ids = parse_partition_ids(raw)
        except ValueError:
            ids = []
        if len(ids) >= tc.read_queue_nums:
            return ids[:tc.read_queue_nums]
        # fewer ids than queues: the extra queues (added natively) have no partition id yet
        return ids
    return list(range(tc.read_queue_nums))


def registered_partitions(topics: dict[str, Any]) -> dict[str, list[int]]:
    """What a master registers: the stored ids of each topic that carries them."""
    return {name: local_partition_ids(tc) for name, tc in topics.items()
            if (tc.attributes or {}).get(PARTITION_IDS)}


def coordinator_partitions(cluster: Any) -> dict[str, list[int]]:
    """What a master registers for coordinator placement: per internal topic, the partitions
    this group's coordinators hold state in."""
    from engine.state_log import CONSUMER_OFFSETS, TRANSACTION_STATE

    return {t: sorted(cluster.local_coordinator_partitions(t)) for t in (CONSUMER_OFFSETS, TRANSACTION_STATE)}


@dataclass(frozen=True)
class Placement:
    broker_name: str
    queue_id: int


class ClusterView(LocalCluster):
    """This node's group (``LocalCluster``) plus every other group the NameServer reported."""

    def __init__(self, *args: Any, local_topics: Callable[[], dict[str, Any]] = dict,
                 local_topic: Callable[[str], Any] = lambda name: None,
                 coordinator_partition: Callable[[str, int], tuple[str, int] | None] = lambda key, key_type: None,
                 local_coordinator_partitions: Callable[[str], set[int]] = lambda topic: set(), **kwargs: Any):
        super().__init__(*args, **kwargs)
        # (internal topic, partition) of a group id (key type 0) / transactional id (1)
        self.coordinator_partition = coordinator_partition
        # partitions of an internal topic that hold records on this node's group
        self.local_coordinator_partitions = local_coordinator_partitions
        self.local_topics = local_topics  # this node's topic table
        self.local_topic = local_topic  # one entry of it
        self.others: dict[str, GroupView] = {}  # other groups, by broker name
        self.gone: set[str] = set()  # groups of ``others`` the NameServer no longer lists
        self._generation = 0  # bumped by every update: cached placements are of one generation
        self.synced = False  # True once the NameServer's view arrived (other groups are known)
        self._cache: dict[str, tuple[Any, dict[int, Placement]]] = {}
        self._conflicts: set[tuple[str, int]] = set()
        # ids this node just wrote to another group, until that group's registration shows them
        self._pending: dict[tuple[str, str], tuple[int, ...] | None] = {}
        self._seen_of: dict[str, set[int]] = {}  # other group -> node ids of every member it reported

    def note_partitions(self, broker_name: str, topic: str, ids: list[int] | None) -> None:
        """This node stored ``ids`` of ``topic`` on group ``broker_name`` (None: deleted it there,
        topic_placement): serve that now rather than after that group's next registration
        reaches the NameServer."""
        self._pending[(broker_name, topic)] = tuple(ids) if ids is not None else None
        self._generation += 1

    def update(self, groups: dict[str, GroupView]) -> None:
        before = self.group.partitions
        super().update(groups)
        self.synced = True
        if self.group.partitions != before:  # this group's registered ids (a slave's fallback)
            self._generation += 1
        others = {name: g for name, g in groups.items() if name != self.broker_name}
        # a group that left the NameServer (stopped, expired) still owns its partitions: they stay
        # listed, leaderless, with its last members as offline replicas, until it returns
        self.gone = {name for name in self.others if name not in others} | {
            name for name in self.gone if name not in others}
        for name in self.gone:
            others[name] = self.others[name]
        for name, g in list(others.items()):
            old = self.others.get(name)
            if g.master is None and old is not None and old.coordinator_partitions and not g.coordinator_partitions:
                # its master is down: the coordinator state it held stays its own (those groups
                # answer COORDINATOR_NOT_AVAILABLE until it returns), never restarts elsewhere
                others[name] = replace(g, coordinator_partitions=old.coordinator_partitions)
        for name, g in others.items():
            self._seen_of.setdefault(name, set()).update(m.node.node_id for m in g.members)
        for (name, topic), ids in list(self._pending.items()):
            g = others.get(name)
            registered = (g.partitions or {}).get(topic) if g is not None else None
            if g is not None and (tuple(registered) if registered is not None else None) == ids:
                del self._pending[(name, topic)]
        if others != self.others:
            self.others = others
            self._generation += 1

    # -- the partition map -------------------------------------------------------------------
    def _group_ids(self, topic: str) -> list[tuple[str, list[int]]]:
        """(broker name, ids by local queue) for every group holding ``topic``, by broker name."""
        out = []
        tc = self.local_topic(topic)
        if tc is not None:
            out.append((self.broker_name, local_partition_ids(tc)))
        elif (self.group.partitions or {}).get(topic) is not None:
            # a slave whose copy of the topic table does not have the topic yet: the ids its
            # master registered (so it lists them as soon as the other nodes do)
            out.append((self.broker_name, list(self.group.partitions[topic])))
        for name, g in self.others.items():
            key = (name, topic)
            ids = self._pending[key] if key in self._pending else (g.partitions or {}).get(topic)
            if ids is not None:
                out.append((name, list(ids)))
        return sorted(out)

    def placements(self, topic: str) -> dict[int, Placement]:
        """Partition id -> where it lives, for every partition of ``topic`` known to the view."""
        tc = self.local_topic(topic)
        key = (self._generation, None if tc is None else (tc.read_queue_nums, (tc.attributes or {}).get(PARTITION_IDS)))
        hit = self._cache.get(topic)
        if hit is not None and hit[0] == key:
            return hit[1]
        out = self._placements(topic)
        if len(self._cache) > 100_000:
            self._cache.clear()
        self._cache[topic] = (key, out)
        return out

    def _placements(self, topic: str) -> dict[int, Placement]:
        out: dict[int, Placement] = {}
        for name, ids in self._group_ids(topic):
            for queue, pid in enumerate(ids):
                if pid in out:
                    if (topic, pid) not in self._conflicts:
                        self._conflicts.add((topic, pid))
                        log.error("partition_id_conflict", topic=topic, partition=pid, kept=out[pid].broker_name,
                                  ignored=name)
                    continue
                out[pid] = Placement(name, queue)
        return out

    def partition_ids(self, topic: str) -> list[int]:
        return sorted(self.placements(topic))

    def topic_names(self) -> set[str]:
        """Every topic this node holds or another group registered Kafka partition ids for."""
        names = set(self.local_topics()) | set(self.group.partitions or {})
        for name, g in self.others.items():
            for topic, ids in (g.partitions or {}).items():
                if self._pending.get((name, topic), ids) is not None:
                    names.add(topic)
        names.update(topic for (name, topic), ids in self._pending.items() if ids is not None and name in self.others)
        return names

    def owner(self, topic: str, partition: int) -> str | None:
        p = self.placements(topic).get(partition)
        return p.broker_name if p is not None else None

    def local_queue(self, topic: str, partition: int) -> int | None:
        """The local queue id of ``partition`` when this node's group owns it, else None."""
        p = self.placements(topic).get(partition)
        return p.queue_id if p is not None and p.broker_name == self.broker_name else None

    def partition_of_queue(self, topic: str, queue: int) -> int:
        """The partition id of a local queue (the queue id itself when the topic has no ids)."""
        tc = self.local_topic(topic)
        ids = local_partition_ids(tc) if tc is not None else []
        return ids[queue] if 0 <= queue < len(ids) else queue

    def _group(self, topic: str, partition: int) -> GroupView | None | bool:
        """The other group owning the partition; True when it is this node's group; None if nobody."""
        owner = self.owner(topic, partition)
        if owner is None:
            return None
        if owner == self.broker_name:
            return True
        return self.others.get(owner)

    # -- answers -------------------------------------------------------------------------------
    def nodes(self) -> list[BrokerNode]:
        out = {n.node_id: n for n in super().nodes()}
        for name in sorted(set(self.others) - self.gone):
            for m in self.others[name].members:
                if m.node.node_id in out and out[m.node.node_id] != m.node:
                    if ("node", m.node.node_id) not in self._conflicts:
                        self._conflicts.add(("node", m.node.node_id))
                        log.error("kafka_node_id_conflict", node_id=m.node.node_id, broker_name=name)
                    continue
                out[m.node.node_id] = m.node
        return sorted(out.values(), key=lambda n: n.node_id)

    def leader(self, topic: str, partition: int) -> BrokerNode | None:
        g = self._group(topic, partition)
        if g is True or (g is None and topic not in self.topic_names()):
            return super().leader(topic, partition)
        if not g or g.broker_name in self.gone:
            return None
        m = g.read_leader  # the master; a slave standing in while the group has none
        return m.node if m is not None else None

    def leader_epoch(self, topic: str, partition: int) -> int:
        g = self._group(topic, partition)
        if g is True or not g:
            return super().leader_epoch(topic, partition)
        return g.master_epoch if self.local.leader_epochs else 0

    def replicas(self, topic: str, partition: int) -> list[int]:
        g = self._group(topic, partition)
        if g is True or not g:
            return super().replicas(topic, partition)
        if self.local.leader_epochs:
            # under a failover controller the order is the preference and the same on every node
            # (Kafka's preferred replica is the first): lowest node id first, every member this
            # node saw, as LocalCluster.replicas orders this node's own group; never the
            # registration order, which puts whoever registers as master (brokerId 0) first
            return sorted({m.node.node_id for m in g.members} | self._seen_of.get(g.broker_name, set()))
        return [m.node.node_id for m in g.members]  # sorted by brokerId: the master first

    def isr(self, topic: str, partition: int) -> list[int]:
        g = self._group(topic, partition)
        if g is True or not g:
            return super().isr(topic, partition)
        if g.broker_name in self.gone:
            return []
        if g.master is None:
            return [g.read_leader.node.node_id] if g.read_leader is not None else []
        by_id = {m.broker_id: m.node.node_id for m in g.members}
        return [g.master.node.node_id] + [by_id[b] for b in g.in_sync_broker_ids if b in by_id and b != 0]

    def offline_replicas(self, topic: str, partition: int) -> list[int]:
        g = self._group(topic, partition)
        if g is True or not g:
            return super().offline_replicas(topic, partition)
        if g.broker_name in self.gone:
            return self.replicas(topic, partition)
        live = {m.node.node_id for m in g.members}
        return [nid for nid in self.replicas(topic, partition) if nid not in live]

    def live_groups(self) -> list[str]:
        """The groups with a master in this view, by broker name (never empty: this node's own
        group when no other is known)."""
        # this node's group counts when it has a master (a slave whose master is down answers as
        # every other node does, which no longer counts that group)
        mine = {self.broker_name} if self.master_node() is not None or not self._reported else set()
        return sorted(mine | {name for name, g in self.others.items()
                              if g.master is not None and name not in self.gone}) or [self.broker_name]

    def auto_create_group(self, topic: str) -> str:
        """The one group that auto-creates ``topic`` (Kafka Metadata with auto-creation): live group
        ``crc32(topic) % n``. Every node asked for a new name sends the creation there, so two
        groups asked at once never each create a copy of partition 0 (docs/design/cluster.md)."""
        live = self.live_groups()
        return live[zlib.crc32(topic.encode()) % len(live)]

    # -- coordinators ----------------------------------------------------------------------------
    def coordinator_owner(self, topic: str, partition: int) -> str:
        """The group owning ``partition`` of internal topic ``topic``: live group ``partition % n``
        (by broker name) when it holds coordinator state of that partition or nobody does; else
        the first group (by name) that holds some — state never moves away from its log, also
        when groups come and go."""
        live = self.live_groups()
        rule = live[partition % len(live)]
        holders = [self.broker_name] if partition in self.local_coordinator_partitions(topic) else []
        holders += [name for name, g in self.others.items() if partition in (g.coordinator_partitions or {}).get(topic, ())]
        return rule if not holders or rule in holders else min(holders)

    def coordinator(self, key: str, key_type: int) -> BrokerNode | None:
        where = self.coordinator_partition(key, key_type) if self.others else None
        if where is None:
            return super().coordinator(key, key_type)
        owner = self.coordinator_owner(*where)
        if owner == self.broker_name:
            return super().coordinator(key, key_type)
        g = self.others.get(owner)
        if g is None or g.master is None or owner in self.gone:
            return None
        return g.master.node

    def describe(self) -> dict[str, Any]:
        out = super().describe()
        out["groups"] = {name: [{"brokerId": m.broker_id, "nodeId": m.node.node_id, "host": m.node.host,
                                 "port": m.node.port, "role": m.role} for m in g.members]
                         for name, g in sorted(self.others.items())}
        return out


__all__ = ["ClusterView", "PARTITION_IDS", "Placement", "format_partition_ids", "local_partition_ids",
           "parse_partition_ids", "registered_partitions"]
