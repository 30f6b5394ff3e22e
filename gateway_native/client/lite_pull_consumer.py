"""LitePullConsumer: the application polls (``DefaultLitePullConsumer``).

Either ``subscribe`` (queues assigned by rebalancing within the group, like a push consumer) or
``assign`` a fixed list of queues. Background pull loops fill a bounded buffer; ``poll``
returns the next batch, at most ``pull_batch_size`` messages of one queue. The consumed
position of a queue advances as ``poll`` hands messages out; ``commit`` (or auto-commit every
``auto_commit_interval`` ms) stores those positions as the group's offsets. ``seek`` moves a
queue's position (``seek_to_begin``, ``seek_to_end``, ``offset_for_timestamp`` +
``seek``), dropping anything buffered for it.
"""

from __future__ import annotations

import asyncio
import queue as queue_mod
import threading
import time
from typing import Any

import structlog

from ..remoting.codes import RequestCode as RC
from ..remoting.message_codec import MessageClientExt
from ..remoting.subscription import SubscriptionData
from .consumer_base import ConsumerBase, ProcessQueue
from .message import MessageQueue, MQClientError
from .pull_api import PullStatus
from .runtime import ClientRuntime

log = structlog.get_logger("rockafka.client.litepull")


class _QueueState:
    def __init__(self, pq: ProcessQueue, offset: int, sub: SubscriptionData):
        self.pq = pq
        self.pull_offset = offset       # next offset to fetch
        self.consumed_offset = offset   # next offset the application has not seen
        self.sub = sub
        self.epoch = 0                  # bumped by seek: buffered batches of older epochs are stale
        self.task: asyncio.Task[Any] | None = None


class LitePullConsumer(ConsumerBase):
    def __init__(self, group: str, namesrv_addr: str | list[str], *, pull_batch_size: int = 10,
                 auto_commit: bool = True, auto_commit_interval: int = 5000, pull_threshold_for_all: int = 10000,
                 broker_suspend_max_time_millis: int = 5000, pull_time_delay_millis_when_exception: int = 1000,
                 **kwargs: Any):
        super().__init__(group, namesrv_addr, **kwargs)
        self.pull_batch_size = pull_batch_size
        self.auto_commit = auto_commit
        self.auto_commit_interval = auto_commit_interval / 1000
        self.suspend_ms = broker_suspend_max_time_millis
        self.exception_delay = pull_time_delay_millis_when_exception / 1000
        self._buffer: queue_mod.Queue[tuple[MessageQueue, int, list[MessageClientExt]]] = queue_mod.Queue(
            maxsize=max(1, pull_threshold_for_all // max(pull_batch_size, 1)))
        self._states: dict[MessageQueue, _QueueState] = {}
        self._assigned_mode = False
        self._lock = threading.Lock()
        self._last_commit = time.monotonic()
        self.consume_type = "CONSUME_ACTIVELY"
        self.subscribe_retry_topic = False

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> "LitePullConsumer":
        self._start_base()
        return self

    def shutdown(self) -> None:
        if self.running and self.auto_commit:
            try:
                self.commit_sync()
            except MQClientError:
                pass
        self._shutdown_base()

    def __enter__(self) -> "LitePullConsumer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def consumer_data(self) -> dict[str, Any]:
        data = super().consumer_data()
        if self._assigned_mode:
            data["subscriptionDataSet"] = []
        return data

    # -- assignment ----------------------------------------------------------------------------
    def assign(self, queues: list[MessageQueue]) -> None:
        """Consume exactly these queues (no rebalancing)."""
        if self.subscriptions and not self._assigned_mode:
            raise MQClientError("subscribe and assign are mutually exclusive")
        self._assigned_mode = True
        self.runtime.call(self._assign(list(queues)))

    async def _assign(self, queues: list[MessageQueue]) -> None:
        wanted = set(queues)
        for mq in [q for q in self.assigned if q not in wanted]:
            pq = self.assigned.pop(mq)
            pq.dropped = True
            await self.queue_dropped(mq, pq)
        for mq in sorted(wanted - set(self.assigned)):
            if mq.topic not in self.runtime.routes:
                await self.runtime.update_route(mq.topic)
            offset = await self.compute_pull_from_where(mq)
            pq = ProcessQueue()
            self.assigned[mq] = pq
            self.queue_assigned(mq, pq, offset, SubscriptionData.build(mq.topic, "*"))

    async def do_rebalance(self) -> None:
        if self._assigned_mode:
            return
        await super().do_rebalance()

    def assignment(self) -> list[MessageQueue]:
        return sorted(self.assigned)

    def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        route = self.runtime.call(self.runtime.update_route(topic))
        if route is None:
            raise MQClientError(f"No route info of this topic: {topic}")
        return ClientRuntime.subscribe_queues(topic, route)

    def queue_assigned(self, mq: MessageQueue, pq: ProcessQueue, offset: int, sub: SubscriptionData) -> None:
        st = _QueueState(pq, offset, sub)
        self._states[mq] = st
        st.task = asyncio.ensure_future(self._pull_loop(mq, st))
        self._tasks.append(st.task)

    async def queue_dropped(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        st = self._states.pop(mq, None)
        if st is not None:
            if st.consumed_offset >= 0 and self.offset_store is not None:
                self.offset_store.update(mq, st.consumed_offset)
            if st.task is not None:
                st.task.cancel()
                if st.task in self._tasks:
                    self._tasks.remove(st.task)

    async def _pull_loop(self, mq: MessageQueue, st: _QueueState) -> None:
        loop = asyncio.get_running_loop()
        while self.running and not st.pq.dropped:
            epoch = st.epoch
            try:
                res = await self.pull_api.pull(mq, st.sub, st.pull_offset, self.pull_batch_size, suspend_ms=self.suspend_ms,
                                               timeout_ms=self.suspend_ms + 10_000)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if self.running:
                    log.warning("lite_pull_failed", mq=str(mq), error=str(exc))
                    await asyncio.sleep(self.exception_delay)
                continue
            if st.pq.dropped or epoch != st.epoch:
                continue
            if res.status == PullStatus.OFFSET_ILLEGAL:
                st.pull_offset = res.next_begin_offset
                with self._lock:
                    if st.consumed_offset < res.next_begin_offset:
                        st.consumed_offset = res.next_begin_offset
                continue
            if not res.messages:
                with self._lock:
                    # nothing handed out is pending: skip filtered-out offsets (RocketMQ's correctTagsOffset)
                    if st.consumed_offset == st.pull_offset:
                        st.consumed_offset = res.next_begin_offset
            st.pull_offset = res.next_begin_offset
            if res.messages:
                item = (mq, epoch, res.messages)
                # the buffer is bounded: wait in a thread so the loop keeps serving other queues
                await loop.run_in_executor(None, self._put_blocking, item, st)

    def _put_blocking(self, item: tuple[MessageQueue, int, list[MessageClientExt]], st: _QueueState) -> None:
        while self.running and not st.pq.dropped and item[1] == st.epoch:
            try:
                self._buffer.put(item, timeout=0.2)
                return
            except queue_mod.Full:
                continue

    # -- application API -----------------------------------------------------------------------
    def poll(self, timeout_ms: int = 5000) -> list[MessageClientExt]:
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._maybe_auto_commit()
                return []
            try:
                mq, epoch, msgs = self._buffer.get(timeout=min(remaining, 0.5))
            except queue_mod.Empty:
                continue
            st = self._states.get(mq)
            if st is None or st.epoch != epoch or st.pq.dropped:
                continue
            with self._lock:
                msgs = [m for m in msgs if m.queue_offset >= st.consumed_offset]
                if not msgs:
                    continue
                st.consumed_offset = msgs[-1].queue_offset + 1
            self._maybe_auto_commit()
            return msgs

    def _maybe_auto_commit(self) -> None:
        if self.auto_commit and time.monotonic() - self._last_commit >= self.auto_commit_interval:
            try:
                self.commit_sync()
            except MQClientError as exc:
                log.warning("auto_commit_failed", error=str(exc))

    def commit_sync(self, offsets: dict[MessageQueue, int] | None = None) -> None:
        """Store the consumed positions (or ``offsets``) as the group's committed offsets."""
        store = self.offset_store
        assert store is not None
        with self._lock:
            todo = dict(offsets) if offsets is not None else {mq: st.consumed_offset for mq, st in self._states.items()}
        for mq, off in todo.items():
            if off >= 0:
                store.update(mq, off, increase_only=False)
        self.runtime.call(store.persist_all(set(todo)), timeout=30)
        self._last_commit = time.monotonic()

    commit = commit_sync

    def committed(self, mq: MessageQueue) -> int:
        assert self.offset_store is not None
        return self.runtime.call(self.offset_store.read(mq))

    def position(self, mq: MessageQueue) -> int:
        st = self._states.get(mq)
        if st is None:
            raise MQClientError(f"{mq} is not assigned to this consumer")
        return st.consumed_offset

    def seek(self, mq: MessageQueue, offset: int) -> None:
        st = self._states.get(mq)
        if st is None:
            raise MQClientError(f"the message queue is not in the assigned list, may not seek: {mq}")
        lo, hi = self.min_offset(mq), self.max_offset(mq)
        if offset < lo or offset > hi:
            raise MQClientError(f"seek offset {offset} is outside [{lo}, {hi}] of {mq}")
        with self._lock:
            st.epoch += 1
            st.pull_offset = st.consumed_offset = offset

    def seek_to_begin(self, mq: MessageQueue) -> None:
        self.seek(mq, self.min_offset(mq))

    def seek_to_end(self, mq: MessageQueue) -> None:
        self.seek(mq, self.max_offset(mq))

    def offset_for_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return self.runtime.call(self.queue_offset(RC.SEARCH_OFFSET_BY_TIMESTAMP, mq, timestamp_ms))

    def seek_to_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> None:
        self.seek(mq, self.offset_for_timestamp(mq, timestamp_ms))

    def min_offset(self, mq: MessageQueue) -> int:
        return self.runtime.call(self.queue_offset(RC.GET_MIN_OFFSET, mq))

    def max_offset(self, mq: MessageQueue) -> int:
        return self.runtime.call(self.queue_offset(RC.GET_MAX_OFFSET, mq))
