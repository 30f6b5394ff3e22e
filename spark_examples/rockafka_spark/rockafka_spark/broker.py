"""The data source's only door to the broker: the project's SDK over the remoting protocol.

Owns one ``Admin`` client (routes, queue offsets, offset by time, query by key, the group's
offsets) and a ``PullAPI`` (pulls with the subscription in the request, so the broker filters
by tag or SQL92). Every call is bounded by the SDK's timeouts; ``close`` ends the client thread.
Used on the driver (planning, streaming offsets, commits) and in each executor task (reads).

Reads need no master (RocketMQ's rule for consumers): every read call — queue min / max
offsets, offset by time, key lookups, pulls — goes to the broker group's members as the
NameServer's route lists them, master (brokerId 0) first, then the slaves by id. A member that
refuses the connection or times out is asked last by this client for ``DOWN_FOR_S`` seconds and
the next one is asked, so a group whose master was killed is read from its slave (which holds
every message the master acknowledged under SYNC_MASTER). A pull follows the broker's ``suggestWhichBrokerId``
unless that member is down. Writes and offset commits stay with the master.
"""

from __future__ import annotations

import time
from typing import Any, Awaitable, Callable, Iterator

from gateway_native.client import Admin, MessageClientExt, MessageQueue
from gateway_native.client.message import MQBrokerError, MQClientError
from gateway_native.client.offset_store import RemoteBrokerOffsetStore
from gateway_native.client.pull_api import PullAPI, PullStatus
from gateway_native.remoting.codes import RequestCode as RC, ResponseCode as R
from gateway_native.remoting.message_codec import decode_units
from gateway_native.remoting.subscription import SubscriptionData

PULL_BATCH = 256
DOWN_FOR_S = 30.0  # a member that failed a read is asked last for this long (a master coming back)


class BrokerClient:
    def __init__(self, namesrv: str, group: str, timeout_ms: int = 10_000):
        self.group = group
        self.admin = Admin(namesrv, timeout_ms=timeout_ms).start()
        self.runtime = self.admin.runtime
        self.pulls = PullAPI(self.runtime, group)
        self.pulled = 0  # messages the broker sent to this client
        self._down_until: dict[str, float] = {}  # member -> monotonic time it is asked last until

    # -- the group member that answers a read ----------------------------------------------------
    def _members(self, broker_name: str) -> list[tuple[int, str]]:
        """(brokerId, address) of ``broker_name``'s group as routed, live ones first, master first."""
        addrs = self.runtime.broker_addrs.get(broker_name) or {}
        ordered = sorted(addrs.items())
        return [m for m in ordered if not self._is_down(m[1])] + [m for m in ordered if self._is_down(m[1])]

    def _is_down(self, addr: str) -> bool:
        return self._down_until.get(addr, 0.0) > time.monotonic()

    async def _on_member(self, topic: str, broker_name: str, call: Callable[[str], Awaitable[Any]],
                         first: int | None = None) -> Any:
        if not self.runtime.broker_addrs.get(broker_name):
            await self.runtime.update_route(topic)
        members = self._members(broker_name)
        if first is not None:  # the broker's suggestion, unless that member is down
            members.sort(key=lambda m: (self._is_down(m[1]), m[0] != first))
        if not members:
            raise MQClientError(f"The broker[{broker_name}] not exist")
        last: Exception | None = None
        for _, addr in members:
            try:
                return await call(addr)
            except OSError as exc:  # refused, closed or timed out: the next member of the group
                self._down_until[addr] = time.monotonic() + DOWN_FOR_S
                last = exc
        raise MQClientError(f"no member of broker group {broker_name} answers: {last}")

    def _queue_offset(self, code: int, mq: MessageQueue, extra: dict[str, Any] | None = None) -> int:
        async def ask(addr: str) -> int:
            resp = await self.runtime.invoke(addr, self.runtime.request(
                code, {"topic": mq.topic, "queueId": mq.queue_id, **(extra or {})}))
            if resp.code != R.SUCCESS:
                raise MQBrokerError(resp.code, resp.remark, addr)
            return int(resp.get_int("offset", 0))
        return self.runtime.call(self._on_member(mq.topic, mq.broker_name, ask), timeout=60)

    def close(self) -> None:
        self.admin.shutdown()

    def __enter__(self) -> "BrokerClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def queues(self, topic: str) -> list[MessageQueue]:
        return self.admin.message_queues(topic)

    def min_offset(self, mq: MessageQueue) -> int:
        return self._queue_offset(RC.GET_MIN_OFFSET, mq)

    def max_offset(self, mq: MessageQueue) -> int:
        return self._queue_offset(RC.GET_MAX_OFFSET, mq)

    def offset_at(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """First offset stored at or after ``timestamp_ms`` (the max offset when none)."""
        return self._queue_offset(RC.SEARCH_OFFSET_BY_TIMESTAMP, mq, {"timestamp": timestamp_ms})

    def pull_range(self, mq: MessageQueue, start: int, end: int, expression_type: str,
                   expression: str) -> Iterator[MessageClientExt]:
        """Messages of ``mq`` in [start, end) that match the subscription, filtered at the broker."""
        sub = SubscriptionData.build(mq.topic, expression, expression_type)
        offset = start
        for _ in range(1_000_000):  # bounded: every round advances or stops
            if offset >= end:
                return
            n = min(PULL_BATCH, end - offset)
            result = self.runtime.call(self._on_member(
                mq.topic, mq.broker_name, lambda addr, o=offset, n=n: self.pulls.pull(mq, sub, o, n, addr=addr),
                first=self.pulls.suggested(mq)), timeout=60)
            self.pulled += len(result.messages)
            for m in result.messages:
                if start <= m.queue_offset < end:
                    yield m
            if result.status == PullStatus.NO_NEW_MSG or result.next_begin_offset <= offset:
                if result.status == PullStatus.OFFSET_ILLEGAL and result.next_begin_offset > offset:
                    offset = result.next_begin_offset
                    continue
                return  # nothing more below ``end`` (the range ends at the log's end)
            offset = result.next_begin_offset

    def query_by_key(self, topic: str, key: str, begin_ms: int, end_ms: int) -> list[MessageClientExt]:
        """Messages of ``topic`` whose keys hold ``key``, from each group's index (QUERY_MESSAGE)."""
        fields = {"topic": topic, "key": key, "maxNum": 64 * 1024, "beginTimestamp": begin_ms, "endTimestamp": end_ms}

        async def run() -> list[MessageClientExt]:
            route = await self.runtime.update_route(topic)
            if route is None:
                raise MQClientError(f"No route info of this topic: {topic}")
            found: list[MessageClientExt] = []
            for bd in route.get("brokerDatas") or []:
                name = bd["brokerName"]

                async def ask(addr: str) -> Any:
                    return addr, await self.runtime.invoke(addr, self.runtime.request(RC.QUERY_MESSAGE, fields))
                addr, resp = await self._on_member(topic, name, ask)
                if resp.code == R.SUCCESS:
                    for m in decode_units(bytes(resp.body)):
                        m.broker_name = name
                        if key in m.keys:
                            found.append(m)
                elif resp.code != R.QUERY_NOT_FOUND:
                    raise MQBrokerError(resp.code, resp.remark, addr)
            return found
        return self.runtime.call(run(), timeout=60)

    def commit_offsets(self, offsets: dict[MessageQueue, int]) -> None:
        """The group's consumed offsets on the broker (what consumer-progress tools show)."""
        store = RemoteBrokerOffsetStore(self.runtime, self.group)
        for mq, offset in offsets.items():
            store.update(mq, offset, increase_only=False)
        self.runtime.call(store.persist_all(), timeout=60)

    def committed_offset(self, mq: MessageQueue) -> int:
        """The group's committed offset of ``mq``, -1 when it has none."""
        return self.runtime.call(RemoteBrokerOffsetStore(self.runtime, self.group).read(mq), timeout=60)
