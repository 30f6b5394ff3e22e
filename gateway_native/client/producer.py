"""Producer: sync, async and oneway sends, queue selectors (ordered by sharding key), batches,
retries to another broker and latency fault tolerance (``DefaultMQProducer``).

Sending: the topic's publish queues come from the cached route (fetched on first use, refreshed
every 30 s; when the topic has no route yet, from TBW102's route so the broker auto-creates it).
Each attempt picks the next queue round-robin, avoiding the broker of the previous failed
attempt and brokers the fault tolerance marks unavailable. A sync send makes up to
1 + ``retry_times_when_send_failed`` attempts within ``send_msg_timeout``; a broker error that
another broker may not have (TOPIC_NOT_EXIST, SERVICE_NOT_AVAILABLE, SYSTEM_ERROR,
NO_PERMISSION, SYSTEM_BUSY), a network failure or a group whose master left the route moves on
to the next queue of another group; other errors raise ``MQBrokerError``. With
``retry_another_broker_when_not_store_ok`` a stored-but-not-OK status (FLUSH_DISK_TIMEOUT,
FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE) is also retried on another group. Bodies over ``compress_msg_body_over_howmuch`` are zlib-compressed (sysflag
COMPRESSED), as the Java client does. Every message gets a client unique id (UNIQ_KEY), which is
``SendResult.msg_id``; ``offset_msg_id`` is the broker's store-host + commitlog-offset id.

Latency fault tolerance: an attempt that took longer than 550/1000/2000/3000/15000 ms, or failed,
marks its broker unavailable for 30/60/120/180/600 s (a failure counts as the 30 s level), and
``select_queue`` skips such brokers while others remain. The mark belongs to the master address
that failed: once the route names another master for the group (a failover), or the marked
address answers again, the group is used again at once.

Following a failover with a chosen queue (``send(msg, mq)``, a selector, ``send_orderly``), or
when every queue of the topic is on one group: the send cannot move to another group. When the master cannot be
reached (no connection could be opened: nothing was sent) or answers that it is not the master
(SERVICE_NOT_AVAILABLE: refused before storing), the send re-reads the route at once and tries
the group's master again, with a back-off (0.05 s doubling to 0.2 s), until ``send_msg_timeout``;
when too little of it is left for another answer (twice the time the last refusal took), the
broker's refusal is raised (``MQBrokerError``) rather than a re-try that could only time out. A
refusal because the broker's disk is full (the answer's ``diskFull`` field) is no role change
to wait out: it is retried as any other (``retry_times_when_send_failed``), then raised.
A request lost with its connection after it was written may have been stored, so it is not sent
again (the caller decides): a failover costs such a sender at most the one send in flight.

A send in flight to a master that stopped answering without closing its connection (SIGSTOP, a
hung host): once it has waited ``ROUTE_WATCH_AFTER_S`` the route is re-read every
``ROUTE_WATCH_EVERY_S``; when it names another master for the group (the controller elected one:
the stalled master's lease has ended, so it can no longer acknowledge) the send gives up at once
as a timeout ("may have been stored", not resent) instead of waiting out ``send_msg_timeout``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import time
import zlib
from typing import Any, Callable, Sequence

import structlog
from engine.message import PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX

from ..remoting.codes import DISK_FULL_FIELD, RequestCode as RC, ResponseCode as R
from ..remoting.message_codec import (
    SYSFLAG_COMPRESSED, UniqIdGenerator, encode_batch_item, properties_to_string, tags_hash,
)
from ..transport import ConnectionClosedError, RemotingTimeoutError
from .message import Message, MessageQueue, MQBrokerError, MQClientError, SendResult, SendStatus
from .runtime import ClientRuntime

log = structlog.get_logger("rockafka.client.producer")

DEFAULT_TOPIC = "TBW102"
_RETRY_CODES = {R.TOPIC_NOT_EXIST, R.SERVICE_NOT_AVAILABLE, R.SYSTEM_ERROR, R.NO_PERMISSION, R.SYSTEM_BUSY}
_STATUS = {R.SUCCESS: SendStatus.SEND_OK, R.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
           R.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT, R.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE}
_LATENCY_MAX = (50, 100, 550, 1000, 2000, 3000, 15000)
_NOT_AVAILABLE = (0, 0, 30000, 60000, 120000, 180000, 600000)
ROUTE_WATCH_AFTER_S = 0.5  # a send slower than this re-reads the route while it waits
ROUTE_WATCH_EVERY_S = 0.2

QueueSelector = Callable[[Sequence[MessageQueue], Message, Any], MessageQueue]


def java_hash_code(value: Any) -> int:
    if isinstance(value, str):
        return tags_hash(value)
    if isinstance(value, bool):
        return 1231 if value else 1237
    if isinstance(value, int):
        v = value & 0xFFFFFFFFFFFFFFFF
        h = (v ^ (v >> 32)) & 0xFFFFFFFF
        return h - (1 << 32) if h & 0x80000000 else h
    return hash(value)


def select_by_hash(queues: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
    """``SelectMessageQueueByHash``: the same sharding key always maps to the same queue."""
    return queues[abs(java_hash_code(arg)) % len(queues)]


class LatencyFaultTolerance:
    """Broker name -> (unavailable until, the master address that was slow or failed)."""

    def __init__(self) -> None:
        self._until: dict[str, tuple[float, str | None]] = {}

    def update(self, broker_name: str, latency_ms: float, isolation: bool, addr: str | None = None) -> None:
        latency = 30000 if isolation else latency_ms
        duration = 0
        for i in range(len(_LATENCY_MAX) - 1, -1, -1):
            if latency >= _LATENCY_MAX[i]:
                duration = _NOT_AVAILABLE[i]
                break
        if duration:  # only a failure ties the mark to the address (a slow master stays slow)
            self._until[broker_name] = (time.monotonic() + duration / 1000, addr if isolation else None)
        else:
            self._until.pop(broker_name, None)

    def is_available(self, broker_name: str, addr: str | None = None, recovered: Callable[[str], bool] | None = None) -> bool:
        """Available when not marked, the mark ran out, the route names another master than the
        marked one (``addr``), or ``recovered(marked address)`` says it answered since."""
        entry = self._until.get(broker_name)
        if entry is None:
            return True
        until, marked = entry
        if time.monotonic() >= until or (marked is not None and addr is not None and addr != marked) or \
                (marked is not None and recovered is not None and recovered(marked)):
            del self._until[broker_name]
            return True
        return False


class Producer:
    def __init__(self, group: str, namesrv_addr: str | list[str], *, send_msg_timeout: int = 3000,
                 retry_times_when_send_failed: int = 2, retry_times_when_send_async_failed: int = 2,
                 retry_another_broker_when_not_store_ok: bool = False, compress_msg_body_over_howmuch: int = 4096,
                 max_message_size: int = 4 * 1024 * 1024, default_topic_queue_nums: int = 4,
                 send_latency_fault_enable: bool = True, poll_name_server_interval: int = 30_000,
                 heartbeat_broker_interval: int = 30_000, serialize_type: str = "JSON",
                 instance_name: str | None = None, client_ip: str | None = None,
                 credentials: tuple[str, str] | None = None, tls: Any = None):
        if not group:
            raise MQClientError("producer group must not be empty")
        self.group = group
        self.send_msg_timeout = send_msg_timeout
        self.retry_times_when_send_failed = retry_times_when_send_failed
        self.retry_times_when_send_async_failed = retry_times_when_send_async_failed
        self.retry_another_broker_when_not_store_ok = retry_another_broker_when_not_store_ok
        self.compress_over = compress_msg_body_over_howmuch
        self.max_message_size = max_message_size
        self.default_topic_queue_nums = default_topic_queue_nums
        self.send_latency_fault_enable = send_latency_fault_enable
        self.runtime = ClientRuntime(namesrv_addr, instance_name=instance_name, client_ip=client_ip,
                                     serialize_type=serialize_type, timeout_ms=send_msg_timeout,
                                     poll_name_server_interval=poll_name_server_interval,
                                     heartbeat_broker_interval=heartbeat_broker_interval,
                                     credentials=credentials, tls=tls)
        self.fault = LatencyFaultTolerance()
        self._publish: dict[str, list[MessageQueue]] = {}
        self._publish_route: dict[str, Any] = {}  # the route object the cached queues came from
        self._counter = itertools.count()
        self._uniq = UniqIdGenerator()

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> "Producer":
        self.runtime.producers[self.group] = self
        self.runtime.start()
        return self

    def shutdown(self) -> None:
        if not self.runtime.started:
            return
        try:
            self.runtime.call(self.runtime.unregister_client(self.group, None), timeout=10)
        except MQClientError:
            pass
        self.runtime.producers.pop(self.group, None)
        self.runtime.shutdown()

    def __enter__(self) -> "Producer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def published_topics(self) -> list[str]:
        return list(self._publish)

    # -- public API ----------------------------------------------------------------------------
    def send(self, msg: Message, queue: MessageQueue | None = None, *, selector: QueueSelector | None = None,
             arg: Any = None, timeout: int | None = None) -> SendResult:
        """Send and wait for the broker's answer; raises ``MQClientError`` / ``MQBrokerError``."""
        t = (timeout or self.send_msg_timeout) / 1000
        return self.runtime.call(self._send(msg, queue, selector, arg, t, self.retry_times_when_send_failed), timeout=t + 5)

    def send_orderly(self, msg: Message, sharding_key: Any, timeout: int | None = None) -> SendResult:
        """Messages with the same sharding key go to the same queue, in send order."""
        return self.send(msg, selector=select_by_hash, arg=sharding_key, timeout=timeout)

    def send_async(self, msg: Message, callback: Callable[[SendResult | None, BaseException | None], None] | None = None,
                   queue: MessageQueue | None = None, *, selector: QueueSelector | None = None, arg: Any = None,
                   timeout: int | None = None) -> "concurrent.futures.Future[SendResult]":
        t = (timeout or self.send_msg_timeout) / 1000
        fut = self.runtime.submit(self._send(msg, queue, selector, arg, t, self.retry_times_when_send_async_failed))
        if callback is not None:
            def done(f: "concurrent.futures.Future[SendResult]") -> None:
                exc = f.exception()
                callback(None if exc else f.result(), exc)
            fut.add_done_callback(done)
        return fut

    def send_oneway(self, msg: Message, queue: MessageQueue | None = None) -> None:
        self.runtime.call(self._send_oneway(msg, queue), timeout=self.send_msg_timeout / 1000 + 5)

    def send_batch(self, msgs: Sequence[Message], queue: MessageQueue | None = None, timeout: int | None = None) -> SendResult:
        """All messages must share one topic; they are stored contiguously in one queue."""
        if not msgs:
            raise MQClientError("the batch is empty")
        topics = {m.topic for m in msgs}
        if len(topics) != 1:
            raise MQClientError(f"all messages of a batch must have the same topic, got {sorted(topics)}")
        if any(m.delay_level > 0 for m in msgs):
            raise MQClientError("delayed messages cannot be sent in a batch")
        t = (timeout or self.send_msg_timeout) / 1000
        return self.runtime.call(self._send(list(msgs), queue, None, None, t, self.retry_times_when_send_failed), timeout=t + 5)

    def fetch_publish_queues(self, topic: str) -> list[MessageQueue]:
        return self.runtime.call(self._publish_queues(topic, refresh=True))

    # -- internals -----------------------------------------------------------------------------
    async def _publish_queues(self, topic: str, refresh: bool = False) -> list[MessageQueue]:
        queues = self._publish.get(topic)
        if queues and not refresh:
            route = self.runtime.routes.get(topic)
            if route is not None and self._publish_route.get(topic) is not route:
                # the periodic refresh replaced the route: recompute once, not per message
                fresh = ClientRuntime.publish_queues(topic, route)
                self._publish_route[topic] = route
                if fresh:
                    self._publish[topic] = queues = fresh
            return queues
        route = await self.runtime.update_route(topic)
        if route is not None:
            queues = ClientRuntime.publish_queues(topic, route)
        if not queues:
            default = await self.runtime.fetch_route(DEFAULT_TOPIC)
            if default is not None:
                for bd in default.get("brokerDatas") or []:
                    self.runtime.broker_addrs[bd["brokerName"]] = {int(k): v for k, v in bd["brokerAddrs"].items()}
                for qd in default.get("queueDatas") or []:
                    qd["writeQueueNums"] = qd["readQueueNums"] = min(self.default_topic_queue_nums, int(qd["readQueueNums"]))
                queues = ClientRuntime.publish_queues(topic, default)
        if not queues:
            raise MQClientError(f"No route info of this topic: {topic}; check the NameServer address "
                                f"({';'.join(self.runtime.namesrv_addrs)}) and that the topic exists or auto-creation is on")
        self._publish[topic] = queues
        if self.runtime.producers and len(self._publish) == 1:
            await self.runtime.send_heartbeat_to_all()
        return queues

    def _available(self, broker_name: str) -> bool:
        return self.fault.is_available(broker_name, self.runtime.master_addr(broker_name), self.runtime.answers_again)

    def _select(self, queues: list[MessageQueue], last_broker: str | None) -> MessageQueue:
        n = len(queues)
        if self.send_latency_fault_enable:
            for _ in range(n):
                mq = queues[next(self._counter) % n]
                if self._available(mq.broker_name) and (last_broker is None or mq.broker_name != last_broker or
                                                        len({q.broker_name for q in queues}) == 1):
                    return mq
        for _ in range(n):
            mq = queues[next(self._counter) % n]
            if last_broker is None or mq.broker_name != last_broker:
                return mq
        return queues[next(self._counter) % n]

    def _encode(self, msg: Message | list[Message]) -> tuple[str, dict[str, Any], bytes, str]:
        if isinstance(msg, list):
            ids, parts = [], []
            for m in msg:
                props = m.all_properties()
                props.setdefault(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, self._uniq.next())
                ids.append(props[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX])
                parts.append(encode_batch_item(bytes(m.body), props, m.flag))
            body = b"".join(parts)
            topic, sys_flag, flag, props_s = msg[0].topic, 0, 0, ""
            uniq = ",".join(ids)
        else:
            props = msg.all_properties()
            props.setdefault(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, self._uniq.next())
            uniq = props[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX]
            body, sys_flag = bytes(msg.body), 0
            if len(body) > self.compress_over:
                body, sys_flag = zlib.compress(body, 5), SYSFLAG_COMPRESSED
            topic, flag, props_s = msg.topic, msg.flag, properties_to_string(props)
        if len(body) > self.max_message_size:
            raise MQClientError(f"the message body size {len(body)} is over the max message size {self.max_message_size}")
        if not topic:
            raise MQClientError("the message topic is empty")
        fields = {"a": self.group, "b": topic, "c": DEFAULT_TOPIC, "d": self.default_topic_queue_nums, "f": sys_flag,
                  "g": int(time.time() * 1000), "h": flag, "i": props_s, "j": 0, "k": False,
                  "m": isinstance(msg, list)}
        return topic, fields, body, uniq

    async def _send(self, msg: Message | list[Message], queue: MessageQueue | None, selector: QueueSelector | None,
                    arg: Any, timeout: float, retries: int) -> SendResult:
        topic, fields, body, uniq = self._encode(msg)
        is_batch = isinstance(msg, list)
        deadline = time.monotonic() + timeout
        pinned = queue is not None or selector is not None
        attempts = 1 if pinned else 1 + max(retries, 0)
        last_broker: str | None = None
        last_exc: Exception | None = None
        pinned_mq: MessageQueue | None = None
        only_group = False  # every queue of the topic is on one group: nowhere else to go
        backoff = 0.05
        answered_in = 0.0  # how long the last refusal took to come back
        attempt = 0
        while attempt < attempts:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            if pinned_mq is not None:  # a chosen queue whose master could not take the send yet
                await asyncio.sleep(min(backoff, remaining))
                backoff = min(backoff * 2, 0.2)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                try:
                    await self.runtime.update_route(topic)
                except (MQClientError, MQBrokerError) as exc:
                    last_exc = exc
                    continue
                if isinstance(last_exc, MQBrokerError) and deadline - time.monotonic() < 2 * answered_in:
                    break  # no time left for a heartbeat and a send: the broker's refusal stands
                mq = pinned_mq
            else:
                queues = await self._publish_queues(topic, refresh=attempt > 0 and last_exc is not None)
                if queue is not None:
                    mq = queue
                elif selector is not None:
                    mq = selector(queues, msg if not is_batch else msg[0], arg)
                else:
                    mq = self._select(queues, last_broker)
                only_group = len({q.broker_name for q in queues}) == 1
            addr = self.runtime.master_addr(mq.broker_name)
            if addr is None:
                await self.runtime.update_route(topic)
                addr = self.runtime.master_addr(mq.broker_name)
                if addr is None:
                    # the group lost its master (the route still names its queues): as the Java
                    # client, count it as a failed attempt and move on to another group; a chosen
                    # queue waits for the route to name the group's next master
                    last_exc = MQClientError(f"The broker[{mq.broker_name}] not exist")
                    self.fault.update(mq.broker_name, 0, True)
                    last_broker = mq.broker_name
                    if pinned or only_group:
                        pinned_mq = mq
                    else:
                        attempt += 1
                    continue
            f = dict(fields, e=mq.queue_id, b=mq.topic)
            code = RC.SEND_BATCH_MESSAGE if is_batch else RC.SEND_MESSAGE_V2
            started = time.monotonic()
            try:
                conn = await self.runtime.connection(addr)
                if self.runtime.failing(addr):  # failed since it last answered: answered first
                    await self.runtime.confirm_alive(addr, min(remaining, self.runtime.timeout))
            except (ConnectionClosedError, RemotingTimeoutError, OSError) as exc:  # nothing was sent
                cut_short = isinstance(exc, RemotingTimeoutError) and time.monotonic() >= deadline - 0.01
                if cut_short and isinstance(last_exc, MQBrokerError):
                    break  # the heartbeat ran out of the send's own time: the broker's answer stands
                self.runtime.broker_failed(addr)
                self.fault.update(mq.broker_name, (time.monotonic() - started) * 1000, True, addr)
                last_exc, last_broker = exc, mq.broker_name
                log.info("send_attempt_failed", broker=mq.broker_name, topic=topic, attempt=attempt, error=str(exc))
                if pinned or only_group:
                    pinned_mq = mq
                else:
                    attempt += 1
                continue
            request = self.runtime.request(code, f, body)
            watch = asyncio.get_running_loop().call_later(
                ROUTE_WATCH_AFTER_S, self._watch_route, addr, mq.broker_name, topic, request.opaque)
            try:
                resp = await self.runtime.invoke(addr, request, remaining)
            except (ConnectionClosedError, RemotingTimeoutError, OSError) as exc:  # it may have been stored
                self.fault.update(mq.broker_name, (time.monotonic() - started) * 1000, True, addr)
                last_exc, last_broker = exc, mq.broker_name
                log.info("send_attempt_failed", broker=mq.broker_name, topic=topic, attempt=attempt, error=str(exc))
                attempt += 1
                continue
            finally:
                watch.cancel()
            del conn
            self.fault.update(mq.broker_name, (time.monotonic() - started) * 1000, False)
            status = _STATUS.get(resp.code)
            if status is None:
                err = MQBrokerError(resp.code, resp.remark, addr)
                if (pinned or only_group) and resp.code == R.SERVICE_NOT_AVAILABLE and resp.get_str(DISK_FULL_FIELD) != "true":
                    # refused before storing (a slave, or a master whose lease ran out): the
                    # route is about to name the group's next master
                    self.runtime.broker_failed(addr)
                    answered_in = time.monotonic() - started
                    last_exc, pinned_mq = err, mq
                    continue
                if resp.code in _RETRY_CODES and attempt + 1 < attempts:
                    self.fault.update(mq.broker_name, 0, True, addr)
                    last_exc, last_broker = err, mq.broker_name
                    attempt += 1
                    continue
                raise err
            result = SendResult(status, uniq, resp.get_str("msgId") or "", MessageQueue(topic, mq.broker_name, int(resp.get_int("queueId", mq.queue_id))),
                                resp.get_int("queueOffset", -1) or 0, resp.get_str("MSG_REGION"), resp.get_str("transactionId"))
            if status != SendStatus.SEND_OK and self.retry_another_broker_when_not_store_ok and attempt + 1 < attempts:
                last_broker = mq.broker_name
                attempt += 1
                continue
            return result
        if isinstance(last_exc, (MQClientError, MQBrokerError)) and (pinned or isinstance(last_exc, MQClientError)):
            raise last_exc
        raise MQClientError(f"Send [{attempts}] times, still failed, cost [{int((timeout - max(deadline - time.monotonic(), 0)) * 1000)}]ms, "
                            f"Topic: {topic}: {last_exc or 'timed out'}")

    def _watch_route(self, addr: str, broker_name: str, topic: str, opaque: int) -> None:
        asyncio.ensure_future(self._route_watch(addr, broker_name, topic, opaque))

    async def _route_watch(self, addr: str, broker_name: str, topic: str, opaque: int) -> None:
        """The send ``opaque`` to ``addr`` is slow: re-read the route until it is answered; if the
        route names another master for ``broker_name``, fail it (it may have been stored)."""
        conn = self.runtime.cached_connection(addr)
        while conn is not None and not conn.closed and conn.waiting(opaque):
            try:
                await self.runtime.update_route(topic)
            except (MQClientError, MQBrokerError) as exc:
                log.info("send_route_watch_failed", topic=topic, error=str(exc))
            now = self.runtime.master_addr(broker_name)
            if now is not None and now != addr:
                if conn.abandon(opaque, RemotingTimeoutError(
                        f"no answer from {addr} while the route moved {broker_name}'s master to {now}; "
                        f"the message may have been stored")):
                    log.info("send_abandoned_master_moved", broker=broker_name, old=addr, new=now, topic=topic)
                return
            await asyncio.sleep(ROUTE_WATCH_EVERY_S)

    async def _send_oneway(self, msg: Message, queue: MessageQueue | None) -> None:
        topic, fields, body, _ = self._encode(msg)
        queues = await self._publish_queues(topic)
        mq = queue or self._select(queues, None)
        addr = self.runtime.master_addr(mq.broker_name)
        if addr is None:
            raise MQClientError(f"The broker[{mq.broker_name}] not exist")
        await self.runtime.invoke_oneway(addr, self.runtime.request(RC.SEND_MESSAGE_V2, dict(fields, e=mq.queue_id), body))
