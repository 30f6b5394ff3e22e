"""Consumer offset stores: on the broker (clustering) or in a local file (broadcasting).

``update`` keeps the highest offset consumed (``increase_only``) in memory; ``persist_all``
writes what changed — to the queue's broker with UPDATE_CONSUMER_OFFSET, or atomically to
``<dir>/<client id>/<group>/offsets.json``. ``read(mq, from_store=True)`` asks the broker
(QUERY_CONSUMER_OFFSET) / the file; -1 means no committed offset (consumeFromWhere applies).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import structlog

from engine.config_manager import write_atomic
from ..remoting.codes import RequestCode as RC, ResponseCode as R
from ..transport import ConnectionClosedError, RemotingTimeoutError
from .message import MessageQueue, MQBrokerError, MQClientError

log = structlog.get_logger("rockafka.client.offsets")


class RemoteBrokerOffsetStore:
    def __init__(self, runtime: Any, group: str):
        self.runtime = runtime
        self.group = group
        self.table: dict[MessageQueue, int] = {}
        self._persisted: dict[MessageQueue, int] = {}

    def update(self, mq: MessageQueue, offset: int, increase_only: bool = True) -> None:
        cur = self.table.get(mq)
        if cur is None or not increase_only or offset > cur:
            self.table[mq] = offset

    def read_memory(self, mq: MessageQueue) -> int:
        return self.table.get(mq, -1)

    async def read(self, mq: MessageQueue) -> int:
        addr = self.runtime.broker_addr_in_subscribe(mq.broker_name)
        if addr is None:
            await self.runtime.update_route(mq.topic)
            addr = self.runtime.broker_addr_in_subscribe(mq.broker_name)
            if addr is None:
                raise MQClientError(f"The broker[{mq.broker_name}] not exist")
        resp = await self.runtime.invoke(addr, self.runtime.request(RC.QUERY_CONSUMER_OFFSET, {
            "consumerGroup": self.group, "topic": mq.topic, "queueId": mq.queue_id}))
        if resp.code == R.QUERY_NOT_FOUND:
            return -1
        if resp.code != R.SUCCESS:
            raise MQBrokerError(resp.code, resp.remark, addr)
        offset = int(resp.get_int("offset", -1))
        self.table[mq] = offset
        self._persisted[mq] = offset
        return offset

    async def persist(self, mq: MessageQueue) -> None:
        offset = self.table.get(mq)
        if offset is None or offset < 0 or self._persisted.get(mq) == offset:
            return
        # the master, or (as RocketMQ's clients do) a slave of the group while the master is away
        addr = self.runtime.master_addr(mq.broker_name) or self.runtime.broker_addr_in_subscribe(mq.broker_name)
        if addr is None:
            return
        resp = await self.runtime.invoke(addr, self.runtime.request(RC.UPDATE_CONSUMER_OFFSET, {
            "consumerGroup": self.group, "topic": mq.topic, "queueId": mq.queue_id, "commitOffset": offset}))
        if resp.code == R.SUCCESS:
            self._persisted[mq] = offset
        else:
            log.warning("offset_persist_refused", mq=str(mq), code=resp.code, remark=resp.remark)

    async def persist_all(self, mqs: set[MessageQueue] | None = None) -> None:
        for mq in list(self.table):
            if mqs is not None and mq not in mqs:
                continue
            try:
                await self.persist(mq)
            except (ConnectionClosedError, RemotingTimeoutError, OSError, MQClientError) as exc:
                log.warning("offset_persist_failed", mq=str(mq), error=str(exc))

    def remove(self, mq: MessageQueue) -> None:
        self.table.pop(mq, None)
        self._persisted.pop(mq, None)


class LocalFileOffsetStore(RemoteBrokerOffsetStore):
    def __init__(self, runtime: Any, group: str, base_dir: str | os.PathLike[str] | None = None):
        super().__init__(runtime, group)
        root = Path(base_dir or os.environ.get("ROCKETMQ_CLIENT_LOCAL_OFFSET_STORE_DIR")
                    or Path.home() / ".rocketmq_offsets")
        self.path = root / runtime.client_id.replace(":", "_") / group / "offsets.json"
        self._loaded = self._load()

    def _load(self) -> dict[MessageQueue, int]:
        for p in (self.path, self.path.with_suffix(".json.bak")):
            try:
                doc = json.loads(p.read_text("utf-8"))
                return {MessageQueue(e["topic"], e["brokerName"], int(e["queueId"])): int(e["offset"]) for e in doc["offsetTable"]}
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return {}

    async def read(self, mq: MessageQueue) -> int:
        offset = self._loaded.get(mq, -1)
        if offset >= 0:
            self.table[mq] = offset
        return offset

    async def persist_all(self, mqs: set[MessageQueue] | None = None) -> None:
        merged = dict(self._loaded)
        merged.update(self.table)
        self._loaded = merged
        doc = {"offsetTable": [{"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": off}
                               for mq, off in sorted(merged.items())]}
        write_atomic(self.path, json.dumps(doc).encode("utf-8"))

    async def persist(self, mq: MessageQueue) -> None:
        await self.persist_all()
