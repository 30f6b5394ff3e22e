"""The skeleton the record-backed group coordinators share: KIP-848 consumer and share groups
(``consumer_groups.ModernGroupCoordinator``) and KIP-1071 streams groups
(``streams_groups.StreamsGroupCoordinator``).

What it owns: the groups this node coordinates (``groups``), each group's last stored record,
one asyncio lock per group, the member timers and the tasks they spawn. A subclass says which
record kind it stores and how a group is encoded; it owns its own membership protocol.

Invariants (docs/design/coordinator-state.md): a group's state survives only as its record in
``__consumer_offsets`` (appended through the gateway's put path, rebuilt by ``restore``); a
change is visible to clients only once its record is stored — a refused append puts the group
back as its last record says and raises COORDINATOR_NOT_AVAILABLE; a record equal to the last
one is not appended again; once ``close`` ran no timer is armed and no task spawned.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable

import structlog

from gateway_kafka import error_codes as E


class GroupError(Exception):
    """A refused request: a Kafka error code and a message."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class RecordGroupCoordinator:
    RECORD_KIND: int = -1           # records.*_GROUP_KIND of the groups' records
    EVENT: str = "group"            # prefix of the log events: "<EVENT>_not_stored", "<EVENT>s_restored"
    DECODE_ERRORS: tuple[type[BaseException], ...] = (ValueError,)

    def __init__(self, gateway: Any, configs: Any, log: Any = None):
        self.gw = gateway
        self.configs = configs
        self.log = log or structlog.get_logger("rockafka.kafka.groups")
        store = getattr(gateway, "store", None)
        self.offsets = store.consumer_offsets if store is not None else None
        self.groups: dict[str, Any] = {}
        self._records: dict[str, bytes | None] = {}   # group -> its last stored record
        self._locks: dict[str, asyncio.Lock] = {}
        self._session_timers: dict[tuple[str, str], asyncio.TimerHandle] = {}
        self._tasks: set[asyncio.Task] = set()
        self._closed = False

    # -- what a subclass says ----------------------------------------------------------------
    @staticmethod
    def encode_group(g: Any) -> bytes:
        raise NotImplementedError

    @staticmethod
    def decode_group(group_id: str, value: bytes) -> Any:
        raise NotImplementedError

    def _restored(self, g: Any) -> None:
        """A group was rebuilt from its record (arm its timers, ...)."""

    def _restored_summary(self) -> dict[str, Any]:
        """Extra fields of the ``<EVENT>s_restored`` event."""
        return {}

    def _after_store(self, g: Any) -> None:
        """The group's record is stored (tell who listens)."""

    def _timer_tables(self) -> tuple[dict[tuple[str, str], asyncio.TimerHandle], ...]:
        return (self._session_timers,)

    # -- persistence -------------------------------------------------------------------------
    def restore(self) -> int:
        if self.offsets is None:
            return 0
        for group_id, value in self.offsets.group_records(self.RECORD_KIND).items():
            try:
                g = self.decode_group(group_id, value)
            except self.DECODE_ERRORS as exc:
                self.log.warning(f"{self.EVENT}_not_restored", group=group_id, error=str(exc))
                continue
            self.groups[group_id] = g
            self._records[group_id] = bytes(value)
            self._restored(g)
        self.log.info(f"{self.EVENT}s_restored", groups=len(self.groups), **self._restored_summary())
        return len(self.groups)

    async def _store(self, g: Any) -> None:
        """Append the group's record (a tombstone once it is gone); on a refusal put the group
        back as its last record says and raise COORDINATOR_NOT_AVAILABLE."""
        alive = self.groups.get(g.group_id) is g
        value = self.encode_group(g) if alive else None
        if value == self._records.get(g.group_id):
            return
        if self.offsets is not None:
            res = await self.gw.put(self.offsets.store_group_record, g.group_id, self.RECORD_KIND, value)
            if not res.stored:
                self.log.warning(f"{self.EVENT}_not_stored", group=g.group_id, status=res.status.name,
                                 error=res.error)
                self._rollback(g.group_id)
                raise GroupError(E.COORDINATOR_NOT_AVAILABLE,
                                 f"the group's state could not be stored ({res.status.name}); retry")
        self._records[g.group_id] = value
        self._after_store(g)

    def _rollback(self, group_id: str) -> None:
        last = self._records.get(group_id)
        if last is None:
            self.groups.pop(group_id, None)
        else:
            self.groups[group_id] = self.decode_group(group_id, last)

    def lock(self, group_id: str) -> asyncio.Lock:
        lock = self._locks.get(group_id)
        if lock is None:
            lock = self._locks[group_id] = asyncio.Lock()
        return lock

    # -- queries -----------------------------------------------------------------------------
    def owns(self, group_id: str) -> bool:
        return group_id in self.groups

    def _partitions_of(self, topic: str) -> int:
        tc = self.gw.store.topic_config.get(topic)
        return tc.read_queue_nums if tc is not None else 0

    # -- timers and tasks --------------------------------------------------------------------
    def _arm(self, timers: dict[tuple[str, str], asyncio.TimerHandle], key: tuple[str, str], delay_s: float,
             fn: Callable, *args: Any) -> None:
        """(Re)arm the member timer ``key`` of ``timers``: the old one cancelled, none once closed."""
        old = timers.pop(key, None)
        if old is not None:
            old.cancel()
        if self._closed:
            return
        timers[key] = asyncio.get_running_loop().call_later(delay_s, fn, *args)

    def _spawn(self, fn: Callable, *args: Any) -> None:
        task = asyncio.get_running_loop().create_task(fn(*args))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def close(self) -> None:
        self._closed = True
        for timers in self._timer_tables():
            for h in list(timers.values()):
                h.cancel()
            timers.clear()
        for t in list(self._tasks):
            t.cancel()
