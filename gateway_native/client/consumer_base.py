"""What push and lite-pull consumers share: subscriptions, rebalancing, offsets, process queues.

Rebalance (RocketMQ's ``RebalanceImpl``): for each subscribed topic, all readable queues of its
route and — in clustering mode — the group's client ids from a broker, both sorted, go to the
allocation strategy; queues no longer assigned are dropped (their consumed offset persisted
first, so the next owner continues where this one stopped), new ones start at the committed
offset or, without one, where ``consume_from_where`` says. It runs at start, every
``rebalance_interval`` ms (20 s) and when the broker notifies that the group changed.

``ProcessQueue`` holds a queue's pulled but not yet acknowledged messages by offset; the offset
that may be committed is the smallest one still held (or one past the largest seen), so a
message is never committed before it was consumed.
"""

from __future__ import annotations

import asyncio
import random
import re
import threading
import time
from typing import Any, Callable

import structlog

from engine.sql92 import Sql92Error

from ..remoting.codes import RequestCode as RC, ResponseCode as R
from ..remoting.message_codec import MessageClientExt
from ..remoting.subscription import SubscriptionData
from ..transport import ConnectionClosedError, RemotingTimeoutError
from .message import MessageQueue, MessageSelector, MQBrokerError, MQClientError
from .offset_store import LocalFileOffsetStore, RemoteBrokerOffsetStore
from .pull_api import PullAPI
from .rebalance import AllocateAverage, AllocateStrategy
from .runtime import CLIENT_PROCESSORS, ClientRuntime

log = structlog.get_logger("rockafka.client.consumer")

CLUSTERING = "CLUSTERING"
BROADCASTING = "BROADCASTING"
CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"
RETRY_PREFIX = "%RETRY%"


class ProcessQueue:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.msgs: dict[int, MessageClientExt] = {}
        self.size = 0
        self.max_offset = -1
        self.dropped = False
        self.last_pull = time.monotonic()

    def put(self, msgs: list[MessageClientExt]) -> None:
        with self.lock:
            for m in msgs:
                if m.queue_offset not in self.msgs:
                    self.msgs[m.queue_offset] = m
                    self.size += len(m.body)
                self.max_offset = max(self.max_offset, m.queue_offset)

    def remove(self, msgs: list[MessageClientExt]) -> int:
        """Drop acknowledged messages; the offset that can be committed now (-1: nothing yet)."""
        with self.lock:
            for m in msgs:
                if self.msgs.pop(m.queue_offset, None) is not None:
                    self.size -= len(m.body)
            if self.msgs:
                return min(self.msgs)
            return self.max_offset + 1 if self.max_offset >= 0 else -1

    @property
    def count(self) -> int:
        return len(self.msgs)

    @property
    def span(self) -> int:
        with self.lock:
            return (max(self.msgs) - min(self.msgs)) if self.msgs else 0


class ConsumerBase:
    def __init__(self, group: str, namesrv_addr: str | list[str], *, message_model: str = CLUSTERING,
                 consume_from_where: str = CONSUME_FROM_LAST_OFFSET, consume_timestamp: int | None = None,
                 allocate_strategy: AllocateStrategy | Callable[..., list[MessageQueue]] | None = None,
                 rebalance_interval: int = 20_000, persist_consumer_offset_interval: int = 5_000,
                 poll_name_server_interval: int = 30_000, heartbeat_broker_interval: int = 30_000,
                 serialize_type: str = "JSON", instance_name: str | None = None, client_ip: str | None = None,
                 offset_store_dir: str | None = None, timeout_ms: int = 3000,
                 credentials: tuple[str, str] | None = None, tls: Any = None):
        if not group:
            raise MQClientError("consumer group must not be empty")
        if message_model not in (CLUSTERING, BROADCASTING):
            raise MQClientError(f"message_model must be CLUSTERING or BROADCASTING, got {message_model!r}")
        if consume_from_where not in (CONSUME_FROM_LAST_OFFSET, CONSUME_FROM_FIRST_OFFSET, CONSUME_FROM_TIMESTAMP):
            raise MQClientError(f"unknown consume_from_where {consume_from_where!r}")
        self.group = group
        self.message_model = message_model
        self.consume_from_where = consume_from_where
        self.consume_timestamp = consume_timestamp if consume_timestamp is not None else int((time.time() - 1800) * 1000)
        self.allocate = allocate_strategy or AllocateAverage()
        self.rebalance_interval = rebalance_interval / 1000
        self.persist_interval = persist_consumer_offset_interval / 1000
        self.runtime = ClientRuntime(namesrv_addr, instance_name=instance_name, client_ip=client_ip,
                                     serialize_type=serialize_type, timeout_ms=timeout_ms,
                                     poll_name_server_interval=poll_name_server_interval,
                                     heartbeat_broker_interval=heartbeat_broker_interval,
                                     credentials=credentials, tls=tls)
        self.subscriptions: dict[str, SubscriptionData] = {}
        self.pull_api = PullAPI(self.runtime, group)
        self.offset_store: RemoteBrokerOffsetStore | None = None
        self._offset_store_dir = offset_store_dir
        self.assigned: dict[MessageQueue, ProcessQueue] = {}
        self._rebalance_event: asyncio.Event | None = None
        self._rebalance_lock: asyncio.Lock | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._dropping: set[asyncio.Task[None]] = set()  # queues being handed over (release, persist)
        self.running = False

    # -- subscriptions ---------------------------------------------------------------------------
    def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> None:
        if isinstance(expression, MessageSelector):
            etype, expr = expression.expression_type, expression.expression
        else:
            etype, expr = "TAG", expression
        try:
            self.subscriptions[topic] = SubscriptionData.build(topic, expr, etype)
        except Sql92Error as exc:
            raise MQClientError(f"invalid SQL92 subscription for {topic}: {exc}") from None
        if self.running:
            self.runtime.call(self._after_subscription_change())

    def unsubscribe(self, topic: str) -> None:
        self.subscriptions.pop(topic, None)
        if self.running:
            self.runtime.call(self._after_subscription_change())

    async def _after_subscription_change(self) -> None:
        for topic in self.subscriptions:
            await self._route_or_warn(topic)
        await self.runtime.send_heartbeat_to_all()
        self.rebalance_soon()

    def subscribed_topics(self) -> list[str]:
        return list(self._all_subscriptions())

    def _all_subscriptions(self) -> dict[str, SubscriptionData]:
        subs = dict(self.subscriptions)
        if self.message_model == CLUSTERING and self.subscriptions and self.subscribe_retry_topic:
            retry = RETRY_PREFIX + self.group
            subs.setdefault(retry, SubscriptionData.build(retry, "*", "TAG"))
        return subs

    subscribe_retry_topic = True
    consume_type = "CONSUME_PASSIVELY"

    def consumer_data(self) -> dict[str, Any]:
        return {"groupName": self.group, "consumeType": self.consume_type, "messageModel": self.message_model,
                "consumeFromWhere": self.consume_from_where, "unitMode": False,
                "subscriptionDataSet": [s.to_json() for s in self._all_subscriptions().values()]}

    def running_info(self) -> dict[str, Any]:
        return {"properties": {"consumeType": self.consume_type, "messageModel": self.message_model,
                               "consumeFromWhere": self.consume_from_where, "clientId": self.runtime.client_id},
                "subscriptionSet": [s.to_json() for s in self._all_subscriptions().values()],
                "mqTable": {str(mq): {"cachedMsgCount": pq.count, "cachedMsgSizeInMiB": pq.size // (1024 * 1024),
                                      "commitOffset": self.offset_store.read_memory(mq) if self.offset_store else -1}
                            for mq, pq in self.assigned.items()}}

    # -- lifecycle -----------------------------------------------------------------------------
    async def _route_or_warn(self, topic: str) -> None:
        try:
            if await self.runtime.update_route(topic) is None:
                log.warning("consumer_topic_has_no_route", group=self.group, topic=topic)
        except MQClientError as exc:
            log.warning("consumer_route_failed", group=self.group, topic=topic, error=str(exc))

    async def _check_sql92(self) -> None:
        for sub in self.subscriptions.values():
            if sub.expression_type != "SQL92":
                continue
            body = {"clientId": self.runtime.client_id, "group": self.group, "subscriptionData": sub.to_json()}
            import json

            for addr in self.runtime.all_broker_addrs():
                resp = await self.runtime.invoke(addr, self.runtime.request(RC.CHECK_CLIENT_CONFIG, None, json.dumps(body).encode()))
                if resp.code != R.SUCCESS:
                    raise MQBrokerError(resp.code, resp.remark, addr)

    def _start_base(self) -> None:
        self.runtime.consumers[self.group] = self
        self.runtime.start()
        if self.message_model == BROADCASTING:
            self.offset_store = LocalFileOffsetStore(self.runtime, self.group, self._offset_store_dir)
        else:
            self.offset_store = RemoteBrokerOffsetStore(self.runtime, self.group)

        async def boot() -> None:
            self._rebalance_event = asyncio.Event()
            self._rebalance_lock = asyncio.Lock()
            for topic in self._all_subscriptions():
                await self._route_or_warn(topic)
            await self._check_sql92()
            await self.runtime.send_heartbeat_to_all()
            self.running = True
            self._tasks.append(asyncio.ensure_future(self._rebalance_loop()))
            self._tasks.append(asyncio.ensure_future(self._persist_loop()))
        try:
            self.runtime.call(boot(), timeout=30)
        except BaseException:
            self.runtime.consumers.pop(self.group, None)
            self.runtime.shutdown()
            raise

    def _shutdown_base(self, before_persist: Callable[[], None] | None = None) -> None:
        if not self.running:
            return
        self.running = False

        async def stop_tasks() -> None:
            for t in self._tasks:
                t.cancel()
            for pq in self.assigned.values():
                pq.dropped = True
            await asyncio.sleep(0)
            if self._dropping:  # a hand-over under way finishes: offset persisted, lock released
                await asyncio.wait(set(self._dropping), timeout=8)
        self.runtime.call(stop_tasks(), timeout=10)
        if before_persist is not None:
            before_persist()

        async def finish() -> None:
            if self.offset_store is not None:
                await self.offset_store.persist_all()
            await self.runtime.unregister_client(None, self.group)
        try:
            self.runtime.call(finish(), timeout=15)
        finally:
            self.runtime.consumers.pop(self.group, None)
            self.runtime.shutdown()

    def rebalance_soon(self) -> None:
        if self._rebalance_event is not None:
            self._rebalance_event.set()

    async def _rebalance_loop(self) -> None:
        while True:
            try:
                await self.do_rebalance()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("rebalance_failed", group=self.group, error=str(exc))
            assert self._rebalance_event is not None
            try:
                await asyncio.wait_for(self._rebalance_event.wait(), self.rebalance_interval)
            except asyncio.TimeoutError:
                pass
            self._rebalance_event.clear()

    async def _persist_loop(self) -> None:
        while True:
            await asyncio.sleep(self.persist_interval)
            if self.offset_store is not None:
                try:
                    await self.offset_store.persist_all(set(self.assigned))
                except Exception as exc:
                    log.warning("offset_persist_loop_failed", group=self.group, error=str(exc))

    # -- rebalance -----------------------------------------------------------------------------
    async def find_consumer_ids(self, topic: str) -> list[str] | None:
        route = self.runtime.routes.get(topic)
        if not route:
            return None
        names = [bd["brokerName"] for bd in route.get("brokerDatas") or []]
        random.shuffle(names)
        for name in names:
            addr = self.runtime.broker_addr_in_subscribe(name)
            if addr is None:
                continue
            try:
                resp = await self.runtime.invoke(addr, self.runtime.request(RC.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": self.group}))
            except (ConnectionClosedError, RemotingTimeoutError, OSError):
                continue
            if resp.code == R.SUCCESS:
                import json

                return list(json.loads(resp.body).get("consumerIdList") or [])
        return None

    async def do_rebalance(self) -> None:
        assert self._rebalance_lock is not None
        async with self._rebalance_lock:
            if not self.running:
                return
            for topic, sub in self._all_subscriptions().items():
                route = self.runtime.routes.get(topic) or await self.runtime.update_route(topic)
                if not route:
                    continue
                mq_all = ClientRuntime.subscribe_queues(topic, route)
                if self.message_model == BROADCASTING:
                    mine = mq_all
                else:
                    cids = await self.find_consumer_ids(topic)
                    if cids is None:
                        continue
                    try:
                        mine = self.allocate(self.group, self.runtime.client_id, mq_all, cids)
                    except Exception as exc:
                        log.warning("allocate_failed", group=self.group, error=str(exc))
                        continue
                await self._update_assignment(topic, sub, set(mine))

    async def _update_assignment(self, topic: str, sub: SubscriptionData, mine: set[MessageQueue]) -> None:
        assert self.offset_store is not None
        changed = False
        for mq in [q for q in self.assigned if q.topic == topic and q not in mine]:
            pq = self.assigned.pop(mq)
            pq.dropped = True
            # its own task, so that shutdown cancelling the rebalance loop waits for the hand-over
            # instead of cutting it short (the broker lock would be left to expire)
            task = asyncio.ensure_future(self._hand_over(mq, pq))
            self._dropping.add(task)
            task.add_done_callback(self._dropping.discard)
            await asyncio.shield(task)
            changed = True
        for mq in sorted(mine - set(self.assigned)):
            try:
                offset = await self.compute_pull_from_where(mq)
            except (MQClientError, ConnectionClosedError, RemotingTimeoutError, OSError) as exc:
                log.warning("compute_pull_offset_failed", mq=str(mq), error=str(exc))
                continue
            pq = ProcessQueue()
            self.assigned[mq] = pq
            self.queue_assigned(mq, pq, offset, sub)
            changed = True
        if changed:
            log.info("rebalance_result", group=self.group, topic=topic, client_id=self.runtime.client_id,
                     queues=sorted(q.queue_id for q in self.assigned if q.topic == topic))

    async def _hand_over(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        """A queue no longer ours: its consumption stopped (``queue_dropped``), its offset persisted,
        then forgotten, so the next owner starts where this one stopped."""
        assert self.offset_store is not None
        await self.queue_dropped(mq, pq)
        try:
            await self.offset_store.persist(mq)
        except (ConnectionClosedError, RemotingTimeoutError, OSError, MQClientError) as exc:
            log.warning("offset_persist_on_drop_failed", mq=str(mq), error=str(exc))
        self.offset_store.remove(mq)

    async def compute_pull_from_where(self, mq: MessageQueue) -> int:
        assert self.offset_store is not None
        last = await self.offset_store.read(mq)
        if last >= 0:
            return last
        if mq.topic.startswith(RETRY_PREFIX):
            return 0
        if self.consume_from_where == CONSUME_FROM_FIRST_OFFSET:
            return await self.queue_offset(RC.GET_MIN_OFFSET, mq)
        if self.consume_from_where == CONSUME_FROM_TIMESTAMP:
            return await self.queue_offset(RC.SEARCH_OFFSET_BY_TIMESTAMP, mq, self.consume_timestamp)
        return await self.queue_offset(RC.GET_MAX_OFFSET, mq)

    async def queue_offset(self, code: int, mq: MessageQueue, timestamp: int | None = None) -> int:
        addr = self.runtime.master_addr(mq.broker_name) or self.runtime.broker_addr_in_subscribe(mq.broker_name)
        if addr is None:
            raise MQClientError(f"The broker[{mq.broker_name}] not exist")
        fields: dict[str, Any] = {"topic": mq.topic, "queueId": mq.queue_id}
        if timestamp is not None:
            fields["timestamp"] = timestamp
        resp = await self.runtime.invoke(addr, self.runtime.request(code, fields))
        if resp.code != R.SUCCESS:
            raise MQBrokerError(resp.code, resp.remark, addr)
        return int(resp.get_int("offset", 0))

    # hooks
    def queue_assigned(self, mq: MessageQueue, pq: ProcessQueue, offset: int, sub: SubscriptionData) -> None:
        raise NotImplementedError

    async def queue_dropped(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        return None


# -- rewind: RESET_CONSUMER_CLIENT_OFFSET pushed by a broker ------------------------------------
_RESET_ENTRY = re.compile(r'\{\s*"brokerName"\s*:\s*"((?:[^"\\]|\\.)*)"\s*,\s*"queueId"\s*:\s*(\d+)\s*,'
                          r'\s*"topic"\s*:\s*"((?:[^"\\]|\\.)*)"\s*\}\s*:\s*(-?\d+)')


def parse_reset_offset_body(body: bytes) -> dict[MessageQueue, int]:
    """``ResetOffsetBody``: fastjson writes the MessageQueue keys as JSON objects (not strings)."""
    text = bytes(body or b"").decode("utf-8", "replace")
    return {MessageQueue(topic, broker, int(qid)): int(off) for broker, qid, topic, off in _RESET_ENTRY.findall(text)}


async def reset_consumer_offset(consumer: ConsumerBase, topic: str, offsets: dict[MessageQueue, int]) -> None:
    """Drop the topic's process queues, take the new offsets, and let rebalance pull from them."""
    store = consumer.offset_store
    dropped = []
    for mq in [q for q in consumer.assigned if q.topic == topic]:
        pq = consumer.assigned.pop(mq)
        pq.dropped = True
        dropped.append((mq, pq))
    for mq, off in offsets.items():
        if store is not None:
            store.update(mq, off, increase_only=False)
    for mq, pq in dropped:
        await consumer.queue_dropped(mq, pq)
        if store is not None and mq not in offsets:
            store.remove(mq)
    log.info("consumer_offset_reset_by_broker", group=consumer.group, topic=topic,
             offsets={str(k): v for k, v in offsets.items()})
    consumer.rebalance_soon()


@CLIENT_PROCESSORS.register(RC.RESET_CONSUMER_CLIENT_OFFSET)
async def _reset_offset(rt: ClientRuntime, conn: Any, cmd: Any) -> None:
    consumer = rt.consumers.get(cmd.get_str("group") or "")
    topic = cmd.get_str("topic") or ""
    if consumer is not None and topic:
        await reset_consumer_offset(consumer, topic, parse_reset_offset_body(cmd.body))
    return None
