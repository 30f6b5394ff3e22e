"""PushConsumer: messages pushed to a concurrent listener (``DefaultMQPushConsumer``).

Per assigned queue a pull loop long-polls the broker (``broker_suspend_max_time_millis``) and
feeds the queue's ``ProcessQueue``; batches of ``consume_message_batch_max_size`` go to a pool
of ``consume_thread_max`` threads calling ``listener(msgs, context)``. Flow control: the loop
waits while a queue holds more than ``pull_threshold_for_queue`` messages or
``pull_threshold_size_for_queue`` MiB, or spans more than ``consume_concurrently_max_span``
offsets. CONSUME_SUCCESS acknowledges the batch; RECONSUME_LATER (or an exception, or None)
sends each message back (CONSUMER_SEND_MSG_BACK, so the broker's retry topic redelivers it
later) and, if the broker cannot take it back, consumes it again locally after
``suspend_current_queue_time_millis`` with ``reconsume_times`` + 1 — the message stays in the
process queue meanwhile, so its offset is never committed unconsumed. In broadcasting mode a
failed message is not retried (as in RocketMQ).

Orderly: ``register_message_listener_orderly`` hands each queue to one consume task at a time,
in offset order, only while this client holds the queue's broker-side lock (``orderly.py``).

Offsets: committed offsets are persisted every ``persist_consumer_offset_interval`` ms (5 s),
piggy-backed on pulls (COMMIT_OFFSET flag), on rebalance and on ``shutdown``.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable

import structlog
from engine.message import PROPERTY_RETRY_TOPIC

from ..remoting.codes import RequestCode as RC, ResponseCode as R
from ..remoting.message_codec import MessageClientExt
from ..remoting.subscription import SubscriptionData
from ..transport import ConnectionClosedError, RemotingTimeoutError
from .consumer_base import CLUSTERING, RETRY_PREFIX, ConsumerBase, ProcessQueue
from .message import ConsumeStatus, MessageQueue, MQClientError
from .pull_api import PullStatus

log = structlog.get_logger("rockafka.client.push")


@dataclass
class ConsumeContext:
    message_queue: MessageQueue
    delay_level_when_next_consume: int = 0


Listener = Callable[[list[MessageClientExt], ConsumeContext], ConsumeStatus]


class PushConsumer(ConsumerBase):
    def __init__(self, group: str, namesrv_addr: str | list[str], *, consume_thread_max: int = 20,
                 consume_message_batch_max_size: int = 1, pull_batch_size: int = 32, pull_interval: int = 0,
                 pull_threshold_for_queue: int = 1000, pull_threshold_size_for_queue: int = 100,
                 consume_concurrently_max_span: int = 2000, broker_suspend_max_time_millis: int = 15_000,
                 consumer_timeout_millis_when_suspend: int = 30_000, pull_time_delay_millis_when_exception: int = 3000,
                 suspend_current_queue_time_millis: int = 1000, max_reconsume_times: int = 16, **kwargs: Any):
        super().__init__(group, namesrv_addr, **kwargs)
        self.consume_thread_max = consume_thread_max
        self.batch_max = max(1, consume_message_batch_max_size)
        self.pull_batch_size = pull_batch_size
        self.pull_interval = pull_interval / 1000
        self.threshold_count = pull_threshold_for_queue
        self.threshold_size = pull_threshold_size_for_queue * 1024 * 1024
        self.max_span = consume_concurrently_max_span
        self.suspend_ms = broker_suspend_max_time_millis
        self.pull_timeout_ms = consumer_timeout_millis_when_suspend
        self.exception_delay = pull_time_delay_millis_when_exception / 1000
        self.reconsume_delay = suspend_current_queue_time_millis / 1000
        self.max_reconsume_times = max_reconsume_times
        self.listener: Listener | None = None
        self.executor: ThreadPoolExecutor | None = None
        self._pull_tasks: dict[MessageQueue, asyncio.Task[Any]] = {}
        self.consume_type = "CONSUME_PASSIVELY"
        self.orderly: Any = None  # orderly.OrderlyService when an orderly listener is registered

    def register_message_listener(self, listener: Listener) -> None:
        self.listener = listener
        self.orderly = None

    def register_message_listener_orderly(self, listener: Any, *, lock_renew_interval_ms: int = 20_000,
                                          lock_local_expiry_ms: int = 30_000) -> None:
        """Per-queue ordered consumption under broker-side queue locks (see ``orderly.py``)."""
        from .orderly import OrderlyService

        self.orderly = OrderlyService(self, listener, lock_renew_interval_ms=lock_renew_interval_ms,
                                      lock_local_expiry_ms=lock_local_expiry_ms)
        self.listener = listener

    def start(self) -> "PushConsumer":
        if self.listener is None:
            raise MQClientError("register a message listener before start()")
        if not self.subscriptions:
            raise MQClientError("subscribe to at least one topic before start()")
        self.executor = ThreadPoolExecutor(self.consume_thread_max, thread_name_prefix=f"consume-{self.group}")
        try:
            self._start_base()
        except BaseException:
            self.executor.shutdown(wait=False)
            raise
        if self.orderly is not None:
            async def renew() -> None:
                self._tasks.append(asyncio.ensure_future(self.orderly.renew_loop()))
            self.runtime.call(renew())
        return self

    def shutdown(self) -> None:
        def drain() -> None:
            if self.executor is not None:
                self.executor.shutdown(wait=True, cancel_futures=True)
            if self.orderly is not None:  # offsets persisted, then the queue locks released
                try:
                    self.runtime.call(self.orderly.release_all(list(self.assigned)), timeout=30)
                except Exception as exc:
                    log.warning("orderly_release_failed", group=self.group, error=str(exc))
        self._shutdown_base(before_persist=drain)

    def __enter__(self) -> "PushConsumer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # -- pulling -------------------------------------------------------------------------------
    def queue_assigned(self, mq: MessageQueue, pq: ProcessQueue, offset: int, sub: SubscriptionData) -> None:
        self._pull_tasks[mq] = asyncio.ensure_future(self._pull_loop(mq, pq, offset, sub))
        self._tasks.append(self._pull_tasks[mq])

    async def queue_dropped(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        task = self._pull_tasks.pop(mq, None)
        if task is not None:
            task.cancel()
            if task in self._tasks:
                self._tasks.remove(task)
        if self.orderly is not None:
            await self.orderly.release(mq)

    async def _pull_loop(self, mq: MessageQueue, pq: ProcessQueue, offset: int, sub: SubscriptionData) -> None:
        store = self.offset_store
        assert store is not None
        while self.running and not pq.dropped:
            if self.orderly is not None:
                if not await self.orderly.wait_locked(mq, pq):
                    await asyncio.sleep(min(self.exception_delay, 1.0))  # another client holds the queue
                    continue
                st = self.orderly.state(mq)
                if not st.previously_locked:  # continue exactly where the previous owner stopped
                    st.previously_locked = True
                    offset = await self.compute_pull_from_where(mq)
            if pq.count > self.threshold_count or pq.size > self.threshold_size or pq.span > self.max_span:
                await asyncio.sleep(0.05)  # flow control: let the listener catch up
                continue
            commit = store.read_memory(mq) if self.message_model == CLUSTERING else -1
            try:
                res = await self.pull_api.pull(mq, sub, offset, self.pull_batch_size, commit_offset=commit,
                                               suspend_ms=self.suspend_ms, timeout_ms=self.pull_timeout_ms)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if self.running and not pq.dropped:
                    log.warning("pull_failed", mq=str(mq), offset=offset, error=str(exc))
                    await asyncio.sleep(self.exception_delay)
                continue
            if pq.dropped:
                return
            pq.last_pull = time.monotonic()
            if res.status == PullStatus.FOUND:
                offset = res.next_begin_offset
                if res.messages:
                    pq.put(res.messages)
                    self._submit(mq, pq, res.messages)
                elif pq.count == 0:
                    store.update(mq, offset)
            elif res.status in (PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG):
                offset = res.next_begin_offset
                if pq.count == 0:
                    store.update(mq, offset)
            else:  # OFFSET_ILLEGAL: the broker says where the queue really is
                log.warning("pull_offset_moved", mq=str(mq), offset=offset, next=res.next_begin_offset)
                offset = res.next_begin_offset
                store.update(mq, offset, increase_only=False)
                try:
                    await store.persist(mq)
                except (ConnectionClosedError, RemotingTimeoutError, OSError, MQClientError):
                    pass
            if self.pull_interval:
                await asyncio.sleep(self.pull_interval)

    # -- consuming -----------------------------------------------------------------------------
    def _submit(self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageClientExt]) -> None:
        assert self.executor is not None
        if self.orderly is not None:
            self.orderly.submit(mq, pq)
            return
        for i in range(0, len(msgs), self.batch_max):
            try:
                self.executor.submit(self._consume, mq, pq, msgs[i:i + self.batch_max])
            except RuntimeError:  # shutting down; the messages stay unacknowledged
                return

    def _consume(self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageClientExt]) -> None:
        if pq.dropped or not self.running:
            return
        for m in msgs:
            retry_topic = m.properties.get(PROPERTY_RETRY_TOPIC)
            if retry_topic and m.topic == RETRY_PREFIX + self.group:
                m.topic = retry_topic
        ctx = ConsumeContext(mq)
        try:
            status = self.listener(msgs, ctx) if self.listener else ConsumeStatus.RECONSUME_LATER
        except Exception as exc:
            log.warning("listener_failed", group=self.group, mq=str(mq), error=repr(exc))
            status = ConsumeStatus.RECONSUME_LATER
        if status is None:
            status = ConsumeStatus.RECONSUME_LATER
        done = msgs
        if status == ConsumeStatus.RECONSUME_LATER and self.message_model == CLUSTERING:
            failed = []
            for m in msgs:
                if not self._send_back(m, ctx):
                    failed.append(m)
            if failed:
                done = [m for m in msgs if m not in failed]
                for m in failed:
                    m.reconsume_times += 1
                self._consume_later(mq, pq, failed)
        elif status == ConsumeStatus.RECONSUME_LATER:
            log.warning("broadcast_consume_failed_dropped", group=self.group, mq=str(mq), count=len(msgs))
        offset = pq.remove(done)
        if offset >= 0 and not pq.dropped and self.offset_store is not None:
            self.offset_store.update(mq, offset)

    def _consume_later(self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageClientExt]) -> None:
        def resubmit() -> None:
            if self.running and not pq.dropped:
                self._submit(mq, pq, msgs)
        try:
            self.runtime.loop.call_soon_threadsafe(self.runtime.loop.call_later, self.reconsume_delay, resubmit)
        except RuntimeError:
            pass

    def _send_back(self, msg: MessageClientExt, ctx: ConsumeContext) -> bool:
        addr = self.runtime.master_addr(msg.broker_name) if msg.broker_name else None
        if addr is None:
            return False
        fields = {"offset": msg.commitlog_offset, "group": self.group, "delayLevel": ctx.delay_level_when_next_consume,
                  "originMsgId": msg.msg_id, "originTopic": msg.topic, "unitMode": False,
                  "maxReconsumeTimes": self.max_reconsume_times}
        try:
            resp = self.runtime.call(self.runtime.invoke(addr, self.runtime.request(RC.CONSUMER_SEND_MSG_BACK, fields)), timeout=10)
        except Exception as exc:
            log.info("send_back_failed", error=str(exc))
            return False
        return resp.code == R.SUCCESS
