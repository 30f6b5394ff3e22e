"""The state of a KIP-848 consumer or share group as its coordinator keeps it and stores it: the
member and group records (``ModernMember``, ``ModernGroup``) and their codec to the
``__consumer_offsets`` group record (``records.MODERN_GROUP_KIND``).

Invariant: ``decode_group(encode_group(g))`` rebuilds everything a restart must keep (epochs,
assignments, subscriptions, static ids); timers and in-flight state are not part of a record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from gateway_kafka.protocol import records

CONSUMER, SHARE = 0, 1
GROUP_TYPE_NAMES = {CONSUMER: "consumer", SHARE: "share"}
# member states (Kafka's MemberState)
STABLE, UNREVOKED_PARTITIONS, UNRELEASED_PARTITIONS = 1, 2, 3
LEAVE_EPOCH, LEAVE_STATIC_EPOCH = -1, -2

Parts = dict[str, set[int]]  # topic name -> partitions


@dataclass
class ModernMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300_000
    server_assignor: str | None = None
    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: int = STABLE
    assigned: Parts = field(default_factory=dict)
    pending_revocation: Parts = field(default_factory=dict)
    classic_session_timeout_ms: int = -1          # >= 0: a classic member (JoinGroup/SyncGroup)
    classic_protocols: list[tuple[str, bytes]] | None = None

    @property
    def uses_classic(self) -> bool:
        return self.classic_protocols is not None


@dataclass
class ModernGroup:
    group_id: str
    group_type: int = CONSUMER
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor: str | None = None
    subscription_metadata: dict[str, int] = field(default_factory=dict)  # topic -> partitions
    members: dict[str, ModernMember] = field(default_factory=dict)
    target: dict[str, Parts] = field(default_factory=dict)               # member id -> target
    metadata_version: int = -1   # topic table version the subscription metadata was computed at

    def static_member(self, instance_id: str | None) -> ModernMember | None:
        if instance_id is None:
            return None
        for m in self.members.values():
            if m.instance_id == instance_id:
                return m
        return None

    def state_name(self) -> str:
        if not self.members:
            return "Empty"
        if self.group_type == SHARE:
            return "Stable"
        if self.assignment_epoch < self.group_epoch:
            return "Assigning"
        if any(m.member_epoch != self.assignment_epoch or m.state != STABLE
               for m in self.members.values() if m.member_epoch != LEAVE_STATIC_EPOCH):
            return "Reconciling"
        return "Stable"

    def owner_epoch(self, topic: str, partition: int, exclude: str) -> int:
        """The epoch of the member (other than ``exclude``) owning the partition, -1 if free."""
        for m in self.members.values():
            if m.member_id == exclude:
                continue
            if partition in m.assigned.get(topic, ()) or partition in m.pending_revocation.get(topic, ()):
                return m.member_epoch
        return -1


def _parts_list(parts: Parts) -> list[dict]:
    return [{"topic": t, "partitions": sorted(ps)} for t, ps in sorted(parts.items()) if ps]


def _parts_of(items: Iterable[dict] | None) -> Parts:
    return {d["topic"]: set(d["partitions"]) for d in items or () if d["partitions"]}


def encode_group(g: ModernGroup) -> bytes:
    return records.encode("ModernGroupValue", {
        "group_type": g.group_type, "group_epoch": g.group_epoch, "assignment_epoch": g.assignment_epoch,
        "assignor": g.assignor,
        "subscription_metadata": [{"topic": t, "partitions": n} for t, n in sorted(g.subscription_metadata.items())],
        "members": [{
            "member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id, "client_id": m.client_id,
            "client_host": m.client_host, "rebalance_timeout_ms": m.rebalance_timeout_ms,
            "server_assignor": m.server_assignor, "subscribed_topic_names": list(m.subscribed_topic_names),
            "subscribed_topic_regex": m.subscribed_topic_regex, "member_epoch": m.member_epoch,
            "previous_member_epoch": m.previous_member_epoch, "state": m.state,
            "assigned": _parts_list(m.assigned), "pending_revocation": _parts_list(m.pending_revocation),
            "target": _parts_list(g.target.get(m.member_id, {})),
            "classic_session_timeout_ms": m.classic_session_timeout_ms,
            "classic_protocols": None if m.classic_protocols is None else
            [{"name": n, "metadata": meta} for n, meta in m.classic_protocols],
        } for m in g.members.values()]})


def decode_group(group_id: str, value: bytes) -> ModernGroup:
    d = records.decode("ModernGroupValue", value)
    g = ModernGroup(group_id, d["group_type"], d["group_epoch"], d["assignment_epoch"], d["assignor"],
                    {s["topic"]: s["partitions"] for s in d["subscription_metadata"]})
    for m in d["members"]:
        member = ModernMember(
            m["member_id"], m["instance_id"], m["rack_id"], m["client_id"], m["client_host"],
            m["rebalance_timeout_ms"], m["server_assignor"], list(m["subscribed_topic_names"]),
            m["subscribed_topic_regex"], m["member_epoch"], m["previous_member_epoch"], m["state"],
            _parts_of(m["assigned"]), _parts_of(m["pending_revocation"]), m["classic_session_timeout_ms"],
            None if m["classic_protocols"] is None else
            [(p["name"], bytes(p["metadata"])) for p in m["classic_protocols"]])
        g.members[member.member_id] = member
        g.target[member.member_id] = _parts_of(m["target"])
    return g
