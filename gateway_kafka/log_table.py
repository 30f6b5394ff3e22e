"""A small keyed table of operator state kept as records of ``__consumer_offsets``.

For state an operator sets at run time and the node must keep across a crash and carry to its
slaves: dynamic broker configs (``dynamic_configs.py``) and client quotas (``quotas.py``). Each
entry is one group-keyed record of the engine's offsets log (``ConsumerOffsetManager.
store_group_record``, key version ``kind``, the whole entry per record, a tombstone when it is
removed), so it goes through the one ordered writer of that partition, is durable as
``flushDiskType`` promises before the change is answered, is replicated byte for byte, and comes
back from the checkpoint + replay at start (``docs/design/coordinator-state.md``).

Record key: the group-record key with group = ``"\\x00" + name`` (a NUL first: the engine's
reserved group prefix, ``engine.consumer_offset.is_reserved_group``; the Kafka gateway refuses such
group ids with INVALID_GROUP_ID, and deleting such a group never tombstones a group record). Record value: UTF-8 JSON
``{"v": 1, "doc": {...}}``.

Invariants: ``get``/``items`` never block and see only what is in the log (the table is the
engine's record table, re-read when its version moves: a stored change, a replicated record on a
slave); ``replace`` stores first, so memory changes only once the record is stored; writers of
one table are serialised.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Callable

import structlog

from engine.consumer_offset import RESERVED_GROUP_PREFIX

log = structlog.get_logger("rockafka.kafka.log_table")

PREFIX = RESERVED_GROUP_PREFIX
FORMAT_VERSION = 1


class NotStored(RuntimeError):
    """The record could not be stored (e.g. on a slave, or the disk is full); nothing changed."""


class LogTable:
    def __init__(self, store: Any, kind: int, put: Callable[..., Any] | None = None):
        self.offsets = getattr(store, "consumer_offsets", None) if store is not None else None
        self.kind = kind
        self._put = put
        self._table: dict[str, dict] = {}
        self._version = -1
        self._lock = asyncio.Lock()

    @property
    def table(self) -> dict[str, dict]:
        """The entries, re-read when the log's group records changed underneath (a slave follows
        its master's records as they replicate)."""
        if self.offsets is not None and self.offsets.group_records_version != self._version:
            self.restore()
        return self._table

    def restore(self) -> None:
        """The table as the log says (at start and after a role change)."""
        table: dict[str, dict] = {}
        if self.offsets is not None:
            self._version = self.offsets.group_records_version
            for key, value in self.offsets.group_records(self.kind).items():
                if not key.startswith(PREFIX):
                    continue
                try:
                    doc = json.loads(value)
                    table[key[len(PREFIX):]] = dict(doc["doc"])
                except (ValueError, KeyError, TypeError) as exc:
                    log.warning("log_table_record_unreadable", kind=self.kind, key=key[1:], error=str(exc))
        self._table = table

    def get(self, name: str) -> dict:
        return dict(self.table.get(name) or {})

    def items(self) -> list[tuple[str, dict]]:
        return [(k, dict(v)) for k, v in self.table.items()]

    def _store(self, name: str, doc: dict | None) -> Any:
        value = None if not doc else json.dumps({"v": FORMAT_VERSION, "doc": doc}, sort_keys=True,
                                                separators=(",", ":")).encode("utf-8")
        return self.offsets.store_group_record(PREFIX + name, self.kind, value)

    async def replace(self, name: str, doc: dict | None) -> None:
        """Store ``name``'s whole entry (empty or None: removed), then apply it."""
        async with self._lock:
            if self.offsets is not None:
                if self._put is not None:
                    res = await self._put(self._store, name, doc)
                else:
                    res = self._store(name, doc)
                if not res.stored:
                    raise NotStored(f"not stored: {res.status.name} {getattr(res, 'error', '') or ''}".strip())
            else:
                self._set_memory(name, doc)

    def replace_now(self, name: str, doc: dict | None) -> None:
        """``replace`` from a thread that is not the event loop (migration at start)."""
        if self.offsets is not None:
            res = self._store(name, doc)
            if not res.stored:
                raise NotStored(f"not stored: {res.status.name}")
        else:
            self._set_memory(name, doc)

    def _set_memory(self, name: str, doc: dict | None) -> None:
        """No log (a gateway over a bare store in unit use): memory only."""
        if doc:
            self._table[name] = dict(doc)
        else:
            self._table.pop(name, None)
