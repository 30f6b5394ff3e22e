"""The data source's only door to the broker: the project's SDK over the remoting protocol.

Owns one ``Admin`` client (routes, queue offsets, offset by time, query by key, the group's
offsets) and a ``PullAPI`` (pulls with the subscription in the request, so the broker filters
by tag or SQL92). Every call is bounded by the SDK's timeouts; ``close`` ends the client thread.
Used on the driver (planning, streaming offsets, commits) and in each executor task (reads).
"""

from __future__ import annotations

from typing import Iterator

from gateway_native.client import Admin, MessageClientExt, MessageQueue
from gateway_native.client.offset_store import RemoteBrokerOffsetStore
from gateway_native.client.pull_api import PullAPI, PullStatus
from gateway_native.remoting.subscription import SubscriptionData

PULL_BATCH = 256


class BrokerClient:
    def __init__(self, namesrv: str, group: str, timeout_ms: int = 10_000):
        self.group = group
        self.admin = Admin(namesrv, timeout_ms=timeout_ms).start()
        self.runtime = self.admin.runtime
        self.pulls = PullAPI(self.runtime, group)
        self.pulled = 0  # messages the broker sent to this client

    def close(self) -> None:
        self.admin.shutdown()

    def __enter__(self) -> "BrokerClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def queues(self, topic: str) -> list[MessageQueue]:
        return self.admin.message_queues(topic)

    def min_offset(self, mq: MessageQueue) -> int:
        return self.admin.min_offset(mq)

    def max_offset(self, mq: MessageQueue) -> int:
        return self.admin.max_offset(mq)

    def offset_at(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """First offset stored at or after ``timestamp_ms`` (the max offset when none)."""
        return self.admin.search_offset(mq, timestamp_ms)

    def pull_range(self, mq: MessageQueue, start: int, end: int, expression_type: str,
                   expression: str) -> Iterator[MessageClientExt]:
        """Messages of ``mq`` in [start, end) that match the subscription, filtered at the broker."""
        sub = SubscriptionData.build(mq.topic, expression, expression_type)
        offset = start
        for _ in range(1_000_000):  # bounded: every round advances or stops
            if offset >= end:
                return
            result = self.runtime.call(self.pulls.pull(mq, sub, offset, min(PULL_BATCH, end - offset)), timeout=60)
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
        return self.admin.query_message_by_key(topic, key, max_num=64 * 1024, begin_ms=begin_ms, end_ms=end_ms)

    def commit_offsets(self, offsets: dict[MessageQueue, int]) -> None:
        """The group's consumed offsets on the broker (what consumer-progress tools show)."""
        store = RemoteBrokerOffsetStore(self.runtime, self.group)
        for mq, offset in offsets.items():
            store.update(mq, offset, increase_only=False)
        self.runtime.call(store.persist_all(), timeout=60)

    def committed_offset(self, mq: MessageQueue) -> int:
        """The group's committed offset of ``mq``, -1 when it has none."""
        return self.runtime.call(RemoteBrokerOffsetStore(self.runtime, self.group).read(mq), timeout=60)
