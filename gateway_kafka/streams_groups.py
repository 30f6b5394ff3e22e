"""Group coordinator of KIP-1071 streams groups (StreamsGroupHeartbeat / StreamsGroupDescribe).
See docs/design/streams-groups.md.

A Kafka Streams client (``group.protocol=streams``) joins with epoch 0 and its topology:
subtopologies with their source topics, the repartition topics they read and write and their
state changelog topics. The coordinator here:

- keeps the group's topology (the first member's, replaced by a higher topology epoch);
- creates missing internal topics (repartition and changelog) with the partition counts the
  topology implies (a changelog topic has as many partitions as its subtopology has tasks) and
  the topic configs the client sent; a missing source topic is reported in the heartbeat's
  status (MISSING_SOURCE_TOPICS) and no task is assigned until it exists;
- assigns active tasks (subtopology id, partition) to members with a sticky, balanced
  assignor (a member keeps its tasks while that stays balanced; new or freed tasks go to the
  least loaded member);
- reconciles like Kafka's streams CurrentAssignmentBuilder: a member gives up the tasks the
  new target takes from it (the heartbeat answers with the reduced task set at its current
  epoch) before it moves to the target epoch, and a task is handed to its new owner only once
  the previous owner stopped reporting it; so no task is active on two members at once.

Persistence: the whole group is one record of ``__consumer_offsets`` (the group's partition,
key version ``records.STREAMS_GROUP_KIND``, a JSON value), appended before anything the change
implies is answered; a refused store answers COORDINATOR_NOT_AVAILABLE and puts the group back
as its last record says. After a restart groups come back with their topology, epochs and
assignments; members keep heartbeating without a rebalance.

Invariants: methods run on the event loop thread; each group's changes are serialised by the
group's asyncio lock.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

import structlog

from engine.consumer_offset import is_reserved_group
from gateway_kafka import error_codes as E
from gateway_kafka.group_skeleton import GroupError, RecordGroupCoordinator
from gateway_kafka.protocol import records

log = structlog.get_logger("rockafka.kafka.streams_groups")

STABLE, UNREVOKED_TASKS, UNRELEASED_TASKS = 1, 2, 3
LEAVE_EPOCH, LEAVE_STATIC_EPOCH = -1, -2
# StreamsGroupHeartbeatResponse status codes
STALE_TOPOLOGY, MISSING_SOURCE_TOPICS, INCORRECTLY_PARTITIONED_TOPICS, MISSING_INTERNAL_TOPICS, \
    SHUTDOWN_APPLICATION = 0, 1, 2, 3, 4

Tasks = dict[str, set[int]]  # subtopology id -> partitions


StreamsGroupError = GroupError  # a refused request: a Kafka error code and a message


@dataclass
class StreamsMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300_000
    topology_epoch: int = 0
    process_id: str = ""
    user_endpoint: dict | None = None
    client_tags: dict[str, str] = field(default_factory=dict)
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: int = STABLE
    assigned: Tasks = field(default_factory=dict)
    pending_revocation: Tasks = field(default_factory=dict)
    owned: Tasks = field(default_factory=dict)      # as the member last reported
    last_sent: Tasks | None = None                  # not stored: resent after a restart


@dataclass
class StreamsGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    topology: dict | None = None     # the heartbeat's Topology struct (epoch, subtopologies)
    members: dict[str, StreamsMember] = field(default_factory=dict)
    target: dict[str, Tasks] = field(default_factory=dict)
    task_counts: dict[str, int] = field(default_factory=dict)   # subtopology -> tasks (configured)
    status: list[dict] = field(default_factory=list)
    shutdown_requested: bool = False
    endpoint_epoch: int = 0          # bumped when any member's tasks change (not stored)

    def state_name(self) -> str:
        if not self.members:
            return "Empty"
        if self.topology is None or self.status and not self.task_counts:
            return "NotReady"
        if self.assignment_epoch < self.group_epoch:
            return "Assigning"
        if any(m.member_epoch != self.assignment_epoch or m.state != STABLE for m in self.members.values()):
            return "Reconciling"
        return "Stable"


def _tasks_list(t: Tasks) -> list[dict]:
    return [{"subtopology_id": s, "partitions": sorted(ps)} for s, ps in sorted(t.items()) if ps]


def _tasks_of(items: Any) -> Tasks:
    return {d["subtopology_id"]: set(d["partitions"]) for d in items or () if d["partitions"]}


def _minus(a: Tasks, b: Tasks) -> Tasks:
    out = {s: ps - b.get(s, set()) for s, ps in a.items()}
    return {s: ps for s, ps in out.items() if ps}


def _and(a: Tasks, b: Tasks) -> Tasks:
    out = {s: ps & b.get(s, set()) for s, ps in a.items()}
    return {s: ps for s, ps in out.items() if ps}


def _count(t: Tasks) -> int:
    return sum(len(ps) for ps in t.values())


def _plain(obj: Any) -> Any:
    """The decoded request struct as JSON-able data (memoryviews and sets gone)."""
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, (bytes, memoryview)):
        return bytes(obj).decode("utf-8", "replace")
    return obj


def encode_group(g: StreamsGroup) -> bytes:
    return json.dumps({
        "v": 0, "group_epoch": g.group_epoch, "assignment_epoch": g.assignment_epoch, "topology": g.topology,
        "task_counts": g.task_counts,
        "members": [{
            "member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id, "client_id": m.client_id,
            "client_host": m.client_host, "rebalance_timeout_ms": m.rebalance_timeout_ms,
            "topology_epoch": m.topology_epoch, "process_id": m.process_id, "user_endpoint": m.user_endpoint,
            "client_tags": m.client_tags, "member_epoch": m.member_epoch,
            "previous_member_epoch": m.previous_member_epoch, "state": m.state,
            "assigned": _tasks_list(m.assigned), "pending_revocation": _tasks_list(m.pending_revocation),
            "owned": _tasks_list(m.owned), "target": _tasks_list(g.target.get(m.member_id, {})),
        } for m in g.members.values()]}, sort_keys=True, separators=(",", ":")).encode()


def decode_group(group_id: str, value: bytes) -> StreamsGroup:
    d = json.loads(bytes(value))
    g = StreamsGroup(group_id, d["group_epoch"], d["assignment_epoch"], d["topology"],
                     task_counts={k: int(v) for k, v in d["task_counts"].items()})
    for m in d["members"]:
        member = StreamsMember(
            m["member_id"], m["instance_id"], m["rack_id"], m["client_id"], m["client_host"],
            m["rebalance_timeout_ms"], m["topology_epoch"], m["process_id"], m["user_endpoint"],
            dict(m["client_tags"]), m["member_epoch"], m["previous_member_epoch"], m["state"],
            _tasks_of(m["assigned"]), _tasks_of(m["pending_revocation"]), _tasks_of(m["owned"]))
        g.members[member.member_id] = member
        g.target[member.member_id] = _tasks_of(m["target"])
    return g


def sticky_assign(tasks: list[tuple[str, int]], members: list[str], current: dict[str, Tasks]) -> dict[str, Tasks]:
    """Balanced active-task assignment that keeps a member's current tasks while it stays within
    its quota (ceil(tasks / members)); the rest go, in task order, to the least loaded member."""
    out: dict[str, Tasks] = {m: {} for m in members}
    if not members:
        return out
    n, k = len(tasks), len(members)
    base, extra = divmod(n, k)
    quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(
        sorted(members, key=lambda m: (-_count(current.get(m, {})), m)))}
    taken: set[tuple[str, int]] = set()
    valid = set(tasks)
    for m in sorted(members):
        for s, ps in sorted(current.get(m, {}).items()):
            for p in sorted(ps):
                t = (s, p)
                if t in valid and t not in taken and _count(out[m]) < quota[m]:
                    out[m].setdefault(s, set()).add(p)
                    taken.add(t)
    for t in tasks:
        if t in taken:
            continue
        m = min(members, key=lambda m: (_count(out[m]) - quota[m], _count(out[m]), m))
        out[m].setdefault(t[0], set()).add(t[1])
    return out


class StreamsGroupCoordinator(RecordGroupCoordinator):
    RECORD_KIND = records.STREAMS_GROUP_KIND
    EVENT = "streams_group"
    DECODE_ERRORS = (ValueError, KeyError, TypeError)

    def __init__(self, gateway: Any, configs: Any):
        super().__init__(gateway, configs, log)
        self._revoke_timers: dict[tuple[str, str], asyncio.TimerHandle] = {}

    # -- persistence (the skeleton's) --------------------------------------------------------
    encode_group = staticmethod(encode_group)
    decode_group = staticmethod(decode_group)

    def _timer_tables(self) -> tuple[dict[tuple[str, str], asyncio.TimerHandle], ...]:
        return (self._session_timers, self._revoke_timers)

    # -- queries ---------------------------------------------------------------------------
    def heartbeat_interval_ms(self, g: StreamsGroup) -> int:
        return self.configs.get_int(g.group_id, "consumer.heartbeat.interval.ms")

    def session_timeout_ms(self, g: StreamsGroup) -> int:
        return self.configs.get_int(g.group_id, "consumer.session.timeout.ms")

    # -- timers ----------------------------------------------------------------------------
    def _schedule_session(self, g: StreamsGroup, m: StreamsMember) -> None:
        self._arm(self._session_timers, (g.group_id, m.member_id), self.session_timeout_ms(g) / 1000.0,
                  self._spawn_expire, g.group_id, m.member_id)

    def _schedule_revocation(self, g: StreamsGroup, m: StreamsMember) -> None:
        """A member told to give tasks up must do so within its rebalance timeout, else it is
        fenced (removed) and its tasks go to the others (Kafka's rebalance timeout)."""
        key = (g.group_id, m.member_id)
        old = self._revoke_timers.pop(key, None)
        if old is not None:
            old.cancel()
        if self._closed or m.state != UNREVOKED_TASKS:
            return
        self._revoke_timers[key] = asyncio.get_running_loop().call_later(
            m.rebalance_timeout_ms / 1000.0, self._spawn_expire, g.group_id, m.member_id, m.member_epoch)

    def _spawn_expire(self, group_id: str, member_id: str, revoking_epoch: int | None = None) -> None:
        if not self._closed:
            self._spawn(self._expire, group_id, member_id, revoking_epoch)

    async def _expire(self, group_id: str, member_id: str, revoking_epoch: int | None = None) -> None:
        async with self.lock(group_id):
            g = self.groups.get(group_id)
            if g is None or member_id not in g.members:
                return
            m = g.members[member_id]
            if revoking_epoch is not None and (m.state != UNREVOKED_TASKS or m.member_epoch != revoking_epoch):
                return  # it revoked in time
            log.info("streams_member_expired", group=group_id, member=member_id,
                     reason="session_timeout" if revoking_epoch is None else "rebalance_timeout")
            self._remove(g, member_id)
            self._update_target(g)
            try:
                await self._store(g)
            except StreamsGroupError:
                pass

    def _remove(self, g: StreamsGroup, member_id: str) -> None:
        g.members.pop(member_id, None)
        g.target.pop(member_id, None)
        for timers in (self._session_timers, self._revoke_timers):
            h = timers.pop((g.group_id, member_id), None)
            if h is not None:
                h.cancel()
        g.group_epoch += 1

    # -- topology --------------------------------------------------------------------------
    async def _configure(self, g: StreamsGroup) -> bool:
        """Resolve the topology's task counts, creating missing internal topics; True when the
        set of tasks changed (a new target assignment is due)."""
        from gateway_kafka import topic_placement
        from gateway_kafka.apis._common import new_topic_config

        status: list[dict] = []
        subs = (g.topology or {}).get("subtopologies") or []
        missing_sources = sorted({t for s in subs for t in s.get("source_topics") or ()
                                  if self._partitions_of(t) == 0})
        if missing_sources:
            status.append({"status_code": MISSING_SOURCE_TOPICS,
                           "status_detail": "Source topics " + ", ".join(missing_sources) + " are missing."})
            changed = bool(g.task_counts)
            g.task_counts, g.status = {}, status
            return changed
        # repartition topics without a fixed partition count get as many partitions as the
        # subtopology writing to them has tasks (iterate: a chain of repartitions resolves in order)
        repart: dict[str, int] = {}
        for s in subs:
            for t in s.get("repartition_source_topics") or ():
                if t.get("partitions", 0) > 0:
                    repart[t["name"]] = t["partitions"]
        counts: dict[str, int] = {}
        for _ in range(len(subs) + 1):
            for s in subs:
                n = max([self._partitions_of(t) for t in s.get("source_topics") or ()] +
                        [repart.get(t["name"], 0) for t in s.get("repartition_source_topics") or ()] + [0])
                counts[s["subtopology_id"]] = n
                for sink in s.get("repartition_sink_topics") or ():
                    if sink not in repart or repart[sink] < n:
                        if not any(t["name"] == sink and t.get("partitions", 0) > 0
                                   for s2 in subs for t in s2.get("repartition_source_topics") or ()):
                            repart[sink] = n
        wanted: list[tuple[str, int, dict[str, str]]] = []
        for s in subs:
            for t in s.get("repartition_source_topics") or ():
                wanted.append((t["name"], repart.get(t["name"], 0),
                               {kv["key"]: kv["value"] for kv in t.get("topic_configs") or ()}))
            for t in s.get("state_changelog_topics") or ():
                wanted.append((t["name"], counts[s["subtopology_id"]],
                               {kv["key"]: kv["value"] for kv in t.get("topic_configs") or ()}))
        failed = []
        for name, n, configs in wanted:
            have = self._partitions_of(name)
            if have:
                if have != n and n > 0:
                    status.append({"status_code": INCORRECTLY_PARTITIONED_TOPICS,
                                   "status_detail": f"Internal topic {name} has {have} partitions, expected {n}."})
                continue
            if n <= 0:
                failed.append(f"{name} (partition count unknown)")
                continue
            refused = await topic_placement.create_topic(self.gw, new_topic_config(name, n, configs))
            if refused is not None:
                failed.append(f"{name} ({refused[1]})")
            else:
                log.info("streams_internal_topic_created", group=g.group_id, topic=name, partitions=n)
        if failed:
            status.append({"status_code": MISSING_INTERNAL_TOPICS,
                           "status_detail": "Internal topics are missing: " + ", ".join(failed)})
        g.status = status
        if status:
            counts = {}
        changed = counts != g.task_counts
        g.task_counts = counts
        return changed

    def _update_target(self, g: StreamsGroup) -> None:
        tasks = [(s, p) for s, n in sorted(g.task_counts.items()) for p in range(n)]
        current = {mid: (m.assigned if m.state == STABLE else g.target.get(mid, m.assigned))
                   for mid, m in g.members.items()}
        g.target = sticky_assign(tasks, sorted(g.members), current)
        g.assignment_epoch = g.group_epoch

    def _reconcile(self, g: StreamsGroup, m: StreamsMember) -> None:
        target = g.target.get(m.member_id, {})
        if m.state == UNREVOKED_TASKS:
            if _and(m.owned, m.pending_revocation):
                return                                  # still releasing
            m.pending_revocation = {}
            m.state = UNRELEASED_TASKS
        if m.member_epoch == g.assignment_epoch and m.state == STABLE:
            return
        revoke = _minus(m.assigned, target)
        if revoke:
            m.assigned = _and(m.assigned, target)
            m.pending_revocation = revoke
            m.state = UNREVOKED_TASKS
            return
        held: Tasks = {}
        for other in g.members.values():
            if other.member_id == m.member_id:
                continue
            for part in (other.assigned, other.pending_revocation, other.owned):
                for s, ps in part.items():
                    held.setdefault(s, set()).update(ps)
        m.previous_member_epoch, m.member_epoch = m.member_epoch, g.assignment_epoch
        give = _minus(target, held)
        m.assigned = give
        m.state = STABLE if _count(give) == _count(target) else UNRELEASED_TASKS

    # -- heartbeat -------------------------------------------------------------------------
    async def heartbeat(self, req: dict, client_id: str, client_host: str) -> dict:
        group_id = req.get("group_id") or ""
        member_id = req.get("member_id") or ""
        epoch = req.get("member_epoch", 0)
        try:
            self._validate(req, group_id, member_id, epoch)
            async with self.lock(group_id):
                return await self._heartbeat(req, group_id, member_id, epoch, client_id, client_host)
        except StreamsGroupError as exc:
            return {"throttle_time_ms": 0, "error_code": exc.code, "error_message": exc.message,
                    "member_id": member_id, "member_epoch": epoch, "heartbeat_interval_ms": 0,
                    "acceptable_recovery_lag": 0, "task_offset_interval_ms": 0}

    def _validate(self, req: dict, group_id: str, member_id: str, epoch: int) -> None:
        if not group_id:
            raise StreamsGroupError(E.INVALID_REQUEST, "GroupId can't be empty.")
        if is_reserved_group(group_id):
            raise StreamsGroupError(E.INVALID_GROUP_ID, "GroupIds beginning with a NUL character are reserved.")
        if not member_id:
            raise StreamsGroupError(E.INVALID_REQUEST, "MemberId can't be empty.")
        if req.get("instance_id") is not None and not req["instance_id"]:
            raise StreamsGroupError(E.INVALID_REQUEST, "InstanceId can't be empty.")
        if epoch == 0:
            if req.get("rebalance_timeout_ms", -1) <= 0:
                raise StreamsGroupError(E.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
            if req.get("topology") is None:
                raise StreamsGroupError(E.INVALID_REQUEST, "Topology must be non-null when joining the group.")
            for what in ("active_tasks", "standby_tasks", "warmup_tasks"):
                if req.get(what) is None:
                    raise StreamsGroupError(E.INVALID_REQUEST, f"{what} must be empty when (re-)joining.")
            if not req.get("process_id"):
                raise StreamsGroupError(E.INVALID_REQUEST, "ProcessId can't be null when joining.")
            subs = req["topology"].get("subtopologies") or []
            ids = [s.get("subtopology_id") for s in subs]
            if len(set(ids)) != len(ids) or not all(ids):
                raise StreamsGroupError(E.STREAMS_INVALID_TOPOLOGY, "Subtopology ids must be unique and non-empty.")
        elif epoch < LEAVE_STATIC_EPOCH:
            raise StreamsGroupError(E.INVALID_REQUEST, f"MemberEpoch is {epoch}, but must be greater than or equal "
                                                       "to -2.")

    async def _heartbeat(self, req: dict, group_id: str, member_id: str, epoch: int, client_id: str,
                         client_host: str) -> dict:
        modern = getattr(self.gw, "modern_groups", None)
        if modern is not None and modern.owns(group_id) or \
                self.gw.coordinator.state_of(group_id) not in (None, "Empty", "Dead"):
            raise StreamsGroupError(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a streams group.")
        g = self.groups.get(group_id)
        if epoch in (LEAVE_EPOCH, LEAVE_STATIC_EPOCH):
            if g is not None and member_id in g.members:
                self._remove(g, member_id)
                self._update_target(g)
                await self._store(g)
                log.info("streams_member_left", group=group_id, member=member_id)
            return {"throttle_time_ms": 0, "error_code": E.NONE, "error_message": None, "member_id": member_id,
                    "member_epoch": epoch, "heartbeat_interval_ms": 0, "acceptable_recovery_lag": 0,
                    "task_offset_interval_ms": 0}
        if g is None:
            if epoch != 0:
                raise StreamsGroupError(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group "
                                                              f"{group_id}.")
            g = self.groups[group_id] = StreamsGroup(group_id)
        topology = req.get("topology")
        m = g.members.get(member_id)
        if epoch == 0:
            new_topo = _plain(topology)
            if g.topology is None or new_topo["epoch"] > g.topology.get("epoch", 0):
                g.topology = new_topo
                g.group_epoch += 1
            elif new_topo["epoch"] < g.topology.get("epoch", 0):
                raise StreamsGroupError(E.STREAMS_INVALID_TOPOLOGY_EPOCH,
                                        f"Topology epoch {new_topo['epoch']} is older than the group's "
                                        f"{g.topology['epoch']}.")
            if m is None:
                m = g.members[member_id] = StreamsMember(member_id)
                g.group_epoch += 1
            else:  # rejoining: forget what it held
                m.assigned, m.pending_revocation, m.owned, m.state = {}, {}, {}, STABLE
                m.member_epoch = 0
            m.topology_epoch = new_topo["epoch"]
            m.last_sent = None
        else:
            if m is None:
                raise StreamsGroupError(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group "
                                                              f"{group_id}.")
            if epoch != m.member_epoch and not (epoch == m.previous_member_epoch and m.state != STABLE):
                raise StreamsGroupError(E.FENCED_MEMBER_EPOCH, f"The member's epoch {epoch} is not the "
                                                               f"current {m.member_epoch}.")
        m.client_id, m.client_host = client_id, client_host
        if req.get("instance_id") is not None:
            m.instance_id = req["instance_id"]
        if req.get("rack_id") is not None:
            m.rack_id = req["rack_id"]
        if req.get("rebalance_timeout_ms", -1) > 0:
            m.rebalance_timeout_ms = req["rebalance_timeout_ms"]
        if req.get("process_id") is not None:
            m.process_id = req["process_id"]
        if req.get("user_endpoint") is not None:
            m.user_endpoint = _plain(req["user_endpoint"])
        if req.get("client_tags") is not None:
            m.client_tags = {kv["key"]: kv["value"] for kv in req["client_tags"]}
        if req.get("active_tasks") is not None:
            m.owned = _tasks_of(req["active_tasks"])
        if req.get("shutdown_application"):
            g.shutdown_requested = True
        if await self._configure(g):
            g.group_epoch += 1
        if g.assignment_epoch < g.group_epoch:
            self._update_target(g)
        was_revoking = m.state == UNREVOKED_TASKS
        self._reconcile(g, m)
        await self._store(g)
        self._schedule_session(g, m)
        if m.state == UNREVOKED_TASKS and not was_revoking or was_revoking and m.state != UNREVOKED_TASKS:
            self._schedule_revocation(g, m)
        status = list(g.status)
        if g.shutdown_requested:
            status.append({"status_code": SHUTDOWN_APPLICATION,
                           "status_detail": "A Streams client requested the shutdown of the application."})
        if topology is None and g.topology and m.topology_epoch < g.topology.get("epoch", 0):
            status.append({"status_code": STALE_TOPOLOGY, "status_detail": "The member's topology epoch is older "
                                                                           "than the group's."})
        resp = {"throttle_time_ms": 0, "error_code": E.NONE, "error_message": None, "member_id": member_id,
                "member_epoch": m.member_epoch, "heartbeat_interval_ms": self.heartbeat_interval_ms(g),
                "acceptable_recovery_lag": 10000, "task_offset_interval_ms": 60000,
                "status": status or None, "active_tasks": None, "standby_tasks": None, "warmup_tasks": None,
                "partitions_by_user_endpoint": None}
        if m.last_sent != m.assigned:
            resp.update(active_tasks=_tasks_list(m.assigned), standby_tasks=[], warmup_tasks=[])
            m.last_sent = {s: set(ps) for s, ps in m.assigned.items()}
            g.endpoint_epoch += 1
        resp["endpoint_information_epoch"] = g.endpoint_epoch
        if req.get("endpoint_information_epoch", -1) != g.endpoint_epoch:
            resp["partitions_by_user_endpoint"] = self._endpoints(g)
        return resp

    def _endpoints(self, g: StreamsGroup) -> list[dict]:
        out = []
        subs = {s["subtopology_id"]: s for s in (g.topology or {}).get("subtopologies") or []}
        for m in g.members.values():
            if not m.user_endpoint:
                continue
            parts: dict[str, set[int]] = {}
            for sid, ps in m.assigned.items():
                s = subs.get(sid) or {}
                for t in list(s.get("source_topics") or ()) + [r["name"] for r in
                                                                s.get("repartition_source_topics") or ()]:
                    parts.setdefault(t, set()).update(ps)
            out.append({"user_endpoint": m.user_endpoint,
                        "active_partitions": [{"topic": t, "partitions": sorted(ps)} for t, ps in sorted(parts.items())],
                        "standby_partitions": []})
        return out

    # -- offsets, admin --------------------------------------------------------------------
    def validate_offset_commit(self, group_id: str, member_id: str, epoch: int) -> int | None:
        g = self.groups.get(group_id)
        if g is None:
            return None
        if epoch < 0 and not g.members:
            return E.NONE
        m = g.members.get(member_id)
        if m is None:
            return E.UNKNOWN_MEMBER_ID
        if epoch != m.member_epoch:
            return E.STALE_MEMBER_EPOCH
        return E.NONE

    def validate_offset_fetch(self, group_id: str, member_id: str | None, epoch: int) -> int | None:
        g = self.groups.get(group_id)
        if g is None:
            return None
        if not member_id and epoch < 0:
            return E.NONE
        m = g.members.get(member_id or "")
        if m is None:
            return E.UNKNOWN_MEMBER_ID
        if epoch != m.member_epoch:
            return E.STALE_MEMBER_EPOCH
        return E.NONE

    def listing(self) -> list[tuple[str, str, str, str]]:
        return [(g.group_id, "streams", g.state_name(), "streams") for g in self.groups.values()]

    async def delete_group(self, group_id: str) -> int:
        async with self.lock(group_id):
            g = self.groups.get(group_id)
            if g is None:
                return E.GROUP_ID_NOT_FOUND
            if g.members:
                return E.NON_EMPTY_GROUP
            del self.groups[group_id]
            await self._store(g)
            return E.NONE

    def describe(self, group_id: str) -> dict:
        g = self.groups.get(group_id)
        base = {"error_code": E.NONE, "error_message": None, "group_id": group_id, "group_state": "Dead",
                "group_epoch": -1, "assignment_epoch": -1, "topology": None, "members": []}
        if g is None:
            base.update(error_code=E.GROUP_ID_NOT_FOUND, error_message=f"Group {group_id} not found.")
            return base

        def topic_info(items: Any, n: Any = None) -> list[dict]:
            return [{"name": t["name"], "partitions": self._partitions_of(t["name"]),
                     "replication_factor": t.get("replication_factor", 0),
                     "topic_configs": t.get("topic_configs") or []} for t in items or ()]

        def assignment(t: Tasks) -> dict:
            return {"active_tasks": _tasks_list(t), "standby_tasks": [], "warmup_tasks": []}

        topo = None
        if g.topology is not None:
            subs = None
            if g.task_counts:
                subs = [{"subtopology_id": s["subtopology_id"], "source_topics": list(s.get("source_topics") or ()),
                         "repartition_sink_topics": list(s.get("repartition_sink_topics") or ()),
                         "state_changelog_topics": topic_info(s.get("state_changelog_topics")),
                         "repartition_source_topics": topic_info(s.get("repartition_source_topics"))}
                        for s in g.topology.get("subtopologies") or ()]
            topo = {"epoch": g.topology.get("epoch", 0), "subtopologies": subs}
        members = [{"member_id": m.member_id, "member_epoch": m.member_epoch, "instance_id": m.instance_id,
                    "rack_id": m.rack_id, "client_id": m.client_id, "client_host": m.client_host,
                    "topology_epoch": m.topology_epoch, "process_id": m.process_id, "user_endpoint": m.user_endpoint,
                    "client_tags": [{"key": k, "value": v} for k, v in sorted(m.client_tags.items())],
                    "task_offsets": [], "task_end_offsets": [], "assignment": assignment(m.assigned),
                    "target_assignment": assignment(g.target.get(m.member_id, {})), "is_classic": False}
                   for m in g.members.values()]
        base.update(group_state=g.state_name(), group_epoch=g.group_epoch, assignment_epoch=g.assignment_epoch,
                    topology=topo, members=members)
        return base


def now_ms() -> int:
    return int(time.time() * 1000)
