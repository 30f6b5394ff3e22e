"""Placing a topic's partitions on broker groups (Kafka CreateTopics / CreatePartitions over a
cluster, docs/design/cluster.md).

What it owns: the choice of groups and partition ids, and writing them where they are kept — each
group's topic table, attribute ``kafka.partition.ids`` — this node's through its store, another
group's through ``RemoteGroups`` (set by the node: RocketMQ's UPDATE_AND_CREATE_TOPIC to that
group's master, as ``mqadmin updateTopic -b`` sends it).

Rules:
- CreateTopics: the groups that have a master in the view (this one included), by broker name;
  each gets a contiguous block of ids, the first groups one more when the count does not divide
  (12 over 3: a 0-3, b 4-7, c 8-11), so native clients, which order queues by broker name then
  queue id, see the queues in partition order.
- CreatePartitions: each new id (the next free ones, ascending) goes to the group its
  assignment's first broker (the leader) belongs to, else to the group holding fewest
  partitions of the topic (ties: broker name).
- A topic on one group only (every single-group node) is written without the attribute, exactly
  as before: its queue ``q`` is partition ``q``.
- A name RocketMQ cannot carry (``^[%|a-zA-Z0-9_-]+$``: Kafka also allows ``.``) stays on this
  node's group: another group's master would refuse it (logged ``topic_kept_on_one_group``).
- Remote groups are written first, this node's last; when a remote write fails, what was created
  for a new topic is deleted again and the request answers the error, so a topic never exists
  with a hole in its partition ids.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Protocol

from engine.topic_config import TopicConfig
from gateway_kafka import error_codes as E
from gateway_kafka.cluster_view import PARTITION_IDS, format_partition_ids, local_partition_ids


class RemoteGroupError(Exception):
    """Another group's master refused or could not be reached."""


class RemoteGroups(Protocol):
    async def create_or_update_topic(self, broker_name: str, tc: TopicConfig) -> None: ...

    async def delete_topic(self, broker_name: str, topic: str) -> None: ...

    # optional: return once every node's view can list ``topic`` with the ids of ``placed``
    # (broker name -> all its ids of the topic); see ``_settle``
    # async def wait_visible(self, topic: str, placed: dict[str, list[int]]) -> None: ...


def spread(group_names: list[str], partitions: int) -> dict[str, list[int]]:
    """Contiguous blocks of ids over ``group_names`` in the given order."""
    out: dict[str, list[int]] = {}
    n = len(group_names)
    start = 0
    for i, name in enumerate(group_names):
        size = partitions // n + (1 if i < partitions % n else 0)
        if size:
            out[name] = list(range(start, start + size))
        start += size
    return out


_NATIVE_NAME = re.compile(r"^[%|a-zA-Z0-9_-]+$")


def writable_groups(gw: Any) -> list[str]:
    """This node's group and every other group with a master in the view, by broker name."""
    cluster = gw.cluster
    names = {cluster.broker_name}
    names.update(name for name, g in cluster.others.items() if g.master is not None)
    return sorted(names)


def with_ids(tc: TopicConfig, ids: list[int]) -> TopicConfig:
    return dataclasses.replace(tc, read_queue_nums=len(ids), write_queue_nums=len(ids),
                               attributes={**(tc.attributes or {}), PARTITION_IDS: format_partition_ids(ids)})


def _check_remote_configs(configs: dict[str, str]) -> str | None:
    bad = sorted(k for k, v in configs.items() if "," in (v or "") or "," in k)
    if bad:
        return (f"configs {bad} hold ',' which RocketMQ's topic attributes cannot carry to other broker groups; "
                "set them after creation with incremental-alter-configs on each group")
    return None


async def create_topic(gw: Any, tc: TopicConfig) -> tuple[int, str] | None:
    """Create ``tc`` (its queue count = the partition count) over the cluster; None, or the error
    code and message saying why it was not created."""
    groups = writable_groups(gw) if gw.remote_groups is not None else [gw.cluster.broker_name]
    if len(groups) > 1 and not _NATIVE_NAME.match(tc.topic_name):
        gw.log.warning("topic_kept_on_one_group", topic=tc.topic_name, reason="name has characters RocketMQ refuses")
        groups = [gw.cluster.broker_name]
    if len(groups) == 1:
        await _store_local(gw, tc)
        return None
    why = _check_remote_configs(tc.attributes or {})
    if why:
        return E.INVALID_CONFIG, why
    plan = spread(groups, tc.read_queue_nums)
    done: list[str] = []
    for name, ids in plan.items():
        if name == gw.cluster.broker_name:
            continue
        try:
            await gw.remote_groups.create_or_update_topic(name, with_ids(tc, ids))
        except RemoteGroupError as exc:
            for created in done:
                try:
                    await gw.remote_groups.delete_topic(created, tc.topic_name)
                except RemoteGroupError:
                    gw.log.error("topic_rollback_failed", topic=tc.topic_name, broker_name=created)
            return E.BROKER_NOT_AVAILABLE, f"broker group {name}: {exc}"
        gw.cluster.note_partitions(name, tc.topic_name, ids)
        done.append(name)
    own = plan.get(gw.cluster.broker_name)
    if own:
        await _store_local(gw, with_ids(tc, own))
    gw.log.info("topic_placed", topic=tc.topic_name, groups={k: len(v) for k, v in plan.items()})
    await _settle(gw, tc.topic_name, plan)
    return None


async def _settle(gw: Any, topic: str, placed: dict[str, list[int]]) -> None:
    """Answer CreateTopics / CreatePartitions once every group's registration shows its ids and
    every node had one view refresh since: a client that asks any node next (librdkafka asks any
    broker it knows, slaves included) sees every partition, never a part of the topic (a
    partition count that shrinks makes clients drop records as UNKNOWN_PARTITION). Bounded; a
    group that does not register in time only delays its partitions' visibility."""
    wait = getattr(gw.remote_groups, "wait_visible", None)
    if wait is not None:
        await wait(topic, placed)


def _counts(gw: Any, topic: str) -> dict[str, list[int]]:
    """Broker name -> the ids it holds of ``topic``, for every writable group."""
    out: dict[str, list[int]] = {name: [] for name in writable_groups(gw)}
    for pid, p in sorted(gw.cluster.placements(topic).items()):
        out.setdefault(p.broker_name, []).append(pid)
    return out


async def add_partitions(gw: Any, topic: str, count: int, leaders: list[int] | None) -> tuple[int, str] | None:
    """Grow ``topic`` to ``count`` partitions; ``leaders`` (node id per new partition, from the
    request's assignments) choose the groups, else the least loaded ones do."""
    cluster = gw.cluster
    held = _counts(gw, topic)
    existing = sorted(pid for ids in held.values() for pid in ids)
    next_id = (existing[-1] + 1) if existing else 0
    node_group = {}
    for name in held:
        view = cluster.group if name == cluster.broker_name else cluster.others.get(name)
        for m in view.members if view is not None else ():
            node_group[m.node.node_id] = name
    added: dict[str, list[int]] = {}
    spreads = gw.remote_groups is not None and _NATIVE_NAME.match(topic) is not None
    choices = [n for n in held if n == cluster.broker_name or spreads]
    for i in range(count - len(existing)):
        pid = next_id + i
        if leaders is not None:
            target = node_group.get(leaders[i])
            if target not in choices:
                return E.INVALID_REPLICA_ASSIGNMENT, f"broker {leaders[i]} is not a live member of any broker group"
        else:
            target = min(choices, key=lambda n: (len(held[n]), n))
        held[target].append(pid)
        added.setdefault(target, []).append(pid)
    for name, new_ids in sorted(added.items()):
        if name == cluster.broker_name:
            continue
        ids = held[name]
        base = gw.store.topic_config.get(topic) or TopicConfig(topic)
        try:
            await gw.remote_groups.create_or_update_topic(name, with_ids(dataclasses.replace(base, attributes={}), ids))
        except RemoteGroupError as exc:
            return E.BROKER_NOT_AVAILABLE, f"broker group {name}: {exc}"
        cluster.note_partitions(name, topic, ids)
    if cluster.broker_name in added:
        tc = gw.store.topic_config.get(topic)
        current = local_partition_ids(tc) if tc is not None else []
        if tc is not None and len(held) == 1 and PARTITION_IDS not in (tc.attributes or {}):
            # a one-group topic stays without ids: its queue q is partition q
            await _store_local(gw, dataclasses.replace(tc, read_queue_nums=count,
                                                       write_queue_nums=max(count, tc.write_queue_nums)))
        else:
            await _store_local(gw, with_ids(tc or TopicConfig(topic), current + added[cluster.broker_name]))
    gw.log.info("partitions_placed", topic=topic, partitions=count, groups={k: len(v) for k, v in added.items()})
    if spreads and len(held) > 1:
        await _settle(gw, topic, {name: ids for name, ids in held.items() if ids})
    return None


async def delete_topic(gw: Any, topic: str) -> tuple[int, str] | None:
    """Delete ``topic`` on every other group that holds Kafka partitions of it (this node's part
    is the caller's); None, or the error of the first group that could not delete it."""
    cluster = gw.cluster
    holders = sorted({p.broker_name for p in cluster.placements(topic).values()} - {cluster.broker_name})
    refused = None
    for name in holders:
        if gw.remote_groups is None:
            break
        try:
            await gw.remote_groups.delete_topic(name, topic)
            cluster.note_partitions(name, topic, None)
        except RemoteGroupError as exc:
            refused = refused or (E.BROKER_NOT_AVAILABLE, f"broker group {name}: {exc}")
    return refused


async def _store_local(gw: Any, tc: TopicConfig) -> None:
    from gateway_kafka.apis._common import blocking

    await blocking(gw.store.topic_config.create_or_update, tc)


__all__ = ["RemoteGroupError", "RemoteGroups", "add_partitions", "create_topic", "spread", "writable_groups"]
