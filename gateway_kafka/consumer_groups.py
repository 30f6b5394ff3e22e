"""Group coordinator of the KIP-848 consumer group protocol (ConsumerGroupHeartbeat) and the
membership of KIP-932 share groups (ShareGroupHeartbeat). See docs/design/consumer-groups.md.

Owns every "modern" group: its group epoch, the target assignment the broker-side assignor
computed for it (and that target's epoch), and per member its subscription (topic names and/or
a regular expression resolved here against the topics that exist), member epoch and where it
is in reconciliation. Classic groups stay with ``coordinator.GroupCoordinator``; a classic group
converts to a consumer group when the first ConsumerGroupHeartbeat arrives (online, its classic
members kept as classic members of the consumer group; offline when it has no members) and back
when the last member speaking the consumer protocol leaves. Offsets are the engine's in both
cases, so a group converted member by member keeps them.

Reconciliation (Kafka's CurrentAssignmentBuilder): a member moves to a new target epoch only
after it has stopped owning every partition the target takes away from it (it reports its owned
partitions in heartbeats); a partition the target gives it while another member still owns it
is handed over once released. So a partition is never owned by two members of a consumer group,
and a member that does not revoke within its rebalance timeout is fenced.

Persistence: the whole group is one ``ModernGroupValue`` record of ``__consumer_offsets`` (the
group's partition; ``records.MODERN_GROUP_KIND``), appended before anything the change implies
is answered; a store refusal answers COORDINATOR_NOT_AVAILABLE and puts the group back as the
last record says. Heartbeats that change nothing write nothing. After a restart (even kill -9)
groups come back with their epochs, targets and member assignments; members keep heartbeating
without a rebalance, each with a fresh session timer.

Invariants: all methods run on the event loop thread; each group's changes are serialised by
that group's asyncio lock (a change = mutate, store, answer); timers only schedule work under the
same lock.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from typing import Any, Callable

import structlog

from engine.consumer_offset import is_reserved_group
from gateway_kafka import assignors
from gateway_kafka import error_codes as E
from gateway_kafka.group_skeleton import GroupError, RecordGroupCoordinator
from gateway_kafka.protocol import records

log = structlog.get_logger("rockafka.kafka.consumer_groups")

from gateway_kafka.modern_group_state import (  # noqa: F401  (the state's names, as the coordinator's)
    CONSUMER, GROUP_TYPE_NAMES, LEAVE_EPOCH, LEAVE_STATIC_EPOCH, ModernGroup, ModernMember, Parts, SHARE, STABLE, UNRELEASED_PARTITIONS, UNREVOKED_PARTITIONS, _parts_list, _parts_of, decode_group, encode_group,
)


def compile_regex(pattern: str) -> re.Pattern:
    """A subscription regex (Java/RE2J syntax, matched against the whole topic name)."""
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise GroupError(E.INVALID_REGULAR_EXPRESSION, f"subscribed topic regex {pattern!r} is not valid: {exc}") \
            from None


class ModernGroupCoordinator(RecordGroupCoordinator):
    RECORD_KIND = records.MODERN_GROUP_KIND
    EVENT = "modern_group"
    DECODE_ERRORS = (records.RecordDecodeError,)

    def __init__(self, gateway: Any, classic: Any, configs: Any):
        super().__init__(gateway, configs, log)
        self.settings = gateway.settings
        self.classic = classic
        self._rebalance_timers: dict[tuple[str, str], asyncio.TimerHandle] = {}
        self._regex_cache: dict[tuple[str, int], list[str]] = {}
        self.share_listeners: list[Callable[[str, ModernGroup | None], None]] = []

    # -- persistence (the skeleton's, with these hooks) --------------------------------------
    encode_group = staticmethod(encode_group)
    decode_group = staticmethod(decode_group)

    def _restored(self, g: ModernGroup) -> None:
        self.classic.forget_group(g.group_id)  # converted: a classic record left behind is stale
        for m in g.members.values():
            self._schedule_session(g, m)

    def _restored_summary(self) -> dict[str, Any]:
        return {"members": sum(len(g.members) for g in self.groups.values())}

    def _after_store(self, g: ModernGroup) -> None:
        if g.group_type == SHARE:
            self._notify_share(g.group_id)

    def _timer_tables(self) -> tuple[dict[tuple[str, str], asyncio.TimerHandle], ...]:
        return (self._session_timers, self._rebalance_timers)

    def _notify_share(self, group_id: str) -> None:
        g = self.groups.get(group_id)
        for cb in list(self.share_listeners):
            try:
                cb(group_id, g)
            except Exception:
                log.exception("share_listener_failed")

    # -- queries ---------------------------------------------------------------------------
    def group_type(self, group_id: str) -> int | None:
        g = self.groups.get(group_id)
        return None if g is None else g.group_type

    def _topics_version(self) -> int:
        return self.gw.store.topic_config.data_version.counter

    def _regex_topics(self, pattern: str) -> list[str]:
        version = self._topics_version()
        key = (pattern, version)
        hit = self._regex_cache.get(key)
        if hit is not None:
            return hit
        from gateway_kafka.apis._common import visible_topics

        rx = compile_regex(pattern)
        # as Kafka's coordinator: the whole name must match, and internal topics are not skipped
        # (excluding them is the client's choice, made in the pattern)
        found = sorted(t for t in visible_topics(self.gw) if rx.fullmatch(t))
        if len(self._regex_cache) > 1000:
            self._regex_cache.clear()
        self._regex_cache[key] = found
        return found

    def subscribed_topics(self, m: ModernMember) -> set[str]:
        topics = set(m.subscribed_topic_names)
        if m.subscribed_topic_regex:
            try:
                topics.update(self._regex_topics(m.subscribed_topic_regex))
            except GroupError:
                pass
        return topics

    def _subscription_metadata(self, g: ModernGroup) -> dict[str, int]:
        out = {}
        for m in g.members.values():
            for t in self.subscribed_topics(m):
                n = self._partitions_of(t)
                if n > 0:
                    out[t] = n
        return out

    def heartbeat_interval_ms(self, g: ModernGroup) -> int:
        name = "share.heartbeat.interval.ms" if g.group_type == SHARE else "consumer.heartbeat.interval.ms"
        return self.configs.get_int(g.group_id, name)

    def session_timeout_ms(self, g: ModernGroup, m: ModernMember) -> int:
        if m.uses_classic and m.classic_session_timeout_ms >= 0:
            return m.classic_session_timeout_ms
        name = "share.session.timeout.ms" if g.group_type == SHARE else "consumer.session.timeout.ms"
        return self.configs.get_int(g.group_id, name)

    # -- timers ----------------------------------------------------------------------------
    def _schedule_session(self, g: ModernGroup, m: ModernMember) -> None:
        self._arm(self._session_timers, (g.group_id, m.member_id), self.session_timeout_ms(g, m) / 1000.0,
                  self._spawn, self._fence_expired, g.group_id, m.member_id, "session_timeout")

    def _cancel_timers(self, group_id: str, member_id: str) -> None:
        for timers in (self._session_timers, self._rebalance_timers):
            h = timers.pop((group_id, member_id), None)
            if h is not None:
                h.cancel()

    def _schedule_rebalance(self, g: ModernGroup, m: ModernMember) -> None:
        key = (g.group_id, m.member_id)
        if key in self._rebalance_timers or self._closed:
            return
        self._rebalance_timers[key] = asyncio.get_running_loop().call_later(
            max(m.rebalance_timeout_ms, 1) / 1000.0, self._spawn, self._fence_expired, g.group_id, m.member_id,
            "rebalance_timeout")

    async def _fence_expired(self, group_id: str, member_id: str, reason: str) -> None:
        if reason == "session_timeout":
            self._session_timers.pop((group_id, member_id), None)
        else:
            self._rebalance_timers.pop((group_id, member_id), None)
        async with self.lock(group_id):
            g = self.groups.get(group_id)
            if g is None or member_id not in g.members:
                return
            m = g.members[member_id]
            if reason == "rebalance_timeout" and m.state != UNREVOKED_PARTITIONS:
                return
            log.info("member_fenced", group=group_id, member=member_id, reason=reason)
            try:
                await self._remove_member(g, m)
            except GroupError:
                pass  # not stored: the timer is gone; the member's next heartbeat or expiry retries

    # -- membership changes -----------------------------------------------------------------
    def _bump(self, g: ModernGroup, reason: str) -> None:
        g.group_epoch += 1
        log.info("group_epoch_bumped", group=g.group_id, epoch=g.group_epoch, reason=reason, members=len(g.members))

    def _maybe_refresh_metadata(self, g: ModernGroup, force: bool = False) -> bool:
        """Bump the group epoch when the subscribed topics or their partition counts changed
        (a topic created that a regex matches, CreatePartitions, a deleted topic)."""
        version = self._topics_version()
        if not force and version == g.metadata_version:
            return False
        g.metadata_version = version
        meta = self._subscription_metadata(g)
        if meta != g.subscription_metadata:
            g.subscription_metadata = meta
            return True
        return False

    def _update_target(self, g: ModernGroup) -> None:
        subs = {mid: {t for t in self.subscribed_topics(m) if t in g.subscription_metadata}
                for mid, m in g.members.items()}
        name = g.assignor or assignors.UNIFORM
        if g.group_type == SHARE:
            name = assignors.SIMPLE
        g.target = assignors.assign(name, subs, g.subscription_metadata, g.target)
        g.assignment_epoch = g.group_epoch
        log.info("target_assignment_computed", group=g.group_id, epoch=g.group_epoch, assignor=name,
                 members=len(g.members), partitions=sum(g.subscription_metadata.values()))

    def _choose_assignor(self, g: ModernGroup) -> None:
        # the most used server assignor among members (Kafka's rule), else the default
        votes: dict[str, int] = {}
        for m in g.members.values():
            if m.server_assignor:
                votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
        g.assignor = max(sorted(votes), key=lambda n: votes[n]) if votes else None

    async def _remove_member(self, g: ModernGroup, m: ModernMember) -> None:
        g.members.pop(m.member_id, None)
        g.target.pop(m.member_id, None)
        self._cancel_timers(g.group_id, m.member_id)
        if g.group_type == CONSUMER and g.members and all(x.uses_classic for x in g.members.values()) \
                and not m.uses_classic:
            await self._downgrade(g)
            return
        self._choose_assignor(g)
        self._maybe_refresh_metadata(g, force=True)
        self._bump(g, "member_removed")
        self._update_target(g)
        await self._store(g)

    # -- reconciliation (Kafka's CurrentAssignmentBuilder) ------------------------------------
    def _reconcile(self, g: ModernGroup, m: ModernMember, owned: Parts | None) -> None:
        target = g.target.get(m.member_id, {})
        if m.state == STABLE:
            if m.member_epoch != g.assignment_epoch:
                self._next_assignment(g, m, m.member_epoch, target, owned)
            return
        if m.state == UNREVOKED_PARTITIONS:
            if _owns_any(owned, m.pending_revocation):
                return
            self._next_assignment(g, m, m.member_epoch + 1, target, owned)
            return
        self._next_assignment(g, m, m.member_epoch, target, owned)

    def _next_assignment(self, g: ModernGroup, m: ModernMember, epoch: int, target: Parts, owned: Parts | None) -> None:
        assigned: Parts = {}
        revoke: Parts = {}
        pending: Parts = {}
        unreleased = False
        for t in set(target) | set(m.assigned):
            tgt = target.get(t, set())
            cur = m.assigned.get(t, set())
            keep = cur & tgt
            if keep:
                assigned[t] = set(keep)
            if cur - keep:
                revoke[t] = cur - keep
            add = set()
            for p in tgt - keep:
                if g.owner_epoch(t, p, m.member_id) != -1:
                    unreleased = True
                else:
                    add.add(p)
            if add:
                pending[t] = add
        if revoke and _owns_any(owned, revoke):
            m.state = UNREVOKED_PARTITIONS
            self._set_epoch(m, epoch)
            m.assigned, m.pending_revocation = assigned, revoke
            self._schedule_rebalance(g, m)
            return
        for t, ps in pending.items():
            assigned.setdefault(t, set()).update(ps)
        m.state = UNRELEASED_PARTITIONS if unreleased else STABLE
        self._set_epoch(m, g.assignment_epoch)
        m.assigned, m.pending_revocation = assigned, {}
        h = self._rebalance_timers.pop((g.group_id, m.member_id), None)
        if h is not None:
            h.cancel()

    @staticmethod
    def _set_epoch(m: ModernMember, epoch: int) -> None:
        if epoch != m.member_epoch:
            m.previous_member_epoch = m.member_epoch
            m.member_epoch = epoch

    # -- ConsumerGroupHeartbeat ---------------------------------------------------------------
    def _topic_ids_to_parts(self, items: list[dict] | None) -> Parts | None:
        if items is None:
            return None
        from gateway_kafka.apis._common import topic_by_id

        out: Parts = {}
        for tp in items:
            name = topic_by_id(self.gw, tp.get("topic_id"))
            if name is not None:
                out.setdefault(name, set()).update(tp.get("partitions") or ())
        return out

    def assignment_body(self, parts: Parts) -> dict:
        from gateway_kafka.apis._common import topic_id

        return {"topic_partitions": [{"topic_id": topic_id(t), "partitions": sorted(ps)}
                                     for t, ps in sorted(parts.items()) if ps]}

    def _get_or_create(self, group_id: str, group_type: int, create: bool) -> ModernGroup:
        g = self.groups.get(group_id)
        if g is not None:
            if g.group_type != group_type:
                raise GroupError(E.GROUP_ID_NOT_FOUND if group_type == CONSUMER else E.INCONSISTENT_GROUP_PROTOCOL,
                                 f"group {group_id!r} is a {GROUP_TYPE_NAMES[g.group_type]} group")
            return g
        if not create:
            raise GroupError(E.GROUP_ID_NOT_FOUND, f"group {group_id!r} does not exist")
        g = ModernGroup(group_id, group_type)
        self.groups[group_id] = g
        return g

    async def consumer_heartbeat(self, req: dict, client_id: str, client_host: str, api_version: int) -> dict:
        group_id = req.get("group_id") or ""
        member_id = req.get("member_id") or ""
        epoch = req.get("member_epoch", 0)
        resp = {"throttle_time_ms": 0, "error_code": E.NONE, "error_message": None, "member_id": member_id,
                "member_epoch": epoch, "heartbeat_interval_ms": 0, "assignment": None}
        try:
            if self._closed:
                raise GroupError(E.COORDINATOR_NOT_AVAILABLE, "the coordinator is shutting down")
            self._validate_consumer_request(req, api_version)
            if not member_id:
                member_id = resp["member_id"] = str(uuid.uuid4()) if api_version == 0 else member_id
            async with self.lock(group_id):
                if epoch in (LEAVE_EPOCH, LEAVE_STATIC_EPOCH):
                    return await self._consumer_leave(group_id, member_id, req.get("instance_id"), epoch, resp)
                await self._maybe_convert_classic(group_id, epoch)
                return await self._consumer_heartbeat(req, group_id, member_id, epoch, client_id, client_host, resp)
        except GroupError as exc:
            resp.update(error_code=exc.code, error_message=exc.message)
            return resp

    def _validate_consumer_request(self, req: dict, api_version: int) -> None:
        if not req.get("group_id"):
            raise GroupError(E.INVALID_REQUEST, "GroupId can't be empty.")
        if is_reserved_group(req["group_id"]):
            raise GroupError(E.INVALID_GROUP_ID, "GroupIds beginning with a NUL character are reserved.")
        if api_version >= 1 and not req.get("member_id"):
            raise GroupError(E.INVALID_REQUEST, "MemberId can't be empty.")
        epoch = req.get("member_epoch", 0)
        if epoch == 0:
            if req.get("rebalance_timeout_ms", -1) == -1:
                raise GroupError(E.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
            if req.get("topic_partitions") is None:
                raise GroupError(E.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining.")
            if req.get("subscribed_topic_names") is None and req.get("subscribed_topic_regex") is None:
                raise GroupError(E.INVALID_REQUEST,
                                 "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        elif epoch == LEAVE_STATIC_EPOCH and req.get("instance_id") is None:
            raise GroupError(E.INVALID_REQUEST, "InstanceId can't be null when leaving with epoch -2.")
        elif epoch < LEAVE_STATIC_EPOCH:
            raise GroupError(E.INVALID_REQUEST, f"MemberEpoch {epoch} is not valid.")
        name = req.get("server_assignor")
        if name is not None and name not in assignors.CONSUMER_ASSIGNORS:
            raise GroupError(E.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {name} is not supported. Supported "
                                                     f"assignors: {', '.join(assignors.CONSUMER_ASSIGNORS)}.")
        rx = req.get("subscribed_topic_regex")
        if rx:
            compile_regex(rx)

    async def _consumer_heartbeat(self, req: dict, group_id: str, member_id: str, epoch: int, client_id: str,
                                  client_host: str, resp: dict) -> dict:
        create = epoch == 0
        g = self._get_or_create(group_id, CONSUMER, create)
        owned = self._topic_ids_to_parts(req.get("topic_partitions"))
        instance_id = req.get("instance_id")
        m, replaced = self._member_for(g, member_id, epoch, instance_id, owned, create)
        if len(g.members) + (0 if m.member_id in g.members or replaced else 1) > self.settings.consumer_max_size:
            raise GroupError(E.GROUP_MAX_SIZE_REACHED,
                             f"the consumer group has reached its maximum size of {self.settings.consumer_max_size}")
        is_new = m.member_id not in g.members
        before = (list(m.subscribed_topic_names), m.subscribed_topic_regex, m.server_assignor, m.rack_id)
        if req.get("rebalance_timeout_ms", -1) != -1:
            m.rebalance_timeout_ms = req["rebalance_timeout_ms"]
        if instance_id is not None:
            m.instance_id = instance_id
        if req.get("rack_id") is not None:
            m.rack_id = req["rack_id"]
        if req.get("server_assignor") is not None:
            m.server_assignor = req["server_assignor"]
        if req.get("subscribed_topic_names") is not None:
            m.subscribed_topic_names = sorted(set(req["subscribed_topic_names"]))
        if req.get("subscribed_topic_regex") is not None:
            m.subscribed_topic_regex = req["subscribed_topic_regex"] or None
        m.client_id, m.client_host = client_id, client_host
        m.classic_protocols, m.classic_session_timeout_ms = None, -1
        if replaced is not None:
            g.members.pop(replaced.member_id, None)
            g.target[m.member_id] = g.target.pop(replaced.member_id, {})
            self._cancel_timers(group_id, replaced.member_id)
        g.members[m.member_id] = m
        sub_changed = (is_new and replaced is None) or before != (
            m.subscribed_topic_names, m.subscribed_topic_regex, m.server_assignor, m.rack_id)
        if sub_changed:
            self._choose_assignor(g)
        meta_changed = self._maybe_refresh_metadata(g, force=sub_changed)
        if sub_changed or meta_changed:
            self._bump(g, "member_joined" if is_new else "subscription_changed" if sub_changed else "metadata_changed")
        if g.group_epoch > g.assignment_epoch:
            self._update_target(g)
        old_assigned = {t: set(ps) for t, ps in m.assigned.items()}
        before_state = (m.member_epoch, m.state)
        self._reconcile(g, m, owned)
        if (m.member_epoch, m.state) != before_state or m.assigned != old_assigned:
            log.info("member_reconciled", group=group_id, member=m.member_id, epoch=m.member_epoch,
                     state={STABLE: "stable", UNREVOKED_PARTITIONS: "unrevoked_partitions",
                            UNRELEASED_PARTITIONS: "unreleased_partitions"}.get(m.state, m.state),
                     partitions=sum(len(ps) for ps in m.assigned.values()),
                     revoking=sum(len(ps) for ps in m.pending_revocation.values()))
        await self._store(g)
        self._schedule_session(g, m)
        resp.update(member_id=m.member_id, member_epoch=m.member_epoch,
                    heartbeat_interval_ms=self.heartbeat_interval_ms(g))
        full = epoch == 0 or (req.get("rebalance_timeout_ms", -1) != -1 and req.get("subscribed_topic_names") is not None
                              and req.get("topic_partitions") is not None)
        if full or m.assigned != old_assigned:
            resp["assignment"] = self.assignment_body(m.assigned)
        return resp

    def _member_for(self, g: ModernGroup, member_id: str, epoch: int, instance_id: str | None, owned: Parts | None,
                    create: bool) -> tuple[ModernMember, ModernMember | None]:
        """(the member the request speaks for, the static member it replaces or None)."""
        if instance_id is None:
            m = g.members.get(member_id)
            if m is None:
                if not create:
                    raise GroupError(E.UNKNOWN_MEMBER_ID, f"member {member_id} is not a member of group {g.group_id}")
                log.info("member_joined", group=g.group_id, member=member_id, protocol="consumer")
                return ModernMember(member_id), None
            if create:
                # rejoining with epoch 0 (after being fenced, or a retried first heartbeat): it
                # owns nothing now and is reconciled from scratch under its id
                m.member_epoch = m.previous_member_epoch = 0
                m.state, m.assigned, m.pending_revocation = STABLE, {}, {}
                return m, None
            self._check_epoch(m, epoch, owned)
            return m, None
        old = g.static_member(instance_id)
        if create:
            if old is None:
                m = g.members.get(member_id) or ModernMember(member_id)
                log.info("member_joined", group=g.group_id, member=member_id, instance_id=instance_id,
                         protocol="consumer")
                return m, None
            if old.member_id == member_id:
                return old, None
            if old.member_epoch != LEAVE_STATIC_EPOCH and not old.uses_classic:
                raise GroupError(E.UNRELEASED_INSTANCE_ID,
                                 f"static member {old.member_id} with instance id {instance_id} is still active; "
                                 f"it must leave before {member_id} can take its place")
            new = ModernMember(member_id, instance_id, old.rack_id, old.client_id, old.client_host,
                               old.rebalance_timeout_ms, old.server_assignor, list(old.subscribed_topic_names),
                               old.subscribed_topic_regex, 0, 0, STABLE,
                               {t: set(ps) for t, ps in old.assigned.items()}, {}, -1, None)
            log.info("static_member_replaced", group=g.group_id, instance_id=instance_id, old=old.member_id,
                     new=member_id)
            return new, old
        if old is None:
            raise GroupError(E.UNKNOWN_MEMBER_ID, f"instance id {instance_id} is unknown")
        if old.member_id != member_id:
            raise GroupError(E.FENCED_INSTANCE_ID, f"static member {member_id} with instance id {instance_id} "
                                                   f"was replaced by {old.member_id}")
        self._check_epoch(old, epoch, owned)
        return old, None

    @staticmethod
    def _check_epoch(m: ModernMember, epoch: int, owned: Parts | None) -> None:
        if epoch > m.member_epoch:
            raise GroupError(E.FENCED_MEMBER_EPOCH, f"the member's epoch {epoch} is newer than the group's "
                                                    f"{m.member_epoch}; it must rejoin")
        if epoch < m.member_epoch and (epoch != m.previous_member_epoch or not _subset(owned, m.assigned)):
            raise GroupError(E.FENCED_MEMBER_EPOCH, f"the member's epoch {epoch} is older than the group's "
                                                    f"{m.member_epoch}; it must rejoin")

    async def _consumer_leave(self, group_id: str, member_id: str, instance_id: str | None, epoch: int,
                              resp: dict) -> dict:
        g = self.groups.get(group_id)
        if g is None or g.group_type != CONSUMER:
            raise GroupError(E.GROUP_ID_NOT_FOUND, f"group {group_id!r} is not a consumer group")
        if instance_id is None:
            m = g.members.get(member_id)
            if m is None:
                raise GroupError(E.UNKNOWN_MEMBER_ID, f"member {member_id} is not a member of group {group_id}")
        else:
            m = g.static_member(instance_id)
            if m is None:
                raise GroupError(E.UNKNOWN_MEMBER_ID, f"instance id {instance_id} is unknown")
            if m.member_id != member_id:
                raise GroupError(E.FENCED_INSTANCE_ID, f"instance id {instance_id} belongs to {m.member_id}")
            if epoch == LEAVE_STATIC_EPOCH:
                # a static member leaving for a restart: its partitions wait for it (session timeout)
                m.member_epoch = LEAVE_STATIC_EPOCH
                m.pending_revocation = {}
                await self._store(g)
                log.info("static_member_left_temporarily", group=group_id, member=member_id, instance_id=instance_id)
                resp["member_epoch"] = LEAVE_STATIC_EPOCH
                return resp
        log.info("member_left", group=group_id, member=m.member_id)
        await self._remove_member(g, m)
        resp["member_epoch"] = LEAVE_EPOCH
        return resp

    # -- conversion between the classic and the consumer protocol ------------------------------
    async def _maybe_convert_classic(self, group_id: str, epoch: int) -> None:
        """A ConsumerGroupHeartbeat for a group the classic coordinator holds."""
        cg = self.classic.groups.get(group_id)
        if cg is None or group_id in self.groups:
            return
        if epoch != 0:
            raise GroupError(E.UNKNOWN_MEMBER_ID, f"group {group_id!r} is a classic group")
        from gateway_kafka.coordinator import DEAD, EMPTY

        if cg.state in (EMPTY, DEAD) or not cg.members:
            # offline conversion: nothing but the classic group's record (offsets stay)
            self.classic.forget_group(group_id)
            await self.classic.store_tombstone(group_id)
            log.info("group_converted", group=group_id, to="consumer", online=False)
            return
        if cg.protocol_type != "consumer":
            raise GroupError(E.GROUP_ID_NOT_FOUND, f"group {group_id!r} is a classic group of protocol type "
                                                   f"{cg.protocol_type!r}; it cannot become a consumer group")
        if len(cg.members) > self.settings.consumer_max_size:
            raise GroupError(E.GROUP_ID_NOT_FOUND, f"classic group {group_id!r} is larger than a consumer group "
                                                   f"may be")
        g = ModernGroup(group_id, CONSUMER, cg.generation_id, cg.generation_id)
        for cm in cg.members.values():
            try:
                sub = records.decode("ConsumerProtocolSubscription", cm.metadata_for(cg.protocol_name))
                asg = records.decode("ConsumerProtocolAssignment", cm.assignment) if cm.assignment else \
                    {"assigned_partitions": []}
            except records.RecordDecodeError as exc:
                raise GroupError(E.GROUP_ID_NOT_FOUND, f"classic group {group_id!r} cannot be upgraded: a member's "
                                                       f"consumer protocol data is malformed ({exc})") from None
            assigned = _parts_of(asg["assigned_partitions"])
            g.members[cm.member_id] = ModernMember(
                cm.member_id, cm.group_instance_id, sub.get("rack_id"), cm.client_id, cm.client_host,
                cm.rebalance_timeout_ms, None, sorted(set(sub["topics"])), None, cg.generation_id, cg.generation_id,
                STABLE, assigned, {}, cm.session_timeout_ms, list(cm.protocols))
            g.target[cm.member_id] = {t: set(ps) for t, ps in assigned.items()}
        g.metadata_version = -1
        self._maybe_refresh_metadata(g, force=True)
        self.classic.forget_group(group_id, rebalance_code=E.REBALANCE_IN_PROGRESS)
        self.groups[group_id] = g
        await self.classic.store_tombstone(group_id)
        for m in g.members.values():
            self._schedule_session(g, m)
        log.info("group_converted", group=group_id, to="consumer", online=True, members=len(g.members))

    async def _downgrade(self, g: ModernGroup) -> None:
        """The last member speaking the consumer protocol left: the classic members carry on as
        a classic group (Kafka's online downgrade), which rebalances."""
        del self.groups[g.group_id]
        for mid in list(g.members):
            self._cancel_timers(g.group_id, mid)
        await self._store(g)  # the tombstone
        members = []
        for m in g.members.values():
            protocols = m.classic_protocols or []
            version = 0
            if protocols:
                try:
                    version, _ = records.decode_versioned("ConsumerProtocolSubscription", protocols[0][1])
                except records.RecordDecodeError:
                    version = 0
            assignment = records.encode("ConsumerProtocolAssignment",
                                        {"assigned_partitions": _parts_list(m.assigned)}, version=min(version, 3))
            members.append((m, protocols, assignment))
        self.classic.adopt_group(g.group_id, g.group_epoch, members)
        log.info("group_converted", group=g.group_id, to="classic", online=True, members=len(members))

    # -- classic members of a consumer group ----------------------------------------------------
    async def classic_join(self, *, group_id: str, member_id: str, group_instance_id: str | None,
                           protocol_type: str, protocols: list[tuple[str, bytes]], session_timeout_ms: int,
                           rebalance_timeout_ms: int, client_id: str, client_host: str,
                           require_known_member_id: bool) -> dict:
        def error(code: int) -> dict:
            return {"error_code": code, "generation_id": -1, "protocol_type": None, "protocol_name": None,
                    "leader": "", "skip_assignment": False, "member_id": member_id, "members": []}

        async with self.lock(group_id):
            g = self.groups.get(group_id)
            if g is None:
                return None  # type: ignore[return-value]  # the classic coordinator takes it
            if g.group_type == CONSUMER and not g.members:
                # offline conversion: an empty consumer group becomes a classic group (offsets stay)
                del self.groups[group_id]
                try:
                    await self._store(g)  # its tombstone
                except GroupError as exc:
                    return error(exc.code)
                log.info("group_converted", group=group_id, to="classic", online=False)
                return None  # type: ignore[return-value]
            if g.group_type != CONSUMER or protocol_type != "consumer" or not protocols:
                return error(E.INCONSISTENT_GROUP_PROTOCOL)
            if not (self.classic.min_session_timeout_ms <= session_timeout_ms <= self.classic.max_session_timeout_ms):
                return error(E.INVALID_SESSION_TIMEOUT)
            unknown = not member_id
            if unknown:
                member_id = str(uuid.uuid4())
                if group_instance_id is None and require_known_member_id:
                    r = error(E.MEMBER_ID_REQUIRED)
                    r["member_id"] = member_id
                    return r
            try:
                sub = records.decode("ConsumerProtocolSubscription", protocols[0][1])
            except records.RecordDecodeError as exc:
                r = error(E.INCONSISTENT_GROUP_PROTOCOL)
                log.warning("classic_member_refused", group=group_id, error=str(exc))
                return r
            replaced = None
            if group_instance_id is not None:
                old = g.static_member(group_instance_id)
                if old is not None and old.member_id != member_id:
                    if not unknown:
                        return error(E.FENCED_INSTANCE_ID)
                    replaced = old
            m = g.members.get(member_id)
            if m is None:  # as Kafka: a classic join creates the member (also with the id MEMBER_ID_REQUIRED gave)
                if len(g.members) + (0 if replaced else 1) > self.settings.consumer_max_size:
                    return error(E.GROUP_MAX_SIZE_REACHED)
                if replaced is not None:
                    m = ModernMember(member_id, group_instance_id, replaced.rack_id, member_epoch=0,
                                     assigned={t: set(ps) for t, ps in replaced.assigned.items()})
                else:
                    m = ModernMember(member_id, group_instance_id)
                log.info("member_joined", group=group_id, member=member_id, protocol="classic")
            is_new = member_id not in g.members
            before = (list(m.subscribed_topic_names), m.rack_id)
            m.rebalance_timeout_ms = rebalance_timeout_ms if rebalance_timeout_ms >= 0 else session_timeout_ms
            m.subscribed_topic_names = sorted(set(sub["topics"]))
            m.subscribed_topic_regex = None
            m.rack_id = sub.get("rack_id")
            m.client_id, m.client_host = client_id, client_host
            m.classic_session_timeout_ms, m.classic_protocols = session_timeout_ms, list(protocols)
            if replaced is not None:
                g.members.pop(replaced.member_id, None)
                g.target[member_id] = g.target.pop(replaced.member_id, {})
                self._cancel_timers(group_id, replaced.member_id)
            g.members[member_id] = m
            changed = is_new or before != (m.subscribed_topic_names, m.rack_id)
            if self._maybe_refresh_metadata(g, force=changed) or (changed and replaced is None):
                self._bump(g, "member_joined" if is_new else "subscription_changed")
            if g.group_epoch > g.assignment_epoch:
                self._update_target(g)
            owned = _parts_of(sub.get("owned_partitions") or [])
            self._reconcile(g, m, owned)
            try:
                await self._store(g)
            except GroupError as exc:
                return error(exc.code)
            self._schedule_session(g, m)
            return {"error_code": E.NONE, "generation_id": m.member_epoch, "protocol_type": "consumer",
                    "protocol_name": protocols[0][0], "leader": "", "skip_assignment": False,
                    "member_id": member_id, "members": []}

    def _classic_member(self, g: ModernGroup, member_id: str, instance_id: str | None) -> ModernMember:
        m = g.members.get(member_id)
        if m is None:
            if instance_id is not None and g.static_member(instance_id) is not None:
                raise GroupError(E.FENCED_INSTANCE_ID, "replaced by another static member")
            raise GroupError(E.UNKNOWN_MEMBER_ID, f"member {member_id} is not a member of group {g.group_id}")
        if instance_id is not None and m.instance_id != instance_id:
            raise GroupError(E.FENCED_INSTANCE_ID, "the instance id does not match")
        if not m.uses_classic:
            raise GroupError(E.UNKNOWN_MEMBER_ID, f"member {member_id} uses the consumer protocol")
        return m

    async def classic_sync(self, *, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                           protocol_type: str | None, protocol_name: str | None) -> dict | None:
        g = self.groups.get(group_id)
        if g is None:
            return None
        try:
            m = self._classic_member(g, member_id, group_instance_id)
            if generation_id != m.member_epoch:
                raise GroupError(E.ILLEGAL_GENERATION, "stale generation")
            if (protocol_type is not None and protocol_type != "consumer") or (
                    protocol_name is not None and protocol_name not in [n for n, _ in m.classic_protocols or ()]):
                raise GroupError(E.INCONSISTENT_GROUP_PROTOCOL, "protocol mismatch")
            if self._must_rejoin(g, m):
                raise GroupError(E.REBALANCE_IN_PROGRESS, "rejoin")
        except GroupError as exc:
            return {"error_code": exc.code, "protocol_type": None, "protocol_name": None, "assignment": b""}
        self._schedule_session(g, m)
        version = 0
        try:
            version, _ = records.decode_versioned("ConsumerProtocolSubscription", (m.classic_protocols or [])[0][1])
        except (records.RecordDecodeError, IndexError):
            pass
        assignment = records.encode("ConsumerProtocolAssignment", {"assigned_partitions": _parts_list(m.assigned)},
                                    version=min(version, 3))
        return {"error_code": E.NONE, "protocol_type": "consumer",
                "protocol_name": protocol_name or (m.classic_protocols or [("", b"")])[0][0], "assignment": assignment}

    def _must_rejoin(self, g: ModernGroup, m: ModernMember) -> bool:
        if m.member_epoch < g.group_epoch or m.state == UNREVOKED_PARTITIONS:
            return True
        if m.state == UNRELEASED_PARTITIONS:
            target = g.target.get(m.member_id, {})
            return any(g.owner_epoch(t, p, m.member_id) == -1 for t, ps in target.items() for p in ps
                       if p not in m.assigned.get(t, ()))
        return False

    def classic_heartbeat(self, *, group_id: str, member_id: str, generation_id: int,
                          group_instance_id: str | None) -> int | None:
        g = self.groups.get(group_id)
        if g is None:
            return None
        try:
            m = self._classic_member(g, member_id, group_instance_id)
            if generation_id != m.member_epoch:
                raise GroupError(E.ILLEGAL_GENERATION, "stale generation")
        except GroupError as exc:
            return exc.code
        self._schedule_session(g, m)
        if self._must_rejoin(g, m):
            if m.state == UNREVOKED_PARTITIONS:
                self._schedule_rebalance(g, m)
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    async def classic_leave(self, group_id: str, leaving: list[tuple[str, str | None]]) -> tuple[int, list[dict]] | None:
        if group_id not in self.groups:
            return None
        results = []
        async with self.lock(group_id):
            for member_id, instance_id in leaving:
                g = self.groups.get(group_id)
                code = E.NONE
                if g is None:
                    code = E.UNKNOWN_MEMBER_ID
                else:
                    m = g.static_member(instance_id) if instance_id is not None else g.members.get(member_id)
                    if m is None:
                        code = E.UNKNOWN_MEMBER_ID
                    elif instance_id is not None and member_id and m.member_id != member_id:
                        code = E.FENCED_INSTANCE_ID
                    else:
                        member_id = m.member_id
                        try:
                            await self._remove_member(g, m)
                        except GroupError as exc:
                            code = exc.code
                results.append({"member_id": member_id, "group_instance_id": instance_id, "error_code": code})
        return E.NONE, results

    # -- offsets ---------------------------------------------------------------------------
    def validate_offset_commit(self, group_id: str, member_id: str, epoch: int, instance_id: str | None,
                               api_version: int, transactional: bool = False) -> int | None:
        """None: not a modern group (the classic rules apply); else the error code."""
        g = self.groups.get(group_id)
        if g is None:
            return None
        if g.group_type == SHARE:
            return E.GROUP_ID_NOT_FOUND
        if epoch < 0 and not g.members:
            return E.NONE
        m = g.members.get(member_id)
        if m is None:
            return E.UNKNOWN_MEMBER_ID
        if not transactional and not m.uses_classic and api_version < 9:
            return E.UNSUPPORTED_VERSION
        if epoch != m.member_epoch:
            return E.ILLEGAL_GENERATION if m.uses_classic else E.STALE_MEMBER_EPOCH
        return E.NONE

    def validate_offset_fetch(self, group_id: str, member_id: str | None, epoch: int) -> int:
        g = self.groups.get(group_id)
        if g is None or (not member_id and epoch < 0):
            return E.NONE
        m = g.members.get(member_id or "")
        if m is None:
            return E.UNKNOWN_MEMBER_ID
        if epoch != m.member_epoch:
            return E.ILLEGAL_GENERATION if m.uses_classic else E.STALE_MEMBER_EPOCH
        return E.NONE

    # -- admin -----------------------------------------------------------------------------
    def listing(self) -> list[tuple[str, str, str, str]]:
        """(group id, protocol type, state, group type) of every modern group."""
        return [(g.group_id, "consumer" if g.group_type == CONSUMER else "share", g.state_name(),
                 GROUP_TYPE_NAMES[g.group_type]) for g in self.groups.values()]

    def describe(self, group_id: str, group_type: int) -> dict:
        """ConsumerGroupDescribe / ShareGroupDescribe entry of one group."""
        from gateway_kafka.apis._common import topic_id

        g = self.groups.get(group_id)
        base = {"error_code": E.NONE, "error_message": None, "group_id": group_id, "group_state": "Dead",
                "group_epoch": -1, "assignment_epoch": -1, "assignor_name": "", "members": []}
        if g is None or g.group_type != group_type:
            what = "consumer" if group_type == CONSUMER else "share"
            base.update(error_code=E.GROUP_ID_NOT_FOUND, error_message=f"Group {group_id} is not a {what} group.")
            return base

        def parts(p: Parts) -> dict:
            return {"topic_partitions": [{"topic_id": topic_id(t), "topic_name": t, "partitions": sorted(ps)}
                                         for t, ps in sorted(p.items()) if ps]}

        members = []
        for m in g.members.values():
            entry = {"member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
                     "member_epoch": m.member_epoch, "client_id": m.client_id, "client_host": m.client_host,
                     "subscribed_topic_names": sorted(self.subscribed_topics(m)) if group_type == SHARE
                     else list(m.subscribed_topic_names),
                     "subscribed_topic_regex": m.subscribed_topic_regex, "assignment": parts(m.assigned),
                     "target_assignment": parts(g.target.get(m.member_id, {})),
                     "member_type": 0 if m.uses_classic else 1}
            members.append(entry)
        base.update(group_state=g.state_name(), group_epoch=g.group_epoch, assignment_epoch=g.assignment_epoch,
                    assignor_name=(g.assignor or assignors.UNIFORM) if group_type == CONSUMER else assignors.SIMPLE,
                    members=members)
        return base

    def classic_view(self, group_id: str) -> dict | None:
        """DescribeGroups of a modern group: Kafka answers with a classic-looking view."""
        g = self.groups.get(group_id)
        if g is None:
            return None
        members = []
        for m in g.members.values():
            meta = (m.classic_protocols or [("", b"")])[0][1] if m.uses_classic else records.encode(
                "ConsumerProtocolSubscription", {"topics": sorted(self.subscribed_topics(m)), "owned_partitions": []},
                version=1)
            members.append({"member_id": m.member_id, "group_instance_id": m.instance_id, "client_id": m.client_id,
                            "client_host": m.client_host, "member_metadata": meta,
                            "member_assignment": records.encode("ConsumerProtocolAssignment",
                                                                {"assigned_partitions": _parts_list(m.assigned)},
                                                                version=0)})
        return {"group_id": group_id, "group_state": g.state_name(),
                "protocol_type": "consumer" if g.group_type == CONSUMER else "share",
                "protocol_data": (g.assignor or assignors.UNIFORM) if g.group_type == CONSUMER else "",
                "members": members}

    async def delete_group(self, group_id: str) -> int | None:
        """None: not a modern group; NON_EMPTY_GROUP with members; else the group is gone (the
        DeleteGroups handler writes the group's tombstones)."""
        g = self.groups.get(group_id)
        if g is None:
            return None
        if g.members:
            return E.NON_EMPTY_GROUP
        del self.groups[group_id]
        self._records.pop(group_id, None)
        if g.group_type == SHARE:
            self._notify_share(group_id)
        return E.NONE

    def subscribed_topics_of_group(self, group_id: str) -> set[str]:
        g = self.groups.get(group_id)
        if g is None:
            return set()
        out: set[str] = set()
        for m in g.members.values():
            out |= self.subscribed_topics(m)
        return out

    # -- share groups ----------------------------------------------------------------------
    async def share_heartbeat(self, req: dict, client_id: str, client_host: str) -> dict:
        group_id = req.get("group_id") or ""
        member_id = req.get("member_id") or ""
        epoch = req.get("member_epoch", 0)
        resp = {"throttle_time_ms": 0, "error_code": E.NONE, "error_message": None, "member_id": member_id,
                "member_epoch": epoch, "heartbeat_interval_ms": 0, "assignment": None}
        try:
            if self._closed:
                raise GroupError(E.COORDINATOR_NOT_AVAILABLE, "the coordinator is shutting down")
            if not group_id:
                raise GroupError(E.INVALID_REQUEST, "GroupId can't be empty.")
            if is_reserved_group(group_id):
                raise GroupError(E.INVALID_GROUP_ID, "GroupIds beginning with a NUL character are reserved.")
            if not member_id:
                raise GroupError(E.INVALID_REQUEST, "MemberId can't be empty.")
            if epoch == 0 and req.get("subscribed_topic_names") is None:
                raise GroupError(E.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
            if epoch < LEAVE_EPOCH:
                raise GroupError(E.INVALID_REQUEST, f"MemberEpoch {epoch} is not valid.")
            if group_id in self.classic.groups and group_id not in self.groups:
                cg = self.classic.groups[group_id]
                if cg.members:
                    raise GroupError(E.GROUP_ID_NOT_FOUND, f"group {group_id!r} is a classic group")
            async with self.lock(group_id):
                if epoch == LEAVE_EPOCH:
                    g = self.groups.get(group_id)
                    m = g.members.get(member_id) if g is not None and g.group_type == SHARE else None
                    if m is None:
                        raise GroupError(E.UNKNOWN_MEMBER_ID, f"member {member_id} is not a member of {group_id}")
                    log.info("member_left", group=group_id, member=member_id)
                    await self._remove_member(g, m)
                    resp["member_epoch"] = LEAVE_EPOCH
                    return resp
                g = self._get_or_create(group_id, SHARE, epoch == 0)
                m = g.members.get(member_id)
                if m is None:
                    if epoch != 0:
                        raise GroupError(E.UNKNOWN_MEMBER_ID, f"member {member_id} is not a member of {group_id}")
                    if len(g.members) >= self.settings.share_max_size:
                        raise GroupError(E.GROUP_MAX_SIZE_REACHED, "the share group has reached its maximum size")
                    m = ModernMember(member_id)
                    log.info("member_joined", group=group_id, member=member_id, protocol="share")
                elif epoch != 0:
                    if epoch > m.member_epoch or (epoch < m.member_epoch and epoch != m.previous_member_epoch):
                        raise GroupError(E.FENCED_MEMBER_EPOCH, f"the member's epoch {epoch} is not the group's "
                                                                f"{m.member_epoch}; it must rejoin")
                is_new = member_id not in g.members
                before = (list(m.subscribed_topic_names), m.rack_id)
                if req.get("subscribed_topic_names") is not None:
                    m.subscribed_topic_names = sorted(set(req["subscribed_topic_names"]))
                if req.get("rack_id") is not None:
                    m.rack_id = req["rack_id"]
                m.client_id, m.client_host = client_id, client_host
                g.members[member_id] = m
                changed = is_new or before != (m.subscribed_topic_names, m.rack_id)
                if self._maybe_refresh_metadata(g, force=changed) or changed:
                    self._bump(g, "member_joined" if is_new else "subscription_changed")
                if g.group_epoch > g.assignment_epoch:
                    self._update_target(g)
                old = {t: set(ps) for t, ps in m.assigned.items()}
                target = g.target.get(member_id, {})
                m.assigned = {t: set(ps) for t, ps in target.items()}
                self._set_epoch(m, g.assignment_epoch)
                await self._store(g)
                self._schedule_session(g, m)
                resp.update(member_epoch=m.member_epoch, heartbeat_interval_ms=self.heartbeat_interval_ms(g))
                if epoch == 0 or m.assigned != old:
                    resp["assignment"] = self.assignment_body(m.assigned)
                return resp
        except GroupError as exc:
            resp.update(error_code=exc.code, error_message=exc.message)
            return resp


def _owns_any(owned: Parts | None, parts: Parts) -> bool:
    if owned is None:
        return True  # the member did not say: assume it still owns them (Kafka's rule)
    return any(owned.get(t, set()) & ps for t, ps in parts.items())


def _subset(owned: Parts | None, assigned: Parts) -> bool:
    if owned is None:
        return True
    return all(ps <= assigned.get(t, set()) for t, ps in owned.items())


def now_ms() -> int:
    return int(time.time() * 1000)
