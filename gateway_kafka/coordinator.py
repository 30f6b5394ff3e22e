"""Group coordinator for Kafka's classic consumer-group protocol (JoinGroup/SyncGroup/Heartbeat).

Owns the in-memory membership of every group: members, generations, the chosen protocol and
the assignments the leader hands out. Committed offsets are not kept here: they live in the
engine's consumer offset store, shared with RocketMQ groups; this module only says whether a
commit from (member, generation) is acceptable.

State machine (Kafka's GroupCoordinator, classic protocol):

    Empty --join--> PreparingRebalance --all joined / rebalance timeout--> CompletingRebalance
    CompletingRebalance --leader SyncGroup--> Stable
    Stable / CompletingRebalance --join with new metadata, leave, session expiry--> PreparingRebalance
    PreparingRebalance --nobody rejoined--> Empty
    Empty --DeleteGroups--> (removed)

Invariants:
- All methods run on the event loop thread; nothing here blocks or needs a lock.
- ``generation_id`` only grows; it increments each time a join phase completes.
- Every member has exactly one live session timer; a member waiting in JoinGroup is not
  expired (it is, by definition, alive), as in Kafka.
- A request parked in JoinGroup or SyncGroup is always answered: on completion, on rebalance,
  on removal of its member, or on coordinator shutdown (COORDINATOR_NOT_AVAILABLE).
- Assignment is protocol-agnostic: the leader's bytes are handed out unchanged, so range,
  roundrobin, sticky and cooperative-sticky assignors (and non-consumer protocols) all work.
- Static members (group.instance.id, KIP-345) keep their identity across restarts: a rejoin
  with an unknown member id replaces the old member id and fences the old one.
- Member ids are handed out by the coordinator (KIP-394): a v4+ JoinGroup without one gets
  MEMBER_ID_REQUIRED and a fresh id to rejoin with.

Persistence (as Kafka): group metadata is a record of ``__consumer_offsets`` (Kafka's
GroupMetadataValue, in the group's partition, through the engine's consumer offsets). The leader's
SyncGroup is answered only once the Stable generation — protocol, leader, members with their
metadata and assignments — is stored; a group that becomes Empty is stored with its generation;
DeleteGroups writes a tombstone. Records of one group are appended in the order the group went
through them. At start (``restore``) the latest record of every group is read back: a Stable one
comes back Stable with the same generation, members and assignments (its members go on
heartbeating and committing without a rebalance, each with a fresh session timer; one that does
not come back expires as usual), an Empty one keeps its generation. A crash during a rebalance
restores the last Stable generation; members then rejoin.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterable

import structlog

from engine.consumer_offset import is_reserved_group

from gateway_kafka import error_codes as E
from gateway_kafka.protocol import records

log = structlog.get_logger("rockafka.kafka.coordinator")

EMPTY = "Empty"
PREPARING_REBALANCE = "PreparingRebalance"
COMPLETING_REBALANCE = "CompletingRebalance"
STABLE = "Stable"
DEAD = "Dead"


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_future: asyncio.Future | None = None
    sync_future: asyncio.Future | None = None
    expiry: asyncio.TimerHandle | None = None

    def metadata_for(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""


@dataclass
class Group:
    group_id: str
    state: str = EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)  # insertion order = join order
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_members: dict[str, asyncio.TimerHandle] = field(default_factory=dict)
    rebalance_timer: asyncio.TimerHandle | None = None
    initial_delay_until: float = 0.0  # loop time before which a first join phase is held open

    def subscribed_topics(self) -> set[str]:
        """Topics the members subscribe to (consumer protocol only; parsed from metadata)."""
        topics: set[str] = set()
        if self.protocol_type != "consumer":
            return topics
        for m in self.members.values():
            topics.update(parse_consumer_subscription(m.metadata_for(self.protocol_name)))
        return topics


def parse_consumer_subscription(meta: bytes) -> list[str]:
    """Topic names from a ConsumerProtocolSubscription (version int16, then an int16-length
    string array). Malformed metadata yields no topics rather than an error: it is opaque to
    the coordinator and only used to answer OffsetDelete."""
    try:
        pos = 2
        count = int.from_bytes(meta[pos:pos + 4], "big", signed=True)
        pos += 4
        topics = []
        for _ in range(max(0, min(count, 100_000))):
            n = int.from_bytes(meta[pos:pos + 2], "big", signed=True)
            pos += 2
            if n < 0 or pos + n > len(meta):
                break
            topics.append(meta[pos:pos + n].decode("utf-8", "replace"))
            pos += n
        return topics
    except Exception:
        return []


class GroupCoordinator:
    def __init__(self, *, min_session_timeout_ms: int = 6000, max_session_timeout_ms: int = 1_800_000,
                 initial_rebalance_delay_ms: int = 0, max_group_size: int = 1000,
                 store: Any = None, put: Callable[..., Awaitable[Any]] | None = None):
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.initial_rebalance_delay_ms = initial_rebalance_delay_ms
        self.max_group_size = max_group_size
        self.groups: dict[str, Group] = {}
        self._closed = False
        # group metadata records go to the engine's __consumer_offsets (None: kept in memory only)
        self.offsets = store.consumer_offsets if store is not None else None
        self._put = put
        self._write_locks: dict[str, asyncio.Lock] = {}
        self._writes: set[asyncio.Task] = set()

    # -- persistence -----------------------------------------------------------------------
    @staticmethod
    def _record(group: Group, stable: bool | None = None) -> bytes:
        """Kafka's GroupMetadataValue of the group as Stable (with its members) or Empty;
        ``stable`` defaults to the group's state."""
        stable = group.state == STABLE if stable is None else stable
        return records.encode("GroupMetadataValue", {
            "protocol_type": group.protocol_type or "", "generation": group.generation_id,
            "protocol": group.protocol_name, "leader": group.leader_id,
            "current_state_timestamp": int(time.time() * 1000),
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                         "client_id": m.client_id, "client_host": m.client_host,
                         "rebalance_timeout": m.rebalance_timeout_ms, "session_timeout": m.session_timeout_ms,
                         "subscription": m.metadata_for(group.protocol_name), "assignment": m.assignment}
                        for m in group.members.values()] if stable else []})

    async def _store(self, group_id: str, value: bytes | None) -> bool:
        """Append one record of the group, after every earlier one of it (FIFO lock)."""
        if self.offsets is None or self._put is None:
            return True
        lock = self._write_locks.get(group_id)
        if lock is None:
            lock = self._write_locks[group_id] = asyncio.Lock()
        async with lock:
            res = await self._put(self.offsets.store_group_metadata, group_id, value)
        if not res.stored:
            log.warning("group_not_stored", group=group_id, status=res.status.name, error=res.error)
        return res.stored

    def _note_state(self, group: Group) -> None:
        """Store a group that became Empty, or a Stable one whose member ids changed, in the
        background (the order per group is kept; nobody waits for it)."""
        if self.offsets is None or self._closed:
            return
        task = asyncio.get_running_loop().create_task(self._store(group.group_id, self._record(group)))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    def restore(self) -> int:
        """Load every group's latest record (call on the event loop, before serving); returns
        how many groups came back. An unreadable record is logged and its group starts empty
        (members then rejoin, as after a coordinator change)."""
        if self.offsets is None:
            return 0
        restored = 0
        for group_id, value in self.offsets.group_metadata().items():
            try:
                g = records.decode("GroupMetadataValue", value)
            except records.RecordDecodeError as exc:
                log.warning("group_not_restored", group=group_id, error=str(exc))
                continue
            group = Group(group_id, state=STABLE if g["members"] else EMPTY, generation_id=g["generation"],
                          protocol_type=g["protocol_type"] or None,
                          protocol_name=g["protocol"] if g["members"] else None,
                          leader_id=g["leader"] if g["members"] else None)
            for m in g["members"]:
                member = Member(m["member_id"], m["group_instance_id"], m["client_id"], m["client_host"],
                                m["session_timeout"], m["rebalance_timeout"] if m["rebalance_timeout"] >= 0
                                else m["session_timeout"], group.protocol_type or "",
                                [(group.protocol_name or "", bytes(m["subscription"]))], bytes(m["assignment"]))
                group.members[member.member_id] = member
                if member.group_instance_id is not None:
                    group.static_members[member.group_instance_id] = member.member_id
            self.groups[group_id] = group
            for member in group.members.values():
                self._schedule_expiry(group, member)
            restored += 1
        log.info("groups_restored", groups=restored, members=sum(len(g.members) for g in self.groups.values()))
        return restored

    # -- helpers ---------------------------------------------------------------------------
    @property
    def _loop(self) -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    @staticmethod
    def _resolve(fut: asyncio.Future | None, value: Any) -> None:
        if fut is not None and not fut.done():
            fut.set_result(value)

    def _join_error(self, code: int, member_id: str = "") -> dict:
        return {"error_code": code, "generation_id": -1, "protocol_type": None, "protocol_name": None,
                "leader": "", "skip_assignment": False, "member_id": member_id, "members": []}

    @staticmethod
    def _sync_error(code: int) -> dict:
        return {"error_code": code, "protocol_type": None, "protocol_name": None, "assignment": b""}

    def _schedule_expiry(self, group: Group, member: Member) -> None:
        if member.expiry is not None:
            member.expiry.cancel()
        member.expiry = self._loop.call_later(member.session_timeout_ms / 1000.0,
                                              self._on_session_expired, group.group_id, member.member_id)

    def _new_member_id(self, client_id: str, instance_id: str | None) -> str:
        prefix = instance_id or client_id or "member"
        return f"{prefix}-{uuid.uuid4()}"

    # -- JoinGroup -------------------------------------------------------------------------
    async def join_group(self, *, group_id: str, member_id: str, group_instance_id: str | None,
                         protocol_type: str, protocols: list[tuple[str, bytes]], session_timeout_ms: int,
                         rebalance_timeout_ms: int, client_id: str, client_host: str,
                         require_known_member_id: bool) -> dict:
        if self._closed:
            return self._join_error(E.COORDINATOR_NOT_AVAILABLE, member_id)
        if not group_id or is_reserved_group(group_id):
            return self._join_error(E.INVALID_GROUP_ID, member_id)
        if not (self.min_session_timeout_ms <= session_timeout_ms <= self.max_session_timeout_ms):
            return self._join_error(E.INVALID_SESSION_TIMEOUT, member_id)
        if rebalance_timeout_ms < 0:
            rebalance_timeout_ms = session_timeout_ms  # JoinGroup v0 has no rebalance timeout
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = Group(group_id)
        if not protocols or not protocol_type:
            return self._join_error(E.INCONSISTENT_GROUP_PROTOCOL, member_id)
        if group.members and (protocol_type != group.protocol_type or not self._supports(group, protocols)):
            return self._join_error(E.INCONSISTENT_GROUP_PROTOCOL, member_id)

        if not member_id:
            new_id = self._new_member_id(client_id, group_instance_id)
            if group_instance_id is not None and group_instance_id in group.static_members:
                return await self._rejoin_static(group, group_instance_id, new_id, protocols, session_timeout_ms,
                                                 rebalance_timeout_ms, client_id, client_host)
            if group_instance_id is None and require_known_member_id:
                # KIP-394: hand out the id first, so a client that dies before learning it
                # leaves no ghost member behind (the pending id simply expires).
                group.pending_members[new_id] = self._loop.call_later(
                    session_timeout_ms / 1000.0, self._expire_pending, group_id, new_id)
                log.info("member_id_required", group=group_id, member=new_id, client_id=client_id,
                         state=group.state, pending=len(group.pending_members))
                return self._join_error(E.MEMBER_ID_REQUIRED, new_id)
            if len(group.members) >= self.max_group_size:
                return self._join_error(E.GROUP_MAX_SIZE_REACHED, member_id)
            member = Member(new_id, group_instance_id, client_id, client_host, session_timeout_ms,
                            rebalance_timeout_ms, protocol_type, list(protocols))
            return await self._add_member_and_join(group, member)

        pending = group.pending_members.pop(member_id, None)
        if pending is not None:
            pending.cancel()
            if len(group.members) >= self.max_group_size:
                return self._join_error(E.GROUP_MAX_SIZE_REACHED, member_id)
            member = Member(member_id, group_instance_id, client_id, client_host, session_timeout_ms,
                            rebalance_timeout_ms, protocol_type, list(protocols))
            return await self._add_member_and_join(group, member)

        member = group.members.get(member_id)
        if member is None:
            return self._join_error(E.UNKNOWN_MEMBER_ID, member_id)
        if group_instance_id is not None and group.static_members.get(group_instance_id) != member_id:
            return self._join_error(E.FENCED_INSTANCE_ID, member_id)
        changed = list(protocols) != member.protocols
        member.protocols = list(protocols)
        member.session_timeout_ms = session_timeout_ms
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.client_id, member.client_host = client_id, client_host
        if group.state == COMPLETING_REBALANCE and not changed:
            # A repeated join in the sync phase: answer with the current generation again.
            self._schedule_expiry(group, member)
            return self._join_response(group, member)
        if group.state == STABLE and not changed and member_id != group.leader_id:
            self._schedule_expiry(group, member)
            return self._join_response(group, member)
        return await self._await_join(group, member, reason="member_rejoin" if not changed else "metadata_changed")

    async def _rejoin_static(self, group: Group, instance_id: str, new_id: str, protocols, session_timeout_ms,
                             rebalance_timeout_ms, client_id, client_host) -> dict:
        old_id = group.static_members[instance_id]
        member = group.members.pop(old_id)
        # Fence whatever the previous incarnation still has parked.
        self._resolve(member.join_future, self._join_error(E.FENCED_INSTANCE_ID, old_id))
        self._resolve(member.sync_future, self._sync_error(E.FENCED_INSTANCE_ID))
        member.join_future = member.sync_future = None
        changed = list(protocols) != member.protocols
        member.member_id = new_id
        member.protocols = list(protocols)
        member.session_timeout_ms, member.rebalance_timeout_ms = session_timeout_ms, rebalance_timeout_ms
        member.client_id, member.client_host = client_id, client_host
        group.members[new_id] = member
        group.static_members[instance_id] = new_id
        if group.leader_id == old_id:
            group.leader_id = new_id
        log.info("static_member_replaced", group=group.group_id, instance_id=instance_id, old=old_id, new=new_id)
        if group.state == STABLE and not changed:
            # KIP-345: a known static member coming back does not trigger a rebalance; it
            # keeps its assignment (SyncGroup in Stable hands it back).
            self._schedule_expiry(group, member)
            self._note_state(group)  # the saved member id is the new one
            return self._join_response(group, member)
        return await self._await_join(group, member, reason="static_member_rejoin")

    def _supports(self, group: Group, protocols: Iterable[tuple[str, bytes]]) -> bool:
        names = {p for p, _ in protocols}
        return bool(names & self._candidates(group))

    @staticmethod
    def _candidates(group: Group) -> set[str]:
        sets = [{p for p, _ in m.protocols} for m in group.members.values()]
        return set.intersection(*sets) if sets else set()

    async def _add_member_and_join(self, group: Group, member: Member) -> dict:
        if not group.members:
            group.protocol_type = member.protocol_type
        group.members[member.member_id] = member
        if member.group_instance_id is not None:
            group.static_members[member.group_instance_id] = member.member_id
        log.info("member_added", group=group.group_id, member=member.member_id,
                 instance_id=member.group_instance_id, client_id=member.client_id)
        return await self._await_join(group, member, reason="member_added")

    async def _await_join(self, group: Group, member: Member, reason: str) -> dict:
        fut = self._loop.create_future()
        self._resolve(member.join_future, self._join_error(E.UNKNOWN_MEMBER_ID, member.member_id))
        member.join_future = fut
        if member.expiry is not None:
            member.expiry.cancel()
            member.expiry = None
        if group.state in (EMPTY, STABLE, COMPLETING_REBALANCE):
            self._prepare_rebalance(group, reason)
        else:
            self._try_complete_join(group)
        return await fut

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.state == COMPLETING_REBALANCE:
            for m in group.members.values():
                self._resolve(m.sync_future, self._sync_error(E.REBALANCE_IN_PROGRESS))
                m.sync_future = None
        was_empty = group.state == EMPTY
        group.state = PREPARING_REBALANCE
        if group.rebalance_timer is not None:
            group.rebalance_timer.cancel()
        timeout_ms = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
        now = self._loop.time()
        if was_empty and self.initial_rebalance_delay_ms > 0:
            # Kafka's group.initial.rebalance.delay.ms: hold the first join phase open a little
            # so a whole fleet starting together lands in one generation (never longer than
            # the rebalance timeout, as Kafka's InitialDelayedJoin).
            delay = min(self.initial_rebalance_delay_ms, timeout_ms) / 1000.0
            group.initial_delay_until = now + delay
            group.rebalance_timer = self._loop.call_later(delay, self._on_rebalance_timer, group.group_id)
        else:
            group.initial_delay_until = 0.0
            group.rebalance_timer = self._loop.call_later(timeout_ms / 1000.0, self._on_rebalance_timer,
                                                          group.group_id)
        log.info("rebalance_started", group=group.group_id, reason=reason, generation=group.generation_id,
                 members=len(group.members))
        self._try_complete_join(group)

    def _on_rebalance_timer(self, group_id: str) -> None:
        group = self.groups.get(group_id)
        if group is None or group.state != PREPARING_REBALANCE:
            return
        group.rebalance_timer = None
        remaining = group.initial_delay_until - self._loop.time() if group.initial_delay_until else 0.0
        if remaining > 0:
            # fired a little early (clock granularity): wait out the rest, never just return,
            # or the join phase would have no timer left and hang
            group.rebalance_timer = self._loop.call_later(remaining, self._on_rebalance_timer, group.group_id)
            return
        if group.initial_delay_until:
            group.initial_delay_until = 0.0
            if not self._all_joined(group):
                # Delay over but not everyone is in yet: wait the normal rebalance timeout.
                timeout_ms = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
                group.rebalance_timer = self._loop.call_later(timeout_ms / 1000.0, self._on_rebalance_timer,
                                                              group.group_id)
                return
        self._complete_join(group)

    @staticmethod
    def _all_joined(group: Group) -> bool:
        return not group.pending_members and all(m.join_future is not None for m in group.members.values())

    def _try_complete_join(self, group: Group) -> None:
        if group.state != PREPARING_REBALANCE:
            return
        if group.initial_delay_until and self._loop.time() < group.initial_delay_until:
            return
        if self._all_joined(group):
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        if group.rebalance_timer is not None:
            group.rebalance_timer.cancel()
            group.rebalance_timer = None
        group.initial_delay_until = 0.0
        for m in [m for m in group.members.values() if m.join_future is None]:
            log.info("member_removed", group=group.group_id, member=m.member_id, reason="did_not_rejoin")
            self._drop_member(group, m)
        group.generation_id += 1
        if not group.members:
            group.state = EMPTY
            group.protocol_name = None
            group.leader_id = None
            log.info("group_empty", group=group.group_id, generation=group.generation_id)
            self._note_state(group)
            return
        group.protocol_name = self._select_protocol(group)
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        group.state = COMPLETING_REBALANCE
        log.info("join_completed", group=group.group_id, generation=group.generation_id,
                 protocol=group.protocol_name, leader=group.leader_id, members=len(group.members))
        for m in group.members.values():
            fut, m.join_future = m.join_future, None
            self._resolve(fut, self._join_response(group, m))
            self._schedule_expiry(group, m)

    def _join_response(self, group: Group, member: Member) -> dict:
        is_leader = member.member_id == group.leader_id
        members = []
        if is_leader:
            members = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                        "metadata": m.metadata_for(group.protocol_name)} for m in group.members.values()]
        return {"error_code": E.NONE, "generation_id": group.generation_id, "protocol_type": group.protocol_type,
                "protocol_name": group.protocol_name, "leader": group.leader_id or "", "skip_assignment": False,
                "member_id": member.member_id, "members": members}

    def _select_protocol(self, group: Group) -> str:
        candidates = self._candidates(group)
        votes: dict[str, int] = {}
        for m in group.members.values():
            for name, _ in m.protocols:
                if name in candidates:
                    votes[name] = votes.get(name, 0) + 1
                    break
        # most votes; ties go to the leader's (or first member's) preference order
        first = group.members.get(group.leader_id or "") or next(iter(group.members.values()))
        order = {name: i for i, (name, _) in enumerate(first.protocols)}
        return max(votes, key=lambda p: (votes[p], -order.get(p, 1 << 30)))

    # -- SyncGroup -------------------------------------------------------------------------
    async def sync_group(self, *, group_id: str, generation_id: int, member_id: str,
                         group_instance_id: str | None, protocol_type: str | None, protocol_name: str | None,
                         assignments: list[tuple[str, bytes]]) -> dict:
        if self._closed:
            return self._sync_error(E.COORDINATOR_NOT_AVAILABLE)
        group = self.groups.get(group_id)
        if group is None or group.state in (EMPTY, DEAD):
            return self._sync_error(E.UNKNOWN_MEMBER_ID)
        member = group.members.get(member_id)
        if member is None:
            if group_instance_id is not None and group_instance_id in group.static_members:
                return self._sync_error(E.FENCED_INSTANCE_ID)
            return self._sync_error(E.UNKNOWN_MEMBER_ID)
        if group_instance_id is not None and group.static_members.get(group_instance_id) != member_id:
            return self._sync_error(E.FENCED_INSTANCE_ID)
        if generation_id != group.generation_id:
            return self._sync_error(E.ILLEGAL_GENERATION)
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
                protocol_name is not None and protocol_name != group.protocol_name):
            return self._sync_error(E.INCONSISTENT_GROUP_PROTOCOL)
        if group.state == PREPARING_REBALANCE:
            return self._sync_error(E.REBALANCE_IN_PROGRESS)
        self._schedule_expiry(group, member)
        if group.state == STABLE:
            return self._sync_ok(group, member)
        # CompletingRebalance: wait for the leader's assignment
        fut = self._loop.create_future()
        self._resolve(member.sync_future, self._sync_error(E.REBALANCE_IN_PROGRESS))
        member.sync_future = fut
        if member_id == group.leader_id:
            await self._stabilise(group, dict(assignments))
        return await fut

    async def _stabilise(self, group: Group, given: dict[str, bytes]) -> None:
        """The leader's assignment: stored as the group's record, then the group is Stable and
        every member parked in SyncGroup gets its part. If the group moved on meanwhile (a member
        left, a new join) nothing changes here: the rebalance already answered everyone."""
        generation = group.generation_id
        for m in group.members.values():
            m.assignment = bytes(given.get(m.member_id, b""))
        stored = await self._store(group.group_id, self._record(group, stable=True))
        if self.groups.get(group.group_id) is not group or group.state != COMPLETING_REBALANCE \
                or group.generation_id != generation:
            return
        if not stored:
            # as Kafka: the assignment is not in effect; members are told and rejoin
            for m in group.members.values():
                m.assignment = b""
                f, m.sync_future = m.sync_future, None
                self._resolve(f, self._sync_error(E.COORDINATOR_NOT_AVAILABLE))
            self._prepare_rebalance(group, "group_not_stored")
            return
        group.state = STABLE
        log.info("group_stable", group=group.group_id, generation=group.generation_id, members=len(group.members))
        for m in group.members.values():
            f, m.sync_future = m.sync_future, None
            self._resolve(f, self._sync_ok(group, m))

    @staticmethod
    def _sync_ok(group: Group, member: Member) -> dict:
        return {"error_code": E.NONE, "protocol_type": group.protocol_type, "protocol_name": group.protocol_name,
                "assignment": member.assignment}

    # -- Heartbeat -------------------------------------------------------------------------
    def heartbeat(self, *, group_id: str, member_id: str, generation_id: int, group_instance_id: str | None) -> int:
        if self._closed:
            return E.COORDINATOR_NOT_AVAILABLE
        group = self.groups.get(group_id)
        if group is None:
            return E.UNKNOWN_MEMBER_ID
        member = group.members.get(member_id)
        if member is None:
            if group_instance_id is not None and group_instance_id in group.static_members:
                return E.FENCED_INSTANCE_ID
            return E.UNKNOWN_MEMBER_ID
        if group_instance_id is not None and group.static_members.get(group_instance_id) != member_id:
            return E.FENCED_INSTANCE_ID
        if generation_id != group.generation_id:
            return E.ILLEGAL_GENERATION
        if member.join_future is None:
            self._schedule_expiry(group, member)
        if group.state == PREPARING_REBALANCE:
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    # -- LeaveGroup ------------------------------------------------------------------------
    def leave_group(self, group_id: str, leaving: list[tuple[str, str | None]]) -> tuple[int, list[dict]]:
        """``leaving`` = [(member_id, group_instance_id)]; returns (top-level error, per member)."""
        if self._closed:
            return E.COORDINATOR_NOT_AVAILABLE, []
        group = self.groups.get(group_id)
        if group is None:
            return E.NONE, [{"member_id": mid, "group_instance_id": iid, "error_code": E.UNKNOWN_MEMBER_ID}
                            for mid, iid in leaving]
        results = []
        removed = False
        for member_id, instance_id in leaving:
            if instance_id is not None:
                known = group.static_members.get(instance_id)
                if known is None:
                    code = E.UNKNOWN_MEMBER_ID
                elif member_id and member_id != known:
                    code = E.FENCED_INSTANCE_ID
                else:
                    member_id, code = known, E.NONE
            else:
                code = E.NONE if member_id in group.members else E.UNKNOWN_MEMBER_ID
                if code and member_id in group.pending_members:
                    group.pending_members.pop(member_id).cancel()
                    code = E.NONE
            if code == E.NONE and member_id in group.members:
                m = group.members[member_id]
                log.info("member_removed", group=group_id, member=member_id, reason="leave_group")
                self._remove_member(group, m, E.UNKNOWN_MEMBER_ID)
                removed = True
            results.append({"member_id": member_id, "group_instance_id": instance_id, "error_code": code})
        if removed:
            self._after_removal(group, "member_left")
        return E.NONE, results

    # -- expiry / removal ------------------------------------------------------------------
    def _on_session_expired(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is None:
            return
        member = group.members.get(member_id)
        if member is None or member.join_future is not None:
            return
        log.info("member_removed", group=group_id, member=member_id, reason="session_timeout")
        self._remove_member(group, member, E.UNKNOWN_MEMBER_ID)
        self._after_removal(group, "session_timeout")

    def _expire_pending(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is not None and group.pending_members.pop(member_id, None) is not None:
            log.info("pending_member_expired", group=group_id, member=member_id)
            self._try_complete_join(group)

    def _drop_member(self, group: Group, member: Member) -> None:
        if member.expiry is not None:
            member.expiry.cancel()
        group.members.pop(member.member_id, None)
        if member.group_instance_id is not None and group.static_members.get(member.group_instance_id) == member.member_id:
            del group.static_members[member.group_instance_id]
        if group.leader_id == member.member_id:
            group.leader_id = next(iter(group.members), None)

    def _remove_member(self, group: Group, member: Member, code: int) -> None:
        self._resolve(member.join_future, self._join_error(code, member.member_id))
        self._resolve(member.sync_future, self._sync_error(code))
        member.join_future = member.sync_future = None
        self._drop_member(group, member)

    def _after_removal(self, group: Group, reason: str) -> None:
        if group.state in (STABLE, COMPLETING_REBALANCE):
            if group.members:
                self._prepare_rebalance(group, reason)
            else:
                self._prepare_rebalance(group, reason)  # completes at once into Empty
        elif group.state == PREPARING_REBALANCE:
            self._try_complete_join(group)

    # -- offsets, admin --------------------------------------------------------------------
    def validate_offset_commit(self, group_id: str, member_id: str, generation_id: int,
                               group_instance_id: str | None) -> int:
        """Whether (member, generation) may commit offsets for ``group_id`` now."""
        if self._closed:
            return E.COORDINATOR_NOT_AVAILABLE
        if not group_id or is_reserved_group(group_id):
            return E.INVALID_GROUP_ID
        group = self.groups.get(group_id)
        if group is None or group.state in (EMPTY, DEAD):
            if generation_id < 0:
                # a standalone consumer (assign + commit) or an admin tool keeps offsets here
                # without joining the group
                return E.NONE
            return E.ILLEGAL_GENERATION if group is None else E.UNKNOWN_MEMBER_ID
        if group_instance_id is not None and group.static_members.get(group_instance_id) not in (None, member_id):
            return E.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return E.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return E.ILLEGAL_GENERATION
        if group.state == COMPLETING_REBALANCE:
            return E.REBALANCE_IN_PROGRESS
        member = group.members[member_id]
        if member.join_future is None:
            self._schedule_expiry(group, member)
        return E.NONE

    def validate_txn_offset_commit(self, group_id: str, member_id: str, generation_id: int,
                                   group_instance_id: str | None) -> int:
        """Kafka's checks of a TxnOffsetCommit against the group (KIP-447): a member id the group
        does not know, another generation or a replaced static member are refused, so a
        producer whose consumer lost its partitions cannot commit offsets for them."""
        if self._closed:
            return E.COORDINATOR_NOT_AVAILABLE
        if not group_id or is_reserved_group(group_id):
            return E.INVALID_GROUP_ID
        group = self.groups.get(group_id)
        if group is None or group.state == DEAD:
            return E.UNKNOWN_MEMBER_ID if member_id else E.NONE
        if member_id and member_id not in group.members:
            return E.UNKNOWN_MEMBER_ID
        if generation_id >= 0 and generation_id != group.generation_id:
            return E.ILLEGAL_GENERATION
        if group_instance_id is not None and group.static_members.get(group_instance_id) not in (None, member_id):
            return E.FENCED_INSTANCE_ID
        return E.NONE

    def state_of(self, group_id: str) -> str | None:
        group = self.groups.get(group_id)
        return group.state if group is not None else None

    def describe(self, group_id: str) -> dict | None:
        group = self.groups.get(group_id)
        if group is None:
            return None
        in_sync_phase = group.state in (STABLE,)
        return {
            "group_id": group_id, "group_state": group.state, "protocol_type": group.protocol_type or "",
            "protocol_data": group.protocol_name or "",
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                         "client_id": m.client_id, "client_host": m.client_host,
                         "member_metadata": m.metadata_for(group.protocol_name),
                         "member_assignment": m.assignment if in_sync_phase else b""}
                        for m in group.members.values()],
        }

    def listing(self) -> list[tuple[str, str, str]]:
        """(group_id, protocol_type, state) of every group the coordinator holds."""
        return [(g.group_id, g.protocol_type or "", g.state) for g in self.groups.values() if g.state != DEAD]

    def delete_group(self, group_id: str) -> int:
        """Remove an Empty group's membership record; NON_EMPTY_GROUP when it has members."""
        group = self.groups.get(group_id)
        if group is None:
            return E.NONE
        if group.state != EMPTY or group.members:
            return E.NON_EMPTY_GROUP
        for handle in group.pending_members.values():
            handle.cancel()
        group.state = DEAD
        del self.groups[group_id]  # the DeleteGroups handler writes the group's tombstone
        return E.NONE

    # -- conversion to and from the consumer protocol (consumer_groups.py) -------------------
    def forget_group(self, group_id: str, rebalance_code: int | None = None) -> None:
        """The group becomes a consumer group: answer whatever its members have parked (with
        ``rebalance_code`` so they rejoin the consumer group) and drop it with its timers."""
        group = self.groups.pop(group_id, None)
        if group is None:
            return
        if group.rebalance_timer is not None:
            group.rebalance_timer.cancel()
        for handle in group.pending_members.values():
            handle.cancel()
        code = rebalance_code if rebalance_code is not None else E.UNKNOWN_MEMBER_ID
        for m in group.members.values():
            if m.expiry is not None:
                m.expiry.cancel()
            self._resolve(m.join_future, self._join_error(code, m.member_id))
            self._resolve(m.sync_future, self._sync_error(code))
            m.join_future = m.sync_future = None
        group.state = DEAD

    async def store_tombstone(self, group_id: str) -> bool:
        """Delete the group's classic record (its offsets stay)."""
        return await self._store(group_id, None)

    def adopt_group(self, group_id: str, generation: int, members: list) -> Group:
        """A consumer group whose members all speak the classic protocol again becomes a classic
        group (Kafka's online downgrade): same members and assignments, then a rebalance."""
        group = Group(group_id, state=STABLE, generation_id=generation, protocol_type="consumer")
        for m, protocols, assignment in members:
            member = Member(m.member_id, m.instance_id, m.client_id, m.client_host,
                            max(m.classic_session_timeout_ms, self.min_session_timeout_ms),
                            m.rebalance_timeout_ms, "consumer", list(protocols), assignment)
            group.members[member.member_id] = member
            if member.group_instance_id is not None:
                group.static_members[member.group_instance_id] = member.member_id
        group.leader_id = next(iter(group.members), None)
        group.protocol_name = self._select_protocol(group) if group.members else None
        self.groups[group_id] = group
        for member in group.members.values():
            self._schedule_expiry(group, member)
        self._prepare_rebalance(group, "downgraded_from_consumer_protocol")
        return group

    def subscribed_topics(self, group_id: str) -> set[str]:
        group = self.groups.get(group_id)
        return group.subscribed_topics() if group is not None and group.state != EMPTY else set()

    def follow_role(self, master: bool) -> None:
        """The node changed role (failover). Promoted: groups come back from the log as at a
        start (members keep their ids and generation; fresh session timers). Demoted: every
        parked request is answered and every request from here gets COORDINATOR_NOT_AVAILABLE,
        so members find the new master."""
        self.close()
        self.groups.clear()
        if master:
            self._closed = False
            self.restore()

    def close(self) -> None:
        """Answer every parked request and cancel every timer (server shutdown). Group records
        are already in the log (each one was stored as the group changed)."""
        self._closed = True
        for group in self.groups.values():
            if group.rebalance_timer is not None:
                group.rebalance_timer.cancel()
            for handle in group.pending_members.values():
                handle.cancel()
            for m in group.members.values():
                if m.expiry is not None:
                    m.expiry.cancel()
                self._resolve(m.join_future, self._join_error(E.COORDINATOR_NOT_AVAILABLE, m.member_id))
                self._resolve(m.sync_future, self._sync_error(E.COORDINATOR_NOT_AVAILABLE))
