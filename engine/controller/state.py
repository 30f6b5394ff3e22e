"""The controller's decisions as a pure state machine (RocketMQ 5's ``ReplicasInfoManager``).

No I/O, no clock, no threads: ``ControllerState.apply(command) -> result`` is deterministic given
the state, so every controller replica that applies the same commands in the same order (the
consensus log, ``engine.controller.raft``) holds the same state. Commands and results are plain
dicts (JSON-able). Heartbeats are not commands: liveness is the leader's local knowledge and
enters the state only through the ``alive`` map an ``elect`` command carries.

Per broker group (``GroupState``): the members that ever registered, the master's broker id,
``masterEpoch`` (one more at every election, the epoch the master writes under) and the
SyncStateSet with its own epoch.

Invariants:
- ``masterEpoch`` and ``syncStateSetEpoch`` never decrease;
- the master (when there is one) is a member of the SyncStateSet;
- an election picks a member of the SyncStateSet, except a group's first election (no set yet)
  and an explicitly allowed unclean one, whose result says ``unclean: true``;
- only the current master, naming the current epochs, changes the SyncStateSet.

Commands (``op``):
- ``register``: ``group``, ``cluster``, ``brokerId``, ``brokerAddress``, ``haAddress``, ``extra``
  (``extra.incarnation``: the broker process's start time; the master registering with a new
  one restarted, and the group has no master until the next election)
- ``elect``: ``group``, ``alive`` ({brokerId: {"epoch", "maxOffset"}}), ``designated`` (broker
  id or None), ``unclean`` (bool), ``reason`` (text for the event)
- ``alter_sync_state_set``: ``group``, ``masterBrokerId``, ``masterEpoch``,
  ``syncStateSetEpoch``, ``syncStateSet`` (list of broker ids)
- ``clean``: ``group``, ``brokerIds`` (list, or None for the whole group) — an operator's
  ``cleanBrokerMetadata``: forget those members (a removed master leaves the group without one;
  the last member removed removes the group). Whether they are alive is the caller's check.
- ``leader``: ``peer``, ``address``, ``term`` — a controller that became leader says where it
  answers requests, so followers can send brokers there

Results: ``{"ok": True, ...}`` or ``{"ok": False, "code": <name>, "error": <text>}`` with codes
``NO_SUCH_GROUP``, ``NOT_ELECTED`` (no candidate), ``NOT_CANDIDATE`` (a designated broker that
may not lead), ``FENCED`` (stale master or epochs), ``INVALID`` (malformed command).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class GroupState:
    cluster: str
    broker_name: str
    replicas: dict[int, dict[str, Any]] = field(default_factory=dict)  # broker id -> addresses
    master_broker_id: int = -1
    master_epoch: int = 0
    sync_state_set: set[int] = field(default_factory=set)
    sync_state_set_epoch: int = 0

    def view(self) -> dict[str, Any]:
        master = self.replicas.get(self.master_broker_id, {}) if self.master_broker_id >= 0 else {}
        return {"clusterName": self.cluster, "brokerName": self.broker_name,
                "masterBrokerId": self.master_broker_id, "masterAddress": master.get("brokerAddress"),
                "masterHaAddress": master.get("haAddress"), "masterEpoch": self.master_epoch,
                "syncStateSet": sorted(self.sync_state_set), "syncStateSetEpoch": self.sync_state_set_epoch,
                "replicas": {str(k): dict(v) for k, v in sorted(self.replicas.items())}}


def _fail(code: str, error: str) -> dict[str, Any]:
    return {"ok": False, "code": code, "error": error}


class ControllerState:
    def __init__(self) -> None:
        self.groups: dict[str, GroupState] = {}
        self.applied = 0  # commands applied (for operations)
        self.leader: dict[str, Any] = {}  # the last controller leader that announced itself

    # -- the one entry point ---------------------------------------------------------------------
    def apply(self, cmd: dict[str, Any]) -> dict[str, Any]:
        self.applied += 1
        op = cmd.get("op") if isinstance(cmd, dict) else None
        handler = _OPS.get(op) if isinstance(op, str) else None
        if handler is None:
            return _fail("INVALID", f"unknown controller command {op!r}")
        try:
            return handler(self, cmd)
        except (KeyError, TypeError, ValueError) as exc:
            return _fail("INVALID", f"malformed {op} command: {exc}")

    def _clean(self, cmd: dict[str, Any]) -> dict[str, Any]:
        name = str(cmd["group"])
        g = self.groups.get(name)
        if g is None:
            return _fail("NO_SUCH_GROUP", f"Broker {name} is not existed,clean broker data failure.")
        ids = cmd.get("brokerIds")
        if ids is None:
            del self.groups[name]
            return {"ok": True, "removed": True}
        for bid in (int(b) for b in ids):
            g.replicas.pop(bid, None)
            g.sync_state_set.discard(bid)
            if bid == g.master_broker_id:
                g.master_broker_id = -1
        if not g.replicas:
            del self.groups[name]
            return {"ok": True, "removed": True}
        return {"ok": True, "removed": False, "group": g.view()}

    # -- queries -----------------------------------------------------------------------------------
    def group(self, name: str) -> GroupState | None:
        return self.groups.get(name)

    def view(self) -> dict[str, Any]:
        return {name: g.view() for name, g in sorted(self.groups.items())}

    # -- commands ----------------------------------------------------------------------------------
    def _register(self, cmd: dict[str, Any]) -> dict[str, Any]:
        name = str(cmd["group"])
        bid = int(cmd["brokerId"])
        if bid < 0:
            return _fail("INVALID", f"broker id must be >= 0, got {bid}")
        g = self.groups.get(name)
        if g is None:
            g = self.groups[name] = GroupState(str(cmd.get("cluster") or "DefaultCluster"), name)
        info = {"brokerAddress": cmd.get("brokerAddress"), "haAddress": cmd.get("haAddress")}
        info.update(cmd.get("extra") or {})
        before = g.replicas.get(bid, {}).get("incarnation")
        g.replicas[bid] = info
        restarted = (bid == g.master_broker_id and before is not None
                     and info.get("incarnation") is not None and info["incarnation"] != before)
        if restarted:
            # the master came back before anyone replaced it: its log may have lost a tail the
            # slaves hold, so it may not simply go on in its epoch; the next election (from the
            # SyncStateSet, ranked by log end) opens a new one
            g.master_broker_id = -1
        return {"ok": True, "group": g.view(), "masterRestarted": restarted}

    def _elect(self, cmd: dict[str, Any]) -> dict[str, Any]:
        name = str(cmd["group"])
        g = self.groups.get(name)
        if g is None:
            return _fail("NO_SUCH_GROUP", f"no broker of group {name} has registered")
        alive = {int(k): v for k, v in (cmd.get("alive") or {}).items() if int(k) in g.replicas}
        designated = cmd.get("designated")
        unclean_allowed = bool(cmd.get("unclean"))
        old = g.master_broker_id
        first = g.master_epoch == 0
        if designated is not None:
            designated = int(designated)
            if designated == old:
                return {"ok": True, "changed": False, "group": g.view(), "unclean": False}
            if designated not in alive:
                return _fail("NOT_CANDIDATE", f"broker {designated} of {name} is not alive")
            if not first and designated not in g.sync_state_set and not unclean_allowed:
                return _fail("NOT_CANDIDATE", f"broker {designated} of {name} is not in the SyncStateSet "
                                              f"{sorted(g.sync_state_set)}: electing it could lose acknowledged messages")
            candidates = [designated]
        elif first:
            candidates = list(alive)
        else:
            candidates = [b for b in alive if b in g.sync_state_set and b != old]
        unclean = False
        if not candidates and not first and unclean_allowed:
            candidates = [b for b in alive if b != old]
            unclean = bool(candidates)
        elif designated is not None and not first and designated not in g.sync_state_set:
            unclean = True
        if not candidates:
            return _fail("NOT_ELECTED", f"no alive member of {name}'s SyncStateSet {sorted(g.sync_state_set)} "
                                        f"(alive: {sorted(alive)})" + ("" if unclean_allowed else
                                                                       "; unclean election is off"))

        def rank(b: int) -> tuple:
            info = alive.get(b) or {}
            return (-int(info.get("epoch", 0)), -int(info.get("maxOffset", 0)), b)

        new = sorted(candidates, key=rank)[0]
        g.master_broker_id = new
        g.master_epoch += 1
        if first or unclean:
            g.sync_state_set = {new}
        else:
            g.sync_state_set = (g.sync_state_set | {new}) - ({old} if old >= 0 and old != new else set())
        g.sync_state_set_epoch += 1
        return {"ok": True, "changed": True, "oldMaster": old, "unclean": unclean, "group": g.view(),
                "reason": cmd.get("reason") or ""}

    def _leader(self, cmd: dict[str, Any]) -> dict[str, Any]:
        term = int(cmd["term"])
        if term < int(self.leader.get("term", -1)):
            return _fail("FENCED", f"term {term} is older than {self.leader.get('term')}")
        self.leader = {"peer": str(cmd["peer"]), "address": str(cmd["address"]), "term": term}
        return {"ok": True, "leader": dict(self.leader)}

    def _alter_sync_state_set(self, cmd: dict[str, Any]) -> dict[str, Any]:
        name = str(cmd["group"])
        g = self.groups.get(name)
        if g is None:
            return _fail("NO_SUCH_GROUP", f"no broker of group {name} has registered")
        master, epoch, sss_epoch = int(cmd["masterBrokerId"]), int(cmd["masterEpoch"]), int(cmd["syncStateSetEpoch"])
        if master != g.master_broker_id or epoch != g.master_epoch:
            return _fail("FENCED", f"broker {master} at epoch {epoch} is not the master of {name} "
                                   f"(master {g.master_broker_id}, epoch {g.master_epoch})")
        if sss_epoch != g.sync_state_set_epoch:
            return _fail("FENCED", f"SyncStateSet epoch {sss_epoch} is stale (now {g.sync_state_set_epoch})")
        new = {int(b) for b in cmd["syncStateSet"]}
        if master not in new:
            return _fail("INVALID", f"the SyncStateSet must contain the master {master}")
        unknown = new - set(g.replicas)
        if unknown:
            return _fail("INVALID", f"brokers {sorted(unknown)} never registered in {name}")
        if new == g.sync_state_set:
            return {"ok": True, "changed": False, "group": g.view()}
        before = sorted(g.sync_state_set)
        g.sync_state_set = new
        g.sync_state_set_epoch += 1
        return {"ok": True, "changed": True, "before": before, "group": g.view()}


_OPS = {"register": ControllerState._register, "elect": ControllerState._elect, "leader": ControllerState._leader,
        "alter_sync_state_set": ControllerState._alter_sync_state_set, "clean": ControllerState._clean}
