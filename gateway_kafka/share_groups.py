"""KIP-932 share groups on the engine's POP: share sessions, ShareFetch and ShareAcknowledge.

Membership and assignment (ShareGroupHeartbeat) are ``consumer_groups.ModernGroupCoordinator``'s;
this module owns what a member does with its partitions. A share-partition (group, topic,
partition) is the engine's POP of that group on the partition's queue
(``engine.pop.PopService.share_*``): acquiring records writes a checkpoint (CK) to the revive log
with the member, the acquisition lock (= invisible time, ``share.record.lock.duration.ms``), the
delivery limit (``share.delivery.count.limit``) and the dead-letter topic; acknowledgements are
ACK records of that log. The records stay at their offsets (no retry-topic copy), so a Kafka
client sees them again at the same offset with a higher delivery count. See
docs/design/share-groups.md.

Share sessions (Kafka's ShareSessionCache) are memory only, per (group, member): the partitions
the member fetches and the next expected session epoch. ShareFetch and ShareAcknowledge share
one epoch sequence: 0 opens a session, -1 closes it (acknowledgements only), any other must be
the next one (else INVALID_SHARE_SESSION_EPOCH; no session: SHARE_SESSION_NOT_FOUND). A broker
restart loses the sessions; clients open new ones, and records locked before the restart are
delivered again once their lock expires.

Invariants: runs on the event loop; engine calls that write the revive log go through the
executor (they may wait for a flush); a member that leaves the group (or whose session ends)
releases what it holds, one delivery counted, as Kafka does.
"""

from __future__ import annotations

import asyncio
import bisect
import uuid
from dataclasses import dataclass, field
from typing import Any

import structlog

from broker.read_path import Wakeup
from engine import pop
from engine.pop import PopError
from gateway_kafka import error_codes as E
from gateway_kafka.consumer_groups import SHARE

log = structlog.get_logger("rockafka.kafka.share_groups")

FINAL_EPOCH = -1
RECHECK_S = 0.2  # a waiting fetch also looks again this often: released and expired records wake no one
MAX_RECORDS_DEFAULT = 500


@dataclass
class ShareSession:
    group: str
    member: str
    next_epoch: int = 1
    partitions: set[tuple[uuid.UUID, int]] = field(default_factory=set)


class ShareGroups:
    def __init__(self, gateway: Any):
        self.gw = gateway
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self._tasks: set[asyncio.Task] = set()  # releases of members that left (held until done)
        gateway.modern_groups.share_listeners.append(self._group_changed)

    @property
    def pop(self) -> pop.PopService:
        return pop.for_store(self.gw.store)

    # -- configs -----------------------------------------------------------------------------
    def lock_ms(self, group: str) -> int:
        return self.gw.group_configs.get_int(group, "share.record.lock.duration.ms")

    def _acquire_args(self, group: str) -> dict:
        cfg = self.gw.group_configs
        reset = cfg.get(group, "share.auto.offset.reset")
        return {"delivery_limit": cfg.get_int(group, "share.delivery.count.limit"),
                "init_mode": pop.INIT_MODE_MIN if reset == "earliest" else pop.INIT_MODE_MAX,
                "dlq_topic": cfg.get(group, "errors.deadletterqueue.topic.name") or "",
                "max_locks": cfg.get_int(group, "share.partition.max.record.locks"),
                "redelivery_level": cfg.get_int(group, "share.record.redelivery.delay.level"),
                "committed": cfg.get(group, "share.isolation.level") == "read_committed"}

    # -- sessions ----------------------------------------------------------------------------
    def session(self, group: str, member: str, epoch: int) -> tuple[ShareSession | None, int, str | None]:
        """The session a request with ``epoch`` continues (or opens), advancing its epoch."""
        key = (group, member)
        if epoch == 0:
            g = self.gw.modern_groups.groups.get(group)
            if g is None or g.group_type != SHARE or member not in g.members:
                return None, E.UNKNOWN_MEMBER_ID, f"member {member} is not a member of share group {group}"
            s = self.sessions[key] = ShareSession(group, member)
            return s, E.NONE, None
        s = self.sessions.get(key)
        if s is None:
            return None, E.SHARE_SESSION_NOT_FOUND, f"no share session for member {member} of group {group}"
        if epoch == FINAL_EPOCH:
            return s, E.NONE, None
        if epoch != s.next_epoch:
            return None, E.INVALID_SHARE_SESSION_EPOCH, f"share session epoch {epoch}, expected {s.next_epoch}"
        s.next_epoch = s.next_epoch + 1 if s.next_epoch < 0x7FFFFFFF else 1
        return s, E.NONE, None

    async def close_session(self, group: str, member: str) -> None:
        if self.sessions.pop((group, member), None) is not None:
            await self._release_member(group, member)

    def _group_changed(self, group_id: str, g: Any) -> None:
        members = set(g.members) if g is not None else set()
        for key in [k for k in self.sessions if k[0] == group_id and k[1] not in members]:
            del self.sessions[key]
            task = asyncio.get_running_loop().create_task(self._release_member(*key))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _release_member(self, group: str, member: str) -> None:
        from gateway_kafka.apis._common import blocking

        try:
            n = await blocking(self.pop.share_release_member, group, member)
        except PopError as exc:  # the locks expire instead
            log.warning("share_release_deferred", group=group, member=member, error=str(exc))
            return
        if n:
            log.info("share_member_released", group=group, member=member, records=n)

    # -- acknowledgements ----------------------------------------------------------------------
    async def acknowledge(self, group: str, member: str, topic_id: uuid.UUID, partition: int,
                          batches: list[dict]) -> tuple[int, str | None]:
        """(error code, message) of applying one partition's acknowledgement batches."""
        from gateway_kafka.apis._common import blocking, local_queue, topic_by_id

        topic = topic_by_id(self.gw, topic_id)
        if topic is None:
            return E.UNKNOWN_TOPIC_ID, f"no topic has id {topic_id}"
        queue, code = local_queue(self.gw, topic, partition)
        if queue is None:
            return code, None
        acks: list[tuple[int, int]] = []
        for b in batches:
            first, last, types = b.get("first_offset", 0), b.get("last_offset", -1), list(b.get("acknowledge_types") or ())
            n = last - first + 1
            if n <= 0 or n > 100_000 or len(types) not in (1, n):
                return E.INVALID_REQUEST, f"acknowledgement batch {first}..{last} with {len(types)} types"
            acks.extend((first + i, types[0] if len(types) == 1 else types[i]) for i in range(n))
        if not acks:
            return E.NONE, None
        if self.gw.group_configs.get(group, "share.renew.acknowledge.enable") != "true" \
                and any(kind == 4 for _, kind in acks):
            return E.INVALID_REQUEST, f"RENEW acknowledgements are disabled for group {group}"
        try:
            why = await blocking(self.pop.share_acknowledge, group, topic, queue, member, acks)
        except PopError as exc:
            return E.KAFKA_STORAGE_ERROR, str(exc)
        return (E.INVALID_RECORD_STATE, why) if why else (E.NONE, None)

    # -- fetch ---------------------------------------------------------------------------------
    async def fetch(self, s: ShareSession, max_records: int, max_wait_ms: int) -> dict[tuple[uuid.UUID, int], dict]:
        """Acquire records of the session's partitions; wait up to ``max_wait_ms`` for some.
        Returns per (topic id, partition) that has something: records, acquired ranges, error."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0, max_wait_ms) / 1000
        keys = self._arrival_keys(s)
        woken = Wakeup(loop)
        arrivals = self.gw.arrivals
        if arrivals is not None and max_wait_ms > 0:
            arrivals.register(keys, woken)
        try:
            while True:
                woken.clear()
                out = await self._fetch_once(s, max_records)
                remaining = deadline - loop.time()
                if out or remaining <= 0 or not s.partitions or (s.group, s.member) not in self.sessions:
                    return out
                await woken.wait(min(remaining, RECHECK_S))
        finally:
            if arrivals is not None and max_wait_ms > 0:
                arrivals.unregister(keys, woken)

    def _arrival_keys(self, s: ShareSession) -> list[tuple[str, int]]:
        from gateway_kafka.apis._common import local_queue, topic_by_id

        keys = []
        for tid, p in s.partitions:
            topic = topic_by_id(self.gw, tid)
            if topic is not None:
                q = local_queue(self.gw, topic, p)[0]
                if q is not None:
                    keys.append((topic, q))
        return keys

    async def _fetch_once(self, s: ShareSession, max_records: int) -> dict[tuple[uuid.UUID, int], dict]:
        from gateway_kafka.apis._common import blocking, local_queue, topic_by_id

        out: dict[tuple[uuid.UUID, int], dict] = {}
        budget = max(1, max_records)
        args = self._acquire_args(s.group)
        lock_ms = self.lock_ms(s.group)
        for tid, p in sorted(s.partitions, key=lambda k: (str(k[0]), k[1])):
            if budget <= 0:
                break
            topic = topic_by_id(self.gw, tid)
            if topic is None:
                out[(tid, p)] = {"error_code": E.UNKNOWN_TOPIC_ID, "error_message": f"no topic has id {tid}"}
                continue
            queue, code = local_queue(self.gw, topic, p)
            if queue is None:
                out[(tid, p)] = {"error_code": code, "error_message": None}
                continue
            try:
                acquired = await blocking(self.pop.share_acquire, s.group, topic, queue, s.member, budget, lock_ms, **args)
            except PopError as exc:
                out[(tid, p)] = {"error_code": E.KAFKA_STORAGE_ERROR, "error_message": str(exc)}
                continue
            if not acquired:
                continue
            budget -= len(acquired)
            out[(tid, p)] = {"error_code": E.NONE, "error_message": None,
                             "records": self._batches(topic, queue, [o for o, _ in acquired]),
                             "acquired_records": _ranges(acquired)}
        return out

    def _batches(self, topic: str, queue: int, offsets: list[int]) -> bytes:
        """The stored batches that hold ``offsets`` (sorted), each once, in offset order. The
        client delivers only the acquired records of each batch."""
        from gateway_kafka.apis._common import batch_of_unit

        store = self.gw.store
        parts: list[bytes] = []
        i = 0
        while i < len(offsets):
            start = offsets[i]
            res = store.get_message("", topic, queue, start, 100_000, max_bytes=4 << 20)
            covered = start
            for unit, ref in zip(res.messages, res.units):
                lo, hi = ref.queue_offset, ref.queue_offset + max(ref.record_count, 1)
                j = bisect.bisect_left(offsets, lo)
                if j < len(offsets) and offsets[j] < hi:
                    parts.append(batch_of_unit(unit))
                covered = hi
                k = bisect.bisect_left(offsets, hi)
                if k == len(offsets) or offsets[k] - hi > 1000:
                    break  # done, or the next acquired offset is far: read from there instead
            nxt = bisect.bisect_left(offsets, covered)
            i = nxt if nxt > i else i + 1
        return b"".join(parts)


def _ranges(acquired: list[tuple[int, int]]) -> list[dict]:
    """Consecutive offsets with one delivery count as Kafka's AcquiredRecords."""
    out: list[dict] = []
    for o, count in acquired:
        if out and out[-1]["last_offset"] == o - 1 and out[-1]["delivery_count"] == count:
            out[-1]["last_offset"] = o
        else:
            out.append({"first_offset": o, "last_offset": o, "delivery_count": min(count, 0x7FFF)})
    return out


def for_gateway(gateway: Any) -> ShareGroups:
    sg = getattr(gateway, "_share_groups", None)
    if sg is None:
        sg = gateway._share_groups = ShareGroups(gateway)
    return sg


# -- share-group offsets (kafka-share-groups --describe / --reset-offsets / --delete-offsets) -------

def partition_offsets(gateway: Any, group: str, topic: str, partition: int) -> dict:
    """DescribeShareGroupOffsets entry of one partition: the share-partition start offset (the
    lowest offset not yet finished; -1 when the group never read the partition) and its lag
    (records from there to the end not yet accepted, rejected or dead-lettered)."""
    from gateway_kafka.apis._common import local_queue

    entry = {"partition_index": partition, "start_offset": -1, "leader_epoch": -1, "lag": -1, "error_code": E.NONE,
             "error_message": None}
    queue, code = local_queue(gateway, topic, partition)
    if queue is None:
        entry["error_code"] = code
        return entry
    state = pop.for_store(gateway.store).share_state(group, topic, queue)
    if state["start_offset"] < 0:
        return entry
    hw = gateway.store.get_max_offset_in_queue(topic, queue)
    nxt = max(state["next_offset"], state["start_offset"])
    entry.update(start_offset=state["start_offset"], leader_epoch=0,
                 lag=max(0, hw - nxt) + len(state["locked"]) + len(state["available"]))
    return entry


def offset_topics(gateway: Any, group: str) -> dict[str, list[int]]:
    """Topic -> partitions the group has share-partition state for."""
    out: dict[str, list[int]] = {}
    for (topic, queue) in gateway.store.consumer_offsets.offsets_of(group):
        out.setdefault(topic, []).append(queue)
    return {t: sorted(ps) for t, ps in out.items()}
