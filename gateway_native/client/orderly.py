"""Orderly consumption for ``PushConsumer`` (RocketMQ's ``ConsumeMessageOrderlyService``).

``consumer.register_message_listener_orderly(listener)``; the listener is called as
``listener(msgs, ConsumeOrderlyContext) -> ConsumeOrderlyStatus``.

Rules (each one is why per-queue order holds while consumers join and leave):
- a queue is consumed only while this client holds its broker-side lock (LOCK_BATCH_MQ), taken
  when the queue is assigned and renewed for every assigned queue every
  ``lock_renew_interval_ms`` (20 s); a lock not renewed within ``lock_local_expiry_ms`` (30 s,
  less than the broker's 60 s) stops consumption locally, so two clients never consume one
  queue at once;
- when the lock is first taken, pulling starts at the group's committed offset read then (the
  previous owner persisted it before releasing its lock);
- one consume task per queue at a time (a per-queue mutex), messages in offset order;
- SUCCESS commits past the batch; SUSPEND_CURRENT_QUEUE_A_MOMENT puts the batch back and the
  queue waits ``suspend_current_queue_time_millis`` (or the context's value) before retrying
  the same messages with reconsume_times + 1; once a message has been retried
  ``max_reconsume_times`` times it goes straight to ``%DLQ%<group>`` (CONSUMER_SEND_MSG_BACK with
  delayLevel -1) and the queue moves on; if the broker cannot take it, the queue keeps retrying;
- a queue taken away by rebalancing finishes its in-flight batch, persists its offset, then
  releases the broker lock; ``shutdown`` does the same for every queue.
"""

from __future__ import annotations

import asyncio
import enum
import json
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Protocol

import structlog
from engine.message import PROPERTY_RETRY_TOPIC

from ..remoting.codes import RequestCode as RC, ResponseCode as R
from ..remoting.message_codec import MessageClientExt
from ..transport import ConnectionClosedError, RemotingTimeoutError
from .consumer_base import CLUSTERING, RETRY_PREFIX, ProcessQueue
from .message import MessageQueue, MQClientError


log = structlog.get_logger("rockafka.client.orderly")


class ConsumeOrderlyStatus(enum.Enum):
    SUCCESS = "SUCCESS"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


@dataclass
class ConsumeOrderlyContext:
    message_queue: MessageQueue
    auto_commit: bool = True
    suspend_current_queue_time_millis: int = -1


OrderlyListener = Callable[[list[MessageClientExt], ConsumeOrderlyContext], ConsumeOrderlyStatus]


class OrderlyConsumer(Protocol):
    """What the service uses of its ``PushConsumer``."""

    runtime: Any
    group: str
    message_model: str
    offset_store: Any
    assigned: dict[MessageQueue, ProcessQueue]
    executor: Any
    running: bool
    batch_max: int
    max_reconsume_times: int
    reconsume_delay: float

    def _send_back(self, msg: MessageClientExt, ctx: Any) -> bool: ...


class QueueState:
    def __init__(self) -> None:
        self.consume_lock = threading.Lock()   # one consume task per queue
        self.locked = False
        self.last_lock = 0.0
        self.previously_locked = False
        self.scheduled = False
        self.consuming: set[int] = set()        # offsets handed to the listener, not yet acknowledged


class OrderlyService:
    def __init__(self, consumer: OrderlyConsumer, listener: OrderlyListener, *, lock_renew_interval_ms: int = 20_000,
                 lock_local_expiry_ms: int = 30_000):
        self.consumer = consumer
        self.listener = listener
        self.renew_interval = lock_renew_interval_ms / 1000
        self.local_expiry = lock_local_expiry_ms / 1000
        self.states: dict[MessageQueue, QueueState] = {}
        self._sched_lock = threading.Lock()
        # broadcasting consumers each read every queue: no one to exclude, so no locks (as RocketMQ)
        self.needs_lock = consumer.message_model == CLUSTERING

    # -- locks -----------------------------------------------------------------------------------
    def state(self, mq: MessageQueue) -> QueueState:
        st = self.states.get(mq)
        if st is None:
            st = self.states[mq] = QueueState()
        return st

    def lock_valid(self, mq: MessageQueue) -> bool:
        if not self.needs_lock:
            return True
        st = self.states.get(mq)
        return st is not None and st.locked and time.monotonic() - st.last_lock <= self.local_expiry

    async def lock(self, mqs: list[MessageQueue]) -> set[MessageQueue]:
        """LOCK_BATCH_MQ per broker; updates each queue's local lock state."""
        rt = self.consumer.runtime
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in mqs:
            by_broker.setdefault(mq.broker_name, []).append(mq)
        ok: set[MessageQueue] = set()
        for broker_name, queues in by_broker.items():
            addr = rt.master_addr(broker_name)
            if addr is None:
                continue
            body = {"consumerGroup": self.consumer.group, "clientId": rt.client_id, "onlyThisBroker": False,
                    "mqSet": [{"topic": q.topic, "brokerName": q.broker_name, "queueId": q.queue_id} for q in queues]}
            try:
                resp = await rt.invoke(addr, rt.request(RC.LOCK_BATCH_MQ, None, json.dumps(body).encode()))
            except (ConnectionClosedError, RemotingTimeoutError, OSError) as exc:
                log.info("lock_batch_failed", broker=broker_name, error=str(exc))
                continue
            if resp.code != R.SUCCESS:
                log.warning("lock_batch_refused", broker=broker_name, code=resp.code, remark=resp.remark)
                continue
            got = {MessageQueue(q["topic"], q["brokerName"], int(q["queueId"]))
                   for q in json.loads(resp.body or b"{}").get("lockOKMQSet") or []}
            now = time.monotonic()
            for q in queues:
                st = self.state(q)
                if q in got:
                    st.locked, st.last_lock = True, now
                    ok.add(q)
                elif st.locked:
                    log.warning("queue_lock_lost", mq=str(q))
                    st.locked = False
        return ok

    async def unlock(self, mqs: list[MessageQueue]) -> None:
        rt = self.consumer.runtime
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in mqs:
            by_broker.setdefault(mq.broker_name, []).append(mq)
            st = self.states.get(mq)
            if st is not None:
                st.locked = False
        for broker_name, queues in by_broker.items():
            addr = rt.master_addr(broker_name)
            if addr is None:
                continue
            body = {"consumerGroup": self.consumer.group, "clientId": rt.client_id, "onlyThisBroker": False,
                    "mqSet": [{"topic": q.topic, "brokerName": q.broker_name, "queueId": q.queue_id} for q in queues]}
            try:
                await rt.invoke(addr, rt.request(RC.UNLOCK_BATCH_MQ, None, json.dumps(body).encode()))
            except (ConnectionClosedError, RemotingTimeoutError, OSError) as exc:
                log.info("unlock_batch_failed", broker=broker_name, error=str(exc))

    async def renew_loop(self) -> None:
        while self.needs_lock:
            await asyncio.sleep(self.renew_interval)
            try:
                await self.lock(list(self.consumer.assigned))
            except Exception as exc:
                log.warning("lock_renew_failed", group=self.consumer.group, error=str(exc))

    async def wait_locked(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        """Before a pull: True once the queue is locked. The first time, the caller must
        re-read the committed offset (``previously_locked`` tells)."""
        self.state(mq)  # creates the per-queue state on first use
        if self.lock_valid(mq):
            return True
        await self.lock([mq])
        return self.lock_valid(mq)

    async def release(self, mq: MessageQueue) -> None:
        """A queue taken away: let its in-flight batch finish, persist its offset, unlock."""
        st = self.states.get(mq)
        if st is not None:
            loop = asyncio.get_running_loop()
            acquired = await loop.run_in_executor(None, st.consume_lock.acquire, True, 30.0)
            try:
                if self.consumer.offset_store is not None:
                    try:
                        await self.consumer.offset_store.persist(mq)
                    except (ConnectionClosedError, RemotingTimeoutError, OSError, MQClientError) as exc:
                        log.warning("offset_persist_on_unlock_failed", mq=str(mq), error=str(exc))
                if self.needs_lock:
                    await self.unlock([mq])
            finally:
                if acquired:
                    st.consume_lock.release()
            self.states.pop(mq, None)

    async def release_all(self, mqs: list[MessageQueue]) -> None:
        for mq in mqs:
            await self.release(mq)

    # -- consuming -------------------------------------------------------------------------------
    def submit(self, mq: MessageQueue, pq: ProcessQueue, delay: float = 0.0) -> None:
        st = self.state(mq)
        with self._sched_lock:
            if st.scheduled and delay == 0.0:
                return
            st.scheduled = True
        if delay > 0:
            rt = self.consumer.runtime
            try:
                rt.loop.call_soon_threadsafe(rt.loop.call_later, delay, self._submit_now, mq, pq)
            except RuntimeError:
                pass
        else:
            self._submit_now(mq, pq)

    def _submit_now(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        ex = self.consumer.executor
        if ex is None or not self.consumer.running or pq.dropped:
            self.state(mq).scheduled = False
            return
        try:
            ex.submit(self._run, mq, pq)
        except RuntimeError:  # shutting down
            self.state(mq).scheduled = False

    def _take(self, pq: ProcessQueue, st: QueueState, n: int) -> list[MessageClientExt]:
        with pq.lock:
            offsets = sorted(o for o in pq.msgs if o not in st.consuming)[:n]
            batch = [pq.msgs[o] for o in offsets]
            st.consuming.update(offsets)
        return batch

    def _run(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        c = self.consumer
        st = self.state(mq)
        with st.consume_lock:
            start = time.monotonic()
            while c.running and not pq.dropped:
                if not self.lock_valid(mq):
                    # not (or no longer) locked: try again shortly, the renew loop or pull re-locks
                    with self._sched_lock:
                        st.scheduled = False
                    self.submit(mq, pq, delay=0.1)
                    return
                if time.monotonic() - start > 60:  # give other queues' tasks a turn
                    with self._sched_lock:
                        st.scheduled = False
                    self.submit(mq, pq)
                    return
                msgs = self._take(pq, st, c.batch_max)
                if not msgs:
                    with self._sched_lock:
                        st.scheduled = False
                        with pq.lock:
                            more = any(o not in st.consuming for o in pq.msgs)
                    if more:
                        self.submit(mq, pq)
                    return
                if not self._consume(mq, pq, st, msgs):
                    return

    def _consume(self, mq: MessageQueue, pq: ProcessQueue, st: QueueState, msgs: list[MessageClientExt]) -> bool:
        """Run the listener on one batch; False when the queue is suspended (rescheduled later)."""
        c = self.consumer
        for m in msgs:
            retry_topic = m.properties.get(PROPERTY_RETRY_TOPIC)
            if retry_topic and m.topic == RETRY_PREFIX + c.group:
                m.topic = retry_topic
        ctx = ConsumeOrderlyContext(mq)
        try:
            status = self.listener(msgs, ctx)
        except Exception as exc:
            log.warning("orderly_listener_failed", group=c.group, mq=str(mq), error=repr(exc))
            status = ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        if status is None:
            status = ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        if status == ConsumeOrderlyStatus.SUCCESS:
            self._ack(mq, pq, st, msgs)
            return True
        # suspend: messages past the limit go to the DLQ, the others are retried after a pause
        retry, dead = [], []
        for m in msgs:
            (dead if m.reconsume_times >= c.max_reconsume_times else retry).append(m)
        for m in dead:
            if c._send_back(m, _DlqContext()):
                log.warning("orderly_message_to_dlq", group=c.group, mq=str(mq), msg_id=m.msg_id,
                            reconsume_times=m.reconsume_times)
            else:
                retry.append(m)
        done = [m for m in msgs if m not in retry]
        if done:
            self._ack(mq, pq, st, done)
        if not retry:
            return True
        for m in retry:
            m.reconsume_times += 1
        with pq.lock:
            st.consuming.difference_update(m.queue_offset for m in retry)
        pause = ctx.suspend_current_queue_time_millis
        delay = (pause if pause >= 10 else c.reconsume_delay * 1000) / 1000
        with self._sched_lock:
            st.scheduled = False
        self.submit(mq, pq, delay=delay)
        return False

    def _ack(self, mq: MessageQueue, pq: ProcessQueue, st: QueueState, msgs: list[MessageClientExt]) -> None:
        offset = pq.remove(msgs)
        with pq.lock:
            st.consuming.difference_update(m.queue_offset for m in msgs)
        # even when the queue was just taken away: ``release`` waits for this batch under the
        # consume lock and persists the offset before unlocking, so the next owner starts after it
        if offset >= 0 and self.consumer.offset_store is not None:
            self.consumer.offset_store.update(mq, offset)


@dataclass
class _DlqContext:
    """CONSUMER_SEND_MSG_BACK with delayLevel -1: the broker puts the message in the DLQ."""

    delay_level_when_next_consume: int = -1
    message_queue: Any = None
